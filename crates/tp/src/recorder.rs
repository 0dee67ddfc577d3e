//! The in-process recorder: per-thread page rings (see [`crate::ring`]) drained by a
//! background thread into per-thread spool files, assembled into one trace.dat v7 file (see
//! `output`) when the recording ends (drop of the [`Recorder`], [`Recorder::stop`], process exit, or a panic on
//! the main thread).

use crate::clock::{Anchors, Conversion};
use crate::ctx::{self, ReadGuard, ThreadCtx};
use crate::output::{io_err, Chunker, Spooled, Stream};
pub use crate::output::{RecordError, Stats};
use crate::record::{Common, RecordWriter};
use crate::ring::{convert_page, PageRing, Ring, GENERATION, PAGE_SIZE};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Once};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
pub use tp_format::tracedat::Compression;

static NEXT_GEN: AtomicU64 = AtomicU64::new(1);
static ACTIVE: Mutex<Option<Active>> = Mutex::new(None);

struct Shared {
    rings: Mutex<Vec<Arc<Ring>>>,
    /// A ring built (and its pages faulted in) by the background thread, for the next thread
    /// to record: building one costs about 0.1 ms, which would land on that thread's first event.
    spare: Mutex<Option<PageRing>>,
    pages_per_thread: usize,
    stop: AtomicBool,
    wake: Arc<Wake>,
    next_cpu: AtomicU64,
}

impl Shared {
    /// A thread's ring, its pages written (faulted in), nudging the background thread.
    fn new_page_ring(&self) -> PageRing {
        let w = self.wake.clone();
        PageRing::with_nudge(self.pages_per_thread, Some(Box::new(move || w.nudge())))
    }
}

struct Active {
    gen: u64,
    shared: Arc<Shared>,
    drain: Option<JoinHandle<Spool>>,
    path: PathBuf,
    compression: Compression,
    started: Instant,
}

/// Builder for a [`Recorder`].
#[derive(Debug, Clone)]
pub struct RecorderBuilder {
    path: PathBuf,
    pages_per_thread: usize,
    compression: Compression,
}

impl RecorderBuilder {
    /// Pages (4 KiB each) in each thread's buffer; default 256 (1 MiB). When the background
    /// thread falls behind and a buffer is full, new events are dropped and counted.
    pub fn pages_per_thread(mut self, n: usize) -> Self {
        self.pages_per_thread = n.max(2);
        self
    }

    /// Compression of the trace.dat v7 file. Default zstd: the background thread compresses
    /// pages as it takes them (at a fast level), so it writes several times fewer bytes than
    /// are recorded, and the file is assembled by copying. `None` writes pages as they are;
    /// zlib (slower) compresses them when the file is assembled. `TP_COMPRESS=none|zstd|zlib`
    /// sets it for [`crate::init_from_env`].
    pub fn compression(mut self, c: Compression) -> Self {
        self.compression = c;
        self
    }

    /// Start recording every enabled tracepoint.
    pub fn start(self) -> Result<Recorder, RecordError> {
        crate::registry::init();
        crate::clock::init();
        let mut act = ACTIVE.lock().unwrap_or_else(|e| e.into_inner());
        if act.is_some() {
            return Err(RecordError::AlreadyRecording);
        }
        let spool_dir = spool_dir(&self.path);
        std::fs::create_dir_all(&spool_dir).map_err(io_err(&spool_dir, "create directory"))?;
        let shared = Arc::new(Shared {
            rings: Mutex::new(Vec::new()),
            spare: Mutex::new(None),
            pages_per_thread: self.pages_per_thread,
            stop: AtomicBool::new(false),
            wake: Arc::new(Wake::default()),
            next_cpu: AtomicU64::new(0),
        });
        let gen = NEXT_GEN.fetch_add(1, Ordering::Relaxed);
        let sh = shared.clone();
        let mut anchors = Anchors::default();
        anchors.add();
        let chunker = match self.compression {
            Compression::Zstd => {
                Some(Chunker::new().map_err(io_err(&self.path, "start zstd compression for"))?)
            }
            // zlib is too slow to keep up: the pages are compressed when the file is
            // assembled.
            Compression::None | Compression::Zlib => None,
        };
        let spool = Spool::new(spool_dir.clone(), anchors, chunker);
        let drain = std::thread::Builder::new()
            .name("tp-recorder".into())
            .spawn(move || drain_loop(sh, spool))
            .map_err(io_err(&self.path, "spawn recorder thread for"))?;
        let _ = shared.wake.thread.set(drain.thread().clone());
        *act = Some(Active {
            gen,
            shared,
            drain: Some(drain),
            path: self.path.clone(),
            compression: self.compression,
            started: Instant::now(),
        });
        GENERATION.store(gen, Ordering::Release);
        // Under ACTIVE (lock order ACTIVE -> control), so a concurrent finish of an older
        // recording can't clear this one's state bits.
        crate::registry::set_recording(true);
        drop(act);
        install_exit_hooks();
        Ok(Recorder { gen, done: false })
    }
}

/// A running recording; the file is complete when this is dropped or [`stopped`](Self::stop).
#[derive(Debug)]
pub struct Recorder {
    gen: u64,
    done: bool,
}

impl Recorder {
    /// Record into `path` (see the crate docs for the file format).
    pub fn builder(path: impl Into<PathBuf>) -> RecorderBuilder {
        RecorderBuilder { path: path.into(), pages_per_thread: 256, compression: Compression::Zstd }
    }

    /// Start recording into `path` with default settings.
    pub fn start(path: impl Into<PathBuf>) -> Result<Recorder, RecordError> {
        Recorder::builder(path).start()
    }

    /// Events dropped so far because a buffer was full.
    pub fn lost(&self) -> u64 {
        with_active(self.gen, |a| {
            a.shared
                .rings
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .map(|r| r.pages.lost())
                .sum()
        })
        .unwrap_or(0)
    }

    /// Stop, write the file, and say what it holds.
    pub fn stop(mut self) -> Result<Stats, RecordError> {
        self.done = true;
        finish(Some(self.gen)).unwrap_or(Ok(Stats::default()))
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        if !self.done {
            if let Some(Err(e)) = finish(Some(self.gen)) {
                eprintln!("tp: recorder: {e}");
            }
        }
    }
}

fn with_active<R>(gen: u64, f: impl FnOnce(&Active) -> R) -> Option<R> {
    let a = ACTIVE.lock().unwrap_or_else(|e| e.into_inner());
    a.as_ref().filter(|a| a.gen == gen).map(f)
}

fn spool_dir(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".tp-spool");
    PathBuf::from(s)
}

/// The recorder-only path of an event (the site's one call when only the recorder
/// listens): the event ID in `id`, a `len`-byte record that `write` fills.
#[inline(always)]
pub(crate) fn record_only<W: Fn(&mut RecordWriter, Common)>(id: &AtomicU16, len: usize, write: W) {
    // Read the clock first: its latency overlaps the bookkeeping below.
    let raw = crate::clock::raw_now_tsc();
    if let Some(raw) = raw {
        if record_fast(id, len, &write, raw) {
            return;
        }
    }
    record_slow(id, len, write, raw);
}

/// [`record_only`] when [`record_fast`] can't take the event (or the clock is
/// `clock_gettime`: `raw` is `None`).
#[inline(never)]
fn record_slow<W: Fn(&mut RecordWriter, Common)>(
    id: &AtomicU16,
    len: usize,
    write: W,
    raw: Option<u64>,
) {
    let raw = raw.unwrap_or_else(crate::clock::raw_now);
    ctx::with(|ctx| {
        let _g = ReadGuard::new(ctx);
        record(ctx, id, len, &write, raw);
    });
}

/// Record one event into the calling thread's ring (inside a read section). Returns the
/// record and its raw timestamp.
#[inline(always)]
pub(crate) fn record<W: Fn(&mut RecordWriter, Common)>(
    ctx: &ThreadCtx,
    id: &AtomicU16,
    len: usize,
    write: &W,
    raw_ts: u64,
) -> Option<(*const u8, u64)> {
    let gen = GENERATION.load(Ordering::Acquire);
    let ring = if ctx.rec_gen.get() == gen { ctx.rec.get() } else { attach(ctx, gen)? };
    // Pages hold raw readings, converted to ns when the file is written (`output`).
    let ts = raw_ts;
    // SAFETY: the ring of the current generation lives until the recording is finished,
    // which waits for this read section to end.
    let ring = unsafe { &*ring };
    // SAFETY: this thread is the ring's only producer.
    let dst = unsafe { ring.write(len, ts, id, ctx.tid(), write)? };
    Some((dst, ts))
}

/// [`record`] with no call at all, so the common case compiles to straight-line code with
/// no registers to save: returns false, having written nothing, whenever something needs
/// a call (the thread's first event, a new page, a time extend, a nested section); the
/// caller then takes the full path.
#[inline(always)]
fn record_fast<W: Fn(&mut RecordWriter, Common)>(
    id: &AtomicU16,
    len: usize,
    write: &W,
    raw_ts: u64,
) -> bool {
    let ctx = ctx::recording_ctx();
    if ctx.is_null() {
        return false;
    }
    // SAFETY: non-null only while this thread's context is alive (cleared in its drop).
    let ctx = unsafe { &*ctx };
    let Some(slot) = ctx.reader.enter_fast() else { return false };
    let mut done = false;
    if ctx.rec_gen.get() == GENERATION.load(Ordering::Acquire) {
        // SAFETY: the ring of the current generation lives until the recording is finished,
        // which waits for this read section to end; this thread is its only producer. The
        // tid was cached when the thread got its ring (`attach`).
        done = unsafe { (*ctx.rec.get()).write_fast(len, raw_ts, id, ctx.cached_tid(), write) };
    }
    ctx::exit_read_section(slot);
    done
}

#[cold]
#[inline(never)]
fn attach(ctx: &ThreadCtx, gen: u64) -> Option<*const Ring> {
    if gen == 0 {
        return None;
    }
    // Blocking is fine: no holder of ACTIVE waits for read sections while holding it.
    let sh = {
        let act = ACTIVE.lock().unwrap_or_else(|e| e.into_inner());
        act.as_ref().filter(|a| a.gen == gen)?.shared.clone()
    };
    // Allocate outside the lock; `finish` can't take the rings before this read section ends.
    let spare = sh.spare.lock().unwrap_or_else(|e| e.into_inner()).take();
    if spare.is_some() {
        // The background thread builds the next one.
        sh.wake.nudge();
    }
    let ring = Arc::new(Ring {
        pages: spare.unwrap_or_else(|| sh.new_page_ring()),
        cpu: sh.next_cpu.fetch_add(1, Ordering::Relaxed) as usize,
        tid: ctx.tid(),
        comm: thread_comm(),
    });
    let p = Arc::as_ptr(&ring);
    sh.rings.lock().unwrap_or_else(|e| e.into_inner()).push(ring);
    ctx.rec.set(p);
    ctx.rec_gen.set(gen);
    ctx::set_recording_ctx(ctx);
    Some(p)
}

fn thread_comm() -> String {
    let name = std::fs::read_to_string("/proc/thread-self/comm").unwrap_or_default();
    let name = name.trim();
    if name.is_empty() {
        std::thread::current().name().unwrap_or("rust").chars().take(15).collect()
    } else {
        name.to_string()
    }
}

/// Per-stream spool files, filled by the background thread: each page it takes gets its
/// timestamps converted to ns (`ring::convert_page`), then goes to the file as it is or in
/// compressed trace.dat v7 chunks, so that the file is assembled by copying (in `output`).
struct Spool {
    dir: PathBuf,
    /// Clock calibration points over the recording, and the conversion they give.
    anchors: Anchors,
    conv: Conversion,
    /// Compresses pages (zstd), or none: pages are stored as they are.
    chunker: Option<Chunker>,
    /// Indexed by stream number.
    streams: Vec<Option<(File, Stream)>>,
    error: Option<RecordError>,
    /// Full pages left in the rings after the last `drain_all`.
    waiting: usize,
}

impl Spool {
    fn new(dir: PathBuf, anchors: Anchors, chunker: Option<Chunker>) -> Spool {
        let conv = anchors.conversion();
        Spool { dir, anchors, conv, chunker, streams: Vec::new(), error: None, waiting: 0 }
    }

    /// Take a clock calibration point: later pages convert with it.
    fn anchor(&mut self) {
        self.anchors.add();
        self.conv = self.anchors.conversion();
    }

    /// Append a run of whole pages of `ring` to its spool file.
    fn pages(&mut self, ring: &Ring, run: &mut [u8]) {
        if self.error.is_none() {
            if let Err(e) = self.append(ring, run) {
                self.error = Some(e);
            }
        }
    }

    fn append(&mut self, ring: &Ring, run: &mut [u8]) -> Result<(), RecordError> {
        if self.streams.len() <= ring.cpu {
            self.streams.resize_with(ring.cpu + 1, || None);
        }
        let (file, stream) = match &mut self.streams[ring.cpu] {
            Some(s) => s,
            slot => {
                let spool = self.dir.join(format!("cpu{}", ring.cpu));
                let f = File::create(&spool).map_err(io_err(&spool, "create"))?;
                let s = Stream {
                    spool,
                    pages: 0,
                    events: 0,
                    tid: ring.tid,
                    comm: ring.comm.clone(),
                    lost: 0,
                    last_ns: 0,
                };
                slot.insert((f, s))
            }
        };
        for page in run.chunks_exact_mut(PAGE_SIZE) {
            convert_page(page, &mut stream.last_ns, |raw| self.conv.ns(raw));
        }
        let bytes = match &mut self.chunker {
            Some(c) => c.chunks(run).map_err(io_err(&stream.spool, "compress pages for"))?,
            None => run,
        };
        file.write_all(bytes).map_err(io_err(&stream.spool, "write"))?;
        stream.pages += (run.len() / PAGE_SIZE) as u64;
        Ok(())
    }

    /// Take the counters of `ring`: events in its finished pages, events dropped.
    fn count(&mut self, ring: &Ring) {
        if let Some(Some((_, s))) = self.streams.get_mut(ring.cpu) {
            s.events = ring.pages.events();
            s.lost = ring.pages.lost();
        }
    }

    /// Drain a ring whose producer is gone for good.
    fn drain_closed(&mut self, r: &Ring) {
        r.pages.drain(|p| self.pages(r, p));
        self.count(r);
    }

    /// Take the full pages of every ring that holds a batch of them, or of every ring when
    /// `all`.
    fn drain_all(&mut self, sh: &Shared, all: bool) -> Drained {
        let rings: Vec<Arc<Ring>> = sh.rings.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let mut d = Drained::default();
        let mut waiting = 0;
        for r in &rings {
            let cap = r.pages.capacity();
            let ready = r.pages.ready();
            if all || ready >= batch_pages(cap) {
                d.active |= r.pages.drain(|p| self.pages(r, p)) > 0;
                self.count(r);
            }
            let left = r.pages.ready();
            waiting += left;
            d.behind |= left > cap / 2;
        }
        // Pages arrived since the last look (taken, or more left waiting than then).
        d.active |= waiting > self.waiting;
        self.waiting = waiting;
        d
    }
}

#[derive(Default)]
struct Drained {
    /// Full pages arrived since the previous call.
    active: bool,
    /// Some ring is still more than half full.
    behind: bool,
}

/// The background thread takes a ring's pages once this many are full (or every
/// [`MAX_HOLD`]): one write per batch instead of one per page. Big writes cost less per page,
/// and a consumer taking each page right behind the producer measured slower producers (about
/// 20 instead of 12.5 ns/event in runs where it kept up page by page, before the producer's
/// and consumer's cache lines were separated too).
fn batch_pages(capacity: usize) -> usize {
    (capacity / 4).clamp(1, 256)
}

/// How often the background thread looks at the rings while events arrive; when none do, it
/// looks less and less often, down to every [`IDLE_POLL`] (a producer whose ring is half
/// full wakes it at once).
const POLL: Duration = Duration::from_millis(1);
const IDLE_POLL: Duration = Duration::from_millis(32);
/// How often the background thread takes a clock calibration point.
const ANCHOR_EVERY: Duration = Duration::from_secs(1);

/// Wakes the background thread without a lock (producers call it, see `PageRing`): it
/// sleeps in `park_timeout`, which an `unpark` ends early.
#[derive(Default)]
struct Wake {
    thread: std::sync::OnceLock<std::thread::Thread>,
}

impl Wake {
    fn nudge(&self) {
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
    }

    /// Sleep until nudged or `timeout` passed (or spuriously: callers just look again).
    fn wait(&self, timeout: Duration) {
        std::thread::park_timeout(timeout);
    }
}

/// Longest time full pages wait in a ring before they are written.
const MAX_HOLD: Duration = Duration::from_millis(100);

fn drain_loop(sh: Arc<Shared>, mut spool: Spool) -> Spool {
    let mut last_anchor = Instant::now();
    let start = Instant::now();
    let mut next_cal = Duration::from_millis(100);
    let mut last_all = Instant::now();
    let mut poll = POLL;
    loop {
        let stopping = sh.stop.load(Ordering::Acquire);
        if stopping {
            // After every event: the pages left convert between points.
            spool.anchor();
        }
        let all = stopping || last_all.elapsed() >= MAX_HOLD;
        if all {
            last_all = Instant::now();
        }
        let drained = spool.drain_all(&sh, all);
        // Retire rings of exited threads once drained.
        let closed: Vec<Arc<Ring>> = {
            let mut rings = sh.rings.lock().unwrap_or_else(|e| e.into_inner());
            let (c, open): (Vec<_>, Vec<_>) =
                rings.drain(..).partition(|r| r.pages.closed.load(Ordering::Acquire));
            *rings = open;
            c
        };
        if !closed.is_empty() {
            for r in &closed {
                spool.drain_closed(r);
            }
            ctx::synchronize();
            drop(closed);
        }
        if stopping {
            return spool;
        }
        if sh.spare.lock().unwrap_or_else(|e| e.into_inner()).is_none() {
            let ring = sh.new_page_ring();
            *sh.spare.lock().unwrap_or_else(|e| e.into_inner()) = Some(ring);
        }
        if start.elapsed() >= next_cal {
            crate::clock::recalibrate();
            next_cal *= 4;
            // A second point early, so pages convert with a measured rate.
            spool.anchor();
        }
        if last_anchor.elapsed() >= ANCHOR_EVERY {
            spool.anchor();
            last_anchor = Instant::now();
        }
        poll = if drained.active { POLL } else { (poll * 2).min(IDLE_POLL) };
        if !drained.behind {
            sh.wake.wait(poll);
        }
    }
}

/// End the recording `gen` (or whichever runs, for `None`) and write the file.
fn finish(gen: Option<u64>) -> Option<Result<Stats, RecordError>> {
    let mut act = {
        let mut g = ACTIVE.lock().unwrap_or_else(|e| e.into_inner());
        match (g.as_ref(), gen) {
            (Some(a), Some(want)) if a.gen != want => return None,
            (None, _) => return None,
            _ => {}
        }
        let a = g.take()?;
        GENERATION.store(0, Ordering::Release);
        crate::registry::set_recording(false);
        a
    };
    // After this, no producer is inside a read section that saw the old generation.
    ctx::synchronize();
    act.shared.stop.store(true, Ordering::Release);
    act.shared.wake.nudge();
    let mut spool = match act.drain.take().map(|h| h.join()) {
        Some(Ok(s)) => s,
        _ => {
            return Some(Err(RecordError::Io {
                path: act.path.clone(),
                op: "join recorder thread for",
                source: std::io::Error::other("recorder thread panicked"),
            }))
        }
    };
    // The producers are quiescent: close every ring's partial page and take the rest.
    let rings: Vec<Arc<Ring>> =
        std::mem::take(&mut *act.shared.rings.lock().unwrap_or_else(|e| e.into_inner()));
    for r in &rings {
        // SAFETY: no producer can touch the ring any more (generation retired, grace period
        // passed), so this thread may act as its producer.
        unsafe { r.pages.close() };
        spool.drain_closed(r);
    }
    let _ = act.started;
    Some(crate::output::write(&act.path, act.compression, spool_into_streams(spool)))
}

fn spool_into_streams(spool: Spool) -> Result<Spooled, RecordError> {
    if let Some(e) = spool.error {
        return Err(e);
    }
    // Closing the files is all the flushing they need (no user-space buffers).
    let streams = spool.streams.into_iter().flatten().map(|(_, s)| s).collect();
    Ok(Spooled { dir: spool.dir, streams, chunked: spool.chunker.is_some() })
}

fn install_exit_hooks() {
    static HOOKS: Once = Once::new();
    HOOKS.call_once(|| {
        extern "C" fn at_exit() {
            if let Some(Err(e)) = finish(None) {
                eprintln!("tp: recorder at exit: {e}");
            }
        }
        // SAFETY: `at_exit` is a plain extern "C" fn that lives for the whole program.
        unsafe { libc::atexit(at_exit) };
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            prev(info);
            let main = std::thread::current().name() == Some("main");
            if main || cfg!(panic = "abort") {
                if let Some(Err(e)) = finish(None) {
                    eprintln!("tp: recorder after panic: {e}");
                }
            }
        }));
    });
}

/// Is a recording running?
pub fn is_recording() -> bool {
    GENERATION.load(Ordering::Relaxed) != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same pages spooled compressed and as they are: the chunks decompress to exactly
    /// the uncompressed spool (timestamps converted the same way), in chunks of whole pages.
    #[test]
    fn compressed_spool_holds_the_same_pages() {
        let ring =
            Ring { pages: PageRing::with_nudge(300, None), cpu: 0, tid: 7, comm: "t".into() };
        for i in 0..30_000u64 {
            // SAFETY: this test is the only producer.
            let dst = unsafe { ring.pages.reserve(24, 1_000 + i * 37 + (i % 5)) }.unwrap();
            // SAFETY: `reserve` gave 24 writable bytes.
            unsafe { std::ptr::copy_nonoverlapping(i.to_le_bytes().as_ptr(), dst.add(8), 8) };
        }
        // SAFETY: as above.
        unsafe { ring.pages.finish_page() };
        let mut pages = Vec::new();
        ring.pages.drain(|run| pages.extend_from_slice(run));
        assert!(pages.len() / PAGE_SIZE > 2 * crate::output::CHUNK_PAGES);

        let dir = std::env::temp_dir().join(format!("tp-spool-test-{}", std::process::id()));
        let spooled = |chunker: Option<Chunker>, name: &str| {
            let d = dir.join(name);
            std::fs::create_dir_all(&d).unwrap();
            // Half a ns per raw unit.
            let anchors = Anchors::with_points(vec![(0, 10), (2_000_000, 1_000_010)]);
            let mut spool = Spool::new(d.clone(), anchors, chunker);
            let mut copy = pages.clone();
            // In two runs, as the background thread takes them.
            let (a, b) = copy.split_at_mut(5 * PAGE_SIZE);
            spool.pages(&ring, a);
            spool.pages(&ring, b);
            assert!(spool.error.is_none());
            std::fs::read(d.join("cpu0")).unwrap()
        };
        let plain = spooled(None, "plain");
        let packed = spooled(Some(Chunker::new().unwrap()), "packed");
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(plain.len(), pages.len());
        assert_ne!(plain, pages, "timestamps were converted");
        assert!(packed.len() * 3 < plain.len(), "{} -> {}", plain.len(), packed.len());
        let mut unpacked = Vec::new();
        let mut at = 0;
        while at < packed.len() {
            let word = |o: usize| u32::from_le_bytes(packed[o..o + 4].try_into().unwrap()) as usize;
            let (zsize, size) = (word(at), word(at + 4));
            assert!(size % PAGE_SIZE == 0 && size <= crate::output::CHUNK_PAGES * PAGE_SIZE);
            let frame = &packed[at + 8..at + 8 + zsize];
            unpacked.extend(zstd::bulk::decompress(frame, size).unwrap());
            at += 8 + zsize;
        }
        assert_eq!(unpacked, plain);
    }
}
