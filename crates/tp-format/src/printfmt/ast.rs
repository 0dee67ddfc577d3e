//! The compiled expression tree: fields resolved to offsets, every node statically typed
//! with the C type the kernel's compiler gave it (size and signedness), so that `%x` of an
//! `int` shows 32 bits and `%llx` of a sign-extended `int` shows 64.

/// A C integer type: size in bytes (1, 2, 4, 8) and signedness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IntTy {
    pub size: u8,
    pub signed: bool,
}

impl IntTy {
    pub const S8: IntTy = IntTy { size: 1, signed: true };
    pub const U8: IntTy = IntTy { size: 1, signed: false };
    pub const S16: IntTy = IntTy { size: 2, signed: true };
    pub const U16: IntTy = IntTy { size: 2, signed: false };
    pub const INT: IntTy = IntTy { size: 4, signed: true };
    pub const UINT: IntTy = IntTy { size: 4, signed: false };
    pub const LONG: IntTy = IntTy { size: 8, signed: true };
    pub const ULONG: IntTy = IntTy { size: 8, signed: false };

    pub fn new(size: usize, signed: bool) -> IntTy {
        let size = match size {
            1 | 2 | 4 => size as u8,
            _ => 8,
        };
        IntTy { size, signed }
    }

    /// Reduce a 64-bit pattern to this type: truncate, then sign- or zero-extend back to 64
    /// bits. Every integer value is kept in this normal form.
    #[inline]
    pub fn norm(self, v: u64) -> u64 {
        if self.size >= 8 {
            return v;
        }
        let shift = 64 - 8 * self.size as u32;
        if self.signed {
            (((v << shift) as i64) >> shift) as u64
        } else {
            (v << shift) >> shift
        }
    }

    /// C integer promotion: anything narrower than `int` becomes `int`.
    pub fn promote(self) -> IntTy {
        if self.size < 4 {
            IntTy::INT
        } else {
            self
        }
    }

    /// The usual arithmetic conversions of two operands.
    pub fn common(a: IntTy, b: IntTy) -> IntTy {
        let (a, b) = (a.promote(), b.promote());
        if a.size != b.size {
            // The wider type can represent every value of the narrower one.
            return if a.size > b.size { a } else { b };
        }
        IntTy { size: a.size, signed: a.signed && b.signed }
    }
}

/// The static type of a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ty {
    Int(IntTy),
    /// A pointer into record data or to a literal (arrays decay to this); the element type.
    Bytes(IntTy),
    /// Text a helper writes (`__print_flags(...)` and friends return a `const char *`).
    Text,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UnOp {
    Neg,
    BitNot,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BinOp {
    Mul,
    Div,
    Rem,
    Add,
    Sub,
    Shl,
    Shr,
    Lt,
    Gt,
    Le,
    Ge,
    Eq,
    Ne,
    And,
    Xor,
    Or,
}

/// An expression, compiled.
#[derive(Debug, Clone)]
pub(crate) enum Node {
    /// A constant in normal form.
    Int(u64, IntTy),
    /// A string literal (no terminating NUL).
    Str(Box<[u8]>),
    /// A scalar field read from the record.
    Field {
        off: u32,
        ty: IntTy,
    },
    /// `REC->arr[i]` for a fixed array and a constant `i` within it: the element at `off`,
    /// read when the record holds the whole array (up to `end`), as indexing the array's
    /// bytes would.
    Elem {
        off: u32,
        end: u32,
        ty: IntTy,
    },
    /// The data of an array, flexible or dynamic field (index into the program's fields).
    Data {
        field: u16,
        elem: IntTy,
    },
    /// `__get_dynamic_array_len(f)`: the length half of the location word.
    DynLen {
        field: u16,
    },
    Index {
        base: Box<Node>,
        idx: Box<Node>,
        elem: IntTy,
    },
    Unary {
        op: UnOp,
        e: Box<Node>,
        ty: IntTy,
    },
    /// `ty` is the type the operands are converted to; comparisons yield `int`.
    Binary {
        op: BinOp,
        a: Box<Node>,
        b: Box<Node>,
        ty: IntTy,
    },
    LogAnd(Box<Node>, Box<Node>),
    LogOr(Box<Node>, Box<Node>),
    LogNot(Box<Node>),
    /// `c ? a : b`; `ty` is the common type when both sides are integers.
    Cond {
        c: Box<Node>,
        a: Box<Node>,
        b: Box<Node>,
        ty: Option<IntTy>,
    },
    /// A cast to a pointer whose target has `elem` bytes: an `unsigned long` that scales
    /// integers added to it.
    PtrCast {
        e: Box<Node>,
        elem: u64,
    },
    Cast {
        e: Box<Node>,
        ty: IntTy,
    },
    /// `jiffies_to_msecs(j)` with the kernel's `HZ`.
    JiffiesToMsecs {
        e: Box<Node>,
        hz: u32,
    },
    Helper(Box<Helper>),
    /// An argument that needs kernel state (see `Compiled::unsupported`): prints `[?]`.
    Unknown,
}

/// The `__print_*` helpers: each writes text, and evaluates to that text.
#[derive(Debug, Clone)]
pub(crate) enum Helper {
    /// `__print_flags(val, delim, {mask, name}...)` (`_u64`: `wide`).
    Flags { val: Node, delim: Box<[u8]>, table: Vec<(u64, Box<[u8]>)>, wide: bool },
    /// `__print_symbolic(val, {value, name}...)`.
    Symbolic { val: Node, table: Vec<(u64, Box<[u8]>)>, wide: bool },
    /// `__print_hex(buf, len)` (bytes separated by spaces) / `__print_hex_str` (`concat`).
    Hex { buf: Node, len: Node, concat: bool },
    /// `__print_array(buf, count, el_size)`.
    Array { buf: Node, count: Node, el_size: Node },
    /// `__get_bitmask(f)`, `__get_cpumask(f)`: the bits as `%*pb` prints them.
    Bitmask { buf: Node },
}

impl Node {
    pub fn ty(&self) -> Ty {
        match self {
            Node::Int(_, t)
            | Node::Field { ty: t, .. }
            | Node::Elem { ty: t, .. }
            | Node::Cast { ty: t, .. } => Ty::Int(*t),
            Node::PtrCast { .. } => Ty::Int(IntTy::ULONG),
            Node::Str(_) => Ty::Bytes(IntTy::S8),
            Node::Data { elem, .. } => Ty::Bytes(*elem),
            Node::DynLen { .. } | Node::JiffiesToMsecs { .. } => Ty::Int(IntTy::UINT),
            Node::Index { elem, .. } => Ty::Int(*elem),
            Node::Unary { ty, .. } => Ty::Int(*ty),
            Node::Binary { op, ty, .. } => match op {
                BinOp::Lt | BinOp::Gt | BinOp::Le | BinOp::Ge | BinOp::Eq | BinOp::Ne => {
                    Ty::Int(IntTy::INT)
                }
                _ => Ty::Int(*ty),
            },
            Node::LogAnd(..) | Node::LogOr(..) | Node::LogNot(_) => Ty::Int(IntTy::INT),
            Node::Cond { a, b, ty, .. } => match ty {
                Some(t) => Ty::Int(*t),
                None => match (a.ty(), b.ty()) {
                    (Ty::Bytes(e), Ty::Bytes(_)) => Ty::Bytes(e),
                    _ => Ty::Text,
                },
            },
            Node::Helper(_) | Node::Unknown => Ty::Text,
        }
    }
}
