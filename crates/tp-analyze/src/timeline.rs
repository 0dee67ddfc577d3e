//! The merged timeline an analysis reads, from either door's file:
//!
//! - a trace.dat: every flyrecord buffer (the kernel's and each Rust program's), all CPUs
//!   merged by time with the same merger `tp report` uses ([`Records`]), timestamps adjusted
//!   as `tp report` prints them;
//! - a perf.data: its records sorted by time as perf sorts them. Tracepoint samples (their
//!   raw bytes are the ftrace record) come out as the same [`Event`]s as a trace.dat's, so
//!   every analysis reads them unchanged; other samples (software events such as
//!   `major-faults`) and the task's mappings (MMAP/MMAP2) come out as [`Ev::Sample`] and
//!   [`Ev::Mmap`].
//!
//! Either is cut to the `--from/--to` window. What the window lost (the pages'
//! missed-events flags; perf's LOST records) and decoding errors are counted in [`Coverage`]
//! and handed to the analysis, which drops what was in flight on that CPU rather than
//! pairing across a gap.
//!
//! Task names are the names at each event's time ([`Names`]): from the events that name
//! tasks (`sched_switch`'s prev/next, wake-ups, `sched_process_fork`, `task_newtask`,
//! `task_rename`, `sched_process_exec`; perf's COMM and FORK records), falling back to the
//! file's saved cmdlines for a task no event has named yet.
//!
//! Streaming: memory is the merger's few pages per CPU (perf: records of one round),
//! whatever the file's size. A [`Progress`] is told how much of the file has been read.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::fs::File;
use std::path::Path;
use std::rc::Rc;

use tp_format::format::{EventFormat, Field};
use tp_format::perfdata::attr::{event_type, flag};
use tp_format::perfdata::record::Mmap;
use tp_format::perfdata::{PerfData, Record, Sample};
use tp_format::symbols::{Cmdlines, Kallsyms};
use tp_format::tracedat::{BufferKind, Item, PageSource, Records, TraceDat};

use tp_format::render::push_json_str;

use crate::{Error, Result, Select, TimeArg};

/// A merged record's CPU number carries its buffer's index in the bits above these (as in
/// `tp report`'s merge of several buffers).
pub const CPU_BITS: u32 = 24;
const CPU_MASK: u32 = (1 << CPU_BITS) - 1;

/// One event of the window.
#[derive(Debug, Clone, Copy)]
pub struct Event<'a> {
    /// Task names now.
    pub names: &'a Names<'a>,
    /// Index into [`Timeline::buffers`].
    pub buffer: usize,
    /// The CPU (for a Rust program's buffer: its thread's stream).
    pub cpu: u32,
    /// Nanoseconds (when the clock counts them; see [`Timeline::ts_in_ns`]).
    pub ts: u64,
    pub id: u16,
    pub pid: i32,
    /// The record, from `common_type` on.
    pub data: &'a [u8],
}

impl<'a> Event<'a> {
    /// The name of the event's task at its time.
    pub fn comm(&self) -> &'a str {
        self.names.comm(self.pid)
    }
}

/// What the merged stream yields to an analysis.
#[derive(Debug, Clone, Copy)]
pub enum Ev<'a> {
    Event(Event<'a>),
    /// A perf.data sample of an event that is not a tracepoint; `attr` indexes
    /// [`Timeline::perf_attrs`].
    Sample {
        attr: usize,
        sample: &'a Sample<'a>,
        /// With [`Timeline::symbolize`]: the sample's stack named as perf script names it
        /// (tp_symbols: the recorded callchain, a `--call-graph dwarf` user stack
        /// unwound, or the IP alone), innermost first; else empty.
        frames: &'a [tp_symbols::Frame],
        names: &'a Names<'a>,
    },
    /// A perf.data MMAP/MMAP2 record: a mapping in process `map.pid`'s address space.
    Mmap {
        map: &'a Mmap<'a>,
    },
    /// perf.data: process `pid` exec'd (its address space is new) or was forked from
    /// `parent` (it starts with a copy of the parent's).
    Exec {
        pid: i32,
    },
    Fork {
        pid: i32,
        parent: i32,
    },
    /// Events lost on `cpu` of `buffer` (just before that CPU's next event).
    Lost {
        buffer: usize,
        cpu: u32,
    },
}

/// What the analysis saw of the file and what it could not see.
#[derive(Debug, Default, Clone)]
pub struct Coverage {
    /// Events in the window (of every type).
    pub events: u64,
    /// First and last event time in the window.
    pub first: Option<u64>,
    pub last: u64,
    /// Lost events in the window per (buffer, CPU): (known count, gaps of unknown size).
    pub lost: BTreeMap<(usize, u32), (u64, u64)>,
    /// Decoding errors (each also ends what was in flight on its CPU).
    pub errors: Vec<String>,
    /// Each task's last name in the window (from events; see [`Names`]).
    pub names: HashMap<i32, String>,
}

impl Coverage {
    pub fn lost_total(&self) -> (u64, u64) {
        self.lost.values().fold((0, 0), |(a, b), (c, d)| (a + c, b + d))
    }
}

/// An analysis's answer: its statistics, what the window held, and what the recording
/// could not tell it.
#[derive(Debug)]
pub struct Summary<S> {
    pub stats: S,
    pub coverage: Coverage,
    /// What the recording lacks that the answer would need, one sentence each.
    pub missing: Vec<String>,
}

impl<S> Summary<S> {
    /// Whether the whole window was read without a decoding error.
    pub fn read_whole(&self) -> bool {
        self.coverage.errors.is_empty()
    }
}

/// Task names as the events have given them so far, over the file's saved cmdlines.
#[derive(Debug)]
pub struct Names<'t> {
    now: HashMap<i32, String>,
    saved: &'t Cmdlines,
    /// Bumped at every change of a name: a cache of per-task decisions that depend on the
    /// name is stale when this moved.
    pub changes: u64,
}

impl<'t> Names<'t> {
    pub fn new(saved: &'t Cmdlines) -> Names<'t> {
        Names { now: HashMap::new(), saved, changes: 0 }
    }

    /// Task `pid`'s name now (`<...>` when nothing names it).
    pub fn comm(&self, pid: i32) -> &str {
        match self.now.get(&pid) {
            Some(c) => c,
            None => self.saved.comm(pid),
        }
    }

    pub fn set(&mut self, pid: i32, comm: &str) {
        if comm.is_empty() || pid <= 0 {
            return;
        }
        match self.now.get_mut(&pid) {
            Some(c) if c == comm => {}
            Some(c) => {
                c.clear();
                c.push_str(comm);
                self.changes += 1;
            }
            None => {
                self.now.insert(pid, comm.to_string());
                self.changes += 1;
            }
        }
    }
}

/// `--pid`/`--comm` decisions per task, by the task's name at each event; cached until a
/// name changes.
pub struct TaskFilter<'s> {
    select: &'s Select,
    cache: std::collections::HashMap<i32, bool>,
    changes: u64,
}

impl<'s> TaskFilter<'s> {
    pub fn new(select: &'s Select) -> TaskFilter<'s> {
        TaskFilter { select, cache: Default::default(), changes: 0 }
    }

    /// Whether task `pid`, named as `names` has it now, is wanted.
    pub fn wants(&mut self, pid: i32, names: &Names<'_>) -> bool {
        if !self.select.filters_tasks() {
            return true;
        }
        if names.changes != self.changes {
            self.cache.clear();
            self.changes = names.changes;
        }
        *self.cache.entry(pid).or_insert_with(|| self.select.wants_task(pid, names.comm(pid)))
    }
}

/// The events that name tasks, with the fields that say who and what.
#[derive(Debug, Clone)]
enum Naming {
    /// (pid field, comm field) pairs: sched_switch has two, the others one.
    Fields(Vec<(IntField, Field)>),
    /// sched_process_exec: the task (common_pid) takes its file's base name.
    Exec(Field),
}

fn namings(formats: &[EventFormat], be: bool) -> Vec<Option<Box<Naming>>> {
    const PAIRS: &[(&str, &[(&str, &str)])] = &[
        ("sched_switch", &[("prev_pid", "prev_comm"), ("next_pid", "next_comm")]),
        ("sched_wakeup", &[("pid", "comm")]),
        ("sched_waking", &[("pid", "comm")]),
        ("sched_wakeup_new", &[("pid", "comm")]),
        ("sched_process_fork", &[("child_pid", "child_comm")]),
        ("task_newtask", &[("pid", "comm")]),
        ("task_rename", &[("pid", "newcomm")]),
        // The name before an exec (kernels from 6.10), before sched_process_exec's new one.
        ("sched_prepare_exec", &[("pid", "comm")]),
    ];
    let mut m: Vec<Option<Box<Naming>>> = vec![None; u16::MAX as usize + 1];
    for f in formats {
        if f.system != "sched" && f.system != "task" {
            continue;
        }
        let Ok(id) = u16::try_from(f.id) else { continue };
        if f.name == "sched_process_exec" {
            if let Some(file) = f.field("filename") {
                m[id as usize] = Some(Box::new(Naming::Exec(file.clone())));
            }
            continue;
        }
        let Some((_, pairs)) = PAIRS.iter().find(|(n, _)| *n == f.name) else { continue };
        let fields: Vec<(IntField, Field)> = pairs
            .iter()
            .filter_map(|(p, c)| Some((IntField::of(f, p, be)?, f.field(c)?.clone())))
            .collect();
        if !fields.is_empty() {
            m[id as usize] = Some(Box::new(Naming::Fields(fields)));
        }
    }
    m
}

/// The kernel's name for a task that exec'd `path`: its base name, at most 15 bytes.
fn exec_comm(path: &str) -> &str {
    let base = path.rsplit('/').next().unwrap_or(path);
    let mut end = base.len().min(15);
    while !base.is_char_boundary(end) {
        end -= 1;
    }
    &base[..end]
}

/// A perf.data event (attr) as the analyses see it.
#[derive(Debug, Clone)]
pub struct PerfAttr {
    pub type_: u32,
    pub config: u64,
    pub sample_type: u64,
}

// One per analysis: the size difference does not matter.
#[allow(clippy::large_enum_variant)]
enum Source {
    Dat(TraceDat<File>),
    Perf { data: PerfData<File>, formats: Vec<EventFormat>, kallsyms: Kallsyms },
}

/// Told how far a pass over the file has come, in bytes of the file (to draw a progress
/// bar).
pub trait Progress {
    /// The pass reads `total` bytes.
    fn start(&self, total: u64);
    /// At `done` bytes.
    fn at(&self, done: u64);
    /// `n` more bytes read.
    fn advance(&self, n: u64);
    /// The pass is over.
    fn finish(&self);
}

/// An opened trace.dat or perf.data with its formats.
pub struct Timeline {
    src: Source,
    input: String,
    /// What the file's readers had to say on opening it (formats that do not parse, perf's
    /// warnings), each naming the file.
    pub warnings: Vec<String>,
    /// Told of each pass's progress, when set.
    pub progress: Option<Rc<dyn Progress>>,
    /// perf.data: its events (empty for a trace.dat).
    pub perf_attrs: Vec<PerfAttr>,
    /// perf.data: name each sample's stack (set before [`Timeline::run`]; reading the
    /// symbols costs, so only analyses that print them ask).
    pub symbolize: bool,
    /// The events that name tasks, by ID (a table: one look-up per event of the window).
    namings: Vec<Option<Box<Naming>>>,
    /// Event ID -> index into the file's formats.
    by_id: Vec<u32>,
    /// Flyrecord buffers: (index in the file, name; "" for the top level).
    pub buffers: Vec<(usize, String)>,
    pub cmdlines: Cmdlines,
    /// Timestamps count nanoseconds (otherwise: the clock's own units).
    pub ts_in_ns: bool,
    pub clock: String,
    pub big_endian: bool,
}

impl Timeline {
    pub fn open(path: &Path) -> Result<Timeline> {
        let input = path.display().to_string();
        let open = |source| Error::Open { path: path.to_path_buf(), source };
        let mut file = File::open(path).map_err(open)?;
        let mut magic = [0u8; 8];
        let n = std::io::Read::read(&mut file, &mut magic).map_err(open)?;
        std::io::Seek::rewind(&mut file).map_err(open)?;
        if tp_format::perfdata::read::is_perf_data(&magic[..n]) {
            return Timeline::open_perf(file, input);
        }
        let dat = TraceDat::open_file(file).map_err(|source| Error::trace_dat(&input, source))?;
        let warnings = dat
            .format_errors()
            .iter()
            .map(|e| format!("{input}: {e} (its events are left out)"))
            .collect();
        let mut by_id = vec![u32::MAX; u16::MAX as usize + 1];
        for (i, f) in dat.events().iter().enumerate() {
            if let Ok(id) = u16::try_from(f.id) {
                by_id[id as usize] = i as u32;
            }
        }
        let buffers = dat
            .buffers()
            .iter()
            .enumerate()
            .filter(|(_, b)| b.kind == BufferKind::Flyrecord)
            .map(|(i, b)| (i, b.name.clone()))
            .collect();
        let clock = dat.clock().unwrap_or("local").to_string();
        let ts_in_ns = dat.tsc2nsec().is_some() || tp_format::text::clock_is_ns(&clock);
        let cmdlines = dat.cmdlines().clone();
        let big_endian = dat.big_endian();
        let namings = namings(dat.events(), big_endian);
        Ok(Timeline {
            src: Source::Dat(dat),
            input,
            warnings,
            progress: None,
            perf_attrs: Vec::new(),
            symbolize: false,
            namings,
            by_id,
            buffers,
            cmdlines,
            ts_in_ns,
            clock,
            big_endian,
        })
    }

    fn open_perf(file: File, input: String) -> Result<Timeline> {
        let mut data =
            PerfData::open_file(file).map_err(|source| Error::perf_data(&input, source))?;
        let mut warnings: Vec<String> =
            data.warnings.iter().map(|w| format!("{input}: {w}")).collect();
        let tracing = data.features.tracing.take().unwrap_or_default();
        warnings.extend(
            tracing.format_errors.iter().map(|e| format!("{input}: {e} (its events are left out)")),
        );
        let mut by_id = vec![u32::MAX; u16::MAX as usize + 1];
        for (i, f) in tracing.events.iter().enumerate() {
            if let Ok(id) = u16::try_from(f.id) {
                by_id[id as usize] = i as u32;
            }
        }
        let perf_attrs = data
            .attrs
            .iter()
            .map(|a| PerfAttr {
                type_: a.attr.type_,
                config: a.attr.config,
                sample_type: a.attr.sample_type,
            })
            .collect();
        // perf record's default clock is perf's own (sched_clock, in ns); tp record asks
        // for CLOCK_MONOTONIC, tracefs' `mono`.
        let mono = data.attrs.first().is_some_and(|a| {
            a.attr.has(flag::USE_CLOCKID) && a.attr.clockid == libc::CLOCK_MONOTONIC
        });
        let big_endian = tracing.big_endian;
        let namings = namings(&tracing.events, big_endian);
        let mut cmdlines = tracing.tables.cmdlines;
        let kallsyms = tracing.tables.kallsyms;
        for (tid, comm) in comm_records(&data) {
            // Names of tasks no record of the window names: their last in the file.
            if cmdlines.known(tid).is_none() {
                cmdlines.insert(tid, &comm);
            }
        }
        Ok(Timeline {
            src: Source::Perf { data, formats: tracing.events, kallsyms },
            input,
            warnings,
            progress: None,
            perf_attrs,
            symbolize: false,
            namings,
            by_id,
            buffers: vec![(0, String::new())],
            cmdlines,
            ts_in_ns: true,
            clock: if mono { "mono" } else { "perf" }.to_string(),
            big_endian,
        })
    }

    pub fn input(&self) -> &str {
        &self.input
    }

    /// The file's size in bytes.
    pub fn file_len(&self) -> u64 {
        match &self.src {
            Source::Dat(dat) => dat.file_len(),
            Source::Perf { data, .. } => data.file_len(),
        }
    }

    /// Whether the file holds the traced processes' mappings (a trace.dat's PROCMAPS; a
    /// perf.data's MMAP records say for themselves).
    pub fn saved_maps(&self) -> bool {
        match &self.src {
            Source::Dat(dat) => !dat.proc_maps().is_empty(),
            Source::Perf { .. } => false,
        }
    }

    /// The format of `system:name`, if the file has it.
    pub fn event(&self, system: &str, name: &str) -> Option<&EventFormat> {
        self.formats().iter().find(|f| f.system == system && f.name == name)
    }

    /// The format of event `id`.
    pub fn format_of(&self, id: u16) -> Option<&EventFormat> {
        self.formats().get(*self.by_id.get(id as usize)? as usize)
    }

    pub fn formats(&self) -> &[EventFormat] {
        match &self.src {
            Source::Dat(dat) => dat.events(),
            Source::Perf { formats, .. } => formats,
        }
    }

    pub fn kallsyms(&self) -> &Kallsyms {
        match &self.src {
            Source::Dat(dat) => dat.kallsyms(),
            Source::Perf { kallsyms, .. } => kallsyms,
        }
    }

    /// A task's last name in the window (events first, then the file's saved cmdlines;
    /// `<...>` when unknown).
    pub fn comm<'a>(&'a self, cov: &'a Coverage, pid: i32) -> &'a str {
        match cov.names.get(&pid) {
            Some(c) => c,
            None => self.cmdlines.comm(pid),
        }
    }

    /// Update `names` from an event that names tasks.
    fn name_from(&self, names: &mut Names<'_>, id: u16, pid: i32, data: &[u8]) {
        match self.namings[id as usize].as_deref() {
            None => {}
            Some(Naming::Fields(fields)) => {
                for (p, c) in fields {
                    names.set(p.get(data) as i32, str_field(c, data, self.big_endian));
                }
            }
            Some(Naming::Exec(file)) => {
                names.set(pid, exec_comm(str_field(file, data, self.big_endian)))
            }
        }
    }

    /// Feed the window's events and lost-event markers to `sink`, in time order.
    pub fn run(&self, select: &Select, sink: impl FnMut(Ev<'_>)) -> Result<Coverage> {
        match &self.src {
            Source::Dat(dat) => self.run_dat(dat, select, sink),
            Source::Perf { data, .. } => self.run_perf(data, select, sink),
        }
    }

    fn run_dat(
        &self,
        dat: &TraceDat<File>,
        select: &Select,
        mut sink: impl FnMut(Ev<'_>),
    ) -> Result<Coverage> {
        let mut names = Names::new(&self.cmdlines);
        // The traced processes' mappings the recording saved, first.
        for p in dat.proc_maps() {
            // No file offset is stored: offsets are taken from each file's lowest mapping
            // (an ELF file's addresses relative to where it is loaded).
            let mut lowest: HashMap<&str, u64> = HashMap::new();
            for m in &p.maps {
                let l = lowest.entry(m.name.as_str()).or_insert(m.start);
                *l = (*l).min(m.start);
            }
            for m in &p.maps {
                let map = Mmap {
                    pid: p.pid as u32,
                    tid: p.pid as u32,
                    addr: m.start,
                    len: m.end.saturating_sub(m.start),
                    pgoff: m.start - lowest[m.name.as_str()],
                    file: None,
                    prot: 0,
                    flags: 0,
                    filename: &m.name,
                };
                sink(Ev::Mmap { map: &map });
            }
        }
        let mut sources: Vec<(u32, Box<dyn PageSource + '_>)> = Vec::new();
        let mut total = 0;
        for (k, (b, _)) in self.buffers.iter().enumerate() {
            for (i, c) in dat.buffers()[*b].cpus.iter().enumerate() {
                let id = ((k as u32) << CPU_BITS) | c.cpu;
                let inner = dat
                    .page_source(*b, i)
                    .map_err(|source| Error::trace_dat(&self.input, source))?;
                total += c.size;
                match &self.progress {
                    Some(p) => {
                        let (start, last, progress) = (c.offset, c.offset, p.clone());
                        sources.push((id, Box::new(Progressing { inner, start, last, progress })))
                    }
                    None => sources.push((id, inner)),
                }
            }
        }
        if let Some(p) = &self.progress {
            p.start(total.max(1));
        }
        let mut records = Records::new(dat.layout(), sources);
        let mut cov = Coverage::default();
        let mut window: Option<(u64, u64)> = None;
        let be = self.big_endian;
        while let Some(item) = records.next() {
            match item {
                Ok(Item::Event(r)) => {
                    let ts = dat.adjust_ts(r.ts);
                    let (from, to) = *window.get_or_insert_with(|| resolve(select, ts));
                    if ts < from || ts > to || r.data.len() < 8 {
                        continue;
                    }
                    let d = r.data;
                    let (id, pid) = common(d, be);
                    cov.events += 1;
                    cov.first.get_or_insert(ts);
                    cov.last = ts;
                    let (buffer, cpu) = ((r.cpu >> CPU_BITS) as usize, r.cpu & CPU_MASK);
                    self.name_from(&mut names, id, pid, d);
                    sink(Ev::Event(Event { names: &names, buffer, cpu, ts, id, pid, data: d }));
                }
                Ok(Item::Lost(l)) => {
                    let ts = dat.adjust_ts(l.ts);
                    if let Some((from, to)) = window {
                        if ts < from || ts > to {
                            continue;
                        }
                    }
                    let (buffer, cpu) = ((l.cpu >> CPU_BITS) as usize, l.cpu & CPU_MASK);
                    let e = cov.lost.entry((buffer, cpu)).or_default();
                    match l.count {
                        Some(n) => e.0 += n,
                        None => e.1 += 1,
                    }
                    sink(Ev::Lost { buffer, cpu });
                }
                Err(e) => {
                    // A malformed page: what it held is unknown, like lost events.
                    let cpu = match &e.kind {
                        tp_format::tracedat::ErrorKind::Page { cpu, .. } => Some(*cpu),
                        _ => None,
                    };
                    if let Some(cpu) = cpu {
                        let (buffer, cpu) = ((cpu >> CPU_BITS) as usize, cpu & CPU_MASK);
                        sink(Ev::Lost { buffer, cpu });
                    }
                    cov.errors.push(message(&self.input, &e));
                }
            }
        }
        if let Some(p) = &self.progress {
            p.finish();
        }
        cov.names = names.now;
        Ok(cov)
    }

    fn run_perf(
        &self,
        data: &PerfData<File>,
        select: &Select,
        mut sink: impl FnMut(Ev<'_>),
    ) -> Result<Coverage> {
        let mut names = Names::new(&self.cmdlines);
        if let Some(p) = &self.progress {
            p.start(data.data_size.max(1));
        }
        let mut cov = Coverage::default();
        let mut window: Option<(u64, u64)> = None;
        let in_window = |window: &Option<(u64, u64)>, ts: Option<u64>| match (window, ts) {
            (Some((from, to)), Some(ts)) => ts >= *from && ts <= *to,
            _ => true,
        };
        let be = self.big_endian;
        let mut records =
            data.records(true).map_err(|source| Error::perf_data(&self.input, source))?;
        let mut n = 0u64;
        let mut symbols = self
            .symbolize
            .then(|| tp_symbols::Symbols::new(&data.attrs, &data.features, Default::default()));
        let mut frames = Vec::new();
        while let Some(item) = records.next() {
            let item = match item {
                Ok(i) => i,
                Err(e) => {
                    cov.errors.push(format!("{}: {e}", self.input));
                    continue;
                }
            };
            n += 1;
            if n % 4096 == 0 {
                if let Some(p) = &self.progress {
                    p.at(item.raw.offset.saturating_sub(data.data_offset));
                }
            }
            let record = match item.parse() {
                Ok(r) => r,
                Err(e) => {
                    cov.errors.push(format!("{}: {e}", self.input));
                    continue;
                }
            };
            if let Some(s) = symbols.as_mut() {
                s.note(&record);
            }
            match record {
                Record::Sample(s) => {
                    let Some(ts) = s.time else { continue };
                    let (from, to) = *window.get_or_insert_with(|| resolve(select, ts));
                    if ts < from || ts > to {
                        continue;
                    }
                    let Some(attr) = item.event else { continue };
                    cov.events += 1;
                    cov.first.get_or_insert(ts);
                    cov.last = ts;
                    let cpu = s.cpu.unwrap_or(0);
                    match s.raw {
                        Some(d) if self.perf_attrs[attr].type_ == event_type::TRACEPOINT => {
                            if d.len() < 8 {
                                continue;
                            }
                            let (id, pid) = common(d, be);
                            self.name_from(&mut names, id, pid, d);
                            let e = Event { names: &names, buffer: 0, cpu, ts, id, pid, data: d };
                            sink(Ev::Event(e));
                        }
                        _ => {
                            frames.clear();
                            if let Some(sy) = symbols.as_mut() {
                                sy.stack(Some(&data.attrs[attr]), &s, &mut frames);
                            }
                            sink(Ev::Sample { attr, sample: &s, frames: &frames, names: &names })
                        }
                    }
                }
                Record::Mmap(m, id) | Record::Mmap2(m, id) => {
                    // Maps made before the window still describe the address space in it.
                    if window.is_some_and(|(_, to)| id.time.is_some_and(|t| t > to)) {
                        continue;
                    }
                    sink(Ev::Mmap { map: &m });
                }
                Record::Comm { pid, tid, comm, exec, .. } => {
                    names.set(tid as i32, comm);
                    if exec && pid == tid {
                        sink(Ev::Exec { pid: pid as i32 });
                    }
                }
                Record::Fork(t, _) => {
                    if let Some(c) = names.now.get(&(t.ptid as i32)).cloned() {
                        names.set(t.tid as i32, &c);
                    }
                    if t.pid != t.ppid {
                        sink(Ev::Fork { pid: t.pid as i32, parent: t.ppid as i32 });
                    }
                }
                Record::Lost { lost, id, .. } | Record::LostSamples { lost, id } => {
                    if !in_window(&window, id.time) {
                        continue;
                    }
                    let cpu = id.cpu.unwrap_or(0);
                    cov.lost.entry((0, cpu)).or_default().0 += lost;
                    sink(Ev::Lost { buffer: 0, cpu });
                }
                _ => {}
            }
        }
        if let Some(p) = &self.progress {
            p.finish();
        }
        cov.names = names.now;
        Ok(cov)
    }

    /// The lines every analysis ends with: window, lost events, errors, missing events.
    pub fn write_coverage(&self, out: &mut String, cov: &Coverage, missing: &[String]) {
        let _ = writeln!(out);
        match cov.first {
            Some(first) => {
                let _ = writeln!(
                    out,
                    "window: {} .. {} ({} events of every type)",
                    crate::secs(first),
                    crate::secs(cov.last),
                    cov.events
                );
            }
            None => {
                let _ = writeln!(out, "window: no events");
            }
        }
        if !self.ts_in_ns {
            let _ = writeln!(
                out,
                "note: clock {:?} does not count ns; times are in its units",
                self.clock
            );
        }
        let (lost, gaps) = cov.lost_total();
        if lost > 0 || gaps > 0 {
            let per: Vec<String> = cov
                .lost
                .iter()
                .map(|((b, cpu), (n, g))| {
                    let name = &self.buffers[*b].1;
                    let at = if name.is_empty() {
                        format!("CPU{cpu}")
                    } else {
                        format!("{name} stream {cpu}")
                    };
                    if *g > 0 {
                        format!("{at}: {n} (+{g} gaps of unknown size)")
                    } else {
                        format!("{at}: {n}")
                    }
                })
                .collect();
            let _ = writeln!(
                out,
                "LOST events in the window: {lost}{} ({}); what was in flight on those CPUs is left out",
                if gaps > 0 { format!(" + {gaps} gaps of unknown size") } else { String::new() },
                per.join(", ")
            );
        } else {
            let _ = writeln!(out, "lost events in the window: none");
        }
        for m in missing {
            let _ = writeln!(out, "not recorded: {m}");
        }
        for e in &cov.errors {
            let _ = writeln!(out, "error: {e}");
        }
    }

    /// The same as JSON members (`"window":...,"lost":...,"not_recorded":[...],"errors":[...]`).
    pub fn json_coverage(&self, out: &mut String, cov: &Coverage, missing: &[String]) {
        let _ = write!(
            out,
            "\"window\":{{\"first_ns\":{},\"last_ns\":{},\"events\":{}}},\"ts_in_ns\":{},",
            cov.first.map_or("null".into(), |f| f.to_string()),
            if cov.first.is_some() { cov.last.to_string() } else { "null".into() },
            cov.events,
            self.ts_in_ns
        );
        let (lost, gaps) = cov.lost_total();
        let _ = write!(out, "\"lost\":{{\"events\":{lost},\"unknown_gaps\":{gaps},\"per_cpu\":[");
        for (i, ((b, cpu), (n, g))) in cov.lost.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str("{\"buffer\":");
            push_json_str(out, &self.buffers[*b].1);
            let _ = write!(out, ",\"cpu\":{cpu},\"events\":{n},\"unknown_gaps\":{g}}}");
        }
        out.push_str("]},\"not_recorded\":[");
        for (i, m) in missing.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            push_json_str(out, m);
        }
        out.push_str("],\"errors\":[");
        for (i, e) in cov.errors.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            push_json_str(out, e);
        }
        out.push(']');
    }
}

/// An ftrace record's `common_type` and `common_pid` (the record has at least 8 bytes).
fn common(d: &[u8], be: bool) -> (u16, i32) {
    let p = [d[4], d[5], d[6], d[7]];
    if be {
        (u16::from_be_bytes([d[0], d[1]]), i32::from_be_bytes(p))
    } else {
        (u16::from_le_bytes([d[0], d[1]]), i32::from_le_bytes(p))
    }
}

/// Each task's last name in a perf.data's COMM records (a quick pass in file order).
fn comm_records(data: &PerfData<File>) -> Vec<(i32, String)> {
    let mut last: HashMap<i32, String> = HashMap::new();
    let Ok(mut records) = data.records(false) else { return Vec::new() };
    while let Some(raw) = records.next_raw() {
        let Ok(raw) = raw else { break }; // the main pass reports it
        if raw.kind == tp_format::perfdata::kind::COMM {
            if let Ok(Record::Comm { tid, comm, .. }) = raw.parse(None) {
                last.insert(tid as i32, comm.to_string());
            }
        }
    }
    last.into_iter().collect()
}

fn message(input: &str, e: &tp_format::tracedat::Error) -> String {
    format!("{input}: {e}")
}

/// The window in ns, given the first event's time (for `+S` values).
fn resolve(select: &Select, first: u64) -> (u64, u64) {
    let at = |t: TimeArg| match t {
        TimeArg::Absolute(ns) => ns,
        TimeArg::Relative(ns) => first.saturating_add(ns),
    };
    (select.from.map_or(0, at), select.to.map_or(u64::MAX, at))
}

/// A page source that tells its [`Progress`] of the file bytes it has passed.
struct Progressing<'s> {
    inner: Box<dyn PageSource + 's>,
    start: u64,
    last: u64,
    progress: Rc<dyn Progress>,
}

impl PageSource for Progressing<'_> {
    fn advance(&mut self) -> std::result::Result<bool, tp_format::tracedat::Error> {
        let more = self.inner.advance()?;
        let off = self.inner.offset();
        if off > self.last && off >= self.start {
            self.progress.advance(off - self.last);
            self.last = off;
        }
        Ok(more)
    }

    fn page(&self) -> &[u8] {
        self.inner.page()
    }

    fn offset(&self) -> u64 {
        self.inner.offset()
    }
}

/// A signed or unsigned integer field, read without a lookup per record.
#[derive(Debug, Clone, Copy)]
pub struct IntField {
    offset: usize,
    size: usize,
    signed: bool,
    big_endian: bool,
}

impl IntField {
    /// Field `name` of `format`, if it is an integer of 1, 2, 4 or 8 bytes.
    pub fn of(format: &EventFormat, name: &str, big_endian: bool) -> Option<IntField> {
        let f = format.field(name)?;
        matches!(f.size, 1 | 2 | 4 | 8).then_some(IntField {
            offset: f.offset,
            size: f.size,
            signed: f.signed,
            big_endian,
        })
    }

    /// The value (0 when the record is too short).
    #[inline]
    pub fn get(&self, data: &[u8]) -> i64 {
        let Some(b) = data.get(self.offset..self.offset + self.size) else { return 0 };
        let mut buf = [0u8; 8];
        let v = if self.big_endian {
            buf[8 - self.size..].copy_from_slice(b);
            u64::from_be_bytes(buf)
        } else {
            buf[..self.size].copy_from_slice(b);
            u64::from_le_bytes(buf)
        };
        if self.signed && self.size < 8 {
            let shift = 64 - 8 * self.size as u32;
            ((v << shift) as i64) >> shift
        } else {
            v as i64
        }
    }
}

/// A string field (`char[16]` or `__data_loc char[]`) as text up to its NUL.
pub fn str_field<'a>(f: &Field, data: &'a [u8], big_endian: bool) -> &'a str {
    let Some(b) = f.bytes(data, big_endian) else { return "" };
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    std::str::from_utf8(&b[..end]).unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_change_with_events_over_the_saved_ones() {
        let saved = Cmdlines::parse("7 bash\n");
        let mut n = Names::new(&saved);
        assert_eq!(n.comm(7), "bash");
        n.set(7, "bash");
        let seen = n.changes;
        n.set(7, "bash");
        assert_eq!(n.changes, seen, "the same name is no change");
        n.set(7, exec_comm("/usr/bin/a-very-long-program-name"));
        assert_eq!(n.comm(7), "a-very-long-pro");
        assert!(n.changes > seen);
        n.set(0, "swapper/0");
        assert_eq!(n.comm(0), saved.comm(0), "the idle task keeps its saved name");
    }
}
