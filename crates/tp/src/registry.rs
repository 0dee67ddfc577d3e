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

/// Every tracepoint of the program: the `trace_event!` ones sorted by `system:name`, then
/// the ones defined at run time ([`crate::dynamic`]) in the order they were defined.
pub fn tracepoints() -> Vec<&'static Site> {
    init();
    let mut v = sorted().to_vec();
    v.extend(dynamic_sites().iter().copied());
    v
}

/// The sites defined at run time ([`crate::dynamic`]), in order of definition.
static DYNAMIC: Mutex<Vec<&'static Site>> = Mutex::new(Vec::new());

fn dynamic_sites() -> MutexGuard<'static, Vec<&'static Site>> {
    DYNAMIC.lock().unwrap_or_else(|e| e.into_inner())
}

/// The enable/disable rules applied so far (`TP_EVENTS`, [`set_events`], [`enable`],
/// [`disable`]), in order, so that a tracepoint defined later at run time gets the state the
/// same rules would have given it. Empty: everything enabled (a site's default).
static RULES: Mutex<Vec<(String, bool)>> = Mutex::new(Vec::new());

fn rules() -> MutexGuard<'static, Vec<(String, bool)>> {
    RULES.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether the rules applied so far enable `system:name` (a glob selects it as it would
/// among the program's tracepoints with it added).
fn rules_enable(system: &str, name: &str) -> bool {
    let rules = rules().clone();
    if rules.is_empty() {
        return true;
    }
    let sites = tracepoints();
    let mut all: Vec<(&str, &str)> = sites.iter().map(|s| (s.system(), s.name())).collect();
    all.push((system, name));
    let mut on = true;
    for (glob, r) in &rules {
        let sel = tp_format::glob::select_events(all.iter(), glob, |&(s, n)| (s, n));
        if sel.iter().any(|&&(s, n)| s == system && n == name) {
            on = *r;
        }
    }
    on
}

/// Whether a tracepoint `system:name` that does not exist yet would be recorded if it were
/// defined now ([`crate::dynamic::define`]): a recording runs (or a sink is attached) and the
/// enable/disable rules applied so far select it. For a run-time tracer's cheap early
/// answer (a `tracing` layer's `register_callsite`); [`on_change`] says when it may change.
pub fn would_take(system: &str, name: &str) -> bool {
    init();
    would_take_any() && rules_enable(system, name)
}

/// Whether anything takes enabled events now: a recording runs or a sink is attached.
pub fn would_take_any() -> bool {
    RECORDING.load(Ordering::SeqCst) || !SINKS.load(Ordering::Acquire).is_null()
}

/// Add a site defined at run time: its ID (after every other), its enabled state from the
/// rules, its state from the recording. `None` when event IDs run out.
pub(crate) fn add_dynamic(make: impl FnOnce(u16) -> &'static Site) -> Option<&'static Site> {
    init();
    let _g = control_lock();
    let n = dynamic_sites().len();
    let id = usize::from(ID_BASE) + sorted().len() + n;
    let id = u16::try_from(id).ok().filter(|&id| id < u16::MAX)?;
    let site = make(id);
    let on = rules_enable(site.system(), site.name());
    site.set_enabled(on);
    dynamic_sites().push(site);
    refresh_site(site);
    Some(site)
}

type ChangeHook = fn();
static HOOKS: Mutex<Vec<ChangeHook>> = Mutex::new(Vec::new());

/// Call `hook` (once per distinct fn) whenever what is recorded may have changed: a recording
/// started or stopped, a sink came or went, or events were enabled or disabled. Called
/// outside tp's locks, so it may call back into tp. A run-time tracer that caches "not
/// recorded" answers uses it to ask again (`tp-tracing` rebuilds `tracing`'s interest cache).
pub fn on_change(hook: fn()) {
    let mut h = HOOKS.lock().unwrap_or_else(|e| e.into_inner());
    if !h.iter().any(|&f| f as usize == hook as usize) {
        h.push(hook);
    }
}

/// Run the [`on_change`] hooks (the caller holds none of tp's locks).
pub(crate) fn notify_change() {
    let hooks: Vec<ChangeHook> = HOOKS.lock().unwrap_or_else(|e| e.into_inner()).clone();
    for h in hooks {
        h();
    }
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
fn matching(sites: &[&'static Site], glob: &str) -> Vec<&'static Site> {
    tp_format::glob::select_events(sites.iter().copied(), glob, |s| (s.system(), s.name()))
}

/// Whether `glob` selects site `s` among `sites`.
fn selects(sites: &[&'static Site], glob: &str, s: &Site) -> bool {
    matching(sites, glob).iter().any(|m| std::ptr::eq(*m, s))
}

fn set_matching(glob: &str, on: bool) -> usize {
    let sites = tracepoints();
    let g = control_lock();
    rules().push((glob.trim().to_string(), on));
    let mut n = 0;
    for s in matching(&sites, glob) {
        s.set_enabled(on);
        refresh_site(s);
        n += 1;
    }
    drop(g);
    notify_change();
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
    let n = apply_events(&tracepoints(), spec);
    notify_change();
    n
}

fn apply_events(sites: &[&'static Site], spec: &str) -> usize {
    let entries: Vec<&str> = spec.split(',').map(str::trim).filter(|e| !e.is_empty()).collect();
    {
        let _g = control_lock();
        let only_negative = entries.iter().all(|e| e.starts_with('-'));
        let mut r = rules();
        r.clear();
        r.push(("*:*".to_string(), only_negative));
        for e in &entries {
            match e.strip_prefix('-') {
                Some(g) => r.push((g.to_string(), false)),
                None => r.push((e.to_string(), true)),
            }
        }
        drop(r);
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
    apply_stacks(&tracepoints(), spec)
}

fn apply_stacks(sites: &[&'static Site], spec: &str) -> usize {
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

/// Set whether a recording runs and refresh every site; the caller runs [`notify_change`]
/// once it holds no lock.
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
    notify_change();
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
