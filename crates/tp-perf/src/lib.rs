//! The perf_event_open side of tp (the kernel's second door, beside tracefs in
//! `tp-tracefs`): event names as perf spells them ([`events`]), counters with scaling and
//! groups ([`counter`]), per-CPU mmap ring buffers yielding raw record bytes ([`ring`]).
//! Every system call is in one private `sys` module; each failure is an [`Error`] that names
//! the call and the event, with errno turned into a decision (the `perf_event_paranoid`
//! value for a refusal, `<not supported>` for a hardware event without a PMU, the fd limit).
//!
//! ```no_run
//! use tp_perf::{counter::{CounterSet, CounterOptions, Target}, events};
//! # fn main() -> tp_perf::Result<()> {
//! let specs = vec![events::parse("major-faults")?, events::parse("cycles")?];
//! let evs = events::resolve(&specs, &mut events::MachineLookups::new(None, None))?;
//! let o = CounterOptions { inherit: true, enable_on_exec: true, ..Default::default() };
//! let set = CounterSet::open(&evs, &[Target::Thread(1234)], &o)?;
//! // ... the task execs and runs ...
//! for (ev, r) in set.events.iter().zip(set.read()?) {
//!     match r {
//!         Some(r) => println!("{} {}", r.scaled(), ev.event.name),
//!         None => println!("<not supported> {}", ev.event.name),
//!     }
//! }
//! # Ok(()) }
//! ```

pub mod counter;
pub mod elf;
pub mod error;
pub mod events;
pub mod ring;
mod sys;

pub use counter::{Counter, CounterOptions, CounterSet, Reading, Sampling, Stacks, Target};
pub use error::{Error, Result};
pub use events::{Event, EventSpec};
pub use ring::{Ring, RingStats};
pub use sys::{max_stack, paranoid};
