//! Does a second thread's I/O slow a tracer's producer on this machine? A producer writes
//! 28-byte records stamped with `rdtsc` into a 32 MiB ring of 4 KiB pages (tp's recorder
//! pattern, no tp code); a consumer thread takes full pages in runs of up to 256 and does
//! one of: nothing, `memcpy` them into a 1 MiB buffer, `write` them to a new file (fresh
//! page-cache pages), or `pwrite` them over the same 4 MiB of an existing file (cached pages
//! reused). Prints ns/event of the producer loop and events dropped when the ring was full.
//!
//! Built and run by bench/write-interference.sh: `write_interference MODE DIR`.

use std::io::Write;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*};
use std::time::{Duration, Instant};

const PAGE: usize = 4096;
const PAGES: usize = 8192;
const EVENTS: u64 = 10_000_000;
static HEAD: AtomicUsize = AtomicUsize::new(0);
static TAIL: AtomicUsize = AtomicUsize::new(0);
static DONE: AtomicBool = AtomicBool::new(false);

struct Ring(*mut u8);
// SAFETY: pages before HEAD belong to the consumer, the rest to the producer.
unsafe impl Send for Ring {}

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "none".into());
    let dir = std::path::PathBuf::from(args.next().unwrap_or_else(|| "/tmp".into()));
    let mut mem = vec![1u8; PAGE * (PAGES + 1)];
    let at = mem.as_ptr().align_offset(PAGE);
    let base = unsafe { mem.as_mut_ptr().add(at) };
    let ring = Ring(base);
    let path = dir.join(format!("write-interference-{}", std::process::id()));
    let m = mode.clone();
    let p = path.clone();
    let consumer = std::thread::spawn(move || {
        let ring = ring;
        let mut f = std::fs::File::create(&p).unwrap();
        if m == "overwrite" {
            f.write_all(&vec![0u8; 4 << 20]).unwrap();
        }
        let mut copy = vec![0u8; 256 * PAGE];
        let mut at = 0u64;
        loop {
            let (head, mut tail) = (HEAD.load(Acquire), TAIL.load(Relaxed));
            let done = DONE.load(Acquire);
            while head - tail >= 256 || (done && tail < head) {
                let run = (head - tail).min(256).min(PAGES - tail % PAGES);
                // SAFETY: pages tail..tail+run are full and not reused before TAIL moves.
                let src = unsafe {
                    std::slice::from_raw_parts(ring.0.add((tail % PAGES) * PAGE), run * PAGE)
                };
                match m.as_str() {
                    "memcpy" => copy[..src.len()].copy_from_slice(src),
                    "write" => f.write_all(src).unwrap(),
                    "overwrite" => {
                        f.write_all_at(src, at % (4 << 20)).unwrap();
                        at += src.len() as u64;
                    }
                    _ => {}
                }
                tail += run;
                TAIL.store(tail, Release);
            }
            if done && tail == HEAD.load(Acquire) {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    std::thread::sleep(Duration::from_millis(50));
    let (mut page, mut off, mut lost) = (0usize, PAGE, 0u64);
    let mut cur = base;
    let t0 = Instant::now();
    for i in 0..EVENTS {
        // SAFETY: rdtsc has no preconditions on x86_64.
        let ts = unsafe { core::arch::x86_64::_rdtsc() };
        if off + 28 > PAGE {
            if off != PAGE || page > 0 {
                HEAD.store(page, Release);
            }
            if page - TAIL.load(Acquire) >= PAGES {
                lost += 1;
                off = PAGE + 1;
                continue;
            }
            cur = unsafe { base.add((page % PAGES) * PAGE) };
            page += 1;
            off = 16;
        }
        // SAFETY: `cur` is the producer's page and the record fits.
        unsafe {
            (cur.add(off) as *mut u32).write_unaligned((ts as u32) << 5 | 6);
            (cur.add(off + 4) as *mut u64).write_unaligned(0x1234_0000_0001 | (i << 48));
            (cur.add(off + 12) as *mut u64).write_unaligned(i | 7 << 32);
            (cur.add(off + 20) as *mut u64).write_unaligned(i * 3);
        }
        off += 28;
    }
    let ns = t0.elapsed().as_nanos() as f64 / EVENTS as f64;
    HEAD.store(page, Release);
    DONE.store(true, Release);
    consumer.join().unwrap();
    let _ = std::fs::remove_file(&path);
    println!("{mode} {ns:.2} ns/event lost {lost}");
    drop(mem);
}
