//! Unwind every sample of a `--call-graph dwarf` perf.data and say how fast:
//! `cargo run --release -p tp-stack --example unwind -- perf.data`.

use std::time::Instant;

use tp_format::perfdata::{PerfData, Record};

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: unwind PERF.DATA");
        std::process::exit(2);
    };
    let file = std::fs::File::open(&path).unwrap_or_else(|e| {
        eprintln!("unwind: {path}: {e}");
        std::process::exit(1);
    });
    let data = PerfData::open_file(file).unwrap_or_else(|e| {
        eprintln!("unwind: {path}: {e}");
        std::process::exit(1);
    });
    let mut u = tp_stack::Unwinder::new();
    let (mut samples, mut chains, mut frames) = (0u64, 0u64, 0u64);
    let start = Instant::now();
    let mut records = data.records(std::env::var_os("UNSORTED").is_none()).expect("records");
    while let Some(item) = records.next() {
        let Ok(item) = item else { continue };
        let Ok(r) = item.parse() else { continue };
        u.observe(&r);
        if let (Record::Sample(s), Some(a)) = (r, item.attr) {
            samples += 1;
            if std::env::var_os("NO_UNWIND").is_some() {
                continue;
            }
            if let Some(c) = u.user_chain(&s, &a.attr) {
                chains += 1;
                frames += c.len() as u64;
            }
        }
    }
    let t = start.elapsed().as_secs_f64();
    println!(
        "{samples} samples, {chains} unwound, {frames} user frames in {t:.3} s ({:.0} ns a sample, reading included); files not found: {:?}",
        t * 1e9 / samples.max(1) as f64,
        u.stats().missing_files
    );
}
