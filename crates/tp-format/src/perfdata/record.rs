//! Records: the 8-byte `perf_event_header`, samples under any `sample_type`, the side
//! records (COMM, MMAP, MMAP2, FORK, EXIT, LOST, LOST_SAMPLES, THROTTLE, SWITCH) and their
//! `sample_id_all` trailers. Pure: byte slices in, borrowed views out.

use super::attr::EventAttr;
use super::{kind, misc, read_format as rf, sample as st, Error};

/// One record as it lies in the file: header fields and the whole record's bytes (header
/// included).
#[derive(Debug, Clone, Copy)]
pub struct RawRecord<'a> {
    pub kind: u32,
    pub misc: u16,
    pub bytes: &'a [u8],
    /// File offset of the record (for messages).
    pub offset: u64,
}

impl<'a> RawRecord<'a> {
    /// A whole record (header included) as it lies in a ring buffer or a file, in tp's
    /// byte order (little-endian, as everything this module reads); `None` when `bytes` is
    /// shorter than the 8-byte header.
    pub fn from_bytes(bytes: &'a [u8]) -> Option<RawRecord<'a>> {
        if bytes.len() < 8 {
            return None;
        }
        Some(RawRecord {
            kind: super::u32_at(bytes, 0),
            misc: super::u16_at(bytes, 4),
            bytes,
            offset: 0,
        })
    }

    /// The record's body, after the header.
    pub fn body(&self) -> &'a [u8] {
        &self.bytes[8.min(self.bytes.len())..]
    }

    /// The CPU mode of the header's misc (`misc::KERNEL`, `misc::USER`...).
    pub fn cpumode(&self) -> u16 {
        self.misc & misc::CPUMODE_MASK
    }

    /// Parse the record; `attr` is the attr of its event (needed for samples and for the
    /// sample_id trailer of side records; `None` reads side records without one).
    pub fn parse(&self, attr: Option<&EventAttr>) -> Result<Record<'a>, Error> {
        parse_inner(*self, attr)
    }
}

/// The `sample_id_all` fields at the end of a side record.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SampleId {
    pub pid: Option<u32>,
    pub tid: Option<u32>,
    pub time: Option<u64>,
    pub id: Option<u64>,
    pub stream_id: Option<u64>,
    pub cpu: Option<u32>,
}

/// A `PERF_RECORD_SAMPLE`. Fields the attr's sample_type lacks are `None`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sample<'a> {
    /// `PERF_SAMPLE_IDENTIFIER` or `PERF_SAMPLE_ID`.
    pub id: Option<u64>,
    pub ip: Option<u64>,
    pub pid: Option<u32>,
    pub tid: Option<u32>,
    pub time: Option<u64>,
    pub addr: Option<u64>,
    pub stream_id: Option<u64>,
    pub cpu: Option<u32>,
    pub period: Option<u64>,
    /// The `read_format` values, as stored.
    pub read: Option<&'a [u8]>,
    /// The callchain's addresses (u64 each, little-endian); see [`Sample::callchain`].
    pub callchain: Option<&'a [u8]>,
    /// `PERF_SAMPLE_RAW`: for a tracepoint, the record exactly as in an ftrace page.
    pub raw: Option<&'a [u8]>,
    /// Branch entries (24 bytes each), after `hw_idx` when present.
    pub branch_stack: Option<&'a [u8]>,
    /// (abi, registers as stored).
    pub regs_user: Option<(u64, &'a [u8])>,
    /// (stack bytes, dyn_size).
    pub stack_user: Option<(&'a [u8], u64)>,
    pub weight: Option<u64>,
    pub data_src: Option<u64>,
    pub transaction: Option<u64>,
    pub regs_intr: Option<(u64, &'a [u8])>,
    pub phys_addr: Option<u64>,
    pub cgroup: Option<u64>,
    pub data_page_size: Option<u64>,
    pub code_page_size: Option<u64>,
    pub aux: Option<&'a [u8]>,
    /// The header's misc (cpumode, exact ip...).
    pub misc: u16,
}

impl Sample<'_> {
    /// The callchain's addresses (including perf's `PERF_CONTEXT_*` markers).
    pub fn callchain(&self) -> impl Iterator<Item = u64> + '_ {
        self.callchain.unwrap_or(&[]).chunks_exact(8).map(|c| super::u64_at(c, 0))
    }
}

/// `PERF_RECORD_FORK` and `PERF_RECORD_EXIT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Task {
    pub pid: u32,
    pub ppid: u32,
    pub tid: u32,
    pub ptid: u32,
    pub time: u64,
}

/// `PERF_RECORD_MMAP` and `PERF_RECORD_MMAP2`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mmap<'a> {
    pub pid: u32,
    pub tid: u32,
    pub addr: u64,
    pub len: u64,
    pub pgoff: u64,
    /// MMAP2 only: (major, minor, inode, inode generation), or a build id.
    pub file: Option<MmapFile<'a>>,
    /// MMAP2 only.
    pub prot: u32,
    pub flags: u32,
    pub filename: &'a str,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MmapFile<'a> {
    Inode { maj: u32, min: u32, ino: u64, ino_generation: u64 },
    BuildId(&'a [u8]),
}

/// A parsed record. Side records carry their `sample_id_all` trailer.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
// A record is parsed on the stack and dropped at once; boxing the sample would allocate
// once per sample.
#[allow(clippy::large_enum_variant)]
pub enum Record<'a> {
    Sample(Sample<'a>),
    Mmap(Mmap<'a>, SampleId),
    Mmap2(Mmap<'a>, SampleId),
    Comm {
        pid: u32,
        tid: u32,
        comm: &'a str,
        exec: bool,
        id: SampleId,
    },
    Fork(Task, SampleId),
    Exit(Task, SampleId),
    /// The kernel's ring buffer was full: `lost` records of event `event_id` dropped.
    Lost {
        event_id: u64,
        lost: u64,
        id: SampleId,
    },
    /// Samples dropped in the kernel (e.g. a BPF filter or a failed callchain).
    LostSamples {
        lost: u64,
        id: SampleId,
    },
    Throttle {
        time: u64,
        event_id: u64,
        stream_id: u64,
        unthrottle: bool,
        id: SampleId,
    },
    /// A context switch (`out`: switched out; `preempt`: while runnable); CPU-wide records
    /// name the task on the other side.
    Switch {
        out: bool,
        preempt: bool,
        next_prev: Option<(u32, u32)>,
        id: SampleId,
    },
    /// A kernel symbol appeared or went (`unregister`): a BPF program's JIT image
    /// (`ksym_type` 1, named `bpf_prog_<tag>_<name>`) or trampoline, at `addr`, `len` bytes.
    Ksymbol {
        addr: u64,
        len: u32,
        ksym_type: u16,
        unregister: bool,
        name: &'a str,
        id: SampleId,
    },
    /// perf's marker: no record written before it has a time after the ones written
    /// after the previous marker.
    FinishedRound,
    /// Any other record, unparsed.
    Other(RawRecord<'a>),
}

/// PERF_RECORD_KSYMBOL_FLAGS_UNREGISTER (uapi/linux/perf_event.h): the symbol went away.
const KSYMBOL_UNREGISTER: u32 = 1;

/// Bounded reads over a record.
struct Cur<'a> {
    b: &'a [u8],
    pos: usize,
    offset: u64,
    what: &'static str,
}

impl<'a> Cur<'a> {
    fn err(&self, need: usize) -> Error {
        Error::perfdata_truncated(
            self.offset + self.pos as u64,
            self.what,
            need as u64,
            (self.b.len() - self.pos) as u64,
        )
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], Error> {
        if n > self.b.len() - self.pos {
            return Err(self.err(n));
        }
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn u64(&mut self) -> Result<u64, Error> {
        Ok(super::u64_at(self.take(8)?, 0))
    }
    fn u32(&mut self) -> Result<u32, Error> {
        Ok(super::u32_at(self.take(4)?, 0))
    }
    /// `n` u64s, `n` from the file: checked against what is left before slicing.
    fn u64s(&mut self, n: u64) -> Result<&'a [u8], Error> {
        let bytes = n.checked_mul(8).filter(|&b| b <= (self.b.len() - self.pos) as u64);
        match bytes {
            Some(b) => self.take(b as usize),
            None => Err(self.err(usize::MAX)),
        }
    }
    fn rest(&mut self) -> &'a [u8] {
        let s = &self.b[self.pos..];
        self.pos = self.b.len();
        s
    }
}

/// Bytes of a `read_format` value block.
fn read_size(read_format: u64, c: &Cur<'_>) -> Result<usize, Error> {
    let per = 1 + (read_format & rf::ID != 0) as usize + (read_format & rf::LOST != 0) as usize;
    let times = (read_format & rf::TOTAL_TIME_ENABLED != 0) as usize
        + (read_format & rf::TOTAL_TIME_RUNNING != 0) as usize;
    if read_format & rf::GROUP == 0 {
        return Ok((per + times) * 8);
    }
    let left = c.b.len() - c.pos;
    if left < 8 {
        return Err(c.err(8));
    }
    let nr = super::u64_at(c.b, c.pos);
    let words = nr.checked_mul(per as u64).and_then(|w| w.checked_add(1 + times as u64));
    match words.and_then(|w| w.checked_mul(8)) {
        Some(b) if b <= left as u64 => Ok(b as usize),
        _ => Err(c.err(usize::MAX)),
    }
}

/// Parse a sample's body under `attr`.
pub fn parse_sample<'a>(raw: &RawRecord<'a>, attr: &EventAttr) -> Result<Sample<'a>, Error> {
    let t = attr.sample_type;
    let mut c = Cur { b: raw.body(), pos: 0, offset: raw.offset + 8, what: "SAMPLE record" };
    let mut s = Sample { misc: raw.misc, ..Default::default() };
    if t & st::IDENTIFIER != 0 {
        s.id = Some(c.u64()?);
    }
    if t & st::IP != 0 {
        s.ip = Some(c.u64()?);
    }
    if t & st::TID != 0 {
        s.pid = Some(c.u32()?);
        s.tid = Some(c.u32()?);
    }
    if t & st::TIME != 0 {
        s.time = Some(c.u64()?);
    }
    if t & st::ADDR != 0 {
        s.addr = Some(c.u64()?);
    }
    if t & st::ID != 0 {
        s.id = Some(c.u64()?);
    }
    if t & st::STREAM_ID != 0 {
        s.stream_id = Some(c.u64()?);
    }
    if t & st::CPU != 0 {
        s.cpu = Some(c.u32()?);
        c.u32()?;
    }
    if t & st::PERIOD != 0 {
        s.period = Some(c.u64()?);
    }
    if t & st::READ != 0 {
        let n = read_size(attr.read_format, &c)?;
        s.read = Some(c.take(n)?);
    }
    if t & st::CALLCHAIN != 0 {
        let nr = c.u64()?;
        s.callchain = Some(c.u64s(nr)?);
    }
    if t & st::RAW != 0 {
        let n = c.u32()? as usize;
        s.raw = Some(c.take(n)?);
        // The u32 size and the data are padded together to 8 bytes.
        let pad = (8 - (4 + n) % 8) % 8;
        c.take(pad.min(c.b.len() - c.pos))?;
    }
    if t & st::BRANCH_STACK != 0 {
        let nr = c.u64()?;
        // PERF_SAMPLE_BRANCH_HW_INDEX: a u64 before the entries.
        if attr.branch_sample_type & (1 << 17) != 0 {
            c.u64()?;
        }
        s.branch_stack = Some(c.u64s(nr.saturating_mul(3))?);
    }
    if t & st::REGS_USER != 0 {
        let abi = c.u64()?;
        let n = if abi == 0 { 0 } else { attr.sample_regs_user.count_ones() as u64 };
        s.regs_user = Some((abi, c.u64s(n)?));
    }
    if t & st::STACK_USER != 0 {
        let size = c.u64()?;
        if size > (c.b.len() - c.pos) as u64 {
            return Err(c.err(size as usize));
        }
        let data = c.take(size as usize)?;
        let dyn_size = if size != 0 { c.u64()? } else { 0 };
        s.stack_user = Some((data, dyn_size));
    }
    if t & (st::WEIGHT | st::WEIGHT_STRUCT) != 0 {
        s.weight = Some(c.u64()?);
    }
    if t & st::DATA_SRC != 0 {
        s.data_src = Some(c.u64()?);
    }
    if t & st::TRANSACTION != 0 {
        s.transaction = Some(c.u64()?);
    }
    if t & st::REGS_INTR != 0 {
        let abi = c.u64()?;
        let n = if abi == 0 { 0 } else { attr.sample_regs_intr.count_ones() as u64 };
        s.regs_intr = Some((abi, c.u64s(n)?));
    }
    if t & st::PHYS_ADDR != 0 {
        s.phys_addr = Some(c.u64()?);
    }
    if t & st::CGROUP != 0 {
        s.cgroup = Some(c.u64()?);
    }
    if t & st::DATA_PAGE_SIZE != 0 {
        s.data_page_size = Some(c.u64()?);
    }
    if t & st::CODE_PAGE_SIZE != 0 {
        s.code_page_size = Some(c.u64()?);
    }
    if t & st::AUX != 0 {
        let size = c.u64()?;
        if size > (c.b.len() - c.pos) as u64 {
            return Err(c.err(size as usize));
        }
        s.aux = Some(c.take(size as usize)?);
    }
    Ok(s)
}

/// Where the sample_id trailer starts in a side record's body (`None`: it has none).
fn trailer_start(body_len: usize, attr: Option<&EventAttr>) -> Option<usize> {
    let n = attr?.sample_id_size();
    if n == 0 {
        return None;
    }
    body_len.checked_sub(n)
}

/// The sample_id trailer of a side record's body.
pub fn parse_sample_id(body: &[u8], attr: Option<&EventAttr>) -> SampleId {
    let (Some(at), Some(a)) = (trailer_start(body.len(), attr), attr) else {
        return SampleId::default();
    };
    let t = a.sample_type;
    let mut p = at;
    let mut next = || {
        let v = super::u64_at(body, p);
        p += 8;
        v
    };
    let mut id = SampleId::default();
    if t & st::TID != 0 {
        let v = next();
        id.pid = Some(v as u32);
        id.tid = Some((v >> 32) as u32);
    }
    if t & st::TIME != 0 {
        id.time = Some(next());
    }
    if t & st::ID != 0 {
        id.id = Some(next());
    }
    if t & st::STREAM_ID != 0 {
        id.stream_id = Some(next());
    }
    if t & st::CPU != 0 {
        id.cpu = Some(next() as u32);
    }
    if t & st::IDENTIFIER != 0 {
        id.id = Some(next());
    }
    id
}

fn parse_inner<'a>(raw: RawRecord<'a>, attr: Option<&EventAttr>) -> Result<Record<'a>, Error> {
    if raw.kind == kind::SAMPLE {
        let attr = attr.ok_or_else(|| {
            Error::perfdata_invalid(
                raw.offset,
                "SAMPLE record",
                "a sample of no known event".into(),
            )
        })?;
        return parse_sample(&raw, attr).map(Record::Sample);
    }
    let body = raw.body();
    let what = match raw.kind {
        kind::MMAP => "MMAP record",
        kind::MMAP2 => "MMAP2 record",
        kind::COMM => "COMM record",
        kind::FORK | kind::EXIT => "FORK/EXIT record",
        kind::LOST => "LOST record",
        kind::LOST_SAMPLES => "LOST_SAMPLES record",
        kind::THROTTLE | kind::UNTHROTTLE => "THROTTLE record",
        kind::SWITCH | kind::SWITCH_CPU_WIDE => "SWITCH record",
        kind::KSYMBOL => "KSYMBOL record",
        kind::FINISHED_ROUND => return Ok(Record::FinishedRound),
        _ => return Ok(Record::Other(raw)),
    };
    let id = parse_sample_id(body, attr);
    // The record's own fields end where the trailer begins.
    let end = trailer_start(body.len(), attr).unwrap_or(body.len());
    let mut c = Cur { b: &body[..end], pos: 0, offset: raw.offset + 8, what };
    Ok(match raw.kind {
        kind::MMAP | kind::MMAP2 => {
            let pid = c.u32()?;
            let tid = c.u32()?;
            let addr = c.u64()?;
            let len = c.u64()?;
            let pgoff = c.u64()?;
            let mut m =
                Mmap { pid, tid, addr, len, pgoff, file: None, prot: 0, flags: 0, filename: "" };
            if raw.kind == kind::MMAP2 {
                let f = c.take(24)?;
                m.file = Some(if raw.misc & misc::MMAP_BUILD_ID != 0 {
                    let n = (f[0] as usize).min(20);
                    MmapFile::BuildId(&f[4..4 + n])
                } else {
                    MmapFile::Inode {
                        maj: super::u32_at(f, 0),
                        min: super::u32_at(f, 4),
                        ino: super::u64_at(f, 8),
                        ino_generation: super::u64_at(f, 16),
                    }
                });
                m.prot = c.u32()?;
                m.flags = c.u32()?;
            }
            m.filename = super::cstr(c.rest());
            if raw.kind == kind::MMAP2 {
                Record::Mmap2(m, id)
            } else {
                Record::Mmap(m, id)
            }
        }
        kind::COMM => {
            let pid = c.u32()?;
            let tid = c.u32()?;
            let comm = super::cstr(c.rest());
            Record::Comm { pid, tid, comm, exec: raw.misc & misc::COMM_EXEC != 0, id }
        }
        kind::FORK | kind::EXIT => {
            let t = Task {
                pid: c.u32()?,
                ppid: c.u32()?,
                tid: c.u32()?,
                ptid: c.u32()?,
                time: c.u64()?,
            };
            if raw.kind == kind::FORK {
                Record::Fork(t, id)
            } else {
                Record::Exit(t, id)
            }
        }
        kind::LOST => Record::Lost { event_id: c.u64()?, lost: c.u64()?, id },
        kind::LOST_SAMPLES => Record::LostSamples { lost: c.u64()?, id },
        kind::THROTTLE | kind::UNTHROTTLE => Record::Throttle {
            time: c.u64()?,
            event_id: c.u64()?,
            stream_id: c.u64()?,
            unthrottle: raw.kind == kind::UNTHROTTLE,
            id,
        },
        kind::KSYMBOL => {
            let addr = c.u64()?;
            let len = c.u32()?;
            let ksym_type = c.u32()?;
            Record::Ksymbol {
                addr,
                len,
                ksym_type: ksym_type as u16,
                unregister: (ksym_type >> 16) & KSYMBOL_UNREGISTER != 0,
                name: super::cstr(c.rest()),
                id,
            }
        }
        _ => {
            let next_prev =
                if raw.kind == kind::SWITCH_CPU_WIDE { Some((c.u32()?, c.u32()?)) } else { None };
            Record::Switch {
                out: raw.misc & misc::SWITCH_OUT != 0,
                preempt: raw.misc & misc::SWITCH_OUT_PREEMPT != 0,
                next_prev,
                id,
            }
        }
    })
}

/// The time of a record without parsing it all: a sample's TIME, a side record's trailer
/// time (`None` for records without one).
pub fn record_time(raw: &RawRecord<'_>, attr: Option<&EventAttr>) -> Option<u64> {
    let a = attr?;
    let t = a.sample_type;
    if t & st::TIME == 0 {
        return None;
    }
    let body = raw.body();
    if raw.kind == kind::SAMPLE {
        let at = 8
            * ((t & st::IDENTIFIER != 0) as usize
                + (t & st::IP != 0) as usize
                + (t & st::TID != 0) as usize);
        return (body.len() >= at + 8).then(|| super::u64_at(body, at));
    }
    if raw.kind >= kind::HEADER_ATTR {
        return None;
    }
    let at = trailer_start(body.len(), attr)? + 8 * (t & st::TID != 0) as usize;
    Some(super::u64_at(body, at))
}

/// The event id of a record, found where perf looks: `IDENTIFIER` first in samples and
/// last in trailers, else `ID` at its position under `sample_type` (the same for every
/// attr of a file when it has several).
pub fn record_id(raw: &RawRecord<'_>, sample_type: u64, sample_id_all: bool) -> Option<u64> {
    let body = raw.body();
    let t = sample_type;
    if raw.kind == kind::SAMPLE {
        let at = if t & st::IDENTIFIER != 0 {
            0
        } else if t & st::ID != 0 {
            8 * ((t & st::IP != 0) as usize
                + (t & st::TID != 0) as usize
                + (t & st::TIME != 0) as usize
                + (t & st::ADDR != 0) as usize)
        } else {
            return None;
        };
        return (body.len() >= at + 8).then(|| super::u64_at(body, at));
    }
    if !sample_id_all || raw.kind >= kind::HEADER_ATTR {
        return None;
    }
    let back = if t & st::IDENTIFIER != 0 {
        8
    } else if t & st::ID != 0 {
        8 * (1 + (t & st::STREAM_ID != 0) as usize + (t & st::CPU != 0) as usize)
    } else {
        return None;
    };
    let at = body.len().checked_sub(back)?;
    Some(super::u64_at(body, at))
}

// ---- encoding: the inverse of parsing, for writers ----

fn put64(v: &mut Vec<u8>, x: u64) {
    v.extend_from_slice(&x.to_le_bytes());
}

fn put32(v: &mut Vec<u8>, x: u32) {
    v.extend_from_slice(&x.to_le_bytes());
}

/// A sample's body under `attr`'s sample_type; values the sample lacks are written as 0
/// (empty for the variable parts).
fn encode_sample(s: &Sample<'_>, attr: &EventAttr, v: &mut Vec<u8>) {
    let t = attr.sample_type;
    let id = s.id.unwrap_or(0);
    if t & st::IDENTIFIER != 0 {
        put64(v, id);
    }
    if t & st::IP != 0 {
        put64(v, s.ip.unwrap_or(0));
    }
    if t & st::TID != 0 {
        put32(v, s.pid.unwrap_or(0));
        put32(v, s.tid.unwrap_or(0));
    }
    if t & st::TIME != 0 {
        put64(v, s.time.unwrap_or(0));
    }
    if t & st::ADDR != 0 {
        put64(v, s.addr.unwrap_or(0));
    }
    if t & st::ID != 0 {
        put64(v, id);
    }
    if t & st::STREAM_ID != 0 {
        put64(v, s.stream_id.unwrap_or(0));
    }
    if t & st::CPU != 0 {
        put32(v, s.cpu.unwrap_or(0));
        put32(v, 0);
    }
    if t & st::PERIOD != 0 {
        put64(v, s.period.unwrap_or(0));
    }
    if t & st::READ != 0 {
        let want = read_format_words(attr.read_format) * 8;
        let r = s.read.unwrap_or(&[]);
        v.extend_from_slice(r);
        if r.is_empty() {
            v.resize(v.len() + want, 0);
        }
    }
    if t & st::CALLCHAIN != 0 {
        let c = s.callchain.unwrap_or(&[]);
        put64(v, (c.len() / 8) as u64);
        v.extend_from_slice(&c[..c.len() / 8 * 8]);
    }
    if t & st::RAW != 0 {
        let r = s.raw.unwrap_or(&[]);
        put32(v, r.len() as u32);
        v.extend_from_slice(r);
        v.resize(v.len() + (8 - (4 + r.len()) % 8) % 8, 0);
    }
    if t & st::BRANCH_STACK != 0 {
        let b = s.branch_stack.unwrap_or(&[]);
        put64(v, (b.len() / 24) as u64);
        if attr.branch_sample_type & (1 << 17) != 0 {
            put64(v, 0);
        }
        v.extend_from_slice(&b[..b.len() / 24 * 24]);
    }
    for (bit, regs, mask) in [(st::REGS_USER, s.regs_user, attr.sample_regs_user)] {
        if t & bit != 0 {
            encode_regs(v, regs, mask);
        }
    }
    if t & st::STACK_USER != 0 {
        let (d, dyn_size) = s.stack_user.unwrap_or((&[], 0));
        put64(v, d.len() as u64);
        v.extend_from_slice(d);
        if !d.is_empty() {
            put64(v, dyn_size);
        }
    }
    if t & (st::WEIGHT | st::WEIGHT_STRUCT) != 0 {
        put64(v, s.weight.unwrap_or(0));
    }
    if t & st::DATA_SRC != 0 {
        put64(v, s.data_src.unwrap_or(0));
    }
    if t & st::TRANSACTION != 0 {
        put64(v, s.transaction.unwrap_or(0));
    }
    if t & st::REGS_INTR != 0 {
        encode_regs(v, s.regs_intr, attr.sample_regs_intr);
    }
    for (bit, x) in [
        (st::PHYS_ADDR, s.phys_addr),
        (st::CGROUP, s.cgroup),
        (st::DATA_PAGE_SIZE, s.data_page_size),
        (st::CODE_PAGE_SIZE, s.code_page_size),
    ] {
        if t & bit != 0 {
            put64(v, x.unwrap_or(0));
        }
    }
    if t & st::AUX != 0 {
        let a = s.aux.unwrap_or(&[]);
        put64(v, a.len() as u64);
        v.extend_from_slice(a);
    }
}

/// Registers: abi, then one u64 per bit of `mask` (none when abi is 0).
fn encode_regs(v: &mut Vec<u8>, regs: Option<(u64, &[u8])>, mask: u64) {
    match regs {
        Some((abi, r)) if abi != 0 => {
            put64(v, abi);
            let n = mask.count_ones() as usize * 8;
            let start = v.len();
            v.extend_from_slice(&r[..r.len().min(n)]);
            v.resize(start + n, 0);
        }
        _ => put64(v, 0),
    }
}

fn read_format_words(read_format: u64) -> usize {
    1 + (read_format & rf::TOTAL_TIME_ENABLED != 0) as usize
        + (read_format & rf::TOTAL_TIME_RUNNING != 0) as usize
        + (read_format & rf::ID != 0) as usize
        + (read_format & rf::LOST != 0) as usize
}

/// The sample_id_all trailer for `attr` (nothing without sample_id_all).
pub fn encode_sample_id(id: &SampleId, attr: &EventAttr, v: &mut Vec<u8>) {
    if !attr.sample_id_all() {
        return;
    }
    let t = attr.sample_type;
    if t & st::TID != 0 {
        put32(v, id.pid.unwrap_or(0));
        put32(v, id.tid.unwrap_or(0));
    }
    if t & st::TIME != 0 {
        put64(v, id.time.unwrap_or(0));
    }
    if t & st::ID != 0 {
        put64(v, id.id.unwrap_or(0));
    }
    if t & st::STREAM_ID != 0 {
        put64(v, id.stream_id.unwrap_or(0));
    }
    if t & st::CPU != 0 {
        put32(v, id.cpu.unwrap_or(0));
        put32(v, 0);
    }
    if t & st::IDENTIFIER != 0 {
        put64(v, id.id.unwrap_or(0));
    }
}

/// A NUL-terminated string padded to 8 bytes, as the kernel writes comm and filenames.
fn put_str8(v: &mut Vec<u8>, s: &str) {
    v.extend_from_slice(s.as_bytes());
    let n = (s.len() + 1).div_ceil(8) * 8 - s.len();
    v.resize(v.len() + n, 0);
}

/// Append `record` as the kernel (or perf) writes it, header included, to `out`. `attr`
/// is its event's attr (for samples: required; for side records: their trailer). Returns
/// false, writing nothing, for a record tp cannot encode (`Other`, or a sample without an
/// attr) or one over the 64 KiB a record can hold.
pub fn encode(record: &Record<'_>, attr: Option<&EventAttr>, out: &mut Vec<u8>) -> bool {
    let start = out.len();
    out.extend_from_slice(&[0; 8]);
    let trailer = |id: &SampleId, out: &mut Vec<u8>| {
        if let Some(a) = attr {
            encode_sample_id(id, a, out);
        }
    };
    let (kind, misc) = match *record {
        Record::Sample(ref s) => {
            let Some(a) = attr else {
                out.truncate(start);
                return false;
            };
            encode_sample(s, a, out);
            (kind::SAMPLE, s.misc)
        }
        Record::Mmap(ref m, ref id) | Record::Mmap2(ref m, ref id) => {
            let two = matches!(record, Record::Mmap2(..));
            put32(out, m.pid);
            put32(out, m.tid);
            put64(out, m.addr);
            put64(out, m.len);
            put64(out, m.pgoff);
            let mut misc = 0;
            if two {
                match m.file {
                    Some(MmapFile::BuildId(b)) => {
                        let n = b.len().min(20);
                        out.extend_from_slice(&[n as u8, 0, 0, 0]);
                        out.extend_from_slice(&b[..n]);
                        out.resize(out.len() + 20 - n, 0);
                        misc |= misc::MMAP_BUILD_ID;
                    }
                    Some(MmapFile::Inode { maj, min, ino, ino_generation }) => {
                        put32(out, maj);
                        put32(out, min);
                        put64(out, ino);
                        put64(out, ino_generation);
                    }
                    None => out.extend_from_slice(&[0; 24]),
                }
                put32(out, m.prot);
                put32(out, m.flags);
            }
            put_str8(out, m.filename);
            trailer(id, out);
            // pid -1: the kernel's own maps.
            let mode = if m.pid == u32::MAX { misc::KERNEL } else { misc::USER };
            (if two { kind::MMAP2 } else { kind::MMAP }, misc | mode)
        }
        Record::Comm { pid, tid, comm, exec, ref id } => {
            put32(out, pid);
            put32(out, tid);
            put_str8(out, comm);
            trailer(id, out);
            (kind::COMM, if exec { misc::COMM_EXEC } else { 0 })
        }
        Record::Fork(ref t, ref id) | Record::Exit(ref t, ref id) => {
            for x in [t.pid, t.ppid, t.tid, t.ptid] {
                put32(out, x);
            }
            put64(out, t.time);
            trailer(id, out);
            (if matches!(record, Record::Fork(..)) { kind::FORK } else { kind::EXIT }, 0)
        }
        Record::Lost { event_id, lost, ref id } => {
            put64(out, event_id);
            put64(out, lost);
            trailer(id, out);
            (kind::LOST, 0)
        }
        Record::LostSamples { lost, ref id } => {
            put64(out, lost);
            trailer(id, out);
            (kind::LOST_SAMPLES, 0)
        }
        Record::Throttle { time, event_id, stream_id, unthrottle, ref id } => {
            put64(out, time);
            put64(out, event_id);
            put64(out, stream_id);
            trailer(id, out);
            (if unthrottle { kind::UNTHROTTLE } else { kind::THROTTLE }, 0)
        }
        Record::Switch { out: o, preempt, next_prev, ref id } => {
            let k = match next_prev {
                Some((pid, tid)) => {
                    put32(out, pid);
                    put32(out, tid);
                    kind::SWITCH_CPU_WIDE
                }
                None => kind::SWITCH,
            };
            trailer(id, out);
            let mut m = 0;
            if o {
                m |= misc::SWITCH_OUT;
            }
            if preempt {
                m |= misc::SWITCH_OUT_PREEMPT;
            }
            (k, m)
        }
        Record::Ksymbol { addr, len, ksym_type, unregister, name, ref id } => {
            put64(out, addr);
            put32(out, len);
            let flags = if unregister { KSYMBOL_UNREGISTER } else { 0 };
            put32(out, ksym_type as u32 | flags << 16);
            put_str8(out, name);
            trailer(id, out);
            (kind::KSYMBOL, 0)
        }
        Record::FinishedRound => (kind::FINISHED_ROUND, 0),
        Record::Other(_) => {
            out.truncate(start);
            return false;
        }
    };
    let size = out.len() - start;
    if size > u16::MAX as usize {
        out.truncate(start);
        return false;
    }
    out[start..start + 4].copy_from_slice(&kind.to_le_bytes());
    out[start + 4..start + 6].copy_from_slice(&misc.to_le_bytes());
    out[start + 6..start + 8].copy_from_slice(&(size as u16).to_le_bytes());
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(kind: u32, misc: u16, body: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&kind.to_le_bytes());
        v.extend_from_slice(&misc.to_le_bytes());
        v.extend_from_slice(&((body.len() + 8) as u16).to_le_bytes());
        v.extend_from_slice(body);
        v
    }

    fn attr(sample_type: u64) -> EventAttr {
        EventAttr {
            sample_type,
            flags: super::super::attr::flag::SAMPLE_ID_ALL,
            ..Default::default()
        }
    }

    #[test]
    fn tracepoint_sample() {
        let a = attr(st::IDENTIFIER | st::IP | st::TID | st::TIME | st::CPU | st::PERIOD | st::RAW);
        let mut body = Vec::new();
        for v in [7u64, 0xffff_ffff_8100_0000] {
            body.extend_from_slice(&v.to_le_bytes());
        }
        body.extend_from_slice(&12u32.to_le_bytes());
        body.extend_from_slice(&13u32.to_le_bytes());
        body.extend_from_slice(&999u64.to_le_bytes());
        body.extend_from_slice(&1u32.to_le_bytes());
        body.extend_from_slice(&0u32.to_le_bytes());
        body.extend_from_slice(&1u64.to_le_bytes());
        body.extend_from_slice(&12u32.to_le_bytes());
        body.extend_from_slice(b"abcdefghijkl");
        let bytes = rec(kind::SAMPLE, 1, &body);
        let raw = RawRecord { kind: kind::SAMPLE, misc: 1, bytes: &bytes, offset: 0 };
        let s = parse_sample(&raw, &a).unwrap();
        assert_eq!(s.id, Some(7));
        assert_eq!(
            (s.pid, s.tid, s.time, s.cpu, s.period),
            (Some(12), Some(13), Some(999), Some(1), Some(1))
        );
        assert_eq!(s.raw, Some(&b"abcdefghijkl"[..]));
        assert_eq!(record_time(&raw, Some(&a)), Some(999));
        assert_eq!(record_id(&raw, a.sample_type, true), Some(7));
        // Every cut of the record is an error, never a panic.
        for n in 8..bytes.len() {
            let raw = RawRecord { kind: kind::SAMPLE, misc: 1, bytes: &bytes[..n], offset: 0 };
            assert!(parse_sample(&raw, &a).is_err(), "cut at {n}");
        }
    }

    #[test]
    fn comm_with_trailer() {
        let a = attr(st::IDENTIFIER | st::TID | st::TIME | st::CPU);
        let mut body = Vec::new();
        body.extend_from_slice(&5u32.to_le_bytes());
        body.extend_from_slice(&6u32.to_le_bytes());
        body.extend_from_slice(b"sleep\0\0\0");
        body.extend_from_slice(&(5u64 | 6 << 32).to_le_bytes());
        body.extend_from_slice(&77u64.to_le_bytes());
        body.extend_from_slice(&1u64.to_le_bytes());
        body.extend_from_slice(&42u64.to_le_bytes());
        let bytes = rec(kind::COMM, misc::COMM_EXEC, &body);
        let raw = RawRecord { kind: kind::COMM, misc: misc::COMM_EXEC, bytes: &bytes, offset: 0 };
        match raw.parse(Some(&a)).unwrap() {
            Record::Comm { pid: 5, tid: 6, comm: "sleep", exec: true, id } => {
                assert_eq!(id.time, Some(77));
                assert_eq!(id.cpu, Some(1));
                assert_eq!(id.id, Some(42));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(record_time(&raw, Some(&a)), Some(77));
        assert_eq!(record_id(&raw, a.sample_type, true), Some(42));
    }

    #[test]
    fn lying_counts_are_errors() {
        let a = attr(st::CALLCHAIN | st::READ);
        let mut body = Vec::new();
        body.extend_from_slice(&u64::MAX.to_le_bytes());
        let bytes = rec(kind::SAMPLE, 0, &body);
        let raw = RawRecord { kind: kind::SAMPLE, misc: 0, bytes: &bytes, offset: 0 };
        assert!(parse_sample(&raw, &a).is_err());
        let a = EventAttr { read_format: rf::GROUP | rf::ID, ..attr(st::READ) };
        assert!(parse_sample(&raw, &a).is_err());
    }

    #[test]
    fn encode_parse_round_trip() {
        let a = EventAttr {
            sample_type: st::IDENTIFIER
                | st::IP
                | st::TID
                | st::TIME
                | st::ADDR
                | st::CPU
                | st::PERIOD
                | st::READ
                | st::CALLCHAIN
                | st::RAW
                | st::REGS_USER
                | st::STACK_USER
                | st::WEIGHT
                | st::PHYS_ADDR,
            read_format: rf::ID,
            sample_regs_user: 0b1011,
            flags: super::super::attr::flag::SAMPLE_ID_ALL,
            ..Default::default()
        };
        let chain: Vec<u8> = [1u64, 2, 3].iter().flat_map(|x| x.to_le_bytes()).collect();
        let regs: Vec<u8> = [9u64, 8, 7].iter().flat_map(|x| x.to_le_bytes()).collect();
        let read: Vec<u8> = [100u64, 5].iter().flat_map(|x| x.to_le_bytes()).collect();
        let s = Sample {
            id: Some(5),
            ip: Some(0x1234),
            pid: Some(10),
            tid: Some(11),
            time: Some(123_456),
            addr: Some(0xdead),
            cpu: Some(1),
            period: Some(1),
            read: Some(&read),
            callchain: Some(&chain),
            raw: Some(b"0123456789"),
            regs_user: Some((2, &regs)),
            stack_user: Some((b"stackbytes123456", 16)),
            weight: Some(3),
            phys_addr: Some(0x1000),
            misc: misc::USER,
            ..Default::default()
        };
        let mut v = Vec::new();
        assert!(encode(&Record::Sample(s), Some(&a), &mut v));
        let raw = RawRecord { kind: kind::SAMPLE, misc: misc::USER, bytes: &v, offset: 0 };
        let p = parse_sample(&raw, &a).unwrap();
        assert_eq!(format!("{p:?}"), format!("{s:?}"));

        let id = SampleId {
            pid: Some(1),
            tid: Some(2),
            time: Some(3),
            id: Some(5),
            cpu: Some(1),
            stream_id: None,
        };
        let records = [
            Record::Comm { pid: 1, tid: 2, comm: "a-comm", exec: true, id },
            Record::Fork(Task { pid: 3, ppid: 1, tid: 3, ptid: 1, time: 9 }, id),
            Record::Exit(Task { pid: 3, ppid: 1, tid: 3, ptid: 1, time: 10 }, id),
            Record::Lost { event_id: 5, lost: 77, id },
            Record::LostSamples { lost: 3, id },
            Record::Mmap2(
                Mmap {
                    pid: 1,
                    tid: 1,
                    addr: 0x400000,
                    len: 0x1000,
                    pgoff: 0,
                    file: Some(MmapFile::Inode { maj: 8, min: 1, ino: 42, ino_generation: 0 }),
                    prot: 5,
                    flags: 2,
                    filename: "/usr/bin/true",
                },
                id,
            ),
            Record::Switch { out: true, preempt: false, next_prev: Some((4, 4)), id },
        ];
        for r in records {
            let mut v = Vec::new();
            assert!(encode(&r, Some(&a), &mut v));
            assert_eq!(v.len() % 8, 0);
            let raw = RawRecord {
                kind: super::super::u32_at(&v, 0),
                misc: super::super::u16_at(&v, 4),
                bytes: &v,
                offset: 0,
            };
            let back = raw.parse(Some(&a)).unwrap();
            assert_eq!(format!("{back:?}"), format!("{r:?}"));
            assert_eq!(record_time(&raw, Some(&a)), Some(3));
            assert_eq!(record_id(&raw, a.sample_type, true), Some(5));
        }
    }
}
