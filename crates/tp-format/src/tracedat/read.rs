//! Opening a trace.dat file: the initial format, the metadata (v6: in fixed order; v7: in
//! sections found through options) and the buffer descriptions.

use super::bytes::{text_of, Bytes, Input, MAX_SECTION};
use super::compress::{Compression, Decoder};
use super::records::{PageSource, Records};
use super::source::{ChunkPages, RegionPages};
use super::{option, Error, ErrorKind, MAGIC};
use crate::format::{EventFormat, FormatError};
use crate::header::HeaderPage;
use crate::page::PageLayout;
use crate::symbols::{Cmdlines, Kallsyms, PrintkFormats};
use std::collections::HashSet;
use std::fs::File;
use std::io::{Read, Seek};

/// One CPU's data in a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuData {
    pub cpu: u32,
    /// File offset of the data (v7 compressed: of the chunk count).
    pub offset: u64,
    /// Bytes in the file (v7 compressed: compressed bytes).
    pub size: u64,
}

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

/// An opened trace.dat file. See the [module documentation](super).
pub struct TraceDat<R> {
    input: Input<R>,
    /// 6 or 7.
    pub version: u32,
    pub big_endian: bool,
    /// The traced user space's `sizeof(long)`.
    pub long_size: usize,
    pub page_size: usize,
    pub compression: Compression,
    /// The compression header's version string (v7).
    pub compression_version: String,
    pub header_page: HeaderPage,
    pub header_page_text: String,
    pub header_event_text: String,
    /// Every event format: ftrace's internal events (system `ftrace`) first, then the
    /// others, in file order.
    pub events: Vec<EventFormat>,
    /// Format files that did not parse (their events print as unknown).
    pub format_errors: Vec<FormatError>,
    pub kallsyms: Kallsyms,
    pub printk: PrintkFormats,
    /// saved_cmdlines (and saved_tgids when the file has them).
    pub cmdlines: Cmdlines,
    /// Trace clock name (`local`, `mono`, `x86-tsc`...), from the TRACECLOCK option (the
    /// bracketed entry) or the first buffer's clock.
    pub clock: Option<String>,
    /// `uname` of the traced machine.
    pub uname: Option<String>,
    /// trace-cmd version that wrote the file.
    pub tracer_version: Option<String>,
    /// Concatenated CPUSTAT texts (per-CPU `stats`, with `Buffer: NAME` separators).
    pub cpustats: String,
    /// CPUCOUNT option, or the v6 header's CPU count.
    pub cpu_count: Option<u32>,
    /// OFFSET option (added to timestamps).
    pub ts_offset: i64,
    /// DATE option in nanoseconds (added to timestamps).
    pub date_offset: i64,
    pub tsc2nsec: Option<Tsc2Nsec>,
    /// TIME_SHIFT option present (host/guest sync; not applied).
    pub has_time_shift: bool,
    pub trace_id: Option<u64>,
    pub buffers: Vec<Buffer>,
    /// Option IDs seen that tp does not interpret (skipped by size).
    pub unknown_options: Vec<u16>,
    /// Keep event formats as text rather than parse them ([`TraceDat::open_file_lazy`]).
    defer_formats: bool,
    /// Event formats not parsed yet: (system, format file text), in file order.
    deferred: Vec<(String, String)>,
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

/// v7 section IDs are the option IDs of the options that point to them.
fn section_name(id: u16) -> &'static str {
    match id {
        option::DONE => "options",
        option::BUFFER => "buffer flyrecord",
        option::STRINGS => "strings",
        option::HEADER_INFO => "header info",
        option::FTRACE_EVENTS => "ftrace event formats",
        option::EVENT_FORMATS => "event formats",
        option::KALLSYMS => "kallsyms",
        option::PRINTK => "printk formats",
        option::CMDLINES => "saved command lines",
        option::BUFFER_TEXT => "buffer text",
        _ => "section",
    }
}

struct Pending {
    header_info: Option<u64>,
    ftrace: Option<u64>,
    formats: Option<u64>,
    kallsyms: Option<u64>,
    printk: Option<u64>,
    cmdlines: Option<u64>,
    /// v6 BUFFER options: name, offset.
    v6_buffers: Vec<(String, u64)>,
    trace_clock_text: Option<String>,
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
                Error::new(0, "initial format", ErrorKind::BadMagic)
            } else {
                e
            }
        })?;
        if &magic != MAGIC {
            return Err(Error::new(0, "initial format", ErrorKind::BadMagic));
        }
        let (vs, mut pos) = input.cstr_at(10, 16, "version string")?;
        let version: u32 = vs
            .trim()
            .parse()
            .map_err(|_| Error::invalid(10, "version string", format!("bad version {vs:?}")))?;
        if version != 6 && version != 7 {
            return Err(Error::new(
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
            x => return Err(Error::invalid(pos, "initial format", format!("endianness byte {x}"))),
        };
        let long_size = match b[1] {
            4 | 8 => b[1] as usize,
            x => return Err(Error::invalid(pos + 1, "initial format", format!("long size {x}"))),
        };
        input.big_endian = big_endian;
        pos += 2;
        let page_size = input.u32_at(pos, "initial format")? as usize;
        if !(64..=(1 << 24)).contains(&page_size) {
            return Err(Error::invalid(pos, "initial format", format!("page size {page_size}")));
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
            defer_formats,
            deferred: Vec::new(),
        };
        let mut p = Pending {
            header_info: None,
            ftrace: None,
            formats: None,
            kallsyms: None,
            printk: None,
            cmdlines: None,
            v6_buffers: Vec::new(),
            trace_clock_text: None,
        };
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

    // ---- v7 ----

    fn open_v7(&mut self, mut pos: u64, p: &mut Pending) -> Result<(), Error> {
        let (name, next) = self.input.cstr_at(pos, 64, "compression header")?;
        let (cver, next) = self.input.cstr_at(next, 64, "compression header")?;
        self.compression = Compression::from_name(&name).ok_or_else(|| {
            Error::new(
                pos,
                "compression header",
                ErrorKind::Unsupported(format!("compression {name:?}")),
            )
        })?;
        self.compression_version = cver;
        pos = next;
        let mut opt_off = self.input.u64_at(pos, "first options offset")?;
        let mut seen = HashSet::new();
        while opt_off != 0 {
            if !seen.insert(opt_off) || seen.len() > 1024 {
                return Err(Error::invalid(
                    opt_off,
                    "options",
                    "options sections form a loop".into(),
                ));
            }
            let (data, base) = self.read_section(opt_off, option::DONE)?;
            opt_off = self.parse_options(&data, base, p)?.unwrap_or(0);
        }
        let hp = p.header_info.ok_or_else(|| {
            Error::invalid(
                pos,
                "options",
                "no HEADER_INFO option: the file has no page layout".into(),
            )
        })?;
        let (data, base) = self.read_section(hp, option::HEADER_INFO)?;
        self.parse_header_info(&mut Bytes::new(&data, base, self.big_endian, "header info"))?;
        if let Some(off) = p.ftrace {
            let (data, base) = self.read_section(off, option::FTRACE_EVENTS)?;
            self.parse_ftrace(&mut Bytes::new(
                &data,
                base,
                self.big_endian,
                "ftrace event formats",
            ))?;
        }
        if let Some(off) = p.formats {
            let (data, base) = self.read_section(off, option::EVENT_FORMATS)?;
            self.parse_event_formats(&mut Bytes::new(
                &data,
                base,
                self.big_endian,
                "event formats",
            ))?;
        }
        if let Some(off) = p.kallsyms {
            let (data, base) = self.read_section(off, option::KALLSYMS)?;
            self.take_kallsyms(data, base)?;
        }
        if let Some(off) = p.printk {
            let (data, base) = self.read_section(off, option::PRINTK)?;
            self.parse_printk(&mut Bytes::new(&data, base, self.big_endian, "printk formats"))?;
        }
        if let Some(off) = p.cmdlines {
            let (data, base) = self.read_section(off, option::CMDLINES)?;
            self.parse_cmdlines(&mut Bytes::new(
                &data,
                base,
                self.big_endian,
                "saved command lines",
            ))?;
        }
        Ok(())
    }

    /// Read a v7 section at `offset` (its header must carry `want`) and return its
    /// (decompressed) content and the file offset of that content.
    fn read_section(&self, offset: u64, want: u16) -> Result<(Vec<u8>, u64), Error> {
        let name = section_name(want);
        let id = self.input.u16_at(offset, name)?;
        let flags = self.input.u16_at(offset + 2, name)?;
        let size = self.input.u64_at(offset + 8, name)?;
        if id != want {
            return Err(Error::invalid(
                offset,
                name,
                format!("section id {id} where {want} ({name}) was expected"),
            ));
        }
        let base = offset + 16;
        if flags & 1 != 0 && self.compression != Compression::None {
            let csize = self.input.u32_at(base, name)? as u64;
            let usize_ = self.input.u32_at(base + 4, name)? as u64;
            if csize + 8 > size {
                return Err(Error::invalid(
                    base,
                    name,
                    format!("compressed size {csize} exceeds the section size {size}"),
                ));
            }
            if usize_ > MAX_SECTION {
                return Err(Error::invalid(
                    base,
                    name,
                    format!("uncompressed size {usize_} is implausible"),
                ));
            }
            let cdata = self.input.read_vec(base + 8, csize, name)?;
            let mut out = Vec::new();
            Decoder::new(self.compression).decompress(&cdata, usize_, base, name, &mut out)?;
            Ok((out, base))
        } else {
            Ok((self.input.read_vec(base, size, name)?, base))
        }
    }

    /// Parse options from `data`; returns the next options section offset (v7 DONE).
    fn parse_options(
        &mut self,
        data: &[u8],
        base: u64,
        p: &mut Pending,
    ) -> Result<Option<u64>, Error> {
        let mut b = Bytes::new(data, base, self.big_endian, "options");
        loop {
            if self.version == 6 && b.remaining() < 2 {
                return Ok(None);
            }
            let at = b.offset();
            let id = b.u16()?;
            if self.version == 6 && id == option::DONE {
                return Ok(None);
            }
            let size = b.u32()? as u64;
            let d = b.take(size)?;
            let mut o = Bytes::new(d, at + 6, self.big_endian, "option");
            let u64_of = |o: &mut Bytes<'_>| o.u64();
            match id {
                option::DONE => return Ok(Some(u64_of(&mut o)?)),
                option::DATE => {
                    // Microseconds, written as hex with 0x.
                    let t = text_of(d);
                    if let Some(v) = parse_c_int(t.trim()) {
                        self.date_offset = self.date_offset.wrapping_add(v.wrapping_mul(1000));
                    }
                }
                option::OFFSET => {
                    if let Some(v) = parse_c_int(text_of(d).trim()) {
                        self.ts_offset = self.ts_offset.wrapping_add(v);
                    }
                }
                option::CPUSTAT => {
                    let t = text_of(d);
                    self.cpustats.push_str(&t);
                    if !t.ends_with('\n') {
                        self.cpustats.push('\n');
                    }
                }
                option::BUFFER | option::BUFFER_TEXT => self.parse_buffer_option(id, &mut o, p)?,
                option::TRACECLOCK => p.trace_clock_text = Some(text_of(d)),
                option::UNAME => self.uname = Some(text_of(d).trim_end().to_string()),
                option::VERSION => self.tracer_version = Some(text_of(d).trim_end().to_string()),
                option::CPUCOUNT => self.cpu_count = Some(o.u32()?),
                option::SAVED_TGIDS => self.cmdlines.add_tgids(&text_of(d)),
                option::TRACEID => self.trace_id = Some(o.u64()?),
                option::TIME_SHIFT => self.has_time_shift = true,
                option::TSC2NSEC => {
                    let mult = o.u32()?;
                    let shift = o.u32()?;
                    let offset = o.u64()?;
                    self.tsc2nsec = Some(Tsc2Nsec { mult, shift, offset });
                }
                option::HEADER_INFO => p.header_info = Some(o.u64()?),
                option::FTRACE_EVENTS => p.ftrace = Some(o.u64()?),
                option::EVENT_FORMATS => p.formats = Some(o.u64()?),
                option::KALLSYMS => p.kallsyms = Some(o.u64()?),
                option::PRINTK => p.printk = Some(o.u64()?),
                option::CMDLINES => p.cmdlines = Some(o.u64()?),
                option::HOOK | option::PROCMAPS | option::STRINGS | option::GUEST => {}
                other => self.unknown_options.push(other),
            }
        }
    }

    fn parse_buffer_option(
        &mut self,
        id: u16,
        o: &mut Bytes<'_>,
        p: &mut Pending,
    ) -> Result<(), Error> {
        let at = o.offset();
        let offset = o.u64()?;
        let name = o.cstr()?;
        if self.version == 6 {
            if id == option::BUFFER {
                p.v6_buffers.push((name, offset));
            }
            return Ok(());
        }
        let clock = o.cstr()?;
        if id == option::BUFFER_TEXT {
            self.buffers.push(Buffer {
                name,
                kind: BufferKind::Latency,
                clock: Some(clock),
                page_size: self.page_size,
                cpus: Vec::new(),
                compressed: false,
                offset,
            });
            return Ok(());
        }
        let page_size = o.u32()? as usize;
        if page_size != self.page_size {
            return Err(Error::invalid(
                at,
                "BUFFER option",
                format!(
                    "buffer {name:?} page size {page_size} differs from the file's {}",
                    self.page_size
                ),
            ));
        }
        let n = o.u32()? as usize;
        if n > o.remaining() / 20 {
            return Err(Error::invalid(
                at,
                "BUFFER option",
                format!("{n} CPUs do not fit the option"),
            ));
        }
        let mut cpus = Vec::with_capacity(n);
        for _ in 0..n {
            let cpu = o.u32()?;
            let offset = o.u64()?;
            let size = o.u64()?;
            cpus.push(CpuData { cpu, offset, size });
        }
        // Whether this buffer's data is compressed: from its section header flags.
        let mut compressed = false;
        if !cpus.iter().all(|c| c.size == 0) {
            let id = self.input.u16_at(offset, "buffer flyrecord")?;
            let flags = self.input.u16_at(offset + 2, "buffer flyrecord")?;
            if id != option::BUFFER {
                return Err(Error::invalid(
                    offset,
                    "buffer flyrecord",
                    format!("section id {id} where 3 (buffer flyrecord) was expected"),
                ));
            }
            compressed = flags & 1 != 0 && self.compression != Compression::None;
        }
        self.buffers.push(Buffer {
            name,
            kind: BufferKind::Flyrecord,
            clock: Some(clock),
            page_size,
            cpus,
            compressed,
            offset,
        });
        Ok(())
    }

    // ---- shared metadata parsers (v7 section content == v6 inline layout) ----

    fn parse_header_info(&mut self, b: &mut Bytes<'_>) -> Result<(), Error> {
        let at = b.offset();
        if b.take(12)? != b"header_page\0" {
            return Err(Error::invalid(at, "header info", "expected \"header_page\"".into()));
        }
        let n = b.u64()?;
        let at_text = b.offset();
        self.header_page_text = b.text(n)?;
        self.header_page = HeaderPage::parse(&self.header_page_text)
            .map_err(|m| Error::invalid(at_text, "header_page", m))?;
        if self.header_page.page_size() > self.page_size {
            return Err(Error::invalid(
                at_text,
                "header_page",
                format!(
                    "page layout of {} bytes exceeds the page size {}",
                    self.header_page.page_size(),
                    self.page_size
                ),
            ));
        }
        let at = b.offset();
        if b.take(13)? != b"header_event\0" {
            return Err(Error::invalid(at, "header info", "expected \"header_event\"".into()));
        }
        let n = b.u64()?;
        let at_text = b.offset();
        self.header_event_text = b.text(n)?;
        crate::header::check_header_event(&self.header_event_text)
            .map_err(|m| Error::invalid(at_text, "header_event", m))?;
        Ok(())
    }

    fn add_format(&mut self, system: &str, text: String) {
        if self.defer_formats {
            self.deferred.push((system.to_string(), text));
            return;
        }
        match EventFormat::parse(system, &text) {
            Ok(f) => self.events.push(f),
            Err(e) => self.format_errors.push(e),
        }
    }

    /// Event formats kept as text by [`TraceDat::open_file_lazy`] and not parsed yet.
    pub fn unparsed_formats(&self) -> usize {
        self.deferred.len()
    }

    /// Parse the formats kept by [`TraceDat::open_file_lazy`] whose event ID `want`
    /// accepts, adding them to `events` (or `format_errors`) in file order. A format whose
    /// ID cannot be read without parsing it is parsed. The others stay unparsed: a later
    /// call may parse them.
    pub fn parse_formats(&mut self, mut want: impl FnMut(u32) -> bool) {
        let deferred = std::mem::take(&mut self.deferred);
        for (system, text) in deferred {
            if quick_id(&text).map_or(true, &mut want) {
                match EventFormat::parse(&system, &text) {
                    Ok(f) => self.events.push(f),
                    Err(e) => self.format_errors.push(e),
                }
            } else {
                self.deferred.push((system, text));
            }
        }
    }

    fn parse_ftrace(&mut self, b: &mut Bytes<'_>) -> Result<(), Error> {
        let n = b.u32()?;
        for _ in 0..n {
            let size = b.u64()?;
            let t = b.text(size)?;
            self.add_format("ftrace", t);
        }
        Ok(())
    }

    fn parse_event_formats(&mut self, b: &mut Bytes<'_>) -> Result<(), Error> {
        let systems = b.u32()?;
        for _ in 0..systems {
            let system = b.cstr()?;
            let n = b.u32()?;
            for _ in 0..n {
                let size = b.u64()?;
                let t = b.text(size)?;
                self.add_format(&system, t);
            }
        }
        Ok(())
    }

    /// The kallsyms block (`u32` length, text), taken over in place: the text is a few
    /// megabytes, not worth a second copy.
    fn take_kallsyms(&mut self, mut data: Vec<u8>, base: u64) -> Result<(), Error> {
        let n = Bytes::new(&data, base, self.big_endian, "kallsyms").u32()? as u64;
        let have = data.len() as u64 - 4;
        if n > have {
            return Err(Error::new(base + 4, "kallsyms", ErrorKind::Truncated { need: n, have }));
        }
        data.truncate(4 + n as usize);
        // Trailing NULs dropped, as `text_of` does.
        let end = data.iter().rposition(|&c| c != 0).map_or(4, |i| i + 1).max(4);
        data.truncate(end);
        data.drain(..4);
        let text = String::from_utf8(data)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
        self.kallsyms = Kallsyms::from_text(text);
        Ok(())
    }

    fn parse_printk(&mut self, b: &mut Bytes<'_>) -> Result<(), Error> {
        let n = b.u32()? as u64;
        self.printk = PrintkFormats::parse(&b.text(n)?);
        Ok(())
    }

    fn parse_cmdlines(&mut self, b: &mut Bytes<'_>) -> Result<(), Error> {
        let n = b.u64()?;
        // Added to, not replaced: tgids from tp's option may have been read already.
        self.cmdlines.add_cmdlines(&b.text(n)?);
        Ok(())
    }

    // ---- v6 ----

    /// Read `len` bytes at `*pos` (v6 inline metadata), advancing `*pos`.
    fn v6_take(&self, pos: &mut u64, len: u64, what: &str) -> Result<Vec<u8>, Error> {
        let v = self.input.read_vec(*pos, len, what)?;
        *pos += len;
        Ok(v)
    }

    /// A length-prefixed v6 block: `size_bytes` (4 or 8) of length, then the data. Returns
    /// the prefix and data together so the shared parsers read them.
    fn v6_block(
        &self,
        pos: &mut u64,
        size_bytes: u64,
        what: &str,
    ) -> Result<(Vec<u8>, u64), Error> {
        let base = *pos;
        let n = if size_bytes == 4 {
            self.input.u32_at(*pos, what)? as u64
        } else {
            self.input.u64_at(*pos, what)?
        };
        let v = self.v6_take(pos, size_bytes + n, what)?;
        Ok((v, base))
    }

    fn open_v6(&mut self, mut pos: u64, p: &mut Pending) -> Result<(), Error> {
        let be = self.big_endian;
        // header_page and header_event.
        let start = pos;
        for (tag, what) in
            [(&b"header_page\0"[..], "header_page"), (&b"header_event\0"[..], "header_event")]
        {
            let t = self.v6_take(&mut pos, tag.len() as u64, what)?;
            if t != tag {
                return Err(Error::invalid(
                    pos - tag.len() as u64,
                    what,
                    format!("expected {what:?}"),
                ));
            }
            let n = self.input.u64_at(pos, what)?;
            pos += 8;
            if n > MAX_SECTION || pos + n > self.input.len {
                return Err(Error::new(
                    pos - 8,
                    what,
                    ErrorKind::Truncated { need: n, have: self.input.len.saturating_sub(pos) },
                ));
            }
            pos += n;
        }
        let hdr = self.input.read_vec(start, pos - start, "header info")?;
        self.parse_header_info(&mut Bytes::new(&hdr, start, be, "header info"))?;

        // ftrace formats: count, then (u64 size, text)*.
        let fstart = pos;
        let n = self.input.u32_at(pos, "ftrace event formats")?;
        pos += 4;
        for _ in 0..n {
            let size = self.input.u64_at(pos, "ftrace event formats")?;
            pos = pos.saturating_add(8).saturating_add(size);
            if pos > self.input.len {
                return Err(Error::new(
                    fstart,
                    "ftrace event formats",
                    ErrorKind::Truncated { need: pos - fstart, have: self.input.len - fstart },
                ));
            }
        }
        let d = self.input.read_vec(fstart, pos - fstart, "ftrace event formats")?;
        self.parse_ftrace(&mut Bytes::new(&d, fstart, be, "ftrace event formats"))?;

        // event formats: systems, then (name, count, (u64 size, text)*)*.
        let estart = pos;
        let systems = self.input.u32_at(pos, "event formats")?;
        pos += 4;
        for _ in 0..systems {
            let (_, next) = self.input.cstr_at(pos, 4096, "event formats")?;
            pos = next;
            let n = self.input.u32_at(pos, "event formats")?;
            pos += 4;
            for _ in 0..n {
                let size = self.input.u64_at(pos, "event formats")?;
                pos = pos.saturating_add(8).saturating_add(size);
                if pos > self.input.len {
                    return Err(Error::new(
                        estart,
                        "event formats",
                        ErrorKind::Truncated { need: pos - estart, have: self.input.len - estart },
                    ));
                }
            }
        }
        let d = self.input.read_vec(estart, pos - estart, "event formats")?;
        self.parse_event_formats(&mut Bytes::new(&d, estart, be, "event formats"))?;

        let (d, base) = self.v6_block(&mut pos, 4, "kallsyms")?;
        self.take_kallsyms(d, base)?;
        let (d, base) = self.v6_block(&mut pos, 4, "printk formats")?;
        self.parse_printk(&mut Bytes::new(&d, base, be, "printk formats"))?;
        let (d, base) = self.v6_block(&mut pos, 8, "saved command lines")?;
        self.parse_cmdlines(&mut Bytes::new(&d, base, be, "saved command lines"))?;

        let cpus = self.input.u32_at(pos, "CPU count")?;
        pos += 4;
        if cpus as u64 > self.input.len / 16 {
            return Err(Error::invalid(
                pos - 4,
                "CPU count",
                format!("{cpus} CPUs is implausible"),
            ));
        }
        self.cpu_count = Some(cpus);

        // Options, then "flyrecord" / "latency".
        let mut tag = [0u8; 10];
        self.input.read_at(pos, &mut tag, "options tag")?;
        if tag.starts_with(b"options") {
            pos += 10;
            let opt_start = pos;
            // Walk the options to find their end, then parse them from memory.
            loop {
                let id = self.input.u16_at(pos, "options")?;
                pos += 2;
                if id == option::DONE {
                    break;
                }
                let size = self.input.u32_at(pos, "options")? as u64;
                pos += 4 + size;
                if pos > self.input.len {
                    return Err(Error::new(
                        opt_start,
                        "options",
                        ErrorKind::Truncated {
                            need: pos - opt_start,
                            have: self.input.len - opt_start,
                        },
                    ));
                }
            }
            let d = self.input.read_vec(opt_start, pos - opt_start, "options")?;
            self.parse_options(&d, opt_start, p)?;
            self.input.read_at(pos, &mut tag, "data tag")?;
        }
        let top = self.v6_buffer(pos, "", cpus, p.trace_clock_text.is_some())?;
        self.buffers.push(top);
        for (name, off) in std::mem::take(&mut p.v6_buffers) {
            let mut tag = [0u8; 10];
            self.input.read_at(off, &mut tag, "buffer")?;
            let mut at = off;
            if tag.starts_with(b"options") {
                // Per-buffer options (CPUSTAT...): skip them.
                at += 10;
                loop {
                    let id = self.input.u16_at(at, "buffer options")?;
                    at += 2;
                    if id == option::DONE {
                        break;
                    }
                    let size = self.input.u32_at(at, "buffer options")? as u64;
                    at += 4 + size;
                    if at > self.input.len {
                        return Err(Error::new(
                            off,
                            "buffer options",
                            ErrorKind::Truncated { need: at - off, have: self.input.len - off },
                        ));
                    }
                }
            }
            let b = self.v6_buffer(at, &name, cpus, p.trace_clock_text.is_some())?;
            self.buffers.push(b);
        }
        Ok(())
    }

    /// A v6 `flyrecord\0` / `latency  \0` block at `pos`.
    fn v6_buffer(
        &mut self,
        pos: u64,
        name: &str,
        cpus: u32,
        has_clock: bool,
    ) -> Result<Buffer, Error> {
        let mut tag = [0u8; 10];
        self.input.read_at(pos, &mut tag, "data tag")?;
        if tag.starts_with(b"latency") {
            return Ok(Buffer {
                name: name.to_string(),
                kind: BufferKind::Latency,
                clock: None,
                page_size: self.page_size,
                cpus: Vec::new(),
                compressed: false,
                offset: pos + 10,
            });
        }
        if !tag.starts_with(b"flyrecord") {
            return Err(Error::invalid(
                pos,
                "data tag",
                format!("expected \"flyrecord\", found {:?}", text_of(&tag)),
            ));
        }
        let mut at = pos + 10;
        let mut list = Vec::new();
        for cpu in 0..cpus {
            let offset = self.input.u64_at(at, "flyrecord CPU offsets")?;
            let size = self.input.u64_at(at + 8, "flyrecord CPU offsets")?;
            at += 16;
            if size > 0 {
                list.push(CpuData { cpu, offset, size });
            }
        }
        let mut clock = None;
        if has_clock {
            // The trace_clock file follows the CPU offsets: u64 size, text.
            if let Ok(n) = self.input.u64_at(at, "trace clock") {
                if n > 0 && n < 4096 {
                    if let Ok(v) = self.input.read_vec(at + 8, n, "trace clock") {
                        clock = parse_clock(&text_of(&v));
                    }
                }
            }
        }
        Ok(Buffer {
            name: name.to_string(),
            kind: BufferKind::Flyrecord,
            clock,
            page_size: self.page_size,
            cpus: list,
            compressed: false,
            offset: pos,
        })
    }

    // ---- data ----

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
            Error::invalid(
                0,
                "buffers",
                format!("no buffer {index} (the file has {})", self.buffers.len()),
            )
        })?;
        let c = *buf.cpus.get(cpu).ok_or_else(|| {
            Error::invalid(
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
            Error::invalid(
                0,
                "buffers",
                format!("no buffer {index} (the file has {})", self.buffers.len()),
            )
        })?;
        if buf.kind == BufferKind::Latency {
            return Err(Error::new(
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
            .ok_or_else(|| Error::invalid(0, "buffers", format!("no buffer {index}")))?;
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

/// The ID a format file's parse would give (its last `ID: ` line before `print fmt: `),
/// without parsing the fields; `None` when it has none or it is not a number.
fn quick_id(text: &str) -> Option<u32> {
    let mut id = None;
    for line in text.lines() {
        if line.starts_with("print fmt: ") {
            break;
        }
        if let Some(v) = line.strip_prefix("ID: ") {
            id = Some(v.trim().parse::<u32>().ok()?);
        }
    }
    id
}

/// The selected clock of a `trace_clock` text: the bracketed name.
fn parse_clock(text: &str) -> Option<String> {
    let t = text.trim();
    if let Some(s) = t.find('[') {
        let e = t[s..].find(']')?;
        return Some(t[s + 1..s + e].to_string());
    }
    t.split_whitespace().next().map(str::to_string)
}

/// C `strtoll(s, NULL, 0)`: decimal, `0x` hex or `0` octal, optional sign.
fn parse_c_int(s: &str) -> Option<i64> {
    let (neg, s) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let v = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()?
    } else if s.len() > 1 && s.starts_with('0') {
        u64::from_str_radix(&s[1..], 8).ok()?
    } else {
        s.parse::<u64>().ok()?
    } as i64;
    Some(if neg { v.wrapping_neg() } else { v })
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
            assert!(lazy.events.is_empty());
            assert_eq!(lazy.unparsed_formats(), all.events.len() + all.format_errors.len());
            let id = all.events.iter().find(|e| e.name == "sched_switch").unwrap().id;
            lazy.parse_formats(|i| i == id);
            assert_eq!(lazy.events.len(), 1);
            assert_eq!(lazy.events[0].name, "sched_switch");
            lazy.parse_formats(|_| true);
            assert_eq!(lazy.unparsed_formats(), 0);
            let mut a: Vec<_> = all.events.iter().map(|e| (e.id, e.name.clone())).collect();
            let mut b: Vec<_> = lazy.events.iter().map(|e| (e.id, e.name.clone())).collect();
            a.sort();
            b.sort();
            assert_eq!(a, b);
        }
    }

    #[test]
    fn quick_id_agrees_with_the_parser() {
        assert_eq!(quick_id("name: x\nID: 12\nformat:\nprint fmt: \"ID: 3\"\n"), Some(12));
        assert_eq!(quick_id("name: x\nID: zz\n"), None);
        assert_eq!(quick_id("name: x\n"), None);
    }
}
