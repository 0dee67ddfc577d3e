//! Options: v7's options sections and v6's options block share one layout
//! (`u16 id, u32 size, data`); v7 ends a section with DONE and the next section's offset.

use super::{Buffer, BufferKind, CpuData, TraceDat, Tsc2Nsec};
use crate::tracedat::bytes::{text_of, Bytes};
use crate::tracedat::compress::Compression;
use crate::tracedat::{option, Error};
use std::io::{Read, Seek};

/// What options say that is read after them: section offsets (v7), v6 buffers, the clock.
#[derive(Default)]
pub(super) struct Pending {
    pub(super) header_info: Option<u64>,
    pub(super) ftrace: Option<u64>,
    pub(super) formats: Option<u64>,
    pub(super) kallsyms: Option<u64>,
    pub(super) printk: Option<u64>,
    pub(super) cmdlines: Option<u64>,
    /// v6 BUFFER options: name, offset.
    pub(super) v6_buffers: Vec<(String, u64)>,
    pub(super) trace_clock_text: Option<String>,
}

impl<R: Read + Seek> TraceDat<R> {
    /// Parse options from `data`; returns the next options section offset (v7 DONE).
    pub(super) fn parse_options(
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
                option::PROCMAPS => {
                    if let Some(p) = super::super::ProcMaps::parse(&text_of(d)) {
                        self.procmaps.push(p);
                    }
                }
                option::HOOK | option::STRINGS | option::GUEST => {}
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
            return Err(Error::tracedat_invalid(
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
            return Err(Error::tracedat_invalid(
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
                return Err(Error::tracedat_invalid(
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
}

/// The selected clock of a `trace_clock` text: the bracketed name.
pub(super) fn parse_clock(text: &str) -> Option<String> {
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
