//! No heap allocation per event while enabled (recorder, typed probe, raw probe).

use crate::events::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as ours.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as ours.
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static A: Counting = Counting;

fn allocs() -> u64 {
    ALLOCS.with(|c| c.get())
}

#[test]
fn enabled_events_do_not_allocate() {
    let _g = crate::global();
    let dir = crate::temp_dir("alloc");
    let rec = tp::Recorder::start(dir.join("t.tp")).unwrap();
    let h = register_trace_kinds(|n, name, _, _| {
        std::hint::black_box((n, name));
    });
    let raw = tracepoint_ev3().register_raw(|ev| {
        std::hint::black_box(ev.record);
    });
    // Warm up: the first event of a thread attaches its buffer.
    trace_ev3(1, 2, 3);
    trace_kinds(1, "x", b"y", false);
    let before = allocs();
    for i in 0..10_000u64 {
        trace_ev3(i as i32, 2, 3);
        trace_kinds(i, "a string field", b"\x00\x01", true);
    }
    let after = allocs();
    assert!(unregister_trace_kinds(h));
    assert!(tracepoint_ev3().unregister(raw));
    let stats = rec.stop().unwrap();
    assert_eq!(after - before, 0, "allocations while firing 20000 enabled events");
    assert_eq!(stats.events + stats.lost, 20_002);
    std::fs::remove_dir_all(dir).unwrap();
}
