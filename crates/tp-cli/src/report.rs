//! `tp report -i FILE`: a trace.dat file printed exactly as the kernel's `trace` file would
//! print the same buffer, plus filters, `--raw`, `--json` and `--stat`.

use std::collections::BTreeMap;
use std::io::Write;

use anyhow::Context;
use tp_format::funcgraph::{Graph, Out, Pairing};
use tp_format::glob::select_events;
use tp_format::render::{Common, Options, Renderer};
use tp_format::text::{self, Columns, Layout};
use tp_format::tracedat::{BufferKind, Item, TraceDat};

use pipeline::{Mode, Place};
use std::fs::File;

mod count;
pub mod perf;
mod pipeline;

#[derive(clap::Args, Clone)]
pub struct Args {
    /// The trace file: trace.dat v6 or v7 (as tp record or trace-cmd writes it) or perf.data
    /// (as perf record or tp writes it). Several (`-i a.dat -i b.data`): one timeline,
    /// their records merged by time (record them on the same clock: tp's trace.dat and
    /// perf.data both use CLOCK_MONOTONIC), each line as it prints alone, without header.
    #[arg(short = 'i', long = "input", default_value = "trace.dat")]
    inputs: Vec<String>,
    /// The one input being read.
    #[arg(skip)]
    input: String,
    /// Where its lines go.
    #[arg(skip)]
    sink: pipeline::Sink,
    /// Only events matching this glob (`sched`, `sched:sched_switch`, `*:*wakeup*`);
    /// repeatable.
    #[arg(short = 'e', long = "event")]
    events: Vec<String>,
    /// Only events of these CPUs (`-C 0 -C 2` or `-C 0,2`).
    #[arg(short = 'C', long = "cpu", value_delimiter = ',')]
    cpus: Vec<u32>,
    /// Only events of these pids (`-P 1234`, repeatable or comma separated).
    #[arg(short = 'P', long = "pid", value_delimiter = ',')]
    pids: Vec<i32>,
    /// Only this buffer (instance name as trace-cmd stores it; "" is the top-level buffer).
    #[arg(short = 'B', long = "buffer")]
    buffer: Option<String>,
    /// Print each event's fields (`name: field=value ...`) instead of its print fmt.
    #[arg(long, conflicts_with_all = ["json", "stat"])]
    raw: bool,
    /// One JSON object per line and event, with typed fields.
    #[arg(long, conflicts_with = "stat")]
    json: bool,
    /// Statistics instead of events: events per type and CPU, lost events per CPU.
    #[arg(long)]
    stat: bool,
    /// Print the TGID column (as the kernel does with options/record-tgid).
    #[arg(long)]
    tgid: bool,
    /// Leave out the header block.
    #[arg(long)]
    no_header: bool,
    /// User stacks (`<user stack trace>`) as the kernel prints them with its `sym-userobj`
    /// option: each address as the file mapped there and the offset in that mapping
    /// (`/usr/lib/x86_64-linux-gnu/libc.so.6[+0x2a1ca]`), from the processes' maps the
    /// recording saved; addresses outside file mappings stay ` <address>`.
    #[arg(long)]
    sym_userobj: bool,
    /// Code addresses of ftrace's own events (kernel stack frames, `function`) with their
    /// offset and size, as the kernel's `sym-offset` option prints them
    /// (`do_syscall_64+0x1fa/0x280`).
    #[arg(long)]
    sym_offset: bool,
    /// ... and with the address after them, as the kernel's `sym-addr` option
    /// (`do_syscall_64 <ffffffff821ed69a>`; user stack frames too).
    #[arg(long)]
    sym_addr: bool,
    /// perf.data: also print COMM, FORK and EXIT records (as perf script does).
    #[arg(long)]
    show_task_events: bool,
    /// perf.data: also print MMAP and MMAP2 records (as perf script does).
    #[arg(long)]
    show_mmap_events: bool,
    /// perf.data: each frame's source `file:line` (from DWARF), under it as perf script
    /// -F +srcline prints it.
    #[arg(long)]
    srcline: bool,
    /// perf.data: stacks without the functions DWARF places at each frame (inlined calls,
    /// printed `name+off (inlined)` by default, as perf script does): no DWARF is read.
    #[arg(long)]
    no_inline: bool,
    /// perf.data: collapsed stacks, one line per distinct stack: `comm;outer;...;inner
    /// count` (as stackcollapse-perf makes from perf script's output).
    #[arg(long, conflicts_with_all = ["json", "raw", "stat", "top"])]
    folded: bool,
    /// perf.data: write a flame graph of the samples' stacks to this SVG file.
    #[arg(long, value_name = "SVG", conflicts_with_all = ["json", "raw", "stat", "top"])]
    flamegraph: Option<String>,
    /// perf.data: the hottest functions, with the share of samples in each function itself
    /// (self) and in it or what it called (children), as perf report --stdio.
    #[arg(long, conflicts_with_all = ["json", "raw", "stat"])]
    top: bool,
}

/// Both readers seek (trace.dat's sections, perf.data's header and features): a pipe, a
/// FIFO or `-` is refused with the reason instead of a "bad magic" from its first bytes.
fn refuse_unseekable(input: &str) -> anyhow::Result<()> {
    use std::os::unix::fs::FileTypeExt;
    let pipe = input == "-"
        || std::fs::metadata(input).is_ok_and(|m| {
            let t = m.file_type();
            t.is_fifo() || t.is_char_device() || t.is_socket()
        });
    if pipe {
        let shown = if input == "-" { "standard input" } else { input };
        anyhow::bail!(
            "cannot read {shown}: tp report needs a seekable file, not a pipe (save it first: cat > t.dat)"
        );
    }
    Ok(())
}

pub fn run(mut args: Args) -> anyhow::Result<i32> {
    if let [one] = &args.inputs[..] {
        args.input = one.clone();
        return run_one(args);
    }
    for input in &args.inputs {
        check_input(input)?;
    }
    if args.stat {
        // Statistics are per file: one after the other.
        let mut status = 0;
        for input in args.inputs.clone() {
            writeln!(std::io::stdout(), "# {input}")?;
            status = status.max(run_one(Args { input, ..args.clone() })?);
        }
        return Ok(status);
    }
    merge(args)
}

/// Several inputs: each read and rendered on its own threads, the lines merged by time.
fn merge(args: Args) -> anyhow::Result<i32> {
    let mut receivers = Vec::new();
    std::thread::scope(|s| {
        let runs: Vec<_> = args
            .inputs
            .iter()
            .map(|input| {
                // Two batches ahead per input: memory stays a few batches whatever the files.
                let (tx, rx) = std::sync::mpsc::sync_channel(2);
                receivers.push(rx);
                let one = Args {
                    input: input.clone(),
                    sink: pipeline::Sink::Merge(tx),
                    no_header: true,
                    ..args.clone()
                };
                s.spawn(move || run_one(one))
            })
            .collect();
        let merged = pipeline::merge(&args.inputs, std::mem::take(&mut receivers));
        let ran: Vec<_> = runs
            .into_iter()
            .map(|r| r.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect();
        // A failed write (e.g. `| head` closed) stopped the inputs too: that is the error.
        merged?;
        let mut status = 0;
        for r in ran {
            match r {
                Ok(s) => status = status.max(s),
                Err(e) => {
                    eprintln!("tp: {e:#}");
                    status = 1;
                }
            }
        }
        Ok(status)
    })
}

/// A directory, a pipe, a file that cannot be opened: said before anything is read.
fn check_input(input: &str) -> anyhow::Result<()> {
    if std::path::Path::new(input).is_dir() {
        anyhow::bail!(
            "cannot read {input}: it is a directory (give a trace.dat or perf.data file)"
        );
    }
    refuse_unseekable(input)?;
    std::fs::File::open(input).with_context(|| format!("cannot open {input}"))?;
    Ok(())
}

fn run_one(args: Args) -> anyhow::Result<i32> {
    if std::path::Path::new(&args.input).is_dir() {
        anyhow::bail!(
            "cannot read {}: it is a directory (give a trace.dat or perf.data file)",
            args.input
        );
    }
    refuse_unseekable(&args.input)?;
    let mut file =
        std::fs::File::open(&args.input).with_context(|| format!("cannot open {}", args.input))?;
    // perf.data (`PERFILE2`) or trace.dat, by the magic.
    let mut magic = [0u8; 8];
    let n = std::io::Read::read(&mut file, &mut magic).unwrap_or(0);
    if tp_format::perfdata::read::is_perf_data(&magic[..n]) {
        return perf::run(&args);
    }
    if args.folded || args.flamegraph.is_some() || args.top || args.srcline || args.no_inline {
        anyhow::bail!(
            "{}: --folded, --flamegraph, --top, --srcline and --no-inline need a perf.data file \
             with stacks (tp record -g or perf record -g)",
            args.input
        );
    }
    // Formats are parsed below: only the events the trace has when it is counted first.
    let mut dat =
        TraceDat::open_file_lazy(file).with_context(|| format!("cannot read {}", args.input))?;
    let buffers = chosen_buffers(&args, &dat)?;
    // `-C N` for a CPU the trace does not have is an error, as `-e nosuch` is.
    let cpu_count = dat.cpu_count().unwrap_or(0);
    for &c in &args.cpus {
        if c >= cpu_count && !dat.buffers().iter().any(|b| b.cpus.iter().any(|d| d.cpu == c)) {
            let mut have: Vec<u32> = (0..cpu_count).collect();
            have.extend(dat.buffers().iter().flat_map(|b| b.cpus.iter().map(|d| d.cpu)));
            have.sort_unstable();
            have.dedup();
            let have: Vec<String> = have.iter().map(u32::to_string).collect();
            anyhow::bail!("no CPU {c} in {} (it has CPUs {})", args.input, have.join(", "));
        }
    }
    let header = !args.json && !args.no_header && !args.stat;
    let counts = load_formats(&args, &mut dat, &buffers, header)?;
    let renderer = renderer_for(&args, &mut dat);
    let wanted = EventFilter::new(&args.events, &renderer)?;
    let status = if args.stat {
        print_stats(&args, &dat, &buffers, &renderer, &wanted)?
    } else {
        print_events(&args, &dat, &buffers, header.then_some(&counts[..]), &renderer, &wanted)?
    };
    // The process ends now: freeing thousands of formats and the symbol table would only
    // cost time.
    std::mem::forget(renderer);
    std::mem::forget(dat);
    Ok(status)
}

/// The buffers to print: `-B NAME`, else every buffer with events (`trace-cmd extract -B`
/// also stores the empty top-level buffer) or errors, else the first.
fn chosen_buffers(args: &Args, dat: &TraceDat<File>) -> anyhow::Result<Vec<usize>> {
    if let Some(name) = &args.buffer {
        let i = dat.buffers().iter().position(|b| &b.name == name).with_context(|| {
            let names: Vec<_> = dat.buffers().iter().map(|b| format!("{:?}", b.name)).collect();
            format!("no buffer {name:?} in {} (it has {})", args.input, names.join(", "))
        })?;
        return Ok(vec![i]);
    }
    let mut with_events = Vec::new();
    for b in 0..dat.buffers().len() {
        if has_events_or_errors(dat, b)? {
            with_events.push(b);
        }
    }
    if with_events.is_empty() {
        with_events = (0..dat.buffers().len().min(1)).collect();
    }
    Ok(with_events)
}

/// Parse the event formats the report needs; with a `header`, count each buffer's events
/// first (the kernel's header counts what is in the buffer and adds what was overwritten;
/// saved stats are read after the capture drained the buffer, so the file is counted) and
/// parse only the formats of the events that occur. Returns the counts.
fn load_formats(
    args: &Args,
    dat: &mut TraceDat<File>,
    buffers: &[usize],
    header: bool,
) -> anyhow::Result<Vec<u64>> {
    let mut counts = Vec::new();
    if header {
        let mut ids = vec![0u64; 1 << 10];
        std::thread::scope(|s| -> anyhow::Result<()> {
            // Meanwhile another core builds the symbol table the renderers will need.
            s.spawn(|| dat.kallsyms().is_empty());
            for &b in buffers {
                counts.push(count::count_events(dat, b, &mut ids)?);
            }
            Ok(())
        })?;
        // `-e` globs are matched against every format's name.
        if args.events.is_empty() {
            dat.parse_formats(|id| id < 1 << 16 && ids[id as usize / 64] & (1 << (id % 64)) != 0);
        }
    }
    if !header || !args.events.is_empty() {
        dat.parse_formats(|_| true);
    }
    for e in dat.format_errors() {
        eprintln!("tp: {}: {e} (its events print as unknown)", args.input);
    }
    Ok(counts)
}

/// The renderer, with the file's formats and tables moved into it (the records need only
/// the file, the layout and the buffers).
fn renderer_for(args: &Args, dat: &mut TraceDat<File>) -> Renderer {
    // Lines as the recording kernel printed them: its uname, else what its formats imply
    // (all of them parsed for that), else this kernel's.
    let layout = match dat.uname().and_then(Layout::for_uname) {
        Some(l) => Some(l),
        None => {
            dat.parse_formats(|_| true);
            Layout::implied_by(dat.events())
        }
    };
    let clock = dat.clock().unwrap_or("local");
    let options = Options {
        columns: Columns {
            tgid: args.tgid,
            layout: layout.unwrap_or_default(),
            ..Columns::default()
        },
        ts_in_ns: dat.tsc2nsec().is_some() || text::clock_is_ns(clock),
        big_endian: dat.big_endian(),
        long_size: dat.long_size(),
        sym: tp_format::render::SymFlags { offset: args.sym_offset, addr: args.sym_addr },
    };
    let user_maps = args.sym_userobj.then(|| tp_format::symbols::UserMaps::new(dat.proc_maps()));
    let (formats, mut tables) = dat.take_render_tables();
    tables.user_maps = user_maps;
    Renderer::new(formats, tables, options)
}

/// Print the events of `buffers`: several (e.g. the kernel's and a program's own
/// tracepoints from `tp record`) are merged into one timeline, as trace-cmd report prints
/// them, named buffers' lines prefixed with `NAME: `; with `-B`, one. `counts` (each
/// buffer's events) when the header block is printed. Returns the exit status.
fn print_events(
    args: &Args,
    dat: &TraceDat<File>,
    buffers: &[usize],
    counts: Option<&[u64]>,
    renderer: &Renderer,
    wanted: &EventFilter,
) -> anyhow::Result<i32> {
    let mut out = Output::new();
    if let Some(counts) = counts {
        let entries: u64 = counts.iter().sum();
        let overrun: u64 =
            buffers.iter().map(|&b| stats_overrun(dat.cpustats(), &dat.buffers()[b].name)).sum();
        let ncpus = dat.cpu_count().map_or(dat.buffers()[buffers[0]].cpus.len(), |c| c as usize);
        text::write_header(
            &mut out.buf,
            entries,
            entries + overrun,
            ncpus,
            renderer.options.columns,
        );
    }
    // The workers own stdout while they run: what this thread has written goes first.
    out.flush()?;
    if let Some(&b) = buffers.iter().find(|&&b| dat.buffers()[b].kind == BufferKind::Latency) {
        // The reader's error: the buffer holds a latency tracer's text, not records.
        dat.records(b)?;
    }
    // Each page source is numbered; `places` says which buffer and CPU it is.
    let mut sources = Vec::new();
    let mut places = Vec::new();
    for (k, &b) in buffers.iter().enumerate() {
        for (i, c) in dat.buffers()[b].cpus.iter().enumerate() {
            sources.push((places.len() as u32, dat.page_source(b, i)?));
            places.push(Place { buffer: k as u16, cpu: c.cpu });
        }
    }
    let names: Vec<String> = match buffers {
        [_] => Vec::new(),
        _ => buffers.iter().map(|&b| dat.buffers()[b].name.clone()).collect(),
    };
    let records = tp_format::tracedat::Records::new(dat.layout(), sources);
    let errors =
        render_records(args, wanted, renderer, &names, &places, records, |ts| dat.adjust_ts(ts))?;
    out.flush()?;
    Ok(if errors > 0 { 1 } else { 0 })
}

/// `--stat`: per buffer, events per type and CPU and lost events. Returns the exit status.
fn print_stats(
    args: &Args,
    dat: &TraceDat<File>,
    buffers: &[usize],
    renderer: &Renderer,
    wanted: &EventFilter,
) -> anyhow::Result<i32> {
    let mut out = Output::new();
    let mut status = 0;
    for &b in buffers {
        if buffers.len() > 1 {
            out.buf.push_str(&format!("# buffer: {}\n", display_name(&dat.buffers()[b].name)));
        }
        let mut stat = Stat::default();
        let mut records = dat.records(b)?;
        while let Some(item) = records.next() {
            match item {
                Ok(Item::Event(r)) => {
                    if let Some(c) = select(args, wanted, renderer, r.cpu, r.data) {
                        stat.event(c.id, r.cpu, dat.adjust_ts(r.ts));
                    }
                }
                Ok(Item::Lost(l)) => {
                    if args.cpus.is_empty() || args.cpus.contains(&l.cpu) {
                        stat.lost(l.cpu, l.count);
                    }
                }
                Err(e) => {
                    out.flush()?;
                    eprintln!("tp: {}: {e}", args.input);
                    status = 1;
                }
            }
        }
        stat.print(&mut out.buf, renderer, &dat.buffers()[b].name, dat.cpustats());
    }
    out.flush()?;
    Ok(status)
}

/// Feed `records` through the render pipeline. A record's source number indexes `places`
/// (its buffer and CPU); `names` names the buffers of a merge (empty: one buffer, no
/// prefix). Returns how many errors were reported in the output.
fn render_records(
    args: &Args,
    wanted: &EventFilter,
    renderer: &Renderer,
    names: &[String],
    places: &[Place],
    mut records: tp_format::tracedat::Records<'_>,
    adjust_ts: impl Fn(u64) -> u64,
) -> anyhow::Result<usize> {
    let mode = match (args.json, args.raw) {
        (true, _) => Mode::Json,
        (_, true) => Mode::Raw,
        _ => Mode::Text,
    };
    let place = |source: u32| places[source as usize];
    let errors = pipeline::run(renderer, mode, &args.input, names, &args.sink, |feed| {
        // Function_graph calls are paired with their returns (per source) for the text
        // (`--raw` and JSON keep one record per line).
        let mut pairing = if mode == Mode::Text { Pairing::new(renderer) } else { None };
        let mut emit = |o: Out<'_, Aside>| match o {
            Out::Event { cpu, ts, data, graph: Graph::Plain } => feed.event(place(cpu), ts, data),
            Out::Event { cpu, ts, data, graph: Graph::Leaf(ret) } => {
                feed.graph_leaf(place(cpu), ts, data, ret)
            }
            Out::Event { cpu, ts, data, graph: Graph::Orphan } => {
                feed.graph_orphan(place(cpu), ts, data)
            }
            Out::Other(Aside::Lost { source, ts, count }) => feed.lost(place(source), ts, count),
            Out::Other(Aside::Error(m)) => feed.error(m),
        };
        let mut errors = 0;
        while let Some(item) = records.next() {
            match item {
                Ok(Item::Event(r)) => {
                    let Some(c) = select(args, wanted, renderer, place(r.cpu).cpu, r.data) else {
                        continue;
                    };
                    let ts = adjust_ts(r.ts);
                    match &mut pairing {
                        Some(p) => p.event(renderer, c.id, r.cpu, ts, r.data, &mut emit)?,
                        None => {
                            emit(Out::Event { cpu: r.cpu, ts, data: r.data, graph: Graph::Plain })?
                        }
                    }
                }
                Ok(Item::Lost(l)) => {
                    if args.cpus.is_empty() || args.cpus.contains(&place(l.cpu).cpu) {
                        let lost =
                            Aside::Lost { source: l.cpu, ts: adjust_ts(l.ts), count: l.count };
                        match &mut pairing {
                            Some(p) => p.other(Some(l.cpu), lost, &mut emit)?,
                            None => emit(Out::Other(lost))?,
                        }
                    }
                }
                Err(e) => {
                    let e = Aside::Error(e.to_string());
                    match &mut pairing {
                        Some(p) => p.other(None, e, &mut emit)?,
                        None => emit(Out::Other(e))?,
                    }
                    errors += 1;
                }
            }
        }
        if let Some(p) = &mut pairing {
            p.finish(&mut emit)?;
        }
        Ok(errors)
    })?;
    Ok(errors.unwrap_or(0))
}

/// What travels between records: lost events (of a page source) and decoding errors.
enum Aside {
    Lost { source: u32, ts: u64, count: Option<u64> },
    Error(String),
}

/// The common fields of a record that passes the CPU, event and pid filters.
fn select(
    args: &Args,
    wanted: &EventFilter,
    renderer: &Renderer,
    cpu: u32,
    data: &[u8],
) -> Option<Common> {
    if !args.cpus.is_empty() && !args.cpus.contains(&cpu) {
        return None;
    }
    let c = renderer.common(data)?;
    if !wanted.allows(c.id) || (!args.pids.is_empty() && !args.pids.contains(&c.pid)) {
        return None;
    }
    Some(c)
}

fn display_name(name: &str) -> &str {
    if name.is_empty() {
        "(top level)"
    } else {
        name
    }
}

/// Events overwritten in the buffer (`overrun:` summed over CPUs) per the CPU stats the
/// file saved for `buffer` (stats before the first `Buffer:` line are the top level's).
fn stats_overrun(cpustats: &str, buffer: &str) -> u64 {
    stats_of(cpustats, buffer)
        .iter()
        .filter_map(|l| l.strip_prefix("overrun:"))
        .map(|v| v.trim().parse::<u64>().unwrap_or(0))
        .sum()
}

/// The lines of `buffer`'s CPU stats (those before the first `Buffer:` line are the top
/// level's), each CPU's introduced by `CPU: N` (files that lack it get it by position: each
/// CPU's text starts with `entries:`).
fn stats_of(cpustats: &str, buffer: &str) -> Vec<String> {
    let mut in_buffer = buffer.is_empty();
    let mut lines = Vec::new();
    for line in cpustats.lines() {
        if let Some(name) = line.strip_prefix("Buffer: ") {
            in_buffer = name.trim() == buffer;
        } else if in_buffer && !line.trim().is_empty() {
            lines.push(line.to_string());
        }
    }
    if !lines.iter().any(|l| l.starts_with("CPU:")) {
        let mut cpu = 0;
        let mut labelled = Vec::new();
        for l in lines {
            if l.starts_with("entries:") {
                labelled.push(format!("CPU: {cpu}"));
                cpu += 1;
            }
            labelled.push(l);
        }
        lines = labelled;
    }
    lines
}

/// Whether a buffer is worth printing: it has an event, or an error to report (a damaged
/// buffer must say so, not give way to an empty one).
fn has_events_or_errors<R: std::io::Read + std::io::Seek>(
    dat: &TraceDat<R>,
    buffer: usize,
) -> anyhow::Result<bool> {
    let mut records = dat.records(buffer)?;
    while let Some(item) = records.next() {
        if matches!(item, Ok(Item::Event(_)) | Err(_)) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Event IDs selected by `-e` globs (all when none).
struct EventFilter {
    allowed: Option<Vec<bool>>,
}

impl EventFilter {
    fn new(globs: &[String], renderer: &Renderer) -> anyhow::Result<EventFilter> {
        if globs.is_empty() {
            return Ok(EventFilter { allowed: None });
        }
        let mut allowed = vec![false; u16::MAX as usize + 1];
        let formats: Vec<&tp_format::EventFormat> = renderer.formats().collect();
        for g in globs {
            let hit = select_events(formats.iter().copied(), g, |f| (&f.system, &f.name));
            if hit.is_empty() {
                anyhow::bail!("no event in the file matches {g:?}");
            }
            for f in hit.into_iter().filter(|f| f.id <= u16::MAX as u32) {
                allowed[f.id as usize] = true;
            }
        }
        Ok(EventFilter { allowed: Some(allowed) })
    }

    fn allows(&self, id: u16) -> bool {
        self.allowed.as_ref().is_none_or(|a| a[id as usize])
    }
}

/// `--stat` counters.
#[derive(Default)]
struct Stat {
    per_event: BTreeMap<u16, u64>,
    per_cpu: BTreeMap<u32, u64>,
    lost: BTreeMap<u32, (u64, u64)>,
    first: Option<u64>,
    last: u64,
    total: u64,
}

impl Stat {
    fn event(&mut self, id: u16, cpu: u32, ts: u64) {
        *self.per_event.entry(id).or_default() += 1;
        *self.per_cpu.entry(cpu).or_default() += 1;
        self.first = Some(self.first.map_or(ts, |f| f.min(ts)));
        self.last = self.last.max(ts);
        self.total += 1;
    }

    /// Lost events: (known count, reports without a count).
    fn lost(&mut self, cpu: u32, count: Option<u64>) {
        let e = self.lost.entry(cpu).or_default();
        match count {
            Some(n) => e.0 += n,
            None => e.1 += 1,
        }
    }

    fn print(&self, out: &mut String, r: &Renderer, buffer: &str, cpustats: &str) {
        use std::fmt::Write as _;
        let _ = writeln!(out, "buffer: {}", display_name(buffer));
        let _ = writeln!(out, "total events {}", self.total);
        if let Some(first) = self.first {
            let _ = writeln!(out, "time span {:.6} s", (self.last - first) as f64 / 1e9);
        }
        let _ = writeln!(out, "\nevents per type:");
        let mut by_count: Vec<_> = self.per_event.iter().collect();
        by_count.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        for (id, n) in by_count {
            let name = r
                .format(*id)
                .map(|f| format!("{}:{}", f.system, f.name))
                .unwrap_or_else(|| format!("[unknown id {id}]"));
            let _ = writeln!(out, "  {n:>10}  {name}");
        }
        let _ = writeln!(out, "\nevents per CPU:");
        for (cpu, n) in &self.per_cpu {
            let _ = writeln!(out, "  CPU{cpu:<3} {n:>10}");
        }
        let _ = writeln!(out, "\nlost events per CPU (from the pages' missed-events flags):");
        if self.lost.is_empty() {
            let _ = writeln!(out, "  none");
        }
        for (cpu, (n, unknown)) in &self.lost {
            let extra = if *unknown > 0 {
                format!(" (+{unknown} gaps of unknown size)")
            } else {
                String::new()
            };
            let _ = writeln!(out, "  CPU{cpu:<3} {n:>10}{extra}");
        }
        let stats = stats_of(cpustats, buffer);
        if !stats.is_empty() {
            let _ = writeln!(out, "\nCPU stats saved in the file:");
            for line in stats {
                let _ =
                    writeln!(out, "  {}{line}", if line.starts_with("CPU:") { "" } else { "  " });
            }
        }
    }
}

/// Buffered stdout; a closed pipe ends `tp report | head` quietly (see main.rs).
struct Output {
    buf: String,
    stdout: std::io::Stdout,
}

impl Output {
    fn new() -> Output {
        Output { buf: String::with_capacity(1 << 17), stdout: std::io::stdout() }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let mut lock = self.stdout.lock();
        lock.write_all(self.buf.as_bytes())?;
        lock.flush()?;
        self.buf.clear();
        Ok(())
    }
}
