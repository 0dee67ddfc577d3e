//! trace-cmd's `trace.dat`, versions 6 and 7: reading, streaming records, writing.
//!
//! Layout facts come from trace-cmd's `trace-cmd.dat.v6(5)` and `trace-cmd.dat.v7(5)` man
//! pages; the code is tp's own.
//!
//! # Reading
//!
//! ```no_run
//! use tp_format::tracedat::{TraceDat, Item};
//! let file = std::fs::File::open("trace.dat")?;
//! let dat = TraceDat::open(std::io::BufReader::new(file))?;
//! // metadata: dat.version(), dat.header_page(), dat.events(), dat.kallsyms(), dat.printk(),
//! // dat.cmdlines(), dat.clock(), dat.uname(), dat.cpustats(), dat.buffers() ...
//! for (i, buf) in dat.buffers().iter().enumerate() {
//!     let mut records = dat.records(i)?;        // all CPUs of this buffer, merged by time
//!     while let Some(item) = records.next() {  // a lending iterator: no allocation per record
//!         match item {
//!             Ok(Item::Event(r)) => { let _ = (r.cpu, r.ts, r.data); }
//!             Ok(Item::Lost(l)) => { let _ = (l.cpu, l.count); }  // `CPU:N [LOST M EVENTS]`
//!             Err(e) => eprintln!("{e}"),      // iteration may continue
//!         }
//!     }
//!     let _ = buf;
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! - [`TraceDat::open`] takes any `Read + Seek`, reads the metadata (formats, kallsyms,
//!   printk formats, cmdlines, options) and the buffer descriptions, not the event data.
//!   Malformed event format files do not fail the open: they are listed in
//!   [`TraceDat::format_errors`]. For a file, [`TraceDat::open_file`] is faster: positional
//!   reads, no shared position, and [`TraceDat::page_source_send`] sources that other
//!   threads can read at once. [`TraceDat::open_file_lazy`] also keeps the event formats
//!   as text until [`TraceDat::parse_formats`] parses the wanted ones.
//! - Compressed chunks are decompressed by one reused context per CPU source, in one call
//!   into a reused buffer.
//! - [`TraceDat::records`] streams one buffer's records. Memory stays bounded: per CPU one
//!   read block (16 pages) or one decompressed chunk (trace-cmd writes 10 pages per chunk).
//! - Timestamps are the ring buffer's raw values in the trace clock's units;
//!   [`TraceDat::adjust_ts`] applies the file's TSC2NSEC and OFFSET/DATE options as
//!   trace-cmd report does.
//!
//! # Raw per-CPU captures
//!
//! The same merger, [`Records`], serves any set of [`PageSource`]s, e.g. files saved from
//! `per_cpu/cpuN/trace_pipe_raw`:
//!
//! ```no_run
//! use tp_format::{page::PageLayout, tracedat::{PageSource, ReadPages, Records}};
//! let cpu0 = std::fs::File::open("cpu0.raw")?;
//! let sources: Vec<(u32, Box<dyn PageSource>)> = vec![(0, Box::new(ReadPages::new(cpu0, 4096)))];
//! let mut records = Records::new(PageLayout::X86_64, sources);
//! while let Some(item) = records.next() { let _ = item?; }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Writing
//!
//! [`Writer`] writes v7 (zstd, zlib or no compression) or v6 files that `trace-cmd report`
//! opens; see its documentation.
//!
//! # Errors
//!
//! Every [`Error`] names the file offset and the section; sizes read from the file are
//! checked against the file length before anything is allocated; nothing panics or loops on
//! malformed input.

pub(crate) mod bytes;
mod compress;
pub mod procmaps;
mod read;
mod records;
mod source;
mod write;

pub use compress::Compression;
pub use procmaps::{LibMap, ProcMaps};
pub use read::{Buffer, BufferKind, TraceDat, Tsc2Nsec};
pub use records::{Item, Lost, PageSource, ReadPages, Record, Records};
pub use source::CpuData;
pub use write::{BufferPages, CpuPages, Metadata, WriteStats, Writer, WriterOptions};

/// The magic at the start of every trace.dat file.
pub const MAGIC: &[u8; 10] = b"\x17\x08\x44tracing";

/// Option IDs (trace-cmd.dat.v7(5)).
pub mod option {
    pub const DONE: u16 = 0;
    pub const DATE: u16 = 1;
    pub const CPUSTAT: u16 = 2;
    pub const BUFFER: u16 = 3;
    pub const TRACECLOCK: u16 = 4;
    pub const UNAME: u16 = 5;
    pub const HOOK: u16 = 6;
    pub const OFFSET: u16 = 7;
    pub const CPUCOUNT: u16 = 8;
    pub const VERSION: u16 = 9;
    pub const PROCMAPS: u16 = 10;
    pub const TRACEID: u16 = 11;
    pub const TIME_SHIFT: u16 = 12;
    pub const GUEST: u16 = 13;
    pub const TSC2NSEC: u16 = 14;
    pub const STRINGS: u16 = 15;
    pub const HEADER_INFO: u16 = 16;
    pub const FTRACE_EVENTS: u16 = 17;
    pub const EVENT_FORMATS: u16 = 18;
    pub const KALLSYMS: u16 = 19;
    pub const PRINTK: u16 = 20;
    pub const CMDLINES: u16 = 21;
    pub const BUFFER_TEXT: u16 = 22;
    pub const BTF_FILE: u16 = 23;
    pub const LAST_BOOT_INFO: u16 = 24;
    pub const MODULES_FILE: u16 = 25;
    /// tp's own option: the `saved_tgids` text (`pid tgid` lines), for `tp report --tgid`.
    /// trace-cmd has no option for it; readers skip an unknown option by its size.
    pub const SAVED_TGIDS: u16 = 0x7470;
}

/// A trace.dat problem: the crate's one file error ([`crate::error`]).
pub use crate::error::{Error, ErrorKind};
