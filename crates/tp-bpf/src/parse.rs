//! Recursive-descent parser: program text -> [`ast::Program`](crate::ast::Program).

use crate::ast::*;
use crate::error::Error;
use crate::lex::{Lexer, Tok};

/// Parse a whole program.
pub fn parse(src: &str) -> Result<Program, Error> {
    let mut p = Parser { lx: Lexer::new(src), tok: Tok::Eof, pos: Pos::default(), no_div: false };
    let mut probes = Vec::new();
    while let Some(first) = p.lx.attach_point()? {
        let pos = first.1;
        let mut specs = vec![first];
        p.advance()?;
        while p.is(",") {
            let Some(next) = p.lx.attach_point()? else {
                return Err(Error::syntax(p.lx.pos(), "an attach point after `,`"));
            };
            specs.push(next);
            p.advance()?;
        }
        let predicate = if p.is("/") {
            p.advance()?;
            p.no_div = true;
            let e = p.expr()?;
            p.no_div = false;
            p.expect("/")?;
            Some(e)
        } else {
            None
        };
        let body = p.block()?;
        // The lexer stopped right after the body's `}`: the next probe's attach point is
        // read raw.
        probes.push(Probe { specs, predicate, body, pos });
    }
    if probes.is_empty() {
        return Err(Error::syntax(p.lx.pos(), "no probes in the program"));
    }
    Ok(Program { probes })
}

struct Parser<'a> {
    lx: Lexer<'a>,
    tok: Tok,
    pos: Pos,
    /// Inside `/predicate/`: `/` closes it instead of dividing.
    no_div: bool,
}

impl Parser<'_> {
    fn advance(&mut self) -> Result<(), Error> {
        let (t, p) = self.lx.token()?;
        self.tok = t;
        self.pos = p;
        Ok(())
    }

    fn is(&self, p: &str) -> bool {
        matches!(&self.tok, Tok::P(q) if *q == p)
    }

    fn expect(&mut self, p: &str) -> Result<(), Error> {
        if self.is(p) {
            self.advance()
        } else {
            Err(self.unexpected(&format!("`{p}`")))
        }
    }

    fn unexpected(&self, want: &str) -> Error {
        let got = match &self.tok {
            Tok::Ident(s) => format!("`{s}`"),
            Tok::Int(v) => format!("`{v}`"),
            Tok::Str(s) => format!("\"{s}\""),
            Tok::Var(s) => format!("`${s}`"),
            Tok::Map(s) => format!("`@{s}`"),
            Tok::P(p) => format!("`{p}`"),
            Tok::Eof => "the end of the program".to_string(),
        };
        Error::syntax(self.pos, format!("expected {want}, found {got}"))
    }

    /// `{ stmt; stmt; ... }`; the closing brace is consumed without reading past it.
    fn block(&mut self) -> Result<Vec<Stmt>, Error> {
        if !self.is("{") {
            return Err(self.unexpected("`{`"));
        }
        self.advance()?;
        let mut out = Vec::new();
        loop {
            while self.is(";") {
                self.advance()?;
            }
            if self.is("}") {
                return Ok(out);
            }
            let s = self.stmt()?;
            let braced = matches!(s.kind, StmtKind::If { .. } | StmtKind::Unroll(..));
            out.push(s);
            if self.is("}") {
                return Ok(out);
            }
            if !braced {
                self.expect(";")?;
            }
        }
    }

    /// A nested block: consume its `}` and read the next token.
    fn inner_block(&mut self) -> Result<Vec<Stmt>, Error> {
        let b = self.block()?;
        self.advance()?;
        Ok(b)
    }

    fn stmt(&mut self) -> Result<Stmt, Error> {
        let pos = self.pos;
        if self.tok == Tok::Ident("if".into()) {
            self.advance()?;
            self.expect("(")?;
            let cond = self.expr()?;
            self.expect(")")?;
            let then = self.inner_block()?;
            let els = if self.tok == Tok::Ident("else".into()) {
                self.advance()?;
                if self.tok == Tok::Ident("if".into()) {
                    vec![self.stmt()?]
                } else {
                    self.inner_block()?
                }
            } else {
                Vec::new()
            };
            return Ok(Stmt { kind: StmtKind::If { cond, then, els }, pos });
        }
        if self.tok == Tok::Ident("unroll".into()) {
            self.advance()?;
            self.expect("(")?;
            let n = match self.tok {
                Tok::Int(n) if (1..=100).contains(&n) => n as u32,
                _ => return Err(self.unexpected("a count from 1 to 100")),
            };
            self.advance()?;
            self.expect(")")?;
            let body = self.inner_block()?;
            return Ok(Stmt { kind: StmtKind::Unroll(n, body), pos });
        }
        let e = self.expr()?;
        let assignable = matches!(e.kind, ExprKind::Map { .. } | ExprKind::Var(_));
        let op = match &self.tok {
            Tok::P("=") => Some(None),
            Tok::P("+=") => Some(Some(BinOp::Add)),
            Tok::P("-=") => Some(Some(BinOp::Sub)),
            Tok::P("*=") => Some(Some(BinOp::Mul)),
            Tok::P("/=") => Some(Some(BinOp::Div)),
            Tok::P("%=") => Some(Some(BinOp::Mod)),
            Tok::P("&=") => Some(Some(BinOp::And)),
            Tok::P("|=") => Some(Some(BinOp::Or)),
            Tok::P("^=") => Some(Some(BinOp::Xor)),
            Tok::P("<<=") => Some(Some(BinOp::Shl)),
            Tok::P(">>=") => Some(Some(BinOp::Shr)),
            _ => None,
        };
        if let Some(op) = op {
            if !assignable {
                return Err(Error::syntax(self.pos, "only a map or a `$variable` can be assigned"));
            }
            self.advance()?;
            let value = self.expr()?;
            return Ok(Stmt { kind: StmtKind::Assign { target: e, op, value }, pos });
        }
        if self.is("++") || self.is("--") {
            if !assignable {
                return Err(Error::syntax(
                    self.pos,
                    "only a map or a `$variable` can be incremented",
                ));
            }
            let op = if self.is("++") { BinOp::Add } else { BinOp::Sub };
            self.advance()?;
            let one = Expr { kind: ExprKind::Int(1), pos };
            return Ok(Stmt {
                kind: StmtKind::Assign { target: e, op: Some(op), value: one },
                pos,
            });
        }
        Ok(Stmt { kind: StmtKind::Expr(e), pos })
    }

    pub fn expr(&mut self) -> Result<Expr, Error> {
        let cond = self.binary(0)?;
        if self.is("?") {
            let pos = self.pos;
            self.advance()?;
            let a = self.expr()?;
            self.expect(":")?;
            let b = self.expr()?;
            return Ok(Expr {
                kind: ExprKind::Ternary(Box::new(cond), Box::new(a), Box::new(b)),
                pos,
            });
        }
        Ok(cond)
    }

    fn binop(&self, level: usize) -> Option<BinOp> {
        let Tok::P(p) = self.tok else { return None };
        let op = match (level, p) {
            (0, "||") => BinOp::LOr,
            (1, "&&") => BinOp::LAnd,
            (2, "|") => BinOp::Or,
            (3, "^") => BinOp::Xor,
            (4, "&") => BinOp::And,
            (5, "==") => BinOp::Eq,
            (5, "!=") => BinOp::Ne,
            (6, "<") => BinOp::Lt,
            (6, "<=") => BinOp::Le,
            (6, ">") => BinOp::Gt,
            (6, ">=") => BinOp::Ge,
            (7, "<<") => BinOp::Shl,
            (7, ">>") => BinOp::Shr,
            (8, "+") => BinOp::Add,
            (8, "-") => BinOp::Sub,
            (9, "*") => BinOp::Mul,
            (9, "/") if !self.no_div => BinOp::Div,
            (9, "%") => BinOp::Mod,
            _ => return None,
        };
        Some(op)
    }

    fn binary(&mut self, level: usize) -> Result<Expr, Error> {
        if level == 10 {
            return self.unary();
        }
        let mut lhs = self.binary(level + 1)?;
        while let Some(op) = self.binop(level) {
            let pos = self.pos;
            self.advance()?;
            let rhs = self.binary(level + 1)?;
            lhs = Expr { kind: ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)), pos };
        }
        Ok(lhs)
    }

    fn unary(&mut self) -> Result<Expr, Error> {
        let pos = self.pos;
        let op = match self.tok {
            Tok::P("-") => UnOp::Neg,
            Tok::P("!") => UnOp::Not,
            Tok::P("~") => UnOp::BitNot,
            _ => return self.postfix(),
        };
        self.advance()?;
        let e = self.unary()?;
        if let (UnOp::Neg, ExprKind::Int(v)) = (op, &e.kind) {
            return Ok(Expr { kind: ExprKind::Int(v.wrapping_neg()), pos });
        }
        Ok(Expr { kind: ExprKind::Unary(op, Box::new(e)), pos })
    }

    fn postfix(&mut self) -> Result<Expr, Error> {
        let mut e = self.primary()?;
        loop {
            let pos = self.pos;
            if self.is(".") || self.is("->") {
                self.advance()?;
                let name = match &self.tok {
                    Tok::Ident(s) => s.clone(),
                    Tok::Int(v) => v.to_string(),
                    _ => return Err(self.unexpected("a field name")),
                };
                self.advance()?;
                e = Expr { kind: ExprKind::Field(Box::new(e), name), pos };
            } else if self.is("[") && !matches!(e.kind, ExprKind::Map { .. }) {
                self.advance()?;
                let i = self.expr()?;
                self.expect("]")?;
                e = Expr { kind: ExprKind::Index(Box::new(e), Box::new(i)), pos };
            } else {
                return Ok(e);
            }
        }
    }

    fn args(&mut self, close: &str) -> Result<Vec<Expr>, Error> {
        let mut out = Vec::new();
        if self.is(close) {
            self.advance()?;
            return Ok(out);
        }
        let no_div = std::mem::replace(&mut self.no_div, false);
        loop {
            out.push(self.expr()?);
            if self.is(",") {
                self.advance()?;
                continue;
            }
            self.expect(close)?;
            self.no_div = no_div;
            return Ok(out);
        }
    }

    fn primary(&mut self) -> Result<Expr, Error> {
        let pos = self.pos;
        let tok = self.tok.clone();
        let kind = match tok {
            Tok::Int(v) => {
                self.advance()?;
                ExprKind::Int(v)
            }
            Tok::Str(s) => {
                self.advance()?;
                ExprKind::Str(s)
            }
            Tok::Var(v) => {
                self.advance()?;
                ExprKind::Var(v)
            }
            Tok::Map(name) => {
                self.advance()?;
                let keys = if self.is("[") {
                    self.advance()?;
                    self.args("]")?
                } else {
                    Vec::new()
                };
                ExprKind::Map { name, keys }
            }
            Tok::Ident(name) => {
                self.advance()?;
                if self.is("(") {
                    self.advance()?;
                    ExprKind::Call(name, self.args(")")?)
                } else {
                    ExprKind::Builtin(name)
                }
            }
            Tok::P("(") => {
                self.advance()?;
                if let Tok::Ident(t) = &self.tok {
                    if is_cast_type(t) {
                        let t = t.clone();
                        self.advance()?;
                        self.expect(")")?;
                        let e = self.unary()?;
                        return Ok(Expr { kind: ExprKind::Cast(t, Box::new(e)), pos });
                    }
                }
                let no_div = std::mem::replace(&mut self.no_div, false);
                let first = self.expr()?;
                let kind = if self.is(",") {
                    self.advance()?;
                    let mut items = vec![first];
                    items.extend(self.args(")")?);
                    ExprKind::Tuple(items)
                } else {
                    self.expect(")")?;
                    self.no_div = no_div;
                    return Ok(first);
                };
                self.no_div = no_div;
                kind
            }
            _ => return Err(self.unexpected("an expression")),
        };
        Ok(Expr { kind, pos })
    }
}

fn is_cast_type(t: &str) -> bool {
    matches!(t, "int8" | "int16" | "int32" | "int64" | "uint8" | "uint16" | "uint32" | "uint64")
}
