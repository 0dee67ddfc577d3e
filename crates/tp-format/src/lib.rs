//! Kernel trace formats, without I/O: everything here takes byte slices or `Read`.
//!
//! - [`format`]: `events/SYS/NAME/format` files (fields and print fmt text).
//! - [`header`]: `events/header_page` and `events/header_event`.
//! - [`printfmt`]: the print fmt expression language, compiled once, rendered per record.
//! - [`page`]: ring-buffer pages as the kernel writes them.
//! - [`tracedat`]: trace-cmd's `trace.dat` files, versions 6 and 7.
//! - [`perfdata`]: perf's `perf.data` files (tracepoint samples decode with [`tracedat`]'s formats).
//! - [`symbols`]: kallsyms, printk formats and saved_cmdlines tables.
//! - [`render`]: whole event lines (context + text), `--raw` field dumps and JSON.
//! - [`text`]: the kernel's `trace` text layout (header block and context columns).

pub mod format;
pub mod funcgraph;
pub mod glob;
pub mod header;
pub mod page;
pub mod perfdata;
pub mod printfmt;
pub mod render;
pub mod symbols;
pub mod text;
pub mod tracedat;

pub use format::{EventFormat, Field, FieldKind, FormatError};
