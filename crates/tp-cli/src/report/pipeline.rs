//! Decoding and rendering on several threads. The calling thread merges the CPUs' records
//! and copies the wanted ones into numbered batches (one flat byte buffer per batch);
//! workers (one per extra core, up to [`MAX_WORKERS`]) take batches, render them, and write
//! them to stdout in batch order. When the workers are behind (the queue is full), the
//! calling thread renders the batch itself, so every core renders and none waits. Batches
//! travel through a bounded channel and come back empty for reuse, so memory is a few
//! batches per thread whatever the file's size.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::io::Write;
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Condvar, Mutex};

use tp_format::render::Renderer;
use tp_format::text;

/// How events print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The kernel's `trace` lines.
    Text,
    /// Context columns and every field (`--raw`).
    Raw,
    /// One JSON object per line (`--json`).
    Json,
}

/// Where a record comes from: its CPU, and with several buffers merged the index of its
/// buffer in the names [`run`] was given (0 otherwise).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    pub buffer: u16,
    pub cpu: u32,
}

impl Place {
    /// CPU `cpu` of the one buffer.
    pub fn cpu(cpu: u32) -> Place {
        Place { buffer: 0, cpu }
    }
}

/// Events per batch, and record bytes per batch: large enough that the channel costs
/// nothing per event, small enough that a few batches stay well under a megabyte each.
const BATCH_EVENTS: usize = 4096;
const BATCH_BYTES: usize = 512 << 10;
/// Batches queued for the workers besides the ones they render and the one being filled.
const QUEUE: usize = 2;

/// One event: 24 bytes, so filling a batch touches little memory (the batch was last read
/// by another core). Its record bytes are `data[end of the entry before..end]`.
struct Entry {
    ts: u64,
    cpu: u32,
    end: u32,
    buffer: u16,
    kind: Kind,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Event,
    /// A function_graph call without children; its bytes are the call's record, its
    /// return's record, and the call's length (u32, native order).
    Leaf,
    /// A function_graph return whose call was not shown.
    Orphan,
}

/// What is not an event, rare: kept beside the entries.
enum Special {
    Lost {
        at: Place,
        ts: u64,
        count: Option<u64>,
    },
    /// A decoding error, printed to stderr after the output before it.
    Error(String),
    /// Text rendered by the producer (perf.data's non-tracepoint records), printed as is;
    /// with its record's time.
    Text(u64, String),
}

struct Batch {
    data: Vec<u8>,
    entries: Vec<Entry>,
    /// Lost markers and errors, each with the number of entries before it.
    specials: Vec<(usize, Special)>,
}

impl Default for Batch {
    fn default() -> Batch {
        // Full size at once: no regrowth (copies, page faults) while filling.
        Batch {
            data: Vec::with_capacity(BATCH_BYTES + (64 << 10)),
            entries: Vec::with_capacity(BATCH_EVENTS),
            specials: Vec::new(),
        }
    }
}

impl Batch {
    fn is_full(&self) -> bool {
        self.entries.len() + self.specials.len() >= BATCH_EVENTS || self.data.len() >= BATCH_BYTES
    }

    fn is_empty(&self) -> bool {
        self.entries.is_empty() && self.specials.is_empty()
    }

    fn clear(&mut self) {
        self.data.clear();
        self.entries.clear();
        self.specials.clear();
    }
}

/// The workers stopped (a write failed); the error comes from [`run`].
pub struct Closed;

/// The producer's end: collects entries into batches and hands full ones to the workers
/// (or renders them itself when the workers are behind).
pub struct Feed<'a> {
    tx: SyncSender<Job>,
    free: Receiver<Batch>,
    cur: Batch,
    /// Sequence number of `cur`.
    seq: u64,
    shared: &'a Shared<'a>,
}

impl Feed<'_> {
    #[inline]
    fn push(&mut self, at: Place, ts: u64, kind: Kind) -> Result<(), Closed> {
        let (cpu, buffer, end) = (at.cpu, at.buffer, self.cur.data.len() as u32);
        self.cur.entries.push(Entry { ts, cpu, end, buffer, kind });
        self.send_if_full()
    }

    /// A record (`ts` already adjusted) to render.
    #[inline]
    pub fn event(&mut self, at: Place, ts: u64, data: &[u8]) -> Result<(), Closed> {
        self.cur.data.extend_from_slice(data);
        self.push(at, ts, Kind::Event)
    }

    /// A function_graph call without children (`call`) and its return (`ret`): one line.
    pub fn graph_leaf(
        &mut self,
        at: Place,
        ts: u64,
        call: &[u8],
        ret: &[u8],
    ) -> Result<(), Closed> {
        self.cur.data.extend_from_slice(call);
        self.cur.data.extend_from_slice(ret);
        self.cur.data.extend_from_slice(&(call.len() as u32).to_ne_bytes());
        self.push(at, ts, Kind::Leaf)
    }

    /// A function_graph return whose call was not shown (`} /* func */`).
    pub fn graph_orphan(&mut self, at: Place, ts: u64, ret: &[u8]) -> Result<(), Closed> {
        self.cur.data.extend_from_slice(ret);
        self.push(at, ts, Kind::Orphan)
    }

    /// Lost events (`ts` already adjusted).
    pub fn lost(&mut self, at: Place, ts: u64, count: Option<u64>) -> Result<(), Closed> {
        let n = self.cur.entries.len();
        self.cur.specials.push((n, Special::Lost { at, ts, count }));
        self.send_if_full()
    }

    /// An error to print (on stderr) once everything before it is written.
    pub fn error(&mut self, message: String) -> Result<(), Closed> {
        let at = self.cur.entries.len();
        self.cur.specials.push((at, Special::Error(message)));
        self.send_if_full()
    }

    /// Lines already rendered (newline included) of a record at `ts`, printed in their
    /// place.
    pub fn text(&mut self, ts: u64, text: String) -> Result<(), Closed> {
        let at = self.cur.entries.len();
        self.cur.specials.push((at, Special::Text(ts, text)));
        self.send_if_full()
    }

    fn send_if_full(&mut self) -> Result<(), Closed> {
        if self.cur.is_full() {
            self.send()?;
        }
        Ok(())
    }

    fn send(&mut self) -> Result<(), Closed> {
        let next = self.free.try_recv().unwrap_or_default();
        let batch = std::mem::replace(&mut self.cur, next);
        let job = Job { seq: self.seq, batch };
        self.seq += 1;
        match self.tx.try_send(job) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(mut job)) => {
                // The workers are behind: render this one here (once the batches rendered
                // ahead are few enough, so memory stays bounded).
                self.shared.order.wait_for_room();
                let rendered = self.shared.render(&job);
                job.batch.clear();
                self.cur = job.batch;
                rendered.map_err(|_| Closed)
            }
            Err(TrySendError::Disconnected(_)) => Err(Closed),
        }
    }
}

/// Where rendered batches go.
#[derive(Clone, Default)]
pub enum Sink {
    /// Written to stdout.
    #[default]
    Stdout,
    /// Sent to [`merge`], each record's time and end marked.
    Merge(SyncSender<Rendered>),
}

/// Run `produce` on this thread, feeding workers that render in `mode` and write to
/// `sink` in batch order (stdout is theirs until this returns). `input` names the file in
/// error messages. Returns what `produce` returned, or a write error.
///
/// `buffers` names the buffers of merged records: a record fed at [`Place`] `{ buffer: k,
/// cpu }` is printed as CPU `cpu`, its line prefixed with `NAME: ` when `buffers[k]` is a
/// non-empty NAME (as trace-cmd report prints instances); in JSON it gets
/// a `"buffer"` member. Empty: every record is the one buffer's, printed as it is.
pub fn run<T>(
    renderer: &Renderer,
    mode: Mode,
    input: &str,
    buffers: &[String],
    sink: &Sink,
    produce: impl FnOnce(&mut Feed<'_>) -> Result<T, Closed>,
) -> anyhow::Result<Option<T>> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let workers = (cores - 1).clamp(1, MAX_WORKERS);
    let (tx, rx) = mpsc::sync_channel::<Job>(QUEUE);
    // Shared by the workers only: when they have all stopped, sending fails.
    let jobs = Arc::new(Mutex::new(rx));
    let (back_tx, free) = mpsc::channel::<Batch>();
    let shared = Shared { renderer, mode, input, buffers, sink, order: Order::default() };
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                let (jobs, back, shared) = (jobs.clone(), back_tx.clone(), &shared);
                s.spawn(move || shared.work(&jobs, &back))
            })
            .collect();
        drop((jobs, back_tx));
        let mut feed = Feed { tx, free, cur: Batch::default(), seq: 0, shared: &shared };
        let mut produced = produce(&mut feed);
        if produced.is_ok() && !feed.cur.is_empty() {
            if let Err(c) = feed.send() {
                produced = Err(c);
            }
        }
        drop(feed); // closes the channel: the workers finish and return
        for h in handles {
            h.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
        }
        if let Some(e) = shared.order.lock().error.take() {
            return Err(e.into());
        }
        std::io::stdout().flush()?;
        // `Closed` without a write error cannot happen; treat it as "nothing more".
        Ok(produced.ok())
    })
}

/// Workers at most: beyond a few, the single merging thread is the limit.
const MAX_WORKERS: usize = 4;

struct Job {
    seq: u64,
    batch: Batch,
}

/// Rendered batches waiting to be written in sequence order. Whichever thread finishes
/// the next batch to be written writes it, and every ready one after it: no thread waits
/// for another to render.
#[derive(Default)]
struct Order {
    state: Mutex<OrderState>,
    /// Signalled after each write (a thread rendering ahead waits for room).
    written: Condvar,
}

#[derive(Default)]
struct OrderState {
    /// Sequence number of the next batch to write.
    next: u64,
    ready: BTreeMap<u64, Rendered>,
    /// Rendering buffers to reuse.
    spare: Vec<Rendered>,
    /// A thread is writing (the others leave their batches in `ready`).
    writing: bool,
    /// The first write error: every thread stops.
    error: Option<std::io::Error>,
}

/// Batches rendered ahead of the one being written, at most (besides one per thread).
const MAX_READY: usize = 4;

impl Order {
    fn lock(&self) -> std::sync::MutexGuard<'_, OrderState> {
        // The state stays consistent even if a holder panicked (the panic is re-raised).
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn spare(&self) -> Rendered {
        self.lock().spare.pop().unwrap_or_default()
    }

    fn wait_for_room(&self) {
        let mut st = self.lock();
        while st.ready.len() >= MAX_READY && st.error.is_none() {
            st = self.written.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Hand over batch `seq`, and write what is in order if no one else is writing.
    /// `Err(())` once a write has failed.
    fn finish(&self, seq: u64, rendered: Rendered, input: &str, sink: &Sink) -> Result<(), ()> {
        let mut st = self.lock();
        if st.error.is_some() {
            return Err(());
        }
        st.ready.insert(seq, rendered);
        if st.writing {
            return Ok(());
        }
        st.writing = true;
        loop {
            let next = st.next;
            let Some(mut r) = st.ready.remove(&next) else { break };
            drop(st);
            let written = match sink {
                Sink::Stdout => write_batch(&r.out, &r.errors, input),
                Sink::Merge(tx) => tx.send(std::mem::take(&mut r)).map_err(|_| {
                    std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the merge stopped")
                }),
            };
            st = self.lock();
            st.spare.push(r);
            self.written.notify_all();
            match written {
                Ok(()) => st.next += 1,
                Err(e) => {
                    st.error = Some(e);
                    break;
                }
            }
        }
        st.writing = false;
        if st.error.is_some() {
            Err(())
        } else {
            Ok(())
        }
    }
}

/// What every rendering thread uses.
struct Shared<'a> {
    renderer: &'a Renderer,
    mode: Mode,
    input: &'a str,
    buffers: &'a [String],
    sink: &'a Sink,
    order: Order,
}

/// One batch's text.
#[derive(Default)]
pub struct Rendered {
    out: String,
    /// Decoding errors: (bytes of `out` written before it, message).
    errors: Vec<(usize, String)>,
    /// For [`merge`]: each record's time and where its text ends in `out`.
    marks: Vec<(u64, usize)>,
}

impl Shared<'_> {
    /// A worker: render jobs until the channel closes or a write fails.
    fn work(&self, jobs: &Mutex<Receiver<Job>>, back: &mpsc::Sender<Batch>) {
        loop {
            // A poisoned lock means another thread panicked; the caller re-raises that.
            let Ok(rx) = jobs.lock() else { return };
            let Ok(mut job) = rx.recv() else { return };
            drop(rx);
            let rendered = self.render(&job);
            job.batch.clear();
            let _ = back.send(job.batch);
            if rendered.is_err() {
                return;
            }
        }
    }

    /// Render `job` and pass it on to be written in order.
    fn render(&self, job: &Job) -> Result<(), ()> {
        let mut r = self.order.spare();
        r.out.clear();
        r.errors.clear();
        r.marks.clear();
        let marks = matches!(self.sink, Sink::Merge(_)).then_some(&mut r.marks);
        render_batch(
            self.renderer,
            self.mode,
            self.buffers,
            &job.batch,
            &mut r.out,
            &mut r.errors,
            marks,
        );
        self.order.finish(job.seq, r, self.input, self.sink)
    }
}

/// Write one rendered batch; decoding errors go to stderr where they occurred.
fn write_batch(out: &str, errors: &[(usize, String)], input: &str) -> std::io::Result<()> {
    let mut lock = std::io::stdout().lock();
    let mut done = 0;
    for (at, message) in errors {
        // Keep going: every complete page is printed, then what was cut is said.
        lock.write_all(&out.as_bytes()[done..*at])?;
        lock.flush()?;
        done = *at;
        eprintln!("tp: {input}: {message}");
    }
    lock.write_all(&out.as_bytes()[done..])
}

/// The name of a merged record's buffer (`None`: the top-level buffer or no merge).
fn buffer_of(buffers: &[String], buffer: u16) -> Option<&str> {
    buffers.get(buffer as usize).map(String::as_str).filter(|n| !n.is_empty())
}

/// `"buffer":"NAME",` for JSON.
fn json_buffer(name: &str) -> String {
    let mut s = String::from("\"buffer\":");
    tp_format::render::push_json_str(&mut s, name);
    s.push(',');
    s
}

fn render_batch(
    r: &Renderer,
    mode: Mode,
    buffers: &[String],
    batch: &Batch,
    out: &mut String,
    errors: &mut Vec<(usize, String)>,
    mut marks: Option<&mut Vec<(u64, usize)>>,
) {
    let mark = |marks: &mut Option<&mut Vec<(u64, usize)>>, ts: u64, out: &String| {
        if let Some(m) = marks.as_mut() {
            m.push((ts, out.len()));
        }
    };
    let special = |s: &Special,
                   out: &mut String,
                   errors: &mut Vec<(usize, String)>,
                   marks: &mut Option<&mut Vec<(u64, usize)>>| match *s {
        Special::Lost { at, ts, count } => {
            let cpu = at.cpu;
            let buffer = buffer_of(buffers, at.buffer);
            match mode {
                Mode::Json => out.push_str(&format!(
                    "{{{}\"lost\":{},\"cpu\":{cpu},\"ts\":{ts}}}\n",
                    buffer.map(json_buffer).unwrap_or_default(),
                    count.map(|c| c.to_string()).unwrap_or_else(|| "null".into()),
                )),
                _ => {
                    if let Some(b) = buffer {
                        out.push_str(b);
                        out.push_str(": ");
                    }
                    text::write_lost(out, cpu, count)
                }
            }
            mark(marks, ts, out);
        }
        Special::Error(ref m) => errors.push((out.len(), m.clone())),
        Special::Text(ts, ref t) => {
            out.push_str(t);
            mark(marks, ts, out);
        }
    };
    let mut specials = batch.specials.iter().peekable();
    let mut start = 0;
    for (i, e) in batch.entries.iter().enumerate() {
        while let Some((_, s)) = specials.next_if(|(at, _)| *at == i) {
            special(s, out, errors, &mut marks);
        }
        let end = e.end as usize;
        let data = &batch.data[start..end];
        start = end;
        let (cpu, ts) = (e.cpu, e.ts);
        let buffer = buffer_of(buffers, e.buffer);
        if mode != Mode::Json {
            if let Some(b) = buffer {
                out.push_str(b);
                out.push_str(": ");
            }
        }
        match mode {
            Mode::Text if e.kind == Kind::Leaf => {
                let (pair, len) = data.split_at(data.len().saturating_sub(4));
                let len = len.try_into().map_or(0, u32::from_ne_bytes) as usize;
                let (call, ret) = pair.split_at(len.min(pair.len()));
                r.render_graph_leaf_line(cpu, ts, call, ret, out)
            }
            Mode::Text if e.kind == Kind::Orphan => r.render_graph_orphan_line(cpu, ts, data, out),
            Mode::Text => r.render_line(cpu, ts, data, out),
            Mode::Raw => {
                r.write_context(cpu, ts, data, out);
                r.render_raw(data, out);
                out.push('\n');
            }
            Mode::Json => {
                let at = out.len();
                r.render_json(cpu, ts, data, out);
                if let Some(b) = buffer {
                    if out[at..].starts_with('{') {
                        out.insert_str(at + 1, &json_buffer(b));
                    }
                }
                out.push('\n');
            }
        }
        mark(&mut marks, ts, out);
    }
    for (_, s) in specials {
        special(s, out, errors, &mut marks);
    }
}

/// Print the batches of several inputs (each sent by its own [`run`] to a
/// [`Sink::Merge`]) as one timeline, record by record: the earliest first, at equal times
/// the input given first; each input's records keep their order. Its decoding errors go
/// to stderr where they occurred. `inputs` names them in messages.
pub fn merge(inputs: &[String], batches: Vec<Receiver<Rendered>>) -> std::io::Result<()> {
    // Not stdout's lock: the inputs' threads take it too (briefly).
    let mut out = std::io::BufWriter::with_capacity(BATCH_BYTES, std::io::stdout());
    let mut cursors: Vec<Cursor> = batches.iter().map(|_| Cursor::default()).collect();
    let mut heads = BinaryHeap::new();
    for (i, c) in cursors.iter_mut().enumerate() {
        if let Some(ts) = c.advance(&mut out, &batches[i], &inputs[i])? {
            heads.push(Reverse((ts, i)));
        }
    }
    while let Some(Reverse((_, i))) = heads.pop() {
        let c = &mut cursors[i];
        let end = c.batch.marks[c.mark].1;
        out.write_all(&c.batch.out.as_bytes()[c.at..end])?;
        (c.at, c.mark) = (end, c.mark + 1);
        if let Some(ts) = c.advance(&mut out, &batches[i], &inputs[i])? {
            heads.push(Reverse((ts, i)));
        }
    }
    out.flush()
}

/// Where [`merge`] is in one input: its current batch, next record and next error.
#[derive(Default)]
struct Cursor {
    batch: Rendered,
    mark: usize,
    /// Bytes of `batch.out` written.
    at: usize,
    error: usize,
}

impl Cursor {
    /// The time of the input's next record, taking its next batches as needed (`None`
    /// once it has ended); errors before that record are printed.
    fn advance(
        &mut self,
        out: &mut std::io::BufWriter<std::io::Stdout>,
        batches: &Receiver<Rendered>,
        input: &str,
    ) -> std::io::Result<Option<u64>> {
        loop {
            let next = self.batch.marks.get(self.mark);
            let upto = next.map_or(usize::MAX, |m| m.1);
            while let Some((at, message)) = self.batch.errors.get(self.error) {
                if *at >= upto {
                    break;
                }
                out.flush()?;
                eprintln!("tp: {input}: {message}");
                self.error += 1;
            }
            if let Some(&(ts, _)) = next {
                return Ok(Some(ts));
            }
            match batches.recv() {
                Ok(batch) => *self = Cursor { batch, ..Cursor::default() },
                Err(_) => return Ok(None),
            }
        }
    }
}
