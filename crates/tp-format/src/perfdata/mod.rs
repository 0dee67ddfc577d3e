//! perf's `perf.data` files: reading (file and pipe mode), record and sample parsing, and
//! a streaming writer that `perf script` and `perf report` read.
//!
//! Layout facts come from the kernel's `include/uapi/linux/perf_event.h` and perf's
//! `tools/perf/Documentation/perf.data-file-format.txt`; the code is tp's own.
//!
//! # Reading
//!
//! ```no_run
//! use tp_format::perfdata::{PerfData, Record};
//! let data = PerfData::open_file(std::fs::File::open("perf.data")?)?;
//! // metadata: data.attrs (with names and ids), data.features (hostname, nr_cpus,
//! // cmdline, build ids...), data.tracing (event formats of tracepoint samples)
//! let mut records = data.records(true)?;           // true: sorted by time, as perf does
//! while let Some(item) = records.next() {          // lending iterator, no copy per record
//!     match item?.parse() {
//!         Ok(Record::Sample(s)) => { let _ = (s.time, s.cpu, s.raw); }
//!         Ok(other) => { let _ = other; }
//!         Err(e) => eprintln!("{e}"),
//!     }
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! - [`PerfData::open`] reads the file header, the attributes with their ids and the feature
//!   sections; the data section is streamed by [`PerfData::records`] in blocks, so memory
//!   does not grow with the file. Sorted by time, records are held back only until perf's
//!   `FINISHED_ROUND` markers say no earlier record can follow (perf's own rule), and never
//!   more than [`read::MAX_PENDING`] bytes.
//! - Pipe-mode files (`perf record -o -`) carry their attributes and features as records in
//!   the stream; they are read the same way.
//! - The `TRACING_DATA` feature is trace.dat's leading part: it is read by
//!   [`crate::tracedat::TraceDat`] itself, so tracepoint samples (their `PERF_SAMPLE_RAW`
//!   bytes are the ftrace record) render with the same formats and renderer as trace.dat.
//!
//! # Writing
//!
//! [`Writer`] streams records into a file and patches the header at the end; see
//! [`mod@write`].
//!
//! # Errors
//!
//! Every [`Error`] names the file offset and what was being read; sizes a file claims are
//! checked against its length before anything is allocated; nothing panics on malformed
//! input.

pub mod attr;
pub mod features;
pub mod read;
pub mod record;
pub mod write;

pub use attr::EventAttr;
pub use features::{BuildId, Features};
pub use read::{Attr, Item, PerfData, Records};
pub use record::{RawRecord, Record, Sample, SampleId};
pub use write::{WriteStats, Writer, WriterAttr};

/// `PERFILE2`, the magic at the start of every perf.data file (as a little-endian u64).
pub const MAGIC: &[u8; 8] = b"PERFILE2";

/// `perf_event_header.type` values: the kernel's (include/uapi/linux/perf_event.h) and
/// perf's own user-space records (tools/lib/perf/include/perf/event.h), from 64.
pub mod kind {
    pub const MMAP: u32 = 1;
    pub const LOST: u32 = 2;
    pub const COMM: u32 = 3;
    pub const EXIT: u32 = 4;
    pub const THROTTLE: u32 = 5;
    pub const UNTHROTTLE: u32 = 6;
    pub const FORK: u32 = 7;
    pub const READ: u32 = 8;
    pub const SAMPLE: u32 = 9;
    pub const MMAP2: u32 = 10;
    pub const AUX: u32 = 11;
    pub const ITRACE_START: u32 = 12;
    pub const LOST_SAMPLES: u32 = 13;
    pub const SWITCH: u32 = 14;
    pub const SWITCH_CPU_WIDE: u32 = 15;
    pub const NAMESPACES: u32 = 16;
    pub const KSYMBOL: u32 = 17;
    pub const BPF_EVENT: u32 = 18;
    pub const CGROUP: u32 = 19;
    pub const TEXT_POKE: u32 = 20;
    pub const AUX_OUTPUT_HW_ID: u32 = 21;
    // perf's user-space records.
    pub const HEADER_ATTR: u32 = 64;
    pub const HEADER_EVENT_TYPE: u32 = 65;
    pub const HEADER_TRACING_DATA: u32 = 66;
    pub const HEADER_BUILD_ID: u32 = 67;
    pub const FINISHED_ROUND: u32 = 68;
    pub const ID_INDEX: u32 = 69;
    pub const AUXTRACE_INFO: u32 = 70;
    pub const AUXTRACE: u32 = 71;
    pub const AUXTRACE_ERROR: u32 = 72;
    pub const THREAD_MAP: u32 = 73;
    pub const CPU_MAP: u32 = 74;
    pub const STAT_CONFIG: u32 = 75;
    pub const STAT: u32 = 76;
    pub const STAT_ROUND: u32 = 77;
    pub const EVENT_UPDATE: u32 = 78;
    pub const TIME_CONV: u32 = 79;
    pub const HEADER_FEATURE: u32 = 80;
    pub const COMPRESSED: u32 = 81;
    pub const FINISHED_INIT: u32 = 82;

    /// The name perf script prints for a record type (`PERF_RECORD_` + this).
    pub fn name(kind: u32) -> &'static str {
        match kind {
            MMAP => "MMAP",
            LOST => "LOST",
            COMM => "COMM",
            EXIT => "EXIT",
            THROTTLE => "THROTTLE",
            UNTHROTTLE => "UNTHROTTLE",
            FORK => "FORK",
            READ => "READ",
            SAMPLE => "SAMPLE",
            MMAP2 => "MMAP2",
            AUX => "AUX",
            ITRACE_START => "ITRACE_START",
            LOST_SAMPLES => "LOST_SAMPLES",
            SWITCH => "SWITCH",
            SWITCH_CPU_WIDE => "SWITCH_CPU_WIDE",
            NAMESPACES => "NAMESPACES",
            KSYMBOL => "KSYMBOL",
            BPF_EVENT => "BPF_EVENT",
            CGROUP => "CGROUP",
            TEXT_POKE => "TEXT_POKE",
            AUX_OUTPUT_HW_ID => "AUX_OUTPUT_HW_ID",
            HEADER_ATTR => "HEADER_ATTR",
            HEADER_EVENT_TYPE => "HEADER_EVENT_TYPE",
            HEADER_TRACING_DATA => "HEADER_TRACING_DATA",
            HEADER_BUILD_ID => "HEADER_BUILD_ID",
            FINISHED_ROUND => "FINISHED_ROUND",
            ID_INDEX => "ID_INDEX",
            AUXTRACE_INFO => "AUXTRACE_INFO",
            AUXTRACE => "AUXTRACE",
            AUXTRACE_ERROR => "AUXTRACE_ERROR",
            THREAD_MAP => "THREAD_MAP",
            CPU_MAP => "CPU_MAP",
            STAT_CONFIG => "STAT_CONFIG",
            STAT => "STAT",
            STAT_ROUND => "STAT_ROUND",
            EVENT_UPDATE => "EVENT_UPDATE",
            TIME_CONV => "TIME_CONV",
            HEADER_FEATURE => "FEATURE",
            COMPRESSED => "COMPRESSED",
            FINISHED_INIT => "FINISHED_INIT",
            _ => "UNKNOWN",
        }
    }
}

/// `perf_event_header.misc` bits.
pub mod misc {
    pub const CPUMODE_MASK: u16 = 7;
    pub const CPUMODE_UNKNOWN: u16 = 0;
    pub const KERNEL: u16 = 1;
    pub const USER: u16 = 2;
    pub const HYPERVISOR: u16 = 3;
    pub const GUEST_KERNEL: u16 = 4;
    pub const GUEST_USER: u16 = 5;
    /// COMM: the comm changed at exec; SWITCH: switched out; MMAP: executable mapping.
    pub const COMM_EXEC: u16 = 1 << 13;
    pub const SWITCH_OUT: u16 = 1 << 13;
    pub const MMAP_DATA: u16 = 1 << 13;
    /// SWITCH: preempted while running; MMAP2: a build id instead of device and inode.
    pub const SWITCH_OUT_PREEMPT: u16 = 1 << 14;
    pub const MMAP_BUILD_ID: u16 = 1 << 14;
    pub const EXACT_IP: u16 = 1 << 14;
    /// perf's build id records: the build id's size is given.
    pub const BUILD_ID_SIZE: u16 = 1 << 15;
}

/// perf's callchain context markers (`PERF_CONTEXT_*` in linux/perf_event.h): entries of a
/// PERF_SAMPLE_CALLCHAIN that say whose frames follow them.
pub mod context {
    pub const HV: u64 = -32i64 as u64;
    pub const KERNEL: u64 = -128i64 as u64;
    pub const USER: u64 = -512i64 as u64;
    pub const GUEST: u64 = -2048i64 as u64;
    pub const GUEST_KERNEL: u64 = -2176i64 as u64;
    pub const GUEST_USER: u64 = -2560i64 as u64;
    /// Every marker is at or above this one.
    pub const MAX: u64 = -4095i64 as u64;
}

/// `perf_event_attr.sample_type` bits, in the order their values appear in a sample.
pub mod sample {
    pub const IP: u64 = 1 << 0;
    pub const TID: u64 = 1 << 1;
    pub const TIME: u64 = 1 << 2;
    pub const ADDR: u64 = 1 << 3;
    pub const READ: u64 = 1 << 4;
    pub const CALLCHAIN: u64 = 1 << 5;
    pub const ID: u64 = 1 << 6;
    pub const CPU: u64 = 1 << 7;
    pub const PERIOD: u64 = 1 << 8;
    pub const STREAM_ID: u64 = 1 << 9;
    pub const RAW: u64 = 1 << 10;
    pub const BRANCH_STACK: u64 = 1 << 11;
    pub const REGS_USER: u64 = 1 << 12;
    pub const STACK_USER: u64 = 1 << 13;
    pub const WEIGHT: u64 = 1 << 14;
    pub const DATA_SRC: u64 = 1 << 15;
    pub const IDENTIFIER: u64 = 1 << 16;
    pub const TRANSACTION: u64 = 1 << 17;
    pub const REGS_INTR: u64 = 1 << 18;
    pub const PHYS_ADDR: u64 = 1 << 19;
    pub const AUX: u64 = 1 << 20;
    pub const CGROUP: u64 = 1 << 21;
    pub const DATA_PAGE_SIZE: u64 = 1 << 22;
    pub const CODE_PAGE_SIZE: u64 = 1 << 23;
    pub const WEIGHT_STRUCT: u64 = 1 << 24;
    /// Every bit tp knows how to parse or skip.
    pub const KNOWN: u64 = (1 << 25) - 1;

    /// perf's spelling of a sample_type (`IP|TID|TIME|...`).
    pub fn names(t: u64) -> String {
        const N: [&str; 25] = [
            "IP",
            "TID",
            "TIME",
            "ADDR",
            "READ",
            "CALLCHAIN",
            "ID",
            "CPU",
            "PERIOD",
            "STREAM_ID",
            "RAW",
            "BRANCH_STACK",
            "REGS_USER",
            "STACK_USER",
            "WEIGHT",
            "DATA_SRC",
            "IDENTIFIER",
            "TRANSACTION",
            "REGS_INTR",
            "PHYS_ADDR",
            "AUX",
            "CGROUP",
            "DATA_PAGE_SIZE",
            "CODE_PAGE_SIZE",
            "WEIGHT_STRUCT",
        ];
        let mut v: Vec<String> =
            (0..25).filter(|b| t & (1 << b) != 0).map(|b| N[b].to_string()).collect();
        if t & !KNOWN != 0 {
            v.push(format!("{:#x}", t & !KNOWN));
        }
        v.join("|")
    }
}

/// `perf_event_attr.read_format` bits.
pub mod read_format {
    pub const TOTAL_TIME_ENABLED: u64 = 1 << 0;
    pub const TOTAL_TIME_RUNNING: u64 = 1 << 1;
    pub const ID: u64 = 1 << 2;
    pub const GROUP: u64 = 1 << 3;
    pub const LOST: u64 = 1 << 4;
}

/// A perf.data problem: the crate's one file error ([`crate::error`]).
pub use crate::error::{Error, ErrorKind};

/// Little-endian reads from a slice already known to be long enough.
pub(crate) fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
pub(crate) fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
pub(crate) fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// A NUL-terminated string at the start of `b` (all of `b` when it has no NUL).
pub(crate) fn cstr(b: &[u8]) -> &str {
    let end = memchr::memchr(0, b).unwrap_or(b.len());
    std::str::from_utf8(&b[..end]).unwrap_or("<invalid utf-8>")
}

#[cfg(test)]
mod tests;
