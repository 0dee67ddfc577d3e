//! The per-thread context: the RCU reader, the cached thread id and the thread's recorder
//! ring. One `thread_local!` access per enabled event. Above the ring and the RCU, below
//! the recorder and the sites: it knows the ring it holds, not who gave it.

use crate::rcu::{self, Reader, ReaderSlot};
use crate::ring::{Ring, GENERATION};
use std::cell::Cell;
use std::sync::atomic::Ordering;

pub(crate) struct ThreadCtx {
    pub reader: Reader,
    tid: Cell<i32>,
    /// The recorder buffer of this thread, valid while `rec_gen` equals the recorder's
    /// current generation (checked inside a read section).
    pub rec: Cell<*const Ring>,
    pub rec_gen: Cell<u64>,
}

impl ThreadCtx {
    const fn new() -> ThreadCtx {
        ThreadCtx {
            reader: Reader::new(),
            tid: Cell::new(0),
            rec: Cell::new(core::ptr::null()),
            rec_gen: Cell::new(u64::MAX),
        }
    }

    /// The thread id when [`ThreadCtx::tid`] was called before (the recorder calls it when
    /// it gives the thread a ring), else 0.
    #[inline(always)]
    pub fn cached_tid(&self) -> i32 {
        self.tid.get()
    }

    #[inline(always)]
    pub fn tid(&self) -> i32 {
        let t = self.tid.get();
        if t != 0 {
            return t;
        }
        let t = gettid();
        self.tid.set(t);
        t
    }
}

impl Drop for ThreadCtx {
    fn drop(&mut self) {
        RECORDING_CTX.with(|c| c.set(core::ptr::null()));
        self.reader.lock();
        let gen = GENERATION.load(Ordering::Acquire);
        if gen != 0 && self.rec_gen.get() == gen {
            // SAFETY: ring of the current generation, alive until the recording's finish
            // (which waits for this read section); this thread is its producer, and will not
            // produce again.
            unsafe { (*self.rec.get()).close_producer() };
            self.rec_gen.set(u64::MAX);
        }
        self.reader.unlock();
    }
}

thread_local! {
    static CTX: ThreadCtx = const { ThreadCtx::new() };
    /// `CTX` once this thread records (set by the recorder when it gives the thread a ring,
    /// cleared when `CTX` is torn down): a plain load for the recorder's fast path, without
    /// the destructor-registration check every `CTX` access makes. Set only when the clock is
    /// the TSC and readers are light (`rcu::light_readers`), so that the fast path, which
    /// runs only when it is set, tests neither.
    static RECORDING_CTX: Cell<*const ThreadCtx> = const { Cell::new(core::ptr::null()) };
}

/// This thread's context if it records (see `RECORDING_CTX`); null otherwise.
#[inline(always)]
pub(crate) fn recording_ctx() -> *const ThreadCtx {
    RECORDING_CTX.with(Cell::get)
}

/// Mark `ctx` (this thread's context) as recording, if the recorder's fast path may take its
/// events (see `RECORDING_CTX`).
pub(crate) fn set_recording_ctx(ctx: &ThreadCtx) {
    if crate::clock::uses_tsc() && rcu::light_readers() {
        RECORDING_CTX.with(|c| c.set(ctx));
    }
}

/// Run `f` with this thread's context; `None` while the thread is being torn down.
#[inline(always)]
pub(crate) fn with<R>(f: impl FnOnce(&ThreadCtx) -> R) -> Option<R> {
    CTX.try_with(f).ok()
}

/// Leave the read section [`Reader::enter_fast`] opened on `slot`.
#[inline(always)]
pub(crate) fn exit_read_section(slot: &'static ReaderSlot) {
    Reader::exit(Some(slot));
}

/// [`rcu::synchronize`] from this thread: its own read section, if any, is not waited for.
pub(crate) fn synchronize() {
    if CTX.try_with(|c| rcu::synchronize(Some(&c.reader))).is_err() {
        rcu::synchronize(None);
    }
}

/// [`rcu::retire`] from this thread (kept for later when called inside its read section).
pub(crate) fn retire(garbage: Box<dyn Send>) {
    let mut garbage = Some(garbage);
    let _ = CTX.try_with(|c| garbage.take().map(|g| rcu::retire(g, Some(&c.reader))));
    if let Some(g) = garbage {
        rcu::retire(g, None);
    }
}

/// The kernel thread id of the calling thread (what `common_pid` records).
pub fn gettid() -> i32 {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid has no arguments and cannot fail.
        unsafe { libc::syscall(libc::SYS_gettid) as i32 }
    }
    #[cfg(not(target_os = "linux"))]
    {
        std::process::id() as i32
    }
}

/// Guard that leaves a read section even when a probe panics.
pub(crate) struct ReadGuard(Option<&'static ReaderSlot>);

impl ReadGuard {
    #[inline(always)]
    pub fn new(ctx: &ThreadCtx) -> Self {
        ReadGuard(ctx.reader.enter())
    }
}

impl Drop for ReadGuard {
    #[inline(always)]
    fn drop(&mut self) {
        Reader::exit(self.0);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    #[test]
    fn own_section_does_not_block_it() {
        crate::rcu::init();
        super::with(|c| {
            c.reader.lock();
            // This thread's own section is skipped (it can't end while we wait in it).
            super::synchronize();
            c.reader.unlock();
        });
    }
}
