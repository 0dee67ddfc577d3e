//! Errors of reading binaries and placing probes: each names the file, the address or the
//! argument it is about.

use std::fmt;
use std::path::PathBuf;

/// What went wrong.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A file could not be read.
    Io { path: PathBuf, source: std::io::Error },
    /// The file is not an ELF file, or not one `object` reads (`reason` says which part).
    Elf { path: PathBuf, reason: String },
    /// An address that no loadable segment of the file holds.
    Unmapped { path: PathBuf, addr: u64 },
    /// The file has no debug information (DWARF) for what was asked.
    NoDebugInfo { path: PathBuf, what: String },
    /// DWARF that could not be read.
    Dwarf { path: PathBuf, source: gimli::Error },
    /// A function argument by name that cannot be fetched where the probe is.
    Argument { name: String, reason: String },
    /// The function at `func` has no argument `name`; `known` are the ones it has.
    NoSuchArgument { func: u64, name: String, known: Vec<String> },
    /// A `.note.stapsdt` section that does not decode.
    SdtNote { path: PathBuf, reason: String },
    /// An SDT argument spec (`-4@%edi`) that a uprobe cannot fetch.
    SdtArgument { spec: String, reason: String },
}

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { path, .. } => write!(f, "reading {}", path.display()),
            Error::Elf { path, reason } => write!(f, "{}: {reason}", path.display()),
            Error::Unmapped { path, addr } => {
                write!(f, "{}: address {addr:#x} is in no loadable segment", path.display())
            }
            Error::NoDebugInfo { path, what } => write!(f, "{}: {what}", path.display()),
            Error::Dwarf { path, .. } => write!(f, "{}: reading its DWARF", path.display()),
            Error::Argument { name, reason } => write!(f, "argument {name:?}: {reason}"),
            Error::NoSuchArgument { func, name, known } => {
                let known = if known.is_empty() { "none".to_string() } else { known.join(", ") };
                write!(
                    f,
                    "the function at {func:#x} has no argument {name:?} (its arguments: {known})"
                )
            }
            Error::SdtNote { path, reason } => {
                write!(f, "{}: .note.stapsdt: {reason}", path.display())
            }
            Error::SdtArgument { spec, reason } => write!(f, "argument {spec:?}: {reason}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            Error::Dwarf { source, .. } => Some(source),
            _ => None,
        }
    }
}
