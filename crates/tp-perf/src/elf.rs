//! `mem:SYMBOL`: a data or function symbol's address in a program's ELF symbol table.

use std::path::Path;

use object::{Object, ObjectKind, ObjectSymbol};

/// The address and size of `name` in the ELF file at `path`. Only fixed-address
/// executables (ET_EXEC, `cc -no-pie`): a PIE's addresses are known only once it runs.
pub fn symbol(path: &Path, name: &str) -> Result<(u64, u64), String> {
    let data = std::fs::read(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let file = object::File::parse(&*data)
        .map_err(|e| format!("{}: not an ELF file this tool reads: {e}", path.display()))?;
    let sym = file
        .symbols()
        .chain(file.dynamic_symbols())
        .find(|s| s.is_definition() && s.name() == Ok(name))
        .ok_or_else(|| format!("{} defines no symbol {name:?} (stripped?)", path.display()))?;
    if file.kind() != ObjectKind::Executable {
        return Err(format!(
            "{} is position-independent: {name}'s address is known only after it starts; build it with -no-pie or give mem:ADDR",
            path.display()
        ));
    }
    Ok((sym.address(), sym.size()))
}
