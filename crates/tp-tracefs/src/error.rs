//! Errors of the kernel side: every failure names the call and the path, and errno is turned
//! into a decision the user can act on.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong talking to the kernel.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A system call failed. `call` is the call (`open`, `write`, `mkdir`, `splice`, ...),
    /// `path` the file it was about.
    Sys { call: &'static str, path: PathBuf, source: io::Error },
    /// The caller may not do this: EACCES/EPERM.
    NotRoot { call: &'static str, path: PathBuf, source: io::Error },
    /// tracefs is not mounted where it was looked for (and mounting it failed or was refused).
    NotMounted { path: PathBuf, detail: String },
    /// No event matches a glob the user gave.
    NoSuchEvent { glob: String },
    /// The kernel rejected a filter; `message` is what its `error_log` said.
    Filter { event: String, filter: String, message: String },
    /// The kernel rejected an event trigger (`stacktrace if ...`); `message` is what its
    /// `error_log` said.
    Trigger { event: String, trigger: String, message: String },
    /// The kernel rejected a probe definition; `message` is its `error_log` entry (with the
    /// caret under the offending word).
    Probe { definition: String, message: String },
    /// A tracefs file did not parse (e.g. a `format` file).
    Parse { path: PathBuf, message: String },
    /// An instance could not be removed (still busy after retries).
    Busy { path: PathBuf },
    /// Text bound for a tracefs control file that does not fit its grammar (a newline in a
    /// probe argument would be a second definition): see [`crate::control`].
    BadText { what: &'static str, text: String, found: String, rule: &'static str },
    /// Any other failure with a message.
    Other(String),
}

impl Error {
    /// Build the error for a failed call on `path`, classifying errno.
    pub fn sys(call: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Error {
        let path = path.into();
        match source.raw_os_error() {
            Some(libc::EACCES) | Some(libc::EPERM) => Error::NotRoot { call, path, source },
            _ => Error::Sys { call, path, source },
        }
    }

    /// The errno of the underlying call, if any.
    pub fn errno(&self) -> Option<i32> {
        match self {
            Error::Sys { source, .. } | Error::NotRoot { source, .. } => source.raw_os_error(),
            _ => None,
        }
    }

    /// True when the failure was "no such file or directory".
    pub fn is_not_found(&self) -> bool {
        self.errno() == Some(libc::ENOENT)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Sys { call, path, source } => {
                write!(f, "{call} {}: {source}", path.display())?;
                if source.raw_os_error() == Some(libc::ENOENT) && is_tracefs_path(path) {
                    write!(f, " (is tracefs mounted? the kernel may lack this event or file)")?;
                }
                Ok(())
            }
            Error::NotRoot { call, path, source } => {
                write!(
                    f,
                    "{call} {}: {source}: run as root (tracefs needs CAP_SYS_ADMIN, or a tracefs mounted with gid= of a group this user is in)",
                    path.display()
                )
            }
            Error::NotMounted { path, detail } => {
                write!(f, "tracefs not mounted at {}: {detail}", path.display())
            }
            Error::NoSuchEvent { glob } => {
                write!(f, "no event matches {glob:?} (see `tp list`)")
            }
            Error::Filter { event, filter, message } => {
                write!(f, "the kernel rejected filter {filter:?} for {event}")?;
                if !message.is_empty() {
                    write!(f, ":\n{message}")?;
                }
                Ok(())
            }
            Error::Trigger { event, trigger, message } => {
                write!(f, "the kernel rejected trigger {trigger:?} for {event}")?;
                if !message.is_empty() {
                    write!(f, ":\n{message}")?;
                }
                Ok(())
            }
            Error::Probe { definition, message } => {
                write!(f, "the kernel rejected the probe {definition:?}:\n{message}")
            }
            Error::Parse { path, message } => write!(f, "{}: {message}", path.display()),
            Error::Busy { path } => {
                write!(
                    f,
                    "rmdir {}: still busy (a reader is open or events are enabled)",
                    path.display()
                )
            }
            Error::BadText { what, text, found, rule } => {
                write!(f, "{what} {text:?}: refused {found} ({rule})")
            }
            Error::Other(m) => f.write_str(m),
        }
    }
}

fn is_tracefs_path(p: &std::path::Path) -> bool {
    let s = p.to_string_lossy();
    s.contains("/tracing")
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        // The io::Error's text is already part of Display; not chaining it avoids printing
        // it twice in `{:#}` reports.
        None
    }
}
