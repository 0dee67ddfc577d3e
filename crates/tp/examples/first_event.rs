//! Cost of a thread's first event while recording (it gets its ring then) against its second.
//!
//! `cargo run --release --example first_event -p tp` starts 200 threads one after another,
//! each firing two events, and prints the median and range of each event's thread CPU time
//! (CLOCK_THREAD_CPUTIME_ID, so time the core spent elsewhere is left out; the clock reading
//! itself costs about 0.7 us here, most of the second event's number).

tp::trace_event! {
    /// The event fired twice by each thread.
    pub bench:ev1(a: i32) {
        fields { a: i32 }
        printk("a=%d", a)
    }
}

fn main() {
    let threads = 200;
    tp::enable("bench:*");
    let path = std::env::temp_dir().join(format!("tp-first-event-{}.dat", std::process::id()));
    let rec = tp::Recorder::start(&path).unwrap();
    let mut first = Vec::new();
    let mut second = Vec::new();
    for _ in 0..threads {
        let (a, b) = std::thread::spawn(|| {
            let t0 = cpu();
            trace_ev1(1);
            let t1 = cpu();
            trace_ev1(2);
            let t2 = cpu();
            (t1 - t0, t2 - t1)
        })
        .join()
        .unwrap();
        first.push(a);
        second.push(b);
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    first.sort();
    second.sort();
    // Median and range.
    let p = |v: &[u64]| format!("median {} ns, range {}-{}", v[v.len() / 2], v[0], v[v.len() - 1]);
    println!("first event {}", p(&first));
    println!("second event {}", p(&second));
    drop(rec);
    let _ = std::fs::remove_file(&path);
}

/// This thread's CPU time in ns.
fn cpu() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid timespec to write to.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
