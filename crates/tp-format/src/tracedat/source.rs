//! Page sources over a trace.dat file: a plain region of pages, or v7 compressed chunks.

use super::bytes::{Input, MAX_CHUNK};
use super::compress::{Compression, Decoder};
use super::records::{PageSource, ReadPages};
use super::{Error, ErrorKind};
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

/// `Read` over `[pos, end)` of the shared input (clamped to the file's length).
pub(crate) struct Region<R> {
    input: Input<R>,
    pos: u64,
    end: u64,
    what: String,
}

impl<R: Read + Seek> Read for Region<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = (self.end - self.pos).min(buf.len() as u64) as usize;
        if n == 0 {
            return Ok(0);
        }
        self.input
            .read_at(self.pos, &mut buf[..n], &self.what)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        self.pos += n as u64;
        Ok(n)
    }
}

/// Uncompressed per-CPU pages (v6, v7 without compression).
pub(crate) struct RegionPages<R> {
    inner: ReadPages<Region<R>>,
}

impl<R: Read + Seek> RegionPages<R> {
    pub(crate) fn new(
        input: Input<R>,
        c: CpuData,
        page_size: usize,
        what: String,
    ) -> RegionPages<R> {
        let start = c.offset.min(input.len);
        let end = c.offset.saturating_add(c.size).min(input.len);
        let region = Region { input, pos: start, end, what: what.clone() };
        RegionPages {
            inner: ReadPages::with_options(region, page_size, 16, c.offset, Some(c.size), what),
        }
    }
}

impl<R: Read + Seek> PageSource for RegionPages<R> {
    fn advance(&mut self) -> Result<bool, Error> {
        self.inner.advance()
    }
    fn page(&self) -> &[u8] {
        self.inner.page()
    }
    fn offset(&self) -> u64 {
        self.inner.offset()
    }
}

/// v7 compressed per-CPU data: `u32 chunk count`, then per chunk `u32 compressed size,
/// u32 uncompressed size, data`. One chunk is decompressed at a time.
pub(crate) struct ChunkPages<R> {
    input: Input<R>,
    decoder: Decoder,
    page_size: usize,
    what: String,
    /// Next chunk header.
    pos: u64,
    end: u64,
    chunks_left: Option<u32>,
    cbuf: Vec<u8>,
    buf: Vec<u8>,
    cur: usize,
    started: bool,
    chunk_offset: u64,
}

impl<R: Read + Seek> ChunkPages<R> {
    pub(crate) fn new(
        input: Input<R>,
        c: CpuData,
        comp: Compression,
        page_size: usize,
        what: String,
    ) -> ChunkPages<R> {
        ChunkPages {
            input,
            decoder: Decoder::new(comp),
            page_size: page_size.max(1),
            what,
            pos: c.offset,
            // trace-cmd's size counts the chunks, not the 4-byte chunk count before them.
            end: c.offset.saturating_add(c.size).saturating_add(4),
            chunks_left: None,
            cbuf: Vec::new(),
            buf: Vec::new(),
            cur: 0,
            started: false,
            chunk_offset: c.offset,
        }
    }

    fn load_chunk(&mut self) -> Result<bool, Error> {
        if self.chunks_left.is_none() {
            if self.end < self.pos + 4 {
                return Err(Error::tracedat_invalid(
                    self.pos,
                    &self.what,
                    "CPU data too small for a chunk count".into(),
                ));
            }
            self.chunks_left = Some(self.input.u32_at(self.pos, &self.what)?);
            self.pos += 4;
        }
        loop {
            if self.chunks_left == Some(0) {
                return Ok(false);
            }
            let at = self.pos;
            if self.end < at + 8 {
                return Err(Error::tracedat(
                    at,
                    &self.what,
                    ErrorKind::Truncated { need: 8, have: self.end.saturating_sub(at) },
                ));
            }
            let mut hdr = [0u8; 8];
            self.input.read_at(at, &mut hdr, &self.what)?;
            let word = |b: [u8; 4]| {
                if self.input.big_endian {
                    u32::from_be_bytes(b)
                } else {
                    u32::from_le_bytes(b)
                }
            };
            let csize = word([hdr[0], hdr[1], hdr[2], hdr[3]]) as u64;
            let usize_ = word([hdr[4], hdr[5], hdr[6], hdr[7]]) as u64;
            if at + 8 + csize > self.end {
                return Err(Error::tracedat_invalid(
                    at,
                    &self.what,
                    format!("chunk of {csize} bytes runs past the CPU data end {:#x}", self.end),
                ));
            }
            // The CPU data's size is the file's word too: check against the bytes that exist
            // before allocating what a lying size claims.
            if at + 8 + csize > self.input.len {
                return Err(Error::tracedat(
                    at + 8,
                    &self.what,
                    ErrorKind::Truncated {
                        need: csize,
                        have: self.input.len.saturating_sub(at + 8),
                    },
                ));
            }
            if usize_ > MAX_CHUNK {
                return Err(Error::tracedat_invalid(
                    at,
                    &self.what,
                    format!("chunk uncompressed size {usize_} is implausible"),
                ));
            }
            // Grown, never shrunk: no zeroing per chunk.
            let csize_ = csize as usize;
            if self.cbuf.len() < csize_ {
                self.cbuf.resize(csize_, 0);
            }
            let cdata = &mut self.cbuf[..csize_];
            self.input.read_at(at + 8, cdata, &self.what)?;
            self.decoder.decompress(cdata, usize_, at, &self.what, &mut self.buf)?;
            self.pos = at + 8 + csize;
            self.chunks_left = self.chunks_left.map(|n| n - 1);
            self.chunk_offset = at;
            self.cur = 0;
            if self.buf.len() % self.page_size != 0 {
                return Err(Error::tracedat_invalid(
                    at,
                    &self.what,
                    format!(
                        "chunk of {} bytes is not whole pages of {}",
                        self.buf.len(),
                        self.page_size
                    ),
                ));
            }
            if !self.buf.is_empty() {
                return Ok(true);
            }
        }
    }
}

impl<R: Read + Seek> PageSource for ChunkPages<R> {
    fn advance(&mut self) -> Result<bool, Error> {
        if self.started && self.cur + 2 * self.page_size <= self.buf.len() {
            self.cur += self.page_size;
            return Ok(true);
        }
        self.started = true;
        self.buf.clear();
        self.cur = 0;
        self.load_chunk()
    }

    fn page(&self) -> &[u8] {
        &self.buf[self.cur..self.cur + self.page_size]
    }

    fn offset(&self) -> u64 {
        // Compressed: the chunk's offset (pages have no file offset of their own).
        self.chunk_offset
    }
}
