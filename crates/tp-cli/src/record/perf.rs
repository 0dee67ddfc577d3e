//! `tp record` through perf_event_open (the second door), into perf.data.
//!
//! Which door: an event only perf_event_open has (software events such as `cpu-clock` or
//! `major-faults`, hardware events, `mem:` breakpoints), `--perf`, `-F HZ` or `--period N`
//! sends the whole recording through perf_event_open into perf.data (default `-o
//! perf.data`), tracepoints included (as PERF_TYPE_TRACEPOINT samples whose raw bytes are the
//! ftrace record). Otherwise tracepoints go through tracefs into trace.dat as before. One
//! recording writes one file; to have both files, run two recordings (both on
//! CLOCK_MONOTONIC, so their timelines agree).
//!
//! Per CPU one ring buffer (the first event's; the others are redirected into it with
//! SET_OUTPUT); the first event also carries the COMM/MMAP2/FORK/EXIT side records; every
//! record has its sample id (`sample_id_all`; IDENTIFIER with several events) and times are CLOCK_MONOTONIC
//! (`use_clockid`). Records go from the rings to the file as the kernel wrote them, with a
//! FINISHED_ROUND after each pass; PERF_RECORD_LOST / LOST_SAMPLES are counted per CPU.
//!
//! A write that fails (a full disk) stops the recording: the events are disabled, the rings
//! drained (their samples counted, not written) and closed; the file is cut back to the last
//! whole round that leaves room for the features, which are written with the header, so the
//! file reads in tp report and perf script. A command runs on to its end, as in the tracefs
//! door, and tp exits 1 (or with the command's failure).

use std::ffi::OsString;
use std::io::{BufWriter, Seek, SeekFrom};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use tp_format::perfdata::{self as pd, Features, Writer, WriterAttr};
use tp_perf::counter::{self, Counter, CounterOptions, Sampling, Target};
use tp_perf::events::{self, Class, Event, Kind, MachineLookups};
use tp_perf::Ring;
use tp_tracefs::guard::{Action, Guard};
use tp_tracefs::process::{self, GatedChild, Signals};

/// Data pages per CPU ring (4 MiB): a tracepoint sampled on every hit at ~2 million/s
/// writes ~160 MB/s; the reader wakes at a quarter full.
const RING_PAGES: usize = 1024;
/// perf record's default frequency for events that are not tracepoints or breakpoints.
const DEFAULT_FREQ: u64 = 4000;
/// The output's buffer: records reach the file in writes of this size.
pub(super) const OUT_BUFFER: usize = 1 << 20;

/// The perf door's options of `tp record`.
#[derive(clap::Args, Debug, Default)]
pub struct PerfOpts {
    /// Record through perf_event_open into perf.data even when every event is a tracepoint.
    #[arg(long = "perf")]
    pub perf: bool,
    /// Sample at this frequency (Hz) on events that are not tracepoints or breakpoints
    /// (default 4000, as perf record).
    #[arg(short = 'F', long = "freq", value_name = "HZ", conflicts_with = "period")]
    pub freq: Option<u64>,
    /// Sample every N events (tracepoints and breakpoints default to every event).
    #[arg(long = "period", value_name = "N")]
    pub period: Option<u64>,
    /// Record each sample's call stack by frame pointers, kernel and user (`--call-graph
    /// fp`). Tracepoints go through perf_event_open too: tracefs records no user stacks.
    #[arg(short = 'g')]
    pub g: bool,
    /// Call stacks: `fp` (the kernel walks frame pointers) or `dwarf[,SIZE]` (the user
    /// registers and SIZE bytes of the user stack, default 8192, unwound offline by tp (crate
    /// tp-stack) and by `perf script` from the binaries' .eh_frame/.debug_frame; kernel
    /// frames by the kernel).
    #[arg(long = "call-graph", value_name = "fp|dwarf[,SIZE]", value_parser = parse_call_graph)]
    pub call_graph: Option<CallGraph>,
    /// At most N frames per callchain (default and limit: kernel.perf_event_max_stack).
    #[arg(long = "max-stack", value_name = "N")]
    pub max_stack: Option<u16>,
}

/// How samples get their call stacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallGraph {
    /// The kernel walks the frame pointers (PERF_SAMPLE_CALLCHAIN).
    Fp,
    /// The user registers and this many bytes of user stack, unwound offline.
    Dwarf(u32),
}

/// perf's default user stack copy for `--call-graph dwarf`.
pub const DWARF_STACK_DEFAULT: u32 = 8192;

/// `fp`, `dwarf` or `dwarf,SIZE` (SIZE rounded up to 8 bytes, at most 65528 as the kernel's
/// 16-bit sample size allows, as perf record accepts).
pub fn parse_call_graph(s: &str) -> Result<CallGraph, String> {
    let (mode, size) = match s.split_once(',') {
        Some((m, z)) => (m, Some(z)),
        None => (s, None),
    };
    match (mode, size) {
        ("fp", None) => Ok(CallGraph::Fp),
        ("dwarf", None) => Ok(CallGraph::Dwarf(DWARF_STACK_DEFAULT)),
        ("dwarf", Some(z)) => {
            let n: u32 =
                z.parse().map_err(|_| format!("dwarf,SIZE: {z:?} is not a number of bytes"))?;
            let n = n.div_ceil(8) * 8;
            if n == 0 || n > 65528 {
                return Err(format!("dwarf,SIZE: {z} bytes; give 8 to 65528"));
            }
            Ok(CallGraph::Dwarf(n))
        }
        ("fp", Some(_)) => Err("fp takes no size (dwarf,SIZE does)".into()),
        _ => Err(format!("{s:?}: fp or dwarf[,SIZE] (lbr needs a PMU this recorder does not use)")),
    }
}

impl PerfOpts {
    /// The call-graph mode asked for (`--call-graph` over `-g`).
    pub fn call_graph(&self) -> Option<CallGraph> {
        self.call_graph.or(self.g.then_some(CallGraph::Fp))
    }
}

/// Does this recording go through the perf door?
pub fn wanted(opts: &PerfOpts, events: &[String]) -> bool {
    opts.perf
        || opts.call_graph().is_some()
        || opts.max_stack.is_some()
        || opts.freq.is_some()
        || opts.period.is_some()
        || events
            .iter()
            .any(|e| events::parse(e).is_ok_and(|s| !matches!(s.kind, Kind::Tracepoint { .. })))
}

/// Would the recording go through the perf door without its call-stack options?
fn perf_door_without_stacks(opts: &PerfOpts, events: &[String]) -> bool {
    let plain = PerfOpts { g: false, call_graph: None, max_stack: None, ..*opts };
    wanted(&plain, events)
}

/// The parts of `tp record`'s arguments the perf door uses.
pub struct Request<'a> {
    pub events: &'a [String],
    pub opts: &'a PerfOpts,
    pub output: Option<&'a std::path::Path>,
    pub command: &'a [OsString],
    pub pids: &'a [i32],
    /// `-a`: every task, also while a command runs (`-a -- CMD`: for the command's life).
    pub all: bool,
    pub duration: Option<Duration>,
    pub quiet: bool,
    /// Uprobes defined for this recording (`-e sdt_P:N`): the guard removes them if tp dies.
    pub probes: &'a [tp_tracefs::Uprobe],
}

/// What each sample carries of its stack. `:u`/`:k` keep the user's / the kernel's part
/// only. DWARF: the kernel gives the kernel frames, the user part is unwound from the copy
/// (as perf records it).
fn stacks_of(ev: &Event, mode: Option<CallGraph>, max_stack: u16) -> tp_perf::Stacks {
    let m = ev.modifiers;
    match mode {
        None => tp_perf::Stacks::default(),
        Some(CallGraph::Fp) => tp_perf::Stacks {
            max_stack,
            exclude_kernel: m.exclude_kernel,
            exclude_user: m.exclude_user,
            ..Default::default()
        },
        Some(CallGraph::Dwarf(size)) => tp_perf::Stacks {
            max_stack,
            exclude_kernel: m.exclude_kernel,
            exclude_user: true,
            regs_user: if m.exclude_user { 0 } else { tp_perf::Stacks::X86_64_REGS },
            stack_user: if m.exclude_user { 0 } else { size },
        },
    }
}

/// How `ev` is sampled. `data_maps`: data mappings are recorded too, from the first event's
/// side records (page faults: told apart by mapping; DWARF stacks: unwinders read the
/// libraries' read-only segments, .eh_frame_hdr, which only data maps describe).
fn sampling_of(
    ev: &Event,
    o: &PerfOpts,
    first: bool,
    several: bool,
    data_maps: bool,
    stacks: tp_perf::Stacks,
) -> Sampling {
    use pd::sample as s;
    let every_hit = matches!(ev.class, Class::Tracepoint | Class::Breakpoint);
    let (period, freq) = match (o.period, o.freq) {
        (Some(p), _) => (p, false),
        (None, Some(f)) if !every_hit => (f, true),
        (None, _) if every_hit => (1, false),
        _ => (DEFAULT_FREQ, true),
    };
    let mut sample_type = s::IP | s::TID | s::TIME | s::CPU | s::PERIOD;
    // Several events: each record says whose it is (at one place, as perf requires); one
    // event needs no id (8 bytes less per sample).
    if several {
        sample_type |= s::IDENTIFIER;
    }
    if ev.class == Class::Tracepoint {
        sample_type |= s::RAW;
    }
    if ev.is_page_fault() {
        sample_type |= s::ADDR;
    }
    Sampling {
        sample_type,
        period,
        freq,
        clockid: Some(libc::CLOCK_MONOTONIC),
        side_records: first,
        mmap_data: first && data_maps,
        watermark: (ring_pages(o) * 4096 / 4) as u32,
        stacks,
    }
}

/// Data pages per CPU ring: four times more when each sample carries a user stack copy.
fn ring_pages(o: &PerfOpts) -> usize {
    match o.call_graph() {
        Some(CallGraph::Dwarf(_)) => RING_PAGES * 4,
        _ => RING_PAGES,
    }
}

/// The start line's words for the stacks.
fn describe_stacks(mode: Option<CallGraph>, max_stack: u16, tracepoints_only: bool) -> String {
    let how = match mode {
        None => return String::new(),
        Some(CallGraph::Fp) => format!("call stacks by frame pointers, up to {max_stack} frames"),
        Some(CallGraph::Dwarf(n)) => format!(
            "call stacks: kernel frames up to {max_stack}, user registers and {n} bytes of user stack (unwound at report time)"
        ),
    };
    if tracepoints_only {
        format!("; {how} (tracepoints through perf_event_open: tracefs records no user stacks)")
    } else {
        format!("; {how}")
    }
}

fn describe(ev: &Event, s: &Sampling) -> String {
    let kind = match ev.class {
        Class::Tracepoint => "tracepoint",
        Class::Breakpoint => "breakpoint",
        Class::Software => "software",
        Class::Hardware | Class::HwCache => "hardware",
    };
    let how = if s.freq {
        format!("{} Hz", s.period)
    } else if s.period == 1 {
        "every event".into()
    } else {
        format!("every {} events", s.period)
    };
    format!("{} ({kind}, {how})", ev.name)
}

pub fn run(req: Request<'_>) -> Result<i32> {
    if req.events.is_empty() {
        bail!("tp record --perf: give events with -e (e.g. -e cpu-clock, -e sched:sched_switch)");
    }
    let out_path = req.output.map(|p| p.to_path_buf()).unwrap_or_else(|| "perf.data".into());
    crate::outfile::check(&out_path)?;
    let names: Vec<&str> =
        req.events.iter().flat_map(|e| e.split(',')).filter(|e| !e.is_empty()).collect();
    let specs = names.iter().map(|n| events::parse(n)).collect::<Result<Vec<_>, _>>()?;
    let program = req.command.first().and_then(|c| process::resolve_program(c));
    let needs_tracefs = specs.iter().any(|s| matches!(s.kind, Kind::Tracepoint { .. }));
    let tfs = if needs_tracefs { Some(tp_tracefs::Tracefs::discover()?) } else { None };
    let evs = events::resolve(&specs, &mut MachineLookups::new(tfs.as_ref(), program.as_deref()))?;
    let mode = req.opts.call_graph();
    let limit = tp_perf::max_stack().unwrap_or(127);
    let max_stack = match (mode, req.opts.max_stack) {
        (None, Some(_)) => bail!("--max-stack limits call stacks: give -g or --call-graph too"),
        (_, Some(n)) if n > limit => bail!(
            "--max-stack {n}: the kernel allows at most {limit} frames (kernel.perf_event_max_stack)"
        ),
        (_, Some(0)) => bail!("--max-stack 0: give at least 1 frame"),
        (_, n) => n.unwrap_or(limit),
    };
    if matches!(mode, Some(CallGraph::Dwarf(_))) && !cfg!(target_arch = "x86_64") {
        bail!("--call-graph dwarf: tp knows the user registers of x86-64 only; use -g (frame pointers)");
    }

    let signals = Signals::install(&[libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGCHLD])?;
    let mut child = match req.command.first() {
        None => None,
        Some(prog) if process::resolve_program(prog).is_none() => {
            eprintln!("tp record: {}: command not found", prog.to_string_lossy());
            return Ok(127);
        }
        Some(_) => Some(GatedChild::spawn(req.command)?),
    };
    let cpus = counter::online_cpus()?;
    // Who: every task (-a, per CPU; with a command, for its life), the command (per CPU,
    // inherited), or the threads of -p (each per CPU, inherited).
    let mut threads: Vec<i32> = Vec::new();
    for &pid in req.pids {
        threads.extend(process::threads_of(pid).with_context(|| format!("-p {pid}"))?);
    }
    let targets_on = |cpu: u32| -> Vec<Target> {
        match &child {
            _ if req.all => vec![Target::Cpu(cpu)],
            Some(c) => vec![Target::ThreadOnCpu(c.pid(), cpu)],
            None if !threads.is_empty() => {
                threads.iter().map(|&t| Target::ThreadOnCpu(t, cpu)).collect()
            }
            None => vec![Target::Cpu(cpu)],
        }
    };

    // Open: per CPU, every event on every target; the first one owns the CPU's ring and
    // carries the side records, the others are redirected into it.
    let mut attrs: Vec<WriterAttr> = Vec::new();
    let mut rings: Vec<(u32, Ring)> = Vec::new();
    let mut owners: Vec<usize> = Vec::new();
    let mut counters: Vec<Counter> = Vec::new();
    let mut start_line = Vec::new();
    let faults = evs.iter().any(Event::is_page_fault);
    let data_maps = faults || matches!(mode, Some(CallGraph::Dwarf(_)));
    for (i, ev) in evs.iter().enumerate() {
        let stacks = stacks_of(ev, mode, max_stack);
        // A tracepoint is hit in the kernel: excluding the kernel would drop every sample,
        // so with stacks `:u`/`:k` choose the stack's part only (stacks_of).
        let mut ev = ev.clone();
        if mode.is_some() && ev.class == Class::Tracepoint {
            ev.modifiers = Default::default();
        }
        let ev = &ev;
        let s = sampling_of(ev, req.opts, i == 0, evs.len() > 1, data_maps, stacks);
        let per_task = !req.all && (child.is_some() || !threads.is_empty());
        let o = CounterOptions {
            inherit: per_task,
            enable_on_exec: per_task && child.is_some(),
            disabled: true,
            sampling: Some(s),
            ..Default::default()
        };
        start_line.push(describe(ev, &s));
        let mut ids = Vec::new();
        for (k, &cpu) in cpus.iter().enumerate() {
            for t in targets_on(cpu) {
                let c = Counter::open(ev, t, &o, None)?;
                ids.push(c.id()?);
                if owners.len() == k {
                    rings.push((cpu, Ring::map(&c, ring_pages(req.opts))?));
                    owners.push(counters.len());
                } else {
                    c.set_output(&counters[owners[k]])?;
                }
                counters.push(c);
            }
        }
        attrs.push(WriterAttr { attr: counter::file_attr(ev, &o), ids, name: ev.name.clone() });
    }
    let (file, pending) = crate::outfile::create(&out_path)?;
    let mut w = Writer::new(BufWriter::with_capacity(OUT_BUFFER, file), attrs)
        .with_context(|| format!("writing {}", out_path.display()))?;
    // The first write that fails (a full disk) stops the recording; the file is then cut
    // back to the last round that fits with the features (Writer::cut_back).
    let mut failed: Option<pd::Error> = kernel_map(&mut w).err();
    let mut dsos = super::buildid::Dsos::default();
    // Tasks that exist already: their names and executable maps, as perf synthesizes them
    // (a command's come from the kernel at its exec).
    if (child.is_none() || req.all) && failed.is_none() {
        let pids: Vec<i32> =
            if req.pids.is_empty() { process::all_pids() } else { req.pids.to_vec() };
        for pid in pids {
            if let Err(e) = synthesize_task(&mut w, pid, data_maps, &mut dsos) {
                failed = Some(e);
                break;
            }
        }
    }
    if !req.quiet {
        eprintln!(
            "tp: recording through perf_event_open into {}: {}{}; {} CPUs, {} KiB ring each, CLOCK_MONOTONIC",
            out_path.display(),
            start_line.join(", "),
            describe_stacks(mode, max_stack, !perf_door_without_stacks(req.opts, req.events)),
            cpus.len(),
            ring_pages(req.opts) * 4
        );
    }
    // The guard: a fork holding the events and the file from here on, which finishes the
    // file if tp dies (SIGKILL included) and then removes the recording's probes.
    if let Err(e) = w.flush() {
        failed.get_or_insert(e);
    }
    let (mut slot, mut pending_slot) = (Some(w), Some(pending));
    let mut guard = Guard::spawn_holding(|| {
        super::perf_guard::hold(super::perf_guard::Held {
            out_path: &out_path,
            writer: &mut slot,
            pending: &mut pending_slot,
            counters: &mut counters,
            owners: &owners,
            ring_pages: ring_pages(req.opts),
            dsos: &mut dsos,
            tfs: tfs.as_ref(),
            events: &evs,
        })
    })?;
    let mut w = slot.take().context("the writer")?;
    let pending = pending_slot.take().context("the output")?;
    if !req.probes.is_empty() {
        let tracefs = tp_tracefs::Tracefs::discover()?.root().to_path_buf();
        guard.register(&Action::Probes { tracefs })?;
    }
    if child.is_none() || req.all {
        for c in &counters {
            c.enable()?;
        }
    }
    let start = Instant::now();
    if let Some(c) = child.as_mut() {
        c.release()?;
    }

    let mut status = 0;
    let mut exited = false;
    // Records go to the file until a write fails; after that they are only counted. A
    // ring's space goes back to the kernel once its records are in the file: if tp dies,
    // the guard finds each record in one of them.
    // tp's own samples (its threads, its guard) are left out, as the tracefs door leaves
    // them out: with -a they would be tp recording its own writing.
    let own = OwnSamples { pids: [std::process::id(), guard.pid() as u32], several: evs.len() > 1 };
    let mut own_dropped = 0u64;
    let mut drain =
        |rings: &mut Vec<(u32, Ring)>, w: &mut Writer<_>, failed: &mut Option<pd::Error>| {
            for (_, r) in rings.iter_mut() {
                r.read_held(|rec| match failed {
                    _ if own.holds(rec) => own_dropped += 1,
                    Some(_) => w.skip_raw(rec),
                    None => {
                        dsos.note_record(rec);
                        *failed = w.write_raw(rec).err();
                    }
                });
                if failed.is_none() {
                    *failed = w.flush().err();
                }
                r.release();
            }
            if failed.is_none() {
                *failed = w.finished_round().err();
            }
        };
    while failed.is_none() {
        if let Some(c) = &child {
            if let Some(st) = process::wait_pid(c.pid(), true)? {
                status = st.as_shell_code();
                exited = true;
                break;
            }
        }
        if req.duration.is_some_and(|d| start.elapsed() >= d) {
            break;
        }
        if !req.pids.is_empty() && req.pids.iter().all(|&p| super::super::stat::process_gone(p)) {
            break;
        }
        let firsts: Vec<&Counter> = owners.iter().map(|&i| &counters[i]).collect();
        tp_perf::ring::poll(&firsts, 50)?;
        let got = signals.wait(Duration::ZERO)?;
        drain(&mut rings, &mut w, &mut failed);
        if got.iter().any(|d| d.signal != libc::SIGCHLD) && child.is_none() {
            break;
        }
    }
    let stopped_at = start.elapsed();
    for c in &counters {
        c.disable()?;
    }
    drain(&mut rings, &mut w, &mut failed);
    let mut lost: Vec<String> = rings
        .iter()
        .map(|(cpu, r)| {
            let s = r.stats();
            format!("cpu{cpu} {}", s.lost + s.lost_samples)
        })
        .collect();
    // Nothing more is recorded: the rings and the events' fds are closed now.
    drop(rings);
    drop(counters);

    let mut features = features(tfs.as_ref());
    features.build_ids = dsos.build_ids();
    let tracing = match &tfs {
        Some(t) => Some(tracing_data(t, &evs)?),
        None => None,
    };
    let recorded = w.stats();
    if failed.is_some() {
        // What reached the disk bounds the file: the last round that leaves room for the
        // features there (the output's buffer, refused by the disk, is dropped).
        let on_disk = w.get_ref().get_ref().metadata().map_or(0, |m| m.len());
        let room = w.features_len(&features, tracing.as_deref());
        w = match w.cut_back(on_disk, room, |out, at| {
            let (mut f, _refused) = out.into_parts();
            f.set_len(at)?;
            f.seek(SeekFrom::Start(at))?;
            Ok(BufWriter::with_capacity(OUT_BUFFER, f))
        }) {
            Ok(w) => w,
            Err(e) => {
                drop(pending);
                bail!("{}: {e}; removed it", stopped_by(failed.as_ref(), &out_path));
            }
        };
    }
    let (_, stats) = w
        .finish(&features, tracing.as_deref())
        .with_context(|| format!("writing {}", out_path.display()))?;
    pending.commit()?;
    // The file is whole and in place: the guard and its copies of the events go.
    guard.disarm();
    if failed.is_some() {
        let unwritten = recorded.samples - stats.samples;
        let waiting = match (&child, exited) {
            (Some(_), false) => "; the command runs on to its end, unrecorded",
            _ => "",
        };
        eprintln!(
            "tp: {}: recording stopped after {:.1} s; the file keeps the first {} samples and is readable; {unwritten} samples not written, counted as lost{waiting}",
            stopped_by(failed.as_ref(), &out_path),
            stopped_at.as_secs_f64(),
            stats.samples,
        );
        lost.push(format!("not written {unwritten}"));
        if let (Some(c), false) = (&child, exited) {
            status = wait_command(c.pid(), &signals)?;
        }
        if status == 0 {
            status = 1;
        }
    }
    if !req.quiet {
        eprintln!(
            "tp: {} samples, {} records, {} bytes in {}; lost: {}",
            stats.samples,
            stats.records,
            stats.bytes,
            out_path.display(),
            lost.join(", ")
        );
    }
    if own_dropped > 0 && !req.quiet {
        eprintln!("tp: {own_dropped} samples of tp's own threads and guard were left out");
    }
    Ok(status)
}

/// What stopped the recording: a full disk, or another write error.
fn stopped_by(e: Option<&pd::Error>, out: &std::path::Path) -> String {
    match e.map(|e| (e, &e.kind)) {
        Some((_, pd::ErrorKind::Io(io)))
            if matches!(io.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT)) =>
        {
            format!("the disk of {} is full", out.display())
        }
        Some((e, _)) => format!("writing {} failed ({e})", out.display()),
        None => format!("writing {}", out.display()),
    }
}

/// Which samples are tp's own: a PERF_RECORD_SAMPLE's pid (after the header, the id when
/// several events share the rings, and the IP) is tp's or its guard's.
struct OwnSamples {
    pids: [u32; 2],
    several: bool,
}

impl OwnSamples {
    fn holds(&self, rec: &[u8]) -> bool {
        const PERF_RECORD_SAMPLE: u32 = 9;
        let at = 8 + if self.several { 8 } else { 0 } + 8;
        let u32_at =
            |i: usize| rec.get(i..i + 4).map(|b| u32::from_ne_bytes(b.try_into().unwrap()));
        u32_at(0) == Some(PERF_RECORD_SAMPLE) && u32_at(at).is_some_and(|p| self.pids.contains(&p))
    }
}

/// Wait for the command to end after the recording stopped early (the tracefs door, too,
/// lets it run on); signals sent to tp alone are passed on to it.
fn wait_command(pid: i32, signals: &Signals) -> Result<i32> {
    loop {
        if let Some(st) = process::wait_pid(pid, true)? {
            return Ok(st.as_shell_code());
        }
        for d in signals.wait(Duration::from_millis(250))? {
            if d.signal != libc::SIGCHLD && (d.signal != libc::SIGINT || d.sent_by_process) {
                let _ = process::kill(pid, d.signal);
            }
        }
    }
}

/// perf's synthesized map of the kernel (`[kernel.kallsyms]_text` from `_text` on, pid -1),
/// so perf report and perf script resolve kernel addresses through /proc/kallsyms. Without
/// a readable `_text` (kptr_restrict) none is written and kernel addresses stay raw.
fn kernel_map<W: std::io::Write + std::io::Seek>(w: &mut Writer<W>) -> Result<(), pd::Error> {
    let Ok(syms) = std::fs::read_to_string("/proc/kallsyms") else { return Ok(()) };
    let text = syms.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        let (addr, _, name) = (f.next()?, f.next()?, f.next()?);
        (name == "_text").then(|| u64::from_str_radix(addr, 16).ok()).flatten()
    });
    let Some(text) = text.filter(|&a| a != 0) else { return Ok(()) };
    let map = pd::record::Mmap {
        pid: u32::MAX,
        tid: 0,
        addr: text,
        len: u64::MAX - text,
        pgoff: text,
        file: None,
        prot: 0,
        flags: 0,
        filename: "[kernel.kallsyms]_text",
    };
    w.write(0, &pd::Record::Mmap(map, pd::SampleId::default()))
}

/// COMM and the executable MMAP2s (with `data`, every file-backed or named mapping) of a
/// running process from /proc (what perf record synthesizes at start; with `-d`, data
/// mappings too); a process gone meanwhile is skipped.
fn synthesize_task<W: std::io::Write + std::io::Seek>(
    w: &mut Writer<W>,
    pid: i32,
    data: bool,
    dsos: &mut super::buildid::Dsos,
) -> Result<(), pd::Error> {
    let Ok(comm) = std::fs::read_to_string(format!("/proc/{pid}/comm")) else { return Ok(()) };
    let comm = comm.trim_end();
    let tids: Vec<u32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|rd| rd.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_default();
    let no_id = pd::SampleId::default();
    for tid in tids {
        // Each thread's own name (a thread may have renamed itself).
        let own = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm"));
        let name = own.as_deref().map(str::trim_end).unwrap_or(comm);
        w.write(0, &pd::Record::Comm { pid: pid as u32, tid, comm: name, exec: false, id: no_id })?;
    }
    let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else { return Ok(()) };
    for line in maps.lines() {
        let Some(m) = tp_format::maps::parse_proc_maps_line(line) else { continue };
        if (!data && !m.is_exec()) || m.name.is_empty() {
            continue;
        }
        let prot = m
            .perms
            .chars()
            .zip([libc::PROT_READ, libc::PROT_WRITE, libc::PROT_EXEC])
            .filter(|(c, _)| *c != '-')
            .map(|(_, p)| p)
            .sum::<i32>();
        let flags = if m.perms.ends_with('s') { libc::MAP_SHARED } else { libc::MAP_PRIVATE };
        let map = pd::record::Mmap {
            pid: pid as u32,
            tid: pid as u32,
            addr: m.start,
            len: m.end - m.start,
            pgoff: m.offset,
            file: Some(pd::record::MmapFile::Inode {
                maj: m.dev.0,
                min: m.dev.1,
                ino: m.inode,
                ino_generation: 0,
            }),
            prot: prot as u32,
            flags: flags as u32,
            filename: m.name,
        };
        w.write(0, &pd::Record::Mmap2(map, no_id))?;
        dsos.note(m.name);
    }
    Ok(())
}

pub(super) fn features(tfs: Option<&tp_tracefs::Tracefs>) -> Features {
    let uname = tfs.and_then(|t| t.uname().ok());
    let hostname =
        std::fs::read_to_string("/proc/sys/kernel/hostname").ok().map(|s| s.trim().to_string());
    let osrelease =
        std::fs::read_to_string("/proc/sys/kernel/osrelease").ok().map(|s| s.trim().to_string());
    let ncpus = std::thread::available_parallelism().map(|n| n.get() as u32).unwrap_or(1);
    let online = counter::online_cpus().map(|v| v.len() as u32).unwrap_or(ncpus);
    let _ = uname;
    Features {
        hostname,
        osrelease,
        version: Some(format!("tp {}", env!("CARGO_PKG_VERSION"))),
        arch: Some(std::env::consts::ARCH.to_string()),
        nr_cpus: Some((online.max(ncpus), online)),
        cmdline: Some(std::env::args().collect()),
        clockid: Some(libc::CLOCK_MONOTONIC as u64),
        ..Features::default()
    }
}

/// TRACING_DATA: the formats of the recorded tracepoints (and tables), as trace.dat's
/// leading part, so perf script and tp report render their raw records.
pub(super) fn tracing_data(tfs: &tp_tracefs::Tracefs, evs: &[Event]) -> Result<Vec<u8>> {
    use tp_format::tracedat as td;
    let hp_text = tfs.header_page_text()?;
    let hp = tp_format::header::HeaderPage::parse(&hp_text)
        .unwrap_or(tp_format::header::HeaderPage::X86_64);
    let mut event_formats: Vec<(String, Vec<String>)> = Vec::new();
    for ev in evs.iter().filter(|e| e.class == Class::Tracepoint) {
        // The name is `sys:name` unless typed as such (then it is that text).
        let Some(id) = tp_tracefs::EventId::parse(
            ev.name.split(':').take(2).collect::<Vec<_>>().join(":").as_str(),
        ) else {
            continue;
        };
        let t =
            tfs.event_format_text(&id).with_context(|| format!("reading the format of {id}"))?;
        match event_formats.iter_mut().find(|(s, _)| *s == id.system) {
            Some((_, v)) => {
                if !v.contains(&t) {
                    v.push(t)
                }
            }
            None => event_formats.push((id.system.clone(), vec![t])),
        }
    }
    let meta = td::Metadata {
        header_page: hp,
        header_event_text: tfs.header_event_text()?,
        event_formats,
        printk: tfs.printk_formats().unwrap_or_default(),
        cmdlines: tfs.saved_cmdlines().unwrap_or_default(),
        ..td::Metadata::default()
    };
    let w = td::Writer::new(td::WriterOptions {
        page_size: hp.page_size(),
        ..td::WriterOptions::default()
    });
    Ok(w.tracing_data(&meta))
}
