use super::util::{count_sys_enter, getppid_n, gettid, sys_enter, tracefs};
use tp_tracefs::{CaptureConfig, Instance};

fn setup(tfs: &tp_tracefs::Tracefs, tid: i32, events: usize) -> Instance {
    let inst = Instance::create(tfs).unwrap();
    inst.set_tracing_on(false).unwrap();
    inst.set_buffer_size_kb(buffer_kb_for(tfs, events)).unwrap();
    inst.enable(&sys_enter()).unwrap();
    inst.set_filter(&sys_enter(), &format!("common_pid == {tid}")).unwrap();
    inst
}

/// A per-CPU buffer that holds `events` `sys_enter` records with no reader at all: the test
/// thread may run on one CPU throughout, and a reader starved by other processes on a busy
/// machine must not decide the count (a 4 MiB buffer lost up to 35,580 of 200,000 there).
fn buffer_kb_for(tfs: &tp_tracefs::Tracefs, events: usize) -> u64 {
    let fmt = tfs.event_format(&sys_enter()).unwrap();
    let payload = fmt.all_fields().map(|f| f.offset + f.size).max().unwrap();
    // A 4-byte event header, records 4-byte aligned, 4080 data bytes in a 4 KiB page.
    let record = (4 + payload).div_ceil(4) * 4;
    let pages = events.div_ceil(4080 / record);
    // Room for time-extend records and the pages the writer and reader hold.
    (pages + pages / 4 + 64) as u64 * 4
}

#[test]
fn drain_counts_exactly() {
    let tfs = tracefs();
    let tid = gettid();
    let inst = setup(&tfs, tid, 1234);
    inst.set_tracing_on(true).unwrap();
    getppid_n(1234);
    inst.set_tracing_on(false).unwrap();
    let text = inst.trace_text().unwrap();
    let in_text = text.lines().filter(|l| l.contains("sys_enter: NR 110 ")).count();
    assert_eq!(in_text, 1234);
    let mut pages = Vec::new();
    for cpu in inst.cpus().unwrap() {
        pages.extend(inst.drain_cpu(cpu).unwrap());
    }
    assert_eq!(pages.len() % 4096, 0);
    assert_eq!(count_sys_enter(&tfs, &pages, tid, 110), 1234);
}

fn capture_counts(splice: bool) {
    const EVENTS: usize = 200_000;
    let tfs = tracefs();
    let tid = gettid();
    let inst = setup(&tfs, tid, EVENTS);
    let dir = std::env::temp_dir().join(format!("tp-capture-test-{}-{splice}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cpus = inst.cpus().unwrap();
    let outs = cpus
        .iter()
        .map(|&c| (c, std::fs::File::create(dir.join(format!("cpu{c}"))).unwrap()))
        .collect();
    let cfg = CaptureConfig { splice, ..Default::default() };
    let cap = inst.capture(outs, &cfg).unwrap();
    inst.set_tracing_on(true).unwrap();
    getppid_n(EVENTS);
    inst.set_tracing_on(false).unwrap();
    let res = cap.finish().unwrap();
    let mut pages = Vec::new();
    for c in &res {
        let data = std::fs::read(dir.join(format!("cpu{}", c.cpu))).unwrap();
        assert_eq!(data.len() as u64, c.bytes);
        pages.extend(data);
    }
    if splice {
        assert!(res.iter().any(|c| c.spliced), "splice was not used");
    }
    let lost: u64 = inst.all_stats().unwrap().iter().map(|s| s.lost()).sum();
    assert_eq!(lost, 0);
    assert_eq!(count_sys_enter(&tfs, &pages, tid, 110), EVENTS);
    std::fs::remove_dir_all(&dir).unwrap();
    let idir = inst.dir().to_path_buf();
    drop(inst);
    assert!(!idir.exists());
}

#[test]
fn capture_with_splice_counts_exactly() {
    capture_counts(true);
}

#[test]
fn capture_with_read_counts_exactly() {
    capture_counts(false);
}
