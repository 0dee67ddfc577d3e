//! `tp trace` against bpftrace 0.17 (the oracle, Debian's `bpftrace`, installed by CI): both
//! run the same program at the same time on the same workload (tests/trace/workload.c, built
//! here with gcc and named `tpwork`), and their outputs must be the same. Needs root.

mod common;
use common::{run, Tmp, TP};

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The workload, built once per test binary (removed with the binary's temp directory when
/// the process ends is not possible from a static, so it lives in the target directory).
fn workload() -> PathBuf {
    static W: OnceLock<PathBuf> = OnceLock::new();
    W.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("trace-workload");
        std::fs::create_dir_all(&dir).unwrap();
        let exe = dir.join("tpwork");
        let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/trace/workload.c");
        run(Command::new("gcc").args(["-O1", "-fno-omit-frame-pointer", "-o"]).arg(&exe).arg(&src));
        exe
    })
    .clone()
}

fn work(args: &[&str]) {
    run(Command::new(workload()).args(args));
}

/// A tracer running with its stdout collected.
struct Tracer {
    child: Child,
    out: Arc<Mutex<String>>,
    reader: Option<JoinHandle<()>>,
    err: Arc<Mutex<String>>,
}

fn start(argv: &[&str]) -> Tracer {
    let mut child = Command::new(argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{argv:?}: {e} (bpftrace is Debian's `bpftrace`, in .ci/run)"));
    let out = Arc::new(Mutex::new(String::new()));
    let err = Arc::new(Mutex::new(String::new()));
    let (o, mut stdout) = (out.clone(), BufReader::new(child.stdout.take().unwrap()));
    let reader = std::thread::spawn(move || {
        let mut line = String::new();
        while stdout.read_line(&mut line).unwrap_or(0) > 0 {
            o.lock().unwrap().push_str(&line);
            line.clear();
        }
    });
    let (e, mut stderr) = (err.clone(), child.stderr.take().unwrap());
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        e.lock().unwrap().push_str(&s);
    });
    let t = Tracer { child, out, reader: Some(reader), err };
    // bpftrace compiles with LLVM: seconds on a busy machine.
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let text = t.out.lock().unwrap().clone();
        if text.contains("Attaching ") || text.contains("attached_probes") {
            return t;
        }
        if let Ok(Some(st)) = t.child.try_wait_ref() {
            panic!("{argv:?} ended ({st}) before attaching: {text}\n{}", t.err.lock().unwrap());
        }
        assert!(Instant::now() < deadline, "{argv:?} did not attach in time");
        std::thread::sleep(Duration::from_millis(20));
    }
}

trait TryWaitRef {
    fn try_wait_ref(&self) -> std::io::Result<Option<std::process::ExitStatus>>;
}

impl TryWaitRef for Child {
    fn try_wait_ref(&self) -> std::io::Result<Option<std::process::ExitStatus>> {
        // /proc/PID/stat's state: a zombie has ended (not reaped: the owner waits later).
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.id())).unwrap_or_default();
        let state = stat.rsplit_once(") ").map(|(_, r)| r.chars().next().unwrap_or('?'));
        Ok(if state == Some('Z') || stat.is_empty() {
            Some(std::process::ExitStatus::default())
        } else {
            None
        })
    }
}

impl Tracer {
    /// Wait for the tracer to end by itself (exit()); its stdout.
    fn wait(mut self) -> String {
        let deadline = Instant::now() + Duration::from_secs(120);
        while self.child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "the tracer did not end by itself");
            std::thread::sleep(Duration::from_millis(20));
        }
        self.reader.take().unwrap().join().unwrap();
        let out = self.out.lock().unwrap().clone();
        out
    }

    /// Wait (at most 120 s) until the output printed so far satisfies `done`.
    fn wait_for_output(&self, done: impl Fn(&str) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(120);
        while !done(&self.out.lock().unwrap()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Ctrl-C (SIGINT), then its stdout.
    fn stop(self) -> String {
        self.signal(libc::SIGINT)
    }

    fn signal(self, sig: i32) -> String {
        // SAFETY: kill() on a child of ours that has not been reaped.
        unsafe { libc::kill(self.child.id() as i32, sig) };
        self.wait()
    }
}

/// bpftrace sorts a map's lines by value and leaves ties in no particular order: lines with
/// the same value are compared as a set.
fn assert_same(tp: &str, bt: &str) {
    fn groups(s: &str) -> Vec<Vec<&str>> {
        let mut out: Vec<Vec<&str>> = Vec::new();
        let mut last: Option<&str> = None;
        for l in s.lines() {
            let value = l.starts_with('@').then(|| l.rsplit_once(": ").map(|(_, v)| v)).flatten();
            match (value, last) {
                (Some(v), Some(p)) if v == p && !out.is_empty() => out.last_mut().unwrap().push(l),
                _ => out.push(vec![l]),
            }
            last = value;
        }
        for g in &mut out {
            g.sort();
        }
        out
    }
    assert_eq!(groups(tp), groups(bt), "tp:\n{tp}\nbpftrace:\n{bt}");
}

/// The tests filter on the workload's name, so they take turns: one workload at a time.
static TURN: Mutex<()> = Mutex::new(());

fn turn() -> std::sync::MutexGuard<'static, ()> {
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}

/// bpftrace prints "Attaching N probes..." before it attaches them: wait until it holds a
/// perf event per tracepoint besides one per CPU for its output.
fn wait_for_perf_events(pid: u32, tracepoints: usize) {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let n = std::fs::read_dir(format!("/proc/{pid}/fd"))
            .map(|d| {
                d.flatten()
                    .filter(|e| {
                        std::fs::read_link(e.path())
                            .is_ok_and(|l| l.to_string_lossy().contains("perf_event"))
                    })
                    .count()
            })
            .unwrap_or(0);
        if n >= cpus + tracepoints {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "bpftrace attached {n} perf events, not {}",
            cpus + tracepoints
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// bpftrace and tp on the same program, attached at the same time; `load` runs the workload.
/// `tracepoints`: how many tracepoints the program attaches to.
fn both(
    program: &str,
    extra: &[&str],
    tracepoints: usize,
    load: impl FnOnce(),
) -> (String, String) {
    workload();
    let mut bt_argv = vec!["bpftrace"];
    let mut tp_argv = vec![TP, "trace"];
    bt_argv.extend(extra);
    tp_argv.extend(extra.iter().map(|a| if *a == "-f" { "-f" } else { a }));
    bt_argv.extend(["-e", program]);
    tp_argv.extend(["-e", program]);
    let bt = start(&bt_argv);
    wait_for_perf_events(bt.child.id(), tracepoints);
    let tp = start(&tp_argv);
    load();
    (bt.stop(), tp.stop())
}

#[test]
fn count_by_comm_of_200000_getppid() {
    let prog = r#"tracepoint:syscalls:sys_enter_getppid /comm == "tpwork"/ { @[comm] = count(); }"#;
    let _t = turn();
    let (bt, tp) = both(prog, &[], 1, || work(&["getppid", "200000"]));
    assert!(bt.contains("@[tpwork]: 200000\n"), "bpftrace: {bt}");
    assert_eq!(tp, bt);
    // The raw tracepoint door: no field read.
    let prog =
        r#"tracepoint:raw_syscalls:sys_enter /comm == "tpwork"/ { @[comm, pid == 0] = count(); }"#;
    let (bt, tp) = both(prog, &[], 1, || work(&["getppid", "200000"]));
    assert_eq!(tp, bt);
}

#[test]
fn hist_and_lhist_of_known_sizes() {
    let prog = r#"tracepoint:syscalls:sys_enter_write /comm == "tpwork"/ { @h = hist(args->count); @l = lhist(args->count, 0, 5000, 500); @s = stats(args->count); @a[comm] = avg(args->count); @mx = max(args->count); @mn = min(args->count); @sum = sum(args->count); }"#;
    let _t = turn();
    let (bt, tp) = both(prog, &[], 1, || work(&["sizes"]));
    assert!(bt.contains("@s: count 300, average"), "bpftrace: {bt}");
    assert_eq!(tp, bt);
    let (bt, tp) = both(prog, &["-f", "json"], 1, || work(&["sizes"]));
    assert!(bt.contains("{\"type\": \"hist\", \"data\": {\"@h\": ["), "bpftrace: {bt}");
    assert_eq!(tp, bt);
}

/// 300 write sizes: more keys than a keyed count's cache has slots, so counts are written
/// back from the slots into the hash and read from both.
#[test]
fn keyed_counts_of_more_keys_than_cache_slots() {
    let prog = r#"tracepoint:syscalls:sys_enter_write /comm == "tpwork"/ { @[args->count] = count(); @m[args->count % 7, comm] = count(); }"#;
    let _t = turn();
    let (bt, tp) = both(prog, &[], 1, || {
        work(&["sizes"]);
        work(&["sizes"]);
    });
    assert!(bt.contains("@[4995]: 2\n"), "bpftrace: {bt}");
    assert_same(&tp, &bt);
}

/// Maps nothing was put in: a count without keys prints `@c: 0`, the others an empty line
/// (avg and stats two), as in bpftrace.
#[test]
fn maps_nothing_was_put_in() {
    let prog = "tracepoint:syscalls:sys_enter_getppid /pid == 1/ { @c = count(); @k[tid] = count(); @a = avg(1); @h = hist(1); @s = sum(1); @x[tid] = 1; } interval:ms:100 { exit(); }";
    let bt = start(&["bpftrace", "-e", prog]).wait();
    let tp = start(&[TP, "trace", "-e", prog]).wait();
    assert!(bt.contains("\n@c: 0\n"), "bpftrace: {bt}");
    assert_eq!(tp, bt);
}

#[test]
fn probe_names_over_sched_wildcards() {
    let prog = r#"tracepoint:sched:sched_* /comm == "tpwork"/ { @[probe] = count(); }"#;
    let _t = turn();
    let n = std::fs::read_dir("/sys/kernel/tracing/events/sched")
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .count();
    let (bt, tp) = both(prog, &[], n, || {
        work(&["getppid", "1000"]);
        work(&["getppid", "1000"]);
    });
    assert!(bt.contains("@[tracepoint:sched:sched_process_exec]: 2\n"), "bpftrace: {bt}");
    assert_same(&tp, &bt);
}

#[test]
fn printf_with_str_of_a_data_loc_field() {
    let prog = r#"tracepoint:sched:sched_process_exec /comm == "tpwork"/ { printf("%s exec %s %d|%-8s|%5d\n", comm, str(args->filename), args->pid == pid, "x", 42); }"#;
    let _t = turn();
    let line = format!("tpwork exec {} 1|x       |   42\n", workload().display());
    workload();
    let bt = start(&["bpftrace", "-e", prog]);
    wait_for_perf_events(bt.child.id(), 1);
    let tp = start(&[TP, "trace", "-e", prog]);
    work(&["getppid", "1"]);
    work(&["getppid", "1"]);
    // printf lines reach each tracer through its perf ring: stop it once both are printed
    // (an interrupt right after the load may come before the ring is read).
    bt.wait_for_output(|o| o.matches(&line).count() >= 2);
    tp.wait_for_output(|o| o.matches(&line).count() >= 2);
    let (bt, tp) = (bt.stop(), tp.stop());
    assert_eq!(bt.matches(&line).count(), 2, "bpftrace: {bt}\ntp: {tp}");
    assert_eq!(tp, bt);
}

#[test]
fn interval_with_exit() {
    let prog = "interval:ms:100 { @n = count(); exit(); } END { @e = 1; }";
    let bt = start(&["bpftrace", "-e", prog]).wait();
    let tp = start(&[TP, "trace", "-e", prog]).wait();
    assert!(bt.ends_with("@e: 1\n@n: 1\n"), "bpftrace: {bt}");
    assert_eq!(tp, bt);
}

/// `kaddr()` is the symbol's address from kallsyms, resolved when compiling; an unknown name
/// is refused before anything is loaded.
#[test]
fn kaddr_of_kernel_symbols() {
    let prog = r#"BEGIN { printf("%lx %d\n", kaddr("vfs_read"), kaddr("do_exit") > 0); exit(); }"#;
    let bt = start(&["bpftrace", "-e", prog]).wait();
    let tp = start(&[TP, "trace", "-e", prog]).wait();
    assert!(bt.contains(" 1\n"), "bpftrace: {bt}");
    assert_eq!(tp, bt);
    let out = Command::new(TP)
        .args(["trace", "-e", r#"BEGIN { @ = kaddr("no_such_symbol_x"); }"#])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("no_such_symbol_x"), "{err}");
}

/// The programs tp loaded, from its fdinfo (`prog_id:` of each BPF program fd).
fn prog_ids(pid: u32) -> Vec<u32> {
    let mut ids = Vec::new();
    for e in std::fs::read_dir(format!("/proc/{pid}/fdinfo")).unwrap().flatten() {
        let text = std::fs::read_to_string(e.path()).unwrap_or_default();
        for l in text.lines() {
            if let Some(id) = l.strip_prefix("prog_id:") {
                ids.push(id.trim().parse().unwrap());
            }
        }
    }
    ids
}

#[test]
fn nothing_left_attached_after_int_term_kill() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGKILL] {
        let t = start(&[TP, "trace", "-e", "tracepoint:raw_syscalls:sys_enter { @[comm] = count(); } profile:hz:99 { @p = count(); }"]);
        let mut ids = prog_ids(t.child.id());
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 2, "two programs loaded");
        t.signal(sig);
        // The kernel frees a program shortly after its last fd closes (deferred work).
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let loaded = tp_bpf::session::loaded_program_ids().unwrap();
            let left: Vec<&u32> = ids.iter().filter(|id| loaded.contains(id)).collect();
            if left.is_empty() {
                break;
            }
            assert!(Instant::now() < deadline, "programs {left:?} still loaded after signal {sig}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// `-l` lists every kind of probe tp attaches: tracepoints, raw tracepoints, software events.
#[test]
fn list_every_kind() {
    let all = run(Command::new(TP).args(["trace", "-l"]));
    let all = String::from_utf8_lossy(&all.stdout);
    for want in [
        "tracepoint:raw_syscalls:sys_enter\n",
        "rawtracepoint:sys_enter\n",
        "software:cpu-clock:\n",
    ] {
        assert!(all.contains(want), "no {want:?} in tp trace -l");
    }
    let sw = run(Command::new(TP).args(["trace", "-l", "software:*"]));
    let sw = String::from_utf8_lossy(&sw.stdout);
    assert_eq!(sw.lines().count(), 10, "{sw}");
    assert!(sw.lines().all(|l| l.starts_with("software:")), "{sw}");
    let one = run(Command::new(TP).args(["trace", "-l", "t:sched:sched_switch"]));
    assert_eq!(String::from_utf8_lossy(&one.stdout), "tracepoint:sched:sched_switch\n");
}

/// perf names a BPF program's code in a stack by its KSYMBOL record
/// (`bpf_prog_<tag>_tp_trace`, in a "DSO" of that name); tp report names it the same way,
/// not by the kallsyms symbol nearest to it.
#[test]
fn bpf_programs_in_perf_stacks_named_as_perf_names_them() {
    let tmp = Tmp::new("ksym");
    let data = tmp.path("perf.data");
    let _t = turn();
    let t = start(&[TP, "trace", "-e", "tracepoint:raw_syscalls:sys_enter { @[comm] = count(); }"]);
    let frames = |text: &str| -> Vec<String> {
        text.lines().filter(|l| l.contains("_tp_trace")).map(|l| l.trim().to_string()).collect()
    };
    // A sample lands in the program now and then: record until some did.
    let mut perf = Vec::new();
    for _ in 0..10 {
        run(Command::new("perf")
            .args(["record", "-q", "-e", "cpu-clock", "-F", "4000", "-g", "-o"])
            .arg(&data)
            .arg("--")
            .arg(workload())
            .args(["getppid", "1000000"]));
        let out = run(Command::new("perf").arg("script").arg("-i").arg(&data));
        perf = frames(&String::from_utf8_lossy(&out.stdout));
        if !perf.is_empty() {
            break;
        }
    }
    t.stop();
    assert!(!perf.is_empty(), "no sample in tp's program in 10 recordings");
    assert!(perf[0].contains(" bpf_prog_") && perf[0].ends_with("_tp_trace)"), "{perf:?}");
    let out = run(Command::new(TP).args(["report", "-i"]).arg(&data));
    assert_eq!(frames(&String::from_utf8_lossy(&out.stdout)), perf);
}
