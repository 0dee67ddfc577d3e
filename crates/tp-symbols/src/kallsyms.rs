//! A kallsyms file (`/proc/kallsyms` or perf's saved copy): kernel addresses to functions,
//! with perf's choice among aliases.

use std::rc::Rc;

/// Symbols sorted by address; each reaches to the next one.
pub struct Kallsyms {
    syms: Vec<(u64, Rc<str>, Option<Rc<str>>)>,
}

impl Kallsyms {
    /// `ADDRESS TYPE NAME [MODULE]` lines. Of the symbols at one address the last one
    /// listed is kept: perf gives the others no length (each symbol ends where the next
    /// one starts) and then prefers the symbol with a length (`__x64_sys_getppid`, not
    /// `__do_sys_getppid` listed before it). Text, data and bss symbols, as perf loads.
    pub fn parse(text: &str) -> Kallsyms {
        let mut syms: Vec<(u64, Rc<str>, Option<Rc<str>>)> = Vec::new();
        let mut modules: Vec<Rc<str>> = Vec::new();
        for line in text.lines() {
            let mut it = line.split_ascii_whitespace();
            let (Some(addr), Some(kind), Some(name)) = (it.next(), it.next(), it.next()) else {
                continue;
            };
            if !matches!(kind, "T" | "t" | "W" | "w" | "D" | "d" | "B" | "b") {
                continue;
            }
            let Ok(addr) = u64::from_str_radix(addr, 16) else { continue };
            if addr == 0 {
                continue; // kptr_restrict hides the addresses
            }
            let module = it.next().map(|m| match modules.iter().find(|x| ***x == *m) {
                Some(x) => x.clone(),
                None => {
                    let m: Rc<str> = m.into();
                    modules.push(m.clone());
                    m
                }
            });
            syms.push((addr, name.into(), module));
        }
        // Stable: at one address, file order is kept, so the last one listed is last.
        syms.sort_by_key(|s| s.0);
        let mut kept: Vec<(u64, Rc<str>, Option<Rc<str>>)> = Vec::with_capacity(syms.len());
        for s in syms {
            match kept.last_mut() {
                Some(last) if last.0 == s.0 => *last = s,
                _ => kept.push(s),
            }
        }
        Kallsyms { syms: kept }
    }

    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }

    /// The function at `addr`: (name, offset, module as `[name]`).
    pub fn find(&self, addr: u64) -> Option<(Rc<str>, u64, Option<Rc<str>>)> {
        let i = self.syms.partition_point(|s| s.0 <= addr).checked_sub(1)?;
        let (start, name, module) = &self.syms[i];
        Some((name.clone(), addr - start, module.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::Kallsyms;

    #[test]
    fn the_last_alias_wins_and_symbols_reach_to_the_next() {
        let k = Kallsyms::parse(
            "ffffffff81000000 T _text\n\
             ffffffff81377d40 t __do_sys_getppid\n\
             ffffffff81377d40 T __ia32_sys_getppid\n\
             ffffffff81377d40 T __x64_sys_getppid\n\
             ffffffff81377d80 a absolute\n\
             ffffffff81377e00 t helper\t[kvm]\n",
        );
        let (n, off, m) = k.find(0xffffffff81377d66).unwrap();
        assert_eq!((&*n, off, m), ("__x64_sys_getppid", 0x26, None));
        let (n, off, m) = k.find(0xffffffff81377e10).unwrap();
        assert_eq!((&*n, off, m.as_deref()), ("helper", 0x10, Some("[kvm]")));
        assert!(k.find(0x1000).is_none());
    }
}
