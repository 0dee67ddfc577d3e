//! bpftrace's output, from the maps' contents as read: `@name[key]: value` lines sorted as
//! bpftrace sorts them, histograms with their bars, and the `-f json` records. Pure: it takes
//! bytes and returns text, so every rule is tested without a kernel.

use std::fmt::Write;

use tp_format::render::json_string;

use crate::types::*;

/// One element of a map as read: its key bytes and each CPU's value bytes (one for a map
/// that is not per-CPU). A histogram's elements are one per bucket (key ++ bucket index).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Element {
    pub key: Vec<u8>,
    pub values: Vec<Vec<u8>>,
}

/// What the printing needs beyond the bytes: names of probes, symbols of addresses.
pub trait Names {
    fn probe(&self, id: u64) -> String;
    /// A kernel stack's frames (`sym+off` each).
    fn kstack(&self, id: i64) -> Vec<String>;
    /// A user stack's frames in a process.
    fn ustack(&self, id: i64, pid: u32) -> Vec<String>;
    fn ksym(&self, addr: u64) -> String;
    fn usym(&self, addr: u64, pid: u32) -> String;
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8).map_or(0, |s| u64::from_le_bytes(s.try_into().expect("8 bytes")))
}

/// A NUL-terminated string's text.
pub fn c_str(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

/// A value of type `t` at the start of `b`, as bpftrace prints it in a key or a value.
pub fn value_text(t: &Ty, b: &[u8], n: &dyn Names) -> String {
    match t {
        Ty::Int { signed: true } => (u64_at(b, 0) as i64).to_string(),
        Ty::Int { signed: false } => u64_at(b, 0).to_string(),
        Ty::Str(size) => c_str(&b[..(*size).min(b.len())]),
        Ty::Probe => n.probe(u64_at(b, 0)),
        Ty::Ksym => n.ksym(u64_at(b, 0)),
        Ty::Usym => n.usym(u64_at(b, 0), u64_at(b, 8) as u32),
        Ty::Kstack => stack_text(&n.kstack(u64_at(b, 0) as i64)),
        Ty::Ustack => stack_text(&n.ustack(u64_at(b, 0) as i64, u64_at(b, 8) as u32)),
        Ty::Buf(_) => {
            let len = (u64_at(b, 0) as usize).min(b.len().saturating_sub(8));
            b[8..8 + len]
                .iter()
                .map(|&c| {
                    if c.is_ascii_graphic() || c == b' ' {
                        (c as char).to_string()
                    } else {
                        format!("\\x{c:02x}")
                    }
                })
                .collect()
        }
        Ty::Tuple(items) => {
            let mut at = 0;
            let parts: Vec<String> = items
                .iter()
                .map(|it| {
                    let s = value_text(it, &b[at.min(b.len())..], n);
                    at += it.size();
                    s
                })
                .collect();
            format!("({})", parts.join(", "))
        }
        Ty::Void => String::new(),
    }
}

/// A stack as bpftrace prints it: a newline, then each frame indented by 8 spaces on a line.
fn stack_text(frames: &[String]) -> String {
    let mut s = String::from("\n");
    for f in frames {
        let _ = writeln!(s, "        {f}");
    }
    s
}

/// Each part of a key as text.
fn key_parts(m: &UserMap, key: &[u8], n: &dyn Names) -> Vec<String> {
    let mut at = 0;
    m.key
        .iter()
        .map(|t| {
            let s = value_text(t, &key[at.min(key.len())..], n);
            at += t.size();
            s
        })
        .collect()
}

/// The key's parts in brackets: `[a, b]`, or nothing for a map without keys.
fn key_text(m: &UserMap, key: &[u8], n: &dyn Names) -> String {
    if m.key.is_empty() {
        return String::new();
    }
    format!("[{}]", key_parts(m, key, n).join(", "))
}

/// An aggregation's value summed over CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Total {
    /// count, sum, min, max (`None`: no CPU saw a value).
    Int(Option<i64>),
    /// avg and stats: sum and count.
    Mean { sum: i64, count: u64 },
}

pub fn total(agg: Agg, values: &[Vec<u8>]) -> Total {
    match agg {
        Agg::Count | Agg::Sum | Agg::Hist | Agg::Lhist { .. } => Total::Int(Some(
            values.iter().map(|v| u64_at(v, 0) as i64).fold(0i64, i64::wrapping_add),
        )),
        Agg::Min | Agg::Max => {
            let seen = values.iter().filter(|v| u64_at(v, 8) != 0).map(|v| u64_at(v, 0) as i64);
            Total::Int(if agg == Agg::Min { seen.min() } else { seen.max() })
        }
        Agg::Avg | Agg::Stats => Total::Mean {
            sum: values.iter().map(|v| u64_at(v, 0) as i64).fold(0, i64::wrapping_add),
            count: values.iter().map(|v| u64_at(v, 8)).sum(),
        },
    }
}

fn mean(sum: i64, count: u64) -> i64 {
    if count == 0 {
        0
    } else {
        sum / count as i64
    }
}

/// The elements of a histogram map grouped by key: (key, counts per bucket).
pub fn hist_rows(agg: Agg, m: &UserMap, elems: &[Element]) -> Vec<(Vec<u8>, Vec<u64>)> {
    let ks = m.key_size();
    let nb = agg.buckets();
    let mut out: Vec<(Vec<u8>, Vec<u64>)> = Vec::new();
    for (i, e) in elems.iter().enumerate() {
        let (key, bucket) = if m.key.is_empty() {
            (Vec::new(), i.min(nb.saturating_sub(1)))
        } else {
            (e.key[..ks].to_vec(), u64_at(&e.key, ks) as usize)
        };
        let Total::Int(Some(c)) = total(agg, &e.values) else { continue };
        if bucket >= nb {
            continue;
        }
        let slot = match out.iter().position(|(k, _)| *k == key) {
            Some(p) => p,
            None => {
                out.push((key, vec![0; nb]));
                out.len() - 1
            }
        };
        out[slot].1[bucket] += c as u64;
    }
    out.retain(|(_, b)| b.iter().any(|&c| c > 0));
    // bpftrace sorts histograms by their total count, smallest first.
    out.sort_by(|a, b| (a.1.iter().sum::<u64>(), &a.0).cmp(&(b.1.iter().sum::<u64>(), &b.0)));
    out
}

const SUFFIX: [&str; 7] = ["", "K", "M", "G", "T", "P", "E"];

/// hist's bucket label for 2^power (`1K`, `512`, `2M`).
fn power_label(power: u32) -> String {
    format!("{}{}", 1u64 << (power % 10), SUFFIX[(power / 10) as usize])
}

/// lhist's label of a bound: multiples of 1024 with K, M, ... as bpftrace does.
fn lhist_label(mut v: i64) -> String {
    if v == 0 {
        return "0".into();
    }
    let mut s = 0;
    while v % 1024 == 0 && s < SUFFIX.len() - 1 {
        v /= 1024;
        s += 1;
    }
    format!("{v}{}", SUFFIX[s])
}

/// A bucket's label, and its bounds for JSON (`None`: unbounded).
fn bucket(agg: Agg, i: usize) -> (String, Option<i64>, Option<i64>) {
    match agg {
        Agg::Lhist { min, max, step } => {
            let n = ((max - min) / step) as usize;
            if i == 0 {
                (format!("(..., {})", lhist_label(min)), None, Some(min - 1))
            } else if i > n {
                (format!("[{}, ...)", lhist_label(max)), Some(max), None)
            } else {
                let lo = min + (i as i64 - 1) * step;
                (
                    format!("[{}, {})", lhist_label(lo), lhist_label(lo + step)),
                    Some(lo),
                    Some(lo + step - 1),
                )
            }
        }
        _ => match i {
            0 => ("(..., 0)".into(), None, Some(-1)),
            1 => ("[0]".into(), Some(0), Some(0)),
            2 => ("[1]".into(), Some(1), Some(1)),
            _ => {
                let p = i as u32 - 2;
                let lo = 1i64.wrapping_shl(p);
                (
                    format!("[{}, {})", power_label(p), power_label(p + 1)),
                    Some(lo),
                    Some(lo.wrapping_mul(2) - 1),
                )
            }
        },
    }
}

/// The rows bpftrace prints of one histogram: from the first non-empty bucket to the last.
fn hist_text(agg: Agg, counts: &[u64], out: &mut String) {
    let Some(first) = counts.iter().position(|&c| c > 0) else { return };
    let last = counts.iter().rposition(|&c| c > 0).unwrap_or(first);
    let top = counts.iter().copied().max().unwrap_or(1).max(1);
    for (i, &c) in counts.iter().enumerate().take(last + 1).skip(first) {
        let bar = (c as u128 * 52 / top as u128) as usize;
        let _ = writeln!(
            out,
            "{:<16}{:>8} |{}{}|",
            bucket(agg, i).0,
            c,
            "@".repeat(bar),
            " ".repeat(52 - bar)
        );
    }
}

/// An aggregation's elements that were set, summed over CPUs, sorted by value (ties by key).
fn agg_rows<'e>(agg: Agg, m: &UserMap, elems: &'e [Element]) -> Vec<(&'e [u8], Total)> {
    let mut rows: Vec<(&[u8], Total)> = elems
        .iter()
        .map(|e| (e.key.as_slice(), total(agg, &e.values)))
        .filter(|(_, t)| match t {
            Total::Int(v) => v.is_some(),
            Total::Mean { count, .. } => *count > 0,
        })
        .collect();
    // A map without keys lives in an array, which always has its element: a sum nothing was
    // added to was never set. A count without keys is printed even at 0, as bpftrace does.
    if m.key.is_empty() && agg == Agg::Sum {
        rows.retain(|(_, t)| *t != Total::Int(Some(0)));
    }
    rows.sort_by(|a, b| a.0.cmp(b.0));
    rows.sort_by_key(|r| match r.1 {
        Total::Int(v) => v.unwrap_or(0),
        Total::Mean { sum, count } => mean(sum, count),
    });
    rows
}

/// One map's text, as bpftrace prints it when the program ends or on `print(@m)`.
/// A map without elements is an empty line (and avg's and stats' blank line after it).
pub fn map_text(m: &UserMap, elems: &[Element], n: &dyn Names) -> String {
    let mut out = String::new();
    match &m.value {
        MapValue::Agg(agg) if agg.is_hist() => {
            let rows = hist_rows(*agg, m, elems);
            if rows.is_empty() {
                out.push('\n');
            }
            for (key, counts) in rows {
                let _ = writeln!(out, "@{}{}: ", m.name, key_text(m, &key, n));
                hist_text(*agg, &counts, &mut out);
                out.push('\n');
            }
        }
        MapValue::Agg(agg) => {
            let rows = agg_rows(*agg, m, elems);
            if rows.is_empty() {
                out.push('\n');
            }
            for (key, t) in &rows {
                let k = key_text(m, key, n);
                let v = match (agg, t) {
                    (Agg::Count, Total::Int(Some(v))) => (*v as u64).to_string(),
                    (_, Total::Int(v)) => v.unwrap_or(0).to_string(),
                    (Agg::Stats, Total::Mean { sum, count }) => {
                        format!("count {count}, average {}, total {sum}", mean(*sum, *count))
                    }
                    (_, Total::Mean { sum, count }) => mean(*sum, *count).to_string(),
                };
                let _ = writeln!(out, "@{}{k}: {v}", m.name);
            }
            if matches!(agg, Agg::Avg | Agg::Stats) {
                out.push('\n');
            }
        }
        MapValue::Plain(t) => {
            let ks = m.key_size();
            if elems.is_empty() {
                out.push('\n');
            }
            let mut rows: Vec<&Element> = elems.iter().collect();
            if t.is_int() {
                rows.sort_by(|a, b| a.key.cmp(&b.key));
                rows.sort_by_key(|e| u64_at(&e.values[0], 0) as i64);
            } else {
                rows.sort_by(|a, b| a.key.cmp(&b.key));
            }
            for e in rows {
                let k = key_text(m, &e.key[..ks.min(e.key.len())], n);
                let _ = writeln!(out, "@{}{k}: {}", m.name, value_text(t, &e.values[0], n));
            }
        }
    }
    out
}

/// A key as `-f json` writes it: the parts joined by commas.
fn json_key(m: &UserMap, key: &[u8], n: &dyn Names) -> String {
    json_string(&key_parts(m, key, n).join(","))
}

/// One map as bpftrace's `-f json` line: `{"type": "map", "data": {"@x": ...}}`.
pub fn map_json(m: &UserMap, elems: &[Element], n: &dyn Names) -> String {
    let (kind, entries): (&str, Vec<(String, String)>) = match &m.value {
        MapValue::Agg(agg) if agg.is_hist() => (
            "hist",
            hist_rows(*agg, m, elems)
                .into_iter()
                .map(|(key, counts)| (json_key(m, &key, n), hist_json(*agg, &counts)))
                .collect(),
        ),
        MapValue::Agg(agg) => {
            let rows: Vec<(String, Total)> =
                agg_rows(*agg, m, elems).into_iter().map(|(k, t)| (json_key(m, k, n), t)).collect();
            let kind = if matches!(agg, Agg::Avg | Agg::Stats) { "stats" } else { "map" };
            let rows = rows
                .into_iter()
                .map(|(k, t)| {
                    let v = match (agg, t) {
                        (Agg::Stats, Total::Mean { sum, count }) => format!(
                            "{{\"count\": {count}, \"average\": {}, \"total\": {sum}}}",
                            mean(sum, count)
                        ),
                        (_, Total::Mean { sum, count }) => mean(sum, count).to_string(),
                        (Agg::Count, Total::Int(v)) => (v.unwrap_or(0) as u64).to_string(),
                        (_, Total::Int(v)) => v.unwrap_or(0).to_string(),
                    };
                    (k, v)
                })
                .collect();
            (kind, rows)
        }
        MapValue::Plain(t) => (
            "map",
            elems
                .iter()
                .map(|e| {
                    let v = if t.is_int() {
                        value_text(t, &e.values[0], n)
                    } else {
                        json_string(&value_text(t, &e.values[0], n))
                    };
                    (json_key(m, &e.key[..m.key_size().min(e.key.len())], n), v)
                })
                .collect(),
        ),
    };
    let data = if m.key.is_empty() {
        entries.into_iter().next().map(|(_, v)| v).unwrap_or_else(|| "null".into())
    } else {
        let inner: Vec<String> = entries.into_iter().map(|(k, v)| format!("{k}: {v}")).collect();
        format!("{{{}}}", inner.join(", "))
    };
    format!(
        "{{\"type\": \"{kind}\", \"data\": {{{}: {data}}}}}",
        json_string(&format!("@{}", m.name))
    )
}

fn hist_json(agg: Agg, counts: &[u64]) -> String {
    let Some(first) = counts.iter().position(|&c| c > 0) else { return "[]".into() };
    let last = counts.iter().rposition(|&c| c > 0).unwrap_or(first);
    let rows: Vec<String> = (first..=last)
        .map(|i| {
            let (_, lo, hi) = bucket(agg, i);
            let mut parts = Vec::new();
            if let Some(lo) = lo {
                parts.push(format!("\"min\": {lo}"));
            }
            if let Some(hi) = hi {
                parts.push(format!("\"max\": {hi}"));
            }
            parts.push(format!("\"count\": {}", counts[i]));
            format!("{{{}}}", parts.join(", "))
        })
        .collect();
    format!("[{}]", rows.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct NoNames;
    impl Names for NoNames {
        fn probe(&self, id: u64) -> String {
            format!("probe{id}")
        }
        fn kstack(&self, _: i64) -> Vec<String> {
            Vec::new()
        }
        fn ustack(&self, _: i64, _: u32) -> Vec<String> {
            Vec::new()
        }
        fn ksym(&self, a: u64) -> String {
            a.to_string()
        }
        fn usym(&self, a: u64, _: u32) -> String {
            a.to_string()
        }
    }

    fn hist_elems(values: &[i64], agg: Agg) -> Vec<Element> {
        let mut counts = vec![0u64; agg.buckets()];
        for &v in values {
            let b = match agg {
                Agg::Lhist { min, max, step } => {
                    if v < min {
                        0
                    } else if v >= max {
                        ((max - min) / step + 1) as usize
                    } else {
                        ((v - min) / step + 1) as usize
                    }
                }
                _ => match v {
                    v if v < 0 => 0,
                    0 => 1,
                    v => 2 + (63 - (v as u64).leading_zeros()) as usize,
                },
            };
            counts[b] += 1;
        }
        counts
            .iter()
            .map(|&c| Element { key: Vec::new(), values: vec![c.to_le_bytes().to_vec()] })
            .collect()
    }

    /// The same histograms bpftrace 0.17 printed (BEGIN { @h = hist(1); ... } above).
    #[test]
    fn hist_like_bpftrace() {
        let m = UserMap {
            name: "h".into(),
            key: vec![],
            value: MapValue::Agg(Agg::Hist),
            map: 0,
            cache: None,
        };
        let text = map_text(&m, &hist_elems(&[1, 2, 2, 2, -5, 1 << 20], Agg::Hist), &NoNames);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "@h: ");
        assert_eq!(
            lines[1],
            "(..., 0)               1 |@@@@@@@@@@@@@@@@@                                   |"
        );
        assert_eq!(
            lines[4],
            "[2, 4)                 3 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|"
        );
        assert_eq!(
            lines[13],
            "[1K, 2K)               0 |                                                    |"
        );
        assert_eq!(
            lines[23],
            "[1M, 2M)               1 |@@@@@@@@@@@@@@@@@                                   |"
        );
        assert_eq!(lines[24], "");
        let l = Agg::Lhist { min: 0, max: 8192, step: 1024 };
        let m =
            UserMap { name: "l".into(), key: vec![], value: MapValue::Agg(l), map: 0, cache: None };
        let text = map_text(&m, &hist_elems(&[2048, 5000, -1, 9000], l), &NoNames);
        assert!(text.contains("\n[2K, 3K)               1 |"), "{text}");
        assert!(text.contains("\n[8K, ...)              1 |"), "{text}");
        assert!(text.starts_with("@l: \n(..., 0)               1 |"), "{text}");
        let json = map_json(&m, &hist_elems(&[2048, -1, 9000], l), &NoNames);
        assert!(json.starts_with("{\"type\": \"hist\", \"data\": {\"@l\": [{\"max\": -1, \"count\": 1}, {\"min\": 0, \"max\": 1023, \"count\": 0}"), "{json}");
        assert!(json.ends_with("{\"min\": 8192, \"count\": 1}]}}"), "{json}");
    }

    #[test]
    fn counts_sorted_by_value() {
        let key = |s: &str| {
            let mut k = s.as_bytes().to_vec();
            k.resize(16, 0);
            k
        };
        let m = UserMap {
            name: "".into(),
            key: vec![Ty::Str(16)],
            value: MapValue::Agg(Agg::Count),
            map: 0,
            cache: None,
        };
        let e = |k: &str, per_cpu: &[u64]| Element {
            key: key(k),
            values: per_cpu.iter().map(|v| v.to_le_bytes().to_vec()).collect(),
        };
        let text =
            map_text(&m, &[e("bash", &[2, 3]), e("sshd", &[1, 0]), e("cat", &[0, 9])], &NoNames);
        assert_eq!(text, "@[sshd]: 1\n@[bash]: 5\n@[cat]: 9\n");
        let json = map_json(&m, &[e("bash", &[2, 3]), e("sshd", &[1, 0])], &NoNames);
        assert_eq!(json, "{\"type\": \"map\", \"data\": {\"@\": {\"sshd\": 1, \"bash\": 5}}}");
    }

    #[test]
    fn stats_and_avg_end_with_a_blank_line() {
        let m = UserMap {
            name: "s".into(),
            key: vec![INT],
            value: MapValue::Agg(Agg::Stats),
            map: 0,
            cache: None,
        };
        let v = |s: i64, c: u64| [s.to_le_bytes(), c.to_le_bytes()].concat();
        let e = |k: i64, s, c| Element { key: k.to_le_bytes().to_vec(), values: vec![v(s, c)] };
        assert_eq!(
            map_text(&m, &[e(6, 100, 1), e(5, 1, 1)], &NoNames),
            "@s[5]: count 1, average 1, total 1\n@s[6]: count 1, average 100, total 100\n\n"
        );
    }
}
