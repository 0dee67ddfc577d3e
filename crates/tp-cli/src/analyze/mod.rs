//! Analyses of a recording: `tp syscalls`, `tp sched`, `tp faults`. Each reads the merged
//! timeline of a trace.dat or a perf.data ([`timeline`]: every buffer, the kernel's and Rust
//! programs', or perf's records, in time order; task names as the events give them),
//! decodes only the fields its question needs, and says what it could not know (lost events
//! in the window, events the recording did not enable) instead of guessing.
//!
//! The computations (`syscalls::Stats`, `sched::Stats`, `faults::Stats`) are pure: they are
//! fed decoded events, so they are tested without root or a trace file. perf.data's other
//! samples (software events such as `major-faults`, with stacks) and mappings
//! (`tp_format::maps`) reach the analyses that use them through the same timeline.

pub mod faults;
pub mod sched;
pub mod syscalls;
pub mod timeline;

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::Context;
use tp_format::glob::glob_match;

/// What every analysis takes: the file, the output form, and which tasks and time.
#[derive(clap::Args, Debug, Clone)]
pub struct Select {
    /// The recording: a trace.dat (v6 or v7) or a perf.data.
    #[arg(short = 'i', long = "input", default_value = "trace.dat")]
    pub input: PathBuf,
    /// One JSON object instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Only these tasks (thread IDs, as the trace's pid column; repeatable or comma separated).
    #[arg(short = 'P', long = "pid", value_delimiter = ',')]
    pub pids: Vec<i32>,
    /// Only tasks whose command name matches this glob (repeatable).
    #[arg(long = "comm", value_name = "GLOB")]
    pub comms: Vec<String>,
    /// Start of the window: seconds as `tp report` prints them (`5044.055066`), or `+S`
    /// seconds after the first event.
    #[arg(long, value_parser = parse_time, allow_hyphen_values = true)]
    pub from: Option<TimeArg>,
    /// End of the window (inclusive), in the same forms as --from.
    #[arg(long, value_parser = parse_time, allow_hyphen_values = true)]
    pub to: Option<TimeArg>,
}

/// A `--from`/`--to` value in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeArg {
    Absolute(u64),
    /// After the first event of the file.
    Relative(u64),
}

fn parse_time(s: &str) -> Result<TimeArg, String> {
    let (rel, num) = match s.strip_prefix('+') {
        Some(n) => (true, n),
        None => (false, s),
    };
    let ns = parse_seconds(num).ok_or_else(|| format!("{s:?} is not a time in seconds"))?;
    Ok(if rel { TimeArg::Relative(ns) } else { TimeArg::Absolute(ns) })
}

/// `5044.055066` -> ns, exactly (no float rounding).
fn parse_seconds(s: &str) -> Option<u64> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if int.is_empty() && frac.is_empty() || frac.len() > 9 {
        return None;
    }
    let digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
    if !digits(int) || !digits(frac) {
        return None;
    }
    let secs: u64 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let mut ns: u64 = if frac.is_empty() { 0 } else { frac.parse().ok()? };
    for _ in frac.len()..9 {
        ns *= 10;
    }
    secs.checked_mul(1_000_000_000)?.checked_add(ns)
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
    pub fn wants(&mut self, pid: i32, names: &timeline::Names<'_>) -> bool {
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

impl Select {
    /// Whether the task `pid` named `comm` is wanted.
    pub fn wants_task(&self, pid: i32, comm: &str) -> bool {
        (self.pids.is_empty() || self.pids.contains(&pid))
            && (self.comms.is_empty() || self.comms.iter().any(|g| glob_match(g, comm)))
    }

    /// True when tasks are filtered at all.
    pub fn filters_tasks(&self) -> bool {
        !self.pids.is_empty() || !self.comms.is_empty()
    }
}

/// `tp ANALYSIS -- CMD`: when a command is given, record `events` of it into a temporary
/// file and point `input` at it (the command is taken). Returns the directory, to keep until
/// the analysis is done, and the command's exit status; `None` without a command.
pub fn record_given_command(
    events: &[&str],
    command: &mut Vec<OsString>,
    input: &mut PathBuf,
) -> anyhow::Result<Option<(TempDir, i32)>> {
    if command.is_empty() {
        return Ok(None);
    }
    let (dir, file, status) = record_command(events, &[], "trace.dat", &std::mem::take(command))?;
    *input = file;
    Ok(Some((dir, status)))
}

/// Record `events` of `command` through perf_event_open, every event sampled (`--period
/// 1`), with call stacks (`-g`), into a temporary perf.data: returns its directory (keep it
/// until the analysis is done), the file and the command's exit status.
pub fn record_command_perf(
    events: &[&str],
    command: &[OsString],
) -> anyhow::Result<(TempDir, PathBuf, i32)> {
    record_command(events, &["--perf", "--period", "1", "-g"], "perf.data", command)
}

fn record_command(
    events: &[&str],
    options: &[&str],
    file: &str,
    command: &[OsString],
) -> anyhow::Result<(TempDir, PathBuf, i32)> {
    use clap::Parser;
    #[derive(Parser)]
    struct Record {
        #[command(flatten)]
        args: crate::record::Args,
    }
    let dir = TempDir::new()?;
    let out = dir.0.join(file);
    let mut argv: Vec<OsString> = vec!["tp-record".into(), "-q".into(), "-o".into()];
    argv.push(out.clone().into());
    argv.extend(options.iter().map(OsString::from));
    for e in events {
        argv.push("-e".into());
        argv.push((*e).into());
    }
    argv.push("--".into());
    argv.extend(command.iter().cloned());
    let rec = Record::try_parse_from(argv).context("recording the command")?;
    let status = crate::record::run(rec.args)?;
    Ok((dir, out, status))
}

/// A private temporary directory, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    fn new() -> anyhow::Result<TempDir> {
        let base = std::env::temp_dir();
        for n in 0..100u32 {
            let p = base.join(format!("tp-analyze-{}-{n}", std::process::id()));
            if std::fs::create_dir(&p).is_ok() {
                return Ok(TempDir(p));
            }
        }
        anyhow::bail!("cannot create a temporary directory in {}", base.display())
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Nanoseconds as `tp report` prints timestamps (`5044.055066`).
pub fn secs(ns: u64) -> String {
    format!("{}.{:06}", ns / 1_000_000_000, ns % 1_000_000_000 / 1000)
}

/// A duration for people: `812 ns`, `12.345 us`, `3.210 ms`, `1.500 s`.
pub fn dur(ns: u64) -> String {
    match ns {
        0..=9_999 => format!("{ns} ns"),
        10_000..=9_999_999 => format!("{:.3} us", ns as f64 / 1e3),
        10_000_000..=9_999_999_999 => format!("{:.3} ms", ns as f64 / 1e6),
        _ => format!("{:.3} s", ns as f64 / 1e9),
    }
}

/// A log2 histogram of nanosecond values, printed like bcc's runqlat (in microseconds).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Log2Hist {
    /// `buckets[k]`: values `v` (in us) with `2^(k-1) <= v < 2^k`; `buckets[0]`: `v == 0`.
    pub buckets: Vec<u64>,
}

impl Log2Hist {
    pub fn add(&mut self, ns: u64) {
        let us = ns / 1000;
        let k = (64 - us.leading_zeros()) as usize;
        if self.buckets.len() <= k {
            self.buckets.resize(k + 1, 0);
        }
        self.buckets[k] += 1;
    }

    /// Bucket bounds in us: `[lo, hi]` inclusive.
    pub fn bounds(k: usize) -> (u64, u64) {
        if k == 0 {
            (0, 0)
        } else {
            (1 << (k - 1), (1u64 << k) - 1)
        }
    }

    pub fn write(&self, out: &mut String, unit: &str) {
        let max = self.buckets.iter().copied().max().unwrap_or(0);
        let _ = writeln!(out, "{:>24} : count    distribution", unit);
        for (k, &n) in self.buckets.iter().enumerate() {
            let (lo, hi) = Log2Hist::bounds(k);
            let bar = if max == 0 { 0 } else { (n * 40).div_ceil(max) as usize };
            let _ = writeln!(
                out,
                "{:>10} -> {:<10} : {:<8} |{:<40}|",
                lo,
                hi,
                n,
                "*".repeat(bar.min(40))
            );
        }
    }

    pub fn json(&self, out: &mut String) {
        out.push('[');
        for (k, &n) in self.buckets.iter().enumerate() {
            if k > 0 {
                out.push(',');
            }
            let (lo, hi) = Log2Hist::bounds(k);
            let _ = write!(out, "{{\"us_lo\":{lo},\"us_hi\":{hi},\"count\":{n}}}");
        }
        out.push(']');
    }
}

/// Append `s` as a JSON string.
pub fn json_str(out: &mut String, s: &str) {
    tp_format::render::push_json_str(out, s);
}

/// Print the result (stdout), ending quietly on a closed pipe (main.rs).
pub fn print(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse_exactly() {
        assert_eq!(parse_time("5044.055066"), Ok(TimeArg::Absolute(5_044_055_066_000)));
        assert_eq!(parse_time("+1.5"), Ok(TimeArg::Relative(1_500_000_000)));
        assert_eq!(parse_time("7"), Ok(TimeArg::Absolute(7_000_000_000)));
        assert_eq!(parse_time(".000000001"), Ok(TimeArg::Absolute(1)));
        assert!(parse_time("1.0000000001").is_err());
        assert!(parse_time("-1").is_err());
        assert!(parse_time("x").is_err());
        assert!(parse_time("").is_err());
    }

    #[test]
    fn log2_buckets_like_runqlat() {
        let mut h = Log2Hist::default();
        for ns in [0, 999, 1000, 1999, 2000, 3999, 4000, 1_000_000] {
            h.add(ns);
        }
        // 0 us: 2; 1 us: 2; 2-3 us: 2; 4-7: 1; 1000 us in 512-1023: 1.
        assert_eq!(&h.buckets[..4], &[2, 2, 2, 1]);
        assert_eq!(h.buckets[10], 1);
        assert_eq!(Log2Hist::bounds(10), (512, 1023));
        assert_eq!(h.buckets.iter().sum::<u64>(), 8);
    }
}
