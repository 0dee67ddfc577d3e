//! The kernel is the oracle: in a private instance, every event is enabled for a short burst
//! of varied work; then the kernel's own `trace` text is read, the same buffer is captured
//! raw (`per_cpu/cpuN/trace_pipe_raw`) and tp decodes and renders it with the whole pipeline
//! (page decoder, per-CPU merge, print fmts, context columns, header block). Every line must
//! be identical. Pointer hashing is turned off in the instance, so nothing is tolerated.
//!
//! Needs root and tracefs (CI runs as root); fails loudly without them.

use std::collections::BTreeMap;
use std::io::{Read, Write};

use tp_format::page::PageLayout;
use tp_format::render::{Options, Renderer, SymFlags, Tables};
use tp_format::symbols::{Cmdlines, Kallsyms, PrintkFormats, UserMaps};
use tp_format::text::{self, Columns};
use tp_format::tracedat::{Item, PageSource, ReadPages, Records};
use tp_format::EventFormat;
use tp_tracefs::{Instance, Tracefs};

/// Processes, files, sockets, memory, pipes, signals and a trace_marker write.
fn workload(inst: &Instance) {
    // One directory per run: the tests of this file run in parallel.
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("tp-fidelity-{}-{run}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for i in 0..3 {
        let p = dir.join(format!("f{i}"));
        let mut f = std::fs::File::create(&p).unwrap();
        f.write_all(&vec![b'x'; 64 * 1024]).unwrap();
        f.sync_all().unwrap();
        std::fs::rename(&p, dir.join(format!("g{i}"))).unwrap();
    }
    let _ = std::process::Command::new("sh")
        .args(["-c", "ls -la /proc/self/ /usr/bin >/dev/null; cat /etc/hostname | wc -c >/dev/null; sleep 0.02; kill -USR1 $$ 2>/dev/null; true"])
        .status();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = [0u8; 5];
        s.read_exact(&mut buf).unwrap();
        s.write_all(b"world").unwrap();
    });
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.write_all(b"hello").unwrap();
    let mut buf = [0u8; 5];
    c.read_exact(&mut buf).unwrap();
    server.join().unwrap();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.send_to(b"ping", udp.local_addr().unwrap()).unwrap();
    let _ = udp.recv(&mut buf);
    let mut v: Vec<u8> = vec![0; 8 << 20];
    for i in (0..v.len()).step_by(4096) {
        v[i] = i as u8;
    }
    std::hint::black_box(&v);
    drop(v);
    std::fs::remove_dir_all(&dir).unwrap();
    inst.write("trace_marker", "tp fidelity marker").unwrap();
}

fn all_formats(tfs: &Tracefs) -> Vec<EventFormat> {
    let mut formats = Vec::new();
    for sys in tfs.systems().expect("list event systems") {
        for ev in tfs.system_events(&sys).expect("list events") {
            // Every format file must parse (the format test counts them all too).
            formats.push(tfs.event_format(&ev).unwrap_or_else(|e| panic!("{e}")));
        }
    }
    formats
}

/// `ours` equals `kernel` when each `[?]` in `ours` stands for one run of non-blank
/// characters.
fn matches_with_unknowns(kernel: &str, ours: &str) -> bool {
    let mut parts = ours.split("[?]");
    let Some(first) = parts.next() else { return false };
    let Some(mut rest) = kernel.strip_prefix(first) else { return false };
    for part in parts {
        let end = rest.find(' ').unwrap_or(rest.len());
        if end == 0 {
            return false;
        }
        match rest[end..].strip_prefix(part) {
            Some(r) => rest = r,
            None => return false,
        }
    }
    rest.is_empty()
}

/// What comparing the kernel's text with tp's rendering of the same buffer found.
struct Outcome {
    entries: u64,
    per_type: BTreeMap<String, usize>,
    differing: BTreeMap<String, usize>,
    kernel_lines: usize,
    tp_lines: usize,
    /// tp's text (header and events).
    ours: String,
}

/// A private instance for the oracle: big, pointer hashing off, no overwriting (a full
/// buffer drops new events instead of overwriting old ones: the kernel's `trace` iterator
/// and the consuming raw read account overwritten pages differently; the iterator prints no
/// `[LOST N EVENTS]` line for an overrun before it started).
fn oracle_instance(tfs: &Tracefs, tag: &str) -> Instance {
    let name = format!("tp-fidelity-{tag}-{}", std::process::id());
    let inst = Instance::create_named(tfs, &name).expect("create a private instance");
    inst.set_tracing_on(false).unwrap();
    inst.set_buffer_size_kb(16 << 10).unwrap();
    inst.set_option("hash-ptr", false).unwrap();
    inst.set_option("overwrite", false).unwrap();
    inst
}

/// Read the kernel's `trace` text of `inst` (tracing off), then drain the same buffer raw,
/// remove the instance, render it with tp's pipeline and compare line by line.
/// `user_maps`: processes' maps, for an instance with `sym-userobj` on.
/// `sym`: the instance's `sym-offset` and `sym-addr` options.
fn compare_with_kernel(
    tfs: &Tracefs,
    inst: Instance,
    user_maps: Option<UserMaps>,
    sym: SymFlags,
) -> Outcome {
    let kernel_text = inst.trace_text().unwrap();
    let stats = inst.all_stats().unwrap();
    let mut cmdlines = Cmdlines::parse(&tfs.saved_cmdlines().unwrap());
    cmdlines.add_tgids(&tfs.saved_tgids().unwrap_or_default());
    let tables = Tables {
        kallsyms: Kallsyms::parse(&tfs.kallsyms().unwrap()),
        printk: PrintkFormats::parse(&tfs.printk_formats().unwrap()),
        cmdlines,
        user_maps,
    };
    let layout = PageLayout::new(tfs.header_page().unwrap(), false);
    let cpus = inst.cpus().unwrap();
    let raw: Vec<(u32, Vec<u8>)> = cpus.iter().map(|&c| (c, inst.drain_cpu(c).unwrap())).collect();
    drop(inst); // removes the instance before any assertion can fail

    let renderer = Renderer::new(all_formats(tfs), tables, Options { sym, ..Options::default() });
    let sources: Vec<(u32, Box<dyn PageSource>)> = raw
        .iter()
        .map(|(c, bytes)| {
            let src: Box<dyn PageSource> =
                Box::new(ReadPages::new(std::io::Cursor::new(bytes), layout.page_size()));
            (*c, src)
        })
        .collect();
    let mut records = Records::new(layout, sources);
    let mut body = String::new();
    let mut per_type: BTreeMap<String, usize> = BTreeMap::new();
    let mut entries = 0u64;
    let mut read_time_events = std::collections::BTreeSet::new();
    while let Some(item) = records.next() {
        match item.expect("raw pages decode") {
            Item::Event(r) => {
                entries += 1;
                renderer.render_line(r.cpu, r.ts, r.data, &mut body);
                let id = renderer.common(r.data).unwrap().id;
                let f = renderer.format(id).expect("known event id");
                if renderer.needs_kernel_state(id) {
                    read_time_events.insert(f.name.clone());
                }
                *per_type.entry(format!("{}:{}", f.system, f.name)).or_default() += 1;
            }
            Item::Lost(l) => text::write_lost(&mut body, l.cpu, l.count),
        }
    }
    let overrun: u64 = stats.iter().map(|s| s.overrun).sum();
    let mut ours = String::new();
    text::write_header(&mut ours, entries, entries + overrun, cpus.len(), Columns::default());
    ours.push_str(&body);

    // Compare line by line, and attribute differences to event types. The one allowance:
    // values the kernel computes from its state at the moment `trace` is read (`jiffies` in
    // writeback's `age=`) print `[?]` in tp, for events whose print fmt declares such
    // arguments; the rest of those lines must still be identical.
    let k: Vec<&str> = kernel_text.lines().collect();
    let o: Vec<&str> = ours.lines().collect();
    let mut differing: BTreeMap<String, usize> = BTreeMap::new();
    let mut read_time: BTreeMap<String, usize> = BTreeMap::new();
    let mut shown = 0;
    for (i, (a, b)) in k.iter().zip(&o).enumerate() {
        if a != b {
            let ev = b.split(": ").nth(1).unwrap_or("?").to_string();
            if read_time_events.contains(&ev) && matches_with_unknowns(a, b) {
                *read_time.entry(ev).or_default() += 1;
                continue;
            }
            *differing.entry(ev).or_default() += 1;
            if shown < 10 {
                eprintln!("line {}:\n  kernel: {a}\n  tp:     {b}", i + 1);
                shown += 1;
            }
        }
    }
    eprintln!(
        "{} kernel lines, {} tp lines, {} events of {} types; differing lines: {}",
        k.len(),
        o.len(),
        entries,
        per_type.len(),
        differing.values().sum::<usize>()
    );
    eprintln!("lines with read-time kernel values ([?]): {read_time:?}");
    eprintln!("event types covered: {}", per_type.keys().cloned().collect::<Vec<_>>().join(" "));
    let (kernel_lines, tp_lines) = (k.len(), o.len());
    Outcome { entries, per_type, differing, kernel_lines, tp_lines, ours }
}

#[test]
fn every_event_renders_as_the_kernel_does() {
    let tfs = Tracefs::discover().expect("tracefs must be available (run as root)");
    let inst = oracle_instance(&tfs, "all");
    inst.enable_everything().unwrap();
    inst.set_tracing_on(true).unwrap();
    workload(&inst);
    inst.set_tracing_on(false).unwrap();
    inst.disable_all().unwrap();

    let r = compare_with_kernel(&tfs, inst, None, SymFlags::default());
    assert!(r.entries > 1000, "the workload produced only {} events", r.entries);
    assert!(r.per_type.len() > 50, "only {} event types fired", r.per_type.len());
    assert!(r.differing.is_empty(), "lines differ, by event: {:?}", r.differing);
    assert_eq!(r.kernel_lines, r.tp_lines, "line counts differ");
}

/// Kernel and user stacks (`tp record -T -U`, `--stack-trigger`): the `stacktrace` and
/// `userstacktrace` options on a set of events, and a `stacktrace if FILTER` trigger on
/// one more, so the buffer holds `ftrace:kernel_stack` records from both and
/// `ftrace:user_stack` ones. tp's `<stack trace>` / ` => symbol` lines must be the kernel's.
#[test]
fn kernel_and_user_stacks_render_as_the_kernel_does() {
    let tfs = Tracefs::discover().expect("tracefs must be available (run as root)");
    let inst = oracle_instance(&tfs, "stacks");
    // This thread and what it starts (threads, the shell): with every event followed by
    // two stacks, the other processes of a busy machine would fill the buffer.
    // SAFETY: gettid has no preconditions.
    let me = unsafe { libc::gettid() };
    inst.set_event_pids(&[me]).unwrap();
    inst.set_event_fork(true).unwrap();
    for sys in ["sched", "raw_syscalls", "signal", "timer", "irq", "block", "net"] {
        inst.write(&format!("events/{sys}/enable"), "1").unwrap();
    }
    inst.set_option("stacktrace", true).unwrap();
    inst.set_option("userstacktrace", true).unwrap();
    let getppid = tp_tracefs::EventId::parse("syscalls:sys_enter_getppid").unwrap();
    inst.enable(&getppid).unwrap();
    inst.add_trigger(&getppid, &format!("stacktrace if common_pid == {me}")).unwrap();
    inst.set_tracing_on(true).unwrap();
    workload(&inst);
    for _ in 0..3 {
        // SAFETY: getppid has no preconditions.
        unsafe { libc::getppid() };
    }
    inst.set_tracing_on(false).unwrap();
    inst.disable_all().unwrap();

    let r = compare_with_kernel(&tfs, inst, None, SymFlags::default());
    let kernel_stacks = r.per_type.get("ftrace:kernel_stack").copied().unwrap_or(0);
    let user_stacks = r.per_type.get("ftrace:user_stack").copied().unwrap_or(0);
    assert!(kernel_stacks > 100, "only {kernel_stacks} kernel stacks were recorded");
    assert!(user_stacks > 100, "only {user_stacks} user stacks were recorded");
    // The trigger's: getppid's own line, then (with the option's) two kernel stacks.
    let frames = r.ours.lines().filter(|l| l.starts_with(" => ")).count();
    assert!(frames > 4 * kernel_stacks / 2, "{frames} frame lines for {kernel_stacks} stacks");
    // Each getppid() of this thread: its line, then two kernel stacks (the option's and the
    // trigger's) and the user stack before the thread's next event.
    // In task context only: an interrupt taken between the call's line and its stacks puts
    // its own lines (and stacks) between them, with `h` or `s` as the flags' third letter.
    let mine = format!("-{me} ");
    let in_task = |l: &str| {
        let flags = l.split_once("] ").and_then(|(_, r)| r.split_whitespace().next());
        flags.is_some_and(|f| f.as_bytes().get(2) == Some(&b'.'))
    };
    let my_lines: Vec<&str> = r.ours.lines().filter(|l| l.contains(&mine) && in_task(l)).collect();
    let mut calls = 0;
    for (i, l) in my_lines.iter().enumerate().filter(|(_, l)| l.ends_with("sys_getppid()")) {
        calls += 1;
        let stacks: Vec<&str> = my_lines[i + 1..]
            .iter()
            .take_while(|l| l.ends_with("stack trace>"))
            .map(|l| l.rsplit(": ").next().unwrap())
            .collect();
        let kernel = stacks.iter().filter(|s| **s == "<stack trace>").count();
        let user = stacks.iter().filter(|s| **s == "<user stack trace>").count();
        assert_eq!((kernel, user), (2, 1), "stacks after {l}: {stacks:?}");
    }
    assert_eq!(calls, 3, "the three getppid() calls");
    assert!(r.differing.is_empty(), "lines differ, by event: {:?}", r.differing);
    assert_eq!(r.kernel_lines, r.tp_lines, "line counts differ");
}

/// A process's mappings from `/proc/PID/maps` (every one: the kernel's `find_vma` may pick
/// an anonymous one), as a trace.dat's PROCMAPS holds them.
fn proc_maps(pid: u32) -> tp_format::tracedat::ProcMaps {
    let text = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let maps = text
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (start, end) = f[0].split_once('-').unwrap();
            tp_format::tracedat::LibMap {
                start: u64::from_str_radix(start, 16).unwrap(),
                end: u64::from_str_radix(end, 16).unwrap(),
                name: f.get(5).unwrap_or(&"[anon]").to_string(),
            }
        })
        .collect();
    tp_format::tracedat::ProcMaps { pid: pid as i32, comm: "sh".into(), maps }
}

/// Kills the child on every path.
struct Reap(std::process::Child);

impl Drop for Reap {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `tp report --sym-userobj --sym-offset --sym-addr`: stacks as the kernel prints them with
/// those options: user frames as `/usr/lib/.../libc.so.6[+0x1234] <00007f...>`, which it
/// looks up in the live process when `trace` is read (tp in the maps saved, here read from
/// /proc while it lives), kernel frames as `do_syscall_64+0x1fa/0x280 <ffffffff821ed69a>`.
#[test]
fn stacks_with_sym_userobj_offset_and_addr_render_as_the_kernel_does() {
    let tfs = Tracefs::discover().expect("tracefs must be available (run as root)");
    let inst = oracle_instance(&tfs, "userobj");
    inst.set_option("userstacktrace", true).unwrap();
    inst.set_option("sym-userobj", true).unwrap();
    inst.set_option("stacktrace", true).unwrap();
    inst.set_option("sym-offset", true).unwrap();
    inst.set_option("sym-addr", true).unwrap();
    let child = std::process::Command::new("sh")
        .args(["-c", "read x; read y"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = Reap(child);
    let pid = child.0.id();
    inst.set_event_pids(&[pid as i32]).unwrap();
    inst.write("events/raw_syscalls/enable", "1").unwrap();
    inst.set_tracing_on(true).unwrap();
    // The shell reads this line byte by byte, then waits in `read y`.
    child.0.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    inst.set_tracing_on(false).unwrap();
    inst.disable_all().unwrap();
    let maps = UserMaps::new(&[proc_maps(pid)]);
    let sym = SymFlags { offset: true, addr: true };
    let r = compare_with_kernel(&tfs, inst, Some(maps), sym); // reads `trace` while sh lives
    drop(child);
    let files = r.ours.lines().filter(|l| l.starts_with(" => /") && l.contains("[+0x")).count();
    assert!(files >= 3, "{files} user frames named by file in\n{}", r.ours);
    let offsets = r.ours.lines().filter(|l| l.starts_with(" => do_syscall_64+0x")).count();
    assert!(offsets >= 3, "{offsets} kernel frames with offsets in\n{}", r.ours);
    assert!(r.differing.is_empty(), "lines differ, by event: {:?}", r.differing);
    assert_eq!(r.kernel_lines, r.tp_lines, "line counts differ");
}
