//! Rust (legacy and v0) and C++ symbol names as people read them.

/// A Rust (legacy or v0, without the hash) or C++ name demangled; others as they are.
pub fn demangle(sym: &str) -> String {
    if let Ok(d) = rustc_demangle::try_demangle(sym) {
        return format!("{d:#}");
    }
    if sym.starts_with("_Z") {
        if let Ok(s) = cpp_demangle::Symbol::new(sym) {
            if let Ok(d) = s.demangle(&cpp_demangle::DemangleOptions::default()) {
                return d;
            }
        }
    }
    sym.to_string()
}

#[cfg(test)]
mod tests {
    use super::demangle;

    #[test]
    fn demangles_rust_and_cpp() {
        assert_eq!(demangle("_ZN4core3fmt5write17h0123456789abcdefE"), "core::fmt::write");
        assert_eq!(demangle("_ZN3foo3barEv"), "foo::bar()");
        assert_eq!(demangle("_RNvCs1234_7mycrate3foo"), "mycrate::foo");
        assert_eq!(demangle("main"), "main");
    }
}
