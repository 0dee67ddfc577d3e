//! `tp list [GLOB]`: the running kernel's events, optionally with their fields; with
//! `--program PATH`, a Rust program's own tracepoints (crate `tp`) the same way.

use std::ffi::OsString;
use std::io::Write;
use std::path::Path;

use anyhow::{bail, Context};
use tp_format::format::EventFormat;
use tp_tracefs::{EventId, Tracefs};

#[derive(clap::Args)]
pub struct Args {
    /// Event glob: `sched`, `sched:sched_*`, `syscalls:sys_enter_openat`, `*:*` (default all).
    glob: Option<String>,
    /// Also print each event's fields (C type, name, offset, size).
    #[arg(short = 'F', long)]
    fields: bool,
    /// List this program's tracepoints instead of the kernel's. The program is run with
    /// `TP_LIST_FORMATS=FILE` (and no arguments); it must call `tp::init_from_env()`, which
    /// writes every tracepoint's format there and exits.
    #[arg(long, value_name = "PATH")]
    program: Option<OsString>,
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    if let Some(prog) = &args.program {
        return run_program(Path::new(prog), &args);
    }
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let perf_listed = list_perf_events(&mut out, args.glob.as_deref())?;
    let fs = match Tracefs::discover() {
        // Without the rights to read tracefs: the perf events are what this user has.
        Err(e @ tp_tracefs::Error::NotRoot { .. }) if perf_listed => {
            out.flush()?;
            eprintln!("tp: tracefs events not listed: {e}");
            return Ok(0);
        }
        r => r?,
    };
    let events = match &args.glob {
        Some(g) => fs.match_events(g).or_else(|e| if perf_listed { Ok(vec![]) } else { Err(e) })?,
        None => fs.available_events()?,
    };
    if events.is_empty() && !perf_listed {
        bail!("no event matches {:?} (see `tp list`)", args.glob.clone().unwrap_or_default());
    }
    for ev in &events {
        writeln!(out, "{ev}")?;
        if args.fields {
            let f = fs.event_format(ev).with_context(|| format!("reading the format of {ev}"))?;
            print_fields(&mut out, &f)?;
        }
    }
    out.flush()?;
    Ok(0)
}

/// The perf_event_open events (software, hardware, cache, breakpoints) as `perf list`
/// shows them, those matching `glob` (all without one); hardware and cache events this
/// machine lacks (no PMU, as in a VM) are marked. Returns whether any was listed.
fn list_perf_events(out: &mut impl Write, glob: Option<&str>) -> anyhow::Result<bool> {
    use tp_format::glob::glob_match;
    use tp_perf::events::{symbolic_events, Class};
    let mut any = false;
    for s in symbolic_events() {
        if glob.is_some_and(|g| !s.names.iter().any(|n| glob_match(g, n))) {
            continue;
        }
        let ev = tp_perf::Event::symbolic(s.names[0])?;
        let missing = matches!(s.class, Class::Hardware | Class::HwCache)
            && !tp_perf::counter::supported(&ev);
        let note = if missing { ", not supported here" } else { "" };
        writeln!(out, "  {:<48} [{}{note}]", s.names.join(" OR "), s.class.label())?;
        any = true;
    }
    if glob.is_none_or(|g| glob_match(g, "mem:")) {
        writeln!(out, "  {:<48} [{}]", "mem:<addr>[/len][:access]", Class::Breakpoint.label())?;
        writeln!(out, "  {:<48} [{}]", "mem:<symbol>[/len][:access]", Class::Breakpoint.label())?;
        any = true;
    }
    Ok(any)
}

fn print_fields(out: &mut impl Write, f: &EventFormat) -> std::io::Result<()> {
    for field in &f.fields {
        let sign = if field.signed { "signed" } else { "unsigned" };
        writeln!(
            out,
            "    {:<40} offset:{:<4} size:{:<4} {sign}",
            field.declaration, field.offset, field.size
        )?;
    }
    Ok(())
}

fn run_program(prog: &Path, args: &Args) -> anyhow::Result<i32> {
    let formats = program_formats(prog)?;
    let ids: Vec<EventId> = formats.iter().map(|f| EventId::new(&f.system, &f.name)).collect();
    let events: Vec<&EventId> = match &args.glob {
        Some(g) => tp_tracefs::match_glob(&ids, g),
        None => ids.iter().collect(),
    };
    if events.is_empty() {
        match &args.glob {
            None => bail!("{} has no tracepoints", prog.display()),
            Some(g) => bail!(
                "no tracepoint of {} matches {g:?} (see `tp list --program {}`)",
                prog.display(),
                prog.display()
            ),
        }
    }
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for ev in events {
        writeln!(out, "{ev}")?;
        if args.fields {
            if let Some(f) = formats.iter().find(|f| f.system == ev.system && f.name == ev.name) {
                print_fields(&mut out, f)?;
            }
        }
    }
    out.flush()?;
    Ok(0)
}

/// Run `prog` with `TP_LIST_FORMATS` and parse what it writes: blocks of a `system: SYS`
/// line, the event's `format` text and an empty line.
fn program_formats(prog: &Path) -> anyhow::Result<Vec<EventFormat>> {
    let dir = crate::outfile::TempDir::new("tp-list")?;
    let file = dir.path().join("formats");
    let run = std::process::Command::new(prog)
        .env("TP_LIST_FORMATS", &file)
        .env_remove("TP_RECORD")
        .env_remove("TP_TEXT")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .status();
    let bytes = std::fs::read(&file);
    drop(dir);
    let status = run.with_context(|| format!("running {}", prog.display()))?;
    let bytes = match bytes {
        Ok(b) if status.success() => b,
        // It wrote the file: it did call tp::init_from_env(), and then failed.
        Ok(_) => bail!("{} failed ({status}) while listing its tracepoints", prog.display()),
        Err(_) => bail!(
            "{} did not list its tracepoints ({status}): does it call tp::init_from_env() at start?",
            prog.display()
        ),
    };
    let text = String::from_utf8(bytes).map_err(|e| {
        let b = e.as_bytes();
        let at = e.utf8_error().valid_up_to();
        let line_start = b[..at].iter().rposition(|&c| c == b'\n').map_or(0, |i| i + 1);
        let line_end = b[at..].iter().position(|&c| c == b'\n').map_or(b.len(), |i| at + i);
        anyhow::anyhow!(
            "the tracepoint formats {} wrote are not UTF-8 (byte {at}, line {}: {:?})",
            prog.display(),
            b[..at].iter().filter(|&&c| c == b'\n').count() + 1,
            String::from_utf8_lossy(&b[line_start..line_end])
        )
    })?;
    parse_formats(&text)
}

fn parse_formats(text: &str) -> anyhow::Result<Vec<EventFormat>> {
    let mut out = Vec::new();
    let mut system: Option<&str> = None;
    let mut block = String::new();
    let mut flush = |system: Option<&str>, block: &mut String| -> anyhow::Result<()> {
        if let Some(sys) = system {
            if !block.trim().is_empty() {
                let f = EventFormat::parse(sys, block)
                    .map_err(|e| anyhow::anyhow!("format of a {sys} tracepoint: {e}"))?;
                out.push(f);
            }
        }
        block.clear();
        Ok(())
    };
    for line in text.lines() {
        if let Some(sys) = line.strip_prefix("system: ") {
            flush(system, &mut block)?;
            system = Some(sys.trim());
        } else {
            block.push_str(line);
            block.push('\n');
        }
    }
    flush(system, &mut block)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_formats_text() {
        let one = "name: req\nID: 40000\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\tfield:u32 id;\toffset:8;\tsize:4;\tsigned:0;\n\nprint fmt: \"id=%u\", REC->id\n";
        let text = format!("system: myapp\n{one}\nsystem: other\n{}\n", one.replace("req", "r2"));
        let f = parse_formats(&text).unwrap();
        assert_eq!(f.len(), 2);
        assert_eq!((f[0].system.as_str(), f[0].name.as_str()), ("myapp", "req"));
        assert_eq!((f[1].system.as_str(), f[1].name.as_str()), ("other", "r2"));
        assert_eq!(f[0].fields.len(), 1);
    }
}
