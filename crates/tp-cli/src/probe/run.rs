//! USDT probes for one recording: `tp record -e sdt_PROVIDER:NAME -- CMD` defines the uprobe of
//! each matching `.note.stapsdt` site of the command's binary (or `-x BINARY`), with the
//! semaphore as the kernel-maintained reference counter, and removes it when the recording
//! ends (after a SIGKILL: at the next run, see [`tp_tracefs::remove_stale_probes`]).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use tp_format::glob::glob_match;
use tp_tracefs::{ProbeKind, RunProbes, Tracefs, Uprobe};

use super::{elf, event_name, place, sdt};

/// The uprobe of one SDT site (the event `sdt_PROVIDER:NAME`).
pub fn sdt_uprobe(bin: &elf::Binary, n: &sdt::SdtNote, event: String) -> Result<Uprobe> {
    let ref_ctr = match n.semaphore {
        0 => None,
        s => Some(bin.file_offset(s)?),
    };
    Ok(Uprobe {
        kind: ProbeKind::Entry,
        group: format!("sdt_{}", event_name(&n.provider)),
        event,
        path: bin.path.to_string_lossy().into_owned(),
        offset: bin.file_offset(n.location)?,
        ref_ctr,
        args: sdt::fetchargs(&n.args).with_context(|| {
            format!("SDT probe {}:{} in {}", n.provider, n.name, bin.path.display())
        })?,
    })
}

/// The uprobes for the SDT sites of `bins` matching `glob` (`sdt_PROVIDER:NAME` with
/// wildcards). A name with several sites gets `NAME`, `NAME_1`, ... as perf names them.
pub fn sdt_uprobes(bins: &[elf::Binary], glob: &str) -> Result<Vec<Uprobe>> {
    let (gg, eg) = glob.split_once(':').unwrap_or((glob, "*"));
    let mut out: Vec<Uprobe> = Vec::new();
    for bin in bins {
        for n in sdt::notes(bin)? {
            let group = format!("sdt_{}", event_name(&n.provider));
            let base = event_name(&n.name);
            if !glob_match(gg, &group) || !glob_match(eg, &base) {
                continue;
            }
            let same = out
                .iter()
                .filter(|p| {
                    p.group == group
                        && (p.event == base
                            || p.event
                                .strip_prefix(&base)
                                .and_then(|r| r.strip_prefix('_'))
                                .is_some_and(|r| {
                                    !r.is_empty() && r.bytes().all(|b| b.is_ascii_digit())
                                }))
                })
                .count();
            let event = if same == 0 { base } else { format!("{base}_{same}") };
            out.push(sdt_uprobe(bin, &n, event)?);
        }
    }
    Ok(out)
}

/// Define the SDT probes the `-e` globs name (`sdt_*:*`) that are not events yet. They are
/// looked up in `exec`, else the command's binary, else the files mapped executable by
/// `pids` (their programs and libraries). `None` when no glob names an SDT probe.
pub fn define_for_record(
    globs: &[String],
    exec: Option<&Path>,
    command: &[OsString],
    pids: &[i32],
    quiet: bool,
) -> Result<Option<RunProbes>> {
    let sdt_globs: Vec<&String> = globs.iter().filter(|g| g.starts_with("sdt_")).collect();
    if sdt_globs.is_empty() {
        return Ok(None);
    }
    let tfs = Tracefs::discover()?;
    remove_stale(&tfs);
    let existing = tfs.available_events()?;
    let paths: Vec<PathBuf> = match (exec, command.first()) {
        (Some(p), _) => vec![p.to_path_buf()],
        (None, Some(c)) => vec![find_in_path(c)?],
        (None, None) => mapped_files(pids)?,
    };
    let bins = paths.iter().map(|p| elf::Binary::read(p)).collect::<Result<Vec<_>>>()?;
    let mut run = RunProbes::new(&tfs);
    for g in sdt_globs {
        let known = tp_tracefs::match_glob(&existing, g);
        if bins.is_empty() {
            if known.is_empty() {
                bail!("-e {g}: no such event yet; give the binary with its SDT probes (-x BINARY, -p PID or -- COMMAND)");
            }
            continue;
        }
        let want = sdt_uprobes(&bins, g)?;
        if want.is_empty() && known.is_empty() {
            let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
            bail!(
                "-e {g}: no SDT probe matches it in {} (tp probe -x BINARY --sdt lists them)",
                names.join(", ")
            );
        }
        for p in want {
            if known.iter().any(|e| e.system == p.group && e.name == p.event) {
                // Defined already (tp probe, perf probe): used as it is, not removed.
                continue;
            }
            if !quiet {
                eprintln!("tp: probe {}:{} on {} for this run", p.group, p.event, place(&p));
            }
            run.add(p)?;
        }
    }
    Ok(Some(run))
}

/// The files the processes map executable (`/proc/PID/maps`), once each, in order.
fn mapped_files(pids: &[i32]) -> Result<Vec<PathBuf>> {
    let mut out: Vec<PathBuf> = Vec::new();
    for pid in pids {
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))
            .with_context(|| format!("reading /proc/{pid}/maps (is process {pid} running?)"))?;
        for l in maps.lines() {
            let mut w = l.split_whitespace();
            let perms = w.nth(1).unwrap_or("");
            let path = w.nth(3).unwrap_or("");
            if perms.contains('x') && path.starts_with('/') {
                let p = PathBuf::from(path);
                if !out.contains(&p) && std::fs::metadata(&p).is_ok_and(|m| m.is_file()) {
                    out.push(p);
                }
            }
        }
    }
    Ok(out)
}

/// Stale instances first (they may still enable a stale probe), then the probes.
fn remove_stale(tfs: &Tracefs) {
    let dir = Path::new(tp_tracefs::uprobe::RUN_PROBES_DIR);
    if !dir.exists() {
        return;
    }
    if let Ok(removed) = tp_tracefs::remove_stale(tfs) {
        for name in removed {
            eprintln!("tp: removed stale instance instances/{name} (its tp process is gone)");
        }
    }
    remove_stale_probes(tfs);
}

/// Remove the probes killed tp runs defined for themselves, saying which.
pub fn remove_stale_probes(tfs: &Tracefs) {
    match tp_tracefs::remove_stale_probes(tfs) {
        Ok(removed) => {
            for p in removed {
                eprintln!("tp: removed probe {p} left by a tp run that was killed");
            }
        }
        Err(e) => eprintln!("tp: warning: could not remove stale probes: {e}"),
    }
}

/// A command's binary: a path as given, a bare name through `PATH`.
pub fn find_in_path(cmd: &OsString) -> Result<PathBuf> {
    let p = Path::new(cmd);
    if p.components().count() > 1 {
        return std::fs::canonicalize(p).with_context(|| format!("{}", p.display()));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for d in std::env::split_paths(&path) {
        let c = d.join(p);
        if c.is_file() {
            return std::fs::canonicalize(&c).with_context(|| format!("{}", c.display()));
        }
    }
    bail!("{}: command not found in PATH (give -x BINARY for its SDT probes)", p.display())
}
