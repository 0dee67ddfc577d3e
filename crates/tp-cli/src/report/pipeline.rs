//! Decoding and rendering on several threads. The calling thread merges the CPUs' records
//! and copies the wanted ones into numbered batches (one flat byte buffer per batch);
//! workers (one per extra core, up to [`MAX_WORKERS`]) take batches, render them, and write
//! them to stdout in batch order. When the workers are behind (the queue is full), the
//! calling thread renders the batch itself, so every core renders and none waits. Batches
//! travel through a bounded channel and come back empty for reuse, so memory is a few
//! batches per thread whatever the file's size.

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

/// Events per batch, and record bytes per batch: large enough that the channel costs
/// nothing per event, small enough that a few batches stay well under a megabyte each.
const BATCH_EVENTS: usize = 4096;
const BATCH_BYTES: usize = 512 << 10;
/// Batches queued for the workers besides the ones they render and the one being filled.
const QUEUE: usize = 2;

enum Entry {
    /// Record bytes `data[start..end]` of the batch.
    Event {
        cpu: u32,
        ts: u64,
        start: u32,
        end: u32,
    },
    Lost {
        cpu: u32,
        ts: u64,
        count: Option<u64>,
    },
    /// A decoding error, printed to stderr after the output before it.
    Error(String),
}

#[derive(Default)]
struct Batch {
    data: Vec<u8>,
    entries: Vec<Entry>,
}

impl Batch {
    fn is_full(&self) -> bool {
        self.entries.len() >= BATCH_EVENTS || self.data.len() >= BATCH_BYTES
    }

    fn clear(&mut self) {
        self.data.clear();
        self.entries.clear();
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
    /// Rendering state for the batches this thread renders.
    own: Rendered,
}

impl Feed<'_> {
    /// A record (`ts` already adjusted) to render.
    pub fn event(&mut self, cpu: u32, ts: u64, data: &[u8]) -> Result<(), Closed> {
        let start = self.cur.data.len() as u32;
        self.cur.data.extend_from_slice(data);
        let end = self.cur.data.len() as u32;
        self.cur.entries.push(Entry::Event { cpu, ts, start, end });
        self.send_if_full()
    }

    /// Lost events (`ts` already adjusted).
    pub fn lost(&mut self, cpu: u32, ts: u64, count: Option<u64>) -> Result<(), Closed> {
        self.cur.entries.push(Entry::Lost { cpu, ts, count });
        self.send_if_full()
    }

    /// An error to print (on stderr) once everything before it is written.
    pub fn error(&mut self, message: String) -> Result<(), Closed> {
        self.cur.entries.push(Entry::Error(message));
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
                // The workers are behind: render this one here.
                let written = self.shared.render_and_write(&mut self.own, &job);
                job.batch.clear();
                self.cur = job.batch;
                written.map_err(|_| Closed)
            }
            Err(TrySendError::Disconnected(_)) => Err(Closed),
        }
    }
}

/// Run `produce` on this thread, feeding workers that render in `mode` and write to
/// stdout in batch order (stdout is theirs until this returns). `input` names the file in
/// error messages. Returns what `produce` returned, or a write error.
pub fn run<T>(
    renderer: &Renderer,
    mode: Mode,
    input: &str,
    produce: impl FnOnce(&mut Feed<'_>) -> Result<T, Closed>,
) -> anyhow::Result<Option<T>> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let workers = (cores - 1).clamp(1, MAX_WORKERS);
    let (tx, rx) = mpsc::sync_channel::<Job>(QUEUE);
    // Shared by the workers only: when they have all stopped, sending fails.
    let jobs = Arc::new(Mutex::new(rx));
    let (back_tx, free) = mpsc::channel::<Batch>();
    let shared = Shared { renderer, mode, input, turn: Turn::default() };
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                let (jobs, back, shared) = (jobs.clone(), back_tx.clone(), &shared);
                s.spawn(move || shared.work(&jobs, &back))
            })
            .collect();
        drop((jobs, back_tx));
        let mut feed = Feed {
            tx,
            free,
            cur: Batch::default(),
            seq: 0,
            shared: &shared,
            own: Rendered::default(),
        };
        let mut produced = produce(&mut feed);
        if produced.is_ok() && !feed.cur.entries.is_empty() {
            if let Err(c) = feed.send() {
                produced = Err(c);
            }
        }
        let own_error = feed.own.error.take();
        drop(feed); // closes the channel: the workers finish and return
        let mut result = own_error.map_or(Ok(()), Err);
        for h in handles {
            let written = h.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
            if result.is_ok() {
                result = written;
            }
        }
        result?;
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

/// Whose turn it is to write (batches are written in `seq` order), and whether a write
/// failed (then every worker stops).
#[derive(Default)]
struct Turn {
    state: Mutex<(u64, bool)>,
    cv: Condvar,
}

impl Turn {
    fn lock(&self) -> std::sync::MutexGuard<'_, (u64, bool)> {
        // The state stays consistent even if a holder panicked (the panic is re-raised).
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// What every rendering thread uses.
struct Shared<'a> {
    renderer: &'a Renderer,
    mode: Mode,
    input: &'a str,
    turn: Turn,
}

/// One thread's rendering buffers.
#[derive(Default)]
struct Rendered {
    out: String,
    /// Decoding errors: (bytes of `out` written before it, message).
    errors: Vec<(usize, String)>,
    /// This thread's write error, if its write failed.
    error: Option<std::io::Error>,
}

impl Shared<'_> {
    /// A worker: render and write jobs until the channel closes or a write fails.
    fn work(&self, jobs: &Mutex<Receiver<Job>>, back: &mpsc::Sender<Batch>) -> std::io::Result<()> {
        let mut own = Rendered::default();
        loop {
            // Poisoning only follows a panic elsewhere, which the caller re-raises.
            let job = jobs.lock().map_err(|_| std::io::Error::other("worker panicked"))?.recv();
            let Ok(mut job) = job else { return Ok(()) };
            let written = self.render_and_write(&mut own, &job);
            job.batch.clear();
            let _ = back.send(job.batch);
            if written.is_err() {
                return own.error.take().map_or(Ok(()), Err);
            }
        }
    }

    /// Render `job`, wait for its turn, write it. `Err(())` when this or another thread's
    /// write failed (this thread's error is left in `own.error`).
    fn render_and_write(&self, own: &mut Rendered, job: &Job) -> Result<(), ()> {
        own.out.clear();
        own.errors.clear();
        render_batch(self.renderer, self.mode, &job.batch, &mut own.out, &mut own.errors);
        let turn = &self.turn;
        let mut state = turn.lock();
        while state.0 != job.seq && !state.1 {
            state = turn.cv.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        if state.1 {
            return Err(()); // the thread whose write failed reports it
        }
        drop(state);
        let written = write_batch(&own.out, &own.errors, self.input);
        let mut state = turn.lock();
        match written {
            Ok(()) => state.0 += 1,
            Err(e) => {
                state.1 = true;
                own.error = Some(e);
            }
        }
        turn.cv.notify_all();
        if state.1 {
            Err(())
        } else {
            Ok(())
        }
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

fn render_batch(
    r: &Renderer,
    mode: Mode,
    batch: &Batch,
    out: &mut String,
    errors: &mut Vec<(usize, String)>,
) {
    for e in &batch.entries {
        match *e {
            Entry::Event { cpu, ts, start, end } => {
                let data = &batch.data[start as usize..end as usize];
                match mode {
                    Mode::Text => r.render_line(cpu, ts, data, out),
                    Mode::Raw => {
                        r.write_context(cpu, ts, data, out);
                        r.render_raw(data, out);
                        out.push('\n');
                    }
                    Mode::Json => {
                        r.render_json(cpu, ts, data, out);
                        out.push('\n');
                    }
                }
            }
            Entry::Lost { cpu, ts, count } => match mode {
                Mode::Json => out.push_str(&format!(
                    "{{\"lost\":{},\"cpu\":{cpu},\"ts\":{ts}}}\n",
                    count.map(|c| c.to_string()).unwrap_or_else(|| "null".into()),
                )),
                _ => text::write_lost(out, cpu, count),
            },
            Entry::Error(ref m) => errors.push((out.len(), m.clone())),
        }
    }
}
