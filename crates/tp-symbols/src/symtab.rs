//! An ELF file's functions, as perf names addresses from them: its `.symtab` (else
//! `.dynsym`), function symbols only, one name per address chosen as perf chooses among
//! aliases, a symbol of size 0 reaching to the next one.

use std::path::Path;
use std::rc::Rc;

use object::{Object, ObjectSection, ObjectSymbol, SectionFlags, SectionIndex, SymbolFlags};

use crate::demangle::demangle;

const STT_NOTYPE: u8 = 0;
const STT_FUNC: u8 = 2;
const STT_GNU_IFUNC: u8 = 10;
const STB_GLOBAL: u8 = 1;
const STB_WEAK: u8 = 2;

#[derive(Debug, Clone)]
struct Sym {
    start: u64,
    size: u64,
    binding: u8,
    name: String,
}

/// Functions sorted by start: (start, end, demangled name).
pub struct SymTab {
    funcs: Vec<(u64, u64, Rc<str>)>,
}

impl SymTab {
    pub fn read(path: &Path) -> Option<SymTab> {
        let file = std::fs::File::open(path).ok()?;
        let data = object::ReadCache::new(file);
        let obj = object::File::parse(&data).ok()?;
        let exec = |i: SectionIndex| {
            obj.section_by_index(i).is_ok_and(|s| match s.flags() {
                SectionFlags::Elf { sh_flags } => sh_flags & 4 != 0, // SHF_EXECINSTR
                _ => false,
            })
        };
        let mut syms = functions(obj.symbols(), &exec);
        if syms.is_empty() {
            syms = functions(obj.dynamic_symbols(), &exec);
        }
        Some(SymTab::from_symbols(syms))
    }

    fn from_symbols(mut syms: Vec<Sym>) -> SymTab {
        // Stable: aliases stay in table order, the order perf compares them in.
        syms.sort_by_key(|s| s.start);
        let mut kept: Vec<Sym> = Vec::with_capacity(syms.len());
        for s in syms {
            match kept.last_mut() {
                Some(last) if last.start == s.start => {
                    if !first_is_better(last, &s) {
                        *last = s;
                    }
                }
                _ => kept.push(s),
            }
        }
        let mut funcs = Vec::with_capacity(kept.len());
        for (i, s) in kept.iter().enumerate() {
            let end = match (s.size, kept.get(i + 1)) {
                (0, Some(next)) => next.start,
                (0, None) => u64::MAX,
                (n, _) => s.start.saturating_add(n),
            };
            funcs.push((s.start, end, demangle(&s.name).into()));
        }
        SymTab { funcs }
    }

    /// The function at virtual address `addr`: (name, offset).
    pub fn find(&self, addr: u64) -> Option<(Rc<str>, u64)> {
        let i = self.funcs.partition_point(|f| f.0 <= addr).checked_sub(1)?;
        let (start, end, name) = &self.funcs[i];
        (addr < *end).then(|| (name.clone(), addr - start))
    }
}

/// Functions and labels (`_dl_start_user`) in executable sections, as perf loads them.
fn functions<'d>(
    symbols: impl Iterator<Item = impl ObjectSymbol<'d>>,
    exec: &dyn Fn(SectionIndex) -> bool,
) -> Vec<Sym> {
    symbols
        .filter_map(|s| {
            let SymbolFlags::Elf { st_info, .. } = s.flags() else { return None };
            let kind = st_info & 0xf;
            if !matches!(kind, STT_FUNC | STT_GNU_IFUNC | STT_NOTYPE) {
                return None;
            }
            if !s.section_index().is_some_and(exec) {
                return None;
            }
            let name = s.name().ok()?;
            if name.is_empty() {
                return None;
            }
            // Versioned dynamic names (`getppid@@GLIBC_2.2.5`) print without the version.
            let name = name.split('@').next().unwrap_or(name);
            Some(Sym {
                start: s.address(),
                size: s.size(),
                binding: st_info >> 4,
                name: name.into(),
            })
        })
        .collect()
}

/// perf's choice between two symbols at one address: one with a size, then not weak, then
/// global, then fewer leading underscores, then the longer name; else the first.
fn first_is_better(a: &Sym, b: &Sym) -> bool {
    let key = |s: &Sym| {
        let underscores = s.name.bytes().take_while(|&c| c == b'_').count();
        (
            s.size != 0,
            s.binding != STB_WEAK,
            s.binding == STB_GLOBAL,
            std::cmp::Reverse(underscores),
            s.name.len(),
        )
    };
    key(a) >= key(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    const STB_LOCAL: u8 = 0;

    fn sym(start: u64, size: u64, binding: u8, name: &str) -> Sym {
        Sym { start, size, binding, name: name.into() }
    }

    #[test]
    fn aliases_are_chosen_as_perf_does() {
        let t = SymTab::from_symbols(vec![
            sym(0x100, 8, STB_LOCAL, "__GI_getppid"),
            sym(0x100, 8, STB_LOCAL, "__getppid"),
            sym(0x100, 8, STB_LOCAL, "__GI___getppid"),
            sym(0x100, 8, STB_WEAK, "getppid"),
            sym(0x200, 72, STB_LOCAL, "__mmap"),
            sym(0x200, 72, STB_LOCAL, "mmap"),
            sym(0x200, 72, STB_LOCAL, "mmap64"),
            sym(0x300, 0, STB_GLOBAL, "sizeless"),
            sym(0x340, 4, STB_GLOBAL, "_ZN4core3fmt5write17h0123456789abcdefE"),
        ]);
        assert_eq!(
            t.find(0x107).map(|f| (f.0.to_string(), f.1)),
            Some(("__GI___getppid".into(), 7))
        );
        assert!(t.find(0x108).is_none());
        assert_eq!(&*t.find(0x213).unwrap().0, "mmap64");
        assert_eq!(t.find(0x33f).map(|f| f.1), Some(0x3f));
        assert_eq!(&*t.find(0x341).unwrap().0, "core::fmt::write");
        assert!(t.find(0xff).is_none());
    }
}
