//! The kernel side of tp: tracefs discovery, private instances, event control and per-CPU
//! capture. Every syscall this crate makes lives in its private `sys` module (tests replace
//! the process table and tracefs writes there, to run without root), and every failure
//! names the call and the path, with errno turned into advice ([`Error`]).
//!
//! # Typical use
//!
//! ```no_run
//! use tp_tracefs::{Tracefs, Instance, CaptureConfig, EventId};
//! # fn main() -> tp_tracefs::Result<()> {
//! let tfs = Tracefs::discover()?;               // finds (or mounts) tracefs
//! tp_tracefs::remove_stale(&tfs)?;              // instances of killed tp runs
//! let inst = Instance::create(&tfs)?;           // instances/tp-<pid>, removed on drop
//! inst.set_tracing_on(false)?;
//! inst.set_buffer_size_kb(8192)?;
//! inst.set_clock("mono")?;
//! let events = tfs.match_all(&["sched", "raw_syscalls:sys_enter"])?;
//! inst.enable_all(&events)?;
//! inst.set_filter(&EventId::new("raw_syscalls", "sys_enter"), "id == 110")?;
//! inst.set_event_pids(&[1234])?;
//! inst.set_event_fork(true)?;
//!
//! // Fidelity-test style: run a workload, read the kernel's text, then the raw pages.
//! inst.set_tracing_on(true)?;
//! /* workload */
//! inst.set_tracing_on(false)?;
//! let text = inst.trace_text()?;                // the kernel's `trace` (non-consuming)
//! for cpu in inst.cpus()? {
//!     let pages: Vec<u8> = inst.drain_cpu(cpu)?; // all raw pages of that CPU, consumed
//! }
//!
//! // Recorder style: one thread per CPU splicing pages into files.
//! let outs = inst.cpus()?.into_iter()
//!     .map(|c| Ok((c, std::fs::File::create(format!("/tmp/cpu{c}"))?)))
//!     .collect::<std::io::Result<Vec<_>>>().unwrap();
//! let cap = inst.capture(outs, &CaptureConfig::default())?;
//! inst.set_tracing_on(true)?;
//! /* ... cap.bytes() for a status line ... */
//! inst.set_tracing_on(false)?;
//! let per_cpu = cap.finish()?;                  // drains the partly filled pages too
//! let stats = inst.all_stats()?;                // overrun/dropped per CPU
//! drop(inst);                                   // events off, rmdir (retries on EBUSY)
//! # Ok(()) }
//! ```
//!
//! The borrow of [`Capture`] and [`RawReader`] on the [`Instance`] ensures readers are
//! closed before the instance is removed. Buffers tp did not create ([`Instance::open`] for
//! `-B NAME`, [`Instance::top`]) are never removed; every setting changed through them is
//! restored on drop instead.
//!
//! Other readers: [`Instance::drain_cpu_to`] (bounded drain into a file, for `tp extract`)
//! and [`Instance::raw_reader`] + [`poll_readers`] (page by page, for live streaming).
//!
//! [`process`] starts a command behind a gate ([`process::GatedChild`]: fork, the child waits
//! on a pipe; set `set_event_pid` to its pid, turn tracing on, then release it, so tracing is
//! on before the command's first instruction) and delivers signals through a self-pipe
//! ([`process::Signals`]).
//!
//! Stale instances: `tp-<pid>[-<n>]` whose process is gone are removed by [`remove_stale`],
//! which tp runs (and reports) at the start of every recording.
//!
//! Metadata for trace.dat: [`Tracefs::header_page_text`], [`Tracefs::header_event_text`],
//! [`Tracefs::event_format_text`], [`Tracefs::ftrace_events`], [`Tracefs::kallsyms`],
//! [`Tracefs::printk_formats`], [`Tracefs::saved_cmdlines`], [`Tracefs::saved_tgids`],
//! [`Tracefs::uname`], [`Instance::clock_text`], [`Instance::all_stats`].

pub mod capture;
pub mod control;
pub mod error;
pub mod events;
pub mod guard;
pub mod instance;
pub mod process;
mod stale;
mod sys;
pub mod tracefs;
pub mod uprobe;

pub use capture::{poll_readers, Capture, CaptureConfig, CpuCapture, RawReader};
pub use error::{Error, Result};
pub use events::{glob_match, match_glob, EventId};
pub use instance::{instance_pid, Instance, INSTANCE_PREFIX};
pub use stale::remove_stale;
pub use tracefs::{parse_trace_clock, CpuStats, Tracefs, Uname, MOUNT_POINTS};
pub use uprobe::{remove_stale_probes, ProbeKind, RunProbes, Uprobe};
