//! The function_graph tracer's text (kernel/trace/trace_functions_graph.c with its default
//! options): a duration column with an overhead mark, then the call nested by depth.
//!
//! ```text
//!                |  do_IRQ() {            a call with children (funcgraph_entry)
//!   0.715 us    |    irq_enter();         a call without: its entry and return as one line
//! # 3242.027 us |  }                      the return (funcgraph_exit)
//! ```
//!
//! tp prints these after its usual context columns, where the kernel's function_graph
//! tracer prints its own (` 0) ` and so on).

use super::pointer;
use super::special::Slot;
use super::RenderCtx;
use crate::format::EventFormat;

/// Indentation is capped: a corrupt depth must not print megabytes of spaces.
const MAX_DEPTH: u64 = 256;

/// `funcgraph_exit`'s fields.
#[derive(Debug, Clone)]
pub(crate) struct Exit {
    func: Slot,
    depth: Slot,
    calltime: Slot,
    rettime: Slot,
}

impl Exit {
    pub(crate) fn of(ev: &EventFormat) -> Option<Exit> {
        Some(Exit {
            func: Slot::of(ev, "func")?,
            depth: Slot::of(ev, "depth")?,
            calltime: Slot::of(ev, "calltime")?,
            rettime: Slot::of(ev, "rettime")?,
        })
    }

    pub(crate) fn func(&self, rec: &[u8], be: bool) -> Option<u64> {
        self.func.read(rec, be)
    }

    pub(crate) fn depth(&self, rec: &[u8], be: bool) -> Option<u64> {
        self.depth.read(rec, be)
    }

    fn duration(&self, rec: &[u8], be: bool) -> Option<u64> {
        Some(self.rettime.read(rec, be)?.wrapping_sub(self.calltime.read(rec, be)?))
    }

    /// The return: duration, then `}` at the call's depth; `} /* func */` when `name_it`
    /// (the kernel names the function when it did not print the call).
    pub(crate) fn write(&self, out: &mut String, rec: &[u8], name_it: bool, ctx: &RenderCtx<'_>) {
        let be = ctx.big_endian;
        duration(out, self.duration(rec, be));
        indent(out, self.depth(rec, be));
        out.push('}');
        if name_it {
            out.push_str(" /* ");
            sym(out, self.func(rec, be), ctx);
            out.push_str(" */");
        }
    }

    /// A call without children: the call's function and depth, the return's duration.
    pub(crate) fn write_leaf(&self, out: &mut String, rec: &[u8], ctx: &RenderCtx<'_>) {
        let be = ctx.big_endian;
        duration(out, self.duration(rec, be));
        indent(out, self.depth(rec, be));
        sym(out, self.func(rec, be), ctx);
        out.push_str("();");
    }
}

/// A call with children: an empty duration column, then `func() {`.
pub(crate) fn write_call(
    out: &mut String,
    func: Option<u64>,
    depth: Option<u64>,
    ctx: &RenderCtx<'_>,
) {
    out.push_str("              |  ");
    indent(out, depth);
    sym(out, func, ctx);
    out.push_str("() {");
}

/// `%ps`.
fn sym(out: &mut String, func: Option<u64>, ctx: &RenderCtx<'_>) {
    match func {
        Some(f) => pointer::symbol(out, f, false, false, ctx),
        None => out.push_str(super::render::BAD),
    }
}

/// Two spaces per level (TRACE_GRAPH_INDENT).
fn indent(out: &mut String, depth: Option<u64>) {
    // `depth` is a C int: a negative one (sign-extended or not) indents nothing.
    let d = depth.filter(|&d| d < 1 << 31).unwrap_or(0).min(MAX_DEPTH);
    out.extend(std::iter::repeat_n(' ', 2 * d as usize));
}

/// print_graph_duration: the overhead mark (trace_find_mark), the time in microseconds with
/// at most seven digits, ` us `, padding to the column, `|  `.
fn duration(out: &mut String, ns: Option<u64>) {
    let Some(ns) = ns else {
        out.push_str("  ?            |  ");
        return;
    };
    const MARKS: [(u64, char); 6] = [
        (1_000_000_000, '$'),
        (100_000_000, '@'),
        (10_000_000, '*'),
        (1_000_000, '#'),
        (100_000, '!'),
        (10_000, '+'),
    ];
    out.push(MARKS.iter().find(|(limit, _)| ns > *limit).map_or(' ', |m| m.1));
    out.push(' ');
    let usecs = (ns / 1000).to_string();
    let mut len = usecs.len();
    out.push_str(&usecs);
    if len < 7 {
        // `snprintf(nsecs_str, min(5, 8 - len), "%03lu", rem)`: as many digits as fit.
        let rem = format!("{:03}", ns % 1000);
        let keep = rem.len().min(7 - len);
        out.push('.');
        out.push_str(&rem[..keep]);
        len += keep + 1;
    }
    out.push_str(" us ");
    out.extend(std::iter::repeat_n(' ', 8usize.saturating_sub(len)));
    out.push_str("|  ");
}

#[cfg(test)]
mod tests {
    use super::duration;

    #[test]
    fn durations_as_the_kernel_prints_them() {
        let d = |ns| {
            let mut s = String::new();
            duration(&mut s, Some(ns));
            s
        };
        // Widths from the kernel's print_graph_duration: the column is 14 wide.
        assert_eq!(d(58), "  0.058 us    |  ");
        assert_eq!(d(75_516), "+ 75.516 us   |  ");
        assert_eq!(d(376_249), "! 376.249 us  |  ");
        assert_eq!(d(3_242_027), "# 3242.027 us |  ");
        assert_eq!(d(12_345_678), "* 12345.67 us |  ");
        assert_eq!(d(123_456_789), "@ 123456.7 us |  ");
        assert_eq!(d(1_234_567_890), "$ 1234567 us  |  ");
        assert_eq!(d(10_000), "  10.000 us   |  ");
        assert_eq!(d(10_001), "+ 10.001 us   |  ");
    }
}
