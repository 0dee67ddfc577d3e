//! `tp record`: record kernel tracepoints into a trace.dat file.
//!
//! Every recording uses its own tracefs instance (`instances/tp-<pid>`), removed on every
//! exit path (normal end, Ctrl-C, SIGTERM, error, panic: the instance's `Drop`). Whatever
//! kills tp (SIGKILL included), its guard process ([`tp_tracefs::guard`]) stops tracing,
//! removes the instance and writes the pages recorded so far into the output
//! ([`rescue`]); if the guard dies too, the next tp run removes the instance. One thread per
//! CPU splices the ring-buffer pages into per-CPU temporary files; at the end they go into
//! the trace.dat with the metadata. `-o` is checked before anything is recorded.

use std::ffi::OsString;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use tp_tracefs::guard::{Action, Guard};
use tp_tracefs::process::{self, ExitStatus, Signals};
use tp_tracefs::{CaptureConfig, CpuStats};

mod buildid;
mod maps;
pub mod output;
pub mod perf;
mod perf_guard;
mod rescue;
pub mod session;
pub mod stacks;
mod status;
pub mod user;

pub use status::{count, human};

use session::{Selection, Session, Settings, Target};

/// Per-CPU ring buffer size tp uses unless `-b` says otherwise (see the README's "Recording
/// defaults"): large enough that a reader woken at half full never falls behind a
/// syscall-heavy workload, capped so that all CPUs together use at most
/// [`DEFAULT_BUFFER_TOTAL_KB`] (and never less than 4 MiB per CPU).
pub const DEFAULT_BUFFER_KB: u64 = 32 * 1024;
pub const DEFAULT_BUFFER_TOTAL_KB: u64 = 1024 * 1024;

fn default_buffer_kb(ncpus: usize) -> u64 {
    (DEFAULT_BUFFER_TOTAL_KB / ncpus.max(1) as u64).clamp(4 * 1024, DEFAULT_BUFFER_KB)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Compression {
    Zstd,
    None,
}

/// `tp record` arguments (boxed: they are large next to the other subcommands').
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub opts: Box<Opts>,
}

#[derive(clap::Args, Debug)]
pub struct Opts {
    #[command(flatten)]
    pub trace: TraceOpts,
    #[command(flatten)]
    pub file: FileOpts,
    #[command(flatten)]
    pub perf: perf::PerfOpts,
    /// Stop after this long (e.g. 10s, 500ms, 2m); otherwise at Ctrl-C or when the command
    /// ends. A command still running then keeps running, untraced.
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Under sudo, run the command (and own the output) as root; by default the command
    /// runs as the user who ran sudo (SUDO_UID/SUDO_GID, their groups, HOME/USER/LOGNAME)
    /// and the output is theirs.
    #[arg(long)]
    pub as_root: bool,
    /// Use (and restore) an existing instance instead of a private one.
    #[arg(short = 'B', long = "instance", value_name = "NAME")]
    pub instance: Option<String>,
    /// The binary whose USDT probes `-e sdt_PROVIDER:NAME` names (default: the command's).
    #[arg(short = 'x', long = "exec", value_name = "BINARY")]
    pub exec: Option<PathBuf>,
    /// No status line and no summary.
    #[arg(short = 'q', long)]
    pub quiet: bool,
    /// The command to trace, with its children: `tp record -e sched -- make -j2`.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

/// What to trace and how the buffer runs: shared by `tp record` and `tp stream`.
#[derive(clap::Args, Debug)]
pub struct TraceOpts {
    /// Events: `sched`, `sched:sched_*`, `syscalls:sys_enter_openat`, `*:*` (repeatable; as
    /// `tp list GLOB` shows).
    #[arg(short = 'e', long = "event", value_name = "GLOB")]
    pub events: Vec<String>,
    /// Filter for the preceding -e, in the kernel's filter syntax (e.g. 'common_pid == 1').
    #[arg(short = 'f', long = "filter", value_name = "FILTER")]
    pub filters: Vec<String>,
    /// Trace these processes (repeatable; all their threads).
    #[arg(short = 'p', long = "pid", value_name = "PID")]
    pub pids: Vec<i32>,
    /// With -p: also trace the processes they start from now on (trace-cmd's -c).
    #[arg(short = 'c', long = "children", requires = "pids")]
    pub children: bool,
    /// Trace all processes (the default without -p or a command); with a command, all of
    /// them for the command's life (`-a -- sleep 5`, as perf record -a does).
    #[arg(short = 'a', long = "all", conflicts_with = "pids")]
    pub all: bool,
    /// Per-CPU buffer size in KiB.
    #[arg(short = 'b', long = "buffer-size", value_name = "KB")]
    pub buffer_kb: Option<u64>,
    /// Trace clock (local, global, mono, mono_raw, boot, x86-tsc, ...).
    #[arg(short = 'C', long = "clock", default_value = "mono")]
    pub clock: String,
    /// Keep the events of traced Rust programs' own `tp-recorder` threads (crate `tp`'s
    /// drain thread), left out by default as tp's own threads are.
    #[arg(long = "keep-recorder")]
    pub keep_recorder: bool,
    #[command(flatten)]
    pub stacks: stacks::StackOpts,
}

/// The trace.dat written: shared by `tp record` and `tp extract`.
#[derive(clap::Args, Debug)]
pub struct FileOpts {
    /// Output file.
    #[arg(short = 'o', long = "output", default_value = "trace.dat")]
    pub output: PathBuf,
    /// Compression of the trace.dat sections (version 7 only).
    #[arg(long, value_enum, default_value = "zstd")]
    pub compress: Compression,
    /// trace.dat version.
    #[arg(long = "file-version", default_value = "7", value_parser = clap::value_parser!(u32).range(6..=7))]
    pub file_version: u32,
}

pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, mult) = if let Some(n) = s.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = s.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (s, 1.0)
    };
    let v: f64 =
        num.trim().parse().map_err(|_| format!("not a duration: {s:?} (e.g. 10s, 500ms, 2m)"))?;
    if !(v.is_finite() && v >= 0.0) {
        return Err(format!("not a duration: {s:?}"));
    }
    Ok(Duration::from_secs_f64(v * mult))
}

/// Why the recording stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    CommandExited(ExitStatus),
    Duration,
    Signal(i32),
    PidsGone,
}

/// A perf habit the command line failed on, said in one line: `tp record -c 1` means perf's
/// sample period to a perf user, but tp record's `-c` is trace-cmd's (with `-p`, follow the
/// children). tp keeps trace-cmd's meaning (its tracefs options are trace-cmd's throughout,
/// and one flag with two meanings by the word after it would misread `-p 5 -c 1000`) and
/// names `--period N` instead.
pub fn perf_habit(argv: &[OsString]) -> Option<String> {
    let args: Vec<&str> = argv.iter().map(|a| a.to_str().unwrap_or("")).collect();
    let at = args.iter().position(|&a| a == "record")?;
    let rest = &args[at + 1..];
    let rest = &rest[..rest.iter().position(|&a| a == "--").unwrap_or(rest.len())];
    let number = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let n = rest.iter().enumerate().find_map(|(i, &a)| match a.strip_prefix("-c") {
        Some("") => rest.get(i + 1).filter(|n| number(n)).map(|n| n.to_string()),
        Some(n) if number(n) => Some(n.to_string()),
        _ => None,
    })?;
    Some(format!(
        "tp record: -c {n} is perf's sample period: give --period {n} (tp record's -c is trace-cmd's: with -p, also trace the children)"
    ))
}

pub fn run(args: Args) -> Result<i32> {
    let argv: Vec<OsString> = std::env::args_os().collect();
    let args = &*args.opts;
    if args.as_root {
        tp_tracefs::process::keep_root(true);
        crate::outfile::keep_root();
    }
    // The shell's convention for a command that does not exist, before anything is set up.
    if let Some(prog) = args.command.first() {
        if process::resolve_program(prog).is_none() {
            eprintln!("tp: {}: command not found", prog.to_string_lossy());
            return Ok(127);
        }
    }
    // `usdt:BINARY:P:N` is the event `sdt_P:N` from here on.
    let events: Vec<String> =
        args.trace.events.iter().map(|e| crate::probe::run::event_glob(e)).collect();
    let perf_door = perf::wanted(&args.perf, &events);
    // The tracefs door's guard before any probe exists: a SIGKILL between defining the probes
    // and forking the guard left them behind.
    let guard = if perf_door { None } else { Some(spawn_guard(args)?) };
    // Defined before anything else and removed after everything (drop order: last).
    let sdt_probes = crate::probe::run::define_for_record(
        &args.trace.events,
        args.exec.as_deref(),
        &args.command,
        &args.trace.pids,
        args.quiet,
    )?;
    let Some(guard) = guard else {
        if args.trace.stacks.any() {
            bail!("-T, -U and --stack-trigger ask tracefs for stacks; this recording goes through perf_event_open (perf.data), which does not take them");
        }
        let default_out = args.file.output == Path::new("trace.dat");
        // A profile of a command in one line (`tp record -F 999 -g -- CMD`): without -e,
        // perf record samples cycles (cpu-clock where there is no PMU); tp cpu-clock.
        let cpu_clock = ["cpu-clock".to_string()];
        let events = if events.is_empty() { &cpu_clock[..] } else { &events[..] };
        return perf::run(perf::Request {
            events,
            opts: &args.perf,
            output: (!default_out).then_some(args.file.output.as_path()),
            command: &args.command,
            pids: &args.trace.pids,
            all: args.trace.all,
            duration: args.duration,
            quiet: args.quiet,
            probes: sdt_probes.as_ref().map_or(&[][..], |p| p.probes()),
        });
    };
    let mut selections = session::pair_filters(&argv, &args.trace.events, &args.trace.filters)?;
    for s in &mut selections {
        s.glob = crate::probe::run::event_glob(&s.glob);
    }
    // `system:name` globs no kernel event matches: the command's own tracepoints.
    let (mut kernel, mut user_globs) = if selections.is_empty() {
        (Vec::new(), Vec::new())
    } else {
        user::split(&tp_tracefs::Tracefs::discover()?, &selections)?
    };
    if !user_globs.is_empty() && args.command.is_empty() {
        eprintln!(
            "tp: warning: no kernel event matches {}; the program's own tracepoints are recorded only for a command (`tp record ... -- COMMAND`)",
            user_globs.join(", ")
        );
        user_globs.clear();
        kernel = selections.clone();
    }
    if !user_globs.is_empty() {
        if !args.quiet {
            eprintln!(
                "tp: no kernel event matches {}: recording it as the command's own tracepoints (TP_EVENTS)",
                user_globs.join(", ")
            );
        }
        if args.trace.clock != "mono" {
            eprintln!(
                "tp: warning: the program's tracepoints are timestamped with CLOCK_MONOTONIC; with -C {} they will not share a timeline with the kernel's events (use the default -C mono)",
                args.trace.clock
            );
        }
        if kernel.is_empty() && args.instance.is_none() {
            // Some kernel events are needed for the instance; these few mark the processes.
            for g in
                ["sched:sched_process_fork", "sched:sched_process_exec", "sched:sched_process_exit"]
            {
                kernel.push(session::Selection { glob: g.into(), filter: None });
            }
        }
    }
    let r = record(args, guard, &kernel, &user_globs);
    // `sdt_probes` goes last, after the instance that enables them.
    drop(sdt_probes);
    r
}

fn write_options(args: &Opts) -> output::WriteOptions {
    output::WriteOptions {
        version: args.file.file_version,
        compress: args.file.compress == Compression::Zstd && args.file.file_version >= 7,
    }
}

/// The guard, first (it must be forked while tp has one thread, and before any probe is
/// defined): whatever kills tp from now on, it stops tracing, removes the instance and the
/// probes tp's ledger lists, and turns the pages into the output.
fn spawn_guard(args: &Opts) -> Result<Guard> {
    if args.file.file_version == 6 && args.file.compress == Compression::Zstd && explicit_compress()
    {
        bail!("trace.dat version 6 has no compression; use --file-version 7 or --compress none");
    }
    // Before anything is recorded: an output tp could not write is refused now.
    crate::outfile::check(&args.file.output)?;
    let rescue_opts = write_options(args);
    let mut guard = Guard::spawn(move |dir, out, instances, pid| {
        rescue::rescue_pages(dir, out, instances, pid, &rescue_opts)
    })?;
    let tracefs = tp_tracefs::Tracefs::discover()?.root().to_path_buf();
    guard.register(&Action::Probes { tracefs })?;
    Ok(guard)
}

/// `guard`: from [`spawn_guard`].
fn record(
    args: &Opts,
    mut guard: Guard,
    selections: &[Selection],
    user_globs: &[String],
) -> Result<i32> {
    let out = &args.file.output;
    let opts = write_options(args);
    // Signals before the page directory: a Ctrl-C from here on cleans up.
    let signals = Signals::install(&[libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGCHLD])?;
    let tmp = TempPages::new(out)?;
    guard.register(&Action::Pages { dir: tmp.dir.clone(), output: out.clone() })?;
    let user_dir = user_dir(&tmp, user_globs, args.trace.stacks.user)?;
    let ncpus = tp_tracefs::process::cpu_count();
    let buffer_kb = args.trace.buffer_kb.or(if args.instance.is_none() {
        Some(default_buffer_kb(ncpus))
    } else {
        None
    });
    let settings = Settings {
        selections,
        target: Target::of(&args.command, &args.trace),
        buffer_kb,
        clock: &args.trace.clock,
        instance: args.instance.as_deref(),
        stacks: &args.trace.stacks,
    };
    // The private instance's name is known before it exists (a kill during the set-up).
    let own_instance = tp_tracefs::Tracefs::discover()?.path("instances").join(format!(
        "{}{}",
        tp_tracefs::INSTANCE_PREFIX,
        std::process::id()
    ));
    if args.instance.is_none() {
        guard.register(&Action::Instance(own_instance.clone()))?;
    }
    let Session { tfs, inst, events, mut child, traced_pids } = session::setup(&settings)?;
    if inst.is_owned() && inst.dir() != own_instance {
        guard.register(&Action::Instance(inst.dir().to_path_buf()))?;
    }
    // The traced processes' mappings (for naming addresses), from before the command runs.
    let child_pid = child.as_ref().map(|c| c.pid());
    let maps = match maps::MapsRecorder::start(
        child_pid,
        &args.trace.pids,
        &traced_pids,
        args.trace.children,
        args.trace.all,
    ) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("tp: the traced processes' mappings are not saved: {e:#}");
            None
        }
    };
    let cpus = inst.cpus()?;
    let mut outs = Vec::new();
    for &c in &cpus {
        outs.push((c, tmp.create(c)?));
    }
    let cap = inst.capture(outs, &CaptureConfig::default())?;
    let t0 = Instant::now();
    let (u, s) = process::self_cpu_time();
    let setup_cpu = u + s;
    // The recorder filter only where a tp recorder thread may run (it costs every event).
    let keep_recorder = args.trace.keep_recorder || !session::may_run_recorder(&settings.target);
    session::start(&inst, &events, &mut child, keep_recorder)?;
    if std::env::var_os("TP_TEST_PANIC_WHILE_RECORDING").is_some() {
        // For the state tests: the instance must go on a panic's unwinding too.
        panic!("TP_TEST_PANIC_WHILE_RECORDING is set");
    }
    if !args.quiet {
        announce(args, &inst, events.len(), child.as_ref(), &traced_pids);
    }
    let live = !args.quiet && process::is_tty(2);
    let mut status = status::Status::new(live, cpus.len());
    let mut waiter = Waiter {
        args,
        inst: &inst,
        child: &mut child,
        traced_pids: &traced_pids,
        signals: &signals,
        t0,
        signals_seen: 0,
    };
    let stop = waiter.wait_for_stop(&cap, &mut status)?;
    inst.set_tracing_on(false)?;
    let elapsed = t0.elapsed();
    let per_cpu = cap.finish()?;
    let (u, s) = process::self_cpu_time();
    let cpu = status::CpuTimes { setup: setup_cpu, recording: u + s };
    status.clear();
    let stats: Vec<CpuStats> = inst.all_stats()?;
    // Restore the default signal dispositions only after the child has been handled.
    let exit = match stop {
        Stop::CommandExited(st) => st.as_shell_code(),
        Stop::Signal(s) if child.is_some() => 128 + s,
        _ => 0,
    };
    let mut meta = output::Metadata::collect(&tfs, &inst, &events, stats)?;
    if let Some(m) = maps {
        let saved = m.finish();
        if saved.lost > 0 && !args.quiet {
            eprintln!(
                "tp: {} records of the traced processes' mappings were lost (more than the side-band ring holds): some addresses stay unnamed",
                saved.lost
            );
        }
        meta.file.procmaps = saved.procmaps;
    }
    let page_size = meta.page_size();
    let files: Vec<(u32, PathBuf)> = per_cpu.iter().map(|c| (c.cpu, tmp.path(c.cpu))).collect();
    let full_cpus: Vec<u32> = per_cpu.iter().filter(|c| c.disk_full).map(|c| c.cpu).collect();
    if !full_cpus.is_empty() {
        rescue::whole_pages(&files, page_size)?;
    }
    let mut lost = output::lost_events(&meta, &files)?;
    for (l, (_, path)) in lost.iter_mut().zip(&files).filter(|(l, _)| full_cpus.contains(&l.cpu)) {
        // The full disk stopped this CPU's reader: what the kernel still held, and the pages
        // it had taken that the disk refused (up to a pipe's worth), are not in the file.
        let recorded =
            meta.stats.iter().find(|s| s.cpu == l.cpu).map_or(0, |s| s.read_events + s.entries);
        l.unwritten += recorded.saturating_sub(output::count_events_from(&meta, path, 0)?);
    }
    let users = match &user_dir {
        Some(d) => user::collect(d)?,
        None => Vec::new(),
    };
    guard.register(&Action::File(crate::outfile::tmp_name(out)))?;
    let write = || {
        if std::env::var_os("TP_TEST_STALL_WRITING").is_some() {
            // For the tests: a kill while the file is being written.
            std::fs::write(crate::outfile::tmp_name(out), b"partial")?;
            eprintln!("tp: test: writing {}", out.display());
            std::thread::sleep(Duration::from_secs(30));
        }
        output::write_tracedat_with_user(out, &meta, &files, &opts, &users)
    };
    let mut written = write_or_abort(write, &signals, out, &tmp, &inst, &mut guard);
    let cut_short = !full_cpus.is_empty() || written.as_ref().is_err_and(rescue::is_disk_full);
    if written.as_ref().is_err_and(rescue::is_disk_full) {
        written = write_what_fits(out, &meta, &files, &opts, &users, &full_cpus, &mut lost);
    } else if !full_cpus.is_empty() && written.is_ok() {
        eprintln!(
            "tp: the disk of {} filled while recording: the reader of CPUs {full_cpus:?} stopped there; the file holds what was recorded until then",
            out.display()
        );
    }
    // The instance goes before the summary so a slow terminal does not keep it alive.
    let inst_name = inst.name().to_string();
    let inst_dir = inst.dir().to_path_buf();
    inst.remove().with_context(|| format!("removing instance {inst_name}"))?;
    guard.forget(&Action::Instance(inst_dir))?;
    drop(signals);
    let bytes: u64 = per_cpu.iter().map(|c| c.bytes).sum();
    if !args.quiet {
        status::summary(
            &args.file.output,
            elapsed,
            bytes,
            page_size,
            &meta.stats,
            &lost,
            stop,
            written.is_ok(),
            cpu,
        );
    }
    written?;
    // A user-space glob that matched nothing was probably mistyped: the file is written,
    // but the exit status says so (the command's own, if it failed).
    let unmatched = match user_dir {
        Some(_) => unmatched_user_globs(args, &tfs, user_globs, &users),
        None => 0,
    };
    // Never silent: events a program's recorder dropped (a thread's buffer was full).
    for u in &users {
        let d = user::dropped(u);
        if !d.is_empty() {
            let total: u64 = d.iter().map(|&(_, n)| n).sum();
            let per: Vec<String> = d.iter().map(|(s, n)| format!("{s}: {n}")).collect();
            eprintln!(
                "tp: {}: {total} events dropped by the program's recorder, its thread buffers full (per stream, the CPU column: {})",
                u.name,
                per.join(", ")
            );
        }
    }
    drop(tmp);
    guard.disarm();
    if (unmatched > 0 || cut_short) && exit == 0 {
        return Ok(1);
    }
    Ok(exit)
}

/// The directory the program's own recordings go to (with `-e` globs for user-space
/// events), announced to the command through the environment.
/// With `user_stacks` (`-U`), the program's events carry their user stacks too
/// (`TP_STACKS`, unless the environment already says which).
fn user_dir(tmp: &TempPages, user_globs: &[String], user_stacks: bool) -> Result<Option<PathBuf>> {
    if user_globs.is_empty() {
        return Ok(None);
    }
    let d = tmp.dir.join("user");
    crate::outfile::create_dir(&d).with_context(|| format!("creating {}", d.display()))?;
    let d = std::fs::canonicalize(&d).with_context(|| format!("resolving {}", d.display()))?;
    // Before any thread or the child exists: the command inherits the environment.
    user::set_env(user_globs, &d);
    if user_stacks && std::env::var_os("TP_STACKS").is_none() {
        std::env::set_var("TP_STACKS", user_globs.join(","));
    }
    Ok(Some(d))
}

/// The start line: how many event types, of what, where, into which file.
fn announce(
    args: &Opts,
    inst: &tp_tracefs::Instance,
    n_events: usize,
    child: Option<&process::GatedChild>,
    traced_pids: &[i32],
) {
    let what = match (child, traced_pids.is_empty()) {
        (Some(c), _) if args.trace.all => {
            format!("all processes while command pid {} runs", c.pid())
        }
        (Some(c), _) => format!("command pid {} and its children", c.pid()),
        (None, false) if args.trace.children => {
            format!("pids {traced_pids:?} and their new children")
        }
        (None, false) => format!("pids {traced_pids:?}"),
        (None, true) => "all processes".to_string(),
    };
    let name = if inst.name().is_empty() {
        "top level".to_string()
    } else {
        format!("instances/{}", inst.name())
    };
    eprintln!(
        "tp: recording {} of {what} in {name} into {}{}",
        status::count(n_events as u64, "event type"),
        args.file.output.display(),
        if child.is_none() { " (Ctrl-C to stop)" } else { "" }
    );
}

/// Say which user-space globs matched none of the program's tracepoints (or that it
/// recorded none); returns how many.
fn unmatched_user_globs(
    args: &Opts,
    tfs: &tp_tracefs::Tracefs,
    user_globs: &[String],
    users: &[user::UserTrace],
) -> usize {
    if users.is_empty() {
        eprintln!(
            "tp: no user-space events were recorded for {}: does the program call tp::init_from_env()?",
            user_globs.join(", ")
        );
        return user_globs.len();
    }
    let mut unmatched = 0;
    for (glob, have) in user::unmatched(user_globs, users) {
        let near = session::nearest_events(tfs, &glob, &have);
        eprintln!(
            "tp: -e {glob:?} matches no kernel event and none of the program's tracepoints ({}): {near}",
            if have.is_empty() { "it has none".to_string() } else { have.join(", ") }
        );
        unmatched += 1;
    }
    if !args.quiet {
        let names: Vec<&str> = users.iter().map(|u| u.name.as_str()).collect();
        eprintln!("tp: the program's own tracepoints are in buffers {}", names.join(", "));
    }
    unmatched
}

/// Write the file while watching for signals: the first Ctrl-C/SIGTERM says what is going
/// on, the second abandons the file (nothing is left: the partial file, the pages and the
/// instance are removed) and exits.
fn write_or_abort(
    write: impl FnOnce() -> Result<()> + Send,
    signals: &Signals,
    out: &Path,
    tmp: &TempPages,
    inst: &tp_tracefs::Instance,
    guard: &mut Guard,
) -> Result<()> {
    std::thread::scope(|s| {
        let h = s.spawn(write);
        let mut seen = 0;
        while !h.is_finished() {
            for d in signals.wait(Duration::from_millis(100))? {
                if d.signal == libc::SIGCHLD {
                    continue;
                }
                seen += 1;
                if seen == 1 {
                    eprintln!("tp: writing {}; Ctrl-C again to abort", out.display());
                    continue;
                }
                let _ = std::fs::remove_file(crate::outfile::tmp_name(out));
                let _ = std::fs::remove_dir_all(&tmp.dir);
                if inst.is_owned() {
                    let _ = tp_tracefs::instance::remove_instance_dir(inst.dir());
                }
                guard.disarm_now();
                eprintln!("tp: aborted: {} was not written", out.display());
                std::process::exit(128 + d.signal);
            }
        }
        h.join().unwrap_or_else(|_| bail!("writing {} panicked", out.display()))
    })
}

/// The disk filled while writing: keep the first part of every CPU's pages that fits, and
/// say so (once, before the summary).
fn write_what_fits(
    out: &Path,
    meta: &output::Metadata,
    files: &[(u32, PathBuf)],
    opts: &output::WriteOptions,
    users: &[user::UserTrace],
    full_cpus: &[u32],
    lost: &mut [output::Lost],
) -> Result<()> {
    match rescue::write_what_fits(out, meta, files, opts, users) {
        Ok(fitted) => {
            for &(cpu, pages, events) in &fitted.dropped {
                if let Some(l) = lost.iter_mut().find(|l| l.cpu == cpu) {
                    l.unwritten_pages += pages;
                    l.unwritten += events;
                }
            }
            let (kept, total) = (fitted.kept_bytes, fitted.total_bytes);
            let also = if full_cpus.is_empty() {
                String::new()
            } else {
                format!(" (the reader of CPUs {full_cpus:?} had stopped at the full disk)")
            };
            eprintln!(
                "tp: the disk of {} is full: it holds the first {} of the {} of pages recorded{also}; it is readable but ends early",
                out.display(),
                human(kept),
                human(total),
            );
            Ok(())
        }
        Err(e) => Err(e.context(format!(
            "the disk of {} is full: not even a small part of the recording fits",
            out.display()
        ))),
    }
}

fn explicit_compress() -> bool {
    std::env::args().any(|a| a == "--compress" || a.starts_with("--compress="))
}

struct Waiter<'a> {
    args: &'a Opts,
    inst: &'a tp_tracefs::Instance,
    child: &'a mut Option<tp_tracefs::process::GatedChild>,
    traced_pids: &'a [i32],
    signals: &'a Signals,
    t0: Instant,
    signals_seen: u32,
}

impl Waiter<'_> {
    fn wait_for_stop(
        &mut self,
        cap: &tp_tracefs::Capture<'_>,
        status: &mut status::Status,
    ) -> Result<Stop> {
        let tick = Duration::from_millis(250);
        let mut next_pid_check = Instant::now() + Duration::from_secs(1);
        loop {
            if let Some(c) = self.child.as_ref() {
                if let Some(st) = process::wait_pid(c.pid(), true)? {
                    // Reaped: forget it so nothing waits for it again.
                    *self.child = None;
                    return Ok(Stop::CommandExited(st));
                }
            }
            if let Some(d) = self.args.duration {
                if self.t0.elapsed() >= d {
                    return Ok(Stop::Duration);
                }
            }
            if matches!(Target::of(&self.args.command, &self.args.trace), Target::Pids { .. })
                && Instant::now() >= next_pid_check
            {
                next_pid_check = Instant::now() + Duration::from_secs(1);
                if self.traced_pids.iter().all(|&p| !tp_tracefs::process::is_alive(p)) {
                    return Ok(Stop::PidsGone);
                }
            }
            let wait = match self.args.duration {
                Some(d) => tick.min(d.saturating_sub(self.t0.elapsed())),
                None => tick,
            };
            for d in self.signals.wait(wait)? {
                let sig = d.signal;
                if sig == libc::SIGCHLD {
                    continue;
                }
                let Some(c) = self.child.as_ref() else { return Ok(Stop::Signal(sig)) };
                self.signals_seen += 1;
                if self.signals_seen > 1 {
                    // A second Ctrl-C/SIGTERM: stop now, leave the command to itself.
                    return Ok(Stop::Signal(sig));
                }
                // Terminal Ctrl-C reached the command too (same foreground group); anything
                // sent to tp alone is passed on. tp stops when the command exits.
                if sig != libc::SIGINT || d.sent_by_process {
                    let _ = process::kill(c.pid(), sig);
                }
            }
            status.update(self.t0.elapsed(), &cap.bytes(), self.inst);
        }
    }
}

/// Remove what a killed tp left beside an output called `name`: `.NAME.tp-PID.d` page
/// directories and `NAME.tp-PID.tmp` files whose PID is gone. Says what it removed.
pub fn remove_stale_temp(dir: &Path, name: &str) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for ent in rd.flatten() {
        let f = ent.file_name().to_string_lossy().into_owned();
        let pid = f
            .strip_prefix(&format!(".{name}.tp-"))
            .and_then(|r| r.strip_suffix(".d"))
            .or_else(|| f.strip_prefix(&format!("{name}.tp-")).and_then(|r| r.strip_suffix(".tmp")))
            .and_then(|p| p.parse::<i32>().ok());
        let Some(pid) = pid else { continue };
        if pid == std::process::id() as i32
            || tp_tracefs::process::is_alive(pid)
            || tp_tracefs::guard::guard_alive(pid)
        {
            continue;
        }
        let p = ent.path();
        let r = if p.is_dir() { std::fs::remove_dir_all(&p) } else { std::fs::remove_file(&p) };
        if r.is_ok() {
            eprintln!("tp: removed {} left by a tp run that was killed (pid {pid})", p.display());
        }
    }
}

/// Per-CPU page files next to the output, removed on drop.
struct TempPages {
    dir: PathBuf,
}

impl TempPages {
    fn new(output: &Path) -> Result<TempPages> {
        let parent = match output.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let name = output
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "trace.dat".into());
        remove_stale_temp(&parent, &name);
        let dir = parent.join(format!(".{name}.tp-{}.d", std::process::id()));
        crate::outfile::create_dir(&dir).with_context(|| {
            format!(
                "cannot write -o {}: cannot create files in {}",
                output.display(),
                parent.display()
            )
        })?;
        Ok(TempPages { dir })
    }

    fn path(&self, cpu: u32) -> PathBuf {
        self.dir.join(format!("cpu{cpu}"))
    }

    fn create(&self, cpu: u32) -> Result<File> {
        crate::outfile::create_private(&self.path(cpu))
    }
}

impl Drop for TempPages {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
