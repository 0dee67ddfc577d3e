//! trace.dat -> Perfetto's protobuf trace (`perfetto.protos.Trace`, field numbers from
//! perfetto's `perfetto_trace.proto`; the tests decode the output with the `perfetto` PyPI
//! package's generated protos).
//!
//! - Kernel events become ftrace events in per-CPU `FtraceEventBundle`s: scheduling and
//!   process events typed (`sched_switch`, `sched_waking`, `sched_wakeup(_new)`,
//!   `sched_migrate_task`, `sched_process_exec/exit/fork/free`, `task_newtask/rename`,
//!   `ftrace:print`), every other event as a `GenericFtraceEvent` with all its fields.
//! - Events lost on a CPU set `lost_events` on that CPU's next bundle.
//! - Task names from the file's saved cmdlines go into a `ProcessTree`.
//! - A Rust program's tracepoints become instant `TrackEvent`s on a track per thread, their
//!   fields as debug annotations. An event is a program's by its ID (crate `tp` numbers its
//!   events from [`RUST_ID_BASE`]), not by its buffer's name: a kernel instance's buffer has
//!   a name too. The process ID is the suffix of the buffer's `COMM-PID` name.
//! - `tracing` spans recorded by crate `tp-tracing` (system `tracing`) become slices on their
//!   thread's track: `span_enter` begins one (named after the span's `TARGET__NAME__new`
//!   event, `::` restored: `myapp::db::query`), `span_exit` ends it, so nested spans nest.
//!   Their other events stay instants.
//!
//! Streaming: a bundle per CPU is flushed every `BUNDLE_EVENTS` (1024) events, so memory does not
//! grow with the file.
//!
//! Clock: timestamps are written as recorded, and the trace says which clock they are on,
//! so the UI shows the recording's own times. Perfetto reads ftrace timestamps as boot time
//! unless the bundle names another clock, and its bundles can only name `mono_raw`; for
//! tp record's default `mono` (the clock of the Rust programs' events too) a clock snapshot
//! makes `CLOCK_MONOTONIC` the trace's clock and equates it with boot time (the file has no
//! reading of both clocks at one instant, so the two are taken to be the same, as they are
//! on a machine that has not been suspended). Clocks Perfetto has no name for (`local`,
//! `global`, `x86-tsc`...) are placed as boot time, which keeps order and spacing, and the
//! conversion says so.

use std::collections::HashMap;
use std::io::{BufWriter, Write};

use tp_format::format::{EventFormat, Field, FieldKind, RUST_ID_BASE};

use super::proto::{bytes, int, uint};
use crate::timeline::{str_field, Coverage, Ev, Event, IntField, Timeline};
use crate::{Error, Result, Select};

/// What a `tracing` span event does to its thread's slices.
enum Span {
    Begin(String),
    End,
}

/// Events per bundle before it is written.
const BUNDLE_EVENTS: usize = 1024;

/// Sequences: ftrace bundles, and the Rust programs' track events.
const SEQ_FTRACE: i64 = 1;
const SEQ_TRACKS: i64 = 2;

// TracePacket fields.
const PKT_FTRACE_EVENTS: u32 = 1;
const PKT_PROCESS_TREE: u32 = 2;
const PKT_CLOCK_SNAPSHOT: u32 = 6;
const PKT_TIMESTAMP: u32 = 8;
const PKT_SEQ_ID: u32 = 10;
const PKT_TRACK_EVENT: u32 = 11;
const PKT_SEQ_FLAGS: u32 = 13;
const PKT_TRACK_DESCRIPTOR: u32 = 60;
/// SEQ_INCREMENTAL_STATE_CLEARED.
const SEQ_CLEARED: i64 = 1;

/// `BuiltinClock` values.
const CLOCK_MONOTONIC: u64 = 3;
const CLOCK_MONOTONIC_RAW: u64 = 5;
const CLOCK_BOOTTIME: u64 = 6;
/// `FtraceEventBundle.ftrace_clock` (`FtraceClock`): MONO_RAW.
const FTRACE_CLOCK_MONO_RAW: u64 = 4;

/// How the trace's clock is told to Perfetto.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClockPlan {
    /// `boot`: Perfetto's default for ftrace timestamps, nothing to say.
    Boot,
    /// `mono`: a snapshot equating MONOTONIC with BOOTTIME, MONOTONIC the trace's clock.
    Mono,
    /// `mono_raw`: each bundle says FTRACE_CLOCK_MONO_RAW, MONOTONIC_RAW the trace's clock.
    MonoRaw,
    /// A clock Perfetto cannot name: placed as boot time.
    Unnamed,
}

fn clock_plan(clock: &str) -> ClockPlan {
    match clock {
        "boot" => ClockPlan::Boot,
        "mono" => ClockPlan::Mono,
        "mono_raw" => ClockPlan::MonoRaw,
        _ => ClockPlan::Unnamed,
    }
}

/// The ClockSnapshot packet's body for `plan` (empty when nothing needs saying).
fn clock_snapshot(plan: ClockPlan) -> Vec<u8> {
    let clock = |out: &mut Vec<u8>, id: u64| {
        let mut c = Vec::new();
        uint(&mut c, 1, id);
        uint(&mut c, 2, 0);
        bytes(out, 1, &c);
    };
    let mut s = Vec::new();
    match plan {
        ClockPlan::Mono => {
            clock(&mut s, CLOCK_MONOTONIC);
            clock(&mut s, CLOCK_BOOTTIME);
            uint(&mut s, 2, CLOCK_MONOTONIC);
        }
        ClockPlan::MonoRaw => {
            clock(&mut s, CLOCK_MONOTONIC_RAW);
            clock(&mut s, CLOCK_BOOTTIME);
            uint(&mut s, 2, CLOCK_MONOTONIC_RAW);
        }
        ClockPlan::Boot | ClockPlan::Unnamed => {}
    }
    s
}

/// How one field of a kernel event is encoded: its proto field number and how to read it.
#[derive(Clone)]
enum Access {
    Int(IntField),
    Str(Field),
    /// Arrays that are not strings: printed as `[1,2,3]` (generic events only).
    Other(Field),
}

/// How one event type converts.
#[derive(Clone)]
enum Conv {
    /// A typed FtraceEvent field (`oneof event`), with (proto field, access) pairs.
    Typed(u32, Vec<(u32, Access)>),
    /// GenericFtraceEvent: event name and (field name, its encoded `Field.name`, access).
    Generic(String, Vec<(String, Vec<u8>, Access)>),
}

/// Typed ftrace events: (system, name, FtraceEvent field, [(kernel field = proto field
/// name, proto field number)]). Kernel fields the proto has no field for are left out, as
/// perfetto's own recorder does.
/// (system, name, FtraceEvent field number, [(field name, proto field number)]).
type Typed = (&'static str, &'static str, u32, &'static [(&'static str, u32)]);

const TYPED: &[Typed] = &[
    (
        "sched",
        "sched_switch",
        4,
        &[
            ("prev_comm", 1),
            ("prev_pid", 2),
            ("prev_prio", 3),
            ("prev_state", 4),
            ("next_comm", 5),
            ("next_pid", 6),
            ("next_prio", 7),
        ],
    ),
    ("sched", "sched_wakeup", 17, &[("comm", 1), ("pid", 2), ("prio", 3), ("target_cpu", 5)]),
    ("sched", "sched_waking", 20, &[("comm", 1), ("pid", 2), ("prio", 3), ("target_cpu", 5)]),
    ("sched", "sched_wakeup_new", 114, &[("comm", 1), ("pid", 2), ("prio", 3), ("target_cpu", 5)]),
    (
        "sched",
        "sched_migrate_task",
        491,
        &[("comm", 1), ("pid", 2), ("prio", 3), ("orig_cpu", 4), ("dest_cpu", 5)],
    ),
    ("sched", "sched_process_exec", 237, &[("filename", 1), ("pid", 2), ("old_pid", 3)]),
    ("sched", "sched_process_exit", 238, &[("comm", 1), ("pid", 2), ("tgid", 3), ("prio", 4)]),
    (
        "sched",
        "sched_process_fork",
        239,
        &[("parent_comm", 1), ("parent_pid", 2), ("child_comm", 3), ("child_pid", 4)],
    ),
    ("sched", "sched_process_free", 240, &[("comm", 1), ("pid", 2), ("prio", 3)]),
    (
        "task",
        "task_newtask",
        235,
        &[("pid", 1), ("comm", 2), ("clone_flags", 3), ("oom_score_adj", 4)],
    ),
    (
        "task",
        "task_rename",
        236,
        &[("pid", 1), ("oldcomm", 2), ("newcomm", 3), ("oom_score_adj", 4)],
    ),
    ("ftrace", "print", 3, &[("ip", 1), ("buf", 2)]),
];

fn access(f: &Field, be: bool, format: &EventFormat) -> Access {
    if matches!(f.kind, FieldKind::Scalar | FieldKind::Pointer) {
        if let Some(i) = IntField::of(format, &f.name, be) {
            return Access::Int(i);
        }
    }
    if f.is_string() {
        Access::Str(f.clone())
    } else {
        Access::Other(f.clone())
    }
}

fn conv_for(format: &EventFormat, be: bool) -> Conv {
    if let Some((_, _, number, fields)) =
        TYPED.iter().find(|(s, n, _, _)| *s == format.system && *n == format.name)
    {
        let mut v = Vec::new();
        for (name, no) in fields.iter() {
            if let Some(f) = format.field(name) {
                v.push((*no, access(f, be, format)));
            }
        }
        return Conv::Typed(*number, v);
    }
    let fields = format
        .fields
        .iter()
        .map(|f| {
            let mut name = Vec::new();
            bytes(&mut name, 1, f.name.as_bytes());
            (f.name.clone(), name, access(f, be, format))
        })
        .collect();
    Conv::Generic(format.name.clone(), fields)
}

/// `[1,2,3]` for a non-string array field, into `out`.
fn write_other(out: &mut Vec<u8>, f: &Field, data: &[u8], be: bool) {
    let Some(b) = f.bytes(data, be) else { return };
    let n = f.element_size().max(1);
    out.push(b'[');
    if matches!(n, 1 | 2 | 4 | 8) {
        for (i, c) in b.chunks_exact(n).enumerate() {
            if i > 0 {
                out.push(b',');
            }
            if let Some(v) = tp_format::format::read_int(c, f.signed, be) {
                push_int(out, v);
            }
        }
    } else {
        for (i, v) in b.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            push_int(out, *v as i128);
        }
    }
    out.push(b']');
}

/// Decimal digits of `v`, a value of at most 8 bytes, signed or not (std's i128 formatting
/// was a fifth of the conversion's time).
fn push_int(out: &mut Vec<u8>, v: i128) {
    if v < 0 {
        out.push(b'-');
    }
    let mut n = v.unsigned_abs() as u64;
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

/// A field's value as proto field `int_no` (integers) or `str_no` (text); `text` is a
/// reused buffer.
#[inline]
fn value(
    out: &mut Vec<u8>,
    int_no: u32,
    str_no: u32,
    a: &Access,
    data: &[u8],
    be: bool,
    text: &mut Vec<u8>,
) {
    match a {
        Access::Int(i) => int(out, int_no, i.get(data)),
        Access::Str(f) => bytes(out, str_no, str_field(f, data, be).as_bytes()),
        Access::Other(f) => {
            text.clear();
            write_other(text, f, data, be);
            bytes(out, str_no, text);
        }
    }
}

/// One CPU's bundle being filled.
#[derive(Default)]
struct Bundle {
    events: Vec<u8>,
    count: usize,
    lost: bool,
}

struct Writer<W: Write> {
    out: BufWriter<W>,
    packet: Vec<u8>,
    scratch: Vec<u8>,
    event: Vec<u8>,
    /// A generic event's field being encoded.
    field: Vec<u8>,
    text: Vec<u8>,
    error: Option<std::io::Error>,
    /// `FtraceEventBundle.ftrace_clock`, when not Perfetto's default.
    ftrace_clock: Option<u64>,
}

impl<W: Write> Writer<W> {
    /// Write `packet` (already holding the packet's fields) as one `Trace.packet`.
    fn emit_packet(&mut self) {
        let mut head = Vec::with_capacity(8);
        bytes_header(&mut head, 1, self.packet.len());
        if self.error.is_none() {
            if let Err(e) = self.out.write_all(&head).and_then(|_| self.out.write_all(&self.packet))
            {
                self.error = Some(e);
            }
        }
        self.packet.clear();
    }

    fn flush_bundle(&mut self, cpu: u32, b: &mut Bundle) {
        if b.count == 0 && !b.lost {
            return;
        }
        // Packet{ftrace_events: Bundle{cpu, events..., lost_events}, sequence id}, written
        // as headers around the events (no copy of them).
        let mut head = Vec::with_capacity(16);
        uint(&mut head, 1, cpu as u64);
        let mut tail = Vec::with_capacity(16);
        if b.lost {
            int(&mut tail, 3, 1);
        }
        if let Some(c) = self.ftrace_clock {
            uint(&mut tail, 5, c);
        }
        let bundle_len = head.len() + b.events.len() + tail.len();
        let mut seq = Vec::with_capacity(4);
        int(&mut seq, PKT_SEQ_ID, SEQ_FTRACE);
        let mut bundle_head = Vec::with_capacity(8);
        bytes_header(&mut bundle_head, PKT_FTRACE_EVENTS, bundle_len);
        let packet_len = bundle_head.len() + bundle_len + seq.len();
        let mut packet_head = Vec::with_capacity(8);
        bytes_header(&mut packet_head, 1, packet_len);
        if self.error.is_none() {
            let written = [&packet_head[..], &bundle_head, &head, &b.events, &tail, &seq]
                .iter()
                .try_for_each(|part| self.out.write_all(part));
            if let Err(e) = written {
                self.error = Some(e);
            }
        }
        b.events.clear();
        b.count = 0;
        b.lost = false;
    }
}

/// Tag and length of a length-delimited field whose bytes follow.
fn bytes_header(out: &mut Vec<u8>, field: u32, len: usize) {
    super::proto::varint(out, (field as u64) << 3 | 2);
    super::proto::varint(out, len as u64);
}

/// What a conversion wrote and what it left out.
#[derive(Debug, Default)]
pub struct Written {
    /// Events written.
    pub events: u64,
    /// perf.data samples of events that are not tracepoints (no ftrace record to convert).
    pub samples: u64,
    /// Events of IDs the file has no format for.
    pub unknown: u64,
    /// The recording's clock when Perfetto has no name for it: its times are shown as boot
    /// time (order and spacing as recorded).
    pub unnamed_clock: Option<String>,
    /// What the recording held and lost.
    pub coverage: Coverage,
}

/// Write the whole of `tl` to `out` as a Perfetto trace. An error writing `out` is
/// [`Error::Output`].
pub fn write(tl: &Timeline, out: impl Write) -> Result<Written> {
    let mut c = Converter::new(tl, out);
    let mut written = Written::default();
    let plan = clock_plan(&tl.clock);
    c.header(plan);
    if plan == ClockPlan::Unnamed {
        written.unnamed_clock = Some(tl.clock.clone());
    }
    written.coverage = tl.run(&Select::default(), |ev| match ev {
        Ev::Event(e) => match &c.convs[e.id as usize] {
            None => written.unknown += 1,
            Some(_) => {
                written.events += 1;
                c.event(&e);
            }
        },
        Ev::Lost { buffer, cpu } => c.lost(buffer, cpu),
        Ev::Sample { .. } => written.samples += 1,
        Ev::Mmap { .. } | Ev::Exec { .. } | Ev::Fork { .. } => {}
    })?;
    c.finish()?;
    Ok(written)
}

/// The conversion's state: the output and what has been said in it so far.
struct Converter<'t, W: Write> {
    tl: &'t Timeline,
    w: Writer<W>,
    /// Per event ID.
    convs: Vec<Option<Conv>>,
    /// A Rust program's buffer is named `COMM-PID`: its process ID is the suffix (0:
    /// unknown).
    buffer_pid: Vec<i32>,
    /// Buffers that have held a Rust program's events (their lost events mark no CPU).
    program_buffer: Vec<bool>,
    /// Per (buffer, thread): its track's uuid.
    tracks: HashMap<(usize, i32), u64>,
    /// Per (buffer, `tracing` span id): the span's name, from its `__new` event.
    span_names: HashMap<(usize, u64), String>,
    track_seq_started: bool,
    /// Per CPU, indexed by CPU number.
    bundles: Vec<Bundle>,
}

impl<'t, W: Write> Converter<'t, W> {
    fn new(tl: &'t Timeline, out: W) -> Converter<'t, W> {
        let be = tl.big_endian;
        let mut convs: Vec<Option<Conv>> = vec![None; u16::MAX as usize + 1];
        for f in tl.formats() {
            if let Ok(id) = u16::try_from(f.id) {
                convs[id as usize] = Some(conv_for(f, be));
            }
        }
        let buffer_pid = tl
            .buffers
            .iter()
            .map(|(_, name)| name.rsplit_once('-').and_then(|(_, p)| p.parse().ok()).unwrap_or(0))
            .collect();
        let w = Writer {
            out: BufWriter::with_capacity(1 << 20, out),
            packet: Vec::new(),
            scratch: Vec::new(),
            event: Vec::new(),
            field: Vec::new(),
            text: Vec::new(),
            error: None,
            ftrace_clock: None,
        };
        Converter {
            tl,
            w,
            convs,
            buffer_pid,
            program_buffer: vec![false; tl.buffers.len()],
            tracks: HashMap::new(),
            span_names: HashMap::new(),
            track_seq_started: false,
            bundles: Vec::new(),
        }
    }

    /// The clock snapshot and the task names the file saved.
    fn header(&mut self, plan: ClockPlan) {
        let w = &mut self.w;
        if plan == ClockPlan::MonoRaw {
            w.ftrace_clock = Some(FTRACE_CLOCK_MONO_RAW);
        }
        let snapshot = clock_snapshot(plan);
        if !snapshot.is_empty() {
            bytes(&mut w.packet, PKT_CLOCK_SNAPSHOT, &snapshot);
            int(&mut w.packet, PKT_SEQ_ID, SEQ_FTRACE);
            w.emit_packet();
        }
        let cmdlines = &self.tl.cmdlines;
        let mut names: Vec<(i32, &str)> = cmdlines.iter().collect();
        names.sort_unstable();
        let mut tree = Vec::new();
        for (pid, comm) in &names {
            let mut t = Vec::new();
            int(&mut t, 1, *pid as i64);
            bytes(&mut t, 2, comm.as_bytes());
            if let Some(tgid) = cmdlines.tgid(*pid) {
                int(&mut t, 3, tgid as i64);
            }
            bytes(&mut tree, 2, &t);
        }
        bytes(&mut w.packet, PKT_PROCESS_TREE, &tree);
        int(&mut w.packet, PKT_SEQ_ID, SEQ_FTRACE);
        w.emit_packet();
    }

    /// An event with a format.
    fn event(&mut self, e: &Event<'_>) {
        if e.id >= RUST_ID_BASE {
            self.rust_event(e);
        } else {
            self.kernel_event(e);
        }
    }

    /// A Rust tracepoint: an instant on its thread's track, its fields as debug
    /// annotations.
    fn rust_event(&mut self, e: &Event<'_>) {
        let be = self.tl.big_endian;
        self.program_buffer[e.buffer] = true;
        let uuid = self.track(e);
        let span = self.tracing_span(e);
        let w = &mut self.w;
        w.event.clear();
        match &span {
            Some(Span::Begin(name)) => {
                int(&mut w.event, 9, 1); // TYPE_SLICE_BEGIN
                uint(&mut w.event, 11, uuid);
                bytes(&mut w.event, 22, b"tracing");
                bytes(&mut w.event, 23, name.as_bytes());
            }
            Some(Span::End) => {
                int(&mut w.event, 9, 2); // TYPE_SLICE_END
                uint(&mut w.event, 11, uuid);
            }
            None => {
                int(&mut w.event, 9, 3); // TYPE_INSTANT
                uint(&mut w.event, 11, uuid);
                if let Some(f) = self.tl.format_of(e.id) {
                    bytes(&mut w.event, 22, f.system.as_bytes());
                    bytes(&mut w.event, 23, f.name.as_bytes());
                }
            }
        }
        if let Some(Conv::Generic(_, fields)) = &self.convs[e.id as usize] {
            for (name, _, a) in fields {
                w.scratch.clear();
                bytes(&mut w.scratch, 10, name.as_bytes());
                value(&mut w.scratch, 4, 6, a, e.data, be, &mut w.text);
                bytes(&mut w.event, 4, &w.scratch);
            }
        }
        uint(&mut w.packet, PKT_TIMESTAMP, e.ts);
        bytes(&mut w.packet, PKT_TRACK_EVENT, &w.event);
        int(&mut w.packet, PKT_SEQ_ID, SEQ_TRACKS);
        w.emit_packet();
    }

    /// A `tracing` span's enter (a slice begins, with the span's name) or exit (the
    /// innermost slice ends); a span's `__new` event notes its name. `None` for every other
    /// event.
    fn tracing_span(&mut self, e: &Event<'_>) -> Option<Span> {
        let f = self.tl.format_of(e.id)?;
        if f.system != "tracing" {
            return None;
        }
        let id = IntField::of(f, "span_id", self.tl.big_endian)?.get(e.data) as u64;
        match f.name.as_str() {
            "span_enter" => {
                let name = self.span_names.get(&(e.buffer, id)).cloned();
                Some(Span::Begin(name.unwrap_or_else(|| format!("span {id}"))))
            }
            "span_exit" => Some(Span::End),
            n => {
                if let Some(stem) = n.strip_suffix("__new") {
                    self.span_names.insert((e.buffer, id), stem.replace("__", "::"));
                }
                None
            }
        }
    }

    /// The uuid of the track of `e`'s thread, described the first time.
    fn track(&mut self, e: &Event<'_>) -> u64 {
        let n = self.tracks.len() as u64;
        if let Some(&uuid) = self.tracks.get(&(e.buffer, e.pid)) {
            return uuid;
        }
        let uuid = 0x7470_0000_0000_0000 | n;
        let process = self.buffer_pid[e.buffer];
        let w = &mut self.w;
        let mut th = Vec::new();
        int(&mut th, 1, if process != 0 { process } else { e.pid } as i64);
        int(&mut th, 2, e.pid as i64);
        bytes(&mut th, 5, e.comm().as_bytes());
        let mut td = Vec::new();
        uint(&mut td, 1, uuid);
        bytes(&mut td, 4, &th);
        bytes(&mut w.packet, PKT_TRACK_DESCRIPTOR, &td);
        int(&mut w.packet, PKT_SEQ_ID, SEQ_TRACKS);
        if !self.track_seq_started {
            int(&mut w.packet, PKT_SEQ_FLAGS, SEQ_CLEARED);
            self.track_seq_started = true;
        }
        w.emit_packet();
        self.tracks.insert((e.buffer, e.pid), uuid);
        uuid
    }

    /// A kernel event: FtraceEvent{timestamp, pid, common_flags, oneof event}, into its
    /// CPU's bundle.
    fn kernel_event(&mut self, e: &Event<'_>) {
        let be = self.tl.big_endian;
        let Some(conv) = &self.convs[e.id as usize] else { return };
        let w = &mut self.w;
        w.scratch.clear();
        let field = match conv {
            Conv::Typed(no, fields) => {
                for (pno, a) in fields {
                    value(&mut w.scratch, *pno, *pno, a, e.data, be, &mut w.text);
                }
                *no
            }
            Conv::Generic(name, fields) => {
                bytes(&mut w.scratch, 1, name.as_bytes());
                for (_, name, a) in fields {
                    w.field.clear();
                    w.field.extend_from_slice(name);
                    value(&mut w.field, 4, 3, a, e.data, be, &mut w.text);
                    bytes(&mut w.scratch, 2, &w.field);
                }
                327
            }
        };
        w.event.clear();
        uint(&mut w.event, 1, e.ts);
        int(&mut w.event, 2, e.pid as i64);
        uint(&mut w.event, 5, e.data[2] as u64);
        // The oneof field's header; its body (scratch) is copied once, into the bundle.
        bytes_header(&mut w.event, field, w.scratch.len());
        let b = bundle(&mut self.bundles, e.cpu);
        bytes_header(&mut b.events, 2, w.event.len() + w.scratch.len());
        b.events.extend_from_slice(&w.event);
        b.events.extend_from_slice(&w.scratch);
        b.count += 1;
        if b.count >= BUNDLE_EVENTS {
            w.flush_bundle(e.cpu, b);
        }
    }

    /// Events lost on `cpu` of `buffer`: marked on the CPU's next bundle (a Rust program's
    /// buffer has no CPUs to mark).
    fn lost(&mut self, buffer: usize, cpu: u32) {
        if !self.program_buffer[buffer] {
            let b = bundle(&mut self.bundles, cpu);
            self.w.flush_bundle(cpu, b);
            b.lost = true;
        }
    }

    /// The bundles still filling, then the output flushed.
    fn finish(mut self) -> Result<()> {
        for (cpu, b) in self.bundles.iter_mut().enumerate() {
            self.w.flush_bundle(cpu as u32, b);
        }
        if let Some(e) = self.w.error.take() {
            return Err(Error::Output(e));
        }
        self.w.out.flush().map_err(Error::Output)
    }
}

/// CPU `cpu`'s bundle.
fn bundle(bundles: &mut Vec<Bundle>, cpu: u32) -> &mut Bundle {
    let i = cpu as usize;
    if bundles.len() <= i {
        bundles.resize_with(i + 1, Bundle::default);
    }
    &mut bundles[i]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_print_as_lists() {
        let mut out = Vec::new();
        for v in [0, 7, -1, i64::MIN as i128, u64::MAX as i128] {
            push_int(&mut out, v);
            out.push(b' ');
        }
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "0 7 -1 -9223372036854775808 18446744073709551615 "
        );
        let f = tp_format::format::parse_field_line(
            "field:unsigned long args[2];\toffset:8;\tsize:16;\tsigned:0;",
        )
        .unwrap();
        let mut data = vec![0u8; 24];
        data[8..16].copy_from_slice(&5u64.to_le_bytes());
        data[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
        let mut out = Vec::new();
        write_other(&mut out, &f, &data, false);
        assert_eq!(String::from_utf8(out).unwrap(), "[5,18446744073709551615]");
    }
}
