//! Bounded reading of trace.dat: every length is checked against the bytes that exist before
//! anything is allocated, and every error names the file offset and the section.

use super::{Error, ErrorKind};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::sync::{Arc, Mutex};

/// Largest metadata section (or decompressed block) tp accepts: kallsyms of a large kernel
/// with modules is ~20 MB; this leaves room while refusing absurd sizes.
pub(crate) const MAX_SECTION: u64 = 512 << 20;
/// Largest decompressed flyrecord chunk (trace-cmd writes 10 pages).
pub(crate) const MAX_CHUNK: u64 = 64 << 20;

/// Where the bytes come from.
pub(crate) enum Backing<R> {
    /// Any `Read + Seek`, shared under a lock. The reader's position is remembered, so a
    /// read that continues where the last one ended does not seek (a `BufReader` keeps its
    /// buffer).
    Seek(Mutex<SeekState<R>>),
    /// A file, read with positional reads (`pread`): no shared position, no lock, no copy
    /// through a user-space buffer; sources on several threads read it at once.
    File(File),
}

pub(crate) struct SeekState<R> {
    r: R,
    /// The reader's position, when known.
    pos: Option<u64>,
}

/// A shared input with a known length. `Send` and `Sync` when `R` is `Send`, so page
/// sources can run on other threads.
pub(crate) struct Input<R> {
    pub(crate) r: Arc<Backing<R>>,
    pub(crate) len: u64,
    pub(crate) big_endian: bool,
}

impl<R> Clone for Input<R> {
    fn clone(&self) -> Self {
        Input { r: self.r.clone(), len: self.len, big_endian: self.big_endian }
    }
}

impl Input<File> {
    /// A file read with positional reads.
    pub(crate) fn file(f: File) -> Result<Input<File>, Error> {
        let len = f.metadata().map_err(|e| Error::tracedat_io(0, "file length", e))?.len();
        Ok(Input { r: Arc::new(Backing::File(f)), len, big_endian: false })
    }
}

impl<R: Read + Seek> Input<R> {
    pub(crate) fn new(mut r: R) -> Result<Input<R>, Error> {
        let len = r.seek(SeekFrom::End(0)).map_err(|e| Error::tracedat_io(0, "file length", e))?;
        let state = SeekState { r, pos: Some(len) };
        Ok(Input { r: Arc::new(Backing::Seek(Mutex::new(state))), len, big_endian: false })
    }

    /// Read exactly `buf.len()` bytes at `offset`; `what` names the section for errors.
    pub(crate) fn read_at(&self, offset: u64, buf: &mut [u8], what: &str) -> Result<(), Error> {
        let end = offset.checked_add(buf.len() as u64);
        if end.is_none_or(|e| e > self.len) {
            return Err(Error::tracedat(
                offset,
                what,
                ErrorKind::Truncated {
                    need: buf.len() as u64,
                    have: self.len.saturating_sub(offset),
                },
            ));
        }
        match &*self.r {
            Backing::File(f) => {
                use std::os::unix::fs::FileExt;
                f.read_exact_at(buf, offset).map_err(|e| Error::tracedat_io(offset, what, e))
            }
            Backing::Seek(m) => {
                // A panic while holding the lock leaves the position unknown, not wrong.
                let mut st = m.lock().unwrap_or_else(|e| e.into_inner());
                let st = &mut *st;
                if st.pos != Some(offset) {
                    st.pos = None;
                    st.r.seek(SeekFrom::Start(offset))
                        .map_err(|e| Error::tracedat_io(offset, what, e))?;
                }
                st.pos = None;
                st.r.read_exact(buf).map_err(|e| Error::tracedat_io(offset, what, e))?;
                st.pos = end;
                Ok(())
            }
        }
    }

    /// Read `n` bytes at `offset` into a new vector (n checked against the file length).
    pub(crate) fn read_vec(&self, offset: u64, n: u64, what: &str) -> Result<Vec<u8>, Error> {
        if n > MAX_SECTION {
            return Err(Error::tracedat_invalid(
                offset,
                what,
                format!("size {n} is implausibly large"),
            ));
        }
        if offset.checked_add(n).is_none_or(|e| e > self.len) {
            return Err(Error::tracedat(
                offset,
                what,
                ErrorKind::Truncated { need: n, have: self.len.saturating_sub(offset) },
            ));
        }
        let mut v = vec![0; n as usize];
        self.read_at(offset, &mut v, what)?;
        Ok(v)
    }

    pub(crate) fn u16_at(&self, offset: u64, what: &str) -> Result<u16, Error> {
        let mut b = [0; 2];
        self.read_at(offset, &mut b, what)?;
        Ok(if self.big_endian { u16::from_be_bytes(b) } else { u16::from_le_bytes(b) })
    }

    pub(crate) fn u32_at(&self, offset: u64, what: &str) -> Result<u32, Error> {
        let mut b = [0; 4];
        self.read_at(offset, &mut b, what)?;
        Ok(if self.big_endian { u32::from_be_bytes(b) } else { u32::from_le_bytes(b) })
    }

    pub(crate) fn u64_at(&self, offset: u64, what: &str) -> Result<u64, Error> {
        let mut b = [0; 8];
        self.read_at(offset, &mut b, what)?;
        Ok(if self.big_endian { u64::from_be_bytes(b) } else { u64::from_le_bytes(b) })
    }

    /// A NUL-terminated string at `offset` of at most `max` bytes; returns it and the
    /// offset after the NUL.
    pub(crate) fn cstr_at(
        &self,
        offset: u64,
        max: usize,
        what: &str,
    ) -> Result<(String, u64), Error> {
        let avail = self.len.saturating_sub(offset).min(max as u64 + 1) as usize;
        let mut b = vec![0; avail];
        self.read_at(offset, &mut b, what)?;
        match memchr::memchr(0, &b) {
            Some(i) => Ok((String::from_utf8_lossy(&b[..i]).into_owned(), offset + i as u64 + 1)),
            None => {
                Err(Error::tracedat_invalid(offset, what, "string without terminating NUL".into()))
            }
        }
    }
}

/// A reader over an in-memory section (possibly decompressed). `base` is the file offset
/// the section's content starts at, used in error messages (for compressed sections, the
/// offset of the compressed block).
pub(crate) struct Bytes<'a> {
    pub(crate) data: &'a [u8],
    pub(crate) pos: usize,
    pub(crate) base: u64,
    pub(crate) big_endian: bool,
    pub(crate) what: &'a str,
}

impl<'a> Bytes<'a> {
    pub(crate) fn new(data: &'a [u8], base: u64, big_endian: bool, what: &'a str) -> Bytes<'a> {
        Bytes { data, pos: 0, base, big_endian, what }
    }

    pub(crate) fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    pub(crate) fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    pub(crate) fn take(&mut self, n: u64) -> Result<&'a [u8], Error> {
        if n > self.remaining() as u64 {
            return Err(Error::tracedat(
                self.offset(),
                self.what,
                ErrorKind::Truncated { need: n, have: self.remaining() as u64 },
            ));
        }
        let s = &self.data[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(s)
    }

    pub(crate) fn u16(&mut self) -> Result<u16, Error> {
        let b: [u8; 2] = self.take(2)?.try_into().expect("2 bytes");
        Ok(if self.big_endian { u16::from_be_bytes(b) } else { u16::from_le_bytes(b) })
    }

    pub(crate) fn u32(&mut self) -> Result<u32, Error> {
        let b: [u8; 4] = self.take(4)?.try_into().expect("4 bytes");
        Ok(if self.big_endian { u32::from_be_bytes(b) } else { u32::from_le_bytes(b) })
    }

    pub(crate) fn u64(&mut self) -> Result<u64, Error> {
        let b: [u8; 8] = self.take(8)?.try_into().expect("8 bytes");
        Ok(if self.big_endian { u64::from_be_bytes(b) } else { u64::from_le_bytes(b) })
    }

    pub(crate) fn cstr(&mut self) -> Result<String, Error> {
        let rest = &self.data[self.pos..];
        match memchr::memchr(0, rest) {
            Some(i) => {
                let s = String::from_utf8_lossy(&rest[..i]).into_owned();
                self.pos += i + 1;
                Ok(s)
            }
            None => Err(Error::tracedat_invalid(
                self.offset(),
                self.what,
                "string without terminating NUL".into(),
            )),
        }
    }

    /// `size` bytes as text (lossy UTF-8, trailing NULs dropped).
    pub(crate) fn text(&mut self, size: u64) -> Result<String, Error> {
        Ok(text_of(self.take(size)?))
    }
}

pub(crate) fn text_of(b: &[u8]) -> String {
    let end = b.iter().rposition(|&c| c != 0).map_or(0, |i| i + 1);
    // Valid UTF-8 (the usual case) is checked and copied at memory speed; only invalid
    // text takes the slower lossy conversion.
    match std::str::from_utf8(&b[..end]) {
        Ok(s) => s.to_owned(),
        Err(_) => String::from_utf8_lossy(&b[..end]).into_owned(),
    }
}
