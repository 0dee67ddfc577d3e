//! The in-process recorder: per-thread page rings (see `ring`) drained by a
//! background thread into per-thread spool files, assembled into one trace.dat v7 file (see
//! `output`) when the recording ends (drop of the [`Recorder`], [`Recorder::stop`], process exit, or a panic on
//! the main thread).

use crate::chunks::{Budget, OWN_CHUNKS};
use crate::clock::Anchors;
use crate::ctx::{self, ReadGuard, ThreadCtx};
use crate::output::{io_err, Chunker};
pub use crate::output::{RecordError, Stats};
use crate::record::{Common, RecordWriter};
use crate::ring::{PageRing, Ring, GENERATION};
use crate::spool::Spool;
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
    /// A ring built (and its own chunks faulted in) by the background thread, for the next
    /// thread to record: building one costs 1-3 ms here (4 MiB of 4 KiB pages), which would
    /// land on that thread's first event.
    spare: Mutex<Option<PageRing>>,
    pages_per_thread: usize,
    /// The rings' memory, recording-wide.
    budget: Arc<Budget>,
    stop: AtomicBool,
    wake: Arc<Wake>,
    next_cpu: AtomicU64,
}

impl Shared {
    /// A thread's ring, nudging the background thread; with its own chunks ([`OWN_CHUNKS`])
    /// faulted in if `warm` (the background thread's spare; a thread that builds its own
    /// faults pages in as it writes them instead of all at once on its first event).
    /// Smaller than asked if the address space is short; `None` if even two pages are.
    fn new_page_ring(&self, warm: bool) -> Option<PageRing> {
        let mut pages = self.pages_per_thread;
        loop {
            let w = self.wake.clone();
            let nudge: Box<dyn Fn() + Send + Sync> = Box::new(move || w.nudge());
            if let Some(r) = PageRing::with_nudge(pages, self.budget.clone(), Some(nudge)) {
                let keep = if warm { OWN_CHUNKS } else { 0 };
                for _ in 0..keep {
                    r.memory().fault_in_one();
                }
                return Some(r);
            }
            if pages <= 2 {
                return None;
            }
            pages /= 2;
        }
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
    max_memory: usize,
}

impl RecorderBuilder {
    /// Most pages (4 KiB each) in each thread's buffer; default 131072 (512 MiB, about 18
    /// million three-integer events). The buffer is address space reserved when the thread
    /// first records; memory is faulted in only as a burst that comes faster than the
    /// background thread compresses reaches it, and given back after the recording was quiet
    /// for a second, but 4 MiB. When a buffer is full, new events are dropped and counted.
    /// `TP_BUFFER_MB` sets it (in MiB) for [`crate::init_from_env`].
    pub fn pages_per_thread(mut self, n: usize) -> Self {
        self.pages_per_thread = n.max(2);
        self
    }

    /// Most bytes of all threads' buffers faulted in at once beyond each thread's first 4
    /// MiB (which every recording thread has, however many there are); past it, a thread
    /// whose buffer needs more memory drops events (counted). Default: 1 GiB, or an eighth
    /// of the memory available when the recording starts if that is less (`MemAvailable`,
    /// and the memory cgroup's limit less its usage), so that a burst never pushes a small
    /// machine or container into swapping or the OOM killer (but at least 16 MiB). Two
    /// threads each firing a 10-million-event burst took up to about 520 MiB here.
    pub fn max_memory_bytes(mut self, n: usize) -> Self {
        self.max_memory = n;
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
            budget: Arc::new(Budget::new(self.max_memory)),
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
        crate::registry::notify_change();
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
        RecorderBuilder {
            path: path.into(),
            pages_per_thread: 131072,
            compression: Compression::Zstd,
            max_memory: default_max_memory(),
        }
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

/// See [`RecorderBuilder::max_memory_bytes`].
fn default_max_memory() -> usize {
    const CAP: u64 = 1 << 30;
    let kib = |text: &str, key: &str| {
        let line = text.lines().find(|l| l.starts_with(key))?;
        line[key.len()..].trim().trim_end_matches("kB").trim().parse::<u64>().ok()
    };
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mut avail = kib(&meminfo, "MemAvailable:").map_or(u64::MAX, |k| k * 1024);
    // This process's memory cgroup: v1's memory controller, else v2's unified one ("max",
    // no limit, does not parse).
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let read = |path: String| std::fs::read_to_string(path).ok()?.trim().parse::<u64>().ok();
    let limit = if let Some(p) = cgroup.lines().find_map(|l| l.split_once(":memory:")) {
        let dir = format!("/sys/fs/cgroup/memory{}", p.1.trim_end_matches('/'));
        read(format!("{dir}/memory.limit_in_bytes"))
            .zip(read(format!("{dir}/memory.usage_in_bytes")))
    } else if let Some(p) = cgroup.lines().find_map(|l| l.strip_prefix("0::")) {
        let dir = format!("/sys/fs/cgroup{}", p.trim_end_matches('/'));
        read(format!("{dir}/memory.max")).zip(read(format!("{dir}/memory.current")))
    } else {
        None
    };
    if let Some((max, used)) = limit {
        avail = avail.min(max.saturating_sub(used));
    }
    // At least a few threads' first chunks, whatever the machine says.
    (avail / 8).clamp(16 << 20, CAP) as usize
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
    if !record_fast(id, len, &write, true) {
        record_slow(id, len, write);
    }
}

/// [`record_only`] when [`record_fast`] can't take the event.
#[inline(never)]
fn record_slow<W: Fn(&mut RecordWriter, Common)>(id: &AtomicU16, len: usize, write: W) {
    let raw = crate::clock::raw_now();
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
/// no registers to save: returns false, having written nothing (`write` not called),
/// whenever something needs a call (the thread's first event, a new page, a time extend, a
/// nested section, a clock other than the TSC); the caller then takes the full path. With
/// `drop_when_full`, an event that finds the ring still full is dropped here, which may
/// call a function (see [`PageRing::reserve_fast`]); without, it takes the full path.
///
/// [`PageRing::reserve_fast`]: crate::ring::PageRing::reserve_fast
#[inline(always)]
pub(crate) fn record_fast<W: Fn(&mut RecordWriter, Common)>(
    id: &AtomicU16,
    len: usize,
    write: &W,
    drop_when_full: bool,
) -> bool {
    // Read the clock first: its latency overlaps the bookkeeping below. It is the raw clock
    // whenever the reading is used: the recording context is set only when the clock is the
    // TSC (`ctx::set_recording_ctx`).
    let raw_ts = crate::clock::rdtsc();
    let ctx = ctx::recording_ctx();
    if ctx.is_null() {
        return false;
    }
    // SAFETY: non-null only while this thread's context is alive (cleared in its drop).
    let ctx = unsafe { &*ctx };
    // Light readers: the recording context is set only when they are.
    let Some(slot) = ctx.reader.enter_light() else { return false };
    let mut done = false;
    if ctx.rec_gen.get() == GENERATION.load(Ordering::Acquire) {
        let (ring, tid) = (ctx.rec.get(), ctx.cached_tid());
        // SAFETY: the ring of the current generation lives until the recording is finished,
        // which waits for this read section to end; this thread is its only producer. The
        // tid was cached when the thread got its ring (`attach`).
        done = unsafe { (*ring).write_fast(len, raw_ts, id, tid, write, drop_when_full) };
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
    let spare_taken = spare.is_some();
    let pages = match spare {
        Some(r) => r,
        None => sh.new_page_ring(false)?,
    };
    let ring = Arc::new(Ring {
        pages,
        cpu: sh.next_cpu.fetch_add(1, Ordering::Relaxed) as usize,
        tid: ctx.tid(),
        comm: thread_comm(),
    });
    let p = Arc::as_ptr(&ring);
    sh.rings.lock().unwrap_or_else(|e| e.into_inner()).push(ring);
    if spare_taken {
        // The background thread builds the next one (after this ring is in the list: it
        // does not build while a new ring may be starting a burst).
        sh.wake.nudge();
    }
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

/// How often the background thread looks at the rings while events arrive; when none do, it
/// looks less and less often, down to every [`IDLE_POLL`] (a producer that starts a new
/// 2 MiB chunk of its buffer wakes it at once).
const POLL: Duration = Duration::from_millis(1);
const IDLE_POLL: Duration = Duration::from_millis(32);
/// How long the rings must be quiet before the background thread gives the memory of their
/// free chunks back to the kernel, but [`OWN_CHUNKS`] per ring.
const TRIM_AFTER: Duration = Duration::from_secs(1);
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
    let mut last_active = Instant::now();
    let mut trimmed = true;
    let mut n_rings = 0;
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
        let rings: Vec<Arc<Ring>> = sh.rings.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let drained = spool.drain_all(&rings, all);
        fault_ahead(&rings);
        // A thread that just took a ring may be starting a burst.
        let new_ring = rings.len() != n_rings;
        n_rings = rings.len();
        let busy = drained.active || new_ring;
        if busy {
            last_active = Instant::now();
            trimmed = false;
        } else if !trimmed && last_active.elapsed() >= TRIM_AFTER {
            for r in &rings {
                r.pages.memory().trim(OWN_CHUNKS);
            }
            trimmed = true;
        }
        drop(rings);
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
        // Building a ring faults in its own chunks (1-3 ms here): not while pages
        // come, nor on the look that finds a new thread's ring (it may be starting a burst).
        if !busy && sh.spare.lock().unwrap_or_else(|e| e.into_inner()).is_none() {
            if let Some(ring) = sh.new_page_ring(true) {
                *sh.spare.lock().unwrap_or_else(|e| e.into_inner()) = Some(ring);
            }
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
        // Sleep longer the longer no pages came (by time, not by looks: looks come fast while
        // a backlog is compressed, and a thread that fires steadily must not find the
        // background thread asleep for IDLE_POLL when that ends).
        let poll = (last_active.elapsed() / 2).clamp(POLL, IDLE_POLL);
        if !drained.rings_behind {
            sh.wake.wait(poll);
        }
    }
}

/// A ring holding this many pages waiting (2 MiB) may be in a burst that outruns
/// compression: the background thread faults chunks in ahead of its producer, about as many
/// as wait (at most [`AHEAD_MAX`]), [`AHEAD_STEP`] per look. The producer then writes into
/// memory that is there instead of stopping to fault it in: on this project's VM a
/// 10-million-event burst cost 10.2-11.8 ns/event instead of 14.7-15.5 (0.0-1.6 instead of
/// 3.2-6.0 ns of it in the kernel), with 240-290 MiB faulted in at most instead of 136-144;
/// starting at 2 MiB instead of 8, 32 chunks a look instead of 16: 9.8-10.1 against
/// 10.0-12.3 ns (5 interleaved runs).
const AHEAD_FROM: usize = 512;
const AHEAD_MAX: usize = 64;
const AHEAD_STEP: usize = 32;

fn fault_ahead(rings: &[Arc<Ring>]) {
    for r in rings {
        let ready = r.pages.ready();
        if ready < AHEAD_FROM {
            continue;
        }
        let m = r.pages.memory();
        let want = (ready / m.pages_per_chunk()).min(AHEAD_MAX);
        for _ in 0..AHEAD_STEP {
            if m.warm_free() >= want || !m.fault_in_one() {
                break;
            }
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
    crate::registry::notify_change();
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
    let peak = act.shared.budget.peak() as u64;
    Some(crate::output::write(&act.path, act.compression, spool.finish(peak)))
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
