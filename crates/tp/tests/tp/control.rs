//! Enable and disable by glob, from code and from `TP_EVENTS`.

use crate::events::*;

fn active() -> [bool; 3] {
    [
        tracepoint_req_start().is_active(),
        tracepoint_req_end().is_active(),
        tracepoint_noise().is_active(),
    ]
}

#[test]
fn globs_from_code_choose_what_the_sinks_see() {
    let _g = crate::global();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let s = seen.clone();
    let sink = tp::add_sink(move |ev| s.lock().unwrap().push(ev.site.full_name()));
    assert_eq!(active(), [true, true, true]);
    assert_eq!(tp::disable("*"), tp::tracepoints().len());
    assert_eq!(active(), [false, false, false]);
    assert_eq!(tp::enable("tpctl:req_*"), 2);
    assert_eq!(active(), [true, true, false]);
    assert_eq!(tp::disable("req_end"), 1); // no system: any system
    assert_eq!(active(), [true, false, false]);
    trace_req_start(1);
    trace_req_end(1);
    trace_noise(1);
    assert_eq!(*seen.lock().unwrap(), ["tpctl:req_start"]);
    assert_eq!(tp::set_events("tpother:*,tpctl:req_e?d"), 2);
    assert_eq!(active(), [false, true, true]);
    tp::set_events("*,-tpctl:*");
    assert_eq!(active(), [false, false, true]);
    drop(sink);
    assert_eq!(active(), [false, false, false], "no sink, no probe: nothing is active");
    tp::enable("*");
}

#[test]
fn tp_events_from_the_environment() {
    let out = crate::run_child(
        "control::child_tp_events",
        &[("TP_EVENTS", "tpctl:req_*,tpother:nothing_matches")],
    );
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn child_tp_events() {
    if !crate::is_child("control::child_tp_events") {
        return;
    }
    let names: Vec<String> =
        tp::tracepoints().iter().filter(|s| s.is_enabled()).map(|s| s.full_name()).collect();
    assert_eq!(names, ["tpctl:req_end", "tpctl:req_start"]);
}
