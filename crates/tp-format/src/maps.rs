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

#[cfg(test)]
mod tests {
    use super::*;

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
