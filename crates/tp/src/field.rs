//! Record field types: how a Rust type is laid out in a kernel-format record and how it is
//! declared in the event's `format` text.
//!
//! | field type in `trace_event!` | value assigned | format declaration | printk arg |
//! |---|---|---|---|
//! | `u8` `i8` `u16` `i16` `u32` `i32` `u64` `i64` `usize` `isize` | the integer | `unsigned int x` ... | `REC->x` |
//! | `bool` | `bool` | `bool x` | `REC->x` |
//! | `[T; N]` (T an integer) | `[T; N]` | `u32 x[N]` | `__print_array(REC->x, N, size)` (`__print_hex` for u8) |
//! | [`CharArray<N>`] | `&str` (truncated, NUL-padded) | `char x[N]` | `REC->x` |
//! | `str` | `&str` | `__data_loc char[] x` | `__get_str(x)` |
//! | `[u8]` | `&[u8]` | `__data_loc u8[] x` | `__print_hex(__get_dynamic_array(x), __get_dynamic_array_len(x))` |

use core::marker::PhantomData;

/// Longest dynamic (`__data_loc`) field stored in a record; longer values are truncated.
pub const MAX_DYN_LEN: usize = 1024;

/// How a field's storage looks in the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// An integer or bool.
    Scalar,
    /// `T x[len]`.
    Array { len: usize },
    /// `char x[len]`, a NUL-padded string.
    CharArray { len: usize },
    /// `__data_loc char[] x`: NUL-terminated string after the fixed part.
    DynStr,
    /// `__data_loc u8[] x`: bytes after the fixed part.
    DynBytes,
}

impl Layout {
    /// Whether the field's data follows the fixed part (so the record's length depends on
    /// the value).
    pub const fn is_dynamic(&self) -> bool {
        matches!(self, Layout::DynStr | Layout::DynBytes)
    }
}

/// What a printk conversion may print a field as (checked at compile time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrintKind {
    /// An integer of `size` bytes (bool is a 1-byte integer).
    Int { size: usize },
    /// Text: `%s`.
    Str,
    /// Bytes or an integer array: `%s` through `__print_hex` / `__print_array`.
    Bytes,
}

/// The 4-byte `__data_loc` word: `(len << 16) | offset`.
#[derive(Debug, Clone, Copy, Default)]
#[repr(transparent)]
pub struct DataLoc(pub u32);

/// A `char name[N]` field: a string copied into `N` bytes, truncated to `N - 1` and NUL-padded.
///
/// ```
/// tp::trace_event! {
///     /// A thread was named.
///     demo:named(name: &str) {
///         fields { comm: tp::CharArray<16> = name }
///         printk("comm=%s", comm)
///     }
/// }
/// # trace_named("worker");
/// ```
#[derive(Debug, Clone, Copy)]
#[repr(transparent)]
pub struct CharArray<const N: usize>(pub [u8; N]);

/// A Rust type usable as a record field. Implemented for the types in the module docs.
pub trait FieldType {
    /// What sits at the field's offset in the record.
    type Storage: Copy + StorageKind;
    /// What the field's assignment expression must evaluate to.
    type Value<'a>;
    /// C element type for the `format` declaration.
    const C_TYPE: &'static str;
    const SIGNED: bool;
    const LAYOUT: Layout;
    /// Bytes this value adds after the fixed part (0 for fixed fields).
    #[inline(always)]
    fn dyn_len(_v: &Self::Value<'_>) -> usize {
        0
    }
    /// The fixed part; dynamic fields take their location from `*dyn_off` and advance it.
    fn storage(v: &Self::Value<'_>, dyn_off: &mut usize) -> Self::Storage;
    /// Write the dynamic data (exactly `dyn_len` bytes) at `dst`.
    ///
    /// # Safety
    /// `dst` must be valid for `dyn_len(v)` bytes of writes.
    #[inline(always)]
    unsafe fn write_dyn(_v: &Self::Value<'_>, _dst: *mut u8) {}
}

/// How a field's storage prints (used by the compile-time printk check).
pub trait StorageKind {
    const PRINT: PrintKind;
}

macro_rules! int_field {
    ($($t:ty => $c:literal, $signed:literal);* $(;)?) => {$(
        impl FieldType for $t {
            type Storage = $t;
            type Value<'a> = $t;
            const C_TYPE: &'static str = $c;
            const SIGNED: bool = $signed;
            const LAYOUT: Layout = Layout::Scalar;
            #[inline(always)]
            fn storage(v: &$t, _: &mut usize) -> $t {
                *v
            }
        }
        impl StorageKind for $t {
            const PRINT: PrintKind = PrintKind::Int { size: core::mem::size_of::<$t>() };
        }
        impl<const N: usize> FieldType for [$t; N] {
            type Storage = [$t; N];
            type Value<'a> = [$t; N];
            const C_TYPE: &'static str = array_elem_name(core::mem::size_of::<$t>(), $signed);
            const SIGNED: bool = $signed;
            const LAYOUT: Layout = Layout::Array { len: N };
            #[inline(always)]
            fn storage(v: &[$t; N], _: &mut usize) -> [$t; N] {
                *v
            }
        }
        impl<const N: usize> StorageKind for [$t; N] {
            const PRINT: PrintKind = PrintKind::Bytes;
        }
    )*};
}

const fn array_elem_name(size: usize, signed: bool) -> &'static str {
    match (size, signed) {
        (1, false) => "u8",
        (1, true) => "s8",
        (2, false) => "u16",
        (2, true) => "s16",
        (4, false) => "u32",
        (4, true) => "s32",
        (_, false) => "u64",
        (_, true) => "s64",
    }
}

int_field! {
    u8 => "unsigned char", false;
    i8 => "signed char", true;
    u16 => "unsigned short", false;
    i16 => "short", true;
    u32 => "unsigned int", false;
    i32 => "int", true;
    u64 => "unsigned long", false;
    i64 => "long", true;
    usize => "unsigned long", false;
    isize => "long", true;
}

impl FieldType for bool {
    type Storage = bool;
    type Value<'a> = bool;
    const C_TYPE: &'static str = "bool";
    const SIGNED: bool = false;
    const LAYOUT: Layout = Layout::Scalar;
    #[inline(always)]
    fn storage(v: &bool, _: &mut usize) -> bool {
        *v
    }
}
impl StorageKind for bool {
    const PRINT: PrintKind = PrintKind::Int { size: 1 };
}

impl<const N: usize> FieldType for CharArray<N> {
    type Storage = CharArray<N>;
    type Value<'a> = &'a str;
    const C_TYPE: &'static str = "char";
    const SIGNED: bool = false;
    const LAYOUT: Layout = Layout::CharArray { len: N };
    #[inline(always)]
    fn storage(v: &&str, _: &mut usize) -> CharArray<N> {
        let mut a = [0u8; N];
        let n = v.len().min(N.saturating_sub(1));
        a[..n].copy_from_slice(&v.as_bytes()[..n]);
        CharArray(a)
    }
}
impl<const N: usize> StorageKind for CharArray<N> {
    const PRINT: PrintKind = PrintKind::Str;
}

/// Marker storage for `str` fields.
#[derive(Debug, Clone, Copy)]
#[repr(transparent)]
pub struct StrLoc(pub DataLoc);
/// Marker storage for `[u8]` fields.
#[derive(Debug, Clone, Copy)]
#[repr(transparent)]
pub struct BytesLoc(pub DataLoc);
impl StorageKind for StrLoc {
    const PRINT: PrintKind = PrintKind::Str;
}
impl StorageKind for BytesLoc {
    const PRINT: PrintKind = PrintKind::Bytes;
}

#[inline(always)]
fn loc(len: usize, dyn_off: &mut usize) -> DataLoc {
    let d = DataLoc(((len as u32) << 16) | (*dyn_off as u32 & 0xffff));
    *dyn_off += len;
    d
}

impl FieldType for str {
    type Storage = StrLoc;
    type Value<'a> = &'a str;
    const C_TYPE: &'static str = "char";
    const SIGNED: bool = false;
    const LAYOUT: Layout = Layout::DynStr;
    #[inline(always)]
    fn dyn_len(v: &&str) -> usize {
        v.len().min(MAX_DYN_LEN - 1) + 1
    }
    #[inline(always)]
    fn storage(v: &&str, dyn_off: &mut usize) -> StrLoc {
        StrLoc(loc(Self::dyn_len(v), dyn_off))
    }
    #[inline(always)]
    unsafe fn write_dyn(v: &&str, dst: *mut u8) {
        let n = Self::dyn_len(v) - 1;
        // SAFETY: the caller gives `dyn_len` = n + 1 writable bytes; `v` has at least n bytes.
        unsafe {
            core::ptr::copy_nonoverlapping(v.as_ptr(), dst, n);
            *dst.add(n) = 0;
        }
    }
}

impl FieldType for [u8] {
    type Storage = BytesLoc;
    type Value<'a> = &'a [u8];
    const C_TYPE: &'static str = "u8";
    const SIGNED: bool = false;
    const LAYOUT: Layout = Layout::DynBytes;
    #[inline(always)]
    fn dyn_len(v: &&[u8]) -> usize {
        v.len().min(MAX_DYN_LEN)
    }
    #[inline(always)]
    fn storage(v: &&[u8], dyn_off: &mut usize) -> BytesLoc {
        BytesLoc(loc(Self::dyn_len(v), dyn_off))
    }
    #[inline(always)]
    unsafe fn write_dyn(v: &&[u8], dst: *mut u8) {
        // SAFETY: the caller gives `dyn_len` writable bytes; `v` has at least that many.
        unsafe { core::ptr::copy_nonoverlapping(v.as_ptr(), dst, Self::dyn_len(v)) }
    }
}

/// One field of a Rust event, as the macro describes it.
#[derive(Debug, Clone, Copy)]
pub struct FieldDesc {
    pub name: &'static str,
    pub c_type: &'static str,
    pub layout: Layout,
    pub signed: bool,
    pub offset: usize,
    pub size: usize,
}

impl FieldDesc {
    /// The C declaration for the format file, e.g. `unsigned int id`, `char comm[16]`,
    /// `__data_loc char[] path`.
    pub fn declaration(&self) -> String {
        match self.layout {
            Layout::Scalar => format!("{} {}", self.c_type, self.name),
            Layout::Array { len } | Layout::CharArray { len } => {
                format!("{} {}[{}]", self.c_type, self.name, len)
            }
            Layout::DynStr | Layout::DynBytes => {
                format!("__data_loc {}[] {}", self.c_type, self.name)
            }
        }
    }

    /// The print fmt argument that prints this field (kernel helpers for arrays and strings).
    pub fn print_arg(&self) -> String {
        let n = self.name;
        match self.layout {
            Layout::Scalar | Layout::CharArray { .. } => format!("REC->{n}"),
            Layout::Array { len } if self.size == len => format!("__print_hex(REC->{n}, {len})"),
            Layout::Array { len } => {
                format!("__print_array(REC->{n}, {len}, {})", self.size / len.max(1))
            }
            Layout::DynStr => format!("__get_str({n})"),
            Layout::DynBytes => {
                format!("__print_hex(__get_dynamic_array({n}), __get_dynamic_array_len({n}))")
            }
        }
    }
}

/// The kind of the field a printk argument names, found from a field accessor. Used by
/// `trace_event!` in a const context: `print_kind_of(|r: &Rec| &r.field)`.
pub const fn print_kind_of<R, S: StorageKind, F: Fn(&R) -> &S>(f: F) -> PrintKind {
    core::mem::forget(f);
    S::PRINT
}

/// Zero-sized helper so the macro can name a field type's storage in a struct.
pub struct Ty<T: ?Sized>(PhantomData<T>);
