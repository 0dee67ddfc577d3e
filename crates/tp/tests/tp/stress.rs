//! Many threads fire while probes are registered and unregistered in a loop: no probe may run
//! after its unregister returned, and no probe's memory may be used after it was freed.

use crate::events::*;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

const ALIVE: u64 = 0x600d_600d_600d_600d;
const DEAD: u64 = 0xdead_dead_dead_dead;

/// Captured by each probe; poisoned when the probe is dropped.
struct Canary {
    magic: AtomicU64,
    unregistered: Arc<AtomicBool>,
    late_calls: Arc<AtomicU64>,
}

impl Drop for Canary {
    fn drop(&mut self) {
        self.magic.store(DEAD, Ordering::SeqCst);
    }
}

#[test]
fn register_unregister_while_firing() {
    let _g = crate::global();
    let stop = Arc::new(AtomicBool::new(false));
    let fired = Arc::new(AtomicU64::new(0));
    let bad = Arc::new(AtomicU64::new(0));
    let late = Arc::new(AtomicU64::new(0));
    let firers: Vec<_> = (0..4)
        .map(|t| {
            let (stop, fired) = (stop.clone(), fired.clone());
            std::thread::spawn(move || {
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    trace_hit(t * 1_000_000_000 + i);
                    i += 1;
                }
                fired.fetch_add(i, Ordering::Relaxed);
            })
        })
        .collect();
    let registrars: Vec<_> = (0..2)
        .map(|_| {
            let (bad, late) = (bad.clone(), late.clone());
            std::thread::spawn(move || {
                for round in 0..300 {
                    let handles: Vec<_> = (0..3)
                        .map(|_| {
                            let unregistered = Arc::new(AtomicBool::new(false));
                            let canary = Canary {
                                magic: AtomicU64::new(ALIVE),
                                unregistered: unregistered.clone(),
                                late_calls: late.clone(),
                            };
                            let bad = bad.clone();
                            let h = register_trace_hit(move |_x| {
                                if canary.magic.load(Ordering::SeqCst) != ALIVE {
                                    bad.fetch_add(1, Ordering::SeqCst);
                                }
                                if canary.unregistered.load(Ordering::SeqCst) {
                                    canary.late_calls.fetch_add(1, Ordering::SeqCst);
                                }
                                std::hint::black_box(&canary);
                            });
                            (h, unregistered)
                        })
                        .collect();
                    if round % 7 == 0 {
                        std::thread::yield_now();
                    }
                    for (h, unregistered) in handles {
                        assert!(unregister_trace_hit(h));
                        // After unregister returns, no thread may still run (or start) it.
                        unregistered.store(true, Ordering::SeqCst);
                    }
                }
            })
        })
        .collect();
    for r in registrars {
        r.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for f in firers {
        f.join().unwrap();
    }
    assert!(fired.load(Ordering::Relaxed) > 0);
    assert_eq!(bad.load(Ordering::SeqCst), 0, "a probe ran on freed memory");
    assert_eq!(late.load(Ordering::SeqCst), 0, "a probe ran after unregister returned");
    assert!(!tracepoint_hit().is_active());
}

#[test]
fn sinks_come_and_go_while_firing() {
    let _g = crate::global();
    let stop = Arc::new(AtomicBool::new(false));
    let firers: Vec<_> = (0..3)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    trace_hit(1);
                }
            })
        })
        .collect();
    let seen = Arc::new(AtomicU64::new(0));
    for _ in 0..200 {
        let s = seen.clone();
        let canary = Canary {
            magic: AtomicU64::new(ALIVE),
            unregistered: Arc::default(),
            late_calls: Arc::default(),
        };
        let sink = tp::add_sink(move |ev| {
            assert_eq!(canary.magic.load(Ordering::SeqCst), ALIVE);
            s.fetch_add(ev.record.len() as u64, Ordering::Relaxed);
        });
        std::thread::yield_now();
        drop(sink);
    }
    stop.store(true, Ordering::Relaxed);
    for f in firers {
        f.join().unwrap();
    }
    assert!(!tracepoint_hit().is_active());
}
