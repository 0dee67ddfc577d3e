//! v7: metadata in sections, found through chains of options sections.

use super::options::Pending;
use super::TraceDat;
use crate::tracedat::bytes::{Bytes, MAX_SECTION};
use crate::tracedat::compress::{Compression, Decoder};
use crate::tracedat::{option, Error, ErrorKind};
use std::collections::HashSet;
use std::io::{Read, Seek};

impl<R: Read + Seek> TraceDat<R> {
    pub(super) fn open_v7(&mut self, mut pos: u64, p: &mut Pending) -> Result<(), Error> {
        let (name, next) = self.input.cstr_at(pos, 64, "compression header")?;
        let (cver, next) = self.input.cstr_at(next, 64, "compression header")?;
        self.compression = Compression::from_name(&name).ok_or_else(|| {
            Error::tracedat(
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
                return Err(Error::tracedat_invalid(
                    opt_off,
                    "options",
                    "options sections form a loop".into(),
                ));
            }
            let (data, base) = self.read_section(opt_off, option::DONE)?;
            opt_off = self.parse_options(&data, base, p)?.unwrap_or(0);
        }
        let hp = p.header_info.ok_or_else(|| {
            Error::tracedat_invalid(
                pos,
                "options",
                "no HEADER_INFO option: the file has no page layout".into(),
            )
        })?;
        let be = self.big_endian;
        let (d, base) = self.read_section(hp, option::HEADER_INFO)?;
        self.parse_header_info(&mut Bytes::new(&d, base, be, "header info"))?;
        if let Some(off) = p.ftrace {
            let (d, base) = self.read_section(off, option::FTRACE_EVENTS)?;
            self.parse_ftrace(&mut Bytes::new(&d, base, be, "ftrace event formats"))?;
        }
        if let Some(off) = p.formats {
            let (d, base) = self.read_section(off, option::EVENT_FORMATS)?;
            self.parse_event_formats(&mut Bytes::new(&d, base, be, "event formats"))?;
        }
        if let Some(off) = p.kallsyms {
            let (d, base) = self.read_section(off, option::KALLSYMS)?;
            self.take_kallsyms(d, base)?;
        }
        if let Some(off) = p.printk {
            let (d, base) = self.read_section(off, option::PRINTK)?;
            self.parse_printk(&mut Bytes::new(&d, base, be, "printk formats"))?;
        }
        if let Some(off) = p.cmdlines {
            let (d, base) = self.read_section(off, option::CMDLINES)?;
            self.parse_cmdlines(&mut Bytes::new(&d, base, be, "saved command lines"))?;
        }
        Ok(())
    }

    /// Read a v7 section at `offset` (its header must carry `want`) and return its
    /// (decompressed) content and the file offset of that content.
    pub(super) fn read_section(&self, offset: u64, want: u16) -> Result<(Vec<u8>, u64), Error> {
        let name = section_name(want);
        let id = self.input.u16_at(offset, name)?;
        let flags = self.input.u16_at(offset + 2, name)?;
        let size = self.input.u64_at(offset + 8, name)?;
        if id != want {
            return Err(Error::tracedat_invalid(
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
                return Err(Error::tracedat_invalid(
                    base,
                    name,
                    format!("compressed size {csize} exceeds the section size {size}"),
                ));
            }
            if usize_ > MAX_SECTION {
                return Err(Error::tracedat_invalid(
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
