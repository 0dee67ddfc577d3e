//! The background thread's side of a recording: it takes full pages from the threads' rings
//! and spools them, one file per stream. Each page gets its timestamps converted to ns
//! (`ring::convert_page`), then goes to the file as it is or in compressed trace.dat v7
//! chunks (`output::Chunker`), so that the file is assembled by copying (in `output`).
//!
//! Compressing is slower than a thread firing back to back (about 1 GB/s of pages against
//! 2.3-2.9 GB/s here): when the background thread finds a ring half full, it copies the
//! ring's pages into memory ("held" pages) to free the ring at once, and compresses them
//! a step at a time between its looks at the rings, oldest first. Copying into memory that
//! is already faulted in runs at memory speed, but faulting fresh memory in on this VM ran
//! slower than a thread fires; so the background thread keeps a reserve of blocks faulted
//! in if asked to (`reserve` bytes, built when the rings are quiet, kept across bursts; none
//! by default: every program would pay for it). Held pages are bounded (`max_held` bytes per
//! recording; blocks past the reserve are allocated as needed and freed after, but 16 MiB);
//! past that it compresses straight from the ring and the ring fills, which drops events
//! (counted).

use crate::clock::{Anchors, Conversion};
use crate::output::{io_err, Chunker, RecordError, Spooled, Stream};
use crate::ring::{convert_page, Ring, PAGE_SIZE};
use std::collections::VecDeque;
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

/// Bytes of one block of held pages: one huge page.
const BLOCK: usize = 2 << 20;
/// Held bytes above which pages are compressed at the faster level (`output::Chunker`): a
/// thread that fires faster than the normal level compresses would otherwise reach
/// `max_held` and drop events.
const FAST_ABOVE: usize = 64 << 20;
/// Bytes of free blocks kept after a burst without a reserve, for the next one.
const KEEP: usize = 16 << 20;
/// Pages compressed from held blocks between two looks at the rings: about 0.1 ms of
/// compression, in which a thread firing back to back fills about 70 pages of its ring.
pub(crate) const HELD_STEP: usize = 32;

/// One stream's spool file and the pages it holds in memory, oldest first.
struct SpoolStream {
    file: File,
    stream: Stream,
    held: VecDeque<Held>,
}

/// A block of held pages: `buf`'s bytes `start..` still to be written.
struct Held {
    buf: Block,
    start: usize,
}

pub(crate) struct Spool {
    dir: PathBuf,
    /// Clock calibration points over the recording, and the conversion they give.
    anchors: Anchors,
    conv: Conversion,
    /// Compresses pages (zstd), or none: pages are stored as they are.
    chunker: Option<Chunker>,
    /// Indexed by stream number.
    streams: Vec<Option<SpoolStream>>,
    pub(crate) error: Option<RecordError>,
    /// Full pages left in the rings after the last `drain_all`.
    waiting: usize,
    /// Bytes of held pages, now and at most so far, and the bound.
    held: usize,
    peak_held: usize,
    max_held: usize,
    /// Free blocks, faulted in; kept while they and the held ones stay within `reserve`.
    free: Vec<Block>,
    reserve: usize,
    /// The stream whose held pages `work_held` takes next (round robin).
    next_held: usize,
}

#[derive(Default)]
pub(crate) struct Drained {
    /// Full pages arrived since the previous call.
    pub active: bool,
    /// Some ring is still more than half full: look again without sleeping.
    pub rings_behind: bool,
}

/// The background thread takes a ring's pages once this many are full (or every
/// `MAX_HOLD`): one write per batch instead of one per page. Big writes cost less per page,
/// and a consumer taking each page right behind the producer measured slower producers (about
/// 20 instead of 12.5 ns/event in runs where it kept up page by page, before the producer's
/// and consumer's cache lines were separated too).
fn batch_pages(capacity: usize) -> usize {
    (capacity / 4).clamp(1, 256)
}

impl Spool {
    pub fn new(
        dir: PathBuf,
        anchors: Anchors,
        chunker: Option<Chunker>,
        max_held: usize,
        reserve: usize,
    ) -> Spool {
        let conv = anchors.conversion();
        Spool {
            dir,
            anchors,
            conv,
            chunker,
            streams: Vec::new(),
            error: None,
            waiting: 0,
            held: 0,
            peak_held: 0,
            max_held,
            free: Vec::new(),
            reserve: reserve.min(max_held),
            next_held: 0,
        }
    }

    /// Take a clock calibration point: later pages convert with it.
    pub fn anchor(&mut self) {
        self.anchors.add();
        self.conv = self.anchors.conversion();
    }

    /// Take a run of whole pages of `ring`: hold them in memory when `hold` and there is
    /// room (and always behind pages the stream already holds, to keep its order), else
    /// write them.
    fn take(&mut self, ring: &Ring, run: &mut [u8], hold: bool) {
        if self.error.is_some() {
            return;
        }
        if let Err(e) = self.stream(ring) {
            self.error = Some(e);
            return;
        }
        let holding = self.streams[ring.cpu].as_ref().is_some_and(|s| !s.held.is_empty());
        if (hold || holding) && self.held + run.len() <= self.max_held {
            self.hold(ring.cpu, run);
            return;
        }
        // Written in order: whatever the stream holds first.
        while self.write_held(ring.cpu, usize::MAX) > 0 {}
        if let Err(e) = self.write(ring.cpu, run) {
            self.error = Some(e);
        }
    }

    /// The spool stream of `ring`, created on its first pages.
    fn stream(&mut self, ring: &Ring) -> Result<(), RecordError> {
        if self.streams.len() <= ring.cpu {
            self.streams.resize_with(ring.cpu + 1, || None);
        }
        if self.streams[ring.cpu].is_none() {
            let spool = self.dir.join(format!("cpu{}", ring.cpu));
            let file = File::create(&spool).map_err(io_err(&spool, "create"))?;
            let stream = Stream {
                spool,
                pages: 0,
                events: 0,
                tid: ring.tid,
                comm: ring.comm.clone(),
                lost: 0,
                last_ns: 0,
            };
            self.streams[ring.cpu] = Some(SpoolStream { file, stream, held: VecDeque::new() });
        }
        Ok(())
    }

    /// Copy `run` to the end of stream `i`'s held pages.
    fn hold(&mut self, i: usize, mut run: &[u8]) {
        let s = self.streams[i].as_mut().expect("stream exists");
        self.held += run.len();
        self.peak_held = self.peak_held.max(self.held);
        while !run.is_empty() {
            let room = s.held.back().map_or(0, |h| BLOCK - h.buf.len());
            if room == 0 {
                let buf = self.free.pop().unwrap_or_else(Block::new);
                s.held.push_back(Held { buf, start: 0 });
                continue;
            }
            let n = room.min(run.len());
            s.held.back_mut().expect("a block").buf.push(&run[..n]);
            run = &run[n..];
        }
    }

    /// Write up to `max_pages` of stream `i`'s oldest held pages; returns how many.
    fn write_held(&mut self, i: usize, max_pages: usize) -> usize {
        let Some(Some(s)) = self.streams.get_mut(i) else { return 0 };
        // Out of the queue while `write` takes `self`; back in front if not all written.
        let Some(mut h) = s.held.pop_front() else { return 0 };
        let end = h.buf.len().min(h.start.saturating_add(max_pages.saturating_mul(PAGE_SIZE)));
        let n = end - h.start;
        let res = self.write(i, &mut h.buf.bytes_mut()[h.start..end]);
        self.held -= n;
        h.start = end;
        if end < h.buf.len() {
            self.streams[i].as_mut().expect("stream exists").held.push_front(h);
        } else if self.held + (self.free.len() + 1) * BLOCK <= self.reserve.max(KEEP) {
            h.buf.clear();
            self.free.push(h.buf);
        }
        if let Err(e) = res {
            self.error.get_or_insert(e);
        }
        n / PAGE_SIZE
    }

    /// Is the reserve of faulted-in blocks short?
    pub fn reserve_short(&self) -> bool {
        self.held + (self.free.len() + 1) * BLOCK <= self.reserve
    }

    /// Add one block, faulted in, to the reserve.
    pub fn grow_reserve(&mut self) {
        let mut b = Block::new();
        b.fault_in();
        self.free.push(b);
    }

    /// Are pages held?
    pub fn holding(&self) -> bool {
        self.held > 0
    }

    /// Write some held pages ([`HELD_STEP`]), taking the streams in turn.
    pub fn work_held(&mut self) {
        let n = self.streams.len();
        for k in 0..n {
            let i = (self.next_held + k) % n;
            if self.write_held(i, HELD_STEP) > 0 {
                self.next_held = i + 1;
                return;
            }
        }
    }

    /// Convert and write a run of whole pages of stream `i` to its spool file.
    fn write(&mut self, i: usize, run: &mut [u8]) -> Result<(), RecordError> {
        let s = self.streams[i].as_mut().expect("stream exists");
        for page in run.chunks_exact_mut(PAGE_SIZE) {
            convert_page(page, &mut s.stream.last_ns, |raw| self.conv.ns(raw));
        }
        let fast = self.held > FAST_ABOVE;
        let bytes = match &mut self.chunker {
            Some(c) => c
                .set_fast(fast)
                .and_then(|_| c.chunks(run))
                .map_err(io_err(&s.stream.spool, "compress pages for"))?,
            None => run,
        };
        s.file.write_all(bytes).map_err(io_err(&s.stream.spool, "write"))?;
        s.stream.pages += (run.len() / PAGE_SIZE) as u64;
        Ok(())
    }

    /// Take the counters of `ring`: events in its finished pages, events dropped.
    fn count(&mut self, ring: &Ring) {
        if let Some(Some(s)) = self.streams.get_mut(ring.cpu) {
            s.stream.events = ring.pages.events();
            s.stream.lost = ring.pages.lost();
        }
    }

    /// Drain a ring whose producer is gone for good.
    pub fn drain_closed(&mut self, r: &Ring) {
        r.pages.drain(|p| self.take(r, p, false));
        self.count(r);
    }

    /// Take the full pages of every ring that holds a batch of them, or of every ring when
    /// `all`; hold those of a ring found half full (see the module documentation).
    pub fn drain_all(&mut self, rings: &[Arc<Ring>], all: bool) -> Drained {
        let mut d = Drained::default();
        let mut waiting = 0;
        for r in rings {
            if !matches!(self.streams.get(r.cpu), Some(Some(_))) && self.error.is_none() {
                // A new thread's ring: its spool file is opened before its pages come.
                if let Err(e) = self.stream(r) {
                    self.error = Some(e);
                }
            }
            let cap = r.pages.capacity();
            let ready = r.pages.ready();
            if all || ready >= batch_pages(cap) {
                let hold = ready >= cap / 2;
                d.active |= r.pages.drain(|p| self.take(r, p, hold)) > 0;
                self.count(r);
            }
            let left = r.pages.ready();
            waiting += left;
            d.rings_behind |= left > cap / 2;
        }
        // Pages arrived since the last look (taken, or more left waiting than then).
        d.active |= waiting > self.waiting;
        self.waiting = waiting;
        d
    }

    /// The recording is over: write every held page, then hand over the streams.
    pub fn finish(mut self) -> Result<Spooled, RecordError> {
        for i in 0..self.streams.len() {
            while self.write_held(i, usize::MAX) > 0 {}
        }
        if let Some(e) = self.error {
            return Err(e);
        }
        // Closing the files is all the flushing they need (no user-space buffers).
        let streams = self.streams.into_iter().flatten().map(|s| s.stream).collect();
        Ok(Spooled {
            dir: self.dir,
            streams,
            chunked: self.chunker.is_some(),
            peak_held: self.peak_held as u64,
        })
    }
}

/// `BLOCK` bytes of memory for held pages, aligned to 2 MiB and backed by huge pages where
/// the kernel gives them (a burst fills blocks at several GB/s; faulting them in 4 KiB at a
/// time costs more than the copy): `len` bytes filled.
struct Block {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: a `Block` owns its memory (like a `Vec<u8>`); only its owner touches it.
unsafe impl Send for Block {}

impl Block {
    const ALIGN: usize = 2 << 20;

    fn layout() -> std::alloc::Layout {
        std::alloc::Layout::from_size_align(BLOCK, Self::ALIGN).expect("valid layout")
    }

    fn new() -> Block {
        // SAFETY: the layout has a nonzero size.
        let ptr = unsafe { std::alloc::alloc(Self::layout()) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(Self::layout());
        }
        // SAFETY: advice on whole pages of this allocation (BLOCK bytes at an aligned
        // address); it changes how the kernel backs them, not their contents.
        unsafe { libc::madvise(ptr as *mut libc::c_void, BLOCK, libc::MADV_HUGEPAGE) };
        Block { ptr, len: 0 }
    }

    fn len(&self) -> usize {
        self.len
    }

    /// Fault every page in now (with a huge page, the first write does).
    fn fault_in(&mut self) {
        for off in (0..BLOCK).step_by(PAGE_SIZE) {
            // SAFETY: inside the allocation; a volatile write so that it is not elided. The
            // bytes are not read before `push` writes them.
            unsafe { self.ptr.add(off).write_volatile(0) };
        }
    }

    fn clear(&mut self) {
        self.len = 0;
    }

    /// Append `b` (which fits: `len + b.len() <= BLOCK`).
    fn push(&mut self, b: &[u8]) {
        assert!(self.len + b.len() <= BLOCK);
        // SAFETY: in bounds of the allocation (checked); `b` is not inside it (the caller
        // owns the block mutably).
        unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), self.ptr.add(self.len), b.len()) };
        self.len += b.len();
    }

    /// The filled bytes.
    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: the first `len` bytes were written by `push`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout, freed once.
        unsafe { std::alloc::dealloc(self.ptr, Self::layout()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ring::PageRing;

    /// 30000 events in a ring's pages (as its producer writes them).
    fn pages() -> (Ring, Vec<u8>) {
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
        (ring, pages)
    }

    /// Spool `pages` of `ring` in three runs (the first two held when `hold`), and return
    /// the spool file and the peak of held bytes.
    fn spooled(
        ring: &Ring,
        pages: &[u8],
        chunker: Option<Chunker>,
        hold: bool,
        name: &str,
    ) -> (Vec<u8>, u64) {
        let d = std::env::temp_dir().join(format!("tp-spool-test-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        // Half a ns per raw unit.
        let anchors = Anchors::with_points(vec![(0, 10), (2_000_000, 1_000_010)]);
        let mut spool = Spool::new(d.clone(), anchors, chunker, 64 << 20, 4 << 20);
        while spool.reserve_short() {
            spool.grow_reserve();
        }
        assert_eq!(spool.free.len(), 2);
        let mut copy = pages.to_vec();
        let (a, rest) = copy.split_at_mut(5 * PAGE_SIZE);
        let (b, c) = rest.split_at_mut(40 * PAGE_SIZE);
        spool.take(ring, a, hold);
        spool.take(ring, b, hold);
        // Part of the held pages written; the rest come before the next run, held too.
        assert_eq!(spool.write_held(0, 10), if hold { 10 } else { 0 });
        spool.take(ring, c, false);
        let s = spool.finish().unwrap();
        let bytes = std::fs::read(d.join("cpu0")).unwrap();
        std::fs::remove_dir_all(&d).unwrap();
        assert_eq!(s.streams[0].pages as usize, pages.len() / PAGE_SIZE);
        (bytes, s.peak_held)
    }

    fn unpack(packed: &[u8]) -> Vec<u8> {
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
        unpacked
    }

    /// The same pages spooled compressed and as they are, taken straight or held first: the
    /// chunks decompress to exactly the uncompressed spool (timestamps converted the same
    /// way), in chunks of whole pages, in order.
    #[test]
    fn compressed_and_held_spools_hold_the_same_pages() {
        let (ring, pages) = pages();
        assert!(pages.len() / PAGE_SIZE > 2 * crate::output::CHUNK_PAGES);
        let (plain, peak) = spooled(&ring, &pages, None, false, "plain");
        assert_eq!(peak, 0);
        assert_eq!(plain.len(), pages.len());
        assert_ne!(plain, pages, "timestamps were converted");
        let (packed, _) = spooled(&ring, &pages, Some(Chunker::new().unwrap()), false, "packed");
        assert!(packed.len() * 3 < plain.len(), "{} -> {}", plain.len(), packed.len());
        assert_eq!(unpack(&packed), plain);
        let (held, peak) = spooled(&ring, &pages, None, true, "held");
        assert_eq!(peak as usize, pages.len() - 10 * PAGE_SIZE);
        assert_eq!(held, plain);
        let (held, _) = spooled(&ring, &pages, Some(Chunker::new().unwrap()), true, "heldz");
        assert_eq!(unpack(&held), plain);
    }
}
