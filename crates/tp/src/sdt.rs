//! Every tracepoint is also a USDT probe: `trace_event!` puts, in the function that fires
//! the site, an SDT probe point (a `nop`) and its `.note.stapsdt` note in the layout
//! `<sys/sdt.h>` produces (provider = the event's system, name = its name, one argument spec
//! per argument), with a semaphore in `.probes`. External tracers (`tp record -e
//! 'sdt_myapp:*' -p PID`, `perf probe`, bpftrace's `usdt:`) find the note with `readelf -n`
//! and attach a uprobe with that semaphore as its reference counter: the kernel increments it
//! in the traced process, which fires the site.
//!
//! The semaphore is the low half of the site's [`Gate`], the word the disabled path already
//! tests, so a clear semaphore costs nothing: still one load and one branch.
//!
//! Argument specs: every argument travels in a 64-bit register, described with its own size
//! and sign (`-4@%rax` for an `i32`: the low 4 bytes of `%rax`, which holds the value sign-
//! extended); references, `&str` and slices as their address (`8@%rdx`). At most 12
//! arguments, as in `<sys/sdt.h>`. Other argument types implement [`SdtArg`].

use std::sync::atomic::{AtomicU32, Ordering};

/// The word the disabled path reads: bits 0-15 are the SDT semaphore (the kernel counts the
/// uprobes attached to the site's probe point there, so it must be the word's first two
/// bytes, at the address the note gives), bits 16-23 the in-process state (probes, recorder,
/// sinks). Anything nonzero calls the site's fire function.
#[derive(Debug)]
#[repr(transparent)]
pub struct Gate(AtomicU32);

/// The semaphore's bits in a [`Gate`] word.
pub const SEMAPHORE: u32 = 0xffff;

impl Gate {
    #[doc(hidden)]
    #[allow(clippy::new_without_default)]
    pub const fn new() -> Gate {
        Gate(AtomicU32::new(0))
    }

    /// The hot-path test: one relaxed load.
    #[inline(always)]
    pub fn load(&self) -> u32 {
        self.0.load(Ordering::Relaxed)
    }

    /// The in-process state of a gate word.
    #[inline(always)]
    pub const fn state_of(word: u32) -> u8 {
        (word >> 16) as u8
    }

    /// Number of external tracers' uprobes on the site's SDT probe point (the semaphore).
    pub fn semaphore(&self) -> u16 {
        (self.load() & SEMAPHORE) as u16
    }

    /// Set the in-process state, leaving the semaphore as the kernel has it. The kernel
    /// updates only the semaphore's two bytes, so a compare-and-swap of the whole word
    /// neither loses its update nor is lost to it.
    pub(crate) fn set_state(&self, s: u8) {
        let _ = self.0.fetch_update(Ordering::Release, Ordering::Relaxed, |w| {
            Some((w & !0x00ff_0000) | (u32::from(s) << 16))
        });
    }
}

/// A tracepoint argument as an SDT probe argument: a 64-bit register holding
/// [`SdtArg::sdt_value`], described as `SIZE@%reg` (negative `SIZE` for signed values).
///
/// Implemented for integers, `bool`, `char`, floats (their bits), references and raw
/// pointers (the address; for `&str` and slices the data's). Implement it for a `Copy` type
/// of your own that a tracepoint takes by value.
#[diagnostic::on_unimplemented(
    message = "tracepoint argument type `{Self}` has no SDT probe argument form",
    note = "pass it by reference (`&{Self}`) or implement `tp::SdtArg` for it"
)]
pub trait SdtArg: Copy {
    /// Size in bytes (1, 2, 4 or 8), negative when the value is signed.
    const SIZE: i8;
    /// The value in a 64-bit register (sign-extended when signed).
    fn sdt_value(self) -> u64;
}

macro_rules! sdt_int {
    ($($t:ty => $size:literal as $wide:ty),* $(,)?) => {$(
        impl SdtArg for $t {
            const SIZE: i8 = $size;
            #[inline(always)]
            fn sdt_value(self) -> u64 {
                self as $wide as u64
            }
        }
    )*};
}

sdt_int! {
    u8 => 1 as u64, u16 => 2 as u64, u32 => 4 as u64, u64 => 8 as u64, usize => 8 as u64,
    i8 => -1 as i64, i16 => -2 as i64, i32 => -4 as i64, i64 => -8 as i64, isize => -8 as i64,
}

impl SdtArg for bool {
    const SIZE: i8 = 1;
    #[inline(always)]
    fn sdt_value(self) -> u64 {
        self as u64
    }
}

impl SdtArg for char {
    const SIZE: i8 = 4;
    #[inline(always)]
    fn sdt_value(self) -> u64 {
        self as u64
    }
}

impl SdtArg for f32 {
    const SIZE: i8 = 4;
    #[inline(always)]
    fn sdt_value(self) -> u64 {
        u64::from(self.to_bits())
    }
}

impl SdtArg for f64 {
    const SIZE: i8 = 8;
    #[inline(always)]
    fn sdt_value(self) -> u64 {
        self.to_bits()
    }
}

impl<T: ?Sized> SdtArg for &T {
    const SIZE: i8 = 8;
    #[inline(always)]
    fn sdt_value(self) -> u64 {
        (self as *const T).cast::<u8>() as usize as u64
    }
}

impl<T: ?Sized> SdtArg for *const T {
    const SIZE: i8 = 8;
    #[inline(always)]
    fn sdt_value(self) -> u64 {
        self.cast::<u8>() as usize as u64
    }
}

impl<T: ?Sized> SdtArg for *mut T {
    const SIZE: i8 = 8;
    #[inline(always)]
    fn sdt_value(self) -> u64 {
        self.cast::<u8>() as usize as u64
    }
}

impl<T: ?Sized> SdtArg for Option<&T> {
    const SIZE: i8 = 8;
    #[inline(always)]
    fn sdt_value(self) -> u64 {
        self.map_or(0, SdtArg::sdt_value)
    }
}

/// The SDT probe point of one site: `__tp_sdt_probe!(system, name, fire_fn, gate, args...)`
/// inside the site's fire function. The note points at the `nop`, and is kept or discarded
/// with the fire function's code (`SHF_LINK_ORDER`): the linker drops unused functions
/// (`--gc-sections`), and a note left behind would name an address in nothing.
/// `.stapsdt.base` is retained (`R`) for the same reason: only notes refer to it. It sits in
/// the code (`x`; one byte, never executed): perf turns a note's address into a file offset
/// with `.stapsdt.base`'s offset minus its address, right only when both are in one segment
/// (`<sys/sdt.h>`'s read-only one works for C programs, whose segments all have the same
/// offset-address difference; a Rust program's code segment usually has another).
///
/// The semaphores' `.probes` section of each code unit is page-aligned (at most a page of
/// padding per unit): the linker (lld, Rust's default) starts the data segment in the file
/// page where the read-only-after-relocation (RELRO) segment ends, and when a program starts,
/// the kernel sets a semaphore in that file page through the first writable mapping of it,
/// the RELRO one, where nothing reads it (`perf stat` on a command then counts nothing).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __tp_sdt_probe {
    ($system:ident, $name:ident, $fire:ident, $gate:ident $(,)?) => {
        $crate::__tp_sdt_probe!(@emit $system, $name, $fire, $gate, [],)
    };
    // The argument string `SIZE@REG SIZE@REG`, operands named by `paste!` below.
    ($system:ident, $name:ident, $fire:ident, $gate:ident,
        $first:ident : $fty:ty $(, $arg:ident : $aty:ty)* $(,)?) => {
        $crate::__tp_sdt_probe!(@emit $system, $name, $fire, $gate, [
            "{", ::core::stringify!([<__tp_s_ $first>]), "}@{",
            ::core::stringify!([<__tp_a_ $first>]), "}",
            $( " {", ::core::stringify!([<__tp_s_ $arg>]), "}@{",
            ::core::stringify!([<__tp_a_ $arg>]), "}", )*
        ], $first : $fty $(, $arg : $aty)*)
    };
    (@emit $system:ident, $name:ident, $fire:ident, $gate:ident, [$($args:tt)*],
        $($arg:ident : $aty:ty),*) => {
        $crate::__private::paste! {
            const _: () = ::core::assert!(
                <[&str]>::len(&[$(::core::stringify!($arg)),*]) <= 12,
                "a tracepoint has at most 12 arguments (its SDT probe point, as <sys/sdt.h>)",
            );
            // SAFETY: a `nop` and data in other sections: reads the argument registers and
            // nothing else (an attached uprobe reads memory they point to, hence not `nomem`).
            unsafe {
                ::core::arch::asm!(
                    ".ifndef _.stapsdt.base",
                    ".pushsection .stapsdt.base,\"axGR\",@progbits,.stapsdt.base,comdat",
                    ".weak _.stapsdt.base",
                    ".hidden _.stapsdt.base",
                    "_.stapsdt.base: .space 1",
                    ".size _.stapsdt.base, 1",
                    ".popsection",
                    ".endif",
                    ".pushsection .probes,\"aw\",@progbits",
                    ".balign 4096",
                    ".popsection",
                    "990: nop",
                    ".pushsection .note.stapsdt,\"o\",@note,{__tp_fire}",
                    ".balign 4",
                    ".4byte 992f-991f, 994f-993f, 3",
                    "991: .asciz \"stapsdt\"",
                    "992: .balign 4",
                    "993: .8byte 990b",
                    ".8byte _.stapsdt.base",
                    ".8byte {__tp_sema}",
                    ::core::concat!(".asciz \"", ::core::stringify!($system), "\""),
                    ::core::concat!(".asciz \"", ::core::stringify!($name), "\""),
                    ::core::concat!(".asciz \"", $($args)* "\""),
                    "994: .balign 4",
                    ".popsection",
                    __tp_fire = sym $fire,
                    __tp_sema = sym $gate,
                    $(
                        [<__tp_a_ $arg>] = in(reg) $crate::SdtArg::sdt_value($arg),
                        [<__tp_s_ $arg>] = const <$aty as $crate::SdtArg>::SIZE,
                    )*
                    options(att_syntax, nostack, preserves_flags, readonly),
                );
            }
        }
    };
}

/// No SDT notes off x86-64 Linux (the argument specs name x86-64 registers).
#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
#[doc(hidden)]
#[macro_export]
macro_rules! __tp_sdt_probe {
    ($($t:tt)*) => {};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_and_the_semaphore_share_the_word_without_touching_each_other() {
        let g = Gate::new();
        assert_eq!(g.load(), 0);
        // An external tracer attached twice (the kernel adds to the first two bytes).
        g.0.fetch_add(2, Ordering::Relaxed);
        g.set_state(crate::site::RECORD);
        assert_eq!(g.semaphore(), 2);
        assert_eq!(Gate::state_of(g.load()), crate::site::RECORD);
        g.set_state(0);
        assert_eq!(g.load(), 2, "the semaphore alone still fires the site");
        g.0.fetch_sub(2, Ordering::Relaxed);
        assert_eq!(g.load(), 0);
    }

    #[test]
    fn argument_sizes_and_values() {
        assert_eq!((<i32 as SdtArg>::SIZE, (-5i32).sdt_value()), (-4, (-5i64) as u64));
        assert_eq!((<u16 as SdtArg>::SIZE, 7u16.sdt_value()), (2, 7));
        assert_eq!((<bool as SdtArg>::SIZE, true.sdt_value()), (1, 1));
        let s = "abc";
        assert_eq!((<&str as SdtArg>::SIZE, s.sdt_value()), (8, s.as_ptr() as u64));
        assert_eq!(<Option<&u8>>::None.sdt_value(), 0);
        assert_eq!(1.5f64.sdt_value(), 1.5f64.to_bits());
    }
}
