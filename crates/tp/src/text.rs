//! The text sink: each enabled event printed as one line like the kernel's `trace_pipe`:
//! `comm-pid [cpu] ..... secs.usecs: name: printk text`.
//!
//! The printk text comes from `tp_format::printfmt::Compiled` (the kernel-compatible print
//! fmt renderer) when it compiles the event's print fmt, and otherwise from the small
//! renderer here, which understands the conversions `trace_event!` accepts.

use crate::field::Layout;
use crate::registry::SinkHandle;
use crate::site::{Event, Site};
use std::collections::HashMap;
use std::io::Write;
use std::sync::{Arc, Mutex};
use tp_format::printfmt::{Compiled, RenderCtx};
use tp_format::symbols::{Kallsyms, PrintkFormats};
use tp_format::text::{write_context, Columns, Context};

/// Where the text goes.
pub enum TextOutput {
    Stderr,
    Writer(Box<dyn Write + Send>),
}

struct State {
    out: TextOutput,
    compiled: HashMap<usize, Option<Compiled>>,
    kallsyms: Kallsyms,
    printk: PrintkFormats,
    line: String,
}

/// A running text sink; dropping it detaches it.
#[derive(Debug)]
#[must_use = "the text sink stops when dropped"]
pub struct TextSink {
    _h: SinkHandle,
}

impl TextSink {
    /// Print enabled events to stderr.
    pub fn stderr() -> TextSink {
        Self::start(TextOutput::Stderr)
    }

    /// Print enabled events to a file (created or truncated).
    pub fn file(path: impl AsRef<std::path::Path>) -> std::io::Result<TextSink> {
        let f = std::fs::File::create(path)?;
        Ok(Self::start(TextOutput::Writer(Box::new(std::io::LineWriter::new(f)))))
    }

    /// Print enabled events to any writer.
    pub fn start(out: TextOutput) -> TextSink {
        let st = Arc::new(Mutex::new(State {
            out,
            compiled: HashMap::new(),
            kallsyms: Kallsyms::default(),
            printk: PrintkFormats::default(),
            line: String::new(),
        }));
        let h = crate::registry::add_sink(move |ev| {
            let mut st = st.lock().unwrap_or_else(|e| e.into_inner());
            let st = &mut *st;
            st.line.clear();
            format_line(st, ev);
            let _ = match &mut st.out {
                TextOutput::Stderr => std::io::stderr().write_all(st.line.as_bytes()),
                TextOutput::Writer(w) => w.write_all(st.line.as_bytes()),
            };
        });
        TextSink { _h: h }
    }
}

fn format_line(st: &mut State, ev: &Event<'_>) {
    let site = ev.site;
    thread_local! {
        static COMM: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
    }
    let comm = COMM
        .try_with(|c| {
            c.borrow_mut()
                .get_or_insert_with(|| {
                    std::fs::read_to_string("/proc/thread-self/comm").unwrap_or_default()
                })
                .clone()
        })
        .unwrap_or_default();
    // SAFETY: sched_getcpu takes no arguments.
    let cpu = unsafe { libc::sched_getcpu() }.max(0) as u32;
    let c = Context {
        comm: comm.trim(),
        pid: ev.pid(),
        tgid: None,
        cpu,
        flags: 0,
        preempt_count: 0,
        ts: ev.timestamp,
    };
    write_context(&mut st.line, &c, Columns::default(), true);
    st.line.push_str(site.name());
    st.line.push_str(": ");
    let key = site as *const Site as usize;
    let compiled = st.compiled.entry(key).or_insert_with(|| Compiled::compile(site.format()).ok());
    if let Some(c) = compiled {
        let ctx = RenderCtx {
            kallsyms: &st.kallsyms,
            printk: &st.printk,
            big_endian: false,
            long_size: 8,
        };
        c.render(ev.record, &ctx, &mut st.line);
    } else {
        render_printk(site, ev.record, &mut st.line);
    }
    st.line.push('\n');
}

/// Render an event's printk from its record with the conversions `trace_event!` accepts.
pub fn render_printk(site: &Site, rec: &[u8], out: &mut String) {
    let m = site.meta();
    let fmt = m.printk_fmt.as_bytes();
    let mut args = m.printk_args.iter();
    let mut i = 0;
    while i < fmt.len() {
        let ch = fmt[i];
        if ch != b'%' {
            let start = i;
            while i < fmt.len() && fmt[i] != b'%' {
                i += 1;
            }
            out.push_str(std::str::from_utf8(&fmt[start..i]).unwrap_or(""));
            continue;
        }
        if fmt.get(i + 1) == Some(&b'%') {
            out.push('%');
            i += 2;
            continue;
        }
        let start = i;
        i += 1;
        while i < fmt.len() && !fmt[i].is_ascii_alphabetic() {
            i += 1;
        }
        while i < fmt.len() && matches!(fmt[i], b'l' | b'h' | b'z') {
            i += 1;
        }
        let conv = fmt.get(i).copied().unwrap_or(b'd');
        i += 1;
        let spec = std::str::from_utf8(&fmt[start + 1..i - 1]).unwrap_or("");
        let (flags_w, _) = spec.split_at(spec.find(['l', 'h', 'z']).unwrap_or(spec.len()));
        let Some(name) = args.next() else { break };
        let Some(f) = m.fields.iter().find(|f| f.name == *name) else { continue };
        let value = field_text(f, rec, conv);
        pad(out, flags_w, &value);
    }
}

fn field_text(f: &crate::field::FieldDesc, rec: &[u8], conv: u8) -> String {
    let bytes = |off: usize, len: usize| rec.get(off..off + len).unwrap_or(&[]);
    let int = |b: &[u8]| -> i128 { tp_format::format::read_int(b, f.signed, false).unwrap_or(0) };
    match f.layout {
        Layout::Scalar => {
            let v = int(bytes(f.offset, f.size));
            let u = if v < 0 { (v as i64) as u64 as u128 } else { v as u128 };
            let u = if f.size < 8 && v < 0 { u & ((1u128 << (8 * f.size)) - 1) } else { u };
            match conv {
                b'd' | b'i' => v.to_string(),
                b'u' => u.to_string(),
                b'x' => format!("{u:x}"),
                b'X' => format!("{u:X}"),
                b'o' => format!("{u:o}"),
                b'c' => char::from(v as u8).to_string(),
                b'p' => format!("{u:016x}"),
                _ => v.to_string(),
            }
        }
        Layout::CharArray { len } => {
            let b = bytes(f.offset, len);
            let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
            String::from_utf8_lossy(&b[..end]).into_owned()
        }
        Layout::Array { len } => {
            let el = f.size / len.max(1);
            let b = bytes(f.offset, f.size);
            if el == 1 {
                hex(b)
            } else {
                let items: Vec<String> = b.chunks(el).map(|c| format!("0x{:x}", int(c))).collect();
                format!("{{{}}}", items.join(","))
            }
        }
        Layout::DynStr | Layout::DynBytes => {
            let loc = u32::from_le_bytes(bytes(f.offset, 4).try_into().unwrap_or([0; 4]));
            let (off, len) = ((loc & 0xffff) as usize, (loc >> 16) as usize);
            let b = bytes(off, len);
            if f.layout == Layout::DynStr {
                let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
                String::from_utf8_lossy(&b[..end]).into_owned()
            } else {
                hex(b)
            }
        }
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect::<Vec<_>>().join(" ")
}

fn pad(out: &mut String, flags_w: &str, v: &str) {
    let left = flags_w.contains('-');
    let zero = flags_w.starts_with('0') || flags_w.contains("#0");
    let w: usize = flags_w
        .trim_start_matches(['-', '+', ' ', '#', '0'])
        .split('.')
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let n = v.chars().count();
    if n >= w {
        out.push_str(v);
    } else if left {
        out.push_str(v);
        out.extend(std::iter::repeat(' ').take(w - n));
    } else {
        out.extend(std::iter::repeat(if zero { '0' } else { ' ' }).take(w - n));
        out.push_str(v);
    }
}
