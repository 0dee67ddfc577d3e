use super::util::{count_sys_enter, getppid_n, gettid, sys_enter, tracefs};
use tp_tracefs::{CaptureConfig, Instance};

fn setup(tfs: &tp_tracefs::Tracefs, tid: i32) -> Instance {
    let inst = Instance::create(tfs).unwrap();
    inst.set_tracing_on(false).unwrap();
    inst.set_buffer_size_kb(4096).unwrap();
    inst.enable(&sys_enter()).unwrap();
    inst.set_filter(&sys_enter(), &format!("common_pid == {tid}")).unwrap();
    inst
}

#[test]
fn drain_counts_exactly() {
    let tfs = tracefs();
    let tid = gettid();
    let inst = setup(&tfs, tid);
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
    let tfs = tracefs();
    let tid = gettid();
    let inst = setup(&tfs, tid);
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
    getppid_n(200_000);
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
    assert_eq!(count_sys_enter(&tfs, &pages, tid, 110), 200_000);
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
