//! The `__print_*` helpers and `__get_bitmask`, as kernel/trace/trace_output.c prints them.

use super::ast::Helper;
use super::pointer::bitmap_hex;
use super::printf::{push_bytes, push_hex, push_hex2};
use super::render::{eval, Env, Val, BAD};
use super::RenderCtx;
use crate::format::read_uint;

pub(crate) fn render(out: &mut String, h: &Helper, env: &Env<'_>, ctx: &RenderCtx<'_>) {
    // `unsigned long` parameters are 32 bits on 32-bit kernels; the `_u64` variants are not.
    let ulong = |v: u64, wide: bool| if wide || ctx.long_size >= 8 { v } else { v & 0xffff_ffff };
    match h {
        Helper::Flags { val, delim, table, wide } => {
            // trace_print_flags_seq(): take matching masks in table order while bits remain;
            // leftover bits as 0x%lx.
            let Some(mut flags) = eval(val, env).as_u64().map(|v| ulong(v, *wide)) else {
                out.push_str(BAD);
                return;
            };
            let mut first = true;
            for (mask, name) in table {
                if flags == 0 {
                    break;
                }
                if flags & mask != *mask {
                    continue;
                }
                flags &= !mask;
                if !first {
                    push_bytes(out, delim);
                }
                first = false;
                push_bytes(out, name);
            }
            if flags != 0 {
                if !first {
                    push_bytes(out, delim);
                }
                out.push_str("0x");
                push_hex(out, flags);
            }
        }
        Helper::Symbolic { val, table, wide } => {
            // trace_print_symbols_seq(): the first equal value; if nothing was written
            // (no match, or an empty name), 0x%lx.
            let Some(v) = eval(val, env).as_u64().map(|v| ulong(v, *wide)) else {
                out.push_str(BAD);
                return;
            };
            let start = out.len();
            if let Some((_, name)) = table.iter().find(|(k, _)| *k == v) {
                push_bytes(out, name);
            }
            if out.len() == start {
                out.push_str("0x");
                push_hex(out, v);
            }
        }
        Helper::Hex { buf, len, concat } => {
            let (Val::Bytes(b), Val::Int(n, _)) = (eval(buf, env), eval(len, env)) else {
                out.push_str(BAD);
                return;
            };
            // The length is an int in the kernel; a negative one prints nothing.
            let n = n as i64;
            let n = if n < 0 { 0 } else { n as usize };
            let Some(b) = b.get(..n) else {
                out.push_str(BAD);
                return;
            };
            for (i, x) in b.iter().enumerate() {
                if i > 0 && !concat {
                    out.push(' ');
                }
                push_hex2(out, *x, false);
            }
        }
        Helper::Array { buf, count, el_size } => {
            let (Val::Bytes(b), Val::Int(n, _), Val::Int(es, _)) =
                (eval(buf, env), eval(count, env), eval(el_size, env))
            else {
                out.push_str(BAD);
                return;
            };
            out.push('{');
            let es = es as usize;
            let mut p = 0usize;
            // Bounded by the data: a count read from the record cannot make this spin.
            let n = if matches!(es, 1 | 2 | 4 | 8) { n } else { n.min(b.len() as u64) };
            for i in 0..n {
                if i > 0 {
                    out.push(',');
                }
                match es {
                    1 | 2 | 4 | 8 => match b.get(p..p + es) {
                        Some(e) => {
                            out.push_str("0x");
                            push_hex(out, read_uint(e, env.be));
                        }
                        None => {
                            out.push_str(BAD);
                            break;
                        }
                    },
                    _ => {
                        out.push_str("BAD SIZE:");
                        super::printf::push_dec(out, es as u64);
                        out.push_str(" 0x");
                        push_hex(out, b.get(p).copied().unwrap_or(0) as u64);
                    }
                }
                p = p.saturating_add(es);
            }
            out.push('}');
        }
        Helper::Bitmask { buf } => match eval(buf, env) {
            Val::Bytes(b) => bitmap_hex(out, b, b.len() * 8, env.be),
            _ => out.push_str(BAD),
        },
    }
}
