//! Tracefs instances: a private ring buffer with its own events, filters, pids, clock and
//! options. tp records into `instances/tp-<pid>` and removes it when done; an instance whose
//! process died without removing it is "stale" and [`crate::stale::remove_stale`] removes it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::control::{self, Piece};
use crate::error::{Error, Result};
use crate::events::EventId;
use crate::sys;
use crate::tracefs::{cpus_in, parse_trace_clock, CpuStats, Tracefs};

/// Prefix of every instance tp creates.
pub const INSTANCE_PREFIX: &str = "tp-";

static SEQ: AtomicU32 = AtomicU32::new(0);

/// A tracefs buffer: a private instance tp created (removed on drop), an existing named
/// instance (`-B NAME`), or the top-level buffer. For buffers tp did not create, every setting
/// changed through this type is restored on drop.
#[derive(Debug)]
pub struct Instance {
    tfs: Tracefs,
    name: String,
    dir: PathBuf,
    owned: bool,
    removed: bool,
    /// For buffers tp does not own: (file, original content) to write back on drop, in
    /// the order they were first changed.
    saved: Mutex<Vec<(PathBuf, String)>>,
}

impl Instance {
    /// Create a private instance `instances/tp-<pid>` (`tp-<pid>-<n>` for the second and
    /// later ones of this process). It is removed when dropped.
    pub fn create(tfs: &Tracefs) -> Result<Instance> {
        let pid = sys::getpid();
        loop {
            let n = SEQ.fetch_add(1, Ordering::Relaxed);
            let name = if n == 0 {
                format!("{INSTANCE_PREFIX}{pid}")
            } else {
                format!("{INSTANCE_PREFIX}{pid}-{n}")
            };
            match Instance::create_named(tfs, &name) {
                Err(e) if e.errno() == Some(libc::EEXIST) => continue,
                r => return r,
            }
        }
    }

    /// Create a private instance with a given name (removed when dropped).
    pub fn create_named(tfs: &Tracefs, name: &str) -> Result<Instance> {
        let dir = tfs.path("instances").join(name);
        sys::mkdir(&dir)?;
        Ok(Instance {
            tfs: tfs.clone(),
            name: name.to_string(),
            dir,
            owned: true,
            removed: false,
            saved: Mutex::new(Vec::new()),
        })
    }

    /// Use an existing instance (`-B NAME`); settings changed through it are restored on drop.
    pub fn open(tfs: &Tracefs, name: &str) -> Result<Instance> {
        let dir = tfs.path("instances").join(name);
        if !sys::exists(&dir) {
            return Err(Error::Other(format!("no instance {name:?} at {}", dir.display())));
        }
        Ok(Instance {
            tfs: tfs.clone(),
            name: name.to_string(),
            dir,
            owned: false,
            removed: false,
            saved: Mutex::new(Vec::new()),
        })
    }

    /// The top-level buffer; settings changed through it are restored on drop.
    pub fn top(tfs: &Tracefs) -> Instance {
        Instance {
            tfs: tfs.clone(),
            name: String::new(),
            dir: tfs.root().to_path_buf(),
            owned: false,
            removed: false,
            saved: Mutex::new(Vec::new()),
        }
    }

    pub fn tracefs(&self) -> &Tracefs {
        &self.tfs
    }

    /// The instance name (empty for the top-level buffer).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The instance directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// True for instances this value created (and will remove).
    pub fn is_owned(&self) -> bool {
        self.owned
    }

    /// `dir/rel`.
    pub fn file(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }

    /// Read a file of this instance.
    pub fn read(&self, rel: &str) -> Result<String> {
        sys::read_string(&self.file(rel))
    }

    /// Write a file of this instance (remembering its old content for non-owned buffers).
    pub fn write(&self, rel: &str, value: &str) -> Result<()> {
        let p = self.file(rel);
        self.remember(&p);
        sys::write_file(&p, value.as_bytes())
    }

    fn remember(&self, p: &Path) {
        if self.owned {
            return;
        }
        let mut saved = self.saved.lock().unwrap_or_else(|e| e.into_inner());
        if saved.iter().any(|(q, _)| q == p) {
            return;
        }
        if let Ok(old) = sys::read_string(p) {
            saved.push((p.to_path_buf(), old));
        }
    }

    // ---- events -------------------------------------------------------------------------

    /// `events/SYS/NAME/FILE`, the system and name checked to be directory names.
    fn event_file(&self, ev: &EventId, file: &str) -> Result<String> {
        control::check(Piece::EventDir, &ev.system)?;
        control::check(Piece::EventDir, &ev.name)?;
        Ok(format!("events/{}/{}/{file}", ev.system, ev.name))
    }

    /// Enable one event in this buffer.
    pub fn enable(&self, ev: &EventId) -> Result<()> {
        self.write(&self.event_file(ev, "enable")?, "1")
    }

    /// Disable one event in this buffer.
    pub fn disable(&self, ev: &EventId) -> Result<()> {
        self.write(&self.event_file(ev, "enable")?, "0")
    }

    /// Enable every event in `events`.
    pub fn enable_all(&self, events: &[EventId]) -> Result<()> {
        events.iter().try_for_each(|e| self.enable(e))
    }

    /// Enable every event of the kernel at once (`events/enable`).
    pub fn enable_everything(&self) -> Result<()> {
        self.write("events/enable", "1")
    }

    /// Disable every event in this buffer (`events/enable` = 0).
    pub fn disable_all(&self) -> Result<()> {
        self.write("events/enable", "0")
    }

    /// The events enabled in this buffer (from its `set_event`).
    pub fn enabled_events(&self) -> Result<Vec<EventId>> {
        Ok(self.read("set_event")?.lines().filter_map(|l| EventId::parse(l.trim())).collect())
    }

    /// Set an event's filter in the kernel's filter syntax. When the kernel rejects it, the
    /// error carries the message of this buffer's `error_log` (or the top-level one).
    pub fn set_filter(&self, ev: &EventId, filter: &str) -> Result<()> {
        control::check(Piece::Filter, filter)?;
        match self.write(&self.event_file(ev, "filter")?, filter) {
            Ok(()) => Ok(()),
            Err(e) if e.errno() == Some(libc::EINVAL) || e.errno() == Some(libc::ENOENT) => {
                let message = self.last_error_log().unwrap_or_default();
                Err(Error::Filter { event: ev.to_string(), filter: filter.to_string(), message })
            }
            Err(e) => Err(e),
        }
    }

    /// Add a trigger to an event (`events/SYS/NAME/trigger`), in the kernel's syntax:
    /// `stacktrace`, `stacktrace if prev_state == 2`. When the kernel rejects it, the error
    /// carries its `error_log` message. On a buffer tp does not own, the triggers it added
    /// are removed on drop (`!COMMAND`).
    pub fn add_trigger(&self, ev: &EventId, trigger: &str) -> Result<()> {
        control::check(Piece::Trigger, trigger)?;
        match self.write(&self.event_file(ev, "trigger")?, trigger) {
            Ok(()) => Ok(()),
            Err(e) if matches!(e.errno(), Some(libc::EINVAL | libc::ENOENT | libc::EEXIST)) => {
                let mut message = self.last_error_log().unwrap_or_default();
                if e.errno() == Some(libc::EEXIST) {
                    message = "the event already has a trigger of this kind".to_string();
                }
                Err(Error::Trigger { event: ev.to_string(), trigger: trigger.to_string(), message })
            }
            Err(e) => Err(e),
        }
    }

    /// The triggers set on an event, one per line as the kernel lists them
    /// (`stacktrace:unlimited if common_pid > 0`).
    pub fn triggers(&self, ev: &EventId) -> Result<Vec<String>> {
        Ok(trigger_lines(&self.read(&self.event_file(ev, "trigger")?)?))
    }

    /// Remove an event's filter.
    pub fn clear_filter(&self, ev: &EventId) -> Result<()> {
        self.write(&self.event_file(ev, "filter")?, "0")
    }

    /// The current filter text of an event (`none` when unfiltered).
    pub fn filter(&self, ev: &EventId) -> Result<String> {
        Ok(self.read(&self.event_file(ev, "filter")?)?.trim_end().to_string())
    }

    /// The last entry of this buffer's `error_log` (falling back to the top-level one).
    pub fn last_error_log(&self) -> Option<String> {
        let own = self.read("error_log").ok().and_then(|t| last_entry(&t));
        own.or_else(|| self.tfs.read("error_log").ok().and_then(|t| last_entry(&t)))
    }

    // ---- pids ---------------------------------------------------------------------------

    /// Trace only these pids (`set_event_pid`); empty clears it.
    pub fn set_event_pids(&self, pids: &[i32]) -> Result<()> {
        let s: Vec<String> = pids.iter().map(|p| p.to_string()).collect();
        let s = s.join(" ");
        self.write("set_event_pid", if s.is_empty() { "" } else { &s })
    }

    /// Never trace these pids (`set_event_notrace_pid`), e.g. the recorder's own threads.
    pub fn set_event_notrace_pids(&self, pids: &[i32]) -> Result<()> {
        let s: Vec<String> = pids.iter().map(|p| p.to_string()).collect();
        self.write("set_event_notrace_pid", &s.join(" "))
    }

    /// Also trace the children of traced pids (`options/event-fork`).
    pub fn set_event_fork(&self, on: bool) -> Result<()> {
        self.set_option("event-fork", on)
    }

    // ---- options and settings -----------------------------------------------------------

    /// Set `options/NAME` (e.g. `record-tgid`, `hash-ptr`, `overwrite`).
    pub fn set_option(&self, name: &str, on: bool) -> Result<()> {
        self.write(&format!("options/{name}"), if on { "1" } else { "0" })
    }

    /// Read `options/NAME`.
    pub fn option(&self, name: &str) -> Result<bool> {
        Ok(self.read(&format!("options/{name}"))?.trim() == "1")
    }

    /// Per-CPU buffer size in KiB.
    pub fn set_buffer_size_kb(&self, kb: u64) -> Result<()> {
        self.write("buffer_size_kb", &kb.to_string())
    }

    /// Per-CPU buffer size in KiB (the kernel may print `7 (expanded: 1408)`).
    pub fn buffer_size_kb(&self) -> Result<u64> {
        let t = self.read("buffer_size_kb")?;
        let t = t.trim();
        let n = t.split_whitespace().next().unwrap_or("");
        let expanded = t
            .split("expanded:")
            .nth(1)
            .and_then(|s| s.trim().trim_end_matches(')').trim().parse().ok());
        expanded.or_else(|| n.parse().ok()).ok_or_else(|| Error::Parse {
            path: self.file("buffer_size_kb"),
            message: format!("not a size: {t:?}"),
        })
    }

    /// Select the trace clock (`local`, `global`, `mono`, `mono_raw`, `boot`, `x86-tsc`, ...).
    pub fn set_clock(&self, clock: &str) -> Result<()> {
        let (_, all) = parse_trace_clock(&self.read("trace_clock")?);
        if !all.iter().any(|c| c == clock) {
            return Err(Error::Other(format!(
                "unknown trace clock {clock:?}; this kernel has: {}",
                all.join(" ")
            )));
        }
        self.write("trace_clock", clock)
    }

    /// The selected trace clock.
    pub fn clock(&self) -> Result<String> {
        Ok(parse_trace_clock(&self.read("trace_clock")?).0)
    }

    /// The raw `trace_clock` text (`[local] global ...`), as trace.dat stores it.
    pub fn clock_text(&self) -> Result<String> {
        self.read("trace_clock")
    }

    /// Turn recording into this buffer on or off.
    pub fn set_tracing_on(&self, on: bool) -> Result<()> {
        self.write("tracing_on", if on { "1" } else { "0" })
    }

    pub fn tracing_on(&self) -> Result<bool> {
        Ok(self.read("tracing_on")?.trim() == "1")
    }

    /// Wake blocked readers when the buffer is this full (percent; 0 = on every event).
    pub fn set_buffer_percent(&self, pct: u32) -> Result<()> {
        self.write("buffer_percent", &pct.to_string())
    }

    /// The buffer's text as the kernel renders it (`trace`; a non-consuming read).
    pub fn trace_text(&self) -> Result<String> {
        self.read("trace")
    }

    /// Empty the buffer.
    pub fn clear(&self) -> Result<()> {
        self.write("trace", "")
    }

    /// CPUs with a `per_cpu/cpuN` directory.
    pub fn cpus(&self) -> Result<Vec<u32>> {
        cpus_in(&self.file("per_cpu"))
    }

    /// `per_cpu/cpuN/stats`.
    pub fn stats(&self, cpu: u32) -> Result<CpuStats> {
        Ok(CpuStats::parse(cpu, &self.read(&format!("per_cpu/cpu{cpu}/stats"))?))
    }

    /// Stats of every CPU.
    pub fn all_stats(&self) -> Result<Vec<CpuStats>> {
        self.cpus()?.into_iter().map(|c| self.stats(c)).collect()
    }

    /// `per_cpu/cpuN/trace_pipe_raw`.
    pub fn raw_path(&self, cpu: u32) -> PathBuf {
        self.file(&format!("per_cpu/cpu{cpu}/trace_pipe_raw"))
    }

    // ---- removal ------------------------------------------------------------------------

    /// Remove the instance now (owned) or restore the settings changed (not owned),
    /// reporting failure instead of ignoring it as `Drop` must.
    pub fn remove(mut self) -> Result<()> {
        self.cleanup()
    }

    fn cleanup(&mut self) -> Result<()> {
        if self.removed {
            return Ok(());
        }
        self.removed = true;
        if self.owned {
            // Stop writers and drop event references so rmdir does not see a busy buffer.
            let _ = sys::write_file(&self.file("tracing_on"), b"0");
            let _ = sys::write_file(&self.file("set_event"), b"");
            let _ = sys::write_file(&self.file("set_event_pid"), b"");
            let _ = sys::write_file(&self.file("set_event_notrace_pid"), b"");
            rmdir_retry(&self.dir)
        } else {
            let saved = std::mem::take(&mut *self.saved.lock().unwrap_or_else(|e| e.into_inner()));
            let mut first_err = None;
            for (p, old) in saved.into_iter().rev() {
                if let Err(e) = restore_file(&p, &old) {
                    first_err.get_or_insert(e);
                }
            }
            first_err.map_or(Ok(()), Err)
        }
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        if let Err(e) = self.cleanup() {
            eprintln!("tp: cleaning up tracefs instance {}: {e}", self.dir.display());
        }
    }
}

/// Write back a file's old content in the form the kernel accepts.
fn restore_file(p: &Path, old: &str) -> Result<()> {
    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let value = match name {
        "trace_clock" => parse_trace_clock(old).0,
        "buffer_size_kb" => {
            let t = old.trim();
            let exp = t
                .split("expanded:")
                .nth(1)
                .map(|s| s.trim().trim_end_matches(')').trim().to_string());
            exp.unwrap_or_else(|| t.split_whitespace().next().unwrap_or("").to_string())
        }
        "filter" => {
            if old.trim() == "none" {
                "0".to_string()
            } else {
                old.trim().to_string()
            }
        }
        "trigger" => {
            // Triggers are added one per write and removed by `!COMMAND`: remove those
            // not there before.
            let before = trigger_lines(old);
            for t in trigger_lines(&sys::read_string(p)?) {
                if !before.contains(&t) {
                    let cmd = t.split([':', ' ']).next().unwrap_or("");
                    sys::write_file(p, format!("!{cmd}").as_bytes())?;
                }
            }
            return Ok(());
        }
        "set_event" => {
            // Clear, then append each original line.
            sys::write_file(p, b"")?;
            for l in old.lines().filter(|l| !l.trim().is_empty()) {
                sys::append_file(p, l.trim().as_bytes())?;
            }
            return Ok(());
        }
        "enable" => old
            .trim()
            .chars()
            .next()
            .map(|c| if c == '1' { "1" } else { "0" })
            .unwrap_or("0")
            .to_string(),
        _ => old.trim().to_string(),
    };
    if name == "enable" && p.parent().and_then(|d| d.file_name()).is_some_and(|d| d == "events") {
        // events/enable prints X for mixed state; the per-event files restore the details.
        if old.trim() == "X" {
            return Ok(());
        }
    }
    sys::write_file(p, value.as_bytes())
}

fn rmdir_retry(dir: &Path) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        match sys::rmdir(dir) {
            Ok(()) => return Ok(()),
            // ENODEV: another process (a second tp removing the same stale instance) is
            // removing it right now; either way it is gone.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENODEV)) => {
                return Ok(())
            }
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                if Instant::now() >= deadline {
                    return Err(Error::Busy { path: dir.to_path_buf() });
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(Error::sys("rmdir", dir, e)),
        }
    }
}

/// The triggers of a `trigger` file's text (its `#` lines list the available ones).
fn trigger_lines(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect()
}

/// The last entry of an `error_log` text: from its last `[timestamp]` line to the end.
fn last_entry(text: &str) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.iter().rposition(|l| l.trim_start().starts_with('['))?;
    Some(lines[start..].join("\n"))
}

/// The pid in an instance name `tp-<pid>` or `tp-<pid>-<n>`.
pub fn instance_pid(name: &str) -> Option<i32> {
    let rest = name.strip_prefix(INSTANCE_PREFIX)?;
    let pid = rest.split('-').next()?;
    let rest_ok =
        rest.split('-').skip(1).all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    if !rest_ok || pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok()
}

/// Stop an instance's tracing, drop its events and remove it (a dead tp's, by its path).
pub fn remove_instance_dir(dir: &Path) -> Result<()> {
    let _ = sys::write_file(&dir.join("tracing_on"), b"0");
    let _ = sys::write_file(&dir.join("set_event"), b"");
    rmdir_retry(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(instance_pid("tp-123"), Some(123));
        assert_eq!(instance_pid("tp-123-4"), Some(123));
        assert_eq!(instance_pid("tp-abc"), None);
        assert_eq!(instance_pid("tp-12-x"), None);
        assert_eq!(instance_pid("foo"), None);
    }

    #[test]
    fn error_log_last_entry() {
        let t = "[  1.0] event filter parse error: error: Field not found\n  Command: x == 1\n            ^\n[  2.0] event filter parse error: error: Invalid operator\n  Command: pid >< 1\n               ^\n";
        let e = last_entry(t).unwrap();
        assert!(e.starts_with("[  2.0]"));
        assert!(e.contains("Invalid operator"));
    }
}
