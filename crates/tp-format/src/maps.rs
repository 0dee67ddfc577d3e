//! Processes' address spaces as a recording describes them (perf.data's MMAP/MMAP2 records,
//! with FORK and exec), to tell which mapping or file an address is in.

use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

/// One mapping: `[start, end)` of a process, from file offset `pgoff` of `name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Map {
    pub start: u64,
    pub end: u64,
    pub pgoff: u64,
    /// The file, or the kernel's name for an anonymous mapping (`[heap]`, `[stack]`,
    /// `//anon`).
    pub name: Rc<str>,
}

/// Mappings per process (by process ID).
#[derive(Debug, Default)]
pub struct Maps {
    procs: HashMap<i32, BTreeMap<u64, Map>>,
}

impl Maps {
    /// A new mapping; it replaces what it overlaps, as mmap does.
    pub fn map(&mut self, pid: i32, start: u64, len: u64, pgoff: u64, name: &str) {
        let end = start.saturating_add(len);
        let m = self.procs.entry(pid).or_default();
        // Cut the mappings that overlap [start, end): keep their parts outside it.
        let over: Vec<u64> =
            m.range(..end).rev().take_while(|(_, v)| v.end > start).map(|(k, _)| *k).collect();
        for k in over {
            let old = m.remove(&k).expect("listed");
            if old.start < start {
                m.insert(old.start, Map { end: start, ..old.clone() });
            }
            if old.end > end {
                let pgoff = old.pgoff + (end - old.start);
                m.insert(end, Map { start: end, pgoff, ..old });
            }
        }
        m.insert(start, Map { start, end, pgoff, name: Rc::from(name) });
    }

    /// `pid` exec'd: its address space is new.
    pub fn exec(&mut self, pid: i32) {
        self.procs.remove(&pid);
    }

    /// `pid` was forked from `parent`: a copy of the parent's mappings.
    pub fn fork(&mut self, pid: i32, parent: i32) {
        let copy = self.procs.get(&parent).cloned().unwrap_or_default();
        self.procs.insert(pid, copy);
    }

    /// Every process with its mappings in address order (processes by pid).
    pub fn processes(&self) -> impl Iterator<Item = (i32, impl Iterator<Item = &Map>)> {
        let mut pids: Vec<i32> = self.procs.keys().copied().collect();
        pids.sort_unstable();
        pids.into_iter().map(move |p| (p, self.procs[&p].values()))
    }

    /// Whether no mapping is known.
    pub fn is_empty(&self) -> bool {
        self.procs.values().all(|m| m.is_empty())
    }

    /// The mapping of process `pid` that holds `addr`.
    pub fn find(&self, pid: i32, addr: u64) -> Option<&Map> {
        let (_, m) = self.procs.get(&pid)?.range(..=addr).next_back()?;
        (addr < m.end).then_some(m)
    }
}

/// A mapping's name for tables: the file, or `[anon]` for perf's `//anon`.
pub fn display_name(name: &str) -> &str {
    match name {
        "//anon" | "" => "[anon]",
        n => n,
    }
}

/// One line of `/proc/PID/maps`: `START-END PERMS OFFSET MAJ:MIN INODE [NAME]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcMapsLine<'a> {
    pub start: u64,
    pub end: u64,
    /// `rwxp` or `r-xs`: read, write, execute, then `p` (private) or `s` (shared).
    pub perms: &'a str,
    /// File offset of `start`.
    pub offset: u64,
    /// The file's device (major, minor).
    pub dev: (u32, u32),
    pub inode: u64,
    /// The file, or the kernel's name (`[heap]`, `[vdso]`); empty for anonymous memory.
    /// Everything after the inode (a name may hold spaces, or end in ` (deleted)`).
    pub name: &'a str,
}

impl ProcMapsLine<'_> {
    /// Whether the mapping is executable.
    pub fn is_exec(&self) -> bool {
        self.perms.as_bytes().get(2) == Some(&b'x')
    }
}

/// Parse one line of `/proc/PID/maps`; `None` for a line that is not one.
pub fn parse_proc_maps_line(line: &str) -> Option<ProcMapsLine<'_>> {
    let mut f = line.splitn(6, ' ');
    let (range, perms, off, dev, ino) = (f.next()?, f.next()?, f.next()?, f.next()?, f.next()?);
    let name = f.next().map_or("", str::trim_start);
    let hex = |s: &str| u64::from_str_radix(s, 16).ok();
    let (a, b) = range.split_once('-')?;
    let (maj, min) = dev.split_once(':')?;
    let dev = (u32::from_str_radix(maj, 16).ok()?, u32::from_str_radix(min, 16).ok()?);
    let (offset, inode) = (hex(off)?, ino.parse().ok()?);
    Some(ProcMapsLine { start: hex(a)?, end: hex(b)?, perms, offset, dev, inode, name })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_maps_lines_parse() {
        let l = "7f1c2a600000-7f1c2a628000 r-xp 00001000 fe:01 1234     /usr/lib/libc.so.6";
        let m = parse_proc_maps_line(l).unwrap();
        assert_eq!((m.start, m.end, m.offset), (0x7f1c2a600000, 0x7f1c2a628000, 0x1000));
        assert_eq!(
            (m.perms, m.dev, m.inode, m.name),
            ("r-xp", (0xfe, 1), 1234, "/usr/lib/libc.so.6")
        );
        assert!(m.is_exec());
        let anon = parse_proc_maps_line("7ffd1000-7ffd2000 rw-p 00000000 00:00 0 ").unwrap();
        assert_eq!(anon.name, "");
        assert!(!anon.is_exec());
        let spaced = "1000-2000 r--p 00000000 08:01 7 /tmp/a b (deleted)";
        assert_eq!(parse_proc_maps_line(spaced).unwrap().name, "/tmp/a b (deleted)");
        assert_eq!(parse_proc_maps_line("x"), None);
    }

    #[test]
    fn finds_replaces_forks_and_execs() {
        let mut m = Maps::default();
        m.map(1, 0x1000, 0x3000, 0, "/bin/a");
        assert_eq!(&*m.find(1, 0x3fff).unwrap().name, "/bin/a");
        assert!(m.find(1, 0x4000).is_none() && m.find(1, 0xfff).is_none());
        // A mapping over the middle splits the old one.
        m.map(1, 0x2000, 0x1000, 0, "//anon");
        assert_eq!(&*m.find(1, 0x1fff).unwrap().name, "/bin/a");
        assert_eq!(&*m.find(1, 0x2000).unwrap().name, "//anon");
        let tail = m.find(1, 0x3000).unwrap();
        assert_eq!((&*tail.name, tail.start, tail.pgoff), ("/bin/a", 0x3000, 0x2000));
        m.fork(2, 1);
        m.exec(1);
        assert!(m.find(1, 0x1000).is_none());
        assert_eq!(&*m.find(2, 0x1000).unwrap().name, "/bin/a");
        assert_eq!(display_name("//anon"), "[anon]");
    }
}
