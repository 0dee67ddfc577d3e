//! The background thread's side of a recording: it takes full pages from the threads' rings
//! and spools them, one file per stream. Each page gets its timestamps converted to ns
//! (`ring::convert_page`), then goes to the file as it is or in compressed trace.dat v7
//! chunks (`output::Chunker`), so that the file is assembled by copying (in `output`).
//!
//! Compressing is slower than a thread firing back to back (about 1 GB/s of pages against
//! about 3 GB/s here): during a burst the pages wait in the thread's ring, which grows into
//! memory as the burst reaches it (`crate::chunks`), and the background thread compresses
//! them straight from there, oldest first, a step at a time per ring so that every thread
//! is served; while a ring holds many pages it compresses at the faster level.

use crate::clock::{Anchors, Conversion};
use crate::output::{io_err, Chunker, RecordError, Spooled, Stream};
use crate::ring::{convert_page, Ring, PAGE_SIZE};
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

/// Pages waiting in a ring above which its pages are compressed at the faster level
/// (`output::Chunker`): a thread that fires faster than the normal level compresses would
/// otherwise fill its ring and drop events. 64 MiB.
const FAST_ABOVE: usize = 16384;
/// Pages taken from one ring per look at most (about 2 ms of compression), so that one
/// thread's burst does not keep the others waiting.
const STEP: usize = 512;
/// The background thread takes a ring's pages once this many are full (or every
/// `MAX_HOLD`): one write per batch instead of one per page. Big writes cost less per page,
/// and a consumer taking each page right behind the producer measured slower producers (about
/// 20 instead of 12.5 ns/event in runs where it kept up page by page, before the producer's
/// and consumer's cache lines were separated too). 1 MiB.
const BATCH: usize = 256;

/// One stream's spool file.
struct SpoolStream {
    file: File,
    stream: Stream,
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
}

#[derive(Default)]
pub(crate) struct Drained {
    /// Full pages arrived since the previous call.
    pub active: bool,
    /// Some ring still holds a batch of pages: look again without sleeping.
    pub rings_behind: bool,
}

impl Spool {
    pub fn new(dir: PathBuf, anchors: Anchors, chunker: Option<Chunker>) -> Spool {
        let conv = anchors.conversion();
        Spool { dir, anchors, conv, chunker, streams: Vec::new(), error: None, waiting: 0 }
    }

    /// Take a clock calibration point: later pages convert with it.
    pub fn anchor(&mut self) {
        self.anchors.add();
        self.conv = self.anchors.conversion();
    }

    /// Write a run of whole pages of `ring` (`fast`: at the faster level).
    fn take(&mut self, ring: &Ring, run: &mut [u8], fast: bool) {
        if self.error.is_some() {
            return;
        }
        let r = self.stream(ring).and_then(|_| self.write(ring.cpu, run, fast));
        if let Err(e) = r {
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
            self.streams[ring.cpu] = Some(SpoolStream { file, stream });
        }
        Ok(())
    }

    /// Convert and write a run of whole pages of stream `i` to its spool file.
    fn write(&mut self, i: usize, run: &mut [u8], fast: bool) -> Result<(), RecordError> {
        let s = self.streams[i].as_mut().expect("stream exists");
        for page in run.chunks_exact_mut(PAGE_SIZE) {
            // Counted here, not per event by the producer.
            s.stream.events += convert_page(page, &mut s.stream.last_ns, |raw| self.conv.ns(raw));
        }
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

    /// Take the count of events `ring` dropped.
    fn count(&mut self, ring: &Ring) {
        if let Some(Some(s)) = self.streams.get_mut(ring.cpu) {
            s.stream.lost = ring.pages.lost();
        }
    }

    /// Drain a ring whose producer is gone for good.
    pub fn drain_closed(&mut self, r: &Ring) {
        r.pages.drain(usize::MAX, |p| self.take(r, p, false));
        self.count(r);
    }

    /// Take up to a step of full pages from every ring that holds a batch of them, or from
    /// every ring when `all` (then all of them).
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
            let ready = r.pages.ready();
            if all || ready >= BATCH {
                let fast = ready > FAST_ABOVE;
                let max = if all { usize::MAX } else { STEP };
                d.active |= r.pages.drain(max, |p| self.take(r, p, fast)) > 0;
                self.count(r);
            }
            let left = r.pages.ready();
            waiting += left;
            d.rings_behind |= left >= BATCH;
        }
        // Pages arrived since the last look (taken, or more left waiting than then).
        d.active |= waiting > self.waiting;
        self.waiting = waiting;
        d
    }

    /// The recording is over: hand over the streams.
    pub fn finish(self, memory_peak: u64) -> Result<Spooled, RecordError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        // Closing the files is all the flushing they need (no user-space buffers).
        let streams = self.streams.into_iter().flatten().map(|s| s.stream).collect();
        Ok(Spooled { dir: self.dir, streams, chunked: self.chunker.is_some(), memory_peak })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunks::Budget;
    use crate::ring::PageRing;

    /// 30000 events in a ring's pages (as its producer writes them).
    fn pages() -> (Ring, Vec<u8>) {
        let pages = PageRing::with_nudge(300, Arc::new(Budget::new(usize::MAX)), None).unwrap();
        let ring = Ring { pages, cpu: 0, tid: 7, comm: "t".into() };
        for i in 0..30_000u64 {
            // SAFETY: this test is the only producer.
            let dst = unsafe { ring.pages.reserve(24, 1_000 + i * 37 + (i % 5)) }.unwrap();
            // SAFETY: `reserve` gave 24 writable bytes.
            unsafe { std::ptr::copy_nonoverlapping(i.to_le_bytes().as_ptr(), dst.add(8), 8) };
        }
        // SAFETY: as above.
        unsafe { ring.pages.finish_page() };
        let mut pages = Vec::new();
        ring.pages.drain(usize::MAX, |run| pages.extend_from_slice(run));
        (ring, pages)
    }

    /// Spool `pages` of `ring` in three runs (the second at the fast level when `fast`),
    /// and return the spool file.
    fn spooled(
        ring: &Ring,
        pages: &[u8],
        chunker: Option<Chunker>,
        fast: bool,
        name: &str,
    ) -> Vec<u8> {
        let d = std::env::temp_dir().join(format!("tp-spool-test-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        // Half a ns per raw unit.
        let anchors = Anchors::with_points(vec![(0, 10), (2_000_000, 1_000_010)]);
        let mut spool = Spool::new(d.clone(), anchors, chunker);
        let mut copy = pages.to_vec();
        let (a, rest) = copy.split_at_mut(5 * PAGE_SIZE);
        let (b, c) = rest.split_at_mut(40 * PAGE_SIZE);
        spool.take(ring, a, false);
        spool.take(ring, b, fast);
        spool.take(ring, c, false);
        let s = spool.finish(0).unwrap();
        let bytes = std::fs::read(d.join("cpu0")).unwrap();
        std::fs::remove_dir_all(&d).unwrap();
        assert_eq!(s.streams[0].pages as usize, pages.len() / PAGE_SIZE);
        bytes
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

    /// The same pages spooled compressed (at either level) and as they are: the chunks
    /// decompress to exactly the uncompressed spool (timestamps converted the same way), in
    /// chunks of whole pages, in order.
    #[test]
    fn compressed_spools_hold_the_same_pages() {
        let (ring, pages) = pages();
        assert!(pages.len() / PAGE_SIZE > 2 * crate::output::CHUNK_PAGES);
        let plain = spooled(&ring, &pages, None, false, "plain");
        assert_eq!(plain.len(), pages.len());
        assert_ne!(plain, pages, "timestamps were converted");
        let packed = spooled(&ring, &pages, Some(Chunker::new().unwrap()), false, "packed");
        assert!(packed.len() * 3 < plain.len(), "{} -> {}", plain.len(), packed.len());
        assert_eq!(unpack(&packed), plain);
        let fast = spooled(&ring, &pages, Some(Chunker::new().unwrap()), true, "fast");
        assert_ne!(fast, packed, "the middle run at another level");
        assert_eq!(unpack(&fast), plain);
    }
}
