//! perf.data interop with perf itself: files tp writes read back by `perf script`, files
//! `perf record` writes read by `tp report`. Needs root, tracefs and perf (CI installs
//! Debian's `linux-perf` and runs as root; fails loudly without them).

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::process::Command;

use tp_format::perfdata::attr::{event_type, flag};
use tp_format::perfdata::record::{Sample, SampleId};
use tp_format::perfdata::{sample, EventAttr, Features, PerfData, Record, Writer, WriterAttr};
use tp_format::tracedat::Metadata;
use tp_format::EventFormat;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/perfdata").join(name)
}

struct Tmp(PathBuf);

impl Tmp {
    fn new(tag: &str) -> Tmp {
        let p = std::env::temp_dir().join(format!("tp-perfdata-test-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Tmp(p)
    }
    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `perf script` (extra arguments first) on `file`: its stdout, asserting success.
fn perf_script(file: &Path, args: &[&str]) -> String {
    let out = Command::new("perf")
        .arg("script")
        .args(args)
        .arg("-i")
        .arg(file)
        .output()
        .expect("running perf (Debian package linux-perf)");
    assert!(
        out.status.success(),
        "perf script -i {} failed: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// trace.dat metadata holding `formats` (as perf stores them in TRACING_DATA).
fn metadata_of(formats: &[EventFormat]) -> Metadata {
    let mut meta = Metadata::default();
    for f in formats {
        match meta.event_formats.iter_mut().find(|(s, _)| *s == f.system) {
            Some((_, v)) => v.push(f.to_format_text()),
            None => meta.event_formats.push((f.system.clone(), vec![f.to_format_text()])),
        }
    }
    meta
}

/// Every record of perf's own file copied through tp's writer (samples and side records
/// parsed and encoded again, the tracing data written by trace.dat's writer from the parsed
/// formats): `perf script` prints the copy exactly as it prints the original.
#[test]
fn writer_copy_of_a_perf_file_prints_the_same_in_perf_script() {
    let tmp = Tmp::new("copy");
    let orig = PerfData::open_file(std::fs::File::open(fixture("file.data")).unwrap()).unwrap();
    let attrs: Vec<WriterAttr> = orig
        .attrs
        .iter()
        .map(|a| WriterAttr {
            attr: a.attr.clone(),
            ids: a.ids.clone(),
            name: a.name.clone().unwrap(),
        })
        .collect();
    let out = std::io::BufWriter::new(std::fs::File::create(tmp.path("copy.data")).unwrap());
    let mut w = Writer::new(out, attrs).unwrap();
    let mut records = orig.records(false).unwrap();
    let mut samples = 0;
    while let Some(item) = records.next() {
        let item = item.unwrap();
        let Some(a) = item.attr else {
            // Side records perf synthesized with a zero id (the kernel's map, its own comm)
            // are copied as they are; perf's own records (attrs, id index...) are not.
            if item.raw.kind < tp_format::perfdata::kind::HEADER_ATTR {
                w.write_raw(item.raw.bytes).unwrap();
            }
            continue;
        };
        let index = orig.attrs.iter().position(|x| std::ptr::eq(x, a)).unwrap();
        match item.parse().unwrap() {
            Record::Other(_) => {}
            r => {
                samples += matches!(r, Record::Sample(_)) as usize;
                w.write(index, &r).unwrap();
            }
        }
    }
    w.finished_round().unwrap();
    let tracing = orig.features.tracing.as_ref().unwrap();
    let meta = metadata_of(&tracing.events);
    let td = tp_format::tracedat::Writer::new(Default::default()).tracing_data(&meta);
    let features = Features {
        hostname: orig.features.hostname.clone(),
        osrelease: orig.features.osrelease.clone(),
        arch: orig.features.arch.clone(),
        nr_cpus: orig.features.nr_cpus,
        build_ids: orig.features.build_ids.clone(),
        ..Default::default()
    };
    let (_, stats) = w.finish(&features, Some(&td)).unwrap();
    assert_eq!(stats.samples as usize, samples);
    let want = std::fs::read_to_string(fixture("file.script")).unwrap();
    let got = perf_script(&tmp.path("copy.data"), &[]);
    assert_eq!(got.lines().count(), want.lines().count());
    for (i, (g, w)) in got.lines().zip(want.lines()).enumerate() {
        assert_eq!(g, w, "line {i}");
    }
    // perf report: the same per-event, per-comm summary.
    let report = |f: &Path| {
        let out = Command::new("perf")
            .args(["report", "--stdio", "--sort", "comm", "-i"])
            .arg(f)
            .output()
            .expect("running perf report");
        assert!(out.status.success(), "perf report: {}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8(out.stdout).unwrap();
        let keep = |l: &&str| l.starts_with("# Samples") || l.starts_with("    ");
        text.lines().filter(keep).map(str::to_string).collect::<Vec<_>>()
    };
    let want = report(&fixture("file.data"));
    assert!(want.len() >= 6, "{want:?}");
    assert_eq!(report(&tmp.path("copy.data")), want);
    // And tp reads its own file back with the same samples.
    let copy = PerfData::open(Cursor::new(std::fs::read(tmp.path("copy.data")).unwrap())).unwrap();
    assert!(copy.warnings.is_empty(), "{:?}", copy.warnings);
    let names: Vec<_> = copy.attrs.iter().map(|a| a.name.clone().unwrap()).collect();
    assert_eq!(names, ["sched:sched_switch", "raw_syscalls:sys_enter", "major-faults"]);
    assert_eq!(copy.features.sample_time, Some((stats.first_time.unwrap(), stats.last_time)));
}

/// sched_switch samples made up by tp (the record laid out by the running kernel's
/// format): `perf script` prints each with the values written.
#[test]
fn synthetic_tracepoint_samples_print_in_perf_script() {
    let text = std::fs::read_to_string("/sys/kernel/tracing/events/sched/sched_switch/format")
        .expect("these tests need root and tracefs (CI runs as root)");
    let format = EventFormat::parse("sched", &text).unwrap();
    let size = format.all_fields().map(|f| f.offset + f.size).max().unwrap();
    let set = |rec: &mut Vec<u8>, name: &str, bytes: &[u8]| {
        let f = format.field(name).unwrap();
        rec[f.offset..f.offset + bytes.len().min(f.size)]
            .copy_from_slice(&bytes[..bytes.len().min(f.size)]);
    };
    let attr = EventAttr {
        type_: event_type::TRACEPOINT,
        config: format.id as u64,
        sample_period: 1,
        sample_type: sample::IDENTIFIER
            | sample::IP
            | sample::TID
            | sample::TIME
            | sample::CPU
            | sample::PERIOD
            | sample::RAW,
        flags: flag::SAMPLE_ID_ALL | flag::COMM | flag::TASK,
        ..Default::default()
    };
    let tmp = Tmp::new("synthetic");
    let out = std::io::BufWriter::new(std::fs::File::create(tmp.path("syn.data")).unwrap());
    let attrs = vec![WriterAttr { attr, ids: vec![100, 101], name: "sched:sched_switch".into() }];
    let mut w = Writer::new(out, attrs).unwrap();
    const N: u32 = 1000;
    for i in 0..N {
        let pid = 5000 + i % 7;
        let next = 6000 + i % 5;
        let time = 1_000_000_000 + i as u64 * 1500;
        if i < 7 {
            let id =
                SampleId { pid: Some(pid), tid: Some(pid), time: Some(time), ..Default::default() };
            w.write(
                0,
                &Record::Comm { pid, tid: pid, comm: &format!("tpw{}", i % 7), exec: false, id },
            )
            .unwrap();
        }
        let mut rec = vec![0u8; size];
        set(&mut rec, "common_type", &(format.id as u16).to_le_bytes());
        set(&mut rec, "common_pid", &(pid as i32).to_le_bytes());
        set(&mut rec, "prev_comm", format!("tpw{}", i % 7).as_bytes());
        set(&mut rec, "prev_pid", &(pid as i32).to_le_bytes());
        set(&mut rec, "prev_prio", &120i32.to_le_bytes());
        set(&mut rec, "prev_state", &1u64.to_le_bytes());
        set(&mut rec, "next_comm", format!("next{}", i % 5).as_bytes());
        set(&mut rec, "next_pid", &(next as i32).to_le_bytes());
        set(&mut rec, "next_prio", &(100 + i as i32 % 20).to_le_bytes());
        let s = Sample {
            ip: Some(0xffff_ffff_8100_0000),
            pid: Some(pid),
            tid: Some(pid),
            time: Some(time),
            cpu: Some(i % 2),
            period: Some(1),
            raw: Some(&rec),
            misc: tp_format::perfdata::misc::KERNEL,
            ..Default::default()
        };
        w.write(0, &Record::Sample(s)).unwrap();
        if i % 100 == 99 {
            w.finished_round().unwrap();
        }
    }
    let td = tp_format::tracedat::Writer::new(Default::default())
        .tracing_data(&metadata_of(std::slice::from_ref(&format)));
    let (_, stats) = w.finish(&Features::default(), Some(&td)).unwrap();
    assert_eq!(stats.samples, N as u64);
    let got = perf_script(&tmp.path("syn.data"), &["-F", "comm,pid,cpu,time,event,trace"]);
    let lines: Vec<&str> = got.lines().collect();
    assert_eq!(lines.len(), N as usize, "{got}");
    for (i, l) in lines.iter().enumerate() {
        let i = i as u32;
        let (pid, next) = (5000 + i % 7, 6000 + i % 5);
        let t = 1_000_000_000 + i as u64 * 1500;
        let want = format!(
            "tpw{} {pid} [{:03}] {}.{:06}: sched:sched_switch: prev_comm=tpw{} prev_pid={pid} prev_prio=120 prev_state=S ==> next_comm=next{} next_pid={next} next_prio={}",
            i % 7,
            i % 2,
            t / 1_000_000_000,
            t % 1_000_000_000 / 1000,
            i % 7,
            i % 5,
            100 + i % 20
        );
        let squeezed: Vec<&str> = l.split_whitespace().collect();
        assert_eq!(squeezed.join(" "), want, "line {i}");
    }
}
