//! `tp stat [-e EVENT]... [-p PID | -a | -C CPUS] [-- CMD]`: count events through
//! perf_event_open, printed like `perf stat` (text, `-x SEP` or `--json`; `-r N` means and
//! standard deviations; `-I MS` interval lines). The command's exit status is passed through.

use std::ffi::OsString;
use std::io::Write;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use tp_format::render::json_string;
use tp_perf::counter::{online_cpus, CounterOptions, CounterSet, Reading, Target};
use tp_perf::events::{self, Class, Event, Kind, MachineLookups};
use tp_tracefs::process::{self, GatedChild, Signals};

/// perf stat's default set (hardware events print `<not supported>` in a VM).
const DEFAULT_EVENTS: &[&str] = &[
    "task-clock",
    "context-switches",
    "cpu-migrations",
    "page-faults",
    "major-faults",
    "minor-faults",
    "cycles",
    "instructions",
];

#[derive(clap::Args)]
pub struct Args {
    /// Event to count, as perf spells it (repeatable, or comma-separated): `major-faults`,
    /// `cs:u`, `cycles`, `mem:ADDR[/LEN][:rwx]`, `mem:SYMBOL`, `sched:sched_switch`, globs;
    /// `{a,b}` is a group (counted together, read at once; `{a,b}:u` applies `:u` to each).
    #[arg(short = 'e', long = "event", value_name = "EVENT")]
    events: Vec<String>,
    /// Count an existing process (all its threads and their children) until it exits or
    /// Ctrl-C.
    #[arg(short = 'p', long = "pid", conflicts_with_all = ["all_cpus", "command"])]
    pid: Option<i32>,
    /// Count every task on every CPU (system-wide), while CMD runs or until Ctrl-C.
    #[arg(short = 'a', long = "all-cpus")]
    all_cpus: bool,
    /// Count every task on these CPUs (`0`, `0-1,3`).
    #[arg(short = 'C', long = "cpu", value_name = "CPUS")]
    cpu: Option<String>,
    /// Run the command N times: means, and the standard deviation of the mean.
    #[arg(short = 'r', long = "repeat", default_value_t = 1, value_name = "N")]
    repeat: usize,
    /// Print counts every MS milliseconds.
    #[arg(short = 'I', long = "interval-print", value_name = "MS")]
    interval: Option<u64>,
    /// Machine-readable output, fields separated by SEP (perf's `-x,` layout).
    #[arg(short = 'x', long = "field-separator", value_name = "SEP", conflicts_with = "json")]
    sep: Option<String>,
    /// One JSON object per line (perf's `-j` fields).
    #[arg(short = 'j', long = "json")]
    json: bool,
    /// The command to run and count (its children included).
    #[arg(last = true, value_name = "CMD")]
    command: Vec<OsString>,
}

/// How counts are printed.
enum Style {
    Text,
    Csv(String),
    Json,
}

/// One event's count over the runs.
struct Count {
    /// Scaled value of each run; None in any run: not supported (or not counted).
    runs: Vec<Option<Reading>>,
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    if args.repeat == 0 {
        bail!("-r needs at least 1 run");
    }
    if args.command.is_empty() && args.pid.is_none() && !args.all_cpus && args.cpu.is_none() {
        bail!("nothing to count: give -- CMD, -p PID, -a or -C CPUS");
    }
    if args.repeat > 1 && args.command.is_empty() {
        bail!("-r repeats a command: give -- CMD");
    }
    if args.interval == Some(0) {
        bail!("-I needs a positive number of milliseconds");
    }
    let style = match (&args.sep, args.json) {
        (Some(s), _) => Style::Csv(s.clone()),
        (None, true) => Style::Json,
        _ => Style::Text,
    };
    // Each name with its group, if in one.
    let mut grouped: Vec<(String, Option<usize>)> = Vec::new();
    if args.events.is_empty() {
        grouped.extend(DEFAULT_EVENTS.iter().map(|s| (s.to_string(), None)));
    }
    let mut next_group = 0;
    for e in &args.events {
        grouped.extend(split_events(e, &mut next_group)?);
    }
    let names: Vec<String> = grouped.iter().map(|(n, _)| n.clone()).collect();
    // `sdt_PROVIDER:NAME`: USDT probes of the command or -p PID, defined while counting.
    let pids: Vec<i32> = args.pid.into_iter().collect();
    let _sdt_probes =
        crate::probe::run::define_for_record(&names, None, &args.command, &pids, false)?;
    let names: Vec<String> = names.iter().map(|n| crate::probe::run::event_glob(n)).collect();
    let specs = names.iter().map(|n| events::parse(n)).collect::<Result<Vec<_>, _>>()?;
    let program = args.command.first().and_then(|c| process::resolve_program(c));
    let tfs = if specs.iter().any(|s| matches!(s.kind, Kind::Tracepoint { .. })) {
        Some(
            tp_tracefs::Tracefs::discover()
                .context("tracepoints are counted by id from tracefs")?,
        )
    } else {
        None
    };
    // Resolved one name at a time: a glob may give several events, all in the name's group.
    let mut lookups = MachineLookups::new(tfs.as_ref(), program.as_deref());
    let mut events = Vec::new();
    let mut groups: Vec<std::ops::Range<usize>> = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        let start = events.len();
        events.extend(events::resolve(std::slice::from_ref(spec), &mut lookups)?);
        let Some(g) = grouped[i].1 else { continue };
        match groups.last_mut() {
            Some(r) if i > 0 && grouped[i - 1].1 == Some(g) => r.end = events.len(),
            _ => groups.push(start..events.len()),
        }
    }

    let mut counts: Vec<Count> = events.iter().map(|_| Count { runs: Vec::new() }).collect();
    let mut elapsed = Vec::new();
    let mut status = 0;
    // As opened: an event may have become user-space only (`cs:u`) for a user without
    // CAP_PERFMON, as perf does.
    let mut opened = events.clone();
    for _ in 0..args.repeat {
        let run = match count_once(&args, &events, &groups, &style)? {
            Outcome::Counted(r) => r,
            Outcome::NotRun(code) => return Ok(code),
        };
        for (c, v) in counts.iter_mut().zip(run.values) {
            c.runs.push(v);
        }
        elapsed.push(run.elapsed);
        status = run.status;
        opened = run.events;
    }
    let mut err = std::io::stderr().lock();
    print_counts(&mut err, &style, &args, &opened, &counts, &elapsed)?;
    err.flush()?;
    Ok(status)
}

/// `-e` text into event names, each with its group: `a,b` is two events, `{a,b},c` a group
/// of a and b (numbered from `next_group`) then c alone; a modifier after the group
/// (`{a,b}:u`) applies to each member (appended to its own, as perf does).
fn split_events(s: &str, next_group: &mut usize) -> anyhow::Result<Vec<(String, Option<usize>)>> {
    let mut out = Vec::new();
    let mut rest = s;
    while !rest.is_empty() {
        rest = rest.trim_start_matches([',', ' ']);
        let Some(inner) = rest.strip_prefix('{') else {
            let (name, tail) = rest.split_once(',').unwrap_or((rest, ""));
            if name.contains(['{', '}']) {
                bail!("-e {s}: a group is {{event,event...}}");
            }
            if !name.trim().is_empty() {
                out.push((name.trim().to_string(), None));
            }
            rest = tail;
            continue;
        };
        let Some((members, tail)) = inner.split_once('}') else {
            bail!("-e {s}: group without its closing }}");
        };
        let (modifier, tail) = match tail.strip_prefix(':') {
            Some(m) => m.split_at(m.find(',').unwrap_or(m.len())),
            None => ("", tail),
        };
        if members.contains('{') {
            bail!("-e {s}: groups do not nest");
        }
        let group = *next_group;
        *next_group += 1;
        let before = out.len();
        for m in members.split(',').map(str::trim).filter(|m| !m.is_empty()) {
            if modifier.is_empty() {
                out.push((m.to_string(), None));
            } else if events::parse(m).is_ok_and(|e| e.modifiers != Default::default()) {
                bail!("-e {s}: a modifier on the group and on {m}: give one of them");
            } else {
                out.push((format!("{m}:{modifier}"), None));
            }
            out.last_mut().expect("just pushed").1 = Some(group);
        }
        if out.len() == before {
            bail!("-e {s}: an empty group");
        }
        if !tail.is_empty() && !tail.starts_with(',') {
            bail!("-e {s}: a , after the group's }}");
        }
        rest = tail;
    }
    Ok(out)
}

struct Run {
    events: Vec<Event>,
    values: Vec<Option<Reading>>,
    elapsed: Duration,
    status: i32,
}

enum Outcome {
    Counted(Run),
    /// The command could not be started: the shell's code (127 not found, 126 not runnable).
    NotRun(i32),
}

fn count_once(
    args: &Args,
    events: &[Event],
    groups: &[std::ops::Range<usize>],
    style: &Style,
) -> anyhow::Result<Outcome> {
    let signals = Signals::install(&[libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGCHLD])?;
    let mut child = match args.command.first() {
        None => None,
        Some(prog) if process::resolve_program(prog).is_none() => {
            eprintln!("tp stat: {}: command not found", prog.to_string_lossy());
            return Ok(Outcome::NotRun(127));
        }
        Some(_) => Some(GatedChild::spawn(&args.command)?),
    };
    let system_wide = args.all_cpus || args.cpu.is_some();
    let targets: Vec<Target> = if let Some(list) = &args.cpu {
        events::parse_cpu_list(list)
            .map_err(|e| anyhow::anyhow!("-C {list}: {e}"))?
            .into_iter()
            .map(Target::Cpu)
            .collect()
    } else if args.all_cpus {
        online_cpus()?.into_iter().map(Target::Cpu).collect()
    } else if let Some(pid) = args.pid {
        process::threads_of(pid)
            .with_context(|| format!("-p {pid}"))?
            .into_iter()
            .map(Target::Thread)
            .collect()
    } else {
        vec![Target::Thread(child.as_ref().map(|c| c.pid()).unwrap_or(0))]
    };
    let on_exec = child.is_some() && !system_wide;
    let opts = CounterOptions {
        // Per-CPU counters see every task already; per-task ones follow the children.
        inherit: !system_wide,
        enable_on_exec: on_exec,
        disabled: true,
        ..Default::default()
    };
    // On failure the child (still at its gate) is dropped and exits without running.
    let set = CounterSet::open_groups(events, groups, &targets, &opts)?;
    let events: Vec<Event> = set.events.iter().map(|e| e.event.clone()).collect();
    let events = &events[..];
    if !on_exec {
        set.enable()?;
    }
    let start = Instant::now();
    if let Some(c) = child.as_mut() {
        if let Err(e) = c.release() {
            eprintln!("tp stat: {e}");
            let code = if e.errno() == Some(libc::ENOENT) { 127 } else { 126 };
            return Ok(Outcome::NotRun(code));
        }
    }
    let mut status = 0;
    let tick = args.interval.map(Duration::from_millis);
    let mut next_tick = tick.map(|t| start + t);
    let mut last: Vec<Option<Reading>> = events.iter().map(|_| Some(Reading::default())).collect();
    let mut out = std::io::stderr().lock();
    if tick.is_some() && matches!(style, Style::Text) {
        writeln!(out, "#           time             counts unit events")?;
    }
    loop {
        if let Some(c) = &child {
            if let Some(st) = process::wait_pid(c.pid(), true)? {
                status = st.as_shell_code();
                break;
            }
        } else if args.pid.is_some_and(process_gone) {
            break;
        }
        let now = Instant::now();
        if let Some(t) = next_tick {
            if now >= t {
                let cur = set.read()?;
                let delta: Vec<Option<Reading>> = cur
                    .iter()
                    .zip(&last)
                    .map(|(c, l)| c.zip(*l).map(|(c, l)| c.since(&l)))
                    .collect();
                print_interval(&mut out, style, start.elapsed(), events, &delta)?;
                last = cur;
                next_tick = Some(t + tick.unwrap_or_default());
                continue;
            }
        }
        let wait =
            next_tick.map(|t| t.saturating_duration_since(now)).unwrap_or(Duration::from_secs(1));
        // -p: the process is polled (it is not our child: no SIGCHLD).
        let wait = if args.pid.is_some() { wait.min(Duration::from_millis(100)) } else { wait };
        let got = signals.wait(wait)?;
        let stop = got.iter().any(|d| d.signal != libc::SIGCHLD);
        // With a command, Ctrl-C reaches it too: keep counting until it exits.
        if stop && child.is_none() {
            break;
        }
    }
    let elapsed = start.elapsed();
    set.disable()?;
    let values = set.read()?;
    if let Some(t) = tick {
        // The last, partial interval.
        if elapsed.as_nanos() % t.as_nanos() != 0 {
            let delta: Vec<Option<Reading>> = values
                .iter()
                .zip(&last)
                .map(|(c, l)| c.zip(*l).map(|(c, l)| c.since(&l)))
                .collect();
            print_interval(&mut out, style, elapsed, events, &delta)?;
        }
    }
    Ok(Outcome::Counted(Run { events: events.to_vec(), values, elapsed, status }))
}

/// Has `pid` exited? Gone from /proc, or a zombie its parent has not reaped yet (a perf fd
/// cannot tell: a counting event without a ring always polls as POLLHUP).
pub(crate) fn process_gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(s) => s
            .rsplit_once(')')
            .is_some_and(|(_, rest)| matches!(rest.trim_start().chars().next(), Some('Z' | 'X'))),
    }
}

fn is_clock(ev: &Event) -> bool {
    ev.class == Class::Software
        && matches!(ev.name.split(':').next(), Some("task-clock" | "cpu-clock"))
}

/// The value as printed and its unit: clocks in msec, everything else a count.
fn shown(ev: &Event, v: f64) -> (String, &'static str) {
    if is_clock(ev) {
        (format!("{:.2}", v / 1e6), "msec")
    } else {
        (format!("{}", v.round() as u64), "")
    }
}

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len().max(1) as f64
}

/// perf stat's `+-`: the standard deviation of the mean, as a percentage of the mean.
fn rel_stddev(xs: &[f64]) -> f64 {
    let n = xs.len() as f64;
    if xs.len() < 2 {
        return 0.0;
    }
    let m = mean(xs);
    let var = xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0);
    let sd_mean = (var / n).sqrt();
    if m == 0.0 {
        0.0
    } else {
        100.0 * sd_mean / m
    }
}

/// The `#` column: CPUs utilized for clocks, a rate per second for the rest (over the
/// task-clock time when it was counted, as perf does; else over the wall time).
fn metric(ev: &Event, v: f64, task_clock_ns: Option<f64>, elapsed_ns: f64) -> (f64, String) {
    if is_clock(ev) {
        return (v / elapsed_ns.max(1.0), "CPUs utilized".into());
    }
    let secs = task_clock_ns.unwrap_or(elapsed_ns) / 1e9;
    let rate = if secs > 0.0 { v / secs } else { 0.0 };
    let (r, prefix) = if rate >= 1e9 {
        (rate / 1e9, "G")
    } else if rate >= 1e6 {
        (rate / 1e6, "M")
    } else if rate >= 1e3 {
        (rate / 1e3, "K")
    } else {
        (rate, "")
    };
    (r, format!("{prefix}/sec"))
}

fn header(args: &Args) -> String {
    if let Some(pid) = args.pid {
        format!("process id '{pid}'")
    } else if args.command.is_empty() && args.cpu.is_some() {
        format!("'CPU(s) {}'", args.cpu.as_deref().unwrap_or(""))
    } else if args.command.is_empty() || args.all_cpus {
        "'system wide'".into()
    } else {
        let cmd: Vec<String> =
            args.command.iter().map(|a| a.to_string_lossy().into_owned()).collect();
        format!("'{}'", cmd.join(" "))
    }
}

fn print_counts(
    out: &mut impl Write,
    style: &Style,
    args: &Args,
    events: &[Event],
    counts: &[Count],
    elapsed: &[Duration],
) -> std::io::Result<()> {
    let elapsed_s: Vec<f64> = elapsed.iter().map(|d| d.as_secs_f64()).collect();
    let elapsed_ns = mean(&elapsed_s) * 1e9;
    let runs = elapsed.len();
    // Per event: the mean scaled value and its spread, or None (not supported / counted).
    let values: Vec<Value> = counts
        .iter()
        .map(|c| {
            let rs: Option<Vec<Reading>> = c.runs.iter().copied().collect();
            let rs = rs?;
            let xs: Vec<f64> = rs.iter().map(Reading::scaled).collect();
            let mut total = Reading::default();
            rs.iter().for_each(|r| total.add(r));
            Some((mean(&xs), rel_stddev(&xs), total))
        })
        .collect();
    let task_clock_ns = events
        .iter()
        .zip(&values)
        .find(|(e, _)| e.name == "task-clock")
        .and_then(|(_, v)| v.map(|v| v.0));
    if matches!(style, Style::Text) && args.interval.is_none() {
        let runs_s = if runs > 1 { format!(" ({runs} runs)") } else { String::new() };
        writeln!(out, "\n Performance counter stats for {}{runs_s}:\n", header(args))?;
    }
    if args.interval.is_some() {
        // The interval lines already said it all; a text summary would repeat them.
        return Ok(());
    }
    let scale = Scale { runs, task_clock_ns, elapsed_ns };
    for (ev, v) in events.iter().zip(&values) {
        match style {
            Style::Text => writeln!(out, "{}", text_line(ev, v, &scale).trim_end())?,
            Style::Csv(sep) => writeln!(out, "{}", csv_fields(ev, v, &scale).join(sep))?,
            Style::Json => writeln!(out, "{}", json_line(ev, v, &scale))?,
        }
    }
    if let Style::Text = style {
        if runs > 1 {
            let sd_abs = rel_stddev(&elapsed_s) * mean(&elapsed_s) / 100.0;
            writeln!(
                out,
                "\n{:>18.5} +- {sd_abs:.5} seconds time elapsed  ( +- {:.2}% )\n",
                mean(&elapsed_s),
                rel_stddev(&elapsed_s)
            )?;
        } else {
            writeln!(out, "\n{:>18.9} seconds time elapsed\n", mean(&elapsed_s))?;
        }
    }
    Ok(())
}

/// An event's mean scaled value over the runs, its relative spread (%) and the summed
/// reading; `None` when the event is not supported.
type Value = Option<(f64, f64, Reading)>;

/// What an event's line needs besides its value.
struct Scale {
    runs: usize,
    task_clock_ns: Option<f64>,
    elapsed_ns: f64,
}

/// perf stat's text line of an event.
fn text_line(ev: &Event, v: &Value, sc: &Scale) -> String {
    match v {
        None => format!("{:>18}      {}", "<not supported>", ev.name),
        Some((_, _, total)) if total.running == 0 && total.enabled > 0 => {
            format!("{:>18}      {}", "<not counted>", ev.name)
        }
        Some((m, sd, total)) => {
            let (val, unit) = shown(ev, *m);
            let (mv, mu) = metric(ev, *m, sc.task_clock_ns, sc.elapsed_ns);
            let mut l = format!("{val:>18} {unit:<4} {:<33}# {mv:>8.3} {mu}", ev.name);
            if sc.runs > 1 {
                l = format!("{l:<88}( +- {sd:>5.2}% )");
            }
            let frac = total.running_fraction();
            if frac < 1.0 {
                l.push_str(&format!("  ({:.2}%)", frac * 100.0));
            }
            l
        }
    }
}

/// perf stat -x's fields of an event.
fn csv_fields(ev: &Event, v: &Value, sc: &Scale) -> Vec<String> {
    match v {
        None => vec![
            "<not supported>".into(),
            String::new(),
            ev.name.clone(),
            "0".into(),
            "100.00".into(),
            String::new(),
            String::new(),
        ],
        Some((m, sd, total)) => {
            let (val, unit) = shown(ev, *m);
            let (mv, mu) = metric(ev, *m, sc.task_clock_ns, sc.elapsed_ns);
            let mut f = vec![
                val,
                unit.into(),
                ev.name.clone(),
                (total.running / sc.runs as u64).to_string(),
                format!("{:.2}", total.running_fraction() * 100.0),
                format!("{mv:.3}"),
                mu,
            ];
            if sc.runs > 1 {
                f.insert(3, format!("{sd:.2}%"));
            }
            f
        }
    }
}

/// perf stat --json's line of an event.
fn json_line(ev: &Event, v: &Value, sc: &Scale) -> String {
    match v {
        None => format!(
            "{{\"counter-value\" : \"<not supported>\", \"unit\" : \"\", \"event\" : {}, \"event-runtime\" : 0, \"pcnt-running\" : 100.00}}",
            json_string(&ev.name)
        ),
        Some((m, sd, total)) => {
            let (mv, mu) = metric(ev, *m, sc.task_clock_ns, sc.elapsed_ns);
            let (value, unit) = if is_clock(ev) { (m / 1e6, "msec") } else { (*m, "") };
            let var = if sc.runs > 1 { format!(", \"variance\" : {sd:.2}") } else { String::new() };
            format!(
                "{{\"counter-value\" : \"{value:.6}\", \"unit\" : \"{unit}\", \"event\" : {}, \"event-runtime\" : {}, \"pcnt-running\" : {:.2}{var}, \"metric-value\" : {mv:.6}, \"metric-unit\" : {}}}",
                json_string(&ev.name),
                total.running / sc.runs as u64,
                total.running_fraction() * 100.0,
                json_string(&mu)
            )
        }
    }
}

fn print_interval(
    out: &mut impl Write,
    style: &Style,
    at: Duration,
    events: &[Event],
    delta: &[Option<Reading>],
) -> std::io::Result<()> {
    let t = at.as_secs_f64();
    for (ev, d) in events.iter().zip(delta) {
        let value = match d {
            None => "<not supported>".to_string(),
            Some(r) if r.running == 0 => "<not counted>".to_string(),
            Some(r) => shown(ev, r.scaled()).0,
        };
        let unit = if is_clock(ev) { "msec" } else { "" };
        let running = d.map(|r| r.running).unwrap_or(0);
        let pct = d.map(|r| r.running_fraction() * 100.0).unwrap_or(100.0);
        match style {
            Style::Text => writeln!(out, "{}", format!("{t:>16.9} {value:>18} {unit:<4} {}", ev.name).trim_end())?,
            Style::Csv(sep) => {
                let f = [format!("{t:.9}"), value, unit.into(), ev.name.clone(), running.to_string(), format!("{pct:.2}")];
                writeln!(out, "{}", f.join(sep))?
            }
            Style::Json => writeln!(
                out,
                "{{\"interval\" : {t:.9}, \"counter-value\" : {}, \"unit\" : \"{unit}\", \"event\" : {}, \"event-runtime\" : {running}, \"pcnt-running\" : {pct:.2}}}",
                json_string(&value),
                json_string(&ev.name)
            )?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stddev_of_the_mean_as_perf_prints_it() {
        // 1, 0, 0: mean 1/3, sample sd 0.577, of the mean 0.333: 100%.
        assert!((rel_stddev(&[1.0, 0.0, 0.0]) - 100.0).abs() < 1e-9);
        assert_eq!(rel_stddev(&[5.0]), 0.0);
        assert_eq!(rel_stddev(&[4.0, 4.0]), 0.0);
    }

    #[test]
    fn metrics() {
        let tc = Event::symbolic("task-clock").unwrap();
        assert_eq!(shown(&tc, 1_180_000.0), ("1.18".into(), "msec"));
        let (v, u) = metric(&tc, 1e6, None, 2e6);
        assert_eq!((v, u.as_str()), (0.5, "CPUs utilized"));
        let cs = Event::symbolic("cs").unwrap();
        let (v, u) = metric(&cs, 1000.0, Some(1e6), 2e6);
        assert_eq!((v, u.as_str()), (1.0, "M/sec"));
    }

    #[test]
    fn event_lists_and_groups() {
        let split = |s: &str| {
            let mut g = 0;
            split_events(s, &mut g).map_err(|e| e.to_string())
        };
        let one = |n: &str, g: Option<usize>| (n.to_string(), g);
        assert_eq!(split("cs, faults,,").unwrap(), [one("cs", None), one("faults", None)]);
        assert_eq!(
            split("cs,{task-clock, page-faults}:u,{a},b").unwrap(),
            [
                one("cs", None),
                one("task-clock:u", Some(0)),
                one("page-faults:u", Some(0)),
                one("a", Some(1)),
                one("b", None)
            ]
        );
        assert!(split("{a,b").unwrap_err().contains("closing }"));
        assert!(split("{a,{b}}").unwrap_err().contains("nest"));
        assert!(split("{}").unwrap_err().contains("empty group"));
        assert!(split("{a}x").unwrap_err().contains("after the group"));
        assert!(split("{cs:k}:u").unwrap_err().contains("modifier"));
        assert!(split("a}").is_err());
    }
}
