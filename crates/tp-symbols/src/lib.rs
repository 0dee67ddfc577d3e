//! Addresses to names, and names to addresses, for Linux binaries and the kernel:
//!
//! - [`Symbols`]: a perf.data file's sample addresses named as `perf script` names them
//!   (`function+offset (file)`, inlined frames, `file:line`), kernel addresses through a
//!   kallsyms, user addresses through the processes' mappings to the mapped ELF files (found
//!   through `/proc/PID/root`, their path or perf's build-id cache, checked by build id),
//!   their symbol tables or separate debug files, and `/tmp/perf-PID.map` for JIT code;
//!   `--call-graph dwarf` stacks unwound by `tp_stack` first. [`walk`] feeds a file's samples
//!   with their named stacks in time order.
//! - [`symtab::SymTab`] and [`kallsyms::Kallsyms`]: one name per address, chosen among
//!   aliases as perf chooses.
//! - [`elf::Binary`]: a binary's functions and the file offset of an address (uprobes are
//!   placed by file offset); [`probe`]: a function's arguments by name (DWARF) and USDT
//!   sites (`.note.stapsdt`) as uprobe fetchargs.
//! - [`demangle()`]: Rust and C++ names.
//!
//! Symbols are read with `object`, DWARF lines and inlined functions with `blazesym`.
//!
//! ```no_run
//! use tp_format::perfdata::PerfData;
//! use tp_symbols::{walk, Options, Symbols};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let data = PerfData::open_file(std::fs::File::open("perf.data")?)?;
//! let mut syms = Symbols::new(&data.attrs, &data.features, Options::default());
//! walk(&data, &mut syms, |_event, _sample| true, |w| {
//!     let names: Vec<String> =
//!         w.frames.iter().map(|f| f.sym.name.as_deref().unwrap_or("[unknown]").to_string()).collect();
//!     println!("{}: {}", w.comm.unwrap_or("?"), names.join(" <- "));
//! })?;
//! # Ok(())
//! # }
//! ```

#![forbid(unsafe_code)]

mod demangle;
pub mod elf;
mod error;
pub mod kallsyms;
pub mod perf;
pub mod probe;
pub mod symtab;
mod walk;

pub use demangle::demangle;
pub use error::{Error, Result};
pub use perf::{Frame, Options, Resolved, Symbols};
pub use walk::{walk, Walked};
