//! The two generic SDT probes through which external tracers (bpftrace's `usdt:`, `perf
//! probe`, `tp record -e 'sdt_tp_tracing:*' -p PID`) see every `tracing` callsite this layer
//! records:
//! - `tp_tracing:callsite(id, full_name, format)`: a callsite's tp event was defined: its
//!   event ID, `tracing:NAME` and its `format` text (NUL-terminated strings);
//! - `tp_tracing:record(id, body, len)`: an event, span event or log record: the event ID and
//!   its record body (the record after its 8 bytes of common fields, laid out as the format
//!   says, offsets less 8).
//!
//! Why two generic probes instead of one per callsite as `trace_event!` sites have: a
//! `tracing` callsite is expanded by `tracing`'s macros in the user's crate, so this crate
//! can place no SDT note (a `nop` and its `.note.stapsdt` entry, fixed at compile time) at
//! it, and the callsite's fields and their types are known only at run time. So the probes
//! carry the callsite's event ID, and the `callsite` probe says which ID is which event.
//!
//! Each probe has a semaphore: while no tracer is attached, a layer that tp does not record
//! for tells `tracing` the callsite is off (`Interest::never`). The semaphores are read when
//! `tracing` asks for interest: attach before the program's callsites are first hit, or have
//! the program call [`crate::rebuild_interest`].

/// The `callsite` probe's semaphore word (its low 16 bits; in `.probes`, as `<sys/sdt.h>`'s).
#[cfg_attr(all(target_arch = "x86_64", target_os = "linux"), unsafe(link_section = ".probes"))]
static CALLSITE_GATE: tp::Gate = tp::Gate::new();
/// The `record` probe's semaphore word.
#[cfg_attr(all(target_arch = "x86_64", target_os = "linux"), unsafe(link_section = ".probes"))]
static RECORD_GATE: tp::Gate = tp::Gate::new();

/// Is a tracer attached to `tp_tracing:record`?
#[inline(always)]
pub fn record_attached() -> bool {
    RECORD_GATE.semaphore() != 0
}

/// Is a tracer attached to either probe?
pub fn any_attached() -> bool {
    record_attached() || CALLSITE_GATE.semaphore() != 0
}

/// Fire `tp_tracing:record` (call only when [`record_attached`]).
#[inline(never)]
#[cold]
pub fn record(id: u16, body: &[u8]) {
    let (ptr, len) = (body.as_ptr(), body.len() as u64);
    fire_record(id, ptr, len);
}

#[inline(never)]
fn fire_record(id: u16, body: *const u8, len: u64) {
    tp::__tp_sdt_probe!(tp_tracing, record, fire_record, RECORD_GATE, id: u16, body: *const u8, len: u64);
}

/// Fire `tp_tracing:callsite` for a newly defined tp event (if a tracer is attached).
pub fn callsite(site: &tp::Site) {
    if CALLSITE_GATE.semaphore() == 0 {
        return;
    }
    let name = std::ffi::CString::new(site.full_name()).unwrap_or_default();
    let format = std::ffi::CString::new(site.format_text()).unwrap_or_default();
    fire_callsite(site.id(), name.as_ptr().cast(), format.as_ptr().cast());
}

#[inline(never)]
fn fire_callsite(id: u16, name: *const u8, format: *const u8) {
    tp::__tp_sdt_probe!(tp_tracing, callsite, fire_callsite, CALLSITE_GATE, id: u16, name: *const u8, format: *const u8);
}
