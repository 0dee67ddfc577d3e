//! Analyses of a recording, from either of the kernel's doors: a trace.dat (tracefs, with
//! the Rust programs' buffers) or a perf.data (perf_event_open).
//!
//! - [`Timeline`]: the recording's events merged in time order, cut to a window, with task
//!   names as the events give them and the losses counted ([`Coverage`]); perf.data's other
//!   samples (with their stacks named by `tp_symbols`) and mappings come through it too.
//! - The analyses, each computed as data and written as text or JSON: [`syscalls`] (strace
//!   -c's summary), [`sched`] (scheduling latency, as perf sched latency and runqlat),
//!   [`faults`] (page faults by task, kind, page, instruction, file and call path).
//!
//! - Exporters ([`export`]): Perfetto's protobuf trace of a recording, the Firefox
//!   Profiler's processed profile of a perf.data's samples; [`folded`]: the samples' stacks
//!   summed as folded lines, a flame graph or perf report's table.
//!
//! Each analysis reads only the fields its question needs and says what the recording
//! could not tell it (lost events in the window, events that were not recorded) instead of
//! guessing. The statistics (`syscalls::Stats`, `sched::Stats`, `faults::Stats`) are pure:
//! they are fed decoded events, so they are tested without root or a trace file.
//!
//! ```no_run
//! use tp_analyze::{syscalls, Select, Timeline};
//!
//! # fn main() -> Result<(), tp_analyze::Error> {
//! let tl = Timeline::open("trace.dat".as_ref())?;
//! let summary = syscalls::analyze(&tl, &Select::default())?;
//! for (nr, call) in &summary.stats.calls {
//!     println!("{} {} calls, {} errors", syscalls::name(*nr), call.calls, call.errors);
//! }
//! let mut text = String::new();
//! syscalls::write_text(&mut text, &summary, &tl, 20);
//! print!("{text}");
//! # Ok(())
//! # }
//! ```

#![forbid(unsafe_code)]

mod error;
pub mod export;
pub mod faults;
pub mod folded;
pub mod sched;
mod select;
pub mod syscalls;
pub mod timeline;

pub use error::{Error, Result};
pub use select::{dur, parse_time, secs, Log2Hist, Select, TimeArg};
pub use timeline::{Coverage, Ev, Event, Progress, Summary, TaskFilter, Timeline};
