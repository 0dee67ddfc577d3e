//! Compile-time checks of a `trace_event!` printk against its fields, and the `print fmt`
//! text built from it.
//!
//! The checker runs in a `const` item, so a mistake is a compile error whose text is the
//! message built here, e.g.
//! `tp: printk argument 3 (`c`) is a 64-bit field: use %ld, %lu, %lx, %lld, %llu or %llx`.

use crate::field::PrintKind;

/// A message built at compile time (no allocation in const fns).
#[derive(Clone, Copy)]
pub struct Msg {
    buf: [u8; 240],
    len: usize,
}

impl Msg {
    const fn new() -> Msg {
        Msg { buf: [0; 240], len: 0 }
    }

    const fn push(mut self, s: &str) -> Msg {
        let b = s.as_bytes();
        let mut i = 0;
        while i < b.len() && self.len < self.buf.len() {
            self.buf[self.len] = b[i];
            self.len += 1;
            i += 1;
        }
        self
    }

    const fn push_num(self, n: usize) -> Msg {
        let mut digits = [0u8; 20];
        let (mut n, mut k) = (n, 0);
        loop {
            digits[k] = b'0' + (n % 10) as u8;
            k += 1;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        let mut m = self;
        while k > 0 {
            k -= 1;
            if m.len < m.buf.len() {
                m.buf[m.len] = digits[k];
                m.len += 1;
            }
        }
        m
    }

    /// True when the check passed.
    pub const fn is_ok(&self) -> bool {
        self.len == 0
    }

    pub const fn as_str(&self) -> &str {
        let (head, _) = self.buf.split_at(self.len);
        match core::str::from_utf8(head) {
            Ok(s) => s,
            Err(_) => "tp: printk check failed",
        }
    }
}

const fn arg_msg(i: usize, name: &str) -> Msg {
    Msg::new().push("tp: printk argument ").push_num(i + 1).push(" (`").push(name).push("`) ")
}

/// Check a printk format against the kinds of the fields its arguments name.
/// Returns an empty [`Msg`] when it matches.
pub const fn check(fmt: &str, args: &[(&str, PrintKind)]) -> Msg {
    let b = fmt.as_bytes();
    let mut i = 0;
    let mut argi = 0;
    while i < b.len() {
        if b[i] != b'%' {
            if b[i] == b'"' || b[i] == b'\\' {
                return Msg::new().push("tp: printk format may not contain `\"` or `\\`");
            }
            i += 1;
            continue;
        }
        i += 1;
        if i < b.len() && b[i] == b'%' {
            i += 1;
            continue;
        }
        // flags, width, precision
        while i < b.len() && matches!(b[i], b'-' | b'+' | b' ' | b'#' | b'0'..=b'9' | b'.') {
            i += 1;
        }
        let mut longs = 0;
        let mut other_len = false;
        while i < b.len() && matches!(b[i], b'l' | b'h' | b'z' | b'L' | b'j' | b't') {
            if b[i] == b'l' {
                longs += 1;
            } else if b[i] == b'z' {
                longs = 1;
            } else {
                other_len = true;
            }
            i += 1;
        }
        if i >= b.len() {
            return Msg::new().push("tp: printk format ends inside a conversion");
        }
        let conv = b[i];
        i += 1;
        if argi >= args.len() {
            return Msg::new()
                .push("tp: printk format has more conversions than arguments (")
                .push_num(args.len())
                .push(" arguments)");
        }
        let (name, kind) = args[argi];
        match conv {
            b'd' | b'i' | b'u' | b'x' | b'X' | b'o' | b'c' => match kind {
                PrintKind::Int { size } => {
                    if size == 8 && longs == 0 {
                        return arg_msg(argi, name)
                            .push("is a 64-bit field: use %ld, %lu, %lx, %lld, %llu or %llx");
                    }
                    if other_len && size > 2 {
                        return arg_msg(argi, name)
                            .push("is wider than the h/hh length modifier prints");
                    }
                }
                _ => {
                    return arg_msg(argi, name).push("is not an integer: print it with %s");
                }
            },
            b's' => {
                if let PrintKind::Int { .. } = kind {
                    return arg_msg(argi, name)
                        .push("is an integer: print it with %d, %u, %x (%ld... for 64-bit)");
                }
            }
            b'p' => match kind {
                PrintKind::Int { size: 8 } => {}
                _ => return arg_msg(argi, name).push("is not a 64-bit integer: %p needs one"),
            },
            _ => {
                return Msg::new()
                    .push("tp: printk conversion %")
                    .push(match core::str::from_utf8(b.split_at(i).0.split_at(i - 1).1) {
                        Ok(s) => s,
                        Err(_) => "?",
                    })
                    .push(" is not supported (use d i u x X o c s p)");
            }
        }
        argi += 1;
    }
    if argi < args.len() {
        return Msg::new()
            .push("tp: printk has ")
            .push_num(args.len())
            .push(" arguments but its format has only ")
            .push_num(argi)
            .push(" conversions");
    }
    Msg::new()
}

#[cfg(test)]
mod tests {
    use super::*;
    const I4: PrintKind = PrintKind::Int { size: 4 };
    const I8: PrintKind = PrintKind::Int { size: 8 };

    #[test]
    fn accepts_matching_formats() {
        assert!(check("a=%d b=%u c=%ld", &[("a", I4), ("b", I4), ("c", I8)]).is_ok());
        assert!(check("s=%s 100%% x=%#08llx", &[("s", PrintKind::Str), ("x", I8)]).is_ok());
        assert!(check("", &[]).is_ok());
    }

    #[test]
    fn explains_mismatches() {
        let m = check("c=%d", &[("c", I8)]);
        assert_eq!(
            m.as_str(),
            "tp: printk argument 1 (`c`) is a 64-bit field: use %ld, %lu, %lx, %lld, %llu or %llx"
        );
        assert!(check("a=%s", &[("a", I4)]).as_str().contains("is an integer"));
        assert!(check("a=%d", &[("a", PrintKind::Str)]).as_str().contains("not an integer"));
        assert!(check("a=%d b=%d", &[("a", I4)]).as_str().contains("more conversions"));
        assert!(check("a=%d", &[("a", I4), ("b", I4)]).as_str().contains("only 1 conversions"));
        assert!(check("a=%f", &[("a", I4)]).as_str().contains("%f is not supported"));
    }
}
