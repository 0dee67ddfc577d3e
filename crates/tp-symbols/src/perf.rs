//! Addresses of a perf.data file's samples turned into `function+offset (file)`, at report
//! time, as `perf script` names them:
//!
//! - kernel addresses through a kallsyms: perf's build-id cache copy of the recording
//!   kernel's (`~/.debug/[kernel.kallsyms]/BUILD_ID/kallsyms`), else the running kernel's
//!   `/proc/kallsyms` when the file's osrelease is this kernel's (said when it is not);
//! - user addresses through the process's mappings (MMAP/MMAP2 records, exec and fork,
//!   followed by [`tp_format::maps`]) to the
//!   mapped file, found as `/proc/PID/root/PATH` (processes in other mount namespaces),
//!   `PATH` or perf's build-id cache, its build id checked when the file records one; the
//!   function from the ELF symbol table (the separate debug file's when the binary is
//!   stripped, as perf does), inlined frames and `file:line` from DWARF; `/tmp/perf-PID.map`
//!   for anonymous executable memory (JITs); Rust and C++ names demangled;
//! - user stacks of `--call-graph dwarf` samples (registers and a stack copy) unwound by
//!   `tp_stack::Unwinder` into return addresses first, so one path names and prints
//!   frame-pointer and DWARF stacks alike.
//!
//! Function names come from the ELF symbol tables ([`crate::symtab`], read with `object`), DWARF
//! lines and inlined functions from blazesym. Each file is read once per run and each
//! distinct address resolved once, so a stack repeated a million times costs a hash lookup
//! per frame.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use blazesym::symbolize::source::{Elf, Source};
use blazesym::symbolize::{Input, Symbolized, Symbolizer};
use object::{Object, ObjectSection, ObjectSegment};
use tp_format::perfdata::{context, misc};
use tp_format::perfdata::{sample, Attr, Features, Record, Sample};

use tp_format::maps::Maps;

use crate::demangle::demangle;
use crate::kallsyms::Kallsyms;
use crate::symtab::SymTab;

/// What to resolve beyond the function.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// `file:line` of each frame (DWARF).
    pub srcline: bool,
    /// The functions DWARF places at each frame of a stack unwound from a stack copy
    /// (inlined calls), as perf script shows them there by default; off: the symbol
    /// table's function alone. (perf shows frame-pointer chains without them.)
    pub inline: bool,
}

/// What an address resolved to.
#[derive(Debug)]
pub struct Resolved {
    /// The function (demangled); `None` prints as `[unknown]`.
    pub name: Option<Rc<str>>,
    /// Bytes from the function's start.
    pub offset: u64,
    /// The file as perf names it: its path, `[kernel.kallsyms]`, `[unknown]`.
    pub dso: Rc<str>,
    /// `file:line`, with `--srcline`.
    pub srcline: Option<String>,
    /// The functions DWARF places at this address that are not the symbol table's
    /// function, innermost first: perf script prints each as `name+off (inlined)` before
    /// the frame.
    pub inlined: Vec<Rc<str>>,
    /// Whether the frame's own `name+off (file)` line follows them: not when DWARF's
    /// outermost function is named otherwise than the symbol (perf prints DWARF's name,
    /// as inlined, for `__libc_start_main`'s `__libc_start_main_impl`).
    pub shown: bool,
    /// The frame's lines under a sample (`\t%16x sym+off (dso)`, inlined and srcline lines
    /// included), made once; empty when the printed address is not the same for every use
    /// (unmapped addresses, perf maps).
    pub lines: String,
}

impl Resolved {
    /// Make [`Resolved::lines`] for frames printed at `addr`.
    fn with_lines(mut self, addr: u64) -> Resolved {
        let mut out = String::with_capacity(64);
        self.write_lines(&mut out, addr);
        self.lines = out;
        self
    }

    /// perf script's lines for this frame at printed address `addr`: `name+off (inlined)`
    /// for the functions DWARF places there, the frame's own `sym+off (dso)`, `  file:line`.
    pub fn write_lines(&self, out: &mut String, addr: u64) {
        for name in &self.inlined {
            let _ = writeln!(out, "\t{addr:16x} {name}+{:#x} (inlined)", self.offset);
        }
        if self.shown {
            let _ = write!(out, "\t{addr:16x} ");
            self.symbol(out);
            let _ = writeln!(out, " ({})", self.dso);
        }
        if let Some(l) = &self.srcline {
            let _ = writeln!(out, "  {l}");
        }
    }

    /// `name+0xOFF`, or `[unknown]`.
    pub fn symbol(&self, out: &mut String) {
        match &self.name {
            Some(n) => {
                let _ = write!(out, "{n}+{:#x}", self.offset);
            }
            None => out.push_str("[unknown]"),
        }
    }
}

/// One frame of a stack: the address as perf prints it (relative to the mapped file for
/// user code, absolute otherwise) and what it resolved to.
#[derive(Debug, Clone)]
pub struct Frame {
    pub addr: u64,
    /// The address in the process (or the kernel).
    pub ip: u64,
    pub sym: Rc<Resolved>,
}

impl Frame {
    /// The functions of the frame, outermost first: its own function (`None`: unknown)
    /// unless DWARF names it otherwise, then the ones inlined in it.
    pub fn outer_first(&self) -> impl Iterator<Item = Option<&str>> + '_ {
        let own = self.sym.shown.then(|| self.sym.name.as_deref());
        own.into_iter().chain(self.sym.inlined.iter().rev().map(|n| Some(&**n)))
    }
}

/// How a mapped file is symbolized, found on its first use.
enum FileSyms {
    Elf {
        /// The ELF that was mapped (file offsets -> virtual addresses, DWARF).
        binary: PathBuf,
        /// Its functions, from its symbol table or its debug file's.
        symtab: SymTab,
        /// Loadable segments: (file offset, file size, virtual address).
        segments: Vec<(u64, u64, u64)>,
    },
    /// `/tmp/perf-PID.map`: (start, end, name), sorted.
    PerfMap(Vec<(u64, u64, Rc<str>)>),
    None,
}

/// A hash map with a fast hash: its keys are small numbers looked up once per frame.
type FxMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<rustc_hash::FxHasher>>;

/// Memo keys for addresses that are not in a mapped file.
const KERNEL: u32 = u32::MAX;

/// A file some process mapped, by the name the records give it.
struct MappedFile {
    name: Rc<str>,
    /// A process whose `/proc/PID/root` may still show the file.
    pid: u32,
    /// Found on first use.
    syms: Option<FileSyms>,
}

pub struct Symbols {
    opts: Options,
    /// For files whose samples carry user stack copies (`--call-graph dwarf`).
    unwinder: Option<tp_stack::Unwinder>,
    spaces: Maps,
    files: Vec<MappedFile>,
    /// Mapping names (by their `Rc`'s address, the `Rc` kept so it is not reused) and by
    /// name -> index in `files`.
    by_ptr: FxMap<usize, (Rc<str>, u32)>,
    by_name: HashMap<Rc<str>, u32>,
    symbolizer: Symbolizer,
    /// Where the kernel's symbols are, if known; read at the first kernel address (a
    /// file of user samples only never reads the kernel's 100,000 lines).
    kallsyms_path: Option<PathBuf>,
    kallsyms: Option<Kallsyms>,
    /// Kernel code the file's KSYMBOL records name (BPF programs' JIT images): start, end,
    /// name. perf names an address there by its ksymbol, in a "DSO" of that name, before
    /// kallsyms (whose nearest symbol the program, long unloaded, is not).
    ksymbols: Vec<(u64, u64, Rc<str>)>,
    kernel_dso: Rc<str>,
    unknown: Rc<Resolved>,
    /// Build ids the file records (BUILD_ID feature, MMAP2 records), by path.
    build_ids: HashMap<String, Vec<u8>>,
    /// (file or KERNEL, file offset or address, with DWARF's inlined functions) -> what it
    /// resolved to.
    memo: FxMap<(u32, u64, bool), Rc<Resolved>>,
    /// Things the user should know (kernel symbols not available, a file not found), each
    /// said once; the caller prints them.
    pub notes: Vec<String>,
}

impl Symbols {
    /// For a file with these attrs and features.
    pub fn new(attrs: &[Attr], features: &Features, opts: Options) -> Symbols {
        let mut notes = Vec::new();
        let build_ids: HashMap<String, Vec<u8>> =
            features.build_ids.iter().map(|b| (b.filename.clone(), b.build_id.clone())).collect();
        let kernel_bid = features
            .build_ids
            .iter()
            .find(|b| b.cpumode & misc::CPUMODE_MASK == misc::KERNEL && b.filename.starts_with('['))
            .map(|b| hex(&b.build_id));
        let cached = kernel_bid
            .and_then(|b| {
                home_debug().map(|d| d.join("[kernel.kallsyms]").join(b).join("kallsyms"))
            })
            .filter(|p| p.is_file());
        let running = running_release();
        let kallsyms = match (cached, &features.osrelease) {
            (Some(p), _) => Some(p),
            (None, Some(rel)) if running.as_deref() != Some(rel.as_str()) => {
                notes.push(format!(
                    "kernel symbols unknown: the file was recorded on Linux {rel}, this is {} \
                     (and perf's build-id cache has no kallsyms of it)",
                    running.as_deref().unwrap_or("an unknown release")
                ));
                None
            }
            _ => Some(PathBuf::from("/proc/kallsyms")),
        };
        let symbolizer = Symbolizer::builder()
            .enable_demangling(false)
            .enable_code_info(opts.srcline)
            .enable_inlined_fns(opts.inline)
            .build();
        let dwarf = attrs.iter().any(|a| a.attr.sample_type & sample::STACK_USER != 0);
        Symbols {
            opts,
            unwinder: dwarf.then(tp_stack::Unwinder::new),
            spaces: Maps::default(),
            files: Vec::new(),
            by_ptr: FxMap::default(),
            by_name: HashMap::new(),
            symbolizer,
            kallsyms_path: kallsyms,
            kallsyms: None,
            ksymbols: Vec::new(),
            kernel_dso: "[kernel.kallsyms]".into(),
            unknown: Rc::new(Resolved {
                name: None,
                offset: 0,
                dso: "[unknown]".into(),
                srcline: None,
                inlined: Vec::new(),
                shown: true,
                lines: String::new(),
            }),
            build_ids,
            memo: FxMap::default(),
            notes,
        }
    }

    /// Follow the file's side records (in time order, before the samples after them).
    pub fn note(&mut self, r: &Record<'_>) {
        if let Some(u) = &mut self.unwinder {
            u.observe(r);
        }
        match *r {
            Record::Mmap(ref m, _) | Record::Mmap2(ref m, _) => {
                // Data mappings (MMAP2 without PROT_EXEC) hold no code.
                if m.file.is_some() && m.prot != 0 && m.prot & 4 == 0 {
                    return;
                }
                if let Some(tp_format::perfdata::record::MmapFile::BuildId(b)) = m.file {
                    self.build_ids.insert(m.filename.to_string(), b.to_vec());
                }
                let anon = m.filename == "//anon"
                    || m.filename.starts_with("/memfd:")
                    || m.filename.starts_with("[anon");
                if anon {
                    // JIT code: its perf map, one per process.
                    let name = format!("/tmp/perf-{}.map", m.pid);
                    self.spaces.map(m.pid as i32, m.addr, m.len, 0, &name);
                } else {
                    self.spaces.map(m.pid as i32, m.addr, m.len, m.pgoff, m.filename);
                }
            }
            // A thread shares its process's mappings; a new process starts with a copy.
            Record::Fork(t, _) if t.pid != t.ppid => self.spaces.fork(t.pid as i32, t.ppid as i32),
            Record::Comm { pid, exec: true, .. } => self.spaces.exec(pid as i32),
            // A program unloaded keeps its name for the samples recorded before; one loaded
            // at the same place later replaces it.
            Record::Ksymbol { addr, len, unregister: false, name, .. } => {
                let end = addr + len as u64;
                self.ksymbols.retain(|&(a, e, _)| e <= addr || a >= end);
                self.ksymbols.push((addr, end, name.into()));
                self.memo.retain(|&(f, a, _), _| f != KERNEL || a < addr || a >= end);
            }
            _ => {}
        }
    }

    /// The stack of sample `s` of event `attr`: its callchain (perf's context markers
    /// skipped; the user part unwound from the stack copy when it has one), or its IP
    /// alone.
    pub fn stack(&mut self, attr: Option<&Attr>, s: &Sample<'_>, out: &mut Vec<Frame>) {
        out.clear();
        let pid = s.pid.or(s.tid).unwrap_or(0);
        let mut mode = s.misc & misc::CPUMODE_MASK;
        let unwound = match (&mut self.unwinder, attr) {
            (Some(u), Some(a)) if s.stack_user.is_some() => Some(u.callchain(s, &a.attr)),
            _ => None,
        };
        if s.callchain.is_some() || unwound.is_some() {
            let chain: Box<dyn Iterator<Item = u64> + '_> = match &unwound {
                Some(c) => Box::new(c.iter().copied()),
                None => Box::new(s.callchain()),
            };
            // User frames unwound from a stack copy after the first are return addresses
            // that perf (as addr2line users do) names by the call before them: one byte
            // back. Frame-pointer chains print as recorded.
            let mut user_frames = 0usize;
            for a in chain {
                if a >= context::MAX {
                    mode = match a {
                        context::KERNEL => misc::KERNEL,
                        context::USER => misc::USER,
                        _ => misc::CPUMODE_UNKNOWN,
                    };
                    continue;
                }
                let mut a = a;
                if mode == misc::USER && unwound.is_some() {
                    if user_frames > 0 {
                        a = a.saturating_sub(1);
                    }
                    user_frames += 1;
                }
                let expand = self.opts.inline && unwound.is_some();
                let f = self.frame(pid, mode, a, expand);
                out.push(f);
            }
        } else if let Some(ip) = s.ip {
            let f = self.frame(pid, mode, ip, false);
            out.push(f);
        }
    }

    /// Address `addr` of process `pid` in `mode`; `expand`: with the functions DWARF
    /// places there.
    pub fn frame(&mut self, pid: u32, mode: u16, addr: u64, expand: bool) -> Frame {
        match mode {
            misc::KERNEL => {
                let sym = self.kernel(addr);
                Frame { addr, ip: addr, sym }
            }
            misc::USER => {
                let Some(m) = self.spaces.find(pid as i32, addr) else {
                    return Frame { addr, ip: addr, sym: self.unknown.clone() };
                };
                let off = addr - m.start + m.pgoff;
                let ptr = Rc::as_ptr(&m.name) as *const u8 as usize;
                let file = match self.by_ptr.get(&ptr) {
                    Some(&(_, f)) => f,
                    None => {
                        let name = m.name.clone();
                        let f = self.file_index(&name, pid);
                        self.by_ptr.insert(ptr, (name, f));
                        f
                    }
                };
                let key = (file, off, expand);
                if let Some(r) = self.memo.get(&key) {
                    let printed = if self.is_perf_map(file) { addr } else { off };
                    return Frame { addr: printed, ip: addr, sym: r.clone() };
                }
                let (sym, abs) = self.user(file, off, addr, expand);
                self.memo.insert(key, sym.clone());
                Frame { addr: if abs { addr } else { off }, ip: addr, sym }
            }
            _ => Frame { addr, ip: addr, sym: self.unknown.clone() },
        }
    }

    fn is_perf_map(&self, file: u32) -> bool {
        matches!(self.files[file as usize].syms, Some(FileSyms::PerfMap(_)))
    }

    /// The index in `files` of the file named `name` (first mapped by `pid`).
    fn file_index(&mut self, name: &Rc<str>, pid: u32) -> u32 {
        if let Some(&f) = self.by_name.get(name) {
            return f;
        }
        let f = self.files.len() as u32;
        self.files.push(MappedFile { name: name.clone(), pid, syms: None });
        self.by_name.insert(name.clone(), f);
        f
    }

    fn kernel(&mut self, addr: u64) -> Rc<Resolved> {
        if let Some(r) = self.memo.get(&(KERNEL, addr, false)) {
            return r.clone();
        }
        let mut r = Resolved {
            name: None,
            offset: 0,
            dso: self.kernel_dso.clone(),
            srcline: None,
            inlined: Vec::new(),
            shown: true,
            lines: String::new(),
        };
        if let Some((start, _, name)) =
            self.ksymbols.iter().find(|&&(a, e, _)| (a..e).contains(&addr))
        {
            r.name = Some(name.clone());
            r.offset = addr - start;
            r.dso = name.clone();
            let r = Rc::new(r.with_lines(addr));
            self.memo.insert((KERNEL, addr, false), r.clone());
            return r;
        }
        if let Some(p) = self.kallsyms_path.take() {
            match std::fs::read_to_string(&p) {
                Ok(text) => self.kallsyms = Some(Kallsyms::parse(&text)).filter(|k| !k.is_empty()),
                Err(e) => self
                    .notes
                    .push(format!("kernel symbols unknown: cannot read {}: {e}", p.display())),
            }
        }
        if let Some((name, offset, module)) = self.kallsyms.as_ref().and_then(|k| k.find(addr)) {
            r.name = Some(name);
            r.offset = offset;
            if let Some(m) = module {
                // A module's function: perf names the module (`[kvm]`).
                r.dso = m;
            }
        }
        let r = Rc::new(r.with_lines(addr));
        self.memo.insert((KERNEL, addr, false), r.clone());
        r
    }

    /// File offset `off` of mapped file `file` (`addr` in the process). Also says whether
    /// perf prints the absolute address (perf maps) rather than the offset.
    fn user(&mut self, file: u32, off: u64, addr: u64, expand: bool) -> (Rc<Resolved>, bool) {
        let i = file as usize;
        if self.files[i].syms.is_none() {
            let found = self.find_file(file);
            self.files[i].syms = Some(found);
        }
        let dso: Rc<str> = self.files[i].name.clone();
        let mut r = Resolved {
            name: None,
            offset: 0,
            dso,
            srcline: None,
            inlined: Vec::new(),
            shown: true,
            lines: String::new(),
        };
        match self.files[i].syms.as_ref() {
            Some(FileSyms::PerfMap(funcs)) => {
                let at = funcs.partition_point(|f| f.0 <= addr);
                if let Some(f) = at.checked_sub(1).map(|j| &funcs[j]).filter(|f| addr < f.1) {
                    r.name = Some(f.2.clone());
                    r.offset = addr - f.0;
                }
                return (Rc::new(r), true);
            }
            Some(FileSyms::Elf { binary, symtab, segments }) => {
                let vaddr = segments
                    .iter()
                    .find(|(o, size, _)| off >= *o && off < o + size)
                    .map(|(o, _, v)| off - o + v);
                if let Some(vaddr) = vaddr {
                    if let Some((name, offset)) = symtab.find(vaddr) {
                        r.name = Some(name);
                        r.offset = offset;
                    }
                    if self.opts.srcline || expand {
                        let src = Source::Elf(Elf::new(binary));
                        if let Ok(Symbolized::Sym(s)) =
                            self.symbolizer.symbolize_single(&src, Input::VirtOffset(vaddr))
                        {
                            if self.opts.srcline {
                                r.srcline = s.code_info.as_deref().map(|c| {
                                    format!("{}:{}", c.to_path().display(), c.line.unwrap_or(0))
                                });
                            }
                            if expand && r.name.is_some() {
                                inline_frames(&mut r, &s);
                            }
                        }
                    }
                }
            }
            _ => {}
        }
        (Rc::new(r.with_lines(off)), false)
    }

    /// Where to read mapped file `file`'s symbols.
    fn find_file(&mut self, file: u32) -> FileSyms {
        let f = &self.files[file as usize];
        let name = f.name.to_string();
        if let Some(pid) = name.strip_prefix("/tmp/perf-").and_then(|n| n.strip_suffix(".map")) {
            let _ = pid;
            return match std::fs::read_to_string(&name) {
                Ok(text) => FileSyms::PerfMap(parse_perf_map(&text)),
                Err(_) => FileSyms::None,
            };
        }
        let want = self.build_ids.get(&name).cloned();
        let mut candidates = Vec::new();
        if name.starts_with('/') {
            candidates.push(PathBuf::from(format!("/proc/{}/root{name}", f.pid)));
            candidates.push(PathBuf::from(&name));
        }
        if let (Some(b), Some(d)) = (&want, home_debug()) {
            let h = hex(b);
            candidates.push(d.join(".build-id").join(&h[..2]).join(&h[2..]).join("elf"));
        }
        let mut mismatch = false;
        for c in candidates {
            let Some(elf) = ElfInfo::read(&c) else { continue };
            if let Some(w) = &want {
                if elf.build_id.as_deref() != Some(w.as_slice()) {
                    mismatch = true;
                    continue;
                }
            }
            let symfile = if elf.has_symtab {
                c.clone()
            } else {
                elf.build_id.as_deref().and_then(debug_file).unwrap_or_else(|| c.clone())
            };
            let Some(symtab) = SymTab::read(&symfile) else { continue };
            return FileSyms::Elf { binary: c, symtab, segments: elf.segments };
        }
        if mismatch {
            self.notes.push(format!(
                "{name}: no file with the build id the recording saw ({}): its symbols are unknown",
                hex(want.as_deref().unwrap_or_default())
            ));
        } else if name.starts_with('/') {
            self.notes.push(format!("{name}: not found: its symbols are unknown"));
        }
        FileSyms::None
    }
}

/// The functions DWARF places at an address (`sym` and the calls inlined into it), as
/// perf script lists them: innermost first; a function named as the symbol table's is the
/// frame itself, any other an inlined one.
fn inline_frames(r: &mut Resolved, sym: &blazesym::symbolize::Sym<'_>) {
    // blazesym falls back to the symbol table when DWARF has no function here (assembly):
    // the frame as it is.
    if sym.name.is_empty() {
        return;
    }
    let elf = r.name.clone().unwrap_or_else(|| "".into());
    let outer: Rc<str> = demangle(&sym.name).into();
    let mut names: Vec<Rc<str>> =
        sym.inlined.iter().rev().map(|f| Rc::from(demangle(&f.name))).collect();
    names.push(outer);
    r.shown = false;
    for n in names {
        if n == elf {
            r.shown = true;
        } else {
            r.inlined.push(n);
        }
    }
    if !r.shown && r.inlined.is_empty() {
        r.shown = true;
    }
}

/// What is read from a mapped ELF file.
struct ElfInfo {
    build_id: Option<Vec<u8>>,
    has_symtab: bool,
    segments: Vec<(u64, u64, u64)>,
}

impl ElfInfo {
    fn read(path: &Path) -> Option<ElfInfo> {
        let file = std::fs::File::open(path).ok()?;
        let data = object::ReadCache::new(file);
        let obj = object::File::parse(&data).ok()?;
        let segments = obj
            .segments()
            .map(|s| {
                let (off, size) = s.file_range();
                (off, size, s.address())
            })
            .collect();
        let has_symtab = obj
            .section_by_name(".symtab")
            .is_some_and(|s| s.size() > 0 && s.file_range().is_some());
        let build_id = obj.build_id().ok().flatten().map(<[u8]>::to_vec);
        Some(ElfInfo { build_id, has_symtab, segments })
    }
}

/// The separate debug file of the ELF with this build id, where distributions put it
/// (`/usr/lib/debug/.build-id/xx/rest.debug`) or perf's cache has it.
fn debug_file(build_id: &[u8]) -> Option<PathBuf> {
    if build_id.len() < 2 {
        return None;
    }
    let h = hex(build_id);
    let mut c =
        vec![PathBuf::from(format!("/usr/lib/debug/.build-id/{}/{}.debug", &h[..2], &h[2..]))];
    if let Some(d) = home_debug() {
        c.push(d.join(".build-id").join(&h[..2]).join(&h[2..]).join("debug"));
    }
    c.into_iter().find(|p| ElfInfo::read(p).is_some_and(|e| e.has_symtab))
}

/// perf's build-id cache directory.
fn home_debug() -> Option<PathBuf> {
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".debug"))
}

fn running_release() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/osrelease").ok().map(|s| s.trim().to_string())
}

fn hex(b: &[u8]) -> String {
    b.iter().fold(String::new(), |mut s, x| {
        let _ = write!(s, "{x:02x}");
        s
    })
}

/// `/tmp/perf-PID.map` lines: `START SIZE name` (hex, no 0x needed), sorted by start.
fn parse_perf_map(text: &str) -> Vec<(u64, u64, Rc<str>)> {
    let mut v: Vec<(u64, u64, Rc<str>)> = text
        .lines()
        .filter_map(|l| {
            let mut it = l.splitn(3, ' ');
            let num = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
            let start = num(it.next()?)?;
            let size = num(it.next()?)?;
            let name = it.next()?.trim();
            Some((start, start.saturating_add(size), demangle(name).into()))
        })
        .collect();
    v.sort_by_key(|f| f.0);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perf_maps_parse() {
        let m = parse_perf_map("7f0000001000 20 jit_a\n0x7f0000000000 100 Interp::run\nbad\n");
        assert_eq!(m.len(), 2);
        assert_eq!((m[0].0, m[0].1, &*m[0].2), (0x7f0000000000, 0x7f0000000100, "Interp::run"));
        assert_eq!(&*m[1].2, "jit_a");
    }
}
