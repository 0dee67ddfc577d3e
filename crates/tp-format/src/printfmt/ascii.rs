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

/// Digits of a number, formatted at the end of a stack buffer.
pub(crate) struct Digits {
    buf: [u8; 24],
    start: usize,
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
        let mut buf = [0u8; 24];
        let mut i = buf.len();
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
    pub(crate) fn hex(mut v: u64, upper: bool) -> Digits {
        let table: &[u8; 16] = if upper { b"0123456789ABCDEF" } else { b"0123456789abcdef" };
        let mut buf = [0u8; 24];
        let mut i = buf.len();
        loop {
            i -= 1;
            buf[i] = table[(v & 15) as usize];
            v >>= 4;
            if v == 0 {
                break;
            }
        }
        Digits { buf, start: i }
    }

    /// Octal digits of `v`.
    pub(crate) fn oct(mut v: u64) -> Digits {
        let mut buf = [0u8; 24];
        let mut i = buf.len();
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
        &self.buf[self.start..]
    }

    /// The digits as text, appended without a UTF-8 check.
    #[inline]
    pub(crate) fn as_str(&self) -> &str {
        // SAFETY: `buf[start..]` is only ever written from the ASCII digit tables in this
        // module (the fields are private), so it is valid UTF-8.
        unsafe { std::str::from_utf8_unchecked(&self.buf[self.start..]) }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.buf.len() - self.start
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_and_writer() {
        for v in [0u64, 9, 10, 99, 100, 12345, u64::MAX] {
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
