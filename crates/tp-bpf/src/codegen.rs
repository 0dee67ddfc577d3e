//! Code generation: each probe's statements, for each event it is attached to, into BPF
//! instructions the verifier accepts. Values are 64-bit in registers (r0 holds an
//! expression's value; r6 the context); strings, keys and records live on the stack.

use std::collections::HashMap;

use crate::ast::*;
use crate::error::{Error, Result};
use crate::insn::{self, helper, Insn, B, DW, FP, H, R0, R1, R2, R3, R4, R5, R6, R7, W};
use crate::probes::{Attach, Kind};
use crate::types::*;
use crate::typing::{FieldAccess, MapTypes, Typer};

/// What a program sends to user space through the perf ring: the record's first u64 is
/// `tag << 32 | index`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Async {
    Printf(u32),
    Exit,
    Print(u32),
    Clear(u32),
    Zero(u32),
    Time(u32),
}

impl Async {
    pub fn id(self) -> u64 {
        let (tag, i) = match self {
            Async::Printf(i) => (0u64, i),
            Async::Exit => (1, 0),
            Async::Print(i) => (2, i),
            Async::Clear(i) => (3, i),
            Async::Zero(i) => (4, i),
            Async::Time(i) => (5, i),
        };
        (tag << 32) | i as u64
    }

    pub fn from_id(id: u64) -> Option<Async> {
        let i = id as u32;
        Some(match id >> 32 {
            0 => Async::Printf(i),
            1 => Async::Exit,
            2 => Async::Print(i),
            3 => Async::Clear(i),
            4 => Async::Zero(i),
            5 => Async::Time(i),
            _ => return None,
        })
    }
}

/// A value the loader writes into an `ld_imm64` before loading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reloc {
    /// The map with this index: its fd.
    Map(u32),
    /// CLOCK_MONOTONIC nanoseconds when tracing started (`elapsed`).
    StartNs,
}

/// One `printf`: its format and its arguments' types (the record: id, then each argument).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Printf {
    pub format: String,
    pub args: Vec<Ty>,
}

/// The code for one event.
#[derive(Debug, Clone)]
pub struct ProgCode {
    pub attach: Attach,
    /// Attached as a raw tracepoint (the record is not built) instead of a perf tracepoint.
    pub raw: bool,
    pub insns: Vec<Insn>,
    /// The program line each instruction came from.
    pub lines: Vec<u32>,
    pub relocs: Vec<(usize, Reloc)>,
    /// The probe (index in the program) it was generated from.
    pub probe: usize,
}

/// A compiled program: the maps to create, the code of every event, and what user space needs
/// to print what comes back.
#[derive(Debug, Clone, Default)]
pub struct Compiled {
    pub maps: Vec<MapDef>,
    pub user_maps: Vec<UserMap>,
    pub programs: Vec<ProgCode>,
    pub printfs: Vec<Printf>,
    pub time_formats: Vec<String>,
    pub probe_names: Vec<String>,
    /// The perf event array for printf and the other messages (its index in `maps`).
    pub perf_map: Option<usize>,
    /// The stack map for kstack/ustack.
    pub stack_map: Option<usize>,
}

/// Compile options.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Only this process's events (`-p`): every probe but BEGIN/END/interval checks the pid.
    pub pid: Option<u32>,
}

/// The address of the kernel symbol `name` in `/proc/kallsyms` text (`kaddr()`, resolved when
/// the program is compiled, as bpftrace does): the first line naming it, `None` when absent
/// or shown as 0 (addresses hidden from this user).
pub fn kallsyms_address(kallsyms: &str, name: &str) -> Option<u64> {
    kallsyms.lines().find_map(|l| {
        let mut f = l.split_ascii_whitespace();
        let (addr, _kind, sym) = (f.next()?, f.next()?, f.next()?);
        let addr = u64::from_str_radix(addr, 16).ok()?;
        (sym == name && addr != 0).then_some(addr)
    })
}

/// Default map size (bpftrace's `BPFTRACE_MAP_KEYS_MAX`).
pub const MAP_KEYS: u32 = 4096;
/// Frames kept per stack (`perf_event_max_stack`'s default).
pub const STACK_DEPTH: u32 = 127;

const STACK_LIMIT: i32 = 512;

/// Slots of a keyed count's per-CPU cache (a power of two): a direct-mapped cache indexed by
/// a multiplicative hash of the key. A hit is an inlined array lookup, a compare and an add
/// where the hash map costs a helper call hashing the key (jhash) and walking a bucket; a
/// miss writes the slot's count back into the hash and takes the slot.
pub const CACHE_SLOTS: u32 = 256;
/// Keys longer than this (bytes) are not cached: comparing them would cost what the hash does.
const CACHE_KEY_MAX: usize = 32;

/// Program-wide state shared by every probe's code generation.
struct Globals {
    maps: Vec<MapDef>,
    user: MapTypes,
    printfs: Vec<Printf>,
    time_formats: Vec<String>,
    probe_names: Vec<String>,
    perf_map: Option<usize>,
    stack_map: Option<usize>,
}

impl Globals {
    fn perf_map(&mut self) -> u32 {
        if let Some(i) = self.perf_map {
            return i as u32;
        }
        self.maps.push(MapDef {
            name: ".events".into(),
            kind: MapKind::PerfEventArray,
            key_size: 4,
            value_size: 4,
            max_entries: 0, // the loader sets the number of CPUs
        });
        self.perf_map = Some(self.maps.len() - 1);
        (self.maps.len() - 1) as u32
    }

    fn stack_map(&mut self) -> u32 {
        if let Some(i) = self.stack_map {
            return i as u32;
        }
        self.maps.push(MapDef {
            name: ".stacks".into(),
            kind: MapKind::StackTrace,
            key_size: 4,
            value_size: 8 * STACK_DEPTH,
            max_entries: MAP_KEYS,
        });
        self.stack_map = Some(self.maps.len() - 1);
        (self.maps.len() - 1) as u32
    }

    fn user_map(&self, name: &str, pos: Pos) -> Result<&UserMap> {
        self.user
            .get(name)
            .ok_or_else(|| Error::semantic(pos, format!("`@{name}` is never assigned")))
    }
}

/// The kernel map that holds a user map.
fn map_def(m: &UserMap) -> MapDef {
    let key = m.key_size() as u32;
    let (kind, key_size, value_size, max_entries) = match &m.value {
        MapValue::Agg(a) if a.is_hist() && key == 0 => {
            (MapKind::PercpuArray, 4, 8, a.buckets() as u32)
        }
        MapValue::Agg(a) if a.is_hist() => (MapKind::PercpuHash, key + 8, 8, MAP_KEYS * 16),
        MapValue::Agg(a) if key == 0 => (MapKind::PercpuArray, 4, a.value_size() as u32, 1),
        MapValue::Agg(a) => (MapKind::PercpuHash, key, a.value_size() as u32, MAP_KEYS),
        MapValue::Plain(t) => (MapKind::Hash, key.max(8), t.size().max(8) as u32, MAP_KEYS),
    };
    MapDef { name: format!("@{}", m.name), kind, key_size, value_size, max_entries }
}

/// Compile a parsed program whose attach points are resolved: `attaches[i]` are probe i's.
pub fn compile(prog: &Program, attaches: &[Vec<Attach>], opts: &Options) -> Result<Compiled> {
    let firsts: Vec<&Attach> = attaches.iter().map(|a| &a[0]).collect();
    let mut user = crate::typing::map_types(prog, &firsts)?;
    let deleted = deleted_maps(prog);
    let mut maps = Vec::new();
    for m in &mut user.maps {
        m.map = maps.len();
        maps.push(map_def(m));
    }
    for m in &mut user.maps {
        // A delete() in a program could not reach the other CPUs' slots.
        let ks = m.key_size();
        if m.value == MapValue::Agg(Agg::Count)
            && ks > 0
            && ks <= CACHE_KEY_MAX
            && !deleted.contains(&m.name)
        {
            m.cache = Some(maps.len());
            maps.push(MapDef {
                name: format!(".cache@{}", m.name),
                kind: MapKind::PercpuArray,
                key_size: 4,
                value_size: ks as u32 + 8,
                max_entries: CACHE_SLOTS,
            });
        }
    }
    let mut g = Globals {
        maps,
        user,
        printfs: Vec::new(),
        time_formats: Vec::new(),
        probe_names: Vec::new(),
        perf_map: None,
        stack_map: None,
    };
    let mut programs = Vec::new();
    for (pi, (probe, list)) in prog.probes.iter().zip(attaches).enumerate() {
        for attach in list {
            let probe_id = match g.probe_names.iter().position(|n| *n == attach.name) {
                Some(i) => i,
                None => {
                    g.probe_names.push(attach.name.clone());
                    g.probe_names.len() - 1
                }
            };
            let raw = raw_possible(probe, attach);
            let mut gen = Gen::new(&mut g, attach, raw, probe_id as u64);
            gen.probe(probe, opts)?;
            let (insns, lines, relocs) = gen.finish()?;
            programs.push(ProgCode {
                attach: attach.clone(),
                raw,
                insns,
                lines,
                relocs,
                probe: pi,
            });
        }
    }
    Ok(Compiled {
        maps: g.maps,
        user_maps: g.user.maps,
        programs,
        printfs: g.printfs,
        time_formats: g.time_formats,
        probe_names: g.probe_names,
        perf_map: g.perf_map,
        stack_map: g.stack_map,
    })
}

/// The maps a program deletes elements of.
fn deleted_maps(prog: &Program) -> Vec<String> {
    let mut names = Vec::new();
    for s in prog.probes.iter().flat_map(|p| &p.body) {
        visit_stmt(s, &mut |e| {
            if let ExprKind::Call(f, args) = &e.kind {
                if let (true, Some(ExprKind::Map { name, .. })) =
                    (f == "delete", args.first().map(|a| &a.kind))
                {
                    names.push(name.clone());
                }
            }
        });
    }
    names
}

/// A tracepoint can be attached raw (no record built) when every `args` field the probe
/// reads is one of the raw tracepoint's integer arguments of the same size, or it reads none.
fn raw_possible(probe: &Probe, attach: &Attach) -> bool {
    let Kind::Tracepoint { format, raw_args: Some(raw) } = &attach.kind else { return false };
    let mut fields = Vec::new();
    let mut other = false;
    for s in &probe.body {
        visit_stmt(s, &mut |e| args_use(e, &mut fields, &mut other));
    }
    if let Some(p) = &probe.predicate {
        visit_expr(p, &mut |e| args_use(e, &mut fields, &mut other));
    }
    !other
        && fields.iter().all(|name| {
            let Some(f) = format.fields.iter().find(|f| &f.name == name) else { return false };
            let Some(a) = raw.iter().find(|a| &a.name == name) else { return false };
            matches!(crate::typing::field_access(f), FieldAccess::Int { size, signed, .. }
                if a.int == Some((size, signed)) || (a.int.is_some_and(|(s, _)| s == 8) && size == 8))
        })
}

fn args_use(e: &Expr, fields: &mut Vec<String>, other: &mut bool) {
    match &e.kind {
        ExprKind::Field(b, name) if matches!(&b.kind, ExprKind::Builtin(x) if x == "args") => {
            fields.push(name.clone())
        }
        ExprKind::Builtin(b) if b == "args" => {}
        // Context-reading builtins that mean something else in a raw tracepoint.
        ExprKind::Builtin(b) if b == "kstack" || b == "ustack" => *other = true,
        _ => {}
    }
    if let ExprKind::Index(b, _) = &e.kind {
        if let ExprKind::Field(a, _) = &b.kind {
            if matches!(&a.kind, ExprKind::Builtin(x) if x == "args") {
                *other = true;
            }
        }
    }
}

/// Call `f` on every expression of a statement, outer first.
pub fn visit_stmt(s: &Stmt, f: &mut dyn FnMut(&Expr)) {
    match &s.kind {
        StmtKind::Expr(e) => visit_expr(e, f),
        StmtKind::Assign { target, value, .. } => {
            visit_expr(target, f);
            visit_expr(value, f);
        }
        StmtKind::If { cond, then, els } => {
            visit_expr(cond, f);
            then.iter().chain(els).for_each(|s| visit_stmt(s, f));
        }
        StmtKind::Unroll(_, b) => b.iter().for_each(|s| visit_stmt(s, f)),
    }
}

pub fn visit_expr(e: &Expr, f: &mut dyn FnMut(&Expr)) {
    f(e);
    match &e.kind {
        ExprKind::Map { keys: v, .. } | ExprKind::Tuple(v) | ExprKind::Call(_, v) => {
            v.iter().for_each(|x| visit_expr(x, f))
        }
        ExprKind::Field(a, _) | ExprKind::Unary(_, a) | ExprKind::Cast(_, a) => visit_expr(a, f),
        ExprKind::Index(a, b) | ExprKind::Binary(_, a, b) => {
            visit_expr(a, f);
            visit_expr(b, f);
        }
        ExprKind::Ternary(a, b, c) => {
            visit_expr(a, f);
            visit_expr(b, f);
            visit_expr(c, f);
        }
        _ => {}
    }
}

/// One event's code generation.
struct Gen<'g> {
    g: &'g mut Globals,
    attach: &'g Attach,
    raw: bool,
    probe_id: u64,
    insns: Vec<Insn>,
    lines: Vec<u32>,
    relocs: Vec<(usize, Reloc)>,
    line: u32,
    /// Label -> instruction index; jumps waiting for their label.
    labels: Vec<Option<usize>>,
    fixups: Vec<(usize, usize)>,
    /// Stack: bytes used below the frame pointer; the part variables keep.
    stack: i32,
    kept: i32,
    vars: HashMap<String, (Ty, i16)>,
}

type Label = usize;

/// Instructions, their program lines, their relocations.
type Code = (Vec<Insn>, Vec<u32>, Vec<(usize, Reloc)>);

impl<'g> Gen<'g> {
    fn new(g: &'g mut Globals, attach: &'g Attach, raw: bool, probe_id: u64) -> Gen<'g> {
        Gen {
            g,
            attach,
            raw,
            probe_id,
            insns: Vec::new(),
            lines: Vec::new(),
            relocs: Vec::new(),
            line: 0,
            labels: Vec::new(),
            fixups: Vec::new(),
            stack: 0,
            kept: 0,
            vars: HashMap::new(),
        }
    }

    fn finish(mut self) -> Result<Code> {
        for &(at, label) in &self.fixups {
            let target = self.labels[label].expect("every label is bound");
            let off = target as i64 - at as i64 - 1;
            self.insns[at].off = i16::try_from(off)
                .map_err(|_| Error::semantic(Pos::default(), "the probe is too long for a jump"))?;
        }
        Ok((self.insns, self.lines, self.relocs))
    }

    fn emit(&mut self, i: Insn) {
        self.insns.push(i);
        self.lines.push(self.line);
    }

    fn emit2(&mut self, pair: [Insn; 2]) {
        self.emit(pair[0]);
        self.emit(pair[1]);
    }

    fn ld_map(&mut self, reg: u8, map: u32) {
        self.relocs.push((self.insns.len(), Reloc::Map(map)));
        self.emit2(insn::ld_map(reg, map));
    }

    fn label(&mut self) -> Label {
        self.labels.push(None);
        self.labels.len() - 1
    }

    fn bind(&mut self, l: Label) {
        self.labels[l] = Some(self.insns.len());
    }

    /// A jump whose offset is filled in when `l` is bound.
    fn jump(&mut self, i: Insn, l: Label) {
        self.fixups.push((self.insns.len(), l));
        self.emit(i);
    }

    /// `if reg OP value goto l`, for any 64-bit value.
    fn jump_imm(&mut self, op: u8, reg: u8, value: i64, l: Label) {
        if let Ok(v) = i32::try_from(value) {
            self.jump(insn::jmp_imm(op, reg, v, 0), l);
        } else {
            self.emit2(insn::ld_imm64(R5, value as u64));
            self.jump(insn::jmp(op, reg, R5, 0), l);
        }
    }

    fn mov_imm64(&mut self, reg: u8, value: i64) {
        match i32::try_from(value) {
            Ok(v) => self.emit(insn::mov_imm(reg, v)),
            Err(_) => self.emit2(insn::ld_imm64(reg, value as u64)),
        }
    }

    /// Stack space for `size` bytes (8-aligned); its offset from the frame pointer.
    fn alloc(&mut self, size: usize, pos: Pos) -> Result<i16> {
        self.stack += align8(size.max(1)) as i32;
        if self.stack > STACK_LIMIT {
            return Err(Error::semantic(
                pos,
                format!("the probe needs more than the {STACK_LIMIT} bytes of stack BPF allows (fewer or shorter strings)"),
            ));
        }
        Ok(-self.stack as i16)
    }

    fn zero(&mut self, off: i16, size: usize) {
        for i in (0..align8(size)).step_by(8) {
            self.emit(insn::st_imm(DW, FP, off + i as i16, 0));
        }
    }

    /// `reg = fp + off`
    fn addr(&mut self, reg: u8, off: i16) {
        self.emit(insn::mov(reg, FP));
        self.emit(insn::alu_imm(insn::ADD, reg, off as i32));
    }

    fn typer(&self) -> Typer<'_> {
        Typer {
            attach: self.attach,
            maps: &self.g.user,
            vars: self.vars.iter().map(|(k, (t, _))| (k.clone(), t.clone())).collect(),
        }
    }

    fn ty(&self, e: &Expr) -> Result<Ty> {
        self.typer().ty(e)
    }

    // ---- probes and statements ----

    fn probe(&mut self, p: &Probe, opts: &Options) -> Result<()> {
        self.line = p.pos.line;
        self.emit(insn::mov(R6, R1));
        self.declare_vars(&p.body)?;
        let out = self.label();
        let filtered = !matches!(self.attach.kind, Kind::Begin | Kind::End | Kind::Interval { .. });
        if let (Some(pid), true) = (opts.pid, filtered) {
            self.emit(insn::call(helper::GET_CURRENT_PID_TGID));
            self.emit(insn::alu_imm(insn::RSH, R0, 32));
            self.jump_imm(insn::JNE, R0, pid as i64, out);
        }
        if let Some(pred) = &p.predicate {
            self.line = pred.pos.line;
            self.cond_false(pred, out)?;
            self.stack = self.kept;
        }
        self.stmts(&p.body)?;
        self.bind(out);
        self.emit(insn::mov_imm(R0, 0));
        self.emit(insn::exit());
        Ok(())
    }

    /// Every `$variable` gets its stack slot and a zero before the body runs, so that a read
    /// on any path sees a value.
    fn declare_vars(&mut self, body: &[Stmt]) -> Result<()> {
        let mut order = Vec::new();
        collect_vars(body, &mut order);
        for (name, value, pos) in order {
            if self.vars.contains_key(&name) {
                continue;
            }
            let ty = self.ty(&value)?;
            let off = self.alloc(ty.size(), pos)?;
            self.zero(off, ty.size());
            self.vars.insert(name, (ty, off));
        }
        self.kept = self.stack;
        Ok(())
    }

    fn stmts(&mut self, body: &[Stmt]) -> Result<()> {
        for s in body {
            self.stmt(s)?;
            self.stack = self.kept;
        }
        Ok(())
    }

    fn stmt(&mut self, s: &Stmt) -> Result<()> {
        self.line = s.pos.line;
        match &s.kind {
            StmtKind::Expr(e) => self.expr_stmt(e),
            StmtKind::Assign { target, op, value } => self.assign(target, *op, value, s.pos),
            StmtKind::If { cond, then, els } => {
                let (otherwise, end) = (self.label(), self.label());
                self.cond_false(cond, otherwise)?;
                self.stack = self.kept;
                self.stmts(then)?;
                self.jump(insn::ja(0), end);
                self.bind(otherwise);
                self.stmts(els)?;
                self.bind(end);
                Ok(())
            }
            StmtKind::Unroll(n, body) => {
                for _ in 0..*n {
                    self.stmts(body)?;
                }
                Ok(())
            }
        }
    }

    fn expr_stmt(&mut self, e: &Expr) -> Result<()> {
        let ExprKind::Call(f, args) = &e.kind else {
            return Err(Error::semantic(e.pos, "this expression does nothing as a statement"));
        };
        match f.as_str() {
            "printf" => self.printf(args, e.pos),
            "exit" => self.message(Async::Exit, e.pos),
            "time" => {
                let fmt = match args.first() {
                    None => "%H:%M:%S\n".to_string(),
                    Some(Expr { kind: ExprKind::Str(s), .. }) => s.clone(),
                    Some(a) => return Err(Error::semantic(a.pos, "time()'s format is a string")),
                };
                self.g.time_formats.push(fmt);
                let i = self.g.time_formats.len() as u32 - 1;
                self.message(Async::Time(i), e.pos)
            }
            "print" | "clear" | "zero" => {
                let Some(Expr { kind: ExprKind::Map { name, keys }, pos }) = args.first() else {
                    return Err(Error::semantic(e.pos, format!("{f}() takes a map: {f}(@name)")));
                };
                if !keys.is_empty() {
                    return Err(Error::semantic(
                        *pos,
                        format!("{f}() takes the whole map, without a key"),
                    ));
                }
                let m = self.g.user_map(name, *pos)?;
                let i = self.g.user.maps.iter().position(|x| x.name == m.name).unwrap_or(0) as u32;
                let msg = match f.as_str() {
                    "print" => Async::Print(i),
                    "clear" => Async::Clear(i),
                    _ => Async::Zero(i),
                };
                self.message(msg, e.pos)
            }
            "delete" => {
                let Some(Expr { kind: ExprKind::Map { name, keys }, pos }) = args.first() else {
                    return Err(Error::semantic(
                        e.pos,
                        "delete() takes a map element: delete(@name[key])",
                    ));
                };
                let m = self.g.user_map(name, *pos)?.clone();
                if m.key.is_empty() || matches!(m.value, MapValue::Agg(a) if a.is_hist()) {
                    return Err(Error::semantic(
                        *pos,
                        "delete() needs a keyed map that is not a histogram; use clear()",
                    ));
                }
                let key = self.key(&m, keys, *pos)?;
                self.ld_map(R1, m.map as u32);
                self.addr(R2, key);
                self.emit(insn::call(helper::MAP_DELETE_ELEM));
                Ok(())
            }
            _ => {
                self.ty(e)?;
                Err(Error::semantic(
                    e.pos,
                    format!("{f}() is used as a value here, not a statement"),
                ))
            }
        }
    }

    /// Send a message record (just its id) to user space.
    fn message(&mut self, m: Async, pos: Pos) -> Result<()> {
        let off = self.alloc(8, pos)?;
        self.emit2(insn::ld_imm64(R1, m.id()));
        self.emit(insn::stx(DW, FP, R1, off));
        self.output(off, 8);
        Ok(())
    }

    /// perf_event_output(ctx, events, BPF_F_CURRENT_CPU, fp + off, size)
    fn output(&mut self, off: i16, size: usize) {
        let map = self.g.perf_map();
        self.emit(insn::mov(R1, R6));
        self.ld_map(R2, map);
        self.emit2(insn::ld_imm64(R3, 0xffff_ffff));
        self.addr(R4, off);
        self.emit(insn::mov_imm(R5, size as i32));
        self.emit(insn::call(helper::PERF_EVENT_OUTPUT));
    }

    fn printf(&mut self, args: &[Expr], pos: Pos) -> Result<()> {
        let Some(Expr { kind: ExprKind::Str(format), .. }) = args.first() else {
            return Err(Error::semantic(pos, "printf's first argument is its format string"));
        };
        let tys = args[1..].iter().map(|a| self.ty(a)).collect::<Result<Vec<_>>>()?;
        let wanted = crate::printf::conversions(format).map_err(|m| Error::semantic(pos, m))?;
        if wanted.len() != tys.len() {
            return Err(Error::semantic(
                pos,
                format!("printf's format takes {} arguments, {} given", wanted.len(), tys.len()),
            ));
        }
        for ((c, t), a) in wanted.iter().zip(&tys).zip(&args[1..]) {
            crate::printf::check(*c, t).map_err(|m| Error::semantic(a.pos, m))?;
        }
        let size = 8 + tys.iter().map(Ty::size).sum::<usize>();
        let off = self.alloc(size, pos)?;
        self.g.printfs.push(Printf { format: format.clone(), args: tys.clone() });
        let id = Async::Printf(self.g.printfs.len() as u32 - 1).id();
        let mut at = off + 8;
        for (a, t) in args[1..].iter().zip(&tys) {
            self.value_into(a, t, at)?;
            at += t.size() as i16;
        }
        self.emit2(insn::ld_imm64(R1, id));
        self.emit(insn::stx(DW, FP, R1, off));
        self.output(off, size);
        Ok(())
    }

    fn assign(&mut self, target: &Expr, op: Option<BinOp>, value: &Expr, pos: Pos) -> Result<()> {
        match &target.kind {
            ExprKind::Var(name) => {
                let (ty, slot) = self
                    .vars
                    .get(name)
                    .cloned()
                    .ok_or_else(|| Error::semantic(pos, format!("`${name}` has no slot")))?;
                match op {
                    None => self.value_into(value, &ty, slot),
                    Some(op) => {
                        let e = compound(target, op, value);
                        self.int(&e)?;
                        self.emit(insn::stx(DW, FP, R0, slot));
                        Ok(())
                    }
                }
            }
            ExprKind::Map { name, keys } => {
                let m = self.g.user_map(name, target.pos)?.clone();
                match (&m.value, op) {
                    (MapValue::Agg(a), None) => self.aggregate(&m, *a, keys, value, pos),
                    (MapValue::Agg(_), Some(_)) => {
                        Err(Error::semantic(pos, "an aggregation map is assigned with `=`"))
                    }
                    (MapValue::Plain(t), op) => {
                        let t = t.clone();
                        let val = self.alloc(t.size().max(8), pos)?;
                        match op {
                            None => self.value_into(value, &t, val)?,
                            Some(op) => {
                                let e = compound(target, op, value);
                                self.int(&e)?;
                                self.emit(insn::stx(DW, FP, R0, val));
                            }
                        }
                        let key = self.key(&m, keys, pos)?;
                        self.ld_map(R1, m.map as u32);
                        self.addr(R2, key);
                        self.addr(R3, val);
                        self.emit(insn::mov_imm(R4, 0));
                        self.emit(insn::call(helper::MAP_UPDATE_ELEM));
                        Ok(())
                    }
                }
            }
            _ => Err(Error::semantic(pos, "only maps and variables are assigned")),
        }
    }

    /// The key of a map element on the stack (8 bytes of zero for a map without keys); its
    /// offset. An aggregation without keys lives in an array: its key is the u32 index 0.
    fn key(&mut self, m: &UserMap, keys: &[Expr], pos: Pos) -> Result<i16> {
        if keys.len() != m.key.len() {
            return Err(Error::semantic(pos, format!("@{} takes {} key(s)", m.name, m.key.len())));
        }
        let size = m.key_size().max(8);
        let off = self.alloc(size, pos)?;
        if keys.is_empty() {
            self.emit(insn::st_imm(DW, FP, off, 0));
            return Ok(off);
        }
        let mut at = off;
        for (k, t) in keys.iter().zip(&m.key) {
            self.value_into(k, t, at)?;
            at += t.size() as i16;
        }
        Ok(off)
    }

    /// Update an aggregation: look the element up, change it in place (this CPU's copy), or
    /// insert it.
    fn aggregate(
        &mut self,
        m: &UserMap,
        agg: Agg,
        keys: &[Expr],
        value: &Expr,
        pos: Pos,
    ) -> Result<()> {
        let ExprKind::Call(_, args) = &value.kind else {
            return Err(Error::semantic(
                pos,
                "an aggregation map takes count(), sum(), hist(), ...",
            ));
        };
        // The argument first: it may call helpers, which the key's registers would not survive.
        let x = match args.first() {
            Some(a) => {
                self.int(a)?;
                let slot = self.alloc(8, pos)?;
                if agg.is_hist() {
                    self.emit(insn::mov(R1, R0));
                    self.bucket(agg);
                }
                self.emit(insn::stx(DW, FP, R0, slot));
                Some(slot)
            }
            None => None,
        };
        let key = if agg.is_hist() && m.key.is_empty() {
            // The array's index is the bucket.
            let off = self.alloc(8, pos)?;
            let b = x.expect("hist has an argument");
            self.emit(insn::ldx(DW, R1, FP, b));
            self.emit(insn::stx(DW, FP, R1, off));
            off
        } else if agg.is_hist() {
            let ks = m.key_size();
            let off = self.alloc(ks + 8, pos)?;
            let mut at = off;
            for (k, t) in keys.iter().zip(&m.key) {
                self.value_into(k, t, at)?;
                at += t.size() as i16;
            }
            if keys.len() != m.key.len() {
                return Err(Error::semantic(
                    pos,
                    format!("@{} takes {} key(s)", m.name, m.key.len()),
                ));
            }
            self.emit(insn::ldx(DW, R1, FP, x.expect("hist has an argument")));
            self.emit(insn::stx(DW, FP, R1, at));
            off
        } else {
            self.key(m, keys, pos)?
        };
        if let Some(cache) = m.cache {
            return self.cached_count(m, cache, key, pos);
        }
        let (insert, done) = (self.label(), self.label());
        self.ld_map(R1, m.map as u32);
        self.addr(R2, key);
        self.emit(insn::call(helper::MAP_LOOKUP_ELEM));
        self.jump(insn::jmp_imm(insn::JEQ, R0, 0, 0), insert);
        // Found: update this CPU's value in place (a program does not nest on one CPU).
        let val = |s: Option<i16>| s.expect("the aggregation has an argument");
        match agg {
            Agg::Count | Agg::Hist | Agg::Lhist { .. } => {
                self.emit(insn::ldx(DW, R1, R0, 0));
                self.emit(insn::alu_imm(insn::ADD, R1, 1));
                self.emit(insn::stx(DW, R0, R1, 0));
            }
            Agg::Sum | Agg::Avg | Agg::Stats => {
                self.emit(insn::ldx(DW, R1, R0, 0));
                self.emit(insn::ldx(DW, R2, FP, val(x)));
                self.emit(insn::alu(insn::ADD, R1, R2));
                self.emit(insn::stx(DW, R0, R1, 0));
                if agg != Agg::Sum {
                    self.emit(insn::ldx(DW, R1, R0, 8));
                    self.emit(insn::alu_imm(insn::ADD, R1, 1));
                    self.emit(insn::stx(DW, R0, R1, 8));
                }
            }
            Agg::Min | Agg::Max => {
                let set = self.label();
                self.emit(insn::ldx(DW, R1, FP, val(x)));
                self.emit(insn::ldx(DW, R2, R0, 8));
                self.jump(insn::jmp_imm(insn::JEQ, R2, 0, 0), set);
                self.emit(insn::ldx(DW, R2, R0, 0));
                let keep = if agg == Agg::Min { insn::JSGE } else { insn::JSLE };
                self.jump(insn::jmp(keep, R1, R2, 0), done);
                self.bind(set);
                self.emit(insn::stx(DW, R0, R1, 0));
                self.emit(insn::st_imm(DW, R0, 8, 1));
            }
        }
        self.jump(insn::ja(0), done);
        self.bind(insert);
        let vsize = if agg.is_hist() { 8 } else { agg.value_size() };
        let v = self.alloc(vsize, pos)?;
        match agg {
            Agg::Count | Agg::Hist | Agg::Lhist { .. } => self.emit(insn::st_imm(DW, FP, v, 1)),
            _ => {
                self.emit(insn::ldx(DW, R1, FP, val(x)));
                self.emit(insn::stx(DW, FP, R1, v));
                if agg != Agg::Sum {
                    self.emit(insn::st_imm(DW, FP, v + 8, 1));
                }
            }
        }
        self.ld_map(R1, m.map as u32);
        self.addr(R2, key);
        self.addr(R3, v);
        self.emit(insn::mov_imm(R4, 0));
        self.emit(insn::call(helper::MAP_UPDATE_ELEM));
        self.bind(done);
        Ok(())
    }

    /// `@m[key] = count()` through the map's per-CPU cache (the key at fp + key): the slot
    /// of the key's hash; the same key there: add one; another: write its count into the
    /// hash (added to the element, or inserted), then take the slot with a count of 1.
    fn cached_count(&mut self, m: &UserMap, cache: usize, key: i16, pos: Pos) -> Result<()> {
        let words = m.key_size() / 8;
        let count = 8 * words as i16;
        // h = (..((w0 * C) ^ w1) * C ..) * C; slot = the top bits of h.
        self.emit2(insn::ld_imm64(R3, 0x9e37_79b9_7f4a_7c15));
        self.emit(insn::mov_imm(R1, 0));
        for i in 0..words as i16 {
            self.emit(insn::ldx(DW, R2, FP, key + 8 * i));
            self.emit(insn::alu(insn::XOR, R1, R2));
            self.emit(insn::alu(insn::MUL, R1, R3));
        }
        self.emit(insn::alu_imm(insn::RSH, R1, 64 - CACHE_SLOTS.trailing_zeros() as i32));
        let slot = self.alloc(8, pos)?;
        self.emit(insn::stx(W, FP, R1, slot));
        let (miss, take, done) = (self.label(), self.label(), self.label());
        self.ld_map(R1, cache as u32);
        self.addr(R2, slot);
        self.emit(insn::call(helper::MAP_LOOKUP_ELEM));
        self.jump(insn::jmp_imm(insn::JEQ, R0, 0, 0), done);
        self.emit(insn::mov(R7, R0));
        for i in 0..words as i16 {
            self.emit(insn::ldx(DW, R1, R7, 8 * i));
            self.emit(insn::ldx(DW, R2, FP, key + 8 * i));
            self.jump(insn::jmp(insn::JNE, R1, R2, 0), miss);
        }
        self.emit(insn::ldx(DW, R1, R7, count));
        self.emit(insn::alu_imm(insn::ADD, R1, 1));
        self.emit(insn::stx(DW, R7, R1, count));
        self.jump(insn::ja(0), done);
        // Another key (or none: a zero count) holds the slot: its count goes to the hash.
        self.bind(miss);
        self.emit(insn::ldx(DW, R1, R7, count));
        self.jump(insn::jmp_imm(insn::JEQ, R1, 0, 0), take);
        let insert = self.label();
        self.ld_map(R1, m.map as u32);
        self.emit(insn::mov(R2, R7));
        self.emit(insn::call(helper::MAP_LOOKUP_ELEM));
        self.jump(insn::jmp_imm(insn::JEQ, R0, 0, 0), insert);
        self.emit(insn::ldx(DW, R1, R0, 0));
        self.emit(insn::ldx(DW, R2, R7, count));
        self.emit(insn::alu(insn::ADD, R1, R2));
        self.emit(insn::stx(DW, R0, R1, 0));
        self.jump(insn::ja(0), take);
        self.bind(insert);
        self.ld_map(R1, m.map as u32);
        self.emit(insn::mov(R2, R7));
        self.emit(insn::mov(R3, R7));
        self.emit(insn::alu_imm(insn::ADD, R3, count as i32));
        self.emit(insn::mov_imm(R4, 0));
        self.emit(insn::call(helper::MAP_UPDATE_ELEM));
        self.bind(take);
        for i in 0..words as i16 {
            self.emit(insn::ldx(DW, R1, FP, key + 8 * i));
            self.emit(insn::stx(DW, R7, R1, 8 * i));
        }
        self.emit(insn::st_imm(DW, R7, count, 1));
        self.bind(done);
        Ok(())
    }

    /// r0 = the bucket of the value in r1 (clobbers r1, r2, r5).
    fn bucket(&mut self, agg: Agg) {
        let done = self.label();
        match agg {
            Agg::Lhist { min, max, step } => {
                self.emit(insn::mov_imm(R0, 0));
                self.jump_imm(insn::JSLT, R1, min, done);
                self.mov_imm64(R0, (max - min) / step + 1);
                self.jump_imm(insn::JSGE, R1, max, done);
                if min != 0 {
                    self.mov_imm64(R2, min);
                    self.emit(insn::alu(insn::SUB, R1, R2));
                }
                self.mov_imm64(R2, step);
                self.emit(insn::alu(insn::DIV, R1, R2));
                self.emit(insn::mov(R0, R1));
                self.emit(insn::alu_imm(insn::ADD, R0, 1));
            }
            _ => {
                // Negative: 0; zero: 1; else 2 + floor(log2(v)), by halving steps.
                self.emit(insn::mov_imm(R0, 0));
                self.jump(insn::jmp_imm(insn::JSLT, R1, 0, 0), done);
                self.emit(insn::mov_imm(R0, 1));
                self.jump(insn::jmp_imm(insn::JEQ, R1, 0, 0), done);
                self.emit(insn::mov_imm(R0, 2));
                for shift in [32, 16, 8, 4, 2, 1] {
                    self.emit(insn::mov(R2, R1));
                    self.emit(insn::alu_imm(insn::RSH, R2, shift));
                    self.emit(insn::jmp_imm(insn::JEQ, R2, 0, 2));
                    self.emit(insn::mov(R1, R2));
                    self.emit(insn::alu_imm(insn::ADD, R0, shift));
                }
            }
        }
        self.bind(done);
    }

    // ---- values ----

    /// Write a value of type `t` (the slot's type, maybe wider than the expression's) at
    /// fp + off, every byte of `t.size()` written.
    fn value_into(&mut self, e: &Expr, t: &Ty, off: i16) -> Result<()> {
        match t {
            Ty::Int { .. } | Ty::Ksym => {
                self.int(e)?;
                self.emit(insn::stx(DW, FP, R0, off));
            }
            Ty::Str(n) => self.str_into(e, off, align8(*n))?,
            Ty::Probe => match &e.kind {
                ExprKind::Builtin(b) if b == "probe" => {
                    self.emit(insn::st_imm(DW, FP, off, self.probe_id as i32));
                }
                _ => return self.copy_value(e, t, off),
            },
            Ty::Kstack | Ty::Ustack => match &e.kind {
                ExprKind::Builtin(b) if b == "kstack" || b == "ustack" => {
                    let user = b == "ustack";
                    self.stack_id(user);
                    self.emit(insn::stx(DW, FP, R0, off));
                    if user {
                        self.emit(insn::call(helper::GET_CURRENT_PID_TGID));
                        self.emit(insn::alu_imm(insn::RSH, R0, 32));
                        self.emit(insn::stx(DW, FP, R0, off + 8));
                    }
                }
                _ => return self.copy_value(e, t, off),
            },
            Ty::Usym => match &e.kind {
                ExprKind::Call(f, a) if f == "usym" && a.len() == 1 => {
                    self.int(&a[0])?;
                    self.emit(insn::stx(DW, FP, R0, off));
                    self.emit(insn::call(helper::GET_CURRENT_PID_TGID));
                    self.emit(insn::alu_imm(insn::RSH, R0, 32));
                    self.emit(insn::stx(DW, FP, R0, off + 8));
                }
                _ => return self.copy_value(e, t, off),
            },
            Ty::Tuple(items) => match &e.kind {
                ExprKind::Tuple(es) if es.len() == items.len() => {
                    let mut at = off;
                    for (x, it) in es.iter().zip(items) {
                        self.value_into(x, it, at)?;
                        at += it.size() as i16;
                    }
                }
                _ => return self.copy_value(e, t, off),
            },
            Ty::Buf(n) => match &e.kind {
                ExprKind::Call(f, a) if f == "buf" => {
                    self.zero(off, t.size());
                    self.emit(insn::st_imm(DW, FP, off, *n as i32));
                    self.int(&a[0])?;
                    self.emit(insn::mov(R3, R0));
                    self.addr(R1, off + 8);
                    self.emit(insn::mov_imm(R2, *n as i32));
                    self.emit(insn::call(helper::PROBE_READ));
                }
                _ => return self.copy_value(e, t, off),
            },
            Ty::Void => return Err(Error::semantic(e.pos, "this has no value")),
        }
        Ok(())
    }

    /// r0 = bpf_get_stackid(ctx, stacks, user ? BPF_F_USER_STACK : 0)
    fn stack_id(&mut self, user: bool) {
        let map = self.g.stack_map();
        self.emit(insn::mov(R1, R6));
        self.ld_map(R2, map);
        self.emit(insn::mov_imm(R3, if user { 1 << 8 } else { 0 }));
        self.emit(insn::call(helper::GET_STACKID));
    }

    /// Values that live in memory (variables, map values, ternaries): copy their bytes.
    fn copy_value(&mut self, e: &Expr, t: &Ty, off: i16) -> Result<()> {
        let size = t.size();
        match &e.kind {
            ExprKind::Var(v) => {
                let (vt, slot) = self.vars[v].clone();
                self.zero(off, size);
                self.copy(R1, FP, slot, off, vt.size().min(size));
            }
            ExprKind::Map { name, keys } => {
                let m = self.g.user_map(name, e.pos)?.clone();
                let vt = match &m.value {
                    MapValue::Plain(t) => t.clone(),
                    _ => return Err(Error::semantic(e.pos, "only a plain map's value is copied")),
                };
                self.zero(off, size);
                let key = self.key(&m, keys, e.pos)?;
                let missing = self.label();
                self.ld_map(R1, m.map as u32);
                self.addr(R2, key);
                self.emit(insn::call(helper::MAP_LOOKUP_ELEM));
                self.jump(insn::jmp_imm(insn::JEQ, R0, 0, 0), missing);
                self.emit(insn::mov(R1, R0));
                self.copy(R2, R1, 0, off, vt.size().min(size));
                self.bind(missing);
            }
            ExprKind::Ternary(c, a, b) => {
                let (otherwise, end) = (self.label(), self.label());
                self.cond_false(c, otherwise)?;
                self.value_into(a, t, off)?;
                self.jump(insn::ja(0), end);
                self.bind(otherwise);
                self.value_into(b, t, off)?;
                self.bind(end);
            }
            ExprKind::Field(base, idx) if !matches!(&base.kind, ExprKind::Builtin(b) if b == "args") =>
            {
                // A tuple's field: build the tuple, copy the part.
                let bt = self.ty(base)?;
                let Ty::Tuple(items) = &bt else {
                    return Err(Error::semantic(e.pos, "only tuples have numbered fields"));
                };
                let i: usize = idx.parse().unwrap_or(usize::MAX);
                let at: usize = items.iter().take(i).map(Ty::size).sum();
                let tmp = self.alloc(bt.size(), e.pos)?;
                self.value_into(base, &bt, tmp)?;
                self.zero(off, size);
                self.copy(R1, FP, tmp + at as i16, off, items[i].size().min(size));
            }
            _ => {
                return Err(Error::semantic(
                    e.pos,
                    format!("a {} cannot be made from this expression", t.name()),
                ))
            }
        }
        Ok(())
    }

    /// Copy `size` bytes (a multiple of 8) from (src + from) to (fp + to), through `tmp`.
    fn copy(&mut self, tmp: u8, src: u8, from: i16, to: i16, size: usize) {
        for i in (0..align8(size)).step_by(8) {
            let i = i as i16;
            self.emit(insn::ldx(DW, tmp, src, from + i));
            self.emit(insn::stx(DW, FP, tmp, to + i));
        }
    }

    /// A string into `size` bytes at fp + off, NUL-padded.
    fn str_into(&mut self, e: &Expr, off: i16, size: usize) -> Result<()> {
        match &e.kind {
            ExprKind::Str(s) => {
                let mut bytes = s.as_bytes().to_vec();
                bytes.truncate(size.saturating_sub(1));
                bytes.resize(size, 0);
                for (i, chunk) in bytes.chunks(8).enumerate() {
                    let v = u64::from_le_bytes(chunk.try_into().expect("8-byte chunks"));
                    let at = off + 8 * i as i16;
                    if v as i64 == v as i32 as i64 {
                        self.emit(insn::st_imm(DW, FP, at, v as i32));
                    } else {
                        self.emit2(insn::ld_imm64(R1, v));
                        self.emit(insn::stx(DW, FP, R1, at));
                    }
                }
            }
            ExprKind::Builtin(b) if b == "comm" => {
                if size > 16 {
                    self.zero(off + 16, size - 16);
                }
                self.addr(R1, off);
                self.emit(insn::mov_imm(R2, size.min(16) as i32));
                self.emit(insn::call(helper::GET_CURRENT_COMM));
            }
            ExprKind::Call(f, args) if f == "str" => {
                if matches!(self.ty(&args[0])?, Ty::Str(_)) {
                    return self.str_into(&args[0], off, size);
                }
                let n = match self.ty(e)? {
                    Ty::Str(n) => n.min(size),
                    _ => size,
                };
                self.int(&args[0])?;
                self.zero(off, size);
                self.emit(insn::mov(R3, R0));
                self.addr(R1, off);
                self.emit(insn::mov_imm(R2, n as i32));
                self.emit(insn::call(helper::PROBE_READ_STR));
            }
            ExprKind::Field(base, name) if matches!(&base.kind, ExprKind::Builtin(b) if b == "args") => {
                match self.typer().field(name, e.pos)? {
                    FieldAccess::Chars { offset, size: fs } => {
                        self.zero(off, size);
                        self.addr(R1, off);
                        self.emit(insn::mov_imm(R2, fs.min(size) as i32));
                        self.emit(insn::mov(R3, R6));
                        self.emit(insn::alu_imm(insn::ADD, R3, offset as i32));
                        self.emit(insn::call(helper::PROBE_READ_KERNEL_STR));
                    }
                    FieldAccess::DataLocStr { offset } => {
                        self.zero(off, size);
                        self.emit(insn::ldx(W, R3, R6, offset as i16));
                        self.emit(insn::alu_imm(insn::AND, R3, 0xffff));
                        self.emit(insn::alu(insn::ADD, R3, R6));
                        self.addr(R1, off);
                        self.emit(insn::mov_imm(R2, size as i32));
                        self.emit(insn::call(helper::PROBE_READ_KERNEL_STR));
                    }
                    _ => return Err(Error::semantic(e.pos, format!("`{name}` is not a string"))),
                }
            }
            _ => return self.copy_value(e, &Ty::Str(size), off),
        }
        Ok(())
    }

    /// Jump to `l` when `e` is false (zero).
    fn cond_false(&mut self, e: &Expr, l: Label) -> Result<()> {
        match &e.kind {
            ExprKind::Binary(BinOp::LAnd, a, b) => {
                self.cond_false(a, l)?;
                self.cond_false(b, l)
            }
            ExprKind::Binary(BinOp::LOr, a, b) => {
                let yes = self.label();
                let no = self.label();
                self.cond_false(a, no)?;
                self.jump(insn::ja(0), yes);
                self.bind(no);
                self.cond_false(b, l)?;
                self.bind(yes);
                Ok(())
            }
            ExprKind::Unary(UnOp::Not, a) => {
                let yes = self.label();
                self.cond_false(a, yes)?;
                self.jump(insn::ja(0), l);
                self.bind(yes);
                Ok(())
            }
            ExprKind::Binary(op, a, b) if op.is_comparison() => {
                if let (Ty::Str(_), Ty::Str(_)) = (self.ty(a)?, self.ty(b)?) {
                    self.str_eq(a, b, e.pos)?;
                    let want = if *op == BinOp::Eq { 0 } else { 1 };
                    self.jump(insn::jmp_imm(insn::JEQ, R0, want, 0), l);
                    return Ok(());
                }
                let signed = self.ty(a)?.is_signed() && self.ty(b)?.is_signed();
                let inverse = jump_op(negate(*op), signed);
                if let ExprKind::Int(v) = b.kind {
                    self.int(a)?;
                    self.jump_imm(inverse, R0, v, l);
                } else {
                    self.operands(a, b, e.pos)?;
                    self.jump(insn::jmp(inverse, R1, R0, 0), l);
                }
                Ok(())
            }
            _ => {
                self.int(e)?;
                self.jump(insn::jmp_imm(insn::JEQ, R0, 0, 0), l);
                Ok(())
            }
        }
    }

    /// r1 = a, r0 = b.
    fn operands(&mut self, a: &Expr, b: &Expr, pos: Pos) -> Result<()> {
        if simple(b) {
            self.int(a)?;
            self.emit(insn::mov(R1, R0));
            self.int_simple(b)?;
            return Ok(());
        }
        self.int(a)?;
        let slot = self.alloc(8, pos)?;
        self.emit(insn::stx(DW, FP, R0, slot));
        self.int(b)?;
        self.emit(insn::ldx(DW, R1, FP, slot));
        Ok(())
    }

    /// r0 = 1 if the strings are equal (up to their first NUL), else 0.
    fn str_eq(&mut self, a: &Expr, b: &Expr, pos: Pos) -> Result<()> {
        let (a, b) = if matches!(a.kind, ExprKind::Str(_)) { (b, a) } else { (a, b) };
        let Ty::Str(na) = self.ty(a)? else { unreachable!("checked by the caller") };
        let pa = self.alloc(na, pos)?;
        self.str_into(a, pa, align8(na))?;
        let differ = self.label();
        let end = self.label();
        if let ExprKind::Str(lit) = &b.kind {
            // Compare the literal and its NUL, as far as the other string can reach.
            let mut bytes = lit.as_bytes().to_vec();
            bytes.push(0);
            bytes.truncate(align8(na));
            let mut i = 0;
            while i < bytes.len() {
                let rest = bytes.len() - i;
                let (sz, n) = if rest >= 4 {
                    (W, 4)
                } else if rest >= 2 {
                    (H, 2)
                } else {
                    (B, 1)
                };
                let mut v = [0u8; 4];
                v[..n].copy_from_slice(&bytes[i..i + n]);
                self.emit(insn::ldx(sz, R1, FP, pa + i as i16));
                self.jump_imm(insn::JNE, R1, u32::from_le_bytes(v) as i64, differ);
                i += n;
            }
        } else {
            let Ty::Str(nb) = self.ty(b)? else { unreachable!("checked by the caller") };
            let pb = self.alloc(nb, pos)?;
            self.str_into(b, pb, align8(nb))?;
            let equal = self.label();
            for i in 0..na.min(nb) as i16 {
                self.emit(insn::ldx(B, R1, FP, pa + i));
                self.emit(insn::ldx(B, R2, FP, pb + i));
                self.jump(insn::jmp(insn::JNE, R1, R2, 0), differ);
                self.jump(insn::jmp_imm(insn::JEQ, R1, 0, 0), equal);
            }
            self.bind(equal);
        }
        self.emit(insn::mov_imm(R0, 1));
        self.jump(insn::ja(0), end);
        self.bind(differ);
        self.emit(insn::mov_imm(R0, 0));
        self.bind(end);
        Ok(())
    }

    /// Integers whose code uses only r0 (no helper call, no stack).
    fn int_simple(&mut self, e: &Expr) -> Result<()> {
        self.int(e)
    }

    /// r0 = the integer value of `e` (r1-r5 clobbered).
    fn int(&mut self, e: &Expr) -> Result<()> {
        let ty = self.ty(e)?;
        match &e.kind {
            ExprKind::Int(v) => self.mov_imm64(R0, *v),
            ExprKind::Builtin(b) => self.builtin(b, e.pos)?,
            ExprKind::Var(v) => {
                let (t, slot) = self.vars[v].clone();
                if !t.is_int() {
                    return Err(Error::semantic(
                        e.pos,
                        format!("`${v}` is a {}, not an integer", t.name()),
                    ));
                }
                self.emit(insn::ldx(DW, R0, FP, slot));
            }
            ExprKind::Map { name, keys } => self.map_int(name, keys, e.pos)?,
            ExprKind::Field(base, name) => match &base.kind {
                ExprKind::Builtin(b) if b == "args" => self.field_int(name, None, e.pos)?,
                _ => {
                    let bt = self.ty(base)?;
                    let tmp = self.alloc(bt.size(), e.pos)?;
                    self.value_into(base, &bt, tmp)?;
                    let Ty::Tuple(items) = &bt else { unreachable!("typing checked it") };
                    let i: usize = name.parse().unwrap_or(0);
                    let at: usize = items.iter().take(i).map(Ty::size).sum();
                    self.emit(insn::ldx(DW, R0, FP, tmp + at as i16));
                }
            },
            ExprKind::Index(base, idx) => {
                let ExprKind::Field(_, name) = &base.kind else {
                    unreachable!("typing checked it")
                };
                let ExprKind::Int(i) = idx.kind else {
                    return Err(Error::semantic(idx.pos, "an array index must be a number"));
                };
                self.field_int(name, Some(i), e.pos)?;
            }
            ExprKind::Unary(op, a) => {
                self.int(a)?;
                match op {
                    UnOp::Neg => self.emit(insn::neg(R0)),
                    UnOp::BitNot => self.emit(insn::alu_imm(insn::XOR, R0, -1)),
                    UnOp::Not => {
                        self.emit(insn::mov(R1, R0));
                        self.emit(insn::mov_imm(R0, 1));
                        self.emit(insn::jmp_imm(insn::JEQ, R1, 0, 1));
                        self.emit(insn::mov_imm(R0, 0));
                    }
                }
            }
            ExprKind::Binary(op, a, b) => {
                if op.is_comparison() || matches!(op, BinOp::LAnd | BinOp::LOr) {
                    let (no, end) = (self.label(), self.label());
                    self.cond_false(e, no)?;
                    self.emit(insn::mov_imm(R0, 1));
                    self.jump(insn::ja(0), end);
                    self.bind(no);
                    self.emit(insn::mov_imm(R0, 0));
                    self.bind(end);
                } else {
                    self.arith(*op, a, b, ty.is_signed(), e.pos)?;
                }
            }
            ExprKind::Ternary(c, a, b) => {
                let (no, end) = (self.label(), self.label());
                self.cond_false(c, no)?;
                self.int(a)?;
                self.jump(insn::ja(0), end);
                self.bind(no);
                self.int(b)?;
                self.bind(end);
            }
            ExprKind::Cast(t, a) => {
                self.int(a)?;
                let bits = match t.trim_start_matches('u') {
                    "int8" => 8,
                    "int16" => 16,
                    "int32" => 32,
                    _ => 64,
                };
                if bits < 64 {
                    self.emit(insn::alu_imm(insn::LSH, R0, 64 - bits));
                    let shr = if t.starts_with('u') { insn::RSH } else { insn::ARSH };
                    self.emit(insn::alu_imm(shr, R0, 64 - bits));
                }
            }
            ExprKind::Call(f, args) => match f.as_str() {
                "ksym" | "usym" if args.len() == 1 => self.int(&args[0])?,
                "kaddr" => {
                    let Some(Expr { kind: ExprKind::Str(name), .. }) = args.first() else {
                        return Err(Error::semantic(e.pos, "kaddr() takes a symbol name"));
                    };
                    let text = std::fs::read_to_string("/proc/kallsyms").unwrap_or_default();
                    let addr = kallsyms_address(&text, name).ok_or_else(|| {
                        Error::semantic(
                            e.pos,
                            format!(
                                "kaddr(\"{name}\"): no such kernel symbol with an address in \
                                 /proc/kallsyms (addresses read as 0 without root or with \
                                 kernel.kptr_restrict=2)"
                            ),
                        )
                    })?;
                    self.mov_imm64(R0, addr as i64);
                }
                _ => {
                    return Err(Error::semantic(
                        e.pos,
                        format!("{f}() is a {}, not an integer", ty.name()),
                    ))
                }
            },
            ExprKind::Str(_) | ExprKind::Tuple(_) => {
                return Err(Error::semantic(e.pos, format!("a {} is not an integer", ty.name())))
            }
        }
        if !ty.is_int() && !matches!(ty, Ty::Ksym | Ty::Usym) {
            return Err(Error::semantic(e.pos, format!("a {} is not an integer", ty.name())));
        }
        Ok(())
    }

    /// r0 = the value of `@name[keys]` (an average's sum over its count), 0 when absent.
    fn map_int(&mut self, name: &str, keys: &[Expr], pos: Pos) -> Result<()> {
        let m = self.g.user_map(name, pos)?.clone();
        let key = self.key(&m, keys, pos)?;
        let end = self.label();
        self.ld_map(R1, m.map as u32);
        self.addr(R2, key);
        self.emit(insn::call(helper::MAP_LOOKUP_ELEM));
        self.jump(insn::jmp_imm(insn::JEQ, R0, 0, 0), end);
        match m.value {
            MapValue::Agg(Agg::Avg) => {
                self.emit(insn::ldx(DW, R1, R0, 0));
                self.emit(insn::ldx(DW, R2, R0, 8));
                self.emit(insn::alu(insn::DIV, R1, R2));
                self.emit(insn::mov(R0, R1));
            }
            _ => self.emit(insn::ldx(DW, R0, R0, 0)),
        }
        self.bind(end);
        Ok(())
    }

    fn arith(&mut self, op: BinOp, a: &Expr, b: &Expr, signed: bool, pos: Pos) -> Result<()> {
        let code = match op {
            BinOp::Add => insn::ADD,
            BinOp::Sub => insn::SUB,
            BinOp::Mul => insn::MUL,
            BinOp::Div => insn::DIV,
            BinOp::Mod => insn::MOD,
            BinOp::And => insn::AND,
            BinOp::Or => insn::OR,
            BinOp::Xor => insn::XOR,
            BinOp::Shl => insn::LSH,
            BinOp::Shr => insn::RSH,
            _ => unreachable!("comparisons are handled by the caller"),
        };
        let divides = matches!(op, BinOp::Div | BinOp::Mod);
        if let (ExprKind::Int(v), false) = (&b.kind, divides && signed) {
            if let (Ok(v), true) = (i32::try_from(*v), !divides || *v != 0) {
                self.int(a)?;
                self.emit(insn::alu_imm(code, R0, v));
                return Ok(());
            }
        }
        self.operands(a, b, pos)?;
        if divides {
            // Division by zero gives 0 in BPF; keep that (bpftrace does the same).
            if signed {
                self.emit(insn::alu_signed(code, R1, R0));
            } else {
                self.emit(insn::alu(code, R1, R0));
            }
        } else {
            self.emit(insn::alu(code, R1, R0));
        }
        self.emit(insn::mov(R0, R1));
        Ok(())
    }

    /// r0 = an integer field of the tracepoint's record (or its raw argument).
    fn field_int(&mut self, name: &str, index: Option<i64>, pos: Pos) -> Result<()> {
        let acc = self.typer().field(name, pos)?;
        if self.raw {
            let Kind::Tracepoint { raw_args: Some(raw), .. } = &self.attach.kind else {
                unreachable!("raw tracepoints have raw arguments")
            };
            let i = raw.iter().position(|a| a.name == name).expect("raw_possible checked it");
            self.emit(insn::ldx(DW, R0, R6, 8 * i as i16));
            if let FieldAccess::Int { size, signed, .. } = acc {
                self.extend(size, signed);
            }
            return Ok(());
        }
        let (offset, size, signed) = match (acc, index) {
            (FieldAccess::Int { offset, size, signed }, None) => (offset, size, signed),
            (FieldAccess::Array { offset, elem, len, signed }, Some(i)) => {
                if i < 0 || i as usize >= len {
                    return Err(Error::semantic(pos, format!("`{name}` has {len} elements")));
                }
                (offset + elem * i as usize, elem.min(8), signed)
            }
            (FieldAccess::DataLocStr { .. } | FieldAccess::Chars { .. }, _) => {
                return Err(Error::semantic(
                    pos,
                    format!("`{name}` is a string; use it as one (str(), printf's %s)"),
                ))
            }
            _ => return Err(Error::semantic(pos, format!("`{name}` is not read that way"))),
        };
        let sz = match size {
            1 => B,
            2 => H,
            4 => W,
            _ => DW,
        };
        self.emit(insn::ldx(sz, R0, R6, offset as i16));
        self.extend(size, signed);
        Ok(())
    }

    /// Sign-extend r0's low `size` bytes.
    fn extend(&mut self, size: usize, signed: bool) {
        if signed && size < 8 {
            let bits = 64 - 8 * size as i32;
            self.emit(insn::alu_imm(insn::LSH, R0, bits));
            self.emit(insn::alu_imm(insn::ARSH, R0, bits));
        } else if !signed && size < 8 && self.raw {
            let bits = 64 - 8 * size as i32;
            self.emit(insn::alu_imm(insn::LSH, R0, bits));
            self.emit(insn::alu_imm(insn::RSH, R0, bits));
        }
    }

    fn builtin(&mut self, b: &str, pos: Pos) -> Result<()> {
        match b {
            "pid" | "tid" => {
                self.emit(insn::call(helper::GET_CURRENT_PID_TGID));
                if b == "pid" {
                    self.emit(insn::alu_imm(insn::RSH, R0, 32));
                } else {
                    self.emit(insn::alu_imm(insn::LSH, R0, 32));
                    self.emit(insn::alu_imm(insn::RSH, R0, 32));
                }
            }
            "uid" | "gid" => {
                self.emit(insn::call(helper::GET_CURRENT_UID_GID));
                if b == "gid" {
                    self.emit(insn::alu_imm(insn::RSH, R0, 32));
                } else {
                    self.emit(insn::alu_imm(insn::LSH, R0, 32));
                    self.emit(insn::alu_imm(insn::RSH, R0, 32));
                }
            }
            "nsecs" => self.emit(insn::call(helper::KTIME_GET_NS)),
            "elapsed" => {
                self.emit(insn::call(helper::KTIME_GET_NS));
                self.relocs.push((self.insns.len(), Reloc::StartNs));
                self.emit2(insn::ld_imm64(R1, 0));
                self.emit(insn::alu(insn::SUB, R0, R1));
            }
            "cpu" => self.emit(insn::call(helper::GET_SMP_PROCESSOR_ID)),
            "cgroup" => self.emit(insn::call(helper::GET_CURRENT_CGROUP_ID)),
            "curtask" => self.emit(insn::call(helper::GET_CURRENT_TASK)),
            "retval" => {
                return Err(Error::semantic(
                    pos,
                    format!("`retval` needs a uretprobe, not {}", self.attach.name),
                ))
            }
            "func" => match self.attach.kind {
                // The interrupted instruction: pt_regs->ip of the perf event's context.
                Kind::Profile { .. } => self.emit(insn::ldx(DW, R0, R6, 128)),
                _ => return Err(Error::semantic(pos, "`func` needs a uprobe or profile probe")),
            },
            a if a.starts_with("arg") => {
                let i: i16 = a[3..]
                    .parse()
                    .map_err(|_| Error::semantic(pos, format!("unknown builtin `{a}`")))?;
                match &self.attach.kind {
                    Kind::RawTracepoint { args, .. } => {
                        if i as usize >= args.len() {
                            return Err(Error::semantic(
                                pos,
                                format!("{} has {} arguments", self.attach.name, args.len()),
                            ));
                        }
                        self.emit(insn::ldx(DW, R0, R6, 8 * i));
                    }
                    _ => {
                        return Err(Error::semantic(
                            pos,
                            format!("`{a}` is not available in {}", self.attach.name),
                        ))
                    }
                }
            }
            other => {
                let t = crate::typing::builtin_ty(other, pos, self.attach)?;
                return Err(Error::semantic(
                    pos,
                    format!("`{other}` is a {}, not an integer", t.name()),
                ));
            }
        }
        Ok(())
    }
}

/// `target op value` as an expression (for `+=` and `++`).
fn compound(target: &Expr, op: BinOp, value: &Expr) -> Expr {
    Expr {
        kind: ExprKind::Binary(op, Box::new(target.clone()), Box::new(value.clone())),
        pos: target.pos,
    }
}

/// Expressions whose code leaves r1 alone (no helper call): constants, variables, fields.
fn simple(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Int(_) | ExprKind::Var(_) => true,
        ExprKind::Field(b, _) => matches!(&b.kind, ExprKind::Builtin(x) if x == "args"),
        ExprKind::Index(b, _) => simple(b),
        _ => false,
    }
}

fn negate(op: BinOp) -> BinOp {
    match op {
        BinOp::Eq => BinOp::Ne,
        BinOp::Ne => BinOp::Eq,
        BinOp::Lt => BinOp::Ge,
        BinOp::Le => BinOp::Gt,
        BinOp::Gt => BinOp::Le,
        BinOp::Ge => BinOp::Lt,
        other => other,
    }
}

fn jump_op(op: BinOp, signed: bool) -> u8 {
    match (op, signed) {
        (BinOp::Eq, _) => insn::JEQ,
        (BinOp::Ne, _) => insn::JNE,
        (BinOp::Lt, true) => insn::JSLT,
        (BinOp::Lt, false) => insn::JLT,
        (BinOp::Le, true) => insn::JSLE,
        (BinOp::Le, false) => insn::JLE,
        (BinOp::Gt, true) => insn::JSGT,
        (BinOp::Gt, false) => insn::JGT,
        (BinOp::Ge, true) => insn::JSGE,
        (_, _) => insn::JGE,
    }
}

/// `$name = value` assignments in order (the first gives the variable its type).
fn collect_vars(body: &[Stmt], out: &mut Vec<(String, Expr, Pos)>) {
    for s in body {
        match &s.kind {
            StmtKind::Assign { target: Expr { kind: ExprKind::Var(v), .. }, value, op: None } => {
                out.push((v.clone(), value.clone(), s.pos));
            }
            StmtKind::If { then, els, .. } => {
                collect_vars(then, out);
                collect_vars(els, out);
            }
            StmtKind::Unroll(_, b) => collect_vars(b, out),
            _ => {}
        }
    }
}
