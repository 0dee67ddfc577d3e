//! The text sink: each enabled event printed as one line like the kernel's `trace_pipe`:
//! `comm-pid [cpu] ..... secs.usecs: name: printk text`.
//!
//! The printk text comes from `tp_format::printfmt::Compiled`, the renderer `tp report`
//! uses: `trace_event!` writes its print fmt with the kernel's helpers (`__print_array`,
//! `__print_hex`, `__get_str`), which that renderer knows.

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
    match compiled {
        Some(c) => c.render(ev.record, &render_ctx(&st.kallsyms, &st.printk), &mut st.line),
        None => st.line.push_str("[print fmt not understood]"),
    }
    st.line.push('\n');
}

fn render_ctx<'a>(kallsyms: &'a Kallsyms, printk: &'a PrintkFormats) -> RenderCtx<'a> {
    RenderCtx {
        kallsyms,
        printk,
        big_endian: false,
        long_size: 8,
        user_maps: None,
        sym: Default::default(),
    }
}

/// Render an event's printk from its record (compiling its print fmt each call: for tests
/// and tools; the sink keeps the compiled form).
pub fn render_printk(site: &Site, rec: &[u8], out: &mut String) {
    match Compiled::compile(site.format()) {
        Ok(c) => {
            let (kallsyms, printk) = (Kallsyms::default(), PrintkFormats::default());
            c.render(rec, &render_ctx(&kallsyms, &printk), out);
        }
        Err(e) => out.push_str(&format!("[print fmt not understood: {e}]")),
    }
}
