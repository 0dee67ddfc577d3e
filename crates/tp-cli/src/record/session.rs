//! Setting up a tracefs buffer from the command line: events with their filters, pids, the
//! child command, buffer size, clock. Shared by `tp record` and `tp stream`.

use std::ffi::OsString;

use anyhow::{bail, Context, Result};
use tp_tracefs::process::{self, GatedChild};
use tp_tracefs::{EventId, Instance, Tracefs};

/// An event glob with the filter given right after it (`-e GLOB -f FILTER`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    pub glob: String,
    pub filter: Option<String>,
}

/// Pair each `-f` with the `-e` before it, using the order on the command line (clap keeps
/// the two lists separately). `argv` are the process arguments.
pub fn pair_filters(
    argv: &[OsString],
    events: &[String],
    filters: &[String],
) -> Result<Vec<Selection>> {
    let mut seq: Vec<(bool, String)> = Vec::new(); // (is_event, value)
    let mut it = argv.iter().map(|a| a.to_string_lossy().into_owned());
    while let Some(a) = it.next() {
        if a == "--" {
            break;
        }
        let (is_e, val) = if a == "-e" || a == "--event" {
            (true, it.next())
        } else if a == "-f" || a == "--filter" {
            (false, it.next())
        } else if let Some(v) = a.strip_prefix("--event=") {
            (true, Some(v.to_string()))
        } else if let Some(v) = a.strip_prefix("--filter=") {
            (false, Some(v.to_string()))
        } else if a.starts_with("-e") && a.len() > 2 && !a.starts_with("--") {
            (true, Some(a[2..].to_string()))
        } else if a.starts_with("-f") && a.len() > 2 && !a.starts_with("--") {
            (false, Some(a[2..].to_string()))
        } else {
            continue;
        };
        if let Some(v) = val {
            seq.push((is_e, v));
        }
    }
    let got_e: Vec<&String> = seq.iter().filter(|(e, _)| *e).map(|(_, v)| v).collect();
    let got_f: Vec<&String> = seq.iter().filter(|(e, _)| !*e).map(|(_, v)| v).collect();
    if got_e.len() != events.len()
        || got_f.len() != filters.len()
        || got_e.iter().zip(events).any(|(a, b)| *a != b)
        || got_f.iter().zip(filters).any(|(a, b)| *a != b)
    {
        if filters.is_empty() {
            return Ok(events
                .iter()
                .map(|g| Selection { glob: g.clone(), filter: None })
                .collect());
        }
        bail!("could not tell which -e each -f follows; write them as separate `-e GLOB -f FILTER` arguments");
    }
    let mut out: Vec<Selection> = Vec::new();
    for (is_e, v) in seq {
        if is_e {
            out.push(Selection { glob: v, filter: None });
        } else {
            let last = out.last_mut().context("-f FILTER must follow the -e GLOB it applies to")?;
            if last.filter.is_some() {
                bail!("two filters for -e {}: combine them with && in one -f", last.glob);
            }
            last.filter = Some(v);
        }
    }
    Ok(out)
}

/// For a glob that matches nothing, the nearest names among the kernel's events and `extra`
/// (e.g. a program's tracepoints): `did you mean sched:sched_switch?`.
pub fn nearest_events(tfs: &Tracefs, glob: &str, extra: &[String]) -> String {
    let mut names: Vec<String> = extra.to_vec();
    if let Ok(evs) = tfs.available_events() {
        names.extend(evs.iter().map(|e| e.to_string()));
    }
    if !glob.contains(':') {
        names.extend(tfs.systems().unwrap_or_default());
    }
    let near = tp_perf::events::suggest(glob, &names);
    if near.is_empty() {
        "see `tp list`".to_string()
    } else {
        format!("did you mean {}?", near.join(", "))
    }
}

/// What to trace: which processes.
#[derive(Debug, Clone)]
pub enum Target {
    /// Every process.
    All,
    /// These pids (their threads are included), and with `children` the processes they
    /// start from now on (`options/event-fork`).
    Pids { pids: Vec<i32>, children: bool },
    /// A command started by tp, with its children.
    Command(Vec<OsString>),
    /// Every process, while a command started by tp runs (`-a -- CMD`).
    AllWhile(Vec<OsString>),
}

impl Target {
    /// The target of `tp record`'s and `tp stream`'s options: `-- COMMAND` (with `-a`:
    /// everything while it runs), else `-p PIDS` (`-c`: and their children), else every
    /// process.
    pub fn of(command: &[OsString], trace: &super::TraceOpts) -> Target {
        if !command.is_empty() && trace.all {
            Target::AllWhile(command.to_vec())
        } else if !command.is_empty() {
            Target::Command(command.to_vec())
        } else if !trace.pids.is_empty() {
            Target::Pids { pids: trace.pids.clone(), children: trace.children }
        } else {
            Target::All
        }
    }
}

/// The buffer tp records from, configured; the child (if any) is still at its gate.
pub struct Session {
    pub tfs: Tracefs,
    pub inst: Instance,
    pub events: Vec<EventId>,
    pub child: Option<GatedChild>,
    pub traced_pids: Vec<i32>,
}

pub struct Settings<'a> {
    pub selections: &'a [Selection],
    pub target: Target,
    pub buffer_kb: Option<u64>,
    pub clock: &'a str,
    /// `-B NAME`: an existing instance instead of a private one.
    pub instance: Option<&'a str>,
    /// `-T`, `-U`, `--stack-trigger`.
    pub stacks: &'a super::stacks::StackOpts,
}

/// Find tracefs, remove stale instances (saying so), create/open the buffer and configure it.
/// Tracing is left off; the caller starts capture, then [`Session::start`].
pub fn setup(s: &Settings<'_>) -> Result<Session> {
    let tfs = Tracefs::discover()?;
    match tp_tracefs::remove_stale(&tfs) {
        Ok(removed) => {
            for name in removed {
                eprintln!("tp: removed stale instance instances/{name} (its tp process is gone)");
            }
        }
        Err(e) => eprintln!("tp: warning: could not remove stale instances: {e}"),
    }
    // Probes a killed run defined for itself (after the instances that may enable them).
    crate::probe::run::remove_stale_probes(&tfs);
    let inst = match s.instance {
        Some(name) => Instance::open(&tfs, name)?,
        None => Instance::create(&tfs)?,
    };
    inst.set_tracing_on(false)?;
    // record-tgid is left as it is: it costs about 20% more per event on a syscall-heavy
    // load (the kernel saves the tgid on every event), and saved_tgids is still written.
    if let Some(kb) = s.buffer_kb {
        inst.set_buffer_size_kb(kb)?;
    }
    inst.set_clock(s.clock)?;
    let mut events = Vec::new();
    for sel in s.selections {
        let evs = tfs.match_events(&sel.glob)?;
        if evs.is_empty() {
            bail!("no event matches {:?}: {}", sel.glob, nearest_events(&tfs, &sel.glob, &[]));
        }
        for e in &evs {
            if let Some(f) = &sel.filter {
                inst.set_filter(e, f)?;
            }
            if !events.contains(e) {
                events.push(e.clone());
            }
        }
    }
    if events.is_empty() {
        if inst.is_owned() {
            bail!("no events to record: give -e GLOB (e.g. -e sched, -e 'syscalls:sys_enter_*')");
        }
        events = inst.enabled_events()?;
        if events.is_empty() {
            bail!("instance {} has no events enabled and none were given with -e", inst.name());
        }
    }
    super::stacks::apply(&tfs, &inst, &events, s.stacks)?;
    let mut traced_pids = Vec::new();
    let mut child = None;
    match &s.target {
        Target::All => {}
        Target::Pids { pids, children } => {
            for &p in pids {
                traced_pids.extend(process::threads_of(p)?);
            }
            inst.set_event_pids(&traced_pids)?;
            if *children {
                inst.set_event_fork(true)?;
            }
        }
        Target::Command(argv) => {
            let c = GatedChild::spawn(argv)?;
            traced_pids.push(c.pid());
            inst.set_event_pids(&traced_pids)?;
            inst.set_event_fork(true)?;
            child = Some(c);
        }
        Target::AllWhile(argv) => child = Some(GatedChild::spawn(argv)?),
    }
    for e in &events {
        inst.enable(e).with_context(|| format!("enabling {e}"))?;
    }
    Ok(Session { tfs, inst, events, child, traced_pids })
}

/// Turn tracing on, then let the child run. tp's own threads (the capture threads exist by
/// now) are left out of the recording, as trace-cmd leaves out its own: with `-a` they
/// would record their own reading of the buffers. The kernel's pid filter still records a
/// `sched_switch` or wakeup made by an ignored task when the other task is traced, so in a
/// buffer of tp's own those events also get `common_pid != TID` for each of tp's threads:
/// otherwise every wakeup of a live reader records the reader going back to sleep, which
/// wakes it again (`tp stream -a -e sched` was three quarters its own switches).
///
/// Unless `keep_recorder`, a traced Rust program's own `tp-recorder` thread (crate `tp`'s
/// drain thread) is left out too, by its name: every event gets `COMM != "tp-recorder"`
/// (the kernel's name of the current task) and `sched_switch` also drops switches into it.
/// A name filter needs no tid, so there is no window between the thread's start and tp
/// learning its tid (only before the thread names itself, its first instructions).
pub fn start(
    inst: &Instance,
    events: &[EventId],
    child: &mut Option<GatedChild>,
    keep_recorder: bool,
) -> Result<()> {
    let own = process::threads_of(std::process::id() as i32)?;
    inst.set_event_notrace_pids(&own)?;
    if inst.is_owned() {
        for e in events {
            let mut extra = Vec::new();
            if is_sched_pair_event(e) {
                extra.extend(own.iter().map(|t| format!("common_pid != {t}")));
            }
            if !keep_recorder {
                extra.extend(recorder_filter(e));
            }
            if extra.is_empty() {
                continue;
            }
            let user = inst.filter(e)?;
            let filter = with_filter(&user, &extra);
            inst.set_filter(e, &filter).with_context(|| format!("filtering {e}"))?;
        }
    }
    inst.set_tracing_on(true)?;
    if let Some(c) = child {
        c.release()?;
    }
    Ok(())
}

/// The name crate `tp` gives its drain thread.
const RECORDER_COMM: &str = "tp-recorder";

/// Whether a traced process may run crate tp's `tp-recorder` thread, so that the events
/// need the filter that leaves it out (it costs every event of every task a comparison of
/// names: 20-28% of the kernel's cost per event on a syscall load). A command or a `-p`
/// process may only if its program links crate tp: every `trace_event!` site is a USDT
/// probe, so such a binary has `.note.stapsdt` (programs with other USDT probes get the
/// filter too, harmlessly). Only the command's own program is looked at, not those it
/// starts (a tp program run through a shell keeps its recorder's events); with `-a` or
/// `-c` any process may run one.
pub fn may_run_recorder(target: &Target) -> bool {
    let links_tp = |exe: &std::path::Path| tp_symbols::elf::has_section(exe, ".note.stapsdt");
    match target {
        Target::All | Target::AllWhile(_) => true,
        Target::Command(argv) => {
            argv.first().and_then(|p| process::resolve_program(p)).is_none_or(|exe| links_tp(&exe))
        }
        Target::Pids { children: true, .. } => true,
        Target::Pids { pids, .. } => {
            pids.iter().any(|p| links_tp(std::path::Path::new(&format!("/proc/{p}/exe"))))
        }
    }
}

/// The filter terms that leave a `tp-recorder` thread out of `e`: its own events (`COMM` is
/// the current task's name), and for `sched_switch` the switches into it as well.
fn recorder_filter(e: &EventId) -> Vec<String> {
    if e.system == "sched" && e.name == "sched_switch" {
        vec![
            format!("prev_comm != \"{RECORDER_COMM}\""),
            format!("next_comm != \"{RECORDER_COMM}\""),
        ]
    } else {
        vec![format!("COMM != \"{RECORDER_COMM}\"")]
    }
}

/// The events the kernel's pid filter decides by a task other than the current one
/// (`kernel/trace/trace_events.c`: the switch's prev and next, the wakee of a wakeup).
fn is_sched_pair_event(e: &EventId) -> bool {
    e.system == "sched"
        && matches!(
            e.name.as_str(),
            "sched_switch" | "sched_waking" | "sched_wakeup" | "sched_wakeup_new"
        )
}

/// `user` (the event's current filter, `none` when unset) and each of `extra`.
fn with_filter(user: &str, extra: &[String]) -> String {
    let ours = extra.join(" && ");
    match user.trim() {
        "" | "none" => ours,
        u => format!("({u}) && {ours}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_threads_filter_keeps_the_users() {
        let own = |t: &[i32]| t.iter().map(|t| format!("common_pid != {t}")).collect::<Vec<_>>();
        assert_eq!(with_filter("none", &own(&[7])), "common_pid != 7");
        assert_eq!(
            with_filter("prev_pid > 0 || next_pid > 0", &own(&[7, 8])),
            "(prev_pid > 0 || next_pid > 0) && common_pid != 7 && common_pid != 8"
        );
    }
}
