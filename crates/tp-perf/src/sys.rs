//! Every system call of the perf side: perf_event_open, its ioctls, read, mmap/munmap, and the
//! two files read to explain a refusal. Each failure is classified by [`classify`] into an
//! [`Error`] that names the call and the event; `classify` is pure, so the decisions are
//! tested without root by feeding it errno values.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;

use perf_event_open_sys as pes;
use pes::bindings::perf_event_attr;

use crate::error::{Error, Result};

/// What an open was for, so its failure can be explained.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OpenCtx<'a> {
    pub event: &'a str,
    /// A hardware or cache event: ENOENT/EOPNOTSUPP/ENODEV mean "no PMU here".
    pub hardware: bool,
    /// pid == -1 (per-CPU, all tasks): needs more privilege than a task of one's own.
    pub system_wide: bool,
    pub pid: i32,
}

/// Turn the errno of a failed perf_event_open into a decision.
pub(crate) fn classify(errno: i32, ctx: &OpenCtx<'_>, paranoid: Option<i32>, nofile: u64) -> Error {
    let source = io::Error::from_raw_os_error(errno);
    let event = ctx.event.to_string();
    match errno {
        libc::EACCES | libc::EPERM => {
            Error::Permission { event, paranoid, system_wide: ctx.system_wide, source }
        }
        libc::ENOENT | libc::ENODEV if ctx.hardware => Error::NotSupported { event, source },
        libc::EOPNOTSUPP => Error::NotSupported { event, source },
        libc::EMFILE => Error::TooManyFiles { event, limit: nofile },
        libc::ESRCH => Error::NoSuchProcess { event, pid: ctx.pid },
        _ => Error::Sys { call: "perf_event_open", event, source },
    }
}

/// `perf_event_open(attr, pid, cpu, group_fd, FD_CLOEXEC)`.
pub(crate) fn perf_event_open(
    attr: &mut perf_event_attr,
    pid: i32,
    cpu: i32,
    group: Option<RawFd>,
    ctx: &OpenCtx<'_>,
) -> Result<OwnedFd> {
    attr.size = std::mem::size_of::<perf_event_attr>() as u32;
    let flags = pes::bindings::PERF_FLAG_FD_CLOEXEC as libc::c_ulong;
    // SAFETY: `attr` is a valid, fully initialised perf_event_attr with `size` set; the
    // kernel reads it (and may write `size` back on E2BIG) and nothing else.
    let fd = unsafe { pes::perf_event_open(attr, pid, cpu, group.unwrap_or(-1), flags) };
    if fd < 0 {
        let errno = io::Error::last_os_error().raw_os_error().unwrap_or(0);
        return Err(classify(errno, ctx, paranoid(), nofile_limit()));
    }
    // SAFETY: perf_event_open returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The perf ioctls tp uses.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Ioctl {
    Enable,
    Disable,
    Reset,
}

/// ioctl on a perf fd; `group` applies it to the whole group (PERF_IOC_FLAG_GROUP).
pub(crate) fn ioctl(fd: &OwnedFd, op: Ioctl, group: bool, event: &str) -> Result<()> {
    let arg = if group { pes::bindings::PERF_IOC_FLAG_GROUP } else { 0 };
    let raw = fd.as_raw_fd();
    // SAFETY: `raw` is an open perf_event fd owned by the caller; these ioctls take an
    // integer flag argument and touch no user memory.
    let (rc, call) = unsafe {
        match op {
            Ioctl::Enable => (pes::ioctls::ENABLE(raw, arg), "ioctl(PERF_EVENT_IOC_ENABLE)"),
            Ioctl::Disable => (pes::ioctls::DISABLE(raw, arg), "ioctl(PERF_EVENT_IOC_DISABLE)"),
            Ioctl::Reset => (pes::ioctls::RESET(raw, arg), "ioctl(PERF_EVENT_IOC_RESET)"),
        }
    };
    if rc < 0 {
        return Err(Error::Sys {
            call,
            event: event.to_string(),
            source: io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// PERF_EVENT_IOC_SET_OUTPUT: `fd`'s records go to `target`'s ring.
pub(crate) fn set_output(fd: &OwnedFd, target: &OwnedFd, event: &str) -> Result<()> {
    // SAFETY: both are open perf fds; the ioctl takes the target fd as an integer.
    let rc = unsafe { pes::ioctls::SET_OUTPUT(fd.as_raw_fd(), target.as_raw_fd()) };
    if rc < 0 {
        let source = io::Error::last_os_error();
        return Err(Error::Sys {
            call: "ioctl(PERF_EVENT_IOC_SET_OUTPUT)",
            event: event.to_string(),
            source,
        });
    }
    Ok(())
}

/// PERF_EVENT_IOC_SET_BPF: run a BPF program (by fd) on every hit of this tracepoint,
/// kprobe/uprobe or sampling event.
pub(crate) fn set_bpf(fd: &OwnedFd, prog: RawFd, event: &str) -> Result<()> {
    // SAFETY: `fd` is an open perf fd; the ioctl takes the program's fd as an integer.
    let rc = unsafe { pes::ioctls::SET_BPF(fd.as_raw_fd(), prog as u32) };
    if rc < 0 {
        let source = io::Error::last_os_error();
        return Err(Error::Sys {
            call: "ioctl(PERF_EVENT_IOC_SET_BPF)",
            event: event.to_string(),
            source,
        });
    }
    Ok(())
}

/// The kernel's id of a perf event (PERF_EVENT_IOC_ID), as samples carry it.
pub(crate) fn event_id(fd: &OwnedFd, event: &str) -> Result<u64> {
    let mut id = 0u64;
    // SAFETY: ID writes one u64 through the pointer, which points at `id`.
    let rc = unsafe { pes::ioctls::ID(fd.as_raw_fd(), &mut id) };
    if rc < 0 {
        let source = io::Error::last_os_error();
        return Err(Error::Sys {
            call: "ioctl(PERF_EVENT_IOC_ID)",
            event: event.to_string(),
            source,
        });
    }
    Ok(id)
}

/// read(2) of a counter: the read_format layout, as u64s. Returns how many u64s were read.
pub(crate) fn read_counter(fd: &OwnedFd, buf: &mut [u64], event: &str) -> Result<usize> {
    // SAFETY: the kernel writes at most `size_of_val(buf)` bytes into `buf`.
    let n =
        unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), std::mem::size_of_val(buf)) };
    if n < 0 {
        return Err(Error::Sys {
            call: "read",
            event: event.to_string(),
            source: io::Error::last_os_error(),
        });
    }
    Ok(n as usize / 8)
}

/// A shared mapping of a perf fd (the ring buffer: one metadata page and 2^n data pages),
/// unmapped on drop.
#[derive(Debug)]
pub(crate) struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; the ring reader synchronises with the kernel
// through atomics on data_head/data_tail, and a Mapping has one owner.
unsafe impl Send for Mapping {}

impl Mapping {
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: ptr/len are exactly what mmap returned; nothing borrows the mapping past
        // the owner's drop.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// mmap `len` bytes of a perf fd read-write (so tp can advance data_tail).
pub(crate) fn mmap_ring(fd: &OwnedFd, len: usize, event: &str) -> Result<Mapping> {
    // SAFETY: a fresh shared mapping of the fd; the kernel validates len (1 + 2^n pages).
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd.as_raw_fd(),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        let source = io::Error::last_os_error();
        let hint = if source.raw_os_error() == Some(libc::EPERM) {
            " (the locked-memory limit: kernel.perf_event_mlock_kb; use fewer pages)"
        } else {
            ""
        };
        return Err(Error::Sys { call: "mmap", event: format!("{event}{hint}"), source });
    }
    Ok(Mapping { ptr: NonNull::new(p.cast()).expect("mmap returned NULL"), len })
}

/// poll(2) on perf fds for readability (ring data past the watermark, or the event's task
/// gone: POLLHUP). Returns the revents per fd.
pub(crate) fn poll(fds: &[RawFd], timeout_ms: i32) -> Result<Vec<i16>> {
    let mut p: Vec<libc::pollfd> =
        fds.iter().map(|&fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 }).collect();
    // SAFETY: `p` is a valid array of pollfd of the given length.
    let rc = unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, timeout_ms) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(vec![0; fds.len()]);
        }
        return Err(Error::Sys { call: "poll", event: "ring buffers".into(), source: e });
    }
    Ok(p.iter().map(|p| p.revents).collect())
}

/// The system page size.
pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as usize
    } else {
        4096
    }
}

/// `/proc/sys/kernel/perf_event_paranoid`, if readable.
pub fn paranoid() -> Option<i32> {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid").ok()?.trim().parse().ok()
}

/// `kernel.perf_event_max_stack`: the most frames a callchain may ask for.
pub fn max_stack() -> Option<u16> {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_max_stack").ok()?.trim().parse().ok()
}

/// RLIMIT_NOFILE's soft limit.
pub(crate) fn nofile_limit() -> u64 {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes one rlimit into `r`.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } == 0 {
        r.rlim_cur
    } else {
        0
    }
}

/// The CPUs perf events can be opened on (`/sys/devices/system/cpu/online`).
pub(crate) fn online_cpus() -> Result<Vec<u32>> {
    let path = "/sys/devices/system/cpu/online";
    let text = std::fs::read_to_string(path).map_err(|source| Error::Sys {
        call: "read",
        event: path.into(),
        source,
    })?;
    crate::events::parse_cpu_list(text.trim()).map_err(|message| Error::Sys {
        call: "parse",
        event: path.into(),
        source: io::Error::new(io::ErrorKind::InvalidData, message),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(hardware: bool, system_wide: bool) -> OpenCtx<'static> {
        OpenCtx { event: "cycles", hardware, system_wide, pid: 42 }
    }

    #[test]
    fn errno_becomes_a_decision() {
        let e = classify(libc::EACCES, &ctx(false, true), Some(2), 1024);
        let s = e.to_string();
        assert!(matches!(e, Error::Permission { .. }), "{s}");
        assert!(s.contains("perf_event_paranoid is 2") && s.contains("CAP_PERFMON"), "{s}");
        assert!(classify(libc::ENOENT, &ctx(true, false), Some(2), 1024).is_not_supported());
        assert!(classify(libc::EOPNOTSUPP, &ctx(false, false), None, 1024).is_not_supported());
        // ENOENT for a software event is a real error, not a missing PMU.
        assert!(!classify(libc::ENOENT, &ctx(false, false), None, 1024).is_not_supported());
        let e = classify(libc::EMFILE, &ctx(false, false), None, 1024);
        assert!(e.to_string().contains("limit 1024"), "{e}");
        let e = classify(libc::ESRCH, &ctx(false, false), None, 1024);
        assert!(e.to_string().contains("process 42"), "{e}");
        let e = classify(libc::EINVAL, &ctx(false, false), None, 1024);
        assert_eq!(e.to_string(), "perf_event_open cycles: Invalid argument (os error 22)");
    }
}
