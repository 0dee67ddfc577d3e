//! `struct perf_event_attr` (include/uapi/linux/perf_event.h) as perf.data stores it: the
//! first `size` bytes of the kernel's structure, little-endian.

/// Bits of the attr's flag word (the bitfield after `read_format`).
pub mod flag {
    pub const DISABLED: u64 = 1 << 0;
    pub const INHERIT: u64 = 1 << 1;
    pub const PINNED: u64 = 1 << 2;
    pub const EXCLUSIVE: u64 = 1 << 3;
    pub const EXCLUDE_USER: u64 = 1 << 4;
    pub const EXCLUDE_KERNEL: u64 = 1 << 5;
    pub const EXCLUDE_HV: u64 = 1 << 6;
    pub const EXCLUDE_IDLE: u64 = 1 << 7;
    pub const MMAP: u64 = 1 << 8;
    pub const COMM: u64 = 1 << 9;
    pub const FREQ: u64 = 1 << 10;
    pub const INHERIT_STAT: u64 = 1 << 11;
    pub const ENABLE_ON_EXEC: u64 = 1 << 12;
    pub const TASK: u64 = 1 << 13;
    pub const WATERMARK: u64 = 1 << 14;
    /// Two bits.
    pub const PRECISE_IP_SHIFT: u32 = 15;
    pub const MMAP_DATA: u64 = 1 << 17;
    pub const SAMPLE_ID_ALL: u64 = 1 << 18;
    pub const EXCLUDE_HOST: u64 = 1 << 19;
    pub const EXCLUDE_GUEST: u64 = 1 << 20;
    pub const EXCLUDE_CALLCHAIN_KERNEL: u64 = 1 << 21;
    pub const EXCLUDE_CALLCHAIN_USER: u64 = 1 << 22;
    pub const MMAP2: u64 = 1 << 23;
    pub const COMM_EXEC: u64 = 1 << 24;
    pub const USE_CLOCKID: u64 = 1 << 25;
    pub const CONTEXT_SWITCH: u64 = 1 << 26;
    pub const WRITE_BACKWARD: u64 = 1 << 27;
    pub const NAMESPACES: u64 = 1 << 28;
    pub const KSYMBOL: u64 = 1 << 29;
    pub const BPF_EVENT: u64 = 1 << 30;
}

/// `perf_event_attr.type`.
pub mod event_type {
    pub const HARDWARE: u32 = 0;
    pub const SOFTWARE: u32 = 1;
    pub const TRACEPOINT: u32 = 2;
    pub const HW_CACHE: u32 = 3;
    pub const RAW: u32 = 4;
    pub const BREAKPOINT: u32 = 5;
}

/// `PERF_ATTR_SIZE_VER0`: the smallest attr a file may hold.
pub const SIZE_VER0: usize = 64;
/// The attr size tp writes (`PERF_ATTR_SIZE_VER7`, what perf 6.1 writes).
pub const SIZE_WRITTEN: usize = 128;
/// Largest attr tp accepts (far beyond any kernel's; the rest is kept, not interpreted).
pub const SIZE_MAX: usize = 4096;

/// The fields of `perf_event_attr` up to `PERF_ATTR_SIZE_VER8`; fields beyond the stored
/// size read as zero.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventAttr {
    pub type_: u32,
    /// The size the file stored (0: [`SIZE_WRITTEN`] when written).
    pub size: u32,
    pub config: u64,
    /// `sample_period`, or `sample_freq` with [`flag::FREQ`].
    pub sample_period: u64,
    pub sample_type: u64,
    pub read_format: u64,
    /// The bitfield word ([`flag`]).
    pub flags: u64,
    /// `wakeup_events` or `wakeup_watermark`.
    pub wakeup: u32,
    pub bp_type: u32,
    /// `bp_addr`, `kprobe_func`, `uprobe_path` or `config1`.
    pub config1: u64,
    /// `bp_len`, `kprobe_addr`, `probe_offset` or `config2`.
    pub config2: u64,
    pub branch_sample_type: u64,
    pub sample_regs_user: u64,
    pub sample_stack_user: u32,
    pub clockid: i32,
    pub sample_regs_intr: u64,
    pub aux_watermark: u32,
    pub sample_max_stack: u16,
    pub aux_sample_size: u32,
    pub sig_data: u64,
    pub config3: u64,
}

impl EventAttr {
    /// Parse an attr of `b.len()` bytes (at least [`SIZE_VER0`]; callers check).
    pub fn parse(b: &[u8]) -> EventAttr {
        let mut full = [0u8; 136];
        let n = b.len().min(full.len());
        full[..n].copy_from_slice(&b[..n]);
        let u32_ = |o: usize| super::u32_at(&full, o);
        let u64_ = |o: usize| super::u64_at(&full, o);
        EventAttr {
            type_: u32_(0),
            size: u32_(4),
            config: u64_(8),
            sample_period: u64_(16),
            sample_type: u64_(24),
            read_format: u64_(32),
            flags: u64_(40),
            wakeup: u32_(48),
            bp_type: u32_(52),
            config1: u64_(56),
            config2: u64_(64),
            branch_sample_type: u64_(72),
            sample_regs_user: u64_(80),
            sample_stack_user: u32_(88),
            clockid: u32_(92) as i32,
            sample_regs_intr: u64_(96),
            aux_watermark: u32_(104),
            sample_max_stack: super::u16_at(&full, 108),
            aux_sample_size: u32_(112),
            sig_data: u64_(120),
            config3: u64_(128),
        }
    }

    /// The attr as `size` bytes (`size` 0: [`SIZE_WRITTEN`]), the `size` field set to it.
    pub fn to_bytes(&self, size: usize) -> Vec<u8> {
        let size = if size == 0 { SIZE_WRITTEN } else { size };
        let mut v = Vec::with_capacity(size.max(136));
        v.extend_from_slice(&self.type_.to_le_bytes());
        v.extend_from_slice(&(size as u32).to_le_bytes());
        for x in [self.config, self.sample_period, self.sample_type, self.read_format, self.flags] {
            v.extend_from_slice(&x.to_le_bytes());
        }
        v.extend_from_slice(&self.wakeup.to_le_bytes());
        v.extend_from_slice(&self.bp_type.to_le_bytes());
        for x in [self.config1, self.config2, self.branch_sample_type, self.sample_regs_user] {
            v.extend_from_slice(&x.to_le_bytes());
        }
        v.extend_from_slice(&self.sample_stack_user.to_le_bytes());
        v.extend_from_slice(&self.clockid.to_le_bytes());
        v.extend_from_slice(&self.sample_regs_intr.to_le_bytes());
        v.extend_from_slice(&self.aux_watermark.to_le_bytes());
        v.extend_from_slice(&self.sample_max_stack.to_le_bytes());
        v.extend_from_slice(&[0, 0]);
        v.extend_from_slice(&self.aux_sample_size.to_le_bytes());
        v.extend_from_slice(&[0; 4]);
        v.extend_from_slice(&self.sig_data.to_le_bytes());
        v.extend_from_slice(&self.config3.to_le_bytes());
        v.resize(size, 0);
        v
    }

    pub fn has(&self, flag: u64) -> bool {
        self.flags & flag != 0
    }

    /// Whether non-sample records end with the [`super::SampleId`] fields.
    pub fn sample_id_all(&self) -> bool {
        self.has(flag::SAMPLE_ID_ALL)
    }

    /// Bytes of the sample_id trailer of non-sample records (0 without sample_id_all).
    pub fn sample_id_size(&self) -> usize {
        if !self.sample_id_all() {
            return 0;
        }
        use super::sample as s;
        let t = self.sample_type;
        [s::TID, s::TIME, s::ID, s::STREAM_ID, s::CPU, s::IDENTIFIER]
            .iter()
            .filter(|&&b| t & b != 0)
            .count()
            * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_round_trip() {
        let a = EventAttr {
            type_: 2,
            config: 0x174,
            sample_period: 1,
            sample_type: 0x10587,
            read_format: 0x14,
            flags: flag::DISABLED | flag::SAMPLE_ID_ALL,
            clockid: 1,
            sample_max_stack: 127,
            ..Default::default()
        };
        let b = a.to_bytes(0);
        assert_eq!(b.len(), SIZE_WRITTEN);
        assert_eq!(EventAttr::parse(&b), EventAttr { size: 128, ..a.clone() });
        // An older, shorter attr: the fields beyond it read as zero.
        let short = EventAttr::parse(&b[..SIZE_VER0]);
        assert_eq!(short.sample_type, 0x10587);
        assert_eq!(short.clockid, 0);
    }
}
