//! Decoding and rendering on several threads. The calling thread merges the CPUs' records
//! and copies the wanted ones into numbered batches (one flat byte buffer per batch);
//! workers (one per core, up to [`MAX_WORKERS`]) take batches, render them, and write them
//! to stdout in batch order. Batches travel through a bounded channel and come back empty
//! for reuse, so memory is a few batches per worker whatever the file's size.

use std::io::Write;
use std::sync::mpsc::{self, Receiver, SyncSender};
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

/// The producer's end: collects entries into batches and hands full ones to the worker.
pub struct Feed {
    tx: SyncSender<Job>,
    free: Receiver<Batch>,
    cur: Batch,
    /// Sequence number of `cur`.
    seq: u64,
}

impl Feed {
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
        self.tx.send(Job { seq: self.seq, batch }).map_err(|_| Closed)?;
        self.seq += 1;
        Ok(())
    }
}

/// Run `produce` on this thread, feeding workers that render in `mode` and write to
/// stdout in batch order (stdout is theirs until this returns). `input` names the file in
/// error messages. Returns what `produce` returned, or a worker's write error.
pub fn run<T>(
    renderer: &Renderer,
    mode: Mode,
    input: &str,
    produce: impl FnOnce(&mut Feed) -> Result<T, Closed>,
) -> anyhow::Result<Option<T>> {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, MAX_WORKERS);
    let (tx, rx) = mpsc::sync_channel::<Job>(QUEUE);
    // Shared by the workers only: when they have all stopped, sending fails.
    let jobs = Arc::new(Mutex::new(rx));
    let (back_tx, free) = mpsc::channel::<Batch>();
    let turn = Turn::default();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                let (jobs, back, turn) = (jobs.clone(), back_tx.clone(), &turn);
                s.spawn(move || work(renderer, mode, input, &jobs, turn, &back))
            })
            .collect();
        drop((jobs, back_tx));
        let mut feed = Feed { tx, free, cur: Batch::default(), seq: 0 };
        let mut produced = produce(&mut feed);
        if produced.is_ok() && !feed.cur.entries.is_empty() {
            if let Err(c) = feed.send() {
                produced = Err(c);
            }
        }
        drop(feed); // closes the channel: the workers finish and return
        let mut result = Ok(());
        for h in handles {
            let written = h.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
            if result.is_ok() {
                result = written;
            }
        }
        result?;
        std::io::stdout().flush()?;
        // `Closed` without a worker error cannot happen; treat it as "nothing more".
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

fn work(
    r: &Renderer,
    mode: Mode,
    input: &str,
    jobs: &Mutex<Receiver<Job>>,
    turn: &Turn,
    back: &mpsc::Sender<Batch>,
) -> std::io::Result<()> {
    let mut out = String::new();
    // Decoding errors: (bytes of `out` written before it, message).
    let mut errors = Vec::new();
    loop {
        // Poisoning only follows a panic elsewhere, which the caller re-raises.
        let job = jobs.lock().map_err(|_| std::io::Error::other("worker panicked"))?.recv();
        let Ok(Job { seq, mut batch }) = job else { return Ok(()) };
        out.clear();
        errors.clear();
        render_batch(r, mode, &batch, &mut out, &mut errors);
        batch.clear();
        let _ = back.send(batch);
        let mut state = turn.state.lock().map_err(|_| std::io::Error::other("worker panicked"))?;
        while state.0 != seq && !state.1 {
            state = turn.cv.wait(state).map_err(|_| std::io::Error::other("worker panicked"))?;
        }
        if state.1 {
            return Ok(()); // the worker whose write failed reports it
        }
        drop(state);
        let written = write_batch(&out, &errors, input);
        let mut state = turn.state.lock().map_err(|_| std::io::Error::other("worker panicked"))?;
        match written {
            Ok(()) => state.0 += 1,
            Err(_) => state.1 = true,
        }
        turn.cv.notify_all();
        written?;
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
