//! Page faults from a recording of either door.
//!
//! - The tracepoints `exceptions:page_fault_user` and `page_fault_kernel` (x86; in a
//!   trace.dat or as perf.data tracepoint samples): per task, by kind (the x86 error code's
//!   bits: read/write/instruction fetch, page not present or protection fault), the pages
//!   and instruction addresses that fault most (kernel ones named from the file's kallsyms),
//!   and, when `filemap:mm_filemap_fault` was recorded, the files whose pages were faulted
//!   through the page cache (device and inode).
//! - perf's software events `major-faults`/`minor-faults` (or `page-faults`) in a perf.data
//!   (`tp record -e major-faults -e minor-faults`, `perf record -e major-faults -d`): major
//!   vs minor per task, per mapping or file (the faulting address, `PERF_SAMPLE_ADDR`, looked
//!   up in the file's MMAP/MMAP2 records), the most faulted pages, the faulting instructions
//!   and functions and, when stacks were recorded (`-g`, `--call-graph dwarf`), the call
//!   paths, all named as `perf script` names them (tp_symbols, `tp report`'s).
//!
//! When a perf.data has both, the software events are the count (they say major or minor)
//! and the tracepoints add the kinds. `tp faults -- CMD` records both into one perf.data,
//! every fault sampled, with call stacks (`-g`).
//!
//! What a recording cannot tell, and the report says: how long a fault took (there is no
//! fault-exit tracepoint); from a trace.dat, whether a fault was major or minor (the kernel
//! decides after the tracepoints fire) and which mapping an address is in (it holds no
//! `/proc/PID/maps`).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use tp_format::maps::{display_name, Maps};
use tp_format::perfdata::attr::event_type;
use tp_format::perfdata::{misc, sample, Sample};
use tp_symbols::Frame;

use tp_format::render::push_json_str;

use crate::timeline::{Coverage, Ev, Event, IntField, Summary, Timeline};
use crate::{Error, Result, Select, TaskFilter};

/// x86 page-fault error code bits (arch/x86/include/asm/trap_pf.h).
const PF_PROT: u64 = 1 << 0;
const PF_WRITE: u64 = 1 << 1;
const PF_INSTR: u64 = 1 << 4;

/// Fault counts by kind.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Faults (of the file's counting source: the software events when it has them, else
    /// the tracepoints).
    pub faults: u64,
    /// Faults taken in user mode (page_fault_user).
    pub user: u64,
    /// Faults taken in kernel mode (page_fault_kernel), e.g. copying to or from user memory.
    pub kernel: u64,
    pub write: u64,
    pub instr: u64,
    /// Protection faults (the page was present: copy-on-write, write to read-only...).
    pub prot: u64,
    /// Software events: major (the page was read from disk) and minor faults.
    pub major: u64,
    pub minor: u64,
}

impl Counts {
    fn add_tracepoint(&mut self, counted: bool, kernel: bool, error_code: u64) {
        self.faults += counted as u64;
        if kernel {
            self.kernel += 1;
        } else {
            self.user += 1;
        }
        self.write += (error_code & PF_WRITE != 0) as u64;
        self.instr += (error_code & PF_INSTR != 0) as u64;
        self.prot += (error_code & PF_PROT != 0) as u64;
    }

    fn add_sample(&mut self, major: Option<bool>) {
        self.faults += 1;
        match major {
            Some(true) => self.major += 1,
            Some(false) => self.minor += 1,
            None => {}
        }
    }
}

/// Faults in one mapping or file.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct MapCounts {
    pub faults: u64,
    pub major: u64,
    pub minor: u64,
}

/// The faults summary, fed one fault at a time.
#[derive(Debug, Default)]
pub struct Stats {
    /// Software fault events are the count (tracepoints then only add kinds).
    pub by_samples: bool,
    /// Major vs minor is known (the software events of both were recorded).
    pub split: bool,
    /// Fault kinds are known (the exceptions tracepoints were recorded).
    pub kinds: bool,
    pub total: Counts,
    pub tasks: BTreeMap<i32, Counts>,
    /// Faulting pages (address rounded down to 4 KiB), with (user, kernel) counts.
    pub pages: HashMap<u64, (u64, u64)>,
    /// Faulting instruction addresses, with whether they are kernel addresses, and the
    /// process (for user addresses: whose mappings name them; 0 for kernel ones).
    pub ips: HashMap<(u64, bool, i32), u64>,
    /// Faults through the page cache per file: (device, inode) -> count.
    pub files: BTreeMap<(u64, u64), u64>,
    /// Software events: faults per mapping or file the address is in.
    pub mappings: BTreeMap<String, MapCounts>,
    /// Software events with stacks: faults per process and call path (innermost first).
    pub stacks: HashMap<(i32, Vec<u64>), u64>,
    /// Samples whose period was not 1 (each stands for several faults).
    pub sampled: u64,
    /// perf.data, symbolized: names of instructions and call paths, as first seen.
    pub ip_names: HashMap<(u64, bool, i32), String>,
    pub stack_names: HashMap<(i32, Vec<u64>), String>,
    /// perf.data, symbolized: faults per function (the faulting instruction's).
    pub functions: HashMap<String, u64>,
    /// The processes' mappings as the recording described them (to name addresses).
    pub maps: Maps,
}

impl Stats {
    pub fn fault(
        &mut self,
        pid: i32,
        kernel: bool,
        address: u64,
        ip: u64,
        error_code: u64,
        mapping: Option<&str>,
    ) {
        let counted = !self.by_samples;
        self.total.add_tracepoint(counted, kernel, error_code);
        self.tasks.entry(pid).or_default().add_tracepoint(counted, kernel, error_code);
        if !counted {
            return;
        }
        let p = self.pages.entry(address & !0xfff).or_default();
        if kernel {
            p.1 += 1;
        } else {
            p.0 += 1;
        }
        // page_fault_kernel's ip is in the kernel; page_fault_user's in user space.
        let process = if kernel { 0 } else { pid };
        *self.ips.entry((ip, kernel, process)).or_default() += 1;
        if let Some(m) = mapping {
            self.mappings.entry(m.to_string()).or_default().faults += 1;
        }
    }

    /// A software fault event's sample: task `tid` of process `pid`, `major` when the
    /// event says, the address's `mapping` when known.
    #[allow(clippy::too_many_arguments)]
    pub fn sample(
        &mut self,
        tid: i32,
        pid: i32,
        major: Option<bool>,
        address: Option<u64>,
        ip: Option<(u64, bool)>,
        mapping: Option<&str>,
        stack: Option<Vec<u64>>,
    ) {
        self.total.add_sample(major);
        self.tasks.entry(tid).or_default().add_sample(major);
        if let Some(ip) = ip {
            *self.ips.entry((ip.0, ip.1, if ip.1 { 0 } else { pid })).or_default() += 1;
        }
        if let Some(a) = address {
            let p = self.pages.entry(a & !0xfff).or_default();
            if ip.is_some_and(|i| i.1) {
                p.1 += 1;
            } else {
                p.0 += 1;
            }
            let m = self.mappings.entry(mapping.unwrap_or("[unknown]").to_string()).or_default();
            m.faults += 1;
            match major {
                Some(true) => m.major += 1,
                Some(false) => m.minor += 1,
                None => {}
            }
        }
        if let Some(s) = stack {
            *self.stacks.entry((pid, s)).or_default() += 1;
        }
    }

    pub fn filemap(&mut self, dev: u64, ino: u64) {
        *self.files.entry((dev, ino)).or_default() += 1;
    }

    /// The `n` entries with the highest counts (ties: lowest key first).
    fn top<K: Ord + Clone>(map: impl Iterator<Item = (K, u64)>, n: usize) -> Vec<(K, u64)> {
        let mut v: Vec<_> = map.collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v.truncate(n);
        v
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Other,
    Fault { kernel: bool, address: IntField, ip: IntField, error: IntField },
    Filemap { dev: IntField, ino: IntField },
}

/// What a perf.data event is to this analysis.
#[derive(Clone, Copy, PartialEq, Eq)]
enum SampleKind {
    Other,
    /// A fault event that counts: `Some(true)` major-faults, `Some(false)` minor-faults,
    /// `None` page-faults (not split).
    Fault(Option<bool>),
}

/// perf's software event configs (PERF_COUNT_SW_*).
const SW_PAGE_FAULTS: u64 = 2;
const SW_PAGE_FAULTS_MIN: u64 = 5;
const SW_PAGE_FAULTS_MAJ: u64 = 6;

/// The events to record for this analysis (through perf_event_open, every fault sampled,
/// with call stacks).
pub const EVENTS: &[&str] =
    &["major-faults", "minor-faults", "exceptions:page_fault_user", "exceptions:page_fault_kernel"];

/// The faults summary of the window `select` of `tl` (whose perf.data samples are named by
/// tp_symbols: functions, files, unwound stacks).
pub fn analyze(tl: &mut Timeline, select: &Select) -> Result<Summary<Stats>> {
    tl.symbolize = true;
    let tl = &*tl;
    let mut plan = Plan::of(tl)?;
    let mut pass = Pass {
        tl,
        wanted: TaskFilter::new(select),
        stats: Stats {
            by_samples: plan.by_samples,
            split: plan.major && plan.minor,
            kinds: plan.tracepoints > 0,
            ..Stats::default()
        },
        maps: Maps::default(),
        plan: &plan,
    };
    let coverage = tl.run(select, |ev| pass.on(ev))?;
    let Pass { mut stats, maps, .. } = pass;
    let mut missing = std::mem::take(&mut plan.missing);
    if stats.sampled > 0 {
        missing.push(format!("every fault: {} samples stand for several faults each (their period > 1); the counts are samples (record with --period 1, as tp faults -- CMD does)", stats.sampled));
    }
    stats.maps = maps;
    Ok(Summary { stats, coverage, missing })
}

/// What the recording holds for this analysis: what each event is, and what is missing.
struct Plan {
    /// Per tracepoint ID.
    kinds: Vec<Kind>,
    /// Per perf.data event (attr).
    sample_kinds: Vec<SampleKind>,
    /// Faults come from perf's software fault events (else from the tracepoints).
    by_samples: bool,
    /// major-faults, minor-faults recorded.
    major: bool,
    minor: bool,
    /// exceptions:page_fault_* tracepoints found.
    tracepoints: usize,
    missing: Vec<String>,
}

impl Plan {
    fn of(tl: &Timeline) -> Result<Plan> {
        let sw = |config: u64| {
            tl.perf_attrs.iter().any(|a| a.type_ == event_type::SOFTWARE && a.config == config)
        };
        let (major, minor) = (sw(SW_PAGE_FAULTS_MAJ), sw(SW_PAGE_FAULTS_MIN));
        // Software fault events: major/minor when either is there, else page-faults.
        let sample_kinds: Vec<SampleKind> = tl
            .perf_attrs
            .iter()
            .map(|a| match (a.type_ == event_type::SOFTWARE, a.config) {
                (true, SW_PAGE_FAULTS_MAJ) => SampleKind::Fault(Some(true)),
                (true, SW_PAGE_FAULTS_MIN) => SampleKind::Fault(Some(false)),
                (true, SW_PAGE_FAULTS) if !(major || minor) => SampleKind::Fault(None),
                _ => SampleKind::Other,
            })
            .collect();
        let by_samples = sample_kinds.iter().any(|k| *k != SampleKind::Other);
        let mut plan = Plan {
            kinds: vec![Kind::Other; u16::MAX as usize + 1],
            sample_kinds,
            by_samples,
            major,
            minor,
            tracepoints: 0,
            missing: Vec::new(),
        };
        plan.fault_tracepoints(tl);
        if plan.tracepoints == 0 && !by_samples {
            return Err(Error::Missing {
                input: tl.input().to_string(),
                what: "page-fault events (exceptions:page_fault_user/page_fault_kernel, or perf's major-faults/minor-faults/page-faults): record with -e exceptions, or -e major-faults -e minor-faults (nothing to analyse)".into(),
            });
        }
        plan.filemap_tracepoint(tl);
        if by_samples {
            plan.missing_from_samples(tl);
        } else {
            plan.missing.push("major/minor, fault duration and stacks: not in a recording of tracepoints (record -e major-faults -e minor-faults through perf_event_open, or tp faults -- CMD)".into());
            if !tl.saved_maps() {
                plan.missing.push("mappings: the file holds none (tp record saves the maps of -p and -- CMD processes)".into());
            }
        }
        Ok(plan)
    }

    /// exceptions:page_fault_user and page_fault_kernel, when the recording has them.
    fn fault_tracepoints(&mut self, tl: &Timeline) {
        let be = tl.big_endian;
        for (name, kernel) in [("page_fault_user", false), ("page_fault_kernel", true)] {
            let fault = tl.event("exceptions", name).and_then(|f| {
                let kind = Kind::Fault {
                    kernel,
                    address: IntField::of(f, "address", be)?,
                    ip: IntField::of(f, "ip", be)?,
                    error: IntField::of(f, "error_code", be)?,
                };
                Some((u16::try_from(f.id).ok()?, kind))
            });
            match fault {
                Some((id, k)) => {
                    self.kinds[id as usize] = k;
                    self.tracepoints += 1;
                }
                None => self.missing.push(format!(
                    "exceptions:{name}: {} (record with -e exceptions)",
                    if self.by_samples {
                        "fault kinds (write/exec/prot, user/kernel mode) are unknown"
                    } else {
                        "its faults are not counted"
                    }
                )),
            }
        }
    }

    /// filemap:mm_filemap_fault (faults per file), when the recording has it.
    fn filemap_tracepoint(&mut self, tl: &Timeline) {
        let be = tl.big_endian;
        let filemap = tl.event("filemap", "mm_filemap_fault").and_then(|f| {
            let kind = Kind::Filemap {
                dev: IntField::of(f, "s_dev", be)?,
                ino: IntField::of(f, "i_ino", be)?,
            };
            Some((u16::try_from(f.id).ok()?, kind))
        });
        match filemap {
            Some((id, k)) => self.kinds[id as usize] = k,
            None if !self.by_samples => {
                self.missing.push("filemap:mm_filemap_fault: faults per file are unknown".into())
            }
            None => {}
        }
    }

    /// What perf's fault samples of this recording cannot tell.
    fn missing_from_samples(&mut self, tl: &Timeline) {
        let with = |bit: u64| {
            tl.perf_attrs
                .iter()
                .zip(&self.sample_kinds)
                .any(|(a, k)| *k != SampleKind::Other && a.sample_type & bit != 0)
        };
        let (addr, callchain) = (with(sample::ADDR), with(sample::CALLCHAIN));
        let missing = &mut self.missing;
        if !(self.major || self.minor) {
            missing.push(
                "major/minor: only page-faults was recorded (record major-faults and minor-faults)"
                    .into(),
            );
        } else if !(self.major && self.minor) {
            missing.push(format!(
                "{}: not recorded",
                if self.major { "minor-faults" } else { "major-faults" }
            ));
        }
        if !addr {
            missing.push("faulting addresses (PERF_SAMPLE_ADDR; perf record -d): pages and mappings are unknown".into());
        }
        if !callchain {
            missing.push("call paths: no stacks recorded (-g)".into());
        }
        missing.push("fault duration: no event marks a fault's end".into());
    }
}

/// One pass over the window: each fault counted, the address spaces followed.
struct Pass<'a> {
    tl: &'a Timeline,
    plan: &'a Plan,
    wanted: TaskFilter<'a>,
    stats: Stats,
    maps: Maps,
}

impl Pass<'_> {
    fn on(&mut self, ev: Ev<'_>) {
        match ev {
            Ev::Event(e) => self.event(&e),
            Ev::Sample { attr, sample, frames, names } => {
                let SampleKind::Fault(major) = self.plan.sample_kinds[attr] else { return };
                let tid = sample.tid.or(sample.pid).unwrap_or(0) as i32;
                if self.wanted.wants(tid, names) {
                    self.sample(sample, tid, major, frames);
                }
            }
            Ev::Mmap { map, .. } => {
                self.maps.map(map.pid as i32, map.addr, map.len, map.pgoff, map.filename)
            }
            Ev::Exec { pid } => self.maps.exec(pid),
            Ev::Fork { pid, parent } => self.maps.fork(pid, parent),
            Ev::Lost { .. } => {}
        }
    }

    /// A fault or filemap tracepoint's event.
    fn event(&mut self, e: &Event<'_>) {
        let kind = self.plan.kinds[e.id as usize];
        if matches!(kind, Kind::Other) || !self.wanted.wants(e.pid, e.names) {
            return;
        }
        match kind {
            Kind::Fault { kernel, address, ip, error } => {
                let address = address.get(e.data) as u64;
                // Mappings are per process: a thread's is its thread group's.
                let process = self.tl.cmdlines.tgid(e.pid).unwrap_or(e.pid);
                let maps = &self.maps;
                let mapping = (!maps.is_empty()).then(|| mapping_name(maps, process, address));
                self.stats.fault(
                    e.pid,
                    kernel,
                    address,
                    ip.get(e.data) as u64,
                    error.get(e.data) as u64,
                    mapping.as_deref(),
                )
            }
            Kind::Filemap { dev, ino } => {
                self.stats.filemap(dev.get(e.data) as u64, ino.get(e.data) as u64)
            }
            Kind::Other => {}
        }
    }

    /// A software fault event's sample of task `tid`, with its named stack.
    fn sample(&mut self, s: &Sample<'_>, tid: i32, major: Option<bool>, frames: &[Frame]) {
        let stats = &mut self.stats;
        let pid = s.pid.unwrap_or(tid as u32) as i32;
        if s.period.is_some_and(|p| p != 1) {
            stats.sampled += 1;
        }
        let kernel = matches!(s.misc & misc::CPUMODE_MASK, misc::KERNEL | misc::GUEST_KERNEL);
        let mapping = s.addr.map(|a| mapping_name(&self.maps, pid, a));
        let has_stack = s.callchain.is_some() || s.stack_user.is_some();
        let stack: Option<Vec<u64>> =
            (has_stack && !frames.is_empty()).then(|| frames.iter().map(|f| f.ip).collect());
        if let Some(k) = &stack {
            stats
                .stack_names
                .entry((pid, k.clone()))
                .or_insert_with(|| frames.iter().map(frame_text).collect::<Vec<_>>().join(" <- "));
        }
        let ip = s.ip.map(|ip| (ip, kernel));
        if let (Some((ip, k)), Some(f)) = (ip, frames.first()) {
            let key = (ip, k, if k { 0 } else { pid });
            stats.ip_names.entry(key).or_insert_with(|| frame_text(f));
            *stats.functions.entry(function_text(f)).or_default() += 1;
        }
        stats.sample(tid, pid, major, s.addr, ip, mapping.as_deref(), stack);
    }
}

/// The summary as tables of `top` rows, with what the window held.
pub fn write_text(out: &mut String, summary: &Summary<Stats>, tl: &Timeline, top: usize) {
    let stats = &summary.stats;
    write_tables(out, stats, &namer(stats, tl), &summary.coverage, top);
    tl.write_coverage(out, &summary.coverage, &summary.missing);
}

/// The summary as one JSON object (every task; `top` rows of the other tables).
pub fn write_json(out: &mut String, summary: &Summary<Stats>, tl: &Timeline, top: usize) {
    let stats = &summary.stats;
    write_object(out, stats, &namer(stats, tl), &summary.coverage, &summary.missing, top);
}

fn namer<'a>(stats: &'a Stats, tl: &'a Timeline) -> Namer<'a> {
    Namer { tl, maps: &stats.maps, ip_names: &stats.ip_names, stack_names: &stats.stack_names }
}

/// A frame as `function+0xOFF (file)`, the file by its base name (`[unknown]` parts as
/// perf prints them).
fn frame_text(f: &tp_symbols::Frame) -> String {
    let mut s = String::new();
    f.sym.symbol(&mut s);
    let dso = f.sym.dso.rsplit('/').next().unwrap_or(&f.sym.dso);
    s.push_str(&format!(" ({dso})"));
    s
}

/// A frame's function as `function (file)`.
fn function_text(f: &tp_symbols::Frame) -> String {
    let dso = f.sym.dso.rsplit('/').next().unwrap_or(&f.sym.dso);
    format!("{} ({dso})", f.sym.name.as_deref().unwrap_or("[unknown]"))
}

/// The mapping or file `addr` is in, in process `pid`.
fn mapping_name(maps: &Maps, pid: i32, addr: u64) -> String {
    match maps.find(pid, addr) {
        Some(m) => display_name(&m.name).to_string(),
        None if addr >= 1 << 63 => "[kernel]".to_string(),
        None => "[unknown]".to_string(),
    }
}

/// What names addresses: the file's kallsyms (kernel), the mappings (user).
struct Namer<'a> {
    tl: &'a Timeline,
    maps: &'a Maps,
    /// Names tp_symbols gave (perf.data).
    ip_names: &'a HashMap<(u64, bool, i32), String>,
    stack_names: &'a HashMap<(i32, Vec<u64>), String>,
}

impl Namer<'_> {
    /// `sym+0x12` for a kernel address the kallsyms know, `file+0x34` for a user address in
    /// a file mapping, else `0x7f..`.
    fn ip(&self, ip: u64, kernel: bool, pid: i32) -> String {
        if let Some(n) = self.ip_names.get(&(ip, kernel, if kernel { 0 } else { pid })) {
            return n.clone();
        }
        if kernel {
            if let Some(r) = self.tl.kallsyms().resolve(ip) {
                return format!("{}+{:#x}", r.name, r.offset);
            }
        } else if let Some(m) = self.maps.find(pid, ip) {
            if m.name.starts_with('/') {
                let base = m.name.rsplit('/').next().unwrap_or(&m.name);
                return format!("{base}+{:#x}", ip - m.start + m.pgoff);
            }
        }
        format!("{ip:#x}")
    }
}

/// `dev=M:m` as the kernel prints it (`MAJOR`/`MINOR` of a kernel dev_t: 12/20 bits).
fn dev_name(dev: u64) -> String {
    format!("{}:{}", dev >> 20, dev & ((1 << 20) - 1))
}

/// A call path of process `pid`, innermost first, as `a <- b <- c`.
fn stack_name(names: &Namer<'_>, pid: i32, stack: &[u64]) -> String {
    if let Some(n) = names.stack_names.get(&(pid, stack.to_vec())) {
        return n.clone();
    }
    let kernel = |a: u64| a >= 1 << 63;
    stack.iter().map(|&a| names.ip(a, kernel(a), pid)).collect::<Vec<_>>().join(" <- ")
}

fn write_tables(out: &mut String, stats: &Stats, names: &Namer<'_>, cov: &Coverage, top: usize) {
    let tl = names.tl;
    let cell = |known: bool, v: u64| if known { v.to_string() } else { "-".to_string() };
    let head = |out: &mut String, first: &str| {
        let _ = writeln!(
            out,
            "{first:<26} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
            "faults", "major", "minor", "user", "kernel", "write", "exec", "prot"
        );
    };
    let row = |out: &mut String, label: &str, c: &Counts| {
        let (s, k) = (stats.split, stats.kinds);
        let _ = writeln!(
            out,
            "{label:<26} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
            c.faults,
            cell(s, c.major),
            cell(s, c.minor),
            cell(k, c.user),
            cell(k, c.kernel),
            cell(k, c.write),
            cell(k, c.instr),
            cell(k, c.prot)
        );
    };
    head(out, "task");
    let tasks = Stats::top(stats.tasks.iter().map(|(p, c)| (*p, c.faults)), usize::MAX);
    for (pid, _) in tasks.iter().take(top) {
        row(out, &format!("{}:{}", tl.comm(cov, *pid), pid), &stats.tasks[pid]);
    }
    if tasks.len() > top {
        let _ = writeln!(out, "({} more tasks; --top N or --json)", tasks.len() - top);
    }
    row(out, "total", &stats.total);
    let _ = writeln!(
        out,
        "(major: the page was read from disk; user/kernel: the mode the fault was taken in; write/exec/prot: the error code's bits, prot = the page was present; -: not recorded)"
    );
    if !stats.mappings.is_empty() {
        let _ = writeln!(out, "\nfaults per mapping (the faulting address's file or mapping):");
        for (name, n) in Stats::top(stats.mappings.iter().map(|(k, m)| (k.clone(), m.faults)), top)
        {
            let m = stats.mappings[&name];
            let _ = writeln!(
                out,
                "  {:<50} {n:>9}  (major {}, minor {})",
                name,
                cell(stats.split, m.major),
                cell(stats.split, m.minor)
            );
        }
    }
    let _ = writeln!(out, "\nmost faulted pages:");
    for (page, n) in Stats::top(stats.pages.iter().map(|(p, (u, k))| (*p, u + k)), top) {
        let (u, k) = stats.pages[&page];
        let _ = writeln!(out, "  {page:#018x} {n:>9}  (user {u}, kernel {k})");
    }
    let _ = writeln!(out, "\nmost faulting instructions:");
    for ((ip, kernel, pid), n) in Stats::top(stats.ips.iter().map(|(k, n)| (*k, *n)), top) {
        let _ = writeln!(
            out,
            "  {:<40} {n:>9}  {}",
            names.ip(ip, kernel, pid),
            if kernel { "kernel" } else { "user" }
        );
    }
    if !stats.functions.is_empty() {
        let _ = writeln!(out, "\nmost faulting functions:");
        for (f, n) in Stats::top(stats.functions.iter().map(|(k, n)| (k.clone(), *n)), top) {
            let _ = writeln!(out, "  {f:<50} {n:>9}");
        }
    }
    if !stats.stacks.is_empty() {
        let _ = writeln!(out, "\nmost faulting call paths (innermost first):");
        for ((pid, stack), n) in Stats::top(stats.stacks.iter().map(|(k, n)| (k.clone(), *n)), top)
        {
            let comm = tl.comm(cov, pid);
            let _ = writeln!(out, "  {n:>9}  {comm}:{pid}  {}", stack_name(names, pid, &stack));
        }
    }
    if !stats.files.is_empty() {
        let _ = writeln!(out, "\nfaults through the page cache (filemap_fault) per file:");
        for ((dev, ino), n) in Stats::top(stats.files.iter().map(|(k, n)| (*k, *n)), top) {
            let _ = writeln!(out, "  dev {} inode {ino:<12} {n:>9}", dev_name(dev));
        }
    }
}

fn write_object(
    out: &mut String,
    stats: &Stats,
    names: &Namer<'_>,
    cov: &Coverage,
    missing: &[String],
    top: usize,
) {
    let tl = names.tl;
    let opt = |known: bool, v: u64| if known { v.to_string() } else { "null".to_string() };
    let counts = |out: &mut String, c: &Counts| {
        let (s, k) = (stats.split, stats.kinds);
        let _ = write!(
            out,
            "\"faults\":{},\"major\":{},\"minor\":{},\"user\":{},\"kernel\":{},\"write\":{},\"exec\":{},\"prot\":{}",
            c.faults,
            opt(s, c.major),
            opt(s, c.minor),
            opt(k, c.user),
            opt(k, c.kernel),
            opt(k, c.write),
            opt(k, c.instr),
            opt(k, c.prot)
        );
    };
    out.push_str("{\"total\":{");
    counts(out, &stats.total);
    out.push_str("},\"tasks\":[");
    for (i, (pid, c)) in stats.tasks.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{{\"pid\":{pid},\"comm\":");
        push_json_str(out, tl.comm(cov, *pid));
        out.push(',');
        counts(out, c);
        out.push('}');
    }
    out.push_str("],\"mappings\":[");
    for (i, (name, m)) in stats.mappings.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"mapping\":");
        push_json_str(out, name);
        let _ = write!(
            out,
            ",\"faults\":{},\"major\":{},\"minor\":{}}}",
            m.faults,
            opt(stats.split, m.major),
            opt(stats.split, m.minor)
        );
    }
    out.push_str("],\"pages\":[");
    for (i, (page, n)) in
        Stats::top(stats.pages.iter().map(|(p, (u, k))| (*p, u + k)), top).into_iter().enumerate()
    {
        if i > 0 {
            out.push(',');
        }
        let (u, k) = stats.pages[&page];
        let _ = write!(out, "{{\"page\":{page},\"faults\":{n},\"user\":{u},\"kernel\":{k}}}");
    }
    out.push_str("],\"ips\":[");
    for (i, ((ip, kernel, pid), n)) in
        Stats::top(stats.ips.iter().map(|(k, n)| (*k, *n)), top).into_iter().enumerate()
    {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{{\"ip\":{ip},\"kernel\":{kernel},\"name\":");
        push_json_str(out, &names.ip(ip, kernel, pid));
        let _ = write!(out, ",\"faults\":{n}}}");
    }
    out.push_str("],\"functions\":[");
    for (i, (f, n)) in Stats::top(stats.functions.iter().map(|(k, n)| (k.clone(), *n)), top)
        .into_iter()
        .enumerate()
    {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"function\":");
        push_json_str(out, &f);
        let _ = write!(out, ",\"faults\":{n}}}");
    }
    out.push_str("],\"stacks\":[");
    for (i, ((pid, stack), n)) in
        Stats::top(stats.stacks.iter().map(|(k, n)| (k.clone(), *n)), top).into_iter().enumerate()
    {
        if i > 0 {
            out.push(',');
        }
        let addrs: Vec<String> = stack.iter().map(|a| a.to_string()).collect();
        let _ = write!(
            out,
            "{{\"pid\":{pid},\"faults\":{n},\"addresses\":[{}],\"names\":",
            addrs.join(",")
        );
        push_json_str(out, &stack_name(names, pid, &stack));
        out.push('}');
    }
    out.push_str("],\"files\":[");
    for (i, ((dev, ino), n)) in stats.files.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{{\"dev\":");
        push_json_str(out, &dev_name(*dev));
        let _ = write!(out, ",\"inode\":{ino},\"faults\":{n}}}");
    }
    out.push_str("],");
    tl.json_coverage(out, cov, missing);
    out.push_str("}\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_task_kind_page_and_ip() {
        let mut s = Stats::default();
        s.fault(1, false, 0x1000_0010, 0x400000, PF_WRITE, None); // write, not present
        s.fault(1, false, 0x1000_0ff0, 0x400000, PF_WRITE | PF_PROT, None); // copy-on-write
        s.fault(1, false, 0x2000_0000, 0x2000_0000, PF_INSTR, None);
        s.fault(2, true, 0x1000_0000, 0xffff_ffff_8100_0000, PF_WRITE, None);
        s.filemap(8 << 20 | 1, 42);
        let c = s.tasks[&1];
        assert_eq!((c.faults, c.user, c.kernel, c.write, c.instr, c.prot), (3, 3, 0, 2, 1, 1));
        assert_eq!(s.total.faults, 4);
        assert_eq!(s.pages[&0x1000_0000], (2, 1));
        assert_eq!(
            Stats::top(s.ips.iter().map(|(k, n)| (*k, *n)), 1),
            vec![((0x400000, false, 1), 2)]
        );
        assert_eq!(dev_name(8 << 20 | 1), "8:1");
        assert_eq!(s.files[&(8 << 20 | 1, 42)], 1);
    }

    #[test]
    fn samples_count_and_tracepoints_add_kinds() {
        let mut s = Stats { by_samples: true, split: true, kinds: true, ..Stats::default() };
        s.sample(
            7,
            5,
            Some(true),
            Some(0x5000_0123),
            Some((0x40_1000, false)),
            Some("/data/f"),
            None,
        );
        s.sample(
            7,
            5,
            Some(false),
            Some(0x5000_1000),
            Some((0x40_1000, false)),
            Some("/data/f"),
            Some(vec![1, 2]),
        );
        s.sample(
            8,
            5,
            Some(false),
            Some(0x6000_0000),
            Some((0xffff_ffff_8100_0000, true)),
            Some("[anon]"),
            Some(vec![1, 2]),
        );
        // The same faults seen by the tracepoints: kinds, not counted again.
        s.fault(7, false, 0x5000_0123, 0x40_1000, PF_WRITE, None);
        let c = s.tasks[&7];
        assert_eq!((c.faults, c.major, c.minor, c.user, c.write), (2, 1, 1, 1, 1));
        assert_eq!(s.total.faults, 3);
        assert_eq!(s.mappings["/data/f"], MapCounts { faults: 2, major: 1, minor: 1 });
        assert_eq!(s.pages[&0x6000_0000], (0, 1));
        assert_eq!(s.stacks[&(5, vec![1, 2])], 2);
        assert_eq!(s.ips[&(0x40_1000, false, 5)], 2);
    }
}
