//! The merged timeline an analysis reads: every flyrecord buffer of a trace.dat (the
//! kernel's and each Rust program's), all CPUs merged by time with the same merger `tp
//! report` uses ([`Records`]), timestamps adjusted as `tp report` prints them, cut to the
//! `--from/--to` window. What the window lost (the pages' missed-events flags) and decoding
//! errors are counted in [`Coverage`] and handed to the analysis, which drops what was in
//! flight on that CPU rather than pairing across a gap.
//!
//! Streaming: memory is the merger's few pages per CPU, whatever the file's size. On a
//! terminal a progress bar shows the share of the file read (quiet otherwise).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs::File;
use std::io::IsTerminal;
use std::path::Path;

use anyhow::Context;
use tp_format::format::{EventFormat, Field};
use tp_format::symbols::Cmdlines;
use tp_format::tracedat::{BufferKind, Error, Item, PageSource, Records, TraceDat};

use super::{Select, TimeArg};

/// A merged record's CPU number carries its buffer's index in the bits above these (as in
/// `tp report`'s merge of several buffers).
pub const CPU_BITS: u32 = 24;
const CPU_MASK: u32 = (1 << CPU_BITS) - 1;

/// Files smaller than this get no progress bar: they take well under a second (compressed,
/// 4 MiB is about a million events).
const PROGRESS_MIN_BYTES: u64 = 4 << 20;

/// One event of the window.
#[derive(Debug, Clone, Copy)]
pub struct Event<'a> {
    /// Index into [`Timeline::buffers`].
    pub buffer: usize,
    /// The CPU (for a Rust program's buffer: its thread's stream).
    pub cpu: u32,
    /// Nanoseconds (when the clock counts them; see [`Timeline::ts_in_ns`]).
    pub ts: u64,
    pub id: u16,
    pub pid: i32,
    /// The record, from `common_type` on.
    pub data: &'a [u8],
}

/// What the merged stream yields to an analysis.
#[derive(Debug, Clone, Copy)]
pub enum Ev<'a> {
    Event(Event<'a>),
    /// Events lost on `cpu` of `buffer` (just before that CPU's next event).
    Lost {
        buffer: usize,
        cpu: u32,
    },
}

/// What the analysis saw of the file and what it could not see.
#[derive(Debug, Default, Clone)]
pub struct Coverage {
    /// Events in the window (of every type).
    pub events: u64,
    /// First and last event time in the window.
    pub first: Option<u64>,
    pub last: u64,
    /// Lost events in the window per (buffer, CPU): (known count, gaps of unknown size).
    pub lost: BTreeMap<(usize, u32), (u64, u64)>,
    /// Decoding errors (each also ends what was in flight on its CPU).
    pub errors: Vec<String>,
}

impl Coverage {
    pub fn lost_total(&self) -> (u64, u64) {
        self.lost.values().fold((0, 0), |(a, b), (c, d)| (a + c, b + d))
    }
}

/// An opened trace.dat with its formats.
pub struct Timeline {
    dat: TraceDat<File>,
    input: String,
    /// Event ID -> index into the file's formats.
    by_id: Vec<u32>,
    /// Flyrecord buffers: (index in the file, name; "" for the top level).
    pub buffers: Vec<(usize, String)>,
    pub cmdlines: Cmdlines,
    /// Timestamps count nanoseconds (otherwise: the clock's own units).
    pub ts_in_ns: bool,
    pub clock: String,
    pub big_endian: bool,
}

impl Timeline {
    pub fn open(path: &Path) -> anyhow::Result<Timeline> {
        let input = path.display().to_string();
        let file = File::open(path).with_context(|| format!("cannot open {input}"))?;
        let dat = TraceDat::open_file(file).with_context(|| format!("cannot read {input}"))?;
        for e in dat.format_errors() {
            eprintln!("tp: {input}: {e} (its events are left out)");
        }
        let mut by_id = vec![u32::MAX; u16::MAX as usize + 1];
        for (i, f) in dat.events().iter().enumerate() {
            if let Ok(id) = u16::try_from(f.id) {
                by_id[id as usize] = i as u32;
            }
        }
        let buffers = dat
            .buffers()
            .iter()
            .enumerate()
            .filter(|(_, b)| b.kind == BufferKind::Flyrecord)
            .map(|(i, b)| (i, b.name.clone()))
            .collect();
        let clock = dat.clock().unwrap_or("local").to_string();
        let ts_in_ns = dat.tsc2nsec().is_some() || tp_format::text::clock_is_ns(&clock);
        let cmdlines = dat.cmdlines().clone();
        let big_endian = dat.big_endian();
        Ok(Timeline { dat, input, by_id, buffers, cmdlines, ts_in_ns, clock, big_endian })
    }

    pub fn input(&self) -> &str {
        &self.input
    }

    /// The format of `system:name`, if the file has it.
    pub fn event(&self, system: &str, name: &str) -> Option<&EventFormat> {
        self.dat.events().iter().find(|f| f.system == system && f.name == name)
    }

    /// The format of event `id`.
    pub fn format_of(&self, id: u16) -> Option<&EventFormat> {
        self.dat.events().get(*self.by_id.get(id as usize)? as usize)
    }

    pub fn formats(&self) -> &[EventFormat] {
        self.dat.events()
    }

    pub fn kallsyms(&self) -> &tp_format::symbols::Kallsyms {
        self.dat.kallsyms()
    }

    /// A task's name from the file's saved cmdlines (`<...>` when unknown).
    pub fn comm(&self, pid: i32) -> &str {
        self.cmdlines.comm(pid)
    }

    /// Feed the window's events and lost-event markers to `sink`, in time order.
    pub fn run(&self, select: &Select, mut sink: impl FnMut(Ev<'_>)) -> anyhow::Result<Coverage> {
        let mut sources: Vec<(u32, Box<dyn PageSource + '_>)> = Vec::new();
        let mut total = 0;
        let bar = progress_bar(self.dat.file_len());
        for (k, (b, _)) in self.buffers.iter().enumerate() {
            for (i, c) in self.dat.buffers()[*b].cpus.iter().enumerate() {
                let id = ((k as u32) << CPU_BITS) | c.cpu;
                let inner = self.dat.page_source(*b, i)?;
                total += c.size;
                let src = Progress { inner, start: c.offset, last: c.offset, bar: bar.clone() };
                sources.push((id, Box::new(src)));
            }
        }
        bar.set_length(total.max(1));
        let mut records = Records::new(self.dat.layout(), sources);
        let mut cov = Coverage::default();
        let mut window: Option<(u64, u64)> = None;
        let be = self.big_endian;
        while let Some(item) = records.next() {
            match item {
                Ok(Item::Event(r)) => {
                    let ts = self.dat.adjust_ts(r.ts);
                    let (from, to) = *window.get_or_insert_with(|| resolve(select, ts));
                    if ts < from || ts > to || r.data.len() < 8 {
                        continue;
                    }
                    let d = r.data;
                    let id = if be {
                        u16::from_be_bytes([d[0], d[1]])
                    } else {
                        u16::from_le_bytes([d[0], d[1]])
                    };
                    let p = [d[4], d[5], d[6], d[7]];
                    let pid = if be { i32::from_be_bytes(p) } else { i32::from_le_bytes(p) };
                    cov.events += 1;
                    cov.first.get_or_insert(ts);
                    cov.last = ts;
                    let (buffer, cpu) = ((r.cpu >> CPU_BITS) as usize, r.cpu & CPU_MASK);
                    sink(Ev::Event(Event { buffer, cpu, ts, id, pid, data: d }));
                }
                Ok(Item::Lost(l)) => {
                    let ts = self.dat.adjust_ts(l.ts);
                    if let Some((from, to)) = window {
                        if ts < from || ts > to {
                            continue;
                        }
                    }
                    let (buffer, cpu) = ((l.cpu >> CPU_BITS) as usize, l.cpu & CPU_MASK);
                    let e = cov.lost.entry((buffer, cpu)).or_default();
                    match l.count {
                        Some(n) => e.0 += n,
                        None => e.1 += 1,
                    }
                    sink(Ev::Lost { buffer, cpu });
                }
                Err(e) => {
                    // A malformed page: what it held is unknown, like lost events.
                    let cpu = match &e.kind {
                        tp_format::tracedat::ErrorKind::Page { cpu, .. } => Some(*cpu),
                        _ => None,
                    };
                    if let Some(cpu) = cpu {
                        let (buffer, cpu) = ((cpu >> CPU_BITS) as usize, cpu & CPU_MASK);
                        sink(Ev::Lost { buffer, cpu });
                    }
                    cov.errors.push(message(&self.input, &e));
                }
            }
        }
        bar.finish_and_clear();
        Ok(cov)
    }

    /// The lines every analysis ends with: window, lost events, errors, missing events.
    pub fn write_coverage(&self, out: &mut String, cov: &Coverage, missing: &[String]) {
        let _ = writeln!(out);
        match cov.first {
            Some(first) => {
                let _ = writeln!(
                    out,
                    "window: {} .. {} ({} events of every type)",
                    super::secs(first),
                    super::secs(cov.last),
                    cov.events
                );
            }
            None => {
                let _ = writeln!(out, "window: no events");
            }
        }
        if !self.ts_in_ns {
            let _ = writeln!(
                out,
                "note: clock {:?} does not count ns; times are in its units",
                self.clock
            );
        }
        let (lost, gaps) = cov.lost_total();
        if lost > 0 || gaps > 0 {
            let per: Vec<String> = cov
                .lost
                .iter()
                .map(|((b, cpu), (n, g))| {
                    let name = &self.buffers[*b].1;
                    let at = if name.is_empty() {
                        format!("CPU{cpu}")
                    } else {
                        format!("{name} stream {cpu}")
                    };
                    if *g > 0 {
                        format!("{at}: {n} (+{g} gaps of unknown size)")
                    } else {
                        format!("{at}: {n}")
                    }
                })
                .collect();
            let _ = writeln!(
                out,
                "LOST events in the window: {lost}{} ({}); what was in flight on those CPUs is left out",
                if gaps > 0 { format!(" + {gaps} gaps of unknown size") } else { String::new() },
                per.join(", ")
            );
        } else {
            let _ = writeln!(out, "lost events in the window: none");
        }
        for m in missing {
            let _ = writeln!(out, "not recorded: {m}");
        }
        for e in &cov.errors {
            let _ = writeln!(out, "error: {e}");
        }
    }

    /// The same as JSON members (`"window":...,"lost":...,"not_recorded":[...],"errors":[...]`).
    pub fn json_coverage(&self, out: &mut String, cov: &Coverage, missing: &[String]) {
        let _ = write!(
            out,
            "\"window\":{{\"first_ns\":{},\"last_ns\":{},\"events\":{}}},\"ts_in_ns\":{},",
            cov.first.map_or("null".into(), |f| f.to_string()),
            if cov.first.is_some() { cov.last.to_string() } else { "null".into() },
            cov.events,
            self.ts_in_ns
        );
        let (lost, gaps) = cov.lost_total();
        let _ = write!(out, "\"lost\":{{\"events\":{lost},\"unknown_gaps\":{gaps},\"per_cpu\":[");
        for (i, ((b, cpu), (n, g))) in cov.lost.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str("{\"buffer\":");
            super::json_str(out, &self.buffers[*b].1);
            let _ = write!(out, ",\"cpu\":{cpu},\"events\":{n},\"unknown_gaps\":{g}}}");
        }
        out.push_str("]},\"not_recorded\":[");
        for (i, m) in missing.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            super::json_str(out, m);
        }
        out.push_str("],\"errors\":[");
        for (i, e) in cov.errors.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            super::json_str(out, e);
        }
        out.push(']');
    }
}

fn message(input: &str, e: &Error) -> String {
    format!("{input}: {e}")
}

/// The window in ns, given the first event's time (for `+S` values).
fn resolve(select: &Select, first: u64) -> (u64, u64) {
    let at = |t: TimeArg| match t {
        TimeArg::Absolute(ns) => ns,
        TimeArg::Relative(ns) => first.saturating_add(ns),
    };
    (select.from.map_or(0, at), select.to.map_or(u64::MAX, at))
}

fn progress_bar(file_len: u64) -> indicatif::ProgressBar {
    if file_len < PROGRESS_MIN_BYTES || !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(file_len);
    if let Ok(style) =
        indicatif::ProgressStyle::with_template("{bar:40} {percent:>3}% {elapsed} (ETA {eta})")
    {
        bar.set_style(style);
    }
    bar
}

/// A page source that advances the progress bar by the file bytes it has passed.
struct Progress<'s> {
    inner: Box<dyn PageSource + 's>,
    start: u64,
    last: u64,
    bar: indicatif::ProgressBar,
}

impl PageSource for Progress<'_> {
    fn advance(&mut self) -> Result<bool, Error> {
        let more = self.inner.advance()?;
        let off = self.inner.offset();
        if off > self.last && off >= self.start {
            self.bar.inc(off - self.last);
            self.last = off;
        }
        Ok(more)
    }

    fn page(&self) -> &[u8] {
        self.inner.page()
    }

    fn offset(&self) -> u64 {
        self.inner.offset()
    }
}

/// A signed or unsigned integer field, read without a lookup per record.
#[derive(Debug, Clone, Copy)]
pub struct IntField {
    offset: usize,
    size: usize,
    signed: bool,
    big_endian: bool,
}

impl IntField {
    /// Field `name` of `format`, if it is an integer of 1, 2, 4 or 8 bytes.
    pub fn of(format: &EventFormat, name: &str, big_endian: bool) -> Option<IntField> {
        let f = format.field(name)?;
        matches!(f.size, 1 | 2 | 4 | 8).then_some(IntField {
            offset: f.offset,
            size: f.size,
            signed: f.signed,
            big_endian,
        })
    }

    /// The value (0 when the record is too short).
    #[inline]
    pub fn get(&self, data: &[u8]) -> i64 {
        let Some(b) = data.get(self.offset..self.offset + self.size) else { return 0 };
        let mut buf = [0u8; 8];
        let v = if self.big_endian {
            buf[8 - self.size..].copy_from_slice(b);
            u64::from_be_bytes(buf)
        } else {
            buf[..self.size].copy_from_slice(b);
            u64::from_le_bytes(buf)
        };
        if self.signed && self.size < 8 {
            let shift = 64 - 8 * self.size as u32;
            ((v << shift) as i64) >> shift
        } else {
            v as i64
        }
    }
}

/// A string field (`char[16]` or `__data_loc char[]`) as text up to its NUL.
pub fn str_field<'a>(f: &Field, data: &'a [u8], big_endian: bool) -> &'a str {
    let Some(b) = f.bytes(data, big_endian) else { return "" };
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    std::str::from_utf8(&b[..end]).unwrap_or("")
}
