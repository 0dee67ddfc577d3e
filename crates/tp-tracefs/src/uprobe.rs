//! Dynamic probes on user-space code: `uprobe_events` lines (`p:GRP/EVENT PATH:0xOFF[(0xREF)]
//! ARGS`, `r:` for return probes), adding and removing them, and reading why the kernel
//! rejected one (`error_log`, with its caret line). kprobes use `kprobe_events`, which a
//! kernel without CONFIG_KPROBE_EVENTS does not have ([`Tracefs::has_kprobes`]).

use std::fmt;

use crate::control::{self, Piece};
use crate::error::{Error, Result};
use crate::events::EventId;
use crate::sys;
use crate::tracefs::Tracefs;

/// Where the probe fires: at the function's entry (`p`) or at its return (`r`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeKind {
    Entry,
    Return,
}

/// One uprobe definition, as `uprobe_events` holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uprobe {
    pub kind: ProbeKind,
    pub group: String,
    pub event: String,
    /// Absolute path of the binary.
    pub path: String,
    /// File offset of the probed instruction.
    pub offset: u64,
    /// File offset of a USDT semaphore the kernel counts up while the probe is enabled.
    pub ref_ctr: Option<u64>,
    /// Fetch arguments as the kernel takes them (`arg1=%di:u64`, `+0(%si):string`).
    pub args: Vec<String>,
}

impl Uprobe {
    /// The event this probe appears as in `events/`.
    pub fn id(&self) -> EventId {
        EventId::new(&self.group, &self.event)
    }

    /// Parse one `uprobe_events` line; `None` for anything else.
    pub fn parse(line: &str) -> Option<Uprobe> {
        let mut words = line.split_whitespace();
        let head = words.next()?;
        let (kind, name) = match head.split_once(':') {
            Some(("p", n)) => (ProbeKind::Entry, n),
            Some(("r", n)) => (ProbeKind::Return, n),
            _ => return None,
        };
        let (group, event) = name.split_once('/')?;
        let target = words.next()?;
        let (path, place) = target.rsplit_once(':')?;
        let (off, ref_ctr) = match place.split_once('(') {
            Some((o, r)) => (o, Some(parse_hex(r.strip_suffix(')')?)?)),
            None => (place, None),
        };
        Some(Uprobe {
            kind,
            group: group.to_string(),
            event: event.to_string(),
            path: path.to_string(),
            offset: parse_hex(off)?,
            ref_ctr,
            args: words.map(str::to_string).collect(),
        })
    }
}

fn parse_hex(s: &str) -> Option<u64> {
    let s = s.strip_prefix("0x").unwrap_or(s);
    u64::from_str_radix(s, 16).ok()
}

/// The line written to `uprobe_events`.
impl Uprobe {
    /// Every piece checked for the grammar of `uprobe_events` (one definition a line).
    pub fn check(&self) -> Result<()> {
        control::check(Piece::ProbeGroup, &self.group)?;
        control::check(Piece::ProbeName, &self.event)?;
        control::check(Piece::ProbePath, &self.path)?;
        self.args.iter().try_for_each(|a| control::check(Piece::FetchArg, a))
    }
}

impl fmt::Display for Uprobe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let k = match self.kind {
            ProbeKind::Entry => 'p',
            ProbeKind::Return => 'r',
        };
        write!(f, "{k}:{}/{} {}:0x{:x}", self.group, self.event, self.path, self.offset)?;
        if let Some(r) = self.ref_ctr {
            write!(f, "(0x{r:x})")?;
        }
        for a in &self.args {
            write!(f, " {a}")?;
        }
        Ok(())
    }
}

impl Tracefs {
    /// The uprobes defined now, in `uprobe_events` order.
    pub fn uprobes(&self) -> Result<Vec<Uprobe>> {
        Ok(self.read("uprobe_events")?.lines().filter_map(Uprobe::parse).collect())
    }

    /// Define a uprobe. When the kernel rejects the definition the error carries its
    /// `error_log` entry (message, command and caret).
    pub fn add_uprobe(&self, p: &Uprobe) -> Result<()> {
        p.check()?;
        let def = p.to_string();
        match sys::append_file(&self.path("uprobe_events"), def.as_bytes()) {
            Ok(()) => Ok(()),
            Err(e) if e.is_not_found() && !sys::exists(&self.path("uprobe_events")) => {
                Err(Error::Other(format!(
                    "{}: this kernel has no uprobe events (CONFIG_UPROBE_EVENTS)",
                    self.path("uprobe_events").display()
                )))
            }
            Err(e) if matches!(e, Error::Sys { .. }) => {
                let message = self.read("error_log").ok().and_then(|t| last_error(&t));
                Err(Error::Probe {
                    definition: def,
                    message: message.unwrap_or_else(|| e.to_string()),
                })
            }
            Err(e) => Err(e),
        }
    }

    /// Remove the uprobe `group/event`. A probe enabled in some buffer is busy (EBUSY).
    /// EBUSY is retried for up to a second (a buffer that enables it may be going away).
    pub fn remove_uprobe(&self, group: &str, event: &str) -> Result<()> {
        control::check(Piece::ProbeGroup, group)?;
        control::check(Piece::ProbeName, event)?;
        let cmd = format!("-:{group}/{event}");
        let path = self.path("uprobe_events");
        let mut r = sys::append_file(&path, cmd.as_bytes());
        for _ in 0..50 {
            match &r {
                Err(e) if e.errno() == Some(libc::EBUSY) => {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    r = sys::append_file(&path, cmd.as_bytes());
                }
                _ => break,
            }
        }
        match r {
            Err(e) if e.errno() == Some(libc::EBUSY) => Err(Error::Other(format!(
                "cannot remove {group}:{event}: it is enabled in a tracing buffer (a recording is using it)"
            ))),
            Err(e) if e.errno() == Some(libc::ENOENT) => {
                Err(Error::Other(format!("no uprobe {group}:{event}")))
            }
            r => r,
        }
    }

    /// True when this kernel has kprobe events (`kprobe_events`).
    pub fn has_kprobes(&self) -> bool {
        sys::exists(&self.path("kprobe_events"))
    }
}

/// Where a tp process lists the probes it defined for one run: `RUN_PROBES_DIR/<pid>`, one
/// `uprobe_events` line each. A process killed before removing them leaves its file; the next
/// run removes the probes it lists ([`remove_stale_probes`]).
pub const RUN_PROBES_DIR: &str = "/run/tp/uprobes";

/// Probes defined for one run (e.g. `tp record -e sdt_app:tick`), removed when dropped and,
/// after a SIGKILL, by the next run. Drop it after the buffers that enable them are gone
/// (an enabled probe cannot be removed).
pub struct RunProbes {
    tfs: Tracefs,
    probes: Vec<Uprobe>,
    ledger: std::path::PathBuf,
}

impl RunProbes {
    pub fn new(tfs: &Tracefs) -> RunProbes {
        let ledger = std::path::Path::new(RUN_PROBES_DIR).join(sys::getpid().to_string());
        RunProbes { tfs: tfs.clone(), probes: Vec::new(), ledger }
    }

    /// Define `p`, listing it in this process's file first (so a kill right after still
    /// leaves it findable).
    pub fn add(&mut self, p: Uprobe) -> Result<()> {
        self.probes.push(p);
        self.write_ledger()?;
        if let Err(e) = self.tfs.add_uprobe(self.probes.last().expect("just pushed")) {
            self.probes.pop();
            let _ = self.write_ledger();
            return Err(e);
        }
        Ok(())
    }

    pub fn probes(&self) -> &[Uprobe] {
        &self.probes
    }

    fn write_ledger(&self) -> Result<()> {
        if self.probes.is_empty() {
            return match sys::remove_file(&self.ledger) {
                Err(e) if !e.is_not_found() => Err(e),
                _ => Ok(()),
            };
        }
        let dir = std::path::Path::new(RUN_PROBES_DIR);
        for d in [dir.parent().unwrap_or(dir), dir] {
            sys::private_dir(d)?;
        }
        let text: String = self.probes.iter().map(|p| format!("{p}\n")).collect();
        sys::write_new_file(&self.ledger, text.as_bytes())
    }

    /// Remove every probe; the first failure is returned after trying them all.
    pub fn remove(mut self) -> Result<()> {
        self.remove_all()
    }

    fn remove_all(&mut self) -> Result<()> {
        let mut first = None;
        for p in std::mem::take(&mut self.probes) {
            if let Err(e) = self.tfs.remove_uprobe(&p.group, &p.event) {
                first.get_or_insert(e);
            }
        }
        if first.is_none() {
            let _ = self.write_ledger();
        }
        first.map_or(Ok(()), Err)
    }
}

impl Drop for RunProbes {
    fn drop(&mut self) {
        if let Err(e) = self.remove_all() {
            eprintln!("tp: warning: {e}");
        }
    }
}

/// Remove the probes listed by tp processes that are gone (when the definition in
/// `uprobe_events` is still the one they made). Returns `group:event` of those removed.
/// Run it after [`crate::remove_stale`]: a stale instance may still enable them.
pub fn remove_stale_probes(tfs: &Tracefs) -> Result<Vec<String>> {
    let dir = std::path::Path::new(RUN_PROBES_DIR);
    if !sys::exists(dir) {
        return Ok(Vec::new());
    }
    let mut removed = Vec::new();
    for name in sys::list_dir(dir)? {
        // `PID`, or `PID.removing-CLAIMER` when a run that was removing them died too.
        let (pid, claimer) = match name.split_once(".removing-") {
            Some((p, c)) => (p.parse::<i32>(), c.parse::<i32>().ok()),
            None => (name.parse::<i32>(), None),
        };
        let Ok(pid) = pid else { continue };
        let alive = |p: i32| p == sys::getpid() || sys::process_alive(p);
        if alive(pid) || claimer.is_some_and(alive) {
            continue;
        }
        removed.extend(claim_and_remove(tfs, &dir.join(&name))?);
    }
    Ok(removed)
}

/// Remove the probes tp process `pid` listed, when they are still its definitions: what its
/// guard does after `pid` died (`pid` may still be a zombie then, which
/// [`remove_stale_probes`] would take for alive). Returns `group:event` of those removed.
pub fn remove_probes_of(tfs: &Tracefs, pid: i32) -> Result<Vec<String>> {
    let ledger = std::path::Path::new(RUN_PROBES_DIR).join(pid.to_string());
    if !sys::exists(&ledger) {
        return Ok(Vec::new());
    }
    claim_and_remove(tfs, &ledger)
}

/// Remove the probes a ledger lists and the ledger. It is claimed by renaming it first: of
/// several processes cleaning up together one removes them (the others could otherwise
/// remove a new run's identical probes).
fn claim_and_remove(tfs: &Tracefs, ledger: &std::path::Path) -> Result<Vec<String>> {
    let mut name = ledger.as_os_str().to_owned();
    name.push(format!(".removing-{}", sys::getpid()));
    let file = std::path::PathBuf::from(name);
    if sys::rename(ledger, &file).is_err() {
        return Ok(Vec::new());
    }
    let listed: Vec<Uprobe> = sys::read_string(&file)?.lines().filter_map(Uprobe::parse).collect();
    let now = tfs.uprobes()?;
    let mut removed = Vec::new();
    for p in listed {
        if now.iter().any(|q| same_place(q, &p)) {
            tfs.remove_uprobe(&p.group, &p.event)?;
            removed.push(format!("{}:{}", p.group, p.event));
        }
    }
    sys::remove_file(&file)?;
    Ok(removed)
}

/// The same definition (the kernel may print the arguments differently than written).
fn same_place(a: &Uprobe, b: &Uprobe) -> bool {
    (&a.group, &a.event, &a.path, a.offset, a.ref_ctr, a.kind)
        == (&b.group, &b.event, &b.path, b.offset, b.ref_ctr, b.kind)
}

/// The last `error_log` entry: its `[time] source: error: ...` line, the command and the caret.
fn last_error(text: &str) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.iter().rposition(|l| l.starts_with('['))?;
    Some(lines[start..].join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip() {
        for l in [
            "p:probe_x/f /tmp/x:0x0000000000001139 arg1=%di:u64",
            "r:probe_x/f__return /tmp/x:0x0000000000001139 ret=$retval:s32",
            "p:sdt_app/tick /tmp/a:0x0000000000001139(0x4010) arg1=%di:s32",
        ] {
            let p = Uprobe::parse(l).unwrap();
            assert_eq!(Uprobe::parse(&p.to_string()).unwrap(), p, "{l}");
        }
        let p = Uprobe::parse("p:sdt_app/tick /a:0x10(0x4010) arg1=%di:s32").unwrap();
        assert_eq!((p.offset, p.ref_ctr, p.args.len()), (0x10, Some(0x4010), 1));
        assert_eq!(p.to_string(), "p:sdt_app/tick /a:0x10(0x4010) arg1=%di:s32");
        assert!(Uprobe::parse("x:y").is_none());
    }

    #[test]
    fn error_log_entry_keeps_the_caret() {
        let t = "[ 1.0] trace_uprobe: error: Old\n  Command: a\n  ^\n[ 3737.554602] trace_uprobe: error: Invalid register name\n  Command: p:probe_tst/x /bin/true:0x10 %zz\n                                        ^\n";
        let e = last_error(t).unwrap();
        assert!(e.starts_with("[ 3737.554602] trace_uprobe: error: Invalid register name"));
        assert!(e.ends_with('^'));
    }
}
