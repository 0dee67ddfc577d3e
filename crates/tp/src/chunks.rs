//! The memory behind one thread's ring: a reservation of address space cut into chunks of
//! 2 MiB (512 ring pages), faulted in only when first written.
//!
//! A thread firing back to back writes about 3 GB/s of pages and the background thread
//! compresses about 1 GB/s, so a 10-million-event burst leaves 80-180 MB waiting. Keeping
//! that much faulted in for every thread would cost every traced program its memory, so a
//! ring reserves its most (512 MiB by default, `MAP_NORESERVE`) and its producer faults
//! chunks in as a burst reaches them; the background thread gives chunks back
//! (`MADV_DONTNEED`) once the rings have been quiet for a while, keeping a few.
//!
//! Pages are 4 KiB (`MADV_NOHUGEPAGE`), not huge pages: on this project's VM, which reports
//! free memory to its host, memory the host took back faulted in at 0.45-0.5 GB/s in huge
//! pages and 1.3-3 GB/s in 4 KiB pages (huge pages won only on memory the host still
//! backed); a 10-million-event burst cost 28-31 ns/event against 15-19 in that state, and the
//! benchmark's medians were 15-19 against 17-23 ns (README).
//!
//! Free chunks sit in two bit sets: `warm` (faulted in) and `cold` (not). The producer takes
//! the lowest warm chunk, else the lowest cold one (which counts against the recording's
//! [`Budget`]); the consumer returns a chunk to `warm` when it has taken all of its pages,
//! and may move a warm chunk to `cold` (trim) or a cold one to `warm` (fault in ahead). Each
//! side claims a chunk with a compare-and-swap, so a chunk is never handed out twice.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// A ring page's size: the kernel's on this machine (x86_64), whose layout the ring's pages
/// keep.
pub const PAGE_SIZE: usize = 4096;

/// Ring pages in a chunk at most (2 MiB).
pub(crate) const MAX_CHUNK_PAGES: usize = 512;
/// A ring's own chunks (4 MiB, the fixed ring of earlier versions): faulted in ahead for a
/// new thread, kept when the ring is trimmed, and outside the budget, so that every recording
/// thread can record however many there are.
pub(crate) const OWN_CHUNKS: usize = 2;

/// The recording's accounting of its rings' memory: bytes faulted in now and at most, and
/// what bursts may still take beyond each ring's own [`OWN_CHUNKS`].
#[derive(Debug)]
pub(crate) struct Budget {
    left: AtomicUsize,
    resident: AtomicUsize,
    peak: AtomicUsize,
}

impl Budget {
    /// `cap` bytes for bursts, over all rings.
    pub fn new(cap: usize) -> Budget {
        Budget {
            left: AtomicUsize::new(cap),
            resident: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
        }
    }

    fn take(&self, n: usize) -> bool {
        self.left.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |l| l.checked_sub(n)).is_ok()
    }

    fn give(&self, n: usize) {
        self.left.fetch_add(n, Ordering::Relaxed);
    }

    fn faulted(&self, n: usize) {
        let now = self.resident.fetch_add(n, Ordering::Relaxed) + n;
        self.peak.fetch_max(now, Ordering::Relaxed);
    }

    fn freed(&self, n: usize) {
        self.resident.fetch_sub(n, Ordering::Relaxed);
    }

    /// The most bytes faulted in at once so far.
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }
}

pub(crate) struct Chunks {
    /// The mapping; chunk 0 starts there.
    base: *mut u8,
    len: usize,
    /// log2 of the pages per chunk.
    shift: u32,
    n: usize,
    warm: Box<[AtomicU64]>,
    cold: Box<[AtomicU64]>,
    /// Chunks faulted in (not cold): the first [`OWN_CHUNKS`] are the ring's own, the rest
    /// are charged to `budget`.
    resident: AtomicUsize,
    budget: Arc<Budget>,
}

// SAFETY: the mapping is owned by this value and freed once (drop); which side may touch a
// chunk's bytes is decided by the atomic bit sets (see the module documentation).
unsafe impl Send for Chunks {}
// SAFETY: as above.
unsafe impl Sync for Chunks {}

impl Chunks {
    /// Room for `pages` ring pages (at least two chunks), nothing faulted in; `None` when the
    /// address space can't be reserved.
    pub fn new(pages: usize, budget: Arc<Budget>) -> Option<Chunks> {
        // At least two chunks, so the producer fills one while the consumer takes the other.
        let per = (pages / 2).clamp(1, MAX_CHUNK_PAGES);
        let shift = usize::BITS - 1 - per.leading_zeros();
        let per = 1usize << shift;
        let n = pages.div_ceil(per).max(2);
        let len = n * per * PAGE_SIZE;
        // SAFETY: a fresh private anonymous mapping; no existing memory is affected.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return None;
        }
        // SAFETY: advice on the mapping's own range; it changes how the kernel backs the
        // pages (never huge pages, see the module documentation), not their contents.
        unsafe { libc::madvise(map, len, libc::MADV_NOHUGEPAGE) };
        let words = n.div_ceil(64);
        let bits = |w: usize| {
            let from = w * 64;
            let k = (n - from).min(64);
            AtomicU64::new(if k == 64 { u64::MAX } else { (1u64 << k) - 1 })
        };
        Some(Chunks {
            base: map as *mut u8,
            len,
            shift,
            n,
            warm: (0..words).map(|_| AtomicU64::new(0)).collect(),
            cold: (0..words).map(bits).collect(),
            resident: AtomicUsize::new(0),
            budget,
        })
    }

    /// Pages per chunk (a power of two).
    pub fn pages_per_chunk(&self) -> usize {
        1 << self.shift
    }

    pub fn shift(&self) -> u32 {
        self.shift
    }

    /// Chunks in all.
    pub fn count(&self) -> usize {
        self.n
    }

    fn bytes(&self) -> usize {
        PAGE_SIZE << self.shift
    }

    /// The first byte of chunk `id`.
    pub fn chunk(&self, id: usize) -> *mut u8 {
        debug_assert!(id < self.n);
        // SAFETY: inside the mapping (`id < n`).
        unsafe { self.base.add(id * self.bytes()) }
    }

    /// Claim a free chunk for writing: a warm one if there is one, else a cold one within
    /// the budget.
    pub fn claim(&self) -> Option<usize> {
        if let Some(id) = take_bit(&self.warm, false) {
            return Some(id);
        }
        // Loads only, while the ring is full: a producer asks again for every event it drops.
        if self.cold_none() || !self.charge() {
            return None;
        }
        let id = take_bit(&self.cold, false);
        if id.is_none() {
            self.uncharge();
        }
        id
    }

    /// Count one more chunk faulted in: one of the ring's own, or charged to the budget;
    /// false when the budget is spent.
    fn charge(&self) -> bool {
        let mut r = self.resident.load(Ordering::Relaxed);
        loop {
            // Decided on the count that the exchange below confirms, so that the budget is
            // charged for exactly the chunks beyond the ring's own.
            let charged = r >= OWN_CHUNKS;
            if charged && !self.budget.take(self.bytes()) {
                return false;
            }
            match self.resident.compare_exchange_weak(
                r,
                r + 1,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    self.budget.faulted(self.bytes());
                    return true;
                }
                Err(now) => {
                    if charged {
                        self.budget.give(self.bytes());
                    }
                    r = now;
                }
            }
        }
    }

    /// Count one chunk less faulted in (see `charge`).
    fn uncharge(&self) {
        let r = self.resident.fetch_sub(1, Ordering::Relaxed);
        if r > OWN_CHUNKS {
            self.budget.give(self.bytes());
        }
        self.budget.freed(self.bytes());
    }

    fn cold_none(&self) -> bool {
        self.cold.iter().all(|w| w.load(Ordering::Relaxed) == 0)
    }

    /// Give back a chunk whose pages were all taken (it stays faulted in).
    pub fn release(&self, id: usize) {
        self.warm[id / 64].fetch_or(1 << (id % 64), Ordering::Release);
    }

    /// Free chunks that are faulted in.
    pub fn warm_free(&self) -> usize {
        self.warm.iter().map(|w| w.load(Ordering::Relaxed).count_ones() as usize).sum()
    }

    /// Give the memory of free chunks back to the kernel, highest first, until at most
    /// `keep` free ones stay faulted in. Returns how many.
    pub fn trim(&self, keep: usize) -> usize {
        let mut trimmed = 0;
        while self.warm_free() > keep {
            let Some(id) = take_bit(&self.warm, true) else { break };
            // SAFETY: the chunk is ours (claimed), inside the mapping; its contents are not
            // needed (every page was taken).
            unsafe {
                libc::madvise(
                    self.chunk(id) as *mut libc::c_void,
                    self.bytes(),
                    libc::MADV_DONTNEED,
                )
            };
            self.uncharge();
            self.cold[id / 64].fetch_or(1 << (id % 64), Ordering::Release);
            trimmed += 1;
        }
        trimmed
    }

    /// Fault a cold chunk in and make it warm (so the producer doesn't have to); false when
    /// there is none (or the budget is spent).
    pub fn fault_in_one(&self) -> bool {
        if self.cold_none() || !self.charge() {
            return false;
        }
        let Some(id) = take_bit(&self.cold, false) else {
            self.uncharge();
            return false;
        };
        let p = self.chunk(id);
        for off in (0..self.bytes()).step_by(PAGE_SIZE) {
            // SAFETY: inside the claimed chunk; a volatile write so that it is not elided.
            // Nothing reads the byte before the producer writes the page.
            unsafe { p.add(off).write_volatile(0) };
        }
        self.release(id);
        true
    }
}

impl Drop for Chunks {
    fn drop(&mut self) {
        for _ in 0..*self.resident.get_mut() {
            self.uncharge();
        }
        // SAFETY: the mapping made in `new`, unmapped once; nothing refers to it any more.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}

/// Clear one set bit of `words` (the lowest, or the highest when `high`) and return its
/// index.
fn take_bit(words: &[AtomicU64], high: bool) -> Option<usize> {
    for i in 0..words.len() {
        let w = if high { words.len() - 1 - i } else { i };
        let word = &words[w];
        let mut v = word.load(Ordering::Relaxed);
        while v != 0 {
            let b = if high { 63 - v.leading_zeros() } else { v.trailing_zeros() };
            // Acquire: the chunk's last reader (the consumer) released it before setting the bit.
            match word.compare_exchange_weak(v, v & !(1 << b), Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return Some(w * 64 + b as usize),
                Err(now) => v = now,
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_are_claimed_once_warm_first_and_within_budget() {
        let chunk = 2 << 20;
        // Two chunks of the ring's own, one more from the budget.
        let budget = Arc::new(Budget::new(chunk));
        let c = Chunks::new(8 * 512, budget.clone()).unwrap();
        assert_eq!((c.count(), c.pages_per_chunk()), (8, 512));
        let got: Vec<_> = (0..4).map(|_| c.claim()).collect();
        assert_eq!(got, [Some(0), Some(1), Some(2), None], "own two and one chunk's budget");
        c.release(1);
        assert_eq!(c.claim(), Some(1), "a warm chunk before a cold one");
        c.release(2);
        c.release(1);
        assert_eq!(c.trim(1), 1);
        assert_eq!(c.warm_free(), 1);
        assert_eq!(c.claim(), Some(1), "the lowest warm chunk was kept");
        assert!(c.fault_in_one(), "the budget came back with the trim");
        assert!(!c.fault_in_one(), "and is spent again");
        assert_eq!(budget.peak(), 3 * chunk);
        drop(c);
        assert_eq!(budget.resident.load(Ordering::Relaxed), 0);
        assert!(budget.take(chunk), "a dropped ring gives its budget back");
    }

    /// However many rings there are, each can fault its own chunks in.
    #[test]
    fn every_ring_has_its_own_chunks_when_the_budget_is_spent() {
        let budget = Arc::new(Budget::new(0));
        let rings: Vec<_> = (0..4).map(|_| Chunks::new(8 * 512, budget.clone()).unwrap()).collect();
        for c in &rings {
            assert!(c.fault_in_one(), "an own chunk, faulted in ahead");
            assert_eq!((c.claim(), c.claim()), (Some(0), Some(1)), "the own chunks");
            assert_eq!(c.claim(), None, "no budget for more");
        }
        assert_eq!(budget.peak(), 4 * 2 * (2 << 20));
    }

    #[test]
    fn small_rings_have_two_chunks_at_least() {
        let c = Chunks::new(2, Arc::new(Budget::new(usize::MAX))).unwrap();
        assert_eq!((c.count(), c.pages_per_chunk()), (2, 1));
        let c = Chunks::new(100, Arc::new(Budget::new(usize::MAX))).unwrap();
        assert_eq!((c.count(), c.pages_per_chunk()), (4, 32));
    }
}
