//! Whole event lines: the context columns ([`crate::text`]) plus the event's text
//! ([`crate::printfmt`]), for every event of a trace, by event ID. Also the `--raw` field
//! dump and JSON objects. One renderer serves `tp report`, `tp stream` and Rust sinks.

use crate::format::{EventFormat, Field, FieldKind};
pub use crate::printfmt::SymFlags;
use crate::printfmt::{Compiled, GraphStep, PrintFmtError, RenderCtx};
use crate::symbols::{Cmdlines, Kallsyms, PrintkFormats, UserMaps};
use crate::text::{self, Columns, Context};
use std::fmt::Write as _;
use std::sync::OnceLock;

/// The tables printing needs besides the formats.
#[derive(Debug, Clone, Default)]
pub struct Tables {
    pub kallsyms: Kallsyms,
    pub printk: PrintkFormats,
    pub cmdlines: Cmdlines,
    /// With processes' maps, user stacks print as with the kernel's `sym-userobj` option.
    pub user_maps: Option<UserMaps>,
}

/// How lines are laid out.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub columns: Columns,
    /// Timestamps in nanoseconds (see [`text::clock_is_ns`]).
    pub ts_in_ns: bool,
    pub big_endian: bool,
    pub long_size: usize,
    /// How ftrace's own events print code addresses (stack frames, `function`, marker
    /// ips), as the kernel's `sym-offset` and `sym-addr` options say.
    pub sym: SymFlags,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            columns: Columns::default(),
            ts_in_ns: true,
            big_endian: false,
            long_size: 8,
            sym: SymFlags::default(),
        }
    }
}

struct Event {
    format: EventFormat,
    /// Compiled on first use: a trace file carries every format of its kernel (thousands),
    /// a trace uses a few.
    program: OnceLock<Result<Compiled, PrintFmtError>>,
}

impl Event {
    fn program(&self) -> &Result<Compiled, PrintFmtError> {
        self.program.get_or_init(|| match uprobe_print_fmt(&self.format) {
            Some(fmt) => Compiled::compile(&EventFormat { print_fmt: fmt, ..self.format.clone() }),
            None => Compiled::compile(&self.format),
        })
    }
}

/// The kernel prints uprobe events with its own function (print_uprobe_event), not their
/// print fmt: `(0x%lx)` at entry and `(0x%lx <- 0x%lx)` with the return address first at
/// return, where the format says `(%lx)` and `(%lx <- %lx)` of `__probe_func,
/// __probe_ret_ip`. That text as a print fmt; `None` for other events. (kprobes share the
/// fields but print `(symbol+off/size)`; they get the 0x form too, closer than a bare hex.)
fn uprobe_print_fmt(f: &EventFormat) -> Option<String> {
    let first: Vec<&str> = f.fields.iter().take(2).map(|x| x.name.as_str()).collect();
    let fmt = f.print_fmt.as_str();
    if first.first() == Some(&"__probe_ip") {
        let rest = fmt.strip_prefix("\"(%lx)")?;
        return Some(format!("\"(0x%lx){rest}"));
    }
    if first == ["__probe_func", "__probe_ret_ip"] {
        let rest = fmt.strip_prefix("\"(%lx <- %lx)")?;
        let (text, args) = rest.split_once("\", ")?;
        let args = args.strip_prefix("REC->__probe_func, REC->__probe_ret_ip")?;
        return Some(format!(
            "\"(0x%lx <- 0x%lx){text}\", REC->__probe_ret_ip, REC->__probe_func{args}"
        ));
    }
    None
}

/// Decoded common fields of a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Common {
    pub id: u16,
    pub flags: u8,
    pub preempt_count: u8,
    pub pid: i32,
}

/// Renders records of one trace: formats compiled once, looked up by ID per record.
pub struct Renderer {
    events: Vec<Event>,
    /// Event ID -> index into `events` (u32::MAX for unknown IDs).
    by_id: Vec<u32>,
    pub tables: Tables,
    pub options: Options,
}

impl Renderer {
    /// Take every format; each print fmt is compiled when its first record renders. Print
    /// fmts that do not compile are kept with their error (see
    /// [`Renderer::compile_errors`]) and their events print as a field dump.
    pub fn new(formats: Vec<EventFormat>, tables: Tables, options: Options) -> Renderer {
        let mut by_id = Vec::new();
        let mut events = Vec::with_capacity(formats.len());
        for format in formats {
            let id = format.id as usize;
            if id > u16::MAX as usize {
                continue; // common_type is 16 bits: such an event can never be referenced
            }
            if by_id.len() <= id {
                by_id.resize(id + 1, u32::MAX);
            }
            by_id[id] = events.len() as u32;
            events.push(Event { format, program: OnceLock::new() });
        }
        Renderer { events, by_id, tables, options }
    }

    /// Events whose print fmt did not compile, with why (compiles every format).
    pub fn compile_errors(&self) -> impl Iterator<Item = &PrintFmtError> {
        self.events.iter().filter_map(|e| e.program().as_ref().err())
    }

    pub fn formats(&self) -> impl Iterator<Item = &EventFormat> {
        self.events.iter().map(|e| &e.format)
    }

    /// The format of event `id`.
    pub fn format(&self, id: u16) -> Option<&EventFormat> {
        self.event(id).map(|e| &e.format)
    }

    /// True when event `id`'s print fmt has arguments that need kernel state at print time
    /// (e.g. `jiffies`); they render as `[?]`.
    pub fn needs_kernel_state(&self, id: u16) -> bool {
        self.event(id)
            .is_some_and(|e| e.program().as_ref().is_ok_and(|p| !p.unsupported().is_empty()))
    }

    fn event(&self, id: u16) -> Option<&Event> {
        let i = *self.by_id.get(id as usize)?;
        self.events.get(i as usize)
    }

    /// Decode the common fields (`common_type`, `common_flags`, `common_preempt_count`,
    /// `common_pid`), laid out identically for every event.
    pub fn common(&self, data: &[u8]) -> Option<Common> {
        if data.len() < 8 {
            return None;
        }
        let be = self.options.big_endian;
        let u16_at = |o: usize| {
            let b = [data[o], data[o + 1]];
            if be {
                u16::from_be_bytes(b)
            } else {
                u16::from_le_bytes(b)
            }
        };
        let b = [data[4], data[5], data[6], data[7]];
        let pid = if be { i32::from_be_bytes(b) } else { i32::from_le_bytes(b) };
        Some(Common { id: u16_at(0), flags: data[2], preempt_count: data[3], pid })
    }

    fn ctx(&self) -> RenderCtx<'_> {
        RenderCtx {
            kallsyms: &self.tables.kallsyms,
            printk: &self.tables.printk,
            big_endian: self.options.big_endian,
            long_size: self.options.long_size,
            user_maps: self.tables.user_maps.as_ref(),
            sym: self.options.sym,
        }
    }

    /// Append one line as the kernel's `trace` file prints it, newline included.
    pub fn render_line(&self, cpu: u32, ts: u64, data: &[u8], out: &mut String) {
        self.write_context(cpu, ts, data, out);
        self.render_text(data, out);
        out.push('\n');
    }

    /// IDs of ftrace's `funcgraph_entry` and `funcgraph_exit`, when the trace has both.
    pub fn graph_ids(&self) -> Option<(u16, u16)> {
        let id = |name: &str| {
            let f = self.formats().find(|f| f.system == "ftrace" && f.name == name)?;
            u16::try_from(f.id).ok()
        };
        Some((id("funcgraph_entry")?, id("funcgraph_exit")?))
    }

    /// For function_graph records: what `data` records.
    pub fn graph_step(&self, data: &[u8]) -> Option<GraphStep> {
        let c = self.common(data)?;
        let program = self.event(c.id)?.program().as_ref().ok()?;
        program.graph_step(data, self.options.big_endian)
    }

    /// A function_graph call without children as one line, as the kernel prints it: the
    /// call's context columns, then `func();` with the duration its return `ret` recorded.
    pub fn render_graph_leaf_line(
        &self,
        cpu: u32,
        ts: u64,
        call: &[u8],
        ret: &[u8],
        out: &mut String,
    ) {
        self.write_context(cpu, ts, call, out);
        self.graph_return(ret, true, out);
        out.push('\n');
    }

    /// A function_graph return whose call was not shown (the trace began inside it):
    /// `} /* func */`, as the kernel names the function there.
    pub fn render_graph_orphan_line(&self, cpu: u32, ts: u64, ret: &[u8], out: &mut String) {
        self.write_context(cpu, ts, ret, out);
        self.graph_return(ret, false, out);
        out.push('\n');
    }

    fn graph_return(&self, ret: &[u8], leaf: bool, out: &mut String) {
        let program = self.common(ret).and_then(|c| self.event(c.id)?.program().as_ref().ok());
        if !program.is_some_and(|p| p.render_graph_return(ret, leaf, &self.ctx(), out)) {
            self.render_text(ret, out);
        }
    }

    /// The context columns (`comm-pid [cpu] flags ts: `).
    pub fn write_context(&self, cpu: u32, ts: u64, data: &[u8], out: &mut String) {
        let c = self.common(data).unwrap_or(Common { id: 0, flags: 0, preempt_count: 0, pid: 0 });
        let cols = self.options.columns;
        let tgid = if cols.tgid { self.tables.cmdlines.tgid(c.pid) } else { None };
        let task = self.tables.cmdlines.task_column(c.pid).filter(|_| cols.task_column_cached());
        let ctx = Context {
            // Only needed when the task column is not kept for this pid.
            comm: if task.is_some() { "" } else { self.tables.cmdlines.comm(c.pid) },
            pid: c.pid,
            tgid,
            cpu,
            flags: c.flags,
            preempt_count: c.preempt_count,
            ts,
        };
        match task {
            Some(task) => {
                text::write_context_with_task(out, task, &ctx, cols, self.options.ts_in_ns)
            }
            None => text::write_context(out, &ctx, cols, self.options.ts_in_ns),
        }
    }

    /// The event's part of the line (`name: text`), without newline.
    pub fn render_text(&self, data: &[u8], out: &mut String) {
        let Some(c) = self.common(data) else {
            out.push_str("[TRUNCATED RECORD]");
            return;
        };
        let Some(ev) = self.event(c.id) else {
            out.push_str("[UNKNOWN EVENT ");
            text::push_u64(out, c.id as u64);
            out.push(']');
            return;
        };
        match ev.program() {
            Ok(p) => {
                if p.prints_name() {
                    out.push_str(&ev.format.name);
                    out.push_str(": ");
                }
                p.render(data, &self.ctx(), out);
            }
            Err(_) => self.render_fields(ev, data, out),
        }
    }

    /// `name: field=value ...`: every field of the record, no print fmt (`--raw`).
    pub fn render_raw(&self, data: &[u8], out: &mut String) {
        match self.common(data).and_then(|c| self.event(c.id)) {
            Some(ev) => self.render_fields(ev, data, out),
            None => self.render_text(data, out),
        }
    }

    fn render_fields(&self, ev: &Event, data: &[u8], out: &mut String) {
        out.push_str(&ev.format.name);
        out.push(':');
        for f in &ev.format.fields {
            out.push(' ');
            out.push_str(&f.name);
            out.push('=');
            field_value(f, data, self.options.big_endian).write(out, false);
        }
    }

    /// One JSON object (no trailing newline): time, CPU, task and typed fields.
    pub fn render_json(&self, cpu: u32, ts: u64, data: &[u8], out: &mut String) {
        let c = self.common(data).unwrap_or(Common { id: 0, flags: 0, preempt_count: 0, pid: 0 });
        out.push_str("{\"ts\":");
        text::push_u64(out, ts);
        out.push_str(",\"cpu\":");
        text::push_u64(out, cpu as u64);
        out.push_str(",\"pid\":");
        text::push_i64(out, c.pid as i64);
        out.push_str(",\"comm\":");
        push_json_str(out, self.tables.cmdlines.comm(c.pid));
        out.push_str(",\"flags\":");
        text::push_u64(out, c.flags as u64);
        out.push_str(",\"preempt_count\":");
        text::push_u64(out, c.preempt_count as u64);
        match self.event(c.id) {
            Some(ev) => {
                out.push_str(",\"system\":");
                push_json_str(out, &ev.format.system);
                out.push_str(",\"event\":");
                push_json_str(out, &ev.format.name);
                out.push_str(",\"fields\":{");
                for (i, f) in ev.format.fields.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    push_json_str(out, &f.name);
                    out.push(':');
                    field_value(f, data, self.options.big_endian).write(out, true);
                }
                out.push_str("},\"text\":");
                let mut t = String::new();
                self.render_text(data, &mut t);
                push_json_str(out, &t);
            }
            None => {
                out.push_str(",\"event\":null,\"id\":");
                text::push_u64(out, c.id as u64);
            }
        }
        out.push('}');
    }
}

/// A field's value, typed for `--raw` and JSON.
enum Value {
    Int(i128),
    Str(String),
    Ints(Vec<i128>),
    Missing,
}

impl Value {
    /// `--raw` text (`json` false) or a JSON value.
    fn write(&self, out: &mut String, json: bool) {
        match self {
            Value::Int(v) => out.push_str(&v.to_string()),
            Value::Str(s) if json => push_json_str(out, s),
            Value::Str(s) => out.push_str(s),
            Value::Ints(v) => {
                out.push('[');
                for (i, x) in v.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&x.to_string());
                }
                out.push(']');
            }
            Value::Missing => out.push_str(if json { "null" } else { "<truncated>" }),
        }
    }
}

fn field_value(f: &Field, data: &[u8], be: bool) -> Value {
    match f.kind {
        FieldKind::Scalar | FieldKind::Pointer => {
            f.read_int(data, be).map(Value::Int).unwrap_or(Value::Missing)
        }
        _ => {
            let Some(bytes) = f.bytes(data, be) else { return Value::Missing };
            if f.is_string() {
                let end = memchr::memchr(0, bytes).unwrap_or(bytes.len());
                return Value::Str(String::from_utf8_lossy(&bytes[..end]).into_owned());
            }
            let n = f.element_size().max(1);
            if !matches!(n, 1 | 2 | 4 | 8) {
                return Value::Ints(bytes.iter().map(|&b| b as i128).collect());
            }
            Value::Ints(
                bytes
                    .chunks_exact(n)
                    .filter_map(|c| crate::format::read_int(c, f.signed, be))
                    .collect(),
            )
        }
    }
}

/// Append `s` as a JSON string literal.
pub fn push_json_str(out: &mut String, s: &str) {
    out.push('"');
    let mut start = 0;
    for (i, b) in s.bytes().enumerate() {
        let escaped = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0..=0x1f => "",
            _ => continue,
        };
        // Every escaped byte is ASCII: `i` is a character boundary.
        out.push_str(&s[start..i]);
        match escaped {
            "" => {
                let _ = write!(out, "\\u{b:04x}");
            }
            e => out.push_str(e),
        }
        start = i + 1;
    }
    out.push_str(&s[start..]);
    out.push('"');
}

/// `s` as a JSON string (see [`push_json_str`]).
pub fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    push_json_str(&mut out, s);
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn uprobes_print_as_the_kernel_prints_them() {
        let fmt = |fields: &str, pf: &str| {
            let text = format!(
                "name: f\nID: 1\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\n{fields}\nprint fmt: {pf}\n"
            );
            super::uprobe_print_fmt(&super::EventFormat::parse("probe_x", &text).unwrap())
        };
        let entry = "\tfield:unsigned long __probe_ip;\toffset:8;\tsize:8;\tsigned:0;\n\tfield:s32 x;\toffset:16;\tsize:4;\tsigned:1;";
        assert_eq!(
            fmt(entry, "\"(%lx) x=%d\", REC->__probe_ip, REC->x").unwrap(),
            "\"(0x%lx) x=%d\", REC->__probe_ip, REC->x"
        );
        let ret = "\tfield:unsigned long __probe_func;\toffset:8;\tsize:8;\tsigned:0;\n\tfield:unsigned long __probe_ret_ip;\toffset:16;\tsize:8;\tsigned:0;\n\tfield:s32 ret;\toffset:24;\tsize:4;\tsigned:1;";
        assert_eq!(
            fmt(ret, "\"(%lx <- %lx) ret=%d\", REC->__probe_func, REC->__probe_ret_ip, REC->ret")
                .unwrap(),
            "\"(0x%lx <- 0x%lx) ret=%d\", REC->__probe_ret_ip, REC->__probe_func, REC->ret"
        );
        assert_eq!(
            fmt(ret, "\"(%lx <- %lx)\", REC->__probe_func, REC->__probe_ret_ip").unwrap(),
            "\"(0x%lx <- 0x%lx)\", REC->__probe_ret_ip, REC->__probe_func"
        );
        assert!(fmt(entry, "\"ip=%lx\", REC->__probe_ip").is_none());
    }

    use super::*;

    #[test]
    fn json_escapes() {
        let mut s = String::new();
        push_json_str(&mut s, "a\"b\\\n\x01\té");
        assert_eq!(s, r#""a\"b\\\n\u0001\té""#);
        assert_eq!(json_string("plain"), "\"plain\"");
    }
}
