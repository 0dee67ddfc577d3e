//! The layer's records, read back from the recorder's file and printed with tp's print fmt
//! renderer: names, typed fields, spans, log records, and interest. No root needed (the
//! in-process recorder only).

use std::sync::{Mutex, MutexGuard};
use tp_format::printfmt::{Compiled, RenderCtx};
use tracing_subscriber::prelude::*;

/// The recorder is process-wide: one test at a time.
fn global() -> MutexGuard<'static, ()> {
    static M: Mutex<()> = Mutex::new(());
    M.lock().unwrap_or_else(|e| e.into_inner())
}

fn temp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("tp-tracing-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d.join("t.dat")
}

/// Each record as `name: text` (and its fields' formats), in time order.
fn lines(path: &std::path::Path) -> (Vec<String>, tp::Recording) {
    let r = tp::Recording::open(path).unwrap();
    let (k, p) = (Default::default(), Default::default());
    let ctx = RenderCtx {
        kallsyms: &k,
        printk: &p,
        big_endian: false,
        long_size: 8,
        user_maps: None,
        sym: Default::default(),
    };
    let mut out = Vec::new();
    for (_, _, rec) in &r.records {
        let id = u16::from_le_bytes([rec[0], rec[1]]);
        let f = r.format(id).unwrap();
        let mut s = format!("{}: ", f.name);
        Compiled::compile(f).unwrap().render(rec, &ctx, &mut s);
        out.push(s);
    }
    (out, r)
}

fn record(name: &str, body: impl FnOnce()) -> (Vec<String>, tp::Recording) {
    let path = temp(name);
    let rec = tp::Recorder::start(&path).unwrap();
    body();
    let stats = rec.stop().unwrap();
    assert_eq!(stats.lost, 0);
    let (l, r) = lines(&path);
    assert_eq!(l.len() as u64, stats.events);
    (l, r)
}

#[derive(Debug)]
struct Point {
    #[allow(dead_code)]
    x: i32,
}

#[test]
fn events_and_spans_with_typed_fields() {
    let _g = global();
    let sub = tracing_subscriber::registry().with(tp_tracing::layer());
    let (l, r) = tracing::subscriber::with_default(sub, || {
        record("typed", || {
            for i in 0..3u64 {
                let span = tracing::info_span!(target: "svc::http", "request", id = i, path = "/a");
                let _e = span.enter();
                tracing::info!(name: "query", target: "svc::db", rows = i, sql = "SELECT 1", ok = true, "query {} done", i);
                tracing::warn!(target: "svc", elapsed = 1.5, neg = -3i64, p = ?Point { x: 1 }, d = %"shown");
                span.record("path", "/b");
            }
        })
    });
    let want_iter = |i: u64| {
        vec![
            format!("svc__http__request__new: svc::http: request: span={} parent=0 level=INFO id={i} path=\"/a\"", 0),
            format!("span_enter: id={}", 0),
            format!("svc__db__query: svc::db: query {i} done: level=INFO rows={i} sql=\"SELECT 1\" ok=1"),
            "svc__L0: svc: level=WARN elapsed=1.5 neg=-3 p=Point { x: 1 } d=shown".to_string(),
            format!("svc__http__request__record: svc::http: request: span={} id= path=\"/b\"", 0),
            format!("span_exit: id={}", 0),
            format!("span_close: id={}", 0),
        ]
    };
    // Span ids are the registry's: read them from the lines, then compare the rest.
    let norm: Vec<String> = l
        .iter()
        .map(|s| {
            let mut out = String::new();
            let mut rest = s.as_str();
            // Replace the value after `span=` and `id=` at the start of span lines by 0.
            for key in ["span=", "span_enter: id=", "span_exit: id=", "span_close: id="] {
                if let Some(p) = rest.find(key) {
                    let after = &rest[p + key.len()..];
                    let end = after.find(' ').unwrap_or(after.len());
                    out.push_str(&rest[..p + key.len()]);
                    out.push('0');
                    rest = &after[end..];
                }
            }
            out.push_str(rest);
            out
        })
        .map(|s| s.replace(&format!("L{}", line_of_warn()), "L0"))
        .collect();
    let want: Vec<String> = (0..3).flat_map(want_iter).collect();
    assert_eq!(norm, want, "{l:#?}");
    // Types in the format: integers as integers, strings as __data_loc.
    let q = r.formats.iter().find(|f| f.name == "svc__db__query").unwrap().to_format_text();
    assert!(q.contains("field:unsigned long rows;"), "{q}");
    assert!(q.contains("field:__data_loc char[] sql;"), "{q}");
    assert!(q.contains("field:bool ok;"), "{q}");
    let w = r.formats.iter().find(|f| f.name.starts_with("svc__L")).unwrap().to_format_text();
    assert!(w.contains("field:long neg;") && w.contains("field:__data_loc char[] elapsed;"), "{w}");
}

/// The line of the `warn!` above (its event's name is `svc__L{line}`).
fn line_of_warn() -> u32 {
    let src = include_str!("layer.rs");
    src.lines().position(|l| l.contains("tracing::warn!(target: \"svc\", elapsed")).unwrap() as u32
        + 1
}

#[test]
fn parents_and_follows_from() {
    let _g = global();
    let sub = tracing_subscriber::registry().with(tp_tracing::layer());
    let (l, _) = tracing::subscriber::with_default(sub, || {
        record("parents", || {
            let outer = tracing::info_span!(target: "p", "outer");
            let _o = outer.enter();
            let inner = tracing::debug_span!(target: "p", "inner", n = 1u64);
            inner.follows_from(&outer);
            let _i = inner.enter();
        })
    });
    let id = |line: &str, key: &str| -> u64 {
        let v = line.split(key).nth(1).unwrap();
        v.split(' ').next().unwrap().parse().unwrap()
    };
    let outer_new = l.iter().find(|s| s.starts_with("p__outer__new")).unwrap();
    let inner_new = l.iter().find(|s| s.starts_with("p__inner__new")).unwrap();
    let (o, i) = (id(outer_new, "span="), id(inner_new, "span="));
    assert_eq!(id(outer_new, "parent="), 0);
    assert_eq!(id(inner_new, "parent="), o, "{l:#?}");
    assert!(inner_new.contains("level=DEBUG n=1"), "{inner_new}");
    assert!(l.contains(&format!("span_follows: id={i} follows={o}")), "{l:#?}");
    let order: Vec<&str> = l.iter().map(|s| s.split(':').next().unwrap()).collect();
    assert_eq!(
        order,
        [
            "p__outer__new",
            "span_enter",
            "p__inner__new",
            "span_follows",
            "span_enter",
            "span_exit",
            "span_close",
            "span_exit",
            "span_close"
        ]
    );
}

#[test]
fn log_records_through_tracing_log() {
    let _g = global();
    let sub = tracing_subscriber::registry().with(tp_tracing::layer());
    tracing::subscriber::set_global_default(sub).unwrap();
    tp_tracing::init_log().unwrap();
    log::set_max_level(log::LevelFilter::Trace);
    let (l, _) = record("log", || {
        log::info!(target: "legacy", "hello {}", 5);
        log::error!("bad");
    });
    assert_eq!(l.len(), 2, "{l:#?}");
    assert!(
        l[0].starts_with("log__info: log: hello 5: level=INFO log_target=\"legacy\""),
        "{l:#?}"
    );
    assert!(l[1].starts_with("log__error: log: bad: level=ERROR log_target=\"layer\""), "{l:#?}");
}

#[test]
fn interest_follows_the_recording_and_the_event_selection() {
    let _g = global();
    let sub = tracing_subscriber::registry().with(tp_tracing::layer());
    tracing::subscriber::with_default(sub, || {
        // Nothing records: the callsite is off for tracing itself.
        let hit = || {
            let mut hit = false;
            tracing::info!(name: "probe", target: "sel", hit = {
                hit = true;
                1u64
            });
            hit
        };
        assert!(!hit(), "evaluated although nothing records");
        tp::set_events("tracing:sel__other");
        let path = temp("interest");
        let rec = tp::Recorder::start(&path).unwrap();
        assert!(!hit(), "evaluated although not selected");
        tp::set_events("tracing:sel__*");
        assert!(hit(), "a recording of it started: tracing asks again");
        let stats = rec.stop().unwrap();
        assert_eq!(stats.events, 1);
        assert!(!hit(), "the recording stopped");
        tp::set_events("*");
    });
}
