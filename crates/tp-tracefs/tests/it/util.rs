use tp_tracefs::{EventId, Tracefs};

/// tracefs, or a loud failure.
pub fn tracefs() -> Tracefs {
    match Tracefs::discover() {
        Ok(t) => t,
        Err(e) => panic!("these tests need root and tracefs (CI runs as root): {e}"),
    }
}

pub fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

pub fn getppid_n(n: usize) {
    for _ in 0..n {
        // SAFETY: getppid has no preconditions and cannot fail.
        unsafe { libc::syscall(libc::SYS_getppid) };
    }
}

/// Whether `ev` is another process's dynamic event rather than one of the kernel's: a
/// uprobe/kprobe (its format has `__probe_ip`, a return probe's `__probe_func`) or an event gone since it was listed. Other
/// tests and tools create and remove probes while these tests list events; the kernel's own
/// events neither come nor go.
pub fn is_probe_or_gone(tfs: &Tracefs, ev: &EventId) -> bool {
    match tfs.event_format(ev) {
        Ok(fmt) => fmt.field("__probe_ip").is_some() || fmt.field("__probe_func").is_some(),
        // Gone when its format was read (it may be back by now, under the same name).
        Err(e) => vanished(&e),
    }
}

/// Whether reading an event's file failed because the event was removed meanwhile.
pub fn vanished(e: &tp_tracefs::Error) -> bool {
    matches!(e.errno(), Some(libc::ENOENT | libc::ENODEV))
}

/// `events` without other processes' dynamic events (see [`is_probe_or_gone`]).
pub fn kernel_events(tfs: &Tracefs, events: &[EventId]) -> Vec<EventId> {
    events.iter().filter(|e| !is_probe_or_gone(tfs, e)).cloned().collect()
}

pub fn sys_enter() -> EventId {
    EventId::new("raw_syscalls", "sys_enter")
}

/// Walk raw ring-buffer pages (x86_64 layout: 16-byte header, 4-byte event headers) and call
/// `f` with each data record.
pub fn for_each_record(pages: &[u8], mut f: impl FnMut(&[u8])) {
    for page in pages.chunks(4096) {
        if page.len() < 16 {
            continue;
        }
        let commit = u64::from_ne_bytes(page[8..16].try_into().unwrap());
        let len = (commit & ((1 << 27) - 1)) as usize;
        let data = &page[16..(16 + len).min(page.len())];
        let mut i = 0;
        while i + 4 <= data.len() {
            let h = u32::from_ne_bytes(data[i..i + 4].try_into().unwrap());
            let type_len = h & 31;
            match type_len {
                29 => {
                    if i + 8 > data.len() {
                        break;
                    }
                    let l = u32::from_ne_bytes(data[i + 4..i + 8].try_into().unwrap()) as usize;
                    if l == 0 {
                        break;
                    }
                    i += 4 + l;
                }
                30 | 31 => i += 8,
                0 => {
                    let l = u32::from_ne_bytes(data[i + 4..i + 8].try_into().unwrap()) as usize;
                    f(&data[i + 8..(i + 4 + l).min(data.len())]);
                    i += 4 + l;
                }
                t => {
                    let l = t as usize * 4;
                    f(&data[i + 4..(i + 4 + l).min(data.len())]);
                    i += 4 + l;
                }
            }
        }
    }
}

/// Count `raw_syscalls:sys_enter` records with syscall `nr` from `pid` in raw pages.
pub fn count_sys_enter(tfs: &Tracefs, pages: &[u8], pid: i32, nr: i64) -> usize {
    let fmt = tfs.event_format(&sys_enter()).unwrap();
    let id_off = fmt.field("id").unwrap().offset;
    let mut n = 0;
    for_each_record(pages, |r| {
        if r.len() < id_off + 8 {
            return;
        }
        let ty = u16::from_ne_bytes(r[0..2].try_into().unwrap()) as u32;
        let p = i32::from_ne_bytes(r[4..8].try_into().unwrap());
        let id = i64::from_ne_bytes(r[id_off..id_off + 8].try_into().unwrap());
        if ty == fmt.id && p == pid && id == nr {
            n += 1;
        }
    });
    n
}
