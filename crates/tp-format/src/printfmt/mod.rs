//! The print fmt expression language: parsed and compiled once per event, rendered per record.
//!
//! Public API (used by the report, the recorder and the Rust tracepoints):
//! - [`Compiled::compile`]: `EventFormat` -> compiled program (error names the event and
//!   the position in the print fmt).
//! - [`Compiled::render`]: record bytes + [`RenderCtx`] -> text appended to a `String`,
//!   exactly as the kernel's `trace` file prints the part after `name: `.

use crate::format::EventFormat;
use crate::symbols::{Kallsyms, PrintkFormats};

/// What rendering needs besides the record.
#[derive(Debug, Clone, Copy)]
pub struct RenderCtx<'a> {
    pub kallsyms: &'a Kallsyms,
    pub printk: &'a PrintkFormats,
    pub big_endian: bool,
    /// sizeof(long) of the traced kernel (8 on x86_64).
    pub long_size: usize,
}

/// A compiled print fmt (placeholder until the compiler lands).
#[derive(Debug, Clone)]
pub struct Compiled {
    _private: (),
}

/// A print fmt that could not be parsed or compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PrintFmtError {
    /// `system:name`.
    pub event: String,
    /// Byte offset in the print fmt text.
    pub pos: usize,
    pub message: String,
}

impl std::fmt::Display for PrintFmtError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: print fmt at byte {}: {}", self.event, self.pos, self.message)
    }
}

impl std::error::Error for PrintFmtError {}

impl Compiled {
    pub fn compile(event: &EventFormat) -> Result<Compiled, PrintFmtError> {
        Err(PrintFmtError {
            event: format!("{}:{}", event.system, event.name),
            pos: 0,
            message: "print fmt compiler not implemented yet".into(),
        })
    }

    pub fn render(&self, _record: &[u8], _ctx: &RenderCtx<'_>, _out: &mut String) {}
}
