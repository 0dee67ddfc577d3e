//! `tp syscalls`, `tp sched`, `tp faults` and `tp convert`: their figures against
//! independent computations (strace -c, and a few lines over `tp report --json` of the same
//! file). Needs root and tracefs (CI runs as root; fails loudly without them), gcc and strace.

mod common;
use common::{build_example, require_tracefs, run, Tmp, TP};

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use serde_json::Value;

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", String::from_utf8_lossy(&out.stdout)))
}

/// A deterministic program: known numbers of getppid, failing and succeeding openat, write
/// and failing close calls, and page faults on a fresh mapping.
const PROG: &str = r#"
#include <fcntl.h>
#include <unistd.h>
#include <sys/mman.h>
int main(void) {
    for (int i = 0; i < 1000; i++) getppid();
    for (int i = 0; i < 50; i++) open("/nonexistent/tp-test", O_RDONLY);
    int fd = open("/dev/null", O_WRONLY);
    for (int i = 0; i < 100; i++) write(fd, "x", 1);
    close(fd);
    for (int i = 0; i < 7; i++) close(-1);
    char *p = mmap(0, 64 << 12, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    for (int i = 0; i < 64; i++) p[i << 12] = 1;
    usleep(2000);
    return 0;
}
"#;

/// The program, compiled once (gcc).
fn prog() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| {
        // Under the target directory: it lives as long as the test process, with no end to
        // remove it at.
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("analyses-prog-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let src = dir.join("prog.c");
        std::fs::write(&src, PROG).unwrap();
        let exe = dir.join("prog");
        run(Command::new("gcc").arg("-O1").arg("-o").arg(&exe).arg(&src));
        exe
    })
}

/// One recording of a small mixed workload (the program, a shell, ls) with syscalls,
/// scheduling and page-fault events, shared by the tests that check figures against
/// `tp report --json`; with the report's events parsed.
struct Recording {
    file: PathBuf,
    events: Vec<Value>,
}

fn recording() -> &'static Recording {
    static REC: OnceLock<Recording> = OnceLock::new();
    REC.get_or_init(|| {
        require_tracefs();
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("analyses-rec-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("trace.dat");
        let script = format!(
            "{} && ls -l / >/dev/null && sleep 0.01 && {}",
            prog().display(),
            prog().display()
        );
        run(Command::new(TP)
            .args(["record", "-q", "-e", "raw_syscalls", "-e", "sched", "-e", "exceptions", "-o"])
            .arg(&file)
            .args(["--", "sh", "-c", &script]));
        let out = run(Command::new(TP).args(["report", "--json", "-i"]).arg(&file));
        let events = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect();
        Recording { file, events }
    })
}

/// The pids that exec'd the test program (from sched_process_exec: a comm from the file's
/// saved_cmdlines may be gone on a busy machine, whose 128 entries other tasks reuse).
fn prog_pids(events: &[Value]) -> Vec<i64> {
    let mut v: Vec<i64> = events
        .iter()
        .filter(|e| is(e, "sched", "sched_process_exec"))
        .filter(|e| e["fields"]["filename"].as_str().is_some_and(|f| f.ends_with("/prog")))
        .map(|e| field(e, "pid"))
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

fn field(e: &Value, name: &str) -> i64 {
    e["fields"][name].as_i64().unwrap_or_else(|| panic!("no integer field {name} in {e}"))
}

fn is(e: &Value, system: &str, event: &str) -> bool {
    e["system"] == system && e["event"] == event
}

/// `strace -c -f`'s table: name -> (calls, errors).
fn strace_counts(text: &str) -> BTreeMap<String, (u64, u64)> {
    let mut m = BTreeMap::new();
    for line in text.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        if w.len() < 5
            || w[0].starts_with('%')
            || w[0].starts_with('-')
            || w.last() == Some(&"total")
        {
            continue;
        }
        let calls = w[3].parse().unwrap_or_else(|_| panic!("strace line {line:?}"));
        let errors = if w.len() == 6 { w[4].parse().unwrap() } else { 0 };
        m.insert(w.last().unwrap().to_string(), (calls, errors));
    }
    m
}

#[test]
fn syscalls_count_as_strace_c() {
    require_tracefs();
    let tmp = Tmp::new("strace");
    let st = tmp.0.join("strace.txt");
    // Without cargo's LD_LIBRARY_PATH, whose directories the loader would search for libc
    // (dozens of failing openat calls, the same under both tools, but not the program's).
    run(Command::new("strace")
        .args(["-c", "-f", "-o"])
        .arg(&st)
        .arg(prog())
        .env_remove("LD_LIBRARY_PATH"));
    let strace = strace_counts(&std::fs::read_to_string(&st).unwrap());
    let out = run(Command::new(TP)
        .args(["syscalls", "--json", "--"])
        .arg(prog())
        .env_remove("LD_LIBRARY_PATH"));
    let v = json(&out);
    let tp: BTreeMap<String, (u64, u64)> = v["syscalls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let n = |k: &str| s[k].as_u64().unwrap();
            (s["name"].as_str().unwrap().to_string(), (n("calls"), n("errors")))
        })
        .collect();
    assert_eq!(v["lost"]["events"], 0, "{v}");
    // The program's own calls, exactly.
    for name in ["getppid", "openat", "write", "close", "execve", "mmap", "munmap", "exit_group"] {
        assert_eq!(tp.get(name), strace.get(name), "{name}: tp {tp:?}\nstrace {strace:?}");
    }
    assert_eq!(tp["getppid"], (1000, 0));
    assert_eq!((tp["openat"].1, tp["write"].0, tp["close"].1), (50, 100, 7), "{tp:?}\n{strace:?}");
    // Every other syscall the same, except one: the child that tp (as strace) starts waits
    // for a `read` on a pipe before it execs the program; that call began before the
    // recording (tp counts it, untimed, and says so), strace does not see it.
    let names: std::collections::BTreeSet<&String> = tp.keys().chain(strace.keys()).collect();
    for name in names {
        let (t, s) = (
            tp.get(name).copied().unwrap_or_default(),
            strace.get(name).copied().unwrap_or_default(),
        );
        if name == "read" {
            assert!(t.0 == s.0 || t.0 == s.0 + 1, "read: tp {t:?} strace {s:?}");
        } else {
            assert_eq!(t, s, "{name}: tp {tp:?}\nstrace {strace:?}");
        }
    }
    assert!(v["began_before"].as_u64().unwrap() <= 1, "{v}");
    assert_eq!(v["no_return"]["exit_group"], 1, "{v}");
}

/// Per syscall NR: calls, errors, timed, total, max, computed from `tp report --json` lines;
/// and the lost events. Events lost on a CPU drop the calls that entered there and have not
/// returned (their return may be what was lost), as tp syscalls documents.
fn syscalls_from_report(events: &[Value]) -> (BTreeMap<i64, [u64; 5]>, u64) {
    let mut pending: HashMap<i64, (i64, u64, u64)> = HashMap::new();
    let mut want: BTreeMap<i64, [u64; 5]> = BTreeMap::new();
    let mut lost = 0;
    for e in events {
        if let Some(n) = e.get("lost") {
            lost += n.as_u64().expect("lost events of unknown count");
            let cpu = e["cpu"].as_u64().unwrap();
            pending.retain(|_, p| p.2 != cpu);
            continue;
        }
        let (pid, ts) = (e["pid"].as_i64().unwrap(), e["ts"].as_u64().unwrap());
        if is(e, "raw_syscalls", "sys_enter") {
            pending.insert(pid, (field(e, "id"), ts, e["cpu"].as_u64().unwrap()));
        } else if is(e, "raw_syscalls", "sys_exit") {
            let nr = field(e, "id");
            let ret = field(e, "ret");
            let w = want.entry(nr).or_default();
            w[0] += 1;
            w[1] += (-4095..0).contains(&ret) as u64;
            if let Some((n, t0, _)) = pending.remove(&pid) {
                if n == nr {
                    w[2] += 1;
                    w[3] += ts - t0;
                    w[4] = w[4].max(ts - t0);
                }
            }
        }
    }
    (want, lost)
}

fn syscalls_of(v: &Value) -> BTreeMap<i64, [u64; 5]> {
    v["syscalls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let n = |k: &str| s[k].as_u64().unwrap();
            (
                s["nr"].as_i64().unwrap(),
                [n("calls"), n("errors"), n("timed"), n("total_ns"), n("max_ns")],
            )
        })
        .collect()
}

#[test]
fn syscalls_figures_equal_a_computation_from_the_report() {
    let rec = recording();
    let (want, lost) = syscalls_from_report(&rec.events);
    assert_eq!(lost, 0, "the test recording lost events");
    let v = json(&run(Command::new(TP).args(["syscalls", "--json", "-i"]).arg(&rec.file)));
    assert_eq!(syscalls_of(&v), want);
    assert!(want[&110][0] >= 2000, "getppid calls: {:?}", want.get(&110));
}

/// A recording that loses most of its events (16 KiB per CPU under a getppid loop): tp
/// syscalls counts the lost events as the pages report them, and pairs nothing across a gap.
/// The loss is made certain: tp and the load share CPU 0 and the load runs at a real-time
/// priority, so tp's reader gets the CPU only when the load is done (left to chance, a
/// quiet machine's reader sometimes kept up and the test could not check anything).
#[test]
fn syscalls_say_what_was_lost_and_do_not_pair_across_it() {
    require_tracefs();
    let tmp = Tmp::new("lost");
    let src = tmp.0.join("load.c");
    std::fs::write(&src, "#include <unistd.h>\nint main(void) { for (int i = 0; i < 300000; i++) getppid(); return 0; }\n").unwrap();
    let load = tmp.0.join("load");
    run(Command::new("gcc").arg("-O1").arg("-o").arg(&load).arg(&src));
    let file = tmp.0.join("trace.dat");
    run(Command::new("taskset")
        .args(["-c", "0", TP, "record", "-q", "-b", "16", "-e", "raw_syscalls", "-o"])
        .arg(&file)
        .args(["--", "chrt", "-f", "50"])
        .arg(&load));
    let report = run(Command::new(TP).args(["report", "--json", "-i"]).arg(&file));
    let events: Vec<Value> = String::from_utf8_lossy(&report.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let (want, lost) = syscalls_from_report(&events);
    assert!(lost > 0, "16 KiB per CPU lost nothing: the test cannot check losses");
    assert!(!want.is_empty(), "nothing left to pair");
    let v = json(&run(Command::new(TP).args(["syscalls", "--json", "-i"]).arg(&file)));
    assert_eq!(v["lost"]["events"].as_u64().unwrap(), lost, "{}", v["lost"]);
    assert_eq!(syscalls_of(&v), want);
    let text =
        String::from_utf8_lossy(&run(Command::new(TP).args(["syscalls", "-i"]).arg(&file)).stdout)
            .into_owned();
    assert!(text.contains(&format!("LOST events in the window: {lost} ")), "{text}");
}

#[test]
fn sched_figures_equal_a_computation_from_the_report() {
    let rec = recording();
    // pid -> runnable since / running since (ts, cpu); per pid: waits, wait total, max wait,
    // run time, switches, preemptions, migrations.
    let mut runnable: HashMap<i64, u64> = HashMap::new();
    let mut running: HashMap<i64, (u64, u64)> = HashMap::new();
    let mut want: BTreeMap<i64, [u64; 7]> = BTreeMap::new();
    for e in &rec.events {
        let (ts, cpu) = (e["ts"].as_u64().unwrap(), e["cpu"].as_u64().unwrap());
        if is(e, "sched", "sched_waking") || is(e, "sched", "sched_wakeup_new") {
            let pid = field(e, "pid");
            if pid != 0 && !runnable.contains_key(&pid) && !running.contains_key(&pid) {
                runnable.insert(pid, ts);
                want.entry(pid).or_default();
            }
        } else if is(e, "sched", "sched_migrate_task") {
            want.entry(field(e, "pid")).or_default()[6] += 1;
        } else if is(e, "sched", "sched_switch") {
            let (prev, next) = (field(e, "prev_pid"), field(e, "next_pid"));
            if prev != 0 {
                let w = want.entry(prev).or_default();
                if let Some((t0, c)) = running.remove(&prev) {
                    if c == cpu {
                        w[3] += ts - t0;
                    }
                }
                if field(e, "prev_state") & 0xff == 0 {
                    w[5] += 1;
                    runnable.insert(prev, ts);
                }
            }
            if next != 0 {
                let w = want.entry(next).or_default();
                w[4] += 1;
                running.insert(next, (ts, cpu));
                if let Some(t0) = runnable.remove(&next) {
                    w[0] += 1;
                    w[1] += ts - t0;
                    w[2] = w[2].max(ts - t0);
                }
            }
        }
    }
    let v = json(&run(Command::new(TP).args(["sched", "--json", "-i"]).arg(&rec.file)));
    let got: BTreeMap<i64, [u64; 7]> = v["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let n = |k: &str| t[k].as_u64().unwrap();
            let max = t["max_wait"]["ns"].as_u64().unwrap_or(0);
            let f = [
                n("waits"),
                n("wait_total_ns"),
                max,
                n("run_ns"),
                n("switches"),
                n("preemptions"),
                n("migrations"),
            ];
            (t["pid"].as_i64().unwrap(), f)
        })
        .collect();
    assert_eq!(got, want);
    let total: u64 = want.values().map(|w| w[0]).sum();
    assert!(total > 5, "too few waits to test: {want:?}");
    let hist: u64 =
        v["hist"].as_array().unwrap().iter().map(|b| b["count"].as_u64().unwrap()).sum();
    assert_eq!(hist, total);
    // The worst wait is the largest of all, with its timestamps.
    let worst = &v["worst"][0];
    assert_eq!(worst["ns"].as_u64().unwrap(), want.values().map(|w| w[2]).max().unwrap());
    assert_eq!(
        worst["to_ns"].as_u64().unwrap() - worst["from_ns"].as_u64().unwrap(),
        worst["ns"].as_u64().unwrap()
    );
}

#[test]
fn a_task_filter_and_a_window_select() {
    let rec = recording();
    let pid = *prog_pids(&rec.events).first().expect("prog in the recording");
    let v = json(&run(Command::new(TP)
        .args(["syscalls", "--json", "-P", &pid.to_string(), "-i"])
        .arg(&rec.file)));
    let tasks = v["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 1, "{v}");
    assert_eq!(tasks[0]["pid"], pid);
    let v = json(&run(Command::new(TP)
        .args(["sched", "--json", "--comm", "pro?", "-i"])
        .arg(&rec.file)));
    assert!(v["tasks"].as_array().unwrap().iter().all(|t| t["comm"] == "prog"), "{v}");
    // A window of the first half: only events in it (ns, from the report's times).
    let first = rec.events.iter().find_map(|e| e["ts"].as_u64()).unwrap();
    let last = rec.events.iter().rev().find_map(|e| e["ts"].as_u64()).unwrap();
    let mid = first + (last - first) / 2;
    let arg = format!("{}.{:09}", mid / 1_000_000_000, mid % 1_000_000_000);
    let v = json(&run(Command::new(TP)
        .args(["syscalls", "--json", "--to", &arg, "-i"])
        .arg(&rec.file)));
    let n = rec.events.iter().filter(|e| e["ts"].as_u64().is_some_and(|t| t <= mid)).count();
    assert_eq!(v["window"]["events"].as_u64().unwrap() as usize, n);
    let exits = rec
        .events
        .iter()
        .filter(|e| is(e, "raw_syscalls", "sys_exit") && e["ts"].as_u64().unwrap() <= mid)
        .count();
    assert_eq!(v["total"]["calls"].as_u64().unwrap() as usize, exits);
}

#[test]
fn faults_figures_equal_a_computation_from_the_report() {
    let rec = recording();
    // pid -> [user, kernel, write, exec, prot]; page -> faults.
    let mut want: BTreeMap<i64, [u64; 5]> = BTreeMap::new();
    let mut pages: BTreeMap<u64, u64> = BTreeMap::new();
    for e in &rec.events {
        let kernel = is(e, "exceptions", "page_fault_kernel");
        if !kernel && !is(e, "exceptions", "page_fault_user") {
            continue;
        }
        let code = field(e, "error_code") as u64;
        let w = want.entry(e["pid"].as_i64().unwrap()).or_default();
        w[kernel as usize] += 1;
        w[2] += (code & 2 != 0) as u64;
        w[3] += (code & 16 != 0) as u64;
        w[4] += (code & 1 != 0) as u64;
        *pages.entry(e["fields"]["address"].as_u64().unwrap() & !0xfff).or_default() += 1;
    }
    let v = json(&run(Command::new(TP)
        .args(["faults", "--json", "--top", "1000000", "-i"])
        .arg(&rec.file)));
    let got: BTreeMap<i64, [u64; 5]> = v["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let n = |k: &str| t[k].as_u64().unwrap();
            (t["pid"].as_i64().unwrap(), [n("user"), n("kernel"), n("write"), n("exec"), n("prot")])
        })
        .collect();
    assert_eq!(got, want);
    assert_eq!(pages_of(&v), pages);
    // Each run of the program writes to 64 fresh pages: at least that many write faults.
    let progs: Vec<&[u64; 5]> = prog_pids(&rec.events).iter().map(|p| &want[p]).collect();
    assert_eq!(progs.len(), 2, "{want:?}");
    assert!(progs.iter().all(|w| w[2] >= 64), "{progs:?}");
}

/// The `timeline` example of crate `tp` (a Rust program with tracepoints), built once into
/// this test's target directory.
fn timeline_example() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| build_example("timeline", &[]))
}

/// Decodes a Perfetto trace with the `perfetto` PyPI package's protos and prints, per line,
/// one JSON object per event: ftrace events with their CPU, name (typed: the oneof field;
/// generic: event_name), timestamp, pid and fields; track events with their name and
/// annotations; and a last line with lost-event bundles, thread names and the clocks the
/// trace declares (the snapshot's primary clock and clock ids, the bundles' ftrace_clock).
const DECODE: &str = r#"
import json, sys
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
t = pb.Trace()
t.ParseFromString(open(sys.argv[1], "rb").read())
lost, threads, tracks, clock = 0, {}, {}, {"primary": None, "ids": [], "ftrace": set()}
for p in t.packet:
    if p.HasField("clock_snapshot"):
        c = p.clock_snapshot
        clock["primary"] = c.primary_trace_clock
        clock["ids"] = sorted(x.clock_id for x in c.clocks)
    if p.HasField("ftrace_events"):
        b = p.ftrace_events
        clock["ftrace"].add(b.ftrace_clock)
        lost += b.lost_events
        for e in b.event:
            k = e.WhichOneof("event")
            if k == "generic":
                f = {x.name: (x.str_value if x.HasField("str_value") else x.int_value) for x in e.generic.field}
                name = e.generic.event_name
            else:
                m = getattr(e, k)
                f = {d.name: v for d, v in m.ListFields()}
                name = k
            print(json.dumps({"kind": "ftrace", "cpu": b.cpu, "event": name, "ts": e.timestamp, "pid": e.pid, "fields": f}))
    if p.HasField("process_tree"):
        for th in p.process_tree.threads:
            threads[th.tid] = th.name
    if p.HasField("track_descriptor"):
        tracks[p.track_descriptor.uuid] = p.track_descriptor.thread.tid
    if p.HasField("track_event"):
        e = p.track_event
        f = {a.name: (a.string_value if a.HasField("string_value") else a.int_value) for a in e.debug_annotations}
        print(json.dumps({"kind": "track", "event": e.name, "ts": p.timestamp, "pid": tracks[e.track_uuid], "fields": f}))
clock["ftrace"] = sorted(clock["ftrace"])
print(json.dumps({"kind": "end", "lost": lost, "threads": len(threads), "clock": clock}))
"#;

#[test]
fn perfetto_has_exactly_the_events_of_the_source() {
    require_tracefs();
    let tmp = Tmp::new("perfetto");
    let file = tmp.0.join("trace.dat");
    run(Command::new(TP)
        .args(["record", "-q", "-e", "sched", "-e", "raw_syscalls", "-e", "exceptions"])
        .args(["-e", "tpdemo:*", "-o"])
        .arg(&file)
        .arg("--")
        .arg(timeline_example())
        .args(["3", "2"]));
    let out = tmp.0.join("out.perfetto-trace");
    run(Command::new(TP)
        .args(["convert", "--to", "perfetto", "-i"])
        .arg(&file)
        .arg("-o")
        .arg(&out));
    let decoded = decode_perfetto(&tmp, &out);
    let report = run(Command::new(TP).args(["report", "--json", "-i"]).arg(&file));
    let source: Vec<Value> = String::from_utf8_lossy(&report.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // Kernel events per (CPU, name); the program's per name.
    type Key = (String, Option<u64>, String);
    let mut want: BTreeMap<Key, u64> = BTreeMap::new();
    let mut lost = 0;
    for e in &source {
        if e.get("lost").is_some() {
            lost += e.get("buffer").is_none() as u64;
            continue;
        }
        let name = e["event"].as_str().unwrap().to_string();
        let key = match e.get("buffer") {
            Some(_) => ("track".to_string(), None, name),
            None => ("ftrace".to_string(), e["cpu"].as_u64(), name),
        };
        *want.entry(key).or_default() += 1;
    }
    let mut got: BTreeMap<Key, u64> = BTreeMap::new();
    for e in &decoded {
        if e["kind"] == "end" {
            assert_eq!(e["lost"].as_u64().unwrap(), lost);
            assert!(e["threads"].as_u64().unwrap() > 0, "no thread names");
            // Recorded on `mono` (tp record's default): CLOCK_MONOTONIC (3) is the trace's
            // clock, tied to boot time (6), in which Perfetto reads ftrace timestamps.
            let clock = &e["clock"];
            assert_eq!(clock["primary"], 3, "{clock}");
            assert_eq!(clock["ids"], serde_json::json!([3, 6]), "{clock}");
            assert_eq!(clock["ftrace"], serde_json::json!([0]), "{clock}");
            continue;
        }
        let cpu = if e["kind"] == "ftrace" { e["cpu"].as_u64() } else { None };
        let key = (
            e["kind"].as_str().unwrap().to_string(),
            cpu,
            e["event"].as_str().unwrap().to_string(),
        );
        *got.entry(key).or_default() += 1;
    }
    assert_eq!(got, want);
    assert!(want.keys().any(|k| k.0 == "track"), "no Rust tracepoints recorded: {want:?}");
    assert!(want.keys().any(|k| k.2 == "sched_switch"), "{want:?}");
    // Field by field: every sched_switch (typed) and every sys_exit (generic) and every
    // program event (track event), as (time, pid, fields) multisets.
    let pick = |v: &[Value], kind: Option<&str>, event: &str, names: &[&str]| {
        let mut m: Vec<String> = v
            .iter()
            .filter(|e| e["event"] == event && kind.is_none_or(|k| e["kind"] == k))
            .map(|e| {
                let f: Vec<String> = names.iter().map(|n| e["fields"][n].to_string()).collect();
                format!("{} {} {}", e["ts"], e["pid"], f.join(" "))
            })
            .collect();
        m.sort();
        m
    };
    let sw =
        ["prev_comm", "prev_pid", "prev_prio", "prev_state", "next_comm", "next_pid", "next_prio"];
    assert_eq!(
        pick(&decoded, Some("ftrace"), "sched_switch", &sw),
        pick(&source, None, "sched_switch", &sw)
    );
    assert_eq!(
        pick(&decoded, Some("ftrace"), "sys_exit", &["id", "ret"]),
        pick(&source, None, "sys_exit", &["id", "ret"])
    );
    let after = ["round", "ppid"];
    assert_eq!(
        pick(&decoded, Some("track"), "after_getppid", &after),
        pick(&source, None, "after_getppid", &after)
    );
    assert_eq!(pick(&decoded, Some("track"), "after_getppid", &after).len(), 3);
}

/// Decoded events of a Perfetto file (the lines of [`DECODE`]).
fn decode_perfetto(tmp: &Tmp, file: &Path) -> Vec<Value> {
    let script = tmp.0.join("decode.py");
    std::fs::write(&script, DECODE).unwrap();
    let decoded = run(Command::new("python3").arg(&script).arg(file));
    String::from_utf8_lossy(&decoded.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A kernel instance's buffer has a name too (here `tp-PID-N`, shaped like a Rust program's
/// `COMM-PID`): its events stay ftrace events on their CPUs, not a program's track events;
/// and its clock (`mono_raw`) is the one each bundle names.
#[test]
fn perfetto_keeps_a_named_kernel_buffer_kernel() {
    require_tracefs();
    let tfs = tp_tracefs::Tracefs::discover().unwrap();
    let inst = tp_tracefs::Instance::create(&tfs).unwrap();
    inst.set_clock("mono_raw").unwrap();
    let ev = tp_tracefs::EventId::new("raw_syscalls", "sys_enter");
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) };
    // The filter first: enabled without one, the event records every task's calls.
    inst.set_filter(&ev, &format!("common_pid == {tid} && id == 110")).unwrap();
    inst.enable(&ev).unwrap();
    for _ in 0..321 {
        // SAFETY: getppid has no preconditions.
        unsafe { libc::syscall(libc::SYS_getppid) };
    }
    inst.disable(&ev).unwrap();
    let tmp = Tmp::new("perfetto-named");
    let file = tmp.0.join("x.dat");
    run(Command::new(TP).args(["extract", "-q", "-B", inst.name(), "-o"]).arg(&file));
    drop(inst);
    let out = tmp.0.join("out.perfetto-trace");
    run(Command::new(TP)
        .args(["convert", "--to", "perfetto", "-i"])
        .arg(&file)
        .arg("-o")
        .arg(&out));
    let decoded = decode_perfetto(&tmp, &out);
    let kinds = |k: &str| decoded.iter().filter(|e| e["kind"] == k).count();
    assert_eq!(kinds("track"), 0);
    assert_eq!(kinds("ftrace"), 321);
    assert!(decoded.iter().all(|e| e["kind"] != "ftrace" || e["pid"] == tid));
    let clock = &decoded.last().unwrap()["clock"];
    // MONOTONIC_RAW (5) is the trace's clock; every bundle says FTRACE_CLOCK_MONO_RAW (4).
    assert_eq!(clock["primary"], 5, "{clock}");
    assert_eq!(clock["ftrace"], serde_json::json!([4]), "{clock}");
}

/// Page faults of known places: 64 written pages of an anonymous mapping, then reads of the
/// 32 pages of a file (argv[1]) mapped read-only.
const FAULTS_PROG: &str = r#"
#include <fcntl.h>
#include <unistd.h>
#include <sys/mman.h>
int main(int argc, char **argv) {
    char *p = mmap(0, 64 << 12, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    for (int i = 0; i < 64; i++) p[i << 12] = 1;
    int fd = open(argv[1], O_RDONLY);
    volatile char *q = mmap(0, 32 << 12, PROT_READ, MAP_PRIVATE, fd, 0);
    int s = 0;
    for (int i = 0; i < 32; i++) s += q[i << 12];
    return s == -1;
}
"#;

/// [`FAULTS_PROG`] built in `tmp` (gcc -O1, no frame pointers), and its 32-page data file.
fn faults_workload(tmp: &Tmp) -> (PathBuf, PathBuf) {
    let src = tmp.path("f.c");
    std::fs::write(&src, FAULTS_PROG).unwrap();
    let exe = tmp.path("f");
    run(Command::new("gcc").args(["-O1", "-fomit-frame-pointer", "-o"]).arg(&exe).arg(&src));
    let data = tmp.path("data.bin");
    std::fs::write(&data, vec![7u8; 32 << 12]).unwrap();
    (exe, data)
}

/// `tp faults --json`'s faults per page.
fn pages_of(v: &Value) -> BTreeMap<u64, u64> {
    let pages = v["pages"].as_array().unwrap().iter();
    pages.map(|p| (p["page"].as_u64().unwrap(), p["faults"].as_u64().unwrap())).collect()
}

/// `tp faults --json`'s faults per mapping.
fn mappings_of(v: &Value) -> BTreeMap<String, u64> {
    v["mappings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["mapping"].as_str().unwrap().to_string(), m["faults"].as_u64().unwrap()))
        .collect()
}

/// [`FAULTS_PROG`]'s own faults are among `mappings`: 64 written anonymous pages, and its
/// data file's 32 read pages in 1 to 32 faults. How many depends on the page cache, not on
/// tp: a read fault maps the pages around it that are cached (up to `fault_around_bytes`,
/// or a whole large folio, which ext4 now uses for a file written in one go), and a page
/// still being written back or reclaimed faults on its own.
fn workload_faults_are_there(mappings: &BTreeMap<String, u64>, data: &Path) {
    assert!(mappings["[anon]"] >= 64, "{mappings:?}");
    let in_data = mappings.get(data.to_str().unwrap()).copied().unwrap_or(0);
    assert!((1..=32).contains(&in_data), "{in_data} faults in the data file: {mappings:?}");
}

/// `tp faults -i perf.data` of perf_event_open's major-faults/minor-faults (every fault,
/// with its address) against `perf script` on the same file: faults per task and event,
/// per page, and per mapping, where the test looks each address up in the MMAP2 records
/// perf script prints (the last mapping over an address is its own).
#[test]
fn faults_of_perf_data_equal_perf_scripts() {
    require_tracefs();
    let tmp = Tmp::new("perf-faults");
    let (exe, data) = faults_workload(&tmp);
    let file = tmp.path("f.data");
    run(Command::new(TP)
        .args(["record", "-q", "-e", "major-faults", "-e", "minor-faults", "--period", "1", "-o"])
        .arg(&file)
        .arg("--")
        .arg(&exe)
        .arg(&data));
    let v = json(&run(Command::new(TP)
        .args(["faults", "--json", "--top", "1000000", "-i"])
        .arg(&file)));
    let script = run(Command::new("perf")
        .args(["script", "--show-mmap-events", "-F", "pid,tid,event,addr", "-i"])
        .arg(&file));
    // pid -> (start, end, name) in file order; tid -> (major, minor); page -> faults;
    // mapping -> faults.
    let mut maps: HashMap<i64, Vec<(u64, u64, String)>> = HashMap::new();
    let mut tasks: BTreeMap<i64, (u64, u64)> = BTreeMap::new();
    let mut pages: BTreeMap<u64, u64> = BTreeMap::new();
    let mut mappings: BTreeMap<String, u64> = BTreeMap::new();
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
    for line in String::from_utf8_lossy(&script.stdout).lines() {
        let (ids, rest) = line.trim_start().split_once(' ').unwrap();
        let (pid, tid) = ids.split_once('/').unwrap();
        let (pid, tid): (i64, i64) = (pid.parse().unwrap(), tid.parse().unwrap());
        let rest = rest.trim_start();
        if let Some(m) = rest.strip_prefix("PERF_RECORD_MMAP2 ") {
            // `P/T: [0xSTART(0xLEN) @ ...]: rw-p NAME`
            let (range, name) = m.split_once("]: ").unwrap();
            let range = range.split_once('[').unwrap().1;
            let (start, len) = range.split_once('(').unwrap();
            let len = len.split_once(')').unwrap().0;
            let name = name.split_once(' ').unwrap().1;
            let (start, len) = (hex(start), hex(len));
            maps.entry(pid).or_default().push((start, start + len, name.to_string()));
        } else if rest.starts_with("PERF_RECORD_") {
            // The kernel's map (MMAP, pid -1): no sample's address is in it.
        } else if let Some((event, addr)) = rest.split_once(": ") {
            let addr = hex(addr.trim());
            let t = tasks.entry(tid).or_default();
            match event {
                "major-faults" => t.0 += 1,
                "minor-faults" => t.1 += 1,
                other => panic!("event {other:?} in {line:?}"),
            }
            *pages.entry(addr & !0xfff).or_default() += 1;
            let found = maps.get(&pid).and_then(|m| {
                m.iter().rev().find(|(s, e, _)| (*s..*e).contains(&addr)).map(|x| x.2.as_str())
            });
            let name = match found {
                Some("//anon") => "[anon]",
                Some(n) => n,
                None if addr >= 1 << 63 => "[kernel]",
                None => "[unknown]",
            };
            *mappings.entry(name.to_string()).or_default() += 1;
        }
    }
    let got_tasks: BTreeMap<i64, (u64, u64)> = v["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["pid"].as_i64().unwrap(),
                (t["major"].as_u64().unwrap(), t["minor"].as_u64().unwrap()),
            )
        })
        .collect();
    assert_eq!(got_tasks, tasks);
    assert_eq!(pages_of(&v), pages);
    assert_eq!(mappings_of(&v), mappings);
    workload_faults_are_there(&mappings, &data);
    assert_eq!(v["lost"]["events"], 0);
}

/// `tp faults -- CMD` records through perf_event_open: major/minor and the fault kinds of
/// the same faults, the mappings and the call paths.
#[test]
fn faults_of_a_command_know_major_minor_kinds_and_mappings() {
    require_tracefs();
    let tmp = Tmp::new("faults-cmd");
    let (exe, data) = faults_workload(&tmp);
    let v = json(&run(Command::new(TP).args(["faults", "--json", "--"]).arg(&exe).arg(&data)));
    let t = &v["total"];
    let n = |k: &str| t[k].as_u64().unwrap_or_else(|| panic!("{k} unknown: {v}"));
    assert_eq!(n("faults"), n("major") + n("minor"), "{v}");
    assert!(n("user") >= 64 && n("write") >= 64, "{v}");
    let anon = v["mappings"].as_array().unwrap().iter().find(|m| m["mapping"] == "[anon]");
    assert!(anon.is_some_and(|m| m["faults"].as_u64().unwrap() >= 64), "{v}");
    let not = v["not_recorded"].as_array().unwrap();
    assert!(!not.iter().any(|m| m.as_str().unwrap().starts_with("major")), "{v}");
    // Instructions named by function: kernel ones from this kernel's kallsyms (the file
    // was recorded on it), the program's 64 stores in main.
    for ip in v["ips"].as_array().unwrap().iter().filter(|i| i["kernel"] == true) {
        assert!(ip["name"].as_str().unwrap().ends_with("([kernel.kallsyms])"), "{ip}");
    }
    assert!(v["ips"][0]["name"].as_str().unwrap().starts_with("main+"), "{v}");
    // With call stacks: the paths' counts add up to the faults they were taken for.
    let stacks = v["stacks"].as_array().unwrap();
    assert!(!stacks.is_empty(), "{v}");
    let in_paths: u64 = stacks.iter().map(|s| s["faults"].as_u64().unwrap()).sum();
    assert!(in_paths <= n("faults") && in_paths >= 64, "{v}");
}

/// `tp record -- CMD` saves the command's mappings in the trace.dat (trace-cmd's PROCMAPS
/// option, which `trace-cmd dump --options` prints and `trace-cmd report` reads past), and
/// `tp faults` counts faults per mapping: equal to a computation over `tp report --json`'s
/// fault addresses looked up in trace-cmd's dump of those maps.
#[test]
fn faults_of_a_trace_dat_per_mapping_from_its_saved_maps() {
    require_tracefs();
    let tmp = Tmp::new("dat-maps");
    let (exe, data) = faults_workload(&tmp);
    let file = tmp.path("t.dat");
    run(Command::new(TP)
        .args(["record", "-q", "-e", "exceptions", "-o"])
        .arg(&file)
        .arg("--")
        .arg(&exe)
        .arg(&data));
    run(Command::new("trace-cmd").arg("report").arg(&file));
    let dump = run(Command::new("trace-cmd").args(["dump", "--options"]).arg(&file));
    // pid -> [(start, end, name)] from each PROCMAPS option: `PID NR COMM`, NR lines.
    let dump = String::from_utf8_lossy(&dump.stdout).into_owned();
    let mut maps: HashMap<i64, Vec<(u64, u64, String)>> = HashMap::new();
    let mut lines = dump.lines();
    let hex = |s: &str| u64::from_str_radix(s, 16).unwrap();
    while let Some(l) = lines.next() {
        if !l.contains("[Option PROCMAPS") {
            continue;
        }
        let head: Vec<&str> = lines.next().unwrap().splitn(3, ' ').collect();
        let pid = hex(head[0]) as i64;
        for _ in 0..hex(head[1]) {
            let f: Vec<&str> = lines.next().unwrap().splitn(3, ' ').collect();
            maps.entry(pid).or_default().push((hex(f[0]), hex(f[1]), f[2].to_string()));
        }
    }
    assert!(!maps.is_empty(), "no PROCMAPS in:\n{dump}");
    let report = run(Command::new(TP).args(["report", "--json", "-i"]).arg(&file));
    let mut want: BTreeMap<String, u64> = BTreeMap::new();
    for l in String::from_utf8_lossy(&report.stdout).lines() {
        let e: Value = serde_json::from_str(l).unwrap();
        if e["system"] != "exceptions" {
            continue;
        }
        let addr = e["fields"]["address"].as_u64().unwrap();
        let found = maps.get(&e["pid"].as_i64().unwrap()).and_then(|m| {
            m.iter().find(|(s, end, _)| (*s..*end).contains(&addr)).map(|x| x.2.clone())
        });
        let name = found
            .unwrap_or_else(|| if addr >= 1 << 63 { "[kernel]" } else { "[unknown]" }.to_string());
        *want.entry(name).or_default() += 1;
    }
    let v = json(&run(Command::new(TP).args(["faults", "--json", "-i"]).arg(&file)));
    assert_eq!(mappings_of(&v), want);
    workload_faults_are_there(&want, &data);
}

/// `--comm` goes by a task's name at each event, not its last saved one: a shell that runs
/// `true` and then execs the program is `sh` before the exec and `prog` after, in one pid
/// (a shell's child, so that its fork names it before its first event). `tp syscalls --comm
/// prog` counts exactly the returns of that pid from its exec on (from `tp report --json`),
/// none of the shell's before it.
#[test]
fn a_comm_filter_takes_the_name_at_each_event() {
    require_tracefs();
    let tmp = Tmp::new("comm-at-time");
    let file = tmp.path("t.dat");
    // `; true`: the outer shell must not exec the inner one in its own pid.
    let script = format!("sh -c '/bin/true; exec {}'; true", prog().display());
    run(Command::new(TP)
        .args(["record", "-q", "-e", "raw_syscalls", "-e", "sched", "-o"])
        .arg(&file)
        .args(["--", "sh", "-c", &script])
        .env_remove("LD_LIBRARY_PATH"));
    let report = run(Command::new(TP).args(["report", "--json", "-i"]).arg(&file));
    let events: Vec<Value> = String::from_utf8_lossy(&report.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let exec = events
        .iter()
        .find(|e| {
            is(e, "sched", "sched_process_exec")
                && e["fields"]["filename"].as_str().is_some_and(|f| f.ends_with("/prog"))
        })
        .expect("the program's exec");
    let (pid, at) = (exec["pid"].as_i64().unwrap(), exec["ts"].as_u64().unwrap());
    let exits = |after: bool| {
        events
            .iter()
            .filter(|e| is(e, "raw_syscalls", "sys_exit") && e["pid"].as_i64() == Some(pid))
            .filter(|e| (e["ts"].as_u64().unwrap() >= at) == after)
            .count() as u64
    };
    assert!(exits(false) > 0, "the shell made no calls before its exec");
    let v = json(&run(Command::new(TP)
        .args(["syscalls", "--json", "--comm", "prog", "-i"])
        .arg(&file)));
    assert_eq!(v["total"]["calls"].as_u64().unwrap(), exits(true), "{v}");
    let tasks = v["tasks"].as_array().unwrap();
    assert!(tasks.iter().all(|t| t["pid"] == pid && t["comm"] == "prog"), "{v}");
}

/// `tp syscalls -i perf.data`: raw_syscalls recorded through perf_event_open, its calls and
/// errors per syscall equal to `perf script`'s sys_exit lines of the same file.
#[test]
fn syscalls_of_perf_data_equal_perf_scripts() {
    require_tracefs();
    let tmp = Tmp::new("perf-syscalls");
    let file = tmp.path("s.data");
    run(Command::new(TP)
        .args(["record", "-q", "--perf", "-e", "raw_syscalls", "-o"])
        .arg(&file)
        .arg("--")
        .arg(prog())
        .env_remove("LD_LIBRARY_PATH"));
    let script =
        run(Command::new("perf").args(["script", "-F", "tid,event,trace", "-i"]).arg(&file));
    // NR -> (calls, errors) from `TID raw_syscalls:sys_exit: NR 39 = RET`.
    let mut want: BTreeMap<i64, (u64, u64)> = BTreeMap::new();
    for l in String::from_utf8_lossy(&script.stdout).lines() {
        let Some((_, rest)) = l.split_once("raw_syscalls:sys_exit: NR ") else { continue };
        let (nr, ret) = rest.split_once(" = ").unwrap();
        let ret: i64 = ret.trim().parse().unwrap();
        let w = want.entry(nr.parse().unwrap()).or_default();
        w.0 += 1;
        w.1 += (-4095..0).contains(&ret) as u64;
    }
    let v = json(&run(Command::new(TP).args(["syscalls", "--json", "-i"]).arg(&file)));
    let got: BTreeMap<i64, (u64, u64)> = v["syscalls"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["calls"].as_u64().unwrap() > 0)
        .map(|s| {
            let n = |k: &str| s[k].as_u64().unwrap();
            (s["nr"].as_i64().unwrap(), (n("calls"), n("errors")))
        })
        .collect();
    assert_eq!(got, want);
    assert_eq!(got[&110], (1000, 0), "the program's getppid calls");
}

/// `tp faults -i perf.data` of a `--call-graph dwarf` recording: call paths unwound offline
/// (crate tp-stack) past the program's frame-pointer-less code, into libc's call of main,
/// named by function and file (crate::symbols, as perf script names them).
#[test]
fn faults_call_paths_of_dwarf_stacks_reach_the_caller_of_main() {
    require_tracefs();
    let tmp = Tmp::new("faults-dwarf");
    let (exe, data) = faults_workload(&tmp);
    let file = tmp.path("d.data");
    run(Command::new(TP)
        .args(["record", "-q", "-e", "minor-faults", "--period", "1", "--call-graph", "dwarf"])
        .arg("-o")
        .arg(&file)
        .arg("--")
        .arg(&exe)
        .arg(&data));
    let v = json(&run(Command::new(TP).args(["faults", "--json", "-i"]).arg(&file)));
    // The 64 written pages: one path, from main's store up through libc.
    let top = &v["stacks"][0];
    assert!(top["faults"].as_u64().unwrap() >= 64, "{v}");
    let names = top["names"].as_str().unwrap();
    let frames: Vec<&str> = names.split(" <- ").collect();
    assert!(frames[0].starts_with("main+") && frames[0].ends_with(" (f)"), "{names}");
    assert!(frames.iter().skip(1).any(|f| f.ends_with("(libc.so.6)")), "{names}");
    // Per function: the store in main.
    assert_eq!(v["functions"][0]["function"], "main (f)", "{v}");
    assert!(v["functions"][0]["faults"].as_u64().unwrap() >= 64, "{v}");
}

/// `tp convert --to perfetto` of a perf.data (tracepoints sampled through perf_event_open):
/// the same events per CPU and name as `tp report --json` of the file, with their times.
#[test]
fn perfetto_of_perf_data_has_its_tracepoint_samples() {
    require_tracefs();
    let tmp = Tmp::new("perfetto-perf");
    let file = tmp.path("s.data");
    run(Command::new(TP)
        .args(["record", "-q", "--perf", "-e", "raw_syscalls", "-e", "sched:sched_switch", "-o"])
        .arg(&file)
        .arg("--")
        .arg(prog())
        .env_remove("LD_LIBRARY_PATH"));
    let out = tmp.path("out.perfetto-trace");
    run(Command::new(TP)
        .args(["convert", "--to", "perfetto", "-i"])
        .arg(&file)
        .arg("-o")
        .arg(&out));
    let decoded = decode_perfetto(&tmp, &out);
    let report = run(Command::new(TP).args(["report", "--json", "-i"]).arg(&file));
    let key = |e: &Value| format!("{} {} {}", e["cpu"], e["event"].as_str().unwrap(), e["ts"]);
    let mut want: Vec<String> = String::from_utf8_lossy(&report.stdout)
        .lines()
        .map(|l| key(&serde_json::from_str(l).unwrap()))
        .collect();
    let mut got: Vec<String> = decoded.iter().filter(|e| e["kind"] == "ftrace").map(key).collect();
    want.sort();
    got.sort();
    assert!(want.len() >= 2000, "{} events", want.len());
    assert_eq!(got, want);
}
