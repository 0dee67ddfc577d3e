//! What goes into a trace.dat besides the pages, collected from tracefs; lost-event
//! accounting; and writing the file through tp-format's trace.dat writer.

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use tp_tracefs::{CpuStats, EventId, Instance, Tracefs};

/// Everything a trace.dat holds besides the per-CPU pages.
#[allow(dead_code)] // until every field goes to the writer
#[derive(Debug, Clone)]
pub struct Metadata {
    pub header_page: String,
    pub header_event: String,
    pub page_size: usize,
    pub commit_offset: usize,
    pub commit_size: usize,
    pub data_offset: usize,
    /// Format texts of the `ftrace` system's events.
    pub ftrace_formats: Vec<String>,
    /// (system, format texts) of the recorded events, systems in first-seen order.
    pub event_formats: Vec<(String, Vec<String>)>,
    pub kallsyms: String,
    pub printk_formats: String,
    pub saved_cmdlines: String,
    pub saved_tgids: String,
    /// `Linux 6.18.44 #1 SMP ... x86_64`.
    pub uname: String,
    pub kernel_release: String,
    /// `trace_clock` text (`[mono] ...`) and the selected clock.
    pub clock_text: String,
    pub clock: String,
    pub stats: Vec<CpuStats>,
    /// Instance name ("" for the top-level buffer).
    pub instance: String,
}

impl Metadata {
    pub fn collect(
        tfs: &Tracefs,
        inst: &Instance,
        events: &[EventId],
        stats: Vec<CpuStats>,
    ) -> Result<Metadata> {
        let header_page = tfs.header_page_text()?;
        let hp = tp_format::header::HeaderPage::parse(&header_page)
            .unwrap_or(tp_format::header::HeaderPage::X86_64);
        let mut ftrace_formats = Vec::new();
        for e in tfs.ftrace_events()? {
            // Some ftrace events have no format file; skip those as trace-cmd does.
            if let Ok(t) = tfs.event_format_text(&e) {
                ftrace_formats.push(t);
            }
        }
        let mut event_formats: Vec<(String, Vec<String>)> = Vec::new();
        for e in events {
            if e.system == "ftrace" {
                continue;
            }
            let t =
                tfs.event_format_text(e).with_context(|| format!("reading the format of {e}"))?;
            match event_formats.iter_mut().find(|(s, _)| *s == e.system) {
                Some((_, v)) => v.push(t),
                None => event_formats.push((e.system.clone(), vec![t])),
            }
        }
        let u = tfs.uname()?;
        let clock_text = inst.clock_text()?;
        let clock = tp_tracefs::parse_trace_clock(&clock_text).0;
        Ok(Metadata {
            header_page,
            header_event: tfs.header_event_text()?,
            page_size: hp.page_size(),
            commit_offset: hp.commit_offset,
            commit_size: hp.commit_size,
            data_offset: hp.data_offset,
            ftrace_formats,
            event_formats,
            kallsyms: tfs.kallsyms()?,
            printk_formats: tfs.printk_formats()?,
            saved_cmdlines: tfs.saved_cmdlines()?,
            saved_tgids: tfs.saved_tgids().unwrap_or_default(),
            uname: u.to_line(),
            kernel_release: u.release,
            clock_text,
            clock,
            stats,
            instance: inst.name().to_string(),
        })
    }
}

/// Lost events of one CPU: from the kernel's counters and from the pages' flags.
#[derive(Debug, Clone, Default)]
pub struct Lost {
    pub cpu: u32,
    /// overrun + commit overrun + dropped, from `per_cpu/cpuN/stats`.
    pub from_stats: u64,
    /// Pages flagged "events missed before this page".
    pub flagged_pages: u64,
    /// Events counted on flagged pages that store the count.
    pub from_pages: u64,
}

/// Per-CPU lost-event accounting from the stats and the captured pages.
pub fn lost_events(meta: &Metadata, files: &[(u32, PathBuf)]) -> Result<Vec<Lost>> {
    let mut out = Vec::new();
    for (cpu, path) in files {
        let from_stats = meta.stats.iter().find(|s| s.cpu == *cpu).map(|s| s.lost()).unwrap_or(0);
        let (flagged_pages, from_pages) = scan_missed(meta, path)?;
        out.push(Lost { cpu: *cpu, from_stats, flagged_pages, from_pages });
    }
    Ok(out)
}

fn scan_missed(meta: &Metadata, path: &Path) -> Result<(u64, u64)> {
    let mut f = std::fs::File::open(path).with_context(|| format!("open {}", path.display()))?;
    let ps = meta.page_size;
    let mut buf = vec![0u8; ps * 256];
    let (mut flagged, mut counted) = (0, 0);
    loop {
        let mut filled = 0;
        while filled < buf.len() {
            let n =
                f.read(&mut buf[filled..]).with_context(|| format!("read {}", path.display()))?;
            if n == 0 {
                break;
            }
            filled += n;
        }
        if filled == 0 {
            break;
        }
        let (a, b) = tp_tracefs::count_missed(
            &buf[..filled],
            ps,
            meta.commit_offset,
            meta.commit_size,
            meta.data_offset,
        );
        flagged += a;
        counted += b;
        if filled < buf.len() {
            break;
        }
    }
    Ok((flagged, counted))
}

/// trace.dat flavour.
#[allow(dead_code)]
#[derive(Debug, Clone)]
pub struct WriteOptions {
    pub version: u32,
    pub compress: bool,
}

/// Write the trace.dat: metadata, then each CPU's pages verbatim.
pub fn write_tracedat(
    out: &Path,
    meta: &Metadata,
    cpus: &[(u32, PathBuf)],
    opts: &WriteOptions,
) -> Result<()> {
    let _ = (out, meta, cpus, opts);
    anyhow::bail!("the trace.dat writer (tp-format) is not available yet")
}
