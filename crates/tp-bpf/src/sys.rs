//! Every `bpf(2)` call tp makes, on hand-written `union bpf_attr` layouts
//! (include/uapi/linux/bpf.h): maps, program loading with the verifier's log, raw tracepoint
//! attachment, test runs (how BEGIN and END run). Each failure says which call failed and,
//! for a refusal, which setting stands in the way.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use crate::error::{Error, Result};

const MAP_CREATE: u32 = 0;
const MAP_LOOKUP_ELEM: u32 = 1;
const MAP_UPDATE_ELEM: u32 = 2;
const MAP_DELETE_ELEM: u32 = 3;
const MAP_GET_NEXT_KEY: u32 = 4;
const PROG_LOAD: u32 = 5;
const PROG_TEST_RUN: u32 = 10;
const RAW_TRACEPOINT_OPEN: u32 = 17;
const PROG_GET_NEXT_ID: u32 = 11;

/// `union bpf_attr` is at most this big in the kernels tp knows; zeroed past what a command
/// uses, as the kernel requires.
#[repr(C, align(8))]
struct Attr([u8; 144]);

impl Attr {
    fn new() -> Attr {
        Attr([0; 144])
    }
    fn u32_at(&mut self, off: usize, v: u32) -> &mut Attr {
        self.0[off..off + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn u64_at(&mut self, off: usize, v: u64) -> &mut Attr {
        self.0[off..off + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn bytes_at(&mut self, off: usize, b: &[u8]) -> &mut Attr {
        self.0[off..off + b.len()].copy_from_slice(b);
        self
    }
    fn get_u32(&self, off: usize) -> u32 {
        u32::from_ne_bytes(self.0[off..off + 4].try_into().expect("4 bytes"))
    }
}

fn ptr<T>(p: *const T) -> u64 {
    p as usize as u64
}

/// The setting that explains a refusal of bpf(2), if one does.
pub fn refusal_hint(errno: i32) -> Option<String> {
    // EACCES from BPF_PROG_LOAD is the verifier's refusal, not a permission.
    if errno != libc::EPERM {
        return None;
    }
    let setting = std::fs::read_to_string("/proc/sys/kernel/unprivileged_bpf_disabled")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "?".into());
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    Some(if root {
        "refused to root: a security module (lockdown, SELinux) or a seccomp filter forbids BPF here".into()
    } else {
        format!(
            "BPF tracing needs root (CAP_BPF and CAP_PERFMON); kernel.unprivileged_bpf_disabled is {setting}{}",
            if setting == "0" { "" } else { ", so no user without CAP_BPF may load programs" }
        )
    })
}

fn bpf(cmd: u32, attr: &mut Attr, what: &str) -> Result<i64> {
    // SAFETY: `attr` is a zero-initialised `union bpf_attr` of 144 bytes with the fields of
    // `cmd` filled in; pointers in it point into buffers that outlive the call.
    let rc = unsafe {
        libc::syscall(libc::SYS_bpf, cmd as libc::c_long, attr.0.as_mut_ptr(), attr.0.len() as u32)
    };
    if rc < 0 {
        let source = io::Error::last_os_error();
        let hint = refusal_hint(source.raw_os_error().unwrap_or(0));
        return Err(Error::Sys { call: format!("bpf({what})"), source, hint });
    }
    Ok(rc)
}

fn fd(rc: i64) -> OwnedFd {
    // SAFETY: the bpf() command returned a new file descriptor that nothing else owns.
    unsafe { OwnedFd::from_raw_fd(rc as i32) }
}

/// The kernel's object names: 15 bytes of `[A-Za-z0-9_.]`.
fn obj_name(name: &str) -> [u8; 16] {
    let mut out = [0u8; 16];
    for (o, c) in out.iter_mut().zip(
        name.bytes().filter(|c| c.is_ascii_alphanumeric() || *c == b'_' || *c == b'.').take(15),
    ) {
        *o = c;
    }
    out
}

/// BPF_MAP_CREATE.
pub fn map_create(kind: u32, key: u32, value: u32, entries: u32, name: &str) -> Result<OwnedFd> {
    let mut a = Attr::new();
    a.u32_at(0, kind)
        .u32_at(4, key)
        .u32_at(8, value)
        .u32_at(12, entries)
        .bytes_at(28, &obj_name(name));
    bpf(MAP_CREATE, &mut a, &format!("BPF_MAP_CREATE {name}")).map(fd)
}

fn elem_attr(map: BorrowedFd<'_>, key: *const u8, value: u64, flags: u64) -> Attr {
    let mut a = Attr::new();
    a.u32_at(0, map.as_raw_fd() as u32).u64_at(8, ptr(key)).u64_at(16, value).u64_at(24, flags);
    a
}

/// BPF_MAP_LOOKUP_ELEM into `value` (for a per-CPU map: one value per possible CPU, each
/// rounded up to 8 bytes). False when the key is absent.
pub fn map_lookup(map: BorrowedFd<'_>, key: &[u8], value: &mut [u8]) -> Result<bool> {
    let mut a = elem_attr(map, key.as_ptr(), ptr(value.as_mut_ptr()), 0);
    match bpf(MAP_LOOKUP_ELEM, &mut a, "BPF_MAP_LOOKUP_ELEM") {
        Ok(_) => Ok(true),
        Err(Error::Sys { source, .. }) if source.raw_os_error() == Some(libc::ENOENT) => Ok(false),
        Err(e) => Err(e),
    }
}

/// BPF_MAP_UPDATE_ELEM (BPF_ANY).
pub fn map_update(map: BorrowedFd<'_>, key: &[u8], value: &[u8]) -> Result<()> {
    let mut a = elem_attr(map, key.as_ptr(), ptr(value.as_ptr()), 0);
    bpf(MAP_UPDATE_ELEM, &mut a, "BPF_MAP_UPDATE_ELEM").map(drop)
}

/// BPF_MAP_DELETE_ELEM; an absent key is not an error.
pub fn map_delete(map: BorrowedFd<'_>, key: &[u8]) -> Result<()> {
    let mut a = elem_attr(map, key.as_ptr(), 0, 0);
    match bpf(MAP_DELETE_ELEM, &mut a, "BPF_MAP_DELETE_ELEM") {
        Err(Error::Sys { source, .. }) if source.raw_os_error() == Some(libc::ENOENT) => Ok(()),
        r => r.map(drop),
    }
}

/// BPF_MAP_GET_NEXT_KEY: the key after `key` (the first with `None`); false at the end.
pub fn map_next_key(map: BorrowedFd<'_>, key: Option<&[u8]>, next: &mut [u8]) -> Result<bool> {
    let kp = key.map_or(std::ptr::null(), |k| k.as_ptr());
    let mut a = elem_attr(map, kp, ptr(next.as_mut_ptr()), 0);
    match bpf(MAP_GET_NEXT_KEY, &mut a, "BPF_MAP_GET_NEXT_KEY") {
        Ok(_) => Ok(true),
        Err(Error::Sys { source, .. }) if source.raw_os_error() == Some(libc::ENOENT) => Ok(false),
        Err(e) => Err(e),
    }
}

/// What BPF_PROG_LOAD gave: the program, or the verifier's refusal and its log.
pub enum Loaded {
    Ok(OwnedFd),
    Refused { errno: i32, log: String },
}

/// BPF_PROG_LOAD of encoded instructions; the verifier's log is asked for only on a second
/// load after a refusal (a log costs time on every load).
pub fn prog_load(kind: u32, insns: &[u8], name: &str, attach_type: u32) -> Result<Loaded> {
    let license = b"GPL\0";
    let load = |log: Option<&mut Vec<u8>>| {
        let mut a = Attr::new();
        a.u32_at(0, kind)
            .u32_at(4, (insns.len() / 8) as u32)
            .u64_at(8, ptr(insns.as_ptr()))
            .u64_at(16, ptr(license.as_ptr()))
            .bytes_at(48, &obj_name(name))
            .u32_at(68, attach_type);
        if let Some(buf) = log {
            a.u32_at(24, 1).u32_at(28, buf.len() as u32).u64_at(32, ptr(buf.as_mut_ptr()));
        }
        bpf(PROG_LOAD, &mut a, &format!("BPF_PROG_LOAD {name}"))
    };
    match load(None) {
        Ok(rc) => Ok(Loaded::Ok(fd(rc))),
        Err(Error::Sys { source, hint: None, .. })
            if source.raw_os_error() != Some(libc::E2BIG) =>
        {
            let errno = source.raw_os_error().unwrap_or(0);
            let mut buf = vec![0u8; 1 << 22];
            match load(Some(&mut buf)) {
                Ok(rc) => Ok(Loaded::Ok(fd(rc))),
                Err(_) => {
                    let end = buf.iter().position(|&c| c == 0).unwrap_or(buf.len());
                    Ok(Loaded::Refused {
                        errno,
                        log: String::from_utf8_lossy(&buf[..end]).into_owned(),
                    })
                }
            }
        }
        Err(e) => Err(e),
    }
}

/// BPF_RAW_TRACEPOINT_OPEN: the program runs on the tracepoint until the fd is closed.
pub fn raw_tracepoint_open(name: &str, prog: BorrowedFd<'_>) -> Result<OwnedFd> {
    let c = std::ffi::CString::new(name)
        .map_err(|_| Error::Machine(format!("bad tracepoint name {name:?}")))?;
    let mut a = Attr::new();
    a.u64_at(0, ptr(c.as_ptr())).u32_at(8, prog.as_raw_fd() as u32);
    bpf(RAW_TRACEPOINT_OPEN, &mut a, &format!("BPF_RAW_TRACEPOINT_OPEN {name}")).map(fd)
}

/// BPF_PROG_TEST_RUN of a raw tracepoint program with `ctx` as its arguments, on this CPU.
pub fn test_run(prog: BorrowedFd<'_>, ctx: &[u8]) -> Result<u32> {
    let mut a = Attr::new();
    a.u32_at(0, prog.as_raw_fd() as u32).u32_at(40, ctx.len() as u32).u64_at(48, ptr(ctx.as_ptr()));
    bpf(PROG_TEST_RUN, &mut a, "BPF_PROG_TEST_RUN")?;
    Ok(a.get_u32(4))
}

/// Possible CPUs (`/sys/devices/system/cpu/possible`): a per-CPU map has one value for each.
pub fn possible_cpus() -> Result<usize> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/possible")
        .map_err(|e| Error::Machine(format!("/sys/devices/system/cpu/possible: {e}")))?;
    let mut n = 0;
    for part in text.trim().split(',') {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        let (lo, hi): (usize, usize) = (
            lo.parse().map_err(|_| Error::Machine(format!("cpu list {text:?}")))?,
            hi.parse().map_err(|_| Error::Machine(format!("cpu list {text:?}")))?,
        );
        n = n.max(hi + 1);
        let _ = lo;
    }
    Ok(n)
}

/// Every BPF program loaded on the machine, by id (BPF_PROG_GET_NEXT_ID).
pub fn prog_ids() -> Result<Vec<u32>> {
    let mut ids = Vec::new();
    let mut at = 0u32;
    loop {
        let mut a = Attr::new();
        a.u32_at(0, at);
        match bpf(PROG_GET_NEXT_ID, &mut a, "BPF_PROG_GET_NEXT_ID") {
            Ok(_) => {
                at = a.get_u32(4);
                ids.push(at);
            }
            Err(Error::Sys { source, .. }) if source.raw_os_error() == Some(libc::ENOENT) => {
                return Ok(ids)
            }
            Err(e) => return Err(e),
        }
    }
}
