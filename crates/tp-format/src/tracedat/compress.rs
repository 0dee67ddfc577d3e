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
        let bad = |m: String| Error::new(offset, section, ErrorKind::Decompress(m));
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
