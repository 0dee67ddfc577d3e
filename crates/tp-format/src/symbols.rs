//! Tables that printing needs besides the formats: kernel symbols (`/proc/kallsyms`), the
//! printk format strings (`printk_formats`, for `bprint` and `%s` of kernel string pointers)
//! and the pid -> comm map (`saved_cmdlines`) plus pid -> tgid (`saved_tgids`).

use std::collections::HashMap;

/// One kernel symbol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbol {
    pub addr: u64,
    pub name: String,
    /// `Some("ext4")` for symbols of a module (`[ext4]` in kallsyms).
    pub module: Option<String>,
}

/// Kernel symbols sorted by address, for `%ps`, `%pS`, `%pB`.
#[derive(Debug, Clone, Default)]
pub struct Kallsyms {
    syms: Vec<Symbol>,
    /// Distinct addresses, ascending: the dense array lookups search.
    addrs: Vec<u64>,
    /// For each of `addrs`, the index in `syms` of the first symbol at that address.
    first: Vec<u32>,
}

/// The result of resolving an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resolved<'a> {
    pub name: &'a str,
    pub module: Option<&'a str>,
    pub offset: u64,
    /// Distance to the next symbol (what the kernel prints after the `/`).
    pub size: u64,
}

impl Kallsyms {
    /// Parse `/proc/kallsyms` text: `ffffffff81000000 T _text` or `... t name\t[module]`.
    /// Lines that do not parse are skipped (kallsyms has no malformed lines the kernel cares
    /// about, and a damaged table should degrade to hex addresses, not fail a report).
    pub fn parse(text: &str) -> Kallsyms {
        let syms: Vec<Symbol> = text
            .lines()
            .filter_map(|line| {
                let mut it = line.split_whitespace();
                let addr = u64::from_str_radix(it.next()?, 16).ok()?;
                let _kind = it.next()?;
                let name = it.next()?.to_string();
                let module =
                    it.next().map(|m| m.trim_start_matches('[').trim_end_matches(']').to_string());
                (addr != 0).then_some(Symbol { addr, name, module })
            })
            .collect();
        Kallsyms::from_symbols(syms)
    }

    pub fn from_symbols(mut syms: Vec<Symbol>) -> Kallsyms {
        // Stable: of several names at one address, kallsyms order decides which prints.
        syms.sort_by_key(|s| s.addr);
        let mut addrs = Vec::new();
        let mut first = Vec::new();
        for (i, s) in syms.iter().enumerate() {
            if addrs.last() != Some(&s.addr) {
                addrs.push(s.addr);
                first.push(i as u32);
            }
        }
        Kallsyms { syms, addrs, first }
    }

    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }

    pub fn symbols(&self) -> &[Symbol] {
        &self.syms
    }

    /// The symbol containing `addr`: the last one at or below it. The size runs to the next
    /// symbol at a higher address (0 for the last symbol).
    pub fn resolve(&self, addr: u64) -> Option<Resolved<'_>> {
        let i = self.addrs.partition_point(|&a| a <= addr).checked_sub(1)?;
        let s = &self.syms[self.first[i] as usize];
        Some(Resolved {
            name: &s.name,
            module: s.module.as_deref(),
            offset: addr - s.addr,
            size: self.addrs.get(i + 1).map_or(0, |n| n - s.addr),
        })
    }
}

/// `printk_formats`: `0xffffffff82a1b2c3 : "format string\n"`, address to string.
#[derive(Debug, Clone, Default)]
pub struct PrintkFormats {
    map: HashMap<u64, String>,
}

impl PrintkFormats {
    pub fn parse(text: &str) -> PrintkFormats {
        let mut map = HashMap::new();
        for line in text.lines() {
            let Some((addr, rest)) = line.split_once(" : ") else { continue };
            let Ok(addr) = u64::from_str_radix(addr.trim().trim_start_matches("0x"), 16) else {
                continue;
            };
            let s = rest.trim();
            let s = s.strip_prefix('"').and_then(|s| s.strip_suffix('"')).unwrap_or(s);
            map.insert(addr, unescape_c(s));
        }
        PrintkFormats { map }
    }

    pub fn get(&self, addr: u64) -> Option<&str> {
        self.map.get(&addr).map(String::as_str)
    }

    pub fn insert(&mut self, addr: u64, s: String) {
        self.map.insert(addr, s);
    }
}

/// Undo the escaping `printk_formats` applies (`\n`, `\t`, `\"`, `\\`).
fn unescape_c(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('a') => out.push('\x07'),
            Some('e') => out.push('\x1b'),
            Some('f') => out.push('\x0c'),
            Some('v') => out.push('\x0b'),
            Some('\\') => out.push('\\'),
            Some('"') => out.push('"'),
            Some(o) => {
                out.push('\\');
                out.push(o);
            }
            None => out.push('\\'),
        }
    }
    out
}

/// pid -> comm (`saved_cmdlines`: `1234 bash`) and pid -> tgid (`saved_tgids`: `1234 1230`).
#[derive(Debug, Clone, Default)]
pub struct Cmdlines {
    comms: HashMap<i32, String>,
    tgids: HashMap<i32, i32>,
}

impl Cmdlines {
    pub fn parse(saved_cmdlines: &str) -> Cmdlines {
        let mut c = Cmdlines::default();
        c.add_cmdlines(saved_cmdlines);
        c
    }

    pub fn add_cmdlines(&mut self, text: &str) {
        for line in text.lines() {
            if let Some((pid, comm)) = line.split_once(' ') {
                if let Ok(pid) = pid.trim().parse() {
                    self.comms.insert(pid, comm.to_string());
                }
            }
        }
    }

    pub fn add_tgids(&mut self, text: &str) {
        for line in text.lines() {
            let mut it = line.split_whitespace();
            if let (Some(Ok(pid)), Some(Ok(tgid))) =
                (it.next().map(str::parse), it.next().map(str::parse))
            {
                self.tgids.insert(pid, tgid);
            }
        }
    }

    pub fn insert(&mut self, pid: i32, comm: &str) {
        self.comms.insert(pid, comm.to_string());
    }

    /// The comm the kernel would print for `pid`: `<idle>` for 0, `<...>` when unknown.
    pub fn comm(&self, pid: i32) -> &str {
        if pid == 0 {
            return "<idle>";
        }
        self.comms.get(&pid).map(String::as_str).unwrap_or("<...>")
    }

    pub fn known(&self, pid: i32) -> Option<&str> {
        self.comms.get(&pid).map(String::as_str)
    }

    pub fn tgid(&self, pid: i32) -> Option<i32> {
        self.tgids.get(&pid).copied()
    }

    /// Iterate pid -> comm (unordered).
    pub fn iter(&self) -> impl Iterator<Item = (i32, &str)> {
        self.comms.iter().map(|(p, c)| (*p, c.as_str()))
    }

    pub fn tgids(&self) -> impl Iterator<Item = (i32, i32)> + '_ {
        self.tgids.iter().map(|(p, t)| (*p, *t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_with_offset_and_size() {
        let k = Kallsyms::parse(
            "ffffffff81000010 T b\nffffffff81000000 T a\nffffffff81000040 t c\t[ext4]\n0000000000000000 A z\n",
        );
        let r = k.resolve(0xffffffff81000012).unwrap();
        assert_eq!((r.name, r.offset, r.size), ("b", 2, 0x30));
        let r = k.resolve(0xffffffff81000041).unwrap();
        assert_eq!((r.name, r.module, r.size), ("c", Some("ext4"), 0));
        assert!(k.resolve(0x10).is_none());
    }

    #[test]
    fn parses_printk_formats_and_cmdlines() {
        let p = PrintkFormats::parse("0xffffffff82000000 : \"hello %d\\n\"\n");
        assert_eq!(p.get(0xffffffff82000000), Some("hello %d\n"));
        let mut c = Cmdlines::parse("12 bash\n13 kworker/0:1\n");
        c.add_tgids("13 12\n");
        assert_eq!((c.comm(12), c.comm(99), c.comm(0)), ("bash", "<...>", "<idle>"));
        assert_eq!(c.tgid(13), Some(12));
    }
}
