//! Opening a perf.data file (header, attributes and ids, features) and streaming its data
//! section's records, in file order or sorted by time.

use super::attr::{EventAttr, SIZE_MAX, SIZE_VER0};
use super::features::{self, Features};
use super::record::{record_id, record_time, RawRecord, Record};
use super::{kind, Error, ErrorKind, MAGIC};
use crate::tracedat::bytes::{Input, MAX_SECTION};
use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::{Read, Seek};

/// Bytes of records held back while sorting, at most. perf flushes each round (one pass
/// over its ring buffers: their size at most); a file without rounds is sorted in windows
/// of this size.
pub const MAX_PENDING: usize = 64 << 20;
/// Bytes read from the data section at a time.
const BLOCK: usize = 1 << 20;
/// The file header's size (`struct perf_file_header`).
const HEADER_SIZE: u64 = 104;
/// A pipe-mode header: magic and size only.
const PIPE_HEADER_SIZE: u64 = 16;

/// One event of the file: its attr, its ids, and its name when the file says (the
/// `EVENT_DESC` feature, or pipe mode's event updates).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attr {
    pub attr: EventAttr,
    pub ids: Vec<u64>,
    pub name: Option<String>,
}

/// An opened perf.data file. See the [module documentation](super).
pub struct PerfData<R> {
    input: Input<R>,
    /// Written by `perf record -o -` (attributes and features are records in the data).
    pub pipe: bool,
    pub attrs: Vec<Attr>,
    pub features: Features,
    /// Where the records are: `data_offset..data_offset + data_size` (up to the file's end
    /// when the file is shorter).
    pub data_offset: u64,
    pub data_size: u64,
    /// Problems that did not stop the file from opening (e.g. a feature section cut off):
    /// callers show them.
    pub warnings: Vec<Error>,
    /// Event id -> index into `attrs`.
    ids: HashMap<u64, u32>,
    /// Whether records carry `sample_id_all` trailers (perf requires it of every attr
    /// alike).
    sample_id_all: bool,
}

impl<R> std::fmt::Debug for PerfData<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PerfData")
            .field("pipe", &self.pipe)
            .field("attrs", &self.attrs)
            .field("data_offset", &self.data_offset)
            .field("data_size", &self.data_size)
            .finish_non_exhaustive()
    }
}

impl PerfData<File> {
    /// Open a file, read with positional reads.
    pub fn open_file(file: File) -> Result<PerfData<File>, Error> {
        PerfData::open_input(Input::file(file).map_err(Error::from_tracedat)?)
    }
}

/// Whether `bytes` (a file's start) are perf.data's magic.
pub fn is_perf_data(bytes: &[u8]) -> bool {
    bytes.starts_with(MAGIC)
}

impl<R: Read + Seek> PerfData<R> {
    /// Open any `Read + Seek` (a `Cursor` of bytes, a `BufReader<File>`).
    pub fn open(reader: R) -> Result<PerfData<R>, Error> {
        PerfData::open_input(Input::new(reader).map_err(Error::from_tracedat)?)
    }

    fn open_input(input: Input<R>) -> Result<PerfData<R>, Error> {
        let mut magic = [0u8; 16];
        if input.len < 16 {
            return Err(Error::perfdata(0, "file header", ErrorKind::BadMagic));
        }
        input.read_at(0, &mut magic, "file header").map_err(Error::from_tracedat)?;
        if &magic[..8] != MAGIC {
            if &magic[..8] == b"2ELIFREP" {
                return Err(Error::perfdata(
                    0,
                    "file header",
                    ErrorKind::Unsupported("a big-endian perf.data".into()),
                ));
            }
            return Err(Error::perfdata(0, "file header", ErrorKind::BadMagic));
        }
        let size = super::u64_at(&magic, 8);
        let mut d = PerfData {
            input,
            pipe: false,
            attrs: Vec::new(),
            features: Features::default(),
            data_offset: 0,
            data_size: 0,
            warnings: Vec::new(),
            ids: HashMap::new(),
            sample_id_all: false,
        };
        match size {
            PIPE_HEADER_SIZE => d.open_pipe()?,
            HEADER_SIZE => d.open_file_mode()?,
            s => {
                return Err(Error::perfdata_invalid(8, "file header", format!("header size {s}")));
            }
        }
        d.index_ids();
        Ok(d)
    }

    fn read_vec(&self, offset: u64, n: u64, what: &str) -> Result<Vec<u8>, Error> {
        self.input.read_vec(offset, n, what).map_err(Error::from_tracedat)
    }

    fn open_file_mode(&mut self) -> Result<(), Error> {
        let h = self.read_vec(0, HEADER_SIZE, "file header")?;
        let attr_size = super::u64_at(&h, 16);
        let (attrs_at, attrs_size) = (super::u64_at(&h, 24), super::u64_at(&h, 32));
        self.data_offset = super::u64_at(&h, 40);
        self.data_size = super::u64_at(&h, 48);
        let bitmap: Vec<u64> = (0..4).map(|i| super::u64_at(&h, 72 + 8 * i)).collect();

        // attrs: (perf_event_attr, ids section) each.
        if !(SIZE_VER0 as u64 + 16..=SIZE_MAX as u64 + 16).contains(&attr_size) {
            return Err(Error::perfdata_invalid(
                16,
                "file header",
                format!("attr size {attr_size}"),
            ));
        }
        if attrs_size % attr_size != 0 {
            return Err(Error::perfdata_invalid(
                32,
                "file header",
                format!("attrs section of {attrs_size} bytes is not a multiple of {attr_size}"),
            ));
        }
        let attrs = self.read_vec(attrs_at, attrs_size, "attrs")?;
        for (i, a) in attrs.chunks_exact(attr_size as usize).enumerate() {
            let at = attrs_at + i as u64 * attr_size;
            let n = attr_size as usize - 16;
            let attr = EventAttr::parse(&a[..n]);
            let (ids_at, ids_size) = (super::u64_at(a, n), super::u64_at(a, n + 8));
            if ids_size % 8 != 0 {
                return Err(Error::perfdata_invalid(
                    at,
                    "attrs",
                    format!("ids of {ids_size} bytes"),
                ));
            }
            let ids = self.read_vec(ids_at, ids_size, "attr ids")?;
            let ids = ids.chunks_exact(8).map(|c| super::u64_at(c, 0)).collect();
            self.attrs.push(Attr { attr, ids, name: None });
        }
        if self.attrs.is_empty() {
            return Err(Error::perfdata_invalid(
                24,
                "file header",
                "the file has no events".into(),
            ));
        }
        if self.data_size == 0 && bitmap.iter().all(|&b| b == 0) {
            self.unfinished(attrs_at + attrs_size)?;
        }

        // Features: their table follows the data section.
        let present: Vec<u32> = (0..features::id::BITS)
            .filter(|&b| bitmap[b as usize / 64] >> (b % 64) & 1 != 0)
            .collect();
        self.features.present.clone_from(&present);
        let table_at = self.data_offset.saturating_add(self.data_size);
        if table_at > self.input.len {
            // The records say where they are cut; this says what else is lost.
            self.warnings.push(Error::perfdata_invalid(
                self.input.len,
                "feature sections",
                format!(
                    "the file ends inside its data section (which the header says ends at \
                     {table_at:#x}): the features after it (event formats, names) are lost"
                ),
            ));
        } else if !present.is_empty() {
            if let Err(e) = self.read_features(table_at, &present) {
                self.warnings.push(e);
            }
        }
        for d in std::mem::take(&mut self.features.event_desc) {
            if let Some(a) = self.attrs.iter_mut().find(|a| !d.ids.is_empty() && a.ids == d.ids) {
                a.name = Some(d.name.clone());
            }
            self.features.event_desc.push(d);
        }
        Ok(())
    }

    /// A header whose data size and features were never written: the writer died before
    /// finishing the file (perf record and tp write them last). The records are from the
    /// data offset (or, when that is 0 too, right after the attrs) to the file's end; a file
    /// without any is an error, not an empty recording.
    fn unfinished(&mut self, attrs_end: u64) -> Result<(), Error> {
        if self.data_offset == 0 {
            self.data_offset = attrs_end;
        }
        let Some(size) = self.input.len.checked_sub(self.data_offset).filter(|&n| n > 0) else {
            return Err(Error::perfdata_invalid(
                48,
                "file header",
                "the recording was not finished (data size 0) and wrote no records: nothing to read".into(),
            ));
        };
        self.data_size = size;
        self.warnings.push(Error::perfdata_invalid(
            48,
            "file header",
            format!(
                "the recording was not finished (data size 0, no features): reading the {size} bytes of records up to the file's end; event names and formats are missing"
            ),
        ));
        Ok(())
    }

    fn read_features(&mut self, table_at: u64, present: &[u32]) -> Result<(), Error> {
        let table = self.read_vec(table_at, 16 * present.len() as u64, "feature table")?;
        for (i, &feat) in present.iter().enumerate() {
            let at = super::u64_at(&table, 16 * i);
            let size = super::u64_at(&table, 16 * i + 8);
            let what = features::name(feat);
            if size > MAX_SECTION {
                self.warnings.push(Error::perfdata_invalid(at, what, format!("size {size}")));
                continue;
            }
            let parsed = self
                .read_vec(at, size, what)
                .and_then(|data| self.features.parse_section(feat, &data, at));
            if let Err(e) = parsed {
                self.warnings.push(e);
            }
        }
        Ok(())
    }

    /// Pipe mode: attributes, features and tracing data are records at the start of the
    /// stream; read them up to the first sample.
    fn open_pipe(&mut self) -> Result<(), Error> {
        self.pipe = true;
        self.data_offset = PIPE_HEADER_SIZE;
        self.data_size = self.input.len - PIPE_HEADER_SIZE;
        let mut pos = PIPE_HEADER_SIZE;
        while pos + 8 <= self.input.len {
            let mut h = [0u8; 8];
            self.input.read_at(pos, &mut h, "record header").map_err(Error::from_tracedat)?;
            let (k, size) = (super::u32_at(&h, 0), super::u16_at(&h, 6) as u64);
            // perf writes its set-up records (and synthesized side records) before the
            // first sample; FINISHED_INIT ends them.
            if k == kind::SAMPLE || k == kind::FINISHED_INIT || size < 8 {
                break;
            }
            let rec = self.read_vec(pos, size, kind::name(k))?;
            let body = &rec[8..];
            let mut next = pos + size;
            match k {
                kind::HEADER_ATTR => {
                    let n = if body.len() >= 8 { super::u32_at(body, 4) as usize } else { 0 };
                    if n < SIZE_VER0 || n > body.len() {
                        return Err(Error::perfdata_invalid(
                            pos,
                            "HEADER_ATTR record",
                            format!("attr size {n}"),
                        ));
                    }
                    let attr = EventAttr::parse(&body[..n]);
                    let ids = body[n..].chunks_exact(8).map(|c| super::u64_at(c, 0)).collect();
                    self.attrs.push(Attr { attr, ids, name: None });
                }
                kind::HEADER_FEATURE if body.len() >= 8 => {
                    let feat = super::u64_at(body, 0) as u32;
                    self.features.present.push(feat);
                    if let Err(e) = self.features.parse_section(feat, &body[8..], pos + 16) {
                        self.warnings.push(e);
                    }
                }
                kind::HEADER_TRACING_DATA if body.len() >= 4 => {
                    // The tracing data follows the record, padded to 8 bytes.
                    let n = super::u32_at(body, 0) as u64;
                    let data = self.read_vec(next, n, "tracing data")?;
                    match features::parse_tracing_data(&data, next) {
                        Ok(t) => self.features.tracing = Some(t),
                        Err(e) => self.warnings.push(e),
                    }
                    next += n.div_ceil(8) * 8;
                }
                kind::HEADER_BUILD_ID => match features::parse_build_ids(&rec, pos) {
                    Ok(b) => self.features.build_ids.extend(b),
                    Err(e) => self.warnings.push(e),
                },
                kind::EVENT_UPDATE if body.len() >= 16 => {
                    // PERF_EVENT_UPDATE__NAME (2): the event's name.
                    let (ty, id) = (super::u64_at(body, 0), super::u64_at(body, 8));
                    if ty == 2 {
                        let name = super::cstr(&body[16..]).to_string();
                        if let Some(a) = self.attrs.iter_mut().find(|a| a.ids.contains(&id)) {
                            a.name = Some(name);
                        }
                    }
                }
                _ => {}
            }
            pos = next;
        }
        if self.attrs.is_empty() {
            return Err(Error::perfdata_invalid(
                PIPE_HEADER_SIZE,
                "pipe header",
                "no HEADER_ATTR record: the stream has no events".into(),
            ));
        }
        Ok(())
    }

    fn index_ids(&mut self) {
        for (i, a) in self.attrs.iter().enumerate() {
            for &id in &a.ids {
                self.ids.insert(id, i as u32);
            }
        }
        self.sample_id_all = self.attrs.iter().all(|a| a.attr.sample_id_all());
    }

    /// The index into `attrs` of a record's event: by its id, or the only one.
    pub fn attr_of(&self, raw: &RawRecord<'_>) -> Option<usize> {
        if self.attrs.len() == 1 {
            return Some(0);
        }
        let t = self.attrs[0].attr.sample_type;
        let id = record_id(raw, t, self.sample_id_all)?;
        self.ids.get(&id).map(|&i| i as usize)
    }

    /// The attr named `name`, or the index of an attr for messages.
    pub fn attr_name(&self, a: &Attr) -> String {
        a.name
            .clone()
            .unwrap_or_else(|| format!("event type {} config {:#x}", a.attr.type_, a.attr.config))
    }

    /// Length of the underlying file.
    pub fn file_len(&self) -> u64 {
        self.input.len
    }

    /// Stream the data section's records: sorted by time (`sorted`, as perf script and
    /// perf report show them) or in file order.
    pub fn records(&self, sorted: bool) -> Result<Records<'_, R>, Error> {
        let end = self.data_offset.saturating_add(self.data_size).min(self.input.len);
        Ok(Records {
            d: self,
            sorted,
            cur: Block::default(),
            cur_no: 0,
            start: 0,
            file_pos: self.data_offset,
            end,
            claimed_end: self.data_offset.saturating_add(self.data_size),
            done: false,
            old: VecDeque::new(),
            spare: Vec::new(),
            pending: Vec::new(),
            held_bytes: 0,
            ready: 0,
            next: 0,
            flush_limit: 0,
            max_time: 0,
            seq: 0,
            pending_error: None,
        })
    }
}

/// One record of the data section with its event.
#[derive(Debug, Clone, Copy)]
pub struct Item<'a> {
    pub raw: RawRecord<'a>,
    /// The event the record belongs to (`None` for perf's own records and unknown ids).
    pub attr: Option<&'a Attr>,
    /// Its index in [`PerfData::attrs`].
    pub event: Option<usize>,
    pub time: Option<u64>,
}

impl<'a> Item<'a> {
    /// Parse the record (a sample under its attr's sample_type).
    pub fn parse(&self) -> Result<Record<'a>, Error> {
        self.raw.parse(self.attr.map(|a| &a.attr))
    }
}

/// A record held back for sorting: its bytes are `start..start + len` of block `block`.
#[derive(Debug, Clone, Copy)]
struct Pending {
    time: u64,
    seq: u64,
    block: u64,
    start: u32,
    len: u32,
    offset: u64,
}

/// A piece of the data section as read. Records are handed out from their block, never
/// copied; while sorting, a block is kept until every record held from it is handed out.
#[derive(Default)]
struct Block {
    /// Allocated and zeroed once (blocks are reused); `data[..len]` was read.
    data: Vec<u8>,
    len: usize,
    /// Records held for sorting that live here.
    held: usize,
}

/// Records of the data section; a lending iterator (`while let Some(r) = records.next()`).
pub struct Records<'d, R> {
    d: &'d PerfData<R>,
    sorted: bool,
    /// The block being read: `cur.data[start..cur.len]` is not consumed yet; `cur.data[0]`
    /// is at file offset `file_pos`. Blocks are numbered from the data's start: `cur` is
    /// number `cur_no`, `old[i]` number `cur_no - old.len() + i`.
    cur: Block,
    cur_no: u64,
    start: usize,
    file_pos: u64,
    /// Where reading stops (the data's end or the file's, whichever comes first).
    end: u64,
    /// Where the header says the data ends.
    claimed_end: u64,
    done: bool,
    /// Earlier blocks, oldest first, kept for the records held from them.
    old: VecDeque<Block>,
    /// Blocks to reuse (their memory already faulted in).
    spare: Vec<Block>,
    // Sorting (perf's rule: at a FINISHED_ROUND, records up to the highest time seen at
    // the previous one are final).
    pending: Vec<Pending>,
    /// Bytes of the records in `pending`.
    held_bytes: usize,
    /// `pending[..ready]` are sorted and final; `next` is the next one to hand out.
    ready: usize,
    next: usize,
    flush_limit: u64,
    max_time: u64,
    seq: u64,
    /// An error to return once the records read before it are handed out.
    pending_error: Option<Error>,
}

/// A record found in file order: where its bytes are in `buf`.
struct Found {
    kind: u32,
    misc: u16,
    at: usize,
    len: usize,
    offset: u64,
}

impl<'d, R: Read + Seek> Records<'d, R> {
    /// The next record, or an error after which iteration ends (a truncated or corrupt
    /// data section: everything before the damage has been returned).
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Option<Result<Item<'_>, Error>> {
        if !self.sorted {
            return match self.read_record() {
                Ok(Some(f)) => Some(Ok(self.item_in_buf(&f))),
                Ok(None) => None,
                Err(e) => Some(Err(e)),
            };
        }
        loop {
            if self.next < self.ready {
                let p = self.pending[self.next];
                self.next += 1;
                return Some(Ok(self.item(self.held(&p), p.offset, Some(p.time))));
            }
            if self.ready > 0 {
                self.compact();
            }
            if let Some(e) = self.pending_error.take() {
                return Some(Err(e));
            }
            if self.done && self.pending.is_empty() {
                return None;
            }
            let f = match self.read_record() {
                Ok(Some(f)) => f,
                Ok(None) => {
                    self.flush(u64::MAX);
                    continue;
                }
                Err(e) => {
                    // What was read before the damage still comes out, then the error.
                    self.done = true;
                    self.flush(u64::MAX);
                    if self.ready == 0 {
                        return Some(Err(e));
                    }
                    self.pending_error = Some(e);
                    continue;
                }
            };
            if f.kind == kind::FINISHED_ROUND {
                let limit = self.flush_limit;
                self.flush_limit = self.max_time;
                self.flush(limit);
                continue;
            }
            let bytes = &self.cur.data[f.at..f.at + f.len];
            let raw = RawRecord { kind: f.kind, misc: f.misc, bytes, offset: f.offset };
            let event = if f.kind < kind::HEADER_ATTR { self.d.attr_of(&raw) } else { None };
            let attr = event.map(|i| &self.d.attrs[i].attr);
            let Some(time) = record_time(&raw, attr) else {
                // No time: handed out at once, as perf does.
                return Some(Ok(self.item_in_buf(&f)));
            };
            self.max_time = self.max_time.max(time);
            self.pending.push(Pending {
                time,
                seq: self.seq,
                block: self.cur_no,
                start: f.at as u32,
                len: f.len as u32,
                offset: f.offset,
            });
            self.cur.held += 1;
            self.held_bytes += f.len;
            self.seq += 1;
            // Blocks mostly handed out can be kept by a few records: bounded too.
            if self.held_bytes > MAX_PENDING || self.old.len() * BLOCK > 2 * MAX_PENDING {
                // No round markers (or huge rounds): sort what is held and hand out the
                // older half.
                self.pending.sort_unstable_by_key(|p| (p.time, p.seq));
                let half = self.pending[self.pending.len() / 2].time;
                self.flush(half);
            }
        }
    }

    /// The next record in file order, without looking up its event or time (a quick scan,
    /// e.g. for COMM records). Do not mix with [`Records::next`] on sorted records.
    pub fn next_raw(&mut self) -> Option<Result<RawRecord<'_>, Error>> {
        match self.read_record() {
            Ok(Some(f)) => Some(Ok(RawRecord {
                kind: f.kind,
                misc: f.misc,
                bytes: &self.cur.data[f.at..f.at + f.len],
                offset: f.offset,
            })),
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        }
    }

    fn item_in_buf(&self, f: &Found) -> Item<'_> {
        let bytes = &self.cur.data[f.at..f.at + f.len];
        self.item(bytes, f.offset, None)
    }

    /// The bytes of a held record.
    fn held(&self, p: &Pending) -> &[u8] {
        let b = if p.block == self.cur_no {
            &self.cur
        } else {
            &self.old[(p.block - (self.cur_no - self.old.len() as u64)) as usize]
        };
        &b.data[p.start as usize..p.start as usize + p.len as usize]
    }

    /// The block holding `p`.
    fn block_of(&mut self, block: u64) -> &mut Block {
        if block == self.cur_no {
            &mut self.cur
        } else {
            let first = self.cur_no - self.old.len() as u64;
            &mut self.old[(block - first) as usize]
        }
    }

    fn item<'s>(&'s self, bytes: &'s [u8], offset: u64, time: Option<u64>) -> Item<'s> {
        let raw = RawRecord {
            kind: super::u32_at(bytes, 0),
            misc: super::u16_at(bytes, 4),
            bytes,
            offset,
        };
        let event = if raw.kind < kind::HEADER_ATTR { self.d.attr_of(&raw) } else { None };
        let attr = event.map(|i| &self.d.attrs[i]);
        let time = time.or_else(|| record_time(&raw, attr.map(|a| &a.attr)));
        Item { raw, attr, event, time }
    }

    /// Sort the held records and make those with time <= `limit` ready.
    fn flush(&mut self, limit: u64) {
        self.pending.sort_unstable_by_key(|p| (p.time, p.seq));
        self.ready = self.pending.partition_point(|p| p.time <= limit);
        self.next = 0;
    }

    /// Drop the records handed out; release the blocks no held record is in.
    fn compact(&mut self) {
        for i in 0..self.ready {
            let p = self.pending[i];
            self.held_bytes -= p.len as usize;
            self.block_of(p.block).held -= 1;
        }
        self.pending.drain(..self.ready);
        while self.old.front().is_some_and(|b| b.held == 0) {
            let b = self.old.pop_front().expect("front checked");
            self.spare.push(b);
        }
        self.ready = 0;
        self.next = 0;
    }

    /// Continue in a block that starts with `cur.data[from..cur.len]` (the current one,
    /// its bytes moved to the front, when no held record is in it).
    fn next_block(&mut self, from: usize, room: usize) {
        let tail = self.cur.len - from;
        let size = BLOCK.max(tail + room);
        if self.cur.held == 0 {
            self.cur.data.copy_within(from..self.cur.len, 0);
        } else {
            let mut b = self.spare.pop().unwrap_or_default();
            if b.data.len() < size {
                b.data = vec![0; size];
            }
            b.data[..tail].copy_from_slice(&self.cur.data[from..self.cur.len]);
            b.held = 0;
            let old = std::mem::replace(&mut self.cur, b);
            self.old.push_back(old);
            self.cur_no += 1;
        }
        if self.cur.data.len() < size {
            self.cur.data.resize(size, 0);
        }
        self.cur.len = tail;
        self.file_pos += from as u64;
        self.start = 0;
    }

    /// Make `need` bytes available at `cur.data[start..]`; false at the end of the data.
    fn fill(&mut self, need: usize) -> Result<bool, Error> {
        let have = self.cur.len - self.start;
        if have >= need {
            return Ok(true);
        }
        let at = self.file_pos + self.cur.len as u64;
        let left = self.end.saturating_sub(at);
        if (left as usize) < need - have || left == 0 {
            return Ok(false);
        }
        if self.cur.data.len() - self.start < need || self.cur.len == self.cur.data.len() {
            self.next_block(self.start, need);
        }
        let room = self.cur.data.len() - self.cur.len;
        let n = (room as u64).min(left) as usize;
        let old = self.cur.len;
        self.d
            .input
            .read_at(at, &mut self.cur.data[old..old + n], "data section")
            .map_err(Error::from_tracedat)?;
        self.cur.len += n;
        Ok(self.cur.len - self.start >= need)
    }

    /// The next record in file order (its bytes in `buf`), skipping the data some records
    /// carry after them.
    fn read_record(&mut self) -> Result<Option<Found>, Error> {
        if self.done {
            return Ok(None);
        }
        let offset = self.file_pos + self.start as u64;
        if !self.fill(8)? {
            return self.at_end(offset, 8);
        }
        let h = &self.cur.data[self.start..self.start + 8];
        let (k, misc, size) =
            (super::u32_at(h, 0), super::u16_at(h, 4), super::u16_at(h, 6) as usize);
        if size < 8 {
            self.done = true;
            return Err(Error::perfdata_invalid(
                offset,
                "record header",
                format!("record size {size}"),
            ));
        }
        if !self.fill(size)? {
            return self.at_end(offset, size as u64);
        }
        let at = self.start;
        self.start += size;
        // AUXTRACE: its u64 size of trace data follows; pipe mode's TRACING_DATA: a u32.
        let trailing = match k {
            kind::AUXTRACE if size >= 16 => super::u64_at(&self.cur.data, at + 8),
            kind::HEADER_TRACING_DATA if size >= 12 => {
                (super::u32_at(&self.cur.data, at + 8) as u64).div_ceil(8) * 8
            }
            kind::COMPRESSED => {
                self.done = true;
                return Err(Error::perfdata(
                    offset,
                    "COMPRESSED record",
                    ErrorKind::Unsupported("compressed perf.data (perf record -z)".into()),
                ));
            }
            _ => 0,
        };
        if trailing > 0 {
            self.skip(trailing, offset)?;
        }
        Ok(Some(Found { kind: k, misc, at, len: size, offset }))
    }

    fn skip(&mut self, mut n: u64, offset: u64) -> Result<(), Error> {
        let in_buf = ((self.cur.len - self.start) as u64).min(n);
        self.start += in_buf as usize;
        n -= in_buf;
        if n > 0 {
            let to = self.file_pos + self.start as u64 + n;
            if to > self.end {
                self.done = true;
                return Err(Error::perfdata_truncated(
                    offset,
                    "record data",
                    n,
                    self.end.saturating_sub(to - n),
                ));
            }
            // Nothing of this block is needed beyond its held records.
            self.next_block(self.cur.len, 0);
            self.file_pos = to;
        }
        Ok(())
    }

    /// The data ended with fewer than `need` bytes at `offset`: the end, or damage.
    fn at_end(&mut self, offset: u64, need: u64) -> Result<Option<Found>, Error> {
        self.done = true;
        let have = self.end.saturating_sub(offset);
        if have == 0 && self.end == self.claimed_end {
            return Ok(None);
        }
        if self.end < self.claimed_end {
            return Err(Error::perfdata(
                offset,
                "data section",
                ErrorKind::Truncated { need: self.claimed_end - offset, have },
            ));
        }
        Err(Error::perfdata_truncated(offset, "record", need, have))
    }
}
