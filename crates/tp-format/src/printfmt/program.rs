//! A print fmt as a straight-line program: each step carries the constant text before it
//! and one conversion, its argument's field offset and types and its way of printing
//! chosen when the event's format is compiled. The common conversions (`%d`/`%u`/`%x` of a
//! scalar field, `%s` of a string field, without width or precision) print without
//! evaluating an expression or dispatching on the conversion; every other conversion is a
//! [`Kind::Any`] step that the interpreter (`render::conv`) prints exactly as before.

use super::ascii;
use super::ast::{IntTy, Node};
use super::printf::{self, Conv, Count, Spec, LEFT, PLUS, SIGN, SPACE};
use super::render::{self, Env, Op, BAD};
use super::RenderCtx;
use crate::format::read_uint;

/// Constant text.
#[derive(Debug, Clone)]
enum Lit {
    None,
    /// At most 16 ASCII bytes (most are: `, `, ` prev_pid=`), copied as a fixed 16.
    Short([u8; 16], u8),
    Long(Box<str>),
}

impl Lit {
    fn new(s: &str) -> Lit {
        if s.is_empty() {
            Lit::None
        } else if s.len() <= 16 && s.is_ascii() {
            let mut b = [0u8; 16];
            b[..s.len()].copy_from_slice(s.as_bytes());
            Lit::Short(b, s.len() as u8)
        } else {
            Lit::Long(s.into())
        }
    }

    #[inline]
    fn push(&self, out: &mut String) {
        match self {
            Lit::None => {}
            // SAFETY: `Short`s are built from ASCII only (`Lit::new`).
            Lit::Short(b, n) => unsafe { ascii::push_fixed(out, b, *n as usize) },
            Lit::Long(s) => out.push_str(s),
        }
    }
}

/// An integer read from the record: `ty.size` bytes at `off` (when the record holds `end`
/// bytes), reduced to `ty` and then to `cast` (a C cast in the print fmt, if any), as
/// `render::eval` reduces a field or a constant index into a fixed array.
#[derive(Debug, Clone, Copy)]
struct Int {
    off: u32,
    end: u32,
    ty: IntTy,
    cast: Option<IntTy>,
}

impl Int {
    /// The argument when it is a scalar field, maybe cast.
    fn of(n: &Node) -> Option<Int> {
        let scalar = |n: &Node| match *n {
            Node::Field { off, ty } => Some(Int { off, end: 0, ty, cast: None }),
            Node::Elem { off, end, ty } => Some(Int { off, end, ty, cast: None }),
            _ => None,
        };
        match n {
            Node::Cast { e, ty } => scalar(e).map(|i| Int { cast: Some(*ty), ..i }),
            Node::PtrCast { e, .. } => scalar(e),
            n => scalar(n),
        }
    }

    #[inline]
    fn read(self, rec: &[u8], be: bool) -> Option<u64> {
        let off = self.off as usize;
        if rec.len() < self.end as usize {
            return None;
        }
        let b = rec.get(off..off + self.ty.size as usize)?;
        let v = self.ty.norm(read_uint(b, be));
        Some(match self.cast {
            Some(c) => c.norm(v),
            None => v,
        })
    }
}

#[derive(Debug, Clone)]
enum Kind {
    /// Nothing after the text (the format's last text).
    End,
    /// `%d`, `%u`, `%ld`, ... without width, precision, `+` or (signed) ` `: `conv` is the
    /// conversion's type.
    Dec { arg: Int, conv: IntTy },
    /// `%x`, `%lx`, `%#x`, ... without width or precision.
    Hex { arg: Int, conv: IntTy, flags: u8 },
    /// `%s` of an array or dynamic field, without width or precision.
    Str { field: u16 },
    /// Any other conversion, printed by the interpreter.
    Any { spec: Spec, arg: u16, width_arg: Option<u16>, prec_arg: Option<u16> },
    /// A conversion the kernel rejects: output stops.
    Stop,
}

#[derive(Debug, Clone)]
struct Step {
    lit: Lit,
    kind: Kind,
}

/// The compiled program of one print fmt.
#[derive(Debug, Clone)]
pub(crate) struct Program {
    steps: Box<[Step]>,
}

impl Program {
    /// Steps for `ops` (literals already merged), whose arguments are `args`.
    pub(crate) fn new(ops: Vec<Op>, args: &[Node]) -> Program {
        let mut steps = Vec::with_capacity(ops.len());
        let mut lit = String::new();
        for op in ops {
            let kind = match op {
                Op::Lit(s) => {
                    lit.push_str(&s);
                    continue;
                }
                Op::Stop => Kind::Stop,
                Op::Conv { spec, arg, width_arg, prec_arg } => {
                    Self::conversion(spec, arg, width_arg, prec_arg, args)
                }
            };
            steps.push(Step { lit: Lit::new(&std::mem::take(&mut lit)), kind });
        }
        if !lit.is_empty() {
            steps.push(Step { lit: Lit::new(&lit), kind: Kind::End });
        }
        Program { steps: steps.into() }
    }

    fn conversion(
        spec: Spec,
        arg: u16,
        width_arg: Option<u16>,
        prec_arg: Option<u16>,
        args: &[Node],
    ) -> Kind {
        let plain = spec.width == Count::None && spec.prec == Count::None;
        let node = &args[arg as usize];
        match (&spec.conv, plain, Int::of(node)) {
            (Conv::Int { size, signed, base: 10 }, true, Some(a))
                if spec.flags & PLUS == 0 && !(*signed && spec.flags & SPACE != 0) =>
            {
                return Kind::Dec { arg: a, conv: IntTy { size: *size, signed: *signed } };
            }
            (Conv::Int { size, signed, base: 16 }, true, Some(a)) => {
                let flags = if *signed { spec.flags | SIGN } else { spec.flags };
                return Kind::Hex { arg: a, conv: IntTy { size: *size, signed: *signed }, flags };
            }
            (Conv::Str, true, None) => {
                if let Node::Data { field, .. } = node {
                    return Kind::Str { field: *field };
                }
            }
            _ => {}
        }
        Kind::Any { spec, arg, width_arg, prec_arg }
    }

    /// Append the text for the record in `env`.
    pub(crate) fn run(&self, args: &[Node], env: &Env<'_>, ctx: &RenderCtx<'_>, out: &mut String) {
        for step in self.steps.iter() {
            step.lit.push(out);
            match &step.kind {
                Kind::End => {}
                Kind::Dec { arg, conv } => match arg.read(env.rec, env.be) {
                    Some(v) => {
                        let x = conv.norm(v);
                        if conv.signed && (x as i64) < 0 {
                            out.push('-');
                            printf::push_dec(out, (x as i64).unsigned_abs());
                        } else {
                            printf::push_dec(out, x);
                        }
                    }
                    None => out.push_str(BAD),
                },
                Kind::Hex { arg, conv, flags } => match arg.read(env.rec, env.be) {
                    Some(v) => printf::push_hex_prefixed(out, conv.norm(v), *flags),
                    None => out.push_str(BAD),
                },
                Kind::Str { field } => match render::field_bytes(env, *field) {
                    Some(b) => {
                        let end = memchr::memchr(0, b).unwrap_or(b.len());
                        printf::push_bytes(out, &b[..end]);
                    }
                    None => out.push_str(BAD),
                },
                Kind::Any { spec, arg, width_arg, prec_arg } => {
                    any(spec, *arg, *width_arg, *prec_arg, args, env, ctx, out)
                }
                Kind::Stop => return,
            }
        }
    }
}

/// One conversion by the interpreter: `*` counts resolved, the argument evaluated.
#[allow(clippy::too_many_arguments)]
fn any(
    spec: &Spec,
    arg: u16,
    width_arg: Option<u16>,
    prec_arg: Option<u16>,
    args: &[Node],
    env: &Env<'_>,
    ctx: &RenderCtx<'_>,
    out: &mut String,
) {
    let mut flags = spec.flags;
    let mut width = match (spec.width, width_arg) {
        (Count::Fixed(w), _) => w,
        (Count::Arg, Some(a)) => render::int_arg(&args[a as usize], env),
        _ => -1,
    };
    if spec.width == Count::Arg && width < 0 {
        flags |= LEFT;
        width = width.saturating_neg();
    }
    let prec = match (spec.prec, prec_arg) {
        (Count::Fixed(p), _) => p,
        (Count::Arg, Some(a)) => render::int_arg(&args[a as usize], env).max(0),
        _ => -1,
    };
    let v = render::eval(&args[arg as usize], env);
    render::conv(out, &spec.conv, flags, width, prec, v, env, ctx);
}
