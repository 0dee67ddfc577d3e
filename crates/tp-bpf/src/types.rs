//! The types of values and maps, and how they are laid out in the kernel's maps and in the
//! records a program sends to user space.

/// A value's type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ty {
    Int {
        signed: bool,
    },
    /// A NUL-padded string of at most this many bytes (NUL included).
    Str(usize),
    Tuple(Vec<Ty>),
    /// An index into the program's attach-point names (`probe`).
    Probe,
    /// A stack id in the stack map (`kstack`).
    Kstack,
    /// A stack id and the pid whose addresses it holds (`ustack`).
    Ustack,
    /// A kernel address shown as its symbol (`ksym`).
    Ksym,
    /// A user address and its pid (`usym`, `func` of a uprobe).
    Usym,
    /// Bytes: a length, then the bytes (`buf`).
    Buf(usize),
    /// Statements like `printf` have no value.
    Void,
}

pub const INT: Ty = Ty::Int { signed: true };
pub const UINT: Ty = Ty::Int { signed: false };

/// bpftrace's default string size (`BPFTRACE_STRLEN`).
pub const STRLEN: usize = 64;

pub fn align8(n: usize) -> usize {
    (n + 7) & !7
}

impl Ty {
    /// Bytes it takes in a map key, a map value or an output record (each part 8-aligned).
    pub fn size(&self) -> usize {
        match self {
            Ty::Int { .. } | Ty::Probe | Ty::Kstack | Ty::Ksym => 8,
            Ty::Ustack | Ty::Usym => 16,
            Ty::Str(n) => align8(*n),
            Ty::Buf(n) => 8 + align8(*n),
            Ty::Tuple(items) => items.iter().map(Ty::size).sum(),
            Ty::Void => 0,
        }
    }

    pub fn is_int(&self) -> bool {
        matches!(self, Ty::Int { .. })
    }

    pub fn is_signed(&self) -> bool {
        matches!(self, Ty::Int { signed: true })
    }

    /// A type that holds both (strings grow to the longer one); `None` if they differ.
    pub fn unify(&self, other: &Ty) -> Option<Ty> {
        match (self, other) {
            (Ty::Int { signed: a }, Ty::Int { signed: b }) => Some(Ty::Int { signed: *a && *b }),
            (Ty::Str(a), Ty::Str(b)) => Some(Ty::Str((*a).max(*b))),
            (Ty::Buf(a), Ty::Buf(b)) => Some(Ty::Buf((*a).max(*b))),
            (Ty::Tuple(a), Ty::Tuple(b)) if a.len() == b.len() => {
                a.iter().zip(b).map(|(x, y)| x.unify(y)).collect::<Option<Vec<_>>>().map(Ty::Tuple)
            }
            (a, b) if a == b => Some(a.clone()),
            _ => None,
        }
    }

    pub fn name(&self) -> String {
        match self {
            Ty::Int { signed: true } => "int64".into(),
            Ty::Int { signed: false } => "uint64".into(),
            Ty::Str(n) => format!("string[{n}]"),
            Ty::Tuple(items) => {
                format!("({})", items.iter().map(Ty::name).collect::<Vec<_>>().join(", "))
            }
            Ty::Probe => "probe".into(),
            Ty::Kstack => "kstack".into(),
            Ty::Ustack => "ustack".into(),
            Ty::Ksym => "ksym".into(),
            Ty::Usym => "usym".into(),
            Ty::Buf(n) => format!("buffer[{n}]"),
            Ty::Void => "none".into(),
        }
    }
}

/// What a map aggregates (its values are combined across CPUs when read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agg {
    Count,
    Sum,
    Min,
    Max,
    Avg,
    Stats,
    Hist,
    Lhist { min: i64, max: i64, step: i64 },
}

impl Agg {
    /// Bytes of one CPU's value.
    pub fn value_size(self) -> usize {
        match self {
            Agg::Count | Agg::Sum | Agg::Hist | Agg::Lhist { .. } => 8,
            // (value, seen) and (sum, count).
            Agg::Min | Agg::Max | Agg::Avg | Agg::Stats => 16,
        }
    }

    /// Buckets of a histogram: hist's log2 buckets (negative, 0, 1, [2,4), ... [2^63, ...)),
    /// lhist's below-min, steps, at-or-above-max.
    pub fn buckets(self) -> usize {
        match self {
            Agg::Hist => 66,
            Agg::Lhist { min, max, step } => ((max - min) / step) as usize + 2,
            _ => 0,
        }
    }

    pub fn is_hist(self) -> bool {
        matches!(self, Agg::Hist | Agg::Lhist { .. })
    }

    pub fn name(self) -> &'static str {
        match self {
            Agg::Count => "count",
            Agg::Sum => "sum",
            Agg::Min => "min",
            Agg::Max => "max",
            Agg::Avg => "avg",
            Agg::Stats => "stats",
            Agg::Hist => "hist",
            Agg::Lhist { .. } => "lhist",
        }
    }
}

/// A map's values: an aggregation or plain values of one type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MapValue {
    Agg(Agg),
    Plain(Ty),
}

/// The kernel map types used (uapi `enum bpf_map_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapKind {
    Hash = 1,
    Array = 2,
    PerfEventArray = 4,
    PercpuHash = 5,
    PercpuArray = 6,
    StackTrace = 7,
}

impl MapKind {
    pub fn is_percpu(self) -> bool {
        matches!(self, MapKind::PercpuHash | MapKind::PercpuArray)
    }
}

/// A kernel map the programs use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapDef {
    /// `@name` for the program's maps; `.printf`, `.stacks` for tp's own.
    pub name: String,
    pub kind: MapKind,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
}

/// One of the program's `@maps`, as printed: its key's types and its values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserMap {
    pub name: String,
    /// The key's parts (none for `@x`).
    pub key: Vec<Ty>,
    pub value: MapValue,
    /// Its index among [`MapDef`]s.
    pub map: usize,
    /// A keyed count's per-CPU cache in front of its hash (see `codegen::CACHE_SLOTS`): its
    /// index among [`MapDef`]s. Each slot holds a key and that CPU's count not yet in the
    /// hash; the map's elements are the hash's plus the slots'.
    pub cache: Option<usize>,
}

impl UserMap {
    pub fn key_size(&self) -> usize {
        self.key.iter().map(Ty::size).sum()
    }
}
