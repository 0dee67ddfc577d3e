//! Per-CPU ring buffers: the mmap'd metadata page plus 2^n data pages the kernel writes
//! records into. The reader loads `data_head` with acquire ordering (the kernel's
//! `smp_rmb()` pairing), hands out every complete record between its tail and the head as
//! raw bytes (borrowed from the mapping; copied only when a record straddles the end of the
//! buffer), then publishes the new `data_tail` with release ordering (the `smp_mb()` before
//! the tail store: the kernel may overwrite the space only after tp has read it).
//! `PERF_RECORD_LOST` and `PERF_RECORD_LOST_SAMPLES` are counted as they pass.

use std::sync::atomic::{AtomicU64, Ordering};

use perf_event_open_sys::bindings::{self as b, perf_event_mmap_page};

use crate::counter::Counter;
use crate::error::{Error, Result};
use crate::sys;

/// What passed through one ring.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RingStats {
    /// Records handed out (samples and side records, LOST included).
    pub records: u64,
    pub bytes: u64,
    /// Samples the kernel dropped because the ring was full (sum of PERF_RECORD_LOST).
    pub lost: u64,
    /// Samples dropped for other reasons (PERF_RECORD_LOST_SAMPLES).
    pub lost_samples: u64,
    /// Times a record with an impossible size was met (the rest of that read skipped).
    pub corrupt: u64,
}

/// The readable bytes of a ring, in order: `first` from the tail to the head or the end of
/// the buffer, `second` from the start of the buffer on (empty unless the data wraps).
pub(crate) struct Readable<'a> {
    pub first: &'a [u8],
    pub second: &'a [u8],
}

/// Hand out every record of `r` to `f`; returns how many bytes were consumed (all of them).
/// Records are 8-byte aligned with an 8-byte header (type u32, misc u16, size u16).
pub(crate) fn drain(
    r: Readable<'_>,
    scratch: &mut Vec<u8>,
    stats: &mut RingStats,
    f: &mut dyn FnMut(&[u8]),
) -> usize {
    let total = r.first.len() + r.second.len();
    let byte_at =
        |i: usize| if i < r.first.len() { r.first[i] } else { r.second[i - r.first.len()] };
    let mut pos = 0;
    while pos + 8 <= total {
        let mut hdr = [0u8; 8];
        for (k, h) in hdr.iter_mut().enumerate() {
            *h = byte_at(pos + k);
        }
        let ty = u32::from_ne_bytes(hdr[0..4].try_into().unwrap());
        let size = u16::from_ne_bytes(hdr[6..8].try_into().unwrap()) as usize;
        if size < 8 || pos + size > total {
            stats.corrupt += 1;
            break;
        }
        let rec: &[u8] = if pos + size <= r.first.len() {
            &r.first[pos..pos + size]
        } else if pos >= r.first.len() {
            let s = pos - r.first.len();
            &r.second[s..s + size]
        } else {
            // Straddles the end of the buffer: the one case that copies.
            scratch.clear();
            scratch.extend_from_slice(&r.first[pos..]);
            scratch.extend_from_slice(&r.second[..size - (r.first.len() - pos)]);
            scratch
        };
        let word = |i: usize| {
            rec.get(i..i + 8).map(|w| u64::from_ne_bytes(w.try_into().unwrap())).unwrap_or(0)
        };
        match ty {
            b::PERF_RECORD_LOST => stats.lost += word(16),
            b::PERF_RECORD_LOST_SAMPLES => stats.lost_samples += word(8),
            _ => {}
        }
        stats.records += 1;
        stats.bytes += size as u64;
        f(rec);
        pos += size;
    }
    total
}

/// The records of a ring's readable bytes (`first`, then `second` after the wrap), handed to
/// `f` whole: the reader's own parsing, without a mapping (for tests and fuzzing). Stops
/// at a record with an impossible size (counted in `corrupt`).
pub fn records_in(first: &[u8], second: &[u8], mut f: impl FnMut(&[u8])) -> RingStats {
    let mut stats = RingStats::default();
    drain(Readable { first, second }, &mut Vec::new(), &mut stats, &mut f);
    stats
}

/// One mapped ring buffer.
#[derive(Debug)]
pub struct Ring {
    map: sys::Mapping,
    data_offset: usize,
    data_size: usize,
    scratch: Vec<u8>,
    stats: RingStats,
    name: String,
    /// The head read up to by [`Ring::read_held`], not released yet.
    held_to: Option<u64>,
}

impl Ring {
    /// Map `counter`'s ring with `data_pages` data pages (a power of two).
    pub fn map(counter: &Counter, data_pages: usize) -> Result<Ring> {
        if !data_pages.is_power_of_two() {
            return Err(Error::Sys {
                call: "mmap",
                event: counter.name().to_string(),
                source: std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "ring pages must be a power of two",
                ),
            });
        }
        let page = sys::page_size();
        let map = sys::mmap_ring(counter.fd(), (1 + data_pages) * page, counter.name())?;
        let meta = map.as_ptr() as *const perf_event_mmap_page;
        // SAFETY: the first page of the mapping is the kernel's perf_event_mmap_page; the
        // data_offset/data_size fields are set at mmap time and never change.
        let (off, size) = unsafe { ((*meta).data_offset as usize, (*meta).data_size as usize) };
        // Kernels before 4.1 leave them 0: data starts at the second page.
        let (data_offset, data_size) =
            if size == 0 { (page, data_pages * page) } else { (off, size) };
        assert!(data_offset + data_size <= map.len());
        Ok(Ring {
            map,
            data_offset,
            data_size,
            scratch: Vec::new(),
            stats: RingStats::default(),
            name: counter.name().into(),
            held_to: None,
        })
    }

    fn head_tail(&self) -> (&AtomicU64, &AtomicU64) {
        let meta = self.map.as_ptr() as *mut perf_event_mmap_page;
        // SAFETY: data_head/data_tail are naturally aligned u64 fields of the mapped metadata
        // page, shared with the kernel, and accessed only atomically; the references live no
        // longer than `self`, which owns the mapping.
        unsafe {
            (
                AtomicU64::from_ptr(std::ptr::addr_of_mut!((*meta).data_head)),
                AtomicU64::from_ptr(std::ptr::addr_of_mut!((*meta).data_tail)),
            )
        }
    }

    /// Bytes waiting to be read.
    pub fn pending(&self) -> u64 {
        let (h, t) = self.head_tail();
        h.load(Ordering::Acquire).wrapping_sub(t.load(Ordering::Relaxed))
    }

    /// Hand every complete record to `f` (header included) and free their space.
    pub fn read(&mut self, f: impl FnMut(&[u8])) -> u64 {
        let n = self.read_held(f);
        self.release();
        n
    }

    /// [`Ring::read`], but the records' space stays the reader's until [`Ring::release`]
    /// (e.g. until they are safely in a file: a reader that dies before leaves them in the
    /// ring for another). Reading again before releasing hands out the same records again.
    pub fn read_held(&mut self, mut f: impl FnMut(&[u8])) -> u64 {
        let (h, t) = self.head_tail();
        let head = h.load(Ordering::Acquire);
        let tail = t.load(Ordering::Relaxed);
        let avail = head.wrapping_sub(tail) as usize;
        if avail == 0 {
            return 0;
        }
        let avail = avail.min(self.data_size);
        let start = (tail % self.data_size as u64) as usize;
        let first_len = avail.min(self.data_size - start);
        // SAFETY: [tail, head) is written by the kernel before it publishes head (acquire
        // above) and not touched again until tp moves data_tail past it (release below);
        // both slices lie inside the data area of the mapping.
        let (first, second) = unsafe {
            let data = self.map.as_ptr().add(self.data_offset);
            (
                std::slice::from_raw_parts(data.add(start), first_len),
                std::slice::from_raw_parts(data, avail - first_len),
            )
        };
        let mut stats = self.stats;
        drain(Readable { first, second }, &mut self.scratch, &mut stats, &mut f);
        self.stats = stats;
        self.held_to = Some(head);
        avail as u64
    }

    /// Give the space of the records read back to the kernel.
    pub fn release(&mut self) {
        if let Some(head) = self.held_to.take() {
            let (_, t) = self.head_tail();
            t.store(head, Ordering::Release);
        }
    }

    pub fn stats(&self) -> RingStats {
        self.stats
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

/// Wait up to `timeout_ms` for any of these counters' rings to have data; true per counter
/// that is readable (or whose task is gone).
pub fn poll(counters: &[&Counter], timeout_ms: i32) -> Result<Vec<bool>> {
    use std::os::fd::AsRawFd;
    let fds: Vec<_> = counters.iter().map(|c| c.fd().as_raw_fd()).collect();
    Ok(sys::poll(&fds, timeout_ms)?.into_iter().map(|r| r != 0).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(ty: u32, body: &[u64]) -> Vec<u8> {
        let size = 8 + 8 * body.len();
        let mut v = ty.to_ne_bytes().to_vec();
        v.extend(0u16.to_ne_bytes());
        v.extend((size as u16).to_ne_bytes());
        for w in body {
            v.extend(w.to_ne_bytes());
        }
        v
    }

    /// A fake ring: `records` written from byte `start` of a `size`-byte buffer, wrapping.
    fn ring_with(size: usize, start: usize, records: &[Vec<u8>]) -> (Vec<u8>, usize) {
        let mut buf = vec![0xeeu8; size];
        let mut p = start;
        for r in records {
            for &byte in r {
                buf[p % size] = byte;
                p += 1;
            }
        }
        (buf, p - start)
    }

    fn read_fake(buf: &[u8], start: usize, avail: usize, stats: &mut RingStats) -> Vec<Vec<u8>> {
        let first_len = avail.min(buf.len() - start);
        let r =
            Readable { first: &buf[start..start + first_len], second: &buf[..avail - first_len] };
        let mut out = Vec::new();
        let mut scratch = Vec::new();
        drain(r, &mut scratch, stats, &mut |rec| out.push(rec.to_vec()));
        out
    }

    #[test]
    fn records_come_out_whole_across_the_wrap() {
        let recs = vec![
            record(b::PERF_RECORD_SAMPLE, &[1, 2]),
            record(b::PERF_RECORD_SAMPLE, &[3, 4, 5]),
            record(b::PERF_RECORD_LOST, &[99, 7]),
            record(b::PERF_RECORD_LOST_SAMPLES, &[3]),
            record(b::PERF_RECORD_SAMPLE, &[6]),
        ];
        // Every start position: records straddling the end at every offset.
        for start in (0..128).step_by(8) {
            let (buf, avail) = ring_with(128, start, &recs);
            let mut st = RingStats::default();
            let got = read_fake(&buf, start, avail, &mut st);
            assert_eq!(got, recs, "start {start}");
            assert_eq!((st.records, st.lost, st.lost_samples, st.corrupt), (5, 7, 3, 0));
            assert_eq!(st.bytes as usize, avail);
        }
    }

    #[test]
    fn an_impossible_size_stops_the_read() {
        let mut bad = record(b::PERF_RECORD_SAMPLE, &[1]);
        bad[6..8].copy_from_slice(&4u16.to_ne_bytes());
        let (buf, avail) = ring_with(64, 0, &[record(b::PERF_RECORD_SAMPLE, &[1]), bad]);
        let mut st = RingStats::default();
        assert_eq!(read_fake(&buf, 0, avail, &mut st).len(), 1);
        assert_eq!(st.corrupt, 1);
    }
}
