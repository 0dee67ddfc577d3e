//! Cost of `tracing` through the tp layer (run by `bench/tracing-overhead.sh`).
//!
//! `overhead MODE N [FILE]` prints one line `MODE WALL ns/op thread-cpu CPU ns/op
//! process-cpu P ns/op events E lost L`:
//! - `none`: `info!(a, b, c, "ev")` (three integers, as the peers' program) with no subscriber;
//! - `disabled`: the same with the layer installed and nothing recording (callsites off);
//! - `event`: the same recorded into FILE (the recorder at its defaults);
//! - `span`: a span entered and exited (one op = enter + exit), recorded;
//! - `sustained`: N events at 1 million per second (paced in 1 ms batches), recorded.
//!
//! Wall time counts the time other processes took the core; thread CPU time does not;
//! process CPU time adds the recorder's background thread (compression, writing).

use std::time::{Duration, Instant};
use tracing_subscriber::prelude::*;

fn cpu(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid timespec to write to.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[inline(never)]
fn events(n: u64) {
    for i in 0..n {
        tracing::info!(a = i, b = i * 2, c = i + 7, "ev");
    }
}

#[inline(never)]
fn spans(n: u64) {
    let span = tracing::info_span!("work", n);
    for _ in 0..n {
        let _e = span.enter();
    }
}

/// `n` events at 1 million per second: a batch of 1000 each millisecond.
fn sustained(n: u64) {
    let start = Instant::now();
    let mut done = 0;
    while done < n {
        let batch = 1000.min(n - done);
        events(batch);
        done += batch;
        let due = start + Duration::from_micros(done);
        while Instant::now() < due {
            std::hint::spin_loop();
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map_or("event", String::as_str).to_string();
    let n: u64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(1_000_000);
    let file = args.get(3).cloned().unwrap_or_else(|| "/tmp/tp-tracing-overhead.dat".into());
    if mode != "none" {
        tracing_subscriber::registry().with(tp_tracing::layer()).init();
    }
    let recorder = match mode.as_str() {
        "event" | "span" | "sustained" => Some(tp::Recorder::start(&file).expect("recorder")),
        _ => None,
    };
    // Warm up: the thread's buffer, the callsites' tp events.
    if recorder.is_some() {
        events(1000);
        spans(1000);
    }
    let (w0, t0, p0) =
        (Instant::now(), cpu(libc::CLOCK_THREAD_CPUTIME_ID), cpu(libc::CLOCK_PROCESS_CPUTIME_ID));
    match mode.as_str() {
        "span" => spans(n),
        "sustained" => sustained(n),
        _ => events(n),
    }
    let wall = w0.elapsed().as_nanos() as f64 / n as f64;
    let thread = (cpu(libc::CLOCK_THREAD_CPUTIME_ID) - t0) as f64 / n as f64;
    let (events, lost) = match recorder {
        Some(r) => {
            let s = r.stop().expect("recording written");
            let _ = std::fs::remove_file(&file);
            (s.events, s.lost)
        }
        None => (0, 0),
    };
    // The recorder's thread's CPU time, its file writing included.
    let process = (cpu(libc::CLOCK_PROCESS_CPUTIME_ID) - p0) as f64 / n as f64;
    println!(
        "{mode} {wall:.2} ns/op thread-cpu {thread:.2} ns/op process-cpu {process:.2} ns/op events {events} lost {lost}"
    );
}
