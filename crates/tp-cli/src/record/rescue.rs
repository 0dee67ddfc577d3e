//! Keeping what was recorded when things go wrong: the output checked before recording
//! starts, the guard's rescue of a killed tp's pages, and a full disk while writing.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use tp_tracefs::{Instance, Tracefs};

use super::output::{self, Metadata, WriteOptions};

/// The guard's rescue (see [`tp_tracefs::guard`]): tp died. Now, while the guard holds the
/// instances: drain what they still hold into the page files and read the metadata. Then
/// (the closure returned, after the guard removed the instances): write the pages as
/// `output`, remove them, and say where the recording is (or why it is not).
pub fn rescue_pages(
    dir: &Path,
    out: &Path,
    instances: &[PathBuf],
    tp_pid: i32,
    opts: &WriteOptions,
) -> Box<dyn FnOnce()> {
    let killed = format!("tp record (pid {tp_pid}) was killed");
    let (dir, out, opts) = (dir.to_path_buf(), out.to_path_buf(), opts.clone());
    let read = read_pages(&dir, instances);
    Box::new(move || {
        let written =
            read.and_then(|(meta, files)| output::write_tracedat(&out, &meta, &files, &opts));
        let _ = std::fs::remove_dir_all(&dir);
        match written {
            Ok(()) => eprintln!(
                "tp: {killed}; what it recorded is in {} (written by its guard)",
                out.display()
            ),
            Err(e) => eprintln!(
                "tp: {killed}; could not write {} ({e:#}); removed its pages",
                out.display()
            ),
        }
    })
}

/// Complete the page files from the instance and read the metadata.
fn read_pages(dir: &Path, instances: &[PathBuf]) -> Result<(Metadata, Vec<(u32, PathBuf)>)> {
    let inst_dir = instances.first().context("no instance to read the formats from")?;
    let name = inst_dir.file_name().context("instance path")?.to_string_lossy().into_owned();
    let tfs = Tracefs::discover()?;
    let inst = Instance::open(&tfs, &name)?;
    let page = tp_format::header::HeaderPage::parse(&tfs.header_page_text()?)
        .map_or(4096, |h| h.page_size() as u64);
    let mut files = Vec::new();
    for cpu in inst.cpus()? {
        let p = dir.join(format!("cpu{cpu}"));
        let Ok(mut f) = std::fs::OpenOptions::new().append(true).open(&p) else { continue };
        // A page cut by the kill is dropped; the pages still in the buffer are added.
        let len = f.metadata()?.len();
        f.set_len(len - len % page)?;
        inst.drain_cpu_to(cpu, &mut f, 256 << 20)?;
        files.push((cpu, p));
    }
    let events = inst.enabled_events()?;
    let meta = Metadata::collect(&tfs, &inst, &events, inst.all_stats()?)?;
    Ok((meta, files))
}

/// Whether an error chain ends in "no space left on device" (or a quota).
pub fn is_disk_full(e: &anyhow::Error) -> bool {
    use tp_format::tracedat::{Error, ErrorKind};
    let full = |io: &std::io::Error| matches!(io.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT));
    e.chain().any(|c| match c.downcast_ref::<Error>() {
        Some(Error { kind: ErrorKind::Io(io), .. }) => full(io),
        _ => c.downcast_ref::<std::io::Error>().is_some_and(full),
    })
}

/// What [`write_what_fits`] kept of the page files, and what it dropped per CPU.
pub struct Fitted {
    pub kept_bytes: u64,
    pub total_bytes: u64,
    /// (CPU, pages dropped, events on them).
    pub dropped: Vec<(u32, u64, u64)>,
}

/// The disk filled while writing the trace.dat: shorten every CPU's page file (freeing their
/// space) and write again, halving until a file fits. Returns what was kept and dropped, or
/// the last error (the page files, as shortened, are then left for the caller).
pub fn write_what_fits(
    out: &Path,
    meta: &Metadata,
    files: &[(u32, PathBuf)],
    opts: &WriteOptions,
    user: &[super::user::UserTrace],
) -> Result<Fitted> {
    let page = meta.page_size().max(1) as u64;
    let sizes: Vec<u64> =
        files.iter().map(|(_, p)| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)).collect();
    let total: u64 = sizes.iter().sum();
    let mut dropped: Vec<(u32, u64, u64)> = files.iter().map(|(cpu, _)| (*cpu, 0, 0)).collect();
    let mut keep = 1u64; // halved first: 1/2, 1/4, ...
    let mut last = None;
    for _ in 0..12 {
        keep *= 2;
        let mut kept = 0;
        for (((_, p), &size), d) in files.iter().zip(&sizes).zip(&mut dropped) {
            let len = size / keep / page * page;
            // The events on the pages about to go, counted while they are still there.
            d.2 += output::count_events_from(meta, p, len)?;
            d.1 = (size - len) / page;
            std::fs::OpenOptions::new().write(true).open(p)?.set_len(len)?;
            kept += len;
        }
        match output::write_tracedat_with_user(out, meta, files, opts, user) {
            Ok(()) => return Ok(Fitted { kept_bytes: kept, total_bytes: total, dropped }),
            Err(e) if is_disk_full(&e) => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| anyhow::anyhow!("no space for {}", out.display())))
}

/// Cut every page file to whole pages (a write the disk refused may end inside one).
pub fn whole_pages(files: &[(u32, PathBuf)], page_size: usize) -> Result<()> {
    let page = page_size.max(1) as u64;
    for (_, p) in files {
        let f = std::fs::OpenOptions::new().write(true).open(p)?;
        let len = f.metadata()?.len();
        f.set_len(len - len % page).with_context(|| format!("truncating {}", p.display()))?;
    }
    Ok(())
}
