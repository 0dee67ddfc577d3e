//! Writing perf.data that `perf script` and `perf report` read, streaming: the header and
//! the attributes first, then records as they come (e.g. straight from per-CPU ring
//! buffers, never all in memory), then the feature sections; the header's sizes are
//! patched at the end.
//!
//! ```no_run
//! use tp_format::perfdata::{EventAttr, Features, Writer, WriterAttr};
//! use tp_format::perfdata::{attr::flag, sample};
//! let attr = EventAttr {
//!     type_: 2, // PERF_TYPE_TRACEPOINT
//!     config: 372, // the event's ID
//!     sample_period: 1,
//!     sample_type: sample::IDENTIFIER | sample::IP | sample::TID | sample::TIME
//!         | sample::CPU | sample::PERIOD | sample::RAW,
//!     flags: flag::SAMPLE_ID_ALL,
//!     ..Default::default()
//! };
//! let out = std::io::BufWriter::new(std::fs::File::create("perf.data")?);
//! let attrs = vec![WriterAttr { attr, ids: vec![10, 11], name: "sched:sched_switch".into() }];
//! let mut w = Writer::new(out, attrs)?;
//! let ring_bytes: &[u8] = &[]; // whole records copied from a CPU's ring buffer
//! w.write_raw(ring_bytes)?;
//! w.finished_round()?;        // after each pass over all rings, as perf does
//! let features = Features { hostname: Some("vm".into()), ..Default::default() };
//! let tracing: Option<Vec<u8>> = None; // tracedat::Writer::tracing_data(&meta) for tracepoints
//! let (_out, stats) = w.finish(&features, tracing.as_deref())?;
//! # let _ = stats; Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Layout written: the file header, each attr's ids, the attrs, the data section, the
//! feature table and the features (perf's order). `EVENT_DESC` (names and ids) and
//! `SAMPLE_TIME` are filled in from the attrs and the samples written when `features` lacks
//! them.
//!
//! A write that fails (a full disk) need not lose the file: the writer remembers where each
//! round (see [`Writer::finished_round`]) ends, [`Writer::cut_back`] goes back to the last
//! one that leaves room for the features, and [`Writer::finish`] completes the file there.

use super::attr::{EventAttr, SIZE_WRITTEN};
use super::features::{self, EventDesc, Features};
use super::record::{self, record_id, record_time, RawRecord, Record};
use super::{kind, sample, Error, ErrorKind, MAGIC};
use std::collections::{HashMap, VecDeque};
use std::io::{Seek, SeekFrom, Write};

/// How far back round ends are remembered for [`Writer::cut_back`]: far more than the
/// feature sections take (tracing data and build ids: KiB to a few MiB) plus what an output
/// buffer holds.
const ROUNDS_KEPT_BYTES: u64 = 64 << 20;

/// One event of the file: its attr, the ids the kernel gave its file descriptors
/// (`PERF_EVENT_IOC_ID`, one per CPU or task), and its name as perf spells it
/// (`sched:sched_switch`, `major-faults`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriterAttr {
    pub attr: EventAttr,
    pub ids: Vec<u64>,
    pub name: String,
}

/// What was written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteStats {
    /// Records in the data section (FINISHED_ROUND markers included).
    pub records: u64,
    pub samples: u64,
    /// Samples the kernel reported lost (`PERF_RECORD_LOST` and `LOST_SAMPLES` counts).
    pub lost: u64,
    /// Times of the first and last sample (by time, not by position).
    pub first_time: Option<u64>,
    pub last_time: u64,
    pub data_bytes: u64,
    /// The whole file.
    pub bytes: u64,
}

/// A streaming perf.data writer; see the [module documentation](self).
pub struct Writer<W: Write + Seek> {
    out: W,
    pos: u64,
    data_start: u64,
    attrs: Vec<WriterAttr>,
    by_id: HashMap<u64, usize>,
    /// sample_type of the first attr: where every record's id is (perf requires one
    /// place for all).
    id_type: u64,
    sample_id_all: bool,
    stats: WriteStats,
    scratch: Vec<u8>,
    /// Where complete rounds end (after their FINISHED_ROUND), with the stats there; the
    /// first is the end of the records written before any round (or the data's start).
    rounds: VecDeque<(u64, WriteStats)>,
}

impl<W: Write + Seek> Writer<W> {
    /// Start a file at `out`'s position 0: the header (patched in [`Writer::finish`]), the
    /// ids and the attrs. Several events must all sample `IDENTIFIER` (or `ID` at the same
    /// place) and agree on `sample_id_all`, as perf requires to tell their records apart.
    pub fn new(mut out: W, attrs: Vec<WriterAttr>) -> Result<Writer<W>, Error> {
        let what = "writing attrs";
        if attrs.is_empty() {
            return Err(Error::perfdata_invalid(
                0,
                what,
                "a perf.data file needs at least one event".into(),
            ));
        }
        let first = &attrs[0].attr;
        let id_bits = |t: u64| {
            if t & sample::IDENTIFIER != 0 {
                Some((sample::IDENTIFIER, 0))
            } else if t & sample::ID != 0 {
                let before = sample::IP | sample::TID | sample::TIME | sample::ADDR;
                Some((sample::ID, (t & before).count_ones()))
            } else {
                None
            }
        };
        for a in &attrs {
            if attrs.len() > 1
                && (id_bits(a.attr.sample_type).is_none()
                    || id_bits(a.attr.sample_type) != id_bits(first.sample_type))
            {
                return Err(Error::perfdata_invalid(
                    0,
                    what,
                    format!(
                        "event {:?}: with several events every sample_type needs IDENTIFIER (or ID at one place)",
                        a.name
                    ),
                ));
            }
            if a.attr.sample_id_all() != first.sample_id_all() {
                return Err(Error::perfdata_invalid(
                    0,
                    what,
                    format!("event {:?}: sample_id_all differs", a.name),
                ));
            }
        }
        let mut by_id = HashMap::new();
        for (i, a) in attrs.iter().enumerate() {
            for &id in &a.ids {
                if by_id.insert(id, i).is_some() {
                    return Err(Error::perfdata_invalid(
                        0,
                        what,
                        format!("id {id} belongs to two events"),
                    ));
                }
            }
        }
        out.seek(SeekFrom::Start(0)).map_err(|e| Error::perfdata(0, what, ErrorKind::Io(e)))?;
        let mut w = Writer {
            out,
            pos: 0,
            data_start: 0,
            id_type: first.sample_type,
            sample_id_all: first.sample_id_all(),
            attrs,
            by_id,
            stats: WriteStats::default(),
            scratch: Vec::new(),
            rounds: VecDeque::new(),
        };
        w.bytes(&[0; 104])?;
        let mut ids_at = Vec::new();
        let ids: Vec<Vec<u8>> =
            w.attrs.iter().map(|a| a.ids.iter().flat_map(|x| x.to_le_bytes()).collect()).collect();
        for b in &ids {
            ids_at.push(w.pos);
            w.bytes(b)?;
        }
        let attrs_at = w.pos;
        let attr_bytes: Vec<Vec<u8>> = w
            .attrs
            .iter()
            .zip(&ids_at)
            .map(|(a, at)| {
                let mut b = a.attr.to_bytes(SIZE_WRITTEN);
                b.extend_from_slice(&at.to_le_bytes());
                b.extend_from_slice(&(a.ids.len() as u64 * 8).to_le_bytes());
                b
            })
            .collect();
        for b in &attr_bytes {
            w.bytes(b)?;
        }
        w.data_start = w.pos;
        w.rounds.push_back((w.pos, w.stats));
        // The header's attr fields now; data and features in `finish`.
        let mut h = Vec::new();
        h.extend_from_slice(MAGIC);
        h.extend_from_slice(&104u64.to_le_bytes());
        h.extend_from_slice(&(SIZE_WRITTEN as u64 + 16).to_le_bytes());
        h.extend_from_slice(&attrs_at.to_le_bytes());
        h.extend_from_slice(&(w.data_start - attrs_at).to_le_bytes());
        // Where the data starts, its size 0 until `finish` (as perf record writes it): a
        // file whose writer died reads as unfinished, its records from here on.
        h.extend_from_slice(&w.data_start.to_le_bytes());
        w.patch(0, &h)?;
        Ok(w)
    }

    fn bytes(&mut self, b: &[u8]) -> Result<(), Error> {
        self.out
            .write_all(b)
            .map_err(|e| Error::perfdata(self.pos, "writing perf.data", ErrorKind::Io(e)))?;
        self.pos += b.len() as u64;
        Ok(())
    }

    fn patch(&mut self, at: u64, b: &[u8]) -> Result<(), Error> {
        let io = |e| Error::perfdata(at, "patching the perf.data header", ErrorKind::Io(e));
        self.out.seek(SeekFrom::Start(at)).map_err(io)?;
        self.out.write_all(b).map_err(io)?;
        self.out.seek(SeekFrom::Start(self.pos)).map_err(io)?;
        Ok(())
    }

    /// The attr of a record (by id; the only one when there is one).
    fn attr_of(&self, raw: &RawRecord<'_>) -> Option<&EventAttr> {
        if self.attrs.len() == 1 {
            return Some(&self.attrs[0].attr);
        }
        let id = record_id(raw, self.id_type, self.sample_id_all)?;
        self.by_id.get(&id).map(|&i| &self.attrs[i].attr)
    }

    fn count(&mut self, raw: &RawRecord<'_>) {
        self.stats.records += 1;
        match raw.kind {
            kind::SAMPLE => {
                self.stats.samples += 1;
                if let Some(t) = record_time(raw, self.attr_of(raw)) {
                    self.stats.first_time = Some(self.stats.first_time.map_or(t, |f| f.min(t)));
                    self.stats.last_time = self.stats.last_time.max(t);
                }
            }
            kind::LOST | kind::LOST_SAMPLES => {
                let at = if raw.kind == kind::LOST { 16 } else { 8 };
                if raw.bytes.len() >= at + 8 {
                    self.stats.lost += super::u64_at(raw.bytes, at);
                }
            }
            _ => {}
        }
    }

    /// Append whole records as the kernel's ring buffer holds them (one or many, each with
    /// its header). Each record's size is checked; a record cut short is an error and
    /// nothing of `records` is written.
    pub fn write_raw(&mut self, records: &[u8]) -> Result<(), Error> {
        let mut p = 0;
        while p < records.len() {
            let size =
                if records.len() - p >= 8 { super::u16_at(records, p + 6) as usize } else { 0 };
            if size < 8 || size > records.len() - p {
                return Err(Error::perfdata_invalid(
                    self.pos,
                    "records to write",
                    format!("record at byte {p} of {}: size {size} does not fit", records.len()),
                ));
            }
            p += size;
        }
        self.count_all(records);
        self.bytes(records)
    }

    /// Count records that are not written (after a write failed), as
    /// [`Writer::write_raw`] counts them, so that [`Writer::stats`] says what was recorded;
    /// [`Writer::cut_back`] then tells what the file keeps. Counting stops at a record whose
    /// size does not fit.
    pub fn skip_raw(&mut self, records: &[u8]) {
        let mut p = 0;
        while records.len() - p >= 8 {
            let size = super::u16_at(records, p + 6) as usize;
            if size < 8 || size > records.len() - p {
                break;
            }
            self.count_all(&records[p..p + size]);
            p += size;
        }
    }

    /// Count whole, checked records.
    fn count_all(&mut self, records: &[u8]) {
        let mut p = 0;
        while p < records.len() {
            let size = super::u16_at(records, p + 6) as usize;
            let raw = RawRecord {
                kind: super::u32_at(records, p),
                misc: super::u16_at(records, p + 4),
                bytes: &records[p..p + size],
                offset: self.pos + p as u64,
            };
            self.count(&raw);
            p += size;
        }
    }

    /// Append one record built by tp (a synthesized COMM, MMAP2, FORK, or a sample) for
    /// event `attr` (an index into the attrs given to [`Writer::new`]). A sample or
    /// trailer without an id gets the event's first id.
    pub fn write(&mut self, attr: usize, record: &Record<'_>) -> Result<(), Error> {
        let a = self.attrs.get(attr).ok_or_else(|| {
            Error::perfdata_invalid(self.pos, "writing a record", format!("no event {attr}"))
        })?;
        let first_id = a.ids.first().copied();
        let mut r = *record;
        match &mut r {
            Record::Sample(s) => s.id = s.id.or(first_id),
            Record::Mmap(_, id)
            | Record::Mmap2(_, id)
            | Record::Fork(_, id)
            | Record::Exit(_, id)
            | Record::Comm { id, .. }
            | Record::Lost { id, .. }
            | Record::LostSamples { id, .. }
            | Record::Throttle { id, .. }
            | Record::Switch { id, .. } => id.id = id.id.or(first_id),
            _ => {}
        }
        let mut buf = std::mem::take(&mut self.scratch);
        buf.clear();
        let attr_copy = a.attr.clone();
        if !record::encode(&r, Some(&attr_copy), &mut buf) {
            self.scratch = buf;
            return Err(Error::perfdata_invalid(
                self.pos,
                "writing a record",
                "a record tp cannot encode".into(),
            ));
        }
        let res = self.write_raw(&buf);
        self.scratch = buf;
        res
    }

    /// perf's FINISHED_ROUND: no record written before it has a later time than any written
    /// after the previous one. Write one after each pass over all rings (readers sort
    /// records by time between these markers).
    pub fn finished_round(&mut self) -> Result<(), Error> {
        let before = self.pos;
        self.write_raw(&[68, 0, 0, 0, 0, 0, 8, 0])?;
        // A round of nothing but its marker ends where the previous one did, in effect.
        if self.rounds.len() > 1 && self.rounds.back().is_some_and(|r| r.0 == before) {
            self.rounds.pop_back();
        }
        self.end_round();
        Ok(())
    }

    /// A round ends here: remembered for [`Writer::cut_back`].
    fn end_round(&mut self) {
        self.rounds.push_back((self.pos, self.stats));
        while self.rounds.len() > 1 && self.rounds[0].0 + ROUNDS_KEPT_BYTES < self.pos {
            self.rounds.pop_front();
        }
    }

    /// Take over a file that a copy of this writer went on writing and could not finish (a
    /// process that died; the perf door's guard is a fork of tp): `written` holds the file's
    /// bytes from this writer's end ([`WriteStats::bytes`] of [`Writer::stats`]) on, in
    /// pieces. Its whole records count as written here, each handed to `each`; returns the
    /// bytes they take. A record cut short is not taken: give it again with what follows,
    /// or (at the file's end) truncate the file at the new end before writing on.
    pub fn adopt(&mut self, written: &[u8], mut each: impl FnMut(&[u8])) -> usize {
        let mut p = 0;
        while written.len() - p >= 8 {
            let size = super::u16_at(written, p + 6) as usize;
            if size < 8 || size > written.len() - p {
                break;
            }
            let rec = &written[p..p + size];
            self.count_all(rec);
            self.pos += size as u64;
            if super::u32_at(rec, 0) == kind::FINISHED_ROUND {
                self.end_round();
            }
            each(rec);
            p += size;
        }
        p
    }

    /// After [`Writer::adopt`]: `reset` gets the output and the writer's end and returns it
    /// ready to write there (a `BufWriter<File>` with an empty buffer: the file truncated
    /// there, its offset moved there).
    pub fn reopen(
        mut self,
        reset: impl FnOnce(W, u64) -> std::io::Result<W>,
    ) -> Result<Self, Error> {
        let end = self.pos;
        self.out = reset(self.out, end)
            .map_err(|e| Error::perfdata(end, "taking perf.data over", ErrorKind::Io(e)))?;
        Ok(self)
    }

    /// Push what the output buffers to the file (e.g. before a process that may die hands
    /// the space of the records back to the kernel).
    pub fn flush(&mut self) -> Result<(), Error> {
        self.out
            .flush()
            .map_err(|e| Error::perfdata(self.pos, "writing perf.data", ErrorKind::Io(e)))
    }

    /// The output (e.g. to find how much of the file reached the disk).
    pub fn get_ref(&self) -> &W {
        &self.out
    }

    /// After a write failed (a full disk): drop every record after the last complete round
    /// that ends at least `room` bytes before `limit` (`limit`: the bytes the disk took;
    /// `room`: [`Writer::features_len`]), so that [`Writer::finish`] writes the features
    /// there. `reset` gets the output and that offset and returns it ready to write there
    /// (a `BufWriter<File>`: its buffer dropped, the file truncated there). The stats are
    /// then those of the records kept; compare with [`Writer::stats`] before to count
    /// what was dropped.
    pub fn cut_back(
        mut self,
        limit: u64,
        room: u64,
        reset: impl FnOnce(W, u64) -> std::io::Result<W>,
    ) -> Result<Writer<W>, Error> {
        let Some(&(end, stats)) = self.rounds.iter().rev().find(|r| r.0 + room <= limit) else {
            return Err(Error::perfdata_invalid(
                limit,
                "cutting perf.data back",
                format!(
                    "{limit} bytes reached the disk: not enough for the header, the attrs and {room} bytes of features"
                ),
            ));
        };
        self.out = reset(self.out, end)
            .map_err(|e| Error::perfdata(end, "cutting perf.data back", ErrorKind::Io(e)))?;
        self.pos = end;
        self.stats = stats;
        Ok(self)
    }

    /// The bytes [`Writer::finish`] would write after the records (the feature table and
    /// sections) given these features.
    pub fn features_len(&self, features: &Features, tracing_data: Option<&[u8]>) -> u64 {
        let sections = self.sections(features, tracing_data);
        sections.iter().map(|(_, c)| 16 + c.len() as u64).sum()
    }

    /// The feature sections, with EVENT_DESC and SAMPLE_TIME filled in when missing.
    fn sections(&self, features: &Features, tracing_data: Option<&[u8]>) -> Vec<(u32, Vec<u8>)> {
        let mut f = features.clone();
        if f.event_desc.is_empty() {
            f.event_desc = self
                .attrs
                .iter()
                .map(|a| EventDesc {
                    attr: a.attr.clone(),
                    name: a.name.clone(),
                    ids: a.ids.clone(),
                })
                .collect();
        }
        if f.sample_time.is_none() {
            if let Some(first) = self.stats.first_time {
                f.sample_time = Some((first, self.stats.last_time));
            }
        }
        f.sections(tracing_data)
    }

    /// What has been written so far.
    pub fn stats(&self) -> WriteStats {
        WriteStats { data_bytes: self.pos - self.data_start, bytes: self.pos, ..self.stats }
    }

    /// Write the feature sections (`tracing_data`: [`crate::tracedat::Writer::tracing_data`]
    /// for files with tracepoint samples) and the header's final sizes; flush and return
    /// the output.
    pub fn finish(
        mut self,
        features: &Features,
        tracing_data: Option<&[u8]>,
    ) -> Result<(W, WriteStats), Error> {
        let data_end = self.pos;
        let sections = self.sections(features, tracing_data);
        let table_len = 16 * sections.len() as u64;
        let mut table = Vec::new();
        let mut at = data_end + table_len;
        let mut bitmap = [0u64; 4];
        for (feat, content) in &sections {
            table.extend_from_slice(&at.to_le_bytes());
            table.extend_from_slice(&(content.len() as u64).to_le_bytes());
            at += content.len() as u64;
            bitmap[*feat as usize / 64] |= 1 << (feat % 64);
        }
        self.bytes(&table)?;
        for (_, content) in &sections {
            self.bytes(content)?;
        }
        let mut h = Vec::new();
        h.extend_from_slice(&self.data_start.to_le_bytes());
        h.extend_from_slice(&(data_end - self.data_start).to_le_bytes());
        h.extend_from_slice(&[0; 16]); // event_types: unused
        for b in bitmap {
            h.extend_from_slice(&b.to_le_bytes());
        }
        self.patch(40, &h)?;
        self.out
            .flush()
            .map_err(|e| Error::perfdata(self.pos, "writing perf.data", ErrorKind::Io(e)))?;
        let stats =
            WriteStats { data_bytes: data_end - self.data_start, bytes: self.pos, ..self.stats };
        Ok((self.out, stats))
    }
}

/// `features::id` re-exported for writers choosing features.
pub use features::id as feature;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perfdata::{PerfData, Sample};
    use std::io::Cursor;

    /// A write failed mid-round (the disk took `limit` bytes): the file is cut back to the
    /// last whole round that leaves room for the features and reads with that round's
    /// samples; what was counted but not written is told apart by the stats.
    #[test]
    fn cut_back_keeps_whole_rounds_and_the_features() {
        let mut w = clock_writer();
        let s = sample_at;
        let mut ends = Vec::new();
        for round in 0..10 {
            for i in 0..10 {
                w.write(0, &s(round * 10 + i)).unwrap();
            }
            w.finished_round().unwrap();
            ends.push(w.stats().bytes);
        }
        for i in 100..105 {
            w.write(0, &s(i)).unwrap();
        }
        // Records read after the failure are only counted.
        let round = w.get_ref().get_ref()[ends[0] as usize..ends[1] as usize].to_vec();
        w.skip_raw(&round);
        assert_eq!(w.stats().samples, 115);
        let features = Features::default();
        let room = w.features_len(&features, None);
        // The disk took round 7 and the features, not round 8.
        let limit = ends[6] + room + 3;
        let truncate = |mut c: Cursor<Vec<u8>>, at: u64| -> std::io::Result<_> {
            c.get_mut().truncate(at as usize);
            c.set_position(at);
            Ok(c)
        };
        let w = w.cut_back(limit, room, truncate).unwrap();
        assert_eq!(w.stats().samples, 70);
        let (out, stats) = w.finish(&features, None).unwrap();
        assert!(stats.bytes <= limit, "{} > {limit}", stats.bytes);
        let (times, warnings) = sample_times(out.into_inner());
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(times, (0..70).collect::<Vec<u64>>());
        // A disk that took less than the header, the attrs and the features: an error.
        let attrs = vec![WriterAttr { attr: EventAttr::default(), ids: vec![1], name: "x".into() }];
        let w = Writer::new(Cursor::new(Vec::new()), attrs).unwrap();
        assert!(w.cut_back(100, 0, truncate).is_err());
    }

    fn clock_writer() -> Writer<Cursor<Vec<u8>>> {
        let attr = EventAttr {
            type_: 1,
            sample_period: 1,
            sample_type: sample::IP | sample::TID | sample::TIME,
            ..Default::default()
        };
        let attrs = vec![WriterAttr { attr, ids: vec![7], name: "cpu-clock".into() }];
        Writer::new(Cursor::new(Vec::new()), attrs).unwrap()
    }

    fn sample_at(t: u64) -> Record<'static> {
        Record::Sample(Sample {
            ip: Some(0x1000),
            pid: Some(1),
            tid: Some(1),
            time: Some(t),
            ..Default::default()
        })
    }

    fn sample_times(bytes: Vec<u8>) -> (Vec<u64>, Vec<String>) {
        let d = PerfData::open(Cursor::new(bytes)).unwrap();
        let warnings = d.warnings.iter().map(|w| w.to_string()).collect();
        let mut r = d.records(true).unwrap();
        let mut times = Vec::new();
        while let Some(item) = r.next() {
            if let Record::Sample(s) = item.unwrap().parse().unwrap() {
                times.push(s.time.unwrap());
            }
        }
        (times, warnings)
    }

    /// A writer that died before `finish` leaves data size 0 and no features: the reader
    /// takes the records up to the file's end and says the file was not finished; a file
    /// without records is an error, not an empty recording.
    #[test]
    fn an_unfinished_file_reads_to_its_end_and_one_without_records_is_an_error() {
        let mut w = clock_writer();
        let header_only = w.get_ref().get_ref().clone();
        let e = PerfData::open(Cursor::new(header_only)).unwrap_err().to_string();
        assert!(e.contains("not finished") && e.contains("no records"), "{e}");
        for t in 0..5 {
            w.write(0, &sample_at(t)).unwrap();
        }
        w.finished_round().unwrap();
        w.write(0, &sample_at(5)).unwrap();
        let (times, warnings) = sample_times(w.get_ref().get_ref().clone());
        assert_eq!(times, (0..6).collect::<Vec<u64>>());
        assert!(warnings.len() == 1 && warnings[0].contains("not finished"), "{warnings:?}");
    }

    /// A copy of the writer (the guard, forked) takes over what the other one wrote until
    /// it died, a record cut short at the end dropped, and finishes the file.
    #[test]
    fn adopt_takes_over_a_dead_copy_s_records_and_finishes_the_file() {
        let (mut dead, mut guard) = (clock_writer(), clock_writer());
        let forked_at = dead.stats().bytes as usize;
        for t in 0..7 {
            dead.write(0, &sample_at(t)).unwrap();
            if t % 3 == 2 {
                dead.finished_round().unwrap();
            }
        }
        let mut file = dead.get_ref().get_ref().clone();
        let whole = file.len();
        file.extend_from_within(forked_at..forked_at + 20); // cut by the death
        let mut seen = 0;
        let taken = guard.adopt(&file[forked_at..], |_| seen += 1);
        assert_eq!((forked_at + taken, seen), (whole, 9));
        assert_eq!(guard.stats().samples, 7);
        let guard = guard
            .reopen(|_, at| {
                let mut c = Cursor::new(file[..at as usize].to_vec());
                c.set_position(at);
                Ok(c)
            })
            .unwrap();
        let mut guard = guard;
        guard.write(0, &sample_at(7)).unwrap();
        let (out, stats) = guard.finish(&Features::default(), None).unwrap();
        assert_eq!(stats.samples, 8);
        let (times, warnings) = sample_times(out.into_inner());
        assert_eq!(times, (0..8).collect::<Vec<u64>>());
        assert!(warnings.is_empty(), "{warnings:?}");
    }
}
