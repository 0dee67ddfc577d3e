//! Typed static tracepoints for Rust programs.
