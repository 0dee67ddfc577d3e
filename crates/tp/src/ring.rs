//! Per-thread buffers of kernel-format ring-buffer pages (see `events/header_page` and
//! `events/header_event`): a 16-byte page header (u64 timestamp, u64 commit), then events
//! with a 4-byte header of 5-bit `type_len` and 27-bit `time_delta`, 4-byte aligned.
//!
//! One producer (the owning thread) fills pages; one consumer (the recorder's background
//! thread) takes full ones. `head` counts pages the producer finished, `tail` pages the
//! consumer took; the producer only starts a page when `head - tail < n`, otherwise the event
//! is dropped and counted, and the next page the producer finishes carries the count in its
//! commit word (the kernel's `RB_MISSED_EVENTS` / `RB_MISSED_STORED`).

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

pub const PAGE_SIZE: usize = 4096;
pub const PAGE_HEADER: usize = 16;
pub const PAGE_DATA: usize = PAGE_SIZE - PAGE_HEADER;
/// Longest record one page can hold.
pub const MAX_RECORD: usize = PAGE_DATA - 8;
const MAX_SMALL_DATA: usize = 28 * 4;
const TYPE_TIME_EXTEND: u32 = 30;
const DELTA_BITS: u32 = 27;
pub const MISSED_EVENTS: u64 = 1 << 31;
pub const MISSED_STORED: u64 = 1 << 30;

#[repr(C, align(64))]
struct PageMem(UnsafeCell<[u8; PAGE_SIZE]>);

/// Producer-only state.
struct Producer {
    page: Option<usize>,
    /// Start of the current page (valid while `page` is `Some`).
    cur: *mut u8,
    off: usize,
    last_ts: u64,
    pending_lost: u64,
}

/// One thread's pages.
pub struct PageRing {
    pages: Box<[PageMem]>,
    head: AtomicUsize,
    tail: AtomicUsize,
    prod: UnsafeCell<Producer>,
    lost: AtomicU64,
    /// Set when the owning thread finished its last page and will not write again.
    pub(crate) closed: AtomicBool,
}

// SAFETY: `prod` and page bytes between `tail` and the current page are touched only by the
// owning thread (the producer) — or, once the producer is quiesced (thread exit, recorder
// stop after an RCU grace period), by the one thread that closes the ring. Full pages are
// handed to the consumer through `head` (Release) and back through `tail` (Release).
unsafe impl Sync for PageRing {}
// SAFETY: as above.
unsafe impl Send for PageRing {}

impl PageRing {
    pub fn new(n_pages: usize) -> PageRing {
        let n = n_pages.max(2);
        PageRing {
            pages: (0..n).map(|_| PageMem(UnsafeCell::new([0; PAGE_SIZE]))).collect(),
            head: AtomicUsize::new(0),
            tail: AtomicUsize::new(0),
            prod: UnsafeCell::new(Producer {
                page: None,
                cur: core::ptr::null_mut(),
                off: 0,
                last_ts: 0,
                pending_lost: 0,
            }),
            lost: AtomicU64::new(0),
            closed: AtomicBool::new(false),
        }
    }

    #[inline(always)]
    fn page_ptr(&self, i: usize) -> *mut u8 {
        self.pages[i % self.pages.len()].0.get() as *mut u8
    }

    /// Reserve room for a `len`-byte record stamped `ts`; returns where to write it.
    ///
    /// # Safety
    /// Only the producer thread may call this (or `finish_page`), one call at a time, and
    /// must write the record before the next call.
    #[inline(always)]
    pub unsafe fn reserve(&self, len: usize, ts: u64) -> Option<*mut u8> {
        // SAFETY: producer-only state (see the function's contract).
        let p = unsafe { &mut *self.prod.get() };
        let data_len = (len + 3) & !3;
        let hdr = if data_len <= MAX_SMALL_DATA { 4 } else { 8 };
        let ts = ts.max(p.last_ts);
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
        let page = p.cur;
        // SAFETY: the current page belongs to the producer; off + ext + hdr + data_len fits
        // in the page's data area (checked above).
        unsafe {
            let mut at = page.add(PAGE_HEADER + p.off);
            if ext != 0 {
                let w = TYPE_TIME_EXTEND | (((delta & ((1 << DELTA_BITS) - 1)) as u32) << 5);
                (at as *mut u32).write_unaligned(w);
                (at.add(4) as *mut u32).write_unaligned((delta >> DELTA_BITS) as u32);
                at = at.add(8);
                delta = 0;
            }
            let d = (delta as u32) << 5;
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
            p.off += ext + hdr + data_len;
            p.last_ts = ts;
            Some(at.add(hdr))
        }
    }

    #[cold]
    fn drop_event(&self, p: &mut Producer) -> Option<*mut u8> {
        p.pending_lost += 1;
        self.lost.fetch_add(1, Ordering::Relaxed);
        None
    }

    fn start_page(&self, p: &mut Producer, ts: u64) -> bool {
        let head = self.head.load(Ordering::Relaxed);
        if head - self.tail.load(Ordering::Acquire) >= self.pages.len() {
            return false;
        }
        let page = self.page_ptr(head);
        // SAFETY: page `head` is free (the consumer released it through `tail`).
        unsafe { (page as *mut u64).write(ts) };
        p.page = Some(head);
        p.cur = page;
        p.off = 0;
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
        let page = self.page_ptr(i);
        let mut commit = p.off as u64;
        if p.pending_lost > 0 {
            commit |= MISSED_EVENTS;
            if PAGE_DATA - p.off >= 8 {
                // SAFETY: 8 bytes of room after the data, inside the page.
                unsafe {
                    (page.add(PAGE_HEADER + p.off) as *mut u64).write_unaligned(p.pending_lost)
                };
                commit |= MISSED_STORED;
            }
            p.pending_lost = 0;
        }
        // SAFETY: the page still belongs to the producer until `head` moves.
        unsafe { (page.add(8) as *mut u64).write(commit) };
        self.head.store(i + 1, Ordering::Release);
    }

    /// Consumer: call `f` with the full pages, oldest first, as runs of whole pages that are
    /// contiguous in memory (at most two per call: before and after the wrap), releasing
    /// each run after `f` returns. Returns the number of pages.
    pub fn drain(&self, mut f: impl FnMut(&[u8])) -> usize {
        let head = self.head.load(Ordering::Acquire);
        let mut tail = self.tail.load(Ordering::Relaxed);
        let n = head - tail;
        let len = self.pages.len();
        while tail < head {
            let run = (head - tail).min(len - tail % len);
            // SAFETY: pages in tail..head were finished by the producer (Acquire on head) and
            // are not touched by it until `tail` passes them; `run` pages from `tail % len`
            // stay inside the array.
            f(unsafe { std::slice::from_raw_parts(self.page_ptr(tail), run * PAGE_SIZE) });
            tail += run;
            self.tail.store(tail, Ordering::Release);
        }
        n
    }

    /// Events dropped because the buffer was full (or the record too big).
    pub fn lost(&self) -> u64 {
        self.lost.load(Ordering::Relaxed)
    }
}
