//! CLOCK_MONOTONIC nanoseconds from the TSC, converted with a calibrated mult/shift as the
//! kernel's clocksource does: `ns = base_ns + ((tsc - base_tsc) * mult) >> 32`.
//!
//! Calibration pairs `rdtsc` with `clock_gettime(CLOCK_MONOTONIC)` (keeping the tightest
//! bracket of several tries) at start and again over longer windows from the recorder's
//! background thread ([`recalibrate`]); a seqlock publishes each new conversion, which live
//! readers (probes, the text sink) use. The recorder stores raw TSC readings in its pages,
//! takes a calibration point every second while it records (`Anchors`), and its background
//! thread converts each page as it takes it from a thread's buffer, with the rate of the
//! latest two points (before it compresses the page): the kernel adjusts CLOCK_MONOTONIC's
//! rate (NTP), and one average rate over hours would drift from it.
//! Without a usable TSC (not x86_64, or `TP_CLOCK=gettime`) it falls back to
//! `clock_gettime`.

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

/// A TSC read, whatever the clock in use: a raw reading only when [`uses_tsc`].
#[inline(always)]
pub(crate) fn rdtsc() -> u64 {
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

/// Calibration points (raw, ns) taken over a recording, to convert its raw readings with
/// ([`Anchors::conversion`]).
#[derive(Debug, Default)]
pub(crate) struct Anchors {
    points: Vec<(u64, u64)>,
}

impl Anchors {
    #[cfg(test)]
    pub fn with_points(points: Vec<(u64, u64)>) -> Anchors {
        Anchors { points }
    }

    /// Take a point now (nothing to take when raw readings are already ns).
    pub fn add(&mut self) {
        if USE_TSC.load(Ordering::Acquire) {
            self.points.push(sample());
        }
    }

    /// The conversion as of the points taken so far: piecewise linear between them,
    /// extended past the first and last with their segments' rates (so readings after the
    /// last point are extrapolated with the latest rate). Never maps a difference of `d` raw
    /// units to more than `d` ns (points that would are dropped), so deltas stay where they
    /// were.
    pub fn conversion(&self) -> Conversion {
        let mut pts: Vec<(u64, u64)> = Vec::with_capacity(self.points.len());
        for &(t, n) in &self.points {
            match pts.last() {
                Some(&(t0, n0)) if !(t > t0 && n > n0 && n - n0 <= t - t0) => {}
                _ => pts.push((t, n)),
            }
        }
        // ns per raw unit of each segment, 32.32 fixed point (<= 1.0: n - n0 <= t - t0),
        // rounded down so that times only step up where one segment meets the next.
        let mut segs: Vec<(u64, u64, u64)> = pts
            .windows(2)
            .map(|w| {
                let ((t0, n0), (t1, n1)) = (w[0], w[1]);
                (t0, n0, ((((n1 - n0) as u128) << 32) / (t1 - t0) as u128) as u64)
            })
            .collect();
        if let (Some(&(t, n)), Some(&(_, _, m))) = (pts.last(), segs.last()) {
            segs.push((t, n, m));
        }
        // Fewer than two points: the current published conversion.
        let live = (segs.is_empty() && USE_TSC.load(Ordering::Acquire)).then(params);
        Conversion { segs, live, seg: std::cell::Cell::new(0) }
    }
}

/// Raw readings to CLOCK_MONOTONIC ns, from [`Anchors::conversion`].
#[derive(Debug)]
pub(crate) struct Conversion {
    /// Per segment: its first raw reading, its ns, and its rate (see `conversion`).
    segs: Vec<(u64, u64, u64)>,
    /// Without segments: the published conversion, or none (readings are ns already).
    live: Option<(u64, u64, u64)>,
    /// The segment of the last reading: one stream's readings come in increasing order,
    /// which keeps finding the segment O(1).
    seg: std::cell::Cell<usize>,
}

impl Conversion {
    /// `raw` in ns.
    #[inline]
    pub fn ns(&self, raw: u64) -> u64 {
        if self.segs.is_empty() {
            return self.live.map_or(raw, |p| apply(raw, p));
        }
        let mut i = self.seg.get().min(self.segs.len() - 1);
        while i + 1 < self.segs.len() && raw >= self.segs[i + 1].0 {
            i += 1;
        }
        while i > 0 && raw < self.segs[i].0 {
            i -= 1;
        }
        self.seg.set(i);
        let (t0, n0, m) = self.segs[i];
        let off = |d: u64| ((d as u128 * m as u128) >> 32) as u64;
        if raw >= t0 {
            n0.saturating_add(off(raw - t0))
        } else {
            n0.saturating_sub(off(t0 - raw))
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchors_convert_piecewise_and_monotonic() {
        // Two segments at different rates (0.5 then 0.25 ns per tick), plus a bad point (ns
        // going back) that must be dropped.
        let a = Anchors { points: vec![(1000, 100), (3000, 1100), (2500, 1200), (7000, 2100)] };
        let c = a.conversion();
        let f = |raw| c.ns(raw);
        assert_eq!(f(1000), 100);
        assert_eq!(f(2000), 600);
        assert_eq!(f(3000), 1100);
        assert_eq!(f(5000), 1600);
        assert_eq!(f(7000), 2100);
        // Past the ends: the end segments' rates.
        assert_eq!(f(11000), 3100);
        assert_eq!(f(0), 0);
        assert_eq!(f(800), 0);
        // Going back to an earlier segment after a later one (another stream).
        assert_eq!(f(2000), 600);
        // Monotonic and never more ns than ticks.
        let mut prev = f(0);
        for raw in (0..12_000).step_by(7) {
            let ns = f(raw);
            assert!(ns >= prev && ns - prev <= 7, "raw {raw}: {prev} -> {ns}");
            prev = ns;
        }
    }
}
