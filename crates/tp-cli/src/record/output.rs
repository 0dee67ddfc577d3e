//! What goes into a trace.dat besides the pages, collected from tracefs; lost-event
//! accounting; and writing the file through tp-format's trace.dat writer.

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use tp_format::tracedat as td;
use tp_tracefs::{CpuStats, EventId, Instance, Tracefs};

/// Everything a trace.dat holds besides the per-CPU pages: the writer's metadata, and the
/// CPU stats and buffer name it is completed with when the file is written.
#[derive(Debug, Clone)]
pub struct Metadata {
    /// Header page, formats, kallsyms, printk formats, cmdlines, tgids, clock, uname, CPUs.
    pub file: td::Metadata,
    /// Per-CPU stats after the capture (lost events; the file's CPUSTAT texts).
    pub stats: Vec<CpuStats>,
    /// The buffer's name in the file: the instance's, or "" for the top-level buffer and
    /// tp's private instance.
    pub instance: String,
}

impl Metadata {
    pub fn collect(
        tfs: &Tracefs,
        inst: &Instance,
        events: &[EventId],
        stats: Vec<CpuStats>,
    ) -> Result<Metadata> {
        let header_page = tp_format::header::HeaderPage::parse(&tfs.header_page_text()?)
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
        let file = td::Metadata {
            header_page,
            header_event_text: tfs.header_event_text()?,
            ftrace_formats,
            event_formats,
            kallsyms: tfs.kallsyms()?,
            printk: tfs.printk_formats()?,
            cmdlines: tfs.saved_cmdlines()?,
            tgids: tfs.saved_tgids().unwrap_or_default(),
            clock: tp_tracefs::parse_trace_clock(&inst.clock_text()?).0,
            uname: Some(tfs.uname()?.to_line()),
            cpu_count: inst.cpus()?.len() as u32,
            ..td::Metadata::default()
        };
        Ok(Metadata {
            file,
            stats,
            // A buffer given by name keeps it in the file, as trace-cmd does (`tp report -B
            // NAME`); tp's private instance is the file's top-level buffer.
            instance: if inst.is_owned() { String::new() } else { inst.name().to_string() },
        })
    }

    /// Bytes per ring-buffer page.
    pub fn page_size(&self) -> usize {
        self.file.header_page.page_size()
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
    /// Events recorded but not written because the disk was full: those the kernel still
    /// held when the reader stopped, and those on the pages dropped to make the file fit.
    pub unwritten: u64,
    /// Pages dropped to make the file fit a full disk.
    pub unwritten_pages: u64,
}

impl Lost {
    /// Events lost in the kernel (its counters, or the pages' counts if larger).
    pub fn in_kernel(&self) -> u64 {
        self.from_stats.max(self.from_pages)
    }
}

/// Per-CPU lost-event accounting from the stats and the captured pages.
pub fn lost_events(meta: &Metadata, files: &[(u32, PathBuf)]) -> Result<Vec<Lost>> {
    let mut out = Vec::new();
    for (cpu, path) in files {
        let from_stats = meta.stats.iter().find(|s| s.cpu == *cpu).map(|s| s.lost()).unwrap_or(0);
        let (flagged_pages, from_pages) = scan_missed(meta, path)?;
        out.push(Lost { cpu: *cpu, from_stats, flagged_pages, from_pages, ..Lost::default() });
    }
    Ok(out)
}

fn scan_missed(meta: &Metadata, path: &Path) -> Result<(u64, u64)> {
    let layout = page_layout(meta);
    let (mut flagged, mut counted) = (0, 0);
    each_page_run(meta, path, 0, |run| {
        let (a, b) = tp_format::page::count_missed(&layout, run);
        flagged += a;
        counted += b;
    })?;
    Ok((flagged, counted))
}

/// The events on the pages of `path` from byte `from` on (a page that does not parse
/// counts the events read before its error).
pub fn count_events_from(meta: &Metadata, path: &Path, from: u64) -> Result<u64> {
    let layout = page_layout(meta);
    let mut n = 0;
    each_page_run(meta, path, from, |run| {
        n += tp_format::page::count_events(&layout, run, &mut [])
    })?;
    Ok(n)
}

/// The pages are this machine's kernel's, in its byte order.
fn page_layout(meta: &Metadata) -> tp_format::page::PageLayout {
    tp_format::page::PageLayout::new(meta.file.header_page, cfg!(target_endian = "big"))
}

/// Read `path` from byte `from` in runs of up to 256 pages.
fn each_page_run(meta: &Metadata, path: &Path, from: u64, mut f: impl FnMut(&[u8])) -> Result<()> {
    use std::io::Seek;
    let mut file = std::fs::File::open(path).with_context(|| format!("open {}", path.display()))?;
    file.seek(std::io::SeekFrom::Start(from))
        .with_context(|| format!("seek {}", path.display()))?;
    let mut buf = vec![0u8; meta.page_size() * 256];
    loop {
        let mut filled = 0;
        while filled < buf.len() {
            let n = file
                .read(&mut buf[filled..])
                .with_context(|| format!("read {}", path.display()))?;
            if n == 0 {
                break;
            }
            filled += n;
        }
        if filled == 0 {
            return Ok(());
        }
        f(&buf[..filled]);
        if filled < buf.len() {
            return Ok(());
        }
    }
}

/// trace.dat flavour.
#[derive(Debug, Clone)]
pub struct WriteOptions {
    pub version: u32,
    pub compress: bool,
}

/// Write the trace.dat: metadata, then each CPU's pages verbatim. The file is written
/// beside `out` and renamed into place, so a failed write never leaves half a file.
pub fn write_tracedat(
    out: &Path,
    meta: &Metadata,
    cpus: &[(u32, PathBuf)],
    opts: &WriteOptions,
) -> Result<()> {
    write_tracedat_with_user(out, meta, cpus, opts, &[])
}

/// [`write_tracedat`], plus the program's own recordings: one more buffer per process,
/// their formats and threads added to the file's (see [`super::user`]).
pub fn write_tracedat_with_user(
    out: &Path,
    meta: &Metadata,
    cpus: &[(u32, PathBuf)],
    opts: &WriteOptions,
    user: &[super::user::UserTrace],
) -> Result<()> {
    let mut m = meta.file.clone();
    super::user::merge_metadata(
        user,
        m.header_page.page_size(),
        m.header_page,
        &mut m.ftrace_formats,
        &mut m.event_formats,
        &mut m.cmdlines,
        &mut m.procmaps,
    )?;
    let mut stats: Vec<&CpuStats> = meta.stats.iter().collect();
    stats.sort_by_key(|s| s.cpu);
    m.cpustats = cpustats(&meta.instance, &stats);
    // A program's buffer has one stream per thread, maybe more than the CPUs.
    m.cpu_count = user
        .iter()
        .flat_map(|u| u.dat.buffers().iter().map(|b| b.cpus.len() as u32))
        .fold(m.cpu_count, u32::max);
    let mut sources = Vec::new();
    for (cpu, path) in cpus {
        let f = std::fs::File::open(path).with_context(|| format!("open {}", path.display()))?;
        sources.push(td::CpuPages {
            cpu: *cpu,
            pages: Box::new(std::io::BufReader::with_capacity(1 << 20, f)),
        });
    }
    let mut buffers = vec![td::BufferPages { name: meta.instance.clone(), cpus: sources }];
    buffers.extend(super::user::buffers(user)?);
    let wopts = td::WriterOptions {
        version: opts.version,
        compression: if opts.compress { td::Compression::Zstd } else { td::Compression::None },
        page_size: meta.page_size(),
        ..td::WriterOptions::default()
    };
    let (file, pending) = crate::outfile::create(out)?;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
    let res = td::Writer::new(wopts).write(&mut w, &m, buffers);
    let res = res.map_err(anyhow::Error::from).and_then(|_| {
        use std::io::Write;
        w.flush()?;
        Ok(())
    });
    drop(w);
    // A failed write's temporary file goes with `pending`.
    res.map_err(|e| e.context(format!("writing {}", out.display())))?;
    pending.commit()
}

/// The CPUSTAT texts as trace-cmd writes them: `CPU: N` before each CPU's stats, and a
/// named buffer's introduced by `Buffer: NAME`.
fn cpustats(buffer: &str, stats: &[&CpuStats]) -> Vec<String> {
    stats
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let head = if i == 0 && !buffer.is_empty() {
                format!("\nBuffer: {buffer}\n\n")
            } else {
                String::new()
            };
            format!("{head}CPU: {}\n{}", s.cpu, s.text)
        })
        .collect()
}
