//! Which tasks and which time an analysis looks at, and how its numbers print.

use std::fmt::Write as _;

use tp_format::glob::glob_match;

/// Which tasks and which time an analysis looks at (everything by default).
#[derive(Debug, Clone, Default)]
pub struct Select {
    /// Only these tasks (thread IDs, as the trace's pid column); all when empty.
    pub pids: Vec<i32>,
    /// Only tasks whose command name matches one of these globs; all when empty.
    pub comms: Vec<String>,
    /// Start of the window.
    pub from: Option<TimeArg>,
    /// End of the window (inclusive).
    pub to: Option<TimeArg>,
}

/// A `--from`/`--to` value in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeArg {
    Absolute(u64),
    /// After the first event of the file.
    Relative(u64),
}

/// A time as `tp report` prints it (`5044.055066` seconds), or `+S` seconds after the first
/// event.
pub fn parse_time(s: &str) -> Result<TimeArg, String> {
    let (rel, num) = match s.strip_prefix('+') {
        Some(n) => (true, n),
        None => (false, s),
    };
    let ns = parse_seconds(num).ok_or_else(|| format!("{s:?} is not a time in seconds"))?;
    Ok(if rel { TimeArg::Relative(ns) } else { TimeArg::Absolute(ns) })
}

/// `5044.055066` -> ns, exactly (no float rounding).
fn parse_seconds(s: &str) -> Option<u64> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if int.is_empty() && frac.is_empty() || frac.len() > 9 {
        return None;
    }
    let digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
    if !digits(int) || !digits(frac) {
        return None;
    }
    let secs: u64 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let mut ns: u64 = if frac.is_empty() { 0 } else { frac.parse().ok()? };
    for _ in frac.len()..9 {
        ns *= 10;
    }
    secs.checked_mul(1_000_000_000)?.checked_add(ns)
}

impl Select {
    /// Whether the task `pid` named `comm` is wanted.
    pub fn wants_task(&self, pid: i32, comm: &str) -> bool {
        (self.pids.is_empty() || self.pids.contains(&pid))
            && (self.comms.is_empty() || self.comms.iter().any(|g| glob_match(g, comm)))
    }

    /// True when tasks are filtered at all.
    pub fn filters_tasks(&self) -> bool {
        !self.pids.is_empty() || !self.comms.is_empty()
    }
}

/// Nanoseconds as `tp report` prints timestamps (`5044.055066`).
pub fn secs(ns: u64) -> String {
    format!("{}.{:06}", ns / 1_000_000_000, ns % 1_000_000_000 / 1000)
}

/// A duration for people: `812 ns`, `12.345 us`, `3.210 ms`, `1.500 s`.
pub fn dur(ns: u64) -> String {
    match ns {
        0..=9_999 => format!("{ns} ns"),
        10_000..=9_999_999 => format!("{:.3} us", ns as f64 / 1e3),
        10_000_000..=9_999_999_999 => format!("{:.3} ms", ns as f64 / 1e6),
        _ => format!("{:.3} s", ns as f64 / 1e9),
    }
}

/// A log2 histogram of nanosecond values, printed like bcc's runqlat (in microseconds).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Log2Hist {
    /// `buckets[k]`: values `v` (in us) with `2^(k-1) <= v < 2^k`; `buckets[0]`: `v == 0`.
    pub buckets: Vec<u64>,
}

impl Log2Hist {
    pub fn add(&mut self, ns: u64) {
        let us = ns / 1000;
        let k = (64 - us.leading_zeros()) as usize;
        if self.buckets.len() <= k {
            self.buckets.resize(k + 1, 0);
        }
        self.buckets[k] += 1;
    }

    /// Bucket bounds in us: `[lo, hi]` inclusive.
    pub fn bounds(k: usize) -> (u64, u64) {
        if k == 0 {
            (0, 0)
        } else {
            (1 << (k - 1), (1u64 << k) - 1)
        }
    }

    pub fn write(&self, out: &mut String, unit: &str) {
        let max = self.buckets.iter().copied().max().unwrap_or(0);
        let _ = writeln!(out, "{:>24} : count    distribution", unit);
        for (k, &n) in self.buckets.iter().enumerate() {
            let (lo, hi) = Log2Hist::bounds(k);
            let bar = if max == 0 { 0 } else { (n * 40).div_ceil(max) as usize };
            let _ = writeln!(
                out,
                "{:>10} -> {:<10} : {:<8} |{:<40}|",
                lo,
                hi,
                n,
                "*".repeat(bar.min(40))
            );
        }
    }

    pub fn json(&self, out: &mut String) {
        out.push('[');
        for (k, &n) in self.buckets.iter().enumerate() {
            if k > 0 {
                out.push(',');
            }
            let (lo, hi) = Log2Hist::bounds(k);
            let _ = write!(out, "{{\"us_lo\":{lo},\"us_hi\":{hi},\"count\":{n}}}");
        }
        out.push(']');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse_exactly() {
        assert_eq!(parse_time("5044.055066"), Ok(TimeArg::Absolute(5_044_055_066_000)));
        assert_eq!(parse_time("+1.5"), Ok(TimeArg::Relative(1_500_000_000)));
        assert_eq!(parse_time("7"), Ok(TimeArg::Absolute(7_000_000_000)));
        assert_eq!(parse_time(".000000001"), Ok(TimeArg::Absolute(1)));
        assert!(parse_time("1.0000000001").is_err());
        assert!(parse_time("-1").is_err());
        assert!(parse_time("x").is_err());
        assert!(parse_time("").is_err());
    }

    #[test]
    fn log2_buckets_like_runqlat() {
        let mut h = Log2Hist::default();
        for ns in [0, 999, 1000, 1999, 2000, 3999, 4000, 1_000_000] {
            h.add(ns);
        }
        // 0 us: 2; 1 us: 2; 2-3 us: 2; 4-7: 1; 1000 us in 512-1023: 1.
        assert_eq!(&h.buckets[..4], &[2, 2, 2, 1]);
        assert_eq!(h.buckets[10], 1);
        assert_eq!(Log2Hist::bounds(10), (512, 1023));
        assert_eq!(h.buckets.iter().sum::<u64>(), 8);
    }
}
