//! The traced program's own tracepoints (crate `tp`) on the kernel's timeline.
//!
//! An `-e` glob of the form `system:name` that matches no kernel event is a user-space event
//! glob. tp passes all of them to the command as `TP_EVENTS` (comma-joined) with
//! `TP_RECORD=<private dir>/user-%p.dat`: a program that calls `tp::init_from_env()` records
//! those events with its in-process recorder (CLOCK_MONOTONIC timestamps, the clock of the
//! kernel part's default `-C mono`), one file per process (`%p` is its pid). After the
//! command exits, each file's streams become one extra buffer of the output, named
//! `COMM-PID`, and its event formats join the file's (tp's IDs start at 40000, far above the
//! kernel's; a clash is an error).
//!
//! Nothing is recorded for a program that never calls `tp::init_from_env()`: tp does not
//! inject a constructor into the program (see the `tp` crate's documentation for why).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use tp_format::glob::{select_events, system_and_name};
use tp_format::tracedat::{BufferPages, CpuPages, PageSource, TraceDat};
use tp_tracefs::Tracefs;

use super::session::Selection;

/// Split `-e` selections into kernel ones and user-space globs: a glob with a `:` that
/// matches no kernel event is a user-space one (a filter on it is an error). One whose
/// system is a kernel system (`sched:sched_swich`) is a mistyped kernel event: an error
/// naming the nearest events.
pub fn split(tfs: &Tracefs, selections: &[Selection]) -> Result<(Vec<Selection>, Vec<String>)> {
    let mut kernel = Vec::new();
    let mut user = Vec::new();
    let systems = tfs.systems()?;
    for sel in selections {
        if sel.glob.contains(':') && tfs.match_events(&sel.glob)?.is_empty() {
            let system = sel.glob.split(':').next().unwrap_or_default();
            if systems.iter().any(|s| s == system) {
                bail!(
                    "no kernel event matches {:?} (and {system:?} is a kernel system, not the program's): {}",
                    sel.glob,
                    super::session::nearest_events(tfs, &sel.glob, &[])
                );
            }
            if sel.filter.is_some() {
                bail!(
                    "-f applies to kernel events only; {:?} matches no kernel event (it is taken as the program's own tracepoints)",
                    sel.glob
                );
            }
            user.push(sel.glob.clone());
        } else {
            kernel.push(sel.clone());
        }
    }
    Ok((kernel, user))
}

/// Set `TP_EVENTS` and `TP_RECORD` in tp's own environment, which the command inherits
/// (called before any thread or child is started).
pub fn set_env(globs: &[String], dir: &Path) {
    std::env::set_var("TP_EVENTS", globs.join(","));
    std::env::set_var("TP_RECORD", dir.join("user-%p.dat"));
    std::env::remove_var("TP_LIST_FORMATS");
}

/// One process's recording.
pub struct UserTrace {
    pub pid: i32,
    pub path: PathBuf,
    pub dat: TraceDat<File>,
    /// Buffer name in the output: `COMM-PID`.
    pub name: String,
}

/// Open every `user-PID.dat` in `dir`, by pid.
pub fn collect(dir: &Path) -> Result<Vec<UserTrace>> {
    let mut found = BTreeMap::new();
    let rd = std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))?;
    for ent in rd.flatten() {
        let name = ent.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("user-")
            .and_then(|r| r.strip_suffix(".dat"))
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        found.insert(pid, ent.path());
    }
    let mut out = Vec::new();
    for (pid, path) in found {
        let f = File::open(&path).with_context(|| format!("open {}", path.display()))?;
        let dat = TraceDat::open_file(f)
            .with_context(|| format!("reading the recording of pid {pid} ({})", path.display()))?;
        let comm = dat.cmdlines().known(pid).unwrap_or("user").to_string();
        out.push(UserTrace { pid, path, dat, name: format!("{comm}-{pid}") });
    }
    Ok(out)
}

/// The `-e` globs that match none of the tracepoints of any recorded program (the programs'
/// files list all their tracepoints, recorded or not), with the tracepoints they do have.
pub fn unmatched(globs: &[String], traces: &[UserTrace]) -> Vec<(String, Vec<String>)> {
    let have: std::collections::BTreeSet<String> = traces
        .iter()
        .flat_map(|t| t.dat.events().iter())
        .filter(|e| e.system != "ftrace") // the user stacks' format, not a tracepoint
        .map(|e| format!("{}:{}", e.system, e.name))
        .collect();
    globs
        .iter()
        .filter(|g| select_events(&have, g, |h| system_and_name(h)).is_empty())
        .map(|g| (g.clone(), have.iter().cloned().collect()))
        .collect()
}

/// Events a program's recorder dropped because a thread's buffer was full: per stream (the
/// CPU column of its events), from the `dropped events:` lines of its file's stats, which
/// come in stream order. Streams that dropped none are left out.
pub fn dropped(trace: &UserTrace) -> Vec<(usize, u64)> {
    dropped_in_stats(trace.dat.cpustats())
}

fn dropped_in_stats(stats: &str) -> Vec<(usize, u64)> {
    stats
        .lines()
        .filter_map(|l| l.strip_prefix("dropped events:"))
        .map(|v| v.trim().parse::<u64>().unwrap_or(0))
        .enumerate()
        .filter(|&(_, n)| n > 0)
        .collect()
}

/// The `ID: N` of a format text.
fn format_id(text: &str) -> Option<u32> {
    text.lines().rev().find_map(|l| l.strip_prefix("ID: ")).and_then(|v| v.trim().parse().ok())
}

/// Add the user recordings' event formats to `event_formats` (per system; the `ftrace`
/// ones, the user stacks' format, to `ftrace_formats`), their maps to `procmaps`, their threads
/// to `cmdlines`; error on an ID that the kernel's formats or another program's use for a
/// different event.
pub fn merge_metadata(
    traces: &[UserTrace],
    page_size: usize,
    header_page: tp_format::header::HeaderPage,
    ftrace_formats: &mut Vec<String>,
    event_formats: &mut Vec<(String, Vec<String>)>,
    cmdlines: &mut String,
    procmaps: &mut Vec<tp_format::tracedat::ProcMaps>,
) -> Result<()> {
    // ID -> "system:name" of every format already in the file.
    let mut ids: BTreeMap<u32, String> = BTreeMap::new();
    for t in ftrace_formats.iter() {
        if let Some(id) = format_id(t) {
            ids.insert(id, format!("ftrace:{}", format_name(t)));
        }
    }
    for (sys, v) in event_formats.iter() {
        for t in v {
            if let Some(id) = format_id(t) {
                ids.insert(id, format!("{sys}:{}", format_name(t)));
            }
        }
    }
    let known: std::collections::HashSet<i32> =
        cmdlines.lines().filter_map(|l| l.split_whitespace().next()?.parse().ok()).collect();
    for tr in traces {
        if tr.dat.page_size() != page_size || tr.dat.header_page() != header_page {
            bail!(
                "{}: its page layout (page size {}) differs from the kernel's (page size {page_size})",
                tr.path.display(),
                tr.dat.page_size()
            );
        }
        for ev in tr.dat.events() {
            let full = format!("{}:{}", ev.system, ev.name);
            match ids.get(&ev.id) {
                Some(other) if *other == full => continue, // the same event (another process)
                Some(other) => bail!(
                    "event ID {} is used by both {other} and {full} (pid {}); tp cannot put both into one file",
                    ev.id,
                    tr.pid
                ),
                None => {}
            }
            ids.insert(ev.id, full);
            let text = ev.to_format_text();
            if ev.system == "ftrace" {
                // The program's `ftrace:user_stack` (its own ID): with the kernel's ftrace
                // formats, where trace.dat readers look for that system.
                ftrace_formats.push(text);
                continue;
            }
            match event_formats.iter_mut().find(|(s, _)| *s == ev.system) {
                Some((_, v)) => v.push(text),
                None => event_formats.push((ev.system.clone(), vec![text])),
            }
        }
        // The program's own maps (its recorder saves them) where tp's side-band recording
        // has none for that process.
        for p in tr.dat.proc_maps() {
            if !procmaps.iter().any(|q| q.pid == p.pid) {
                procmaps.push(p.clone());
            }
        }
        for (pid, comm) in tr.dat.cmdlines().iter() {
            if !known.contains(&pid) {
                cmdlines.push_str(&format!("{pid} {comm}\n"));
            }
        }
    }
    Ok(())
}

fn format_name(text: &str) -> &str {
    text.lines().find_map(|l| l.strip_prefix("name: ")).unwrap_or("?").trim()
}

/// One buffer per recording, its streams copied page by page.
pub fn buffers(traces: &[UserTrace]) -> Result<Vec<BufferPages<'_>>> {
    let mut out = Vec::new();
    for tr in traces {
        let Some(bi) = tr
            .dat
            .buffers()
            .iter()
            .position(|b| b.kind == tp_format::tracedat::BufferKind::Flyrecord)
        else {
            continue;
        };
        let mut cpus = Vec::new();
        for (i, c) in tr.dat.buffers()[bi].cpus.iter().enumerate() {
            let src = tr
                .dat
                .page_source(bi, i)
                .with_context(|| format!("reading {}", tr.path.display()))?;
            cpus.push(CpuPages { cpu: c.cpu, pages: Box::new(PagesReader::new(src)) });
        }
        out.push(BufferPages { name: tr.name.clone(), cpus });
    }
    Ok(out)
}

/// A [`PageSource`] read as concatenated pages.
struct PagesReader<'a> {
    src: Box<dyn PageSource + 'a>,
    pos: usize,
    have: bool,
    done: bool,
}

impl<'a> PagesReader<'a> {
    fn new(src: Box<dyn PageSource + 'a>) -> Self {
        PagesReader { src, pos: 0, have: false, done: false }
    }
}

impl Read for PagesReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            if self.have {
                let page = self.src.page();
                if self.pos < page.len() {
                    let n = buf.len().min(page.len() - self.pos);
                    buf[..n].copy_from_slice(&page[self.pos..self.pos + n]);
                    self.pos += n;
                    return Ok(n);
                }
            }
            if self.done {
                return Ok(0);
            }
            match self.src.advance() {
                Ok(true) => {
                    self.have = true;
                    self.pos = 0;
                }
                Ok(false) => {
                    self.have = false;
                    self.done = true;
                }
                Err(e) => return Err(std::io::Error::other(e.to_string())),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropped_events_per_stream() {
        let stats = "entries: 5\ndropped events: 0\nread events: 5\n\
                     entries: 7\ndropped events: 12\nread events: 7\n\
                     entries: 1\ndropped events: 3\n";
        assert_eq!(dropped_in_stats(stats), [(1, 12), (2, 3)]);
        assert!(dropped_in_stats("entries: 1\ndropped events: 0\n").is_empty());
    }

    #[test]
    fn format_id_and_name() {
        let t = "name: req\nID: 40001\nformat:\n\tfield:unsigned short common_type;\n\nprint fmt: \"\"\n";
        assert_eq!(format_id(t), Some(40001));
        assert_eq!(format_name(t), "req");
    }
}
