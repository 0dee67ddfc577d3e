//! `%p` and its extensions, as lib/vsprintf.c prints them.

use super::ascii::push_ascii;
use super::printf::{self, number, push_dec, push_hex2, PtrExt, SMALL, ZEROPAD};
use super::render::{Env, Val, BAD};
use super::RenderCtx;

pub(crate) fn render(
    out: &mut String,
    ext: &PtrExt,
    flags: u8,
    width: i32,
    v: Val<'_>,
    env: &Env<'_>,
    ctx: &RenderCtx<'_>,
) {
    let _ = env;
    match (ext, v) {
        (PtrExt::Raw, Val::Int(p, _)) if width < 0 && flags == 0 && ctx.long_size == 8 => {
            // The common case: 16 zero-padded lower-case digits.
            const HEX: &[u8; 16] = b"0123456789abcdef";
            let mut b = [0u8; 16];
            for (i, d) in b.iter_mut().enumerate() {
                *d = HEX[(p >> (60 - 4 * i)) as usize & 15];
            }
            push_ascii(out, &b);
        }
        (PtrExt::Raw, Val::Int(p, _)) => {
            // pointer_string(): 2 * sizeof(void *) zero-padded digits unless a width is given.
            let (w, f) = if width < 0 {
                ((2 * ctx.long_size) as i32, flags | SMALL | ZEROPAD)
            } else {
                (width, flags | SMALL)
            };
            let p = if ctx.long_size == 4 { p & 0xffff_ffff } else { p };
            number(out, p, 16, f, w, -1);
        }
        (PtrExt::Sym { offset, backtrace }, Val::Int(p, _)) => {
            symbol(out, p, *offset, *backtrace, ctx)
        }
        (PtrExt::Ip4, Val::Bytes(b)) => match b.get(..4) {
            Some(a) => ip4(out, a),
            None => out.push_str(BAD),
        },
        (PtrExt::Ip6 { compressed, colons }, Val::Bytes(b)) => match b.get(..16) {
            Some(a) if *compressed => ip6_compressed(out, a),
            Some(a) => ip6_full(out, a, *colons),
            None => out.push_str(BAD),
        },
        (PtrExt::Sockaddr { port, compressed }, Val::Bytes(b)) => {
            sockaddr(out, b, *port, *compressed, env.be)
        }
        (PtrExt::Mac { reversed, sep }, Val::Bytes(b)) => match b.get(..6) {
            Some(a) => {
                for i in 0..6 {
                    if i > 0 {
                        if let Some(s) = sep {
                            out.push(*s as char);
                        }
                    }
                    push_hex2(out, a[if *reversed { 5 - i } else { i }], false);
                }
            }
            None => out.push_str(BAD),
        },
        (PtrExt::Uuid { guid, upper }, Val::Bytes(b)) => match b.get(..16) {
            Some(a) => {
                const GUID: [usize; 16] = [3, 2, 1, 0, 5, 4, 7, 6, 8, 9, 10, 11, 12, 13, 14, 15];
                for i in 0..16 {
                    push_hex2(out, a[if *guid { GUID[i] } else { i }], *upper);
                    if matches!(i, 3 | 5 | 7 | 9) {
                        out.push('-');
                    }
                }
            }
            None => out.push_str(BAD),
        },
        (PtrExt::Bitmap { list }, Val::Bytes(b)) => {
            let nbits = (width.max(0) as usize).min(b.len() * 8);
            if *list {
                bitmap_list(out, b, nbits, env.be)
            } else {
                bitmap_hex(out, b, nbits, env.be)
            }
        }
        _ => out.push_str(BAD),
    }
}

/// `%ps` / `%pS` / `%pB`: `__sprint_symbol()`.
pub(crate) fn symbol(
    out: &mut String,
    addr: u64,
    offset: bool,
    backtrace: bool,
    ctx: &RenderCtx<'_>,
) {
    let a = if backtrace { addr.wrapping_sub(1) } else { addr };
    match ctx.kallsyms.resolve(a).filter(|r| r.size > 0 || r.offset == 0) {
        Some(r) => {
            out.push_str(r.name);
            if offset {
                out.push_str("+0x");
                printf::push_hex(out, r.offset + backtrace as u64);
                out.push_str("/0x");
                printf::push_hex(out, r.size);
            }
            if let Some(m) = r.module {
                out.push_str(" [");
                out.push_str(m);
                out.push(']');
            }
        }
        None => {
            out.push_str("0x");
            printf::push_hex(out, a);
        }
    }
}

fn ip4(out: &mut String, a: &[u8]) {
    for (i, b) in a.iter().take(4).enumerate() {
        if i > 0 {
            out.push('.');
        }
        push_dec(out, *b as u64);
    }
}

fn ip6_full(out: &mut String, a: &[u8], colons: bool) {
    for i in 0..8 {
        if i > 0 && colons {
            out.push(':');
        }
        push_hex2(out, a[2 * i], false);
        push_hex2(out, a[2 * i + 1], false);
    }
}

/// `ip6_compressed_string()`: the longest run (of two or more) of zero words becomes `::`;
/// v4-mapped and ISATAP addresses end in dotted quad.
fn ip6_compressed(out: &mut String, a: &[u8]) {
    let word = |i: usize| u16::from_be_bytes([a[2 * i], a[2 * i + 1]]);
    let v4mapped = a[..10].iter().all(|&b| b == 0) && a[10] == 0xff && a[11] == 0xff;
    let isatap = (a[8] | 0x02) == 0x02 && a[9] == 0 && a[10] == 0x5e && a[11] == 0xfe;
    let use4 = v4mapped || isatap;
    let range = if use4 { 6 } else { 8 };
    let mut longest = 1;
    let mut colonpos = usize::MAX;
    for i in 0..range {
        let run = (i..range).take_while(|&j| word(j) == 0).count();
        if run > longest {
            longest = run;
            colonpos = i;
        }
    }
    let mut need = false;
    let mut i = 0;
    while i < range {
        if i == colonpos {
            if need || i == 0 {
                out.push(':');
            }
            out.push(':');
            need = false;
            i += longest;
            continue;
        }
        if need {
            out.push(':');
        }
        printf::push_hex(out, word(i) as u64);
        need = true;
        i += 1;
    }
    if use4 {
        if need {
            out.push(':');
        }
        ip4(out, &a[12..16]);
    }
}

/// `%pIS`: `struct sockaddr_in` / `sockaddr_in6` by family.
fn sockaddr(out: &mut String, b: &[u8], port: bool, compressed: bool, be: bool) {
    let Some(fam) = b.get(..2) else {
        out.push_str(BAD);
        return;
    };
    let family = if be {
        u16::from_be_bytes([fam[0], fam[1]])
    } else {
        u16::from_le_bytes([fam[0], fam[1]])
    };
    let port_no = b.get(2..4).map(|p| u16::from_be_bytes([p[0], p[1]]) as u64);
    match family {
        2 => {
            let Some(a) = b.get(4..8) else {
                out.push_str(BAD);
                return;
            };
            ip4(out, a);
            if port {
                out.push(':');
                push_dec(out, port_no.unwrap_or(0));
            }
        }
        10 => {
            let Some(a) = b.get(8..24) else {
                out.push_str(BAD);
                return;
            };
            if port {
                out.push('[');
            }
            if compressed {
                ip6_compressed(out, a);
            } else {
                ip6_full(out, a, true);
            }
            if port {
                out.push_str("]:");
                push_dec(out, port_no.unwrap_or(0));
            }
        }
        _ => out.push_str("(einval)"),
    }
}

fn word(b: &[u8], i: usize, be: bool) -> u64 {
    let mut w = [0u8; 8];
    let s = b.get(i * 8..).unwrap_or(&[]);
    let n = s.len().min(8);
    w[..n].copy_from_slice(&s[..n]);
    if be {
        u64::from_be_bytes(w)
    } else {
        u64::from_le_bytes(w)
    }
}

fn bit(b: &[u8], n: usize, be: bool) -> bool {
    word(b, n / 64, be) >> (n % 64) & 1 != 0
}

/// `bitmap_string()`: 32-bit hex chunks, most significant first, comma separated.
pub(crate) fn bitmap_hex(out: &mut String, b: &[u8], nbits: usize, be: bool) {
    let mut chunksz = nbits & 31;
    if chunksz == 0 {
        chunksz = 32;
    }
    let mut i = nbits.div_ceil(32) as isize * 32 - 32;
    let mut first = true;
    while i >= 0 {
        let iu = i as usize;
        let mask = ((1u64 << chunksz) - 1) as u32;
        let val = (word(b, iu / 64, be) >> (iu % 64)) as u32 & mask;
        if !first {
            out.push(',');
        }
        first = false;
        number(out, val as u64, 16, SMALL | ZEROPAD, chunksz.div_ceil(4) as i32, -1);
        chunksz = 32;
        i -= 32;
    }
}

/// `bitmap_list_string()`: ranges of set bits, `0-3,5`.
pub(crate) fn bitmap_list(out: &mut String, b: &[u8], nbits: usize, be: bool) {
    let mut first = true;
    let mut i = 0;
    while i < nbits {
        if !bit(b, i, be) {
            i += 1;
            continue;
        }
        let start = i;
        while i < nbits && bit(b, i, be) {
            i += 1;
        }
        if !first {
            out.push(',');
        }
        first = false;
        push_dec(out, start as u64);
        if i - 1 > start {
            out.push('-');
            push_dec(out, (i - 1) as u64);
        }
    }
}
