//! Running a compiled program: maps created, programs loaded (the verifier's refusal
//! explained with the program's line), attached, BEGIN run, messages read from the per-CPU
//! rings as they come (printf, exit, print, time), and at the end END run and the maps
//! printed. Every kernel object is held by a file descriptor of this process and nothing
//! is pinned, so whatever way tp ends (SIGKILL included) the kernel detaches and frees them.

use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

use tp_perf::events::{Class, Event, Modifiers};
use tp_perf::{Counter, CounterOptions, Ring, Sampling, Target};

use crate::codegen::{Async, Compiled, Reloc};
use crate::error::{Error, Result};
use crate::insn::Insn;
use crate::output::{self, Element, Names};
use crate::probes::Kind;
use crate::sys::{self, Loaded};
use crate::types::*;

const PROG_TRACEPOINT: u32 = 5;
const PROG_PERF_EVENT: u32 = 7;
const PROG_RAW_TRACEPOINT: u32 = 17;

const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_TYPE_TRACEPOINT: u32 = 2;
const SW_CPU_CLOCK: u64 = 0;
const SW_BPF_OUTPUT: u64 = 10;
const PERF_SAMPLE_RAW: u64 = 1 << 10;

/// Where the compiled programs are in their life: loaded, not yet attached.
pub struct Session<'s> {
    pub compiled: Compiled,
    source: &'s str,
    maps: Vec<OwnedFd>,
    progs: Vec<OwnedFd>,
    cpus: usize,
    start_ns: u64,
    /// Links that keep programs attached: perf events and raw tracepoint fds.
    perf_links: Vec<Counter>,
    raw_links: Vec<OwnedFd>,
    rings: Vec<Ring>,
    outputs: Vec<Counter>,
    names: SymbolNames,
    pub lost: u64,
}

/// How the session prints.
#[derive(Debug, Clone, Copy, Default)]
pub struct Format {
    pub json: bool,
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn encode(insns: &[Insn]) -> Vec<u8> {
    insns.iter().flat_map(|i| i.encode()).collect()
}

/// The verifier's reason (the lines after the last instruction it printed) and the index of
/// that instruction.
pub fn explain_log(log: &str) -> (Option<usize>, String) {
    let lines: Vec<&str> = log.lines().collect();
    let mut last_insn = None;
    let mut after = 0;
    for (i, l) in lines.iter().enumerate() {
        if let Some((n, rest)) = l.split_once(": (") {
            if let Ok(n) = n.trim().parse::<usize>() {
                if rest.len() > 2 {
                    last_insn = Some(n);
                    after = i + 1;
                }
            }
        }
    }
    let reason: Vec<&str> = lines[after.min(lines.len())..]
        .iter()
        .copied()
        .filter(|l| {
            !l.is_empty() && !l.starts_with("processed ") && !l.starts_with("verification time")
        })
        .collect();
    let reason = if reason.is_empty() {
        lines.last().copied().unwrap_or("").to_string()
    } else {
        reason.join("; ")
    };
    (last_insn, reason)
}

impl<'s> Session<'s> {
    /// Create the maps and load every program (nothing is attached yet).
    pub fn load(compiled: Compiled, source: &'s str) -> Result<Session<'s>> {
        let cpus = sys::possible_cpus()?;
        let mut maps = Vec::new();
        for m in &compiled.maps {
            let entries =
                if m.kind == MapKind::PerfEventArray { cpus as u32 } else { m.max_entries };
            maps.push(sys::map_create(m.kind as u32, m.key_size, m.value_size, entries, &m.name)?);
        }
        let start_ns = monotonic_ns();
        let mut progs = Vec::new();
        for p in &compiled.programs {
            let mut insns = p.insns.clone();
            for &(at, r) in &p.relocs {
                match r {
                    Reloc::Map(i) => {
                        use std::os::fd::AsRawFd;
                        insns[at].imm = maps[i as usize].as_raw_fd();
                    }
                    Reloc::StartNs => {
                        insns[at].imm = start_ns as u32 as i32;
                        insns[at + 1].imm = (start_ns >> 32) as u32 as i32;
                    }
                }
            }
            let kind = match &p.attach.kind {
                Kind::Tracepoint { .. } if !p.raw => PROG_TRACEPOINT,
                Kind::Tracepoint { .. } | Kind::RawTracepoint { .. } | Kind::Begin | Kind::End => {
                    PROG_RAW_TRACEPOINT
                }
                Kind::Profile { .. } | Kind::Interval { .. } | Kind::Software { .. } => {
                    PROG_PERF_EVENT
                }
            };
            match sys::prog_load(kind, &encode(&insns), "tp_trace", 0)? {
                Loaded::Ok(fd) => progs.push(fd),
                Loaded::Refused { errno, log } => {
                    let (at, reason) = explain_log(&log);
                    let line = at.and_then(|i| p.lines.get(i)).copied();
                    let source_line = line
                        .and_then(|l| source.lines().nth(l.saturating_sub(1) as usize))
                        .map(str::to_string);
                    let reason = if reason.is_empty() {
                        std::io::Error::from_raw_os_error(errno).to_string()
                    } else {
                        reason
                    };
                    return Err(Error::Verifier {
                        probe: p.attach.name.clone(),
                        pos: line.map(|l| crate::ast::Pos { line: l, col: 1 }),
                        source_line,
                        reason,
                        log,
                    });
                }
            }
        }
        let names =
            SymbolNames { probes: compiled.probe_names.clone(), kallsyms: None, stacks: None };
        Ok(Session {
            compiled,
            source,
            maps,
            progs,
            cpus,
            start_ns,
            perf_links: Vec::new(),
            raw_links: Vec::new(),
            rings: Vec::new(),
            outputs: Vec::new(),
            names,
            lost: 0,
        })
    }

    /// The program's text (for messages).
    pub fn source(&self) -> &str {
        self.source
    }

    /// Open the per-CPU rings printf and the other messages arrive through.
    fn open_outputs(&mut self) -> Result<()> {
        let Some(pm) = self.compiled.perf_map else { return Ok(()) };
        let ev = Event {
            name: "bpf-output".into(),
            class: Class::Software,
            type_: PERF_TYPE_SOFTWARE,
            config: SW_BPF_OUTPUT,
            bp: None,
            modifiers: Modifiers::default(),
        };
        let o = CounterOptions { sampling: Some(sampling(1)), ..Default::default() };
        for cpu in tp_perf::counter::online_cpus().map_err(perf_err)? {
            let c = Counter::open(&ev, Target::Cpu(cpu), &o, None).map_err(perf_err)?;
            let ring = Ring::map(&c, 64).map_err(perf_err)?;
            use std::os::fd::AsRawFd;
            let fd = c.as_fd().as_raw_fd() as u32;
            sys::map_update(self.maps[pm].as_fd(), &cpu.to_ne_bytes(), &fd.to_ne_bytes())?;
            c.enable().map_err(perf_err)?;
            self.rings.push(ring);
            self.outputs.push(c);
        }
        Ok(())
    }

    /// Attach every program but BEGIN and END. Returns how many probes bpftrace would say it
    /// attached (BEGIN and END included).
    pub fn attach(&mut self) -> Result<usize> {
        self.open_outputs()?;
        let online = tp_perf::counter::online_cpus().map_err(perf_err)?;
        for (p, prog) in self.compiled.programs.iter().zip(&self.progs) {
            let timer = |period: u64| {
                Event {
                    name: p.attach.name.clone(),
                    class: Class::Software,
                    type_: PERF_TYPE_SOFTWARE,
                    config: SW_CPU_CLOCK,
                    bp: None,
                    modifiers: Modifiers::default(),
                }
                .with_period(period)
            };
            match &p.attach.kind {
                Kind::Begin | Kind::End => {}
                Kind::Tracepoint { format, .. } if !p.raw => {
                    let ev = Event {
                        name: p.attach.name.clone(),
                        class: Class::Tracepoint,
                        type_: PERF_TYPE_TRACEPOINT,
                        config: format.id as u64,
                        bp: None,
                        modifiers: Modifiers::default(),
                    };
                    // One perf event carries the program for every CPU (the program hangs
                    // on the tracepoint, not on the event's CPU).
                    let o = CounterOptions { sampling: Some(sampling(1)), ..Default::default() };
                    let c =
                        Counter::open(&ev, Target::Cpu(online[0]), &o, None).map_err(perf_err)?;
                    c.set_bpf(prog.as_fd()).map_err(perf_err)?;
                    c.enable().map_err(perf_err)?;
                    self.perf_links.push(c);
                }
                Kind::Tracepoint { format, .. } => {
                    self.raw_links.push(sys::raw_tracepoint_open(&format.name, prog.as_fd())?);
                }
                Kind::RawTracepoint { name, .. } => {
                    self.raw_links.push(sys::raw_tracepoint_open(name, prog.as_fd())?);
                }
                Kind::Profile { period_ns } | Kind::Interval { period_ns } => {
                    let (ev, o) = timer(*period_ns);
                    let cpus: &[u32] = if matches!(p.attach.kind, Kind::Profile { .. }) {
                        &online
                    } else {
                        &online[..1]
                    };
                    for &cpu in cpus {
                        let c = Counter::open(&ev, Target::Cpu(cpu), &o, None).map_err(perf_err)?;
                        c.set_bpf(prog.as_fd()).map_err(perf_err)?;
                        c.enable().map_err(perf_err)?;
                        self.perf_links.push(c);
                    }
                }
                Kind::Software { config, period } => {
                    let ev = Event {
                        name: p.attach.name.clone(),
                        class: Class::Software,
                        type_: PERF_TYPE_SOFTWARE,
                        config: *config,
                        bp: None,
                        modifiers: Modifiers::default(),
                    };
                    let o =
                        CounterOptions { sampling: Some(sampling(*period)), ..Default::default() };
                    for &cpu in &online {
                        let c = Counter::open(&ev, Target::Cpu(cpu), &o, None).map_err(perf_err)?;
                        c.set_bpf(prog.as_fd()).map_err(perf_err)?;
                        c.enable().map_err(perf_err)?;
                        self.perf_links.push(c);
                    }
                }
            }
        }
        Ok(self.compiled.programs.len())
    }

    /// Run the BEGIN (or END) programs once, here.
    pub fn run_special(&self, end: bool) -> Result<()> {
        for (p, prog) in self.compiled.programs.iter().zip(&self.progs) {
            let want = if end {
                matches!(p.attach.kind, Kind::End)
            } else {
                matches!(p.attach.kind, Kind::Begin)
            };
            if want {
                sys::test_run(prog.as_fd(), &[0u8; 8])?;
            }
        }
        Ok(())
    }

    /// Detach every program (BEGIN/END stay loaded to be run).
    pub fn detach(&mut self) {
        self.perf_links.clear();
        self.raw_links.clear();
    }

    /// The rings' fds, to poll.
    pub fn ring_fds(&self) -> Vec<i32> {
        use std::os::fd::AsRawFd;
        self.outputs.iter().map(|c| c.as_fd().as_raw_fd()).collect()
    }

    /// Read every message waiting; handle each. Returns true when one was `exit()`.
    pub fn drain(&mut self, out: &mut dyn Write, f: Format) -> Result<bool> {
        let mut records = Vec::new();
        for r in &mut self.rings {
            r.read(|rec| {
                let ty = u32::from_le_bytes(rec[0..4].try_into().expect("header"));
                match ty {
                    9 if rec.len() >= 12 => {
                        let size =
                            u32::from_le_bytes(rec[8..12].try_into().expect("size")) as usize;
                        records.push(rec[12..(12 + size).min(rec.len())].to_vec());
                    }
                    2 if rec.len() >= 24 => {
                        records.push(Vec::new());
                        let lost = u64::from_le_bytes(rec[16..24].try_into().expect("lost"));
                        records.last_mut().expect("pushed").extend_from_slice(&lost.to_le_bytes());
                        records.last_mut().expect("pushed").insert(0, 0xff);
                    }
                    _ => {}
                }
            });
        }
        let mut exit = false;
        for rec in records {
            if rec.len() == 9 && rec[0] == 0xff {
                self.lost += u64::from_le_bytes(rec[1..9].try_into().expect("lost"));
                continue;
            }
            if rec.len() < 8 || exit {
                continue;
            }
            let id = u64::from_le_bytes(rec[0..8].try_into().expect("id"));
            match Async::from_id(id) {
                Some(Async::Printf(i)) => self.print_printf(i as usize, &rec[8..], out, f)?,
                Some(Async::Exit) => exit = true,
                Some(Async::Print(i)) => self.print_map(i as usize, out, f)?,
                Some(Async::Clear(i)) => self.clear_map(i as usize, false)?,
                Some(Async::Zero(i)) => self.clear_map(i as usize, true)?,
                Some(Async::Time(i)) => {
                    let text = strftime(&self.compiled.time_formats[i as usize]);
                    if f.json {
                        writeln!(
                            out,
                            "{{\"type\": \"time\", \"data\": {}}}",
                            tp_format::render::json_string(&text)
                        )
                        .map_err(io_err)?;
                    } else {
                        write!(out, "{text}").map_err(io_err)?;
                    }
                }
                None => {}
            }
        }
        out.flush().map_err(io_err)?;
        Ok(exit)
    }

    fn print_printf(&self, i: usize, data: &[u8], out: &mut dyn Write, f: Format) -> Result<()> {
        let p = &self.compiled.printfs[i];
        let pieces = crate::printf::pieces(&p.format).map_err(Error::Machine)?;
        let mut args = Vec::new();
        let mut at = 0;
        for t in &p.args {
            let b = data.get(at..).unwrap_or(&[]);
            args.push(match t {
                Ty::Int { .. } => crate::printf::Arg::Int(
                    b.get(..8).map_or(0, |s| i64::from_le_bytes(s.try_into().expect("8"))),
                ),
                _ => crate::printf::Arg::Text(output::value_text(t, b, &self.names)),
            });
            at += t.size();
        }
        let text = crate::printf::format(&pieces, &args);
        if f.json {
            writeln!(
                out,
                "{{\"type\": \"printf\", \"data\": {}}}",
                tp_format::render::json_string(&text)
            )
            .map_err(io_err)?;
        } else {
            write!(out, "{text}").map_err(io_err)?;
        }
        Ok(())
    }

    /// A map's elements as read now.
    pub fn read_map(&self, um: &UserMap) -> Result<Vec<Element>> {
        let def = &self.compiled.maps[um.map];
        let fd = self.maps[um.map].as_fd();
        let per = align8(def.value_size as usize);
        let ncpu = if def.kind.is_percpu() { self.cpus } else { 1 };
        let mut value = vec![0u8; per * ncpu];
        let split = |v: &[u8]| {
            v.chunks(per).map(|c| c[..def.value_size as usize].to_vec()).collect::<Vec<_>>()
        };
        let mut out = Vec::new();
        if matches!(def.kind, MapKind::PercpuArray | MapKind::Array) {
            for i in 0..def.max_entries {
                if sys::map_lookup(fd, &i.to_ne_bytes(), &mut value)? {
                    out.push(Element { key: Vec::new(), values: split(&value) });
                }
            }
            return Ok(out);
        }
        each_element(fd, def.key_size as usize, &mut value, |k, v| {
            out.push(Element { key: k.to_vec(), values: split(v) })
        })?;
        if let Some(c) = um.cache {
            self.add_cached(c, &mut out)?;
        }
        Ok(out)
    }

    /// Add the counts waiting in a keyed count's cache slots (each CPU's slot holds its own
    /// key) to the elements read from its hash.
    fn add_cached(&self, cache: usize, elems: &mut Vec<Element>) -> Result<()> {
        let def = &self.compiled.maps[cache];
        let per = align8(def.value_size as usize);
        let ks = def.value_size as usize - 8;
        let mut value = vec![0u8; per * self.cpus];
        for i in 0..def.max_entries {
            if !sys::map_lookup(self.maps[cache].as_fd(), &i.to_ne_bytes(), &mut value)? {
                continue;
            }
            for (cpu, slot) in value.chunks(per).enumerate() {
                let n = u64::from_ne_bytes(slot[ks..ks + 8].try_into().expect("8 bytes"));
                if n == 0 {
                    continue;
                }
                let key = &slot[..ks];
                let at = match elems.iter().position(|e| e.key == key) {
                    Some(at) => at,
                    None => {
                        elems.push(Element {
                            key: key.to_vec(),
                            values: vec![vec![0; 8]; self.cpus],
                        });
                        elems.len() - 1
                    }
                };
                let v = &mut elems[at].values[cpu];
                let sum = u64::from_ne_bytes(v[..8].try_into().expect("8 bytes")) + n;
                v[..8].copy_from_slice(&sum.to_ne_bytes());
            }
        }
        Ok(())
    }

    fn clear_map(&self, i: usize, zero: bool) -> Result<()> {
        let um = &self.compiled.user_maps[i];
        let def = &self.compiled.maps[um.map];
        let fd = self.maps[um.map].as_fd();
        let ncpu = if def.kind.is_percpu() { self.cpus } else { 1 };
        let zeros = vec![0u8; align8(def.value_size as usize) * ncpu];
        if matches!(def.kind, MapKind::PercpuArray | MapKind::Array) {
            for k in 0..def.max_entries {
                sys::map_update(fd, &k.to_ne_bytes(), &zeros)?;
            }
            return Ok(());
        }
        // The cached counts first: zeroed, their keys stay, as the hash's do.
        let elems = self.read_map(um)?;
        if let Some(c) = um.cache {
            let cdef = &self.compiled.maps[c];
            let czeros = vec![0u8; align8(cdef.value_size as usize) * ncpu];
            for k in 0..cdef.max_entries {
                sys::map_update(self.maps[c].as_fd(), &k.to_ne_bytes(), &czeros)?;
            }
        }
        for e in elems {
            if zero {
                sys::map_update(fd, &e.key, &zeros)?;
            } else {
                sys::map_delete(fd, &e.key)?;
            }
        }
        Ok(())
    }

    /// One map as bpftrace prints it.
    pub fn print_map(&self, i: usize, out: &mut dyn Write, f: Format) -> Result<()> {
        let um = &self.compiled.user_maps[i];
        let elems = self.read_map(um)?;
        let text = if f.json {
            format!("{}\n", output::map_json(um, &elems, &self.names))
        } else {
            output::map_text(um, &elems, &self.names)
        };
        out.write_all(text.as_bytes()).map_err(io_err)
    }

    /// Every map, in name order, as bpftrace prints them at the end.
    pub fn print_all(&mut self, out: &mut dyn Write, f: Format) -> Result<()> {
        self.names.load_stacks(self.compiled.stack_map.map(|i| &self.maps[i]), self.cpus);
        let mut order: Vec<usize> = (0..self.compiled.user_maps.len()).collect();
        order.sort_by(|&a, &b| {
            self.compiled.user_maps[a].name.cmp(&self.compiled.user_maps[b].name)
        });
        for i in order {
            self.print_map(i, out, f)?;
        }
        out.flush().map_err(io_err)
    }

    /// When tracing started (CLOCK_MONOTONIC ns; `elapsed` counts from it).
    pub fn start_ns(&self) -> u64 {
        self.start_ns
    }
}

/// Every element of a hash map: its key and value bytes (`value` sized for one lookup).
fn each_element(
    fd: std::os::fd::BorrowedFd<'_>,
    key_size: usize,
    value: &mut [u8],
    mut f: impl FnMut(&[u8], &[u8]),
) -> Result<()> {
    let mut key: Option<Vec<u8>> = None;
    let mut next = vec![0u8; key_size];
    while sys::map_next_key(fd, key.as_deref(), &mut next)? {
        if sys::map_lookup(fd, &next, value)? {
            f(&next, value);
        }
        key = Some(next.clone());
    }
    Ok(())
}

/// Every BPF program loaded on the machine now, by id (to check that none of tp's outlives it).
pub fn loaded_program_ids() -> Result<Vec<u32>> {
    sys::prog_ids()
}

fn sampling(period: u64) -> Sampling {
    Sampling {
        sample_type: PERF_SAMPLE_RAW,
        period,
        freq: false,
        clockid: None,
        side_records: false,
        mmap_data: false,
        watermark: 0,
        stacks: Default::default(),
    }
}

trait WithPeriod {
    fn with_period(self, period: u64) -> (Event, CounterOptions);
}

impl WithPeriod for Event {
    fn with_period(self, period: u64) -> (Event, CounterOptions) {
        (self, CounterOptions { sampling: Some(sampling(period)), ..Default::default() })
    }
}

fn perf_err(e: tp_perf::Error) -> Error {
    Error::Machine(e.to_string())
}

fn io_err(e: std::io::Error) -> Error {
    Error::Sys { call: "write".into(), source: e, hint: None }
}

/// `strftime` of the local time now.
fn strftime(format: &str) -> String {
    let Ok(c) = std::ffi::CString::new(format) else { return String::new() };
    // SAFETY: time(NULL) has no preconditions; localtime_r fills `tm` from `now`; strftime
    // writes at most buf.len() bytes into `buf` and returns how many it wrote.
    unsafe {
        let now = libc::time(std::ptr::null_mut());
        let mut tm: libc::tm = std::mem::zeroed();
        libc::localtime_r(&now, &mut tm);
        let mut buf = vec![0u8; 512];
        let n = libc::strftime(buf.as_mut_ptr().cast(), buf.len(), c.as_ptr(), &tm);
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }
}

/// Names for printing: probes by id, kernel symbols from /proc/kallsyms, stacks from the
/// stack map (read once, at the end).
struct SymbolNames {
    probes: Vec<String>,
    kallsyms: Option<tp_format::symbols::Kallsyms>,
    stacks: Option<std::collections::HashMap<u32, Vec<u64>>>,
}

impl SymbolNames {
    fn load_stacks(&mut self, map: Option<&OwnedFd>, _cpus: usize) {
        let Some(map) = map else { return };
        let mut stacks = std::collections::HashMap::new();
        let mut value = vec![0u8; 8 * crate::codegen::STACK_DEPTH as usize];
        let _ = each_element(map.as_fd(), 4, &mut value, |k, v| {
            let ips: Vec<u64> = v
                .chunks(8)
                .map(|c| u64::from_le_bytes(c.try_into().expect("8")))
                .take_while(|&ip| ip != 0)
                .collect();
            stacks.insert(u32::from_ne_bytes(k[..4].try_into().expect("4")), ips);
        });
        self.stacks = Some(stacks);
        if self.kallsyms.is_none() {
            let text = std::fs::read_to_string("/proc/kallsyms").unwrap_or_default();
            self.kallsyms = Some(tp_format::symbols::Kallsyms::from_text(text));
        }
    }

    fn frames(&self, id: i64) -> Vec<u64> {
        self.stacks.as_ref().and_then(|s| s.get(&(id as u32))).cloned().unwrap_or_default()
    }
}

impl Names for SymbolNames {
    fn probe(&self, id: u64) -> String {
        self.probes.get(id as usize).cloned().unwrap_or_else(|| format!("probe#{id}"))
    }
    fn kstack(&self, id: i64) -> Vec<String> {
        self.frames(id).into_iter().map(|ip| self.ksym_off(ip)).collect()
    }
    fn ustack(&self, id: i64, _pid: u32) -> Vec<String> {
        self.frames(id).into_iter().map(|ip| format!("0x{ip:x}")).collect()
    }
    fn ksym(&self, addr: u64) -> String {
        match self.kallsyms.as_ref().and_then(|k| k.resolve(addr)) {
            Some(r) => r.name.to_string(),
            None => format!("0x{addr:x}"),
        }
    }
    fn usym(&self, addr: u64, _pid: u32) -> String {
        format!("0x{addr:x}")
    }
}

impl SymbolNames {
    fn ksym_off(&self, addr: u64) -> String {
        match self.kallsyms.as_ref().and_then(|k| k.resolve(addr)) {
            Some(r) => format!("{}+{}", r.name, r.offset),
            None => format!("0x{addr:x}"),
        }
    }
}

/// Run a loaded session to its end: attach, BEGIN, messages until `exit()`, a signal
/// (`stop` returns true) or the command's end, then detach, END and the maps.
pub fn run(
    mut s: Session<'_>,
    out: &mut dyn Write,
    f: Format,
    mut stop: impl FnMut() -> Result<bool>,
    mut attached: impl FnMut(usize) -> Result<()>,
) -> Result<()> {
    let n = s.attach()?;
    attached(n)?;
    s.run_special(false)?;
    let mut exited = s.drain(out, f)?;
    let fds = s.ring_fds();
    while !exited {
        if !fds.is_empty() {
            tp_tracefs::process::poll_readable(&fds, 100)
                .map_err(|e| Error::Machine(e.to_string()))?;
        } else {
            std::thread::sleep(Duration::from_millis(100));
        }
        exited = s.drain(out, f)?;
        if stop()? {
            break;
        }
    }
    s.detach();
    s.run_special(true)?;
    s.drain(out, f)?;
    let t = Instant::now();
    let _ = t;
    out.write_all(b"\n\n").map_err(io_err)?;
    s.print_all(out, f)?;
    Ok(())
}
