//! The feature sections after the data (perf's `HEADER_*` features): which exist is a bitmap
//! in the file header; their (offset, size) table follows the data section.

use super::attr::{EventAttr, SIZE_MAX, SIZE_VER0};
use super::Error;
use crate::format::{EventFormat, FormatError};
use crate::render::Tables;

/// Feature bit numbers (perf's `HEADER_*`).
pub mod id {
    pub const TRACING_DATA: u32 = 1;
    pub const BUILD_ID: u32 = 2;
    pub const HOSTNAME: u32 = 3;
    pub const OSRELEASE: u32 = 4;
    pub const VERSION: u32 = 5;
    pub const ARCH: u32 = 6;
    pub const NRCPUS: u32 = 7;
    pub const CPUDESC: u32 = 8;
    pub const CPUID: u32 = 9;
    pub const TOTAL_MEM: u32 = 10;
    pub const CMDLINE: u32 = 11;
    pub const EVENT_DESC: u32 = 12;
    pub const CPU_TOPOLOGY: u32 = 13;
    pub const NUMA_TOPOLOGY: u32 = 14;
    pub const BRANCH_STACK: u32 = 15;
    pub const PMU_MAPPINGS: u32 = 16;
    pub const GROUP_DESC: u32 = 17;
    pub const AUXTRACE: u32 = 18;
    pub const STAT: u32 = 19;
    pub const CACHE: u32 = 20;
    pub const SAMPLE_TIME: u32 = 21;
    pub const MEM_TOPOLOGY: u32 = 22;
    pub const CLOCKID: u32 = 23;
    pub const DIR_FORMAT: u32 = 24;
    pub const BPF_PROG_INFO: u32 = 25;
    pub const BPF_BTF: u32 = 26;
    pub const COMPRESSED: u32 = 27;
    pub const CPU_PMU_CAPS: u32 = 28;
    pub const CLOCK_DATA: u32 = 29;
    pub const HYBRID_TOPOLOGY: u32 = 30;
    pub const PMU_CAPS: u32 = 31;
    /// Bits in the header's bitmap.
    pub const BITS: u32 = 256;
}

/// One build id (`BUILD_ID` feature or a `HEADER_BUILD_ID` record).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildId {
    /// The header misc's cpumode (`misc::KERNEL`, `misc::USER`).
    pub cpumode: u16,
    pub pid: i32,
    /// 20 bytes for GNU build ids (fewer when the file says so).
    pub build_id: Vec<u8>,
    pub filename: String,
}

/// `CLOCK_DATA`: a wall-clock time and the sampling clock's time read together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockData {
    pub clockid: u32,
    pub tod_ns: u64,
    pub clockid_ns: u64,
}

/// An event's description (`EVENT_DESC`): its attr, name and ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventDesc {
    pub attr: EventAttr,
    pub name: String,
    pub ids: Vec<u64>,
}

/// The tracepoint formats and tables of `TRACING_DATA`: trace.dat's leading part.
#[derive(Debug, Clone, Default)]
pub struct Tracing {
    pub events: Vec<EventFormat>,
    pub format_errors: Vec<FormatError>,
    /// kallsyms (perf writes none), printk formats, saved_cmdlines.
    pub tables: Tables,
    pub big_endian: bool,
    pub long_size: usize,
    pub page_size: usize,
}

/// What the feature sections say. Features tp does not interpret are listed in `present`
/// and skipped.
#[derive(Debug, Clone, Default)]
pub struct Features {
    /// Feature bits set in the header, ascending.
    pub present: Vec<u32>,
    pub hostname: Option<String>,
    pub osrelease: Option<String>,
    /// perf's version (`VERSION`).
    pub version: Option<String>,
    pub arch: Option<String>,
    /// (available, online).
    pub nr_cpus: Option<(u32, u32)>,
    pub cpudesc: Option<String>,
    pub cpuid: Option<String>,
    /// kB.
    pub total_mem: Option<u64>,
    pub cmdline: Option<Vec<String>>,
    pub event_desc: Vec<EventDesc>,
    pub build_ids: Vec<BuildId>,
    /// (first, last) sample time.
    pub sample_time: Option<(u64, u64)>,
    /// The clock samples were taken with (`use_clockid`).
    pub clockid: Option<u64>,
    pub clock_data: Option<ClockData>,
    pub tracing: Option<Tracing>,
}

/// Bounded reads over one feature section.
pub(crate) struct Sec<'a> {
    pub(crate) b: &'a [u8],
    pub(crate) pos: usize,
    pub(crate) offset: u64,
    pub(crate) what: &'static str,
}

impl<'a> Sec<'a> {
    pub(crate) fn new(b: &'a [u8], offset: u64, what: &'static str) -> Sec<'a> {
        Sec { b, pos: 0, offset, what }
    }
    fn left(&self) -> usize {
        self.b.len() - self.pos
    }
    pub(crate) fn take(&mut self, n: u64) -> Result<&'a [u8], Error> {
        if n > self.left() as u64 {
            return Err(Error::perfdata_truncated(
                self.offset + self.pos as u64,
                self.what,
                n,
                self.left() as u64,
            ));
        }
        let s = &self.b[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(s)
    }
    pub(crate) fn u32(&mut self) -> Result<u32, Error> {
        Ok(super::u32_at(self.take(4)?, 0))
    }
    pub(crate) fn u64(&mut self) -> Result<u64, Error> {
        Ok(super::u64_at(self.take(8)?, 0))
    }
    /// perf's string: u32 length (NUL and padding included), then the bytes.
    fn string(&mut self) -> Result<String, Error> {
        let n = self.u32()?;
        Ok(super::cstr(self.take(n as u64)?).to_string())
    }
    /// A count from the file that is about to size a loop of `each`-byte items.
    fn count(&mut self, each: u64) -> Result<u32, Error> {
        let at = self.offset + self.pos as u64;
        let n = self.u32()?;
        if n as u64 * each > self.left() as u64 {
            return Err(Error::perfdata_invalid(
                at,
                self.what,
                format!("{n} entries do not fit the {} bytes left", self.left()),
            ));
        }
        Ok(n)
    }
}

impl Features {
    /// Parse feature `feat` from its section bytes (`offset`: their file offset).
    pub fn parse_section(&mut self, feat: u32, data: &[u8], offset: u64) -> Result<(), Error> {
        let what = name(feat);
        let mut s = Sec::new(data, offset, what);
        match feat {
            id::HOSTNAME => self.hostname = Some(s.string()?),
            id::OSRELEASE => self.osrelease = Some(s.string()?),
            id::VERSION => self.version = Some(s.string()?),
            id::ARCH => self.arch = Some(s.string()?),
            id::CPUDESC => self.cpudesc = Some(s.string()?),
            id::CPUID => self.cpuid = Some(s.string()?),
            id::NRCPUS => {
                let avail = s.u32()?;
                let online = s.u32()?;
                self.nr_cpus = Some((avail, online));
            }
            id::TOTAL_MEM => self.total_mem = Some(s.u64()?),
            id::CMDLINE => {
                let n = s.count(4)?;
                let mut v = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    v.push(s.string()?);
                }
                self.cmdline = Some(v);
            }
            id::EVENT_DESC => {
                let n = s.count(SIZE_VER0 as u64)?;
                let at = offset + s.pos as u64;
                let size = s.u32()? as u64;
                if !(SIZE_VER0 as u64..=SIZE_MAX as u64).contains(&size) {
                    return Err(Error::perfdata_invalid(at, what, format!("attr size {size}")));
                }
                for _ in 0..n {
                    let attr = EventAttr::parse(s.take(size)?);
                    let nr = s.count(8)?;
                    let name = s.string()?;
                    let ids = (0..nr).map(|_| s.u64()).collect::<Result<_, _>>()?;
                    self.event_desc.push(EventDesc { attr, name, ids });
                }
            }
            id::BUILD_ID => self.build_ids = parse_build_ids(data, offset)?,
            id::SAMPLE_TIME => {
                let first = s.u64()?;
                let last = s.u64()?;
                self.sample_time = Some((first, last));
            }
            id::CLOCKID => self.clockid = Some(s.u64()?),
            id::CLOCK_DATA => {
                let version = s.u32()?;
                if version != 1 {
                    return Ok(()); // a later layout: skipped, as perf would
                }
                let clockid = s.u32()?;
                let tod_ns = s.u64()?;
                let clockid_ns = s.u64()?;
                self.clock_data = Some(ClockData { clockid, tod_ns, clockid_ns });
            }
            id::TRACING_DATA => self.tracing = Some(parse_tracing_data(data, offset)?),
            _ => {}
        }
        Ok(())
    }
}

/// A feature's name as perf's `--header` spells it (for messages).
pub fn name(feat: u32) -> &'static str {
    match feat {
        id::TRACING_DATA => "TRACING_DATA feature",
        id::BUILD_ID => "BUILD_ID feature",
        id::HOSTNAME => "HOSTNAME feature",
        id::OSRELEASE => "OSRELEASE feature",
        id::VERSION => "VERSION feature",
        id::ARCH => "ARCH feature",
        id::NRCPUS => "NRCPUS feature",
        id::CPUDESC => "CPUDESC feature",
        id::CPUID => "CPUID feature",
        id::TOTAL_MEM => "TOTAL_MEM feature",
        id::CMDLINE => "CMDLINE feature",
        id::EVENT_DESC => "EVENT_DESC feature",
        id::SAMPLE_TIME => "SAMPLE_TIME feature",
        id::CLOCKID => "CLOCKID feature",
        id::CLOCK_DATA => "CLOCK_DATA feature",
        _ => "feature",
    }
}

/// Build id records, one after another (the `BUILD_ID` feature's content).
pub fn parse_build_ids(data: &[u8], offset: u64) -> Result<Vec<BuildId>, Error> {
    let mut v = Vec::new();
    let mut pos = 0usize;
    while pos + 8 <= data.len() {
        let misc = super::u16_at(data, pos + 4);
        let size = super::u16_at(data, pos + 6) as usize;
        if size < 8 + 4 + 24 || pos + size > data.len() {
            return Err(Error::perfdata_invalid(
                offset + pos as u64,
                "BUILD_ID feature",
                format!("build id record of {size} bytes"),
            ));
        }
        let r = &data[pos..pos + size];
        let pid = super::u32_at(r, 8) as i32;
        let id = &r[12..32];
        let n = if misc & super::misc::BUILD_ID_SIZE != 0 { (r[32] as usize).min(20) } else { 20 };
        v.push(BuildId {
            cpumode: misc & super::misc::CPUMODE_MASK,
            pid,
            build_id: id[..n].to_vec(),
            filename: super::cstr(&r[36..]).to_string(),
        });
        pos += size;
    }
    Ok(v)
}

/// The `TRACING_DATA` content, read by trace.dat's own reader: perf writes the leading part
/// of a trace.dat v6 file (magic, version `0.6`, byte order, long and page size, headers,
/// formats, kallsyms, printk formats, saved_cmdlines), without the CPU data. tp gives the
/// reader that file: its version spelled `6` and an empty data part after the metadata.
pub fn parse_tracing_data(data: &[u8], offset: u64) -> Result<Tracing, Error> {
    use crate::tracedat::TraceDat;
    let what = "TRACING_DATA feature";
    let magic = crate::tracedat::MAGIC;
    if data.len() < magic.len() || &data[..magic.len()] != magic {
        return Err(Error::perfdata_invalid(offset, what, "no trace.dat magic".into()));
    }
    let rest = &data[magic.len()..];
    let nul = memchr::memchr(0, &rest[..rest.len().min(16)])
        .ok_or_else(|| Error::perfdata_invalid(offset + 10, what, "no version string".into()))?;
    let version = std::str::from_utf8(&rest[..nul]).unwrap_or("");
    let has_cmdlines = match version {
        "0.6" | "6" => true,
        "0.5" | "5" => false,
        v => {
            return Err(Error::perfdata(
                offset + 10,
                what,
                super::ErrorKind::Unsupported(format!("tracing data version {v:?}")),
            ))
        }
    };
    let meta = &rest[nul + 1..];
    // perf pads the data to 8 bytes (pipe mode); the reader must see the metadata's end.
    let meta = &meta[..metadata_len(meta, has_cmdlines).unwrap_or(meta.len())];
    // The file trace.dat's reader gets: "6", the metadata, then (0.5 lacks it) an empty
    // saved_cmdlines block, no CPUs and an empty flyrecord.
    let mut file = Vec::with_capacity(data.len() + 32);
    file.extend_from_slice(magic);
    file.extend_from_slice(b"6\0");
    // Shift so offsets in messages stay the section's: the version lost 2 bytes.
    let shift = nul as i64 - 1;
    file.extend_from_slice(meta);
    if !has_cmdlines {
        file.extend_from_slice(&0u64.to_le_bytes());
    }
    file.extend_from_slice(&0u32.to_le_bytes());
    file.extend_from_slice(b"flyrecord\0");
    let mut dat = TraceDat::open(std::io::Cursor::new(file)).map_err(|mut e| {
        e.offset = e.offset.wrapping_add(offset).wrapping_add(shift as u64);
        e.section = format!("{what}: {}", e.section);
        Error::from_tracedat(e)
    })?;
    let format_errors = dat.format_errors().to_vec();
    let (events, tables) = dat.take_render_tables();
    Ok(Tracing {
        big_endian: dat.big_endian(),
        long_size: dat.long_size(),
        page_size: dat.page_size(),
        events,
        format_errors,
        tables,
    })
}

/// The length of trace.dat v6 metadata after the version string (byte order, sizes,
/// headers, formats, kallsyms, printk, saved_cmdlines), from its length fields; `None` when
/// they run past the data (the reader then says where).
fn metadata_len(m: &[u8], has_cmdlines: bool) -> Option<usize> {
    let mut p = 6usize; // endianness, long size, page size
    let u32_ = |p: usize| m.get(p..p + 4).map(|b| super::u32_at(b, 0) as usize);
    let u64_ = |p: usize| {
        m.get(p..p + 8).map(|b| super::u64_at(b, 0)).and_then(|v| usize::try_from(v).ok())
    };
    for tag in ["header_page\0", "header_event\0"] {
        p = p.checked_add(tag.len())?;
        p = p.checked_add(8)?.checked_add(u64_(p)?)?;
    }
    let n = u32_(p)?;
    p += 4;
    for _ in 0..n {
        p = p.checked_add(8)?.checked_add(u64_(p)?)?;
    }
    let systems = u32_(p)?;
    p += 4;
    for _ in 0..systems {
        p = p.checked_add(memchr::memchr(0, m.get(p..)?)? + 1)?;
        let n = u32_(p)?;
        p += 4;
        for _ in 0..n {
            p = p.checked_add(8)?.checked_add(u64_(p)?)?;
        }
    }
    for _ in 0..2 {
        p = p.checked_add(4)?.checked_add(u32_(p)?)?; // kallsyms, printk
    }
    if has_cmdlines {
        p = p.checked_add(8)?.checked_add(u64_(p)?)?;
    }
    (p <= m.len()).then_some(p)
}
// ---- writing ----

/// perf's string: u32 length, the text NUL-padded to a multiple of 64 bytes.
pub(crate) fn put_string(v: &mut Vec<u8>, s: &str) {
    let len = (s.len() + 1).div_ceil(64) * 64;
    v.extend_from_slice(&(len as u32).to_le_bytes());
    v.extend_from_slice(s.as_bytes());
    v.resize(v.len() + len - s.len(), 0);
}

/// A build id record as perf writes it (in the `BUILD_ID` feature).
pub(crate) fn put_build_id(v: &mut Vec<u8>, b: &BuildId) {
    let name_len = (b.filename.len() + 1).div_ceil(64) * 64;
    let size = 8 + 4 + 24 + name_len;
    v.extend_from_slice(&super::kind::HEADER_BUILD_ID.to_le_bytes());
    let misc = b.cpumode | super::misc::BUILD_ID_SIZE;
    v.extend_from_slice(&misc.to_le_bytes());
    v.extend_from_slice(&(size as u16).to_le_bytes());
    v.extend_from_slice(&b.pid.to_le_bytes());
    let mut id = [0u8; 24];
    let n = b.build_id.len().min(20);
    id[..n].copy_from_slice(&b.build_id[..n]);
    id[20] = n as u8;
    v.extend_from_slice(&id);
    v.extend_from_slice(b.filename.as_bytes());
    v.resize(v.len() + name_len - b.filename.len(), 0);
}

impl Features {
    /// Each present feature's section content, in bit order, as perf writes them.
    /// `tracing_data` is the `TRACING_DATA` content already serialised (see
    /// [`crate::tracedat::Writer::tracing_data`]).
    pub(crate) fn sections(&self, tracing_data: Option<&[u8]>) -> Vec<(u32, Vec<u8>)> {
        let mut out = Vec::new();
        if let Some(t) = tracing_data {
            out.push((id::TRACING_DATA, t.to_vec()));
        }
        if !self.build_ids.is_empty() {
            let mut v = Vec::new();
            for b in &self.build_ids {
                put_build_id(&mut v, b);
            }
            out.push((id::BUILD_ID, v));
        }
        let strings = [
            (id::HOSTNAME, &self.hostname),
            (id::OSRELEASE, &self.osrelease),
            (id::VERSION, &self.version),
            (id::ARCH, &self.arch),
        ];
        for (f, s) in strings {
            if let Some(s) = s {
                let mut v = Vec::new();
                put_string(&mut v, s);
                out.push((f, v));
            }
        }
        if let Some((avail, online)) = self.nr_cpus {
            let mut v = avail.to_le_bytes().to_vec();
            v.extend_from_slice(&online.to_le_bytes());
            out.push((id::NRCPUS, v));
        }
        if let Some(s) = &self.cpudesc {
            let mut v = Vec::new();
            put_string(&mut v, s);
            out.push((id::CPUDESC, v));
        }
        if let Some(s) = &self.cpuid {
            let mut v = Vec::new();
            put_string(&mut v, s);
            out.push((id::CPUID, v));
        }
        if let Some(m) = self.total_mem {
            out.push((id::TOTAL_MEM, m.to_le_bytes().to_vec()));
        }
        if let Some(args) = &self.cmdline {
            let mut v = (args.len() as u32).to_le_bytes().to_vec();
            for a in args {
                put_string(&mut v, a);
            }
            out.push((id::CMDLINE, v));
        }
        if !self.event_desc.is_empty() {
            let mut v = (self.event_desc.len() as u32).to_le_bytes().to_vec();
            v.extend_from_slice(&(super::attr::SIZE_WRITTEN as u32).to_le_bytes());
            for e in &self.event_desc {
                v.extend_from_slice(&e.attr.to_bytes(0));
                v.extend_from_slice(&(e.ids.len() as u32).to_le_bytes());
                put_string(&mut v, &e.name);
                for i in &e.ids {
                    v.extend_from_slice(&i.to_le_bytes());
                }
            }
            out.push((id::EVENT_DESC, v));
        }
        if let Some((first, last)) = self.sample_time {
            let mut v = first.to_le_bytes().to_vec();
            v.extend_from_slice(&last.to_le_bytes());
            out.push((id::SAMPLE_TIME, v));
        }
        if let Some(c) = self.clockid {
            out.push((id::CLOCKID, c.to_le_bytes().to_vec()));
        }
        if let Some(c) = self.clock_data {
            let mut v = 1u32.to_le_bytes().to_vec();
            v.extend_from_slice(&c.clockid.to_le_bytes());
            v.extend_from_slice(&c.tod_ns.to_le_bytes());
            v.extend_from_slice(&c.clockid_ns.to_le_bytes());
            out.push((id::CLOCK_DATA, v));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_round_trip() {
        let f = Features {
            hostname: Some("vm".into()),
            osrelease: Some("6.18.0".into()),
            version: Some("tp 0.1.0".into()),
            arch: Some("x86_64".into()),
            nr_cpus: Some((2, 2)),
            cmdline: Some(vec!["tp".into(), "record".into()]),
            event_desc: vec![EventDesc {
                attr: EventAttr { type_: 2, config: 5, ..Default::default() },
                name: "sched:sched_switch".into(),
                ids: vec![12, 13],
            }],
            build_ids: vec![BuildId {
                cpumode: 1,
                pid: -1,
                build_id: vec![0xab; 20],
                filename: "[kernel.kallsyms]".into(),
            }],
            clockid: Some(1),
            clock_data: Some(ClockData { clockid: 1, tod_ns: 5, clockid_ns: 6 }),
            sample_time: Some((1, 2)),
            ..Default::default()
        };
        let mut g = Features::default();
        for (feat, bytes) in f.sections(None) {
            g.parse_section(feat, &bytes, 0).unwrap();
            // Cut sections are errors (or, for lists, fewer entries), never panics.
            for n in 0..bytes.len() {
                let _ = Features::default().parse_section(feat, &bytes[..n], 0);
            }
        }
        assert_eq!(g.hostname, f.hostname);
        assert_eq!(g.cmdline, f.cmdline);
        assert_eq!(g.nr_cpus, f.nr_cpus);
        assert_eq!(g.event_desc[0].name, "sched:sched_switch");
        assert_eq!(g.event_desc[0].ids, vec![12, 13]);
        assert_eq!(g.event_desc[0].attr.config, 5);
        assert_eq!(g.build_ids, f.build_ids);
        assert_eq!(g.clock_data, f.clock_data);
        assert_eq!(g.clockid, Some(1));
    }
}
