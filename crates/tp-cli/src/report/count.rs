//! The event count for the header line (`entries-in-buffer/entries-written`), without
//! merging or rendering: each CPU's pages are walked on their own with the page decoder,
//! under the same rules the merger ([`tp_format::tracedat::Records`]) follows, so the count
//! equals the number of events the merged stream yields:
//! - a source that fails (truncated file, corrupt chunk) ends its CPU;
//! - a page whose header is malformed is skipped;
//! - a malformed event ends its page (the events before it count).
//!
//! CPUs are counted in parallel, one thread per core (each source reads the file on its
//! own), since for a compressed file the count is mostly decompression.

use std::io::{Read, Seek};
use std::sync::atomic::{AtomicUsize, Ordering};

use tp_format::page::PageLayout;
use tp_format::tracedat::{PageSource, TraceDat};

/// Count buffer `buffer`'s events and set the bit of each event ID seen in `ids` (a bit
/// set of 65536 bits: `ids[id / 64] & 1 << (id % 64)`).
pub fn count_events<R: Read + Seek + Send>(
    dat: &TraceDat<R>,
    buffer: usize,
    ids: &mut [u64],
) -> anyhow::Result<u64> {
    // The same refusal as the merged stream (e.g. a latency buffer has no records).
    drop(dat.records(buffer)?);
    let layout = dat.layout();
    let cpus = dat.buffers()[buffer].cpus.len();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(cpus);
    if threads <= 1 {
        let mut n = 0;
        for cpu in 0..cpus {
            n += count_source(&layout, dat.page_source_send(buffer, cpu)?, ids);
        }
        return Ok(n);
    }
    let mut sources = Vec::with_capacity(cpus);
    for cpu in 0..cpus {
        sources.push(std::sync::Mutex::new(Some(dat.page_source_send(buffer, cpu)?)));
    }
    // Each thread takes the next CPU not yet counted.
    let next = AtomicUsize::new(0);
    let take = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        let slot = sources.get(i)?;
        if let Some(src) = slot.lock().unwrap_or_else(|e| e.into_inner()).take() {
            return Some(src);
        }
    };
    let words = ids.len();
    let work = || {
        let mut n = 0;
        let mut seen = vec![0u64; words];
        while let Some(src) = take() {
            n += count_source(&layout, src, &mut seen);
        }
        (n, seen)
    };
    let mut merge = |(n, seen): (u64, Vec<u64>)| {
        for (a, b) in ids.iter_mut().zip(seen) {
            *a |= b;
        }
        n
    };
    Ok(std::thread::scope(|s| {
        let others: Vec<_> = (1..threads).map(|_| s.spawn(work)).collect();
        let mut n = merge(work());
        for h in others {
            n += merge(h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
        }
        n
    }))
}

fn count_source(
    layout: &PageLayout,
    mut src: Box<dyn PageSource + Send + '_>,
    ids: &mut [u64],
) -> u64 {
    let mut n = 0;
    while let Ok(true) = src.advance() {
        n += tp_format::page::count_events(layout, src.page(), ids);
    }
    n
}
