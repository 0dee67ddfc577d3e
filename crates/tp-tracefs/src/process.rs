//! Processes and signals for recording: a child started behind a gate (so tracing is on
//! before it runs a single instruction of the command), signal delivery through a self-pipe,
//! and small queries (threads of a pid, tty, CPU time).

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
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

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    Code(i32),
    Signal(i32),
}

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
        if let Ok(m) = std::fs::metadata(&cand) {
            use std::os::unix::fs::PermissionsExt;
            if m.is_file() && m.permissions().mode() & 0o111 != 0 {
                return Some(cand);
            }
        }
    }
    None
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
        let (gr, ew) = (gate_r.as_raw_fd(), err_w.as_raw_fd());
        let (gw, er) = (gate_w.as_raw_fd(), err_r.as_raw_fd());
        // SAFETY: fork in a possibly multithreaded process: the child below only calls
        // async-signal-safe functions (sigprocmask, read, execv, write, _exit) on memory
        // prepared before the fork.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(Error::sys("fork", &program, io::Error::last_os_error()));
        }
        if pid == 0 {
            // SAFETY: child side of fork; see above. Nothing here allocates or locks.
            unsafe {
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut set);
                libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
                for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGCHLD, libc::SIGPIPE] {
                    libc::signal(s, libc::SIG_DFL);
                }
                // Our copies of the parent's ends: with them open, the gate would never
                // report EOF when the parent goes away.
                libc::close(gw);
                libc::close(er);
                let mut b = 0u8;
                loop {
                    let r = libc::read(gr, (&mut b as *mut u8).cast(), 1);
                    if r >= 0 || *libc::__errno_location() != libc::EINTR {
                        if r != 1 {
                            // The parent went away before releasing us: do not run untraced.
                            libc::_exit(126);
                        }
                        break;
                    }
                }
                libc::execv(cprog.as_ptr(), ptrs.as_ptr());
                let e: i32 = *libc::__errno_location();
                libc::write(ew, (&e as *const i32).cast(), 4);
                libc::_exit(127);
            }
        }
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

/// waitpid: `Ok(None)` when `nohang` and the child is still running.
pub fn wait_pid(pid: i32, nohang: bool) -> Result<Option<ExitStatus>> {
    let mut st = 0;
    loop {
        // SAFETY: `st` is a valid int for waitpid to fill.
        let r = unsafe { libc::waitpid(pid, &mut st, if nohang { libc::WNOHANG } else { 0 }) };
        if r == 0 {
            return Ok(None);
        }
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(Error::sys("waitpid", format!("pid {pid}"), e));
        }
        if libc::WIFEXITED(st) {
            return Ok(Some(ExitStatus::Code(libc::WEXITSTATUS(st))));
        }
        if libc::WIFSIGNALED(st) {
            return Ok(Some(ExitStatus::Signal(libc::WTERMSIG(st))));
        }
    }
}

/// Send a signal to a process.
pub fn kill(pid: i32, sig: i32) -> Result<()> {
    // SAFETY: kill has no memory arguments.
    if unsafe { libc::kill(pid, sig) } != 0 {
        return Err(Error::sys("kill", format!("pid {pid}"), io::Error::last_os_error()));
    }
    Ok(())
}

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

/// Is this descriptor a terminal?
pub fn is_tty(fd: RawFd) -> bool {
    // SAFETY: isatty has no memory arguments.
    unsafe { libc::isatty(fd) == 1 }
}

/// CPU time (user, system) this process has used, all threads included.
pub fn self_cpu_time() -> (Duration, Duration) {
    // SAFETY: rusage is plain data; all-zero is valid and getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid rusage.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, (t.tv_usec as u32) * 1000);
    (tv(ru.ru_utime), tv(ru.ru_stime))
}

static SIG_PIPE_W: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    let fd = SIG_PIPE_W.load(Ordering::Relaxed);
    if fd >= 0 {
        // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
        let code = if info.is_null() { 0 } else { unsafe { (*info).si_code } };
        // si_code <= 0: sent by a process (kill, sigqueue, tgkill); > 0: by the kernel
        // (e.g. the terminal's Ctrl-C, which the whole foreground group receives).
        let b = (sig as u8 & 0x7f) | if code <= 0 { 0x80 } else { 0 };
        // SAFETY: write(2) is async-signal-safe; `b` lives for the call. A full pipe drops
        // the byte, which is fine: a signal is already pending for the reader.
        unsafe { libc::write(fd, (&b as *const u8).cast(), 1) };
    }
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
    old: Vec<(i32, libc::sigaction)>,
}

impl Signals {
    /// Catch these signals (e.g. SIGINT, SIGTERM, SIGHUP, SIGCHLD).
    pub fn install(sigs: &[i32]) -> Result<Signals> {
        let (r, w) = sys::pipe(0)?;
        sys::set_nonblocking(r.as_raw_fd(), true, Path::new("(signal pipe)"))?;
        sys::set_nonblocking(w.as_raw_fd(), true, Path::new("(signal pipe)"))?;
        SIG_PIPE_W.store(w.as_raw_fd(), Ordering::SeqCst);
        let mut old = Vec::new();
        for &s in sigs {
            // SAFETY: sigaction structs are plain data; zeroed is a valid starting value.
            let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
            sa.sa_sigaction = on_signal as *const () as usize;
            sa.sa_flags = libc::SA_RESTART | libc::SA_SIGINFO;
            // SAFETY: as above.
            let mut prev: libc::sigaction = unsafe { std::mem::zeroed() };
            // SAFETY: valid pointers to sigaction structs; `on_signal` is async-signal-safe.
            if unsafe { libc::sigaction(s, &sa, &mut prev) } != 0 {
                return Err(Error::sys(
                    "sigaction",
                    format!("signal {s}"),
                    io::Error::last_os_error(),
                ));
            }
            old.push((s, prev));
        }
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
        for (s, prev) in self.old.drain(..).rev() {
            // SAFETY: restoring the sigaction saved at install time.
            unsafe { libc::sigaction(s, &prev, std::ptr::null_mut()) };
        }
        SIG_PIPE_W.store(-1, Ordering::SeqCst);
    }
}
