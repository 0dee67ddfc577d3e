//! perf.data reading against perf's own files and `perf script`'s text of them.

use super::{kind, PerfData, Record};
use std::io::Cursor;

fn fixture(name: &str) -> Vec<u8> {
    let p = format!("{}/../../fixtures/perfdata/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(p).expect("fixture exists")
}

/// `(pid, cpu, time in µs, event)` of each `perf script` line.
fn script_lines(name: &str) -> Vec<(u32, Option<u32>, u64, String)> {
    let text = String::from_utf8(fixture(name)).unwrap();
    text.lines()
        .map(|l| {
            // "  comm  PID [CPU]   SECS.USECS: ..." (no [CPU] when not sampled).
            let (head, rest) = l.split_once(": ").unwrap();
            let mut w: Vec<&str> = head.split_whitespace().collect();
            let ts = w.pop().unwrap();
            let cpu =
                w.last().filter(|c| c.starts_with('[')).map(|c| c[1..c.len() - 1].parse().unwrap());
            if cpu.is_some() {
                w.pop();
            }
            let pid = w.pop().unwrap().parse().unwrap();
            let (s, us) = ts.split_once('.').unwrap();
            let t = s.parse::<u64>().unwrap() * 1_000_000 + us.parse::<u64>().unwrap();
            // The event: the first word ending in ':' after the time (after the period
            // for software events).
            let ev = rest.split_whitespace().find(|w| w.ends_with(':')).unwrap_or("");
            (pid, cpu, t, ev.trim_end_matches(':').to_string())
        })
        .collect()
}

/// `(pid, cpu, time in µs, event name)` of every sample, in the reader's sorted order.
fn samples(bytes: Vec<u8>) -> Vec<(u32, Option<u32>, u64, String)> {
    let d = PerfData::open(Cursor::new(bytes)).unwrap();
    assert!(d.warnings.is_empty(), "{:?}", d.warnings);
    let mut r = d.records(true).unwrap();
    let mut v = Vec::new();
    while let Some(item) = r.next() {
        let item = item.unwrap();
        if let Record::Sample(s) = item.parse().unwrap() {
            let name = item.attr.and_then(|a| a.name.clone()).unwrap_or_default();
            v.push((s.pid.unwrap(), s.cpu, s.time.unwrap() / 1000, name));
        }
    }
    v
}

#[test]
fn file_mode_samples_are_perf_scripts() {
    let got = samples(fixture("file.data"));
    let want = script_lines("file.script");
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        // perf script leaves the CPU out when it is not the same for every event.
        assert_eq!((g.0, g.2, &g.3), (w.0, w.2, &w.3), "sample {i}");
        if w.1.is_some() {
            assert_eq!(g.1, w.1, "sample {i}");
        }
    }
    assert!(got.iter().any(|s| s.3 == "major-faults"));
}

#[test]
fn pipe_mode_samples_are_perf_scripts() {
    let d = PerfData::open(Cursor::new(fixture("pipe.data"))).unwrap();
    assert!(d.pipe);
    assert_eq!(d.attrs.len(), 2);
    let got = samples(fixture("pipe.data"));
    let want = script_lines("pipe.script");
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!((g.0, g.1, g.2, &g.3), (w.0, w.1, w.2, &w.3), "sample {i}");
    }
}

#[test]
fn metadata() {
    let d = PerfData::open(Cursor::new(fixture("file.data"))).unwrap();
    let names: Vec<_> = d.attrs.iter().map(|a| a.name.clone().unwrap()).collect();
    assert_eq!(names, ["sched:sched_switch", "raw_syscalls:sys_enter", "major-faults"]);
    let f = &d.features;
    assert_eq!(f.hostname.as_deref(), Some("vm"));
    assert_eq!(f.arch.as_deref(), Some("x86_64"));
    assert_eq!(f.nr_cpus, Some((2, 2)));
    assert_eq!(f.cmdline.as_ref().unwrap()[1], "record");
    assert!(!f.build_ids.is_empty());
    let t = f.tracing.as_ref().unwrap();
    let mut ev: Vec<_> = t.events.iter().map(|e| format!("{}:{}", e.system, e.name)).collect();
    ev.sort();
    assert_eq!(ev, ["raw_syscalls:sys_enter", "sched:sched_switch"]);
    assert!(t.tables.cmdlines.iter().count() > 0);
}

/// Every cut of a file opens with an error or reads records up to the cut, then says
/// where the data ends; nothing panics, and nothing after the cut is invented.
#[test]
fn truncated_files_read_up_to_the_damage() {
    for name in ["file.data", "pipe.data"] {
        let bytes = fixture(name);
        let full = samples(bytes.clone()).len();
        let mut step = 0;
        let mut cut = 0;
        while cut < bytes.len() {
            let mut n = 0;
            if let Ok(d) = PerfData::open(Cursor::new(bytes[..cut].to_vec())) {
                let mut r = d.records(true).unwrap();
                let mut errors = 0;
                while let Some(item) = r.next() {
                    match item {
                        Ok(i) => n += (i.raw.kind == kind::SAMPLE) as usize,
                        Err(e) => {
                            errors += 1;
                            assert!(e.to_string().contains("perf.data offset"), "{e}");
                        }
                    }
                }
                assert!(errors <= 1, "{name} cut at {cut}: {errors} errors");
                assert!(n <= full);
                // A file-mode cut inside the data always says so.
                if !d.pipe
                    && cut < (d.data_offset + d.data_size) as usize
                    && cut > d.data_offset as usize
                {
                    assert_eq!(errors, 1, "{name} cut at {cut}");
                }
            }
            step = (step * 7 + 13) % 397 + 1;
            cut += step;
        }
    }
}

/// Corrupted bytes anywhere: errors, never panics or endless loops.
#[test]
fn corrupt_files_do_not_panic() {
    let bytes = fixture("file.data");
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..300 {
        let mut b = bytes.clone();
        for _ in 0..4 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let at = (seed % b.len() as u64) as usize;
            b[at] = (seed >> 32) as u8;
        }
        let Ok(d) = PerfData::open(Cursor::new(b)) else { continue };
        for sorted in [true, false] {
            let mut r = d.records(sorted).unwrap();
            let mut n = 0;
            while let Some(item) = r.next() {
                n += 1;
                assert!(n < 100_000);
                if let Ok(i) = item {
                    let _ = i.parse();
                }
            }
        }
    }
}
