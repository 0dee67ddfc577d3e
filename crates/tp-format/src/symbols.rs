//! Tables that printing needs besides the formats: kernel symbols (`/proc/kallsyms`), the
//! printk format strings (`printk_formats`, for `bprint` and `%s` of kernel string pointers)
//! and the pid -> comm map (`saved_cmdlines`) plus pid -> tgid (`saved_tgids`).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

/// One kernel symbol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbol {
    pub addr: u64,
    pub name: String,
    /// `Some("ext4")` for symbols of a module (`[ext4]` in kallsyms).
    pub module: Option<String>,
}

/// Kernel symbols sorted by address, for `%ps`, `%pS`, `%pB`.
///
/// [`Kallsyms::parse`] keeps the text and builds the table on first use, so opening a trace
/// does not pay for it (and a renderer thread does, off the reading thread's path). Names
/// live in one string: a kernel has a few hundred thousand symbols, and one allocation each
/// would dominate.
#[derive(Debug, Default)]
pub struct Kallsyms {
    /// kallsyms text not parsed yet (taken by the first lookup).
    pending: Mutex<String>,
    table: OnceLock<Table>,
}

impl Clone for Kallsyms {
    fn clone(&self) -> Kallsyms {
        Kallsyms { pending: Mutex::default(), table: OnceLock::from(self.table().clone()) }
    }
}

#[derive(Debug, Clone, Default)]
struct Table {
    /// Every symbol name, concatenated.
    names: String,
    /// Module names, each once.
    modules: Vec<String>,
    /// All symbols, by address; of several at one address, in kallsyms order.
    entries: Vec<Entry>,
    /// Distinct addresses, ascending: the dense array lookups search.
    addrs: Vec<u64>,
    /// For each of `addrs`, the index in `entries` of the first symbol at that address.
    first: Vec<u32>,
    /// A coarse index over `addrs` so a lookup searches a few entries instead of all.
    buckets: Buckets,
    /// [`Kallsyms::symbols`], built on first use.
    owned: OnceLock<Vec<Symbol>>,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    addr: u64,
    /// `names[name..name + len]`.
    name: u32,
    len: u32,
    /// Index into `modules`, or `NO_MODULE`.
    module: u32,
}

const NO_MODULE: u32 = u32::MAX;

/// `addrs` cut into equal address ranges of `1 << shift` bytes from `base`: `start[b]` is
/// the number of addresses below range `b`'s start, so an address in range `b` has its
/// symbol among `addrs[start[b] - 1 ..= start[b + 1] - 1]`. Covers the upper span of
/// the addresses (the kernel's text and modules); lookups outside it search everything.
#[derive(Debug, Clone, Default)]
struct Buckets {
    base: u64,
    shift: u32,
    start: Vec<u32>,
}

/// At most this many ranges (1 MiB of index).
const MAX_BUCKETS: u64 = 1 << 18;
/// Ranges no smaller than this (a few symbols each).
const MIN_SHIFT: u32 = 8;
/// The index covers at most this span below the highest address (2^18 ranges of 1 MiB).
const MAX_SPAN: u64 = MAX_BUCKETS << 20;

impl Buckets {
    fn new(addrs: &[u64]) -> Buckets {
        let (Some(&first), Some(&last)) = (addrs.first(), addrs.last()) else {
            return Buckets::default();
        };
        let base = first.max(last.saturating_sub(MAX_SPAN));
        let span = last - base;
        let mut shift = MIN_SHIFT;
        while (span >> shift) >= MAX_BUCKETS {
            shift += 1;
        }
        let n = (span >> shift) as usize + 1;
        let mut start = Vec::with_capacity(n + 1);
        let mut i = 0usize;
        for b in 0..=n as u64 {
            let lo = base.saturating_add(b << shift);
            while i < addrs.len() && addrs[i] < lo {
                i += 1;
            }
            start.push(i as u32);
        }
        Buckets { base, shift, start }
    }

    /// How many of `addrs` are at or below `addr` (what `partition_point(|a| a <= addr)`
    /// gives), searching only `addr`'s range.
    #[inline]
    fn count_le(&self, addrs: &[u64], addr: u64) -> usize {
        if addr >= self.base && !self.start.is_empty() {
            let b = ((addr - self.base) >> self.shift) as usize;
            if b + 1 < self.start.len() {
                let (lo, hi) = (self.start[b] as usize, self.start[b + 1] as usize);
                return lo + addrs[lo..hi].partition_point(|&a| a <= addr);
            }
        }
        addrs.partition_point(|&a| a <= addr)
    }
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
    /// `/proc/kallsyms` text (see `parse_table`); parsed on the first lookup.
    pub fn parse(text: &str) -> Kallsyms {
        Kallsyms::from_text(text.to_string())
    }

    /// [`Kallsyms::parse`] taking the text (no copy of a kallsyms of many megabytes).
    pub fn from_text(text: String) -> Kallsyms {
        Kallsyms { pending: Mutex::new(text), table: OnceLock::new() }
    }

    pub fn from_symbols(syms: Vec<Symbol>) -> Kallsyms {
        let mut b = Builder::default();
        for s in &syms {
            b.push(s.addr, &s.name, s.module.as_deref());
        }
        Kallsyms { pending: Mutex::default(), table: OnceLock::from(b.finish()) }
    }

    fn table(&self) -> &Table {
        self.table.get_or_init(|| {
            // A panic while parsing cannot leave the text half-taken: it is taken whole.
            let text = std::mem::take(&mut *self.pending.lock().unwrap_or_else(|e| e.into_inner()));
            parse_table(&text)
        })
    }

    pub fn is_empty(&self) -> bool {
        self.table().entries.is_empty()
    }

    /// Every symbol, by address (built on the first call).
    pub fn symbols(&self) -> &[Symbol] {
        let t = self.table();
        t.owned.get_or_init(|| {
            t.entries
                .iter()
                .map(|e| Symbol {
                    addr: e.addr,
                    name: t.name(e).to_string(),
                    module: t.module(e).map(str::to_string),
                })
                .collect()
        })
    }

    /// The symbol containing `addr`: the last one at or below it. The size runs to the next
    /// symbol at a higher address (0 for the last symbol).
    #[inline]
    pub fn resolve(&self, addr: u64) -> Option<Resolved<'_>> {
        let t = self.table();
        let i = t.buckets.count_le(&t.addrs, addr).checked_sub(1)?;
        let e = &t.entries[t.first[i] as usize];
        Some(Resolved {
            name: t.name(e),
            module: t.module(e),
            offset: addr - e.addr,
            size: t.addrs.get(i + 1).map_or(0, |n| n - e.addr),
        })
    }
}

impl Table {
    fn name(&self, e: &Entry) -> &str {
        &self.names[e.name as usize..(e.name + e.len) as usize]
    }

    fn module(&self, e: &Entry) -> Option<&str> {
        self.modules.get(e.module as usize).map(String::as_str)
    }
}

/// `ffffffff81000000 T _text` or `... t name\t[module]` lines. Lines that do not parse are
/// skipped (kallsyms has no malformed lines the kernel cares about, and a damaged table
/// should degrade to hex addresses, not fail a report).
fn parse_table(text: &str) -> Table {
    let mut b = Builder::default();
    for line in text.lines() {
        let mut it = line.split_ascii_whitespace();
        let (Some(addr), Some(_kind), Some(name)) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        let Ok(addr) = u64::from_str_radix(addr, 16) else { continue };
        if addr == 0 {
            continue;
        }
        let module = it.next().map(|m| m.trim_start_matches('[').trim_end_matches(']'));
        b.push(addr, name, module);
    }
    b.finish()
}

/// Collects symbols into a [`Kallsyms`].
#[derive(Default)]
struct Builder {
    names: String,
    modules: Vec<String>,
    module_ids: HashMap<String, u32>,
    entries: Vec<Entry>,
}

impl Builder {
    fn push(&mut self, addr: u64, name: &str, module: Option<&str>) {
        // Names beyond 4 GiB of text cannot be indexed; such a table is not a kallsyms.
        let Ok(start) = u32::try_from(self.names.len()) else { return };
        let Ok(len) = u32::try_from(name.len()) else { return };
        if start.checked_add(len).is_none() {
            return;
        }
        self.names.push_str(name);
        let module = match module {
            None => NO_MODULE,
            // Symbols of one module come together: check the last one first.
            Some(m) if self.modules.last().is_some_and(|l| l == m) => self.modules.len() as u32 - 1,
            Some(m) => match self.module_ids.get(m) {
                Some(&id) => id,
                None => {
                    let id = self.modules.len() as u32;
                    self.modules.push(m.to_string());
                    self.module_ids.insert(m.to_string(), id);
                    id
                }
            },
        };
        self.entries.push(Entry { addr, name: start, len, module });
    }

    fn finish(self) -> Table {
        let Builder { names, modules, mut entries, .. } = self;
        // Stable: of several names at one address, kallsyms order decides which prints.
        entries.sort_by_key(|e| e.addr);
        let mut addrs = Vec::new();
        let mut first = Vec::new();
        for (i, e) in entries.iter().enumerate() {
            if addrs.last() != Some(&e.addr) {
                addrs.push(e.addr);
                first.push(i as u32);
            }
        }
        let buckets = Buckets::new(&addrs);
        Table { names, modules, entries, addrs, first, buckets, owned: OnceLock::new() }
    }
}

/// Processes' mappings (the trace.dat's PROCMAPS), for printing user stack addresses as
/// the kernel does with its `sym-userobj` option: the mapped file and the offset from the
/// start of the mapping holding the address (`/usr/lib/libc.so.6[+0x2a1ca]`).
#[derive(Debug, Clone, Default)]
pub struct UserMaps {
    /// Per process, its mappings sorted by start.
    by_pid: HashMap<i32, Vec<crate::tracedat::LibMap>>,
}

impl UserMaps {
    pub fn new(procmaps: &[crate::tracedat::ProcMaps]) -> UserMaps {
        let mut by_pid: HashMap<i32, Vec<crate::tracedat::LibMap>> = HashMap::new();
        for p in procmaps {
            by_pid.entry(p.pid).or_default().extend(p.maps.iter().cloned());
        }
        for v in by_pid.values_mut() {
            v.sort_by_key(|m| m.start);
        }
        UserMaps { by_pid }
    }

    /// The file the kernel names for `addr` in process `pid`, and the offset it prints: as
    /// its `find_vma`, the first mapping that ends above `addr` (which may start above it
    /// too, for an address in no mapping: the offset then wraps, as the kernel's does);
    /// `None` when that mapping is not a file (anonymous memory, `[vdso]`) or the process
    /// is unknown.
    pub fn file_at(&self, pid: i32, addr: u64) -> Option<(&str, u64)> {
        let maps = self.by_pid.get(&pid)?;
        let m = maps.get(maps.partition_point(|m| m.end <= addr))?;
        m.name.starts_with('/').then(|| (m.name.as_str(), addr.wrapping_sub(m.start)))
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
    comms: HashMap<i32, Comm, PidHash>,
    tgids: HashMap<i32, i32, PidHash>,
}

/// A known task's comm, with its task column (`%16s-%-7d `) formatted once.
#[derive(Debug, Clone)]
struct Comm {
    /// The column; the comm is `column[comm]`.
    column: Box<str>,
    comm: std::ops::Range<usize>,
}

impl Comm {
    fn new(pid: i32, comm: &str) -> Comm {
        let column = crate::text::task_column(comm, pid);
        // The column is the comm right-aligned in 16 characters, then `-pid`.
        let chars = if comm.is_ascii() { comm.len() } else { comm.chars().count() };
        let start = 16usize.saturating_sub(chars);
        Comm { comm: start..start + comm.len(), column: column.into_boxed_str() }
    }

    fn comm(&self) -> &str {
        &self.column[self.comm.clone()]
    }
}

/// Pids are looked up once per printed line: a cheap mixing hash instead of SipHash. The
/// finalizer is a bijection that spreads every key bit over the whole word, so pids that
/// differ only in high bits do not pile up in one bucket.
type PidHash = std::hash::BuildHasherDefault<PidHasher>;

#[derive(Default)]
struct PidHasher(u64);

impl std::hash::Hasher for PidHasher {
    fn finish(&self) -> u64 {
        // MurmurHash3's fmix64.
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ b as u64).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }
    fn write_i32(&mut self, v: i32) {
        self.0 = (self.0 << 32) ^ v as u32 as u64;
    }
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
                    self.comms.insert(pid, Comm::new(pid, comm));
                }
            }
        }
    }

    pub fn add_tgids(&mut self, text: &str) {
        for line in text.lines() {
            let mut it = line.split_ascii_whitespace();
            if let (Some(Ok(pid)), Some(Ok(tgid))) =
                (it.next().map(str::parse), it.next().map(str::parse))
            {
                self.tgids.insert(pid, tgid);
            }
        }
    }

    pub fn insert(&mut self, pid: i32, comm: &str) {
        self.comms.insert(pid, Comm::new(pid, comm));
    }

    /// The comm the kernel would print for `pid`: `<idle>` for 0, `<...>` when unknown.
    pub fn comm(&self, pid: i32) -> &str {
        if pid == 0 {
            return "<idle>";
        }
        self.comms.get(&pid).map(Comm::comm).unwrap_or("<...>")
    }

    pub fn known(&self, pid: i32) -> Option<&str> {
        self.comms.get(&pid).map(Comm::comm)
    }

    /// The task column (`%16s-%-7d `, see [`crate::text::task_column`]) of a pid whose comm
    /// is known (not pid 0, which prints `<idle>`).
    pub fn task_column(&self, pid: i32) -> Option<&str> {
        if pid == 0 {
            return None;
        }
        self.comms.get(&pid).map(|c| &*c.column)
    }

    pub fn tgid(&self, pid: i32) -> Option<i32> {
        self.tgids.get(&pid).copied()
    }

    /// Iterate pid -> comm (unordered).
    pub fn iter(&self) -> impl Iterator<Item = (i32, &str)> {
        self.comms.iter().map(|(p, c)| (*p, c.comm()))
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
        assert!(k.resolve(0xffffffff80ffffff).is_none());
        let r = k.resolve(0xffffffff81000012).unwrap();
        assert_eq!((r.name, r.offset, r.size), ("b", 2, 0x30));
        let r = k.resolve(0xffffffff81000041).unwrap();
        assert_eq!((r.name, r.module, r.size), ("c", Some("ext4"), 0));
        assert!(k.resolve(0x10).is_none());
    }

    #[test]
    fn bucket_index_agrees_with_binary_search() {
        // Spread like a real kallsyms: per-CPU symbols near 0, kernel text, modules far up.
        let mut addrs = vec![0x10, 0x2000, 0x2010];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for base in [0xffff_ffff_8100_0000u64, 0xffff_ffff_c000_0000] {
            for _ in 0..5000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                addrs.push(base + (x % 0x200_0000));
            }
        }
        addrs.sort_unstable();
        addrs.dedup();
        let b = Buckets::new(&addrs);
        let mut probe: Vec<u64> = vec![0, 1, 0x10, 0x11, u64::MAX, 0xffff_ffff_8000_0000];
        for &a in addrs.iter().step_by(7) {
            probe.extend([a - 1, a, a + 1]);
        }
        for p in probe {
            assert_eq!(b.count_le(&addrs, p), addrs.partition_point(|&a| a <= p), "{p:#x}");
        }
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
