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

/// `usdt:BINARY:PROVIDER:NAME` (bpftrace's spelling; `usdt:BINARY:NAME` for any provider)
/// as (BINARY, `sdt_PROVIDER:NAME`); none for any other event spec.
pub fn usdt_spec(spec: &str) -> Option<(&str, String)> {
    let rest = spec.strip_prefix("usdt:")?;
    // From the right: a path may hold ':' itself.
    let mut parts = rest.rsplitn(3, ':');
    let name = parts.next()?;
    let (provider, bin) = match (parts.next()?, parts.next()) {
        (p, Some(b)) => (p, b),
        (b, None) => ("*", b),
    };
    (!bin.is_empty() && !provider.is_empty() && !name.is_empty())
        .then(|| (bin, format!("sdt_{provider}:{name}")))
}

/// The event glob tracefs knows a spec by: `usdt:B:P:N` is `sdt_P:N`, others as written
/// (typed arguments after the first word left out).
pub fn event_glob(spec: &str) -> String {
    let (spec, _) = with_args(spec);
    usdt_spec(spec).map_or_else(|| spec.to_string(), |(_, g)| g)
}

/// `-e 'SPEC ARG...'`: the spec and its typed arguments (`sdt_postgresql:query__start
/// arg1:string`).
pub fn with_args(spec: &str) -> (&str, Vec<String>) {
    let mut words = spec.split_whitespace();
    let first = words.next().unwrap_or(spec);
    (first, words.map(str::to_string).collect())
}

/// Define the SDT probes the `-e` globs name (`sdt_*:*`, `usdt:BINARY:*:*`) that are not
/// events yet. `sdt_` globs are looked up in `exec`, else the command's binary and the
/// libraries the dynamic loader would load for it, else the files mapped executable by
/// `pids` (their programs and libraries). `None` when no glob names an SDT probe.
pub fn define_for_record(
    globs: &[String],
    exec: Option<&Path>,
    command: &[OsString],
    pids: &[i32],
    quiet: bool,
) -> Result<Option<RunProbes>> {
    // (as written, its binary for usdt:, the sdt_ glob, its typed arguments)
    let specs: Vec<(&String, Option<&str>, String, Vec<String>)> = globs
        .iter()
        .filter_map(|written| {
            let (g, typed) = with_args(written);
            match usdt_spec(g) {
                Some((bin, glob)) => Some((written, Some(bin), glob, typed)),
                None => g.starts_with("sdt_").then(|| (written, None, g.to_string(), typed)),
            }
        })
        .collect();
    if specs.is_empty() {
        return Ok(None);
    }
    let tfs = Tracefs::discover()?;
    remove_stale(&tfs);
    let existing = tfs.available_events()?;
    let mut default_bins: Option<Vec<elf::Binary>> = None;
    let mut run = RunProbes::new(&tfs);
    for (written, usdt_bin, g, typed) in specs {
        let own;
        let bins: &[elf::Binary] = match usdt_bin {
            Some(b) => {
                own = [elf::Binary::read(&find_in_path(&OsString::from(b))?)?];
                &own
            }
            None => {
                if default_bins.is_none() {
                    let paths: Vec<PathBuf> = match (exec, command.first()) {
                        (Some(p), _) => vec![p.to_path_buf()],
                        (None, Some(c)) => with_libraries(&find_in_path(c)?)?,
                        (None, None) => mapped_files(pids)?,
                    };
                    default_bins =
                        Some(paths.iter().map(|p| elf::Binary::read(p)).collect::<Result<_, _>>()?);
                }
                default_bins.as_deref().unwrap_or_default()
            }
        };
        let known = tp_tracefs::match_glob(&existing, &g);
        if bins.is_empty() {
            if known.is_empty() {
                bail!("-e {written}: no such event yet; give the binary with its SDT probes (-x BINARY, -p PID or -- COMMAND)");
            }
            continue;
        }
        let want = sdt_uprobes(bins, &g)?;
        if want.is_empty() && known.is_empty() {
            let names: Vec<String> = bins.iter().map(|b| b.path.display().to_string()).collect();
            bail!(
                "-e {written}: no SDT probe matches it in {} (tp probe -x BINARY --sdt lists them)",
                names.join(", ")
            );
        }
        for mut p in want {
            p.args = super::typed::apply_sdt(&p.args, &typed)
                .with_context(|| format!("-e {written}"))?;
            let defined = known.iter().any(|e| e.system == p.group && e.name == p.event);
            if defined && !typed.is_empty() {
                let name = format!("{}:{}", p.group, p.event);
                bail!("-e {written}: {name} is defined already (by tp probe or perf probe) with its own arguments; remove it (tp probe --del {name}) to record it with {}", typed.join(" "));
            }
            if defined || run.probes().iter().any(|q| q.group == p.group && q.event == p.event) {
                // Defined already (tp probe, perf probe, an earlier -e): used as it is.
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

/// A program and the libraries its dynamic loader loads for it, as the loader itself lists
/// them (`LOADER --list PROGRAM`: DT_NEEDED, transitively, through RPATH/RUNPATH,
/// `LD_LIBRARY_PATH`, ld.so.cache and the default directories, without running the
/// program). Asking the loader gets its search exactly right where a second implementation
/// of it would drift; the program is not started, so none of its code runs (running it
/// stopped would need ptrace to stop it after exec). Libraries it `dlopen`s later are not
/// in the list. A static program is alone.
fn with_libraries(program: &Path) -> Result<Vec<PathBuf>> {
    let mut out = vec![program.to_path_buf()];
    let Some(loader) = elf::Binary::read(program)?.interpreter()? else { return Ok(out) };
    let list = std::process::Command::new(&loader)
        .arg("--list")
        .arg(program)
        .stdin(std::process::Stdio::null())
        .output()
        .with_context(|| format!("running {} --list {}", loader.display(), program.display()))?;
    if !list.status.success() {
        bail!(
            "{} --list {} failed: {}",
            loader.display(),
            program.display(),
            String::from_utf8_lossy(&list.stderr).trim()
        );
    }
    for p in loader_list_paths(&String::from_utf8_lossy(&list.stdout)) {
        let p = std::fs::canonicalize(&p).unwrap_or(p);
        if !out.contains(&p) {
            out.push(p);
        }
    }
    Ok(out)
}

/// The files of `ld.so --list` output: `\tlibc.so.6 => /lib/.../libc.so.6 (0x...)` and
/// `\t/lib64/ld-linux-x86-64.so.2 (0x...)` (the vDSO, with no file, left out).
fn loader_list_paths(text: &str) -> Vec<PathBuf> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim();
            let path = l.split_once(" => ").map_or(l, |(_, p)| p);
            let path = path.rsplit_once(" (").map_or(path, |(p, _)| p).trim();
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect()
}

/// The files the processes map executable (`/proc/PID/maps`), once each, in order.
fn mapped_files(pids: &[i32]) -> Result<Vec<PathBuf>> {
    let mut out: Vec<PathBuf> = Vec::new();
    for pid in pids {
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))
            .with_context(|| format!("reading /proc/{pid}/maps (is process {pid} running?)"))?;
        for m in maps.lines().filter_map(tp_format::maps::parse_proc_maps_line) {
            if m.is_exec() && m.name.starts_with('/') {
                let p = PathBuf::from(m.name);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usdt_specs_name_their_binary_and_sdt_event() {
        assert_eq!(usdt_spec("usdt:/bin/x:prov:tick"), Some(("/bin/x", "sdt_prov:tick".into())));
        assert_eq!(usdt_spec("usdt:/a:b/x:p:*"), Some(("/a:b/x", "sdt_p:*".into())));
        assert_eq!(usdt_spec("usdt:/bin/x:tick"), Some(("/bin/x", "sdt_*:tick".into())));
        assert_eq!(usdt_spec("usdt:tick"), None);
        assert_eq!(usdt_spec("usdt::p:n"), None);
        assert_eq!(usdt_spec("sdt_p:n"), None);
        assert_eq!(event_glob("usdt:/bin/x:p:n"), "sdt_p:n");
        assert_eq!(event_glob("sched:*"), "sched:*");
    }

    #[test]
    fn loader_lists_become_paths() {
        let text = "\tlinux-vdso.so.1 (0x00007ffd)\n\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f)\n\t/lib64/ld-linux-x86-64.so.2 (0x00007f)\n\tlibgone.so => not found\n";
        assert_eq!(
            loader_list_paths(text),
            [
                PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6"),
                "/lib64/ld-linux-x86-64.so.2".into()
            ]
        );
    }
}
