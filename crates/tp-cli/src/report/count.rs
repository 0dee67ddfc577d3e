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

use tp_format::page::{Cursor, Page, PageLayout, Step};
use tp_format::tracedat::{PageSource, TraceDat};

pub fn count_events<R: Read + Seek + Send>(
    dat: &TraceDat<R>,
    buffer: usize,
) -> anyhow::Result<u64> {
    // The same refusal as the merged stream (e.g. a latency buffer has no records).
    drop(dat.records(buffer)?);
    let layout = dat.layout();
    let cpus = dat.buffers[buffer].cpus.len();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(cpus);
    if threads <= 1 {
        let mut n = 0;
        for cpu in 0..cpus {
            n += count_source(&layout, dat.page_source_send(buffer, cpu)?);
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
    let work = || {
        let mut n = 0;
        while let Some(src) = take() {
            n += count_source(&layout, src);
        }
        n
    };
    Ok(std::thread::scope(|s| {
        let others: Vec<_> = (1..threads).map(|_| s.spawn(work)).collect();
        let mut n = work();
        for h in others {
            n += h.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
        }
        n
    }))
}

fn count_source(layout: &PageLayout, mut src: Box<dyn PageSource + Send + '_>) -> u64 {
    let mut n = 0;
    while let Ok(true) = src.advance() {
        let Ok(page) = Page::parse(layout, src.page()) else { continue };
        let data = page.data();
        let mut cursor = Cursor::new(page.timestamp);
        while let Step::Event { .. } = cursor.next(data, layout.big_endian) {
            n += 1;
        }
    }
    n
}
