//! Writing trace.dat v7 (zstd, zlib or uncompressed) and v6.
//!
//! ```no_run
//! use tp_format::tracedat::{Compression, CpuPages, Metadata, BufferPages, Writer, WriterOptions};
//! let meta = Metadata::default(); // fill in formats, kallsyms, cmdlines, clock...
//! let cpu0 = std::fs::File::open("cpu0.raw")?; // whole pages from trace_pipe_raw
//! let buffers = vec![BufferPages { name: String::new(), cpus: vec![CpuPages { cpu: 0, pages: Box::new(cpu0) }] }];
//! let mut out = std::fs::File::create("trace.dat")?;
//! let stats = Writer::new(WriterOptions { version: 7, compression: Compression::Zstd, ..Default::default() })
//!     .write(&mut out, &meta, buffers)?;
//! # let _ = stats; Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Pages are copied verbatim (a partial last page is padded with zeros); memory use is one
//! chunk (10 pages) at a time. Name the main buffer `""` (the top-level buffer): trace-cmd
//! report prefixes events of named buffers with the name.

use super::compress::Compression;
use super::read::Tsc2Nsec;
use super::{option, Error, MAGIC};
use crate::header::{HeaderPage, HEADER_EVENT_TEXT};
use std::io::{Read, Seek, SeekFrom, Write};

/// Pages per compressed chunk (as trace-cmd).
const PAGES_PER_CHUNK: usize = 10;

/// What a file says besides the pages. Texts are the tracefs files' contents, verbatim.
#[derive(Debug, Clone)]
pub struct Metadata {
    pub header_page: HeaderPage,
    pub header_event_text: String,
    /// `events/ftrace/*/format` texts.
    pub ftrace_formats: Vec<String>,
    /// Per system: its name and its events' `format` texts.
    pub event_formats: Vec<(String, Vec<String>)>,
    /// `/proc/kallsyms`.
    pub kallsyms: String,
    /// `printk_formats`.
    pub printk: String,
    /// `saved_cmdlines`.
    pub cmdlines: String,
    /// `saved_tgids` (written as tp's own option when not empty).
    pub tgids: String,
    /// Trace clock name, e.g. `mono`.
    pub clock: String,
    /// `uname -a`-like text of the traced machine.
    pub uname: Option<String>,
    /// Per-CPU `stats` texts (`per_cpu/cpuN/stats`), in CPU order.
    pub cpustats: Vec<String>,
    /// CPUs of the machine.
    pub cpu_count: u32,
    /// The writer's version (VERSION option).
    pub tracer_version: String,
    pub tsc2nsec: Option<Tsc2Nsec>,
    /// Mappings of traced processes (a PROCMAPS option each).
    pub procmaps: Vec<super::ProcMaps>,
}

impl Default for Metadata {
    fn default() -> Self {
        Metadata {
            header_page: HeaderPage::X86_64,
            header_event_text: HEADER_EVENT_TEXT.to_string(),
            ftrace_formats: Vec::new(),
            event_formats: Vec::new(),
            kallsyms: String::new(),
            printk: String::new(),
            cmdlines: String::new(),
            tgids: String::new(),
            clock: "local".into(),
            uname: None,
            cpustats: Vec::new(),
            cpu_count: 1,
            tracer_version: concat!("tp ", env!("CARGO_PKG_VERSION")).into(),
            tsc2nsec: None,
            procmaps: Vec::new(),
        }
    }
}

/// One CPU's pages: any `Read` of whole pages (e.g. a file of `trace_pipe_raw` pages).
pub struct CpuPages<'a> {
    pub cpu: u32,
    pub pages: Box<dyn Read + 'a>,
}

/// One buffer's CPUs. `name` is `""` for the top-level buffer.
pub struct BufferPages<'a> {
    pub name: String,
    pub cpus: Vec<CpuPages<'a>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriterOptions {
    /// 6 or 7.
    pub version: u32,
    /// v7 only (v6 is never compressed).
    pub compression: Compression,
    pub page_size: usize,
    pub big_endian: bool,
    /// User space `sizeof(long)`.
    pub long_size: u8,
    /// v7 with compression only: each CPU's `pages` is already the stream of compressed
    /// chunks the format stores (per chunk: u32 compressed size, u32 size, then the data in
    /// `compression`'s codec, of whole pages), copied as it is. tp's in-process recorder
    /// compresses while it records, so its file is assembled without recompressing.
    pub precompressed: bool,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            version: 7,
            compression: Compression::Zstd,
            page_size: 4096,
            big_endian: false,
            long_size: 8,
            precompressed: false,
        }
    }
}

/// What was written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteStats {
    pub bytes: u64,
    /// Pages per (buffer index, cpu).
    pub pages: Vec<(usize, u32, u64)>,
}

/// A trace.dat writer; see the [`tracedat`](crate::tracedat) module documentation.
#[derive(Debug, Clone)]
pub struct Writer {
    opts: WriterOptions,
}

struct Out<'w, W> {
    w: &'w mut W,
    pos: u64,
    be: bool,
}

impl<W: Write + Seek> Out<'_, W> {
    fn bytes(&mut self, b: &[u8]) -> Result<(), Error> {
        self.w.write_all(b).map_err(|e| Error::tracedat_io(self.pos, "writing", e))?;
        self.pos += b.len() as u64;
        Ok(())
    }
    fn u16(&mut self, v: u16) -> Result<(), Error> {
        self.bytes(&if self.be { v.to_be_bytes() } else { v.to_le_bytes() })
    }
    fn u32(&mut self, v: u32) -> Result<(), Error> {
        self.bytes(&if self.be { v.to_be_bytes() } else { v.to_le_bytes() })
    }
    fn u64(&mut self, v: u64) -> Result<(), Error> {
        self.bytes(&if self.be { v.to_be_bytes() } else { v.to_le_bytes() })
    }
    fn cstr(&mut self, s: &str) -> Result<(), Error> {
        self.bytes(s.as_bytes())?;
        self.bytes(&[0])
    }
    fn pad_to(&mut self, align: u64) -> Result<(), Error> {
        let n = (align - self.pos % align) % align;
        self.bytes(&vec![0; n as usize])
    }
    /// Overwrite at `at`, then return to the end.
    fn patch(&mut self, at: u64, b: &[u8]) -> Result<(), Error> {
        let end = self.pos;
        self.w.seek(SeekFrom::Start(at)).map_err(|e| Error::tracedat_io(at, "patching", e))?;
        self.w.write_all(b).map_err(|e| Error::tracedat_io(at, "patching", e))?;
        self.w.seek(SeekFrom::Start(end)).map_err(|e| Error::tracedat_io(end, "patching", e))?;
        Ok(())
    }
    fn patch_u32(&mut self, at: u64, v: u32) -> Result<(), Error> {
        let b = if self.be { v.to_be_bytes() } else { v.to_le_bytes() };
        self.patch(at, &b)
    }
    fn patch_u64(&mut self, at: u64, v: u64) -> Result<(), Error> {
        let b = if self.be { v.to_be_bytes() } else { v.to_le_bytes() };
        self.patch(at, &b)
    }
}

/// Serialise numbers in the file's byte order into a buffer.
struct Buf {
    v: Vec<u8>,
    be: bool,
}

impl Buf {
    fn new(be: bool) -> Buf {
        Buf { v: Vec::new(), be }
    }
    fn u16(&mut self, x: u16) {
        self.v.extend_from_slice(&if self.be { x.to_be_bytes() } else { x.to_le_bytes() });
    }
    fn u32(&mut self, x: u32) {
        self.v.extend_from_slice(&if self.be { x.to_be_bytes() } else { x.to_le_bytes() });
    }
    fn u64(&mut self, x: u64) {
        self.v.extend_from_slice(&if self.be { x.to_be_bytes() } else { x.to_le_bytes() });
    }
    fn cstr(&mut self, s: &str) {
        self.v.extend_from_slice(s.as_bytes());
        self.v.push(0);
    }
    fn bytes(&mut self, b: &[u8]) {
        self.v.extend_from_slice(b);
    }
    fn option(&mut self, id: u16, data: &[u8]) {
        self.u16(id);
        self.u32(data.len() as u32);
        self.bytes(data);
    }
    fn option_str(&mut self, id: u16, s: &str) {
        let mut d = s.as_bytes().to_vec();
        d.push(0);
        self.option(id, &d);
    }
}

impl Writer {
    pub fn new(opts: WriterOptions) -> Writer {
        Writer { opts }
    }

    /// Write a complete file to `out` (positioned at its start).
    pub fn write<W: Write + Seek>(
        &self,
        out: &mut W,
        meta: &Metadata,
        buffers: Vec<BufferPages<'_>>,
    ) -> Result<WriteStats, Error> {
        let o = self.opts;
        if o.version != 6 && o.version != 7 {
            return Err(Error::tracedat(
                0,
                "writer",
                super::ErrorKind::Unsupported(format!("file version {}", o.version)),
            ));
        }
        let mut out = Out { w: out, pos: 0, be: o.big_endian };
        out.bytes(MAGIC)?;
        out.cstr(&o.version.to_string())?;
        out.bytes(&[o.big_endian as u8, o.long_size])?;
        out.u32(o.page_size as u32)?;
        let stats = if o.version == 7 {
            self.write_v7(&mut out, meta, buffers)?
        } else {
            self.write_v6(&mut out, meta, buffers)?
        };
        out.w.flush().map_err(|e| Error::tracedat_io(out.pos, "writing", e))?;
        Ok(WriteStats { bytes: out.pos, ..stats })
    }

    /// trace.dat's leading part alone, as perf stores it in perf.data's `TRACING_DATA`
    /// feature: the initial format with version `0.6`, then v6's inline metadata (headers,
    /// formats, kallsyms, printk formats, saved_cmdlines) and no CPU data.
    pub fn tracing_data(&self, meta: &Metadata) -> Vec<u8> {
        let mut b = Buf::new(self.opts.big_endian);
        b.bytes(MAGIC);
        b.cstr("0.6");
        b.bytes(&[self.opts.big_endian as u8, self.opts.long_size]);
        b.u32(self.opts.page_size as u32);
        b.bytes(&self.header_info(meta));
        b.bytes(&self.ftrace_block(meta));
        b.bytes(&self.formats_block(meta));
        b.bytes(&self.text_block(&meta.kallsyms, 4));
        b.bytes(&self.text_block(&meta.printk, 4));
        b.bytes(&self.text_block(&meta.cmdlines, 8));
        b.v
    }

    // Shared content of metadata blocks (v7 section content == v6 inline layout).

    fn header_info(&self, meta: &Metadata) -> Vec<u8> {
        let mut b = Buf::new(self.opts.big_endian);
        let hp = meta.header_page.to_text();
        b.bytes(b"header_page\0");
        b.u64(hp.len() as u64);
        b.bytes(hp.as_bytes());
        b.bytes(b"header_event\0");
        b.u64(meta.header_event_text.len() as u64);
        b.bytes(meta.header_event_text.as_bytes());
        b.v
    }

    fn ftrace_block(&self, meta: &Metadata) -> Vec<u8> {
        let mut b = Buf::new(self.opts.big_endian);
        b.u32(meta.ftrace_formats.len() as u32);
        for f in &meta.ftrace_formats {
            b.u64(f.len() as u64);
            b.bytes(f.as_bytes());
        }
        b.v
    }

    fn formats_block(&self, meta: &Metadata) -> Vec<u8> {
        let mut b = Buf::new(self.opts.big_endian);
        b.u32(meta.event_formats.len() as u32);
        for (sys, fs) in &meta.event_formats {
            b.cstr(sys);
            b.u32(fs.len() as u32);
            for f in fs {
                b.u64(f.len() as u64);
                b.bytes(f.as_bytes());
            }
        }
        b.v
    }

    fn text_block(&self, text: &str, size_bytes: usize) -> Vec<u8> {
        let mut b = Buf::new(self.opts.big_endian);
        if size_bytes == 4 {
            b.u32(text.len() as u32);
        } else {
            b.u64(text.len() as u64);
        }
        b.bytes(text.as_bytes());
        b.v
    }

    fn common_options(&self, meta: &Metadata, b: &mut Buf) {
        b.option_str(option::TRACECLOCK, &format!("[{}]\n", meta.clock));
        if let Some(u) = &meta.uname {
            b.option_str(option::UNAME, u);
        }
        b.option_str(option::VERSION, &meta.tracer_version);
        for s in &meta.cpustats {
            b.option_str(option::CPUSTAT, s);
        }
        let mut c = Buf::new(self.opts.big_endian);
        c.u32(meta.cpu_count);
        b.option(option::CPUCOUNT, &c.v);
        if !meta.tgids.is_empty() {
            b.option_str(option::SAVED_TGIDS, &meta.tgids);
        }
        if let Some(t) = meta.tsc2nsec {
            let mut c = Buf::new(self.opts.big_endian);
            c.u32(t.mult);
            c.u32(t.shift);
            c.u64(t.offset);
            b.option(option::TSC2NSEC, &c.v);
        }
        for p in &meta.procmaps {
            b.option_str(option::PROCMAPS, &p.to_text());
        }
    }

    // ---- v7 ----

    fn write_v7<W: Write + Seek>(
        &self,
        out: &mut Out<'_, W>,
        meta: &Metadata,
        buffers: Vec<BufferPages<'_>>,
    ) -> Result<WriteStats, Error> {
        let comp = self.opts.compression;
        out.cstr(comp.name())?;
        out.cstr(comp.version())?;
        let first_opt_at = out.pos;
        out.u64(0)?;
        let mut strings = Buf::new(self.opts.big_endian);
        let mut string_id = |s: &str| {
            let id = strings.v.len() as u32;
            strings.cstr(s);
            id
        };
        let mut opts = Buf::new(self.opts.big_endian);
        let blocks: [(u16, &str, Vec<u8>); 6] = [
            (option::HEADER_INFO, "headers", self.header_info(meta)),
            (option::FTRACE_EVENTS, "ftrace events", self.ftrace_block(meta)),
            (option::EVENT_FORMATS, "events format", self.formats_block(meta)),
            (option::KALLSYMS, "kallsyms", self.text_block(&meta.kallsyms, 4)),
            (option::PRINTK, "printk", self.text_block(&meta.printk, 4)),
            (option::CMDLINES, "command lines", self.text_block(&meta.cmdlines, 8)),
        ];
        for (id, desc, content) in blocks {
            let at = out.pos;
            self.section(out, id, string_id(desc), &content, comp)?;
            let mut b = Buf::new(self.opts.big_endian);
            b.u64(at);
            opts.option(id, &b.v);
        }
        self.common_options(meta, &mut opts);

        let mut stats = WriteStats::default();
        let page = self.opts.page_size;
        for (bi, buf) in buffers.into_iter().enumerate() {
            let sec_at = out.pos;
            let compressed = comp != Compression::None;
            out.u16(option::BUFFER)?;
            out.u16(compressed as u16)?;
            out.u32(string_id(&format!("buffer flyrecord {}", buf.name)))?;
            out.u64(0)?;
            let mut cpus = Vec::new();
            let mut chunk = vec![0u8; page * PAGES_PER_CHUNK];
            for mut c in buf.cpus {
                out.pad_to(page as u64)?;
                let start = out.pos;
                let mut pages = 0u64;
                if compressed {
                    let count_at = out.pos;
                    out.u32(0)?;
                    let mut chunks = 0u32;
                    loop {
                        let n = if self.opts.precompressed {
                            match copy_chunk(out, &mut c.pages, page, start)? {
                                Some(n) => n,
                                None => break,
                            }
                        } else {
                            let n = read_pages(&mut c.pages, &mut chunk, page, start)?;
                            if n == 0 {
                                break;
                            }
                            let z = comp
                                .compress(&chunk[..n])
                                .map_err(|e| Error::tracedat_io(out.pos, "compressing", e))?;
                            out.u32(z.len() as u32)?;
                            out.u32(n as u32)?;
                            out.bytes(&z)?;
                            (n / page) as u64
                        };
                        pages += n;
                        chunks += 1;
                    }
                    out.patch_u32(count_at, chunks)?;
                } else {
                    pages += copy_pages(out, &mut c.pages, &mut chunk, page, start)?;
                }
                // Compressed: the size excludes the chunk count (as trace-cmd writes it).
                let size = out.pos - start - if compressed { 4 } else { 0 };
                cpus.push((c.cpu, start, size));
                stats.pages.push((bi, c.cpu, pages));
            }
            out.patch_u64(sec_at + 8, out.pos - sec_at - 16)?;
            let mut b = Buf::new(self.opts.big_endian);
            b.u64(sec_at);
            b.cstr(&buf.name);
            b.cstr(&meta.clock);
            b.u32(page as u32);
            b.u32(cpus.len() as u32);
            for (cpu, off, size) in cpus {
                b.u32(cpu);
                b.u64(off);
                b.u64(size);
            }
            opts.option(option::BUFFER, &b.v);
        }

        // The options section, last but for the strings.
        let opt_at = out.pos;
        opts.u16(option::DONE);
        opts.u32(8);
        opts.u64(0);
        let id = string_id("options");
        self.section(out, option::DONE, id, &opts.v, Compression::None)?;
        out.patch_u64(first_opt_at, opt_at)?;
        let id = string_id("strings");
        let s = std::mem::take(&mut strings.v);
        self.section(out, option::STRINGS, id, &s, Compression::None)?;
        Ok(stats)
    }

    /// A v7 section: header, then `content` (compressed as one block unless `None`).
    fn section<W: Write + Seek>(
        &self,
        out: &mut Out<'_, W>,
        id: u16,
        desc: u32,
        content: &[u8],
        comp: Compression,
    ) -> Result<(), Error> {
        out.u16(id)?;
        if comp == Compression::None {
            out.u16(0)?;
            out.u32(desc)?;
            out.u64(content.len() as u64)?;
            out.bytes(content)
        } else {
            let z = comp
                .compress(content)
                .map_err(|e| Error::tracedat_io(out.pos, "compressing", e))?;
            out.u16(1)?;
            out.u32(desc)?;
            out.u64(z.len() as u64 + 8)?;
            out.u32(z.len() as u32)?;
            out.u32(content.len() as u32)?;
            out.bytes(&z)
        }
    }

    // ---- v6 ----

    fn write_v6<W: Write + Seek>(
        &self,
        out: &mut Out<'_, W>,
        meta: &Metadata,
        buffers: Vec<BufferPages<'_>>,
    ) -> Result<WriteStats, Error> {
        out.bytes(&self.header_info(meta))?;
        out.bytes(&self.ftrace_block(meta))?;
        out.bytes(&self.formats_block(meta))?;
        out.bytes(&self.text_block(&meta.kallsyms, 4))?;
        out.bytes(&self.text_block(&meta.printk, 4))?;
        out.bytes(&self.text_block(&meta.cmdlines, 8))?;
        // v6's first buffer is the top-level one (no name): give named buffers an empty top.
        let mut buffers = buffers;
        let added_top = buffers.first().is_some_and(|b| !b.name.is_empty());
        if added_top {
            buffers.insert(0, BufferPages { name: String::new(), cpus: Vec::new() });
        }
        // v6 lists CPUs 0..n for every buffer.
        let ncpu = buffers
            .iter()
            .flat_map(|b| b.cpus.iter().map(|c| c.cpu + 1))
            .max()
            .unwrap_or(0)
            .max(meta.cpu_count);
        out.u32(ncpu)?;
        out.bytes(b"options  \0")?;
        let mut opts = Buf::new(self.opts.big_endian);
        self.common_options(meta, &mut opts);
        out.bytes(&opts.v)?;
        // BUFFER options for buffers after the first: offset patched later.
        let mut buffer_opt_at = Vec::new();
        for b in buffers.iter().skip(1) {
            let mut d = Buf::new(self.opts.big_endian);
            d.u64(0);
            d.cstr(&b.name);
            out.u16(option::BUFFER)?;
            out.u32(d.v.len() as u32)?;
            buffer_opt_at.push(out.pos);
            out.bytes(&d.v)?;
        }
        out.u16(option::DONE)?;
        // Each buffer's flyrecord header: tag, (offset, size) per CPU, trace clock.
        let clock = format!("[{}]\n", meta.clock);
        let mut tables = Vec::new();
        for (bi, _) in buffers.iter().enumerate() {
            if bi > 0 {
                out.patch_u64(buffer_opt_at[bi - 1], out.pos)?;
            }
            out.bytes(b"flyrecord\0")?;
            tables.push(out.pos);
            for _ in 0..ncpu {
                out.u64(0)?;
                out.u64(0)?;
            }
            out.u64(clock.len() as u64)?;
            out.bytes(clock.as_bytes())?;
        }
        let page = self.opts.page_size;
        let mut stats = WriteStats::default();
        let mut chunk = vec![0u8; page * PAGES_PER_CHUNK];
        for (bi, mut buf) in buffers.into_iter().enumerate() {
            buf.cpus.sort_by_key(|c| c.cpu);
            for mut c in buf.cpus {
                out.pad_to(page as u64)?;
                let start = out.pos;
                let pages = copy_pages(out, &mut c.pages, &mut chunk, page, start)?;
                let size = out.pos - start;
                let slot = tables[bi] + c.cpu as u64 * 16;
                let mut b = Buf::new(self.opts.big_endian);
                b.u64(if size > 0 { start } else { 0 });
                b.u64(size);
                out.patch(slot, &b.v)?;
                stats.pages.push((bi - added_top as usize, c.cpu, pages));
            }
        }
        Ok(stats)
    }
}

/// Copy one compressed chunk (header and data) from `r` to `out`; returns its pages, or
/// `None` at the end of `r`.
fn copy_chunk<W: Write + Seek>(
    out: &mut Out<'_, W>,
    r: &mut dyn Read,
    page: usize,
    start: u64,
) -> Result<Option<u64>, Error> {
    let mut hdr = [0u8; 8];
    let got = read_full(r, &mut hdr, start)?;
    if got == 0 {
        return Ok(None);
    }
    let bad = |m: String| Error::tracedat_invalid(start, "precompressed CPU data", m);
    if got < hdr.len() {
        return Err(bad(format!("chunk header cut short after {got} bytes")));
    }
    let num = |b: [u8; 4]| if out.be { u32::from_be_bytes(b) } else { u32::from_le_bytes(b) };
    let zsize = num(hdr[..4].try_into().expect("4 bytes"));
    let size = num(hdr[4..].try_into().expect("4 bytes")) as usize;
    if size == 0 || size % page != 0 {
        return Err(bad(format!("chunk of {size} bytes is not whole pages")));
    }
    out.bytes(&hdr)?;
    let n = std::io::copy(&mut r.take(zsize as u64), out.w)
        .map_err(|e| Error::tracedat_io(start, "reading CPU chunks", e))?;
    out.pos += n;
    if n != zsize as u64 {
        return Err(bad(format!("chunk of {zsize} bytes cut short after {n}")));
    }
    Ok(Some((size / page) as u64))
}

/// Read until `buf` is full or `r` ends; returns the bytes read.
fn read_full(r: &mut dyn Read, buf: &mut [u8], at: u64) -> Result<usize, Error> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::tracedat_io(at, "reading CPU pages", e)),
        }
    }
    Ok(n)
}

/// Copy one CPU's pages to `out` as they are; returns how many pages.
fn copy_pages<W: Write + Seek>(
    out: &mut Out<'_, W>,
    r: &mut dyn Read,
    chunk: &mut [u8],
    page: usize,
    start: u64,
) -> Result<u64, Error> {
    let mut pages = 0;
    loop {
        let n = read_pages(r, chunk, page, start)?;
        if n == 0 {
            return Ok(pages);
        }
        pages += (n / page) as u64;
        out.bytes(&chunk[..n])?;
    }
}

/// Fill `buf` with whole pages from `r`; returns bytes read (a multiple of `page`; a short
/// last page is padded with zeros).
fn read_pages(r: &mut dyn Read, buf: &mut [u8], page: usize, at: u64) -> Result<usize, Error> {
    let n = read_full(r, buf, at)?;
    let whole = n.div_ceil(page) * page;
    buf[n..whole].fill(0);
    Ok(whole)
}
