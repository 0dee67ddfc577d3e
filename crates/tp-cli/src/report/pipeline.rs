//! Decoding and rendering on two threads. The calling thread merges the CPUs' records and
//! copies the wanted ones into batches (one flat byte buffer per batch); a worker renders
//! each batch and writes it to stdout, batches in order. Batches travel through a bounded
//! channel and come back empty for reuse, so memory is a few batches whatever the file's
//! size.

use std::io::Write;
use std::sync::mpsc::{self, Receiver, SyncSender};

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
/// Batches queued for the worker besides the one it renders and the one being filled.
const QUEUE: usize = 2;
/// Rendered text is written out in pieces of about this size.
const WRITE_CHUNK: usize = 1 << 16;

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

/// The worker stopped (its write failed); its error comes from [`run`].
pub struct Closed;

/// The producer's end: collects entries into batches and hands full ones to the worker.
pub struct Feed {
    tx: SyncSender<Batch>,
    free: Receiver<Batch>,
    cur: Batch,
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
        let full = std::mem::replace(&mut self.cur, next);
        self.tx.send(full).map_err(|_| Closed)
    }
}

/// Run `produce` on this thread, feeding a worker that renders in `mode` and writes to
/// stdout (stdout is the worker's until this returns). `input` names the file in error
/// messages. Returns what `produce` returned, or the worker's write error.
pub fn run<T>(
    renderer: &Renderer,
    mode: Mode,
    input: &str,
    produce: impl FnOnce(&mut Feed) -> Result<T, Closed>,
) -> anyhow::Result<Option<T>> {
    let (tx, rx) = mpsc::sync_channel::<Batch>(QUEUE);
    let (back_tx, free) = mpsc::channel::<Batch>();
    std::thread::scope(|s| {
        let worker = s.spawn(move || render_batches(renderer, mode, input, rx, back_tx));
        let mut feed = Feed { tx, free, cur: Batch::default() };
        let mut produced = produce(&mut feed);
        if produced.is_ok() && !feed.cur.entries.is_empty() {
            if let Err(c) = feed.send() {
                produced = Err(c);
            }
        }
        drop(feed); // closes the channel: the worker finishes and returns
        let written = worker.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
        written?;
        // `Closed` without a worker error cannot happen; treat it as "nothing more".
        Ok(produced.ok())
    })
}

fn render_batches(
    r: &Renderer,
    mode: Mode,
    input: &str,
    rx: Receiver<Batch>,
    back: mpsc::Sender<Batch>,
) -> std::io::Result<()> {
    let stdout = std::io::stdout();
    let mut lock = stdout.lock();
    let mut out = String::with_capacity(2 * WRITE_CHUNK);
    for mut batch in rx {
        for e in &batch.entries {
            match *e {
                Entry::Event { cpu, ts, start, end } => {
                    let data = &batch.data[start as usize..end as usize];
                    match mode {
                        Mode::Text => r.render_line(cpu, ts, data, &mut out),
                        Mode::Raw => {
                            r.write_context(cpu, ts, data, &mut out);
                            r.render_raw(data, &mut out);
                            out.push('\n');
                        }
                        Mode::Json => {
                            r.render_json(cpu, ts, data, &mut out);
                            out.push('\n');
                        }
                    }
                }
                Entry::Lost { cpu, ts, count } => match mode {
                    Mode::Json => out.push_str(&format!(
                        "{{\"lost\":{},\"cpu\":{cpu},\"ts\":{ts}}}\n",
                        count.map(|c| c.to_string()).unwrap_or_else(|| "null".into()),
                    )),
                    _ => text::write_lost(&mut out, cpu, count),
                },
                Entry::Error(ref m) => {
                    // Keep going: every complete page is printed, then what was cut is said.
                    lock.write_all(out.as_bytes())?;
                    lock.flush()?;
                    out.clear();
                    eprintln!("tp: {input}: {m}");
                }
            }
            if out.len() >= WRITE_CHUNK {
                lock.write_all(out.as_bytes())?;
                out.clear();
            }
        }
        batch.clear();
        let _ = back.send(batch);
    }
    lock.write_all(out.as_bytes())?;
    lock.flush()
}
