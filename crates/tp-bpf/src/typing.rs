//! Types of expressions in one probe's context, and the maps' types gathered over the whole
//! program before any code is generated (a map may be written in one probe and read in
//! another, in either order).

use std::collections::HashMap;

use tp_format::format::{Field, FieldKind};

use crate::ast::*;
use crate::error::{Error, Result};
use crate::probes::{Attach, Kind};
use crate::types::*;

/// How a tracepoint field reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldAccess {
    /// An integer of `size` bytes at `offset` in the record.
    Int { offset: usize, size: usize, signed: bool },
    /// A fixed char array (`char comm[16]`): a string of at most `size` bytes.
    Chars { offset: usize, size: usize },
    /// `__data_loc char[]`: a u32 at `offset` whose low half is where the string starts.
    DataLocStr { offset: usize },
    /// An array of integers: `args->args[i]`.
    Array { offset: usize, elem: usize, len: usize, signed: bool },
}

pub fn field_access(f: &Field) -> FieldAccess {
    let is_char = f.is_string();
    match f.kind {
        FieldKind::DataLoc if is_char => FieldAccess::DataLocStr { offset: f.offset },
        FieldKind::Array { .. } if is_char => FieldAccess::Chars { offset: f.offset, size: f.size },
        FieldKind::Array { .. } => {
            let elem = f.element_size().max(1);
            FieldAccess::Array { offset: f.offset, elem, len: f.size / elem, signed: f.signed }
        }
        _ => FieldAccess::Int { offset: f.offset, size: f.size.min(8), signed: f.signed },
    }
}

/// The type of one field read.
pub fn field_ty(a: &FieldAccess) -> Ty {
    match a {
        FieldAccess::Int { signed, .. } => Ty::Int { signed: *signed },
        FieldAccess::Chars { size, .. } => Ty::Str(*size),
        FieldAccess::DataLocStr { .. } => Ty::Str(STRLEN),
        FieldAccess::Array { .. } => Ty::Void,
    }
}

/// The maps' types and the program's scratch variables, as typing found them.
#[derive(Debug, Default, Clone)]
pub struct MapTypes {
    pub maps: Vec<UserMap>,
}

impl MapTypes {
    pub fn get(&self, name: &str) -> Option<&UserMap> {
        self.maps.iter().find(|m| m.name == name)
    }
}

/// Types in one probe's context.
pub struct Typer<'a> {
    pub attach: &'a Attach,
    pub maps: &'a MapTypes,
    pub vars: HashMap<String, Ty>,
}

pub fn builtin_ty(name: &str, pos: Pos, attach: &Attach) -> Result<Ty> {
    Ok(match name {
        "pid" | "tid" | "uid" | "gid" | "cpu" | "nsecs" | "elapsed" | "cgroup" | "curtask" => UINT,
        "comm" => Ty::Str(16),
        "probe" => Ty::Probe,
        "kstack" => Ty::Kstack,
        "ustack" => Ty::Ustack,
        "retval" => INT,
        "func" => match attach.kind {
            Kind::Profile { .. } => Ty::Usym,
            _ => return Err(Error::semantic(pos, "`func` needs a uprobe or a profile probe")),
        },
        n if n.starts_with("arg") && n[3..].parse::<u32>().is_ok() => match &attach.kind {
            Kind::RawTracepoint { args, .. } => {
                let i: usize = n[3..].parse().unwrap_or(usize::MAX);
                match args.get(i) {
                    Some(a) => match a.int {
                        Some((_, signed)) => Ty::Int { signed },
                        None => UINT,
                    },
                    None => {
                        return Err(Error::semantic(
                            pos,
                            format!("{} has {} arguments", attach.name, args.len()),
                        ))
                    }
                }
            }
            _ => {
                return Err(Error::semantic(
                    pos,
                    format!("`{n}` is not available in {}", attach.name),
                ))
            }
        },
        "args" => {
            return Err(Error::semantic(pos, "`args` is used as `args->FIELD` or `args.FIELD`"))
        }
        _ => return Err(Error::semantic(pos, format!("unknown builtin `{name}`"))),
    })
}

impl Typer<'_> {
    /// The tracepoint field `args->name` of this probe.
    pub fn field(&self, name: &str, pos: Pos) -> Result<FieldAccess> {
        let Kind::Tracepoint { format, .. } = &self.attach.kind else {
            return Err(Error::semantic(
                pos,
                format!("`args` needs a tracepoint, not {}", self.attach.name),
            ));
        };
        let f = format.fields.iter().find(|f| f.name == name).ok_or_else(|| {
            let names: Vec<&str> = format.fields.iter().map(|f| f.name.as_str()).collect();
            Error::semantic(
                pos,
                format!(
                    "{} has no field `{name}` (fields: {})",
                    self.attach.name,
                    names.join(", ")
                ),
            )
        })?;
        Ok(field_access(f))
    }

    pub fn ty(&self, e: &Expr) -> Result<Ty> {
        Ok(match &e.kind {
            ExprKind::Int(_) => INT,
            ExprKind::Str(s) => Ty::Str(s.len() + 1),
            ExprKind::Builtin(b) => builtin_ty(b, e.pos, self.attach)?,
            ExprKind::Var(v) => self.vars.get(v).cloned().ok_or_else(|| {
                Error::semantic(e.pos, format!("`${v}` is used before it is assigned"))
            })?,
            ExprKind::Map { name, .. } => match self.maps.get(name).map(|m| &m.value) {
                Some(MapValue::Plain(t)) => t.clone(),
                Some(MapValue::Agg(Agg::Count)) => UINT,
                Some(MapValue::Agg(a)) if !a.is_hist() => INT,
                Some(MapValue::Agg(a)) => {
                    return Err(Error::semantic(
                        e.pos,
                        format!("a {} map's value cannot be read", a.name()),
                    ))
                }
                None => return Err(Error::semantic(e.pos, format!("`@{name}` is never assigned"))),
            },
            ExprKind::Field(base, name) => match &base.kind {
                ExprKind::Builtin(b) if b == "args" => field_ty(&self.field(name, e.pos)?),
                _ => match self.ty(base)? {
                    Ty::Tuple(items) => {
                        let i: usize = name.parse().map_err(|_| {
                            Error::semantic(
                                e.pos,
                                format!("a tuple's fields are numbers, not `{name}`"),
                            )
                        })?;
                        items.get(i).cloned().ok_or_else(|| {
                            Error::semantic(e.pos, format!("the tuple has {} fields", items.len()))
                        })?
                    }
                    t => return Err(Error::semantic(e.pos, format!("{} has no fields", t.name()))),
                },
            },
            ExprKind::Index(base, _) => match &base.kind {
                ExprKind::Field(a, name) if matches!(&a.kind, ExprKind::Builtin(b) if b == "args") => {
                    match self.field(name, e.pos)? {
                        FieldAccess::Array { signed, .. } => Ty::Int { signed },
                        _ => {
                            return Err(Error::semantic(e.pos, format!("`{name}` is not an array")))
                        }
                    }
                }
                _ => {
                    return Err(Error::semantic(
                        e.pos,
                        "only tracepoint array fields can be indexed",
                    ))
                }
            },
            ExprKind::Tuple(items) => {
                Ty::Tuple(items.iter().map(|i| self.ty(i)).collect::<Result<_>>()?)
            }
            ExprKind::Unary(..) => INT,
            ExprKind::Binary(op, a, b) => {
                let (ta, tb) = (self.ty(a)?, self.ty(b)?);
                let strings = matches!((&ta, &tb), (Ty::Str(_), Ty::Str(_)));
                if strings && matches!(op, BinOp::Eq | BinOp::Ne) {
                    INT
                } else if !ta.is_int() || !tb.is_int() {
                    return Err(Error::semantic(
                        e.pos,
                        format!("cannot apply an operator to {} and {}", ta.name(), tb.name()),
                    ));
                } else if op.is_comparison() || matches!(op, BinOp::LAnd | BinOp::LOr) {
                    INT
                } else {
                    Ty::Int { signed: ta.is_signed() || tb.is_signed() }
                }
            }
            ExprKind::Ternary(_, a, b) => {
                let (ta, tb) = (self.ty(a)?, self.ty(b)?);
                ta.unify(&tb).ok_or_else(|| {
                    Error::semantic(
                        e.pos,
                        format!("the ternary's branches differ: {} and {}", ta.name(), tb.name()),
                    )
                })?
            }
            ExprKind::Cast(t, _) => Ty::Int { signed: !t.starts_with('u') },
            ExprKind::Call(f, args) => self.call_ty(f, args, e.pos)?,
        })
    }

    fn call_ty(&self, f: &str, args: &[Expr], pos: Pos) -> Result<Ty> {
        Ok(match f {
            "str" => match args.get(1) {
                Some(Expr { kind: ExprKind::Int(n), .. }) if *n > 0 => {
                    Ty::Str((*n as usize).min(STRLEN) + 1)
                }
                Some(_) => {
                    return Err(Error::semantic(pos, "str()'s length must be a positive number"))
                }
                None => Ty::Str(STRLEN),
            },
            "buf" => match args.get(1) {
                Some(Expr { kind: ExprKind::Int(n), .. }) if *n > 0 && *n <= 64 => {
                    Ty::Buf(*n as usize)
                }
                _ => return Err(Error::semantic(pos, "buf(ADDR, N) needs a length from 1 to 64")),
            },
            "ksym" => Ty::Ksym,
            "usym" => Ty::Usym,
            "kaddr" => UINT,
            "printf" | "print" | "exit" | "delete" | "clear" | "zero" | "time" => Ty::Void,
            "count" | "sum" | "min" | "max" | "avg" | "stats" | "hist" | "lhist" => {
                return Err(Error::semantic(
                    pos,
                    format!("{f}() is assigned to a map: `@x = {f}(...)`"),
                ))
            }
            _ => return Err(Error::semantic(pos, format!("unknown function `{f}`"))),
        })
    }

    /// The aggregation an assigned value is (`count()`, `hist(x)`, ...).
    pub fn agg_of(&self, e: &Expr) -> Result<Option<Agg>> {
        let ExprKind::Call(f, args) = &e.kind else { return Ok(None) };
        let want = |n: usize| -> Result<()> {
            if args.len() != n {
                return Err(Error::semantic(e.pos, format!("{f}() takes {n} argument(s)")));
            }
            if let Some(a) = args.first() {
                if !self.ty(a)?.is_int() {
                    return Err(Error::semantic(a.pos, format!("{f}() takes an integer")));
                }
            }
            Ok(())
        };
        let agg = match f.as_str() {
            "count" => {
                want(0)?;
                Agg::Count
            }
            "sum" | "min" | "max" | "avg" | "stats" | "hist" => {
                want(1)?;
                match f.as_str() {
                    "sum" => Agg::Sum,
                    "min" => Agg::Min,
                    "max" => Agg::Max,
                    "avg" => Agg::Avg,
                    "stats" => Agg::Stats,
                    _ => Agg::Hist,
                }
            }
            "lhist" => {
                want(4)?;
                let c = |i: usize| match args[i].kind {
                    ExprKind::Int(v) => Ok(v),
                    _ => {
                        Err(Error::semantic(args[i].pos, "lhist()'s min, max and step are numbers"))
                    }
                };
                let (min, max, step) = (c(1)?, c(2)?, c(3)?);
                if step <= 0 || max <= min || (max - min) / step > 10_000 {
                    return Err(Error::semantic(
                        e.pos,
                        "lhist(x, MIN, MAX, STEP) needs MIN < MAX, STEP > 0, at most 10000 steps",
                    ));
                }
                Agg::Lhist { min, max, step }
            }
            _ => return Ok(None),
        };
        Ok(Some(agg))
    }
}

/// Gather every map's key and value types over the program, and each scratch variable's
/// type per probe. `attaches[i]`: the first attach point of probe i.
pub fn map_types(prog: &Program, attaches: &[&Attach]) -> Result<MapTypes> {
    let mut types = MapTypes::default();
    // Twice: a map read in a probe before the probe that writes it.
    for pass in 0..2 {
        for (probe, attach) in prog.probes.iter().zip(attaches) {
            let mut t = Typer { attach, maps: &types.clone(), vars: HashMap::new() };
            let mut found = Vec::new();
            walk_assigns(&probe.body, &mut t, &mut found, pass == 1)?;
            for (name, key, value, pos) in found {
                merge(&mut types, name, key, value, pos)?;
            }
        }
    }
    Ok(types)
}

type Found = Vec<(String, Vec<Ty>, MapValue, Pos)>;

fn walk_assigns(body: &[Stmt], t: &mut Typer<'_>, found: &mut Found, strict: bool) -> Result<()> {
    for s in body {
        match &s.kind {
            StmtKind::Assign { target, value, op } => {
                let vt = match t.agg_of(value) {
                    Ok(Some(a)) if op.is_none() => Ok(MapValue::Agg(a)),
                    Ok(Some(_)) => {
                        Err(Error::semantic(s.pos, "an aggregation is assigned with `=`"))
                    }
                    Ok(None) => t.ty(value).map(MapValue::Plain),
                    Err(e) => Err(e),
                };
                let vt = match vt {
                    Ok(v) => v,
                    Err(e) if strict => return Err(e),
                    Err(_) => continue,
                };
                match &target.kind {
                    ExprKind::Var(v) => {
                        let MapValue::Plain(ty) = vt else {
                            return Err(Error::semantic(
                                s.pos,
                                "aggregations go into maps, not variables",
                            ));
                        };
                        t.vars.insert(v.clone(), ty);
                    }
                    ExprKind::Map { name, keys } => {
                        let key = match keys.iter().map(|k| t.ty(k)).collect::<Result<Vec<_>>>() {
                            Ok(k) => k,
                            Err(e) if strict => return Err(e),
                            Err(_) => continue,
                        };
                        found.push((name.clone(), key, vt, s.pos));
                    }
                    _ => {}
                }
            }
            StmtKind::If { then, els, .. } => {
                walk_assigns(then, t, found, strict)?;
                walk_assigns(els, t, found, strict)?;
            }
            StmtKind::Unroll(_, b) => walk_assigns(b, t, found, strict)?,
            StmtKind::Expr(_) => {}
        }
    }
    Ok(())
}

fn merge(
    types: &mut MapTypes,
    name: String,
    key: Vec<Ty>,
    value: MapValue,
    pos: Pos,
) -> Result<()> {
    let Some(m) = types.maps.iter_mut().find(|m| m.name == name) else {
        types.maps.push(UserMap { name, key, value, map: 0, cache: None });
        return Ok(());
    };
    let what = |m: &str| Error::semantic(pos, format!("@{name}: {m}"));
    if m.key.len() != key.len() {
        return Err(what("used with a different number of keys"));
    }
    for (a, b) in m.key.iter_mut().zip(&key) {
        *a = a
            .unify(b)
            .ok_or_else(|| what(&format!("key {} here, {} before", b.name(), a.name())))?;
    }
    m.value = match (&m.value, &value) {
        (MapValue::Agg(a), MapValue::Agg(b)) if a == b => MapValue::Agg(*a),
        (MapValue::Plain(a), MapValue::Plain(b)) => MapValue::Plain(
            a.unify(b)
                .ok_or_else(|| what(&format!("value {} here, {} before", b.name(), a.name())))?,
        ),
        _ => return Err(what("assigned different kinds of values")),
    };
    Ok(())
}
