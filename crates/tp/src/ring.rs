//! Per-thread buffers of kernel-format ring-buffer pages (see `events/header_page` and
//! `events/header_event`): a 16-byte page header (u64 timestamp, u64 commit), then events
//! with a 4-byte header of 5-bit `type_len` and 27-bit `time_delta`, 4-byte aligned.
//!
//! Timestamps are written in raw clock units ([`crate::clock::raw_now`]: TSC ticks) and
//! rewritten in place to CLOCK_MONOTONIC ns by [`convert_page`] when the recording's file is
//! assembled, which keeps the conversion off the hot path and off the background thread.
//!
//! One producer (the owning thread) fills pages; one consumer (the recorder's background
//! thread) takes full ones. `head` counts pages the producer finished, `tail` pages the
//! consumer took. The pages live in chunks (`crate::chunks`: 2 MiB each, faulted in when
//! first written); page `i` is page `i % per_chunk` of the chunk the producer claimed for
//! chunk number `i / per_chunk` (recorded in `seq`). When the producer needs a chunk and none
//! is free, the event is dropped and counted, and the next page the producer finishes
//! carries the count in its commit word (the kernel's `RB_MISSED_EVENTS` /
//! `RB_MISSED_STORED`).

use crate::chunks::{Budget, Chunks};
use crate::record::{self, Common, RecordWriter};
use std::cell::UnsafeCell;
use std::sync::atomic::AtomicU16;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use tp_format::page::{entry_at, set_delta, EntryKind, Page, PageLayout};
use tp_format::page::{RB_MISSED_EVENTS, RB_MISSED_STORED};

/// The recorder's pages: this machine's kernel layout (x86_64, little-endian), which
/// `tp_format::page` decodes.
const LAYOUT: PageLayout = PageLayout::X86_64;
pub use crate::chunks::PAGE_SIZE;
pub const PAGE_HEADER: usize = LAYOUT.header.data_offset;
pub const PAGE_DATA: usize = PAGE_SIZE - PAGE_HEADER;
const MAX_SMALL_DATA: usize = 28 * 4;
const TYPE_TIME_EXTEND: u32 = 30;
const DELTA_BITS: u32 = 27;

/// Producer-only state.
struct Producer {
    page: Option<usize>,
    /// Start of the current page (valid while `page` is `Some`).
    cur: *mut u8,
    off: usize,
    /// `PAGE_DATA` while `page` is `Some`, else 0 (so the fast path needs one test).
    limit: usize,
    last_ts: u64,
    pending_lost: u64,
    /// Chunk numbers claimed so far (a chunk is claimed when its first page starts), and
    /// the first byte of the last one.
    claimed: usize,
    chunk: *mut u8,
}

/// What [`PageRing::reserve_fast`] did.
pub enum Fast {
    /// Room for the record, here.
    Reserved(*mut u8),
    /// The ring is full: the event was dropped and counted.
    Dropped,
    /// Needs [`PageRing::reserve`]'s slow path (nothing was done).
    Slow,
}

/// Keeps `T` on cache lines of its own (two lines: the CPU fetches lines in pairs), so one
/// side's writes never invalidate a line the other side is using.
#[repr(C, align(128))]
struct Line<T>(T);

impl<T> std::ops::Deref for Line<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// One thread's pages.
///
/// The producer's per-event state, the producer's per-page counters and the consumer's
/// position each have their own cache lines: the consumer polls `head` while the producer
/// writes events, and a line both touch would move between the cores on every event.
#[repr(C)]
pub struct PageRing {
    /// Producer-only state, touched on every event.
    prod: Line<UnsafeCell<Producer>>,
    /// Written by the producer once per page (or per dropped event), read by the consumer.
    shared_prod: Line<ProducerShared>,
    /// Written by the consumer once per drained run.
    tail: Line<AtomicUsize>,
    /// The pages' memory.
    mem: Chunks,
    /// The chunk holding chunk number `k`, at `k % mem.count()`: written by the producer when
    /// it claims the chunk, read by the consumer for pages before `head`.
    seq: Box<[AtomicUsize]>,
    /// Called by the producer when it claims a chunk (so a sleeping consumer wakes while a
    /// burst is young).
    nudge: Option<Box<dyn Fn() + Send + Sync>>,
    /// Set when the owning thread finished its last page and will not write again.
    pub(crate) closed: AtomicBool,
}

struct ProducerShared {
    head: AtomicUsize,
    lost: AtomicU64,
}

// SAFETY: `prod` and page bytes from `head` to the end of the current page are touched only by
// the owning thread (the producer) — or, once the producer is quiesced (thread exit, recorder
// stop after an RCU grace period), by the one thread that closes the ring. Full pages are
// handed to the consumer through `head` (Release) and back through `tail` (Release).
unsafe impl Sync for PageRing {}
// SAFETY: as above.
unsafe impl Send for PageRing {}

impl PageRing {
    #[cfg(test)]
    pub fn new(n_pages: usize) -> PageRing {
        PageRing::with_nudge(n_pages, Arc::new(Budget::new(usize::MAX)), None).unwrap()
    }

    /// A ring of at most `n_pages` pages (nothing faulted in yet; chunks count against
    /// `budget`), whose producer calls `nudge` when it claims a chunk. `None` when the address
    /// space can't be reserved.
    pub fn with_nudge(
        n_pages: usize,
        budget: Arc<Budget>,
        nudge: Option<Box<dyn Fn() + Send + Sync>>,
    ) -> Option<PageRing> {
        let mem = Chunks::new(n_pages, budget)?;
        Some(PageRing {
            prod: Line(UnsafeCell::new(Producer {
                page: None,
                cur: core::ptr::null_mut(),
                off: 0,
                limit: 0,
                last_ts: 0,
                pending_lost: 0,
                claimed: 0,
                chunk: core::ptr::null_mut(),
            })),
            shared_prod: Line(ProducerShared {
                head: AtomicUsize::new(0),
                lost: AtomicU64::new(0),
            }),
            tail: Line(AtomicUsize::new(0)),
            seq: (0..mem.count()).map(|_| AtomicUsize::new(0)).collect(),
            mem,
            nudge,
            closed: AtomicBool::new(false),
        })
    }

    /// The ring's memory.
    pub fn memory(&self) -> &Chunks {
        &self.mem
    }

    /// Reserve room for a `len`-byte record stamped `ts`; returns where to write it.
    ///
    /// # Safety
    /// Only the producer thread may call this (or `finish_page`), one call at a time, and
    /// must write the record before the next call.
    #[inline(always)]
    pub unsafe fn reserve(&self, len: usize, ts: u64) -> Option<*mut u8> {
        // SAFETY: forwarded contract.
        match unsafe { self.reserve_fast(len, ts, true) } {
            Fast::Reserved(dst) => Some(dst),
            Fast::Dropped => None,
            Fast::Slow => {
                // SAFETY: producer-only state (see the function's contract).
                let p = unsafe { &mut *self.prod.get() };
                let ts = ts.max(p.last_ts);
                // SAFETY: forwarded contract.
                unsafe { self.reserve_slow(p, len, ts) }
            }
        }
    }

    /// [`PageRing::reserve`] for the common cases only: the event fits the current page, or
    /// (if `drop_when_full`) the ring is still full (the event is dropped and counted; that
    /// test may call a function). `Slow` when it needs a time extend or a new page; nothing
    /// was reserved then. With `drop_when_full` false it makes no call at all.
    ///
    /// # Safety
    /// As for [`PageRing::reserve`].
    #[inline(always)]
    pub unsafe fn reserve_fast(&self, len: usize, ts: u64, drop_when_full: bool) -> Fast {
        // SAFETY: producer-only state (see the function's contract).
        let p = unsafe { &mut *self.prod.get() };
        let data_len = (len + 3) & !3;
        let hdr = if data_len <= MAX_SMALL_DATA { 4 } else { 8 };
        // A clock that went back (another CPU's TSC) wraps to a huge difference, which takes
        // the slow path; it clamps to the last time.
        let delta = ts.wrapping_sub(p.last_ts);
        // One test: the event fits the current page without a time extend (`limit` is 0
        // while there is no current page).
        if delta >> DELTA_BITS == 0 && p.off + hdr + data_len <= p.limit {
            // SAFETY: the current page belongs to the producer and the event fits (checked).
            return Fast::Reserved(unsafe {
                Self::put(p, p.cur.add(PAGE_HEADER + p.off), delta, len, ts)
            });
        }
        // No current page because the ring was full: while it still is, dropping costs no
        // more than recording (a full ring is exactly when events come fastest).
        if drop_when_full && p.page.is_none() && p.pending_lost > 0 && !self.has_room(p) {
            self.count_drop(p);
            return Fast::Dropped;
        }
        Fast::Slow
    }

    /// Write the event header (`delta` < 2^27) at `at`, account for it, and return where the
    /// record goes.
    ///
    /// # Safety
    /// `at` is in the producer's current page with room for the header and the record.
    #[inline(always)]
    unsafe fn put(p: &mut Producer, at: *mut u8, delta: u64, len: usize, ts: u64) -> *mut u8 {
        let data_len = (len + 3) & !3;
        let hdr = if data_len <= MAX_SMALL_DATA { 4 } else { 8 };
        let d = (delta as u32) << 5;
        // SAFETY: the caller guarantees room for `hdr + data_len` bytes at `at`.
        unsafe {
            if hdr == 4 {
                (at as *mut u32).write_unaligned(d | (data_len / 4) as u32);
            } else {
                (at as *mut u32).write_unaligned(d);
                (at.add(4) as *mut u32).write_unaligned((data_len + 4) as u32);
            }
            if data_len != len {
                // Zero the alignment padding so files are deterministic.
                (at.add(hdr + data_len - 4) as *mut u32).write_unaligned(0);
            }
            p.off = at.offset_from(p.cur) as usize - PAGE_HEADER + hdr + data_len;
            p.last_ts = ts;
            at.add(hdr)
        }
    }

    /// [`PageRing::reserve`] when the event needs a time extend or a new page.
    ///
    /// # Safety
    /// As for [`PageRing::reserve`].
    #[cold]
    #[inline(never)]
    unsafe fn reserve_slow(&self, p: &mut Producer, len: usize, ts: u64) -> Option<*mut u8> {
        let data_len = (len + 3) & !3;
        let hdr = if data_len <= MAX_SMALL_DATA { 4 } else { 8 };
        let mut delta = ts - p.last_ts;
        let mut ext = if delta >> DELTA_BITS != 0 { 8 } else { 0 };
        if p.page.is_none() || p.off + ext + hdr + data_len > PAGE_DATA {
            if hdr + data_len > PAGE_DATA {
                return self.drop_event(p);
            }
            // SAFETY: producer-only, per the contract.
            unsafe { self.finish_page_inner(p) };
            if !self.start_page(p, ts) {
                return self.drop_event(p);
            }
            (delta, ext) = (0, 0);
        }
        // SAFETY: the current page belongs to the producer; off + ext + hdr + data_len fits
        // in the page's data area (checked above).
        unsafe {
            let mut at = p.cur.add(PAGE_HEADER + p.off);
            if ext != 0 {
                let w = TYPE_TIME_EXTEND | (((delta & ((1 << DELTA_BITS) - 1)) as u32) << 5);
                (at as *mut u32).write_unaligned(w);
                (at.add(4) as *mut u32).write_unaligned((delta >> DELTA_BITS) as u32);
                at = at.add(8);
                delta = 0;
            }
            Some(Self::put(p, at, delta, len, ts))
        }
    }

    #[cold]
    fn drop_event(&self, p: &mut Producer) -> Option<*mut u8> {
        self.count_drop(p);
        None
    }

    #[inline(always)]
    fn count_drop(&self, p: &mut Producer) {
        p.pending_lost += 1;
        // Only the producer writes `lost`: no locked read-modify-write needed.
        let lost = &self.shared_prod.lost;
        lost.store(lost.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    /// Is there a free page for the producer? Claims the chunk of page `head` when it
    /// starts one.
    #[inline(always)]
    fn has_room(&self, p: &mut Producer) -> bool {
        let head = self.shared_prod.head.load(Ordering::Relaxed);
        let k = head >> self.mem.shift();
        k < p.claimed || self.claim(p, k)
    }

    #[cold]
    fn claim(&self, p: &mut Producer, k: usize) -> bool {
        let Some(id) = self.mem.claim() else { return false };
        self.seq[k % self.seq.len()].store(id, Ordering::Relaxed);
        p.chunk = self.mem.chunk(id);
        p.claimed = k + 1;
        if let Some(f) = &self.nudge {
            f();
        }
        true
    }

    fn start_page(&self, p: &mut Producer, ts: u64) -> bool {
        if !self.has_room(p) {
            return false;
        }
        let head = self.shared_prod.head.load(Ordering::Relaxed);
        let in_chunk = head & (self.mem.pages_per_chunk() - 1);
        // SAFETY: page `head` is in the chunk the producer claimed for it (`has_room`).
        let page = unsafe { p.chunk.add(in_chunk * PAGE_SIZE) };
        // SAFETY: the page is the producer's until `head` passes it.
        unsafe { (page as *mut u64).write(ts) };
        p.page = Some(head);
        p.cur = page;
        p.off = 0;
        p.limit = PAGE_DATA;
        p.last_ts = ts;
        true
    }

    /// Finish the current page (if any) and hand it to the consumer.
    ///
    /// # Safety
    /// As for [`PageRing::reserve`]: producer only, or after the producer is quiesced.
    pub unsafe fn finish_page(&self) {
        // SAFETY: per the contract.
        unsafe { self.finish_page_inner(&mut *self.prod.get()) }
    }

    unsafe fn finish_page_inner(&self, p: &mut Producer) {
        let Some(i) = p.page.take() else { return };
        p.limit = 0;
        // SAFETY: forwarded contract.
        unsafe { self.seal(p, i) }
    }

    /// Finish the current page for good (end of recording): when events were dropped after
    /// the last page, start an empty page just to carry the count, if there is room.
    ///
    /// # Safety
    /// As for [`PageRing::finish_page`].
    pub unsafe fn close(&self) {
        // SAFETY: per the contract.
        let p = unsafe { &mut *self.prod.get() };
        if p.page.is_none() && p.pending_lost > 0 {
            let ts = p.last_ts;
            self.start_page(p, ts);
        }
        // SAFETY: per the contract.
        unsafe { self.finish_page_inner(p) }
    }

    unsafe fn seal(&self, p: &mut Producer, i: usize) {
        let page = p.cur;
        let mut commit = p.off as u64;
        if p.pending_lost > 0 {
            commit |= RB_MISSED_EVENTS;
            if PAGE_DATA - p.off >= 8 {
                // SAFETY: 8 bytes of room after the data, inside the page.
                unsafe {
                    (page.add(PAGE_HEADER + p.off) as *mut u64).write_unaligned(p.pending_lost)
                };
                commit |= RB_MISSED_STORED;
            }
            p.pending_lost = 0;
        }
        // SAFETY: the page still belongs to the producer until `head` moves.
        unsafe { (page.add(8) as *mut u64).write(commit) };
        self.shared_prod.head.store(i + 1, Ordering::Release);
    }

    /// Consumer: the number of full pages waiting.
    pub fn ready(&self) -> usize {
        self.shared_prod.head.load(Ordering::Relaxed) - self.tail.load(Ordering::Relaxed)
    }

    /// Consumer: call `f` with up to `max` full pages, oldest first, as runs of whole pages
    /// that are contiguous in memory (each inside one chunk), releasing each run after `f`
    /// returns (and each chunk whose pages were all taken). Returns the number of pages.
    pub fn drain(&self, max: usize, mut f: impl FnMut(&mut [u8])) -> usize {
        let head = self.shared_prod.head.load(Ordering::Acquire);
        let start = self.tail.load(Ordering::Relaxed);
        let end = head.min(start.saturating_add(max));
        let (shift, per) = (self.mem.shift(), self.mem.pages_per_chunk());
        let mut tail = start;
        while tail < end {
            let k = tail >> shift;
            let id = self.seq[k % self.seq.len()].load(Ordering::Relaxed);
            let in_chunk = tail & (per - 1);
            let run = (end - tail).min(per - in_chunk);
            // SAFETY: pages in tail..head were finished by the producer (Acquire on head),
            // which wrote `seq` for their chunks before; the run stays inside chunk `id`.
            // Only the consumer (us) touches them until `tail` passes them.
            let at = unsafe { self.mem.chunk(id).add(in_chunk * PAGE_SIZE) };
            // SAFETY: as above.
            f(unsafe { std::slice::from_raw_parts_mut(at, run * PAGE_SIZE) });
            tail += run;
            self.tail.store(tail, Ordering::Release);
            if tail & (per - 1) == 0 {
                // Every page of the chunk was taken: the producer may have it again.
                self.mem.release(id);
            }
        }
        end - start
    }

    /// Events dropped because the buffer was full (or the record too big). Read by the
    /// consumer while the producer counts: a relaxed single-writer counter.
    pub fn lost(&self) -> u64 {
        self.shared_prod.lost.load(Ordering::Relaxed)
    }
}

/// The recording whose rings producers may write: nonzero while one runs, new for each
/// (the recorder sets it; a thread's context compares its ring's generation with it).
pub(crate) static GENERATION: AtomicU64 = AtomicU64::new(0);

/// One thread's ring and where its pages go.
pub(crate) struct Ring {
    pub(crate) pages: PageRing,
    /// The stream number in the file (trace.dat calls it a CPU).
    pub(crate) cpu: usize,
    pub(crate) tid: i32,
    pub(crate) comm: String,
}

impl Ring {
    /// Write one record of `len` bytes at time `ts`: the event ID from `id`, the common pid
    /// `pid`, the rest by `write`. Returns the record, or `None` when it was dropped.
    ///
    /// # Safety
    /// Only the ring's producer (its thread) may call it.
    #[inline(always)]
    pub(crate) unsafe fn write<W: Fn(&mut RecordWriter, Common)>(
        &self,
        len: usize,
        ts: u64,
        id: &AtomicU16,
        pid: i32,
        write: &W,
    ) -> Option<*const u8> {
        // SAFETY: per the contract.
        let dst = unsafe { self.pages.reserve(len, ts)? };
        // SAFETY: `reserve` gave `len` writable bytes at `dst`.
        unsafe { fill(dst, len, id, pid, write) };
        Some(dst)
    }

    /// [`Ring::write`] when it needs no call (see [`PageRing::reserve_fast`] for
    /// `drop_when_full`); false, having done nothing, when it does (a new page, a time
    /// extend). True when the record was written or dropped and counted.
    ///
    /// # Safety
    /// As [`Ring::write`].
    #[inline(always)]
    pub(crate) unsafe fn write_fast<W: Fn(&mut RecordWriter, Common)>(
        &self,
        len: usize,
        ts: u64,
        id: &AtomicU16,
        pid: i32,
        write: &W,
        drop_when_full: bool,
    ) -> bool {
        // SAFETY: per the contract.
        match unsafe { self.pages.reserve_fast(len, ts, drop_when_full) } {
            Fast::Reserved(dst) => {
                // SAFETY: `reserve_fast` gave `len` writable bytes at `dst`.
                unsafe { fill(dst, len, id, pid, write) };
                true
            }
            Fast::Dropped => true,
            Fast::Slow => false,
        }
    }

    /// The producer is done (its thread exits): hand over its last page.
    ///
    /// # Safety
    /// As [`Ring::write`]; the producer does not write again.
    pub(crate) unsafe fn close_producer(&self) {
        // SAFETY: per the contract.
        unsafe { self.pages.finish_page() };
        self.pages.closed.store(true, Ordering::Release);
    }
}

/// Write a record into the `len` bytes at `dst` reserved for it.
///
/// # Safety
/// `dst` must be valid for writes of `len` bytes.
#[inline(always)]
unsafe fn fill<W: Fn(&mut RecordWriter, Common)>(
    dst: *mut u8,
    len: usize,
    id: &AtomicU16,
    pid: i32,
    write: &W,
) {
    // SAFETY: per the contract.
    write(&mut unsafe { RecordWriter::new(dst, len) }, record::common(id, pid));
}

/// Rewrite the timestamps of one finished page from raw clock units to ns with `to_ns` (a
/// monotonic map that never turns a difference of `d` units into more than `d` ns, so every
/// delta still fits where it was). `last_ns` is the stream's previous timestamp: times are
/// clamped to it so they never go backwards across recalibrations. Returns the number of
/// data events in the page.
pub fn convert_page(page: &mut [u8], last_ns: &mut u64, to_ns: impl Fn(u64) -> u64) -> u64 {
    let Ok(p) = Page::parse(&LAYOUT, page) else { return 0 };
    let mut raw = p.timestamp;
    let data_range = PAGE_HEADER..PAGE_HEADER + p.commit;
    let mut ns = to_ns(raw).max(*last_ns);
    page[0..8].copy_from_slice(&ns.to_le_bytes());
    let data = &mut page[data_range];
    let mask = (1u64 << DELTA_BITS) - 1;
    let mut pos = 0;
    let mut events = 0;
    while pos < data.len() {
        let Ok(e) = entry_at(data, pos, false) else { break };
        let data_event = matches!(e.kind, EntryKind::Data { .. });
        if data_event || e.kind == EntryKind::TimeExtend {
            raw = raw.wrapping_add(e.delta);
            let mut d = to_ns(raw).max(ns) - ns;
            if data_event {
                // `to_ns` never widens a difference, so this only clips rounding.
                d = d.min(mask);
                events += 1;
            }
            ns += d;
            set_delta(data, pos, d, false);
        } else if e.kind != EntryKind::Padding {
            // The recorder writes no absolute stamps; the end of the data ends the page.
            break;
        }
        pos += e.len;
    }
    *last_ns = ns;
    events
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn convert_page_rewrites_raw_times_to_ns() {
        let ring = PageRing::new(4);
        // Raw readings: small steps, one step past the 27-bit delta (a time extend), and
        // a big record (type_len 0).
        let raws = [1_000u64, 1_010, 1_030, 1_030 + (3 << 27) + 5, 1_030 + (3 << 27) + 9];
        for (i, &r) in raws.iter().enumerate() {
            let len = if i == 4 { 200 } else { 12 };
            // SAFETY: this test is the only producer.
            let dst = unsafe { ring.reserve(len, r) }.unwrap();
            // SAFETY: `reserve` gave `len` writable bytes.
            unsafe { dst.write_bytes(i as u8, len) };
        }
        // SAFETY: as above.
        unsafe { ring.finish_page() };
        let to_ns = |raw: u64| 500 + raw / 2;
        let mut last = 0;
        let mut got = Vec::new();
        ring.drain(usize::MAX, |run| {
            for page in run.chunks_exact_mut(PAGE_SIZE) {
                assert_eq!(convert_page(page, &mut last, to_ns), 5);
                let p = Page::parse(&LAYOUT, page).unwrap();
                got.extend(p.events().map(|r| r.unwrap()).map(|r| (r.ts, r.data[0], r.data.len())));
            }
        });
        let want: Vec<_> = raws
            .iter()
            .enumerate()
            .map(|(i, &r)| (to_ns(r), i as u8, if i == 4 { 200 } else { 12 }))
            .collect();
        assert_eq!(got, want);
        assert_eq!(last, to_ns(raws[4]));
    }

    /// Fill a ring until it drops; `next` numbers the events.
    fn fill(ring: &PageRing, next: &mut u64) {
        // SAFETY: the test is the only producer.
        while let Some(dst) = unsafe { ring.reserve(8, *next) } {
            // SAFETY: `reserve` gave 8 writable bytes.
            unsafe { (dst as *mut u64).write_unaligned(*next) };
            *next += 1;
        }
    }

    /// The numbers of the events in `run`'s pages.
    fn numbers(run: &[u8]) -> Vec<u64> {
        let mut v = Vec::new();
        for page in run.chunks_exact(PAGE_SIZE) {
            let p = Page::parse(&LAYOUT, page).unwrap();
            v.extend(p.events().map(|r| u64::from_le_bytes(r.unwrap().data.try_into().unwrap())));
        }
        v
    }

    /// Two chunks of two pages: the producer drops once both chunks are full, and writes
    /// again only when the consumer took every page of the older chunk; over many laps
    /// every event that was not dropped comes out once, in order.
    #[test]
    fn pages_cycle_through_chunks() {
        let ring = PageRing::new(4);
        assert_eq!((ring.memory().count(), ring.memory().pages_per_chunk()), (2, 2));
        let mut next = 0;
        let mut got = Vec::new();
        for _ in 0..20 {
            fill(&ring, &mut next);
            assert_eq!(ring.ready(), 4, "both chunks full");
            let before = ring.lost();
            assert_eq!(ring.drain(1, |run| got.extend(numbers(run))), 1);
            fill(&ring, &mut next);
            assert_eq!(ring.lost(), before + 1, "one page taken: its chunk is not free yet");
            assert_eq!(ring.drain(1, |run| got.extend(numbers(run))), 1);
            fill(&ring, &mut next);
            assert_eq!(ring.ready(), 4, "the older chunk was free again and was filled");
            ring.drain(2, |run| got.extend(numbers(run)));
        }
        // SAFETY: the test is the only producer.
        unsafe { ring.finish_page() };
        ring.drain(usize::MAX, |run| got.extend(numbers(run)));
        assert_eq!(got, (0..next).collect::<Vec<_>>(), "every event written, once, in order");
        assert!(next > 20 * 4 * 300, "{next} events");
    }

    #[test]
    fn a_clock_that_goes_back_is_clamped() {
        let ring = PageRing::new(4);
        for r in [100u64, 50, 130] {
            // SAFETY: this test is the only producer.
            unsafe { ring.reserve(8, r) }.unwrap();
        }
        // SAFETY: as above.
        unsafe { ring.finish_page() };
        let mut pages = 0;
        ring.drain(usize::MAX, |run| {
            let p = Page::parse(&LAYOUT, run).unwrap();
            let ts: Vec<u64> = p.events().map(|r| r.unwrap().ts).collect();
            assert_eq!(ts, [100, 100, 130]);
            pages += 1;
        });
        assert_eq!(pages, 1);
    }

    #[test]
    fn convert_page_never_goes_backwards() {
        let ring = PageRing::new(4);
        for r in [100u64, 200] {
            // SAFETY: this test is the only producer.
            unsafe { ring.reserve(8, r) }.unwrap();
        }
        // SAFETY: as above.
        unsafe { ring.finish_page() };
        // The previous page (under an older calibration) ended later than this one starts.
        let mut last = 150;
        ring.drain(usize::MAX, |run| {
            convert_page(run, &mut last, |raw| raw);
            let p = Page::parse(&LAYOUT, run).unwrap();
            let ts: Vec<u64> = p.events().map(|r| r.unwrap().ts).collect();
            assert_eq!(ts, [150, 200]);
        });
    }
}
