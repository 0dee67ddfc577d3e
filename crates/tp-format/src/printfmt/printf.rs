//! The kernel's `vsnprintf` (lib/vsprintf.c): format-string decoding and the `number()`
//! and `string()` rules, reimplemented. Differences from glibc that matter here: `%#x` of 0
//! prints `0x0`, precision does not cancel the `0` flag, `%c` pads with spaces, a conversion
//! the kernel does not know stops the output, `%p` eats every alphanumeric after it.

use super::ascii::{push_ascii, AsciiWriter, Digits};

pub(crate) const LEFT: u8 = 1;
pub(crate) const PLUS: u8 = 2;
pub(crate) const SPACE: u8 = 4;
pub(crate) const SPECIAL: u8 = 8;
pub(crate) const ZEROPAD: u8 = 16;
pub(crate) const SMALL: u8 = 32;
pub(crate) const SIGN: u8 = 64;

/// A width or precision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Count {
    None,
    Fixed(i32),
    /// `*`: taken from the next argument (an `int`).
    Arg,
}

/// A `%p` extension (the alphanumerics after `%p`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PtrExt {
    /// `%p`, `%px`, `%pK` and extensions not modelled: the raw value, 16 hex digits.
    Raw,
    /// `%ps` (no offset), `%pS` (`+off/size`), `%pB` (backtrace: looks up `addr - 1`).
    Sym {
        offset: bool,
        backtrace: bool,
    },
    Ip4,
    /// `%pI6` (eight 4-digit groups) / `%pI6c` (RFC 5952 compressed) / `%pi6` (no colons).
    Ip6 {
        compressed: bool,
        colons: bool,
    },
    /// `%pIS[pc]`: a `struct sockaddr`.
    Sockaddr {
        port: bool,
        compressed: bool,
    },
    /// `%pM` (`R`: reversed, `F`: `-` separated), `%pm` (no separators).
    Mac {
        reversed: bool,
        sep: Option<u8>,
    },
    /// `%pU[bBlL]`.
    Uuid {
        guid: bool,
        upper: bool,
    },
    /// `%*pb` (hex chunks) / `%*pbl` (ranges).
    Bitmap {
        list: bool,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Conv {
    Int { size: u8, signed: bool, base: u8 },
    Char,
    Str,
    Ptr(PtrExt),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Spec {
    pub flags: u8,
    pub width: Count,
    pub prec: Count,
    pub conv: Conv,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Piece {
    Lit(Vec<u8>),
    Spec(Spec),
    /// A conversion the kernel rejects: it stops formatting there.
    Stop,
}

/// Split a format string into literal text and conversions, as `format_decode` does.
pub(crate) fn parse_fmt(fmt: &[u8]) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut lit = Vec::new();
    let mut i = 0;
    while i < fmt.len() {
        let c = fmt[i];
        if c != b'%' {
            lit.push(c);
            i += 1;
            continue;
        }
        i += 1;
        let mut flags = 0u8;
        while let Some(&f) = fmt.get(i) {
            flags |= match f {
                b'-' => LEFT,
                b'+' => PLUS,
                b' ' => SPACE,
                b'#' => SPECIAL,
                b'0' => ZEROPAD,
                _ => break,
            };
            i += 1;
        }
        let mut width = Count::None;
        if fmt.get(i) == Some(&b'*') {
            width = Count::Arg;
            i += 1;
        } else if fmt.get(i).is_some_and(u8::is_ascii_digit) {
            width = Count::Fixed(atoi(fmt, &mut i));
        }
        let mut prec = Count::None;
        if fmt.get(i) == Some(&b'.') {
            i += 1;
            if fmt.get(i) == Some(&b'*') {
                prec = Count::Arg;
                i += 1;
            } else {
                prec = Count::Fixed(atoi(fmt, &mut i));
            }
        }
        let mut size = 4u8;
        match fmt.get(i) {
            Some(b'h') => {
                i += 1;
                size = 2;
                if fmt.get(i) == Some(&b'h') {
                    i += 1;
                    size = 1;
                }
            }
            Some(b'l') => {
                i += 1;
                size = 8;
                if fmt.get(i) == Some(&b'l') {
                    i += 1;
                }
            }
            Some(b'L' | b'z' | b'Z' | b't') => {
                i += 1;
                size = 8;
            }
            _ => {}
        }
        let Some(&conv) = fmt.get(i) else {
            // A lone `%` at the end: the kernel prints nothing for it.
            break;
        };
        i += 1;
        let conv = match conv {
            b'%' => {
                lit.push(b'%');
                continue;
            }
            b'c' => Conv::Char,
            b's' => Conv::Str,
            b'd' | b'i' => Conv::Int { size, signed: true, base: 10 },
            b'u' => Conv::Int { size, signed: false, base: 10 },
            b'o' => Conv::Int { size, signed: false, base: 8 },
            b'x' => {
                flags |= SMALL;
                Conv::Int { size, signed: false, base: 16 }
            }
            b'X' => Conv::Int { size, signed: false, base: 16 },
            b'p' => {
                let start = i;
                while fmt.get(i).is_some_and(u8::is_ascii_alphanumeric) {
                    i += 1;
                }
                Conv::Ptr(ptr_ext(&fmt[start..i]))
            }
            _ => {
                if !lit.is_empty() {
                    out.push(Piece::Lit(std::mem::take(&mut lit)));
                }
                out.push(Piece::Stop);
                return out;
            }
        };
        if !lit.is_empty() {
            out.push(Piece::Lit(std::mem::take(&mut lit)));
        }
        out.push(Piece::Spec(Spec { flags, width, prec, conv }));
    }
    if !lit.is_empty() {
        out.push(Piece::Lit(lit));
    }
    out
}

fn atoi(fmt: &[u8], i: &mut usize) -> i32 {
    let mut v: i32 = 0;
    while let Some(d) = fmt.get(*i).filter(|d| d.is_ascii_digit()) {
        v = v.saturating_mul(10).saturating_add((d - b'0') as i32);
        *i += 1;
    }
    clamp_count(v)
}

/// The kernel renders an event into a one-page `trace_seq`, so no width or precision can
/// matter beyond a page; clamping also keeps hostile formats and records from making the
/// renderer pad without bound.
pub(crate) const MAX_COUNT: i32 = 4096;

pub(crate) fn clamp_count(v: i32) -> i32 {
    v.clamp(-MAX_COUNT, MAX_COUNT)
}

fn ptr_ext(e: &[u8]) -> PtrExt {
    let has = |c: u8| e.iter().skip(1).any(|&x| x == c);
    match e.first() {
        Some(b's') => PtrExt::Sym { offset: false, backtrace: false },
        Some(b'S') => PtrExt::Sym { offset: true, backtrace: false },
        Some(b'B') => PtrExt::Sym { offset: true, backtrace: true },
        Some(b'I' | b'i') => match e.get(1) {
            Some(b'4') => PtrExt::Ip4,
            Some(b'6') => {
                PtrExt::Ip6 { compressed: e[0] == b'I' && has(b'c'), colons: e[0] == b'I' }
            }
            Some(b'S') => PtrExt::Sockaddr { port: has(b'p'), compressed: has(b'c') },
            _ => PtrExt::Raw,
        },
        Some(b'M') => {
            PtrExt::Mac { reversed: has(b'R'), sep: Some(if has(b'F') { b'-' } else { b':' }) }
        }
        Some(b'm') => PtrExt::Mac { reversed: has(b'R'), sep: None },
        Some(b'U') => PtrExt::Uuid {
            guid: matches!(e.get(1), Some(b'l' | b'L')),
            upper: matches!(e.get(1), Some(b'B' | b'L')),
        },
        Some(b'b') => PtrExt::Bitmap { list: e.get(1) == Some(&b'l') },
        _ => PtrExt::Raw,
    }
}

/// The kernel's `number()`: `num` already reduced to the conversion's type; `SIGN` in
/// `flags` means it is to be read as signed 64-bit. `width`/`prec` are -1 when absent.
pub(crate) fn number(out: &mut String, num: u64, base: u8, flags: u8, width: i32, prec: i32) {
    let mut flags = flags;
    let mut num = num;
    let mut field_width = width;
    let mut precision = prec;
    let locase = flags & SMALL != 0;
    let need_pfx = flags & SPECIAL != 0 && base != 10;
    let is_zero = num == 0;
    if flags & LEFT != 0 {
        flags &= !ZEROPAD;
    }
    let mut sign = 0u8;
    if flags & SIGN != 0 {
        if (num as i64) < 0 {
            sign = b'-';
            num = (num as i64).wrapping_neg() as u64;
            field_width -= 1;
        } else if flags & PLUS != 0 {
            sign = b'+';
            field_width -= 1;
        } else if flags & SPACE != 0 {
            sign = b' ';
            field_width -= 1;
        }
    }
    if need_pfx {
        if base == 16 {
            field_width -= 2;
        } else if !is_zero {
            field_width -= 1;
        }
    }
    let digits = match base {
        16 => Digits::hex(num, !locase),
        8 => Digits::oct(num),
        _ => Digits::dec(num),
    };
    let n = digits.len() as i32;
    if n > precision {
        precision = n;
    }
    field_width -= precision;
    let count = |c: i32| c.max(0) as usize;
    let mut w = AsciiWriter::new(out);
    if flags & (ZEROPAD | LEFT) == 0 {
        w.repeat(b' ', count(field_width));
        field_width = field_width.min(0);
    }
    if sign != 0 {
        w.byte(sign);
    }
    if need_pfx {
        if base == 16 || !is_zero {
            w.byte(b'0');
        }
        if base == 16 {
            w.byte(if locase { b'x' } else { b'X' });
        }
    }
    if flags & LEFT == 0 {
        w.repeat(if flags & ZEROPAD != 0 { b'0' } else { b' ' }, count(field_width));
        field_width = field_width.min(0);
    }
    w.repeat(b'0', count(precision - n));
    w.bytes(digits.as_bytes());
    w.repeat(b' ', count(field_width));
}

/// Decimal `u64`, no padding (the common case, kept branch-light).
#[inline]
pub(crate) fn push_dec(out: &mut String, v: u64) {
    Digits::dec(v).push_to(out);
}

/// Lowercase hex, no padding.
#[inline]
pub(crate) fn push_hex(out: &mut String, v: u64) {
    Digits::hex(v, false).push_to(out);
}

/// `%x`/`%X` (`SMALL` in `flags`: lower case) with `SPECIAL` (`0x`/`0X`), no width or
/// precision: what [`number`] prints for an unsigned value then.
#[inline]
pub(crate) fn push_hex_prefixed(out: &mut String, v: u64, flags: u8) {
    let lower = flags & SMALL != 0;
    if flags & SPECIAL != 0 {
        out.push_str(if lower { "0x" } else { "0X" });
    }
    Digits::hex(v, !lower).push_to(out);
}

/// `%02x` of a byte.
#[inline]
pub(crate) fn push_hex2(out: &mut String, b: u8, upper: bool) {
    const L: &[u8; 16] = b"0123456789abcdef";
    const U: &[u8; 16] = b"0123456789ABCDEF";
    let t = if upper { U } else { L };
    push_ascii(out, &[t[(b >> 4) as usize], t[(b & 15) as usize]]);
}

/// Append raw bytes: as text when they are UTF-8, else with U+FFFD for invalid sequences
/// (the kernel writes the bytes; a `String` cannot hold them).
#[inline]
pub(crate) fn push_bytes(out: &mut String, b: &[u8]) {
    push_ascii(out, b);
}

/// Pad the text appended since byte `start` to `width` (the kernel's `widen_string`), after
/// cutting it to `prec` bytes. Counts bytes, as the kernel does.
pub(crate) fn widen(out: &mut String, start: usize, flags: u8, width: i32, prec: i32) {
    if prec >= 0 && out.len() - start > prec as usize {
        let mut cut = start + prec as usize;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
    }
    let len = (out.len() - start) as i32;
    if width <= len {
        return;
    }
    let spaces = (width - len) as usize;
    if flags & LEFT != 0 {
        AsciiWriter::new(out).repeat(b' ', spaces);
    } else {
        out.insert_str(start, &" ".repeat(spaces));
    }
}
