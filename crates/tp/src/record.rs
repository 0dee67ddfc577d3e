//! Writing one record: the common fields every record starts with, and the bounds-checked
//! writer `trace_event!`'s generated code fills a record through. The bottom layer: the
//! recorder, probes and sinks all write records with it.

use crate::field::FieldType;
use std::sync::atomic::{AtomicU16, Ordering};

/// The common fields at offsets 0..8 of every record, as the kernel lays them out.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C)]
pub struct Common {
    pub common_type: u16,
    pub common_flags: u8,
    pub common_preempt_count: u8,
    pub common_pid: i32,
}

/// The common fields of a record of the event whose ID is in `id` (a site's, read at the
/// moment the record is written), fired by thread `pid`.
#[inline(always)]
pub(crate) fn common(id: &AtomicU16, pid: i32) -> Common {
    Common {
        common_type: id.load(Ordering::Relaxed),
        common_flags: 0,
        common_preempt_count: 0,
        common_pid: pid,
    }
}

/// Where `trace_event!`'s generated code writes one record: a `len`-byte buffer (in a
/// recorder page, or on the stack for probes and sinks). Safe methods, bounds-checked.
pub struct RecordWriter {
    ptr: *mut u8,
    len: usize,
}

impl RecordWriter {
    /// # Safety
    /// `ptr` must be valid for writes of `len` bytes while the writer lives.
    #[inline(always)]
    pub(crate) unsafe fn new(ptr: *mut u8, len: usize) -> RecordWriter {
        RecordWriter { ptr, len }
    }

    /// Write the fixed part of the record (a `repr(C)` struct) at offset 0.
    #[inline(always)]
    pub fn fixed<R: Copy>(&mut self, r: R) {
        assert!(core::mem::size_of::<R>() <= self.len, "tp: record larger than reserved");
        // SAFETY: bounds checked above; unaligned write because pages align records to 4.
        unsafe { core::ptr::write_unaligned(self.ptr as *mut R, r) }
    }

    /// Write `bytes` at offset `at` (a run-time tracepoint's prebuilt record body).
    #[inline(always)]
    pub fn bytes(&mut self, at: usize, bytes: &[u8]) {
        assert!(at + bytes.len() <= self.len, "tp: record larger than reserved");
        // SAFETY: `at + len` bytes fit in the buffer (checked above).
        unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), self.ptr.add(at), bytes.len()) }
    }

    /// Write a dynamic field's data at `*at` and advance it.
    #[inline(always)]
    pub fn dynamic<F: FieldType + ?Sized>(&mut self, at: &mut usize, v: &F::Value<'_>) {
        let n = F::dyn_len(v);
        assert!(*at + n <= self.len, "tp: record larger than reserved");
        // SAFETY: `at + n` bytes fit in the buffer (checked above).
        unsafe { F::write_dyn(v, self.ptr.add(*at)) };
        *at += n;
    }
}
