//! `tp record` on the running kernel (needs root and tracefs; CI runs as root; fails loudly
//! without them). Counting uses `trace-cmd report` (installed by CI) on tp's files, which
//! also checks interop. The workload is this test binary itself: run with
//! `TP_TEST_GETPPID=N` its `helper_getppid` test calls getppid() exactly N times.

mod common;
use common::{require_tracefs, SmallDisk, Tmp, TP, TRACEFS};

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::{RwLock, RwLockReadGuard};
use std::time::{Duration, Instant};

/// Not a real test: the workload, active only when TP_TEST_GETPPID is set; ignored so that
/// an ordinary run does not count it as passed. The tests run it with `--ignored`.
/// With TP_TEST_WAIT=1 it first prints its pid and waits for a line on stdin.
#[test]
#[ignore = "workload run by the other tests of this file"]
fn helper_getppid() {
    let Ok(n) = std::env::var("TP_TEST_GETPPID") else { return };
    let n: usize = n.parse().unwrap();
    if std::env::var("TP_TEST_WAIT").is_ok() {
        // Straight to fd 1: println! inside a test is captured by the harness.
        let mut o = std::io::stdout();
        o.write_all(format!("pid {}\n", std::process::id()).as_bytes()).unwrap();
        o.flush().unwrap();
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).unwrap();
    }
    for _ in 0..n {
        // SAFETY: getppid has no preconditions.
        unsafe { libc::syscall(libc::SYS_getppid) };
    }
    std::process::exit(0);
}

fn helper_cmd(n: usize) -> Vec<String> {
    let exe = std::env::current_exe().unwrap();
    vec![
        "env".into(),
        format!("TP_TEST_GETPPID={n}"),
        exe.to_string_lossy().into_owned(),
        "--exact".into(),
        "helper_getppid".into(),
        "--ignored".into(),
        "--test-threads=1".into(),
        "-q".into(),
    ]
}

/// Every tp run removes the stale instances of dead tp processes when it starts. The test
/// that checks this holds the write side while it makes one and lets its own run remove it;
/// every other tp start in this file holds the read side (tests run in parallel).
static TP_STARTS: RwLock<()> = RwLock::new(());

fn starting() -> RwLockReadGuard<'static, ()> {
    TP_STARTS.read().unwrap_or_else(|e| e.into_inner())
}

fn tp(args: &[&str]) -> Output {
    let _g = starting();
    Command::new(TP).args(args).stdin(Stdio::null()).output().unwrap()
}

fn report_lines(file: &Path) -> Vec<String> {
    let out = Command::new("trace-cmd")
        .args(["report", "-i"])
        .arg(file)
        .output()
        .expect("trace-cmd is installed");
    assert!(
        out.status.success(),
        "trace-cmd report failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.starts_with("cpus=") && !l.trim().is_empty())
        .map(str::to_string)
        .collect()
}

/// `comm-pid [cpu] ts: name: text` -> (pid, name, text).
fn parse_line(l: &str) -> Option<(i32, String, String)> {
    let (head, rest) = l.split_once(": ")?;
    let task = head.split_whitespace().next()?;
    let pid = task.rsplit_once('-')?.1.parse().ok()?;
    let (name, text) = rest.split_once(':')?;
    Some((pid, name.trim().to_string(), text.trim().to_string()))
}

fn count_getppid(lines: &[String], pid: Option<i32>) -> usize {
    lines
        .iter()
        .filter_map(|l| parse_line(l))
        .filter(|(p, n, t)| {
            n == "sys_enter" && t.starts_with("NR 110 ") && pid.is_none_or(|x| x == *p)
        })
        .count()
}

fn events_in_summary(stderr: &str) -> u64 {
    let l = stderr.lines().find(|l| l.contains(" events, ")).expect("summary line");
    l.trim_start_matches("tp: ").split_whitespace().next().unwrap().parse().unwrap()
}

fn our_instances() -> Vec<String> {
    std::fs::read_dir(Path::new(TRACEFS).join("instances"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn command_yields_exactly_n_getppid_events() {
    require_tracefs();
    let t = Tmp::new("cmd");
    let out_file = t.path("t.dat");
    let mut args =
        vec!["record", "-e", "raw_syscalls:sys_enter", "-o", out_file.to_str().unwrap(), "--"];
    let cmd = helper_cmd(7777);
    args.extend(cmd.iter().map(String::as_str));
    let out = tp(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("no events lost"), "{stderr}");
    let lines = report_lines(&out_file);
    assert_eq!(count_getppid(&lines, None), 7777, "{stderr}");
    // Every event rendered: as many lines as tp recorded.
    assert_eq!(lines.len() as u64, events_in_summary(&stderr));
    // Only the command's process: env execs the test binary, which runs the helper in a
    // thread, so at most two tids.
    let pids: std::collections::BTreeSet<i32> =
        lines.iter().filter_map(|l| parse_line(l)).map(|p| p.0).collect();
    assert!(pids.len() <= 2, "{pids:?}");
}

#[test]
fn command_exit_status_becomes_tps() {
    require_tracefs();
    let t = Tmp::new("exit");
    let f = t.path("t.dat");
    let out = tp(&[
        "record",
        "-q",
        "-e",
        "sched:sched_process_exit",
        "-o",
        f.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "echo out; echo err >&2; exit 7",
    ]);
    assert_eq!(out.status.code(), Some(7));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "out\n");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "err\n");
    let out =
        tp(&["record", "-q", "-e", "sched", "-o", f.to_str().unwrap(), "--", "/no/such/command"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/no/such/command"));
}

/// Start tp in the background, wait until it says it is recording.
fn spawn_tp(args: &[&str]) -> (Child, BufReader<std::process::ChildStderr>) {
    let _g = starting();
    let mut child =
        Command::new(TP).args(args).stdin(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut line = String::new();
        assert!(err.read_line(&mut line).unwrap() > 0, "tp exited before recording");
        if line.contains("tp: recording") {
            break;
        }
        assert!(Instant::now() < deadline);
    }
    (child, err)
}

fn rest(mut err: BufReader<std::process::ChildStderr>) -> String {
    let mut s = String::new();
    std::io::Read::read_to_string(&mut err, &mut s).unwrap();
    s
}

#[test]
fn pid_yields_exactly_n_getppid_events() {
    require_tracefs();
    let t = Tmp::new("pid");
    let f = t.path("t.dat");
    let exe = std::env::current_exe().unwrap();
    let mut helper = Command::new(exe)
        .args(["--exact", "helper_getppid", "--ignored", "--test-threads=1", "-q", "--nocapture"])
        .env("TP_TEST_GETPPID", "5555")
        .env("TP_TEST_WAIT", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(helper.stdout.take().unwrap());
    let pid: i32 = loop {
        let mut line = String::new();
        assert!(out.read_line(&mut line).unwrap() > 0, "helper exited early");
        if let Some(p) = line.trim().strip_prefix("pid ") {
            break p.parse().unwrap();
        }
    };
    let (mut tpc, err) = spawn_tp(&[
        "record",
        "-e",
        "raw_syscalls:sys_enter",
        "-p",
        &pid.to_string(),
        "-o",
        f.to_str().unwrap(),
    ]);
    helper.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(helper.wait().unwrap().success());
    // tp notices the pid is gone and stops by itself.
    let st = tpc.wait().unwrap();
    let stderr = rest(err);
    assert!(st.success(), "{stderr}");
    assert!(stderr.contains("traced processes exited"), "{stderr}");
    let lines = report_lines(&f);
    assert_eq!(count_getppid(&lines, None), 5555, "{stderr}");
}

/// `-p PID -c` also records the processes PID starts after the recording began (without
/// `-c`, only PID's own threads).
#[test]
fn pid_with_children_follows_new_processes() {
    require_tracefs();
    for children in [true, false] {
        let t = Tmp::new(if children { "children" } else { "nochildren" });
        let f = t.path("t.dat");
        // A shell that waits for a line, then runs the helper as its child (`; true`: no
        // shell may replace itself with the last command).
        let script = format!("read go; {} >/dev/null; true", helper_cmd(777).join(" "));
        let mut sh = Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let pid = sh.id().to_string();
        let mut args = vec!["record", "-e", "raw_syscalls:sys_enter", "-p", &pid];
        if children {
            args.push("-c");
        }
        args.extend(["-o", f.to_str().unwrap()]);
        let (mut tpc, err) = spawn_tp(&args);
        sh.stdin.take().unwrap().write_all(b"go\n").unwrap();
        assert!(sh.wait().unwrap().success());
        let st = tpc.wait().unwrap();
        let stderr = rest(err);
        assert!(st.success(), "{stderr}");
        let n = count_getppid(&report_lines(&f), None);
        assert_eq!(n, if children { 777 } else { 0 }, "children {children}: {stderr}");
    }
}

#[test]
fn filters_narrow_as_the_kernel_says() {
    require_tracefs();
    let t = Tmp::new("filter");
    let f = t.path("t.dat");
    let mut args = vec![
        "record",
        "-e",
        "raw_syscalls:sys_enter",
        "-f",
        "id == 110",
        "-e",
        "sched:sched_process_exit",
        "-o",
        f.to_str().unwrap(),
        "--",
    ];
    let cmd = helper_cmd(321);
    args.extend(cmd.iter().map(String::as_str));
    let out = tp(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines = report_lines(&f);
    let parsed: Vec<_> = lines.iter().filter_map(|l| parse_line(l)).collect();
    let enters: Vec<_> = parsed.iter().filter(|p| p.1 == "sys_enter").collect();
    assert_eq!(enters.len(), 321);
    assert!(enters.iter().all(|p| p.2.starts_with("NR 110 ")));
    // The filter applies to the preceding -e only.
    assert!(parsed.iter().any(|p| p.1 == "sched_process_exit"));
    // A filter the kernel rejects: its error_log message is shown, nothing is left behind.
    let _g = starting();
    let c = Command::new(TP)
        .args([
            "record",
            "-e",
            "raw_syscalls:sys_enter",
            "-f",
            "no_such_field == 1",
            "-o",
            f.to_str().unwrap(),
            "--",
            "true",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let name = format!("tp-{}", c.id());
    let out = c.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("rejected filter") && stderr.contains("Field not found"), "{stderr}");
    assert!(!our_instances().contains(&name), "{name} left behind");
}

fn events_in_file(f: &Path) -> Vec<String> {
    let out = Command::new("trace-cmd").args(["report", "--events", "-i"]).arg(f).output().unwrap();
    let mut sys = String::new();
    let mut v = Vec::new();
    for l in String::from_utf8_lossy(&out.stdout).lines() {
        if let Some(s) = l.strip_prefix("system: ") {
            sys = s.trim().to_string();
        } else if let Some(n) = l.strip_prefix("name: ") {
            if sys != "ftrace" {
                v.push(format!("{sys}:{}", n.trim()));
            }
        }
    }
    v.sort();
    v.dedup();
    v
}

#[test]
fn globs_select_what_tp_list_says() {
    require_tracefs();
    let t = Tmp::new("glob");
    for glob in ["sched:sched_*", "timer", "syscalls:sys_enter_openat"] {
        let f = t.path("g.dat");
        // v6: `trace-cmd report --events` lists the formats of v6 files only.
        let out = tp(&[
            "record",
            "-q",
            "-e",
            glob,
            "--file-version",
            "6",
            "--compress",
            "none",
            "-o",
            f.to_str().unwrap(),
            "--",
            "true",
        ]);
        assert!(out.status.success(), "{glob}: {}", String::from_utf8_lossy(&out.stderr));
        let list = tp(&["list", glob]);
        let mut want: Vec<String> =
            String::from_utf8_lossy(&list.stdout).lines().map(str::to_string).collect();
        want.sort();
        assert!(!want.is_empty());
        assert_eq!(events_in_file(&f), want, "{glob}");
    }
}

struct TopLevel(Vec<(String, String)>);

fn top_level() -> TopLevel {
    let files = [
        "tracing_on",
        "set_event",
        "set_event_pid",
        "buffer_size_kb",
        "trace_clock",
        "options/event-fork",
        "options/record-tgid",
        "current_tracer",
    ];
    TopLevel(
        files
            .iter()
            .map(|f| (f.to_string(), std::fs::read_to_string(Path::new(TRACEFS).join(f)).unwrap()))
            .collect(),
    )
}

fn assert_state_restored(before: &TopLevel, name: &str) {
    assert!(
        !Path::new(TRACEFS).join("instances").join(name).exists(),
        "instance {name} left behind"
    );
    let now = top_level();
    for ((f, a), (_, b)) in before.0.iter().zip(&now.0) {
        assert_eq!(a, b, "top-level {f} changed");
    }
}

fn stop_with(sig: i32) {
    require_tracefs();
    let t = Tmp::new(&format!("sig{sig}"));
    let f = t.path("t.dat");
    let before = top_level();
    let (mut c, err) =
        spawn_tp(&["record", "-e", "sched", "-e", "raw_syscalls", "-o", f.to_str().unwrap()]);
    let name = format!("tp-{}", c.id());
    assert!(Path::new(TRACEFS).join("instances").join(&name).exists());
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: plain kill of our own child.
    unsafe { libc::kill(c.id() as i32, sig) };
    let st = c.wait().unwrap();
    let stderr = rest(err);
    assert!(st.success(), "{stderr}");
    assert!(f.exists());
    assert!(!report_lines(&f).is_empty());
    assert_state_restored(&before, &name);
}

#[test]
fn sigint_stops_writes_and_restores() {
    stop_with(libc::SIGINT);
}

#[test]
fn sigterm_stops_writes_and_restores() {
    stop_with(libc::SIGTERM);
}

#[test]
fn sigkill_of_tp_and_its_guard_leaves_a_stale_instance_the_next_run_removes() {
    require_tracefs();
    let t = Tmp::new("kill");
    let f = t.path("t.dat");
    let before = top_level();
    let (mut c, _err) = spawn_tp(&["record", "-e", "sched", "-o", f.to_str().unwrap()]);
    let name = format!("tp-{}", c.id());
    // No other tp may start (and remove the stale instance) until this test's next run has.
    let _w = TP_STARTS.write().unwrap_or_else(|e| e.into_inner());
    // The guard (tp's child) would clean up: it goes first, as when both are killed.
    let guard = guard_of(c.id());
    // SAFETY: kill has no memory-safety preconditions.
    assert_eq!(unsafe { libc::kill(guard, libc::SIGKILL) }, 0);
    c.kill().unwrap();
    c.wait().unwrap();
    assert!(Path::new(TRACEFS).join("instances").join(&name).exists());
    let out = Command::new(TP)
        .args(["record", "-e", "sched:sched_process_exit", "-o", f.to_str().unwrap(), "--", "true"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains(&format!("removed stale instance instances/{name}")), "{stderr}");
    // Its temporary page files beside the output went too.
    let leftover = std::fs::read_dir(&t.0)
        .unwrap()
        .flatten()
        .any(|e| e.file_name().to_string_lossy().contains(".tp-"));
    assert!(!leftover, "{stderr}");
    assert_state_restored(&before, &name);
}

/// tp's guard: its child process that is not the traced command (`tp record` without one).
fn guard_of(tp: u32) -> i32 {
    let kids = std::fs::read_to_string(format!("/proc/{tp}/task/{tp}/children")).unwrap();
    let kids: Vec<i32> = kids.split_whitespace().map(|p| p.parse().unwrap()).collect();
    assert_eq!(kids.len(), 1, "tp's children: {kids:?}");
    kids[0]
}

/// What a SIGKILL of tp may leave: its instance, page directory or partial file. The guard
/// removes the instance within a second and, by the time it exits, the pages became a
/// readable file it names.
fn assert_nothing_left_after_sigkill(
    mut c: Child,
    err: BufReader<std::process::ChildStderr>,
    t: &Tmp,
    f: &Path,
) {
    let inst = Path::new(TRACEFS).join("instances").join(format!("tp-{}", c.id()));
    assert!(inst.exists());
    c.kill().unwrap();
    c.wait().unwrap();
    let t0 = Instant::now();
    while inst.exists() && t0.elapsed() < Duration::from_secs(1) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!inst.exists(), "instance {} still there after 1 s", inst.display());
    // stderr ends when the guard exits.
    let stderr = rest(err);
    let left: Vec<_> = std::fs::read_dir(&t.0)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tp-"))
        .collect();
    assert!(left.is_empty(), "left {left:?}\n{stderr}");
    assert!(
        stderr.contains(&format!("was killed; what it recorded is in {}", f.display())),
        "{stderr}"
    );
    let out = Command::new(TP).args(["report", "-i"]).arg(f).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.lines().any(|l| l.contains("sched_switch:")), "{stderr}");
}

#[test]
fn sigkill_while_recording_leaves_a_readable_file_and_no_instance() {
    require_tracefs();
    let t = Tmp::new("kill-rec");
    let f = t.path("k.dat");
    let (c, err) =
        spawn_tp(&["record", "-a", "-e", "sched:sched_switch", "-o", f.to_str().unwrap()]);
    std::thread::sleep(Duration::from_millis(300));
    assert_nothing_left_after_sigkill(c, err, &t, &f);
}

#[test]
fn sigkill_while_writing_leaves_a_readable_file_and_no_instance() {
    require_tracefs();
    let t = Tmp::new("kill-write");
    let f = t.path("k.dat");
    let _g = starting();
    let mut c = Command::new(TP)
        .args([
            "record",
            "-a",
            "-e",
            "sched:sched_switch",
            "-o",
            f.to_str().unwrap(),
            "--duration",
            "300ms",
        ])
        .env("TP_TEST_STALL_WRITING", "1")
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(c.stderr.take().unwrap());
    loop {
        let mut line = String::new();
        assert!(err.read_line(&mut line).unwrap() > 0, "tp exited before writing");
        if line.contains("tp: test: writing") {
            break;
        }
    }
    let tmp = t.0.join(format!("k.dat.tp-{}.tmp", c.id()));
    assert!(tmp.exists(), "{}", tmp.display());
    assert_nothing_left_after_sigkill(c, err, &t, &f);
}

/// A disk that fills while recording or writing: one clear message before the summary
/// (never "os error 28" twice), a readable file with the first part, no page files left.
#[test]
fn a_full_disk_keeps_a_readable_first_part() {
    require_tracefs();
    let disk = SmallDisk::new("full", "4m");
    let f = disk.0.path("x.dat");
    // 300,000 getppid() calls: about 15 MiB of raw_syscalls pages, far more than the disk.
    let mut args: Vec<String> = ["record", "-e", "raw_syscalls", "-o", f.to_str().unwrap(), "--"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend(helper_cmd(300_000));
    let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    let out = tp(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let says: Vec<&str> = stderr.lines().filter(|l| l.contains("the disk of")).collect();
    assert_eq!(says.len(), 1, "{stderr}");
    assert!(says[0].contains(&f.display().to_string()) && says[0].contains("readable"), "{stderr}");
    let summary = stderr.find(" events, ").expect("a summary");
    assert!(stderr.find("the disk of").unwrap() < summary, "{stderr}");
    assert!(stderr.matches("os error 28").count() <= 1, "{stderr}");
    let left: Vec<_> = std::fs::read_dir(&disk.0 .0)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "x.dat")
        .collect();
    assert!(left.is_empty(), "{left:?}");
    let rep = Command::new(TP).args(["report", "-i"]).arg(&f).output().unwrap();
    assert!(rep.status.success(), "{}", String::from_utf8_lossy(&rep.stderr));
    let n =
        String::from_utf8_lossy(&rep.stdout).lines().filter(|l| l.contains("sys_enter")).count();
    assert!(n > 100, "{n} events in the kept part\n{stderr}");
    // The summary counts what did not reach the file as lost, with the full disk as the
    // reason (not the buffer's size): recorded = in the file + not written (+ lost in the
    // kernel, whose counters have their own line).
    fn first_number(l: &str) -> Option<&str> {
        l.split(|c: char| !c.is_ascii_digit()).find(|w| !w.is_empty())
    }
    let number_after = |key: &str| -> u64 {
        let at = stderr.find(key).unwrap_or_else(|| panic!("no {key:?}\n{stderr}"));
        first_number(&stderr[at + key.len()..]).unwrap().parse().unwrap()
    };
    let line = |key: &str| stderr.lines().find(|l| l.contains(key)).unwrap_or_default();
    let recorded: u64 = first_number(line(" events, ")).unwrap().parse().unwrap();
    let lost = number_after("LOST EVENTS: ");
    let unwritten: u64 = stderr
        .lines()
        .filter(|l| l.contains("not written: disk full"))
        .map(|l| l.split(": ").nth(2).and_then(first_number).unwrap().parse::<u64>().unwrap())
        .sum();
    assert!(unwritten > 0 && stderr.contains("dropped to fit the file"), "{stderr}");
    assert!(stderr.contains("the disk was full"), "{stderr}");
    let in_file = String::from_utf8_lossy(&rep.stdout)
        .lines()
        .filter(|l| l.contains("sys_enter") || l.contains("sys_exit"))
        .count() as u64;
    if stderr.contains("kernel counters") {
        assert!(in_file + lost >= recorded, "{in_file} in the file\n{stderr}");
    } else {
        assert!(!stderr.contains("increase the buffer"), "{stderr}");
        assert_eq!(lost, unwritten, "{stderr}");
        assert_eq!(in_file + unwritten, recorded, "{in_file} in the file\n{stderr}");
    }
}

/// A command that does not exist exits 127 as in the shell; -a with a command is refused
/// (it used to trace only the command, silently).
#[test]
fn missing_command_is_127() {
    require_tracefs();
    let t = Tmp::new("cmd127");
    let f = t.path("t.dat");
    let out = tp(&[
        "record",
        "-e",
        "sched:sched_switch",
        "-o",
        f.to_str().unwrap(),
        "--",
        "tp-no-such-cmd",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(127), "{stderr}");
    assert!(stderr.contains("tp-no-such-cmd: command not found"), "{stderr}");
    // (-a with a command records everything while it runs: tests/habits.rs.)
    assert!(!f.exists() && std::fs::read_dir(&t.0).unwrap().next().is_none());
}

/// A FIFO, /dev/stdin on a pipe or `-` as `-i`: the reason (tp report seeks), not "bad magic".
#[test]
fn report_of_a_pipe_says_it_needs_a_seekable_file() {
    let t = Tmp::new("fifo");
    let fifo = t.path("p.dat");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo reads a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    for input in [fifo.to_str().unwrap(), "/dev/stdin", "-"] {
        let out =
            Command::new(TP).args(["report", "-i", input]).stdin(Stdio::piped()).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{input}: {stderr}");
        assert!(stderr.contains("needs a seekable file"), "{input}: {stderr}");
    }
}

/// A Ctrl-C or SIGTERM in the first milliseconds (during the set-up) leaves nothing: no page
/// directory (it used to be created before the handlers were installed), no instance.
#[test]
fn early_signals_leave_nothing() {
    require_tracefs();
    let t = Tmp::new("early");
    let f = t.path("x.dat");
    for i in 0..40u64 {
        let _g = starting();
        let mut c = Command::new(TP)
            .args([
                "record",
                "-e",
                "sched:sched_switch",
                "-o",
                f.to_str().unwrap(),
                "--",
                "sleep",
                "5",
            ])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_micros(500 * (i % 40)));
        let sig = if i % 2 == 0 { libc::SIGINT } else { libc::SIGTERM };
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(c.id() as i32, sig) };
        c.wait().unwrap();
        // The guard (if forked) finishes its work before the next check.
        std::thread::sleep(Duration::from_millis(50));
        let left: Vec<_> = std::fs::read_dir(&t.0)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".tp-"))
            .collect();
        assert!(left.is_empty(), "signal {sig} after {} us: left {left:?}", 500 * (i % 40));
        let inst = Path::new(TRACEFS).join("instances").join(format!("tp-{}", c.id()));
        assert!(!inst.exists(), "signal {sig}: {} left", inst.display());
    }
}

/// `-o` is checked before anything is recorded, and every message names the user's path.
#[test]
fn unwritable_outputs_are_refused_before_recording() {
    require_tracefs();
    let t = Tmp::new("outputs");
    let dir = t.path("somedir");
    std::fs::create_dir(&dir).unwrap();
    let d = dir.to_str().unwrap().to_string();
    for (o, says) in [
        (d.clone(), "is a directory: give a file name"),
        (format!("{d}/"), "is a directory: give a file name"),
        (t.0.to_str().unwrap().to_string(), "is a directory: give a file name"),
        ("/proc/x.dat".to_string(), "cannot create files in /proc"),
        ("/dev/null".to_string(), "exists and is not a regular file"),
        (format!("{d}/no/x.dat"), "does not exist"),
    ] {
        let out = tp(&["record", "-e", "sched:sched_switch", "-o", &o, "--", "true"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "-o {o}: {stderr}");
        assert!(stderr.contains(&format!("-o {o}")) && stderr.contains(says), "-o {o}: {stderr}");
        assert!(!stderr.contains("tp: recording"), "-o {o}: {stderr}");
    }
    let left: Vec<_> = std::fs::read_dir(&t.0).unwrap().flatten().map(|e| e.file_name()).collect();
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(std::fs::read_dir(&dir).unwrap().next().is_none());
}

#[test]
fn trace_cmd_reads_every_flavour() {
    require_tracefs();
    let t = Tmp::new("interop");
    for (ver, comp) in [("7", "zstd"), ("7", "none"), ("6", "none")] {
        let f = t.path(&format!("v{ver}-{comp}.dat"));
        let mut args = vec![
            "record",
            "-e",
            "raw_syscalls",
            "-e",
            "sched",
            "--file-version",
            ver,
            "--compress",
            comp,
            "-o",
            f.to_str().unwrap(),
            "--",
        ];
        let cmd = helper_cmd(2000);
        args.extend(cmd.iter().map(String::as_str));
        let out = tp(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "v{ver} {comp}: {stderr}");
        let lines = report_lines(&f);
        assert_eq!(lines.len() as u64, events_in_summary(&stderr), "v{ver} {comp}");
        assert_eq!(count_getppid(&lines, None), 2000, "v{ver} {comp}");
        assert!(lines.iter().all(|l| !l.contains("[LOST")), "v{ver} {comp}");
        // tp report agrees: the same number of events, the same getppid count.
        let rep = tp(&["report", "-i", f.to_str().unwrap()]);
        assert!(rep.status.success(), "{}", String::from_utf8_lossy(&rep.stderr));
        let text = String::from_utf8_lossy(&rep.stdout);
        let tp_lines: Vec<&str> =
            text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()).collect();
        assert_eq!(tp_lines.len(), lines.len(), "v{ver} {comp}: tp report vs trace-cmd report");
        assert_eq!(tp_lines.iter().filter(|l| l.contains(" sys_enter: NR 110 (")).count(), 2000);
    }
    let bad =
        tp(&["record", "-e", "sched", "--file-version", "6", "--compress", "zstd", "--", "true"]);
    assert!(!bad.status.success());
}

/// Damaged files (fixtures/tracedat/bad/, from a mutation run): a lying size is a clear error
/// at once, not gigabytes; a buffer that yields only errors says so and exits 1, never an
/// empty trace with exit 0 (also with --stat).
#[test]
fn report_of_damaged_files_says_what_is_wrong() {
    let bad = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/tracedat/bad");
    for (name, says) in [
        ("oom-abort-v7zstd.dat", "file truncated: need 4294967040 bytes"),
        ("oom-2g-v7zstd.dat", "file truncated: need 2147483647 bytes"),
        ("oom-abort-lying-chunk-1byte.dat", "file truncated"),
        ("silent-trunc-v6.dat", "CPU 0 data of buffer \"tpfx\"): file truncated"),
        ("silent-zeroed-v7zstd.dat", "corrupt compressed data"),
    ] {
        let file = bad.join(name);
        for extra in [&[][..], &["--stat"][..]] {
            let t = Instant::now();
            let out =
                Command::new(TP).args(["report", "-i"]).arg(&file).args(extra).output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{name} {extra:?}: {err}");
            assert!(err.contains(says), "{name} {extra:?}: {err}");
            assert!(t.elapsed() < Duration::from_secs(5), "{name}: {:?}", t.elapsed());
        }
    }
}

#[test]
fn error_and_panic_paths_remove_the_instance() {
    require_tracefs();
    let _g = starting();
    let before = top_level();
    // Error after the instance exists: the output directory does not exist.
    let c = Command::new(TP)
        .args(["record", "-e", "sched", "-o", "/nonexistent-dir/t.dat", "--", "true"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let name = format!("tp-{}", c.id());
    let out = c.wait_with_output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent-dir"));
    assert_state_restored(&before, &name);
    // A panic while recording, with a command running.
    let t = Tmp::new("panic");
    let f = t.path("t.dat");
    let c = Command::new(TP)
        .args([
            "record",
            "-e",
            "sched",
            "-e",
            "raw_syscalls",
            "-o",
            f.to_str().unwrap(),
            "--",
            "sleep",
            "0.2",
        ])
        .env("TP_TEST_PANIC_WHILE_RECORDING", "1")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let name = format!("tp-{}", c.id());
    let out = c.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(101), "{}", String::from_utf8_lossy(&out.stderr));
    assert_state_restored(&before, &name);
}

#[test]
fn lost_events_are_never_silent() {
    require_tracefs();
    let t = Tmp::new("lost");
    let f = t.path("t.dat");
    // A tiny buffer (8 KiB per CPU) against 200,000 syscalls: events may be lost; if any
    // are, tp says so, and what it kept plus what it reports lost covers all of them.
    let n = 200_000;
    let mut args =
        vec!["record", "-b", "8", "-e", "raw_syscalls:sys_enter", "-o", f.to_str().unwrap(), "--"];
    let cmd = helper_cmd(n);
    args.extend(cmd.iter().map(String::as_str));
    let out = tp(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let lines = report_lines(&f);
    let got = count_getppid(&lines, None);
    if got < n {
        let lost: u64 = stderr
            .lines()
            .find_map(|l| l.split("LOST EVENTS: ").nth(1))
            .and_then(|r| r.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{} events missing but no loss reported: {stderr}", n - got));
        assert!(got as u64 + lost >= n as u64, "kept {got} + lost {lost} < {n}: {stderr}");
    } else {
        assert!(stderr.contains("no events lost"), "{stderr}");
    }
}

#[test]
fn stream_prints_every_event_live() {
    require_tracefs();
    let mut args = vec!["stream", "-e", "raw_syscalls:sys_enter", "-f", "id == 110", "--"];
    let cmd = helper_cmd(1234);
    args.extend(cmd.iter().map(String::as_str));
    let out = tp(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let n = text.lines().filter(|l| l.contains(" sys_enter: NR 110 (")).count();
    assert_eq!(n, 1234);
    // A closed stdout ends tp quietly and still cleans up.
    let _g = starting();
    let mut c = Command::new(TP)
        .args(["stream", "-e", "sched", "-e", "raw_syscalls"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let name = format!("tp-{}", c.id());
    let mut first = String::new();
    BufReader::new(c.stdout.take().unwrap()).read_line(&mut first).unwrap();
    // The reader is dropped here: the pipe closes.
    let st = c.wait().unwrap();
    assert!(st.success() || st.code() == Some(0), "{st:?}");
    assert!(!Path::new(TRACEFS).join("instances").join(name).exists());
}

#[test]
fn extract_writes_a_buffer_without_changing_settings() {
    require_tracefs();
    let tfs = tp_tracefs::Tracefs::discover().unwrap();
    let inst = tp_tracefs::Instance::create(&tfs).unwrap();
    let ev = tp_tracefs::EventId::new("raw_syscalls", "sys_enter");
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) };
    inst.enable(&ev).unwrap();
    inst.set_filter(&ev, &format!("common_pid == {tid} && id == 110")).unwrap();
    for _ in 0..4321 {
        // SAFETY: getppid has no preconditions.
        unsafe { libc::syscall(libc::SYS_getppid) };
    }
    let files = [
        "tracing_on",
        "set_event",
        "buffer_size_kb",
        "trace_clock",
        "events/raw_syscalls/sys_enter/filter",
    ];
    let snap = || files.iter().map(|f| inst.read(f).unwrap()).collect::<Vec<_>>();
    let before = snap();
    let t = Tmp::new("extract");
    let f = t.path("x.dat");
    let out = tp(&["extract", "-B", inst.name(), "-o", f.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(snap(), before);
    // The buffer's lines carry its name (`NAME: ` before the task).
    let named = |f: &Path| -> Vec<String> {
        let prefix = format!("{}: ", inst.name());
        report_lines(f).iter().filter_map(|l| l.strip_prefix(&prefix)).map(str::to_string).collect()
    };
    assert_eq!(count_getppid(&named(&f), Some(tid as i32)), 4321);
    // The file names the buffer after the instance, as trace-cmd does.
    let out = tp(&["report", "-B", inst.name(), "-i", f.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(text.matches(" sys_enter: NR 110 (").count(), 4321);
    let out = tp(&["report", "--stat", "-i", f.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with(&format!("buffer: {}\n", inst.name())), "{text}");
    assert!(text.contains("\n  CPU: 0\n    entries:"), "{text}");
    // Reading consumed the pages, and --help says so.
    let again = t.path("again.dat");
    let out = tp(&["extract", "-B", inst.name(), "-o", again.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(count_getppid(&named(&again), Some(tid as i32)), 0);
    let help = String::from_utf8_lossy(&tp(&["extract", "--help"]).stdout).into_owned();
    assert!(help.contains("consume"), "{help}");
    inst.remove().unwrap();
}

#[test]
fn non_root_is_told_to_run_as_root() {
    require_tracefs();
    let t = Tmp::new("nonroot");
    let exe = t.path("tp");
    std::fs::copy(TP, &exe).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&t.0, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&exe)
        .args(["record", "-e", "sched", "-o", "/tmp/never-written.dat", "--", "true"])
        .output()
        .expect("setpriv (util-linux) is installed");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("run as root"), "{stderr}");
    assert!(!stderr.contains("not mounted"), "{stderr}");
}

/// `-a` records every process but tp's own threads (as trace-cmd leaves out its own): their
/// splice()s and writes would otherwise fill the recording with the recorder's own work.
#[test]
fn all_processes_leave_out_tps_own_threads() {
    require_tracefs();
    let t = Tmp::new("all");
    let f = t.path("t.dat");
    let (child, err) = spawn_tp(&[
        "record",
        "-a",
        "-e",
        "raw_syscalls:sys_enter",
        "--duration",
        "1",
        "-o",
        f.to_str().unwrap(),
    ]);
    // Recording: tp's threads (main and one capture thread per CPU) exist now.
    let task = format!("/proc/{}/task", child.id());
    let tp_tids: Vec<i32> = std::fs::read_dir(&task)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    assert!(tp_tids.len() > 1, "{tp_tids:?}");
    // This thread's own syscalls meanwhile.
    for _ in 0..50 {
        std::thread::sleep(Duration::from_millis(5));
    }
    let out = child.wait_with_output().unwrap();
    let stderr = rest(err);
    assert!(out.status.success(), "{stderr}");
    let pids: Vec<i32> =
        report_lines(&f).iter().filter_map(|l| parse_line(l)).map(|(p, _, _)| p).collect();
    assert!(pids.len() >= 50, "only {} events: {stderr}", pids.len());
    let own = pids.iter().filter(|p| tp_tids.contains(p)).count();
    assert_eq!(own, 0, "{own} events of tp's own threads {tp_tids:?}");
}

/// One line of the kernel's text: (cpu, comm, pid, flags, timestamp, "event: text").
fn kernel_line(l: &str) -> Option<(u32, String, i32, String, f64, String)> {
    // `%16s-%-7d [%03d] FLAGS TS: event: text`; a comm may hold spaces and dashes.
    let comm = l.get(..16)?.trim_start().to_string();
    let rest = l.get(16..)?.strip_prefix('-')?;
    let (pid, rest) = rest.split_once(" [")?;
    let (cpu, rest) = rest.split_once("] ")?;
    let (flags, rest) = rest.split_once(' ')?;
    let (ts, body) = rest.trim_start().split_once(": ")?;
    Some((
        cpu.parse().ok()?,
        comm,
        pid.trim().parse().ok()?,
        flags.to_string(),
        ts.parse().ok()?,
        body.to_string(),
    ))
}

/// `tp stream` prints what the kernel's own `trace_pipe` prints for the same events. The
/// oracle is a twin: a second instance with the same events, clock and pid filter, read live
/// through its `trace_pipe` while tp streams its own (each reader consumes what it reads, so
/// they cannot share a buffer; running the workload twice would not be the same run). Every
/// event is written into both buffers by the same tracepoint call, so the two texts differ
/// only in the timestamps (each buffer reads the clock itself) and in lines with tp's own
/// threads as the task, which tp's buffer leaves out. Names are looked up in
/// `saved_cmdlines` when each reader reads, so both readers print the name a task has at
/// that moment: a rename (here a write to `/proc/PID/comm` and two execs) races with the
/// readers, by as long as a reader lags on a loaded machine; tp's name must be one the
/// kernel's text gives that task. The exit (0.3 s after the last exec) carries the new name.
#[test]
fn stream_prints_what_trace_pipe_prints() {
    use std::os::unix::fs::OpenOptionsExt;
    require_tracefs();
    let events = [
        "raw_syscalls",
        "sched:sched_switch",
        "sched:sched_waking",
        "sched:sched_process_fork",
        "sched:sched_process_exec",
        "sched:sched_process_exit",
        "task:task_rename",
    ];
    let mut work = Command::new("sh")
        .args(["-c", "read x; printf renamed > /proc/$$/comm; sleep 0.3 & wait; exec sleep 0.3"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let wpid = work.id() as i32;
    let tfs = tp_tracefs::Tracefs::discover().unwrap();
    let twin = tp_tracefs::Instance::create(&tfs).unwrap();
    twin.set_tracing_on(false).unwrap();
    twin.set_clock("mono").unwrap();
    twin.set_event_pids(&[wpid]).unwrap();
    twin.set_event_fork(true).unwrap();
    for g in events {
        for e in tfs.match_events(g).unwrap() {
            twin.enable(&e).unwrap();
        }
    }
    let mut args = vec!["stream", "-p"];
    let wp = wpid.to_string();
    args.push(&wp);
    args.push("-c");
    for g in events {
        args.extend(["-e", g]);
    }
    let _g = starting();
    let mut tp =
        Command::new(TP).args(&args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let tp_pid = tp.id() as i32;
    let mut tp_out = tp.stdout.take().unwrap();
    let tp_reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut tp_out, &mut s).unwrap();
        s
    });
    // tp leaves its own thread out, then turns tracing on (a new instance starts with
    // tracing on: wait for the first, then the second).
    let dir = Path::new(TRACEFS).join(format!("instances/tp-{tp_pid}"));
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap_or_default();
    let t0 = Instant::now();
    while read("set_event_notrace_pid").trim().is_empty() || read("tracing_on").trim() != "1" {
        assert!(t0.elapsed() < Duration::from_secs(120), "tp stream did not start");
        std::thread::sleep(Duration::from_millis(2));
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut pipe = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(twin.file("trace_pipe"))
        .unwrap();
    let stop2 = stop.clone();
    let twin_reader = std::thread::spawn(move || {
        let mut text = Vec::new();
        let mut buf = vec![0u8; 1 << 16];
        loop {
            match std::io::Read::read(&mut pipe, &mut buf) {
                Ok(n) if n > 0 => text.extend_from_slice(&buf[..n]),
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if stop2.load(std::sync::atomic::Ordering::SeqCst) {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(e) => panic!("reading trace_pipe: {e}"),
            }
        }
        String::from_utf8_lossy(&text).into_owned()
    });
    twin.set_tracing_on(true).unwrap();
    work.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(work.wait().unwrap().success());
    // tp ends by itself once the traced processes are gone.
    let st = tp.wait().unwrap();
    twin.set_tracing_on(false).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let kernel = twin_reader.join().unwrap();
    let ours = tp_reader.join().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut tp.stderr.take().unwrap(), &mut err).unwrap();
    assert!(st.success(), "{err}");
    twin.remove().unwrap();
    if let Ok(d) = std::env::var("TP_TEST_DUMP") {
        std::fs::write(format!("{d}/ours.txt"), &ours).unwrap();
        std::fs::write(format!("{d}/kernel.txt"), &kernel).unwrap();
    }
    let parse = |text: &str| -> Vec<_> {
        text.lines()
            .map(|l| kernel_line(l).unwrap_or_else(|| panic!("not a line: {l:?}")))
            .collect()
    };
    // tp's buffers leave out any `tp-recorder` thread (the drain thread of a program using
    // crate tp): its events and the switches into and out of it. Other processes' recorder
    // threads run beside the workload on a busy machine; their lines are left out of both.
    let recorder = |l: &(u32, String, i32, String, f64, String)| {
        l.1 == "tp-recorder"
            || (l.5.starts_with("sched_switch:") && l.5.contains("comm=tp-recorder "))
    };
    let ours: Vec<_> = parse(&ours).into_iter().filter(|l| !recorder(l)).collect();
    // The kernel's, without the lines of tp's own thread (tp's buffer leaves those out).
    let kernel: Vec<_> =
        parse(&kernel).into_iter().filter(|l| l.2 != tp_pid && !recorder(l)).collect();
    assert!(ours.iter().all(|l| l.2 != tp_pid), "tp's own thread {tp_pid} in its output");
    assert!(kernel.len() > 50, "only {} lines from trace_pipe:\n{kernel:?}", kernel.len());
    // Rename points: exec, comm writes, forks, and a task's first line (its name reaches
    // `saved_cmdlines` at a switch after it) (pid, kernel time).
    let mut renames: Vec<(i32, f64)> = Vec::new();
    for l in &kernel {
        if !renames.iter().any(|r| r.0 == l.2) {
            renames.push((l.2, l.4));
        }
        let (ev, text) = l.5.split_once(": ").unwrap_or((&l.5, ""));
        let field = |name: &str| -> Option<i32> {
            text.split_whitespace().find_map(|w| w.strip_prefix(name)?.parse().ok())
        };
        match ev {
            "sched_process_exec" | "task_rename" => renames.push((field("pid=").unwrap(), l.4)),
            "sched_process_fork" => renames.push((field("child_pid=").unwrap(), l.4)),
            _ => {}
        }
    }
    let near_rename =
        |pid: i32, ts: f64| renames.iter().any(|&(p, t)| p == pid && (t - ts).abs() < 0.1);
    // The names the kernel's text gives each task: a reader starved on a loaded machine reads
    // a line long after it was written, under the task's later name.
    let mut names: std::collections::HashMap<i32, Vec<&str>> = Default::default();
    for l in &kernel {
        names.entry(l.2).or_default().push(&l.1);
    }
    // Over all CPUs, the same events, as multisets: the syscall tracepoints run their
    // probes preemptible (one per buffer), so the task may move to another CPU between the
    // two buffers' writes of one event, and an interrupt coming between them puts its own
    // events on either side of it. For the same reason the need-resched flag (the second)
    // may be set in one write and not the other.
    type Line = (u32, String, i32, String, f64, String);
    let key = |l: &Line| {
        let flags: String =
            l.3.chars().enumerate().map(|(i, c)| if i == 1 { '_' } else { c }).collect();
        format!("{} {} {}", l.2, flags, l.5)
    };
    let mut ka: Vec<String> = ours.iter().map(key).collect();
    let mut kb: Vec<String> = kernel.iter().map(key).collect();
    ka.sort();
    kb.sort();
    if let Some(i) = (0..ka.len().max(kb.len())).find(|&i| ka.get(i) != kb.get(i)) {
        panic!(
            "tp stream ({} lines) and trace_pipe ({} lines) differ (sorted, line {i}):\n  tp:     {:?}\n  kernel: {:?}\ntp's stderr: {err}",
            ka.len(),
            kb.len(),
            ka.get(i),
            kb.get(i)
        );
    }
    // The k-th line with a key in one is the k-th with that key in the other (a task's own
    // lines are in time order in both).
    let mut seen: std::collections::HashMap<String, Vec<&Line>> = Default::default();
    for l in kernel.iter().rev() {
        seen.entry(key(l)).or_default().push(l);
    }
    for x in &ours {
        let y = seen.get_mut(&key(x)).and_then(|v| v.pop()).unwrap();
        let a_name_of_it = names.get(&y.2).is_some_and(|n| n.contains(&x.1.as_str()));
        assert!(
            x.1 == y.1 || near_rename(y.2, y.4) || a_name_of_it,
            "tp says {}-{} where trace_pipe says {}-{} ({}, {} s, no rename of it within 0.1 s, and not a name trace_pipe gives it)",
            x.1,
            x.2,
            y.1,
            y.2,
            y.5,
            y.4
        );
    }
    // After the last exec and 0.3 s of sleep, the exit carries the new name.
    let exit = ours
        .iter()
        .find(|l| l.2 == wpid && l.5.starts_with("sched_process_exit:"))
        .expect("the command's exit");
    assert_eq!(exit.1, "sleep", "{exit:?}");
}

/// With `-a`, tp's own thread is not the task of any line: without the `common_pid`
/// filter on the switch and wakeup events, every wakeup of the reader recorded the reader
/// going back to sleep, which woke it again.
#[test]
fn stream_all_leaves_out_its_own_thread() {
    require_tracefs();
    let _g = starting();
    let c = Command::new(TP)
        .args(["stream", "-a", "-e", "sched:sched_switch", "-e", "sched:sched_waking"])
        .args(["--duration", "1s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let tp_pid = c.id() as i32;
    let out = c.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<_> = text.lines().filter_map(kernel_line).collect();
    assert!(lines.len() > 10, "{text}");
    let own = lines.iter().filter(|l| l.2 == tp_pid).count();
    assert_eq!(own, 0, "{own} of {} lines are tp's own thread {tp_pid}", lines.len());
}

/// A mistyped kernel event is an error naming the nearest events, before anything is
/// recorded: its system is the kernel's, so it is not the program's own tracepoint.
#[test]
fn a_mistyped_kernel_event_is_an_error_with_suggestions() {
    require_tracefs();
    let t = Tmp::new("typo");
    let f = t.path("t.dat");
    let out = tp(&["record", "-e", "sched:sched_swich", "-o", f.to_str().unwrap(), "--", "true"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("did you mean sched:sched_switch?"), "{err}");
    assert!(!f.exists());
    let out = tp(&["stream", "-e", "sched:sched_swich", "--", "true"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("did you mean sched:sched_switch?"), "{err}");
}

/// The first line of `tp --help` names every subcommand.
#[test]
fn help_names_every_subcommand() {
    let help = String::from_utf8_lossy(&tp(&["--help"]).stdout).into_owned();
    let first = help.lines().next().unwrap_or_default();
    let commands: Vec<&str> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    assert!(commands.len() >= 6, "{help}");
    for c in commands {
        assert!(first.contains(c), "{c} missing from {first:?}");
    }
}

/// Counts read as English (`1 event type`, `1 page`), and tp's CPU time is split into
/// setting up, recording and writing the file.
#[test]
fn summary_counts_and_cpu_time_read_plainly() {
    require_tracefs();
    let t = Tmp::new("plural");
    let f = t.path("t.dat");
    let out =
        tp(&["record", "-e", "sched:sched_process_exit", "-o", f.to_str().unwrap(), "--", "true"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("recording 1 event type of command"), "{err}");
    assert!(err.contains("tp: 1 event, 4.0 KiB (1 page) on "), "{err}");
    assert!(err.contains("s setting up (formats, buffers), "), "{err}");
    assert!(err.contains("s while recording, ") && err.contains("s writing the file"), "{err}");
    // tp report: a CPU the trace does not have, a directory as the input.
    let out = tp(&["report", "-C", "7", "-i", f.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("no CPU 7 in "), "{err}");
    let out = tp(&["report", "-i", t.0.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.matches("directory").count(), 1, "{err}");
}

/// On a terminal the live line counts events and its rate includes what is still in the
/// buffers: a steady load never reads 0.0 MB/s (the capture threads move pages only when a
/// buffer is half full). `script` gives tp a terminal.
#[test]
fn live_status_counts_events_at_a_steady_rate() {
    require_tracefs();
    let t = Tmp::new("live");
    let f = t.path("t.dat");
    let cmd = format!(
        "{TP} record -e raw_syscalls -o {} -- sh -c 'timeout 2 sh -c \"while :; do : > /dev/null; done\" || true'",
        f.display()
    );
    // The load runs for a fixed time (an iteration count ran 0.5 s on a quiet machine and
    // several seconds on a busy one), so the status line has a steady second to show.
    let _g = starting();
    let out = Command::new("script")
        .args(["-qfec", &cmd, "/dev/null"])
        .stdin(Stdio::null())
        .output()
        .expect("script (util-linux) is installed");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let lines: Vec<&str> = text.split(['\r', '\n']).filter(|l| l.contains(" MB/s ")).collect();
    let rates: Vec<(f64, f64)> = lines
        .iter()
        .filter_map(|l| {
            let l = l.trim_start_matches("\x1b[K");
            let w: Vec<&str> = l.split_whitespace().collect();
            let at = w.get(1)?.trim_end_matches('s').parse().ok()?;
            let mbs = w.iter().position(|x| *x == "MB/s")?;
            Some((at, w.get(mbs - 1)?.parse().ok()?))
        })
        .collect();
    assert!(lines.iter().all(|l| l.contains(" events ")), "{lines:?}");
    let steady: Vec<f64> = rates.iter().filter(|(at, _)| *at >= 0.5).map(|r| r.1).collect();
    assert!(steady.len() >= 2, "the load ran too short: {lines:?}");
    assert!(steady.iter().all(|&r| r > 0.0), "{lines:?}");
}

/// The frames of each `<stack trace>` in `tp report`'s text (` => name` lines), in order.
fn tp_kernel_stacks(text: &str) -> Vec<Vec<String>> {
    let mut stacks: Vec<Vec<String>> = Vec::new();
    let mut inside = false;
    for l in text.lines() {
        if let Some(f) = l.strip_prefix(" => ") {
            if inside {
                stacks.last_mut().unwrap().push(f.to_string());
            }
        } else {
            inside = l.ends_with(": <stack trace>");
            if inside {
                stacks.push(Vec::new());
            }
        }
    }
    stacks
}

/// The same from `trace-cmd report`: `kernel_stack: <stack trace >` then `=> name (addr)`.
fn trace_cmd_kernel_stacks(lines: &[String]) -> Vec<Vec<String>> {
    let mut stacks: Vec<Vec<String>> = Vec::new();
    let mut inside = false;
    for l in lines {
        if let Some(f) = l.strip_prefix("=> ") {
            if inside {
                let name = f.rsplit_once(" (").map_or(f, |(n, _)| n);
                stacks.last_mut().unwrap().push(name.to_string());
            }
        } else {
            inside = l.contains(" kernel_stack: ");
            if inside {
                stacks.push(Vec::new());
            }
        }
    }
    stacks
}

/// `-T -U`: every getppid() of the command is followed by its kernel stack (the syscall
/// entry path, symbolized from the file's kallsyms) and its user stack; `trace-cmd report`
/// reads the file and finds the same kernel frames in the same order.
#[test]
fn kernel_and_user_stacks_are_recorded_and_trace_cmd_reads_them() {
    require_tracefs();
    let t = Tmp::new("stacks");
    let f = t.path("stacks.dat");
    let mut args =
        vec!["record", "-T", "-U", "-e", "syscalls:sys_enter_getppid", "-o", f.to_str().unwrap()];
    args.push("--");
    let cmd = helper_cmd(50);
    args.extend(cmd.iter().map(String::as_str));
    let out = tp(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rep = tp(&["report", "-i", f.to_str().unwrap()]);
    assert!(rep.status.success(), "{}", String::from_utf8_lossy(&rep.stderr));
    let text = String::from_utf8_lossy(&rep.stdout);
    let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    // The helper's 50 calls (other getppid() calls of the test harness's start may come
    // too): each is followed by a kernel stack through the syscall entry, then a user one.
    let calls: Vec<usize> =
        (0..lines.len()).filter(|&i| lines[i].ends_with("sys_getppid()")).collect();
    assert!(calls.len() >= 50, "{} getppid calls in\n{text}", calls.len());
    for &i in &calls {
        let task_cpu = |l: &str| l.split(']').next().unwrap().to_string();
        assert_eq!(task_cpu(lines[i]), task_cpu(lines[i + 1]), "the stack is the call's");
        assert!(lines[i + 1].ends_with(": <stack trace>"), "after {}: {}", lines[i], lines[i + 1]);
        let frames: Vec<&str> =
            lines[i + 2..].iter().map_while(|l| l.strip_prefix(" => ")).collect();
        assert!(frames.contains(&"do_syscall_64"), "frames {frames:?}");
        assert!(!frames.iter().any(|f| f.starts_with("0x")), "unsymbolized frames {frames:?}");
        let user = &lines[i + 2 + frames.len()];
        assert!(user.ends_with(": <user stack trace>"), "after the kernel stack: {user}");
        let ufirst = lines[i + 3 + frames.len()];
        assert!(ufirst.starts_with(" =>  <0000"), "user frame {ufirst}");
    }
    let ours = tp_kernel_stacks(&text);
    let theirs = trace_cmd_kernel_stacks(&report_lines(&f));
    assert_eq!(ours.len(), calls.len());
    assert_eq!(ours, theirs, "kernel stacks: tp report vs trace-cmd report");
    // --sym-offset --sym-addr: the same frames with `+0xOFF/0xSIZE <ADDRESS>`.
    let rep = tp(&["report", "--sym-offset", "--sym-addr", "-i", f.to_str().unwrap()]);
    let with = tp_kernel_stacks(&String::from_utf8_lossy(&rep.stdout));
    assert_eq!(with.len(), ours.len());
    for (w, o) in with.iter().flatten().zip(ours.iter().flatten()) {
        let (name, rest) = w.split_once("+0x").unwrap_or_else(|| panic!("{w}"));
        assert_eq!(name, o);
        assert!(rest.contains("/0x") && rest.ends_with('>') && rest.contains(" <ffff"), "{w}");
    }
}

/// `--stack-trigger GLOB if FILTER` on an existing instance (`-B`): the trigger and the
/// `stacktrace` option are set for the recording and removed after it.
#[test]
fn stack_trigger_on_an_existing_instance_is_removed_after() {
    require_tracefs();
    let tfs = tp_tracefs::Tracefs::discover().unwrap();
    let inst = tp_tracefs::Instance::create(&tfs).unwrap();
    let ev = tp_tracefs::EventId::new("syscalls", "sys_enter_getppid");
    let t = Tmp::new("trigger");
    let f = t.path("t.dat");
    let mut args = vec![
        "record",
        "-B",
        inst.name(),
        "-U",
        "--stack-trigger",
        "syscalls:sys_enter_getppid if common_pid > 0",
        "-e",
        "syscalls:sys_enter_getppid",
        "-o",
        f.to_str().unwrap(),
        "--",
    ];
    let cmd = helper_cmd(20);
    args.extend(cmd.iter().map(String::as_str));
    let out = tp(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(inst.triggers(&ev).unwrap(), Vec::<String>::new(), "trigger left behind");
    assert!(!inst.option("userstacktrace").unwrap(), "userstacktrace left on");
    let rep = tp(&["report", "-i", f.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&rep.stdout);
    let stacks = tp_kernel_stacks(&text);
    let calls = text.lines().filter(|l| l.ends_with("sys_getppid()")).count();
    assert!(calls >= 20, "{calls} calls");
    assert_eq!(stacks.len(), calls, "one triggered stack per call");
    // A filter the kernel refuses is an error naming it, and nothing is left set.
    let bad = tp(&[
        "record",
        "-B",
        inst.name(),
        "--stack-trigger",
        "syscalls:sys_enter_getppid if no_such_field > 0",
        "-e",
        "syscalls:sys_enter_getppid",
        "-o",
        f.to_str().unwrap(),
        "--",
        "true",
    ]);
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success());
    assert!(err.contains("rejected trigger") && err.contains("no_such_field"), "{err}");
    assert_eq!(inst.triggers(&ev).unwrap(), Vec::<String>::new());
}
