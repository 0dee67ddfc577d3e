//! Recursive-descent parser for `"fmt", args...`: C expressions with the kernel's helper
//! macros, compiled straight into typed [`Node`]s with the event's fields resolved.

use super::ast::{BinOp, Helper, IntTy, Node, Ty, UnOp};
use super::lex::{Tok, Token};
use super::render::{eval, Env, Val};
use crate::format::{EventFormat, Field, FieldKind};

/// Deepest expression nesting accepted (the kernel's deepest is about 20).
const MAX_DEPTH: usize = 128;

/// Why parsing stopped.
#[derive(Debug, Clone)]
pub(crate) struct PErr {
    pub pos: usize,
    pub msg: String,
    /// The text is valid C, but uses something that cannot be evaluated from the record
    /// alone (a kernel function, a struct member, an unknown identifier).
    pub unsupported: bool,
}

type R<T> = Result<T, PErr>;

pub(crate) struct Parsed {
    pub fmt: Vec<u8>,
    pub args: Vec<Node>,
}

pub(crate) struct Parser<'a> {
    toks: &'a [Token],
    i: usize,
    end: usize,
    ev: &'a EventFormat,
    /// Fields referenced by `Node::Data`/`DynLen`.
    pub fields: Vec<Field>,
    locals: Vec<(String, Node)>,
    depth: usize,
    hz: u32,
    constants: Option<&'a std::collections::HashMap<String, i64>>,
}

/// What a type name in a cast or `sizeof` means.
enum CTy {
    Int(IntTy),
    /// A pointer; the size of what it points to, when known (for pointer arithmetic).
    Ptr(Option<u64>),
    Void,
    /// A typedef this parser does not know: the cast keeps the operand's type.
    Unknown,
}

impl<'a> Parser<'a> {
    pub fn new(
        toks: &'a [Token],
        end: usize,
        ev: &'a EventFormat,
        hz: u32,
        constants: Option<&'a std::collections::HashMap<String, i64>>,
    ) -> Self {
        Parser {
            toks,
            i: 0,
            end,
            ev,
            fields: Vec::new(),
            locals: Vec::new(),
            depth: 0,
            hz,
            constants,
        }
    }

    fn pos(&self) -> usize {
        self.toks.get(self.i).map(|t| t.pos).unwrap_or(self.end)
    }

    fn err<T>(&self, msg: impl Into<String>) -> R<T> {
        Err(PErr { pos: self.pos(), msg: msg.into(), unsupported: false })
    }

    fn unsupported<T>(&self, pos: usize, msg: impl Into<String>) -> R<T> {
        Err(PErr { pos, msg: msg.into(), unsupported: true })
    }

    fn peek(&self) -> Option<&'a Tok> {
        self.toks.get(self.i).map(|t| &t.tok)
    }

    fn peek_at(&self, n: usize) -> Option<&'a Tok> {
        self.toks.get(self.i + n).map(|t| &t.tok)
    }

    fn is_punct(&self, p: &str) -> bool {
        matches!(self.peek(), Some(Tok::Punct(q)) if *q == p)
    }

    fn eat(&mut self, p: &str) -> bool {
        if self.is_punct(p) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, p: &str) -> R<()> {
        if self.eat(p) {
            Ok(())
        } else {
            self.err(format!("expected `{p}`"))
        }
    }

    fn ident(&mut self) -> R<&'a str> {
        match self.peek() {
            Some(Tok::Ident(s)) => {
                self.i += 1;
                Ok(s)
            }
            _ => self.err("expected an identifier"),
        }
    }

    /// Adjacent string literals, concatenated.
    fn strings(&mut self) -> R<Vec<u8>> {
        let mut s = Vec::new();
        let mut any = false;
        while let Some(Tok::Str(b)) = self.peek() {
            s.extend_from_slice(b);
            self.i += 1;
            any = true;
        }
        if !any {
            return self.err("expected a string literal");
        }
        Ok(s)
    }

    /// The whole print fmt: the format string, then `, arg` for each argument. An argument
    /// that is valid C but needs kernel state becomes [`Node::Unknown`] and is reported.
    pub fn printfmt(&mut self, on_unsupported: &mut dyn FnMut(PErr)) -> R<Parsed> {
        let fmt = self.strings()?;
        let mut args = Vec::new();
        while self.eat(",") {
            let start = self.i;
            match self.expr() {
                Ok(e) => args.push(e),
                Err(e) if e.unsupported => {
                    on_unsupported(e);
                    self.depth = 0;
                    self.locals.clear();
                    self.i = start;
                    self.skip_arg()?;
                    args.push(Node::Unknown);
                }
                Err(e) => return Err(e),
            }
        }
        if self.i < self.toks.len() {
            return self.err("unexpected text after the arguments");
        }
        Ok(Parsed { fmt, args })
    }

    /// Skip to the `,` that ends this argument, brackets balanced.
    fn skip_arg(&mut self) -> R<()> {
        let mut stack: Vec<&str> = Vec::new();
        while let Some(t) = self.peek() {
            if let Tok::Punct(p) = t {
                match *p {
                    "(" | "[" | "{" => {
                        if stack.len() >= MAX_DEPTH * 4 {
                            return self.err("brackets nested too deeply");
                        }
                        stack.push(p);
                    }
                    ")" | "]" | "}" => {
                        let want = match *p {
                            ")" => "(",
                            "]" => "[",
                            _ => "{",
                        };
                        if stack.pop() != Some(want) {
                            return self.err(format!("unbalanced `{p}`"));
                        }
                    }
                    "," if stack.is_empty() => return Ok(()),
                    _ => {}
                }
            }
            self.i += 1;
        }
        if stack.is_empty() {
            Ok(())
        } else {
            self.err("unclosed bracket")
        }
    }

    fn enter(&mut self) -> R<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return self.err("expression nested too deeply");
        }
        Ok(())
    }

    /// A full expression (no comma operator: commas separate arguments).
    pub fn expr(&mut self) -> R<Node> {
        self.enter()?;
        let r = self.cond();
        self.depth -= 1;
        r
    }

    fn cond(&mut self) -> R<Node> {
        let pos = self.pos();
        let c = self.binary(0)?;
        if !self.eat("?") {
            return Ok(c);
        }
        let a = self.expr()?;
        self.expect(":")?;
        self.enter()?;
        let b = self.cond();
        self.depth -= 1;
        let b = b?;
        let ty = match (a.ty(), b.ty()) {
            (Ty::Int(x), Ty::Int(y)) => Some(IntTy::common(x, y)),
            (Ty::Int(_), _) | (_, Ty::Int(_)) => {
                // `x ? "str" : 0` is a pointer and NULL; treat the integer side as a string.
                if matches!(a, Node::Int(0, _)) || matches!(b, Node::Int(0, _)) {
                    None
                } else {
                    return self.unsupported(pos, "ternary mixes an integer and a string");
                }
            }
            _ => None,
        };
        Ok(fold(Node::Cond { c: Box::new(c), a: Box::new(a), b: Box::new(b), ty }))
    }

    fn binop(&self) -> Option<(BinOp, usize)> {
        let Some(Tok::Punct(p)) = self.peek() else { return None };
        // Precedence, higher binds tighter; && and || are handled as levels 1 and 0.
        Some(match *p {
            "*" => (BinOp::Mul, 10),
            "/" => (BinOp::Div, 10),
            "%" => (BinOp::Rem, 10),
            "+" => (BinOp::Add, 9),
            "-" => (BinOp::Sub, 9),
            "<<" => (BinOp::Shl, 8),
            ">>" => (BinOp::Shr, 8),
            "<" => (BinOp::Lt, 7),
            ">" => (BinOp::Gt, 7),
            "<=" => (BinOp::Le, 7),
            ">=" => (BinOp::Ge, 7),
            "==" => (BinOp::Eq, 6),
            "!=" => (BinOp::Ne, 6),
            "&" => (BinOp::And, 5),
            "^" => (BinOp::Xor, 4),
            "|" => (BinOp::Or, 3),
            _ => return None,
        })
    }

    /// Precedence climbing; `min` 0 = `||`, 1 = `&&`, 3.. = the table in [`Self::binop`].
    fn binary(&mut self, min: usize) -> R<Node> {
        let mut lhs = self.unary()?;
        loop {
            if self.is_punct("||") && min == 0 {
                self.i += 1;
                let rhs = self.binary(1)?;
                lhs = fold(Node::LogOr(Box::new(lhs), Box::new(rhs)));
                continue;
            }
            if self.is_punct("&&") && min <= 1 {
                self.i += 1;
                let rhs = self.binary(3)?;
                lhs = fold(Node::LogAnd(Box::new(lhs), Box::new(rhs)));
                continue;
            }
            let Some((op, prec)) = self.binop() else { break };
            if prec < min.max(3) {
                break;
            }
            let pos = self.pos();
            self.i += 1;
            let rhs = self.binary(prec + 1)?;
            lhs = self.make_binary(op, lhs, rhs, pos)?;
        }
        Ok(lhs)
    }

    fn make_binary(&self, op: BinOp, a: Node, b: Node, pos: usize) -> R<Node> {
        let (Ty::Int(x), Ty::Int(y)) = (a.ty(), b.ty()) else {
            return self.unsupported(pos, "arithmetic on a pointer or string");
        };
        if let (Node::PtrCast { elem, .. }, BinOp::Add | BinOp::Sub) = (&a, op) {
            // Pointer arithmetic: the integer counts elements.
            let k = Node::Int(*elem, IntTy::ULONG);
            let b = fold(Node::Binary {
                op: BinOp::Mul,
                a: Box::new(b),
                b: Box::new(k),
                ty: IntTy::ULONG,
            });
            return Ok(Node::Binary { op, a: Box::new(a), b: Box::new(b), ty: IntTy::ULONG });
        }
        let ty = match op {
            BinOp::Shl | BinOp::Shr => x.promote(),
            _ => IntTy::common(x, y),
        };
        Ok(fold(Node::Binary { op, a: Box::new(a), b: Box::new(b), ty }))
    }

    fn unary(&mut self) -> R<Node> {
        self.enter()?;
        let r = self.unary_inner();
        self.depth -= 1;
        r
    }

    fn unary_inner(&mut self) -> R<Node> {
        let pos = self.pos();
        let Some(tok) = self.peek() else { return self.err("expected an expression") };
        if let Tok::Punct(p) = tok {
            let op = match *p {
                "-" => Some(UnOp::Neg),
                "~" => Some(UnOp::BitNot),
                "!" => None,
                "+" | "&" | "*" => None,
                "(" => return self.paren(),
                _ => return self.postfix(),
            };
            self.i += 1;
            let e = self.unary()?;
            return match (*p, op) {
                (_, Some(op)) => {
                    let Ty::Int(t) = e.ty() else {
                        return self.unsupported(pos, "unary operator on a pointer");
                    };
                    Ok(fold(Node::Unary { op, e: Box::new(e), ty: t.promote() }))
                }
                ("!", _) => Ok(fold(Node::LogNot(Box::new(e)))),
                ("+", _) => match e.ty() {
                    Ty::Int(t) => Ok(fold(Node::Cast { e: Box::new(e), ty: t.promote() })),
                    _ => Ok(e),
                },
                ("&", _) => match e {
                    // The address of a field: its bytes (for %pI4 and friends).
                    Node::Field { .. } | Node::Data { .. } => self.address_of(e, pos),
                    _ => self.unsupported(pos, "address of an expression"),
                },
                _ => match e.ty() {
                    Ty::Bytes(elem) => Ok(self.index(e, Node::Int(0, IntTy::INT), elem)),
                    _ => self.unsupported(pos, "dereference of an integer"),
                },
            };
        }
        if let Tok::Ident(s) = tok {
            if s == "sizeof" {
                self.i += 1;
                self.expect("(")?;
                let t = self.type_name()?;
                self.expect(")")?;
                let size = match t {
                    Some((CTy::Int(t), _)) => t.size as u64,
                    Some((CTy::Ptr(_), _)) => 8,
                    _ => return self.unsupported(pos, "sizeof of an unknown type"),
                };
                return Ok(Node::Int(size, IntTy::ULONG));
            }
        }
        self.postfix()
    }

    fn address_of(&mut self, e: Node, pos: usize) -> R<Node> {
        match e {
            Node::Data { .. } => Ok(e),
            Node::Field { off, ty } => {
                let f = self.ev.all_fields().find(|f| f.offset == off as usize).cloned();
                match f {
                    Some(mut f) => {
                        f.kind = FieldKind::Array { len: f.size };
                        let field = self.push_field(f, pos)?;
                        Ok(Node::Data { field, elem: IntTy::new(1, ty.signed) })
                    }
                    None => self.unsupported(pos, "address of an unknown field"),
                }
            }
            _ => self.unsupported(pos, "address of an expression"),
        }
    }

    /// `(` starts a cast, a statement expression or a parenthesized expression.
    fn paren(&mut self) -> R<Node> {
        let pos = self.pos();
        self.i += 1; // (
        if self.is_punct("{") {
            return self.statement_expr(pos);
        }
        if matches!(self.peek(), Some(Tok::Ident(r)) if r == "REC")
            && matches!(self.peek_at(1), Some(Tok::Punct(")")))
            && matches!(self.peek_at(2), Some(Tok::Punct("->")))
        {
            self.i += 3;
            let f = self.ident()?;
            let e = self.field_node(f, pos)?;
            return self.postfix_ops(e);
        }
        if self.looks_like_type() {
            let start = self.i;
            if let Some((t, _)) = self.type_name()? {
                if self.eat(")") {
                    let e = self.unary()?;
                    return self.cast(t, e, pos);
                }
            }
            self.i = start;
        }
        let e = self.expr()?;
        self.expect(")")?;
        self.postfix_ops(e)
    }

    fn cast(&self, t: CTy, e: Node, pos: usize) -> R<Node> {
        match (t, e.ty()) {
            (CTy::Int(t), Ty::Int(_)) => Ok(fold(Node::Cast { e: Box::new(e), ty: t })),
            (CTy::Ptr(Some(k)), Ty::Int(_)) if k != 1 => {
                Ok(Node::PtrCast { e: Box::new(e), elem: k })
            }
            (CTy::Ptr(_), Ty::Int(_)) => Ok(fold(Node::Cast { e: Box::new(e), ty: IntTy::ULONG })),
            (CTy::Int(_), _) => self.unsupported(pos, "cast of a pointer to an integer"),
            _ => Ok(e),
        }
    }

    fn looks_like_type(&self) -> bool {
        let Some(Tok::Ident(s)) = self.peek() else { return false };
        if self.locals.iter().any(|(n, _)| n == s) || s == "REC" {
            return false;
        }
        if matches!(self.peek_at(1), Some(Tok::Punct("("))) {
            return false; // a function call
        }
        is_type_word(s)
    }

    /// A type name: qualifiers, base words, `*`s. `None` when the tokens are not one.
    fn type_name(&mut self) -> R<Option<(CTy, usize)>> {
        let mut words: Vec<&str> = Vec::new();
        let mut unknown = false;
        let mut aggregate = false;
        let mut agg_name = "";
        while let Some(Tok::Ident(s)) = self.peek() {
            match s.as_str() {
                "const" | "volatile" | "__force" | "__user" | "__iomem" | "__rcu" | "static"
                | "__percpu" | "__kernel" | "__bitwise" => {}
                "struct" | "union" | "enum" => {
                    aggregate = s != "enum";
                    if s == "enum" {
                        words.push("int");
                    }
                    self.i += 1;
                    agg_name = self.ident()?;
                    continue;
                }
                w if is_base_word(w) => words.push(w),
                w if words.is_empty() && !unknown && is_type_word(w) => match typedef(w) {
                    Some(t) => return self.finish_type(CTy::Int(t)).map(Some),
                    None => unknown = true,
                },
                _ => break,
            }
            self.i += 1;
        }
        let base = if aggregate {
            None
        } else if unknown {
            Some(CTy::Unknown)
        } else if words.is_empty() {
            return Ok(None);
        } else if words == ["void"] {
            Some(CTy::Void)
        } else {
            base_type(&words).map(CTy::Int)
        };
        let mut ptr = 0;
        while self.eat("*") {
            ptr += 1;
        }
        while let Some(Tok::Ident(s)) = self.peek() {
            if matches!(s.as_str(), "const" | "volatile" | "__user" | "__force") {
                self.i += 1;
            } else {
                break;
            }
        }
        if ptr > 0 {
            let pointee = match (&base, ptr) {
                (_, 2..) => Some(8),
                (Some(CTy::Int(t)), _) => Some(t.size as u64),
                (Some(CTy::Void), _) => Some(1),
                // sizeof(struct page) on x86_64 (the vmemmap arithmetic of kmem events).
                (None, _) if agg_name == "page" => Some(64),
                _ => None,
            };
            return Ok(Some((CTy::Ptr(pointee), ptr)));
        }
        match base {
            Some(t) => Ok(Some((t, 0))),
            None => self.unsupported(self.pos(), "cast to a struct or union"),
        }
    }

    fn finish_type(&mut self, t: CTy) -> R<(CTy, usize)> {
        self.i += 1;
        let mut ptr = 0;
        while self.eat("*") {
            ptr += 1;
        }
        let pointee = match (&t, ptr) {
            (CTy::Int(t), 1) => Some(t.size as u64),
            _ => Some(8),
        };
        Ok(if ptr > 0 { (CTy::Ptr(pointee), ptr) } else { (t, 0) })
    }

    /// `({ int a = e1; int b = e2; expr; })`, as `min()`/`max()` expand.
    fn statement_expr(&mut self, pos: usize) -> R<Node> {
        self.i += 1; // {
        let nlocals = self.locals.len();
        let r = self.statement_body(pos);
        self.locals.truncate(nlocals);
        r
    }

    fn statement_body(&mut self, pos: usize) -> R<Node> {
        loop {
            if self.looks_like_type() {
                let Some((t, _)) = self.type_name()? else {
                    return self.unsupported(pos, "statement expression");
                };
                let name = self.ident()?.to_string();
                if !self.eat("=") {
                    return self.unsupported(pos, "declaration without initializer");
                }
                let init = self.expr()?;
                self.expect(";")?;
                let init = self.cast(t, init, pos)?;
                self.locals.push((name, init));
            } else {
                let e = self.expr()?;
                self.expect(";")?;
                self.expect("}")?;
                self.expect(")")?;
                return Ok(e);
            }
        }
    }

    fn postfix(&mut self) -> R<Node> {
        let e = self.primary()?;
        self.postfix_ops(e)
    }

    fn postfix_ops(&mut self, mut e: Node) -> R<Node> {
        loop {
            let pos = self.pos();
            if self.eat("[") {
                let idx = self.expr()?;
                self.expect("]")?;
                let Ty::Bytes(elem) = e.ty() else {
                    return self.unsupported(pos, "index of a non-array");
                };
                if !matches!(idx.ty(), Ty::Int(_)) {
                    return self.unsupported(pos, "non-integer index");
                }
                e = self.index(e, idx, elem);
            } else if self.is_punct("->") || self.is_punct(".") {
                return self.unsupported(pos, "struct member access");
            } else {
                return Ok(e);
            }
        }
    }

    fn field_node(&mut self, name: &str, pos: usize) -> R<Node> {
        let Some(f) = self.ev.field(name) else {
            return self.err(format!("no field `{name}`"));
        };
        match f.kind {
            FieldKind::Scalar | FieldKind::Pointer if matches!(f.size, 1 | 2 | 4 | 8) => {
                let signed = f.signed && f.kind == FieldKind::Scalar;
                Ok(Node::Field { off: f.offset as u32, ty: IntTy::new(f.size, signed) })
            }
            _ => {
                let es = f.element_size();
                let elem = if matches!(es, 1 | 2 | 4 | 8) {
                    IntTy::new(es, f.signed || f.is_string())
                } else {
                    IntTy::U8
                };
                let f = f.clone();
                Ok(Node::Data { field: self.push_field(f, pos)?, elem })
            }
        }
    }

    /// `base[idx]`; an element of a fixed array at a constant index within it is read
    /// straight from its place (`Node::Elem`), the common `REC->args[0]`.
    fn index(&self, base: Node, idx: Node, elem: IntTy) -> Node {
        if let (Node::Data { field, .. }, Node::Int(i, it)) = (&base, &idx) {
            let f = &self.fields[*field as usize];
            let size = elem.size as u64;
            let at = i.checked_mul(size).filter(|_| !(it.signed && (*i as i64) < 0));
            if let (FieldKind::Array { .. }, Some(at)) = (f.kind, at) {
                let end = f.offset as u64 + f.size as u64;
                let off = f.offset as u64 + at;
                let inside = at.checked_add(size).is_some_and(|e| e <= f.size as u64);
                if inside && end <= u32::MAX as u64 {
                    return Node::Elem { off: off as u32, end: end as u32, ty: elem };
                }
            }
        }
        Node::Index { base: Box::new(base), idx: Box::new(idx), elem }
    }

    fn push_field(&mut self, f: Field, pos: usize) -> R<u16> {
        if let Some(i) = self.fields.iter().position(|g| *g == f) {
            return Ok(i as u16);
        }
        if self.fields.len() >= u16::MAX as usize {
            return Err(PErr { pos, msg: "too many fields".into(), unsupported: false });
        }
        self.fields.push(f);
        Ok((self.fields.len() - 1) as u16)
    }

    /// `f` in `__get_str(f)`: a field name.
    fn field_arg(&mut self) -> R<(Field, usize)> {
        self.expect("(")?;
        let pos = self.pos();
        let name = self.ident()?;
        self.expect(")")?;
        match self.ev.field(name) {
            Some(f) => Ok((f.clone(), pos)),
            None => self.err(format!("no field `{name}`")),
        }
    }

    fn data_of(&mut self, f: Field, pos: usize) -> R<Node> {
        let es = f.element_size();
        let elem =
            if matches!(es, 1 | 2 | 4 | 8) { IntTy::new(es, f.is_string()) } else { IntTy::U8 };
        Ok(Node::Data { field: self.push_field(f, pos)?, elem })
    }

    fn primary(&mut self) -> R<Node> {
        let pos = self.pos();
        match self.peek() {
            None => self.err("expected an expression"),
            Some(Tok::Num { value, unsigned, long, hex }) => {
                self.i += 1;
                Ok(literal(*value, *unsigned, *long, *hex))
            }
            Some(Tok::Str(_)) => Ok(Node::Str(self.strings()?.into_boxed_slice())),
            Some(Tok::Punct(p)) => self.err(format!("unexpected `{p}`")),
            Some(Tok::Ident(name)) => {
                self.i += 1;
                if name == "REC" {
                    self.expect("->")?;
                    let f = self.ident()?;
                    return self.field_node(f, pos);
                }
                if let Some((_, n)) = self.locals.iter().rev().find(|(n, _)| n == name) {
                    return Ok(n.clone());
                }
                if self.is_punct("(") {
                    return self.call(name, pos);
                }
                let c = self.constants.and_then(|m| m.get(name.as_str()).copied());
                if let Some(v) = c.or_else(|| super::consts::lookup(name)) {
                    // An enumeration constant: `int` when it fits, else the next type.
                    return Ok(if (i32::MIN as i64..=i32::MAX as i64).contains(&v) {
                        Node::Int(v as u64, IntTy::INT)
                    } else if (0..=u32::MAX as i64).contains(&v) {
                        Node::Int(v as u64, IntTy::UINT)
                    } else {
                        Node::Int(v as u64, IntTy::LONG)
                    });
                }
                match name.as_str() {
                    "true" => Ok(Node::Int(1, IntTy::INT)),
                    "false" | "NULL" => Ok(Node::Int(0, IntTy::INT)),
                    _ => self.unsupported(pos, format!("unknown identifier `{name}`")),
                }
            }
        }
    }

    /// `{ value, "name" }, ...` until `)`. An entry whose name is NULL (`{ -1, 0 }`,
    /// `{ 0, ((void *)0) }`, `{ }`) ends the table, as it does for the kernel's loop.
    fn table(&mut self) -> R<Vec<(u64, Box<[u8]>)>> {
        let mut t = Vec::new();
        let mut ended = false;
        while self.eat(",") {
            if self.is_punct(")") {
                break;
            }
            self.expect("{")?;
            if self.eat("}") {
                ended = true;
                continue;
            }
            let pos = self.pos();
            let v = self.expr()?;
            let v = match const_int(&v) {
                Some(v) => v,
                None => return self.unsupported(pos, "table value is not a constant"),
            };
            self.expect(",")?;
            if matches!(self.peek(), Some(Tok::Str(_))) {
                let s = self.strings()?;
                if !ended {
                    t.push((v, s.into_boxed_slice()));
                }
            } else {
                let pos = self.pos();
                let n = self.expr()?;
                if const_int(&n) != Some(0) {
                    return self.err_at(pos, "table name is neither a string nor NULL");
                }
                ended = true;
            }
            self.expect("}")?;
        }
        Ok(t)
    }

    fn err_at<T>(&self, pos: usize, msg: &str) -> R<T> {
        Err(PErr { pos, msg: msg.into(), unsupported: false })
    }

    fn args(&mut self, n: usize) -> R<Vec<Node>> {
        self.expect("(")?;
        let mut v = Vec::with_capacity(n);
        for i in 0..n {
            if i > 0 {
                self.expect(",")?;
            }
            v.push(self.expr()?);
        }
        self.expect(")")?;
        Ok(v)
    }

    fn call(&mut self, name: &str, pos: usize) -> R<Node> {
        let h = match name {
            "__print_flags" | "__print_flags_u64" => {
                self.expect("(")?;
                let val = self.expr()?;
                self.expect(",")?;
                let delim = self.strings()?.into_boxed_slice();
                let table = self.table()?;
                self.expect(")")?;
                Helper::Flags { val, delim, table, wide: name.ends_with("u64") }
            }
            "__print_symbolic" | "__print_symbolic_u64" => {
                self.expect("(")?;
                let val = self.expr()?;
                let table = self.table()?;
                self.expect(")")?;
                Helper::Symbolic { val, table, wide: name.ends_with("u64") }
            }
            "mc_event_error_type" => {
                // include/ras/ras_event.h: __print_symbolic over enum hw_event_mc_err_type.
                let mut a = self.args(1)?;
                let table = ["Corrected", "Uncorrected", "Deferred", "Fatal", "Info"]
                    .iter()
                    .enumerate()
                    .map(|(i, s)| (i as u64, s.as_bytes().to_vec().into_boxed_slice()))
                    .collect();
                Helper::Symbolic { val: a.remove(0), table, wide: false }
            }
            "__print_hex" | "__print_hex_str" => {
                let mut a = self.args(2)?;
                let len = a.pop().unwrap_or(Node::Int(0, IntTy::INT));
                let buf = a.pop().unwrap_or(Node::Int(0, IntTy::INT));
                Helper::Hex { buf, len, concat: name == "__print_hex_str" }
            }
            "__print_array" => {
                let mut a = self.args(3)?;
                let el_size = a.pop().unwrap_or(Node::Int(0, IntTy::INT));
                let count = a.pop().unwrap_or(Node::Int(0, IntTy::INT));
                let buf = a.pop().unwrap_or(Node::Int(0, IntTy::INT));
                Helper::Array { buf, count, el_size }
            }
            "__get_str"
            | "__get_rel_str"
            | "__get_dynamic_array"
            | "__get_rel_dynamic_array"
            | "__get_sockaddr"
            | "__get_rel_sockaddr" => {
                let (f, p) = self.field_arg()?;
                return self.data_of(f, p);
            }
            "__get_dynamic_array_len" | "__get_rel_dynamic_array_len" => {
                let (f, p) = self.field_arg()?;
                return Ok(Node::DynLen { field: self.push_field(f, p)? });
            }
            "__get_bitmask" | "__get_rel_bitmask" | "__get_cpumask" | "__get_rel_cpumask" => {
                let (f, p) = self.field_arg()?;
                let buf = self.data_of(f, p)?;
                Helper::Bitmask { buf }
            }
            "jiffies_to_msecs" => {
                let mut a = self.args(1)?;
                return Ok(Node::JiffiesToMsecs { e: Box::new(a.remove(0)), hz: self.hz });
            }
            "__builtin_expect" => {
                let mut a = self.args(2)?;
                let e = a.remove(0);
                return match e.ty() {
                    Ty::Int(_) => Ok(fold(Node::Cast { e: Box::new(e), ty: IntTy::LONG })),
                    _ => Ok(e),
                };
            }
            "__builtin_constant_p" => {
                self.args(1)?;
                return Ok(Node::Int(0, IntTy::INT));
            }
            _ => return self.unsupported(pos, format!("unknown function `{name}`")),
        };
        Ok(Node::Helper(Box::new(h)))
    }
}

fn literal(value: u64, unsigned: bool, long: bool, hex: bool) -> Node {
    // C11 6.4.4.1: the first type of the list that holds the value.
    let ty = if !long && !unsigned && value <= i32::MAX as u64 {
        IntTy::INT
    } else if !long && (unsigned || hex) && value <= u32::MAX as u64 {
        IntTy::UINT
    } else if !unsigned && value <= i64::MAX as u64 {
        IntTy::LONG
    } else {
        IntTy::ULONG
    };
    Node::Int(ty.norm(value), ty)
}

fn is_base_word(w: &str) -> bool {
    matches!(w, "unsigned" | "signed" | "int" | "long" | "short" | "char" | "void" | "_Bool")
}

fn is_type_word(w: &str) -> bool {
    is_base_word(w)
        || typedef(w).is_some()
        || matches!(w, "const" | "volatile" | "struct" | "union" | "enum" | "__force" | "static")
        || w.ends_with("_t")
}

/// Kernel typedefs that appear in casts, with their x86_64 sizes.
fn typedef(w: &str) -> Option<IntTy> {
    Some(match w {
        "u8" | "__u8" | "uint8_t" | "bool" | "_Bool" | "unchar" => IntTy::U8,
        "s8" | "__s8" | "int8_t" => IntTy::S8,
        "u16" | "__u16" | "uint16_t" | "__le16" | "__be16" | "umode_t" | "ushort" => IntTy::U16,
        "s16" | "__s16" | "int16_t" => IntTy::S16,
        "u32" | "__u32" | "uint32_t" | "__le32" | "__be32" | "gfp_t" | "dev_t" | "uid_t"
        | "gid_t" | "uint" | "fmode_t" | "blk_opf_t" | "slab_flags_t" | "xfs_agnumber_t"
        | "xfs_agblock_t" | "xfs_extlen_t" | "vm_fault_t" | "blk_status_t" | "__wsum"
        | "__sum16" => IntTy::UINT,
        "s32" | "__s32" | "int32_t" | "pid_t" | "clockid_t" | "key_serial_t" => IntTy::INT,
        "u64" | "__u64" | "uint64_t" | "__le64" | "__be64" | "size_t" | "sector_t" | "blkcnt_t"
        | "ino_t" | "phys_addr_t" | "dma_addr_t" | "uintptr_t" | "ulong" | "resource_size_t"
        | "pgoff_t" | "vm_flags_t" | "xfs_ino_t" | "xfs_fsblock_t" | "xfs_fileoff_t"
        | "xfs_filblks_t" | "xfs_daddr_t" | "gfn_t" | "gpa_t" | "gva_t" | "hpa_t" | "hva_t"
        | "kvm_pfn_t" | "netdev_features_t" => IntTy::ULONG,
        "s64" | "__s64" | "int64_t" | "ssize_t" | "loff_t" | "time64_t" | "ktime_t" | "off_t"
        | "long_t" | "intptr_t" | "xfs_off_t" => IntTy::LONG,
        _ => return None,
    })
}

fn base_type(words: &[&str]) -> Option<IntTy> {
    let mut longs = 0;
    let (mut unsigned, mut short, mut char_, mut bool_) = (false, false, false, false);
    for w in words {
        match *w {
            "unsigned" => unsigned = true,
            "long" => longs += 1,
            "short" => short = true,
            "char" => char_ = true,
            "_Bool" => bool_ = true,
            _ => {}
        }
    }
    Some(if bool_ {
        IntTy::U8
    } else if char_ {
        IntTy::new(1, !unsigned)
    } else if short {
        IntTy::new(2, !unsigned)
    } else if longs > 0 {
        IntTy::new(8, !unsigned)
    } else {
        IntTy::new(4, !unsigned)
    })
}

/// The value of a constant expression (no fields), as an integer.
pub(crate) fn const_int(n: &Node) -> Option<u64> {
    if !is_const(n) {
        return None;
    }
    let env = Env { rec: &[], be: false, fields: &[] };
    match eval(n, &env) {
        Val::Int(v, _) => Some(v),
        _ => None,
    }
}

fn is_const(n: &Node) -> bool {
    match n {
        Node::Int(..) => true,
        Node::Unary { e, .. }
        | Node::Cast { e, .. }
        | Node::LogNot(e)
        | Node::PtrCast { e, .. } => is_const(e),
        Node::Binary { a, b, .. } | Node::LogAnd(a, b) | Node::LogOr(a, b) => {
            is_const(a) && is_const(b)
        }
        Node::Cond { c, a, b, ty: Some(_) } => is_const(c) && is_const(a) && is_const(b),
        _ => false,
    }
}

/// Replace a constant integer expression by its value.
fn fold(n: Node) -> Node {
    if matches!(n, Node::Int(..)) || !is_const(&n) {
        return n;
    }
    let Ty::Int(t) = n.ty() else { return n };
    match const_int(&n) {
        Some(v) => Node::Int(v, t),
        None => n, // division by zero: left to fail at render time, as the kernel would
    }
}
