//! `tp trace`: bpftrace's language, compiled by tp-bpf into BPF, run on the kernel's events,
//! its maps printed as bpftrace prints them. This module only handles arguments, the
//! command to run and the signals; the rest is the tp-bpf crate.

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use tp_bpf::probes::Machine;
use tp_bpf::session::{self, Format, Session};
use tp_tracefs::process::{self, GatedChild, Signals};

#[derive(clap::Args)]
pub struct Args {
    /// The program text (bpftrace's language).
    #[arg(short = 'e', value_name = "PROGRAM")]
    pub program: Option<String>,
    /// A program file (`.bt`), when -e is not given.
    #[arg(value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Run this command (split at blanks) and stop when it ends, as bpftrace's -c.
    #[arg(short = 'c', value_name = "CMD")]
    pub cmd: Option<String>,
    /// Only this process's events.
    #[arg(short = 'p', value_name = "PID")]
    pub pid: Option<u32>,
    /// List the probes matching a pattern (`tracepoint:sched:*`) instead of running.
    #[arg(short = 'l', value_name = "PATTERN", num_args = 0..=1, default_missing_value = "*:*")]
    pub list: Option<String>,
    /// With -l: each tracepoint's fields.
    #[arg(short = 'v')]
    pub verbose: bool,
    /// Print the syntax tree and each event's BPF instructions instead of running.
    #[arg(short = 'd', long = "dump")]
    pub dump: bool,
    /// bpftrace's `-f json`: one JSON object per line.
    #[arg(long)]
    pub json: bool,
    /// Output format, as bpftrace's -f (`text` or `json`).
    #[arg(short = 'f', value_name = "FORMAT")]
    pub format: Option<String>,
    /// The command to run (instead of -c).
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

pub fn run(args: Args) -> Result<i32> {
    if let Some(pattern) = &args.list {
        return list(pattern, args.verbose);
    }
    let source = match (&args.program, &args.file) {
        (Some(p), _) => p.clone(),
        (None, Some(f)) => {
            std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?
        }
        (None, None) => bail!("give a program: -e 'PROGRAM' or a FILE"),
    };
    let json = args.json || args.format.as_deref() == Some("json");
    let t0 = Instant::now();
    let ast = tp_bpf::parse(&source).map_err(|e| located(&source, e))?;
    let mut machine = tp_bpf::machine::System::new();
    let mut attaches = Vec::new();
    for p in &ast.probes {
        let mut list = Vec::new();
        for (spec, _) in &p.specs {
            list.extend(tp_bpf::probes::resolve(spec, &mut machine as &mut dyn Machine)?);
        }
        attaches.push(list);
    }
    let opts = tp_bpf::Options { pid: args.pid };
    let compiled = tp_bpf::compile(&ast, &attaches, &opts).map_err(|e| located(&source, e))?;
    if args.dump {
        dump(&ast, &compiled);
        return Ok(0);
    }
    let argv: Vec<OsString> = match &args.cmd {
        Some(c) => c.split_whitespace().map(OsString::from).collect(),
        None => args.command.clone(),
    };
    let mut child = if argv.is_empty() { None } else { Some(GatedChild::spawn(&argv)?) };
    let signals = Signals::install(&[libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGCHLD])?;
    let sess = Session::load(compiled, &source).map_err(|e| located(&source, e))?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let f = Format { json };
    let debug_start = std::env::var_os("TP_TRACE_STARTUP").is_some();
    let mut child_done = false;
    let child_pid = child.as_ref().map(GatedChild::pid);
    session::run(
        sess,
        &mut out,
        f,
        || {
            let m = |e: tp_tracefs::Error| tp_bpf::Error::Machine(e.to_string());
            for d in signals.wait(std::time::Duration::ZERO).map_err(m)? {
                if d.signal != libc::SIGCHLD {
                    return Ok(true);
                }
            }
            if let Some(pid) = child_pid {
                if !child_done && process::wait_pid(pid, true).map_err(m)?.is_some() {
                    child_done = true;
                    return Ok(true);
                }
            }
            Ok(false)
        },
        |n| {
            if debug_start {
                eprintln!("tp trace: attached {} ms after start", t0.elapsed().as_millis());
            }
            let mut o = std::io::stdout().lock();
            let r = if json {
                writeln!(o, "{{\"type\": \"attached_probes\", \"data\": {{\"probes\": {n}}}}}")
            } else {
                writeln!(o, "Attaching {n} probe{}...", if n == 1 { "" } else { "s" })
            };
            r.and_then(|_| o.flush()).map_err(|e| tp_bpf::Error::Machine(e.to_string()))?;
            if let Some(c) = &mut child {
                c.release().map_err(|e| tp_bpf::Error::Machine(e.to_string()))?;
            }
            Ok(())
        },
    )?;
    Ok(0)
}

/// An error with the program's line under it.
fn located(source: &str, e: tp_bpf::Error) -> anyhow::Error {
    let pos = match &e {
        tp_bpf::Error::Syntax { pos, .. } | tp_bpf::Error::Semantic { pos, .. } => Some(*pos),
        tp_bpf::Error::Verifier { pos, .. } => *pos,
        _ => None,
    };
    let Some(pos) = pos.filter(|p| p.line > 0) else { return anyhow::Error::new(e) };
    let Some(line) = source.lines().nth(pos.line as usize - 1) else {
        return anyhow::Error::new(e);
    };
    let caret = format!("{}^", " ".repeat(pos.col.saturating_sub(1) as usize));
    anyhow::anyhow!("{e}\n{line}\n{caret}")
}

fn dump(ast: &tp_bpf::ast::Program, c: &tp_bpf::Compiled) {
    println!("{ast:#?}");
    for (i, m) in c.maps.iter().enumerate() {
        println!(
            "map[{i}] {} {:?} key {} value {} entries {}",
            m.name, m.kind, m.key_size, m.value_size, m.max_entries
        );
    }
    for p in &c.programs {
        let door = if p.raw { "raw tracepoint" } else { "perf" };
        println!("\n{} ({door}, {} instructions):", p.attach.name, p.insns.len());
        let text = tp_bpf::insn::disassemble(&p.insns);
        let mut slot = 0;
        for t in text {
            println!("{slot:4}: line {:3}  {t}", p.lines.get(slot).copied().unwrap_or(0));
            slot += if t.ends_with(" ll") || t.contains("= map[") { 2 } else { 1 };
        }
    }
}

fn list(pattern: &str, verbose: bool) -> Result<i32> {
    let mut m = tp_bpf::machine::System::new();
    let out = std::io::stdout();
    let mut o = out.lock();
    for name in m.list(pattern)? {
        writeln!(o, "{name}")?;
        if verbose && name.starts_with("tracepoint:") {
            let mut parts = name.splitn(3, ':').skip(1);
            let (s, e) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            if let Ok(f) = m.format(s, e) {
                for fld in &f.fields {
                    writeln!(o, "    {}", fld.declaration)?;
                }
            }
        }
    }
    Ok(0)
}
