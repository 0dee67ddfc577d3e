//! Processes and signals for recording: a child started behind a gate (so tracing is on
//! before it runs a single instruction of the command), signal delivery through a self-pipe,
//! and small queries (threads of a pid, tty, CPU time).

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::error::{Error, Result};
use crate::sys::{self, Io};

/// A forked child stopped at a gate before `exec`. Configure tracing for [`GatedChild::pid`],
/// then [`GatedChild::release`] it.
#[derive(Debug)]
pub struct GatedChild {
    pid: i32,
    gate_w: Option<OwnedFd>,
    err_r: OwnedFd,
    program: PathBuf,
}

pub use crate::sys::ExitStatus;

impl ExitStatus {
    /// The shell's convention: the code, or 128 + signal.
    pub fn as_shell_code(self) -> i32 {
        match self {
            ExitStatus::Code(c) => c,
            ExitStatus::Signal(s) => 128 + s,
        }
    }
}

/// Find `prog` in PATH as execvp would (a name with a slash is used as is).
pub fn resolve_program(prog: &OsStr) -> Option<PathBuf> {
    if prog.as_bytes().contains(&b'/') {
        return Some(PathBuf::from(prog));
    }
    let path =
        std::env::var_os("PATH").unwrap_or_else(|| OsString::from("/usr/local/bin:/usr/bin:/bin"));
    for dir in std::env::split_paths(&path) {
        let cand = dir.join(prog);
        if sys::is_executable_file(&cand) {
            return Some(cand);
        }
    }
    None
}

static KEEP_ROOT: AtomicBool = AtomicBool::new(false);

/// `--as-root`: commands started by tp under sudo run as root (by default they run as the
/// user who ran sudo).
pub fn keep_root(on: bool) {
    KEEP_ROOT.store(on, Ordering::Relaxed);
}

/// The user who ran sudo, when tp runs as root through it: `SUDO_UID`, `SUDO_GID`, their
/// name, home and supplementary groups (from /etc/passwd and /etc/group).
pub struct SudoUser {
    creds: sys::Credentials,
    name: String,
    home: String,
}

/// [`SudoUser`] of this process, if any.
pub fn sudo_user() -> Option<SudoUser> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    let num = |k: &str| std::env::var(k).ok()?.trim().parse::<u32>().ok();
    let (uid, gid) = (num("SUDO_UID")?, num("SUDO_GID")?);
    if uid == 0 {
        return None;
    }
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let entry = passwd
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .find(|f| f.len() >= 7 && f[2].parse::<u32>().ok() == Some(uid));
    let name = std::env::var("SUDO_USER")
        .ok()
        .or_else(|| entry.as_ref().map(|f| f[0].to_string()))
        .unwrap_or_else(|| uid.to_string());
    let home = entry.as_ref().map_or_else(|| "/".to_string(), |f| f[5].to_string());
    let mut groups = vec![gid];
    for l in std::fs::read_to_string("/etc/group").unwrap_or_default().lines() {
        let f: Vec<&str> = l.split(':').collect();
        if f.len() >= 4 && f[3].split(',').any(|m| m == name) {
            if let Ok(g) = f[2].parse::<u32>() {
                if !groups.contains(&g) {
                    groups.push(g);
                }
            }
        }
    }
    Some(SudoUser { creds: sys::Credentials { uid, gid, groups }, name, home })
}

impl SudoUser {
    /// (uid, gid).
    pub fn ids(&self) -> (u32, u32) {
        (self.creds.uid, self.creds.gid)
    }

    /// tp's environment with HOME, USER and LOGNAME the user's.
    fn environment(&self) -> Vec<CString> {
        let mine = [("HOME", &self.home), ("USER", &self.name), ("LOGNAME", &self.name)];
        std::env::vars_os()
            .filter(|(k, _)| !mine.iter().any(|(m, _)| k.as_bytes() == m.as_bytes()))
            .map(|(k, v)| [k.into_vec(), b"=".to_vec(), v.into_vec()].concat())
            .chain(mine.iter().map(|(k, v)| format!("{k}={v}").into_bytes()))
            .filter_map(|b| CString::new(b).ok())
            .collect()
    }
}

impl GatedChild {
    /// Fork a child that waits at a gate, then execs `argv` (`argv[0]` looked up in PATH).
    /// stdin, stdout and stderr are inherited.
    pub fn spawn(argv: &[OsString]) -> Result<GatedChild> {
        let first = argv.first().ok_or_else(|| Error::Other("no command given".into()))?;
        let program = resolve_program(first).ok_or_else(|| {
            Error::Other(format!("{}: command not found", first.to_string_lossy()))
        })?;
        let cprog = CString::new(program.as_os_str().as_bytes())
            .map_err(|_| Error::Other("command with a NUL byte".into()))?;
        let cargs: Vec<CString> = argv
            .iter()
            .map(|a| CString::new(a.clone().into_vec()))
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| Error::Other("argument with a NUL byte".into()))?;
        let mut ptrs: Vec<*const libc::c_char> = cargs.iter().map(|c| c.as_ptr()).collect();
        ptrs.push(std::ptr::null());
        let (gate_r, gate_w) = sys::pipe(0)?;
        let (err_r, err_w) = sys::pipe(0)?;
        let pipes = sys::GatePipes {
            gate_r: gate_r.as_raw_fd(),
            err_w: err_w.as_raw_fd(),
            gate_w: gate_w.as_raw_fd(),
            err_r: err_r.as_raw_fd(),
        };
        let user = if KEEP_ROOT.load(Ordering::Relaxed) { None } else { sudo_user() };
        let env: Option<Vec<CString>> = user.as_ref().map(|u| u.environment());
        let mut envp: Option<Vec<*const libc::c_char>> =
            env.as_ref().map(|e| e.iter().map(|c| c.as_ptr()).collect());
        if let Some(e) = envp.as_mut() {
            e.push(std::ptr::null());
        }
        let creds = user.map(|u| u.creds);
        let pid =
            sys::fork_gated(&cprog, &ptrs, envp.as_deref(), creds.as_ref(), &pipes, &program)?;
        drop(gate_r);
        drop(err_w);
        Ok(GatedChild { pid, gate_w: Some(gate_w), err_r, program })
    }

    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Open the gate: the child execs now. Returns an error if exec failed (the child has
    /// then exited with 127 and is reaped).
    pub fn release(&mut self) -> Result<()> {
        if let Some(w) = self.gate_w.take() {
            sys::write_all_fd(w.as_raw_fd(), b"g", Path::new("(gate pipe)"))?;
        }
        let mut buf = [0u8; 4];
        let mut got = 0;
        while got < 4 {
            match sys::read_fd(
                self.err_r.as_raw_fd(),
                &mut buf[got..],
                Path::new("(exec status pipe)"),
            )? {
                Io::Bytes(n) => got += n,
                _ => break,
            }
        }
        if got == 4 {
            let errno = i32::from_ne_bytes(buf);
            let _ = wait_pid(self.pid, false);
            return Err(Error::sys("execv", &self.program, io::Error::from_raw_os_error(errno)));
        }
        Ok(())
    }
}

impl Drop for GatedChild {
    fn drop(&mut self) {
        // Never released: closing the gate makes the child exit without running.
        if self.gate_w.take().is_some() {
            let _ = wait_pid(self.pid, false);
        }
    }
}

pub use crate::sys::{kill, wait_pid};

/// The thread ids of a process (`/proc/PID/task`), or an error naming the pid if it is gone.
pub fn threads_of(pid: i32) -> Result<Vec<i32>> {
    let dir = PathBuf::from(format!("/proc/{pid}/task"));
    let names = sys::list_dir(&dir).map_err(|e| {
        if e.is_not_found() {
            Error::Other(format!("no process with pid {pid}"))
        } else {
            e
        }
    })?;
    Ok(names.iter().filter_map(|n| n.parse().ok()).collect())
}

pub use crate::sys::{is_tty, self_cpu_time};

/// The processes running now (the numeric entries of /proc).
pub fn all_pids() -> Vec<i32> {
    let Ok(rd) = std::fs::read_dir("/proc") else { return Vec::new() };
    rd.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect()
}

/// Is a process with this pid alive?
pub fn is_alive(pid: i32) -> bool {
    sys::process_alive(pid)
}

/// Wait up to `timeout_ms` until one of `fds` is readable (or hung up); which are.
pub fn poll_readable(fds: &[RawFd], timeout_ms: i32) -> Result<Vec<bool>> {
    sys::poll_readable(fds, timeout_ms)
}

/// Number of configured CPUs.
pub fn cpu_count() -> usize {
    sys::cpu_count()
}

/// One delivered signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivered {
    pub signal: i32,
    /// True when a process sent it (kill), false when the kernel did (terminal Ctrl-C,
    /// SIGCHLD).
    pub sent_by_process: bool,
}

/// Signals delivered through a self-pipe, so the main loop can poll for them. Installing it
/// replaces the handlers of the given signals; dropping it restores the previous ones.
pub struct Signals {
    r: OwnedFd,
    _w: OwnedFd,
    old: Vec<sys::SavedHandler>,
}

impl Signals {
    /// Catch these signals (e.g. SIGINT, SIGTERM, SIGHUP, SIGCHLD).
    pub fn install(sigs: &[i32]) -> Result<Signals> {
        let (r, w) = sys::pipe(0)?;
        sys::set_nonblocking(r.as_raw_fd(), true, Path::new("(signal pipe)"))?;
        sys::set_nonblocking(w.as_raw_fd(), true, Path::new("(signal pipe)"))?;
        let old = sys::catch_signals(sigs, w.as_raw_fd())?;
        Ok(Signals { r, _w: w, old })
    }

    /// Wait up to `timeout` for signals; returns those delivered (possibly none).
    pub fn wait(&self, timeout: Duration) -> Result<Vec<Delivered>> {
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        let ready = sys::poll_readable(&[self.r.as_raw_fd()], ms)?;
        let mut out = Vec::new();
        if ready[0] {
            let mut buf = [0u8; 64];
            while let Io::Bytes(n) =
                sys::read_fd(self.r.as_raw_fd(), &mut buf, Path::new("(signal pipe)"))?
            {
                out.extend(buf[..n].iter().map(|&b| Delivered {
                    signal: (b & 0x7f) as i32,
                    sent_by_process: b & 0x80 != 0,
                }));
            }
        }
        Ok(out)
    }

    /// The read end, for polling together with other descriptors.
    pub fn fd(&self) -> RawFd {
        self.r.as_raw_fd()
    }
}

impl Drop for Signals {
    fn drop(&mut self) {
        sys::restore_signals(std::mem::take(&mut self.old));
    }
}
