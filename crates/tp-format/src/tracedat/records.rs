//! Per-CPU page streams merged by time: one merger for trace.dat files and for raw
//! `trace_pipe_raw` captures.

use super::{Error, ErrorKind};
use crate::page::{Cursor, Missed, Page, PageLayout, Step};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::Read;

/// A stream of one CPU's ring-buffer pages.
///
/// `advance` moves to the next page and returns `false` at the end; `page` returns the
/// current page (valid after `advance` returned `true`, until the next `advance`). Sources
/// own their buffers, so the merger borrows records from them without copying.
pub trait PageSource {
    fn advance(&mut self) -> Result<bool, Error>;
    fn page(&self) -> &[u8];
    /// File offset of the current page (for error messages), if meaningful.
    fn offset(&self) -> u64 {
        0
    }
}

/// Pages from any `Read` of concatenated whole pages, such as a saved
/// `per_cpu/cpuN/trace_pipe_raw` stream or a page-aligned region of a file. Reads
/// `pages_per_read` pages at a time. A partial page at the end is reported as
/// [`ErrorKind::Truncated`] after all whole pages.
pub struct ReadPages<R> {
    r: R,
    page_size: usize,
    buf: Vec<u8>,
    filled: usize,
    cur: usize,
    started: bool,
    eof: bool,
    offset: u64,
    base: u64,
    limit: Option<u64>,
    what: String,
}

impl<R: Read> ReadPages<R> {
    pub fn new(r: R, page_size: usize) -> ReadPages<R> {
        ReadPages::with_options(r, page_size, 16, 0, None, "page stream".into())
    }

    /// `base`: file offset of the stream's first byte (for messages); `limit`: bytes the
    /// stream should hold (a shortfall is reported as truncation).
    pub(crate) fn with_options(
        r: R,
        page_size: usize,
        pages_per_read: usize,
        base: u64,
        limit: Option<u64>,
        what: String,
    ) -> ReadPages<R> {
        let page_size = page_size.max(1);
        ReadPages {
            r,
            page_size,
            buf: vec![0; page_size * pages_per_read.max(1)],
            filled: 0,
            cur: 0,
            started: false,
            eof: false,
            offset: 0,
            base,
            limit,
            what,
        }
    }

    fn fill(&mut self) -> Result<(), Error> {
        // Keep a partial page at the front, then read more.
        let keep = self.filled - self.cur;
        self.buf.copy_within(self.cur..self.filled, 0);
        self.offset += self.cur as u64;
        self.filled = keep;
        self.cur = 0;
        while !self.eof && self.filled < self.buf.len() {
            match self.r.read(&mut self.buf[self.filled..]) {
                Ok(0) => self.eof = true,
                Ok(n) => self.filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(Error::tracedat_io(
                        self.base + self.offset + self.filled as u64,
                        &self.what,
                        e,
                    ))
                }
            }
        }
        Ok(())
    }
}

impl<R: Read> PageSource for ReadPages<R> {
    fn advance(&mut self) -> Result<bool, Error> {
        if self.started {
            self.cur += self.page_size;
        }
        self.started = true;
        if self.filled - self.cur < self.page_size {
            self.fill()?;
        }
        if self.filled - self.cur >= self.page_size {
            return Ok(true);
        }
        let have = self.offset + (self.filled - self.cur) as u64;
        let partial = self.filled > self.cur;
        let short = self.limit.is_some_and(|l| have < l);
        self.cur = self.filled;
        if partial || short {
            let need =
                self.limit.unwrap_or(have.div_ceil(self.page_size as u64) * self.page_size as u64);
            return Err(Error::tracedat(
                self.base + self.offset,
                &self.what,
                ErrorKind::Truncated { need: need - self.offset, have: have - self.offset },
            ));
        }
        Ok(false)
    }

    fn page(&self) -> &[u8] {
        &self.buf[self.cur..self.cur + self.page_size]
    }

    fn offset(&self) -> u64 {
        self.base + self.offset + self.cur as u64
    }
}

/// What [`Records::next`] yields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Item<'a> {
    Event(Record<'a>),
    /// Events lost on `cpu` just before the next event of that CPU (the kernel prints
    /// `CPU:N [LOST M EVENTS]` there).
    Lost(Lost),
}

/// One event record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    pub cpu: u32,
    /// Absolute time in trace clock units (as the ring buffer stored it).
    pub ts: u64,
    /// The record bytes, from `common_type` on (may end with alignment padding).
    pub data: &'a [u8],
}

/// Lost events reported by a page header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lost {
    pub cpu: u32,
    /// Time of the CPU's next event (or of the page when it has none).
    pub ts: u64,
    /// Number of lost events, when the kernel stored it.
    pub count: Option<u64>,
}

struct CpuStream<'s> {
    cpu: u32,
    src: Box<dyn PageSource + 's>,
    /// Committed data range of the current page within `src.page()`.
    start: usize,
    end: usize,
    cursor: Cursor,
    /// The head record, as a range of the current page's data.
    head: Option<(u64, usize, usize)>,
    lost: Option<Missed>,
    page_offset: u64,
}

/// All records of a set of per-CPU page streams, merged by timestamp (ties: lower CPU
/// first, as the kernel's `trace` file).
///
/// A lending iterator: `while let Some(item) = records.next() { ... }`. No allocation per
/// record; memory is the sources' buffers (a few pages per CPU).
///
/// Errors: a malformed page yields one `Err` (naming CPU and file offset) and the rest of
/// that page is skipped; the CPU continues with its next page. A source that fails
/// (truncated file, I/O, corrupt compressed chunk) stops that CPU; its error is yielded
/// after the records of all other CPUs, so a truncated file yields every complete page
/// first, then says what was cut. Iteration may continue after any `Err`.
pub struct Records<'s> {
    layout: PageLayout,
    cpus: Vec<CpuStream<'s>>,
    /// The CPU whose head comes first: (time, CPU, index). Kept off the heap, so a run of
    /// events from one CPU costs one comparison each, not a heap push and pop.
    first: Option<(u64, u32, usize)>,
    /// The other CPUs with a head (or a final lost-events marker).
    heap: BinaryHeap<Reverse<(u64, u32, usize)>>,
    /// CPU index whose head was handed out and must advance on the next call.
    pending: Option<usize>,
    /// Page errors to yield now (a stack; at most a few).
    errors: Vec<Error>,
    /// Source errors, yielded after all records.
    deferred: Vec<Error>,
    started: bool,
    lost_events: u64,
}

impl<'s> Records<'s> {
    /// Merge the given CPUs' page streams.
    pub fn new(layout: PageLayout, sources: Vec<(u32, Box<dyn PageSource + 's>)>) -> Records<'s> {
        let cpus = sources
            .into_iter()
            .map(|(cpu, src)| CpuStream {
                cpu,
                src,
                start: 0,
                end: 0,
                cursor: Cursor::new(0),
                head: None,
                lost: None,
                page_offset: 0,
            })
            .collect();
        Records {
            layout,
            cpus,
            first: None,
            heap: BinaryHeap::new(),
            pending: None,
            errors: Vec::new(),
            deferred: Vec::new(),
            started: false,
            lost_events: 0,
        }
    }

    /// The page layout used.
    pub fn layout(&self) -> &PageLayout {
        &self.layout
    }

    /// Lost events counted so far (pages whose count is unknown add nothing).
    pub fn lost_events(&self) -> u64 {
        self.lost_events
    }

    /// Advance CPU `i` to its next record and return its merge key (`None`: the CPU has
    /// ended). A malformed page is queued as an error and skipped; a failing source is
    /// deferred and ends the CPU.
    fn advance_cpu(&mut self, i: usize) -> Option<(u64, u32, usize)> {
        let big_endian = self.layout.big_endian;
        let c = &mut self.cpus[i];
        loop {
            if c.end > c.start {
                let data = &c.src.page()[c.start..c.end];
                match c.cursor.next(data, big_endian) {
                    Step::Event { ts, start, end, .. } => {
                        c.head = Some((ts, c.start + start, c.start + end));
                        return Some((ts, c.cpu, i));
                    }
                    Step::End => {}
                    Step::Error(e) => {
                        let cpu = c.cpu;
                        let what = format!("CPU {cpu} page");
                        let kind = ErrorKind::Page { cpu, error: e };
                        self.errors.push(Error::tracedat(c.page_offset, &what, kind));
                    }
                }
            }
            // Load the next page.
            c.head = None;
            c.start = 0;
            c.end = 0;
            match c.src.advance() {
                Ok(true) => {}
                end => {
                    if let Err(e) = end {
                        self.deferred.push(e);
                    }
                    // Losses on the last pages, with no event after them: still reported.
                    return c.lost.is_some().then_some((c.cursor.time(), c.cpu, i));
                }
            }
            c.page_offset = c.src.offset();
            match Page::parse(&self.layout, c.src.page()) {
                Ok(p) => {
                    let data_offset = self.layout.header.data_offset;
                    c.start = data_offset;
                    c.end = data_offset + p.commit;
                    c.cursor = Cursor::new(p.timestamp);
                    // An empty page's loss stays pending for the next page with events.
                    if p.missed != Missed::None {
                        c.lost = Some(p.missed);
                    }
                }
                Err(e) => {
                    let cpu = c.cpu;
                    let what = format!("CPU {cpu} page");
                    let kind = ErrorKind::Page { cpu, error: e };
                    self.errors.push(Error::tracedat(c.page_offset, &what, kind));
                }
            }
        }
    }

    /// The next record or lost-events marker, in time order.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Option<Result<Item<'_>, Error>> {
        if !self.started {
            self.started = true;
            for i in 0..self.cpus.len() {
                if let Some(k) = self.advance_cpu(i) {
                    self.heap.push(Reverse(k));
                }
            }
            self.first = self.heap.pop().map(|Reverse(k)| k);
            // Errors found while starting come first, in CPU order.
            self.errors.reverse();
        }
        if let Some(i) = self.pending.take() {
            // CPU `i` was first; its next head stays first while it is before every other
            // CPU's head (ties: the lower CPU, exactly as the heap orders them).
            self.first = match self.advance_cpu(i) {
                Some(k) => match self.heap.peek_mut() {
                    Some(mut top) if top.0 < k => Some(std::mem::replace(&mut *top, Reverse(k)).0),
                    _ => Some(k),
                },
                None => self.heap.pop().map(|Reverse(k)| k),
            };
        }
        if let Some(e) = self.errors.pop() {
            return Some(Err(e));
        }
        let Some((ts, cpu, i)) = self.first else {
            if self.deferred.is_empty() {
                return None;
            }
            return Some(Err(self.deferred.remove(0)));
        };
        let c = &mut self.cpus[i];
        if let Some(m) = c.lost.take() {
            if c.head.is_none() {
                // The CPU has ended; this marker was its last item.
                self.first = self.heap.pop().map(|Reverse(k)| k);
            }
            // Report the loss first; the event stays at the head.
            let count = match m {
                Missed::Count(n) => {
                    self.lost_events += n;
                    Some(n)
                }
                _ => None,
            };
            return Some(Ok(Item::Lost(Lost { cpu, ts, count })));
        }
        let (_, s, e) = c.head.expect("a CPU with a key and no loss has a head");
        self.pending = Some(i);
        Some(Ok(Item::Event(Record { cpu, ts, data: &self.cpus[i].src.page()[s..e] })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::page::PageBuilder;

    fn pages(cpu_events: &[(u64, u8)], per_page: usize, lost_first: Missed) -> Vec<u8> {
        let l = PageLayout::X86_64;
        let mut out = Vec::new();
        for (n, chunk) in cpu_events.chunks(per_page).enumerate() {
            let mut b = PageBuilder::new(l, chunk[0].0);
            for &(ts, v) in chunk {
                assert!(b.push(ts, &[v; 8]));
            }
            out.extend(b.finish(if n == 0 { lost_first } else { Missed::None }));
        }
        out
    }

    #[test]
    fn merges_cpus_by_time_with_lost_markers() {
        let c0 = pages(&[(10, 1), (30, 2), (50, 3), (70, 4)], 2, Missed::None);
        let c1 = pages(&[(20, 5), (30, 6), (60, 7)], 2, Missed::Count(9));
        let srcs: Vec<(u32, Box<dyn PageSource>)> = vec![
            (0, Box::new(ReadPages::new(&c0[..], 4096))),
            (1, Box::new(ReadPages::new(&c1[..], 4096))),
        ];
        let mut r = Records::new(PageLayout::X86_64, srcs);
        let mut got = Vec::new();
        while let Some(item) = r.next() {
            match item.unwrap() {
                Item::Event(e) => got.push(format!("{}:{}:{}", e.cpu, e.ts, e.data[0])),
                Item::Lost(l) => got.push(format!("lost {}:{}:{:?}", l.cpu, l.ts, l.count)),
            }
        }
        assert_eq!(
            got,
            [
                "0:10:1",
                "lost 1:20:Some(9)",
                "1:20:5",
                "0:30:2",
                "1:30:6",
                "0:50:3",
                "1:60:7",
                "0:70:4"
            ]
        );
        assert_eq!(r.lost_events(), 9);
    }

    #[test]
    fn runs_from_one_cpu_keep_ties_to_the_lower_cpu() {
        let c0 = pages(&[(12, 1), (20, 2), (20, 3), (21, 4)], 3, Missed::None);
        let c1 = pages(&[(10, 5), (11, 6), (12, 7), (13, 8), (20, 9), (30, 10)], 4, Missed::None);
        let c2 = pages(&[(12, 11), (20, 12)], 1, Missed::None);
        let srcs: Vec<(u32, Box<dyn PageSource>)> = vec![
            (2, Box::new(ReadPages::new(&c2[..], 4096))),
            (0, Box::new(ReadPages::new(&c0[..], 4096))),
            (1, Box::new(ReadPages::new(&c1[..], 4096))),
        ];
        let mut r = Records::new(PageLayout::X86_64, srcs);
        let mut got = Vec::new();
        while let Some(item) = r.next() {
            if let Item::Event(e) = item.unwrap() {
                got.push((e.ts, e.cpu, e.data[0]));
            }
        }
        let mut want = got.clone();
        want.sort_by_key(|&(ts, cpu, _)| (ts, cpu));
        assert_eq!(got, want);
        assert_eq!(got.len(), 12);
        assert_eq!(&got[..5], &[(10, 1, 5), (11, 1, 6), (12, 0, 1), (12, 1, 7), (12, 2, 11)]);
    }

    #[test]
    fn lost_events_on_the_last_page_are_reported() {
        let mut c0 = pages(&[(10, 1)], 1, Missed::None);
        c0.extend(PageBuilder::new(PageLayout::X86_64, 50).finish(Missed::Count(3)));
        let srcs: Vec<(u32, Box<dyn PageSource>)> =
            vec![(0, Box::new(ReadPages::new(&c0[..], 4096)))];
        let mut r = Records::new(PageLayout::X86_64, srcs);
        let mut got = Vec::new();
        while let Some(item) = r.next() {
            got.push(item.unwrap().describe());
        }
        assert_eq!(got, ["event 0:10", "lost 0:50:Some(3)"]);
    }

    impl Item<'_> {
        fn describe(self) -> String {
            match self {
                Item::Event(e) => format!("event {}:{}", e.cpu, e.ts),
                Item::Lost(l) => format!("lost {}:{}:{:?}", l.cpu, l.ts, l.count),
            }
        }
    }

    #[test]
    fn truncated_stream_yields_whole_pages_then_error() {
        let mut c0 = pages(&[(10, 1), (30, 2), (50, 3)], 1, Missed::None);
        c0.truncate(4096 * 2 + 100);
        let c1 = pages(&[(40, 5)], 1, Missed::None);
        let srcs: Vec<(u32, Box<dyn PageSource>)> = vec![
            (0, Box::new(ReadPages::new(&c0[..], 4096))),
            (1, Box::new(ReadPages::new(&c1[..], 4096))),
        ];
        let mut r = Records::new(PageLayout::X86_64, srcs);
        let mut got = Vec::new();
        while let Some(item) = r.next() {
            match item {
                Ok(Item::Event(e)) => got.push(format!("{}:{}", e.cpu, e.ts)),
                Ok(Item::Lost(_)) => got.push("lost".into()),
                Err(e) => got.push(format!("err {e}")),
            }
        }
        assert_eq!(got[..3], ["0:10", "0:30", "1:40"]);
        assert!(got[3].starts_with("err "), "{got:?}");
        assert!(got[3].contains("truncated"), "{got:?}");
        assert_eq!(got.len(), 4);
    }

    #[test]
    fn bad_page_is_skipped_with_an_error() {
        let mut c0 = pages(&[(10, 1), (30, 2)], 1, Missed::None);
        c0[8..16].copy_from_slice(&9999u64.to_le_bytes());
        let srcs: Vec<(u32, Box<dyn PageSource>)> =
            vec![(0, Box::new(ReadPages::new(&c0[..], 4096)))];
        let mut r = Records::new(PageLayout::X86_64, srcs);
        let mut got = Vec::new();
        while let Some(item) = r.next() {
            got.push(match item {
                Ok(Item::Event(e)) => format!("{}", e.ts),
                Ok(Item::Lost(_)) => "lost".into(),
                Err(e) => format!("err {e}"),
            });
        }
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(got[0].starts_with("err"));
        assert_eq!(got[1], "30");
    }
}
