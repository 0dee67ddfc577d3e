//! What `tp probe` reads from a binary: its function symbols (demangled) and where an address
//! lies in the file (uprobes are placed by file offset).

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use anyhow::{bail, Context, Result};
use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};

/// A binary's bytes, kept for parsing.
pub struct Binary {
    pub path: std::path::PathBuf,
    data: Vec<u8>,
}

/// A defined function symbol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    /// The symbol as the linker knows it.
    pub mangled: String,
    /// Demangled (Rust without its hash, C++), or the symbol itself.
    pub name: String,
    pub address: u64,
}

impl Binary {
    pub fn read(path: &Path) -> Result<Binary> {
        let data = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        if !data.starts_with(b"\x7fELF") {
            bail!("{} is not an ELF file", path.display());
        }
        // uprobes need the absolute path.
        let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        Ok(Binary { path, data })
    }

    pub fn parse(&self) -> Result<object::File<'_>> {
        object::File::parse(&*self.data)
            .with_context(|| format!("{}: an ELF file tp cannot read", self.path.display()))
    }

    /// Every defined function (symbol table and dynamic symbols), sorted by name, one entry
    /// per (name, address).
    pub fn functions(&self) -> Result<Vec<Function>> {
        let file = self.parse()?;
        let mut v: Vec<Function> = file
            .symbols()
            .chain(file.dynamic_symbols())
            .filter(|s| s.kind() == SymbolKind::Text && s.is_definition() && s.address() != 0)
            .filter_map(|s| {
                let mangled = s.name().ok()?.to_string();
                Some(Function { name: demangle(&mangled), mangled, address: s.address() })
            })
            .collect();
        v.sort_by(|a, b| (&a.name, a.address).cmp(&(&b.name, b.address)));
        v.dedup_by(|a, b| a.name == b.name && a.address == b.address);
        Ok(v)
    }

    /// The program interpreter (`.interp`: the dynamic loader), none for a static binary or
    /// a library.
    pub fn interpreter(&self) -> Result<Option<std::path::PathBuf>> {
        use object::ObjectSection;
        let file = self.parse()?;
        let Some(sec) = file.section_by_name(".interp") else { return Ok(None) };
        let d = sec.data()?;
        let d = d.split(|&b| b == 0).next().unwrap_or_default();
        Ok((!d.is_empty())
            .then(|| std::path::PathBuf::from(std::ffi::OsStr::from_bytes(d).to_os_string())))
    }

    /// The file offset of the virtual address `addr` (through the loadable segments).
    pub fn file_offset(&self, addr: u64) -> Result<u64> {
        let file = self.parse()?;
        for seg in file.segments() {
            let (off, size) = seg.file_range();
            if addr >= seg.address() && addr < seg.address() + size {
                return Ok(addr - seg.address() + off);
            }
        }
        bail!("{}: address {addr:#x} is in no loadable segment", self.path.display())
    }
}

/// A Rust (legacy or v0, without the hash) or C++ name demangled; others as they are.
pub fn demangle(sym: &str) -> String {
    if let Ok(d) = rustc_demangle::try_demangle(sym) {
        return format!("{d:#}");
    }
    if sym.starts_with("_Z") {
        if let Ok(s) = cpp_demangle::Symbol::new(sym) {
            if let Ok(d) = s.demangle(&cpp_demangle::DemangleOptions::default()) {
                return d;
            }
        }
    }
    sym.to_string()
}

#[cfg(test)]
mod tests {
    use super::demangle;

    #[test]
    fn demangles_rust_and_cpp() {
        assert_eq!(demangle("_ZN4core3fmt5write17h0123456789abcdefE"), "core::fmt::write");
        assert_eq!(demangle("_ZN3foo3barEv"), "foo::bar()");
        assert_eq!(demangle("_RNvCs1234_7mycrate3foo"), "mycrate::foo");
        assert_eq!(demangle("main"), "main");
    }
}
