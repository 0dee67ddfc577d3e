//! The recorder's codec on its own pages: zstd's throughput and ratio per level, one core.
//!
//! `cargo run --release --example codec -p tp -- [EVENTS] [LEVELS...]` records EVENTS
//! (default 2 million) of the benchmark event (int, int, long) from one thread into an
//! uncompressed file, takes its pages (timestamps in ns, as the recorder's background thread
//! compresses them), and compresses them at each zstd level (default -10 -5 -3 -1 1 2 3) in
//! chunks of 16, 64 and 256 pages, with one compressor as the background thread does. Per
//! level and chunk size it prints the ratio and the throughput in MB/s of pages (MB =
//! 10^6 bytes) on this thread's CPU time, the median of 5 passes, and how many such events
//! per second that is. The recorder must compress faster than a thread records (about 28
//! bytes per event here).

use std::io::Cursor;
use tp_format::tracedat::TraceDat;

tp::trace_event! {
    /// The benchmark event: three integers.
    pub bench:ev3(a: i32, b: i32, c: i64) {
        fields { a: i32, b: i32, c: i64 }
        printk("a=%d b=%d c=%ld", a, b, c)
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(2_000_000);
    let mut levels: Vec<i32> = args.filter_map(|s| s.parse().ok()).collect();
    if levels.is_empty() {
        levels = vec![-10, -5, -3, -1, 1, 2, 3];
    }
    tp::registry::init();
    let dir = std::env::temp_dir().join(format!("tp-codec-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("codec.dat");
    let rec = tp::Recorder::builder(&path)
        .pages_per_thread(1 << 16)
        .compression(tp::recorder::Compression::None)
        .start()
        .expect("recorder");
    for i in 0..n {
        trace_ev3(i as i32, 7, i as i64 * 3);
    }
    let stats = rec.stop().expect("write recording");
    let bytes = std::fs::read(&path).expect("read recording");
    let _ = std::fs::remove_dir_all(&dir);
    let dat = TraceDat::open(Cursor::new(bytes)).expect("parse recording");
    let mut pages = Vec::new();
    let mut src = dat.page_source(0, 0).expect("stream 0");
    while src.advance().expect("page") {
        pages.extend_from_slice(src.page());
    }
    let per_event = pages.len() as f64 / stats.events.max(1) as f64;
    println!(
        "{} events ({} lost), {} pages, {per_event:.1} page bytes per event; zstd {}",
        stats.events,
        stats.lost,
        pages.len() / 4096,
        zstd::zstd_safe::version_string()
    );
    println!(
        "{:>6} {:>12} {:>7} {:>12} {:>14}",
        "level", "chunk pages", "ratio", "MB/s (cpu)", "Mevents/s"
    );
    let mut out = vec![0u8; zstd::zstd_safe::compress_bound(256 * 4096)];
    for &level in &levels {
        for chunk_pages in [16usize, 64, 256] {
            let mut z = zstd::bulk::Compressor::new(level).expect("zstd level");
            let mut speeds = Vec::new();
            let mut packed = 0usize;
            for _ in 0..5 {
                packed = 0;
                let c0 = cpu_ns();
                for run in pages.chunks(chunk_pages * 4096) {
                    packed += 8 + z.compress_to_buffer(run, &mut out[..]).expect("compress");
                }
                let cpu = (cpu_ns() - c0).max(1) as f64;
                speeds.push(pages.len() as f64 * 1e3 / cpu);
            }
            speeds.sort_by(f64::total_cmp);
            let mbs = speeds[speeds.len() / 2];
            println!(
                "{level:>6} {chunk_pages:>12} {:>7.2} {mbs:>12.0} {:>14.1}",
                pages.len() as f64 / packed as f64,
                mbs / per_event
            );
        }
    }
}

/// This thread's CPU time in ns.
fn cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid timespec to write to.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
