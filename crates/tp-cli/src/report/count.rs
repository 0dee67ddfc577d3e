//! The event count for the header line (`entries-in-buffer/entries-written`), without
//! merging or rendering: each CPU's pages are walked on their own with the page decoder,
//! under the same rules the merger ([`tp_format::tracedat::Records`]) follows, so the count
//! equals the number of events the merged stream yields:
//! - a source that fails (truncated file, corrupt chunk) ends its CPU;
//! - a page whose header is malformed is skipped;
//! - a malformed event ends its page (the events before it count).

use std::io::{Read, Seek};

use tp_format::page::{Cursor, Page, Step};
use tp_format::tracedat::TraceDat;

pub fn count_events<R: Read + Seek>(dat: &TraceDat<R>, buffer: usize) -> anyhow::Result<u64> {
    // The same refusal as the merged stream (e.g. a latency buffer has no records).
    drop(dat.records(buffer)?);
    let layout = dat.layout();
    let mut n = 0;
    for cpu in 0..dat.buffers[buffer].cpus.len() {
        let mut src = dat.page_source(buffer, cpu)?;
        while let Ok(true) = src.advance() {
            let Ok(page) = Page::parse(&layout, src.page()) else { continue };
            let data = page.data();
            let mut cursor = Cursor::new(page.timestamp);
            while let Step::Event { .. } = cursor.next(data, layout.big_endian) {
                n += 1;
            }
        }
    }
    Ok(n)
}
