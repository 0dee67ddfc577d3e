//! The registry of every tracepoint in the binary (its dependencies' included), event IDs,
//! enable/disable by glob, and global sinks.

use crate::rcu;
use crate::site::{Event, Site};
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Once, OnceLock};

/// Every `trace_event!` adds its site here (a `linkme` distributed slice: one linker section,
/// bounded by `__start_`/`__stop_` symbols on Linux).
#[linkme::distributed_slice]
pub static TRACEPOINTS: [&'static Site];

/// First event ID given to Rust tracepoints; kernel event IDs stay far below it.
pub const ID_BASE: u16 = tp_format::format::RUST_ID_BASE;

static CONTROL: Mutex<()> = Mutex::new(());
static SORTED: OnceLock<Vec<&'static Site>> = OnceLock::new();
static INIT: Once = Once::new();

pub(crate) fn control_lock() -> MutexGuard<'static, ()> {
    CONTROL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Assign IDs (sorted by `system:name`), apply `TP_EVENTS`, set up the RCU fences.
/// Idempotent; every public entry point calls it.
pub fn init() {
    INIT.call_once(|| {
        rcu::init();
        let mut v: Vec<&'static Site> = TRACEPOINTS.iter().copied().collect();
        v.sort_by(|a, b| (a.system(), a.name()).cmp(&(b.system(), b.name())));
        for (i, s) in v.iter().enumerate() {
            s.set_id(ID_BASE.saturating_add(i as u16));
        }
        let _ = SORTED.set(v);
        if let Ok(spec) = std::env::var("TP_EVENTS") {
            apply_events(sorted(), &spec);
        }
        if let Ok(spec) = std::env::var("TP_STACKS") {
            apply_stacks(sorted(), &spec);
        }
    });
}

/// Every tracepoint of the program, sorted by `system:name`.
pub fn tracepoints() -> &'static [&'static Site] {
    init();
    sorted()
}

fn sorted() -> &'static [&'static Site] {
    SORTED.get().map(|v| v.as_slice()).unwrap_or(&[])
}

/// Find a tracepoint by `system:name`.
pub fn find(full_name: &str) -> Option<&'static Site> {
    tracepoints().iter().copied().find(|s| match full_name.split_once(':') {
        Some((sys, name)) => s.system() == sys && s.name() == name,
        None => s.name() == full_name,
    })
}

/// Shell-style wildcard match (`*`, `?`, `[set]`), the kernel-side selection's matcher too.
/// In a glob for events, a single word selects a system if it matches one, else event names
/// in any system ([`tp_format::glob::select_events`]).
pub use tp_format::glob::glob_match;

/// The sites an event glob selects (its one meaning: [`tp_format::glob::select_events`]).
fn matching(sites: &'static [&'static Site], glob: &str) -> Vec<&'static Site> {
    tp_format::glob::select_events(sites.iter().copied(), glob, |s| (s.system(), s.name()))
}

/// Whether `glob` selects site `s` among `sites`.
fn selects(sites: &'static [&'static Site], glob: &str, s: &Site) -> bool {
    matching(sites, glob).iter().any(|m| std::ptr::eq(*m, s))
}

fn set_matching(glob: &str, on: bool) -> usize {
    let sites = tracepoints();
    let _g = control_lock();
    let mut n = 0;
    for s in matching(sites, glob) {
        s.set_enabled(on);
        refresh_site(s);
        n += 1;
    }
    n
}

/// Enable the tracepoints matching `glob` (`myapp:*`, `*:req_*`, `req_*`) for the recorder
/// and sinks. Returns how many matched.
pub fn enable(glob: &str) -> usize {
    set_matching(glob, true)
}

/// Disable the tracepoints matching `glob`. Returns how many matched.
pub fn disable(glob: &str) -> usize {
    set_matching(glob, false)
}

/// Apply a `TP_EVENTS`-style list: `myapp:*,other:req_*` enables exactly those; an entry
/// starting with `-` disables (`*,-myapp:noisy`). Returns how many tracepoints are enabled.
pub fn set_events(spec: &str) -> usize {
    apply_events(tracepoints(), spec)
}

fn apply_events(sites: &'static [&'static Site], spec: &str) -> usize {
    let entries: Vec<&str> = spec.split(',').map(str::trim).filter(|e| !e.is_empty()).collect();
    {
        let _g = control_lock();
        let only_negative = entries.iter().all(|e| e.starts_with('-'));
        for s in sites {
            s.set_enabled(only_negative);
        }
        for e in &entries {
            let (glob, on) = match e.strip_prefix('-') {
                Some(g) => (g, false),
                None => (*e, true),
            };
            for s in matching(sites, glob) {
                s.set_enabled(on);
            }
        }
        for s in sites {
            refresh_site(s);
        }
    }
    sites.iter().filter(|s| s.is_enabled()).count()
}

/// Record the user stack after each event of the tracepoints matching a `TP_STACKS`-style
/// list (`myapp:*,-myapp:noisy`: an entry with `-` turns them off; later entries win; see
/// [`crate::Site::set_stacks`]); the others keep their setting (`stacks = true;` in
/// `trace_event!`, or an earlier call). Returns how many tracepoints record stacks.
pub fn set_stacks(spec: &str) -> usize {
    apply_stacks(tracepoints(), spec)
}

fn apply_stacks(sites: &'static [&'static Site], spec: &str) -> usize {
    let entries: Vec<&str> = spec.split(',').map(str::trim).filter(|e| !e.is_empty()).collect();
    let _g = control_lock();
    for s in sites {
        let mut on = s.stacks();
        for e in &entries {
            match e.strip_prefix('-') {
                Some(g) if selects(sites, g, s) => on = false,
                None if selects(sites, e, s) => on = true,
                _ => {}
            }
        }
        s.set_stacks_locked(on);
        refresh_site(s);
    }
    sites.iter().filter(|s| s.stacks()).count()
}

// ---- global state that decides each site's `state` ----

static RECORDING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

pub(crate) fn set_recording(on: bool) {
    let sites = tracepoints();
    let _g = control_lock();
    RECORDING.store(on, Ordering::SeqCst);
    for s in sites {
        refresh_site(s);
    }
}

/// Recompute a site's state; the caller holds the control lock.
pub(crate) fn refresh_site(s: &Site) {
    s.update_state(RECORDING.load(Ordering::SeqCst), !SINKS.load(Ordering::Acquire).is_null());
}

type Sink = Arc<dyn Fn(&Event<'_>) + Send + Sync>;
struct SinkList(Vec<(u64, Sink)>);
static SINKS: AtomicPtr<SinkList> = AtomicPtr::new(core::ptr::null_mut());
static NEXT_SINK: AtomicU64 = AtomicU64::new(1);

/// A global sink; dropping or [`SinkHandle::remove`] detaches it.
#[derive(Debug)]
#[must_use = "the sink is removed when the handle is dropped"]
pub struct SinkHandle(u64);

impl SinkHandle {
    pub fn remove(self) {}
}

impl Drop for SinkHandle {
    fn drop(&mut self) {
        update_sinks(|v| v.retain(|(id, _)| *id != self.0));
    }
}

/// Attach a sink that sees every enabled event of every tracepoint as a raw record (the text
/// sink is one). Sinks run in the firing thread, inside a read section.
pub fn add_sink(f: impl Fn(&Event<'_>) + Send + Sync + 'static) -> SinkHandle {
    let id = NEXT_SINK.fetch_add(1, Ordering::Relaxed);
    update_sinks(|v| v.push((id, Arc::new(f))));
    SinkHandle(id)
}

fn update_sinks(f: impl FnOnce(&mut Vec<(u64, Sink)>)) {
    let sites = tracepoints();
    let g = control_lock();
    let old = SINKS.load(Ordering::Acquire);
    // SAFETY: writers hold the control lock; `old` stays live until retired below.
    let mut v = unsafe { old.as_ref() }.map(|l| l.0.clone()).unwrap_or_default();
    f(&mut v);
    let new =
        if v.is_empty() { core::ptr::null_mut() } else { Box::into_raw(Box::new(SinkList(v))) };
    SINKS.store(new, Ordering::Release);
    for s in sites {
        refresh_site(s);
    }
    drop(g);
    if !old.is_null() {
        // SAFETY: from Box::into_raw, now unpublished.
        let b = unsafe { Box::from_raw(old) };
        crate::ctx::retire(Box::new(SendSinks(b)));
    }
}

struct SendSinks(#[allow(dead_code)] Box<SinkList>);
// SAFETY: sinks are Send + Sync closures.
unsafe impl Send for SendSinks {}

/// Run the global sinks (inside the caller's read section).
pub(crate) fn run_sinks(ev: &Event<'_>) {
    // SAFETY: the caller is in a read section, so a list it loads stays live until it leaves.
    if let Some(l) = unsafe { SINKS.load(Ordering::Acquire).as_ref() } {
        for (_, f) in &l.0 {
            f(ev);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn globs() {
        assert!(glob_match("*", "x"));
        assert!(glob_match("req_*", "req_start"));
        assert!(!glob_match("req_*", "xreq_start"));
        assert!(glob_match("a?c", "abc"));
        assert!(glob_match("*b*", "abc"));
        assert!(!glob_match("a", "ab"));
    }
}
