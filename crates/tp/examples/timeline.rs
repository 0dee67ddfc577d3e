//! A program whose own tracepoints land on the kernel's timeline:
//!
//! `tp record -e sched:sched_switch -e raw_syscalls:sys_enter -e 'tpdemo:*' -- ./timeline [N [THREADS]]`
//!
//! Each of N rounds (default 5) fires `tpdemo:before_getppid` just before a `getppid()`
//! system call (NR 110 on x86_64), `tpdemo:after_getppid` with its result just after it, then
//! sleeps 2 ms (a `clock_nanosleep` and a context switch). Then THREADS threads (default 3)
//! fire `tpdemo:worker` once each. `tp report` on the recording shows each round's user
//! events around the kernel's `sys_enter` for that call.

tp::trace_event! {
    /// About to call getppid().
    pub tpdemo:before_getppid(round: u32, tag: &str) {
        fields { round: u32, tag: str }
        printk("round=%u tag=%s", round, tag)
    }

    /// getppid() returned `ppid`.
    pub tpdemo:after_getppid(round: u32, ppid: i32) {
        fields { round: u32, ppid: i32, magic: u64 = 0xfeed_0000 + round as u64 }
        printk("round=%u ppid=%d magic=%#llx", round, ppid, magic)
    }

    /// A worker thread ran (each thread's events are one stream of the recording).
    pub tpdemo:worker(n: u32) {
        fields { n: u32 }
        printk("n=%u", n)
    }
}

fn main() {
    let rounds: u32 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(5);
    // Reads TP_EVENTS and TP_RECORD (set by `tp record`); the file is written when `_env`
    // is dropped at the end of main.
    let _env = tp::init_from_env().expect("TP_* environment");
    for round in 0..rounds {
        trace_before_getppid(round, "timeline");
        // SAFETY: getppid has no preconditions.
        let ppid = unsafe { libc::getppid() };
        trace_after_getppid(round, ppid);
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    // Then THREADS threads (default 3) fire one event each.
    let threads: u32 = std::env::args().nth(2).and_then(|a| a.parse().ok()).unwrap_or(3);
    let handles: Vec<_> =
        (0..threads).map(|n| std::thread::spawn(move || trace_worker(n))).collect();
    for h in handles {
        h.join().unwrap();
    }
}
