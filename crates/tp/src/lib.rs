//! Typed static tracepoints for Rust programs, in the kernel's own `TRACE_EVENT` format.
//!
//! # The five parts
//!
//! ```
//! tp::trace_event! {
//!     /// A request finished.                        <- docs
//!     pub myapp:request(                              // 1. system:name
//!         id: u32, path: &str, latency_ns: u64,       // 2. proto + args (typed)
//!     ) {
//!         fields {                                    // 3. the record's fields ...
//!             id: u32,
//!             path: str,                              //    (__data_loc char[] path)
//!             latency_us: u64 = latency_ns / 1000,    // 4. ... and their assignment
//!         }
//!         printk("id=%u path=%s lat=%lluus", id, path, latency_us)   // 5. how it prints
//!     }
//! }
//!
//! // The site carries the format the kernel would publish for it:
//! let text = tracepoint_request().format_text();
//! assert!(text.contains("\tfield:__data_loc char[] path;\toffset:12;\tsize:4;\tsigned:0;\n"));
//! assert!(text.contains("print fmt: \"id=%u path=%s lat=%lluus\", REC->id, __get_str(path), REC->latency_us"));
//!
//! // A typed probe:
//! let h = register_trace_request(|id, path, _ns| assert_eq!((id, path), (1, "/")));
//! trace_request(1, "/", 5_000);
//! unregister_trace_request(h);
//!
//! // Recording (the default sink) into a trace.dat v7 file that `trace-cmd report` reads:
//! let dir = std::env::temp_dir().join(format!("tp-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! let rec = tp::Recorder::start(dir.join("trace.dat")).unwrap();
//! trace_request(2, "/a", 1_000);
//! let stats = rec.stop().unwrap();
//! assert_eq!((stats.events, stats.lost), (1, 0));
//! let back = tp::Recording::open(dir.join("trace.dat")).unwrap();
//! assert_eq!(back.records.len(), 1);
//! # std::fs::remove_dir_all(&dir).unwrap();
//! ```
//!
//! # Pieces
//! - [`trace_event!`] declares tracepoints; each is a [`Site`] in a linker section, listed by
//!   [`tracepoints()`], with its `format` text ([`Site::format_text`]).
//! - Probes: `register_trace_NAME` / `unregister_trace_NAME` (typed), [`Site::register_raw`]
//!   (raw records). Read-copy-update keeps the hot path lock-free (module `rcu`).
//! - USDT: every site is also an SDT probe (`readelf -n` shows it; module [`sdt`]), so
//!   external tracers (`tp record -e 'sdt_SYSTEM:*' -p PID`, `perf probe`, bpftrace's
//!   `usdt:`) trace a running program with no cooperation; [`Site::sdt_attached`] says when.
//! - Control: [`enable`], [`disable`], [`set_events`] by glob, and `TP_EVENTS` in the
//!   environment (read at first use: `TP_EVENTS='myapp:*,other:req_*'`).
//! - User stacks: [`Site::set_stacks`], [`set_stacks`] by glob and `TP_STACKS` (same
//!   syntax): the recorder writes the firing thread's stack (frame pointers, up to 8 return
//!   addresses) after each such event as the kernel's `ftrace:user_stack` record.
//! - Run-time tracepoints: [`dynamic::define`] makes a site from a name and typed fields
//!   known only when the program runs (the `tp-tracing` crate's `tracing` layer makes one
//!   per `tracing` callsite), recorded exactly as `trace_event!` sites are.
//! - Sinks: the [`Recorder`] (per-thread buffers of kernel-format ring-buffer pages,
//!   CLOCK_MONOTONIC timestamps from the TSC, a background thread, one trace.dat v7 file with
//!   one stream per thread; full buffers drop and count) and the [`TextSink`]
//!   (trace_pipe-like lines rendered by `tp_format::printfmt`). [`init_from_env`] starts them from
//!   `TP_RECORD=path` / `TP_TEXT=stderr|path`.
//!
//! # Inside (the modules, each importing only the ones below it)
//! - `site`: the static behind each `trace_event!` and its fast path; it hands an event to
//!   the recorder with one call (`recorder::record_only`: event ID, length, writer).
//! - `recorder`: starts, drains and finishes recordings; attaches a ring to a thread.
//! - `ctx`: the per-thread context (RCU reader, tid, the thread's ring).
//! - `ring`: per-thread rings of kernel-format pages, decoded with `tp_format::page`.
//! - `chunks`: a ring's memory, reserved up front and faulted in 2 MiB chunks as needed.
//! - `spool`: the background thread's side: converts, compresses and writes taken pages.
//! - `record`: the common fields and the bounds-checked writer of one record.
//! - `stack`: user stacks (frame-pointer walk inside the thread's stack bounds, the
//!   `ftrace:user_stack` record and format, the process's maps for the file).
//! - `rcu` (read-copy-update), `clock`, `field`, `printk`: leaves. `registry` (the list of
//!   sites, enable/disable, sinks) and `output` (the trace.dat file) sit beside the hot path.

//!
//! # Costs and limits
//! - Disabled: one relaxed load and a branch per `trace_NAME` call (the word also holds the
//!   SDT semaphore, so a clear semaphore adds nothing).
//! - Enabled with the recorder: 10.3-11.2 ns per three-integer event on this project's AMD
//!   EPYC VM (median of a 10-million-event burst), of which `rdtsc` alone is 9.2-9.7 ns
//!   (its throughput limit) and most of the rest the kernel faulting in buffer memory; no lock, no
//!   shared write, no call and no allocation per event in the common case (see
//!   `examples/overhead.rs` and `bench/tracepoint-overhead.sh`). The producer's state, the
//!   page counters it publishes and the background thread's position sit on separate cache
//!   lines, and the background thread takes pages in batches. Pages hold raw TSC readings;
//!   the background thread converts each page it takes to CLOCK_MONOTONIC ns (with the rate
//!   between its latest calibration points, taken every second) and compresses it.
//! - Such an event takes about 28 bytes of page. The background thread compresses pages with
//!   zstd at level -1 in chunks of 64 pages, as trace.dat v7 stores them (about 6x smaller
//!   for the benchmark event, and the file is assembled by copying the chunks); the level
//!   was chosen with `examples/codec.rs`, see the README. `Compression::None` (or
//!   `TP_COMPRESS=none`) writes pages as they are. A thread that fires faster than that
//!   (about 1 GB/s of pages) leaves pages waiting in its buffer, which grows into memory as
//!   the burst reaches it (the background thread faults it in ahead; up to 512 MiB per
//!   thread, 1 GiB per recording, see [`RecorderBuilder::pages_per_thread`]); past that the
//!   excess is dropped. `bench/recorder-sustained.sh` measures loss at sustained rates,
//!   against LTTng-UST. Dropped events are counted (stats `dropped events:` per stream, and
//!   the kernel's missed-events flags in the page headers). With every core busy firing events,
//!   the background thread gets no CPU and most of a long burst is dropped.
//! - A probe that never returns blocks every later unregister (read-copy-update waits for
//!   it). Events fired from other thread-local destructors after tp's own thread context is
//!   gone are not seen. After `fork`, the child does not record.
//! - `tp record -e 'myapp:*' -- ./myapp` records the program's tracepoints only if it calls
//!   [`init_from_env`] (tp passes `TP_EVENTS` and `TP_RECORD=DIR/user-%p.dat`). tp does not
//!   start itself from an `.init_array` constructor as LTTng-UST does: before `main`, a
//!   failure to start could only be ignored or abort the program, the program could not
//!   pick its own sinks, and every binary linking `tp` would start a recorder thread whenever
//!   the variables are inherited. One call at the top of `main` keeps this explicit.

mod chunks;
pub mod clock;
mod ctx;
pub mod dynamic;
pub mod field;
mod macros;
mod output;
pub mod printk;
mod rcu;
mod read;
mod record;
pub mod recorder;
pub mod registry;
mod ring;

pub mod sdt;
mod site;
mod spool;
mod stack;
pub mod text;

pub use field::CharArray;
pub use read::Recording;
pub use record::Common;
pub use recorder::{RecordError, Recorder, RecorderBuilder, Stats};
pub use registry::{
    add_sink, disable, enable, find, on_change, set_events, set_stacks, tracepoints, would_take,
    would_take_any, SinkHandle,
};
pub use sdt::{Gate, SdtArg};
pub use site::{Event, Meta, ProbeHandle, Site};
pub use text::TextSink;

/// Sinks started by [`init_from_env`]; dropping it stops them (the recording is written).
#[derive(Debug, Default)]
pub struct EnvGuard {
    pub recorder: Option<Recorder>,
    pub text: Option<TextSink>,
}

/// Apply the environment: `TP_EVENTS` (which events), `TP_RECORD=path` (start the recorder;
/// `%p` in the path becomes the process id, so that several processes of one run, e.g. under
/// `tp record -- COMMAND`, write separate files; `TP_COMPRESS=none|zstd|zlib` its file's
/// compression, default zstd; `TP_BUFFER_MB` each thread's buffer at most, see
/// [`RecorderBuilder::pages_per_thread`]),
/// `TP_TEXT=stderr|PATH` (start the text sink). With `TP_LIST_FORMATS=PATH` (`-` for
/// stdout) it writes [`formats_text`] there and exits the process: how a tool lists a
/// program's tracepoints without knowing anything else about it.
pub fn init_from_env() -> Result<EnvGuard, RecordError> {
    registry::init();
    if let Some(p) = std::env::var_os("TP_LIST_FORMATS") {
        let text = formats_text();
        let r = if p == "-" {
            std::io::Write::write_all(&mut std::io::stdout(), text.as_bytes())
        } else {
            std::fs::write(&p, text)
        };
        std::process::exit(if r.is_ok() { 0 } else { 1 });
    }
    let mut g = EnvGuard::default();
    if let Some(p) = std::env::var_os("TP_RECORD") {
        let mut b = Recorder::builder(expand_pid(&p));
        if let Ok(c) = std::env::var("TP_COMPRESS") {
            let c = recorder::Compression::from_name(&c).ok_or(RecordError::BadSetting {
                name: "TP_COMPRESS",
                value: c,
                expected: "none, zstd or zlib",
            })?;
            b = b.compression(c);
        }
        if let Ok(v) = std::env::var("TP_BUFFER_MB") {
            let mb =
                v.parse::<usize>().ok().filter(|&mb| mb > 0).ok_or(RecordError::BadSetting {
                    name: "TP_BUFFER_MB",
                    value: v,
                    expected: "a number of MiB",
                })?;
            b = b.pages_per_thread((mb << 20) / 4096);
        }
        g.recorder = Some(b.start()?);
    }
    match std::env::var("TP_TEXT").as_deref() {
        Ok("stderr") | Ok("1") => g.text = Some(TextSink::stderr()),
        Ok(p) if !p.is_empty() => {
            g.text = Some(TextSink::file(p).map_err(|source| RecordError::Io {
                path: p.into(),
                op: "create",
                source,
            })?)
        }
        _ => {}
    }
    Ok(g)
}

/// `path` with every `%p` replaced by this process's id (nothing else is special).
///
/// ```
/// let p = tp::expand_pid(std::ffi::OsStr::new("/tmp/user-%p.dat"));
/// assert_eq!(p, std::path::PathBuf::from(format!("/tmp/user-{}.dat", std::process::id())));
/// ```
pub fn expand_pid(path: &std::ffi::OsStr) -> std::path::PathBuf {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let b = path.as_bytes();
    if !b.windows(2).any(|w| w == b"%p") {
        return path.into();
    }
    let pid = std::process::id().to_string();
    let mut out = Vec::with_capacity(b.len() + pid.len());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"%p") {
            out.extend_from_slice(pid.as_bytes());
            i += 2;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    std::ffi::OsString::from_vec(out).into()
}

/// Every tracepoint's `format` text, each preceded by a line `system: SYS` and followed by
/// an empty line (the same texts the recorder writes into trace.dat files).
pub fn formats_text() -> String {
    let mut s = String::new();
    for t in tracepoints() {
        s.push_str("system: ");
        s.push_str(t.system());
        s.push('\n');
        s.push_str(&t.format_text());
        s.push('\n');
    }
    s
}

#[doc(hidden)]
pub mod __private {
    pub use crate::field::{print_kind_of, FieldDesc, FieldType, Layout};
    pub use crate::printk::{check as check_printk, Msg};
    pub use crate::record::{Common, RecordWriter};
    pub use crate::registry::TRACEPOINTS;
    pub use crate::sdt::SEMAPHORE;
    pub use crate::site::{record_fast, Emit, Everything, Meta, RecordOnly, TypedProbe};
    pub use crate::site::{RECORD, RECORD_ONLY_GATE};
    pub use crate::stack::frame_pointer;
    pub use core::marker::PhantomData;
    pub use linkme;
    pub use tp_macros::paste;

    /// Tracepoint arguments are passed to every probe, so they must be `Copy`
    /// (pass `&T` for anything bigger).
    #[inline(always)]
    pub fn tracepoint_arguments_must_be_copy<T: Copy>() {}
}
