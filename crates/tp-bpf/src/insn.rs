//! BPF instructions (the kernel's `struct bpf_insn`, include/uapi/linux/bpf.h), their
//! encoding, and a disassembly in the kernel verifier's own notation (`r1 = *(u64 *)(r10 -8)`),
//! which `-d` prints and the tests compare.

/// One instruction: opcode, registers, offset, immediate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insn {
    pub code: u8,
    pub dst: u8,
    pub src: u8,
    pub off: i16,
    pub imm: i32,
}

// Classes, sizes, modes, ALU and jump operations (uapi/linux/bpf_common.h, bpf.h).
pub const LD: u8 = 0x00;
pub const LDX: u8 = 0x01;
pub const ST: u8 = 0x02;
pub const STX: u8 = 0x03;
pub const JMP: u8 = 0x05;
pub const ALU64: u8 = 0x07;
pub const W: u8 = 0x00;
pub const H: u8 = 0x08;
pub const B: u8 = 0x10;
pub const DW: u8 = 0x18;
pub const IMM: u8 = 0x00;
pub const MEM: u8 = 0x60;
pub const ATOMIC: u8 = 0xc0;
pub const K: u8 = 0x00;
pub const X: u8 = 0x08;

pub const ADD: u8 = 0x00;
pub const SUB: u8 = 0x10;
pub const MUL: u8 = 0x20;
pub const DIV: u8 = 0x30;
pub const OR: u8 = 0x40;
pub const AND: u8 = 0x50;
pub const LSH: u8 = 0x60;
pub const RSH: u8 = 0x70;
pub const NEG: u8 = 0x80;
pub const MOD: u8 = 0x90;
pub const XOR: u8 = 0xa0;
pub const MOV: u8 = 0xb0;
pub const ARSH: u8 = 0xc0;

pub const JA: u8 = 0x00;
pub const JEQ: u8 = 0x10;
pub const JGT: u8 = 0x20;
pub const JGE: u8 = 0x30;
pub const JSET: u8 = 0x40;
pub const JNE: u8 = 0x50;
pub const JSGT: u8 = 0x60;
pub const JSGE: u8 = 0x70;
pub const CALL: u8 = 0x80;
pub const EXIT: u8 = 0x90;
pub const JLT: u8 = 0xa0;
pub const JLE: u8 = 0xb0;
pub const JSLT: u8 = 0xc0;
pub const JSLE: u8 = 0xd0;

/// `ld_imm64`'s src_reg for a map given by its fd.
pub const PSEUDO_MAP_FD: u8 = 1;

pub const R0: u8 = 0;
pub const R1: u8 = 1;
pub const R2: u8 = 2;
pub const R3: u8 = 3;
pub const R4: u8 = 4;
pub const R5: u8 = 5;
pub const R6: u8 = 6;
pub const R7: u8 = 7;
pub const R8: u8 = 8;
pub const R9: u8 = 9;
pub const FP: u8 = 10;

const fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn { code, dst, src, off, imm }
}

pub const fn mov_imm(dst: u8, imm: i32) -> Insn {
    insn(ALU64 | MOV | K, dst, 0, 0, imm)
}
pub const fn mov(dst: u8, src: u8) -> Insn {
    insn(ALU64 | MOV | X, dst, src, 0, 0)
}
pub const fn alu_imm(op: u8, dst: u8, imm: i32) -> Insn {
    insn(ALU64 | op | K, dst, 0, 0, imm)
}
pub const fn alu(op: u8, dst: u8, src: u8) -> Insn {
    insn(ALU64 | op | X, dst, src, 0, 0)
}
/// Signed division and modulo (cpu v4: off = 1).
pub const fn alu_signed(op: u8, dst: u8, src: u8) -> Insn {
    insn(ALU64 | op | X, dst, src, 1, 0)
}
pub const fn neg(dst: u8) -> Insn {
    insn(ALU64 | NEG | K, dst, 0, 0, 0)
}
/// `dst = value` as the two-slot ld_imm64.
pub const fn ld_imm64(dst: u8, value: u64) -> [Insn; 2] {
    [
        insn(LD | DW | IMM, dst, 0, 0, value as u32 as i32),
        insn(0, 0, 0, 0, (value >> 32) as u32 as i32),
    ]
}
/// `dst = map` (imm: the map's index until the loader puts its fd there).
pub const fn ld_map(dst: u8, map: u32) -> [Insn; 2] {
    [insn(LD | DW | IMM, dst, PSEUDO_MAP_FD, 0, map as i32), insn(0, 0, 0, 0, 0)]
}
pub const fn ldx(size: u8, dst: u8, src: u8, off: i16) -> Insn {
    insn(LDX | size | MEM, dst, src, off, 0)
}
pub const fn stx(size: u8, dst: u8, src: u8, off: i16) -> Insn {
    insn(STX | size | MEM, dst, src, off, 0)
}
pub const fn st_imm(size: u8, dst: u8, off: i16, imm: i32) -> Insn {
    insn(ST | size | MEM, dst, 0, off, imm)
}
/// `lock *(u64 *)(dst + off) += src`
pub const fn atomic_add(dst: u8, src: u8, off: i16) -> Insn {
    insn(STX | DW | ATOMIC, dst, src, off, ADD as i32)
}
pub const fn jmp_imm(op: u8, dst: u8, imm: i32, off: i16) -> Insn {
    insn(JMP | op | K, dst, 0, off, imm)
}
pub const fn jmp(op: u8, dst: u8, src: u8, off: i16) -> Insn {
    insn(JMP | op | X, dst, src, off, 0)
}
pub const fn ja(off: i16) -> Insn {
    insn(JMP | JA, 0, 0, off, 0)
}
pub const fn call(helper: i32) -> Insn {
    insn(JMP | CALL, 0, 0, 0, helper)
}
pub const fn exit() -> Insn {
    insn(JMP | EXIT, 0, 0, 0, 0)
}

impl Insn {
    /// The 8 bytes the kernel reads (little-endian: dst in the low nibble of byte 1).
    pub fn encode(&self) -> [u8; 8] {
        let mut b = [0u8; 8];
        b[0] = self.code;
        b[1] = (self.dst & 0xf) | (self.src << 4);
        b[2..4].copy_from_slice(&self.off.to_le_bytes());
        b[4..8].copy_from_slice(&self.imm.to_le_bytes());
        b
    }

    fn class(&self) -> u8 {
        self.code & 0x07
    }
}

/// Helper function ids (uapi/linux/bpf.h `__BPF_FUNC_MAPPER`).
pub mod helper {
    pub const MAP_LOOKUP_ELEM: i32 = 1;
    pub const MAP_UPDATE_ELEM: i32 = 2;
    pub const MAP_DELETE_ELEM: i32 = 3;
    pub const PROBE_READ: i32 = 4;
    pub const KTIME_GET_NS: i32 = 5;
    pub const GET_SMP_PROCESSOR_ID: i32 = 8;
    pub const GET_CURRENT_PID_TGID: i32 = 14;
    pub const GET_CURRENT_UID_GID: i32 = 15;
    pub const GET_CURRENT_COMM: i32 = 16;
    pub const PERF_EVENT_OUTPUT: i32 = 25;
    pub const GET_STACKID: i32 = 27;
    pub const GET_CURRENT_TASK: i32 = 35;
    pub const PROBE_READ_STR: i32 = 45;
    pub const GET_CURRENT_CGROUP_ID: i32 = 80;
    pub const PROBE_READ_USER: i32 = 112;
    pub const PROBE_READ_KERNEL: i32 = 113;
    pub const PROBE_READ_USER_STR: i32 = 114;
    pub const PROBE_READ_KERNEL_STR: i32 = 115;
    pub const GET_FUNC_IP: i32 = 173;

    pub fn name(id: i32) -> &'static str {
        match id {
            MAP_LOOKUP_ELEM => "map_lookup_elem",
            MAP_UPDATE_ELEM => "map_update_elem",
            MAP_DELETE_ELEM => "map_delete_elem",
            PROBE_READ => "probe_read",
            KTIME_GET_NS => "ktime_get_ns",
            GET_SMP_PROCESSOR_ID => "get_smp_processor_id",
            GET_CURRENT_PID_TGID => "get_current_pid_tgid",
            GET_CURRENT_UID_GID => "get_current_uid_gid",
            GET_CURRENT_COMM => "get_current_comm",
            PERF_EVENT_OUTPUT => "perf_event_output",
            GET_STACKID => "get_stackid",
            GET_CURRENT_TASK => "get_current_task",
            PROBE_READ_STR => "probe_read_str",
            GET_CURRENT_CGROUP_ID => "get_current_cgroup_id",
            PROBE_READ_USER => "probe_read_user",
            PROBE_READ_KERNEL => "probe_read_kernel",
            PROBE_READ_USER_STR => "probe_read_user_str",
            PROBE_READ_KERNEL_STR => "probe_read_kernel_str",
            GET_FUNC_IP => "get_func_ip",
            _ => "unknown",
        }
    }
}

fn size_name(code: u8) -> &'static str {
    match code & 0x18 {
        W => "u32",
        H => "u16",
        B => "u8",
        _ => "u64",
    }
}

fn alu_sym(op: u8, signed: bool) -> &'static str {
    match (op, signed) {
        (ADD, _) => "+=",
        (SUB, _) => "-=",
        (MUL, _) => "*=",
        (DIV, false) => "/=",
        (DIV, true) => "s/=",
        (OR, _) => "|=",
        (AND, _) => "&=",
        (LSH, _) => "<<=",
        (RSH, _) => ">>=",
        (MOD, false) => "%=",
        (MOD, true) => "s%=",
        (XOR, _) => "^=",
        (MOV, _) => "=",
        (ARSH, _) => "s>>=",
        _ => "?=",
    }
}

fn jmp_sym(op: u8) -> &'static str {
    match op {
        JEQ => "==",
        JGT => ">",
        JGE => ">=",
        JSET => "&",
        JNE => "!=",
        JSGT => "s>",
        JSGE => "s>=",
        JLT => "<",
        JLE => "<=",
        JSLT => "s<",
        JSLE => "s<=",
        _ => "?",
    }
}

/// One line per instruction (`ld_imm64` takes two slots and one line), as the verifier
/// prints them: `r2 = r10`, `if r0 == 0x0 goto pc+3`, `call map_lookup_elem#1`.
pub fn disassemble(insns: &[Insn]) -> Vec<String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < insns.len() {
        let n = insns[i];
        let op = n.code & 0xf0;
        let text = match n.class() {
            ALU64 if op == NEG => format!("r{} = -r{}", n.dst, n.dst),
            ALU64 if n.code & X != 0 => {
                format!("r{} {} r{}", n.dst, alu_sym(op, n.off == 1), n.src)
            }
            ALU64 => format!("r{} {} {}", n.dst, alu_sym(op, false), n.imm),
            LD if n.code == LD | DW | IMM => {
                let hi = insns.get(i + 1).map_or(0, |h| h.imm as u32 as u64);
                i += 1;
                if n.src == PSEUDO_MAP_FD {
                    format!("r{} = map[{}]", n.dst, n.imm)
                } else {
                    format!("r{} = {:#x} ll", n.dst, (hi << 32) | n.imm as u32 as u64)
                }
            }
            LDX => format!("r{} = *({} *)(r{} {:+})", n.dst, size_name(n.code), n.src, n.off),
            STX if n.code & 0xe0 == ATOMIC => {
                format!("lock *({} *)(r{} {:+}) += r{}", size_name(n.code), n.dst, n.off, n.src)
            }
            STX => format!("*({} *)(r{} {:+}) = r{}", size_name(n.code), n.dst, n.off, n.src),
            ST => format!("*({} *)(r{} {:+}) = {}", size_name(n.code), n.dst, n.off, n.imm),
            JMP if op == CALL => format!("call {}#{}", helper::name(n.imm), n.imm),
            JMP if op == EXIT => "exit".to_string(),
            JMP if op == JA => format!("goto pc{:+}", n.off),
            JMP if n.code & X != 0 => {
                format!("if r{} {} r{} goto pc{:+}", n.dst, jmp_sym(op), n.src, n.off)
            }
            JMP => format!("if r{} {} {:#x} goto pc{:+}", n.dst, jmp_sym(op), n.imm, n.off),
            _ => format!("(unknown {:#04x})", n.code),
        };
        out.push(text);
        i += 1;
    }
    out
}
