//! CLOCK_MONOTONIC nanoseconds from the TSC, converted with a calibrated mult/shift as the
//! kernel's clocksource does: `ns = base_ns + ((tsc - base_tsc) * mult) >> 32`.
//!
//! Calibration pairs `rdtsc` with `clock_gettime(CLOCK_MONOTONIC)` (keeping the tightest
//! bracket of several tries) at start and again over longer windows from the recorder's
//! background thread ([`recalibrate`]); a seqlock publishes each new conversion. The
//! recorder stores raw TSC readings in its pages and converts them when its background
//! thread takes a page ([`converter`]), clamping per stream so time never goes backwards. Without a usable TSC
//! (not x86_64, or `TP_CLOCK=gettime`) it falls back to `clock_gettime`.

use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

static SEQ: AtomicU64 = AtomicU64::new(0);
static BASE_TSC: AtomicU64 = AtomicU64::new(0);
static BASE_NS: AtomicU64 = AtomicU64::new(0);
static MULT: AtomicU64 = AtomicU64::new(0);
static USE_TSC: AtomicBool = AtomicBool::new(false);
static ANCHOR: Mutex<Option<(u64, u64)>> = Mutex::new(None);

/// CLOCK_MONOTONIC in ns through the vDSO.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid timespec to write to.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[inline(always)]
fn rdtsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: rdtsc is available on every x86_64 CPU and has no memory effects.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        0
    }
}

/// A (tsc, ns) pair whose clock_gettime call was bracketed most tightly by two rdtsc reads.
fn sample() -> (u64, u64) {
    let mut best = (u64::MAX, 0, 0);
    for _ in 0..16 {
        let a = rdtsc();
        let ns = monotonic_ns();
        let b = rdtsc();
        if b.wrapping_sub(a) < best.0 {
            best = (b.wrapping_sub(a), a / 2 + b / 2 + (a & b & 1), ns);
        }
    }
    (best.1, best.2)
}

fn tsc_usable() -> bool {
    if !cfg!(target_arch = "x86_64") || std::env::var("TP_CLOCK").is_ok_and(|v| v == "gettime") {
        return false;
    }
    // The kernel only keeps CLOCK_MONOTONIC on the TSC when the TSC is stable.
    std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
        .map(|s| s.trim() == "tsc")
        .unwrap_or(false)
}

fn publish(base_tsc: u64, base_ns: u64, mult: u64) {
    let s = SEQ.load(Ordering::Relaxed);
    SEQ.store(s + 1, Ordering::Relaxed);
    fence(Ordering::Release);
    BASE_TSC.store(base_tsc, Ordering::Relaxed);
    BASE_NS.store(base_ns, Ordering::Relaxed);
    MULT.store(mult, Ordering::Relaxed);
    SEQ.store(s + 2, Ordering::Release);
}

/// Calibrate once (a few milliseconds); later calls refine. Called by the recorder.
pub fn init() {
    let mut anchor = ANCHOR.lock().unwrap_or_else(|e| e.into_inner());
    if anchor.is_some() {
        return;
    }
    if !tsc_usable() {
        *anchor = Some((0, 0));
        return;
    }
    let a = sample();
    std::thread::sleep(std::time::Duration::from_millis(5));
    let b = sample();
    let (dt, dn) = (b.0.wrapping_sub(a.0), b.1.wrapping_sub(a.1));
    let mult = ((dn as u128) << 32) / dt.max(1) as u128;
    // A TSC slower than 1 GHz would make ns deltas larger than tick deltas, which the
    // recorder's in-place page conversion can't hold: use clock_gettime then.
    if dt == 0 || dn == 0 || dt > u64::MAX >> 1 || mult >= 1 << 32 {
        *anchor = Some((0, 0));
        return;
    }
    publish(b.0, b.1, mult as u64);
    *anchor = Some(a);
    USE_TSC.store(true, Ordering::Release);
}

/// Refine the conversion over the longer window since calibration (background thread).
pub fn recalibrate() {
    let anchor = *ANCHOR.lock().unwrap_or_else(|e| e.into_inner());
    let Some(a) = anchor else { return };
    if !USE_TSC.load(Ordering::Acquire) {
        return;
    }
    let b = sample();
    let (dt, dn) = (b.0.wrapping_sub(a.0), b.1.wrapping_sub(a.1));
    if dt == 0 || dn == 0 {
        return;
    }
    let mult = (((dn as u128) << 32) / dt as u128) as u64;
    if mult >= 1 << 32 {
        return;
    }
    // Re-base at the current converted time so the timeline stays continuous.
    let now = convert(b.0);
    publish(b.0, now.max(b.1.min(now + 1000)), mult);
}

/// The published (base_tsc, base_ns, mult), read consistently.
#[inline(always)]
fn params() -> (u64, u64, u64) {
    loop {
        let s1 = SEQ.load(Ordering::Acquire);
        let bt = BASE_TSC.load(Ordering::Relaxed);
        let bn = BASE_NS.load(Ordering::Relaxed);
        let m = MULT.load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        if s1 & 1 == 0 && SEQ.load(Ordering::Relaxed) == s1 {
            return (bt, bn, m);
        }
        std::hint::spin_loop();
    }
}

#[inline(always)]
fn apply(tsc: u64, (bt, bn, m): (u64, u64, u64)) -> u64 {
    let d = tsc.wrapping_sub(bt) as i64;
    let off = ((d.unsigned_abs() as u128 * m as u128) >> 32) as u64;
    if d >= 0 {
        bn.wrapping_add(off)
    } else {
        bn.wrapping_sub(off)
    }
}

#[inline(always)]
fn convert(tsc: u64) -> u64 {
    apply(tsc, params())
}

/// The raw->ns conversion in effect now, to convert many readings with one snapshot (the
/// recorder's background thread converts whole pages). Never maps a difference of `d` raw
/// units to more than `d` ns (the TSC is only used when it ticks at 1 GHz or faster).
pub(crate) fn converter() -> impl Fn(u64) -> u64 {
    let p = if USE_TSC.load(Ordering::Acquire) { Some(params()) } else { None };
    move |raw| match p {
        Some(p) => apply(raw, p),
        None => raw,
    }
}

/// Now, in CLOCK_MONOTONIC nanoseconds.
#[inline(always)]
pub fn now_ns() -> u64 {
    from_raw(raw_now())
}

/// A raw clock reading: TSC ticks, or CLOCK_MONOTONIC ns when the TSC is not used. Convert
/// with [`from_raw`]. The recorder stores raw readings and converts whole pages later, off
/// the hot path.
#[inline(always)]
pub fn raw_now() -> u64 {
    if USE_TSC.load(Ordering::Relaxed) {
        rdtsc()
    } else {
        monotonic_ns()
    }
}

/// CLOCK_MONOTONIC nanoseconds for a [`raw_now`] reading.
#[inline(always)]
pub fn from_raw(raw: u64) -> u64 {
    if USE_TSC.load(Ordering::Relaxed) {
        convert(raw)
    } else {
        raw
    }
}

/// Whether timestamps come from the TSC (else clock_gettime).
pub fn uses_tsc() -> bool {
    USE_TSC.load(Ordering::Relaxed)
}
