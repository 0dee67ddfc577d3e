//! The `tp` command. One module per subcommand; each has `Args` (clap) and
//! `run(args) -> anyhow::Result<i32>` returning the process exit status.

#![forbid(unsafe_code)]

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

mod analyze;
mod convert;
mod extract;
mod format;
mod gendocs;
mod list;
mod outfile;
mod probe;
mod record;
mod report;
mod stat;
mod stream;
mod trace;

#[derive(Parser)]
#[command(name = "tp", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print a trace file exactly as the kernel's `trace` file would.
    Report(report::Args),
    /// List the running kernel's events (optionally matching a glob).
    List(list::Args),
    /// Print an event's format file.
    Format(format::Args),
    /// Record kernel tracepoints into a trace.dat file.
    Record(record::Args),
    /// Write a tracefs buffer's contents to a trace.dat file (reading consumes them, as
    /// `trace-cmd extract` does).
    Extract(extract::Args),
    /// Print events live as the kernel renders them (like trace_pipe).
    Stream(stream::Args),
    /// strace -c's summary from a recording: calls, errors, time per syscall and task.
    Syscalls(analyze::syscalls::Args),
    /// Scheduling latency from a recording: waits to run, run time, preemptions, migrations.
    Sched(analyze::sched::Args),
    /// Count events through perf_event_open, like `perf stat`.
    Stat(stat::Args),
    /// Page faults from a recording: per task, kind, page, instruction and file.
    Faults(analyze::faults::Args),
    /// Define, list and remove dynamic probes on a binary's functions (uprobes).
    Probe(probe::Args),
    /// Convert a recording to another tool's format (Perfetto, Firefox Profiler).
    Convert(convert::Args),
    /// bpftrace's language compiled to BPF: aggregate in the kernel, print as bpftrace.
    Trace(trace::Args),
    /// Write the man pages and shell completions (for the repository's docs/).
    #[command(hide = true)]
    GenerateDocs(gendocs::Args),
}

/// The command line, its first help line naming every subcommand.
fn command() -> clap::Command {
    let cmd = Cli::command();
    let names: Vec<String> = cmd
        .get_subcommands()
        .filter(|c| !c.is_hide_set())
        .map(|c| c.get_name().to_string())
        .collect();
    cmd.about(format!("Linux tracepoints: {}", names.join(", ")))
}

fn main() {
    let matches = command().try_get_matches().unwrap_or_else(|e| {
        let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
        if let Some(line) = record::perf_habit(&argv) {
            eprintln!("{line}");
            std::process::exit(2);
        }
        e.exit()
    });
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let result = match cli.command {
        Command::Report(a) => report::run(a),
        Command::List(a) => list::run(a),
        Command::Format(a) => format::run(a),
        Command::Record(a) => record::run(a),
        Command::Extract(a) => extract::run(a),
        Command::Stream(a) => stream::run(a),
        Command::Syscalls(a) => analyze::syscalls::run(a),
        Command::Sched(a) => analyze::sched::run(a),
        Command::Stat(a) => stat::run(a),
        Command::Faults(a) => analyze::faults::run(a),
        Command::Convert(a) => convert::run(a),
        Command::Probe(a) => probe::run(a),
        Command::Trace(a) => trace::run(a),
        Command::GenerateDocs(a) => gendocs::run(a, command()),
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(e) if is_broken_pipe(&e) => std::process::exit(0),
        Err(e) => {
            eprintln!("tp: {e:#}");
            std::process::exit(1);
        }
    }
}

/// `tp report | head` ends quietly: a closed stdout is not an error.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
