//! `tp stream -e ... [-- CMD]`: events as the kernel's `trace_pipe` prints them, live, to
//! stdout. Same event, filter, pid and command options as `tp record`; recording happens in a
//! private instance that is removed on every exit path.

use std::ffi::OsString;
use std::io::Write;
use std::time::{Duration, Instant};

use anyhow::Result;
use tp_format::page::{Missed, Page, PageLayout};
use tp_format::render::{Options, Renderer, Tables};
use tp_format::symbols::{Cmdlines, Kallsyms, PrintkFormats};
use tp_format::text::{self, Columns};
use tp_tracefs::process::{self, Signals};
use tp_tracefs::EventId;

use crate::record::session::{self, Session, Settings, Target};

/// Per-CPU buffer for streaming: the reader wakes on every page, so less is needed than
/// for `tp record`.
const STREAM_BUFFER_KB: u64 = 8 * 1024;

/// `tp stream` arguments (boxed: they are large next to the other subcommands').
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub opts: Box<Opts>,
}

#[derive(clap::Args, Debug)]
pub struct Opts {
    #[command(flatten)]
    pub trace: crate::record::TraceOpts,
    /// Stop after this long (e.g. 10s, 500ms).
    #[arg(long, value_parser = crate::record::parse_duration)]
    pub duration: Option<std::time::Duration>,
    /// Print the context columns with the tgid, as `options/record-tgid` does.
    #[arg(long)]
    pub tgid: bool,
    /// The command to trace, with its children.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

pub fn run(args: Args) -> Result<i32> {
    let argv: Vec<OsString> = std::env::args_os().collect();
    let args = &*args.opts;
    let mut selections = session::pair_filters(&argv, &args.trace.events, &args.trace.filters)?;
    // USDT probes (`sdt_P:N`, `usdt:BINARY:P:N`) defined for this run, removed after the
    // instance (dropped last).
    let _sdt_probes = crate::probe::run::define_for_record(
        &args.trace.events,
        None,
        &args.command,
        &args.trace.pids,
        false,
    )?;
    for s in &mut selections {
        s.glob = crate::probe::run::event_glob(&s.glob);
    }
    let signals = Signals::install(&[
        libc::SIGINT,
        libc::SIGTERM,
        libc::SIGHUP,
        libc::SIGCHLD,
        libc::SIGPIPE,
    ])?;
    let target = Target::of(&args.command, &args.trace);
    let is_pids = matches!(target, Target::Pids { .. });
    let settings = Settings {
        selections: &selections,
        target,
        buffer_kb: Some(args.trace.buffer_kb.unwrap_or(STREAM_BUFFER_KB)),
        clock: &args.trace.clock,
        instance: None,
        stacks: &args.trace.stacks,
    };
    let Session { tfs, inst, events, mut child, traced_pids } = session::setup(&settings)?;
    // Wake the reader as soon as there is data (this is our own instance).
    inst.set_buffer_percent(0)?;
    let layout = PageLayout::new(tfs.header_page()?, false);
    let mut renderer = renderer_for(&tfs, &events, args)?;
    let cpus = inst.cpus()?;
    let mut readers = Vec::new();
    for &c in &cpus {
        readers.push(inst.raw_reader(c)?);
    }
    let mut out = Printer { stdout: std::io::stdout().lock(), buf: String::new(), closed: false };
    // The recorder filter only where a tp recorder thread may run (it costs every event).
    let keep_recorder = args.trace.keep_recorder || !session::may_run_recorder(&settings.target);
    session::start(&inst, &events, &mut child, keep_recorder)?;
    let t0 = Instant::now();
    let mut page = vec![0u8; layout.page_size()];
    let mut batch: Vec<(u64, u32, Vec<u8>)> = Vec::new();
    let mut exit = 0;
    let mut signals_seen = 0;
    let mut next_pid_check = Instant::now() + Duration::from_secs(1);
    'run: loop {
        let mut fds: Vec<i32> = readers.iter().map(|r| r.raw_fd()).collect();
        fds.push(signals.fd());
        let wait = match args.duration {
            Some(d) => d.saturating_sub(t0.elapsed()).min(Duration::from_millis(200)),
            None => Duration::from_millis(200),
        };
        tp_tracefs::process::poll_readable(&fds, wait.as_millis() as i32)?;
        read_all(&mut readers, &mut page, &layout, &mut batch, &mut out)?;
        // Names as the kernel's `trace_pipe` prints them: from `saved_cmdlines` as it is
        // when the events are read (it follows exec, fork and comm changes at each switch).
        if !batch.is_empty() {
            renderer.tables.cmdlines = cmdlines(&tfs, args.tgid);
        }
        flush_batch(&mut batch, &renderer, &mut out)?;
        if out.closed {
            break 'run;
        }
        if let Some(c) = &child {
            if let Some(st) = process::wait_pid(c.pid(), true)? {
                exit = st.as_shell_code();
                break 'run;
            }
        }
        if args.duration.is_some_and(|d| t0.elapsed() >= d) {
            break 'run;
        }
        if is_pids && Instant::now() >= next_pid_check {
            next_pid_check = Instant::now() + Duration::from_secs(1);
            if traced_pids.iter().all(|&p| !tp_tracefs::process::is_alive(p)) {
                break 'run;
            }
        }
        for d in signals.wait(Duration::ZERO)? {
            match d.signal {
                libc::SIGCHLD => {}
                libc::SIGPIPE => break 'run,
                s => {
                    let Some(c) = &child else { break 'run };
                    signals_seen += 1;
                    if signals_seen > 1 {
                        exit = 128 + s;
                        break 'run;
                    }
                    if s != libc::SIGINT || d.sent_by_process {
                        let _ = process::kill(c.pid(), s);
                    }
                }
            }
        }
    }
    inst.set_tracing_on(false)?;
    if !out.closed {
        renderer.tables.cmdlines = cmdlines(&tfs, args.tgid);
        read_all(&mut readers, &mut page, &layout, &mut batch, &mut out)?;
        flush_batch(&mut batch, &renderer, &mut out)?;
    }
    drop(readers);
    inst.remove()?;
    drop(signals);
    Ok(exit)
}

/// The renderer of the streamed events (and ftrace's own), with this kernel's tables.
fn renderer_for(tfs: &tp_tracefs::Tracefs, events: &[EventId], args: &Opts) -> Result<Renderer> {
    let mut formats = Vec::new();
    for e in events.iter().chain(tfs.ftrace_events()?.iter()) {
        if let Ok(f) = tfs.event_format(e) {
            formats.push(f);
        }
    }
    let tables = Tables {
        kallsyms: Kallsyms::parse(&tfs.kallsyms()?),
        printk: PrintkFormats::parse(&tfs.printk_formats()?),
        cmdlines: cmdlines(tfs, args.tgid),
        user_maps: None,
    };
    let options = Options {
        columns: Columns { tgid: args.tgid, ..Columns::default() },
        ts_in_ns: text::clock_is_ns(&args.trace.clock),
        big_endian: false,
        long_size: 8,
        sym: Default::default(),
    };
    Ok(Renderer::new(formats, tables, options))
}

fn cmdlines(tfs: &tp_tracefs::Tracefs, tgids: bool) -> Cmdlines {
    let mut c = Cmdlines::parse(&tfs.saved_cmdlines().unwrap_or_default());
    if tgids {
        c.add_tgids(&tfs.saved_tgids().unwrap_or_default());
    }
    c
}

struct Printer<'a> {
    stdout: std::io::StdoutLock<'a>,
    buf: String,
    closed: bool,
}

impl Printer<'_> {
    fn flush(&mut self) -> Result<()> {
        if self.closed || self.buf.is_empty() {
            self.buf.clear();
            return Ok(());
        }
        let r = self.stdout.write_all(self.buf.as_bytes()).and_then(|_| self.stdout.flush());
        self.buf.clear();
        match r {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                self.closed = true;
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }
}

/// Read every page ready on every CPU; events go to `batch`, lost-event notes straight out.
fn read_all(
    readers: &mut [tp_tracefs::RawReader<'_>],
    page: &mut [u8],
    layout: &PageLayout,
    batch: &mut Vec<(u64, u32, Vec<u8>)>,
    out: &mut Printer<'_>,
) -> Result<()> {
    for r in readers.iter_mut() {
        // Bounded per call so one busy CPU cannot starve the others' output.
        for _ in 0..256 {
            let n = r.read_page(page)?;
            if n == 0 {
                break;
            }
            let p = match Page::parse(layout, &page[..n]) {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("tp: CPU {}: bad page from the kernel: {e}", r.cpu);
                    continue;
                }
            };
            match p.missed {
                Missed::None => {}
                Missed::Unknown => text::write_lost(&mut out.buf, r.cpu, None),
                Missed::Count(c) => text::write_lost(&mut out.buf, r.cpu, Some(c)),
            }
            for rec in p.events() {
                match rec {
                    Ok(rec) => batch.push((rec.ts, r.cpu, rec.data.to_vec())),
                    Err(e) => {
                        eprintln!("tp: CPU {}: {e}", r.cpu);
                        break;
                    }
                }
            }
        }
    }
    Ok(())
}

fn flush_batch(
    batch: &mut Vec<(u64, u32, Vec<u8>)>,
    renderer: &Renderer,
    out: &mut Printer<'_>,
) -> Result<()> {
    batch.sort_by_key(|(ts, cpu, _)| (*ts, *cpu));
    for (ts, cpu, data) in batch.drain(..) {
        renderer.render_line(cpu, ts, &data, &mut out.buf);
        if out.buf.len() > 1 << 16 {
            out.flush()?;
        }
    }
    out.flush()
}
