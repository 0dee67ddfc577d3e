//! trace.dat reading and writing against files trace-cmd made on this machine
//! (fixtures/tracedat/, see its README), and bad input.

use std::io::Cursor;
use std::path::PathBuf;
use tp_format::tracedat::{Compression, Item, TraceDat};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/tracedat").join(name)
}

fn read(name: &str) -> Vec<u8> {
    std::fs::read(fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// (cpu, timestamp as `sec.usec`, pid, event name) of each line of the kernel's trace text.
fn expected_events() -> Vec<(u32, String, i32, String)> {
    let text = String::from_utf8(read("expected.txt")).unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let open = l.find("] ").unwrap();
            let cpu_start = l[..open].rfind('[').unwrap();
            let head = &l[..cpu_start];
            let pid: i32 = head.trim_end().rsplit('-').next().unwrap().parse().unwrap();
            let cpu: u32 = l[cpu_start + 1..open].parse().unwrap();
            let rest = &l[open + 2..];
            let mut it = rest.split_whitespace();
            let _flags = it.next().unwrap();
            let ts = it.next().unwrap().trim_end_matches(':').to_string();
            // Syscall events print as `sys_openat(...)` / `sys_openat -> 0x3`.
            let name = it.next().unwrap().trim_end_matches(':');
            let name = name.split('(').next().unwrap().to_string();
            (cpu, ts, pid, name)
        })
        .collect()
}

fn decode(dat: &TraceDat<Cursor<Vec<u8>>>) -> Vec<(u32, String, i32, String)> {
    let idx = dat.buffers.iter().position(|b| !b.cpus.is_empty()).expect("a buffer with data");
    let mut recs = dat.records(idx).unwrap();
    let mut out = Vec::new();
    while let Some(item) = recs.next() {
        match item.unwrap_or_else(|e| panic!("{e}")) {
            Item::Event(r) => {
                let id = u16::from_le_bytes([r.data[0], r.data[1]]) as u32;
                let pid = i32::from_le_bytes(r.data[4..8].try_into().unwrap());
                let ev = dat.events.iter().find(|e| e.id == id).expect("event id known");
                // The kernel prints ftrace's `print` as `tracing_mark_write`.
                let name = if ev.name == "print" {
                    "tracing_mark_write".to_string()
                } else if let Some(s) =
                    ev.name.strip_prefix("sys_enter_").or(ev.name.strip_prefix("sys_exit_"))
                {
                    format!("sys_{s}")
                } else {
                    ev.name.clone()
                };
                // The kernel rounds to the nearest microsecond (ns2usecs).
                let us = (r.ts + 500) / 1000;
                let ts = format!("{}.{:06}", us / 1_000_000, us % 1_000_000);
                out.push((r.cpu, ts, pid, name));
            }
            Item::Lost(l) => panic!("unexpected lost events {l:?}"),
        }
    }
    out
}

fn check_fixture(name: &str, version: u32, comp: Compression) {
    let dat = TraceDat::open(Cursor::new(read(name))).unwrap();
    assert_eq!(dat.version, version, "{name}");
    assert_eq!(dat.compression, comp, "{name}");
    assert_eq!((dat.page_size, dat.long_size, dat.big_endian), (4096, 8, false));
    assert_eq!(dat.header_page, tp_format::header::HeaderPage::X86_64);
    assert!(dat.format_errors.is_empty(), "{:?}", dat.format_errors);
    assert!(dat.events.iter().any(|e| e.system == "ftrace" && e.name == "print"));
    assert!(dat.events.iter().any(|e| e.system == "sched" && e.name == "sched_switch"));
    assert!(!dat.kallsyms.is_empty());
    assert!(dat.cmdlines.known(1).is_some() || dat.cmdlines.iter().count() > 0);
    assert_eq!(dat.clock.as_deref(), Some("local"));
    assert!(dat.uname.as_deref().unwrap_or("").starts_with("Linux"), "{:?}", dat.uname);
    assert!(dat.cpustats.contains("CPU: 0"));
    assert!(dat.buffers.iter().any(|b| b.name == "tpfx" && b.cpus.len() == 2), "{:?}", dat.buffers);
    let got = decode(&dat);
    let want = expected_events();
    assert_eq!(got.len(), want.len(), "{name}: event count");
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "{name}: event {i}");
    }
}

#[test]
fn reads_trace_cmd_v7_zstd() {
    check_fixture("v7-zstd.dat", 7, Compression::Zstd);
}

#[test]
fn reads_trace_cmd_v7_uncompressed() {
    check_fixture("v7-none.dat", 7, Compression::None);
}

#[test]
fn reads_trace_cmd_v6() {
    check_fixture("v6.dat", 6, Compression::None);
}
