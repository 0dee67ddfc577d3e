//! A guard process that cleans up after tp whatever kills it (SIGKILL included).
//!
//! [`Guard::spawn`] forks a small process tied to tp by a pipe. tp registers what it leaves
//! in the system as it creates it ([`Action`]: instances, uprobe definitions, page
//! directories, temporary files) and forgets each once it has cleaned it up itself. When tp
//! ends normally it disarms the guard; when the pipe reports EOF without that (tp died), the
//! guard stops tracing in every registered instance, hands each page directory to the
//! caller's rescue function (turn it into a readable file, or remove it and say so), then
//! removes temporary files, instances and uprobe definitions, saying what it did.
//! [`Guard::spawn_holding`] forks one that also takes over what tp holds in its memory and
//! file descriptors (the perf door: the events, their rings, the output file).

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::sys;

/// Something the guard undoes if tp dies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// A private tracefs instance directory: tracing stopped first, removed last.
    Instance(PathBuf),
    /// The uprobes tp lists in its ledger (`RUN_PROBES_DIR/PID`, see [`crate::RunProbes`])
    /// in `uprobe_events` under `tracefs`: deleted after the instances are gone. Registered
    /// before the first is defined: the ledger names each before it exists, so a kill at any
    /// point leaves none behind.
    Probes { tracefs: PathBuf },
    /// A directory of recorded pages meant to become `output`: given to the rescue function.
    Pages { dir: PathBuf, output: PathBuf },
    /// A temporary file to remove (a half-written output).
    File(PathBuf),
}

/// What the rescue function gets when tp died: the page directory, the output it was meant
/// for, the registered instances (present, tracing stopped, held open by the guard so that
/// no other tp removes them meanwhile) and tp's pid. It reads what it needs from them and
/// returns the rest of its work, run after the guard removed them; it says what it did on
/// stderr.
pub type Rescue<'a> = &'a dyn Fn(&Path, &Path, &[PathBuf], i32) -> Box<dyn FnOnce()>;

/// The parent's side: registrations go down the pipe, one line each.
#[derive(Debug)]
pub struct Guard {
    pid: i32,
    pipe: Option<File>,
}

impl Guard {
    /// Fork the guard. Call it before any thread starts: the guard is a fork that runs Rust code.
    pub fn spawn(
        rescue: impl Fn(&Path, &Path, &[PathBuf], i32) -> Box<dyn FnOnce()>,
    ) -> Result<Guard> {
        let tp_pid = sys::getpid();
        let (pid, w) = sys::fork_guard(&name(tp_pid), move |r| serve(r, &rescue, |_| {}, tp_pid))?;
        Ok(Guard { pid, pipe: Some(File::from(w)) })
    }

    /// Fork a guard that takes over what tp holds when it dies. `hold` runs in the guard at
    /// once (a copy of tp's memory and file descriptors at this call: e.g. the perf door's
    /// event fds and output file; it maps what must outlive tp) and returns what runs, with
    /// tp's pid, when tp dies, before the registered actions are undone. A normal end
    /// disarms the guard, which then exits without running it. Call it while tp has one
    /// thread.
    pub fn spawn_holding<F: FnOnce(i32)>(hold: impl FnOnce() -> F) -> Result<Guard> {
        let tp_pid = sys::getpid();
        let none: Rescue<'_> = &|_, _, _, _| Box::new(|| {});
        let (pid, w) = sys::fork_guard(&name(tp_pid), move |r| serve(r, none, hold(), tp_pid))?;
        Ok(Guard { pid, pipe: Some(File::from(w)) })
    }

    /// The guard's pid.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Undo `a` if tp dies from now on.
    pub fn register(&mut self, a: &Action) -> Result<()> {
        self.send(&format!("+{}", encode(a)))
    }

    /// tp has cleaned `a` up itself.
    pub fn forget(&mut self, a: &Action) -> Result<()> {
        self.send(&format!("-{}", encode(a)))
    }

    /// tp ends normally: the guard exits without touching anything.
    pub fn disarm(mut self) {
        self.disarm_now();
    }

    /// [`Guard::disarm`] for a tp about to exit without unwinding.
    pub fn disarm_now(&mut self) {
        if self.pipe.is_some() {
            let _ = self.send("disarm");
            self.pipe = None;
            // It exits at once; reaped here, it leaves no zombie behind.
            let _ = crate::process::wait_pid(self.pid, false);
        }
    }

    fn send(&mut self, line: &str) -> Result<()> {
        let Some(p) = self.pipe.as_mut() else { return Ok(()) };
        p.write_all(format!("{line}\n").as_bytes())
            .map_err(|e| Error::sys("write", "(guard pipe)", e))
    }
}

impl Drop for Guard {
    /// Dropped on tp's own exit paths (errors, panics unwinding): everything registered has
    /// been cleaned up by the owners' own `Drop`s by then.
    fn drop(&mut self) {
        self.disarm_now();
    }
}

/// The guard's process name (`comm`): what [`guard_alive`] looks for.
fn name(tp_pid: i32) -> String {
    format!("tpg-{tp_pid}")
}

/// Whether the guard of tp `tp_pid` is still working (its instance is not stale yet).
pub fn guard_alive(tp_pid: i32) -> bool {
    sys::process_named(&name(tp_pid))
}

/// Lines are `KIND` and hex-encoded paths separated by spaces (paths may hold anything).
fn encode(a: &Action) -> String {
    let hex = |p: &[u8]| p.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let path = |p: &Path| hex(p.as_os_str().as_encoded_bytes());
    match a {
        Action::Instance(p) => format!("instance {}", path(p)),
        Action::Probes { tracefs } => format!("probes {}", path(tracefs)),
        Action::Pages { dir, output } => format!("pages {} {}", path(dir), path(output)),
        Action::File(p) => format!("file {}", path(p)),
    }
}

fn decode(line: &str) -> Option<Action> {
    let unhex = |s: &str| -> Option<Vec<u8>> {
        (0..s.len())
            .step_by(2)
            .map(|i| s.get(i..i + 2).and_then(|b| u8::from_str_radix(b, 16).ok()))
            .collect()
    };
    let path = |s: &str| -> Option<PathBuf> {
        use std::os::unix::ffi::OsStringExt;
        Some(PathBuf::from(std::ffi::OsString::from_vec(unhex(s)?)))
    };
    let mut it = line.split(' ');
    let a = match it.next()? {
        "instance" => Action::Instance(path(it.next()?)?),
        "probes" => Action::Probes { tracefs: path(it.next()?)? },
        "pages" => Action::Pages { dir: path(it.next()?)?, output: path(it.next()?)? },
        "file" => Action::File(path(it.next()?)?),
        _ => return None,
    };
    Some(a)
}

/// The guard's side: collect registrations until EOF, then run `on_death` and undo what is
/// left.
fn serve(r: OwnedFd, rescue: Rescue<'_>, on_death: impl FnOnce(i32), tp_pid: i32) -> i32 {
    let mut actions: Vec<Action> = Vec::new();
    for line in BufReader::new(File::from(r)).lines() {
        let Ok(line) = line else { break };
        if line == "disarm" {
            return 0;
        }
        let (add, rest) = match line.split_at_checked(1) {
            Some(("+", rest)) => (true, rest),
            Some(("-", rest)) => (false, rest),
            _ => continue,
        };
        let Some(a) = decode(rest) else { continue };
        if add {
            actions.push(a);
        } else if let Some(i) = actions.iter().position(|x| *x == a) {
            actions.remove(i);
        }
    }
    on_death(tp_pid);
    if actions.is_empty() {
        return 0;
    }
    undo(&actions, rescue, tp_pid);
    0
}

/// Stop tracing, rescue the pages, remove files, instances and probes, in that order.
fn undo(actions: &[Action], rescue: Rescue<'_>, tp_pid: i32) {
    let instances: Vec<PathBuf> = actions
        .iter()
        .filter_map(|a| if let Action::Instance(p) = a { Some(p.clone()) } else { None })
        .collect();
    // An open file of an instance keeps rmdir away (EBUSY): a tp starting meanwhile takes it
    // for stale (its tp is dead) and would remove it under the rescue.
    let mut held = Vec::new();
    for i in &instances {
        if let Ok(f) = sys::hold_written(&i.join("tracing_on"), b"0") {
            held.push(f);
        }
    }
    let mut rest = Vec::new();
    for a in actions {
        if let Action::Pages { dir, output } = a {
            rest.push(rescue(dir, output, &instances, tp_pid));
        }
    }
    drop(held);
    for a in actions {
        if let Action::File(p) = a {
            let _ = sys::remove_file(p);
        }
    }
    for i in instances.iter().filter(|i| sys::is_dir(i)) {
        match crate::instance::remove_instance_dir(i) {
            Ok(()) => eprintln!("tp: removed instance {} of tp (pid {tp_pid})", i.display()),
            Err(e) => eprintln!("tp: could not remove instance {}: {e}", i.display()),
        }
    }
    for a in actions {
        if let Action::Probes { tracefs } = a {
            let removed = crate::Tracefs::at(tracefs.clone())
                .and_then(|tfs| crate::uprobe::remove_probes_of(&tfs, tp_pid));
            match removed {
                Ok(names) => {
                    for n in names {
                        eprintln!("tp: removed probe {n} of tp (pid {tp_pid})");
                    }
                }
                Err(e) => eprintln!("tp: could not remove the probes of tp (pid {tp_pid}): {e}"),
            }
        }
    }
    for r in rest {
        r();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_survive_the_pipe_encoding() {
        for a in [
            Action::Instance("/sys/kernel/tracing/instances/tp-1".into()),
            Action::Probes { tracefs: "/sys/kernel/tracing\n x".into() },
            Action::Pages { dir: "/t/.a b\n.tp-1.d".into(), output: "/t/a b\n".into() },
            Action::File("/t/x.tmp".into()),
        ] {
            assert_eq!(decode(&encode(&a)), Some(a));
        }
        assert_eq!(decode("pages 2f7"), None);
    }
}
