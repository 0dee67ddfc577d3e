//! Reading a trace.dat file: [`TraceDat`] opens it (the initial format here; the metadata in
//! [`v6`] (inline, in fixed order) or [`v7`] (sections found through [`options`]), both
//! parsed by [`sections`]) and reads the buffers' data on demand.

mod options;
mod sections;
mod v6;
mod v7;

use super::bytes::{text_of, Input};
use super::compress::Compression;
use super::records::{PageSource, Records};
use super::source::{ChunkPages, CpuData, RegionPages};
use super::{option, Error, ErrorKind, MAGIC};
use crate::format::{EventFormat, FormatError};
use crate::header::HeaderPage;
use crate::page::PageLayout;
use crate::render::Tables;
use crate::symbols::{Cmdlines, Kallsyms, PrintkFormats};
use options::{parse_clock, Pending};
use std::fs::File;
use std::io::{Read, Seek};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BufferKind {
    /// Ring-buffer pages per CPU.
    Flyrecord,
    /// The text of a latency tracer's `trace` file (`latency_text` reads it).
    Latency,
}

/// A trace buffer: the top-level buffer (name `""`) or an instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Buffer {
    pub name: String,
    pub kind: BufferKind,
    /// The clock of this buffer, when the file says (v7 per buffer; v6 file-wide).
    pub clock: Option<String>,
    pub page_size: usize,
    /// CPUs with data, in file order.
    pub cpus: Vec<CpuData>,
    /// v7: whether the CPU data are compressed chunks.
    pub compressed: bool,
    /// File offset of the buffer's section (v7) or `flyrecord` tag (v6).
    pub offset: u64,
}

/// TSC2NSEC option: `ns = (ts * mult) >> shift` then `+ offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tsc2Nsec {
    pub mult: u32,
    pub shift: u32,
    pub offset: u64,
}

/// An opened trace.dat file: its metadata, read at open, and the buffers' data, read on
/// demand. See the [module documentation](super).
pub struct TraceDat<R> {
    input: Input<R>,
    version: u32,
    big_endian: bool,
    long_size: usize,
    page_size: usize,
    compression: Compression,
    compression_version: String,
    header_page: HeaderPage,
    header_page_text: String,
    header_event_text: String,
    events: Vec<EventFormat>,
    format_errors: Vec<FormatError>,
    kallsyms: Kallsyms,
    printk: PrintkFormats,
    cmdlines: Cmdlines,
    clock: Option<String>,
    uname: Option<String>,
    tracer_version: Option<String>,
    cpustats: String,
    cpu_count: Option<u32>,
    ts_offset: i64,
    date_offset: i64,
    tsc2nsec: Option<Tsc2Nsec>,
    has_time_shift: bool,
    trace_id: Option<u64>,
    buffers: Vec<Buffer>,
    unknown_options: Vec<u16>,
    procmaps: Vec<super::ProcMaps>,
    /// Keep event formats as text rather than parse them ([`TraceDat::open_file_lazy`]).
    defer_formats: bool,
    /// Event formats not parsed yet: (system, format file text), in file order.
    deferred: Vec<(String, String)>,
}

/// What the file says: the initial format, the metadata sections and the options.
impl<R> TraceDat<R> {
    /// 6 or 7.
    pub fn version(&self) -> u32 {
        self.version
    }
    pub fn big_endian(&self) -> bool {
        self.big_endian
    }
    /// The traced user space's `sizeof(long)`.
    pub fn long_size(&self) -> usize {
        self.long_size
    }
    pub fn page_size(&self) -> usize {
        self.page_size
    }
    pub fn compression(&self) -> Compression {
        self.compression
    }
    /// The compression header's version string (v7; empty in v6).
    pub fn compression_version(&self) -> &str {
        &self.compression_version
    }
    pub fn header_page(&self) -> HeaderPage {
        self.header_page
    }
    /// The `events/header_page` text the file carries.
    pub fn header_page_text(&self) -> &str {
        &self.header_page_text
    }
    /// The `events/header_event` text the file carries.
    pub fn header_event_text(&self) -> &str {
        &self.header_event_text
    }
    /// Every parsed event format: ftrace's internal events (system `ftrace`) first, then
    /// the others, in file order.
    pub fn events(&self) -> &[EventFormat] {
        &self.events
    }
    /// Format files that did not parse (their events print as unknown).
    pub fn format_errors(&self) -> &[FormatError] {
        &self.format_errors
    }
    pub fn kallsyms(&self) -> &Kallsyms {
        &self.kallsyms
    }
    pub fn printk(&self) -> &PrintkFormats {
        &self.printk
    }
    /// saved_cmdlines (and saved_tgids when the file has them).
    pub fn cmdlines(&self) -> &Cmdlines {
        &self.cmdlines
    }
    /// Trace clock name (`local`, `mono`, `x86-tsc`...), from the TRACECLOCK option (the
    /// bracketed entry) or the first buffer's clock.
    pub fn clock(&self) -> Option<&str> {
        self.clock.as_deref()
    }
    /// `uname` of the traced machine.
    pub fn uname(&self) -> Option<&str> {
        self.uname.as_deref()
    }
    /// trace-cmd version that wrote the file.
    pub fn tracer_version(&self) -> Option<&str> {
        self.tracer_version.as_deref()
    }
    /// Concatenated CPUSTAT texts (per-CPU `stats`, with `Buffer: NAME` separators).
    pub fn cpustats(&self) -> &str {
        &self.cpustats
    }
    /// CPUCOUNT option, or the v6 header's CPU count.
    pub fn cpu_count(&self) -> Option<u32> {
        self.cpu_count
    }
    /// OFFSET option (added to timestamps by [`TraceDat::adjust_ts`]).
    pub fn ts_offset(&self) -> i64 {
        self.ts_offset
    }
    /// DATE option in nanoseconds (added to timestamps by [`TraceDat::adjust_ts`]).
    pub fn date_offset(&self) -> i64 {
        self.date_offset
    }
    pub fn tsc2nsec(&self) -> Option<Tsc2Nsec> {
        self.tsc2nsec
    }
    /// TIME_SHIFT option present (host/guest sync; not applied).
    pub fn has_time_shift(&self) -> bool {
        self.has_time_shift
    }
    pub fn trace_id(&self) -> Option<u64> {
        self.trace_id
    }
    /// The buffers: top level (name `""`) and instances, flyrecord or latency text.
    pub fn buffers(&self) -> &[Buffer] {
        &self.buffers
    }
    /// Mappings of traced processes (PROCMAPS options), when the recording saved them.
    pub fn proc_maps(&self) -> &[super::ProcMaps] {
        &self.procmaps
    }

    /// Option IDs seen that tp does not interpret (skipped by size).
    pub fn unknown_options(&self) -> &[u16] {
        &self.unknown_options
    }

    /// Move the parsed event formats and the symbol tables out, for a
    /// [`Renderer`](crate::render::Renderer) (megabytes not worth copying); reading records
    /// needs neither, and [`TraceDat::events`] and the tables are empty afterwards.
    pub fn take_render_tables(&mut self) -> (Vec<EventFormat>, Tables) {
        let tables = Tables {
            kallsyms: std::mem::take(&mut self.kallsyms),
            printk: std::mem::take(&mut self.printk),
            cmdlines: std::mem::take(&mut self.cmdlines),
            user_maps: None,
        };
        (std::mem::take(&mut self.events), tables)
    }
}

impl<R> std::fmt::Debug for TraceDat<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceDat")
            .field("version", &self.version)
            .field("compression", &self.compression)
            .field("page_size", &self.page_size)
            .field("events", &self.events.len())
            .field("clock", &self.clock)
            .field("buffers", &self.buffers)
            .finish_non_exhaustive()
    }
}

impl TraceDat<File> {
    /// Read a trace.dat file's metadata from a file, which is then read with positional
    /// reads (`pread`): the fastest way, and page sources can be sent to other threads
    /// ([`TraceDat::page_source_send`]).
    pub fn open_file(file: File) -> Result<TraceDat<File>, Error> {
        TraceDat::open_input(Input::file(file)?, false)
    }

    /// [`TraceDat::open_file`], keeping the event formats as text: `events` and
    /// `format_errors` stay empty until [`TraceDat::parse_formats`] parses the ones wanted
    /// (a kernel has thousands of formats; a trace usually uses a few dozen).
    pub fn open_file_lazy(file: File) -> Result<TraceDat<File>, Error> {
        TraceDat::open_input(Input::file(file)?, true)
    }
}

impl<R: Read + Seek> TraceDat<R> {
    /// Read a trace.dat file's metadata from any `Read + Seek` (a `BufReader<File>` is
    /// best for a file not opened with [`TraceDat::open_file`]).
    pub fn open(reader: R) -> Result<TraceDat<R>, Error> {
        TraceDat::open_input(Input::new(reader)?, false)
    }

    fn open_input(mut input: Input<R>, defer_formats: bool) -> Result<TraceDat<R>, Error> {
        let mut magic = [0u8; 10];
        input.read_at(0, &mut magic, "initial format").map_err(|e| {
            if e.is_truncation() {
                Error::tracedat(0, "initial format", ErrorKind::BadMagic)
            } else {
                e
            }
        })?;
        if &magic != MAGIC {
            return Err(Error::tracedat(0, "initial format", ErrorKind::BadMagic));
        }
        let (vs, mut pos) = input.cstr_at(10, 16, "version string")?;
        let version: u32 = vs.trim().parse().map_err(|_| {
            Error::tracedat_invalid(10, "version string", format!("bad version {vs:?}"))
        })?;
        if version != 6 && version != 7 {
            return Err(Error::tracedat(
                10,
                "version string",
                ErrorKind::Unsupported(format!("file version {version} (tp reads 6 and 7)")),
            ));
        }
        let mut b = [0u8; 2];
        input.read_at(pos, &mut b, "initial format")?;
        let big_endian = match b[0] {
            0 => false,
            1 => true,
            x => {
                return Err(Error::tracedat_invalid(
                    pos,
                    "initial format",
                    format!("endianness byte {x}"),
                ))
            }
        };
        let long_size = match b[1] {
            4 | 8 => b[1] as usize,
            x => {
                return Err(Error::tracedat_invalid(
                    pos + 1,
                    "initial format",
                    format!("long size {x}"),
                ))
            }
        };
        input.big_endian = big_endian;
        pos += 2;
        let page_size = input.u32_at(pos, "initial format")? as usize;
        if !(64..=(1 << 24)).contains(&page_size) {
            return Err(Error::tracedat_invalid(
                pos,
                "initial format",
                format!("page size {page_size}"),
            ));
        }
        pos += 4;
        let mut dat = TraceDat {
            input,
            version,
            big_endian,
            long_size,
            page_size,
            compression: Compression::None,
            compression_version: String::new(),
            header_page: HeaderPage::X86_64,
            header_page_text: String::new(),
            header_event_text: String::new(),
            events: Vec::new(),
            format_errors: Vec::new(),
            kallsyms: Kallsyms::default(),
            printk: PrintkFormats::default(),
            cmdlines: Cmdlines::default(),
            clock: None,
            uname: None,
            tracer_version: None,
            cpustats: String::new(),
            cpu_count: None,
            ts_offset: 0,
            date_offset: 0,
            tsc2nsec: None,
            has_time_shift: false,
            trace_id: None,
            buffers: Vec::new(),
            unknown_options: Vec::new(),
            procmaps: Vec::new(),
            defer_formats,
            deferred: Vec::new(),
        };
        let mut p = Pending::default();
        if version == 7 {
            dat.open_v7(pos, &mut p)?;
        } else {
            dat.open_v6(pos, &mut p)?;
        }
        if let Some(t) = &p.trace_clock_text {
            dat.clock = parse_clock(t);
        }
        if dat.clock.is_none() {
            dat.clock = dat.buffers.iter().find_map(|b| b.clock.clone());
        }
        for b in &mut dat.buffers {
            if b.clock.is_none() {
                b.clock.clone_from(&dat.clock);
            }
        }
        Ok(dat)
    }
}

impl<R: Read + Seek> TraceDat<R> {
    /// The page layout of this file's ring-buffer pages.
    pub fn layout(&self) -> PageLayout {
        PageLayout::new(self.header_page, self.big_endian)
    }

    /// The raw pages of one CPU of buffer `index` (`cpu` is an index into `Buffer::cpus`),
    /// e.g. to copy them into another file.
    pub fn page_source(&self, index: usize, cpu: usize) -> Result<Box<dyn PageSource + '_>, Error> {
        let (c, what) = self.cpu_data(index, cpu)?;
        Ok(if self.buffers[index].compressed {
            Box::new(ChunkPages::new(self.input.clone(), c, self.compression, self.page_size, what))
        } else {
            Box::new(RegionPages::new(self.input.clone(), c, self.page_size, what))
        })
    }

    /// Where CPU index `cpu` of buffer `index` is, and its name for messages.
    fn cpu_data(&self, index: usize, cpu: usize) -> Result<(CpuData, String), Error> {
        let buf = self.buffers.get(index).ok_or_else(|| {
            Error::tracedat_invalid(
                0,
                "buffers",
                format!("no buffer {index} (the file has {})", self.buffers.len()),
            )
        })?;
        let c = *buf.cpus.get(cpu).ok_or_else(|| {
            Error::tracedat_invalid(
                buf.offset,
                "buffers",
                format!("buffer {:?} has no CPU index {cpu}", buf.name),
            )
        })?;
        Ok((c, format!("CPU {} data of buffer {:?}", c.cpu, buf.name)))
    }

    /// Stream buffer `index`'s records, all CPUs merged by time.
    pub fn records(&self, index: usize) -> Result<Records<'_>, Error> {
        let buf = self.buffers.get(index).ok_or_else(|| {
            Error::tracedat_invalid(
                0,
                "buffers",
                format!("no buffer {index} (the file has {})", self.buffers.len()),
            )
        })?;
        if buf.kind == BufferKind::Latency {
            return Err(Error::tracedat(
                buf.offset,
                "buffer text",
                ErrorKind::Unsupported(format!(
                    "buffer {:?} holds latency text, not records",
                    buf.name
                )),
            ));
        }
        let mut sources: Vec<(u32, Box<dyn PageSource + '_>)> = Vec::new();
        for (i, c) in buf.cpus.iter().enumerate() {
            sources.push((c.cpu, self.page_source(index, i)?));
        }
        Ok(Records::new(self.layout(), sources))
    }

    /// Stream every buffer's records: one [`Records`] per flyrecord buffer, with its name.
    pub fn all_records(&self) -> Result<Vec<(&str, Records<'_>)>, Error> {
        let mut v = Vec::new();
        for (i, b) in self.buffers.iter().enumerate() {
            if b.kind == BufferKind::Flyrecord {
                v.push((b.name.as_str(), self.records(i)?));
            }
        }
        Ok(v)
    }

    /// The text of a latency buffer (v6 `latency` or v7 BUFFER_TEXT).
    pub fn latency_text(&self, index: usize) -> Result<String, Error> {
        let buf = self
            .buffers
            .get(index)
            .ok_or_else(|| Error::tracedat_invalid(0, "buffers", format!("no buffer {index}")))?;
        if self.version == 7 {
            let (d, _) = self.read_section(buf.offset, option::BUFFER_TEXT)?;
            Ok(text_of(&d))
        } else {
            let n = self.input.len.saturating_sub(buf.offset);
            Ok(text_of(&self.input.read_vec(buf.offset, n, "latency text")?))
        }
    }

    /// Apply the file's timestamp options to a raw timestamp, as trace-cmd report does:
    /// TSC2NSEC conversion, then OFFSET and DATE.
    pub fn adjust_ts(&self, ts: u64) -> u64 {
        let mut t = ts;
        if let Some(c) = self.tsc2nsec {
            t = ((t as u128 * c.mult as u128) >> c.shift.min(127)) as u64;
            t = t.wrapping_add(c.offset);
        }
        t.wrapping_add(self.ts_offset as u64).wrapping_add(self.date_offset as u64)
    }

    /// Length of the underlying file.
    pub fn file_len(&self) -> u64 {
        self.input.len
    }
}

impl<R: Read + Seek + Send> TraceDat<R> {
    /// [`TraceDat::page_source`], as a source that can move to another thread (e.g. to
    /// count or decompress CPUs in parallel). Sources share the input: with
    /// [`TraceDat::open_file`] they read it with positional reads, without a lock.
    pub fn page_source_send(
        &self,
        index: usize,
        cpu: usize,
    ) -> Result<Box<dyn PageSource + Send + '_>, Error> {
        let (c, what) = self.cpu_data(index, cpu)?;
        Ok(if self.buffers[index].compressed {
            Box::new(ChunkPages::new(self.input.clone(), c, self.compression, self.page_size, what))
        } else {
            Box::new(RegionPages::new(self.input.clone(), c, self.page_size, what))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> File {
        let p = format!("{}/../../fixtures/tracedat/{name}", env!("CARGO_MANIFEST_DIR"));
        File::open(p).expect("fixture exists")
    }

    #[test]
    fn lazy_formats_parse_only_the_wanted_ids() {
        for name in ["v6.dat", "v7-zstd.dat", "v7-none.dat"] {
            let all = TraceDat::open_file(fixture(name)).unwrap();
            let mut lazy = TraceDat::open_file_lazy(fixture(name)).unwrap();
            assert!(lazy.events().is_empty());
            assert_eq!(lazy.unparsed_formats(), all.events().len() + all.format_errors().len());
            let id = all.events().iter().find(|e| e.name == "sched_switch").unwrap().id;
            lazy.parse_formats(|i| i == id);
            assert_eq!(lazy.events().len(), 1);
            assert_eq!(lazy.events()[0].name, "sched_switch");
            lazy.parse_formats(|_| true);
            assert_eq!(lazy.unparsed_formats(), 0);
            let mut a: Vec<_> = all.events().iter().map(|e| (e.id, e.name.clone())).collect();
            let mut b: Vec<_> = lazy.events().iter().map(|e| (e.id, e.name.clone())).collect();
            a.sort();
            b.sort();
            assert_eq!(a, b);
        }
    }
}
