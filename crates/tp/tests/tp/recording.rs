//! Recording round trip: fire, record, read the file back; lost counts; exit paths.

use crate::events::*;
use tp::Recording;

fn read(path: &std::path::Path) -> Recording {
    Recording::open(path).unwrap()
}

#[test]
fn events_from_two_threads_read_back_equal() {
    let _g = crate::global();
    let dir = crate::temp_dir("roundtrip");
    let path = dir.join("t.tp");
    let t0 = tp::clock::monotonic_ns();
    let rec = tp::Recorder::start(&path).unwrap();
    let worker = std::thread::spawn(|| {
        for i in 0..1000 {
            trace_ev3(i, -i, i as i64 * 1_000_000_000);
        }
        // SAFETY: gettid has no arguments.
        unsafe { libc::syscall(libc::SYS_gettid) as i32 }
    });
    for i in 0..500u64 {
        trace_kinds(i, &format!("name-{i}"), &i.to_le_bytes(), i % 2 == 0);
    }
    let wtid = worker.join().unwrap();
    let stats = rec.stop().unwrap();
    let t1 = tp::clock::monotonic_ns();
    assert_eq!((stats.events, stats.lost), (1500, 0));

    let r = read(&path);
    assert_eq!((r.records.len(), r.dropped, r.lost_in_pages), (1500, 0, 0));
    assert_eq!(r.clock.as_deref(), Some("mono"));
    assert!(r.cmdlines.iter().any(|(p, _)| *p == wtid), "{:?}", r.cmdlines);
    let ev3 = tracepoint_ev3();
    assert_eq!(r.format(ev3.id()).unwrap(), ev3.format());
    for site in tp::tracepoints() {
        assert_eq!(r.format(site.id()), Some(site.format()), "{}", site.full_name());
    }
    let (mut n3, mut nk) = (0, 0);
    let mut last_ts = 0;
    for (_stream, ts, rec) in &r.records {
        let (ts, rec) = (*ts, rec.as_slice());
        assert!(ts >= last_ts, "records are merged by time");
        last_ts = ts;
        assert!(ts + 20_000_000 >= t0 && ts <= t1 + 20_000_000, "ts {ts} outside {t0}..{t1}");
        let id = u16::from_le_bytes([rec[0], rec[1]]);
        let f = r.format(id).unwrap();
        let int = |n: &str| f.field(n).unwrap().read_int(rec, false).unwrap();
        if f.name == "ev3" {
            let i = n3;
            assert_eq!((int("a"), int("b"), int("c")), (i, -i, i * 1_000_000_000));
            assert_eq!(int("common_pid"), wtid as i128);
            n3 += 1;
        } else {
            assert_eq!(f.name, "kinds");
            let i = nk as u64;
            assert_eq!(int("big"), i as i128);
            assert_eq!(int("flag"), (i % 2 == 0) as i128);
            let name = f.field("name").unwrap().bytes(rec, false).unwrap();
            assert_eq!(name, format!("name-{i}\0").as_bytes());
            assert_eq!(f.field("data").unwrap().bytes(rec, false).unwrap(), i.to_le_bytes());
            nk += 1;
        }
    }
    assert_eq!((n3, nk), (1000, 500));
    assert!(!dir.join("t.tp.tp-spool").exists(), "spool directory left behind");
    std::fs::remove_dir_all(dir).unwrap();
}

/// A burst fired back to back at defaults is kept whole: 3 million events (about 85 MB of
/// pages) fit in the thread's buffer however far behind the background thread is, because
/// the buffer grows into memory as the burst reaches it. The background thread is made to
/// fall behind for certain: it shares the firing thread's CPU at the idle priority, so it
/// barely runs until the burst ends (a fixed 4 MiB buffer dropped most of such a burst).
#[test]
fn a_burst_at_defaults_is_kept_whole() {
    let _g = crate::global();
    let dir = crate::temp_dir("burst");
    let path = dir.join("t.tp");
    let rec = tp::Recorder::start(&path).unwrap();
    let recorder = thread_named("tp-recorder").expect("the recorder's background thread");
    let (me, before) = pin_here();
    // SAFETY: plain system calls on threads of this process with valid arguments.
    unsafe {
        libc::sched_setaffinity(recorder, std::mem::size_of::<libc::cpu_set_t>(), &me);
        let p = libc::sched_param { sched_priority: 0 };
        assert_eq!(libc::sched_setscheduler(recorder, libc::SCHED_IDLE, &p), 0);
    }
    let n = 3_000_000u64;
    for i in 0..n {
        trace_ev3(i as i32, 7, i as i64);
    }
    let stats = rec.stop().unwrap();
    // SAFETY: as above, on this thread.
    unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &before) };
    assert_eq!((stats.events, stats.lost), (n, 0));
    assert!(stats.memory_peak >= 32 << 20, "the buffer did not grow: {}", stats.memory_peak);
    assert!(stats.memory_peak <= 512 << 20, "{}", stats.memory_peak);
    let r = read(&path);
    assert_eq!(r.records.len() as u64, n);
    let last = &r.records.last().unwrap().2;
    assert_eq!(i32::from_le_bytes(last[8..12].try_into().unwrap()), (n - 1) as i32);
    std::fs::remove_dir_all(dir).unwrap();
}

/// The thread id of this process's thread named `name` (waiting up to a second: a new
/// thread names itself once it runs).
fn thread_named(name: &str) -> Option<i32> {
    let find = || {
        std::fs::read_dir("/proc/self/task").ok()?.flatten().find_map(|t| {
            let comm = std::fs::read_to_string(t.path().join("comm")).ok()?;
            (comm.trim() == name).then(|| t.file_name().to_str()?.parse().ok()).flatten()
        })
    };
    for _ in 0..100 {
        if let Some(tid) = find() {
            return Some(tid);
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    None
}

/// Pin the calling thread to the CPU it runs on: (that CPU's set, the set it had).
fn pin_here() -> (libc::cpu_set_t, libc::cpu_set_t) {
    // SAFETY: an all-zero cpu_set_t is an empty set; the calls write within the sets.
    unsafe {
        let mut before: libc::cpu_set_t = std::mem::zeroed();
        libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut before);
        let mut me: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(libc::sched_getcpu().max(0) as usize, &mut me);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &me);
        (me, before)
    }
}

/// Every recording thread has its first 4 MiB of buffer whatever the recording-wide bound
/// says: with no memory for bursts at all, 64 threads each record a thousand events.
#[test]
fn every_thread_records_with_no_memory_for_bursts() {
    let _g = crate::global();
    let dir = crate::temp_dir("own-chunks");
    let path = dir.join("t.tp");
    let rec = tp::Recorder::builder(&path).max_memory_bytes(0).start().unwrap();
    std::thread::scope(|s| {
        for t in 0..64 {
            s.spawn(move || {
                for i in 0..1000 {
                    trace_ev3(t, i, 0);
                }
            });
        }
    });
    let stats = rec.stop().unwrap();
    assert_eq!((stats.events, stats.lost, stats.streams), (64_000, 0, 64));
    assert_eq!(read(&path).records.len(), 64_000);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn full_buffers_drop_and_count() {
    let _g = crate::global();
    let dir = crate::temp_dir("lost");
    let path = dir.join("t.tp");
    let rec = tp::Recorder::builder(&path).pages_per_thread(2).start().unwrap();
    let n = 200_000u64;
    for i in 0..n {
        trace_ev3(i as i32, 0, 0);
    }
    let stats = rec.stop().unwrap();
    assert!(stats.lost > 0, "2 pages can't hold {n} events fired in a tight loop");
    assert_eq!(stats.events + stats.lost, n);
    let r = read(&path);
    assert_eq!(r.records.len() as u64, stats.events);
    assert_eq!(r.dropped, stats.lost, "the stats section counts every lost event");
    // Page commit words carry the counts of events lost before each page (a count after
    // the last event sits on an empty page, which readers may not report).
    assert!(r.lost_in_pages > 0 && r.lost_in_pages <= stats.lost, "{}", r.lost_in_pages);
    // Events that made it are in order with no duplicates.
    let a: Vec<i128> = r
        .records
        .iter()
        .map(|(_, _, rec)| i32::from_le_bytes(rec[8..12].try_into().unwrap()) as i128)
        .collect();
    assert!(a.windows(2).all(|w| w[0] < w[1]));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn oversized_records_are_dropped_and_counted() {
    let _g = crate::global();
    let dir = crate::temp_dir("huge");
    let rec = tp::Recorder::start(dir.join("t.tp")).unwrap();
    let s = "x".repeat(2000);
    trace_huge(&s); // 5 x 1024 bytes: more than a page
    trace_huge("small");
    let stats = rec.stop().unwrap();
    assert_eq!((stats.events, stats.lost), (1, 1));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn dropping_the_handle_writes_the_file() {
    let _g = crate::global();
    let dir = crate::temp_dir("drop");
    let path = dir.join("t.tp");
    {
        let _rec = tp::Recorder::start(&path).unwrap();
        trace_ev3(1, 2, 3);
    }
    assert_eq!(read(&path).records.len(), 1);
    assert!(!tp::recorder::is_recording());
    std::fs::remove_dir_all(dir).unwrap();
}

/// The `record` example, built next to this test binary (`cargo test` builds examples; when
/// only this test target was built, or it is stale, cargo brings it up to date here).
pub fn example(name: &str) -> std::path::PathBuf {
    let exe = std::env::current_exe().unwrap();
    let path = exe.parent().unwrap().parent().unwrap().join("examples").join(name);
    if std::env::var_os("CARGO").is_some() || !path.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let release = exe.parent().unwrap().parent().unwrap().ends_with("release");
        let mut c = std::process::Command::new(cargo);
        c.args(["build", "-q", "-p", "tp", "--example", name]);
        if release {
            c.arg("--release");
        }
        assert!(c.status().unwrap().success(), "cargo build --example {name}");
    }
    path
}

#[test]
fn drop_exit_and_panic_leave_a_readable_file() {
    let dir = crate::temp_dir("exit");
    // `gettime`: the recorder's clock_gettime fallback (no TSC), which takes the slow path.
    for (mode, clock) in [("drop", "tsc"), ("exit", "tsc"), ("panic", "tsc"), ("drop", "gettime")] {
        let path = dir.join(format!("{mode}-{clock}.tp"));
        let t0 = tp::clock::monotonic_ns();
        let out = std::process::Command::new(example("record"))
            .arg(&path)
            .arg(mode)
            .env("TP_CLOCK", clock)
            .output()
            .expect("run the record example (built by cargo test)");
        let t1 = tp::clock::monotonic_ns();
        assert_eq!(out.status.success(), mode != "panic", "{mode}");
        let r = read(&path);
        assert_eq!(r.records.len(), 6, "{mode}: {}", String::from_utf8_lossy(&out.stderr));
        for (_, ts, _) in &r.records {
            assert!((t0..=t1).contains(ts), "{mode} {clock}: {ts} outside {t0}..{t1}");
        }
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// trace-cmd reads the file and prints every event as the text sink does.
#[test]
fn trace_cmd_reports_the_recording() {
    if std::process::Command::new("trace-cmd").arg("--version").output().is_err() {
        eprintln!("trace-cmd not installed (Debian package trace-cmd): not comparing");
        return;
    }
    let _g = crate::global();
    let dir = crate::temp_dir("tracecmd");
    let path = dir.join("t.dat");
    let rec = tp::Recorder::start(&path).unwrap();
    trace_ev3(1, -2, 3_000_000_000);
    trace_kinds(7, "nm", b"\x0a\xff", false);
    rec.stop().unwrap();
    let out = std::process::Command::new("trace-cmd").arg("report").arg(&path).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let bodies: Vec<String> = text
        .lines()
        .filter_map(|l| l.split_once(": ").map(|(_, b)| b.to_string()))
        .filter(|b| b.starts_with("ev3:") || b.starts_with("kinds:"))
        .map(|b| {
            let (name, rest) = b.split_once(':').unwrap();
            format!("{name}: {}", rest.trim_start())
        })
        .collect();
    assert_eq!(bodies.len(), 2, "{text}");
    assert_eq!(bodies[0], "ev3: a=1 b=-2 c=3000000000");
    // trace-cmd differs from the kernel (and from tp's text sink, see text.rs) in two known
    // places: it prints a negative `short` as unsigned (65529 for -7) and `__print_array`
    // as "1 2 7" instead of "{0x1,0x2,0x7}". Everything else must match.
    assert_eq!(
        bodies[1],
        "kinds: small=7 neg=65529 word=14 big=7 flag=0 comm=nm arr=1 2 7 \
         bytes4=de ad be ef name=nm data=0a ff",
        "{text}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// The recorder's timestamps are CLOCK_MONOTONIC, also seconds into a recording (past
/// several calibration points): each event carries `monotonic_ns()` read just before it
/// fires, and its timestamp must be just after that.
#[test]
fn timestamps_follow_clock_monotonic() {
    let _g = crate::global();
    let dir = crate::temp_dir("clock");
    let path = dir.join("t.tp");
    let rec = tp::Recorder::start(&path).unwrap();
    let start = std::time::Instant::now();
    while start.elapsed() < std::time::Duration::from_millis(2500) {
        trace_ev3(0, 0, tp::clock::monotonic_ns() as i64);
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    rec.stop().unwrap();
    let r = read(&path);
    let mut after: Vec<i128> = r
        .records
        .iter()
        .map(|(_, ts, rec)| {
            let f = r.format(u16::from_le_bytes([rec[0], rec[1]])).unwrap();
            *ts as i128 - f.field("c").unwrap().read_int(rec, false).unwrap()
        })
        .collect();
    assert!(after.len() > 100, "{} events", after.len());
    after.sort();
    let median = after[after.len() / 2];
    // A little slack below zero for the calibration's error; preemption between the two
    // clock reads can make single events late, not the median.
    assert!(after[0] > -2_000, "event stamped {} ns before its clock read", -after[0]);
    assert!(median < 20_000, "median event stamped {median} ns after its clock read");
    std::fs::remove_dir_all(dir).unwrap();
}

/// One thread records into two recordings in turn: its ring of the first is retired and the
/// second gets a fresh one (the fast path must not write into the old ring).
#[test]
fn one_thread_records_twice() {
    let _g = crate::global();
    let dir = crate::temp_dir("twice");
    for (round, n) in [(0, 300), (1, 500)] {
        let path = dir.join(format!("t{round}.tp"));
        let rec = tp::Recorder::start(&path).unwrap();
        for i in 0..n {
            trace_ev3(round, i, 0);
        }
        let stats = rec.stop().unwrap();
        assert_eq!((stats.events, stats.lost), (n as u64, 0));
        // Fired between recordings: nowhere.
        trace_ev3(99, 99, 99);
        let r = read(&path);
        assert_eq!(r.records.len(), n as usize);
        for (i, (_, _, rec)) in r.records.iter().enumerate() {
            let f = r.format(u16::from_le_bytes([rec[0], rec[1]])).unwrap();
            let int = |name: &str| f.field(name).unwrap().read_int(rec, false).unwrap();
            assert_eq!((int("a"), int("b")), (round as i128, i as i128));
        }
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// The file is the same recording whether the background thread compressed the pages
/// (zstd chunks, the default) or not (`Compression::None`): every event, in order, read by
/// tp and by trace-cmd, the compressed file several times smaller.
#[test]
fn zstd_and_uncompressed_files_hold_every_event() {
    use tp::recorder::Compression;
    let _g = crate::global();
    let dir = crate::temp_dir("compress");
    let n = 100_000u64;
    let mut sizes = Vec::new();
    for comp in [Compression::Zstd, Compression::None] {
        let path = dir.join(format!("{}.dat", comp.name()));
        let rec = tp::Recorder::builder(&path).pages_per_thread(2048).compression(comp).start();
        let rec = rec.unwrap();
        for i in 0..n {
            trace_ev3(i as i32, 7, i as i64 * 3);
        }
        let stats = rec.stop().unwrap();
        assert_eq!((stats.events, stats.lost), (n, 0), "{comp:?}");
        assert_eq!(stats.bytes, std::fs::metadata(&path).unwrap().len());
        sizes.push(stats.bytes);
        let r = read(&path);
        assert_eq!(r.records.len() as u64, n, "{comp:?}");
        for (i, (_, _, rec)) in r.records.iter().enumerate() {
            let a = i32::from_le_bytes(rec[8..12].try_into().unwrap());
            let c = i64::from_le_bytes(rec[16..24].try_into().unwrap());
            assert_eq!((a, c), (i as i32, i as i64 * 3), "{comp:?}");
        }
        if std::process::Command::new("trace-cmd").arg("--version").output().is_err() {
            eprintln!("trace-cmd not installed (Debian package trace-cmd): not comparing");
            continue;
        }
        let out = std::process::Command::new("trace-cmd").arg("report").arg(&path).output();
        let out = out.unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{comp:?}: {}", String::from_utf8_lossy(&out.stderr));
        let bodies: Vec<&str> =
            text.lines().filter_map(|l| l.split_once("ev3: ")).map(|b| b.1.trim_start()).collect();
        assert_eq!(bodies.len() as u64, n, "{comp:?}");
        assert_eq!(bodies[0], "a=0 b=7 c=0");
        assert_eq!(bodies[n as usize - 1], format!("a={} b=7 c={}", n - 1, (n - 1) * 3));
    }
    assert!(sizes[0] * 3 < sizes[1], "zstd {} bytes, none {} bytes", sizes[0], sizes[1]);
    std::fs::remove_dir_all(dir).unwrap();
}

/// `TP_COMPRESS` picks the compression, `TP_BUFFER_MB` each thread's buffer; a value
/// either can't take is an error that says so.
#[test]
fn tp_compress_setting() {
    if crate::is_child("recording::tp_compress_setting") {
        let g = tp::init_from_env();
        match std::env::var("TP_COMPRESS").as_deref() {
            Ok("lz5") => {
                let e = g.unwrap_err().to_string();
                assert_eq!(e, "TP_COMPRESS=\"lz5\": expected none, zstd or zlib");
            }
            _ if std::env::var("TP_BUFFER_MB").is_ok_and(|v| v == "lots") => {
                let e = g.unwrap_err().to_string();
                assert_eq!(e, "TP_BUFFER_MB=\"lots\": expected a number of MiB");
            }
            _ => {
                trace_ev3(1, 2, 3);
                drop(g.unwrap());
            }
        }
        return;
    }
    let dir = crate::temp_dir("tp-compress");
    let cases = [("none", "none", "4"), ("zlib", "zlib", "16"), ("zstd", "zstd", "8")];
    for (value, want, reserve) in cases.into_iter().chain([("lz5", "", "4"), ("zstd", "", "lots")])
    {
        let path = dir.join(format!("{value}-{reserve}.dat"));
        let out = crate::run_child(
            "recording::tp_compress_setting",
            &[
                ("TP_COMPRESS", value),
                ("TP_BUFFER_MB", reserve),
                ("TP_RECORD", path.to_str().unwrap()),
                ("TP_EVENTS", "*:ev3"),
            ],
        );
        assert!(out.status.success(), "{value}: {}", String::from_utf8_lossy(&out.stdout));
        if want.is_empty() {
            assert!(!path.exists());
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        // The v7 header names the compression after the magic, version and sizes.
        let head = String::from_utf8_lossy(&bytes[..64]).to_string();
        assert!(head.contains(&format!("\0{want}\0")), "{value}: {head:?}");
        assert_eq!(read(&path).records.len(), 1, "{value}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}
