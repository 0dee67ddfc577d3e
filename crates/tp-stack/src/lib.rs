//! User stacks of perf samples recorded with `--call-graph dwarf` (PERF_SAMPLE_REGS_USER |
//! PERF_SAMPLE_STACK_USER), unwound offline with [`framehop`] from the binaries'
//! `.eh_frame`/`.eh_frame_hdr` (or `.debug_frame`), so code built without frame pointers
//! (Debian's C libraries, Rust release builds) still gets whole stacks.
//!
//! Feed every record of a perf.data file, in order, to [`Unwinder::observe`] (it follows each
//! process's executable mappings from MMAP/MMAP2, FORK and `exec`), and ask
//! [`Unwinder::user_chain`] for a sample's user return addresses, or [`Unwinder::callchain`]
//! for the sample's whole chain in the kernel's PERF_SAMPLE_CALLCHAIN shape (so one code path
//! prints and symbolizes frame-pointer and DWARF stacks alike).
//!
//! The files are the ones on disk now, found through `/proc/PID/root` while the process
//! lives (processes in other mount namespaces) and by their path otherwise; a file whose
//! inode is not the recorded one (rebuilt, upgraded) is not used. Each file's unwind
//! sections are read once and shared by every process that maps it.
//!
//! x86-64 only (the registers perf copies there); other architectures get no user chain.
//!
//! ```no_run
//! use tp_format::perfdata::{PerfData, Record};
//!
//! let data = PerfData::open_file(std::fs::File::open("perf.data")?)?;
//! let mut unwinder = tp_stack::Unwinder::new();
//! let mut records = data.records(true)?;
//! while let Some(item) = records.next() {
//!     let item = item?;
//!     let record = item.parse()?;
//!     unwinder.observe(&record);
//!     if let (Record::Sample(sample), Some(attr)) = (&record, item.attr) {
//!         let chain = unwinder.callchain(sample, &attr.attr);
//!         println!("{} frames", chain.len());
//!     }
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::ops::{Deref, Range};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::Arc;

use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, Module, Unwinder as _};
use object::{Object, ObjectSection, ObjectSegment};
use tp_format::perfdata::context::USER as PERF_CONTEXT_USER;
use tp_format::perfdata::record::{Mmap, MmapFile, Record, Sample};
use tp_format::perfdata::EventAttr;

/// `PERF_REG_X86_BP`, `_SP`, `_IP`: bit numbers in `sample_regs_user`.
const REG_BP: u32 = 6;
const REG_SP: u32 = 7;
const REG_IP: u32 = 8;
/// `PERF_SAMPLE_REGS_ABI_64`.
const ABI_64: u64 = 2;
/// Frames kept when the attr does not say (`kernel.perf_event_max_stack`'s default).
const DEFAULT_MAX_FRAMES: usize = 127;

/// Section bytes shared between the file cache and framehop's modules.
#[derive(Clone, Default)]
pub struct Bytes(Arc<[u8]>);

impl Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

/// What one file contributes to unwinding: its unwind sections and its loadable segments
/// (to place a mapping's file offset at the file's own addresses).
struct FileInfo {
    sections: ExplicitModuleSectionInfo<Bytes>,
    /// Executable PT_LOAD segments: (file offset, address, size in the file).
    loads: Vec<(u64, u64, u64)>,
}

impl FileInfo {
    fn read(data: &[u8]) -> Option<FileInfo> {
        let obj = object::File::parse(data).ok()?;
        let range = |name: &str| {
            let s = obj.section_by_name(name)?;
            Some(s.address()..s.address() + s.size())
        };
        // Compressed sections (SHF_COMPRESSED .debug_frame) are left out: no decompressor.
        let bytes = |name: &str| {
            let s = obj.section_by_name(name)?;
            let c = s.compressed_file_range().ok()?;
            if c.format != object::CompressionFormat::None {
                return None;
            }
            Some(Bytes(Arc::from(s.data().ok()?)))
        };
        let sections = ExplicitModuleSectionInfo {
            base_svma: 0,
            text_svma: range(".text"),
            text: bytes(".text"),
            got_svma: range(".got"),
            eh_frame_svma: range(".eh_frame"),
            eh_frame: bytes(".eh_frame"),
            eh_frame_hdr_svma: range(".eh_frame_hdr"),
            eh_frame_hdr: bytes(".eh_frame_hdr"),
            debug_frame: bytes(".debug_frame"),
            ..Default::default()
        };
        // Only executable mappings are unwound: a page shared with the read-only segment
        // before (lld and newer ld put text right after it in the file) is the text's.
        let loads = obj
            .segments()
            .filter(|s| matches!(s.flags(), object::SegmentFlags::Elf { p_flags } if p_flags & object::elf::PF_X != 0))
            .map(|s| {
                let (off, size) = s.file_range();
                (off, s.address(), size)
            })
            .collect();
        Some(FileInfo { sections, loads })
    }

    /// The file's own address of `offset`, the file offset an executable mapping starts at
    /// (page aligned, so possibly before its segment's first byte).
    fn svma_of_offset(&self, offset: u64) -> Option<u64> {
        self.loads
            .iter()
            .find(|&&(off, _, size)| off & !0xfff <= offset && offset < off + size.max(1))
            .map(|&(off, addr, _)| addr.wrapping_sub(off.wrapping_sub(offset)))
    }
}

/// One executable mapping of a process.
#[derive(Clone)]
struct Map {
    range: Range<u64>,
    pgoff: u64,
    path: String,
    ino: u64,
}

/// One process: its executable mappings, and framehop's view of them, built at the first
/// sample that needs it after a change.
#[derive(Default)]
struct Process {
    maps: Vec<Map>,
    unwinder: Option<Box<(UnwinderX86_64<Bytes>, CacheX86_64)>>,
}

/// Counts of what could not be used, for a report's closing words.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Samples with a user stack copy that were unwound.
    pub unwound: u64,
    /// Files mapped executable that could not be read or parsed (missing, another inode,
    /// not ELF); their frames stop the unwinding (or fall back to frame pointers).
    pub missing_files: Vec<String>,
}

/// Follows the processes of a perf.data file and unwinds their samples' user stacks.
#[derive(Default)]
pub struct Unwinder {
    processes: HashMap<u32, Process>,
    /// Per file (path, inode): its unwind information, `None` when unusable.
    files: HashMap<(String, u64), Option<Arc<FileInfo>>>,
    stats: Stats,
}

impl Unwinder {
    pub fn new() -> Unwinder {
        Unwinder::default()
    }

    /// What could not be used so far.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Follow one record of the file (every record, in file order): MMAP/MMAP2 add a
    /// process's executable mapping, FORK of a new process copies its parent's, COMM with
    /// `exec` empties the process (the new image's maps follow it), EXIT of the main thread
    /// forgets it.
    pub fn observe(&mut self, record: &Record<'_>) {
        match *record {
            Record::Mmap(ref m, _) => self.mmap(m, true),
            Record::Mmap2(ref m, _) => self.mmap(m, m.prot & PROT_EXEC != 0),
            Record::Fork(t, _) if t.pid != t.ppid => {
                let maps = self.processes.get(&t.ppid).map(|p| p.maps.clone()).unwrap_or_default();
                self.processes.insert(t.pid, Process { maps, unwinder: None });
            }
            Record::Comm { pid, exec: true, .. } => {
                self.processes.insert(pid, Process::default());
            }
            Record::Exit(t, _) if t.pid == t.tid => {
                self.processes.remove(&t.pid);
            }
            _ => {}
        }
    }

    fn mmap(&mut self, m: &Mmap<'_>, exec: bool) {
        // pid -1: the kernel's maps; [vdso], [stack], anonymous memory: no file to read.
        if !exec || m.pid == u32::MAX || !m.filename.starts_with('/') || m.len == 0 {
            return;
        }
        let ino = match m.file {
            Some(MmapFile::Inode { ino, .. }) => ino,
            _ => 0,
        };
        let range = m.addr..m.addr.saturating_add(m.len);
        let p = self.processes.entry(m.pid).or_default();
        // A new mapping replaces whatever it overlaps.
        p.maps.retain(|o| o.range.end <= range.start || range.end <= o.range.start);
        p.maps.push(Map { range, pgoff: m.pgoff, path: m.filename.to_string(), ino });
        p.unwinder = None;
    }

    /// The file's unwind information (read once per path and inode).
    fn file(&mut self, pid: u32, path: &str, ino: u64) -> Option<Arc<FileInfo>> {
        let key = (path.to_string(), ino);
        if let Some(f) = self.files.get(&key) {
            return f.clone();
        }
        let candidates = [PathBuf::from(format!("/proc/{pid}/root{path}")), PathBuf::from(path)];
        let info = candidates
            .iter()
            .find(|c| std::fs::metadata(c).is_ok_and(|md| ino == 0 || md.ino() == ino))
            .and_then(|c| std::fs::read(c).ok())
            .and_then(|data| FileInfo::read(&data))
            .map(Arc::new);
        if info.is_none() {
            self.stats.missing_files.push(path.to_string());
        }
        self.files.insert(key, info.clone());
        info
    }

    /// framehop's unwinder for `pid`, (re)built from its maps when they changed.
    fn process(&mut self, pid: u32) -> Option<&mut (UnwinderX86_64<Bytes>, CacheX86_64)> {
        let p = self.processes.get(&pid)?;
        if p.unwinder.is_none() {
            let maps = p.maps.clone();
            let mut u = UnwinderX86_64::new();
            for m in &maps {
                let Some(f) = self.file(pid, &m.path, m.ino) else { continue };
                let Some(svma) = f.svma_of_offset(m.pgoff) else { continue };
                let base = m.range.start.wrapping_sub(svma);
                u.add_module(Module::new(
                    m.path.clone(),
                    m.range.clone(),
                    base,
                    f.sections.clone(),
                ));
            }
            self.processes.get_mut(&pid)?.unwinder = Some(Box::new((u, CacheX86_64::new())));
        }
        self.processes.get_mut(&pid)?.unwinder.as_deref_mut()
    }

    /// The user part of `sample`'s stack, unwound from its copied registers and stack: the
    /// user instruction pointer, then each caller's return address, innermost first (the
    /// shape of the user part of a frame-pointer PERF_SAMPLE_CALLCHAIN, after its
    /// PERF_CONTEXT_USER marker). At most `attr.sample_max_stack` (else 127) addresses.
    /// `None` when the sample has no user registers (a kernel thread, or not recorded with
    /// `--call-graph dwarf`) or is not x86-64's 64-bit ABI. The chain stops where unwinding
    /// does: at the stack's root, at the end of the copied bytes, or at code in a file
    /// that could not be read.
    pub fn user_chain(&mut self, sample: &Sample<'_>, attr: &EventAttr) -> Option<Vec<u64>> {
        let (abi, regs) = sample.regs_user?;
        if abi != ABI_64 || !cfg!(target_arch = "x86_64") {
            return None;
        }
        let mask = attr.sample_regs_user;
        let reg = |r: u32| -> Option<u64> {
            if mask & (1 << r) == 0 {
                return None;
            }
            let i = (mask & ((1u64 << r) - 1)).count_ones() as usize;
            let b = regs.get(i * 8..i * 8 + 8)?;
            Some(u64::from_le_bytes(b.try_into().ok()?))
        };
        let (ip, sp, bp) = (reg(REG_IP)?, reg(REG_SP)?, reg(REG_BP)?);
        let (data, dyn_size) = sample.stack_user.unwrap_or((&[], 0));
        let stack = &data[..(dyn_size as usize).min(data.len())];
        let max = match attr.sample_max_stack {
            0 => DEFAULT_MAX_FRAMES,
            n => n as usize,
        };
        self.stats.unwound += 1;
        let pid = sample.pid.unwrap_or(0);
        let mut read_stack = |addr: u64| -> Result<u64, ()> {
            let off = addr.checked_sub(sp).ok_or(())? as usize;
            let b = stack.get(off..off.checked_add(8).ok_or(())?).ok_or(())?;
            Ok(u64::from_le_bytes(b.try_into().map_err(|_| ())?))
        };
        let Some((u, cache)) = self.process(pid) else { return Some(vec![ip]) };
        let mut out = Vec::new();
        let mut frames =
            u.iter_frames(ip, UnwindRegsX86_64::new(ip, sp, bp), cache, &mut read_stack);
        while out.len() < max {
            match frames.next() {
                Ok(Some(f)) => out.push(f.address()),
                Ok(None) | Err(_) => break,
            }
        }
        Some(out)
    }

    /// `sample`'s whole chain in PERF_SAMPLE_CALLCHAIN's shape: the recorded callchain
    /// (kernel part, with its `PERF_CONTEXT_*` markers), then, for a sample with a user
    /// stack copy, `PERF_CONTEXT_USER` and [`Unwinder::user_chain`] in place of any user
    /// part the callchain had. Without a stack copy: the recorded callchain as it is.
    pub fn callchain(&mut self, sample: &Sample<'_>, attr: &EventAttr) -> Vec<u64> {
        let recorded: Vec<u64> = sample.callchain().collect();
        let Some(user) = self.user_chain(sample, attr) else { return recorded };
        let mut out: Vec<u64> =
            recorded.iter().copied().take_while(|&a| a != PERF_CONTEXT_USER).collect();
        if !user.is_empty() {
            out.push(PERF_CONTEXT_USER);
            out.extend(user);
        }
        out
    }
}

/// `PROT_EXEC` in MMAP2's `prot`.
const PROT_EXEC: u32 = 4;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mapping_is_placed_at_its_segment() {
        // Executable segments: a PIE's at file offset 0x1000, address 0x1000; one starting
        // mid-page (offset 0x2368c0 at 0x2378c0, mapped from page offset 0x236000, whose
        // first bytes are the end of the read-only segment before: a Rust binary's).
        let f = FileInfo {
            sections: Default::default(),
            loads: vec![(0x1000, 0x1000, 0x2000), (0x2368c0, 0x2378c0, 0x8ec200)],
        };
        assert_eq!(f.svma_of_offset(0x1000), Some(0x1000));
        assert_eq!(f.svma_of_offset(0x236000), Some(0x237000));
        assert_eq!(f.svma_of_offset(0xc00000), None);
    }

    #[test]
    fn no_registers_no_chain() {
        let mut u = Unwinder::new();
        let s = Sample { pid: Some(1), ..Default::default() };
        assert_eq!(u.user_chain(&s, &EventAttr::default()), None);
        let chain = [0xffff_ffff_ffff_ff80u64, 0xffff_ffff_8100_0000];
        let bytes: Vec<u8> = chain.iter().flat_map(|a| a.to_le_bytes()).collect();
        let s = Sample { callchain: Some(&bytes), ..Default::default() };
        assert_eq!(u.callchain(&s, &EventAttr::default()), chain);
    }

    #[test]
    fn maps_follow_mmap_fork_exec_and_exit() {
        use tp_format::perfdata::record::Task;
        let id = tp_format::perfdata::SampleId::default();
        let map = |pid, addr, len, prot, filename| Mmap {
            pid,
            tid: pid,
            addr,
            len,
            pgoff: 0,
            file: None,
            prot,
            flags: 0,
            filename,
        };
        let ranges = |u: &Unwinder, pid| -> Vec<Range<u64>> {
            u.processes
                .get(&pid)
                .map(|p| p.maps.iter().map(|m| m.range.clone()).collect())
                .unwrap_or_default()
        };
        let mut u = Unwinder::new();
        u.observe(&Record::Mmap2(map(10, 0x1000, 0x3000, 5, "/bin/a"), id));
        u.observe(&Record::Mmap2(map(10, 0x9000, 0x1000, 1, "/bin/data"), id)); // not exec
        u.observe(&Record::Mmap2(map(10, 0x8000, 0x1000, 5, "[vdso]"), id)); // no file
        assert_eq!(ranges(&u, 10), vec![0x1000..0x4000]);
        // A new mapping replaces what it overlaps.
        u.observe(&Record::Mmap2(map(10, 0x3000, 0x2000, 5, "/lib/b"), id));
        assert_eq!(ranges(&u, 10), vec![0x3000..0x5000]);
        // fork: the child has its parent's maps; a new thread is no new process.
        let task = |pid, ppid| Task { pid, ppid, tid: pid, ptid: ppid, time: 0 };
        u.observe(&Record::Fork(task(11, 10), id));
        assert_eq!(ranges(&u, 11), vec![0x3000..0x5000]);
        // exec: the process starts empty; exit of its main thread forgets it.
        u.observe(&Record::Comm { pid: 11, tid: 11, comm: "x", exec: true, id });
        assert!(ranges(&u, 11).is_empty());
        u.observe(&Record::Exit(task(10, 1), id));
        assert!(!u.processes.contains_key(&10));
    }

    #[test]
    fn registers_are_found_by_mask() {
        // Only BP, SP and IP copied: they are the first three words.
        let regs: Vec<u8> =
            [0x10u64, 0x7000, 0x5555_0000_1234].iter().flat_map(|r| r.to_le_bytes()).collect();
        let attr = EventAttr { sample_regs_user: 0b1_1100_0000, ..Default::default() };
        let s = Sample { pid: Some(7), regs_user: Some((ABI_64, &regs)), ..Default::default() };
        // No maps for pid 7: just the instruction pointer.
        assert_eq!(Unwinder::new().user_chain(&s, &attr), Some(vec![0x5555_0000_1234]));
    }
}
