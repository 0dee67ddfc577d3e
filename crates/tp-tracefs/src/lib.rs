//! The kernel side of tp: tracefs discovery, private instances, event control and per-CPU
//! capture. Every syscall tp makes lives in this crate.
