//! The kernel's `trace` text layout: the header block and the context columns in front of
//! each event (`kernel/trace/trace.c` print_func_help_header_irq, `trace_output.c`
//! trace_print_context and trace_print_lat_fmt).
//!
//! ```text
//!             bash-1970    [001] .....    56.079472: sched_switch: prev_comm=...
//!           <idle>-0       (-------) [000] d..2.   324.220955: ...   (record-tgid on)
//! ```

/// Which optional columns the instance printed (its `options/record-tgid` and
/// `options/irq-info`; irq-info is on by default), and as which kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Columns {
    pub tgid: bool,
    pub irq_info: bool,
    /// The layout of the kernel that recorded the trace ([`Layout::for_uname`]).
    pub layout: Layout,
}

impl Default for Columns {
    fn default() -> Self {
        Columns { tgid: false, irq_info: true, layout: Layout::default() }
    }
}

/// How the context columns and the header block looked in a kernel's `trace` file. Each
/// variant is the first kernel whose text it describes (kernel/trace/trace.c
/// print_func_help_header_irq, trace_output.c trace_print_context and trace_print_lat_fmt).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum Layout {
    /// Before 5.10: pid in 5 columns (`%16s-%-5d`), four flag characters, the preempt
    /// count printed whole (`%x`), flag 0x02 "irqs-off not supported" (`X`).
    Linux4,
    /// 5.10 ("tracing: Make the space reserved for the pid wider"): pid in 7 columns.
    Linux5_10,
    /// 5.15 ("trace: Add migrate-disabled counter to tracing output"): a fifth flag
    /// character; the preempt count's low nibble is the depth, its high one migrate-disable.
    Linux5_15,
    /// 5.17 ("tracing: Account bottom half disabled sections"): `b` and `D`, header
    /// `irqs-off/BH-disabled`.
    Linux5_17,
    /// 6.13: lazy need-resched (flag 0x02: `L`, `l`, `b`, `B`).
    #[default]
    Linux6_13,
}

impl Layout {
    /// The layout of kernel `major.minor`.
    pub fn for_version(major: u32, minor: u32) -> Layout {
        match (major, minor) {
            (0..=4, _) | (5, 0..=9) => Layout::Linux4,
            (5, 10..=14) => Layout::Linux5_10,
            (5, 15 | 16) => Layout::Linux5_15,
            (5, _) | (6, 0..=12) => Layout::Linux5_17,
            _ => Layout::Linux6_13,
        }
    }

    /// The layout of the kernel a trace file's `uname` text names. trace-cmd stores
    /// `SYSNAME NODENAME RELEASE MACHINE` (`Linux wega 4.14.15-wega-lx armv7l`): the release
    /// is the third word (a host name may look like a version), else the first word that
    /// starts with `MAJOR.MINOR`. `None` when it names none.
    pub fn for_uname(uname: &str) -> Option<Layout> {
        let version = |w: &str| {
            let mut parts = w.splitn(3, '.');
            let major: u32 = parts.next()?.parse().ok()?;
            let minor: String = parts.next()?.chars().take_while(|c| c.is_ascii_digit()).collect();
            Some(Layout::for_version(major, minor.parse().ok()?))
        };
        let words: Vec<&str> = uname.split_whitespace().collect();
        words.get(2).and_then(|w| version(w)).or_else(|| words.iter().find_map(|w| version(w)))
    }

    /// What a file's formats imply when it has no uname (trace-cmd's `listen` mode stores
    /// none): `sched_wakeup`'s `success` field was removed in 5.14, ftrace's `func_repeats`
    /// event came with 5.13. With `success`, four flag columns; 5-character pids unless
    /// `func_repeats` says 5.13 (a 5.10-5.12 kernel is taken for an older one). `None`
    /// when the formats tell nothing.
    pub fn implied_by(formats: &[crate::EventFormat]) -> Option<Layout> {
        let success = formats.iter().any(|f| {
            f.system == "sched"
                && f.name.starts_with("sched_wakeup")
                && f.field("success").is_some()
        });
        let func_repeats = formats.iter().any(|f| f.system == "ftrace" && f.name == "func_repeats");
        match (success, func_repeats) {
            (true, true) => Some(Layout::Linux5_10),
            (true, false) => Some(Layout::Linux4),
            _ => None,
        }
    }

    /// Characters of the pid in the task column.
    fn pid_width(self) -> usize {
        if self < Layout::Linux5_10 {
            5
        } else {
            7
        }
    }
}

/// `common_flags` bits (include/linux/trace_events.h, kernels 6.13 and later).
pub mod flags {
    pub const IRQS_OFF: u8 = 0x01;
    pub const NEED_RESCHED_LAZY: u8 = 0x02;
    pub const NEED_RESCHED: u8 = 0x04;
    pub const HARDIRQ: u8 = 0x08;
    pub const SOFTIRQ: u8 = 0x10;
    pub const PREEMPT_RESCHED: u8 = 0x20;
    pub const NMI: u8 = 0x40;
    pub const BH_OFF: u8 = 0x80;
}

use crate::printfmt::ascii::{self, push_ascii, AsciiWriter};

/// The header block `trace` starts with, for the nop tracer.
pub fn write_header(out: &mut String, entries: u64, written: u64, ncpus: usize, cols: Columns) {
    out.push_str("# tracer: nop\n#\n");
    out.push_str(&format!(
        "# entries-in-buffer/entries-written: {entries}/{written}   #P:{ncpus}\n#\n"
    ));
    if cols.irq_info {
        write_irq_help(out, cols);
    } else if cols.tgid {
        out.push_str("#           TASK-PID       TGID    CPU#     TIMESTAMP  FUNCTION\n");
        out.push_str("#              | |           |       |         |         |\n");
    } else {
        out.push_str("#           TASK-PID     CPU#     TIMESTAMP  FUNCTION\n");
        out.push_str("#              | |         |         |         |\n");
    }
}

/// The legend of the flag characters and the column titles, as `cols.layout`'s kernel
/// printed them (print_func_help_header_irq).
fn write_irq_help(out: &mut String, cols: Columns) {
    let old = cols.layout < Layout::Linux5_10;
    // The legend's indent: the tgid column widens it.
    let indent = match (old, cols.tgid) {
        (true, false) => 28,
        (true, true) => 36,
        (false, false) => 30,
        (false, true) => 40,
    }; // spaces after the `#`
    let five = cols.layout >= Layout::Linux5_15;
    let irqs_off = if cols.layout >= Layout::Linux5_17 {
        "  _-----=> irqs-off/BH-disabled"
    } else {
        "  _-----=> irqs-off"
    };
    let mut legend = vec![
        irqs_off,
        " / _----=> need-resched",
        "| / _---=> hardirq/softirq",
        "|| / _--=> preempt-depth",
    ];
    if five {
        legend.extend(["||| / _-=> migrate-disable", "|||| /     delay"]);
    } else {
        legend.push("||| /     delay");
    }
    for line in legend {
        out.push('#');
        out.extend(std::iter::repeat_n(' ', indent));
        out.push_str(line);
        out.push('\n');
    }
    let (title, bars) = match (old, cols.tgid, five) {
        (true, false, _) => (
            "#           TASK-PID   CPU#  ||||    TIMESTAMP  FUNCTION",
            "#              | |       |   ||||       |         |",
        ),
        (true, true, _) => (
            "#           TASK-PID    TGID   CPU#  ||||    TIMESTAMP  FUNCTION",
            "#              | |        |      |   ||||       |         |",
        ),
        (false, false, false) => (
            "#           TASK-PID     CPU#  ||||   TIMESTAMP  FUNCTION",
            "#              | |         |   ||||      |         |",
        ),
        (false, true, false) => (
            "#           TASK-PID       TGID    CPU#  ||||   TIMESTAMP  FUNCTION",
            "#              | |           |       |   ||||      |         |",
        ),
        (false, false, true) => (
            "#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION",
            "#              | |         |   |||||     |         |",
        ),
        (false, true, true) => (
            "#           TASK-PID       TGID    CPU#  |||||  TIMESTAMP  FUNCTION",
            "#              | |           |       |   |||||     |         |",
        ),
    };
    out.push_str(title);
    out.push('\n');
    out.push_str(bars);
    out.push('\n');
}

/// What the context columns show for one event.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    pub comm: &'a str,
    pub pid: i32,
    /// Only printed with [`Columns::tgid`]; `None` prints `(-------)`.
    pub tgid: Option<i32>,
    pub cpu: u32,
    pub flags: u8,
    pub preempt_count: u8,
    pub ts: u64,
}

/// Write `comm-pid [cpu] flags  secs.usecs: ` as the kernel does. `ts_in_ns` is true for the
/// nanosecond clocks (local, global, mono, boot, ...); counter clocks print the raw count.
pub fn write_context(out: &mut String, c: &Context<'_>, cols: Columns, ts_in_ns: bool) {
    // The whole prefix is collected on the stack and appended in one copy.
    let mut w = AsciiWriter::new(out);
    task(&mut w, c.comm, c.pid, cols.layout.pid_width());
    after_task(&mut w, c, cols, ts_in_ns);
}

/// As [`write_context`], with the task column given as [`task_column`] formats it (renderers
/// keep it per pid); `c.comm` and `c.pid` are not used. Only for layouts with 7-character
/// pids (5.10 on): [`Columns::task_column_cached`].
pub fn write_context_with_task(
    out: &mut String,
    task: &str,
    c: &Context<'_>,
    cols: Columns,
    ts_in_ns: bool,
) {
    if let Some(rest) = common_columns(c, cols, ts_in_ns) {
        out.push_str(task);
        push_ascii(out, &rest);
        return;
    }
    let mut w = AsciiWriter::new(out);
    w.str(task);
    after_task(&mut w, c, cols, ts_in_ns);
}

/// The task column, `%16s-%-7d ` of comm and pid.
pub fn task_column(comm: &str, pid: i32) -> String {
    let mut s = String::new();
    task(&mut AsciiWriter::new(&mut s), comm, pid, 7);
    s
}

impl Columns {
    /// Whether [`task_column`]'s text (7-character pid) is this layout's task column.
    pub fn task_column_cached(&self) -> bool {
        self.layout.pid_width() == 7
    }
}

/// `%16s-%-5d ` or `%16s-%-7d `.
fn task(w: &mut AsciiWriter<'_>, comm: &str, pid: i32, pid_width: usize) {
    // "%16s-%-7d "
    // Comms are ASCII in practice; count chars only when they are not.
    let n = if comm.is_ascii() { comm.len() } else { comm.chars().count() };
    w.repeat(b' ', 16usize.saturating_sub(n));
    w.str(comm);
    w.byte(b'-');
    let pid = Digits::signed(pid as i64);
    if pid.neg {
        w.byte(b'-');
    }
    w.bytes(pid.as_bytes());
    w.repeat(b' ', pid_width.saturating_sub(pid.len()));
    w.byte(b' ');
}

/// The columns after the task in the usual case (no TGID column, flags shown, nanosecond
/// clock, CPU below 1000, under 100000 seconds) at fixed positions:
/// `[001] d..2.   324.220955: `. `None` otherwise.
fn common_columns(c: &Context<'_>, cols: Columns, ts_in_ns: bool) -> Option<[u8; 26]> {
    let usecs = c.ts.saturating_add(500) / 1000;
    let secs = usecs / 1_000_000;
    if cols.tgid
        || !cols.irq_info
        || !ts_in_ns
        || c.cpu >= 1000
        || secs >= 100_000
        || cols.layout < Layout::Linux5_15
    {
        return None;
    }
    let mut b = *b"[000] ..... 00000.000000: ";
    let cpu = c.cpu as usize;
    b[1] = b'0' + (cpu / 100) as u8;
    b[2] = b'0' + (cpu / 10 % 10) as u8;
    b[3] = b'0' + (cpu % 10) as u8;
    b[6..11].copy_from_slice(lat_fmt(c.flags, c.preempt_count, cols.layout).as_bytes());
    // `%5lu`: right-aligned seconds.
    let mut v = secs;
    let mut i = 16;
    loop {
        b[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
        i -= 1;
    }
    b[12..i].fill(b' ');
    b[18..24].copy_from_slice(&ascii::Digits::six((usecs % 1_000_000) as u32));
    Some(b)
}

/// The columns after the task: TGID, CPU, flags, time.
fn after_task(w: &mut AsciiWriter<'_>, c: &Context<'_>, cols: Columns, ts_in_ns: bool) {
    if cols.tgid {
        let width = cols.layout.pid_width();
        match c.tgid {
            Some(t) if t != 0 => {
                w.byte(b'(');
                let d = Digits::signed(t as i64);
                w.repeat(b' ', width.saturating_sub(d.len()));
                if d.neg {
                    w.byte(b'-');
                }
                w.bytes(d.as_bytes());
                w.bytes(b") ");
            }
            _ if width == 5 => w.bytes(b"(-----) "),
            _ => w.bytes(b"(-------) "),
        }
    }
    // "[%03d] "
    w.byte(b'[');
    let d = Digits::unsigned(c.cpu as u64);
    w.repeat(b'0', 3usize.saturating_sub(d.len()));
    w.bytes(d.as_bytes());
    w.bytes(b"] ");
    if cols.irq_info {
        w.bytes(lat_fmt(c.flags, c.preempt_count, cols.layout).as_bytes());
    }
    timestamp(w, c.ts, ts_in_ns);
    w.bytes(b": ");
}

/// The flag characters as `layout`'s kernel printed them: irqs-off (and BH-disabled from
/// 5.17), need-resched, hardirq/softirq, preempt depth, and from 5.15 migrate-disable depth.
pub fn write_lat_fmt(out: &mut String, f: u8, preempt: u8, layout: Layout) {
    AsciiWriter::new(out).bytes(lat_fmt(f, preempt, layout).as_bytes());
}

/// Up to six flag characters (four before 5.15, where a preempt count over 15 takes two).
struct LatFmt {
    buf: [u8; 6],
    len: usize,
}

impl LatFmt {
    fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

fn lat_fmt(f: u8, preempt: u8, layout: Layout) -> LatFmt {
    use flags::*;
    const HEX: &[u8; 16] = b"0123456789abcdef";
    // Before 6.13 flag 0x02 was TRACE_FLAG_IRQS_NOSUPPORT; 0x80 (BH off) came with 5.17
    // and is never set before.
    let lazy = layout >= Layout::Linux6_13;
    let bh_off = f & BH_OFF != 0;
    let irqs_off = f & IRQS_OFF != 0;
    let irq = match (irqs_off, bh_off) {
        (true, true) => b'D',
        (true, false) => b'd',
        (false, true) => b'b',
        (false, false) if !lazy && f & NEED_RESCHED_LAZY != 0 => b'X',
        (false, false) => b'.',
    };
    let resched_bits = if lazy {
        NEED_RESCHED | NEED_RESCHED_LAZY | PREEMPT_RESCHED
    } else {
        NEED_RESCHED | PREEMPT_RESCHED
    };
    let resched = match f & resched_bits {
        x if x == NEED_RESCHED | NEED_RESCHED_LAZY | PREEMPT_RESCHED => b'B',
        x if x == NEED_RESCHED | PREEMPT_RESCHED => b'N',
        x if x == NEED_RESCHED_LAZY | PREEMPT_RESCHED => b'L',
        x if x == NEED_RESCHED | NEED_RESCHED_LAZY => b'b',
        NEED_RESCHED => b'n',
        PREEMPT_RESCHED => b'p',
        NEED_RESCHED_LAZY => b'l',
        _ => b'.',
    };
    let (nmi, hard, soft) = (f & NMI != 0, f & HARDIRQ != 0, f & SOFTIRQ != 0);
    let ctx = match (nmi, hard, soft) {
        (true, true, _) => b'Z',
        (true, false, _) => b'z',
        (false, true, true) => b'H',
        (false, true, false) => b'h',
        (false, false, true) => b's',
        _ => b'.',
    };
    let mut l = LatFmt { buf: [irq, resched, ctx, b'.', b'.', b'.'], len: 4 };
    if layout < Layout::Linux5_15 {
        // `%x` of the whole count.
        match preempt {
            0 => {}
            1..=15 => l.buf[3] = HEX[preempt as usize],
            _ => {
                l.buf[3] = HEX[(preempt >> 4) as usize];
                l.buf[4] = HEX[(preempt & 0xf) as usize];
                l.len = 5;
            }
        }
        return l;
    }
    let depth = preempt & 0xf;
    let migrate = preempt >> 4;
    if depth != 0 {
        l.buf[3] = HEX[depth as usize];
    }
    if migrate != 0 {
        l.buf[4] = HEX[migrate as usize];
    }
    l.len = 5;
    l
}

/// `" %5lu.%06lu"` of the timestamp rounded to microseconds (the kernel's ns2usecs adds 500
/// before dividing), or `" %12llu"` for counter clocks.
pub fn write_timestamp(out: &mut String, ts: u64, ts_in_ns: bool) {
    timestamp(&mut AsciiWriter::new(out), ts, ts_in_ns);
}

fn timestamp(w: &mut AsciiWriter<'_>, ts: u64, ts_in_ns: bool) {
    w.byte(b' ');
    if !ts_in_ns {
        let d = Digits::unsigned(ts);
        w.repeat(b' ', 12usize.saturating_sub(d.len()));
        w.bytes(d.as_bytes());
        return;
    }
    let usecs = ts.saturating_add(500) / 1000;
    let secs = Digits::unsigned(usecs / 1_000_000);
    w.repeat(b' ', 5usize.saturating_sub(secs.len()));
    w.bytes(secs.as_bytes());
    w.byte(b'.');
    w.bytes(&ascii::Digits::six((usecs % 1_000_000) as u32));
}

/// `CPU:N [LOST M EVENTS]`, printed before the first event after a gap; an unknown count
/// prints `CPU:N [LOST EVENTS]`.
pub fn write_lost(out: &mut String, cpu: u32, count: Option<u64>) {
    out.push_str("CPU:");
    push_u64(out, cpu as u64);
    match count {
        Some(n) => {
            out.push_str(" [LOST ");
            push_u64(out, n);
            out.push_str(" EVENTS]\n");
        }
        None => out.push_str(" [LOST EVENTS]\n"),
    }
}

/// True for trace clocks whose timestamps are nanoseconds (printed as seconds.micros).
pub fn clock_is_ns(clock: &str) -> bool {
    !matches!(clock, "counter" | "x86-tsc" | "uptime" | "ppc-tb")
}

/// A number's decimal digits, formatted on the stack.
pub struct Digits {
    digits: ascii::Digits,
    neg: bool,
}

impl Digits {
    pub fn unsigned(v: u64) -> Digits {
        Digits { digits: ascii::Digits::dec(v), neg: false }
    }

    pub fn signed(v: i64) -> Digits {
        Digits { digits: ascii::Digits::dec(v.unsigned_abs()), neg: v < 0 }
    }

    /// Characters including the sign.
    pub fn len(&self) -> usize {
        self.digits.len() + self.neg as usize
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    /// The digits without the sign.
    fn as_bytes(&self) -> &[u8] {
        self.digits.as_bytes()
    }

    pub fn push_to(&self, out: &mut String) {
        let mut w = AsciiWriter::new(out);
        if self.neg {
            w.byte(b'-');
        }
        w.bytes(self.as_bytes());
    }
}

/// Append a decimal unsigned integer without going through `fmt`.
pub fn push_u64(out: &mut String, v: u64) {
    ascii::Digits::dec(v).push_to(out);
}

/// Append a decimal signed integer.
pub fn push_i64(out: &mut String, v: i64) {
    Digits::signed(v).push_to(out);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(comm: &str, pid: i32, cpu: u32, flags: u8, pc: u8, ts: u64) -> String {
        let mut s = String::new();
        let c = Context { comm, pid, tgid: None, cpu, flags, preempt_count: pc, ts };
        write_context(&mut s, &c, Columns::default(), true);
        s
    }

    #[test]
    fn matches_kernel_lines() {
        // Lines from this machine's /sys/kernel/tracing/instances/X/trace.
        assert_eq!(
            ctx("bash", 1970, 1, 0, 0, 56_079_472_000),
            "            bash-1970    [001] .....    56.079472: "
        );
        assert_eq!(
            ctx("<idle>", 0, 0, 0x01, 2, 324_220_955_400),
            "          <idle>-0       [000] d..2.   324.220955: "
        );
        // Rounding to the nearest microsecond, as ns2usecs does.
        assert_eq!(
            ctx("a", 1, 0, 0, 0, 1_999_999_500),
            "               a-1       [000] .....     2.000000: "
        );
        let mut s = String::new();
        let c = Context {
            comm: "bash",
            pid: 24400,
            tgid: Some(24400),
            cpu: 1,
            flags: 1,
            preempt_count: 2,
            ts: 324_221_012_000,
        };
        write_context(&mut s, &c, Columns { tgid: true, ..Columns::default() }, true);
        assert_eq!(s, "            bash-24400   (  24400) [001] d..2.   324.221012: ");
    }

    #[test]
    fn cached_task_column_gives_the_same_line() {
        let cols = [
            Columns::default(),
            Columns { tgid: true, ..Columns::default() },
            Columns { irq_info: false, ..Columns::default() },
        ];
        for (pid, comm) in [(1970, "bash"), (7, "a-very-long-comm-name"), (-3, "é"), (0, "<idle>")]
        {
            for cpu in [0, 7, 42, 999, 1000, 4096] {
                for ts in [0, 499, 500, 56_079_472_000, 99_999_999_999_499, 99_999_999_999_500] {
                    for (flags, pc) in [(0, 0), (0x9d, 0x21)] {
                        for &cols in &cols {
                            for ns in [true, false] {
                                let c = Context {
                                    comm,
                                    pid,
                                    tgid: Some(12),
                                    cpu,
                                    flags,
                                    preempt_count: pc,
                                    ts,
                                };
                                let (mut a, mut b) = (String::new(), String::new());
                                write_context(&mut a, &c, cols, ns);
                                let task = task_column(comm, pid);
                                write_context_with_task(&mut b, &task, &c, cols, ns);
                                assert_eq!(a, b);
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn flag_characters() {
        let lat = |f, p| {
            let mut s = String::new();
            write_lat_fmt(&mut s, f, p, Layout::default());
            s
        };
        use flags::*;
        assert_eq!(lat(IRQS_OFF | BH_OFF, 0), "D....");
        assert_eq!(lat(BH_OFF | SOFTIRQ, 0x11), "b.s11");
        assert_eq!(lat(NEED_RESCHED | PREEMPT_RESCHED | HARDIRQ, 0), ".Nh..");
        assert_eq!(lat(NEED_RESCHED_LAZY | HARDIRQ | SOFTIRQ, 0x2f), ".lHf2");
        assert_eq!(lat(NMI | HARDIRQ, 0), "..Z..");
        assert_eq!(lat(NEED_RESCHED | NEED_RESCHED_LAZY | PREEMPT_RESCHED, 0), ".B...");
    }

    #[test]
    fn layout_from_uname() {
        let l = |u| Layout::for_uname(u);
        assert_eq!(l("Linux buildroot 4.13.9 i686"), Some(Layout::Linux4));
        assert_eq!(l("Linux wega 4.14.15-wega-lx armv7l"), Some(Layout::Linux4));
        assert_eq!(l("Linux 10.0.2.15 5.10.0-8-amd64 x86_64"), Some(Layout::Linux5_10));
        assert_eq!(l("Linux buildroot 5.15.18 i686"), Some(Layout::Linux5_15));
        assert_eq!(l("Linux h 5.16.0 x86_64"), Some(Layout::Linux5_15));
        assert_eq!(l("Linux h 5.17.1 x86_64"), Some(Layout::Linux5_17));
        assert_eq!(l("Linux h 6.12.10 x86_64"), Some(Layout::Linux5_17));
        assert_eq!(l("Linux h 6.13.0 x86_64"), Some(Layout::Linux6_13));
        assert_eq!(l("Linux h 6.18.0-rc1+ x86_64"), Some(Layout::Linux6_13));
        assert_eq!(l("3.10.0-1160.el7.x86_64"), Some(Layout::Linux4));
        assert_eq!(l("Linux"), None);
        assert_eq!(l(""), None);
    }

    #[test]
    fn old_kernels_flags() {
        let lat = |f, p, layout| {
            let mut s = String::new();
            write_lat_fmt(&mut s, f, p, layout);
            s
        };
        use flags::*;
        // Before 5.15 the preempt count prints whole; 0x02 was "irqs-off not supported".
        assert_eq!(lat(IRQS_OFF | HARDIRQ, 2, Layout::Linux4), "d.h2");
        assert_eq!(lat(0, 0x12, Layout::Linux4), "...12");
        assert_eq!(lat(NEED_RESCHED_LAZY, 0, Layout::Linux5_15), "X....");
        assert_eq!(lat(NEED_RESCHED | NEED_RESCHED_LAZY, 0, Layout::Linux5_17), "Xn...");
        assert_eq!(lat(NEED_RESCHED | NEED_RESCHED_LAZY, 0, Layout::Linux6_13), ".b...");
        assert_eq!(lat(0, 0x12, Layout::Linux5_15), "...21");
    }

    #[test]
    fn lost_and_header() {
        let mut s = String::new();
        write_lost(&mut s, 3, Some(17));
        write_lost(&mut s, 0, None);
        assert_eq!(s, "CPU:3 [LOST 17 EVENTS]\nCPU:0 [LOST EVENTS]\n");
        let mut h = String::new();
        write_header(&mut h, 26, 26, 2, Columns { tgid: true, ..Columns::default() });
        assert!(h.contains(
            "#                                          _-----=> irqs-off/BH-disabled\n"
        ));
        assert!(h.contains("# entries-in-buffer/entries-written: 26/26   #P:2\n"));
    }
}
