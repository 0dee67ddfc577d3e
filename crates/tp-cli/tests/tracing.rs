//! A Rust program's `tracing` events and spans (crate `tp-tracing`) on the kernel's
//! timeline: `tp record -e sched:sched_switch -e 'tracing:*'` around `tp-tracing`'s
//! `service` example, then `tp report`, `trace-cmd report` and the Perfetto export of the
//! file. Needs root and tracefs (CI runs as root; fails loudly without them).
//!
//! The example is built by this test (`cargo rustc -p tp-tracing --example service`).

mod common;
use common::{build_example_of, require_tracefs, run, Tmp, TP};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

const REQUESTS: u64 = 12;

fn example() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| build_example_of("tp-tracing", "service", &[]))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Record the example into `tmp`; returns the file and what the example says it emitted.
fn record(tmp: &Tmp) -> (PathBuf, String) {
    let file = tmp.0.join("trace.dat");
    let out = run(Command::new(TP)
        .args(["record", "-q", "-e", "sched:sched_switch", "-e", "tracing:*", "-o"])
        .arg(&file)
        .arg("--")
        .arg(example())
        .arg(REQUESTS.to_string()));
    (file, text(&out.stdout))
}

/// A report line: (timestamp in ns, pid, event name, the rest).
fn parse(line: &str) -> Option<(u64, i32, &str, &str)> {
    let (head, tail) = line.split_once("]")?;
    let task = head.rsplit_once('[')?.0.trim();
    let pid: i32 = task.rsplit_once('-')?.1.trim().parse().ok()?;
    let (_, tail) = tail.trim_start().split_once(' ')?; // flags
    let (ts, tail) = tail.trim_start().split_once(": ")?;
    let (s, us) = ts.trim().split_once('.')?;
    let ts = s.parse::<u64>().ok()? * 1_000_000_000 + us.parse::<u64>().ok()? * 1000;
    let (name, rest) = tail.split_once(": ")?;
    Some((ts, pid, name.trim(), rest))
}

/// The number after `key` in `rest`.
fn num(rest: &str, key: &str) -> u64 {
    let v = rest.split(key).nth(1).unwrap_or_else(|| panic!("no {key} in {rest}"));
    v.split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap()
}

#[test]
fn tracing_events_and_spans_interleave_with_the_kernels() {
    require_tracefs();
    let tmp = Tmp::new("service");
    let (file, said) = record(&tmp);
    let errors = (0..REQUESTS).filter(|i| i % 4 == 3).count() as u64;
    assert_eq!(
        said.trim(),
        format!("requests={REQUESTS} queries={REQUESTS} rows_events={REQUESTS} errors={errors} log_records=1")
    );
    let report = text(&run(Command::new(TP).arg("report").arg("-i").arg(&file)).stdout);
    let lines: Vec<_> = report.lines().filter_map(parse).collect();
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    for (_, _, name, _) in &lines {
        *counts.entry(name).or_default() += 1;
    }
    let n = REQUESTS;
    let want: BTreeMap<&str, u64> = [
        ("service__http__request__new", n),
        ("service__http__request__record", n),
        ("service__db__query__new", n),
        ("service__db__rows", n),
        ("service__http__failed", errors),
        ("span_enter", 2 * n),
        ("span_exit", 2 * n),
        ("span_close", 2 * n),
        ("log__warn", 1),
    ]
    .into_iter()
    .collect();
    let got: BTreeMap<&str, u64> =
        counts.iter().filter(|(k, _)| **k != "sched_switch").map(|(k, v)| (*k, *v)).collect();
    assert_eq!(got, want, "{report}");
    // Fields, in order, with their values.
    let of = |name: &'static str| lines.iter().filter(move |l| l.2 == name);
    for (i, l) in of("service__http__request__new").enumerate() {
        let want = format!("level=INFO id={i} path=\"/items\" status=");
        assert!(l.3.starts_with("service::http: request: span=") && l.3.ends_with(&want), "{l:?}");
        assert_eq!(num(l.3, "parent="), 0);
    }
    for (i, l) in of("service__db__rows").enumerate() {
        assert_eq!(l.3, format!("service::db: fetched: level=INFO rows={}", i as u64 % 5));
    }
    for l in of("service__http__failed") {
        assert!(l.3.starts_with("service::http: request failed: level=ERROR id="), "{l:?}");
        assert!(l.3.ends_with(" error=\"timeout\""), "{l:?}");
    }
    let log = of("log__warn").next().unwrap();
    assert!(
        log.3.starts_with("log: served 12 requests: level=WARN log_target=\"service\""),
        "{log:?}"
    );
    // Each query span nests in its request (parent) and is entered and exited in order.
    // The program sleeps only inside query spans: every voluntary switch-out of its thread
    // (prev_state=S) between its first and last span event lies inside a query span, on the
    // one timeline. (Not every sleep shows one here: unpinned, some files held only 4 or 8 of the
    // 12; pinned with taskset, all. The test asks for every one seen, and at least one.)
    let pid = log.1;
    let requests: Vec<u64> = of("service__http__request__new").map(|l| num(l.3, "span=")).collect();
    let mut spans = Vec::new();
    for (k, q) in of("service__db__query__new").enumerate() {
        let (id, parent) = (num(q.3, "span="), num(q.3, "parent="));
        assert_eq!(parent, requests[k], "{q:?}");
        let at = |name: &str| {
            lines.iter().find(|l| l.2 == name && l.0 >= q.0 && num(l.3, "id=") == id).unwrap().0
        };
        let (enter, exit) = (at("span_enter"), at("span_exit"));
        assert!(q.0 <= enter && enter <= exit, "{q:?}");
        spans.push((enter, exit));
    }
    let first = lines.iter().find(|l| l.2 == "span_enter").unwrap().0;
    let last = lines.iter().rev().find(|l| l.2 == "span_exit").unwrap().0;
    let sleeps: Vec<u64> = lines
        .iter()
        .filter(|l| l.2 == "sched_switch" && l.3.contains(&format!("prev_pid={pid} ")))
        .filter(|l| l.3.contains("prev_state=S ") && first <= l.0 && l.0 <= last)
        .map(|l| l.0)
        .collect();
    for t in &sleeps {
        assert!(
            spans.iter().any(|&(a, b)| a <= *t && *t <= b),
            "switch-out at {t} outside every query span\n{report}"
        );
    }
    assert!(!sleeps.is_empty(), "no sleep of the thread seen\n{report}");
    // trace-cmd reads the same file.
    let tc = run(Command::new("trace-cmd").arg("report").arg("-i").arg(&file));
    let tc_text = text(&tc.stdout);
    assert_eq!(tc_text.matches("service__db__rows").count() as u64, n, "{tc_text}");
    assert_eq!(tc_text.matches("span_enter").count() as u64, 2 * n, "{tc_text}");
    let tc_err = text(&tc.stderr);
    assert!(!tc_err.to_lowercase().contains("error"), "{tc_err}");
}

/// Decodes a Perfetto trace with the `perfetto` PyPI package's protos and prints one line
/// per track event: `TYPE TID TS NAME` (TYPE 1 slice begin, 2 slice end, 3 instant).
const DECODE: &str = r#"
import sys
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
t = pb.Trace()
t.ParseFromString(open(sys.argv[1], "rb").read())
tracks = {}
for p in t.packet:
    if p.HasField("track_descriptor"):
        tracks[p.track_descriptor.uuid] = p.track_descriptor.thread.tid
    if p.HasField("track_event"):
        e = p.track_event
        print(e.type, tracks[e.track_uuid], p.timestamp, e.name or "-")
"#;

#[test]
fn perfetto_shows_spans_as_nested_slices_on_the_thread() {
    require_tracefs();
    let tmp = Tmp::new("perfetto");
    let (file, _) = record(&tmp);
    let out = tmp.0.join("trace.pftrace");
    run(Command::new(TP)
        .args(["convert", "--to", "perfetto", "-i"])
        .arg(&file)
        .arg("-o")
        .arg(&out));
    let decoded = run(Command::new("python3").args(["-c", DECODE]).arg(&out));
    let decoded = text(&decoded.stdout);
    let mut slices = Vec::new(); // (type, tid, ts, name) of begins and ends
    for l in decoded.lines() {
        let v: Vec<&str> = l.splitn(4, ' ').collect();
        let ty: u32 = v[0].parse().unwrap();
        if ty == 1 || ty == 2 {
            slices.push((ty, v[1].parse::<i64>().unwrap(), v[2].parse::<u64>().unwrap(), v[3]));
        }
    }
    assert_eq!(slices.len() as u64, 4 * REQUESTS, "{decoded}");
    let tid = slices[0].1;
    let mut stack: Vec<&str> = Vec::new();
    let mut last_ts = 0;
    let mut order = Vec::new();
    for &(ty, t, ts, name) in &slices {
        assert_eq!(t, tid, "all on the program's one thread: {decoded}");
        assert!(ts >= last_ts, "in time order: {decoded}");
        last_ts = ts;
        if ty == 1 {
            stack.push(name);
            order.push(format!("begin {name} depth {}", stack.len()));
        } else {
            let name = stack.pop().expect("an end with no open slice");
            order.push(format!("end {name}"));
        }
    }
    assert!(stack.is_empty(), "{stack:?}");
    let one = [
        "begin service::http::request depth 1",
        "begin service::db::query depth 2",
        "end service::db::query",
        "end service::http::request",
    ];
    let want: Vec<String> = (0..REQUESTS).flat_map(|_| one.iter().map(|s| s.to_string())).collect();
    assert_eq!(order, want);
}
