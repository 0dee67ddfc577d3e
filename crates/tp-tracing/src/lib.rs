//! A [`tracing_subscriber::Layer`] that records `tracing`'s events and spans (and `log`'s
//! records, through `tracing-log`) with tp's in-process recorder, into the same trace.dat as
//! the program's `trace_event!` tracepoints, and, under `tp record -e 'tracing:*' -- PROG`,
//! on the kernel's timeline.
//!
//! ```no_run
//! use tracing_subscriber::prelude::*;
//! let _rec = tp::init_from_env().unwrap(); // TP_RECORD=path, TP_EVENTS=..., as for tp
//! tracing_subscriber::registry().with(tp_tracing::layer()).init();
//! tp_tracing::init_log().ok(); // `log` records too
//! ```
//!
//! # What is recorded (system `tracing`)
//! - **Events**: one tp event per callsite, named from its target and name with `::` as `__`
//!   (trace-cmd needs C identifiers): `myapp__db__query` for `info!(target: "myapp::db",
//!   name: "query", ...)`, `myapp__L42` for an unnamed event on line 42 of a module
//!   `myapp`, `log__info` for `log` records at INFO. Fields: `level` (1 ERROR to 5 TRACE,
//!   printed as the name), then the callsite's fields, typed: `i64` as `long`, `u64` as
//!   `unsigned long`, `bool`, and `&str` as `__data_loc char[]`; floats, `Debug`, `Display`
//!   (`%`), errors and 128-bit integers as text in a `__data_loc char[]`. The `message` field
//!   prints first: `tp report` shows `myapp::db: query done: level=INFO rows=3 sql="SELECT 1"`.
//!   A callsite's event is defined at its first record, with the types of the values given
//!   there (in Rust they are the same at every record of a callsite); a field that record
//!   left out is a string.
//! - **Spans**: per callsite `TARGET__NAME__new` (`span_id`, `parent_id`, `level` and the
//!   fields given at creation) and `TARGET__NAME__record` (`span_id` and the fields given to
//!   `Span::record`); shared by all spans `span_enter`, `span_exit`, `span_close` (`span_id`)
//!   and `span_follows` (`span_id`, `follows_id`). `tp convert --to perfetto` turns
//!   enter/exit pairs into nested slices on the thread's track.
//! - **`log`**: with [`init_log`] (`tracing_log::LogTracer`), each record is an event of its
//!   level's callsite with `message`, `log_target`, `log_module_path`, `log_file` and
//!   `log_line`.
//!
//! # Cost
//! A callsite tp does not record (no recording, or `TP_EVENTS` leaves it out) and that no
//! external tracer watches is `Interest::never` to `tracing`, and with nothing recorded at
//! all the layer's level hint is `OFF`: it costs what `tracing` without a subscriber costs.
//! When a recording starts or stops or events are enabled, tp calls back
//! ([`tp::on_change`]) and the layer rebuilds `tracing`'s interest cache, so the order of
//! `tp::init_from_env()` and installing the layer does not matter. A recorded event costs
//! a hash lookup of its callsite, the values' encoding into a thread's buffer and tp's
//! record path (see `bench/tracing-overhead.sh`).
//!
//! # External tracers
//! Every recorded callsite is also visible through two generic SDT probes, `tp_tracing:record`
//! and `tp_tracing:callsite` (module [`sdt`], which says why there is not one per callsite).

mod callsite;
mod names;
pub mod sdt;
mod visit;

pub use callsite::SYSTEM;

use callsite::{Callsite, Seen, EVENT_FIRST, NEW_FIRST, RECORD_FIRST};
use std::cell::RefCell;
use std::sync::OnceLock;
use tp::dynamic::Tracepoint;
use tracing_core::span::{Attributes, Id, Record};
use tracing_core::subscriber::{Interest, Subscriber};
use tracing_core::{Event, LevelFilter, Metadata};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;
use visit::{Encode, Types};

/// The layer; see the crate docs.
#[derive(Debug, Clone, Copy)]
pub struct TpLayer {
    shared: &'static Shared,
}

/// The shared span events.
#[derive(Debug)]
struct Shared {
    enter: Option<&'static Tracepoint>,
    exit: Option<&'static Tracepoint>,
    close: Option<&'static Tracepoint>,
    follows: Option<&'static Tracepoint>,
}

/// The layer. Install it with `tracing_subscriber::registry().with(tp_tracing::layer())`.
pub fn layer() -> TpLayer {
    static SHARED: OnceLock<Shared> = OnceLock::new();
    let shared = SHARED.get_or_init(|| Shared {
        enter: callsite::define_shared(callsite::SPAN_ENTER, None),
        exit: callsite::define_shared(callsite::SPAN_EXIT, None),
        close: callsite::define_shared(callsite::SPAN_CLOSE, None),
        follows: callsite::define_shared(callsite::SPAN_FOLLOWS, Some("follows_id")),
    });
    tp::on_change(rebuild_interest);
    TpLayer { shared }
}

/// Send `log` records to `tracing` (and so to this layer): `tracing_log::LogTracer::init()`.
pub fn init_log() -> Result<(), tracing_log::log::SetLoggerError> {
    tracing_log::LogTracer::init()
}

/// Ask every callsite's interest again (`tracing_core::callsite::rebuild_interest_cache`).
/// tp calls it when what it records changes; call it after attaching an external tracer to
/// the [`sdt`] probes of a running program.
pub fn rebuild_interest() {
    tracing_core::callsite::rebuild_interest_cache();
}

thread_local! {
    /// Each thread's record body buffer, reused from event to event.
    static BUF: RefCell<Vec<u8>> = RefCell::new(Vec::with_capacity(256));
}

/// Build a body for `tp` with `fill` and fire it (and the `record` SDT probe if `sdt`).
#[inline]
fn emit(tp: &'static Tracepoint, sdt: bool, fill: impl FnOnce(&mut tp::dynamic::Body<'_, '_>)) {
    let go = |buf: &mut Vec<u8>| {
        let mut body = tp.body(buf);
        fill(&mut body);
        let body = body.finish();
        tp.fire(body);
        if sdt {
            sdt::record(tp.site().id(), body);
        }
    };
    let mut fill = Some(go);
    let _ = BUF.try_with(|b| {
        if let Ok(mut b) = b.try_borrow_mut() {
            (fill.take().expect("once"))(&mut b);
        }
    });
    // Reentered (a field's `Debug` fired an event) or the thread is being torn down.
    if let Some(go) = fill {
        go(&mut Vec::new());
    }
}

/// Fire a shared span event with `ids`.
#[inline]
fn emit_ids(tp: Option<&'static Tracepoint>, ids: &[u64]) {
    let Some(tp) = tp else { return };
    let sdt = sdt::record_attached();
    if !tp.is_active() && !sdt {
        return;
    }
    emit(tp, sdt, |b| {
        for (i, &id) in ids.iter().enumerate() {
            b.put_u64(i, id);
        }
    });
}

fn types_of(record: impl FnOnce(&mut Types)) -> Vec<Option<Seen>> {
    let mut t = Types::default();
    record(&mut t);
    t.0
}

impl TpLayer {
    fn interest(cs: &Callsite) -> Interest {
        if cs.wanted() {
            Interest::always()
        } else {
            Interest::never()
        }
    }
}

impl<S> Layer<S> for TpLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        Self::interest(callsite::get(meta))
    }

    fn enabled(&self, meta: &Metadata<'_>, _: Context<'_, S>) -> bool {
        callsite::wanted(meta)
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        if tp::would_take_any() || sdt::any_attached() {
            None
        } else {
            Some(LevelFilter::OFF)
        }
    }

    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let meta = event.metadata();
        let cs = callsite::get(meta);
        let Some(tp) = cs.main(|| types_of(|t| event.record(t))) else { return };
        let sdt = sdt::record_attached();
        if !tp.is_active() && !sdt {
            return;
        }
        emit(tp, sdt, |b| {
            b.put_u64(0, u64::from(names::level_value(meta.level())));
            event.record(&mut Encode { body: b, first: EVENT_FIRST });
        });
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let meta = attrs.metadata();
        let cs = callsite::get(meta);
        let Some(tp) = cs.main(|| types_of(|t| attrs.record(t))) else { return };
        let sdt = sdt::record_attached();
        if !tp.is_active() && !sdt {
            return;
        }
        let parent = ctx.span(id).and_then(|s| s.parent()).map_or(0, |p| p.id().into_u64());
        emit(tp, sdt, |b| {
            b.put_u64(0, id.into_u64());
            b.put_u64(1, parent);
            b.put_u64(2, u64::from(names::level_value(meta.level())));
            attrs.record(&mut Encode { body: b, first: NEW_FIRST });
        });
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(meta) = ctx.metadata(id) else { return };
        let cs = callsite::get(meta);
        let Some(tp) = cs.record(|| types_of(|t| values.record(t))) else { return };
        let sdt = sdt::record_attached();
        if !tp.is_active() && !sdt {
            return;
        }
        emit(tp, sdt, |b| {
            b.put_u64(0, id.into_u64());
            values.record(&mut Encode { body: b, first: RECORD_FIRST });
        });
    }

    fn on_follows_from(&self, span: &Id, follows: &Id, _: Context<'_, S>) {
        emit_ids(self.shared.follows, &[span.into_u64(), follows.into_u64()]);
    }

    fn on_enter(&self, id: &Id, _: Context<'_, S>) {
        emit_ids(self.shared.enter, &[id.into_u64()]);
    }

    fn on_exit(&self, id: &Id, _: Context<'_, S>) {
        emit_ids(self.shared.exit, &[id.into_u64()]);
    }

    fn on_close(&self, id: Id, _: Context<'_, S>) {
        emit_ids(self.shared.close, &[id.into_u64()]);
    }
}
