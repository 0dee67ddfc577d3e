//! Every system call tp makes, each wrapped so that its failure names the call and the path.

use std::ffi::CString;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

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
    std::fs::create_dir(path).map_err(|e| Error::sys("mkdir", path, e))
}

/// `rmdir`, returning the raw `io::Error` so the caller can retry on EBUSY.
pub fn rmdir(path: &Path) -> io::Result<()> {
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

/// Create (truncate) a file for writing.
pub fn create_file(path: &Path) -> Result<File> {
    File::create(path).map_err(|e| Error::sys("create", path, e))
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

/// Is a process with this pid alive (kill(pid, 0) does not fail with ESRCH)?
pub fn process_alive(pid: i32) -> bool {
    if pid <= 0 {
        return false;
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

/// Effective uid.
pub fn geteuid() -> u32 {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() }
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
