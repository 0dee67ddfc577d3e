//! trace.dat files from other machines: older kernels, 32-bit and big-endian ones, other
//! page sizes, v6 files, one CPU or several, the function and function_graph tracers.
//!
//! The files are made here by tp's own writer to imitate files recorded elsewhere by
//! trace-cmd (`fixtures/tracedat/README.md`, "Files from other machines", names the
//! public files they imitate and that `tp report` was checked against). Set
//! `TP_FOREIGN_DIR=DIR` to keep them in DIR (for `trace-cmd report -i DIR/NAME.dat`).
//! Needs no root.

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::process::Command;

use tp_format::header::HeaderPage;
use tp_format::page::{Missed, PageBuilder, PageLayout};
use tp_format::tracedat::{BufferPages, Compression, CpuPages, Metadata, Writer, WriterOptions};

const TP: &str = env!("CARGO_BIN_EXE_tp");

/// A machine that recorded a trace.
struct Machine {
    name: &'static str,
    uname: &'static str,
    big_endian: bool,
    /// sizeof(long) of its kernel.
    long: usize,
    page_size: usize,
    /// trace.dat version trace-cmd wrote (6: trace-cmd 2.x).
    version: u32,
    cpus: u32,
    /// Where its kernel text starts.
    text: u64,
}

const I686_4_13: Machine = Machine {
    name: "i686-4.13",
    uname: "Linux buildroot 4.13.9 i686",
    big_endian: false,
    long: 4,
    page_size: 4096,
    version: 6,
    cpus: 1,
    text: 0xc100_0000,
};

/// The same machine's file from `trace-cmd listen`, which stores no uname: its formats
/// say how old its kernel is (`sched_wakeup` still has `success`).
const I686_LISTEN: Machine = Machine { name: "i686-listen", uname: "", ..I686_4_13 };

const ARMV7_4_14: Machine = Machine {
    name: "armv7l-4.14",
    uname: "Linux wega 4.14.15-wega-lx armv7l",
    big_endian: false,
    long: 4,
    page_size: 4096,
    version: 7,
    cpus: 2,
    text: 0xc000_8000,
};

const MIPS_4_19: Machine = Machine {
    name: "mips-4.19",
    uname: "Linux router 4.19.150 mips",
    big_endian: true,
    long: 4,
    page_size: 16384,
    version: 6,
    cpus: 1,
    text: 0x8000_0000,
};

const PPC64_5_15: Machine = Machine {
    name: "ppc64-5.15",
    uname: "Linux power 5.15.0-91-generic ppc64",
    big_endian: true,
    long: 8,
    page_size: 65536,
    version: 7,
    cpus: 2,
    text: 0xc000_0000_0000_0000,
};

const X86_64_6_8: Machine = Machine {
    name: "x86_64-6.8",
    uname: "Linux laptop 6.8.0-45-generic x86_64",
    big_endian: false,
    long: 8,
    page_size: 4096,
    version: 7,
    cpus: 2,
    text: 0xffff_ffff_8100_0000,
};

/// Symbols, as offsets from the kernel's text.
const SYMBOLS: &[(u64, &str)] = &[
    (0x0, "_stext"),
    (0x5_0000, "__schedule"),
    (0x5_0400, "schedule"),
    (0x6_0000, "do_IRQ"),
    (0x6_0200, "irq_enter"),
    (0x6_0300, "irq_exit"),
    (0x6_0400, "ret_from_intr"),
    (0x6_0500, "handle_irq"),
    (0x7_0000, "__wake_up"),
    (0x7_0100, "vfs_read"),
    (0x7_0300, "_raw_spin_lock"),
    (0x7_0400, "ksys_read"),
    (0x8_0000, "_etext"),
];

fn sym(m: &Machine, name: &str) -> u64 {
    m.text + SYMBOLS.iter().find(|s| s.1 == name).unwrap().0
}

const FUNCTION: u16 = 1;
const KERNEL_STACK: u16 = 4;
const GRAPH_EXIT: u16 = 10;
const GRAPH_ENTRY: u16 = 11;
const IRQ_HANDLER_ENTRY: u16 = 100;

/// A format file's text with the common fields.
fn format_text(name: &str, id: u16, fields: &[(&str, usize, usize, bool)], fmt: &str) -> String {
    let mut s = format!(
        "name: {name}\nID: {id}\nformat:\n\
         \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
         \tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
         \tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
         \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n"
    );
    for (decl, off, size, signed) in fields {
        s += &format!("\tfield:{decl};\toffset:{off};\tsize:{size};\tsigned:{};\n", *signed as u8);
    }
    s + &format!("\nprint fmt: {fmt}\n")
}

/// The ftrace formats of the machine's kernel: the print fmts show raw `%lx` addresses,
/// as the kernels of that age published them.
fn ftrace_formats(m: &Machine) -> Vec<String> {
    let l = m.long;
    let exit = if l == 4 {
        // i686 4.13: overrun packed after func.
        vec![
            ("unsigned long func", 8, 4, false),
            ("unsigned long long calltime", 16, 8, false),
            ("unsigned long long rettime", 24, 8, false),
            ("unsigned long overrun", 12, 4, false),
            ("int depth", 32, 4, true),
        ]
    } else {
        vec![
            ("unsigned long func", 8, 8, false),
            ("unsigned long long calltime", 16, 8, false),
            ("unsigned long long rettime", 24, 8, false),
            ("unsigned long overrun", 32, 8, false),
            ("int depth", 40, 4, true),
        ]
    };
    vec![
        format_text(
            "function",
            FUNCTION,
            &[("unsigned long ip", 8, l, false), ("unsigned long parent_ip", 8 + l, l, false)],
            "\" %lx <-- %lx\", REC->ip, REC->parent_ip",
        ),
        format_text(
            "kernel_stack",
            KERNEL_STACK,
            &[("int size", 8, 4, true), ("unsigned long caller[8]", 8 + l, 8 * l, false)],
            "\"\\t=> (%08lx)\\n\", REC->caller[0]",
        ),
        format_text(
            "funcgraph_exit",
            GRAPH_EXIT,
            &exit,
            "\"<-- %lx (%d) (start: %llx  end: %llx) over: %d\", REC->func, REC->depth, \
             REC->calltime, REC->rettime, REC->depth",
        ),
        format_text(
            "funcgraph_entry",
            GRAPH_ENTRY,
            &[("unsigned long func", 8, l, false), ("int depth", 8 + l, 4, true)],
            "\"--> %lx (%d)\", REC->func, REC->depth",
        ),
    ]
}

/// A record's bytes in the machine's byte order.
struct Rec<'m> {
    m: &'m Machine,
    b: Vec<u8>,
}

impl<'m> Rec<'m> {
    fn new(m: &'m Machine, id: u16, flags: u8, pc: u8, pid: i32, size: usize) -> Rec<'m> {
        let mut r = Rec { m, b: vec![0; size] };
        r.put(0, id as u64, 2);
        r.b[2] = flags;
        r.b[3] = pc;
        r.put(4, pid as u32 as u64, 4);
        r
    }

    fn put(&mut self, at: usize, v: u64, size: usize) -> &mut Self {
        let bytes = if self.m.big_endian { v.to_be_bytes() } else { v.to_le_bytes() };
        let src = if self.m.big_endian { &bytes[8 - size..] } else { &bytes[..size] };
        self.b[at..at + size].copy_from_slice(src);
        self
    }
}

/// One event of the script: CPU, time (ns), record.
type Event = (u32, u64, Vec<u8>);

struct Script<'m> {
    m: &'m Machine,
    events: Vec<Event>,
}

impl<'m> Script<'m> {
    fn function(&mut self, cpu: u32, ts: u64, pid: i32, pc: u8, ip: u64, parent: u64) {
        let l = self.m.long;
        let mut r = Rec::new(self.m, FUNCTION, 0x01, pc, pid, 8 + 2 * l);
        r.put(8, ip, l).put(8 + l, parent, l);
        self.events.push((cpu, ts, r.b));
    }

    /// A kernel stack of `callers` (ended by ULONG_MAX, as the kernel fills the array).
    fn stack(&mut self, cpu: u32, ts: u64, pid: i32, callers: &[u64]) {
        let l = self.m.long;
        // `caller` follows `size` at long alignment.
        let mut r = Rec::new(self.m, KERNEL_STACK, 0x01, 0, pid, 8 + l + 8 * l);
        r.put(8, 8, 4);
        for i in 0..8 {
            let v = callers.get(i).copied().unwrap_or(u64::MAX >> (64 - 8 * l));
            r.put(8 + l + i * l, v, l);
        }
        self.events.push((cpu, ts, r.b));
    }

    fn entry(&mut self, cpu: u32, ts: u64, pid: i32, func: &str, depth: u32) {
        let l = self.m.long;
        let mut r = Rec::new(self.m, GRAPH_ENTRY, 0x01, 1, pid, 8 + l + 4);
        r.put(8, sym(self.m, func), l).put(8 + l, depth as u64, 4);
        self.events.push((cpu, ts, r.b));
    }

    fn exit(&mut self, cpu: u32, ts: u64, pid: i32, func: &str, depth: u32, ns: u64) {
        let l = self.m.long;
        let (size, overrun, d) = if l == 4 { (36, 12, 32) } else { (44, 32, 40) };
        let mut r = Rec::new(self.m, GRAPH_EXIT, 0x01, 1, pid, size);
        let call = ts - ns - 300;
        r.put(8, sym(self.m, func), l)
            .put(16, call, 8)
            .put(24, call + ns, 8)
            .put(overrun, 0, l)
            .put(d, depth as u64, 4);
        self.events.push((cpu, ts, r.b));
    }

    fn irq(&mut self, cpu: u32, ts: u64, pid: i32, irq: u32) {
        let mut r = Rec::new(self.m, IRQ_HANDLER_ENTRY, 0x09, 1, pid, 12);
        r.put(8, irq as u64, 4);
        self.events.push((cpu, ts, r.b));
    }
}

const S: u64 = 1_000_000_000;
const US: u64 = 1000;

/// The same events on every machine: function calls, a function graph with nesting, a
/// leaf, a return whose call the trace did not see, and (with two CPUs) a leaf whose
/// return comes after another CPU's event.
fn script(m: &Machine) -> Vec<Event> {
    let mut s = Script { m, events: Vec::new() };
    let t = 100 * S;
    s.function(0, t + 10 * US, 1181, 0, sym(m, "vfs_read") + 4, sym(m, "ksys_read") + 0x33);
    s.function(0, t + 20 * US, 1181, 0x12, sym(m, "irq_exit"), sym(m, "do_IRQ") + 0x9c);
    s.stack(0, t + 30 * US, 1181, &[sym(m, "vfs_read") + 4, sym(m, "ksys_read") + 0x33]);
    s.entry(0, t + 100 * US, 35, "do_IRQ", 0);
    s.entry(0, t + 101 * US, 35, "irq_enter", 1);
    s.exit(0, t + 102 * US, 35, "irq_enter", 1, 715);
    s.entry(0, t + 103 * US, 35, "handle_irq", 1);
    s.irq(0, t + 104 * US, 35, 4);
    s.exit(0, t + 150 * US, 35, "handle_irq", 1, 46_512);
    s.exit(0, t + 160 * US, 35, "do_IRQ", 0, 3_242_027);
    s.exit(0, t + 170 * US, 35, "__wake_up", 0, 1_234);
    if m.cpus > 1 {
        s.entry(1, t + 200 * US, 1181, "_raw_spin_lock", 2);
        s.function(0, t + 201 * US, 35, 0, sym(m, "schedule"), sym(m, "__schedule") + 8);
        s.exit(1, t + 202 * US, 1181, "_raw_spin_lock", 2, 58);
    }
    s.events
}

/// What `tp report` prints after the context columns for [`script`], line by line.
fn expected_bodies(m: &Machine) -> Vec<&'static str> {
    let mut v = vec![
        "vfs_read <-ksys_read",
        "irq_exit <-do_IRQ",
        "<stack trace>",
        " => vfs_read",
        " => ksys_read",
        "              |  do_IRQ() {",
        "  0.715 us    |    irq_enter();",
        "              |    handle_irq() {",
        "irq_handler_entry: irq=4",
        "+ 46.512 us   |    }",
        "# 3242.027 us |  }",
        "  1.234 us    |  } /* __wake_up */",
    ];
    if m.cpus > 1 {
        v.extend(["  0.058 us    |      _raw_spin_lock();", "schedule <-__schedule"]);
    }
    v
}

/// Write the machine's trace.dat; returns its path.
fn write(m: &Machine) -> PathBuf {
    let header = HeaderPage {
        timestamp_offset: 0,
        commit_offset: 8,
        commit_size: m.long,
        data_offset: 8 + m.long,
        data_size: m.page_size - 8 - m.long,
    };
    let layout = PageLayout::new(header, m.big_endian);
    let events = script(m);
    let mut cpus = Vec::new();
    for cpu in 0..m.cpus {
        let mine: Vec<&Event> = events.iter().filter(|e| e.0 == cpu).collect();
        let mut page = PageBuilder::new(layout, mine.first().map_or(0, |e| e.1));
        for e in &mine {
            assert!(page.push(e.1, &e.2), "the script fits one page");
        }
        let bytes = page.finish(Missed::None);
        cpus.push(CpuPages { cpu, pages: Box::new(Cursor::new(bytes)) });
    }
    let width = 2 * m.long;
    let kallsyms: String =
        SYMBOLS.iter().map(|(off, name)| format!("{:0width$x} T {name}\n", m.text + off)).collect();
    let mut event_formats = vec![(
        "irq".to_string(),
        vec![format_text(
            "irq_handler_entry",
            IRQ_HANDLER_ENTRY,
            &[("int irq", 8, 4, true)],
            "\"irq=%d\", REC->irq",
        )],
    )];
    if m.uname.is_empty() {
        let wakeup = format_text(
            "sched_wakeup",
            200,
            &[
                ("char comm[16]", 8, 16, true),
                ("pid_t pid", 24, 4, true),
                ("int prio", 28, 4, true),
                ("int success", 32, 4, true),
                ("int target_cpu", 36, 4, true),
            ],
            "\"comm=%s pid=%d prio=%d target_cpu=%03d\", REC->comm, REC->pid, REC->prio, \
             REC->target_cpu",
        );
        event_formats.push(("sched".into(), vec![wakeup]));
    }
    let meta = Metadata {
        header_page: header,
        ftrace_formats: ftrace_formats(m),
        event_formats,
        kallsyms,
        cmdlines: "1181 bash\n35 kworker/u2:2\n".into(),
        uname: Some(m.uname.to_string()).filter(|u| !u.is_empty()),
        cpu_count: m.cpus,
        ..Metadata::default()
    };
    let opts = WriterOptions {
        version: m.version,
        compression: if m.version == 6 { Compression::None } else { Compression::Zstd },
        page_size: m.page_size,
        big_endian: m.big_endian,
        long_size: m.long as u8,
        ..WriterOptions::default()
    };
    let dir = match std::env::var_os("TP_FOREIGN_DIR") {
        Some(d) => PathBuf::from(d),
        // Under the target directory: the files live as long as the test process.
        None => {
            Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("foreign-{}", std::process::id()))
        }
    };
    std::fs::create_dir_all(&dir).unwrap();
    // Tests run in parallel: one file per call.
    static SEQ: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = dir.join(format!("{}-{n}.dat", m.name));
    let mut out = std::fs::File::create(&path).unwrap();
    Writer::new(opts)
        .write(&mut out, &meta, vec![BufferPages { name: String::new(), cpus }])
        .unwrap();
    path
}

fn report(m: &Machine, args: &[&str]) -> String {
    let path = write(m);
    let out = Command::new(TP).arg("report").arg("-i").arg(&path).args(args).output().unwrap();
    assert!(out.status.success(), "{}: {}", m.name, String::from_utf8_lossy(&out.stderr));
    assert!(out.stderr.is_empty(), "{}: {}", m.name, String::from_utf8_lossy(&out.stderr));
    if std::env::var_os("TP_FOREIGN_DIR").is_none() {
        let _ = std::fs::remove_file(&path);
    }
    String::from_utf8(out.stdout).unwrap()
}

const ALL: [&Machine; 6] =
    [&I686_4_13, &I686_LISTEN, &ARMV7_4_14, &MIPS_4_19, &PPC64_5_15, &X86_64_6_8];

#[test]
fn function_and_graph_events_print_as_the_kernel_does_on_every_machine() {
    for m in ALL {
        let text = report(m, &["--no-header"]);
        // The context columns end at the timestamp's `: `.
        let bodies: Vec<&str> =
            text.lines().map(|l| l.split_once(": ").map_or(l, |(_, b)| b)).collect();
        assert_eq!(bodies, expected_bodies(m), "{}:\n{text}", m.name);
    }
}

#[test]
fn no_raw_address_where_kallsyms_names_it() {
    for m in ALL {
        let text = report(m, &[]);
        for (off, name) in SYMBOLS {
            for addr in [m.text + off, m.text + off + 4] {
                for shown in [format!("{addr:x}"), format!("{addr:08x}")] {
                    assert!(!text.contains(&shown), "{}: {shown} ({name}) in\n{text}", m.name);
                }
            }
        }
        assert!(!text.contains("0x"), "{}:\n{text}", m.name);
    }
}

#[test]
fn four_latency_columns_before_5_15_and_five_after() {
    // Linux 4.13 (i686): pid in five columns, four flag characters, the preempt count whole.
    let text = report(&I686_4_13, &[]);
    let want = "\
# tracer: nop
#
# entries-in-buffer/entries-written: 11/11   #P:1
#
#                              _-----=> irqs-off
#                             / _----=> need-resched
#                            | / _---=> hardirq/softirq
#                            || / _--=> preempt-depth
#                            ||| /     delay
#           TASK-PID   CPU#  ||||    TIMESTAMP  FUNCTION
#              | |       |   ||||       |         |
            bash-1181  [000] d...   100.000010: vfs_read <-ksys_read
            bash-1181  [000] d..12   100.000020: irq_exit <-do_IRQ
            bash-1181  [000] d...   100.000030: <stack trace>
 => vfs_read
 => ksys_read
    kworker/u2:2-35    [000] d..1   100.000100:               |  do_IRQ() {
    kworker/u2:2-35    [000] d..1   100.000101:   0.715 us    |    irq_enter();
    kworker/u2:2-35    [000] d..1   100.000103:               |    handle_irq() {
    kworker/u2:2-35    [000] d.h1   100.000104: irq_handler_entry: irq=4
    kworker/u2:2-35    [000] d..1   100.000150: + 46.512 us   |    }
    kworker/u2:2-35    [000] d..1   100.000160: # 3242.027 us |  }
    kworker/u2:2-35    [000] d..1   100.000170:   1.234 us    |  } /* __wake_up */
";
    assert_eq!(text, want);
    assert_eq!(report(&I686_LISTEN, &[]), want);
    for m in [&ARMV7_4_14, &MIPS_4_19] {
        let text = report(m, &[]);
        assert!(text.contains("\n#           TASK-PID   CPU#  ||||    TIMESTAMP  FUNCTION\n"));
        assert!(text.contains("\n    kworker/u2:2-35    [000] d..1   100.000100: "), "{text}");
    }
    // 5.15: pid in seven columns, the migrate-disable column; BH-disabled came with 5.17.
    let text = report(&PPC64_5_15, &[]);
    assert!(text.contains("\n#                                _-----=> irqs-off\n"), "{text}");
    assert!(text.contains("\n#                              ||| / _-=> migrate-disable\n"));
    assert!(text.contains("\n#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION\n"));
    // preempt count 0x12: depth 2, migrate-disable 1.
    assert!(text.contains("\n            bash-1181    [000] d..21   100.000020: irq_exit"));
    let text = report(&X86_64_6_8, &[]);
    assert!(text.contains("\n#                                _-----=> irqs-off/BH-disabled\n"));
    assert!(text.contains("\n    kworker/u2:2-35      [000] d..1.   100.000100: "), "{text}");
}

#[test]
fn raw_keeps_the_fields() {
    let text = report(&I686_4_13, &["--raw", "--no-header"]);
    let graph: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("funcgraph"))
        .map(|l| l.split_once(": ").unwrap().1)
        .collect();
    let base = I686_4_13.text;
    assert_eq!(graph[0], format!("funcgraph_entry: func={} depth=0", base + 0x6_0000));
    assert_eq!(graph.len(), 7, "{text}");
    assert!(text.contains(&format!(
        "function: ip={} parent_ip={}",
        base + 0x7_0104,
        base + 0x7_0433
    )));
}
