//! v6: the metadata inline, in fixed order after the initial format, then options and the
//! `flyrecord` / `latency` blocks. Nothing says how long a block is, so [`Walk`] steps over
//! its sized records to find the end, then reads it whole for the shared parsers.

use super::options::Pending;
use super::{parse_clock, Buffer, BufferKind, CpuData, TraceDat};
use crate::tracedat::bytes::{text_of, Bytes, Input};
use crate::tracedat::{option, Error, ErrorKind};
use std::io::{Read, Seek};

/// A walk over a block of v6 inline metadata starting at `start`: every length read is
/// checked against the file before the walk moves on.
struct Walk<'a, R> {
    input: &'a Input<R>,
    start: u64,
    pos: u64,
    what: &'static str,
}

impl<'a, R: Read + Seek> Walk<'a, R> {
    fn new(input: &'a Input<R>, start: u64, what: &'static str) -> Walk<'a, R> {
        Walk { input, start, pos: start, what }
    }

    fn u16(&mut self) -> Result<u16, Error> {
        let v = self.input.u16_at(self.pos, self.what)?;
        self.pos += 2;
        Ok(v)
    }

    fn u32(&mut self) -> Result<u32, Error> {
        let v = self.input.u32_at(self.pos, self.what)?;
        self.pos += 4;
        Ok(v)
    }

    fn cstr(&mut self) -> Result<(), Error> {
        let (_, next) = self.input.cstr_at(self.pos, 4096, self.what)?;
        self.pos = next;
        Ok(())
    }

    /// Step over a fixed tag, which must be there.
    fn tag(&mut self, tag: &[u8], name: &str) -> Result<(), Error> {
        let t = self.input.read_vec(self.pos, tag.len() as u64, self.what)?;
        if t != tag {
            return Err(Error::tracedat_invalid(self.pos, self.what, format!("expected {name:?}")));
        }
        self.pos += tag.len() as u64;
        Ok(())
    }

    /// Step over one sized record: a length of `len_bytes` bytes (4 or 8), then the data.
    fn record(&mut self, len_bytes: u64) -> Result<(), Error> {
        let n = if len_bytes == 4 {
            self.input.u32_at(self.pos, self.what)? as u64
        } else {
            self.input.u64_at(self.pos, self.what)?
        };
        self.pos = self.pos.saturating_add(len_bytes).saturating_add(n);
        if self.pos > self.input.len {
            return Err(Error::tracedat(
                self.start,
                self.what,
                ErrorKind::Truncated {
                    need: self.pos - self.start,
                    have: self.input.len.saturating_sub(self.start),
                },
            ));
        }
        Ok(())
    }

    /// `count` sized records.
    fn records(&mut self, count: u32, len_bytes: u64) -> Result<(), Error> {
        for _ in 0..count {
            self.record(len_bytes)?;
        }
        Ok(())
    }

    /// Options up to and including DONE: (`u16` id, `u32` size, data)*.
    fn options(&mut self) -> Result<(), Error> {
        while self.u16()? != option::DONE {
            self.record(4)?;
        }
        Ok(())
    }

    /// The walked block, read whole, and its file offset.
    fn read(&self) -> Result<(Vec<u8>, u64), Error> {
        Ok((self.input.read_vec(self.start, self.pos - self.start, self.what)?, self.start))
    }
}

impl<R: Read + Seek> TraceDat<R> {
    /// Walk the block of `what` at `*pos` with `steps`, read it whole and move `*pos` past
    /// it; returns the block and its file offset.
    fn walk(
        &self,
        pos: &mut u64,
        what: &'static str,
        steps: impl FnOnce(&mut Walk<'_, R>) -> Result<(), Error>,
    ) -> Result<(Vec<u8>, u64), Error> {
        let mut w = Walk::new(&self.input, *pos, what);
        steps(&mut w)?;
        let block = w.read()?;
        *pos = w.pos;
        Ok(block)
    }

    pub(super) fn open_v6(&mut self, mut pos: u64, p: &mut Pending) -> Result<(), Error> {
        let be = self.big_endian;
        let (d, base) = self.walk(&mut pos, "header info", |w| {
            w.tag(b"header_page\0", "header_page")?;
            w.record(8)?;
            w.tag(b"header_event\0", "header_event")?;
            w.record(8)
        })?;
        self.parse_header_info(&mut Bytes::new(&d, base, be, "header info"))?;
        // ftrace formats: count, then (u64 size, text)*.
        let (d, base) = self.walk(&mut pos, "ftrace event formats", |w| {
            let n = w.u32()?;
            w.records(n, 8)
        })?;
        self.parse_ftrace(&mut Bytes::new(&d, base, be, "ftrace event formats"))?;
        // event formats: systems, then (name, count, (u64 size, text)*)*.
        let (d, base) = self.walk(&mut pos, "event formats", |w| {
            for _ in 0..w.u32()? {
                w.cstr()?;
                let n = w.u32()?;
                w.records(n, 8)?;
            }
            Ok(())
        })?;
        self.parse_event_formats(&mut Bytes::new(&d, base, be, "event formats"))?;
        let (d, base) = self.walk(&mut pos, "kallsyms", |w| w.record(4))?;
        self.take_kallsyms(d, base)?;
        let (d, base) = self.walk(&mut pos, "printk formats", |w| w.record(4))?;
        self.parse_printk(&mut Bytes::new(&d, base, be, "printk formats"))?;
        let (d, base) = self.walk(&mut pos, "saved command lines", |w| w.record(8))?;
        self.parse_cmdlines(&mut Bytes::new(&d, base, be, "saved command lines"))?;

        let cpus = self.input.u32_at(pos, "CPU count")?;
        pos += 4;
        if cpus as u64 > self.input.len / 16 {
            return Err(Error::tracedat_invalid(
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
            let (d, base) = self.walk(&mut pos, "options", |w| w.options())?;
            self.parse_options(&d, base, p)?;
        }
        let top = self.v6_buffer(pos, "", cpus, p.trace_clock_text.is_some())?;
        self.buffers.push(top);
        for (name, off) in std::mem::take(&mut p.v6_buffers) {
            let mut tag = [0u8; 10];
            self.input.read_at(off, &mut tag, "buffer")?;
            let mut at = off;
            if tag.starts_with(b"options") {
                // Per-buffer options (CPUSTAT...): skip them.
                let mut w = Walk::new(&self.input, off + 10, "buffer options");
                w.options()?;
                at = w.pos;
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
            return Err(Error::tracedat_invalid(
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
}
