//! Tracepoints defined at run time: a name, a system and typed fields known only when the
//! program runs (a `tracing` callsite's, say), recorded exactly as `trace_event!` events are.
//!
//! [`define`] makes a [`Site`] like the ones `trace_event!` puts in the binary: it gets the
//! next event ID, the enabled state that `TP_EVENTS` / [`crate::set_events`] /
//! [`crate::enable`] give its name, its `format` (so it is in the recorder's trace.dat,
//! [`crate::tracepoints`] and [`crate::formats_text`]), and follows the recorder and sinks
//! as every site does. Its record body (the bytes after the common fields) is built with a
//! [`Body`] and fired with [`Tracepoint::fire`]; nothing is allocated per event.
//!
//! ```
//! use tp::dynamic::{define, FieldDef, FieldType};
//! let tp = define("demo", "dyn_req", &[
//!     FieldDef::new("id", FieldType::U64),
//!     FieldDef::new("path", FieldType::Str),
//! ], None).unwrap();
//! assert!(tp.site().format_text().contains("field:__data_loc char[] path;\toffset:16;\tsize:4;"));
//! let mut buf = Vec::new();
//! let mut body = tp.body(&mut buf);
//! body.put_u64(0, 7);
//! body.put_str(1, "/index.html");
//! tp.fire(body.finish());
//! ```
//!
//! A site defined at run time lives for the rest of the process (its name, format and state
//! are leaked, as a static site's are in the binary): define one per kind of event, not per
//! event. Event IDs are shared with `trace_event!` sites, up to 65,535 in all.

use crate::field::{FieldDesc, Layout, MAX_DYN_LEN};
use crate::sdt::Gate;
use crate::site::{Meta, Site};

/// A field's type: how it is stored and declared in the `format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FieldType {
    /// `unsigned char`.
    U8,
    /// `bool` (one byte).
    Bool,
    /// `long` (s64).
    I64,
    /// `unsigned long` (u64).
    U64,
    /// `__data_loc char[]`: a NUL-terminated string after the fixed part (at most
    /// [`MAX_DYN_LEN`] bytes, longer ones are cut).
    Str,
}

impl FieldType {
    /// (C type, size, signed, layout).
    fn c(self) -> (&'static str, usize, bool, Layout) {
        match self {
            FieldType::U8 => ("unsigned char", 1, false, Layout::Scalar),
            FieldType::Bool => ("bool", 1, false, Layout::Scalar),
            FieldType::I64 => ("long", 8, true, Layout::Scalar),
            FieldType::U64 => ("unsigned long", 8, false, Layout::Scalar),
            FieldType::Str => ("char", 4, false, Layout::DynStr),
        }
    }

    /// The printk conversion that prints the field and its argument (`%lu`, `REC->x`).
    pub fn print(self, field: &str) -> (&'static str, String) {
        match self {
            FieldType::U8 | FieldType::Bool => ("%u", format!("REC->{field}")),
            FieldType::I64 => ("%ld", format!("REC->{field}")),
            FieldType::U64 => ("%lu", format!("REC->{field}")),
            FieldType::Str => ("%s", format!("__get_str({field})")),
        }
    }
}

/// A field of a tracepoint defined at run time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldDef {
    pub name: String,
    pub ty: FieldType,
}

impl FieldDef {
    pub fn new(name: impl Into<String>, ty: FieldType) -> FieldDef {
        FieldDef { name: name.into(), ty }
    }
}

/// Why [`define`] refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DefineError {
    /// A system, event or field name that is not a C identifier (trace-cmd and the kernel's
    /// print fmts need them).
    BadName { what: &'static str, name: String },
    /// A tracepoint of that `system:name` exists already.
    Exists { full_name: String },
    /// Two fields of that name (or one named like a common field).
    DuplicateField { name: String },
    /// More than 64 fields.
    TooManyFields { count: usize },
    /// The print fmt given does not compile.
    PrintFmt { message: String },
    /// All 65,535 event IDs are taken.
    NoIds,
}

impl std::fmt::Display for DefineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DefineError::BadName { what, name } => {
                write!(f, "{what} name {name:?} is not a C identifier")
            }
            DefineError::Exists { full_name } => write!(f, "tracepoint {full_name} exists"),
            DefineError::DuplicateField { name } => write!(f, "field {name:?} appears twice"),
            DefineError::TooManyFields { count } => {
                write!(f, "{count} fields: a run-time tracepoint has at most 64")
            }
            DefineError::PrintFmt { message } => write!(f, "print fmt: {message}"),
            DefineError::NoIds => write!(f, "no event ID left for another tracepoint"),
        }
    }
}

impl std::error::Error for DefineError {}

/// Whether `s` is a C identifier (`[A-Za-z_][A-Za-z0-9_]*`).
pub fn is_c_identifier(s: &str) -> bool {
    let mut b = s.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// A tracepoint defined at run time: its site and its fields' offsets.
#[derive(Debug)]
pub struct Tracepoint {
    site: &'static Site,
    /// Per field: offset in the body (record offset less the 8 common bytes) and type.
    slots: Box<[(usize, FieldType)]>,
    /// Bytes of the body's fixed part.
    fixed: usize,
    /// Bit i: field i is a string.
    strings: u64,
}

/// Size of the common fields every record starts with.
const COMMON: usize = 8;

/// Define tracepoint `system:name` with `fields` in this order (each at its natural
/// alignment). `print_fmt` is the `print fmt:` text (`"id=%lu", REC->id`); `None` prints
/// every field as `name=value`. Fails on names that are not C identifiers, on a name that
/// exists, and on a print fmt that does not compile.
pub fn define(
    system: &str,
    name: &str,
    fields: &[FieldDef],
    print_fmt: Option<String>,
) -> Result<&'static Tracepoint, DefineError> {
    for (what, n) in [("system", system), ("event", name)] {
        if !is_c_identifier(n) {
            return Err(DefineError::BadName { what, name: n.into() });
        }
    }
    if fields.len() > 64 {
        return Err(DefineError::TooManyFields { count: fields.len() });
    }
    let mut descs = Vec::with_capacity(fields.len());
    let mut slots = Vec::with_capacity(fields.len());
    let mut strings = 0u64;
    let mut off = COMMON;
    for (i, f) in fields.iter().enumerate() {
        if !is_c_identifier(&f.name) {
            return Err(DefineError::BadName { what: "field", name: f.name.clone() });
        }
        if f.name.starts_with("common_") || fields[..i].iter().any(|g| g.name == f.name) {
            return Err(DefineError::DuplicateField { name: f.name.clone() });
        }
        let (c_type, size, signed, layout) = f.ty.c();
        off = off.next_multiple_of(size);
        descs.push(FieldDesc { name: leak(&f.name), c_type, layout, signed, offset: off, size });
        slots.push((off - COMMON, f.ty));
        if f.ty == FieldType::Str {
            strings |= 1 << i;
        }
        off += size;
    }
    let fixed = off.next_multiple_of(4);
    let print_fmt = print_fmt.unwrap_or_else(|| default_print_fmt(fields));
    if crate::find(&format!("{system}:{name}")).is_some() {
        return Err(DefineError::Exists { full_name: format!("{system}:{name}") });
    }
    let meta: &'static Meta = Box::leak(Box::new(Meta {
        system: leak(system),
        name: leak(name),
        docs: "",
        fields: Box::leak(descs.into_boxed_slice()),
        printk_fmt: "",
        printk_args: &[],
        fixed_size: fixed,
        stacks: false,
        file: "",
        line: 0,
    }));
    let gate: &'static Gate = Box::leak(Box::new(Gate::new()));
    // Compile the print fmt before the site is published.
    let probe = Site::new_dynamic(meta, gate, crate::registry::ID_BASE, |_| print_fmt.clone());
    if let Err(e) = tp_format::printfmt::Compiled::compile(probe.format()) {
        return Err(DefineError::PrintFmt { message: e.to_string() });
    }
    let site = crate::registry::add_dynamic(|id| {
        Box::leak(Box::new(Site::new_dynamic(meta, gate, id, |_| print_fmt)))
    })
    .ok_or(DefineError::NoIds)?;
    Ok(Box::leak(Box::new(Tracepoint {
        site,
        slots: slots.into_boxed_slice(),
        fixed: fixed - COMMON,
        strings,
    })))
}

fn leak(s: &str) -> &'static str {
    Box::leak(s.to_string().into_boxed_str())
}

fn default_print_fmt(fields: &[FieldDef]) -> String {
    let mut fmt = String::new();
    let mut args = String::new();
    for f in fields {
        let (conv, arg) = f.ty.print(&f.name);
        if !fmt.is_empty() {
            fmt.push(' ');
        }
        fmt.push_str(&f.name);
        fmt.push('=');
        fmt.push_str(conv);
        args.push_str(", ");
        args.push_str(&arg);
    }
    format!("\"{fmt}\"{args}")
}

impl Tracepoint {
    /// The site: name, ID, format, state, raw probes.
    pub fn site(&self) -> &'static Site {
        self.site
    }

    /// True when the next [`fire`](Self::fire) is recorded or seen by a probe or sink: build
    /// the body only then.
    #[inline(always)]
    pub fn is_active(&self) -> bool {
        self.site.is_active()
    }

    /// The fields' types, in order.
    pub fn field_types(&self) -> impl Iterator<Item = FieldType> + '_ {
        self.slots.iter().map(|&(_, t)| t)
    }

    /// Start a record body in `buf` (cleared; reuse it from event to event).
    #[inline]
    pub fn body<'b>(&self, buf: &'b mut Vec<u8>) -> Body<'_, 'b> {
        buf.clear();
        buf.resize(self.fixed, 0);
        Body { tp: self, buf, strings_set: 0 }
    }

    /// Record one event with a body made by [`Tracepoint::body`] (to the recorder, probes and
    /// sinks, as a `trace_event!` site's).
    #[inline]
    pub fn fire(&self, body: &[u8]) {
        self.site.fire_body(body);
    }
}

/// A record body being built: fields by index, in any order; an integer field not put is 0,
/// a string field not put is empty.
#[derive(Debug)]
pub struct Body<'t, 'b> {
    tp: &'t Tracepoint,
    buf: &'b mut Vec<u8>,
    strings_set: u64,
}

impl<'b> Body<'_, 'b> {
    #[inline]
    fn put_fixed<const N: usize>(&mut self, i: usize, bytes: [u8; N]) {
        if let Some(&(off, _)) = self.tp.slots.get(i) {
            self.buf[off..off + N].copy_from_slice(&bytes);
        }
    }

    /// The type of field `i`, if there is one.
    #[inline]
    pub fn field_type(&self, i: usize) -> Option<FieldType> {
        self.tp.slots.get(i).map(|&(_, t)| t)
    }

    /// Put an integer into field `i`, stored in its type (truncated or reinterpreted as the
    /// C assignment would; as text in a string field).
    #[inline]
    pub fn put_u64(&mut self, i: usize, v: u64) {
        match self.field_type(i) {
            Some(FieldType::U64 | FieldType::I64) => self.put_fixed(i, v.to_ne_bytes()),
            Some(FieldType::U8) => self.put_fixed(i, [v as u8]),
            Some(FieldType::Bool) => self.put_fixed(i, [(v != 0) as u8]),
            Some(FieldType::Str) => self.put_display(i, v),
            None => {}
        }
    }

    /// As [`Body::put_u64`], for a signed value.
    #[inline]
    pub fn put_i64(&mut self, i: usize, v: i64) {
        match self.field_type(i) {
            Some(FieldType::Str) => self.put_display(i, v),
            _ => self.put_u64(i, v as u64),
        }
    }

    /// Put `v`'s text into string field `i` (other fields are left as they are).
    pub fn put_display(&mut self, i: usize, v: impl std::fmt::Display) {
        if self.field_type(i) != Some(FieldType::Str) {
            return;
        }
        let start = self.buf.len();
        let _ = std::io::Write::write_fmt(&mut *self.buf, format_args!("{v}"));
        self.end_str(i, start);
    }

    /// Put a string into field `i` (cut at [`MAX_DYN_LEN`] - 1 bytes; ignored unless it is a
    /// string field).
    #[inline]
    pub fn put_str(&mut self, i: usize, s: &str) {
        if self.field_type(i) != Some(FieldType::Str) {
            return;
        }
        let start = self.buf.len();
        self.buf.extend_from_slice(s.as_bytes());
        self.end_str(i, start);
    }

    /// Terminate the string written from `start`, cut it, and point field `i` at it (a
    /// string put twice keeps the last).
    fn end_str(&mut self, i: usize, start: usize) {
        self.buf.truncate(start + (self.buf.len() - start).min(MAX_DYN_LEN - 1));
        self.buf.push(0);
        let len = (self.buf.len() - start) as u32;
        let loc = (len << 16) | ((start + COMMON) as u32 & 0xffff);
        self.put_fixed(i, loc.to_ne_bytes());
        self.strings_set |= 1 << i;
    }

    /// The finished body: strings not put become empty ones.
    pub fn finish(self) -> &'b [u8] {
        let mut missing = self.tp.strings & !self.strings_set;
        while missing != 0 {
            let i = missing.trailing_zeros() as usize;
            missing &= missing - 1;
            let start = self.buf.len();
            self.buf.push(0);
            let loc = (1u32 << 16) | ((start + COMMON) as u32 & 0xffff);
            let off = self.tp.slots[i].0;
            self.buf[off..off + 4].copy_from_slice(&loc.to_ne_bytes());
        }
        self.buf
    }
}
