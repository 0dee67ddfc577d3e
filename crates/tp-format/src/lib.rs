//! Kernel trace formats, without I/O of their own: everything here takes byte slices, a
//! `Read`/`Read + Seek` or `Write` the caller opened; nothing opens a file or calls the
//! kernel. One special case, on purpose: `tracedat::TraceDat::open_file` takes a
//! `std::fs::File` the caller opened, to read it with positional reads (`pread`), so that
//! page sources on several threads read one file at once without a shared position or a
//! lock (`tp report` decompresses and counts CPUs in parallel that way); a trait of its own
//! for positional reads would have this one implementor.
//!
//! - [`mod@format`]: `events/SYS/NAME/format` files (fields and print fmt text).
//! - [`header`]: `events/header_page` and `events/header_event`.
//! - [`printfmt`]: the print fmt expression language, compiled once, rendered per record.
//! - [`page`]: ring-buffer pages as the kernel writes them.
//! - [`error`]: the one error of the file readers and writers (which file, where, what).
//! - [`tracedat`]: trace-cmd's `trace.dat` files, versions 6 and 7.
//! - [`perfdata`]: perf's `perf.data` files (tracepoint samples decode with [`tracedat`]'s formats).
//! - [`maps`]: processes' address spaces as a recording describes them.
//! - [`symbols`]: kallsyms, printk formats and saved_cmdlines tables.
//! - [`render`]: whole event lines (context + text), `--raw` field dumps and JSON.
//! - [`text`]: the kernel's `trace` text layout (header block and context columns).
//!
//! A trace.dat's events printed as the kernel's `trace` file prints them:
//!
//! ```no_run
//! use tp_format::render::{Options, Renderer};
//! use tp_format::tracedat::{Item, TraceDat};
//!
//! let mut dat = TraceDat::open_file(std::fs::File::open("trace.dat")?)?;
//! dat.parse_formats(|_| true);
//! let (formats, tables) = dat.take_render_tables();
//! let renderer = Renderer::new(formats, tables, Options::default());
//! let mut line = String::new();
//! let mut records = dat.records(0)?; // buffer 0: the top-level one
//! while let Some(item) = records.next() {
//!     if let Item::Event(r) = item? {
//!         line.clear();
//!         renderer.render_line(r.cpu, r.ts, r.data, &mut line);
//!         print!("{line}");
//!     }
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod error;
pub mod format;
pub mod funcgraph;
pub mod glob;
pub mod header;
pub mod maps;
pub mod page;
pub mod perfdata;
pub mod printfmt;
pub mod render;
pub mod symbols;
pub mod text;
pub mod tracedat;

pub use error::{Error, ErrorKind, FileKind};
pub use format::{EventFormat, Field, FieldKind, FormatError};
