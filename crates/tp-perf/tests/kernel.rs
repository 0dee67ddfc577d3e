//! tp-perf on the running kernel (needs root for tracepoints; CI runs as root).

use perf_event_open_sys::bindings as b;
use tp_perf::counter::{Counter, CounterOptions, Sampling, Target};
use tp_perf::events::{self, MachineLookups};
use tp_perf::Ring;

fn tracefs() -> tp_tracefs::Tracefs {
    tp_tracefs::Tracefs::discover().expect("these tests need root and tracefs (CI runs as root)")
}

fn getppid_n(n: usize) {
    for _ in 0..n {
        // SAFETY: getppid has no preconditions.
        unsafe { libc::syscall(libc::SYS_getppid) };
    }
}

/// Every getppid() of this thread arrives as one sample in the ring, with its pid/tid and
/// the raw tracepoint record; nothing lost.
#[test]
fn ring_yields_one_sample_per_tracepoint_hit() {
    let tfs = tracefs();
    let spec = events::parse("syscalls:sys_enter_getppid").unwrap();
    let ev =
        events::resolve(&[spec], &mut MachineLookups::new(Some(&tfs), None)).unwrap().remove(0);
    let sampling = Sampling {
        sample_type: (b::PERF_SAMPLE_TID | b::PERF_SAMPLE_RAW) as u64,
        period: 1,
        freq: false,
        clockid: Some(libc::CLOCK_MONOTONIC),
        side_records: false,
        mmap_data: false,
        watermark: 0,
        stacks: Default::default(),
    };
    let o = CounterOptions { disabled: true, sampling: Some(sampling), ..Default::default() };
    let c = Counter::open(&ev, Target::Thread(0), &o, None).unwrap();
    // 2 data pages (8 KiB): the 3000 samples wrap the ring many times, read as they come.
    let mut ring = Ring::map(&c, 2).unwrap();
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) } as u32;
    let (mut samples, mut others) = (0, 0);
    c.enable().unwrap();
    for _ in 0..30 {
        getppid_n(100);
        ring.read(|rec| {
            let ty = u32::from_ne_bytes(rec[0..4].try_into().unwrap());
            if ty == b::PERF_RECORD_SAMPLE {
                let pid = u32::from_ne_bytes(rec[8..12].try_into().unwrap());
                let t = u32::from_ne_bytes(rec[12..16].try_into().unwrap());
                let raw_size = u32::from_ne_bytes(rec[16..20].try_into().unwrap()) as usize;
                assert_eq!((pid, t), (std::process::id(), tid));
                assert!(
                    raw_size >= 16 && 20 + raw_size <= rec.len(),
                    "raw {raw_size} in {}",
                    rec.len()
                );
                // The raw record starts with common_type: the tracepoint's id.
                let common_type = u16::from_ne_bytes(rec[20..22].try_into().unwrap());
                assert_eq!(common_type as u64, ev.config);
                samples += 1;
            } else {
                others += 1;
            }
        });
    }
    c.disable().unwrap();
    ring.read(|_| samples += 1);
    assert_eq!(samples, 3000, "other records: {others}, stats {:?}", ring.stats());
    assert_eq!(ring.stats().lost, 0);
    assert_eq!(c.read().unwrap().value, 3000);
}

/// A software event counts; a hardware event without a PMU (this VM) is NotSupported.
#[test]
fn software_counts_and_hardware_is_not_supported() {
    let o = CounterOptions { disabled: true, ..Default::default() };
    let faults = Counter::open(
        &tp_perf::Event::symbolic("page-faults").unwrap(),
        Target::Thread(0),
        &o,
        None,
    )
    .unwrap();
    faults.enable().unwrap();
    let v: Vec<u8> = vec![1; 64 << 20];
    std::hint::black_box(&v);
    drop(v);
    faults.disable().unwrap();
    let r = faults.read().unwrap();
    assert!(r.value > 100, "{r:?}");
    assert!(r.enabled > 0 && r.running == r.enabled, "{r:?}");
    match Counter::open(&tp_perf::Event::symbolic("cycles").unwrap(), Target::Thread(0), &o, None) {
        Err(e) => assert!(e.is_not_supported(), "{e}"),
        // A machine with a PMU: then it must count.
        Ok(c) => assert!(c.read().is_ok()),
    }
}

/// A group read through the leader returns every member, identified by its id.
#[test]
fn group_read_by_id() {
    let o = CounterOptions { disabled: true, read_group: true, ..Default::default() };
    let lead = Counter::open(
        &tp_perf::Event::symbolic("task-clock").unwrap(),
        Target::Thread(0),
        &o,
        None,
    )
    .unwrap();
    let member_o = CounterOptions { disabled: false, read_group: true, ..Default::default() };
    let sys = tp_perf::Event::symbolic("page-faults").unwrap();
    let member = Counter::open(&sys, Target::Thread(0), &member_o, Some(&lead)).unwrap();
    lead.enable_group().unwrap();
    let v: Vec<u8> = vec![1; 8 << 20];
    std::hint::black_box(&v);
    lead.disable_group().unwrap();
    let g = lead.read_group(2).unwrap();
    assert_eq!(g.len(), 2);
    assert_eq!(g[0].0, lead.id().unwrap());
    assert_eq!(g[1].0, member.id().unwrap());
    assert!(g[0].1.value > 0 && g[1].1.value > 0, "{g:?}");
}

/// A ring nobody reads overflows: the kernel drops samples and says how many in a
/// PERF_RECORD_LOST, which the reader counts; samples kept + lost = every hit.
#[test]
fn a_full_ring_counts_what_it_lost() {
    let tfs = tracefs();
    let spec = events::parse("syscalls:sys_enter_getppid").unwrap();
    let ev =
        events::resolve(&[spec], &mut MachineLookups::new(Some(&tfs), None)).unwrap().remove(0);
    let sampling = Sampling {
        sample_type: (b::PERF_SAMPLE_TID | b::PERF_SAMPLE_RAW) as u64,
        period: 1,
        freq: false,
        clockid: None,
        side_records: false,
        mmap_data: false,
        watermark: 0,
        stacks: Default::default(),
    };
    let o = CounterOptions { disabled: true, sampling: Some(sampling), ..Default::default() };
    let c = Counter::open(&ev, Target::Thread(0), &o, None).unwrap();
    let mut ring = Ring::map(&c, 1).unwrap();
    c.enable().unwrap();
    getppid_n(5000);
    let mut samples = 0u64;
    let mut count = |rec: &[u8]| {
        samples +=
            (u32::from_ne_bytes(rec[0..4].try_into().unwrap()) == b::PERF_RECORD_SAMPLE) as u64
    };
    ring.read(&mut count);
    // The kernel writes its LOST record at the next sample once there is room again.
    getppid_n(1);
    c.disable().unwrap();
    ring.read(&mut count);
    let st = ring.stats();
    assert!(st.lost > 0 && samples < 5001, "{st:?}, {samples} samples");
    assert_eq!(samples + st.lost, 5001, "{st:?}");
}
