//! bpftrace's language compiled straight to BPF instructions, without LLVM: a program is
//! parsed ([`parse()`]), its attach points resolved against the machine ([`probes`]), typed
//! ([`typing`]) and turned into instruction arrays ([`codegen`]); all of that is pure and
//! tested without root. [`session`] loads the programs through the `bpf(2)` system call
//! (a private `sys` module), attaches them, reads the maps and prints them as bpftrace 0.17
//! does ([`output`]).

pub mod ast;
mod btf;
pub mod codegen;
pub mod error;
pub mod insn;
pub mod lex;
pub mod machine;
pub mod output;
pub mod parse;
pub mod printf;
pub mod probes;
pub mod session;
mod sys;
pub mod types;
pub mod typing;

pub use codegen::{compile, Compiled, Options};
pub use error::{Error, Result};
pub use parse::parse;
