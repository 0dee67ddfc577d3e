//! What can go wrong, each error saying where: the program's line and column for the
//! language, the call and the setting in the way for the kernel.

use crate::ast::Pos;

#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The text does not parse.
    Syntax { pos: Pos, message: String },
    /// It parses but means nothing we can compile (unknown builtin, type mismatch, ...).
    Semantic { pos: Pos, message: String },
    /// An attach point that names nothing on this machine, or a kind this kernel lacks.
    Probe { spec: String, message: String },
    /// The verifier refused a program: its log, and the program's line it points to.
    Verifier {
        probe: String,
        pos: Option<Pos>,
        source_line: Option<String>,
        reason: String,
        log: String,
    },
    /// A system call failed; `hint` says which setting stands in the way, when one does.
    Sys { call: String, source: std::io::Error, hint: Option<String> },
    /// Reading the machine (tracefs, /proc, ELF files) failed.
    Machine(String),
}

impl Error {
    pub(crate) fn syntax(pos: Pos, m: impl Into<String>) -> Error {
        Error::Syntax { pos, message: m.into() }
    }
    pub(crate) fn semantic(pos: Pos, m: impl Into<String>) -> Error {
        Error::Semantic { pos, message: m.into() }
    }
    pub(crate) fn probe(spec: &str, m: impl Into<String>) -> Error {
        Error::Probe { spec: spec.into(), message: m.into() }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Syntax { pos, message } => write!(f, "{pos}: syntax error: {message}"),
            Error::Semantic { pos, message } => write!(f, "{pos}: {message}"),
            Error::Probe { spec, message } => write!(f, "{spec}: {message}"),
            Error::Verifier { probe, pos, source_line, reason, .. } => {
                write!(f, "the kernel's verifier refused the program of {probe}")?;
                if let Some(p) = pos {
                    write!(f, " at line {}", p.line)?;
                }
                if let Some(l) = source_line {
                    write!(f, " (`{}`)", l.trim())?;
                }
                write!(f, ": {reason}")
            }
            Error::Sys { call, source, hint } => {
                write!(f, "{call}: {source}")?;
                if let Some(h) = hint {
                    write!(f, " ({h})")?;
                }
                Ok(())
            }
            Error::Machine(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Sys { source, .. } => Some(source),
            _ => None,
        }
    }
}

pub type Result<T> = std::result::Result<T, Error>;
