//! Attach points: their spelling (`t:sched:sched_wak*`, `interval:ms:100`, `BEGIN`, ...),
//! parsed without the machine, then resolved against it through [`Machine`] (tracefs format
//! files, BTF), one [`Attach`] per event a wildcard matches.

use tp_format::format::EventFormat;

use crate::error::{Error, Result};

/// A raw tracepoint's argument that a format field can be read from instead (BTF names the
/// tracepoint's arguments; `ret` of `sys_exit` is its argument `ret`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawArg {
    pub name: String,
    /// Integer size in bytes (1, 2, 4, 8) and sign; `None` for pointers and structs.
    pub int: Option<(usize, bool)>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    Begin,
    End,
    /// A tracefs event through perf_event_open; `raw_args`: its raw tracepoint's arguments
    /// when BTF has them (the compiler then attaches the raw tracepoint where it can).
    Tracepoint {
        format: Box<EventFormat>,
        raw_args: Option<Vec<RawArg>>,
    },
    /// `rawtracepoint:NAME`: the tracepoint's C arguments as `arg0..`.
    RawTracepoint {
        name: String,
        args: Vec<RawArg>,
    },
    /// `profile:hz:N` (every CPU) and `interval:UNIT:N` (one CPU): cpu-clock timers.
    Profile {
        period_ns: u64,
    },
    Interval {
        period_ns: u64,
    },
    /// `software:EVENT:PERIOD` (perf's software events).
    Software {
        config: u64,
        period: u64,
    },
}

/// One event a program is attached to.
#[derive(Debug, Clone, PartialEq)]
pub struct Attach {
    /// The name `probe` gives (`tracepoint:sched:sched_switch`).
    pub name: String,
    pub kind: Kind,
}

/// What resolving attach points needs from the machine.
pub trait Machine {
    /// Tracepoints matching `system_glob:event_glob`, as `(system, event)`.
    fn tracepoints(&mut self, system: &str, event: &str) -> Result<Vec<(String, String)>>;
    fn format(&mut self, system: &str, event: &str) -> Result<EventFormat>;
    /// The raw tracepoint's arguments after the first (`void *__data`), from BTF.
    fn raw_tracepoint_args(&mut self, name: &str) -> Option<Vec<RawArg>>;
}

/// perf's software events by bpftrace's names (PERF_COUNT_SW_*) and their default periods.
const SOFTWARE: [(&str, &str, u64, u64); 10] = [
    ("cpu-clock", "cpu", 0, 1_000_000),
    ("task-clock", "", 1, 1_000_000),
    ("page-faults", "faults", 2, 100),
    ("context-switches", "cs", 3, 1000),
    ("cpu-migrations", "", 4, 1),
    ("minor-faults", "", 5, 100),
    ("major-faults", "", 6, 1),
    ("alignment-faults", "", 7, 1),
    ("emulation-faults", "", 8, 1),
    ("dummy", "", 9, 1),
];

/// The software events' names, as `-l` lists them.
pub fn software_names() -> impl Iterator<Item = &'static str> {
    SOFTWARE.iter().map(|s| s.0)
}

fn unit_ns(spec: &str, unit: &str) -> Result<u64> {
    Ok(match unit {
        "s" => 1_000_000_000,
        "ms" => 1_000_000,
        "us" => 1_000,
        "ns" => 1,
        _ => return Err(Error::probe(spec, format!("unknown unit `{unit}` (s, ms, us, ns, hz)"))),
    })
}

fn number(spec: &str, s: &str) -> Result<u64> {
    s.parse::<u64>()
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| Error::probe(spec, format!("`{s}` is not a positive number")))
}

/// Resolve one attach point into the events it names.
pub fn resolve(spec: &str, m: &mut dyn Machine) -> Result<Vec<Attach>> {
    let parts: Vec<&str> = spec.split(':').collect();
    let one = |kind| Ok(vec![Attach { name: canonical(spec, &parts), kind }]);
    match parts[0] {
        "BEGIN" if parts.len() == 1 => one(Kind::Begin),
        "END" if parts.len() == 1 => one(Kind::End),
        "tracepoint" | "t" => {
            let (sys, ev) = match parts.len() {
                3 => (parts[1], parts[2]),
                _ => return Err(Error::probe(spec, "expected tracepoint:SYSTEM:EVENT")),
            };
            let found = m.tracepoints(sys, ev)?;
            if found.is_empty() {
                return Err(Error::probe(spec, "no tracepoint matches (see `tp trace -l`)"));
            }
            let mut out = Vec::new();
            for (s, e) in found {
                let format = m.format(&s, &e)?;
                let raw_args = m.raw_tracepoint_args(&e);
                out.push(Attach {
                    name: format!("tracepoint:{s}:{e}"),
                    kind: Kind::Tracepoint { format: Box::new(format), raw_args },
                });
            }
            Ok(out)
        }
        "rawtracepoint" | "rt" => {
            let name = match parts.len() {
                2 => parts[1],
                3 => parts[2],
                _ => return Err(Error::probe(spec, "expected rawtracepoint:NAME")),
            };
            let args = m.raw_tracepoint_args(name).ok_or_else(|| {
                Error::probe(spec, format!("no raw tracepoint `{name}` in the kernel's BTF"))
            })?;
            Ok(vec![Attach {
                name: format!("rawtracepoint:{name}"),
                kind: Kind::RawTracepoint { name: name.into(), args },
            }])
        }
        "profile" | "p" | "interval" | "i" => {
            let (unit, n) = match parts.len() {
                3 => (parts[1], number(spec, parts[2])?),
                _ => return Err(Error::probe(spec, format!("expected {}:UNIT:N", parts[0]))),
            };
            let period_ns = if unit == "hz" { 1_000_000_000 / n } else { unit_ns(spec, unit)? * n };
            let kind = if parts[0].starts_with('p') {
                Kind::Profile { period_ns: period_ns.max(1) }
            } else {
                Kind::Interval { period_ns: period_ns.max(1) }
            };
            one(kind)
        }
        "software" | "s" => {
            let ev = parts.get(1).copied().unwrap_or("");
            let Some(&(_, _, config, default)) = SOFTWARE
                .iter()
                .find(|(n, alias, _, _)| *n == ev || (!alias.is_empty() && *alias == ev))
            else {
                return Err(Error::probe(spec, format!("unknown software event `{ev}`")));
            };
            let period = match parts.get(2) {
                Some(p) => number(spec, p)?,
                None => default,
            };
            one(Kind::Software { config, period })
        }
        "kprobe" | "k" | "kretprobe" | "kr" | "kfunc" | "f" | "kretfunc" | "fr" => {
            Err(Error::probe(
                spec,
                "this kernel has no kprobes (no kprobe_events in tracefs, no kprobe PMU); \
             use a tracepoint (`tp trace -l 'tracepoint:*'`)",
            ))
        }
        other => Err(Error::probe(spec, format!("unknown probe type `{other}`"))),
    }
}

/// The name `probe` returns: bpftrace's full provider names.
fn canonical(spec: &str, parts: &[&str]) -> String {
    let full = match parts[0] {
        "t" => "tracepoint",
        "rt" => "rawtracepoint",
        "p" => "profile",
        "i" => "interval",
        "s" => "software",
        _ => return spec.to_string(),
    };
    std::iter::once(full).chain(parts[1..].iter().copied()).collect::<Vec<_>>().join(":")
}
