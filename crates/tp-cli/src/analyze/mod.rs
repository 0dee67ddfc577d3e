//! `tp syscalls`, `tp sched`, `tp faults`: the arguments, recording a given command, and
//! printing. The analyses themselves are `tp_analyze`'s.

pub mod faults;
pub mod sched;
pub mod syscalls;

use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::rc::Rc;

use anyhow::Context;

use crate::outfile::TempDir;
use tp_analyze::{parse_time, Summary, TimeArg, Timeline};

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

impl Select {
    /// The tasks and the window, for the analysis.
    pub fn window(&self) -> tp_analyze::Select {
        tp_analyze::Select {
            pids: self.pids.clone(),
            comms: self.comms.clone(),
            from: self.from,
            to: self.to,
        }
    }
}

/// Files smaller than this get no progress bar: they take well under a second (compressed,
/// 4 MiB is about a million events).
const PROGRESS_MIN_BYTES: u64 = 4 << 20;

/// Open a recording, say what its readers warned of, and show a progress bar of its passes
/// on a terminal.
pub fn open(input: &std::path::Path) -> anyhow::Result<Timeline> {
    let mut tl = Timeline::open(input)?;
    for w in &tl.warnings {
        eprintln!("tp: {w}");
    }
    if tl.file_len() >= PROGRESS_MIN_BYTES && std::io::stderr().is_terminal() {
        let bar = indicatif::ProgressBar::new(tl.file_len());
        if let Ok(style) =
            indicatif::ProgressStyle::with_template("{bar:40} {percent:>3}% {elapsed} (ETA {eta})")
        {
            bar.set_style(style);
        }
        tl.progress = Some(Rc::new(Bar(bar)));
    }
    Ok(tl)
}

struct Bar(indicatif::ProgressBar);

impl tp_analyze::Progress for Bar {
    fn start(&self, total: u64) {
        self.0.set_length(total);
    }

    fn at(&self, done: u64) {
        self.0.set_position(done);
    }

    fn advance(&self, n: u64) {
        self.0.inc(n);
    }

    fn finish(&self) {
        self.0.finish_and_clear();
    }
}

/// Print an analysis's text (stdout, ending quietly on a closed pipe: main.rs); the exit
/// status: 1 when part of the recording could not be read.
pub fn print<S>(text: &str, summary: &Summary<S>) -> anyhow::Result<i32> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(if summary.read_whole() { 0 } else { 1 })
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
    let dir = TempDir::new("tp-analyze")?;
    let out = dir.path().join(file);
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
