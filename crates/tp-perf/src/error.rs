//! Errors of the perf side: every failure names the call and the event, and errno is turned
//! into a decision the user can act on (the `perf_event_paranoid` value, the fd limit).

use std::fmt;
use std::io;

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// perf_event_open was refused (EACCES/EPERM). `paranoid` is
    /// `/proc/sys/kernel/perf_event_paranoid` when readable.
    Permission { event: String, paranoid: Option<i32>, system_wide: bool, source: io::Error },
    /// The event does not exist on this machine (ENOENT/EOPNOTSUPP/ENODEV for a hardware or
    /// cache event: no PMU, as in most VMs). Counting tools print `<not supported>`.
    NotSupported { event: String, source: io::Error },
    /// Out of file descriptors (EMFILE): `limit` is RLIMIT_NOFILE's soft limit.
    TooManyFiles { event: String, limit: u64 },
    /// The process to attach to is gone (ESRCH).
    NoSuchProcess { event: String, pid: i32 },
    /// Any other failed call: `call` is the call (`perf_event_open`, `ioctl(ENABLE)`,
    /// `read`, `mmap`), `event` the event it was for.
    Sys { call: &'static str, event: String, source: io::Error },
    /// An event name that does not parse or is unknown; `suggestions` are the nearest names.
    UnknownEvent { name: String, message: String, suggestions: Vec<String> },
    /// `mem:SYMBOL` could not be resolved in the program's ELF file.
    Symbol { symbol: String, message: String },
}

impl Error {
    /// The errno of the underlying call, if any.
    pub fn errno(&self) -> Option<i32> {
        match self {
            Error::Permission { source, .. }
            | Error::NotSupported { source, .. }
            | Error::Sys { source, .. } => source.raw_os_error(),
            Error::TooManyFiles { .. } => Some(libc::EMFILE),
            Error::NoSuchProcess { .. } => Some(libc::ESRCH),
            _ => None,
        }
    }

    /// True for an event the machine lacks (`<not supported>` in counts, not a failure).
    pub fn is_not_supported(&self) -> bool {
        matches!(self, Error::NotSupported { .. })
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Permission { event, paranoid, system_wide, source } => {
                write!(f, "perf_event_open {event}: {source}: ")?;
                match paranoid {
                    Some(p) => write!(f, "kernel.perf_event_paranoid is {p}")?,
                    None => write!(f, "kernel.perf_event_paranoid is unreadable")?,
                }
                let need = match (paranoid, system_wide) {
                    (_, true) => "system-wide or per-CPU counting (-a, -C) needs root or CAP_PERFMON (or perf_event_paranoid <= 0)",
                    (Some(p), false) if *p >= 2 => "counting kernel events (tracepoints, no :u) needs root or CAP_PERFMON (or perf_event_paranoid <= 1); add :u to count user space only",
                    _ => "run as root or with CAP_PERFMON",
                };
                write!(f, "; {need}")
            }
            Error::NotSupported { event, source } => {
                write!(f, "{event}: <not supported> on this machine ({source}: no PMU for it, as in most VMs)")
            }
            Error::TooManyFiles { event, limit } => write!(
                f,
                "perf_event_open {event}: out of file descriptors (limit {limit}, one per event per CPU or thread); raise it with `ulimit -n`"
            ),
            Error::NoSuchProcess { event, pid } => {
                write!(f, "perf_event_open {event}: process {pid} does not exist (any more)")
            }
            Error::Sys { call, event, source } => write!(f, "{call} {event}: {source}"),
            Error::UnknownEvent { name, message, suggestions } => {
                write!(f, "event {name:?}: {message}")?;
                if !suggestions.is_empty() {
                    write!(f, "; did you mean {}?", suggestions.join(", "))?;
                }
                write!(f, " (see `tp list`)")
            }
            Error::Symbol { symbol, message } => write!(f, "mem:{symbol}: {message}"),
        }
    }
}

impl std::error::Error for Error {
    // The io::Error is part of every message already (one line, not a chain that repeats
    // it): no source().
}
