//! Just enough of BTF (the kernel's type information, `/sys/kernel/btf/vmlinux`) to know a
//! raw tracepoint's arguments: the typedef `btf_trace_NAME` is a pointer to the probe's
//! function prototype, `(void *__data, ARGS...)`. Pure: it reads bytes.

use crate::probes::RawArg;

const KIND_INT: u32 = 1;
const KIND_PTR: u32 = 2;
const KIND_ENUM: u32 = 6;
const KIND_TYPEDEF: u32 = 8;
const KIND_VOLATILE: u32 = 9;
const KIND_CONST: u32 = 10;
const KIND_RESTRICT: u32 = 11;
const KIND_FUNC_PROTO: u32 = 13;
const KIND_TYPE_TAG: u32 = 18;
const KIND_ENUM64: u32 = 19;

/// A parsed BTF blob: where each type's record starts.
pub struct Btf {
    data: Vec<u8>,
    types: usize,
    strings: usize,
    strings_len: usize,
    /// Offsets of type records by id (id 0 is `void`).
    offsets: Vec<usize>,
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at + 4).map(|s| u32::from_le_bytes(s.try_into().expect("4 bytes")))
}

impl Btf {
    pub fn parse(data: Vec<u8>) -> Option<Btf> {
        if data.get(0..2)? != [0x9f, 0xeb] {
            return None;
        }
        let hdr = u32_at(&data, 4)? as usize;
        let types = hdr + u32_at(&data, 8)? as usize;
        let types_len = u32_at(&data, 12)? as usize;
        let strings = hdr + u32_at(&data, 16)? as usize;
        let strings_len = u32_at(&data, 20)? as usize;
        let mut offsets = vec![0];
        let mut at = types;
        while at + 12 <= types + types_len {
            offsets.push(at);
            let info = u32_at(&data, at + 4)?;
            let vlen = (info & 0xffff) as usize;
            let extra = match (info >> 24) & 0x1f {
                1 | 14 | 17 => 4,
                3 => 12,
                4 | 5 | 15 | 19 => 12 * vlen,
                6 | 13 => 8 * vlen,
                _ => 0,
            };
            at += 12 + extra;
        }
        Some(Btf { data, types, strings, strings_len, offsets })
    }

    fn name(&self, off: u32) -> &[u8] {
        let start = self.strings + off as usize;
        let end = self.strings + self.strings_len;
        let s = self.data.get(start..end).unwrap_or(&[]);
        &s[..s.iter().position(|&c| c == 0).unwrap_or(s.len())]
    }

    fn rec(&self, id: u32) -> Option<(u32, u32, u32, usize)> {
        let at = *self.offsets.get(id as usize)?;
        if id == 0 || at < self.types {
            return None;
        }
        Some((
            u32_at(&self.data, at)?,
            u32_at(&self.data, at + 4)?,
            u32_at(&self.data, at + 8)?,
            at,
        ))
    }

    /// Follow typedefs and qualifiers; return (kind, record).
    fn resolve(&self, mut id: u32) -> Option<(u32, (u32, u32, u32, usize))> {
        for _ in 0..32 {
            let r = self.rec(id)?;
            let kind = (r.1 >> 24) & 0x1f;
            match kind {
                KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT | KIND_TYPE_TAG => {
                    id = r.2
                }
                _ => return Some((kind, r)),
            }
        }
        None
    }

    /// The arguments of raw tracepoint `name` after `void *__data`.
    pub fn raw_tracepoint_args(&self, name: &str) -> Option<Vec<RawArg>> {
        let want = format!("btf_trace_{name}");
        let id = (1..self.offsets.len() as u32).find(|&id| {
            self.rec(id).is_some_and(|r| {
                (r.1 >> 24) & 0x1f == KIND_TYPEDEF && self.name(r.0) == want.as_bytes()
            })
        })?;
        let (kind, ptr) = self.resolve(id)?;
        if kind != KIND_PTR {
            return None;
        }
        let (kind, (_, info, _, at)) = self.resolve(ptr.2)?;
        if kind != KIND_FUNC_PROTO {
            return None;
        }
        let vlen = (info & 0xffff) as usize;
        let mut out = Vec::new();
        for i in 1..vlen {
            let p = at + 12 + 8 * i;
            let pname = String::from_utf8_lossy(self.name(u32_at(&self.data, p)?)).into_owned();
            let int = match self.resolve(u32_at(&self.data, p + 4)?) {
                Some((KIND_INT, (_, _, size, at))) => {
                    let enc = u32_at(&self.data, at + 12)?;
                    Some((size as usize, (enc >> 24) & 1 == 1))
                }
                Some((KIND_ENUM | KIND_ENUM64, (_, info, size, _))) => {
                    Some((size as usize, info >> 31 == 1))
                }
                _ => None,
            };
            out.push(RawArg { name: pname, int });
        }
        Some(out)
    }
}
