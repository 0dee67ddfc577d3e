//! Tracepoint sites: the static behind each `trace_event!`, its probes, and the hot path.

use crate::ctx::{self, ReadGuard, ThreadCtx};
use crate::field::FieldDesc;
use crate::record::{self, Common, RecordWriter};
use crate::sdt::Gate;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use tp_format::format::{Field, FieldKind};
use tp_format::EventFormat;

/// `state` bit: at least one typed or raw probe is registered on this site.
pub(crate) const PROBES: u8 = 1;
/// `state` bit: enabled and the in-process recorder is running.
pub const RECORD: u8 = 2;
/// `state` bit: enabled and at least one global sink is attached.
pub(crate) const SINKS: u8 = 4;
/// `state` bit: recording, with the user stack after each event ([`Site::set_stacks`]). Not
/// `RECORD` alone, so such a site leaves the recorder-only fast path for [`Everything`].
pub(crate) const STACK: u8 = 8;

/// What `trace_event!` knows about an event at compile time.
#[derive(Debug)]
pub struct Meta {
    pub system: &'static str,
    pub name: &'static str,
    /// The event's doc comments, joined by newlines.
    pub docs: &'static str,
    pub fields: &'static [FieldDesc],
    /// The printk format string, without quotes.
    pub printk_fmt: &'static str,
    /// The fields the printk arguments name, in order.
    pub printk_args: &'static [&'static str],
    /// Size of the fixed part of the record (common fields included).
    pub fixed_size: usize,
    /// Record the user stack after each event unless changed at run time (`stacks = true;`).
    pub stacks: bool,
    pub file: &'static str,
    pub line: u32,
}

/// One event as a raw probe or sink sees it.
#[derive(Debug, Clone, Copy)]
pub struct Event<'a> {
    pub site: &'static Site,
    /// The record, common fields first, laid out as [`Site::format`] says.
    pub record: &'a [u8],
    /// CLOCK_MONOTONIC nanoseconds.
    pub timestamp: u64,
}

impl Event<'_> {
    pub fn pid(&self) -> i32 {
        i32::from_ne_bytes(self.record[4..8].try_into().unwrap_or([0; 4]))
    }
}

/// A typed probe erased to "call me with a pointer to the site's argument tuple".
#[derive(Clone)]
pub struct TypedProbe(Arc<dyn Fn(*const ()) + Send + Sync>);

impl TypedProbe {
    /// # Safety
    /// `f` must read its argument only as a pointer to the argument tuple of the site it is
    /// registered on (the code `trace_event!` generates does exactly that).
    pub unsafe fn new(f: impl Fn(*const ()) + Send + Sync + 'static) -> TypedProbe {
        TypedProbe(Arc::new(f))
    }
}

/// A probe over raw records.
pub type RawProbe = Arc<dyn Fn(&Event<'_>) + Send + Sync>;

#[derive(Clone)]
enum ProbeFn {
    Typed(TypedProbe),
    Raw(RawProbe),
}

#[derive(Clone)]
struct Entry {
    id: u64,
    f: ProbeFn,
}

#[derive(Default)]
struct ProbeArray {
    entries: Vec<Entry>,
    n_raw: usize,
}

/// A registered probe; pass it to `unregister_trace_NAME` (or [`Site::unregister`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[must_use = "keep the handle to unregister the probe"]
pub struct ProbeHandle {
    site: *const Site,
    id: u64,
}
// SAFETY: the pointer is only compared, never dereferenced.
unsafe impl Send for ProbeHandle {}
// SAFETY: as above.
unsafe impl Sync for ProbeHandle {}

static NEXT_PROBE_ID: AtomicU64 = AtomicU64::new(1);

/// A tracepoint: a static site in the `tp` linker section holding its name, state and probes.
pub struct Site {
    /// Nonzero when anything listens: the only thing the disabled path reads (its own
    /// static, in `.probes`: its low half is the site's SDT semaphore, see [`crate::sdt`]).
    gate: &'static Gate,
    id: AtomicU16,
    /// Enabled by [`crate::enable`] / `TP_EVENTS` (for the recorder and sinks).
    enabled: AtomicBool,
    /// Record the user stack after each event (see [`crate::stack`]).
    stacks: AtomicBool,
    probes: AtomicPtr<ProbeArray>,
    meta: &'static Meta,
    format: OnceLock<EventFormat>,
}

impl std::fmt::Debug for Site {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Site({}:{} id={})", self.meta.system, self.meta.name, self.id())
    }
}

impl Site {
    #[doc(hidden)]
    pub const fn new(meta: &'static Meta, gate: &'static Gate) -> Site {
        Site {
            gate,
            id: AtomicU16::new(0),
            enabled: AtomicBool::new(true),
            stacks: AtomicBool::new(meta.stacks),
            probes: AtomicPtr::new(core::ptr::null_mut()),
            meta,
            format: OnceLock::new(),
        }
    }

    /// The in-process state: which of probes, recorder and sinks listen.
    #[inline(always)]
    pub fn state(&self) -> u8 {
        Gate::state_of(self.gate.load())
    }

    /// True when a probe, the recorder or a sink will see the next event.
    pub fn is_active(&self) -> bool {
        self.state() != 0
    }

    /// Number of external tracers' uprobes on the site's SDT probe point (its semaphore,
    /// which the kernel maintains): nonzero while e.g. `tp record -e sdt_SYSTEM:NAME` traces
    /// this process.
    pub fn sdt_attached(&self) -> u16 {
        self.gate.semaphore()
    }

    pub fn system(&self) -> &'static str {
        self.meta.system
    }

    pub fn name(&self) -> &'static str {
        self.meta.name
    }

    /// `system:name`.
    pub fn full_name(&self) -> String {
        format!("{}:{}", self.meta.system, self.meta.name)
    }

    pub fn docs(&self) -> &'static str {
        self.meta.docs
    }

    pub fn meta(&self) -> &'static Meta {
        self.meta
    }

    /// The event ID (`common_type`), unique in this process.
    pub fn id(&self) -> u16 {
        crate::registry::init();
        self.id.load(Ordering::Relaxed)
    }

    pub(crate) fn set_id(&self, id: u16) {
        self.id.store(id, Ordering::Relaxed);
    }

    /// Whether the recorder and sinks take this event (see [`crate::enable`]).
    pub fn is_enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    pub(crate) fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Ordering::Relaxed);
    }

    /// Whether the recorder writes the user stack after each of this site's events.
    pub fn stacks(&self) -> bool {
        self.stacks.load(Ordering::Relaxed)
    }

    /// Record the firing thread's user stack (frame pointers, up to 8 return addresses)
    /// right after each event of this site, as an `ftrace:user_stack` record; see also
    /// [`crate::set_stacks`] and `TP_STACKS`. A site with stacks takes the probes' path
    /// instead of the recorder's fast path; the others are unaffected.
    pub fn set_stacks(&'static self, on: bool) {
        crate::registry::init();
        let _g = crate::registry::control_lock();
        self.set_stacks_locked(on);
        crate::registry::refresh_site(self);
    }

    pub(crate) fn set_stacks_locked(&self, on: bool) {
        self.stacks.store(on, Ordering::Relaxed);
    }

    /// The event's layout and print fmt, as the kernel's `events/SYS/NAME/format` file has
    /// them. [`EventFormat::to_format_text`] gives the text.
    pub fn format(&self) -> &EventFormat {
        self.format.get_or_init(|| build_format(self))
    }

    /// The `format` file text.
    pub fn format_text(&self) -> String {
        self.format().to_format_text()
    }

    /// A site defined at run time ([`crate::dynamic`]): `meta` and `gate` leaked for it, its
    /// ID given, its format made with `print_fmt`.
    pub(crate) fn new_dynamic(
        meta: &'static Meta,
        gate: &'static Gate,
        id: u16,
        print_fmt: impl FnOnce(&Site) -> String,
    ) -> Site {
        let site = Site::new(meta, gate);
        site.set_id(id);
        let fmt = format_with_print(&site, print_fmt(&site));
        let _ = site.format.set(fmt);
        site
    }

    /// Fire the site with a prebuilt record body (the record after its 8 bytes of common
    /// fields, laid out as [`Site::format`] says): what the code of a `trace_event!` site does
    /// with its arguments, for sites defined at run time. Typed probes are not run (such a
    /// site has none).
    #[inline]
    pub(crate) fn fire_body(&'static self, body: &[u8]) {
        let state = self.state();
        if state == 0 {
            return;
        }
        let len = std::mem::size_of::<Common>() + body.len();
        let write = move |w: &mut RecordWriter, c: Common| {
            w.fixed(c);
            w.bytes(std::mem::size_of::<Common>(), body);
        };
        if state == RECORD {
            RecordOnly(self).emit(len, write);
        } else {
            let fp = crate::stack::frame_pointer().unwrap_or(0);
            Everything { site: self, state, args: core::ptr::null(), fp }.emit(len, write);
        }
    }

    /// Recompute `state` (caller holds the control lock).
    pub(crate) fn update_state(&self, recording: bool, sinks: bool) {
        let mut s = 0;
        // SAFETY: the control lock serializes writers; the array is only freed after
        // being unpublished under that lock.
        let p = unsafe { self.probes.load(Ordering::Acquire).as_ref() };
        if p.is_some_and(|p| !p.entries.is_empty()) {
            s |= PROBES;
        }
        if self.is_enabled() && recording {
            s |= RECORD;
            if self.stacks() {
                s |= STACK;
            }
        }
        if self.is_enabled() && sinks {
            s |= SINKS;
        }
        self.gate.set_state(s);
    }

    fn add(&'static self, f: ProbeFn) -> ProbeHandle {
        let _g = crate::registry::control_lock();
        crate::registry::init();
        let id = NEXT_PROBE_ID.fetch_add(1, Ordering::Relaxed);
        let old = self.probes.load(Ordering::Acquire);
        // SAFETY: writers hold the control lock; `old` is live until we retire it.
        let mut new = unsafe { old.as_ref() }
            .map(|a| ProbeArray { entries: a.entries.clone(), n_raw: a.n_raw })
            .unwrap_or_default();
        if matches!(f, ProbeFn::Raw(_)) {
            new.n_raw += 1;
        }
        new.entries.push(Entry { id, f });
        self.probes.store(Box::into_raw(Box::new(new)), Ordering::Release);
        crate::registry::refresh_site(self);
        drop(_g);
        retire_array(old);
        ProbeHandle { site: self, id }
    }

    /// Register a typed probe.
    ///
    /// # Safety
    /// See [`TypedProbe::new`]: the probe must have been made for this site's arguments.
    #[doc(hidden)]
    pub unsafe fn register_typed(&'static self, p: TypedProbe) -> ProbeHandle {
        self.add(ProbeFn::Typed(p))
    }

    /// Register a probe that sees every event of this site as a raw record (for sinks).
    /// Runs whether or not the event is enabled for the recorder.
    pub fn register_raw(
        &'static self,
        probe: impl Fn(&Event<'_>) + Send + Sync + 'static,
    ) -> ProbeHandle {
        self.add(ProbeFn::Raw(Arc::new(probe)))
    }

    /// Unregister a probe. Returns false when `h` is not registered on this site. When this
    /// returns, no thread is still running the probe (unless it is called from inside a
    /// probe of this thread, where the probe's memory is freed later).
    pub fn unregister(&'static self, h: ProbeHandle) -> bool {
        if !std::ptr::eq(h.site, self) {
            return false;
        }
        let g = crate::registry::control_lock();
        let old = self.probes.load(Ordering::Acquire);
        // SAFETY: writers hold the control lock; `old` is live until we retire it.
        let Some(cur) = (unsafe { old.as_ref() }) else { return false };
        let Some(pos) = cur.entries.iter().position(|e| e.id == h.id) else { return false };
        let mut entries = cur.entries.clone();
        let removed = entries.remove(pos);
        let n_raw = cur.n_raw - matches!(removed.f, ProbeFn::Raw(_)) as usize;
        let new = if entries.is_empty() {
            core::ptr::null_mut()
        } else {
            Box::into_raw(Box::new(ProbeArray { entries, n_raw }))
        };
        self.probes.store(new, Ordering::Release);
        crate::registry::refresh_site(self);
        drop(g);
        retire_array(old);
        true
    }

    /// Number of probes registered on this site.
    pub fn probe_count(&self) -> usize {
        let _g = crate::registry::control_lock();
        // SAFETY: the control lock keeps the array alive.
        unsafe { self.probes.load(Ordering::Acquire).as_ref() }.map_or(0, |a| a.entries.len())
    }
}

fn retire_array(p: *mut ProbeArray) {
    if p.is_null() {
        return;
    }
    // SAFETY: `p` came from Box::into_raw and was unpublished; retire frees it after every
    // reader that could have loaded it is done.
    let b = unsafe { Box::from_raw(p) };
    ctx::retire(Box::new(SendBox(b)));
}

struct SendBox(#[allow(dead_code)] Box<ProbeArray>);
// SAFETY: the closures inside are Send + Sync.
unsafe impl Send for SendBox {}

fn build_format(site: &Site) -> EventFormat {
    crate::registry::init(); // the ID
    let m = site.meta;
    let mut print_fmt = format!("\"{}\"", m.printk_fmt);
    for a in m.printk_args {
        let f = m.fields.iter().find(|f| f.name == *a).expect("checked at compile time");
        print_fmt.push_str(", ");
        print_fmt.push_str(&f.print_arg());
    }
    format_with_print(site, print_fmt)
}

/// The site's format (its meta's fields after the common ones) with this `print fmt` text.
pub(crate) fn format_with_print(site: &Site, print_fmt: String) -> EventFormat {
    let m = site.meta;
    let common = [
        ("unsigned short common_type", "common_type", "unsigned short", 0, 2, false),
        ("unsigned char common_flags", "common_flags", "unsigned char", 2, 1, false),
        (
            "unsigned char common_preempt_count",
            "common_preempt_count",
            "unsigned char",
            3,
            1,
            false,
        ),
        ("int common_pid", "common_pid", "int", 4, 4, true),
    ];
    let common_fields = common
        .iter()
        .map(|&(decl, name, ty, offset, size, signed)| Field {
            name: name.into(),
            type_name: ty.into(),
            declaration: decl.into(),
            offset,
            size,
            signed,
            kind: FieldKind::Scalar,
        })
        .collect();
    let fields = m
        .fields
        .iter()
        .map(|f| {
            use crate::field::Layout;
            let kind = match f.layout {
                Layout::Scalar => FieldKind::Scalar,
                Layout::Array { len } | Layout::CharArray { len } => FieldKind::Array { len },
                Layout::DynStr | Layout::DynBytes => FieldKind::DataLoc,
            };
            Field {
                name: f.name.into(),
                type_name: f.c_type.into(),
                declaration: f.declaration(),
                offset: f.offset,
                size: f.size,
                signed: f.signed,
                kind,
            }
        })
        .collect();
    EventFormat {
        system: m.system.into(),
        name: m.name.into(),
        id: site.id.load(Ordering::Relaxed) as u32,
        common_fields,
        fields,
        print_fmt,
    }
}

/// Where a fired event goes: `trace_event!` builds the record writer once and hands it to
/// one of the two paths below (the recorder only, or everything), chosen before the
/// arguments are put anywhere.
pub trait Emit {
    /// `write(w, common)` writes the `len`-byte record.
    fn emit<W: Fn(&mut RecordWriter, Common)>(self, len: usize, write: W);
}

/// The common case, the recorder alone: a straight-line path of its own, with no argument
/// tuple in memory.
pub struct RecordOnly(pub &'static Site);

impl Emit for RecordOnly {
    #[inline(always)]
    fn emit<W: Fn(&mut RecordWriter, Common)>(self, len: usize, write: W) {
        crate::recorder::record_only(&self.0.id, len, write);
    }
}

/// The gate word of a site that only the recorder listens to: no SDT semaphore, state
/// [`RECORD`] alone (see [`crate::Gate`]).
pub const RECORD_ONLY_GATE: u32 = (RECORD as u32) << 16;

/// `trace_event!`'s path when the gate is [`RECORD_ONLY_GATE`], for records of a fixed
/// `len`: straight-line code with no call. `write` computes the values and writes them; it
/// is called only when room was reserved. False, with nothing done, when the event needs
/// the full path (then the caller fires it there, computing the values once), which is also
/// where an event that finds the ring full is dropped: the test for that may call a
/// function, and a call here would make every event save and restore registers.
#[inline(always)]
pub fn record_fast<W: Fn(&mut RecordWriter, Common)>(
    site: &'static Site,
    len: usize,
    write: W,
) -> bool {
    crate::recorder::record_fast(&site.id, len, &write, false)
}

/// Probes and sinks (and the recorder, when on): `args` points at the site's argument tuple,
/// which typed probes read.
pub struct Everything {
    pub site: &'static Site,
    pub state: u8,
    pub args: *const (),
    /// `__tp_fire_NAME`'s frame pointer, where a user stack starts (see `stack::capture`).
    pub fp: usize,
}

impl Emit for Everything {
    #[inline(always)]
    fn emit<W: Fn(&mut RecordWriter, Common)>(self, len: usize, write: W) {
        let Everything { site, state, args, fp } = self;
        let raw = if state & RECORD != 0 { crate::clock::raw_now() } else { 0 };
        let frames = if state & STACK != 0 { crate::stack::capture(fp) } else { [0; 8] };
        ctx::with(|ctx| {
            let _g = ReadGuard::new(ctx);
            let mut rec = None;
            if state & RECORD != 0 {
                rec = crate::recorder::record(ctx, &site.id, len, &write, raw);
                if state & STACK != 0 && rec.is_some() {
                    let w =
                        |w: &mut RecordWriter, c: Common| crate::stack::write_record(&frames, w, c);
                    let id = &crate::stack::USER_STACK_ID;
                    crate::recorder::record(ctx, id, crate::stack::RECORD_LEN, &w, raw);
                }
            }
            if state & (PROBES | SINKS) != 0 {
                dispatch(ctx, site, state, len, &write, rec, args);
            }
        });
    }
}

#[inline(never)]
fn dispatch(
    ctx: &ThreadCtx,
    site: &'static Site,
    state: u8,
    len: usize,
    write: &dyn Fn(&mut RecordWriter, Common),
    rec: Option<(*const u8, u64)>,
    args: *const (),
) {
    // SAFETY: we are inside a read section; arrays are freed only after every read section
    // that could have loaded them ends.
    let probes = unsafe { site.probes.load(Ordering::Acquire).as_ref() };
    let sinks_on = state & SINKS != 0;
    let n_raw = probes.map_or(0, |p| p.n_raw);
    // The record, for raw probes and sinks: the recorder's copy, or built here.
    let mut stack = [0u64; 64];
    let mut heap = Vec::new();
    let need_record = n_raw > 0 || sinks_on;
    let (record, ts): (&[u8], u64) = match rec {
        Some((p, raw)) => {
            // SAFETY: the recorder wrote `len` bytes there; the page can't be reused before
            // this thread reserves again.
            (unsafe { std::slice::from_raw_parts(p, len) }, crate::clock::from_raw(raw))
        }
        None if need_record => {
            let dst = if len <= std::mem::size_of_val(&stack) {
                stack.as_mut_ptr() as *mut u8
            } else {
                heap.resize(len, 0u8);
                heap.as_mut_ptr()
            };
            // SAFETY: `dst` holds at least `len` bytes (stack or heap above).
            write(&mut unsafe { RecordWriter::new(dst, len) }, record::common(&site.id, ctx.tid()));
            // SAFETY: `write` filled `len` bytes at `dst`, which holds at least `len`.
            (unsafe { std::slice::from_raw_parts(dst, len) }, crate::clock::now_ns())
        }
        None => (&[], 0),
    };
    let ev = Event { site, record, timestamp: ts };
    if let Some(p) = probes {
        for e in &p.entries {
            match &e.f {
                // A run-time site has no typed probes (and a null `args`).
                ProbeFn::Typed(t) if !args.is_null() => (t.0)(args),
                ProbeFn::Typed(_) => {}
                ProbeFn::Raw(r) => r(&ev),
            }
        }
    }
    if sinks_on {
        crate::registry::run_sinks(&ev);
    }
}
