//! Every system call tp-tracefs makes, each wrapped so that its failure names the call and
//! the path: files and directories of tracefs, descriptors, pipes and splice, poll, CPU
//! affinity, and processes (fork behind a gate, exec, waitpid, kill, signal handlers).
//! Private to the crate; the rest of it and its users go through typed functions.
//!
//! Tests that need no root replace the process table and the calls that change tracefs with
//! [`fake`] (after aya's `sys` module: one place to intercept the kernel).

use std::ffi::CString;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use crate::error::{Error, Result};

fn cstr(path: &Path) -> Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| Error::Other(format!("path with a NUL byte: {}", path.display())))
}

/// Read a whole file.
pub fn read_file(path: &Path) -> Result<Vec<u8>> {
    let mut f = File::open(path).map_err(|e| Error::sys("open", path, e))?;
    // One large first read: `events/header_page` answers a second read with EOF, so the
    // 32-byte probe read `read_to_end` makes into an empty Vec would cut it at 32 bytes.
    let mut v = Vec::with_capacity(64 * 1024);
    f.read_to_end(&mut v).map_err(|e| Error::sys("read", path, e))?;
    Ok(v)
}

/// Read a whole file as text (lossy: tracefs files are ASCII, comm names may not be).
pub fn read_string(path: &Path) -> Result<String> {
    let v = read_file(path)?;
    Ok(match String::from_utf8(v) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

/// Write `data` to `path` in one write, truncating (tracefs control files act on each write).
pub fn write_file(path: &Path, data: &[u8]) -> Result<()> {
    write_with(path, data, false)
}

/// Write `data` to `path` opened with O_APPEND (adds to `set_event` instead of replacing it).
pub fn append_file(path: &Path, data: &[u8]) -> Result<()> {
    write_with(path, data, true)
}

fn write_with(path: &Path, data: &[u8], append: bool) -> Result<()> {
    #[cfg(test)]
    if let Some(r) = fake::take_call(fake::Call::Write(path.into(), data.into())) {
        return r.map_err(|e| Error::sys("write", path, e));
    }
    let mut o = std::fs::OpenOptions::new();
    o.write(true);
    if append {
        o.append(true);
    } else {
        o.truncate(true);
    }
    let mut f = o.open(path).map_err(|e| Error::sys("open", path, e))?;
    f.write_all(data).map_err(|e| Error::sys("write", path, e))
}

/// lstat(2) for existence: `Ok(true)` exists, `Ok(false)` does not (ENOENT/ENOTDIR), an
/// error otherwise (e.g. EACCES: not allowed to look).
pub fn probe(path: &Path) -> Result<bool> {
    match std::fs::symlink_metadata(path) {
        Ok(_) => Ok(true),
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ENOTDIR)) => Ok(false),
        Err(e) => Err(Error::sys("stat", path, e)),
    }
}

/// Does this path exist (stat succeeds)?
pub fn exists(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

/// Names of the entries of a directory, sorted.
pub fn list_dir(path: &Path) -> Result<Vec<String>> {
    let rd = std::fs::read_dir(path).map_err(|e| Error::sys("opendir", path, e))?;
    let mut out = Vec::new();
    for ent in rd {
        let ent = ent.map_err(|e| Error::sys("readdir", path, e))?;
        out.push(ent.file_name().to_string_lossy().into_owned());
    }
    out.sort();
    Ok(out)
}

/// Names of the subdirectories of a directory, sorted.
pub fn list_subdirs(path: &Path) -> Result<Vec<String>> {
    let rd = std::fs::read_dir(path).map_err(|e| Error::sys("opendir", path, e))?;
    let mut out = Vec::new();
    for ent in rd {
        let ent = ent.map_err(|e| Error::sys("readdir", path, e))?;
        if ent.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            out.push(ent.file_name().to_string_lossy().into_owned());
        }
    }
    out.sort();
    Ok(out)
}

pub fn mkdir(path: &Path) -> Result<()> {
    #[cfg(test)]
    if let Some(r) = fake::take_call(fake::Call::Mkdir(path.into())) {
        return r.map_err(|e| Error::sys("mkdir", path, e));
    }
    std::fs::create_dir(path).map_err(|e| Error::sys("mkdir", path, e))
}

/// A directory of tp's own state, for its owner only (0700): created so, or, when it exists
/// and is this process's user's, its mode set so (an earlier tp made it 0755).
pub fn private_dir(path: &Path) -> Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    match std::fs::DirBuilder::new().mode(0o700).create(path) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        r => return r.map_err(|e| Error::sys("mkdir", path, e)),
    }
    let m = std::fs::symlink_metadata(path).map_err(|e| Error::sys("stat", path, e))?;
    if !m.is_dir() {
        return Err(Error::sys("mkdir", path, std::io::ErrorKind::AlreadyExists.into()));
    }
    // SAFETY: geteuid has no preconditions.
    if m.mode() & 0o077 != 0 && m.uid() == unsafe { libc::geteuid() } {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| Error::sys("chmod", path, e))?;
    }
    Ok(())
}

/// Create (or truncate) a regular file, 0600 and not through a symlink, and write `data` to
/// it (tp's own state files).
pub fn write_new_file(path: &Path, data: &[u8]) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| Error::sys("open", path, e))?;
    f.write_all(data).map_err(|e| Error::sys("write", path, e))
}

/// rename(2): atomic, so of several processes exactly one moves a file.
pub fn rename(from: &Path, to: &Path) -> Result<()> {
    std::fs::rename(from, to).map_err(|e| Error::sys("rename", from, e))
}

/// Remove a regular file.
pub fn remove_file(path: &Path) -> Result<()> {
    std::fs::remove_file(path).map_err(|e| Error::sys("unlink", path, e))
}

/// `rmdir`, returning the raw `io::Error` so the caller can retry on EBUSY.
pub fn rmdir(path: &Path) -> io::Result<()> {
    #[cfg(test)]
    if let Some(r) = fake::take_call(fake::Call::Rmdir(path.into())) {
        return r;
    }
    std::fs::remove_dir(path)
}

/// `mount -t tracefs nodev PATH`.
pub fn mount_tracefs(path: &Path) -> Result<()> {
    let target = cstr(path)?;
    let src = c"nodev";
    let fstype = c"tracefs";
    // SAFETY: all pointers are valid NUL-terminated strings that outlive the call; data is
    // null, which mount(2) accepts for tracefs.
    let r =
        unsafe { libc::mount(src.as_ptr(), target.as_ptr(), fstype.as_ptr(), 0, std::ptr::null()) };
    if r != 0 {
        return Err(Error::sys("mount tracefs", path, io::Error::last_os_error()));
    }
    Ok(())
}

/// Open a file read-only, optionally nonblocking.
pub fn open_read(path: &Path, nonblock: bool) -> Result<OwnedFd> {
    let c = cstr(path)?;
    let mut flags = libc::O_RDONLY | libc::O_CLOEXEC;
    if nonblock {
        flags |= libc::O_NONBLOCK;
    }
    // SAFETY: `c` is a valid NUL-terminated path; open(2) does not keep the pointer.
    let fd = unsafe { libc::open(c.as_ptr(), flags) };
    if fd < 0 {
        return Err(Error::sys("open", path, io::Error::last_os_error()));
    }
    // SAFETY: `fd` was just returned by open(2) and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Set or clear O_NONBLOCK on a descriptor.
pub fn set_nonblocking(fd: RawFd, on: bool, path: &Path) -> Result<()> {
    // SAFETY: F_GETFL on a descriptor we hold; no pointers involved.
    let fl = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if fl < 0 {
        return Err(Error::sys("fcntl(F_GETFL)", path, io::Error::last_os_error()));
    }
    let nfl = if on { fl | libc::O_NONBLOCK } else { fl & !libc::O_NONBLOCK };
    // SAFETY: F_SETFL with an integer flag set on a descriptor we hold.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, nfl) } < 0 {
        return Err(Error::sys("fcntl(F_SETFL)", path, io::Error::last_os_error()));
    }
    Ok(())
}

/// A pipe (read end, write end), close-on-exec, grown to `size` bytes when the system allows
/// (falls back to the default size otherwise).
pub fn pipe(size: usize) -> Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(Error::sys("pipe2", "(pipe)", io::Error::last_os_error()));
    }
    // SAFETY: pipe2 succeeded, so both descriptors are fresh and owned by us.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    if size > 0 {
        // SAFETY: F_SETPIPE_SZ takes an int; failure (EPERM above pipe-max-size) is harmless.
        unsafe { libc::fcntl(w.as_raw_fd(), libc::F_SETPIPE_SZ, size as libc::c_int) };
    }
    Ok((r, w))
}

/// The pipe's capacity in bytes.
pub fn pipe_size(fd: RawFd) -> usize {
    // SAFETY: F_GETPIPE_SZ takes no argument.
    let r = unsafe { libc::fcntl(fd, libc::F_GETPIPE_SZ) };
    if r > 0 {
        r as usize
    } else {
        65536
    }
}

/// Outcome of a splice/read that may not have data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Io {
    /// Moved this many bytes (> 0).
    Bytes(usize),
    /// Nothing available now (EAGAIN) or end of data (0).
    Empty,
    /// The call is not supported for this descriptor pair (EINVAL/ENOSYS): use read().
    Unsupported,
}

/// splice(2) `len` bytes from `from` to `to` without copying through user space.
pub fn splice(from: RawFd, to: RawFd, len: usize, nonblock: bool, path: &Path) -> Result<Io> {
    let mut flags = libc::SPLICE_F_MOVE;
    if nonblock {
        flags |= libc::SPLICE_F_NONBLOCK;
    }
    loop {
        // SAFETY: null offsets mean "use the file position"; both descriptors are ours.
        let r = unsafe {
            libc::splice(from, std::ptr::null_mut(), to, std::ptr::null_mut(), len, flags)
        };
        if r > 0 {
            return Ok(Io::Bytes(r as usize));
        }
        if r == 0 {
            return Ok(Io::Empty);
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EAGAIN) => return Ok(Io::Empty),
            Some(libc::EINVAL) | Some(libc::ENOSYS) => return Ok(Io::Unsupported),
            _ => return Err(Error::sys("splice", path, e)),
        }
    }
}

/// read(2) into `buf`; EAGAIN and end of file are both `Io::Empty`.
pub fn read_fd(fd: RawFd, buf: &mut [u8], path: &Path) -> Result<Io> {
    loop {
        // SAFETY: `buf` is valid for writes of `buf.len()` bytes.
        let r = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if r > 0 {
            return Ok(Io::Bytes(r as usize));
        }
        if r == 0 {
            return Ok(Io::Empty);
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EAGAIN) => return Ok(Io::Empty),
            _ => return Err(Error::sys("read", path, e)),
        }
    }
}

/// Write all of `buf` to `fd`.
pub fn write_all_fd(fd: RawFd, mut buf: &[u8], path: &Path) -> Result<()> {
    while !buf.is_empty() {
        // SAFETY: `buf` is valid for reads of `buf.len()` bytes.
        let r = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(Error::sys("write", path, e));
        }
        buf = &buf[r as usize..];
    }
    Ok(())
}

/// poll(2) the descriptors for readability; returns which are readable (or hung up).
/// `timeout_ms` < 0 waits forever. EINTR returns all-false.
pub fn poll_readable(fds: &[RawFd], timeout_ms: i32) -> Result<Vec<bool>> {
    let mut p: Vec<libc::pollfd> =
        fds.iter().map(|&fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 }).collect();
    // SAFETY: `p` is a valid array of `p.len()` pollfd structs.
    let r = unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, timeout_ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EINTR) {
            return Ok(vec![false; fds.len()]);
        }
        return Err(Error::sys("poll", "(trace_pipe_raw)", e));
    }
    Ok(p.iter().map(|x| x.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0).collect())
}

/// stat(2): a regular file with an execute bit (as execvp's PATH search wants).
pub fn is_executable_file(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Write `data` to `path` and keep it open (an open file of an instance keeps rmdir away).
pub fn hold_written(path: &Path, data: &[u8]) -> Result<File> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| Error::sys("open", path, e))?;
    f.write_all(data).map_err(|e| Error::sys("write", path, e))?;
    Ok(f)
}

/// stat(2): a directory.
pub fn is_dir(path: &Path) -> bool {
    path.is_dir()
}

/// Is a process with this pid alive (kill(pid, 0) does not fail with ESRCH)?
pub fn process_alive(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    #[cfg(test)]
    if let Some(alive) = fake::alive(pid) {
        return alive;
    }
    // SAFETY: signal 0 only checks for existence and permission.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// uname(2) as `(sysname, release, version, machine)`.
pub fn uname() -> Result<(String, String, String, String)> {
    // SAFETY: utsname is plain old data; all-zero is a valid value.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid utsname for the kernel to fill.
    if unsafe { libc::uname(&mut u) } != 0 {
        return Err(Error::sys("uname", "(uname)", io::Error::last_os_error()));
    }
    let s = |a: &[libc::c_char]| {
        let b: Vec<u8> = a.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
        String::from_utf8_lossy(&b).into_owned()
    };
    Ok((s(&u.sysname), s(&u.release), s(&u.version), s(&u.machine)))
}

/// The system page size.
pub fn page_size() -> usize {
    // SAFETY: sysconf with a valid name has no preconditions.
    let r = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if r > 0 {
        r as usize
    } else {
        4096
    }
}

/// Number of configured CPUs.
pub fn cpu_count() -> usize {
    // SAFETY: sysconf with a valid name has no preconditions.
    let r = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
    if r > 0 {
        r as usize
    } else {
        1
    }
}

/// The current process id.
pub fn getpid() -> i32 {
    std::process::id() as i32
}

/// Let the calling thread run on every online CPU except `cpu` (no-op when that would leave
/// none). Returns whether the mask was changed.
pub fn avoid_cpu(cpu: u32) -> Result<bool> {
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid cpu_set_t of the size passed; 0 means the calling thread.
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0
    {
        return Err(Error::sys(
            "sched_getaffinity",
            "(capture thread)",
            io::Error::last_os_error(),
        ));
    }
    let c = cpu as usize;
    // SAFETY: CPU_ISSET/CPU_CLR/CPU_COUNT read and write only within `set`; `c` is checked
    // against the set's capacity.
    unsafe {
        if c >= 8 * std::mem::size_of::<libc::cpu_set_t>()
            || !libc::CPU_ISSET(c, &set)
            || libc::CPU_COUNT(&set) < 2
        {
            return Ok(false);
        }
        libc::CPU_CLR(c, &mut set);
    }
    // SAFETY: as above.
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) } != 0 {
        return Err(Error::sys(
            "sched_setaffinity",
            "(capture thread)",
            io::Error::last_os_error(),
        ));
    }
    Ok(true)
}

// ---- processes ----

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    Code(i32),
    Signal(i32),
}

/// The ends of the two pipes a gated child uses: it waits for a byte on `gate` before
/// `exec`, and writes `exec`'s errno to `err` if `exec` fails.
pub(crate) struct GatePipes {
    /// The child's ends.
    pub gate_r: RawFd,
    pub err_w: RawFd,
    /// The parent's ends (the child closes its copies).
    pub gate_w: RawFd,
    pub err_r: RawFd,
}

/// Fork a child that waits at the gate, then `execv(program, argv)` (`argv` ends with a
/// null pointer); returns its pid. The child restores the default signal mask and
/// handlers, and exits 126 if the gate closes unopened, 127 if `exec` fails.
/// Who a command runs as: set in the child after the gate, before exec.
pub(crate) struct Credentials {
    pub uid: libc::uid_t,
    pub gid: libc::gid_t,
    pub groups: Vec<libc::gid_t>,
}

pub(crate) fn fork_gated(
    program: &CString,
    argv: &[*const libc::c_char],
    envp: Option<&[*const libc::c_char]>,
    creds: Option<&Credentials>,
    p: &GatePipes,
    what: &Path,
) -> Result<i32> {
    assert!(argv.last().is_some_and(|a| a.is_null()), "argv ends with a null pointer");
    assert!(envp.is_none_or(|e| e.last().is_some_and(|a| a.is_null())), "envp ends with null");
    let (gr, ew, gw, er) = (p.gate_r, p.err_w, p.gate_w, p.err_r);
    // SAFETY: fork in a possibly multithreaded process: the child below only calls
    // async-signal-safe functions (sigprocmask, read, setgroups/setgid/setuid, execv(e),
    // write, _exit) on memory
    // prepared before the fork.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(Error::sys("fork", what, io::Error::last_os_error()));
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
            if let Some(c) = creds {
                // Groups first, then the group, then the user (after which the rest fail).
                if libc::setgroups(c.groups.len(), c.groups.as_ptr()) != 0
                    || libc::setgid(c.gid) != 0
                    || libc::setuid(c.uid) != 0
                {
                    let e: i32 = *libc::__errno_location();
                    libc::write(ew, (&e as *const i32).cast(), 4);
                    libc::_exit(127);
                }
            }
            match envp {
                Some(env) => libc::execve(program.as_ptr(), argv.as_ptr(), env.as_ptr()),
                None => libc::execv(program.as_ptr(), argv.as_ptr()),
            };
            let e: i32 = *libc::__errno_location();
            libc::write(ew, (&e as *const i32).cast(), 4);
            libc::_exit(127);
        }
    }
    Ok(pid)
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
    #[cfg(test)]
    if let Some(r) = fake::take_call(fake::Call::Kill(pid, sig)) {
        return r.map_err(|e| Error::sys("kill", format!("pid {pid}"), e));
    }
    // SAFETY: kill has no memory arguments.
    if unsafe { libc::kill(pid, sig) } != 0 {
        return Err(Error::sys("kill", format!("pid {pid}"), io::Error::last_os_error()));
    }
    Ok(())
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

// ---- signals ----

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

/// A signal's handler as it was before [`catch_signals`] replaced it.
pub(crate) struct SavedHandler(i32, libc::sigaction);

/// Deliver `sigs` as one byte each to the pipe `pipe_w`: the signal number in the low 7
/// bits, bit 7 set when a process sent it (kill) rather than the kernel. Returns the
/// handlers it replaced, for [`restore_signals`].
pub(crate) fn catch_signals(sigs: &[i32], pipe_w: RawFd) -> Result<Vec<SavedHandler>> {
    SIG_PIPE_W.store(pipe_w, Ordering::SeqCst);
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
            let e = io::Error::last_os_error();
            restore_signals(old);
            return Err(Error::sys("sigaction", format!("signal {s}"), e));
        }
        old.push(SavedHandler(s, prev));
    }
    Ok(old)
}

/// Put back the handlers [`catch_signals`] replaced; signals no longer reach the pipe.
pub(crate) fn restore_signals(saved: Vec<SavedHandler>) {
    for SavedHandler(s, prev) in saved.into_iter().rev() {
        // SAFETY: restoring the sigaction saved at install time.
        unsafe { libc::sigaction(s, &prev, std::ptr::null_mut()) };
    }
    SIG_PIPE_W.store(-1, Ordering::SeqCst);
}

/// Threads of this process (`Threads:` of /proc/self/status).
pub fn thread_count() -> Result<usize> {
    let s = read_string(Path::new("/proc/self/status"))?;
    s.lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| Error::Other("no Threads: line in /proc/self/status".into()))
}

/// Fork a guard: a child in its own session (a terminal's Ctrl-C does not reach it) that
/// ignores SIGINT, SIGTERM, SIGHUP and SIGPIPE, runs `child` with the read end of a pipe and
/// exits with its result. The parent gets the child's pid and the pipe's write end
/// (close-on-exec: a command tp starts does not keep the guard waiting). The child runs
/// ordinary Rust code (it allocates), so this is refused once a second thread exists.
pub fn fork_guard(name: &str, child: impl FnOnce(OwnedFd) -> i32) -> Result<(i32, OwnedFd)> {
    let cname = CString::new(name).map_err(|_| Error::Other("guard name with a NUL".into()))?;
    if thread_count()? > 1 {
        return Err(Error::Other("the guard must be forked before any thread is started".into()));
    }
    let (r, w) = pipe(0)?;
    // SAFETY: this process has a single thread (checked above), so the child is a complete
    // copy in which any code may run.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(Error::sys("fork", "(guard)", io::Error::last_os_error()));
    }
    if pid == 0 {
        drop(w);
        // SAFETY: setsid and signal have no memory-safety preconditions; PR_SET_NAME reads a
        // NUL-terminated string (the kernel keeps its first 15 bytes).
        unsafe {
            libc::prctl(libc::PR_SET_NAME, cname.as_ptr());
            libc::setsid();
            for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGPIPE] {
                libc::signal(s, libc::SIG_IGN);
            }
        }
        let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| child(r)));
        // SAFETY: _exit ends the child without running the parent's exit handlers twice.
        unsafe { libc::_exit(code.unwrap_or(101)) };
    }
    drop(r);
    Ok((pid, w))
}

/// Whether a live process (not a zombie) has this name (`comm`, at most 15 bytes).
pub fn process_named(name: &str) -> bool {
    #[cfg(test)]
    if fake::active() {
        return false;
    }
    let Ok(rd) = std::fs::read_dir("/proc") else { return false };
    rd.flatten().any(|e| {
        if !e.file_name().as_bytes().iter().all(u8::is_ascii_digit) {
            return false;
        }
        // `PID (COMM) STATE ...`; COMM may hold spaces and parentheses.
        let Ok(stat) = std::fs::read(e.path().join("stat")) else { return false };
        let (Some(open), Some(close)) =
            (stat.iter().position(|&b| b == b'('), stat.iter().rposition(|&b| b == b')'))
        else {
            return false;
        };
        &stat[open + 1..close] == name.as_bytes() && stat.get(close + 2).is_some_and(|&s| s != b'Z')
    })
}

/// The kernel replaced for tests: which pids are alive, and the calls that would change
/// tracefs or signal a process, recorded instead of made. Per thread, so tests run in
/// parallel; a thread without a fake makes the real calls.
#[cfg(test)]
pub(crate) mod fake {
    use std::cell::RefCell;
    use std::io;
    use std::path::PathBuf;

    /// A call the fake took instead of the kernel.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) enum Call {
        Write(PathBuf, Vec<u8>),
        Mkdir(PathBuf),
        Rmdir(PathBuf),
        Kill(i32, i32),
    }

    #[derive(Debug, Default)]
    pub(crate) struct Fake {
        /// The pids `process_alive` says are alive.
        pub alive: Vec<i32>,
        /// The calls made, in order.
        pub calls: Vec<Call>,
    }

    thread_local! {
        static FAKE: RefCell<Option<Fake>> = const { RefCell::new(None) };
    }

    /// Replace the kernel for this thread until [`finish`].
    pub(crate) fn install(alive: &[i32]) {
        FAKE.with(|f| *f.borrow_mut() = Some(Fake { alive: alive.to_vec(), calls: Vec::new() }));
    }

    /// Stop faking; the calls recorded.
    pub(crate) fn finish() -> Vec<Call> {
        FAKE.with(|f| f.borrow_mut().take()).map(|f| f.calls).unwrap_or_default()
    }

    pub(super) fn take_call(c: Call) -> Option<io::Result<()>> {
        FAKE.with(|f| f.borrow_mut().as_mut().map(|f| f.calls.push(c))).map(Ok)
    }

    pub(super) fn active() -> bool {
        FAKE.with(|f| f.borrow().is_some())
    }

    pub(super) fn alive(pid: i32) -> Option<bool> {
        FAKE.with(|f| f.borrow().as_ref().map(|f| f.alive.contains(&pid)))
    }
}
