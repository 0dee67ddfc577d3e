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

    /// Every tracepoint matching `sys:event` globs, as `tracepoint:SYS:EVENT` (for `-l`).
    pub fn list(&mut self, glob: &str) -> Result<Vec<String>> {
        let t = self.tracefs()?.clone();
        let all = t.available_events().map_err(|e| Error::Machine(e.to_string()))?;
        Ok(tp_tracefs::match_glob(&all, glob)
            .into_iter()
            .map(|e| format!("tracepoint:{}:{}", e.system, e.name))
            .collect())
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
