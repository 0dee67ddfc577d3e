//! A minimal protobuf encoder: varints, length-delimited fields, nested messages written
//! into reused buffers (the Perfetto writer needs nothing more).

/// Wire types.
const VARINT: u64 = 0;
const LEN: u64 = 2;

#[inline]
pub fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// An integer field (int32/int64/uint32/uint64/bool/enum: negative values as 10-byte
/// two's complement varints, as protobuf encodes int32 and int64).
#[inline]
pub fn int(out: &mut Vec<u8>, field: u32, v: i64) {
    varint(out, (field as u64) << 3 | VARINT);
    varint(out, v as u64);
}

pub fn uint(out: &mut Vec<u8>, field: u32, v: u64) {
    varint(out, (field as u64) << 3 | VARINT);
    varint(out, v);
}

/// A string, bytes or nested message already encoded.
#[inline]
pub fn bytes(out: &mut Vec<u8>, field: u32, b: &[u8]) {
    varint(out, (field as u64) << 3 | LEN);
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_like_protobuf() {
        let mut b = Vec::new();
        int(&mut b, 1, 150);
        assert_eq!(b, [0x08, 0x96, 0x01]);
        b.clear();
        int(&mut b, 2, -1);
        assert_eq!(b, [0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
        b.clear();
        bytes(&mut b, 2, b"testing");
        assert_eq!(b, [0x12, 0x07, b't', b'e', b's', b't', b'i', b'n', b'g']);
        b.clear();
        uint(&mut b, 327, 1);
        assert_eq!(b, [0xb8, 0x14, 0x01]);
    }
}
