//! Evaluation of compiled expressions against one record, and the printf driver.

use super::ast::{BinOp, Helper, IntTy, Node, UnOp};
use super::printf::{self, Conv, Spec, LEFT, SIGN};
use super::{helpers, pointer, RenderCtx};
use crate::format::{read_uint, Field, FieldKind};

/// Printed where a value cannot be had from the record (record too short, a dynamic field
/// pointing outside it, a division by zero).
pub(crate) const BAD: &str = "[?]";

/// A value at render time, borrowing the record or the program.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Val<'a> {
    /// In normal form for its type (see [`IntTy::norm`]).
    Int(u64, IntTy),
    /// Pointer to data: a field's bytes or a string literal.
    Bytes(&'a [u8]),
    /// A helper's text, written when printed.
    Text(&'a Helper),
    Bad,
}

pub(crate) struct Env<'a> {
    pub rec: &'a [u8],
    pub be: bool,
    pub fields: &'a [Field],
}

impl Val<'_> {
    pub fn truthy(&self) -> bool {
        match *self {
            Val::Int(v, _) => v != 0,
            Val::Bytes(..) | Val::Text(_) => true,
            Val::Bad => false,
        }
    }

    /// The value as the 64-bit pattern an `unsigned long` parameter receives.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Val::Int(v, _) => Some(v),
            _ => None,
        }
    }
}

pub(crate) fn field_bytes<'a>(env: &Env<'a>, idx: u16) -> Option<&'a [u8]> {
    let f = env.fields.get(idx as usize)?;
    f.bytes(env.rec, env.be)
}

pub(crate) fn eval<'a>(n: &'a Node, env: &Env<'a>) -> Val<'a> {
    match n {
        Node::Int(v, t) => Val::Int(*v, *t),
        Node::Str(s) => Val::Bytes(s),
        Node::Field { off, ty } => {
            let off = *off as usize;
            match env.rec.get(off..off + ty.size as usize) {
                Some(b) => Val::Int(ty.norm(read_uint(b, env.be)), *ty),
                None => Val::Bad,
            }
        }
        Node::Elem { off, end, ty } => {
            let (off, end) = (*off as usize, *end as usize);
            match env.rec.get(off..off + ty.size as usize) {
                Some(b) if env.rec.len() >= end => Val::Int(ty.norm(read_uint(b, env.be)), *ty),
                _ => Val::Bad,
            }
        }
        Node::Data { field, .. } => match field_bytes(env, *field) {
            Some(b) => Val::Bytes(b),
            None => Val::Bad,
        },
        Node::DynLen { field } => {
            let Some(f) = env.fields.get(*field as usize) else { return Val::Bad };
            if !matches!(f.kind, FieldKind::DataLoc | FieldKind::RelLoc) {
                return Val::Int(f.size as u64, IntTy::UINT);
            }
            match env.rec.get(f.offset..f.offset + 4) {
                Some(b) => Val::Int((read_uint(b, env.be) >> 16) & 0xffff, IntTy::UINT),
                None => Val::Bad,
            }
        }
        Node::Index { base, idx, elem } => {
            let (Val::Bytes(b), Val::Int(i, it)) = (eval(base, env), eval(idx, env)) else {
                return Val::Bad;
            };
            let sz = elem.size as usize;
            let i = if it.signed && (i as i64) < 0 { usize::MAX } else { i as usize };
            let Some(start) = i.checked_mul(sz) else { return Val::Bad };
            match b.get(start..start.saturating_add(sz)) {
                Some(e) => Val::Int(elem.norm(read_uint(e, env.be)), *elem),
                None => Val::Bad,
            }
        }
        Node::Unary { op, e, ty } => {
            let Val::Int(v, _) = eval(e, env) else { return Val::Bad };
            let v = ty.norm(v);
            let r = match op {
                UnOp::Neg => v.wrapping_neg(),
                UnOp::BitNot => !v,
            };
            Val::Int(ty.norm(r), *ty)
        }
        Node::Binary { op, a, b, ty } => {
            let (Val::Int(x, _), Val::Int(y, _)) = (eval(a, env), eval(b, env)) else {
                return Val::Bad;
            };
            binary(*op, x, y, *ty)
        }
        Node::LogAnd(a, b) => {
            let r = eval(a, env).truthy() && eval(b, env).truthy();
            Val::Int(r as u64, IntTy::INT)
        }
        Node::LogOr(a, b) => {
            let r = eval(a, env).truthy() || eval(b, env).truthy();
            Val::Int(r as u64, IntTy::INT)
        }
        Node::LogNot(e) => match eval(e, env) {
            Val::Bad => Val::Bad,
            v => Val::Int(!v.truthy() as u64, IntTy::INT),
        },
        Node::Cond { c, a, b, ty } => {
            let c = eval(c, env);
            if let Val::Bad = c {
                return Val::Bad;
            }
            let v = if c.truthy() { eval(a, env) } else { eval(b, env) };
            match (v, ty) {
                (Val::Int(v, _), Some(t)) => Val::Int(t.norm(v), *t),
                // `x ? "s" : 0` (NULL): the integer side is a null string.
                (Val::Int(0, _), None) => Val::Bytes(&[]),
                (v, _) => v,
            }
        }
        Node::PtrCast { e, .. } => match eval(e, env) {
            Val::Int(v, _) => Val::Int(v, IntTy::ULONG),
            v => v,
        },
        Node::Cast { e, ty } => match eval(e, env) {
            Val::Int(v, _) => Val::Int(ty.norm(v), *ty),
            v => v,
        },
        Node::JiffiesToMsecs { e, hz } => {
            let Val::Int(j, _) = eval(e, env) else { return Val::Bad };
            let hz = (*hz as u64).max(1);
            let ms = if hz <= 1000 && 1000 % hz == 0 {
                (1000 / hz).wrapping_mul(j)
            } else if hz > 1000 && hz % 1000 == 0 {
                j.div_ceil(hz / 1000)
            } else {
                ((j as u128 * 1000).div_ceil(hz as u128)) as u64
            };
            Val::Int(ms & 0xffff_ffff, IntTy::UINT)
        }
        Node::Helper(h) => Val::Text(h),
        Node::Unknown => Val::Bad,
    }
}

fn binary(op: BinOp, x: u64, y: u64, ty: IntTy) -> Val<'static> {
    let (x, yn) = (ty.norm(x), ty.norm(y));
    let s = ty.signed;
    let cmp = |r: bool| Val::Int(r as u64, IntTy::INT);
    let r = match op {
        BinOp::Mul => x.wrapping_mul(yn),
        BinOp::Div | BinOp::Rem => {
            if yn == 0 {
                return Val::Bad;
            }
            match (op, s) {
                (BinOp::Div, true) => (x as i64).wrapping_div(yn as i64) as u64,
                (BinOp::Div, false) => x / yn,
                (_, true) => (x as i64).wrapping_rem(yn as i64) as u64,
                _ => x % yn,
            }
        }
        BinOp::Add => x.wrapping_add(yn),
        BinOp::Sub => x.wrapping_sub(yn),
        // The shift count keeps its own type; only its value matters.
        BinOp::Shl => x.wrapping_shl(y as u32 & 63),
        BinOp::Shr => {
            if s {
                ((x as i64) >> (y as u32 & 63)) as u64
            } else {
                x >> (y as u32 & 63)
            }
        }
        BinOp::Lt => return cmp(if s { (x as i64) < yn as i64 } else { x < yn }),
        BinOp::Gt => return cmp(if s { (x as i64) > yn as i64 } else { x > yn }),
        BinOp::Le => return cmp(if s { (x as i64) <= yn as i64 } else { x <= yn }),
        BinOp::Ge => return cmp(if s { (x as i64) >= yn as i64 } else { x >= yn }),
        BinOp::Eq => return cmp(x == yn),
        BinOp::Ne => return cmp(x != yn),
        BinOp::And => x & yn,
        BinOp::Xor => x ^ yn,
        BinOp::Or => x | yn,
    };
    Val::Int(ty.norm(r), ty)
}

/// One step of a print fmt, before [`super::program::Program`] compiles the steps.
#[derive(Debug, Clone)]
pub(crate) enum Op {
    Lit(Box<str>),
    Conv { spec: Spec, arg: u16, width_arg: Option<u16>, prec_arg: Option<u16> },
    Stop,
}

/// A `*` width or precision argument.
pub(crate) fn int_arg(n: &Node, env: &Env<'_>) -> i32 {
    match eval(n, env) {
        Val::Int(v, _) => printf::clamp_count(v as u32 as i32),
        _ => 0,
    }
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn conv(
    out: &mut String,
    c: &Conv,
    flags: u8,
    width: i32,
    prec: i32,
    v: Val<'_>,
    env: &Env<'_>,
    ctx: &RenderCtx<'_>,
) {
    match c {
        Conv::Int { size, signed, base } => match v {
            Val::Int(x, _) => {
                let t = IntTy { size: *size, signed: *signed };
                let f = if *signed { flags | SIGN } else { flags };
                let x = t.norm(x);
                if width < 0 && prec < 0 && *base == 10 && f & printf::PLUS == 0 {
                    if *signed && (x as i64) < 0 {
                        out.push('-');
                        printf::push_dec(out, (x as i64).unsigned_abs());
                    } else if !*signed || f & printf::SPACE == 0 {
                        printf::push_dec(out, x);
                    } else {
                        printf::number(out, x, *base, f, width, prec);
                    }
                } else if width < 0 && prec < 0 && *base == 16 {
                    // `%x`, `%lx`, `%#x` without width or precision: `number()` pads nothing.
                    printf::push_hex_prefixed(out, x, f);
                } else {
                    printf::number(out, x, *base, f, width, prec);
                }
            }
            _ => out.push_str(BAD),
        },
        Conv::Char => {
            let Val::Int(x, _) = v else {
                out.push_str(BAD);
                return;
            };
            let pad = (width - 1).max(0) as usize;
            if flags & LEFT == 0 {
                out.extend(std::iter::repeat_n(' ', pad));
            }
            printf::push_bytes(out, &[x as u8]);
            if flags & LEFT != 0 {
                out.extend(std::iter::repeat_n(' ', pad));
            }
        }
        Conv::Str => {
            let start = out.len();
            match v {
                Val::Bytes(b) => {
                    let end = memchr::memchr(0, b).unwrap_or(b.len());
                    let mut s = &b[..end];
                    if prec >= 0 && s.len() > prec as usize {
                        s = &s[..prec as usize];
                    }
                    let pad = (width.max(0) as usize).saturating_sub(s.len());
                    if flags & LEFT == 0 {
                        out.extend(std::iter::repeat_n(' ', pad));
                    }
                    printf::push_bytes(out, s);
                    if flags & LEFT != 0 {
                        out.extend(std::iter::repeat_n(' ', pad));
                    }
                    return;
                }
                Val::Text(h) => helpers::render(out, h, env, ctx),
                Val::Int(p, _) => kernel_string(out, p, ctx),
                Val::Bad => out.push_str(BAD),
            }
            printf::widen(out, start, flags, width, prec);
        }
        Conv::Ptr(ext) => {
            let start = out.len();
            pointer::render(out, ext, flags, width, v, env, ctx);
            // Extensions that print text are widened like strings; raw values and symbols
            // handle width themselves.
            if !matches!(ext, printf::PtrExt::Raw | printf::PtrExt::Bitmap { .. }) {
                printf::widen(out, start, flags, width, -1);
            }
        }
    }
}

/// `%s` of a pointer into kernel memory: NULL and error values print as the kernel's
/// `check_pointer()` does; other addresses are looked up in `printk_formats` (tracepoint
/// strings); an address found nowhere prints as `0x...` (documented divergence: the kernel
/// reads its own memory there).
pub(crate) fn kernel_string(out: &mut String, p: u64, ctx: &RenderCtx<'_>) {
    if p == 0 {
        out.push_str("(null)");
    } else if p < 4096 || p >= (-4095i64) as u64 {
        out.push_str("(efault)");
    } else if let Some(s) = ctx.printk.get(p) {
        out.push_str(s);
    } else {
        out.push_str("0x");
        printf::push_hex(out, p);
    }
}
