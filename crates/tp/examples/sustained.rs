//! Loss at a sustained event rate: the recorder's capacity, not its per-event cost.
//!
//! `cargo run --release --example sustained -p tp -- RATE [SECONDS]` fires the benchmark
//! event (int, int, long) at RATE events/s (e.g. `20e6`) for SECONDS (default 2) on one
//! thread with the recorder on, paced against the clock, and prints one line:
//! `tp sustained RATE events/s for S s: recorded E, lost L (P%)`, with the file's size and
//! the most memory the thread's buffer had faulted in (pages waiting to be compressed). The
//! recorder runs at its defaults; `TP_PAGES` sets the pages per thread buffer.

use std::time::{Duration, Instant};

tp::trace_event! {
    /// The benchmark event: three integers.
    pub bench:ev3(a: i32, b: i32, c: i64) {
        fields { a: i32, b: i32, c: i64 }
        printk("a=%d b=%d c=%ld", a, b, c)
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rate: f64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(10e6);
    let secs: f64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(2.0);
    if !(rate >= 1.0 && secs > 0.0) {
        eprintln!("usage: sustained RATE [SECONDS]");
        std::process::exit(2);
    }
    tp::registry::init();
    let dir = std::env::temp_dir().join(format!("tp-sustained-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let mut b = tp::Recorder::builder(dir.join("sustained.tp"));
    if let Some(p) = std::env::var("TP_PAGES").ok().and_then(|s| s.parse().ok()) {
        b = b.pages_per_thread(p);
    }
    let rec = b.start().expect("recorder");
    let total = (rate * secs) as u64;
    let start = Instant::now();
    let mut fired = 0u64;
    while fired < total {
        // Fire in steps of 1000 events, each step no earlier than its due time.
        let due = Duration::from_secs_f64(fired as f64 / rate);
        while start.elapsed() < due {
            std::hint::spin_loop();
        }
        for i in fired..(fired + 1000).min(total) {
            trace_ev3(i as i32, 7, i as i64 * 3);
        }
        fired = (fired + 1000).min(total);
    }
    let took = start.elapsed().as_secs_f64();
    let stats = rec.stop().expect("write recording");
    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "tp sustained {:.0} events/s for {took:.2} s: recorded {}, lost {} ({:.2}%), file {} MB, buffers at most {} MiB",
        total as f64 / took,
        stats.events,
        stats.lost,
        100.0 * stats.lost as f64 / total.max(1) as f64,
        stats.bytes / 1_000_000,
        stats.memory_peak >> 20
    );
}
