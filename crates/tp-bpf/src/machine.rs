//! The running machine as attach points see it: tracefs for tracepoints and their formats,
//! the kernel's BTF for raw tracepoints' arguments.

use tp_format::format::EventFormat;
use tp_tracefs::{EventId, Tracefs};

use crate::btf::Btf;
use crate::error::{Error, Result};
use crate::probes::{Machine, RawArg};

/// [`Machine`] on this kernel.
pub struct System {
    tracefs: Option<Tracefs>,
    btf: Option<Option<Btf>>,
}

impl Default for System {
    fn default() -> Self {
        Self::new()
    }
}

impl System {
    pub fn new() -> System {
        System { tracefs: None, btf: None }
    }

    fn tracefs(&mut self) -> Result<&Tracefs> {
        if self.tracefs.is_none() {
            self.tracefs = Some(Tracefs::discover().map_err(|e| Error::Machine(e.to_string()))?);
        }
        Ok(self.tracefs.as_ref().expect("just set"))
    }

    /// Every probe matching `KIND:REST` (globs in both; KIND `*` or missing: every kind), as
    /// `-l` lists them: `tracepoint:SYS:EVENT`, `rawtracepoint:EVENT` (every tracepoint has
    /// one), `software:NAME:`.
    pub fn list(&mut self, pattern: &str) -> Result<Vec<String>> {
        let (kind, rest) = pattern.split_once(':').unwrap_or(("*", pattern));
        let kind = match kind {
            "t" => "tracepoint",
            "rt" => "rawtracepoint",
            "s" => "software",
            k => k,
        };
        let want = |k: &str| tp_format::glob::glob_match(kind, k);
        let mut out = Vec::new();
        if want("software") {
            let name = rest.split(':').next().unwrap_or("*");
            out.extend(
                crate::probes::software_names()
                    .filter(|n| tp_format::glob::glob_match(name, n))
                    .map(|n| format!("software:{n}:")),
            );
        }
        if want("tracepoint") || want("rawtracepoint") {
            let t = self.tracefs()?.clone();
            let all = t.available_events().map_err(|e| Error::Machine(e.to_string()))?;
            if want("tracepoint") {
                let glob = if rest.contains(':') { rest.to_string() } else { format!("{rest}:*") };
                out.extend(
                    tp_tracefs::match_glob(&all, &glob)
                        .into_iter()
                        .map(|e| format!("tracepoint:{}:{}", e.system, e.name)),
                );
            }
            if want("rawtracepoint") {
                let mut names: Vec<&str> = all
                    .iter()
                    .filter(|e| tp_format::glob::glob_match(rest, &e.name))
                    .map(|e| e.name.as_str())
                    .collect();
                names.sort_unstable();
                names.dedup();
                out.extend(names.into_iter().map(|n| format!("rawtracepoint:{n}")));
            }
        }
        Ok(out)
    }
}

fn has_glob(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

impl Machine for System {
    fn tracepoints(&mut self, system: &str, event: &str) -> Result<Vec<(String, String)>> {
        let t = self.tracefs()?.clone();
        if !has_glob(system) && !has_glob(event) {
            // One event: no need to read the list of all of them.
            let exists = t.path(&format!("events/{system}/{event}/format")).exists();
            return Ok(if exists { vec![(system.into(), event.into())] } else { Vec::new() });
        }
        let all = t.available_events().map_err(|e| Error::Machine(e.to_string()))?;
        let found = tp_tracefs::match_glob(&all, &format!("{system}:{event}"));
        Ok(found.into_iter().map(|e| (e.system.clone(), e.name.clone())).collect())
    }

    fn format(&mut self, system: &str, event: &str) -> Result<EventFormat> {
        let t = self.tracefs()?.clone();
        t.event_format(&EventId::new(system, event)).map_err(|e| Error::Machine(e.to_string()))
    }

    fn raw_tracepoint_args(&mut self, name: &str) -> Option<Vec<RawArg>> {
        if self.btf.is_none() {
            self.btf = Some(std::fs::read("/sys/kernel/btf/vmlinux").ok().and_then(Btf::parse));
        }
        self.btf.as_ref()?.as_ref()?.raw_tracepoint_args(name)
    }
}
