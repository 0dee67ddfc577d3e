//! `tp convert -i FILE --to perfetto|firefox -o OUT`: a recording in another tool's format
//! (`tp_analyze::export`).

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use tp_analyze::export::{firefox, perfetto};
use tp_format::perfdata::PerfData;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Perfetto's protobuf trace (ui.perfetto.dev opens it).
    Perfetto,
    /// The Firefox Profiler's processed profile of a perf.data's samples and stacks
    /// (profiler.firefox.com opens it).
    Firefox,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The recording: a trace.dat (v6 or v7) or a perf.data.
    #[arg(short = 'i', long = "input", default_value = "trace.dat")]
    pub input: PathBuf,
    /// The format to write.
    #[arg(long = "to", value_enum)]
    pub to: Format,
    /// Output file.
    #[arg(short = 'o', long = "output")]
    pub output: PathBuf,
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    match args.to {
        Format::Perfetto => to_perfetto(&args.input, &args.output),
        Format::Firefox => to_firefox(&args.input, &args.output),
    }
}

fn to_perfetto(input: &Path, output: &Path) -> anyhow::Result<i32> {
    let tl = crate::analyze::open(input)?;
    let (file, pending) = crate::outfile::create(output)?;
    let w = perfetto::write(&tl, file).map_err(|e| match e {
        tp_analyze::Error::Output(io) => {
            anyhow::Error::new(io).context(format!("writing {}", output.display()))
        }
        e => e.into(),
    })?;
    pending.commit()?;
    if let Some(clock) = &w.unnamed_clock {
        eprintln!(
            "tp: clock {clock:?} has no name in Perfetto: its times are shown as boot time (order and spacing as recorded; record with -C mono to have them placed right)"
        );
    }
    let (lost, gaps) = w.coverage.lost_total();
    eprintln!(
        "tp: {} events written to {} (open it at ui.perfetto.dev){}",
        w.events,
        output.display(),
        if lost > 0 || gaps > 0 {
            format!("; {lost} events were lost in the recording ({gaps} gaps of unknown size), marked on their CPUs' bundles")
        } else {
            String::new()
        }
    );
    if w.samples > 0 {
        eprintln!("tp: {} samples of events that are not tracepoints were left out", w.samples);
    }
    if w.unknown > 0 {
        eprintln!("tp: {} events of IDs the file has no format for were left out", w.unknown);
    }
    for e in &w.coverage.errors {
        eprintln!("tp: {e}");
    }
    Ok(if w.coverage.errors.is_empty() { 0 } else { 1 })
}

fn to_firefox(input: &Path, output: &Path) -> anyhow::Result<i32> {
    let name = input.display().to_string();
    let file = std::fs::File::open(input).with_context(|| format!("cannot open {name}"))?;
    let data = PerfData::open_file(file).with_context(|| {
        format!("cannot read {name} (--to firefox takes a perf.data: tp record -g or perf record)")
    })?;
    let ff = firefox::profile(&data, &format!("tp convert -i {name}"))?;
    let status = crate::report::perf::say_walk_errors(&name, &ff.errors, &ff.notes);
    let (out, pending) = crate::outfile::create(output)?;
    let mut w = std::io::BufWriter::new(out);
    serde_json::to_writer(&mut w, &ff.profile)
        .with_context(|| format!("cannot write {}", output.display()))?;
    std::io::Write::flush(&mut w).with_context(|| format!("cannot write {}", output.display()))?;
    drop(w);
    pending.commit()?;
    eprintln!(
        "tp: {}: {} samples of {} threads in {} processes (profiler.firefox.com: Load a profile from file)",
        output.display(),
        ff.samples,
        ff.threads,
        ff.processes
    );
    Ok(status)
}
