//! `tp extract [-B NAME] -o FILE`: write a tracefs buffer's current contents to a trace.dat
//! file without changing any setting (like `trace-cmd extract`). Reading `trace_pipe_raw`
//! consumes the pages, as any reader does (and as `trace-cmd extract` does); nothing else in
//! tracefs is written. An instance's buffer keeps its name in the file (`tp report -B NAME`).

use std::path::PathBuf;

use anyhow::{Context, Result};
use tp_tracefs::{Instance, Tracefs};

use crate::record::output;
use crate::record::Compression;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The instance to extract (default: the top-level buffer); the file names its buffer
    /// NAME, as trace-cmd does. Its pages are consumed: a second extract finds them gone.
    #[arg(short = 'B', long = "instance", value_name = "NAME")]
    pub instance: Option<String>,
    #[command(flatten)]
    pub file: crate::record::FileOpts,
    /// No summary.
    #[arg(short = 'q', long)]
    pub quiet: bool,
}

pub fn run(args: Args) -> Result<i32> {
    let tfs = Tracefs::discover()?;
    if let Ok(removed) = tp_tracefs::remove_stale(&tfs) {
        for name in removed {
            eprintln!("tp: removed stale instance instances/{name} (its tp process is gone)");
        }
    }
    let inst = match &args.instance {
        Some(n) => Instance::open(&tfs, n)?,
        None => Instance::top(&tfs),
    };
    let t0 = std::time::Instant::now();
    if let Some(name) = args.file.output.file_name() {
        let parent = match args.file.output.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        crate::record::remove_stale_temp(&parent, &name.to_string_lossy());
    }
    let dir = args.file.output.with_file_name(format!(
        ".{}.tp-{}.d",
        args.file.output.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
        std::process::id()
    ));
    crate::outfile::create_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let result = extract(&args, &tfs, &inst, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    let (bytes, nevents, lost, meta) = result?;
    if !args.quiet {
        let total_lost: u64 = lost.iter().map(|l| l.in_kernel()).sum();
        eprintln!(
            "tp: extracted {} ({}, {}) from {} in {:.2}s -> {}",
            crate::record::human(bytes),
            crate::record::count(bytes / meta.page_size().max(1) as u64, "page"),
            crate::record::count(nevents, "event"),
            if inst.name().is_empty() {
                "the top-level buffer".to_string()
            } else {
                format!("instances/{}", inst.name())
            },
            t0.elapsed().as_secs_f64(),
            args.file.output.display()
        );
        if total_lost > 0 {
            eprintln!("tp: LOST EVENTS: {total_lost} (overwritten before they were read)");
        }
    }
    Ok(0)
}

type Extracted = (u64, u64, Vec<output::Lost>, output::Metadata);

fn extract(
    args: &Args,
    tfs: &Tracefs,
    inst: &Instance,
    dir: &std::path::Path,
) -> Result<Extracted> {
    let cpus = inst.cpus()?;
    // A buffer holds at most its size; a little more allows for pages written meanwhile.
    let cap = inst.buffer_size_kb().unwrap_or(1 << 20) * 1024 * 2 + (1 << 20);
    let before: u64 = inst.all_stats()?.iter().map(|s| s.read_events).sum();
    let mut files = Vec::new();
    let mut bytes = 0;
    for &cpu in &cpus {
        let p = dir.join(format!("cpu{cpu}"));
        let mut f = crate::outfile::create_private(&p)?;
        bytes += inst.drain_cpu_to(cpu, &mut f, cap)?;
        files.push((cpu, p));
    }
    let stats = inst.all_stats()?;
    let nevents = stats.iter().map(|s| s.read_events).sum::<u64>().saturating_sub(before);
    // Formats of every event: the buffer may hold events enabled earlier and disabled since.
    let events = tfs.available_events()?;
    let meta = output::Metadata::collect(tfs, inst, &events, stats)?;
    let lost = output::lost_events(&meta, &files)?;
    let opts = output::WriteOptions {
        version: args.file.file_version,
        compress: args.file.compress == Compression::Zstd && args.file.file_version >= 7,
    };
    output::write_tracedat(&args.file.output, &meta, &files, &opts)?;
    Ok((bytes, nevents, lost, meta))
}
