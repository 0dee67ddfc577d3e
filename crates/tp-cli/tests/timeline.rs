//! A Rust program's own tracepoints on the kernel's timeline: `tp record` with kernel and
//! user-space event globs around the `tp` crate's `timeline` example, then `tp report` and
//! `trace-cmd report` on the file; `tp list --program`. Needs root and tracefs (CI runs as
//! root; fails loudly without them).
//!
//! The examples are built by this test (`cargo rustc -p tp --example timeline`, into this
//! test binary's own target directory and profile; `stacks` with frame pointers).

mod common;
use common::{build_example, require_tracefs, run, Tmp, TP};

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

const ROUNDS: usize = 5;
/// More threads (streams of the program's buffer) than this VM has CPUs.
const THREADS: usize = 6;

/// The `timeline` example of crate `tp`, built once.
fn example() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| build_example("timeline", &[]))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Record the example; returns (file, tp's pid = the example's parent, tp's stderr).
fn record(tmp: &Tmp) -> (PathBuf, u32, String) {
    let file = tmp.0.join("trace.dat");
    let child = Command::new(TP)
        .args(["record", "-e", "sched:sched_switch", "-e", "raw_syscalls:sys_enter"])
        .args(["-e", "tpdemo:*", "-o"])
        .arg(&file)
        .arg("--")
        .arg(example())
        .arg(ROUNDS.to_string())
        .arg(THREADS.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let tp_pid = child.id();
    let out = child.wait_with_output().unwrap();
    let err = text(&out.stderr);
    assert!(out.status.success(), "tp record failed: {}\n{err}", out.status);
    (file, tp_pid, err)
}

/// An event line: (timestamp in ns, pid, event name, the rest).
type Ev<'a> = (u64, i32, &'a str, &'a str);

/// `[... ts: name: rest]` of a report line.
fn parse(line: &str) -> Option<Ev<'_>> {
    let (head, tail) = line.split_once("]")?;
    let task = head.rsplit_once('[')?.0.trim();
    let pid: i32 = task.rsplit_once('-')?.1.trim().parse().ok()?;
    let tail = tail.trim_start();
    let (_, tail) = tail.split_once(' ')?; // flags
    let (ts, tail) = tail.trim_start().split_once(": ")?;
    let (s, ns) = ts.trim().split_once('.')?;
    let ts = s.parse::<u64>().ok()? * 1_000_000_000 + ns.parse::<u64>().ok()? * 1000;
    let (name, rest) = tail.split_once(": ")?;
    Some((ts, pid, name.trim(), rest))
}

#[test]
fn user_events_interleave_with_kernel_events() {
    require_tracefs();
    let tmp = Tmp::new("merge");
    let (file, tp_pid, err) = record(&tmp);
    assert!(err.contains("own tracepoints are in buffers timeline-"), "{err}");
    // --stat: the kernel's CPU stats once, under the kernel's buffer, each CPU labelled.
    let stat = text(&run(Command::new(TP).args(["report", "--stat", "-i"]).arg(&file)).stdout);
    assert_eq!(stat.matches("CPU stats saved in the file:").count(), 1, "{stat}");
    assert!(stat.contains("\n  CPU: 0\n    entries:"), "{stat}");
    let report = text(&run(Command::new(TP).arg("report").arg("-i").arg(&file)).stdout);
    let lines: Vec<&str> = report.lines().collect();
    let events: Vec<(usize, Ev<'_>)> =
        lines.iter().enumerate().filter_map(|(i, l)| Some((i, parse(l)?))).collect();
    let pid = events
        .iter()
        .find(|(_, e)| e.2 == "before_getppid")
        .map(|(_, e)| e.1)
        .unwrap_or_else(|| panic!("no before_getppid in the report:\n{report}"));
    // The report is in time order, user and kernel events together.
    for w in events.windows(2) {
        assert!(w[0].1 .0 <= w[1].1 .0, "out of time order:\n{}\n{}", lines[w[0].0], lines[w[1].0]);
    }
    let ours: Vec<&Ev<'_>> = events.iter().map(|(_, e)| e).filter(|e| e.1 == pid).collect();
    for round in 0..ROUNDS {
        let before = format!("round={round} tag=timeline");
        let after =
            format!("round={round} ppid={tp_pid} magic={:#x}", 0xfeed_0000u64 + round as u64);
        let b = ours
            .iter()
            .position(|e| e.2 == "before_getppid" && e.3.trim() == before)
            .unwrap_or_else(|| panic!("no `before_getppid: {before}`:\n{report}"));
        let a = ours
            .iter()
            .position(|e| e.2 == "after_getppid" && e.3.trim() == after)
            .unwrap_or_else(|| panic!("no `after_getppid: {after}`:\n{report}"));
        assert!(b < a, "round {round}: after_getppid before before_getppid:\n{report}");
        // Between them, the getppid() call (NR 110 on x86_64) of this process, and in every
        // round after the first (whose event also set up the thread's buffer, with mmap and
        // so on) nothing else.
        let between: Vec<&&Ev<'_>> = ours[b + 1..a].iter().collect();
        let syscalls: Vec<_> = between.iter().filter(|e| e.2 == "sys_enter").collect();
        let getppid: Vec<_> = syscalls.iter().filter(|e| e.3.starts_with("NR 110 ")).collect();
        assert!(
            getppid.len() == 1 && (round == 0 || syscalls.len() == 1),
            "round {round}: between before_getppid and after_getppid: {between:?}"
        );
    }
    // trace-cmd reads the file too, user buffer included.
    let tc = text(&run(Command::new("trace-cmd").arg("report").arg("-i").arg(&file)).stdout);
    assert_eq!(tc.matches("before_getppid").count(), ROUNDS, "{tc}");
    assert_eq!(tc.matches("after_getppid").count(), ROUNDS, "{tc}");
    assert!(tc.contains("NR 110 "), "{tc}");
    for n in 0..THREADS {
        let w = format!("worker: n={n}\n");
        assert_eq!(report.matches(&w).count(), 1, "{w}{report}");
        let in_tc = tc
            .lines()
            .filter(|l| l.contains(" worker: ") && l.trim_end().ends_with(&format!(" n={n}")))
            .count();
        assert_eq!(in_tc, 1, "trace-cmd: {w}{tc}");
    }
}

#[test]
fn a_program_without_tp_records_no_user_events_and_says_so() {
    require_tracefs();
    let tmp = Tmp::new("none");
    let file = tmp.0.join("trace.dat");
    let out = Command::new(TP)
        .args(["record", "-q", "-e", "sched:sched_switch", "-e", "tpdemo:*", "-o"])
        .arg(&file)
        .args(["--", "true"])
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert!(
        err.contains(
            "no user-space events were recorded for tpdemo:*: does the program call tp::init_from_env()?"
        ),
        "{err}"
    );
    // What was asked for was not recorded: the file is written, the exit status says so.
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(file.is_file());
}

/// A user-space glob that matches none of the program's tracepoints is named with the ones
/// the program has (its file lists them all) and the nearest; the glob that matches records;
/// tp exits 1 (the file is written).
#[test]
fn a_glob_matching_none_of_the_programs_tracepoints_is_named() {
    require_tracefs();
    let tmp = Tmp::new("unmatched");
    let file = tmp.0.join("trace.dat");
    let out = Command::new(TP)
        .args(["record", "-q", "-e", "sched:sched_switch", "-e", "tpdemo:before*"])
        .args(["-e", "tpdemo:wroker", "-o"])
        .arg(&file)
        .arg("--")
        .arg(example())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert!(
        err.contains("-e \"tpdemo:wroker\" matches no kernel event and none of the program's tracepoints (tpdemo:after_getppid, tpdemo:before_getppid, tpdemo:worker): did you mean tpdemo:worker?"),
        "{err}"
    );
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(!err.contains("tpdemo:before*\" matches none"), "{err}");
    let report = text(&run(Command::new(TP).args(["report", "-i"]).arg(&file)).stdout);
    assert!(report.contains(": before_getppid: round=0"), "{report}");
    assert!(!report.contains("after_getppid"), "{report}");
}

#[test]
fn list_a_programs_tracepoints() {
    let out = run(Command::new(TP).arg("list").arg("--program").arg(example()));
    assert_eq!(text(&out.stdout), "tpdemo:after_getppid\ntpdemo:before_getppid\ntpdemo:worker\n");
    let out = run(Command::new(TP)
        .args(["list", "-F", "--program"])
        .arg(example())
        .arg("tpdemo:before*"));
    let s = text(&out.stdout);
    assert!(s.starts_with("tpdemo:before_getppid\n"), "{s}");
    assert!(s.contains("round") && s.contains("__data_loc char[] tag"), "{s}");
    assert!(!s.contains("after_getppid"), "{s}");
}

/// A program whose format text is not UTF-8 (or that fails after writing it) is told so,
/// not asked whether it calls `tp::init_from_env()` (it did: it wrote the formats).
#[test]
fn list_a_program_with_bad_formats_says_why() {
    let tmp = Tmp::new("badformats");
    let prog = tmp.0.join("prog");
    let script = |body: &str| {
        std::fs::write(&prog, format!("#!/bin/sh\n{body}\n")).unwrap();
        let mut perm = std::fs::metadata(&prog).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
        std::fs::set_permissions(&prog, perm).unwrap();
    };
    let list = || {
        let out = Command::new(TP).arg("list").arg("--program").arg(&prog).output().unwrap();
        (out.status.code(), text(&out.stderr))
    };
    script(r"printf 'system: demo\nname: caf\351\nID: 1\n' > $TP_LIST_FORMATS");
    let (code, err) = list();
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("are not UTF-8 (byte 22, line 2: \"name: caf\u{fffd}\")"), "{err}");
    assert!(!err.contains("init_from_env"), "{err}");
    script(r"printf 'system: demo\n' > $TP_LIST_FORMATS; exit 3");
    let (code, err) = list();
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("failed (exit status: 3) while listing"), "{err}");
    script("true");
    let (_, err) = list();
    assert!(err.contains("does it call tp::init_from_env()"), "{err}");
}

/// The program's own `tp-recorder` thread (crate `tp`'s drain thread) is left out of the
/// recording as tp's own threads are: no `sched_switch` into or out of it and no event of
/// its own after it has named itself. `--keep-recorder` keeps it (which also shows this
/// test can fail).
#[test]
fn the_programs_recorder_thread_is_left_out_unless_kept() {
    require_tracefs();
    let tmp = Tmp::new("recorder");
    let file = tmp.0.join("trace.dat");
    let recorder_lines = |keep: bool| -> (Vec<String>, usize) {
        let mut cmd = Command::new(TP);
        cmd.args(["record", "-q", "-e", "sched:sched_switch", "-e", "raw_syscalls:sys_enter"]);
        if keep {
            cmd.arg("--keep-recorder");
        }
        // Enough rounds that the recorder drains (and sleeps) several times.
        run(cmd.args(["-e", "tpdemo:*", "-o"]).arg(&file).arg("--").arg(example()).arg("200"));
        let report = text(&run(Command::new(TP).args(["report", "-i"]).arg(&file)).stdout);
        let switches = report.lines().filter(|l| l.contains(" sched_switch: ")).count();
        let lines = report
            .lines()
            .filter(|l| {
                l.contains("comm=tp-recorder") || l.trim_start().starts_with("tp-recorder-")
            })
            .map(str::to_string)
            .collect();
        (lines, switches)
    };
    let (kept, _) = recorder_lines(true);
    assert!(
        kept.iter().any(|l| l.contains(" sched_switch: ") && l.contains("prev_comm=tp-recorder")),
        "with --keep-recorder the recorder's switches are recorded:\n{}",
        kept.join("\n")
    );
    let (left, switches) = recorder_lines(false);
    // The name filter starts when the thread names itself: only the system calls of its
    // start (glibc's thread start, then prctl(PR_SET_NAME), NR 157) come before.
    let named = left.iter().position(|l| l.contains(" sys_enter: NR 157 ")).map_or(0, |i| i + 1);
    assert!(
        left[..named].iter().all(|l| l.contains(" sys_enter: ")) && left[named..].is_empty(),
        "the recorder thread was recorded:\n{}",
        left.join("\n")
    );
    // The program's own switches are still there (2 ms sleeps in each of 200 rounds).
    assert!(switches >= 200, "only {switches} sched_switch lines");
}

/// `TP_STACKS` through `tp record`: the program's `stacks:leaf` events (fired in `c`, called
/// by `b`, `a`, `main`; the example built with frame pointers) each come with their user
/// stack in its buffer, printed as the kernel prints one (` =>  <address>`), with the
/// return addresses into c, b, a and main first; `trace-cmd report` reads the file.
#[test]
fn rust_events_carry_user_stacks_through_tp_record() {
    require_tracefs();
    let exe = build_example("stacks", &["-C", "force-frame-pointers=yes"]);
    let tmp = Tmp::new("stacks");
    let file = tmp.path("trace.dat");
    let out = run(Command::new(TP)
        .args(["record", "-e", "stacks:*", "-o"])
        .arg(&file)
        .arg("--")
        .arg(&exe)
        .arg("20")
        .env("TP_STACKS", "stacks:leaf"));
    let stdout = text(&out.stdout);
    let addr = |name: &str| -> u64 {
        let l = stdout.lines().find(|l| l.starts_with(&format!("{name} "))).unwrap();
        u64::from_str_radix(l.split_whitespace().nth(1).unwrap(), 16).unwrap()
    };
    let funcs = [("c", addr("c")), ("b", addr("b")), ("a", addr("a")), ("main", addr("main"))];
    let func_of =
        |ra: u64| funcs.iter().filter(|(_, s)| *s < ra).max_by_key(|(_, s)| *s).map(|(n, _)| *n);
    let report = text(&run(Command::new(TP).arg("report").arg("-i").arg(&file)).stdout);
    let lines: Vec<&str> = report.lines().collect();
    let leaves: Vec<usize> =
        (0..lines.len()).filter(|&i| lines[i].contains(": leaf: i=")).collect();
    assert_eq!(leaves.len(), 20, "{report}");
    for &i in &leaves {
        assert!(lines[i + 1].ends_with(": <user stack trace>"), "{}\n{}", lines[i], lines[i + 1]);
        let frames: Vec<u64> = lines[i + 2..]
            .iter()
            .map_while(|l| l.strip_prefix(" =>  <")?.strip_suffix('>'))
            .map(|a| u64::from_str_radix(a, 16).unwrap())
            .collect();
        let names: Vec<_> = frames.iter().take(4).map(|&ra| func_of(ra)).collect();
        assert_eq!(names, [Some("c"), Some("b"), Some("a"), Some("main")], "{frames:x?}");
    }
    let plain = lines.iter().filter(|l| l.contains(": plain: i=")).count();
    let stacks = lines.iter().filter(|l| l.ends_with(": <user stack trace>")).count();
    assert_eq!((plain, stacks), (20, 20));
    let tc = text(&run(Command::new("trace-cmd").args(["report", "-i"]).arg(&file)).stdout);
    assert_eq!(tc.matches(" user_stack: ").count(), 20, "{tc}");
    // --sym-userobj: the frames in the program as its file and the offset in the mapping
    // (the maps tp record saved), the same count of frame lines.
    let sym =
        text(&run(Command::new(TP).args(["report", "--sym-userobj", "-i"]).arg(&file)).stdout);
    let exe = std::fs::canonicalize(&exe).unwrap();
    let in_exe = format!(" => {}[+0x", exe.display());
    let named = sym.lines().filter(|l| l.starts_with(&in_exe)).count();
    assert!(named >= 4 * 20, "{named} frames named {in_exe}...] in\n{sym}");
    let frames = |t: &str| t.lines().filter(|l| l.starts_with(" => ")).count();
    assert_eq!(frames(&sym), frames(&report));

    // -U: the program's events (all of them: TP_STACKS is the -e globs) carry their stacks
    // too, as the kernel's events do.
    let file = tmp.path("u.dat");
    run(Command::new(TP)
        .args(["record", "-U", "-e", "stacks:*", "-o"])
        .arg(&file)
        .arg("--")
        .arg(&exe)
        .arg("20")
        .env_remove("TP_STACKS"));
    let report = text(&run(Command::new(TP).arg("report").arg("-i").arg(&file)).stdout);
    let lines: Vec<&str> = report.lines().collect();
    let events: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].contains(": leaf: i=") || lines[i].contains(": plain: i="))
        .collect();
    assert_eq!(events.len(), 40, "{report}");
    for &i in &events {
        assert!(lines[i + 1].ends_with(": <user stack trace>"), "{}\n{}", lines[i], lines[i + 1]);
    }
}
