//! The syntax tree of a bpftrace program, as parsed (untyped). Every node keeps the place
//! it came from, so an error (ours or the verifier's) names the program's line and column.

/// Line and column (both from 1) in the program text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pos {
    pub line: u32,
    pub col: u32,
}

impl std::fmt::Display for Pos {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Program {
    pub probes: Vec<Probe>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Probe {
    /// The attach points as written (`tracepoint:sched:sched_wak*`, `BEGIN`, ...).
    pub specs: Vec<(String, Pos)>,
    pub predicate: Option<Expr>,
    pub body: Vec<Stmt>,
    pub pos: Pos,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    And,
    Or,
    Xor,
    Shl,
    Shr,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    LAnd,
    LOr,
}

impl BinOp {
    pub fn is_comparison(self) -> bool {
        matches!(self, BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnOp {
    Neg,
    Not,
    BitNot,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ExprKind {
    Int(i64),
    Str(String),
    /// `pid`, `comm`, `arg0`, `args`, ...
    Builtin(String),
    /// `$name`
    Var(String),
    /// `@name[keys]` (`@` alone has an empty name).
    Map {
        name: String,
        keys: Vec<Expr>,
    },
    /// `expr.field` / `expr->field` (the arrow and the dot are the same here).
    Field(Box<Expr>, String),
    /// `expr[index]`
    Index(Box<Expr>, Box<Expr>),
    /// `(a, b)`
    Tuple(Vec<Expr>),
    Unary(UnOp, Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    Ternary(Box<Expr>, Box<Expr>, Box<Expr>),
    Call(String, Vec<Expr>),
    /// `(type)expr`: only integer casts are kept (they truncate).
    Cast(String, Box<Expr>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub pos: Pos,
}

#[derive(Debug, Clone, PartialEq)]
pub enum StmtKind {
    Expr(Expr),
    /// `target = value` / `target op= value` (`op` is the compound operator); target is a
    /// map or a scratch variable.
    Assign {
        target: Expr,
        op: Option<BinOp>,
        value: Expr,
    },
    If {
        cond: Expr,
        then: Vec<Stmt>,
        els: Vec<Stmt>,
    },
    /// `unroll(N) { ... }`
    Unroll(u32, Vec<Stmt>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Stmt {
    pub kind: StmtKind,
    pub pos: Pos,
}
