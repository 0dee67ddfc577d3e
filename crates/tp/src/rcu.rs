//! Read-copy-update for probe arrays and recorder buffers, with no lock and no shared write
//! on the read side.
//!
//! Each thread that fires an enabled tracepoint owns a [`ReaderSlot`] (allocated once, reused
//! after the thread exits, never freed). A read section stores `epoch | 1` into the thread's
//! own slot, then reads the published pointer; leaving stores 0. An updater publishes a new
//! pointer, advances the epoch, and [`synchronize`] waits until every slot is idle or entered
//! after the advance; only then is the old object freed.
//!
//! The reader's store and its later load need store->load ordering. Instead of a full fence
//! on every event, the updater forces one on every running thread with
//! `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)` (the asymmetric-fence scheme of user-space
//! RCU), and readers use a compiler fence. Where membarrier is unavailable (old kernels,
//! Miri) readers use a real `SeqCst` fence.

use std::cell::Cell;
#[cfg(not(loom))]
use std::sync::atomic::{compiler_fence, fence, AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::sync::Mutex;
// Under `--cfg loom` the protocol runs on loom's model of the memory model (see the loom test
// at the end of this file); readers then always use real fences.
#[cfg(loom)]
use loom::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU64, Ordering};
#[cfg(loom)]
fn compiler_fence(o: Ordering) {
    fence(o)
}

/// One thread's read-side state, on cache lines of its own (its owner writes it twice per
/// event).
#[repr(align(128))]
pub struct ReaderSlot {
    /// 0 when idle, `epoch | 1` inside a read section.
    state: AtomicU64,
    in_use: AtomicBool,
    next: *const ReaderSlot,
}

// SAFETY: `next` is written once before the slot is published and never changed; the rest
// are atomics.
unsafe impl Sync for ReaderSlot {}
// SAFETY: as above.
unsafe impl Send for ReaderSlot {}

#[cfg(not(loom))]
static SLOTS: AtomicPtr<ReaderSlot> = AtomicPtr::new(core::ptr::null_mut());
#[cfg(not(loom))]
static EPOCH: AtomicU64 = AtomicU64::new(2);
#[cfg(not(loom))]
static LIGHT_READERS: AtomicBool = AtomicBool::new(false);
#[cfg(not(loom))]
static UPDATERS: Mutex<()> = Mutex::new(());
#[cfg(loom)]
loom::lazy_static! {
    static ref SLOTS: AtomicPtr<ReaderSlot> = AtomicPtr::new(core::ptr::null_mut());
    static ref EPOCH: AtomicU64 = AtomicU64::new(2);
    static ref LIGHT_READERS: AtomicBool = AtomicBool::new(false);
    static ref UPDATERS: loom::sync::Mutex<()> = loom::sync::Mutex::new(());
}
/// Objects retired by updaters running inside a read section, freed by a later synchronize.
static DEFERRED: Mutex<Vec<Box<dyn Send>>> = Mutex::new(Vec::new());

/// Try to switch readers to compiler-only fences (call before any reader may run).
pub fn init() {
    #[cfg(all(target_os = "linux", not(miri)))]
    {
        const REGISTER_PRIVATE_EXPEDITED: libc::c_int = 16;
        // SAFETY: membarrier takes (cmd, flags, cpu_id) integers and touches no memory.
        let r = unsafe { libc::syscall(libc::SYS_membarrier, REGISTER_PRIVATE_EXPEDITED, 0, 0) };
        if r == 0 && std::env::var_os("TP_NO_MEMBARRIER").is_none() {
            LIGHT_READERS.store(true, Ordering::SeqCst);
        }
    }
}

/// Whether readers use compiler-only fences (set once by [`init`], never cleared).
pub fn light_readers() -> bool {
    LIGHT_READERS.load(Ordering::Relaxed)
}

fn heavy_fence() {
    #[cfg(all(target_os = "linux", not(miri)))]
    if LIGHT_READERS.load(Ordering::SeqCst) {
        const PRIVATE_EXPEDITED: libc::c_int = 8;
        // SAFETY: as in `init`; registration succeeded so this command is allowed.
        let r = unsafe { libc::syscall(libc::SYS_membarrier, PRIVATE_EXPEDITED, 0, 0) };
        assert_eq!(r, 0, "membarrier(PRIVATE_EXPEDITED) failed after registration");
    }
    fence(Ordering::SeqCst);
}

fn alloc_slot() -> &'static ReaderSlot {
    let mut p = SLOTS.load(Ordering::Acquire);
    while !p.is_null() {
        // SAFETY: slots are leaked and never freed; `p` came from the list.
        let s = unsafe { &*p };
        if !s.in_use.load(Ordering::Relaxed)
            && s.in_use.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_ok()
        {
            return s;
        }
        p = s.next as *mut ReaderSlot;
    }
    let slot = Box::leak(Box::new(ReaderSlot {
        state: AtomicU64::new(0),
        in_use: AtomicBool::new(true),
        next: core::ptr::null(),
    }));
    let mut head = SLOTS.load(Ordering::Relaxed);
    loop {
        slot.next = head;
        match SLOTS.compare_exchange_weak(head, slot, Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => return slot,
            Err(h) => head = h,
        }
    }
}

/// The calling thread's reader: one per thread, inside the thread context.
///
/// The slot's own state says whether the thread is inside a section (only the owning thread
/// writes it), so the outermost [`enter`](Reader::enter) / [`exit`](Reader::exit) pair costs
/// one load and two stores, with no counter to update; `nesting` counts only sections
/// opened with [`lock`](Reader::lock) inside another one.
pub struct Reader {
    slot: Cell<Option<&'static ReaderSlot>>,
    nesting: Cell<u32>,
}

impl Reader {
    pub const fn new() -> Reader {
        Reader { slot: Cell::new(None), nesting: Cell::new(0) }
    }

    #[cold]
    #[inline(never)]
    fn alloc(&self) -> &'static ReaderSlot {
        let s = alloc_slot();
        self.slot.set(Some(s));
        s
    }

    /// Enter a read section. Returns the slot when this call opened the section (pass it
    /// to [`exit`](Reader::exit)), `None` when the thread already was inside one.
    #[inline(always)]
    pub fn enter(&self) -> Option<&'static ReaderSlot> {
        if self.slot.get().is_none() {
            self.alloc();
        }
        self.enter_fast()
    }

    /// Open a read section if the thread has its slot and is not inside one already, with no
    /// call; `None` otherwise (then nothing happened). Leave with [`exit`](Reader::exit).
    #[inline(always)]
    pub fn enter_fast(&self) -> Option<&'static ReaderSlot> {
        let slot = self.slot.get()?;
        if slot.state.load(Ordering::Relaxed) != 0 {
            return None;
        }
        slot.state.store(EPOCH.load(Ordering::Acquire) | 1, Ordering::Relaxed);
        if LIGHT_READERS.load(Ordering::Relaxed) {
            compiler_fence(Ordering::SeqCst);
        } else {
            fence(Ordering::SeqCst);
        }
        Some(slot)
    }

    /// [`enter_fast`](Reader::enter_fast) when readers are known to be light
    /// ([`light_readers`] was true: it never turns false again), without testing it.
    #[inline(always)]
    pub fn enter_light(&self) -> Option<&'static ReaderSlot> {
        let slot = self.slot.get()?;
        if slot.state.load(Ordering::Relaxed) != 0 {
            return None;
        }
        slot.state.store(EPOCH.load(Ordering::Acquire) | 1, Ordering::Relaxed);
        compiler_fence(Ordering::SeqCst);
        Some(slot)
    }

    /// Leave the section [`enter`](Reader::enter) returned `opened` for (`None`: an inner
    /// section, nothing to do).
    #[inline(always)]
    pub fn exit(opened: Option<&'static ReaderSlot>) {
        if let Some(s) = opened {
            s.state.store(0, Ordering::Release);
        }
    }

    /// Enter a read section (nestable).
    pub fn lock(&self) {
        if self.enter().is_none() {
            self.nesting.set(self.nesting.get() + 1);
        }
    }

    /// Leave a read section.
    pub fn unlock(&self) {
        let n = self.nesting.get();
        if n > 0 {
            self.nesting.set(n - 1);
        } else {
            Reader::exit(self.slot.get());
        }
    }

    pub fn in_section(&self) -> bool {
        self.slot.get().is_some_and(|s| s.state.load(Ordering::Relaxed) != 0)
    }

    /// This thread's slot, when it is inside a read section.
    pub(crate) fn active_slot(&self) -> *const ReaderSlot {
        match self.slot.get() {
            Some(s) if self.in_section() => s,
            _ => core::ptr::null(),
        }
    }
}

impl Default for Reader {
    fn default() -> Self {
        Reader::new()
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        if let Some(s) = self.slot.get() {
            s.state.store(0, Ordering::Release);
            s.in_use.store(false, Ordering::Release);
        }
    }
}

/// Wait until every read section that might have seen an object unpublished before this
/// call has ended. Then free `garbage`. When called from inside a read section of the
/// calling thread (`own`, a probe unregistering itself), the wait would never end: the
/// garbage is kept and freed by a later call instead.
pub fn retire(garbage: Box<dyn Send>, own: Option<&Reader>) {
    if own.is_some_and(Reader::in_section) {
        DEFERRED.lock().unwrap_or_else(|e| e.into_inner()).push(garbage);
        return;
    }
    let deferred = std::mem::take(&mut *DEFERRED.lock().unwrap_or_else(|e| e.into_inner()));
    synchronize(own);
    drop(garbage);
    drop(deferred);
}

/// Wait for all read sections that began before this call (see the module docs), except
/// the calling thread's own, `own` (it can't end while we wait in it).
pub fn synchronize(own: Option<&Reader>) {
    let own = own.map_or(core::ptr::null(), Reader::active_slot);
    let _g = UPDATERS.lock().unwrap_or_else(|e| e.into_inner());
    let target = EPOCH.fetch_add(2, Ordering::SeqCst) + 2;
    heavy_fence();
    let mut p = SLOTS.load(Ordering::Acquire);
    while !p.is_null() {
        // SAFETY: slots are never freed.
        let s = unsafe { &*p };
        if core::ptr::eq(p, own) {
            p = s.next as *mut ReaderSlot;
            continue;
        }
        let mut spins = 0u32;
        loop {
            let st = s.state.load(Ordering::Acquire);
            if st & 1 == 0 || st >= target {
                break;
            }
            spins += 1;
            if cfg!(loom) {
                #[cfg(loom)]
                loom::thread::yield_now();
            } else if spins < 100 {
                std::hint::spin_loop();
            } else if spins < 1000 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
        }
        p = s.next as *mut ReaderSlot;
    }
    fence(Ordering::SeqCst);
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn synchronize_waits_for_readers_that_started_before_it() {
        init();
        let entered = Arc::new(AtomicBool::new(false));
        let release = Arc::new(AtomicBool::new(false));
        let (e, r) = (entered.clone(), release.clone());
        let reader = std::thread::spawn(move || {
            let rd = Reader::new();
            rd.lock();
            rd.lock(); // nested
            rd.unlock();
            e.store(true, Ordering::SeqCst);
            while !r.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(1));
            }
            rd.unlock();
        });
        while !entered.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        let done = Arc::new(AtomicBool::new(false));
        let d = done.clone();
        let updater = std::thread::spawn(move || {
            synchronize(None);
            d.store(true, Ordering::SeqCst);
        });
        std::thread::sleep(Duration::from_millis(50));
        assert!(!done.load(Ordering::SeqCst), "synchronize returned while a reader was inside");
        release.store(true, Ordering::SeqCst);
        updater.join().unwrap();
        assert!(done.load(Ordering::SeqCst));
        reader.join().unwrap();
    }
}

/// The read-copy-update protocol under loom's model of the C++ memory model (readers with
/// real fences, as without membarrier): after `synchronize` returns, the updater's write to
/// the retired object never races with a reader's read of it.
///
/// `RUSTFLAGS="--cfg loom" cargo test -p tp --lib --release rcu::loom_model`
///
/// It checks the grace-period logic (slot states, epochs, the scan): removing the
/// `synchronize` call makes loom report the race. Loom does not model store buffering, so it
/// can't show why readers need their fence (or the updater's membarrier); that part rests on
/// the argument in the module docs and on the stress tests.
#[cfg(all(test, loom))]
mod loom_model {
    use super::*;
    use loom::cell::UnsafeCell;
    use loom::sync::Arc;

    struct Obj {
        value: UnsafeCell<u64>,
    }

    #[test]
    fn retired_object_is_not_read_after_synchronize() {
        loom::model(|| {
            let a = Arc::new(Obj { value: UnsafeCell::new(1) });
            let b = Arc::new(Obj { value: UnsafeCell::new(2) });
            let current = Arc::new(AtomicPtr::new(Arc::as_ptr(&a) as *mut Obj));
            let cur = current.clone();
            let reader = loom::thread::spawn(move || {
                let r = Reader::new();
                r.lock();
                let p = cur.load(Ordering::Acquire);
                // SAFETY: `p` is `a` or `b`, both alive (held by the test); the model checks
                // the read does not race with the updater's write to a retired object.
                let v = unsafe { (*p).value.with(|v| *v) };
                r.unlock();
                assert!(v == 1 || v == 2);
            });
            current.store(Arc::as_ptr(&b) as *mut Obj, Ordering::Release);
            synchronize(None);
            // "Free" the old object: a write that races with any reader still reading it.
            // SAFETY: exclusive by the RCU guarantee under test (loom reports a race if not).
            a.value.with_mut(|v| unsafe { *v = 0xdead });
            reader.join().unwrap();
        });
    }
}
