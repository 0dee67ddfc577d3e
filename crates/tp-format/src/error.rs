//! The one error of the file readers and writers ([`tracedat`](crate::tracedat) and
//! [`perfdata`](crate::perfdata)): which file, where in it (offset and section) and what.

use std::fmt;

use crate::page::PageError;

/// Which kind of file an [`Error`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FileKind {
    /// trace-cmd's `trace.dat`.
    TraceDat,
    /// perf's `perf.data`.
    PerfData,
}

impl fmt::Display for FileKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FileKind::TraceDat => "trace.dat",
            FileKind::PerfData => "perf.data",
        })
    }
}

/// A file problem: which file, where (file offset, section) and what, e.g. `trace.dat
/// offset 0x1000 (options): file truncated: need 8 bytes, only 3 present`.
#[derive(Debug)]
#[non_exhaustive]
pub struct Error {
    pub file: FileKind,
    /// File offset the problem was found at (for trace.dat's compressed sections: of the
    /// block).
    pub offset: u64,
    /// The section or record being read, e.g. `options`, `CPU 1 data`, `SAMPLE record`.
    pub section: String,
    pub kind: ErrorKind,
}

/// What went wrong.
#[derive(Debug)]
#[non_exhaustive]
pub enum ErrorKind {
    Io(std::io::Error),
    /// The file (or a record) ends early: `need` bytes were expected, `have` exist.
    Truncated {
        need: u64,
        have: u64,
    },
    /// Not a file of this kind.
    BadMagic,
    /// A file version, compression or feature tp does not read.
    Unsupported(String),
    /// A value that cannot be right (lying size, bad offset, unknown section id...).
    Invalid(String),
    /// Compressed data that does not decompress.
    Decompress(String),
    /// A malformed ring-buffer page.
    Page {
        cpu: u32,
        error: PageError,
    },
    /// perf.data's TRACING_DATA feature (trace.dat's leading part) did not read.
    TracingData(Box<Error>),
}

impl Error {
    pub(crate) fn new(file: FileKind, offset: u64, section: &str, kind: ErrorKind) -> Error {
        Error { file, offset, section: section.to_string(), kind }
    }
    /// A trace.dat error.
    pub(crate) fn tracedat(offset: u64, section: &str, kind: ErrorKind) -> Error {
        Error::new(FileKind::TraceDat, offset, section, kind)
    }
    /// A trace.dat read that failed (an early end of file is a truncation).
    pub(crate) fn tracedat_io(offset: u64, section: &str, e: std::io::Error) -> Error {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            return Error::tracedat(offset, section, ErrorKind::Truncated { need: 1, have: 0 });
        }
        Error::tracedat(offset, section, ErrorKind::Io(e))
    }
    pub(crate) fn tracedat_invalid(offset: u64, section: &str, msg: String) -> Error {
        Error::tracedat(offset, section, ErrorKind::Invalid(msg))
    }
    /// A perf.data error.
    pub(crate) fn perfdata(offset: u64, section: &str, kind: ErrorKind) -> Error {
        Error::new(FileKind::PerfData, offset, section, kind)
    }
    pub(crate) fn perfdata_invalid(offset: u64, section: &str, msg: String) -> Error {
        Error::perfdata(offset, section, ErrorKind::Invalid(msg))
    }
    pub(crate) fn perfdata_truncated(offset: u64, section: &str, need: u64, have: u64) -> Error {
        Error::perfdata(offset, section, ErrorKind::Truncated { need, have })
    }
    /// A bounded read of trace.dat's reader inside a perf.data file (its TRACING_DATA),
    /// said as perf.data's; what only a trace.dat can have wraps the trace.dat error.
    pub(crate) fn from_tracedat(e: Error) -> Error {
        match e.kind {
            ErrorKind::Io(_) | ErrorKind::Truncated { .. } | ErrorKind::Invalid(_) => {
                Error { file: FileKind::PerfData, ..e }
            }
            _ => Error {
                file: FileKind::PerfData,
                offset: e.offset,
                section: e.section.clone(),
                kind: ErrorKind::TracingData(Box::new(e)),
            },
        }
    }
    /// Whether this error says the file was cut short.
    pub fn is_truncation(&self) -> bool {
        matches!(self.kind, ErrorKind::Truncated { .. })
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} offset {:#x} ({}): ", self.file, self.offset, self.section)?;
        match &self.kind {
            ErrorKind::Io(e) => write!(f, "{e}"),
            ErrorKind::Truncated { need, have } => {
                write!(f, "file truncated: need {need} bytes, only {have} present")
            }
            ErrorKind::BadMagic => write!(f, "not a {} file (bad magic)", self.file),
            ErrorKind::Unsupported(m) => write!(f, "unsupported: {m}"),
            ErrorKind::Invalid(m) => write!(f, "{m}"),
            ErrorKind::Decompress(m) => write!(f, "corrupt compressed data: {m}"),
            ErrorKind::Page { cpu, error } => write!(f, "CPU {cpu}: {error}"),
            ErrorKind::TracingData(e) => write!(f, "tracing data: {e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            // Not the I/O error: the message already ends with it, and a chain printed with
            // `{:#}` would say it twice (`No space left on device (os error 28): No space...`).
            ErrorKind::Io(_) => None,
            ErrorKind::Page { error, .. } => Some(error),
            ErrorKind::TracingData(e) => Some(&**e),
            _ => None,
        }
    }
}
