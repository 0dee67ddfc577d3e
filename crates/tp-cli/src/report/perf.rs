//! `tp report -i perf.data`: perf's files (and tp's) on the same pipeline as trace.dat.
//!
//! - Tracepoint samples: their `PERF_SAMPLE_RAW` is the ftrace record, printed as the
//!   kernel's `trace` file prints it (the trace.dat renderer, the formats of the file's
//!   TRACING_DATA), with the sample's CPU and time, and the task's name at that time (from
//!   the file's COMM and FORK records, as perf script names it).
//! - Other samples: `perf script`'s default layout (`comm tid [cpu] time: period event:
//!   ip sym+off (dso)`).
//! - Callchains (`-g`): under the sample's line, one `\t    addr sym+off (dso)` line per
//!   frame and a blank line, as perf script prints them; symbols resolved now
//!   ([`tp_symbols`]), only for files whose samples have addresses.
//! - Lost records: `CPU:N [LOST M EVENTS]`, as trace.dat's lost pages; side records with
//!   `--show-task-events` / `--show-mmap-events`, in perf script's words.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use anyhow::Context as _;
use tp_format::glob::{select_events, system_and_name};
use tp_format::perfdata::attr::event_type;
use tp_format::perfdata::{sample, PerfData, Record, Sample};
use tp_format::render::{Options, Renderer, Tables};
use tp_format::text::{self, Columns, Layout};

use super::pipeline::{self, Feed, Mode, Place};
use super::{Args, Output};
use tp_symbols::{self as symbols, Frame, Symbols};

/// Per event (attr) of the file: what `-e` selected and how it prints.
pub struct Event {
    pub name: String,
    pub tracepoint: bool,
    pub wanted: bool,
}

pub fn run(args: &Args) -> anyhow::Result<i32> {
    let file =
        std::fs::File::open(&args.input).with_context(|| format!("cannot open {}", args.input))?;
    let mut data =
        PerfData::open_file(file).with_context(|| format!("cannot read {}", args.input))?;
    for w in &data.warnings {
        eprintln!("tp: {}: {w}", args.input);
    }
    let events = chosen_events(args, &data)?;
    let tracing = data.features.tracing.take().unwrap_or_default();
    for e in &tracing.format_errors {
        eprintln!("tp: {}: {e} (its events print as unknown)", args.input);
    }
    let options = Options {
        columns: Columns {
            // Lines as the recording kernel printed them (its release is a feature).
            layout: data
                .features
                .osrelease
                .as_deref()
                .and_then(Layout::for_uname)
                .unwrap_or_default(),
            ..Columns::default()
        },
        ts_in_ns: true,
        big_endian: tracing.big_endian,
        long_size: if tracing.long_size == 0 { 8 } else { tracing.long_size },
        sym: Default::default(),
    };
    // Names as the kernel's `trace` would give them: saved_cmdlines, then each task's last
    // name in the file. Samples taken under an earlier name get it from the producer.
    let mut tables: Tables = tracing.tables;
    last_comms(&data, &mut tables)?;
    let renderer = Renderer::new(tracing.events, tables, options);
    let mode = match (args.json, args.raw) {
        (true, _) => Mode::Json,
        (_, true) => Mode::Raw,
        _ => Mode::Text,
    };
    if args.stat {
        return stat(args, &data, &events);
    }
    if args.folded || args.flamegraph.is_some() || args.top {
        return folded(args, &data, &events);
    }
    let width = events.iter().map(|e| e.name.len()).max().unwrap_or(0);
    let syms = symbolizer(args, &data);
    let mut records = data.records(true)?;
    let mut p = Producer {
        syms,
        attrs: &data.attrs,
        frames: Vec::new(),
        args,
        events: &events,
        renderer: &renderer,
        comms: HashMap::new(),
        same_name: Default::default(),
        width,
        mode,
    };
    let errors = pipeline::run(&renderer, mode, &args.input, &[], &args.sink, |feed| {
        let mut errors = 0;
        while let Some(item) = records.next() {
            let item = match item {
                Ok(i) => i,
                Err(e) => {
                    feed.error(e.to_string())?;
                    errors += 1;
                    continue;
                }
            };
            match item.parse() {
                Ok(r) => p.record(feed, item.event, &r)?,
                Err(e) => {
                    feed.error(e.to_string())?;
                    errors += 1;
                }
            }
        }
        Ok(errors)
    })?;
    if let Some(s) = &p.syms {
        for n in &s.notes {
            eprintln!("tp: {n}");
        }
    }
    // The process ends now: freeing the symbol tables would only cost time.
    std::mem::forget(p.syms.take());
    std::mem::forget(renderer);
    Ok(if errors.unwrap_or(0) > 0 { 1 } else { 0 })
}

/// `--folded`, `--flamegraph SVG`, `--top`: the wanted samples' stacks summed
/// (`tp_analyze::folded`), weighing their period (1 per tracepoint sample, as perf script
/// prints no period for them).
fn folded<R: std::io::Read + std::io::Seek>(
    args: &Args,
    data: &PerfData<R>,
    events: &[Event],
) -> anyhow::Result<i32> {
    use tp_analyze::folded;
    let Some(mut syms) = symbolizer(args, data) else {
        anyhow::bail!("{}: its samples carry no addresses (record with -g for stacks)", args.input);
    };
    let keep = |e: usize, s: &Sample<'_>| {
        let cpu_ok = args.cpus.is_empty() || s.cpu.is_some_and(|c| args.cpus.contains(&c));
        let pid_ok = args.pids.is_empty()
            || [s.pid, s.tid].iter().flatten().any(|&p| args.pids.contains(&(p as i32)));
        events.get(e).is_some_and(|ev| ev.wanted) && cpu_ok && pid_ok
    };
    let weight =
        |e: usize, s: &Sample<'_>| if events[e].tracepoint { 1 } else { s.period.unwrap_or(1) };
    let f = folded::fold(data, &mut syms, keep, weight)?;
    let status = say_walk_errors(&args.input, &f.errors, &syms.notes);
    if let Some(svg) = &args.flamegraph {
        if f.lines.is_empty() {
            anyhow::bail!("{}: no sample with a stack to draw", args.input);
        }
        let (file, pending) = crate::outfile::create(std::path::Path::new(svg))?;
        let mut w = std::io::BufWriter::new(file);
        folded::flamegraph(&f.lines, &format!("tp report -i {}", args.input), &mut w)
            .with_context(|| format!("cannot write the flame graph to {svg}"))?;
        std::io::Write::flush(&mut w).with_context(|| format!("cannot write {svg}"))?;
        drop(w);
        pending.commit()?;
        let (samples, stacks) = (f.samples, f.lines.len());
        eprintln!("tp: {svg}: flame graph of {samples} samples ({stacks} distinct stacks)");
        return Ok(status);
    }
    let mut out = Output::new();
    if args.top {
        folded::write_top(&mut out.buf, &f.lines);
    } else {
        for (s, n) in &f.lines {
            let _ = writeln!(out.buf, "{s} {n}");
            if out.buf.len() > 1 << 16 {
                out.flush()?;
            }
        }
    }
    out.flush()?;
    Ok(status)
}

/// Print what a [`tp_symbols::walk`] could not read and the symbolizer's notes; the status:
/// 1 when a record could not be read.
pub fn say_walk_errors(
    input: &str,
    errors: &[tp_format::perfdata::Error],
    notes: &[String],
) -> i32 {
    for e in errors {
        eprintln!("tp: {input}: {e}");
    }
    for n in notes {
        eprintln!("tp: {n}");
    }
    i32::from(!errors.is_empty())
}

/// A symbolizer when some wanted event's samples carry addresses to name: a callchain, or
/// the IP of a non-tracepoint event (tracepoint lines print no IP).
pub fn symbolizer<R>(args: &Args, data: &PerfData<R>) -> Option<Symbols> {
    let needs = data.attrs.iter().any(|a| {
        let t = a.attr.sample_type;
        t & (sample::CALLCHAIN | sample::STACK_USER) != 0
            || (a.attr.type_ != event_type::TRACEPOINT && t & sample::IP != 0)
    });
    needs.then(|| {
        Symbols::new(
            &data.attrs,
            &data.features,
            symbols::Options { srcline: args.srcline, inline: !args.no_inline },
        )
    })
}

/// A stack's frames as perf script prints them under a sample: `\t%16x sym+off (dso)`,
/// `\t%16x name+off (inlined)` lines for the functions DWARF places there (innermost
/// first), `  file:line` after a frame with `--srcline` (each frame's lines made once).
pub fn write_frames(out: &mut String, frames: &[Frame]) {
    for f in frames {
        if f.sym.lines.is_empty() {
            f.sym.write_lines(out, f.addr);
        } else {
            out.push_str(&f.sym.lines);
        }
    }
}

/// The stack as a JSON array: the address (`ip`) and as perf prints it (`addr`: in the
/// file for user code), symbol (null when unknown), offset, dso; `srcline` and `inlined`
/// when asked for.
pub fn json_frames(out: &mut String, frames: &[Frame]) {
    out.push('[');
    for (i, f) in frames.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{{\"ip\":{},\"addr\":{},\"symbol\":", f.ip, f.addr);
        match &f.sym.name {
            Some(n) => tp_format::render::push_json_str(out, n),
            None => out.push_str("null"),
        }
        let _ = write!(out, ",\"offset\":{},\"dso\":", f.sym.offset);
        tp_format::render::push_json_str(out, &f.sym.dso);
        if let Some(l) = &f.sym.srcline {
            out.push_str(",\"srcline\":");
            tp_format::render::push_json_str(out, l);
        }
        if !f.sym.inlined.is_empty() {
            out.push_str(",\"inlined\":[");
            for (j, n) in f.sym.inlined.iter().enumerate() {
                if j > 0 {
                    out.push(',');
                }
                tp_format::render::push_json_str(out, n);
            }
            out.push(']');
        }
        out.push('}');
    }
    out.push(']');
}

/// Each event's name and whether `-e` wants it.
fn chosen_events<R>(args: &Args, data: &PerfData<R>) -> anyhow::Result<Vec<Event>> {
    let mut events: Vec<Event> =
        data.attrs
            .iter()
            .map(|a| Event {
                name: a.name.clone().unwrap_or_else(|| {
                    format!("type {} config {:#x}", a.attr.type_, a.attr.config)
                }),
                tracepoint: a.attr.type_ == event_type::TRACEPOINT,
                wanted: args.events.is_empty(),
            })
            .collect();
    for g in &args.events {
        let hit: Vec<usize> = select_events(&events, g, |e| system_and_name(&e.name))
            .into_iter()
            .map(|e| events.iter().position(|x| std::ptr::eq(x, e)).expect("one of them"))
            .collect();
        if hit.is_empty() {
            let names: Vec<&str> = events.iter().map(|e| e.name.as_str()).collect();
            anyhow::bail!("no event in the file matches {g:?} (it has {})", names.join(", "));
        }
        for i in hit {
            events[i].wanted = true;
        }
    }
    Ok(events)
}

/// Each task's last name (COMM records, in file order) into `tables`.
fn last_comms<R: std::io::Read + std::io::Seek>(
    data: &PerfData<R>,
    tables: &mut Tables,
) -> anyhow::Result<()> {
    let mut records = data.records(false)?;
    while let Some(raw) = records.next_raw() {
        let Ok(raw) = raw else { break }; // the main pass reports it
        if raw.kind == tp_format::perfdata::kind::COMM {
            if let Ok(Record::Comm { tid, comm, .. }) = raw.parse(None) {
                tables.cmdlines.insert(tid as i32, comm);
            }
        }
    }
    Ok(())
}

struct Producer<'a> {
    /// Symbols, when samples carry addresses ([`symbolizer`]).
    syms: Option<Symbols>,
    /// The file's events (a stack copy is unwound with its attr's registers).
    attrs: &'a [tp_format::perfdata::Attr],
    /// The current sample's stack (reused).
    frames: Vec<Frame>,
    args: &'a Args,
    events: &'a [Event],
    renderer: &'a Renderer,
    /// Each task's name at this point of the file (tid -> comm).
    comms: HashMap<u32, String>,
    /// The last task whose name here is the renderer's (reset when a name changes).
    same_name: std::cell::Cell<Option<i32>>,
    /// Width of the event name column (perf script pads names to the longest).
    width: usize,
    mode: Mode,
}

impl Producer<'_> {
    fn cpu_ok(&self, cpu: Option<u32>) -> bool {
        self.args.cpus.is_empty() || cpu.is_some_and(|c| self.args.cpus.contains(&c))
    }

    fn pid_ok(&self, pid: Option<u32>, tid: Option<u32>) -> bool {
        let has = |v: Option<u32>| v.is_some_and(|v| self.args.pids.contains(&(v as i32)));
        self.args.pids.is_empty() || has(pid) || has(tid)
    }

    /// The name of task `tid` now: from the file's records, else the renderer's table.
    fn comm(&self, tid: u32) -> &str {
        match self.comms.get(&tid) {
            Some(c) => c,
            None => self.renderer.tables.cmdlines.comm(tid as i32),
        }
    }

    /// A sample of event `attr`, as a tracepoint's line or perf script's, with its stack.
    fn sample(
        &mut self,
        feed: &mut Feed<'_>,
        attr: Option<usize>,
        s: &Sample<'_>,
    ) -> Result<(), pipeline::Closed> {
        let Some(ev) = attr.and_then(|i| self.events.get(i)) else { return Ok(()) };
        let attr = attr.and_then(|i| self.attrs.get(i));
        if !ev.wanted || !self.cpu_ok(s.cpu) || !self.pid_ok(s.pid, s.tid) {
            return Ok(());
        }
        let mut frames = std::mem::take(&mut self.frames);
        frames.clear();
        if let Some(syms) = &mut self.syms {
            // A tracepoint's line has no IP: only a stack is printed.
            if !ev.tracepoint || s.callchain.is_some() || s.stack_user.is_some() {
                syms.stack(attr, s, &mut frames);
            }
        }
        let done = match (ev.tracepoint, s.raw) {
            (true, Some(raw)) => self.tracepoint(feed, s, raw, &frames),
            _ => {
                let line = self.sample_line(s, &ev.name, &frames);
                feed.text(s.time.unwrap_or(0), line)
            }
        };
        self.frames = frames;
        done
    }

    fn record(
        &mut self,
        feed: &mut Feed<'_>,
        attr: Option<usize>,
        r: &Record<'_>,
    ) -> Result<(), pipeline::Closed> {
        let args = self.args;
        if !matches!(r, Record::Sample(_)) {
            if let Some(syms) = &mut self.syms {
                syms.note(r);
            }
        }
        match *r {
            Record::Sample(ref s) => self.sample(feed, attr, s),
            Record::Comm { pid, tid, comm, exec, id } => {
                self.comms.insert(tid, comm.to_string());
                self.same_name.set(None);
                if args.show_task_events && self.cpu_ok(id.cpu) && self.pid_ok(Some(pid), Some(tid))
                {
                    let what = format!(
                        "PERF_RECORD_COMM{}: {comm}:{pid}/{tid}",
                        if exec { " exec" } else { "" }
                    );
                    let line = self.side_line(tid, id.cpu, id.time, &what);
                    feed.text(id.time.unwrap_or(0), line)?;
                }
                Ok(())
            }
            Record::Fork(t, id) | Record::Exit(t, id) => {
                let fork = matches!(r, Record::Fork(..));
                if fork {
                    if let Some(c) = self.comms.get(&t.ptid).cloned() {
                        self.comms.insert(t.tid, c);
                        self.same_name.set(None);
                    }
                }
                if args.show_task_events
                    && self.cpu_ok(id.cpu)
                    && self.pid_ok(Some(t.pid), Some(t.tid))
                {
                    let what = format!(
                        "PERF_RECORD_{}({}:{}):({}:{})",
                        if fork { "FORK" } else { "EXIT" },
                        t.pid,
                        t.tid,
                        t.ppid,
                        t.ptid
                    );
                    let time = id.time.unwrap_or(t.time);
                    let line = self.side_line(t.tid, id.cpu, Some(time), &what);
                    feed.text(time, line)?;
                }
                Ok(())
            }
            Record::Mmap(ref m, id) | Record::Mmap2(ref m, id) => {
                if !args.show_mmap_events
                    || !self.cpu_ok(id.cpu)
                    || !self.pid_ok(Some(m.pid), Some(m.tid))
                {
                    return Ok(());
                }
                let what = mmap_text(m);
                let line = self.side_line(m.tid, id.cpu, id.time, &what);
                feed.text(id.time.unwrap_or(0), line)
            }
            Record::Lost { lost, id, .. } | Record::LostSamples { lost, id } => {
                if self.cpu_ok(id.cpu) {
                    feed.lost(Place::cpu(id.cpu.unwrap_or(0)), id.time.unwrap_or(0), Some(lost))?;
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// A tracepoint sample: the kernel's line for its record; rendered here when the task
    /// had another name then than the renderer's table gives it.
    fn tracepoint(
        &self,
        feed: &mut Feed<'_>,
        s: &Sample<'_>,
        raw: &[u8],
        frames: &[Frame],
    ) -> Result<(), pipeline::Closed> {
        if (s.callchain.is_some() || s.stack_user.is_some()) && self.syms.is_some() {
            return self.tracepoint_with_stack(feed, s, raw, frames);
        }
        let cpu = s.cpu.unwrap_or(0);
        let ts = s.time.unwrap_or(0);
        let Some(c) = self.renderer.common(raw) else {
            return feed.event(Place::cpu(cpu), ts, raw);
        };
        // Most samples come from the task of the one before, named as the table names it.
        if self.same_name.get() == Some(c.pid) {
            return feed.event(Place::cpu(cpu), ts, raw);
        }
        let then = self.comms.get(&(c.pid as u32)).map(String::as_str);
        let table = self.renderer.tables.cmdlines.known(c.pid);
        match then {
            Some(name) if self.mode != Mode::Json && table != Some(name) => {
                let mut out = String::new();
                self.kernel_line(&mut out, name, &c, cpu, ts, raw);
                feed.text(ts, out)
            }
            _ => {
                self.same_name.set(Some(c.pid));
                feed.event(Place::cpu(cpu), ts, raw)
            }
        }
    }

    /// A tracepoint sample with its callchain: the kernel's line (the task's name then),
    /// the frames and a blank line, as perf script prints a sample with a stack; in JSON
    /// the object with a `"stack"` member.
    fn tracepoint_with_stack(
        &self,
        feed: &mut Feed<'_>,
        s: &Sample<'_>,
        raw: &[u8],
        frames: &[Frame],
    ) -> Result<(), pipeline::Closed> {
        let cpu = s.cpu.unwrap_or(0);
        let ts = s.time.unwrap_or(0);
        let mut out = String::new();
        if self.mode == Mode::Json {
            self.renderer.render_json(cpu, ts, raw, &mut out);
            out.pop();
            out.push_str(",\"stack\":");
            json_frames(&mut out, frames);
            out.push_str("}\n");
            return feed.text(ts, out);
        }
        match self.renderer.common(raw) {
            Some(c) => {
                let name = match self.comms.get(&(c.pid as u32)) {
                    Some(n) => n.as_str(),
                    None => self.renderer.tables.cmdlines.comm(c.pid),
                };
                self.kernel_line(&mut out, name, &c, cpu, ts, raw);
            }
            None => {
                // Not a record the renderer knows: its line from the pipeline, then the stack.
                feed.event(Place::cpu(cpu), ts, raw)?;
            }
        }
        write_frames(&mut out, frames);
        out.push('\n');
        feed.text(ts, out)
    }

    /// `comm tid [cpu] time: ` as perf script starts its lines (the name unpadded before a
    /// stack).
    /// A tracepoint sample's line as the kernel's `trace` file prints its raw record, under
    /// the task name `comm` (the name at the time, as perf script gives it).
    fn kernel_line(
        &self,
        out: &mut String,
        comm: &str,
        c: &tp_format::render::Common,
        cpu: u32,
        ts: u64,
        raw: &[u8],
    ) {
        let ctx = text::Context {
            comm,
            pid: c.pid,
            tgid: None,
            cpu,
            flags: c.flags,
            preempt_count: c.preempt_count,
            ts,
        };
        text::write_context(out, &ctx, self.renderer.options.columns, true);
        if self.mode == Mode::Raw {
            self.renderer.render_raw(raw, out);
        } else {
            self.renderer.render_text(raw, out);
        }
        out.push('\n');
    }

    fn head(&self, out: &mut String, tid: u32, cpu: Option<u32>, time: Option<u64>, pad: bool) {
        if pad {
            let _ = write!(out, "{:>16} {tid:>5} ", self.comm(tid));
        } else {
            let _ = write!(out, "{} {tid:>5} ", self.comm(tid));
        }
        if let Some(c) = cpu {
            let _ = write!(out, "[{c:03}] ");
        }
        let t = time.unwrap_or(0);
        let _ = write!(out, "{:>5}.{:06}: ", t / 1_000_000_000, t % 1_000_000_000 / 1000);
    }

    fn side_line(&self, tid: u32, cpu: Option<u32>, time: Option<u64>, what: &str) -> String {
        if self.mode == Mode::Json {
            let mut out = String::from("{\"record\":");
            tp_format::render::push_json_str(&mut out, what);
            let _ = writeln!(
                out,
                ",\"tid\":{tid},\"cpu\":{},\"ts\":{}}}",
                json_opt(cpu),
                json_opt(time)
            );
            return out;
        }
        let mut out = String::new();
        self.head(&mut out, tid, cpu, time, true);
        out.push_str(what);
        out.push('\n');
        out
    }

    /// A sample of a non-tracepoint event, as perf script prints it.
    fn sample_line(&self, s: &Sample<'_>, name: &str, frames: &[Frame]) -> String {
        let tid = s.tid.or(s.pid).unwrap_or(0);
        if self.mode == Mode::Json {
            let mut out = String::new();
            let _ = write!(
                out,
                "{{\"ts\":{},\"cpu\":{},\"pid\":{},\"tid\":{},\"comm\":",
                json_opt(s.time),
                json_opt(s.cpu),
                json_opt(s.pid),
                json_opt(s.tid)
            );
            tp_format::render::push_json_str(&mut out, self.comm(tid));
            out.push_str(",\"event\":");
            tp_format::render::push_json_str(&mut out, name);
            let _ = write!(out, ",\"period\":{},\"ip\":{}", json_opt(s.period), json_opt(s.ip));
            if let Some(a) = s.addr {
                let _ = write!(out, ",\"addr\":{a}");
            }
            if s.callchain.is_some() {
                let chain: Vec<String> = s.callchain().map(|a| a.to_string()).collect();
                let _ = write!(out, ",\"callchain\":[{}]", chain.join(","));
            }
            if self.syms.is_some() {
                out.push_str(",\"stack\":");
                json_frames(&mut out, frames);
            }
            out.push_str("}\n");
            return out;
        }
        let mut out = String::new();
        let stack = (s.callchain.is_some() || s.stack_user.is_some()) && self.syms.is_some();
        self.head(&mut out, tid, s.cpu, s.time, !stack);
        if let Some(p) = s.period {
            let _ = write!(out, "{p:>10} ");
        }
        let _ = write!(out, "{name:>w$}: ", w = self.width);
        if stack {
            if let Some(a) = s.addr {
                let _ = write!(out, " addr {a:x}");
            }
            out.push('\n');
            write_frames(&mut out, frames);
            out.push('\n');
            return out;
        }
        if let Some(ip) = s.ip {
            let _ = write!(out, " {ip:>16x}");
            if let Some(f) = frames.first() {
                out.push(' ');
                f.sym.symbol(&mut out);
                let _ = write!(out, " ({})", f.sym.dso);
            }
        }
        if let Some(a) = s.addr {
            let _ = write!(out, " addr {a:x}");
        }
        for a in s.callchain() {
            let _ = write!(out, "\n\t{a:>16x}");
        }
        out.push('\n');
        out
    }
}

/// perf's `%#lx`: `0` for zero, else `0x...`.
/// A MMAP or MMAP2 record in perf script's words (`--show-mmap-events`).
fn mmap_text(m: &tp_format::perfdata::record::Mmap<'_>) -> String {
    let pid = m.pid as i32;
    match m.file {
        Some(f) => {
            let dev = match f {
                tp_format::perfdata::record::MmapFile::Inode { maj, min, ino, ino_generation } => {
                    format!("{maj:02x}:{min:02x} {ino} {ino_generation}")
                }
                tp_format::perfdata::record::MmapFile::BuildId(b) => {
                    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
                    format!("buildid {hex}")
                }
            };
            let prot = |bit: u32, c: char| if m.prot & bit != 0 { c } else { '-' };
            format!(
                "PERF_RECORD_MMAP2 {pid}/{}: [{}({}) @ {} {dev}]: {}{}{}{} {}",
                m.tid,
                hex(m.addr),
                hex(m.len),
                hex(m.pgoff),
                prot(1, 'r'),
                prot(2, 'w'),
                prot(4, 'x'),
                if m.flags & 1 != 0 { 's' } else { 'p' },
                m.filename
            )
        }
        None => format!(
            "PERF_RECORD_MMAP {pid}/{}: [{}({}) @ {}]: x {}",
            m.tid,
            hex(m.addr),
            hex(m.len),
            hex(m.pgoff),
            m.filename
        ),
    }
}

fn hex(v: u64) -> String {
    if v == 0 {
        "0".into()
    } else {
        format!("{v:#x}")
    }
}

fn json_opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "null".into())
}

/// `--stat`: samples per event and CPU, lost per CPU, time span.
fn stat<R: std::io::Read + std::io::Seek>(
    args: &Args,
    data: &PerfData<R>,
    events: &[Event],
) -> anyhow::Result<i32> {
    let mut per_event = vec![0u64; events.len()];
    let mut per_cpu: BTreeMap<Option<u32>, u64> = BTreeMap::new();
    let mut lost: BTreeMap<Option<u32>, u64> = BTreeMap::new();
    let mut side: BTreeMap<&'static str, u64> = BTreeMap::new();
    let (mut first, mut last, mut total) = (None::<u64>, 0u64, 0u64);
    let mut status = 0;
    let mut records = data.records(false)?;
    let mut out = Output::new();
    while let Some(item) = records.next() {
        let item = match item {
            Ok(i) => i,
            Err(e) => {
                out.flush()?;
                eprintln!("tp: {}: {e}", args.input);
                status = 1;
                continue;
            }
        };
        let index = item.event;
        let cpu_ok =
            |c: Option<u32>| args.cpus.is_empty() || c.is_some_and(|c| args.cpus.contains(&c));
        match item.parse() {
            Ok(Record::Sample(s)) => {
                let Some(i) = index.filter(|&i| events[i].wanted) else { continue };
                let pid_ok = args.pids.is_empty()
                    || [s.pid, s.tid].iter().flatten().any(|&p| args.pids.contains(&(p as i32)));
                if !cpu_ok(s.cpu) || !pid_ok {
                    continue;
                }
                per_event[i] += 1;
                *per_cpu.entry(s.cpu).or_default() += 1;
                total += 1;
                if let Some(t) = s.time {
                    first = Some(first.map_or(t, |f| f.min(t)));
                    last = last.max(t);
                }
            }
            Ok(Record::Lost { lost: n, id, .. } | Record::LostSamples { lost: n, id }) => {
                if cpu_ok(id.cpu) {
                    *lost.entry(id.cpu).or_default() += n;
                }
            }
            Ok(_) => *side.entry(tp_format::perfdata::kind::name(item.raw.kind)).or_default() += 1,
            Err(e) => {
                out.flush()?;
                eprintln!("tp: {}: {e}", args.input);
                status = 1;
            }
        }
    }
    let o = &mut out.buf;
    let cpu_name = |c: &Option<u32>| c.map_or("CPU?".to_string(), |c| format!("CPU{c:<3}"));
    let _ = writeln!(
        o,
        "file: {} (perf.data{})",
        args.input,
        if data.pipe { ", pipe mode" } else { "" }
    );
    let _ = writeln!(o, "total samples {total}");
    if let Some(f) = first {
        let _ = writeln!(o, "time span {:.6} s", (last - f) as f64 / 1e9);
    }
    let _ = writeln!(o, "\nsamples per event:");
    let mut by_count: Vec<(u64, &str)> = per_event
        .iter()
        .zip(events)
        .filter(|(_, e)| e.wanted)
        .map(|(n, e)| (*n, e.name.as_str()))
        .collect();
    by_count.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
    for (n, name) in by_count {
        let _ = writeln!(o, "  {n:>10}  {name}");
    }
    let _ = writeln!(o, "\nsamples per CPU:");
    for (cpu, n) in &per_cpu {
        let _ = writeln!(o, "  {} {n:>10}", cpu_name(cpu));
    }
    let _ = writeln!(o, "\nlost samples per CPU (LOST and LOST_SAMPLES records):");
    if lost.is_empty() {
        let _ = writeln!(o, "  none");
    }
    for (cpu, n) in &lost {
        let _ = writeln!(o, "  {} {n:>10}", cpu_name(cpu));
    }
    let _ = writeln!(o, "\nother records:");
    for (k, n) in &side {
        let _ = writeln!(o, "  {n:>10}  {k}");
    }
    out.flush()?;
    Ok(status)
}
