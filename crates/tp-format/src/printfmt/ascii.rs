//! Fast ASCII output for the renderers: digits formatted on the stack, short runs of bytes
//! collected on the stack and appended to the line's `String` in one copy, without UTF-8
//! validation (an `is_ascii` check is enough, and much cheaper).

/// Append `b` to `out`. ASCII (the common case: digits, padding, hex) is copied without
/// UTF-8 validation; anything else goes through the lossy conversion.
#[inline]
pub(crate) fn push_ascii(out: &mut String, b: &[u8]) {
    if b.is_ascii() {
        // SAFETY: every byte is ASCII, so the bytes are valid UTF-8 on their own and the
        // `String` stays valid UTF-8.
        unsafe { out.as_mut_vec() }.extend_from_slice(b);
    } else {
        out.push_str(&String::from_utf8_lossy(b));
    }
}

/// Collects ASCII bytes on the stack and appends them to `out` in one copy when full or
/// dropped (non-ASCII bytes would be replaced by U+FFFD; callers write only ASCII).
pub(crate) struct AsciiWriter<'a> {
    out: &'a mut String,
    buf: [u8; 96],
    len: usize,
}

impl<'a> AsciiWriter<'a> {
    #[inline]
    pub(crate) fn new(out: &'a mut String) -> AsciiWriter<'a> {
        AsciiWriter { out, buf: [0; 96], len: 0 }
    }

    #[inline]
    pub(crate) fn byte(&mut self, b: u8) {
        if self.len == self.buf.len() {
            self.flush();
        }
        self.buf[self.len] = b;
        self.len += 1;
    }

    #[inline]
    pub(crate) fn bytes(&mut self, s: &[u8]) {
        if s.len() > self.buf.len() - self.len {
            self.flush();
            if s.len() > self.buf.len() {
                push_ascii(self.out, s);
                return;
            }
        }
        self.buf[self.len..self.len + s.len()].copy_from_slice(s);
        self.len += s.len();
    }

    /// Text that may not be ASCII: ASCII is collected, anything else appended as is.
    #[inline]
    pub(crate) fn str(&mut self, s: &str) {
        if s.is_ascii() {
            self.bytes(s.as_bytes());
        } else {
            self.flush();
            self.out.push_str(s);
        }
    }

    /// `n` copies of `b` (`n` may be large: widths are clamped to a page, not to the buffer).
    #[inline]
    pub(crate) fn repeat(&mut self, b: u8, mut n: usize) {
        while n > 0 {
            if self.len == self.buf.len() {
                self.flush();
            }
            let k = n.min(self.buf.len() - self.len);
            self.buf[self.len..self.len + k].fill(b);
            self.len += k;
            n -= k;
        }
    }

    pub(crate) fn flush(&mut self) {
        push_ascii(self.out, &self.buf[..self.len]);
        self.len = 0;
    }
}

impl Drop for AsciiWriter<'_> {
    fn drop(&mut self) {
        self.flush();
    }
}

/// Digits of a number, formatted at the end of the first half of a stack buffer
/// (`buf[start..DIGITS]`); the second half is zeros, so [`Digits::push_to`] can copy a
/// fixed [`DIGITS`] bytes from `start` (one inlined move instead of a `memcpy` call of a
/// few bytes, which costs more than the formatting).
pub(crate) struct Digits {
    buf: [u8; 2 * DIGITS],
    start: usize,
}

/// Room for the digits of any `u64` (22 octal digits).
const DIGITS: usize = 24;

/// Append the first `n` bytes of `src` to `out`, copying a fixed `N` bytes (`n <= N`):
/// short runs of text without a `memcpy` call.
///
/// # Safety
/// `src[..n]` must be ASCII (checked in debug builds only: the check would cost what the
/// fixed copy saves).
#[inline]
pub(crate) unsafe fn push_fixed<const N: usize>(out: &mut String, src: &[u8; N], n: usize) {
    assert!(n <= N);
    debug_assert!(src[..n].is_ascii());
    // SAFETY: `src[..n]` is ASCII (the caller's promise), so the `String` stays UTF-8.
    let v = unsafe { out.as_mut_vec() };
    v.reserve(N);
    let len = v.len();
    // SAFETY: `reserve(N)` made room for `N` bytes after `len`; `src` has `N` bytes and
    // does not overlap `v`'s buffer (it is borrowed separately); the first `n <= N` of the
    // copied bytes are initialized and become the string's new end.
    unsafe {
        std::ptr::copy_nonoverlapping(src.as_ptr(), v.as_mut_ptr().add(len), N);
        v.set_len(len + n);
    }
}

/// All 16 hex digits of `v`, most significant first, computed at once: each nibble is
/// spread to a byte of a `u128`, then every byte mapped to its digit (a digit loop costs
/// several times more, and addresses have 12 or more).
#[inline]
fn hex16(v: u64, upper: bool) -> [u8; 16] {
    // `m` repeated in every lane of `bits` bits.
    const fn rep(m: u128, bits: u32) -> u128 {
        let mut r = 0;
        let mut i = 0;
        while i < 128 {
            r |= m << i;
            i += bits;
        }
        r
    }
    let mut x = v as u128;
    // Halve each lane: its upper half moves to the next lane up, until nibble k is byte k.
    x = (x & rep(0xffff_ffff, 64)) | ((x & rep(0xffff_ffff_0000_0000, 64)) << 32);
    x = (x & rep(0xffff, 32)) | ((x & rep(0xffff_0000, 32)) << 16);
    x = (x & rep(0xff, 16)) | ((x & rep(0xff00, 16)) << 8);
    x = (x & rep(0xf, 8)) | ((x & rep(0xf0, 8)) << 4);
    // Bytes of 10..15 get the gap between '9' and 'a' (or 'A') added.
    let letters = ((x + rep(6, 8)) >> 4) & rep(1, 8);
    let gap = if upper { b'A' - b'9' - 1 } else { b'a' - b'9' - 1 };
    (x + rep(b'0' as u128, 8) + letters * gap as u128).to_be_bytes()
}

/// "00" "01" ... "99": two decimal digits per division.
const DEC2: [u8; 200] = {
    let mut t = [0u8; 200];
    let mut i = 0;
    while i < 100 {
        t[2 * i] = b'0' + (i / 10) as u8;
        t[2 * i + 1] = b'0' + (i % 10) as u8;
        i += 1;
    }
    t
};

impl Digits {
    /// Decimal digits of `v`.
    #[inline]
    pub(crate) fn dec(mut v: u64) -> Digits {
        let mut buf = [0u8; 2 * DIGITS];
        let mut i = DIGITS;
        while v >= 100 {
            let r = (v % 100) as usize;
            v /= 100;
            i -= 2;
            buf[i..i + 2].copy_from_slice(&DEC2[2 * r..2 * r + 2]);
        }
        if v >= 10 {
            i -= 2;
            let r = v as usize;
            buf[i..i + 2].copy_from_slice(&DEC2[2 * r..2 * r + 2]);
        } else {
            i -= 1;
            buf[i] = b'0' + v as u8;
        }
        Digits { buf, start: i }
    }

    /// Exactly six decimal digits of `v` (< 1,000,000), zero-padded: the microseconds.
    #[inline]
    pub(crate) fn six(v: u32) -> [u8; 6] {
        let v = v % 1_000_000;
        let (a, b, c) = ((v / 10_000) as usize, (v / 100 % 100) as usize, (v % 100) as usize);
        [DEC2[2 * a], DEC2[2 * a + 1], DEC2[2 * b], DEC2[2 * b + 1], DEC2[2 * c], DEC2[2 * c + 1]]
    }

    /// Hexadecimal digits of `v`, lower case unless `upper`.
    #[inline]
    pub(crate) fn hex(v: u64, upper: bool) -> Digits {
        let mut buf = [0u8; 2 * DIGITS];
        buf[DIGITS - 16..DIGITS].copy_from_slice(&hex16(v, upper));
        let n = (64 - (v | 1).leading_zeros() as usize).div_ceil(4);
        Digits { buf, start: DIGITS - n }
    }

    /// Octal digits of `v`.
    pub(crate) fn oct(mut v: u64) -> Digits {
        let mut buf = [0u8; 2 * DIGITS];
        let mut i = DIGITS;
        loop {
            i -= 1;
            buf[i] = b'0' + (v & 7) as u8;
            v >>= 3;
            if v == 0 {
                break;
            }
        }
        Digits { buf, start: i }
    }

    #[inline]
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.buf[self.start..DIGITS]
    }

    /// Append the digits to `out`.
    #[inline]
    pub(crate) fn push_to(&self, out: &mut String) {
        let from: &[u8; DIGITS] = self.buf[self.start..self.start + DIGITS]
            .try_into()
            .expect("start < DIGITS, buf has 2 * DIGITS bytes");
        // SAFETY: `buf[start..DIGITS]` is only written from the ASCII digit tables in this
        // module (the fields are private).
        unsafe { push_fixed(out, from, self.len()) }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        DIGITS - self.start
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_and_writer() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut values = vec![0u64, 9, 10, 15, 16, 99, 100, 12345, 0xabcdef, u64::MAX];
        for i in 0..64 {
            values.push(1 << i);
            values.push((1u64 << i) - 1);
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            values.push(x >> (i % 60));
        }
        for v in values {
            assert_eq!(Digits::dec(v).as_bytes(), v.to_string().as_bytes());
            assert_eq!(Digits::hex(v, false).as_bytes(), format!("{v:x}").as_bytes());
            assert_eq!(Digits::hex(v, true).as_bytes(), format!("{v:X}").as_bytes());
            assert_eq!(Digits::oct(v).as_bytes(), format!("{v:o}").as_bytes());
        }
        assert_eq!(&Digits::six(0), b"000000");
        assert_eq!(&Digits::six(70_503), b"070503");
        assert_eq!(&Digits::six(999_999), b"999999");
        let mut s = String::from("x");
        {
            let mut w = AsciiWriter::new(&mut s);
            w.repeat(b' ', 200);
            w.bytes(b"ab");
            w.bytes(&[b'c'; 150]);
            w.byte(b'd');
        }
        assert_eq!(s, format!("x{}ab{}d", " ".repeat(200), "c".repeat(150)));
        push_ascii(&mut s, b"\xff");
        assert!(s.ends_with('\u{fffd}'));
    }
}
