//! User stacks for Rust events (opt-in: [`crate::set_stacks`], `TP_STACKS=GLOB`,
//! [`crate::Site::set_stacks`]): the firing thread walks its frame pointers and writes the
//! return addresses right after the event, in its own pages, as a record of the kernel's
//! `ftrace:user_stack` layout (`tgid`, `caller[8]`). trace.dat readers (tp report,
//! trace-cmd) print it as they print the kernel's `userstacktrace` records: `<user stack
//! trace>` and ` =>  <address>` lines.
//!
//! The walk needs frame pointers in the program (`RUSTFLAGS="-C force-frame-pointers=yes"`);
//! without them it finds fewer or wrong frames, never a fault: it reads only inside the
//! thread's stack (bounds taken once per thread), each frame above the one before.

use crate::record::{Common, RecordWriter};
use std::cell::Cell;
use std::sync::atomic::AtomicU16;

/// Return addresses in one record (the kernel's `FTRACE_STACK_ENTRIES` for user stacks).
pub const DEPTH: usize = 8;

/// The ID of the `ftrace:user_stack` format in a recording: just below the Rust events'.
pub(crate) static USER_STACK_ID: AtomicU16 = AtomicU16::new(tp_format::format::RUST_ID_BASE - 1);

/// Size of a `user_stack` record: common fields, `tgid` (and padding), `caller[8]`.
pub(crate) const RECORD_LEN: usize = 16 + 8 * DEPTH;

/// The `format` file text of `ftrace:user_stack` as the kernel has it (64-bit).
pub(crate) fn format_text() -> String {
    let id = USER_STACK_ID.load(std::sync::atomic::Ordering::Relaxed);
    let ps = "\\t=> %ps\\n";
    let args: Vec<String> = (0..DEPTH).map(|i| format!("(void *)REC->caller[{i}]")).collect();
    format!(
        "name: user_stack\nID: {id}\nformat:\n\
         \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
         \tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
         \tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
         \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
         \tfield:unsigned int tgid;\toffset:8;\tsize:4;\tsigned:0;\n\
         \tfield:unsigned long caller[{DEPTH}];\toffset:16;\tsize:{};\tsigned:0;\n\n\
         print fmt: \"{}\", {}\n",
        8 * DEPTH,
        ps.repeat(DEPTH),
        args.join(", ")
    )
}

/// The firing function's user stack: up to [`DEPTH`] return addresses, 0 after the last.
///
/// `fp` is the frame pointer of `__tp_fire_NAME` (read there by [`frame_pointer`]), the
/// function the firing function called: its frame record's return address is the first
/// entry. Taken there rather than counted up from here because an optimized build may
/// reach `__tp_fire_all_NAME` by a tail call, leaving one frame fewer between (its frame
/// record then sits at the same address, with the same contents).
pub(crate) fn capture(fp: usize) -> [u64; DEPTH] {
    let mut out = [0u64; DEPTH];
    if fp == 0 {
        return out;
    }
    let (lo, hi) = stack_bounds();
    walk(fp, lo, hi, 0, &mut out);
    out
}

/// Follow the frame records (`[fp]`: the caller's frame pointer, `[fp + 8]`: the return
/// address) from `fp`, leaving out the first `skip` return addresses. Reads only
/// `[lo, hi)`, and each next record must be above the last (stacks grow down).
fn walk(mut fp: usize, lo: usize, hi: usize, skip: usize, out: &mut [u64; DEPTH]) {
    let mut n = 0;
    let mut seen = 0;
    while n < DEPTH && fp % 8 == 0 && fp >= lo && fp.checked_add(16).is_some_and(|e| e <= hi) {
        // SAFETY: `fp..fp + 16` lies inside this thread's stack, which is mapped and readable
        // for the thread's whole life.
        let (next, ret) = unsafe { (*(fp as *const usize), *((fp + 8) as *const usize)) };
        if ret == 0 {
            break;
        }
        if seen >= skip {
            out[n] = ret as u64;
            n += 1;
        }
        seen += 1;
        if next <= fp {
            break;
        }
        fp = next;
    }
}

/// This function's frame pointer register (where frame pointers are kept: the address of
/// its frame record); `None` on architectures without a known one.
#[inline(always)]
pub fn frame_pointer() -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    {
        let fp: usize;
        // SAFETY: reads a register, touches no memory.
        unsafe {
            std::arch::asm!("mov {}, rbp", out(reg) fp, options(pure, nomem, nostack, preserves_flags))
        };
        Some(fp)
    }
    #[cfg(target_arch = "aarch64")]
    {
        let fp: usize;
        // SAFETY: reads a register, touches no memory.
        unsafe {
            std::arch::asm!("mov {}, x29", out(reg) fp, options(pure, nomem, nostack, preserves_flags))
        };
        Some(fp)
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        None
    }
}

thread_local! {
    /// This thread's stack, `[low, high)`; (0, 0) until first asked, (1, 1) if unknown.
    static BOUNDS: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
}

fn stack_bounds() -> (usize, usize) {
    BOUNDS
        .try_with(|b| {
            if b.get() == (0, 0) {
                b.set(query_stack_bounds().unwrap_or((1, 1)));
            }
            b.get()
        })
        .unwrap_or((1, 1))
}

/// The calling thread's stack from `pthread_getattr_np` (for the main thread glibc reads
/// `/proc/self/maps` and the stack rlimit: once per thread).
fn query_stack_bounds() -> Option<(usize, usize)> {
    // SAFETY: the attr is initialized by pthread_getattr_np before use and destroyed after;
    // pthread_self is always valid.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return None;
        }
        let mut addr: *mut libc::c_void = std::ptr::null_mut();
        let mut size: libc::size_t = 0;
        let r = libc::pthread_attr_getstack(&attr, &mut addr, &mut size);
        libc::pthread_attr_destroy(&mut attr);
        (r == 0 && !addr.is_null()).then(|| (addr as usize, addr as usize + size))
    }
}

/// This process's named mappings (`/proc/self/maps`, one line each, as `tp record` saves a
/// traced process's), for the trace.dat's PROCMAPS option: what a reader needs to tell the
/// file and offset of a user stack's return address later.
pub(crate) fn self_maps() -> tp_format::tracedat::ProcMaps {
    use tp_format::tracedat::{LibMap, ProcMaps};
    let text = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let maps = text
        .lines()
        .filter_map(tp_format::maps::parse_proc_maps_line)
        .filter(|m| !m.name.is_empty())
        .map(|m| LibMap { start: m.start, end: m.end, name: m.name.to_string() })
        .collect();
    let comm = std::fs::read_to_string("/proc/self/comm").unwrap_or_default();
    ProcMaps { pid: std::process::id() as i32, comm: comm.trim().to_string(), maps }
}

/// Write `frames` as a `user_stack` record (the recorder's `write` callback).
pub(crate) fn write_record(frames: &[u64; DEPTH], w: &mut RecordWriter, common: Common) {
    #[derive(Clone, Copy)]
    #[repr(C)]
    struct UserStack {
        common: Common,
        tgid: u32,
        pad: u32,
        caller: [u64; DEPTH],
    }
    w.fixed(UserStack { common, tgid: std::process::id(), pad: 0, caller: *frames });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_parses_as_the_kernels() {
        let f = tp_format::EventFormat::parse("ftrace", &format_text()).unwrap();
        assert_eq!(f.name, "user_stack");
        let c = f.field("caller").unwrap();
        assert_eq!((c.offset, c.size), (16, 64));
        assert_eq!(f.field("tgid").unwrap().offset, 8);
        assert_eq!(std::mem::size_of::<[u64; DEPTH]>() + 16, RECORD_LEN);
    }

    #[test]
    fn own_maps_hold_this_code() {
        let m = self_maps();
        let here = own_maps_hold_this_code as fn() as usize as u64;
        let exe = std::env::current_exe().unwrap();
        let holds = |l: &&tp_format::tracedat::LibMap| l.start <= here && here < l.end;
        let map = m.maps.iter().find(holds).expect("a mapping holds this function");
        assert_eq!(std::path::Path::new(&map.name), exe);
        assert_eq!(m.pid, std::process::id() as i32);
    }

    #[test]
    fn walk_stays_in_bounds_and_goes_up() {
        // Three frame records in a fake stack, the last pointing below itself.
        let mut s = [0usize; 16];
        let base = s.as_ptr() as usize;
        let at = |i: usize| base + 8 * i;
        s[2] = at(6);
        s[3] = 0x1111;
        s[6] = at(10);
        s[7] = 0x2222;
        s[10] = at(2); // loops back down: stop
        s[11] = 0x3333;
        let (lo, hi) = (base, base + 8 * s.len());
        let mut out = [0u64; DEPTH];
        walk(at(2), lo, hi, 0, &mut out);
        assert_eq!(&out[..4], &[0x1111, 0x2222, 0x3333, 0]);
        let mut out = [0u64; DEPTH];
        walk(at(2), lo, hi, 1, &mut out);
        assert_eq!(&out[..3], &[0x2222, 0x3333, 0]);
        // Outside the bounds: nothing read.
        let mut out = [0u64; DEPTH];
        walk(at(2), lo + 64, hi, 0, &mut out);
        assert_eq!(out, [0; DEPTH]);
        walk(hi - 8, lo, hi, 0, &mut out);
        assert_eq!(out, [0; DEPTH]);
    }
}
