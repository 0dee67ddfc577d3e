//! Errors of the analyses and exporters: each names the recording or the output file.

use std::fmt;
use std::path::PathBuf;

/// What went wrong.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The recording could not be opened or read.
    Open { path: PathBuf, source: std::io::Error },
    /// A trace.dat that does not decode.
    TraceDat { input: String, source: Box<tp_format::tracedat::Error> },
    /// A perf.data that does not decode.
    PerfData { input: String, source: Box<tp_format::perfdata::Error> },
    /// The recording lacks what the analysis needs: `what` says which events and how to
    /// record them.
    Missing { input: String, what: String },
    /// An event whose format lacks a field the analysis reads.
    NoField { event: String, field: String },
    /// An output file could not be written.
    Write { path: PathBuf, source: std::io::Error },
    /// The output an exporter was given could not be written.
    Output(std::io::Error),
}

impl Error {
    pub(crate) fn trace_dat(input: &str, source: tp_format::tracedat::Error) -> Error {
        Error::TraceDat { input: input.to_string(), source: Box::new(source) }
    }

    pub(crate) fn perf_data(input: &str, source: tp_format::perfdata::Error) -> Error {
        Error::PerfData { input: input.to_string(), source: Box::new(source) }
    }
}

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Open { path, .. } => write!(f, "cannot open {}", path.display()),
            Error::TraceDat { input, .. } | Error::PerfData { input, .. } => {
                write!(f, "cannot read {input}")
            }
            Error::Missing { input, what } => write!(f, "{input} has no {what}"),
            Error::NoField { event, field } => write!(f, "{event} has no field {field}"),
            Error::Write { path, .. } => write!(f, "cannot write {}", path.display()),
            Error::Output(_) => write!(f, "writing the output"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Open { source, .. } | Error::Write { source, .. } | Error::Output(source) => {
                Some(source)
            }
            Error::TraceDat { source, .. } => Some(&**source),
            Error::PerfData { source, .. } => Some(&**source),
            _ => None,
        }
    }
}
