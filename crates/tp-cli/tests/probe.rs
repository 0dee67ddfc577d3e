//! `tp probe` on the running kernel (needs root, tracefs with `uprobe_events`, gcc; CI has
//! them): uprobes and uretprobes on a C program's function, recorded by `tp record`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::RwLock;

const TP: &str = env!("CARGO_BIN_EXE_tp");
const UPROBE_EVENTS: &str = "/sys/kernel/tracing/uprobe_events";

/// A directory with a C program built from `src` as `name`; on drop, every probe of the
/// program's groups is removed (a failing test leaves nothing in `uprobe_events`) and the
/// directory too.
struct Prog {
    dir: PathBuf,
    exe: PathBuf,
    groups: Vec<String>,
}

impl Prog {
    fn build(name: &str, src: &str) -> Prog {
        Prog::build_from(name, &[src], &["-O1", "-g"])
    }

    /// Build `name` from C sources with gcc `flags`; `PROV` is defined as `NAME<pid>`.
    fn build_from(name: &str, srcs: &[&str], flags: &[&str]) -> Prog {
        assert!(
            Path::new(UPROBE_EVENTS).exists(),
            "these tests need root and {UPROBE_EVENTS} (CI runs as root)"
        );
        let dir = std::env::temp_dir().join(format!("tp-probe-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let files: Vec<PathBuf> = srcs
            .iter()
            .enumerate()
            .map(|(i, src)| {
                let c = dir.join(format!("{name}{i}.c"));
                std::fs::write(&c, src).unwrap();
                c
            })
            .collect();
        // The binary's name carries the pid: parallel runs get groups of their own.
        let exe = dir.join(format!("{name}{}", std::process::id()));
        let out = Command::new("gcc")
            .args(flags)
            .arg(format!("-DPROV={name}{}", std::process::id()))
            .arg("-o")
            .arg(&exe)
            .args(&files)
            .output()
            .unwrap();
        assert!(out.status.success(), "gcc: {}", String::from_utf8_lossy(&out.stderr));
        let group = format!("probe_{name}{}", std::process::id());
        Prog { dir, exe, groups: vec![group] }
    }
}

impl Drop for Prog {
    fn drop(&mut self) {
        for g in &self.groups {
            let _ = Command::new(TP).args(["probe", "--del", &format!("{g}:*")]).output();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A tracefs instance of the test's own with one event group enabled, removed on drop: the
/// kernel's own text of the same run.
struct Twin(PathBuf);

impl Twin {
    fn enable(group: &str) -> Twin {
        let dir = PathBuf::from(format!(
            "/sys/kernel/tracing/instances/tp-probetest-{}",
            std::process::id()
        ));
        std::fs::create_dir(&dir).unwrap();
        let t = Twin(dir);
        std::fs::write(t.0.join(format!("events/{group}/enable")), "1").unwrap();
        t
    }

    /// The event part of each line of the kernel's `trace` (after the timestamp).
    fn bodies(&self) -> Vec<String> {
        bodies(&std::fs::read_to_string(self.0.join("trace")).unwrap())
    }
}

impl Drop for Twin {
    fn drop(&mut self) {
        let _ = std::fs::write(self.0.join("events/enable"), "0");
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// `f: (0x...) x=1` of each event line of a `trace` text.
fn bodies(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once(": ").map(|(_, b)| b.to_string()))
        .collect()
}

/// `tp record -q -o OUT -e GLOB -- CMD...`
fn record(out: &Path, glob: &str, cmd: &[&str]) -> Output {
    let mut args = vec!["record", "-q", "-o", out.to_str().unwrap(), "-e", glob, "--"];
    args.extend_from_slice(cmd);
    tp(&args)
}

/// Every tp start removes the probes of killed tp runs. The test that kills one holds the
/// write side from the kill to its own next run (which must be the one that removes them);
/// every other tp start here holds the read side (tests run in parallel).
static TP_STARTS: RwLock<()> = RwLock::new(());

fn tp(args: &[&str]) -> Output {
    let _g = TP_STARTS.read().unwrap_or_else(|e| e.into_inner());
    tp_unlocked(args)
}

fn tp_unlocked(args: &[&str]) -> Output {
    Command::new(TP).args(args).output().unwrap()
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "tp failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn uprobe_lines(group: &str) -> Vec<String> {
    std::fs::read_to_string(UPROBE_EVENTS)
        .unwrap()
        .lines()
        .filter(|l| l.contains(&format!(":{group}/")))
        .map(str::to_string)
        .collect()
}

const CALLS: &str = r#"
#include <stdlib.h>
__attribute__((noinline)) int f(int x) { return x * 7 - 3; }
__attribute__((noinline)) int g_unused(int x) { return x; }
int main(int argc, char **argv) {
    int n = atoi(argv[1]);
    volatile int s = 0;
    for (int i = 0; i < n; i++) s += f(i);
    return 0;
}
"#;

#[test]
fn uprobe_and_uretprobe_record_every_call_with_its_argument_and_return_value() {
    let p = Prog::build("calls", CALLS);
    let exe = p.exe.to_str().unwrap();
    let group = &p.groups[0];
    let funcs = ok(&tp(&["probe", "-x", exe, "--funcs", "g_*"]));
    assert_eq!(funcs.lines().collect::<Vec<_>>(), ["g_unused"], "{funcs}");
    let all = ok(&tp(&["probe", "-x", exe, "--funcs"]));
    assert!(all.lines().any(|l| l == "f") && all.lines().any(|l| l == "main"), "{all}");

    ok(&tp(&["probe", "-x", exe, "--add", "f", "x=%di:s32"]));
    ok(&tp(&["probe", "-x", exe, "f%return", "ret=$retval:s32"]));
    let list = ok(&tp(&["probe", "--list"]));
    assert!(list.contains(&format!("{group}:f\t")), "{list}");
    assert!(list.contains(&format!("{group}:f__return\t")), "{list}");
    assert_eq!(uprobe_lines(group).len(), 2);

    const N: i32 = 25;
    let twin = Twin::enable(group);
    let out = p.dir.join("t.dat");
    let n = N.to_string();
    ok(&record(&out, &format!("{group}:f*"), &[exe, &n]));
    let text = ok(&tp(&["report", "-i", out.to_str().unwrap()]));
    let values = |key: &str, ev: &str| -> Vec<i32> {
        text.lines()
            .filter(|l| l.contains(&format!(" {ev}: (")))
            .map(|l| {
                let v = l.rsplit_once(key).unwrap_or_else(|| panic!("no {key} in {l}")).1;
                v.trim().parse().unwrap()
            })
            .collect()
    };
    let want_x: Vec<i32> = (0..N).collect();
    let want_ret: Vec<i32> = (0..N).map(|i| i * 7 - 3).collect();
    assert_eq!(values("x=", "f"), want_x, "{text}");
    assert_eq!(values("ret=", "f__return"), want_ret, "{text}");
    // Printed as the kernel prints them: `(0x...)`, `(0x<return> <- 0x<func>)`.
    assert_eq!(bodies(&text), twin.bodies());
    drop(twin);

    let del = ok(&tp(&["probe", "--del", &format!("{group}:f*")]));
    assert_eq!(del.lines().count(), 2, "{del}");
    assert!(uprobe_lines(group).is_empty(), "{:?}", uprobe_lines(group));
    assert!(!Path::new(&format!("/sys/kernel/tracing/events/{group}")).exists());
}

#[test]
fn a_definition_the_kernel_rejects_shows_its_error_log_with_the_caret() {
    let p = Prog::build("reject", CALLS);
    let exe = p.exe.to_str().unwrap();
    let out = tp(&["probe", "-x", exe, "f", "x=%nosuchreg"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("Invalid register name"), "{err}");
    assert!(err.contains("Command: p:"), "{err}");
    assert!(err.lines().any(|l| l.trim() == "^"), "{err}");
    assert!(uprobe_lines(&p.groups[0]).is_empty());

    let out = tp(&["probe", "-x", exe, "ff"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(err.contains("did you mean f?"), "{err}");
    let out = tp(&["probe", "-x", "/etc/passwd", "f"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("not an ELF file"));
    let out = tp(&["probe", "--del", "no_such_group_xyz:*"]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn kernel_functions_without_kprobe_events_are_refused_clearly() {
    if Path::new("/sys/kernel/tracing/kprobe_events").exists() {
        // This kernel has kprobes: the refusal below does not apply.
        let out = tp(&["probe", "do_sys_open"]);
        assert_eq!(out.status.code(), Some(1));
        return;
    }
    let out = tp(&["probe", "do_sys_open"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no kprobe events"), "{err}");
}

/// A program with two USDT probes: `PROV:plain` (no semaphore; an int, a long and a short)
/// and `PROV:gated` (behind its semaphore, in a file built with `_SDT_HAS_SEMAPHORES`). It
/// prints how many times it saw the semaphore set. `PROV` (`NAME<pid>`) goes through one
/// more macro so that it is expanded before sdt.h stringizes it.
const SDT_MAIN: &str = r#"
#include <sys/sdt.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#define PROBE3(...) DTRACE_PROBE3(__VA_ARGS__)
#define SEM_(p) p##_gated_semaphore
#define SEM(p) SEM_(p)
extern unsigned short SEM(PROV);
void gated(int i);
int main(int argc, char **argv) {
    int n = atoi(argv[1]);
    int delay_us = argc > 2 ? atoi(argv[2]) : 0;
    int seen = 0;
    for (int i = 0; i < n; i++) {
        if (delay_us) usleep(delay_us);
        long big = (long)i * 1000 - 5;
        short small = (short)(-i);
        PROBE3(PROV, plain, i, big, small);
        if (SEM(PROV)) { seen++; gated(i * 2); }
    }
    printf("semaphore seen %d\n", seen);
    return 0;
}
"#;

const SDT_GATED: &str = r#"
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>
#define PROBE1(...) DTRACE_PROBE1(__VA_ARGS__)
#define SEM_(p) p##_gated_semaphore
#define SEM(p) SEM_(p)
unsigned short SEM(PROV) __attribute__((section(".probes")));
void gated(int i) { PROBE1(PROV, gated, i); }
"#;

/// The SDT program's provider: its name and the test process's pid (each test has its own).
fn provider(p: &Prog) -> String {
    p.exe.file_name().unwrap().to_string_lossy().into_owned()
}

/// Build the SDT program with `opt` (-O0 puts the arguments on the stack, -O2 in registers),
/// named `TAG_OPT`. `owns`: whether dropping it removes the `sdt_PROV` probes.
fn sdt_prog(tag: &str, opt: &str, owns: bool) -> Prog {
    let name = format!("{tag}_{}", opt.trim_start_matches('-'));
    let mut p = Prog::build_from(&name, &[SDT_MAIN, SDT_GATED], &[opt]);
    p.groups = if owns { vec![format!("sdt_{}", provider(&p))] } else { Vec::new() };
    p
}

/// (provider, name, location, semaphore, arguments) as `readelf -n` prints them.
fn readelf_notes(exe: &Path) -> Vec<(String, String, u64, u64, String)> {
    let out = Command::new("readelf").arg("-n").arg(exe).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let hex = |s: &str| u64::from_str_radix(s.trim().trim_start_matches("0x"), 16).unwrap();
    let mut v = Vec::new();
    let mut cur: Vec<String> = Vec::new();
    for l in text.lines().map(str::trim) {
        if let Some(x) = l.strip_prefix("Provider: ") {
            cur = vec![x.to_string()];
        } else if let Some(x) = l.strip_prefix("Name: ") {
            cur.push(x.to_string());
        } else if let Some(x) = l.strip_prefix("Location: ") {
            // Location: 0x..., Base: 0x..., Semaphore: 0x...
            cur.extend(x.split(", ").map(|p| p.split_once(": ").map_or(p, |x| x.1).to_string()));
        } else if let Some(x) = l.strip_prefix("Arguments:") {
            v.push((cur[0].clone(), cur[1].clone(), hex(&cur[2]), hex(&cur[4]), x.trim().into()));
        }
    }
    v
}

fn tp_sdt_notes(exe: &Path) -> Vec<(String, String, u64, u64, String)> {
    let text = ok(&tp(&["probe", "-x", exe.to_str().unwrap(), "--sdt"]));
    let hex = |s: &str| u64::from_str_radix(s.trim().trim_start_matches("0x"), 16).unwrap();
    text.lines()
        .map(|l| {
            let (name, rest) = l.split_once('\t').unwrap();
            let (prov, name) = name.strip_prefix("sdt_").unwrap().split_once(':').unwrap();
            let field = |k: &str| rest.split_once(k).unwrap().1.split("  ").next().unwrap();
            let args = rest.split_once("arguments").map_or("", |x| x.1.trim()).to_string();
            (prov.into(), name.into(), hex(field("location ")), hex(field("semaphore ")), args)
        })
        .collect()
}

#[test]
fn sdt_notes_are_listed_as_readelf_shows_them() {
    for opt in ["-O0", "-O2"] {
        let p = sdt_prog("list", opt, false);
        let want = readelf_notes(&p.exe);
        assert_eq!(want.len(), 2, "{want:?}");
        assert!(want.iter().any(|n| n.3 != 0) && want.iter().any(|n| n.3 == 0), "{want:?}");
        assert_eq!(tp_sdt_notes(&p.exe), want, "{opt}");
    }
}

#[test]
fn sdt_probes_added_by_tp_probe_stay_until_deleted_and_are_not_removed_by_a_recording() {
    let p = sdt_prog("add", "-O0", true);
    let group = format!("sdt_{}", provider(&p));
    let exe = p.exe.to_str().unwrap();
    ok(&tp(&["probe", "-x", exe, "--add", &format!("{group}:*")]));
    let lines = uprobe_lines(&group);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines.iter().any(|l| l.contains(&format!("{group}/gated ")) && l.contains(")")),
        "{lines:?}"
    );
    // A recording uses them as they are and leaves them.
    let out = p.dir.join("a.dat");
    let rec = record(&out, &format!("{group}:*"), &[exe, "7"]);
    assert_eq!(ok(&rec).trim(), "semaphore seen 7");
    assert_eq!(uprobe_lines(&group), lines);
    ok(&tp(&["probe", "--del", &format!("{group}:*")]));
    assert!(uprobe_lines(&group).is_empty());
}

/// Runs the SDT program under `tp record -e 'sdt_PROV:*'` and checks every firing's values.
fn record_sdt(p: &Prog, n: i64) {
    let exe = p.exe.to_str().unwrap();
    let group = format!("sdt_{}", provider(p));
    let out = p.dir.join("t.dat");
    let rec = record(&out, &format!("{group}:*"), &[exe, &n.to_string()]);
    // The semaphore was set by the kernel while the probe was enabled.
    assert_eq!(ok(&rec).trim(), format!("semaphore seen {n}"));
    assert!(uprobe_lines(&group).is_empty(), "{:?}", uprobe_lines(&group));
    let text = ok(&tp(&["report", "-i", out.to_str().unwrap()]));
    let args_of = |ev: &str| -> Vec<Vec<i64>> {
        text.lines()
            .filter(|l| l.contains(&format!(" {ev}: (")))
            .map(|l| {
                l.split_whitespace()
                    .filter_map(|w| w.split_once('=').map(|(_, v)| v.parse::<i64>().unwrap()))
                    .collect()
            })
            .collect()
    };
    let plain: Vec<Vec<i64>> = (0..n).map(|i| vec![i, i * 1000 - 5, -i]).collect();
    let gated: Vec<Vec<i64>> = (0..n).map(|i| vec![i * 2]).collect();
    assert_eq!(args_of("plain"), plain, "{text}");
    assert_eq!(args_of("gated"), gated, "{text}");
}

#[test]
fn sdt_probes_record_every_firing_with_its_arguments_and_are_removed() {
    for opt in ["-O0", "-O2"] {
        let p = sdt_prog("rec", opt, true);
        // Untraced, the semaphore stays clear.
        let plain = Command::new(&p.exe).arg("5").output().unwrap();
        assert_eq!(String::from_utf8_lossy(&plain.stdout).trim(), "semaphore seen 0");
        record_sdt(&p, 40);
    }
}

/// The guard process of a tp (its child named `tpg-PID`).
fn guard_of(tp: u32) -> Option<i32> {
    let kids = std::fs::read_to_string(format!("/proc/{tp}/task/{tp}/children")).ok()?;
    kids.split_whitespace().map(|p| p.parse::<i32>().unwrap()).find(|k| {
        std::fs::read_to_string(format!("/proc/{k}/comm"))
            .is_ok_and(|c| c.trim() == format!("tpg-{tp}"))
    })
}

/// Starts `tp record -e GLOB -- EXE 2000 1000` (the command outlives it) and waits until
/// both its probes are defined.
fn start_recording(p: &Prog, group: &str) -> std::process::Child {
    let out = p.dir.join("k.dat");
    let glob = format!("{group}:*");
    let exe = p.exe.to_str().unwrap();
    let rec = Command::new(TP)
        .args(["record", "-q", "-o", out.to_str().unwrap(), "-e", &glob, "--", exe, "2000", "1000"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Waits on conditions, with timeouts only a hung tp reaches on a loaded machine.
    wait_for("the recording to define its probes", || uprobe_lines(group).len() == 2);
    rec
}

/// Polls `done` until it holds; panics after two minutes.
fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let t0 = std::time::Instant::now();
    while !done() {
        assert!(t0.elapsed().as_secs() < 120, "waited 120 s for {what}");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Whether process `pid` has exited (gone, or a zombie).
fn exited(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_or(true, |s| s.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('Z')))
}

#[test]
fn probes_of_a_killed_recording_are_removed_by_its_guard_or_the_next_run() {
    let p = sdt_prog("kill", "-O1", true);
    let exe = p.exe.to_str().unwrap();
    let group = format!("sdt_{}", provider(&p));

    // SIGKILL of tp as soon as its probes exist: its guard, forked before them, removes them.
    let mut rec = start_recording(&p, &group);
    rec.kill().unwrap();
    rec.wait().unwrap();
    wait_for("the guard to remove the probes", || uprobe_lines(&group).is_empty());

    // tp and its guard killed: the next run removes them.
    let _only_this_run = TP_STARTS.write().unwrap_or_else(|e| e.into_inner());
    let mut rec = start_recording(&p, &group);
    // The guard is forked before the probes are defined.
    let guard = guard_of(rec.id()).expect("tp record defined probes without a guard process");
    // SAFETY: kill has no memory preconditions.
    unsafe { libc::kill(guard, libc::SIGKILL) };
    wait_for("the guard to die", || exited(guard));
    rec.kill().unwrap();
    rec.wait().unwrap();
    assert_eq!(uprobe_lines(&group).len(), 2, "tp and its guard killed leave them");
    let ledger = Path::new("/run/tp/uprobes").join(rec.id().to_string());
    assert!(ledger.exists());
    let n_dat = p.dir.join("n.dat");
    let next = tp_unlocked(&[
        "record",
        "-q",
        "-o",
        n_dat.to_str().unwrap(),
        "-e",
        &format!("{group}:*"),
        "--",
        exe,
        "1",
    ]);
    let err = String::from_utf8_lossy(&next.stderr);
    assert!(next.status.success(), "{err}");
    assert!(
        err.contains(&format!("removed probe {group}:plain left by a tp run that was killed")),
        "{err}"
    );
    assert!(uprobe_lines(&group).is_empty(), "{:?}\n{err}", uprobe_lines(&group));
    assert!(!ledger.exists());
}

#[test]
fn tp_stat_counts_sdt_probes_of_a_command() {
    let p = sdt_prog("stat", "-O2", true);
    let group = format!("sdt_{}", provider(&p));
    let out = tp(&[
        "stat",
        "-x",
        ",",
        "-e",
        &format!("{group}:plain"),
        "-e",
        &format!("{group}:gated"),
        "--",
        p.exe.to_str().unwrap(),
        "30",
    ]);
    assert_eq!(ok(&out).trim(), "semaphore seen 30");
    let err = String::from_utf8_lossy(&out.stderr);
    for ev in ["plain", "gated"] {
        let line = err.lines().find(|l| l.contains(&format!(",{group}:{ev},"))).unwrap_or("");
        assert!(line.starts_with("30,"), "{err}");
    }
    assert!(uprobe_lines(&group).is_empty(), "{:?}", uprobe_lines(&group));
}

#[test]
fn sdt_probes_of_a_running_process_are_found_in_its_mappings() {
    let p = sdt_prog("pid", "-O2", true);
    let group = format!("sdt_{}", provider(&p));
    // 3000 iterations 1 ms apart; killed at the end.
    let mut prog = Command::new(&p.exe)
        .args(["3000", "1000"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(100));
    let out = p.dir.join("p.dat");
    let pid = prog.id().to_string();
    let rec = tp(&[
        "record",
        "-q",
        "-o",
        out.to_str().unwrap(),
        "-e",
        &format!("{group}:*"),
        "-p",
        &pid,
        "--duration",
        "700ms",
    ]);
    let _ = prog.kill();
    let _ = prog.wait();
    ok(&rec);
    assert!(uprobe_lines(&group).is_empty(), "{:?}", uprobe_lines(&group));
    let text = ok(&tp(&["report", "-i", out.to_str().unwrap()]));
    let plain: Vec<Vec<i64>> = text
        .lines()
        .filter(|l| l.contains(" plain: ("))
        .map(|l| {
            l.split_whitespace()
                .filter_map(|w| w.split_once('=').map(|(_, v)| v.parse::<i64>().unwrap()))
                .collect()
        })
        .collect();
    assert!(plain.len() > 50, "{text}");
    let first = plain[0][0];
    for (k, v) in plain.iter().enumerate() {
        let i = first + k as i64;
        assert_eq!(v, &vec![i, i * 1000 - 5, -i], "{text}");
    }
    // The semaphore was set in the running process: the gated site fired too.
    assert!(text.lines().filter(|l| l.contains(" gated: (")).count() > 50, "{text}");
}

// ---- Rust tracepoints as USDT probes ----
//
// The traced Rust program is this test binary itself, run as `rust_sdt_program` (an ignored
// test, run only through `rust_program`): its tracepoints are the SDT probes `sdt_rsdt:*`.
// The provider is a compile-time name, the same in every clone, so runs of these tests
// take turns machine-wide (a lock file): two at once would share the probes' group.

tp::trace_event! {
    /// One of each argument form: unsigned, signed of three widths, bool and a string.
    rsdt:tick(i: u32, big: i64, small: i16, flag: bool, name: &str) {
        fields { i: u32, big: i64, small: i16, flag: bool, name: str }
        printk("i=%u big=%lld small=%d flag=%d name=%s", i, big, small, flag, name)
    }
    /// No arguments.
    rsdt:idle() {
        fields {}
        printk("idle")
    }
}

/// What the program passes as `name`: its address is the fifth argument.
static TICK_NAME: &str = "tick-name";

#[test]
#[ignore = "the traced program of the Rust USDT tests, run by them (TP_RSDT=N,DELAY_US)"]
fn rust_sdt_program() {
    let spec =
        std::env::var("TP_RSDT").expect("run by the Rust USDT tests, with TP_RSDT=N,DELAY_US");
    let (n, delay) = spec.split_once(',').unwrap();
    let (n, delay): (u32, u64) = (n.parse().unwrap(), delay.parse().unwrap());
    println!("name at {:#x}", TICK_NAME.as_ptr() as usize);
    let mut seen = 0;
    for i in 0..n {
        if delay > 0 {
            std::thread::sleep(std::time::Duration::from_micros(delay));
        }
        if tracepoint_tick().sdt_attached() > 0 {
            seen += 1;
        }
        trace_tick(i, i64::from(i) * -1000 - 7, -(i as i16), i % 2 == 1, TICK_NAME);
        trace_idle();
    }
    println!("sdt attached seen {seen}");
}

/// Held while a Rust USDT test runs: machine-wide turns (see above); the lock is the open
/// file.
struct RsdtTurn(#[allow(dead_code)] std::fs::File);

fn rsdt_turn() -> RsdtTurn {
    let f = std::fs::File::create("/tmp/tp-test-rsdt.lock").unwrap();
    // SAFETY: flock on an open descriptor; no memory involved.
    assert_eq!(unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&f), libc::LOCK_EX) }, 0);
    RsdtTurn(f)
}

impl Drop for RsdtTurn {
    fn drop(&mut self) {
        // The group's probes go with the turn, whatever the test did.
        let _ = tp_unlocked(&["probe", "--del", "sdt_rsdt:*"]);
    }
}

/// This test binary running as the traced Rust program: `n` iterations `delay_us` apart.
/// Killed on drop.
struct RustProgram {
    child: std::process::Child,
    out: std::io::BufReader<std::process::ChildStdout>,
    /// The address of the string the program passes.
    name_at: u64,
}

fn rust_program(n: u32, delay_us: u64) -> RustProgram {
    use std::io::BufRead;
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "rust_sdt_program", "--ignored", "--nocapture", "--test-threads=1"])
        .env("TP_RSDT", format!("{n},{delay_us}"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    // The harness prints `test rust_sdt_program ... ` before it.
    let mut line = String::new();
    let hex = loop {
        line.clear();
        assert_ne!(out.read_line(&mut line).unwrap(), 0, "the program printed no address");
        if let Some((_, h)) = line.split_once("name at 0x") {
            break h.trim();
        }
    };
    let name_at = u64::from_str_radix(hex, 16).unwrap();
    RustProgram { child, out, name_at }
}

impl RustProgram {
    /// Wait for the end; how many iterations saw the SDT semaphore set.
    fn seen(mut self) -> u32 {
        use std::io::Read;
        let mut rest = String::new();
        self.out.read_to_string(&mut rest).unwrap();
        assert!(self.child.wait().unwrap().success(), "{rest}");
        let l = rest.lines().find_map(|l| l.strip_prefix("sdt attached seen "));
        l.unwrap_or_else(|| panic!("{rest}")).parse().unwrap()
    }
}

impl Drop for RustProgram {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn rust_tracepoints_are_sdt_notes_as_readelf_shows_them() {
    let exe = std::env::current_exe().unwrap();
    let notes: Vec<_> = readelf_notes(&exe).into_iter().filter(|n| n.0 == "rsdt").collect();
    assert_eq!(notes.len(), 2, "{notes:?}");
    let (idle, tick) = (&notes[0], &notes[1]);
    assert_eq!((idle.1.as_str(), idle.4.as_str()), ("idle", ""), "{notes:?}");
    assert_eq!(tick.1, "tick");
    // u32, i64, i16, bool, &str (its address): sizes, signs, 64-bit registers.
    let specs: Vec<&str> = tick.4.split(' ').collect();
    let sizes: Vec<&str> = specs.iter().map(|s| s.split('@').next().unwrap()).collect();
    assert_eq!(sizes, ["4", "-8", "-2", "1", "8"], "{}", tick.4);
    assert!(
        specs
            .iter()
            .all(|s| s.split('@').nth(1).is_some_and(|r| r.len() == 4 && (r.starts_with("%r")))),
        "{}",
        tick.4
    );
    // Each has a semaphore of its own, in `.probes`.
    let sections = Command::new("readelf").arg("-SW").arg(&exe).output().unwrap();
    let sections = String::from_utf8_lossy(&sections.stdout).into_owned();
    let probes = sections.lines().find(|l| l.contains(" .probes ")).expect("no .probes");
    let w: Vec<&str> = probes.split_whitespace().collect();
    let at = w.iter().position(|x| *x == ".probes").unwrap();
    let start = u64::from_str_radix(w[at + 2], 16).unwrap();
    let size = u64::from_str_radix(w[at + 4], 16).unwrap();
    assert!(idle.3 != tick.3, "{notes:?}");
    for n in &notes {
        assert!((start..start + size).contains(&n.3), "{n:?} not in {probes}");
    }
    assert!(sections.contains(" .stapsdt.base "), "{sections}");
    // No semaphore shares a file page with the RELRO segment: when a program starts, the
    // kernel sets a semaphore through the first writable mapping of its page, and RELRO's
    // is one until the loader protects it (the count would be lost there).
    let probes_off = u64::from_str_radix(w[at + 3], 16).unwrap();
    let segments = Command::new("readelf").arg("-lW").arg(&exe).output().unwrap();
    let segments = String::from_utf8_lossy(&segments.stdout).into_owned();
    let relro = segments.lines().find(|l| l.trim_start().starts_with("GNU_RELRO"));
    if let Some(relro) = relro {
        let f: Vec<u64> = relro
            .split_whitespace()
            .skip(1)
            .take(4)
            .map(|x| u64::from_str_radix(x.trim_start_matches("0x"), 16).unwrap())
            .collect();
        let relro_last_page = (f[0] + f[3] - 1) / 4096;
        for n in &notes {
            let page = (probes_off + (n.3 - start)) / 4096;
            assert!(page > relro_last_page, "{n:?}: semaphore in RELRO's last page\n{segments}");
        }
    }
    // tp lists them as readelf does.
    let tp_notes: Vec<_> = tp_sdt_notes(&exe).into_iter().filter(|n| n.0 == "rsdt").collect();
    assert_eq!(tp_notes, notes);
}

/// (i, big, small, flag, name address) of each `tick` line of a report.
fn ticks(text: &str) -> Vec<Vec<i64>> {
    text.lines()
        .filter(|l| l.contains(" tick: ("))
        .map(|l| {
            l.split_whitespace()
                .filter_map(|w| w.split_once('=').map(|(_, v)| v.parse::<i64>().unwrap()))
                .collect()
        })
        .collect()
}

#[test]
fn a_running_rust_program_is_recorded_from_outside_through_its_sdt_probes() {
    let _turn = rsdt_turn();
    // Untraced, the semaphores stay clear.
    assert_eq!(rust_program(50, 0).seen(), 0);

    // About 1.5 s of ticks 1 ms apart; 700 ms of it recorded, from outside.
    let prog = rust_program(1500, 1000);
    let dir = std::env::temp_dir().join(format!("tp-rsdt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("r.dat");
    let pid = prog.child.id().to_string();
    let rec = tp(&[
        "record",
        "-q",
        "-o",
        out.to_str().unwrap(),
        "-e",
        "sdt_rsdt:*",
        "-p",
        &pid,
        "--duration",
        "700ms",
    ]);
    let name_at = prog.name_at as i64;
    let seen = prog.seen();
    ok(&rec);
    assert!(uprobe_lines("sdt_rsdt").is_empty(), "{:?}", uprobe_lines("sdt_rsdt"));
    let text = ok(&tp(&["report", "-i", out.to_str().unwrap()]));
    let _ = std::fs::remove_dir_all(&dir);
    let ticks = ticks(&text);
    assert!(ticks.len() > 100, "{text}");
    // The site fired while, and only while, the probes were attached.
    assert!(seen as usize >= ticks.len() && seen < 1500, "seen {seen}, {} ticks", ticks.len());
    let first = ticks[0][0];
    for (k, v) in ticks.iter().enumerate() {
        let i = first + k as i64;
        assert_eq!(v, &vec![i, -1000 * i - 7, -i, i % 2, name_at], "{text}");
    }
    let idles = text.lines().filter(|l| l.contains(" idle: (")).count();
    assert!(idles.abs_diff(ticks.len()) <= 1, "{idles} idle, {} tick", ticks.len());

    // Counted by tp stat on a command it starts.
    let exe = std::env::current_exe().unwrap();
    let stat = Command::new(TP)
        .args(["stat", "-x", ",", "-e", "sdt_rsdt:tick", "-e", "sdt_rsdt:idle", "--"])
        .arg(&exe)
        .args(["--exact", "rust_sdt_program", "--ignored", "--nocapture", "--test-threads=1"])
        .env("TP_RSDT", "30,0")
        .output()
        .unwrap();
    assert!(ok(&stat).contains("sdt attached seen 30"), "{}", ok(&stat));
    let err = String::from_utf8_lossy(&stat.stderr);
    for ev in ["tick", "idle"] {
        assert!(err.lines().any(|l| l.starts_with(&format!("30,,sdt_rsdt:{ev},"))), "{err}");
    }

    // Started by tp record: the kernel sets the semaphores as the program maps itself, so
    // every one of its 20 ticks is recorded.
    let out = std::env::temp_dir().join(format!("tp-rsdt-cmd-{}.dat", std::process::id()));
    let rec = Command::new(TP)
        .args(["record", "-q", "-o", out.to_str().unwrap(), "-e", "sdt_rsdt:tick", "--"])
        .arg(&exe)
        .args(["--exact", "rust_sdt_program", "--ignored", "--nocapture", "--test-threads=1"])
        .env("TP_RSDT", "20,0")
        .output()
        .unwrap();
    let said = ok(&rec);
    assert!(said.contains("sdt attached seen 20"), "{said}");
    let hex = said.split_once("name at 0x").unwrap().1.split_whitespace().next().unwrap();
    let name_at = i64::from_str_radix(hex, 16).unwrap();
    let text = ok(&tp(&["report", "-i", out.to_str().unwrap()]));
    let _ = std::fs::remove_file(&out);
    let want: Vec<Vec<i64>> = (0..20).map(|i| vec![i, -1000 * i - 7, -i, i % 2, name_at]).collect();
    assert_eq!(crate::ticks(&text), want, "{text}");
}

#[test]
fn perf_probe_accepts_rust_sdt_probes_as_tp_defines_them() {
    let _turn = rsdt_turn();
    let exe = std::env::current_exe().unwrap();
    let exe = exe.to_str().unwrap();
    ok(&tp(&["probe", "-x", exe, "--add", "sdt_rsdt:tick"]));
    let by_tp = uprobe_lines("sdt_rsdt");
    ok(&tp(&["probe", "--del", "sdt_rsdt:*"]));
    let perf = Command::new("perf").args(["probe", "-x", exe, "--add", "sdt_rsdt:tick"]).output();
    let perf = perf.unwrap();
    let by_perf = uprobe_lines("sdt_rsdt");
    let _ = Command::new("perf").args(["probe", "-d", "sdt_rsdt:*"]).output();
    assert!(perf.status.success(), "{}", String::from_utf8_lossy(&perf.stderr));
    // The same place (file offset), reference counter and arguments.
    assert_eq!(by_perf.len(), 1, "{by_perf:?}");
    assert_eq!(by_perf, by_tp);
}

#[test]
#[ignore = "needs bpftrace (not in CI: it brings a whole LLVM); run with --ignored"]
fn bpftrace_usdt_reads_rust_sdt_probes() {
    let _turn = rsdt_turn();
    let exe = std::env::current_exe().unwrap();
    let prog = rust_program(3000, 1000);
    let script = format!(
        "usdt:{}:rsdt:tick {{ printf(\"%d %d %d %d %d\\n\", arg0, arg1, arg2, arg3, arg4 == {}); \
         if (++@n == 20) {{ exit(); }} }}",
        exe.display(),
        prog.name_at
    );
    let out = Command::new("bpftrace")
        .args(["-p", &prog.child.id().to_string(), "-e", &script])
        .output()
        .unwrap();
    drop(prog);
    let text = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<Vec<i64>> = text
        .lines()
        .filter(|l| l.split(' ').count() == 5)
        .map(|l| l.split(' ').map(|v| v.parse().unwrap()).collect())
        .collect();
    assert_eq!(rows.len(), 20, "{text}{}", String::from_utf8_lossy(&out.stderr));
    for r in &rows {
        let i = r[0];
        assert_eq!(r, &vec![i, -1000 * i - 7, -i, i % 2, 1], "{text}");
    }
}

// ---- USDT probes in a command's libraries; bpftrace's usdt: spelling; tp stream ----

const LIB_SRC: &str = r#"
#include <sys/sdt.h>
#define PROBE1(...) DTRACE_PROBE1(__VA_ARGS__)
void lib_hit(int i) { PROBE1(PROV, libhit, i * 3); }
"#;

const LIB_MAIN: &str = r#"
#include <stdlib.h>
void lib_hit(int i);
int main(int argc, char **argv) {
    int n = atoi(argv[1]);
    for (int i = 0; i < n; i++) lib_hit(i);
    return 0;
}
"#;

/// A program whose only SDT probe (`PROV:libhit`, its argument 3 * i) is in a shared library
/// it links, found through its RUNPATH.
fn lib_prog() -> Prog {
    let dir = std::env::temp_dir().join(format!("tp-probe-test-libuse-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let prov = format!("libuse{}", std::process::id());
    let mut p = Prog { exe: dir.join(&prov), dir, groups: Vec::new() };
    let lib = p.dir.join(format!("lib{prov}.so"));
    let st = Command::new("gcc")
        .args(["-O1", "-shared", "-fPIC", &format!("-DPROV={prov}"), "-o"])
        .arg(&lib)
        .arg("-x")
        .arg("c")
        .arg("-")
        .stdin(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(LIB_SRC.as_bytes())?;
            c.wait()
        })
        .unwrap();
    assert!(st.success());
    let c = p.dir.join("main.c");
    std::fs::write(&c, LIB_MAIN).unwrap();
    let out = Command::new("gcc")
        .args(["-O1", "-o"])
        .arg(&p.exe)
        .arg(&c)
        .arg(format!("-L{}", p.dir.display()))
        .arg(format!("-l{prov}"))
        .arg(format!("-Wl,-rpath,{}", p.dir.display()))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    p.groups = vec![format!("sdt_{prov}")];
    p
}

/// The values of `NAME=` in each `EVENT: (` line.
fn values(text: &str, event: &str, key: &str) -> Vec<i64> {
    text.lines()
        .filter(|l| l.contains(&format!(" {event}: (")))
        .filter_map(|l| l.split_once(&format!(" {key}=")).map(|(_, v)| v.trim()))
        .map(|v| v.split_whitespace().next().unwrap().parse().unwrap())
        .collect()
}

#[test]
fn sdt_probes_in_the_libraries_a_command_links_are_recorded_counted_and_streamed() {
    let p = lib_prog();
    let group = &p.groups[0];
    let exe = p.exe.to_str().unwrap();
    // The program itself has no SDT note: the probe is its library's.
    assert!(readelf_notes(&p.exe).is_empty());
    let want: Vec<i64> = (0..20).map(|i| i * 3).collect();

    let out = p.dir.join("l.dat");
    ok(&record(&out, &format!("{group}:libhit"), &[exe, "20"]));
    let text = ok(&tp(&["report", "-i", out.to_str().unwrap()]));
    assert_eq!(values(&text, "libhit", "arg1"), want, "{text}");

    let stat = tp(&["stat", "-x", ",", "-e", &format!("{group}:libhit"), "--", exe, "17"]);
    ok(&stat);
    let err = String::from_utf8_lossy(&stat.stderr);
    assert!(err.lines().any(|l| l.starts_with(&format!("17,,{group}:libhit,"))), "{err}");

    let stream = ok(&tp(&["stream", "-e", &format!("{group}:*"), "--", exe, "20"]));
    assert_eq!(values(&stream, "libhit", "arg1"), want, "{stream}");
    assert!(uprobe_lines(group).is_empty(), "{:?}", uprobe_lines(group));
}

#[test]
fn usdt_binary_provider_name_is_bpftraces_spelling_of_an_sdt_event() {
    let p = sdt_prog("usdt", "-O2", true);
    let prov = provider(&p);
    let group = format!("sdt_{prov}");
    let exe = p.exe.to_str().unwrap();
    let out = p.dir.join("u.dat");
    // The binary named in the spec; the command is another program running it.
    let spec = format!("usdt:{exe}:{prov}:plain");
    let rec = record(&out, &spec, &["sh", "-c", &format!("{exe} 12")]);
    assert_eq!(ok(&rec).trim(), "semaphore seen 0");
    let text = ok(&tp(&["report", "-i", out.to_str().unwrap()]));
    assert_eq!(values(&text, "plain", "arg1"), (0..12).collect::<Vec<_>>(), "{text}");
    // Any provider: usdt:BINARY:NAME, counted.
    let stat = tp(&["stat", "-x", ",", "-e", &format!("usdt:{exe}:gated"), "--", exe, "9"]);
    assert_eq!(ok(&stat).trim(), "semaphore seen 9");
    let err = String::from_utf8_lossy(&stat.stderr);
    assert!(err.lines().any(|l| l.starts_with(&format!("9,,{group}:gated,"))), "{err}");
    assert!(uprobe_lines(&group).is_empty(), "{:?}", uprobe_lines(&group));
    // A binary without the probe says so.
    let bad = tp(&["stat", "-e", &format!("usdt:/bin/true:{prov}:plain"), "--", "true"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("no SDT probe matches"));
}

// ---- Function arguments by name (DWARF) ----

const NAMED: &str = r#"
#include <stdlib.h>
__attribute__((noinline)) int f(int x, long y, short z, const char *s) {
    return x * 7 - 3 + (int)y + z + s[0];
}
int main(int argc, char **argv) {
    int n = atoi(argv[1]);
    volatile int s = 0;
    for (int i = 0; i < n; i++) s += f(i, -1000L * i, (short)-i, "hey");
    return 0;
}
"#;

#[test]
fn arguments_by_name_are_placed_and_typed_from_dwarf_as_perf_probe_does() {
    // -O1: in registers at the entry; -O0: in the frame, so after the prologue.
    for opt in ["-O1", "-O0"] {
        named_args_as_perf(opt);
    }
}

fn named_args_as_perf(opt: &str) {
    let p = Prog::build_from(&format!("named{}", &opt[1..]), &[NAMED], &[opt, "-g"]);
    let exe = p.exe.to_str().unwrap();
    let group = &p.groups[0];
    ok(&tp(&["probe", "-x", exe, "--add", "f", "x", "y", "z", "s"]));
    let by_tp = uprobe_lines(group);
    ok(&tp(&["probe", "--del", &format!("{group}:*")]));
    let perf = Command::new("perf").args(["probe", "-x", exe, "--add", "f x y z s"]).output();
    let by_perf = uprobe_lines(group);
    let _ = Command::new("perf").args(["probe", "-d", &format!("{group}:*")]).output();
    assert!(perf.unwrap().status.success());
    assert_eq!(by_tp.len(), 1);
    assert_eq!(by_tp, by_perf, "{opt}");

    // Recorded with the values the function was called with; a NAME= and a :TYPE override.
    ok(&tp(&["probe", "-x", exe, "f", "x", "big=y", "z:s8"]));
    let out = p.dir.join("n.dat");
    ok(&record(&out, &format!("{group}:f"), &[exe, "15"]));
    let text = ok(&tp(&["report", "-i", out.to_str().unwrap()]));
    assert_eq!(values(&text, "f", "x"), (0..15).collect::<Vec<_>>(), "{text}");
    assert_eq!(values(&text, "f", "big"), (0..15).map(|i| -1000 * i).collect::<Vec<_>>());
    let z = by_tp[0].split_whitespace().find(|a| a.starts_with("z=")).unwrap();
    let z_at = z.trim_start_matches("z=").trim_end_matches(":s16");
    assert!(
        uprobe_lines(group)[0].ends_with(&format!(" z={z_at}:s8")),
        "{:?}",
        uprobe_lines(group)
    );
    assert_eq!(values(&text, "f", "z"), (0..15).map(|i| -i).collect::<Vec<_>>());

    let err = |args: &[&str]| {
        let out = tp(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let e = err(&["probe", "-x", exe, "f", "nope"]);
    assert!(e.contains("no argument \"nope\" (its arguments: x, y, z, s)"), "{e}");
    assert!(err(&["probe", "-x", exe, "f%return", "x"]).contains("not its return"));
}

#[test]
fn arguments_by_name_need_debug_information() {
    let bare = Prog::build_from("nodwarf", &[NAMED], &["-O1"]);
    let out = tp(&["probe", "-x", bare.exe.to_str().unwrap(), "f", "x"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no debug information"));
    assert!(uprobe_lines(&bare.groups[0]).is_empty());
}

/// A Rust function whose arguments the next test fetches by name (debug build: they sit in
/// its frame after the prologue, described relative to LLVM's frame base, %rsp).
#[inline(never)]
fn rust_named(count: u32, delta: i64) -> i64 {
    std::hint::black_box(i64::from(count) + delta)
}

#[test]
fn arguments_by_name_of_a_rust_function_are_recorded_with_their_values() {
    let exe = std::env::current_exe().unwrap();
    let added =
        ok(&tp(&["probe", "-x", exe.to_str().unwrap(), "probe::rust_named", "count", "delta"]));
    let event = added.lines().nth(1).unwrap().trim().split('\t').next().unwrap().to_string();
    let group = event.split(':').next().unwrap().to_string();
    let dir = std::env::temp_dir().join(format!("tp-named-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("n.dat");
    let rec = Command::new(TP)
        .args(["record", "-q", "-o", out.to_str().unwrap(), "-e", &event, "-p"])
        .arg(std::process::id().to_string())
        .args(["--duration", "1500ms"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Calls while it records (it starts within the first few hundred ms).
    let calls = std::thread::spawn(|| {
        std::thread::sleep(std::time::Duration::from_millis(500));
        for i in 0..60u32 {
            rust_named(i, -7 * i64::from(i));
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    });
    calls.join().unwrap();
    let rec = rec.wait_with_output().unwrap();
    let _ = tp(&["probe", "--del", &format!("{group}:*")]);
    ok(&rec);
    let text = ok(&tp(&["report", "-i", out.to_str().unwrap()]));
    let _ = std::fs::remove_dir_all(&dir);
    let ev = event.split(':').nth(1).unwrap();
    let (count, delta) = (values(&text, ev, "count"), values(&text, ev, "delta"));
    assert!(count.len() >= 20, "{text}");
    let first = count[0];
    assert_eq!(count, (first..first + count.len() as i64).collect::<Vec<_>>(), "{text}");
    assert_eq!(delta, count.iter().map(|c| -7 * c).collect::<Vec<_>>(), "{text}");
}
