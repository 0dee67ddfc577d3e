//! Ring-buffer pages as the kernel writes them (layout from `header_page`/`header_event`).
//!
//! A page (a "sub-buffer" on 6.x kernels) as read from `per_cpu/cpuN/trace_pipe_raw` or
//! stored in a trace.dat file:
//!
//! ```text
//! offset 0            u64 timestamp        time of the page's first event (clock units)
//! commit_offset       long commit          bytes of event data committed, plus flags:
//!                                            bit 31 RB_MISSED_EVENTS: events were lost
//!                                                   before this page
//!                                            bit 30 RB_MISSED_STORED: the lost count is
//!                                                   stored as a `long` right after the
//!                                                   committed data
//! data_offset         events ...
//! ```
//!
//! Each event starts with a 32-bit word: `type_len:5` (low bits on little-endian kernels),
//! `time_delta:27`, then `array[]` words:
//!
//! | type_len | meaning | size |
//! |---|---|---|
//! | 0 | data, length in `array[0]` (includes that word), data from `array[1]` | 4 + array\[0\] |
//! | 1..=28 | data of `type_len * 4` bytes from `array[0]` | 4 + type_len * 4 |
//! | 29 | padding / discarded event; `time_delta == 0`: the rest of the page is empty | 4 + array\[0\] |
//! | 30 | time extend: `delta = (array[0] << 27) + time_delta` | 8 |
//! | 31 | absolute time stamp: `(array[0] << 27) + time_delta`, the upper 5 bits taken from the running time (kernel `rb_fix_abs_ts`) | 8 |
//!
//! A data event's time is the running time plus its `time_delta`; the running time starts
//! at the page timestamp. Padding does not advance the time (as the kernel's reader).
//!
//! API:
//! - [`PageLayout`]: `HeaderPage` + byte order; [`Page::parse`] checks one page's header and
//!   returns its timestamp, committed length and [`Missed`] events.
//! - [`Page::events`] iterates the page's data records ([`PageRecord`]: absolute `ts`,
//!   borrowed `data`). A malformed event yields one [`PageError`] and ends the iteration:
//!   never a panic, never a loop (every step advances by at least 4 bytes).
//! - [`Cursor`] is the same decoder without a borrow, for mergers that keep many pages open
//!   (see [`crate::tracedat::Records`], which merges per-CPU page streams by time).
//! - [`entry_at`] decodes one event header (the one place that does; [`Cursor`] walks with
//!   it), [`set_delta`] rewrites the time an entry carries, [`count_missed`] sums the lost
//!   events of a run of pages. Recorder, `tp record`'s loss count, `tp stream`, `tp report`
//!   and the tests all read pages through this module.

use crate::header::HeaderPage;
use std::fmt;

/// Flag in the commit word: events were lost (overwritten or dropped) before this page.
pub const RB_MISSED_EVENTS: u64 = 1 << 31;
/// Flag in the commit word: the number of lost events is stored after the committed data.
pub const RB_MISSED_STORED: u64 = 1 << 30;
/// The bits of the commit word that are flags rather than a length.
pub const RB_MISSED_MASK: u64 = RB_MISSED_EVENTS | RB_MISSED_STORED;

const TYPE_PADDING: u32 = 29;
const TYPE_TIME_EXTEND: u32 = 30;
const TYPE_TIME_STAMP: u32 = 31;
const TS_SHIFT: u32 = 27;
const TS_MSB: u64 = 0xf8 << 56;

/// How to read pages: the `header_page` layout and the kernel's byte order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageLayout {
    pub header: HeaderPage,
    pub big_endian: bool,
}

impl PageLayout {
    /// This machine's layout (x86_64, 4 KiB pages, little-endian).
    pub const X86_64: PageLayout = PageLayout { header: HeaderPage::X86_64, big_endian: false };

    pub fn new(header: HeaderPage, big_endian: bool) -> PageLayout {
        PageLayout { header, big_endian }
    }

    /// Bytes per page (header plus data).
    pub fn page_size(&self) -> usize {
        self.header.page_size()
    }

    #[inline]
    fn u32_at(&self, b: &[u8], at: usize) -> u32 {
        let w = [b[at], b[at + 1], b[at + 2], b[at + 3]];
        if self.big_endian {
            u32::from_be_bytes(w)
        } else {
            u32::from_le_bytes(w)
        }
    }

    fn uint_at(&self, b: &[u8], at: usize, size: usize) -> u64 {
        match size {
            4 => self.u32_at(b, at) as u64,
            _ => {
                let mut w = [0u8; 8];
                w.copy_from_slice(&b[at..at + 8]);
                if self.big_endian {
                    u64::from_be_bytes(w)
                } else {
                    u64::from_le_bytes(w)
                }
            }
        }
    }
}

/// Lost events reported by a page's commit flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missed {
    None,
    /// Events were lost before this page; the kernel had no room to store how many.
    Unknown,
    /// This many events were lost before this page.
    Count(u64),
}

/// A malformed page. Offsets are bytes from the start of the page.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PageError {
    /// The buffer is shorter than the page header.
    Short { len: usize, need: usize },
    /// The commit word says more data than the page holds.
    CommitTooLarge { commit: u64, max: usize },
    /// The event at `offset` claims `len` bytes, running past the committed data at `end`.
    EventOverrun { offset: usize, len: u64, end: usize },
    /// The event at `offset` has a length too small to be valid.
    BadLength { offset: usize, len: u64 },
}

impl fmt::Display for PageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PageError::Short { len, need } => {
                write!(f, "page of {len} bytes is shorter than its header ({need} bytes)")
            }
            PageError::CommitTooLarge { commit, max } => {
                write!(f, "page commit {commit} exceeds the page's {max} data bytes")
            }
            PageError::EventOverrun { offset, len, end } => write!(
                f,
                "page byte {offset}: event of {len} bytes runs past the committed data (byte {end})"
            ),
            PageError::BadLength { offset, len } => {
                write!(f, "page byte {offset}: invalid event length {len}")
            }
        }
    }
}

impl std::error::Error for PageError {}

/// One page's header, and its bytes.
#[derive(Debug, Clone, Copy)]
pub struct Page<'a> {
    layout: PageLayout,
    bytes: &'a [u8],
    /// Page timestamp: the time of its first event, in trace clock units.
    pub timestamp: u64,
    /// Committed event bytes (after `data_offset`).
    pub commit: usize,
    pub missed: Missed,
}

impl<'a> Page<'a> {
    /// Check and read the page header. `bytes` is one page (longer buffers are fine: only
    /// `data_offset + commit` bytes are used).
    pub fn parse(layout: &PageLayout, bytes: &'a [u8]) -> Result<Page<'a>, PageError> {
        let h = &layout.header;
        let need = (h.timestamp_offset + 8).max(h.commit_offset + h.commit_size).max(h.data_offset);
        if bytes.len() < need {
            return Err(PageError::Short { len: bytes.len(), need });
        }
        let timestamp = layout.uint_at(bytes, h.timestamp_offset, 8);
        let word = layout.uint_at(bytes, h.commit_offset, h.commit_size);
        // The kernel adds its flags as `int`s (`1 << 31` is negative) to a 64-bit `local_t`,
        // so on 64-bit kernels they arrive sign-extended, and a page can carry the missed
        // flag added twice (seen on 6.18: 0xffffffff00000fe8). Any bit from 31 up means
        // "events missed"; the length is what lies below the flags.
        let commit = word & (RB_MISSED_STORED - 1);
        let missed_flag = word >> 31 != 0;
        let max = (bytes.len() - h.data_offset).min(h.data_size);
        if commit > max as u64 {
            return Err(PageError::CommitTooLarge { commit, max });
        }
        let commit = commit as usize;
        let missed = if !missed_flag {
            Missed::None
        } else if word & RB_MISSED_STORED != 0 && commit + h.commit_size <= max {
            Missed::Count(layout.uint_at(bytes, h.data_offset + commit, h.commit_size))
        } else {
            Missed::Unknown
        };
        Ok(Page { layout: *layout, bytes, timestamp, commit, missed })
    }

    /// The committed event bytes.
    pub fn data(&self) -> &'a [u8] {
        let start = self.layout.header.data_offset;
        &self.bytes[start..start + self.commit]
    }

    /// The page's data records, in order, with absolute timestamps.
    pub fn events(&self) -> PageEvents<'a> {
        PageEvents {
            data: self.data(),
            cursor: Cursor::new(self.timestamp),
            big_endian: self.layout.big_endian,
            data_offset: self.layout.header.data_offset,
        }
    }
}

/// Lost events over a run of whole pages (e.g. a per-CPU capture of `trace_pipe_raw`):
/// (pages saying events were lost before them, sum of the counts they store). A page that
/// does not parse counts in neither; reading it reports the error.
pub fn count_missed(layout: &PageLayout, pages: &[u8]) -> (u64, u64) {
    let (mut flagged, mut counted) = (0, 0);
    for page in pages.chunks(layout.page_size()) {
        match Page::parse(layout, page).map(|p| p.missed) {
            Ok(Missed::Unknown) => flagged += 1,
            Ok(Missed::Count(n)) => {
                flagged += 1;
                counted += n;
            }
            Ok(Missed::None) | Err(_) => {}
        }
    }
    (flagged, counted)
}

/// The data records over a run of whole pages, each page's up to its first malformed one (a
/// page that does not parse counts none), as the merged readers yield them. The bit of each
/// record's event id (its `common_type`) is set in `ids` (`ids[id / 64] & 1 << (id % 64)`;
/// an empty slice keeps none).
pub fn count_events(layout: &PageLayout, pages: &[u8], ids: &mut [u64]) -> u64 {
    let mut n = 0;
    let be = layout.big_endian;
    for page in pages.chunks(layout.page_size()) {
        let Ok(page) = Page::parse(layout, page) else { continue };
        let data = page.data();
        let mut cursor = Cursor::new(page.timestamp);
        while let Step::Event { start, end, .. } = cursor.next(data, be) {
            n += 1;
            if end - start >= 2 {
                let b = [data[start], data[start + 1]];
                let id = if be { u16::from_be_bytes(b) } else { u16::from_le_bytes(b) } as usize;
                if let Some(w) = ids.get_mut(id / 64) {
                    *w |= 1 << (id % 64);
                }
            }
        }
    }
    n
}

/// One data record of a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageRecord<'a> {
    /// Absolute time in trace clock units.
    pub ts: u64,
    /// The event's bytes (starting with `common_type`); may include up to 3 bytes of the
    /// kernel's alignment padding at the end.
    pub data: &'a [u8],
    /// Byte offset of the event header from the start of the page.
    pub offset: usize,
}

/// Iterator over a page's data records; see [`Page::events`].
#[derive(Debug, Clone)]
pub struct PageEvents<'a> {
    data: &'a [u8],
    cursor: Cursor,
    big_endian: bool,
    data_offset: usize,
}

impl<'a> Iterator for PageEvents<'a> {
    type Item = Result<PageRecord<'a>, PageError>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.cursor.next(self.data, self.big_endian) {
            Step::Event { ts, at, start, end } => Some(Ok(PageRecord {
                ts,
                data: &self.data[start..end],
                offset: self.data_offset + at,
            })),
            Step::End => None,
            Step::Error(mut e) => {
                shift_error(&mut e, self.data_offset);
                Some(Err(e))
            }
        }
    }
}

fn shift_error(e: &mut PageError, by: usize) {
    match e {
        PageError::EventOverrun { offset, end, .. } => {
            *offset += by;
            *end += by;
        }
        PageError::BadLength { offset, .. } => *offset += by,
        _ => {}
    }
}

/// What [`Cursor::next`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// A data record: its absolute time, its header at `data[at]` and its bytes
    /// `data[start..end]`.
    Event { ts: u64, at: usize, start: usize, end: usize },
    /// No more records on this page.
    End,
    /// A malformed event (offsets relative to the committed data); the cursor is finished.
    Error(PageError),
}

/// The page decoder's state without a borrow: position in the committed data and running
/// time. Call [`Cursor::next`] with the same `data` (the page's committed bytes) each time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    pos: usize,
    ts: u64,
}

impl Cursor {
    /// A cursor at the start of a page whose header timestamp is `page_ts`.
    pub fn new(page_ts: u64) -> Cursor {
        Cursor { pos: 0, ts: page_ts }
    }

    /// The running time (the last event's time, or the page timestamp).
    pub fn time(&self) -> u64 {
        self.ts
    }

    /// Decode the next data record of `data` (a page's committed bytes).
    #[inline]
    pub fn next(&mut self, data: &[u8], big_endian: bool) -> Step {
        let end = data.len();
        loop {
            let pos = self.pos;
            if pos >= end {
                return Step::End;
            }
            match entry_at(data, pos, big_endian) {
                Ok(Entry { kind: EntryKind::Data { start, end }, delta, len }) => {
                    self.ts = self.ts.wrapping_add(delta);
                    self.pos = pos + len;
                    return Step::Event { ts: self.ts, at: pos, start, end };
                }
                Ok(Entry { kind: EntryKind::Padding, len, .. }) => self.pos = pos + len,
                Ok(Entry { kind: EntryKind::TimeExtend, delta, len }) => {
                    self.ts = self.ts.wrapping_add(delta);
                    self.pos = pos + len;
                }
                Ok(Entry { kind: EntryKind::TimeStamp, delta, len }) => {
                    self.ts = fix_abs_ts(delta, self.ts);
                    self.pos = pos + len;
                }
                Ok(Entry { kind: EntryKind::Empty, .. }) => {
                    self.pos = end;
                    return Step::End;
                }
                Err(e) => {
                    self.pos = end;
                    return Step::Error(e);
                }
            }
        }
    }

    /// Byte position in the committed data of the next event header.
    pub fn pos(&self) -> usize {
        self.pos
    }
}

/// What an entry of a page is (the kernel's `ring_buffer_event` types).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A data record, its bytes at `data[start..end]`.
    Data { start: usize, end: usize },
    /// Padding or a discarded event: skipped, time unchanged.
    Padding,
    /// Padding with no time delta: the rest of the page is empty.
    Empty,
    /// Time extend: `delta` is added to the running time.
    TimeExtend,
    /// Absolute time stamp: `delta` holds its low 59 bits.
    TimeStamp,
}

/// One entry of a page's committed data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub kind: EntryKind,
    /// The time it carries: a data record's `time_delta`, a time extend's whole delta, an
    /// absolute stamp's low 59 bits; 0 for padding.
    pub delta: u64,
    /// Bytes from its header to the next entry.
    pub len: usize,
}

/// Decode the entry whose header is at `data[pos]` (`data`: a page's committed bytes,
/// `pos < data.len()`). The one place tp reads the kernel's event headers; an entry that
/// runs past `data` is an error, and every entry is at least 4 bytes long.
#[inline]
pub fn entry_at(data: &[u8], pos: usize, big_endian: bool) -> Result<Entry, PageError> {
    let end = data.len();
    let overrun = |len: u64| PageError::EventOverrun { offset: pos, len, end };
    if end - pos < 4 {
        return Err(overrun(4));
    }
    let rd = |at: usize| {
        let w = [data[at], data[at + 1], data[at + 2], data[at + 3]];
        if big_endian {
            u32::from_be_bytes(w)
        } else {
            u32::from_le_bytes(w)
        }
    };
    let word = rd(pos);
    // Bit-field order follows the kernel's byte order: type_len is in the low bits on
    // little-endian kernels and in the high bits on big-endian ones.
    let (type_len, delta) = if big_endian {
        (word >> TS_SHIFT, (word & ((1 << TS_SHIFT) - 1)) as u64)
    } else {
        (word & 31, (word >> 5) as u64)
    };
    let array0 = || if end - pos >= 8 { Ok(rd(pos + 4)) } else { Err(overrun(8)) };
    match type_len {
        1..=28 => {
            let len = 4 + type_len as usize * 4;
            if len > end - pos {
                return Err(overrun(len as u64));
            }
            let kind = EntryKind::Data { start: pos + 4, end: pos + len };
            Ok(Entry { kind, delta, len })
        }
        0 => {
            let a = array0()?;
            let len = 4 + a as u64;
            if a < 4 {
                return Err(PageError::BadLength { offset: pos, len });
            }
            if len > (end - pos) as u64 {
                return Err(overrun(len));
            }
            let len = len as usize;
            Ok(Entry { kind: EntryKind::Data { start: pos + 8, end: pos + len }, delta, len })
        }
        TYPE_PADDING if delta == 0 => {
            Ok(Entry { kind: EntryKind::Empty, delta: 0, len: end - pos })
        }
        TYPE_PADDING => {
            let len = 4 + array0()? as u64;
            if len > (end - pos) as u64 {
                return Err(overrun(len));
            }
            Ok(Entry { kind: EntryKind::Padding, delta: 0, len: len as usize })
        }
        TYPE_TIME_EXTEND | TYPE_TIME_STAMP => {
            let v = ((array0()? as u64) << TS_SHIFT) | delta;
            let kind = if type_len == TYPE_TIME_EXTEND {
                EntryKind::TimeExtend
            } else {
                EntryKind::TimeStamp
            };
            Ok(Entry { kind, delta: v, len: 8 })
        }
        _ => unreachable!("type_len is 5 bits"),
    }
}

/// Rewrite the time an entry carries, keeping its type: a data record's `time_delta`
/// (`delta` below 2^27) or a time extend's whole delta. For mending timestamps in place
/// (the `tp` crate's recorder writes raw clock units and converts them when it is done).
pub fn set_delta(data: &mut [u8], pos: usize, delta: u64, big_endian: bool) {
    let rd = |d: &[u8], at: usize| {
        let w = [d[at], d[at + 1], d[at + 2], d[at + 3]];
        if big_endian {
            u32::from_be_bytes(w)
        } else {
            u32::from_le_bytes(w)
        }
    };
    let word = rd(data, pos);
    let type_len = if big_endian { word >> TS_SHIFT } else { word & 31 };
    let low = (delta & ((1 << TS_SHIFT) - 1)) as u32;
    let put = |d: &mut [u8], at: usize, v: u32| {
        let b = if big_endian { v.to_be_bytes() } else { v.to_le_bytes() };
        d[at..at + 4].copy_from_slice(&b);
    };
    put(data, pos, header_word(type_len, low, big_endian));
    if type_len == TYPE_TIME_EXTEND {
        put(data, pos + 4, (delta >> TS_SHIFT) as u32);
    }
}

/// An event header word: `type_len:5`, `time_delta:27`, in the kernel's bit order.
fn header_word(type_len: u32, delta: u32, big_endian: bool) -> u32 {
    if big_endian {
        (type_len << TS_SHIFT) | (delta & ((1 << TS_SHIFT) - 1))
    } else {
        (delta << 5) | type_len
    }
}

/// An absolute timestamp event stores 59 bits; the kernel takes the upper 5 from the
/// previous full time, carrying into them if the low bits wrapped (`rb_fix_abs_ts`).
fn fix_abs_ts(abs: u64, prev: u64) -> u64 {
    if prev & TS_MSB == 0 {
        return abs;
    }
    let v = abs | (prev & TS_MSB);
    if v < prev {
        v.wrapping_add(1 << 59)
    } else {
        v
    }
}

/// Build pages in the kernel's layout (for tests, fuzzing and the in-process recorder's
/// own pages). Events are written with 4-byte alignment like the kernel's.
#[derive(Debug, Clone)]
pub struct PageBuilder {
    layout: PageLayout,
    buf: Vec<u8>,
    pos: usize,
    last_ts: u64,
}

impl PageBuilder {
    /// An empty page whose header timestamp is `ts`.
    pub fn new(layout: PageLayout, ts: u64) -> PageBuilder {
        let mut b = PageBuilder { layout, buf: vec![0; layout.page_size()], pos: 0, last_ts: ts };
        let h = layout.header;
        b.put(h.timestamp_offset, ts, 8);
        b
    }

    fn put(&mut self, at: usize, v: u64, size: usize) {
        let bytes = if self.layout.big_endian { v.to_be_bytes() } else { v.to_le_bytes() };
        let src = if self.layout.big_endian { &bytes[8 - size..] } else { &bytes[..size] };
        self.buf[at..at + size].copy_from_slice(src);
    }

    fn word(&mut self, type_len: u32, delta: u32) -> u32 {
        header_word(type_len, delta, self.layout.big_endian)
    }

    /// Bytes still free for event data.
    pub fn room(&self) -> usize {
        self.layout.header.data_size - self.pos
    }

    /// Append an event at absolute time `ts` (>= the previous one). Returns false, writing
    /// nothing, when it does not fit.
    pub fn push(&mut self, ts: u64, data: &[u8]) -> bool {
        let delta = ts.saturating_sub(self.last_ts);
        let ext = if delta >= 1 << 27 { 8 } else { 0 };
        let padded = data.len().max(1).div_ceil(4) * 4;
        let long = padded > 112;
        let len = 4 + if long { 4 } else { 0 } + padded;
        if ext + len > self.room() {
            return false;
        }
        let base = self.layout.header.data_offset;
        let mut delta = delta;
        if ext > 0 {
            let w = self.word(TYPE_TIME_EXTEND, (delta & ((1 << 27) - 1)) as u32);
            self.put(base + self.pos, w as u64, 4);
            self.put(base + self.pos + 4, delta >> 27, 4);
            self.pos += 8;
            delta = 0;
        }
        let at = base + self.pos;
        if long {
            let w = self.word(0, delta as u32);
            self.put(at, w as u64, 4);
            self.put(at + 4, (padded + 4) as u64, 4);
            self.buf[at + 8..at + 8 + data.len()].copy_from_slice(data);
        } else {
            let w = self.word((padded / 4) as u32, delta as u32);
            self.put(at, w as u64, 4);
            self.buf[at + 4..at + 4 + data.len()].copy_from_slice(data);
        }
        self.pos += len;
        self.last_ts = ts;
        true
    }

    /// Finish: write the commit word (with the missed-events flags) and return the page.
    pub fn finish(mut self, missed: Missed) -> Vec<u8> {
        let h = self.layout.header;
        let mut commit = self.pos as u64;
        match missed {
            Missed::None => {}
            Missed::Unknown => commit |= RB_MISSED_EVENTS,
            Missed::Count(n) => {
                if self.room() >= h.commit_size {
                    self.put(h.data_offset + self.pos, n, h.commit_size);
                    commit |= RB_MISSED_STORED;
                }
                commit |= RB_MISSED_EVENTS;
            }
        }
        self.put(h.commit_offset, commit, h.commit_size);
        self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: PageLayout = PageLayout::X86_64;

    fn collect(page: &[u8]) -> Vec<Result<(u64, Vec<u8>), PageError>> {
        let p = Page::parse(&L, page).unwrap();
        p.events().map(|r| r.map(|r| (r.ts, r.data.to_vec()))).collect()
    }

    #[test]
    fn sign_extended_missed_flags() {
        // Commit word of a real 6.18 page after overruns: the flag added twice, sign-extended.
        let mut page = vec![0u8; 4096];
        page[8..16].copy_from_slice(&0xffff_ffff_0000_0010u64.to_le_bytes());
        let p = Page::parse(&PageLayout::X86_64, &page).unwrap();
        assert_eq!((p.commit, p.missed), (0x10, Missed::Unknown));
    }

    #[test]
    fn builder_round_trip_with_extends_and_long_events() {
        let mut b = PageBuilder::new(L, 1000);
        assert!(b.push(1000, &[1, 2, 3, 4]));
        assert!(b.push(1005, &[5; 7]));
        assert!(b.push(1005 + (1 << 30), &[9; 200]));
        let page = b.finish(Missed::Count(42));
        let p = Page::parse(&L, &page).unwrap();
        assert_eq!(p.missed, Missed::Count(42));
        assert_eq!(p.timestamp, 1000);
        let ev: Vec<_> = p.events().map(Result::unwrap).collect();
        assert_eq!(ev.len(), 3);
        assert_eq!((ev[0].ts, ev[0].data), (1000, &[1, 2, 3, 4][..]));
        assert_eq!((ev[1].ts, &ev[1].data[..7]), (1005, &[5; 7][..]));
        assert_eq!(ev[1].data.len(), 8);
        assert_eq!(ev[2].ts, 1005 + (1 << 30));
        assert_eq!(ev[2].data, &[9; 200][..]);
        assert_eq!(ev[0].offset, 16);
        assert_eq!(ev[2].offset, 16 + 8 + 12 + 8);
    }

    #[test]
    fn missed_flags() {
        let page = PageBuilder::new(L, 1).finish(Missed::Unknown);
        assert_eq!(Page::parse(&L, &page).unwrap().missed, Missed::Unknown);
        let page = PageBuilder::new(L, 1).finish(Missed::None);
        assert_eq!(Page::parse(&L, &page).unwrap().missed, Missed::None);
    }

    #[test]
    fn count_missed_over_a_capture() {
        let mut pages = Vec::new();
        for m in [Missed::None, Missed::Count(5), Missed::Unknown, Missed::Count(7)] {
            let mut b = PageBuilder::new(L, 1);
            assert!(b.push(2, &[1; 8]));
            pages.extend(b.finish(m));
        }
        assert_eq!(count_missed(&L, &pages), (3, 12));
    }

    #[test]
    fn set_delta_rewrites_data_and_time_extend_entries() {
        let mut b = PageBuilder::new(L, 0);
        assert!(b.push(1 << 30, &[1; 4]));
        let mut page = b.finish(Missed::None);
        let p = Page::parse(&L, &page).unwrap();
        let commit = p.commit;
        let data = &mut page[16..16 + commit];
        assert_eq!(entry_at(data, 0, false).unwrap().kind, EntryKind::TimeExtend);
        set_delta(data, 0, (5 << 27) | 3, false);
        set_delta(data, 8, 9, false);
        let p = Page::parse(&L, &page).unwrap();
        let ev: Vec<_> = p.events().map(|r| r.unwrap().ts).collect();
        assert_eq!(ev, [(5 << 27) + 3 + 9]);
    }

    #[test]
    fn absolute_timestamps_and_padding() {
        let mut page = vec![0u8; 4096];
        page[0..8].copy_from_slice(&(0xf800_0000_0000_0010u64).to_le_bytes());
        let mut w = Vec::new();
        // absolute ts: value 0x20 (low 59 bits), delta bits hold low 27 bits
        w.extend_from_slice(&((0x20u32 << 5) | 31).to_le_bytes());
        w.extend_from_slice(&0u32.to_le_bytes());
        // padding (discarded event) of 8 bytes total
        w.extend_from_slice(&((1u32 << 5) | 29).to_le_bytes());
        w.extend_from_slice(&4u32.to_le_bytes());
        // data event, 4 bytes, delta 3
        w.extend_from_slice(&((3u32 << 5) | 1).to_le_bytes());
        w.extend_from_slice(&[7, 7, 7, 7]);
        // null padding ends the page
        w.extend_from_slice(&29u32.to_le_bytes());
        w.extend_from_slice(&[0xff; 8]);
        page[16..16 + w.len()].copy_from_slice(&w);
        page[8..16].copy_from_slice(&(w.len() as u64).to_le_bytes());
        let ev = collect(&page);
        assert_eq!(ev, vec![Ok((0xf800_0000_0000_0023, vec![7, 7, 7, 7]))]);
        // wrap of the low 59 bits carries into the upper ones
        assert_eq!(fix_abs_ts(5, 0x0800_0000_0000_0010), 0x1000_0000_0000_0005);
        assert_eq!(fix_abs_ts(5, 0x10), 5);
    }

    #[test]
    fn bad_pages_are_errors() {
        assert!(matches!(Page::parse(&L, &[0; 10]), Err(PageError::Short { .. })));
        let mut page = vec![0u8; 4096];
        page[8..16].copy_from_slice(&5000u64.to_le_bytes());
        assert!(matches!(Page::parse(&L, &page), Err(PageError::CommitTooLarge { .. })));
        // type_len 0 with a zero length must not loop
        page[8..16].copy_from_slice(&16u64.to_le_bytes());
        let ev = collect(&page);
        assert!(matches!(ev.as_slice(), [Err(PageError::BadLength { offset: 16, .. })]));
        // a data event longer than the commit
        page[16..20].copy_from_slice(&28u32.to_le_bytes());
        let ev = collect(&page);
        assert!(matches!(ev.as_slice(), [Err(PageError::EventOverrun { offset: 16, .. })]));
        // a short page buffer: commit clipped to what is there
        assert!(Page::parse(&L, &page[..20]).is_err());
    }

    #[test]
    fn random_pages_never_panic() {
        let mut x = 0x9e3779b97f4a7c15u64;
        for _ in 0..2000 {
            let mut page = vec![0u8; 4096];
            for b in page.iter_mut() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *b = x as u8;
            }
            let commit = (x % 4200) | if x & 1 << 40 != 0 { RB_MISSED_MASK } else { 0 };
            page[8..16].copy_from_slice(&commit.to_le_bytes());
            if let Ok(p) = Page::parse(&L, &page) {
                assert!(p.events().count() <= 4096 / 4);
            }
        }
    }
}
