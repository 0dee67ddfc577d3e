//! Compression of v7 sections and chunks: trace-cmd's "zstd" (zstd frames) and "zlib"
//! (zlib streams, RFC 1950), or "none".

use super::{Error, ErrorKind};
use std::io::Read;

/// A v7 file's compression algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Zstd,
    Zlib,
}

impl Compression {
    /// From the name in the file header.
    pub fn from_name(name: &str) -> Option<Compression> {
        match name {
            "none" | "" => Some(Compression::None),
            "zstd" => Some(Compression::Zstd),
            "zlib" => Some(Compression::Zlib),
            _ => None,
        }
    }

    /// The name written in the file header.
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Zstd => "zstd",
            Compression::Zlib => "zlib",
        }
    }

    /// The version string written after the name.
    pub fn version(self) -> &'static str {
        match self {
            Compression::None => "",
            Compression::Zstd => "1.5.4",
            Compression::Zlib => "1.2.13",
        }
    }

    /// Decompress `data`, which should give exactly `size` bytes. The output buffer grows
    /// with the data actually produced (never sized by `size` alone beyond a small cap).
    pub(crate) fn decompress(
        self,
        data: &[u8],
        size: u64,
        offset: u64,
        section: &str,
        out: &mut Vec<u8>,
    ) -> Result<(), Error> {
        out.clear();
        out.reserve(size.min(1 << 20) as usize);
        let bad = |m: String| Error::tracedat(offset, section, ErrorKind::Decompress(m));
        let res = match self {
            Compression::None => {
                out.extend_from_slice(data);
                Ok(())
            }
            Compression::Zstd => match zstd::stream::read::Decoder::with_buffer(data) {
                Ok(d) => d.take(size + 1).read_to_end(out).map(|_| ()),
                Err(e) => Err(e),
            },
            Compression::Zlib => {
                flate2::read::ZlibDecoder::new(data).take(size + 1).read_to_end(out).map(|_| ())
            }
        };
        res.map_err(|e| bad(e.to_string()))?;
        if out.len() as u64 != size {
            return Err(bad(format!("expected {size} bytes, got {}", out.len())));
        }
        Ok(())
    }

    pub(crate) fn compress(self, data: &[u8]) -> std::io::Result<Vec<u8>> {
        match self {
            Compression::None => Ok(data.to_vec()),
            Compression::Zstd => zstd::bulk::compress(data, 3),
            Compression::Zlib => {
                use std::io::Write;
                let mut e =
                    flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
                e.write_all(data)?;
                e.finish()
            }
        }
    }
}

/// Largest block decompressed in one call into a buffer of its stated size; larger (stated)
/// sizes stream into a buffer that grows with the data actually produced, so a lying size
/// never sizes an allocation beyond this.
const ONE_SHOT_MAX: u64 = 16 << 20;

/// A decompressor for many blocks (one per CPU source): one zstd or zlib context, kept and
/// reused, and one call per block straight into the caller's buffer.
pub(crate) struct Decoder {
    comp: Compression,
    zstd: Option<zstd::bulk::Decompressor<'static>>,
    zlib: Option<flate2::Decompress>,
}

impl Decoder {
    pub(crate) fn new(comp: Compression) -> Decoder {
        Decoder { comp, zstd: None, zlib: None }
    }

    /// Decompress `data`, which should give exactly `size` bytes, into `out` (replacing its
    /// contents; its capacity is reused).
    pub(crate) fn decompress(
        &mut self,
        data: &[u8],
        size: u64,
        offset: u64,
        section: &str,
        out: &mut Vec<u8>,
    ) -> Result<(), Error> {
        if size > ONE_SHOT_MAX || self.comp == Compression::None {
            return self.comp.decompress(data, size, offset, section, out);
        }
        let bad = |m: String| Error::tracedat(offset, section, ErrorKind::Decompress(m));
        out.clear();
        // One byte more than stated: a block that gives more is caught by the length check
        // rather than as an unhelpful "destination too small".
        out.reserve(size as usize + 1);
        match self.comp {
            Compression::Zstd => {
                if self.zstd.is_none() {
                    let d = zstd::bulk::Decompressor::new().map_err(|e| bad(e.to_string()))?;
                    self.zstd = Some(d);
                }
                let d = self.zstd.as_mut().expect("just set");
                d.decompress_to_buffer(data, out).map_err(|e| bad(e.to_string()))?;
            }
            Compression::Zlib => {
                let d = self.zlib.get_or_insert_with(|| flate2::Decompress::new(true));
                d.reset(true);
                let status = d
                    .decompress_vec(data, out, flate2::FlushDecompress::Finish)
                    .map_err(|e| bad(e.to_string()))?;
                if status != flate2::Status::StreamEnd && (out.len() as u64) < size {
                    return Err(bad(format!(
                        "stream ends early: expected {size} bytes, got {}",
                        out.len()
                    )));
                }
            }
            Compression::None => unreachable!("handled above"),
        }
        if out.len() as u64 != size {
            return Err(bad(format!("expected {size} bytes, got {}", out.len())));
        }
        Ok(())
    }
}
