//! One tp event per `tracing` callsite, defined at the callsite's first event (when its
//! fields' types are known), and the map from callsites to them: a thread's own cache in
//! front of a global map, so an event costs one hash lookup and no lock.

use crate::names::{c_identifier, event_name, fmt_literal, LEVEL_ARG};
use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Mutex, OnceLock};
use tp::dynamic::{define, DefineError, FieldDef, FieldType, Tracepoint};
use tracing_core::callsite::Identifier;
use tracing_core::Metadata;

/// The system of every event this layer defines.
pub const SYSTEM: &str = "tracing";

/// The shared span events: their names and fields (after none per callsite).
pub const SPAN_ENTER: &str = "span_enter";
pub const SPAN_EXIT: &str = "span_exit";
pub const SPAN_CLOSE: &str = "span_close";
pub const SPAN_FOLLOWS: &str = "span_follows";

/// A callsite's field as recorded: its type, and whether its text is quoted when printed
/// (values given as `&str`; floats and `Debug` values are stored as text too, unquoted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    pub ty: FieldType,
    pub quoted: bool,
}

/// What tp knows of one `tracing` callsite.
#[derive(Debug)]
pub struct Callsite {
    is_span: bool,
    /// The display prefix: the target, and the span's name for spans.
    title: String,
    /// The tp event name (events) or the stem of `STEM__new` / `STEM__record` (spans).
    stem: String,
    /// The callsite's field names as C identifiers, unique, in `tracing`'s field order.
    fields: Vec<String>,
    /// The index of the `message` field, printed first.
    message: Option<usize>,
    /// The event's tp event, or a span's `__new` one (`None` if it could not be defined).
    main: OnceLock<Option<&'static Tracepoint>>,
    /// A span's `__record` event.
    record: OnceLock<Option<&'static Tracepoint>>,
}

/// The fields a kind of record has before the callsite's own.
const EVENT_LEAD: &[(&str, FieldType)] = &[("level", FieldType::U8)];
const NEW_LEAD: &[(&str, FieldType)] =
    &[("span_id", FieldType::U64), ("parent_id", FieldType::U64), ("level", FieldType::U8)];
const RECORD_LEAD: &[(&str, FieldType)] = &[("span_id", FieldType::U64)];

/// Index of a callsite's first field in each kind of record.
pub const EVENT_FIRST: usize = EVENT_LEAD.len();
pub const NEW_FIRST: usize = NEW_LEAD.len();
pub const RECORD_FIRST: usize = RECORD_LEAD.len();

impl Callsite {
    fn new(meta: &Metadata<'_>) -> Callsite {
        let is_span = meta.is_span();
        let level = meta.level().as_str();
        let (stem, title) = if is_span {
            let stem = format!("{}__{}", c_identifier(meta.target()), c_identifier(meta.name()));
            (stem, format!("{}: {}", meta.target(), meta.name()))
        } else {
            (event_name(meta.target(), meta.name(), meta.line(), level), meta.target().into())
        };
        let lead = if is_span { NEW_LEAD } else { EVENT_LEAD };
        let mut fields: Vec<String> = Vec::new();
        let mut message = None;
        for (i, f) in meta.fields().iter().enumerate() {
            if f.name() == "message" && !is_span {
                message = Some(i);
            }
            let mut n = c_identifier(f.name());
            if lead.iter().any(|(l, _)| *l == n) || fields.contains(&n) || n.starts_with("common_")
            {
                n = format!("{n}_{i}");
            }
            fields.push(n);
        }
        Callsite {
            is_span,
            title,
            stem,
            fields,
            message,
            main: OnceLock::new(),
            record: OnceLock::new(),
        }
    }

    /// The tp event names this callsite can produce (for interest).
    fn names(&self) -> Vec<String> {
        if self.is_span {
            vec![
                format!("{}__new", self.stem),
                format!("{}__record", self.stem),
                SPAN_ENTER.into(),
                SPAN_EXIT.into(),
                SPAN_CLOSE.into(),
                SPAN_FOLLOWS.into(),
            ]
        } else {
            vec![self.stem.clone()]
        }
    }

    /// Would tp record anything of this callsite now (or is an external tracer attached)?
    pub fn wanted(&self) -> bool {
        crate::sdt::record_attached() || self.names().iter().any(|n| tp::would_take(SYSTEM, n))
    }

    /// The event's (or span's `__new`) tp event, defined with `seen()`'s field types the
    /// first time.
    #[inline]
    pub fn main(&self, seen: impl FnOnce() -> Vec<Option<Seen>>) -> Option<&'static Tracepoint> {
        *self.main.get_or_init(|| {
            let (lead, name) = if self.is_span {
                (NEW_LEAD, format!("{}__new", self.stem))
            } else {
                (EVENT_LEAD, self.stem.clone())
            };
            self.define(&name, lead, &seen())
        })
    }

    /// A span's `__record` tp event, defined with `seen()`'s field types the first time.
    #[inline]
    pub fn record(&self, seen: impl FnOnce() -> Vec<Option<Seen>>) -> Option<&'static Tracepoint> {
        *self
            .record
            .get_or_init(|| self.define(&format!("{}__record", self.stem), RECORD_LEAD, &seen()))
    }

    fn define(
        &self,
        name: &str,
        lead: &[(&str, FieldType)],
        seen: &[Option<Seen>],
    ) -> Option<&'static Tracepoint> {
        let seen_at = |i: usize| {
            seen.get(i).copied().flatten().unwrap_or(Seen { ty: FieldType::Str, quoted: false })
        };
        let mut defs: Vec<FieldDef> = lead.iter().map(|&(n, t)| FieldDef::new(n, t)).collect();
        defs.extend(self.fields.iter().enumerate().map(|(i, n)| FieldDef::new(n, seen_at(i).ty)));
        // The print fmt: `TITLE: MESSAGE: lead=.. field=..`.
        let mut fmt = fmt_literal(&self.title);
        fmt.push(':');
        let mut args = String::new();
        let mut arg = |fmt: &mut String, label: Option<&str>, conv: &str, a: &str, quoted: bool| {
            fmt.push(' ');
            if let Some(l) = label {
                fmt.push_str(l);
                fmt.push('=');
            }
            let q = if quoted { "\\\"" } else { "" };
            fmt.push_str(&format!("{q}{conv}{q}"));
            args.push_str(", ");
            args.push_str(a);
        };
        if let Some(m) = self.message {
            arg(&mut fmt, None, "%s", &format!("__get_str({})", self.fields[m]), false);
            fmt.push(':');
        }
        for (n, t) in lead {
            if *n == "level" {
                arg(&mut fmt, Some(n), "%s", LEVEL_ARG, false);
            } else {
                let (conv, a) = t.print(n);
                arg(&mut fmt, Some(n.trim_end_matches("_id")), conv, &a, false);
            }
        }
        for (i, n) in self.fields.iter().enumerate() {
            if Some(i) == self.message {
                continue;
            }
            let s = seen_at(i);
            let (conv, a) = s.ty.print(n);
            arg(&mut fmt, Some(n), conv, &a, s.quoted);
        }
        let print_fmt = format!("\"{fmt}\"{args}");
        let tp = define_unique(name, &defs, &print_fmt)?;
        crate::sdt::callsite(tp.site());
        Some(tp)
    }
}

/// Define `tracing:NAME`, or `NAME_2`, `NAME_3`, ... if the name is taken (two callsites
/// whose names clash once made C identifiers). `None` (and a message on stderr, once per
/// callsite) if tp refuses.
fn define_unique(name: &str, defs: &[FieldDef], print_fmt: &str) -> Option<&'static Tracepoint> {
    for n in 1..100 {
        let candidate = if n == 1 { name.to_string() } else { format!("{name}_{n}") };
        match define(SYSTEM, &candidate, defs, Some(print_fmt.to_string())) {
            Ok(tp) => return Some(tp),
            Err(DefineError::Exists { .. }) => continue,
            Err(e) => {
                eprintln!("tp-tracing: cannot record {SYSTEM}:{candidate}: {e}");
                return None;
            }
        }
    }
    None
}

/// A shared span event (`span_enter` etc.): `span_id` and `other` (if given) fields.
pub fn define_shared(name: &str, other: Option<&str>) -> Option<&'static Tracepoint> {
    let mut defs = vec![FieldDef::new("span_id", FieldType::U64)];
    let mut print_fmt = "\"id=%lu".to_string();
    let mut args = ", REC->span_id".to_string();
    if let Some(o) = other {
        defs.push(FieldDef::new(o, FieldType::U64));
        print_fmt.push_str(&format!(" {}=%lu", o.trim_end_matches("_id")));
        args.push_str(&format!(", REC->{o}"));
    }
    let tp = define_unique(name, &defs, &format!("{print_fmt}\"{args}"))?;
    crate::sdt::callsite(tp.site());
    Some(tp)
}

/// Hashes a callsite identifier (a pointer) with one multiply: the maps below hold only
/// such keys.
#[derive(Default)]
pub struct PtrHasher(u64);

impl Hasher for PtrHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 =
                (self.0.rotate_left(5) ^ u64::from(*b)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }
    fn write_usize(&mut self, n: usize) {
        self.0 = (self.0.rotate_left(5) ^ n as u64).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

type Map = HashMap<Identifier, &'static Callsite, BuildHasherDefault<PtrHasher>>;
static ALL: Mutex<Option<Map>> = Mutex::new(None);

thread_local! {
    static CACHE: RefCell<Map> = RefCell::new(Map::default());
}

/// The callsite of `meta` (made on first sight, and kept for the rest of the process as
/// `tracing`'s callsites are).
#[inline]
pub fn get(meta: &'static Metadata<'static>) -> &'static Callsite {
    let id = meta.callsite();
    let hit = CACHE.try_with(|c| c.try_borrow().ok().and_then(|c| c.get(&id).copied()));
    if let Ok(Some(cs)) = hit {
        return cs;
    }
    get_slow(id, meta)
}

#[cold]
fn get_slow(id: Identifier, meta: &'static Metadata<'static>) -> &'static Callsite {
    let cs = {
        let mut all = ALL.lock().unwrap_or_else(|e| e.into_inner());
        let all = all.get_or_insert_with(Map::default);
        *all.entry(id.clone()).or_insert_with(|| Box::leak(Box::new(Callsite::new(meta))))
    };
    let _ = CACHE.try_with(|c| c.try_borrow_mut().map(|mut c| c.insert(id, cs)));
    cs
}

/// Would tp record anything of the callsite `meta` describes? For metadata that is not the
/// callsite's own (`tracing-log` builds one per `log` record).
pub fn wanted(meta: &Metadata<'_>) -> bool {
    let known = ALL
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .and_then(|m| m.get(&meta.callsite()).copied());
    match known {
        Some(cs) => cs.wanted(),
        None => Callsite::new(meta).wanted(),
    }
}
