//! The print fmt expression language: parsed and compiled once per event, rendered per record.
//!
//! Public API (used by the report, the recorder and the Rust tracepoints):
//! - [`Compiled::compile`]: `EventFormat` -> compiled program (error names the event and
//!   the position in the print fmt).
//! - [`Compiled::render`]: record bytes + [`RenderCtx`] -> text appended to a `String`,
//!   exactly as the kernel's `trace` file prints the part after `name: `, without the
//!   line's final newline.
//! - [`Compiled::prints_name`]: whether the kernel prints `name: ` before that text (false
//!   for the syscall events and ftrace's own events, which the kernel prints with C code).
//!
//! Modules: `lex` (tokens), `parse` (C expressions -> typed `ast::Node`s, fields
//! resolved), `printf` (the kernel's vsnprintf rules), `pointer` (`%p` extensions),
//! `helpers` (`__print_flags` and friends), `render` (evaluation), `program` (the
//! conversions compiled into straight-line steps, the interpreter kept for the rest),
//! `special` (events printed by C code).
//!
//! Values are typed like C: every node has a size and signedness after promotions and
//! casts, and a conversion reads the argument as `vsnprintf` would from a `va_list`.
//!
//! What cannot be known from the record is printed as `[?]` (see `render::BAD`): a field
//! beyond the end of a short record, an argument that needs kernel state (kvmmmu's
//! `trace_seq_printf(p, ...)` with `role.level`, unknown functions or identifiers). Such
//! arguments are listed by [`Compiled::unsupported`]; the rest of the line still renders.
//! `%s` of a kernel pointer prints the string from `printk_formats` when known, else `0x...`.
//! `jiffies_to_msecs` uses `HZ` = [`DEFAULT_HZ`] (CONFIG_HZ of the kernel this was written
//! for, read from /proc/config.gz) unless [`CompileOptions`] say otherwise; bare enumeration
//! constants come from [`CompileOptions::constants`] or a built-in table for 6.18 (`consts`).

pub(crate) mod ascii;
mod ast;
mod consts;
mod graph;
mod helpers;
mod lex;
mod parse;
mod pointer;
mod printf;
mod program;
mod render;
mod special;
#[cfg(test)]
mod tests;

use crate::format::{EventFormat, Field};
use crate::symbols::{Kallsyms, PrintkFormats, UserMaps};
use ast::Node;
use printf::{Count, Piece};
use program::Program;
use render::{Env, Op};
use special::Special;

/// What a function_graph record (ftrace's `funcgraph_entry`, `funcgraph_exit`) records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GraphStep {
    /// A function was called at `depth`.
    Call { func: u64, depth: u64 },
    /// It returned.
    Return { func: u64, depth: u64 },
}

/// `CONFIG_HZ` assumed for `jiffies_to_msecs` (250 on the reference machine).
pub const DEFAULT_HZ: u32 = 250;

/// What rendering needs besides the record.
#[derive(Debug, Clone, Copy)]
pub struct RenderCtx<'a> {
    pub kallsyms: &'a Kallsyms,
    pub printk: &'a PrintkFormats,
    pub big_endian: bool,
    /// sizeof(long) of the traced kernel (8 on x86_64).
    pub long_size: usize,
    /// Processes' maps: user stacks print as with the kernel's `sym-userobj` option.
    pub user_maps: Option<&'a UserMaps>,
    pub sym: SymFlags,
}

/// The kernel's trace options for code addresses in ftrace's own events
/// (`seq_print_ip_sym()`): `sym-offset` (`name+0xoff/0xsize [module]`) and `sym-addr` (the
/// address after the name, ` <ffffffff81000130>`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SymFlags {
    pub offset: bool,
    pub addr: bool,
}

/// Facts about the traced kernel that print fmts depend on.
#[derive(Debug, Clone, Copy)]
pub struct CompileOptions<'a> {
    /// `CONFIG_HZ`, for `jiffies_to_msecs`.
    pub hz: u32,
    /// Values of bare identifiers in print fmts (enumeration constants the kernel did not
    /// export with `TRACE_DEFINE_ENUM`, e.g. from BTF). Looked up before the built-in 6.18
    /// table.
    pub constants: Option<&'a std::collections::HashMap<String, i64>>,
}

impl Default for CompileOptions<'_> {
    fn default() -> Self {
        CompileOptions { hz: DEFAULT_HZ, constants: None }
    }
}

/// A compiled print fmt.
#[derive(Debug, Clone)]
pub struct Compiled {
    kind: Kind,
    unsupported: Vec<PrintFmtError>,
}

#[derive(Debug, Clone)]
enum Kind {
    Fmt { program: Program, args: Vec<Node>, fields: Vec<Field> },
    Special(Special),
}

/// A print fmt that could not be parsed or compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PrintFmtError {
    /// `system:name`.
    pub event: String,
    /// Byte offset in the print fmt text.
    pub pos: usize,
    pub message: String,
}

impl std::fmt::Display for PrintFmtError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: print fmt at byte {}: {}", self.event, self.pos, self.message)
    }
}

impl std::error::Error for PrintFmtError {}

impl Compiled {
    pub fn compile(event: &EventFormat) -> Result<Compiled, PrintFmtError> {
        Self::compile_with(event, &CompileOptions::default())
    }

    /// As [`Compiled::compile`], with facts about the traced kernel.
    pub fn compile_with(
        event: &EventFormat,
        opts: &CompileOptions<'_>,
    ) -> Result<Compiled, PrintFmtError> {
        let err = |pos: usize, message: String| PrintFmtError {
            event: format!("{}:{}", event.system, event.name),
            pos,
            message,
        };
        if let Some(s) = Special::detect(event) {
            return Ok(Compiled { kind: Kind::Special(s), unsupported: Vec::new() });
        }
        let src = event.print_fmt.as_str();
        let toks = lex::lex(src).map_err(|(p, m)| err(p, m))?;
        let mut p = parse::Parser::new(&toks, src.len(), event, opts.hz, opts.constants);
        let mut unsupported = Vec::new();
        let parsed = p
            .printfmt(&mut |pe: parse::PErr| unsupported.push(err(pe.pos, pe.msg)))
            .map_err(|e| err(e.pos, e.msg))?;
        let fields = std::mem::take(&mut p.fields);
        let mut args = parsed.args;
        let mut ops = Vec::new();
        let mut next = 0usize;
        let mut take = |args: &mut Vec<Node>, what: &str| -> Result<u16, PrintFmtError> {
            let i = next;
            next += 1;
            if i >= args.len() {
                return Err(err(
                    0,
                    format!("format wants a {what} argument #{} but has {}", i + 1, args.len()),
                ));
            }
            u16::try_from(i).map_err(|_| err(0, "too many arguments".into()))
        };
        for piece in printf::parse_fmt(&parsed.fmt) {
            match piece {
                Piece::Lit(l) => ops.push(Op::Lit(String::from_utf8_lossy(&l).into())),
                Piece::Stop => {
                    ops.push(Op::Stop);
                    break;
                }
                Piece::Spec(spec) => {
                    let width_arg = if spec.width == Count::Arg {
                        Some(take(&mut args, "width")?)
                    } else {
                        None
                    };
                    let prec_arg = if spec.prec == Count::Arg {
                        Some(take(&mut args, "precision")?)
                    } else {
                        None
                    };
                    let arg = take(&mut args, "value")?;
                    ops.push(Op::Conv { spec, arg, width_arg, prec_arg });
                }
            }
        }
        let program = Program::new(ops, &args);
        Ok(Compiled { kind: Kind::Fmt { program, args, fields }, unsupported })
    }

    /// Append the event's text for `record` (the whole record, common fields included).
    pub fn render(&self, record: &[u8], ctx: &RenderCtx<'_>, out: &mut String) {
        match &self.kind {
            Kind::Fmt { program, args, fields } => {
                let env = Env { rec: record, be: ctx.big_endian, fields };
                program.run(args, &env, ctx, out);
            }
            Kind::Special(s) => s.render(record, ctx, out),
        }
    }

    /// Whether the kernel's line shows `name: ` before the text. False for `sys_enter_*`,
    /// `sys_exit_*` (`sys_openat(...)`, `sys_openat -> 0x3`) and ftrace's `print`, `bputs`,
    /// `bprint`, `function`, `raw_data`, `kernel_stack`, `user_stack`.
    pub fn prints_name(&self) -> bool {
        match &self.kind {
            Kind::Fmt { .. } => true,
            Kind::Special(s) => s.prints_name(),
        }
    }

    /// Arguments that need kernel state the record does not carry; each renders as `[?]`.
    pub fn unsupported(&self) -> &[PrintFmtError] {
        &self.unsupported
    }

    /// For ftrace's `funcgraph_entry` and `funcgraph_exit`: what `record` records.
    pub fn graph_step(&self, record: &[u8], big_endian: bool) -> Option<GraphStep> {
        let be = big_endian;
        match &self.kind {
            Kind::Special(Special::GraphEntry { func, depth }) => Some(GraphStep::Call {
                func: func.read(record, be)?,
                depth: depth.read(record, be)?,
            }),
            Kind::Special(Special::GraphExit(e)) => {
                Some(GraphStep::Return { func: e.func(record, be)?, depth: e.depth(record, be)? })
            }
            _ => None,
        }
    }

    /// For `funcgraph_exit`: a call without children as one line (`func();` with the
    /// duration) from its return `record`; or, with `orphan`, a return whose call was not
    /// shown (`} /* func */`). False (nothing written) for other events.
    pub fn render_graph_return(
        &self,
        record: &[u8],
        leaf: bool,
        ctx: &RenderCtx<'_>,
        out: &mut String,
    ) -> bool {
        let Kind::Special(Special::GraphExit(e)) = &self.kind else { return false };
        if leaf {
            e.write_leaf(out, record, ctx);
        } else {
            e.write(out, record, true, ctx);
        }
        true
    }

    /// True when the kernel prints this event with C code rather than its print fmt.
    pub fn is_special(&self) -> bool {
        matches!(self.kind, Kind::Special(_))
    }
}
