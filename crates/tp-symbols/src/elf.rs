//! What probe placement reads from a binary: its function symbols (demangled) and where an
//! address lies in the file (uprobes are placed by file offset).

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};

use crate::demangle::demangle;
use crate::{Error, Result};

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
        let data =
            std::fs::read(path).map_err(|source| Error::Io { path: path.to_path_buf(), source })?;
        if !data.starts_with(b"\x7fELF") {
            let reason = "not an ELF file".to_string();
            return Err(Error::Elf { path: path.to_path_buf(), reason });
        }
        // uprobes need the absolute path.
        let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        Ok(Binary { path, data })
    }

    pub fn parse(&self) -> Result<object::File<'_>> {
        object::File::parse(&*self.data).map_err(|e| self.elf_error(e))
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
        let d = sec.data().map_err(|e| self.elf_error(e))?;
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
        Err(Error::Unmapped { path: self.path.clone(), addr })
    }

    /// A part of the file `object` could not read.
    pub(crate) fn elf_error(&self, e: object::Error) -> Error {
        Error::Elf { path: self.path.clone(), reason: format!("an ELF file tp cannot read: {e}") }
    }
}

/// An ELF file's build id, reading only its headers and notes.
pub fn build_id(path: &Path) -> Option<Vec<u8>> {
    let file = std::fs::File::open(path).ok()?;
    let cache = object::read::ReadCache::new(file);
    let elf = object::File::parse(&cache).ok()?;
    let id = elf.build_id().ok()??;
    Some(id.to_vec())
}

/// The GNU build id among ELF notes as the kernel exports them (4-byte aligned, as in
/// `/sys/kernel/notes`).
pub fn gnu_build_id_note(notes: &[u8]) -> Option<Vec<u8>> {
    type Elf = object::elf::FileHeader64<object::Endianness>;
    let endian = object::Endianness::default();
    let mut it = object::read::elf::NoteIterator::<Elf>::new(endian, 4, notes).ok()?;
    while let Ok(Some(n)) = it.next() {
        if n.name() == b"GNU" && n.n_type(endian) == object::elf::NT_GNU_BUILD_ID {
            return Some(n.desc().to_vec());
        }
    }
    None
}

/// Whether the ELF file at `path` has a section named `name`, reading only its headers
/// (however large the file). Anything unreadable or not ELF: false.
pub fn has_section(path: &Path, name: &str) -> bool {
    let Ok(file) = std::fs::File::open(path) else { return false };
    let cache = object::read::ReadCache::new(file);
    object::File::parse(&cache).is_ok_and(|elf| elf.section_by_name(name).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_are_found_by_name_from_the_headers() {
        let exe = std::env::current_exe().unwrap();
        assert!(has_section(&exe, ".text"));
        assert!(!has_section(&exe, ".text.no-such-section"));
        assert!(!has_section(&exe, ".tex"));
        assert!(!has_section(Path::new("/proc/self/status"), ".text"));
        assert!(!has_section(Path::new("/nonexistent"), ".text"));
    }
}
