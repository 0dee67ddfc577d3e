//! Typed and raw probes: several per tracepoint, reference-counted activation.

use crate::events::*;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

#[test]
fn typed_probes_see_arguments_and_activation_is_counted() {
    let _g = crate::global();
    let site = tracepoint_req_end();
    assert!(!site.is_active());
    let sum = Arc::new(AtomicU64::new(0));
    let s1 = sum.clone();
    let h1 = register_trace_req_end(move |id| {
        s1.fetch_add(id as u64, Ordering::SeqCst);
    });
    fn plain(id: u32) {
        assert!(id > 0);
    }
    let h2 = register_trace_req_end(plain);
    assert!(site.is_active());
    assert_eq!(site.probe_count(), 2);
    trace_req_end(5);
    trace_req_end(7);
    assert_eq!(sum.load(Ordering::SeqCst), 12);
    assert!(unregister_trace_req_end(h1));
    assert!(!unregister_trace_req_end(h1), "second unregister of the same probe");
    assert!(site.is_active(), "one probe left");
    trace_req_end(100);
    assert_eq!(sum.load(Ordering::SeqCst), 12);
    assert!(unregister_trace_req_end(h2));
    assert!(!site.is_active());
    // A handle of another tracepoint is refused.
    let h3 = register_trace_ev3(|_, _, _| {});
    assert!(!unregister_trace_req_end(h3));
    assert!(unregister_trace_ev3(h3));
}

#[test]
fn raw_probe_sees_the_record_as_the_format_describes() {
    let _g = crate::global();
    let site = tracepoint_kinds();
    let seen: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
    let s = seen.clone();
    let h = site.register_raw(move |ev| s.lock().unwrap().push(ev.record.to_vec()));
    trace_kinds(300, "worker-thread-1", b"\x01\x02\x03", true);
    assert!(site.unregister(h));
    let recs = seen.lock().unwrap();
    assert_eq!(recs.len(), 1);
    let r = &recs[0];
    let f = site.format();
    let int = |n: &str| f.field(n).unwrap().read_int(r, false).unwrap();
    assert_eq!(int("common_type"), site.id() as i128);
    assert_eq!(int("common_pid"), tp_pid() as i128);
    assert_eq!(int("small"), 300 % 256);
    assert_eq!(int("neg"), -300);
    assert_eq!(int("word"), 600);
    assert_eq!(int("big"), 300);
    assert_eq!(int("flag"), 1);
    assert_eq!(f.field("comm").unwrap().bytes(r, false).unwrap(), b"worker-\0");
    assert_eq!(f.field("name").unwrap().bytes(r, false).unwrap(), b"worker-thread-1\0");
    assert_eq!(f.field("data").unwrap().bytes(r, false).unwrap(), b"\x01\x02\x03");
    let arr = f.field("arr").unwrap().bytes(r, false).unwrap();
    assert_eq!(arr, [1u32, 2, 300].iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<_>>());
}

fn tp_pid() -> i32 {
    // SAFETY: gettid has no arguments.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

#[test]
fn assignments_run_only_when_enabled() {
    let _g = crate::global();
    use std::sync::atomic::AtomicUsize;
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    fn costly(x: u32) -> u32 {
        CALLS.fetch_add(1, Ordering::SeqCst);
        x + 1
    }
    tp::trace_event! {
        lazy:ev(x: u32) {
            fields { y: u32 = costly(x) }
            printk("y=%u", y)
        }
    }
    trace_ev(1);
    assert_eq!(CALLS.load(Ordering::SeqCst), 0);
    let h = register_trace_ev(|_| {});
    trace_ev(1);
    assert_eq!(CALLS.load(Ordering::SeqCst), 1);
    assert!(unregister_trace_ev(h));
}

#[test]
fn a_probe_may_unregister_itself() {
    let _g = crate::global();
    let slot: Arc<Mutex<Option<tp::ProbeHandle>>> = Arc::default();
    let s = slot.clone();
    let calls = Arc::new(AtomicU64::new(0));
    let c = calls.clone();
    let h = register_trace_req_start(move |_| {
        c.fetch_add(1, Ordering::SeqCst);
        if let Some(h) = s.lock().unwrap().take() {
            assert!(unregister_trace_req_start(h));
        }
    });
    *slot.lock().unwrap() = Some(h);
    trace_req_start(1);
    trace_req_start(2);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert!(!tracepoint_req_start().is_active());
}
