//! Events the kernel prints with C code instead of their print fmt: the syscall events
//! (kernel/trace/trace_syscalls.c) and ftrace's own events (kernel/trace/trace_output.c).

use super::ast::IntTy;
use super::printf::{self, parse_fmt, push_dec, Conv, Count, Piece, PtrExt, LEFT};
use super::render::{conv, Env, Val, BAD};
use super::{graph, RenderCtx};
use crate::format::{read_uint, EventFormat, Field, FieldKind};

#[derive(Debug, Clone)]
pub(crate) enum Special {
    /// `sys_openat(dfd: 0xffffff9c, filename: 0x..., flags: 0x241, mode: 0x1b6)`.
    SysEnter {
        name: Box<str>,
        args: Vec<(Box<str>, Slot)>,
        user: Option<(usize, Field)>,
    },
    /// `sys_openat -> 0x3`.
    SysExit {
        name: Box<str>,
        ret: Slot,
    },
    /// trace_marker: `tracing_mark_write: text`.
    Print {
        ip: Slot,
        buf: usize,
    },
    Bputs {
        ip: Slot,
        s: Slot,
    },
    Bprint {
        ip: Slot,
        fmt: Slot,
        buf: usize,
    },
    RawData {
        id: usize,
        buf: usize,
    },
    /// The function tracer: `do_IRQ <-ret_from_intr`.
    Function {
        ip: Slot,
        parent: Slot,
    },
    /// The function_graph tracer's call, as a call with children: `do_IRQ() {` (a call
    /// without children is a [`graph::write_leaf`] of the call and its return).
    GraphEntry {
        func: Slot,
        depth: Slot,
    },
    /// Its return: `}` with the duration.
    GraphExit(graph::Exit),
    KernelStack {
        caller: Slot,
    },
    UserStack {
        caller: Slot,
        n: usize,
        tgid: Option<Slot>,
    },
}

/// Where a scalar field is (kernel `long`s are 4 bytes on 32-bit machines).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Slot {
    off: usize,
    size: usize,
}

impl Slot {
    pub(crate) fn of(ev: &EventFormat, name: &str) -> Option<Slot> {
        let f = ev.field(name)?;
        let size = f.element_size();
        matches!(size, 1 | 2 | 4 | 8).then_some(Slot { off: f.offset, size })
    }

    pub(crate) fn read(self, rec: &[u8], be: bool) -> Option<u64> {
        rec.get(self.off..self.off + self.size).map(|b| read_uint(b, be))
    }

    /// The next element of an array of such values.
    fn next(self) -> Slot {
        Slot { off: self.off + self.size, size: self.size }
    }
}

fn off(ev: &EventFormat, name: &str) -> Option<usize> {
    ev.field(name).map(|f| f.offset)
}

impl Special {
    pub fn detect(ev: &EventFormat) -> Option<Special> {
        if ev.system == "syscalls" {
            if let Some(n) = ev.name.strip_prefix("sys_enter_") {
                let mut args = Vec::new();
                let mut user = None;
                for f in ev.fields.iter().filter(|f| f.name != "__syscall_nr") {
                    if matches!(f.kind, FieldKind::DataLoc | FieldKind::RelLoc) {
                        // `__<arg>_val`: user memory the kernel copied (6.19+).
                        let arg = f.name.trim_start_matches("__").trim_end_matches("_val");
                        if let Some(i) =
                            args.iter().position(|(a, _): &(Box<str>, Slot)| &**a == arg)
                        {
                            user = Some((i, f.clone()));
                        }
                        continue;
                    }
                    args.push((f.name.clone().into_boxed_str(), Slot::of(ev, &f.name)?));
                }
                return Some(Special::SysEnter { name: format!("sys_{n}").into(), args, user });
            }
            if let Some(n) = ev.name.strip_prefix("sys_exit_") {
                return Some(Special::SysExit {
                    name: format!("sys_{n}").into(),
                    ret: Slot::of(ev, "ret")?,
                });
            }
            return None;
        }
        if ev.system != "ftrace" {
            return None;
        }
        Some(match ev.name.as_str() {
            "print" => Special::Print { ip: Slot::of(ev, "ip")?, buf: off(ev, "buf")? },
            "bputs" => Special::Bputs { ip: Slot::of(ev, "ip")?, s: Slot::of(ev, "str")? },
            "bprint" => Special::Bprint {
                ip: Slot::of(ev, "ip")?,
                fmt: Slot::of(ev, "fmt")?,
                buf: off(ev, "buf")?,
            },
            "raw_data" => Special::RawData { id: off(ev, "id")?, buf: off(ev, "buf")? },
            "function" => {
                Special::Function { ip: Slot::of(ev, "ip")?, parent: Slot::of(ev, "parent_ip")? }
            }
            "funcgraph_entry" => {
                Special::GraphEntry { func: Slot::of(ev, "func")?, depth: Slot::of(ev, "depth")? }
            }
            "funcgraph_exit" => Special::GraphExit(graph::Exit::of(ev)?),
            "kernel_stack" => Special::KernelStack { caller: Slot::of(ev, "caller")? },
            "user_stack" => {
                let caller = Slot::of(ev, "caller")?;
                let n = ev.field("caller")?.size / caller.size;
                Special::UserStack { caller, n, tgid: Slot::of(ev, "tgid") }
            }
            _ => return None,
        })
    }

    /// Whether the kernel prints `name: ` before the text (the syscall and ftrace events'
    /// own printers do not).
    pub fn prints_name(&self) -> bool {
        false
    }

    /// Render; the kernel's final newline is left out, as for print fmt events.
    pub fn render(&self, rec: &[u8], ctx: &RenderCtx<'_>, out: &mut String) {
        let be = ctx.big_endian;
        let u32_at = |o: usize| rec.get(o..o + 4).map(|b| read_uint(b, be));
        match self {
            Special::SysEnter { name, args, user } => {
                out.push_str(name);
                out.push('(');
                for (i, (a, o)) in args.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    out.push_str(a);
                    out.push_str(": ");
                    match o.read(rec, be) {
                        Some(v) if v < 10 => push_dec(out, v),
                        Some(v) => {
                            out.push_str("0x");
                            printf::push_hex(out, v);
                        }
                        None => out.push_str(BAD),
                    }
                    if let Some((ui, f)) = user {
                        if *ui == i {
                            match f.bytes(rec, be) {
                                Some(s) => {
                                    out.push_str(" \"");
                                    let end = memchr::memchr(0, s).unwrap_or(s.len());
                                    printf::push_bytes(out, &s[..end]);
                                    out.push('"');
                                }
                                None => out.push_str(BAD),
                            }
                        }
                    }
                }
                out.push(')');
            }
            Special::SysExit { name, ret } => {
                out.push_str(name);
                out.push_str(" -> 0x");
                match ret.read(rec, be) {
                    Some(v) => printf::push_hex(out, v),
                    None => out.push_str(BAD),
                }
            }
            Special::Print { ip, buf } => {
                ip_sym(out, ip.read(rec, be), ctx);
                out.push_str(": ");
                let s = rec.get(*buf..).unwrap_or(&[]);
                let end = memchr::memchr(0, s).unwrap_or(s.len());
                let s = &s[..end];
                // The kernel stores the text with a newline (adding one when the write had
                // none) and prints it as the line's end.
                printf::push_bytes(out, s.strip_suffix(b"\n").unwrap_or(s));
            }
            Special::Bputs { ip, s } => {
                ip_sym(out, ip.read(rec, be), ctx);
                out.push_str(": ");
                match s.read(rec, be) {
                    Some(p) => {
                        let start = out.len();
                        super::render::kernel_string(out, p, ctx);
                        strip_nl(out, start);
                    }
                    None => out.push_str(BAD),
                }
            }
            Special::Bprint { ip, fmt, buf } => {
                ip_sym(out, ip.read(rec, be), ctx);
                out.push_str(": ");
                let Some(p) = fmt.read(rec, be) else {
                    out.push_str(BAD);
                    return;
                };
                let Some(f) = ctx.printk.get(p) else {
                    out.push_str("[UNKNOWN BPRINT FMT 0x");
                    printf::push_hex(out, p);
                    out.push(']');
                    return;
                };
                let start = out.len();
                bstr_printf(out, f.as_bytes(), rec.get(*buf..).unwrap_or(&[]), ctx);
                strip_nl(out, start);
            }
            Special::RawData { id, buf } => {
                out.push_str("# ");
                match u32_at(*id) {
                    Some(v) => printf::push_hex(out, v),
                    None => out.push_str(BAD),
                }
                out.push_str(" buf:");
                for b in rec.get(*buf..).unwrap_or(&[]) {
                    out.push(' ');
                    printf::push_hex2(out, *b, false);
                }
            }
            Special::Function { ip, parent } => {
                ip_sym(out, ip.read(rec, be), ctx);
                if let Some(p) = parent.read(rec, be).filter(|p| *p != 0) {
                    out.push_str(" <-");
                    ip_sym(out, Some(p), ctx);
                }
            }
            Special::GraphEntry { func, depth } => {
                graph::write_call(out, func.read(rec, be), depth.read(rec, be), ctx)
            }
            Special::GraphExit(exit) => exit.write(out, rec, false, ctx),
            Special::KernelStack { caller } => {
                out.push_str("<stack trace>");
                // Ends at ULONG_MAX or the record's end.
                let end = u64::MAX >> (64 - 8 * caller.size);
                let mut slot = *caller;
                while let Some(v) = slot.read(rec, be) {
                    if v == end {
                        break;
                    }
                    out.push_str("\n => ");
                    ip_sym(out, Some(v), ctx);
                    slot = slot.next();
                }
            }
            Special::UserStack { caller, n, tgid } => {
                out.push_str("<user stack trace>");
                let pid = tgid.and_then(|t| t.read(rec, be)).map(|t| t as u32 as i32);
                let mut slot = *caller;
                for _ in 0..*n {
                    match slot.read(rec, be) {
                        Some(v) if v != 0 => {
                            // sym-userobj: the file and the offset in its mapping.
                            let file = ctx.user_maps.zip(pid).and_then(|(m, p)| m.file_at(p, v));
                            if let Some((path, off)) = file {
                                out.push_str("\n => ");
                                out.push_str(path);
                                out.push_str("[+0x");
                                printf::push_hex(out, off);
                                out.push(']');
                                if ctx.sym.addr {
                                    push_addr(out, v);
                                }
                                slot = slot.next();
                                continue;
                            }
                            out.push_str("\n =>  <");
                            let digits = 2 * caller.size as i32;
                            printf::number(out, v, 16, printf::SMALL | printf::ZEROPAD, digits, -1);
                            out.push('>');
                        }
                        _ => break,
                    }
                    slot = slot.next();
                }
            }
        }
    }
}

fn strip_nl(out: &mut String, start: usize) {
    if out.len() > start && out.ends_with('\n') {
        out.pop();
    }
}

/// `seq_print_ip_sym()`: `0` for 0; the bare symbol name, or with the sym-offset option
/// `%pS`'s `name+0xoff/0xsize [module]`; `0x%08lx` when no symbol covers the address; with
/// sym-addr, ` <%016lx>` after it.
fn ip_sym(out: &mut String, ip: Option<u64>, ctx: &RenderCtx<'_>) {
    let Some(ip) = ip else {
        out.push_str(BAD);
        return;
    };
    if ip == 0 {
        out.push('0');
        return;
    }
    match ctx.kallsyms.resolve(ip).filter(|r| r.size > 0 || r.offset == 0) {
        Some(_) if ctx.sym.offset => super::pointer::symbol(out, ip, true, false, ctx),
        Some(r) => out.push_str(r.name),
        None => {
            out.push_str("0x");
            printf::number(out, ip, 16, printf::SMALL | printf::ZEROPAD, 8, -1);
        }
    }
    if ctx.sym.addr {
        push_addr(out, ip);
    }
}

/// ` <%016lx>`.
fn push_addr(out: &mut String, ip: u64) {
    out.push_str(" <");
    printf::number(out, ip, 16, printf::SMALL | printf::ZEROPAD, 16, -1);
    out.push('>');
}

/// `bstr_printf()`: a `trace_printk` format applied to the argument words `vbin_printf`
/// packed (ints aligned to their size, 8-byte values to 4, strings inline, `%p`
/// extensions that dereference already rendered to strings).
pub(crate) fn bstr_printf(out: &mut String, fmt: &[u8], buf: &[u8], ctx: &RenderCtx<'_>) {
    let env = Env { rec: &[], be: ctx.big_endian, fields: &[] };
    let mut p = 0usize;
    let get = |p: &mut usize, size: usize| -> Option<u64> {
        let align = size.min(4);
        *p = p.div_ceil(align) * align;
        let v = buf.get(*p..*p + size).map(|b| read_uint(b, ctx.big_endian));
        *p += size;
        v
    };
    for piece in parse_fmt(fmt) {
        match piece {
            Piece::Lit(l) => printf::push_bytes(out, &l),
            Piece::Stop => return,
            Piece::Spec(s) => {
                let mut flags = s.flags;
                let mut width = match s.width {
                    Count::Fixed(w) => w,
                    Count::Arg => printf::clamp_count(get(&mut p, 4).unwrap_or(0) as u32 as i32),
                    Count::None => -1,
                };
                if s.width == Count::Arg && width < 0 {
                    flags |= LEFT;
                    width = width.saturating_neg();
                }
                let prec = match s.prec {
                    Count::Fixed(v) => v,
                    Count::Arg => {
                        printf::clamp_count(get(&mut p, 4).unwrap_or(0) as u32 as i32).max(0)
                    }
                    Count::None => -1,
                };
                let v = match &s.conv {
                    Conv::Int { size, signed, .. } => match get(&mut p, *size as usize) {
                        Some(x) => Val::Int(
                            IntTy::new(*size as usize, *signed).norm(x),
                            IntTy::new(*size as usize, *signed),
                        ),
                        None => Val::Bad,
                    },
                    Conv::Char => match get(&mut p, 1) {
                        Some(x) => Val::Int(x, IntTy::U8),
                        None => Val::Bad,
                    },
                    Conv::Ptr(PtrExt::Raw | PtrExt::Sym { .. }) => match get(&mut p, 8) {
                        Some(x) => Val::Int(x, IntTy::ULONG),
                        None => Val::Bad,
                    },
                    Conv::Str | Conv::Ptr(_) => {
                        let rest = buf.get(p..).unwrap_or(&[]);
                        let n = memchr::memchr(0, rest).unwrap_or(rest.len());
                        p += n + 1;
                        Val::Bytes(&rest[..n])
                    }
                };
                let c = match &s.conv {
                    Conv::Ptr(PtrExt::Raw | PtrExt::Sym { .. }) => s.conv.clone(),
                    Conv::Ptr(_) => Conv::Str,
                    c => c.clone(),
                };
                conv(out, &c, flags, width, prec, v, &env, ctx);
            }
        }
    }
}
