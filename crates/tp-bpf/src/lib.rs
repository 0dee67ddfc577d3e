//! bpftrace's language compiled straight to BPF instructions, without LLVM: a program is
//! parsed ([`parse()`]), its attach points resolved against the machine ([`probes`]), typed
//! ([`typing`]) and turned into instruction arrays ([`codegen`]); all of that is pure and
//! tested without root. [`session`] loads the programs through the `bpf(2)` system call
//! (a private `sys` module), attaches them, reads the maps and prints them as bpftrace 0.17
//! does ([`output`]).
//!
//! ```no_run
//! use tp_bpf::probes::Machine;
//!
//! let source = "tracepoint:raw_syscalls:sys_enter { @[comm] = count(); }";
//! let ast = tp_bpf::parse(source)?;
//! // The attach points of each probe, resolved against this kernel's tracefs and BTF.
//! let mut machine = tp_bpf::machine::System::new();
//! let mut attaches = Vec::new();
//! for probe in &ast.probes {
//!     let mut list = Vec::new();
//!     for (spec, _) in &probe.specs {
//!         list.extend(tp_bpf::probes::resolve(spec, &mut machine as &mut dyn Machine)?);
//!     }
//!     attaches.push(list);
//! }
//! let compiled = tp_bpf::compile(&ast, &attaches, &tp_bpf::Options::default())?;
//! // Loading and attaching need root.
//! let mut session = tp_bpf::session::Session::load(compiled, source)?;
//! session.attach()?;
//! std::thread::sleep(std::time::Duration::from_secs(1));
//! session.detach();
//! session.print_map(0, &mut std::io::stdout(), tp_bpf::session::Format { json: false })?;
//! # Ok::<(), tp_bpf::Error>(())
//! ```

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
