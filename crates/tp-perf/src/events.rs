//! Event names as perf spells them, parsed without I/O: software and hardware events,
//! cache events, breakpoints `mem:ADDR[/LEN][:rwx]`, tracepoints `sys:name` and globs,
//! modifiers `:u`/`:k`. [`resolve`] then turns tracepoint globs into tracepoint ids (through
//! tracefs) and `mem:SYMBOL` into an address (through the program's ELF symbol table).

use std::path::Path;

use perf_event_open_sys::bindings as b;

use crate::error::{Error, Result};

/// Which kind of PMU an event needs; what `tp list` prints beside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Software,
    Hardware,
    HwCache,
    Breakpoint,
    Tracepoint,
}

impl Class {
    /// perf list's label.
    pub fn label(self) -> &'static str {
        match self {
            Class::Software => "Software event",
            Class::Hardware => "Hardware event",
            Class::HwCache => "Hardware cache event",
            Class::Breakpoint => "Hardware breakpoint",
            Class::Tracepoint => "Tracepoint event",
        }
    }
}

/// A symbolic event: its names (the first is perf's main spelling), type and config.
#[derive(Debug, Clone)]
pub struct Symbolic {
    pub names: Vec<&'static str>,
    pub class: Class,
    pub config: u64,
}

const SOFTWARE: &[(&[&str], u32)] = &[
    (&["cpu-clock"], b::PERF_COUNT_SW_CPU_CLOCK),
    (&["task-clock"], b::PERF_COUNT_SW_TASK_CLOCK),
    (&["page-faults", "faults"], b::PERF_COUNT_SW_PAGE_FAULTS),
    (&["context-switches", "cs"], b::PERF_COUNT_SW_CONTEXT_SWITCHES),
    (&["cpu-migrations", "migrations"], b::PERF_COUNT_SW_CPU_MIGRATIONS),
    (&["minor-faults"], b::PERF_COUNT_SW_PAGE_FAULTS_MIN),
    (&["major-faults"], b::PERF_COUNT_SW_PAGE_FAULTS_MAJ),
    (&["alignment-faults"], b::PERF_COUNT_SW_ALIGNMENT_FAULTS),
    (&["emulation-faults"], b::PERF_COUNT_SW_EMULATION_FAULTS),
    (&["dummy"], b::PERF_COUNT_SW_DUMMY),
    (&["bpf-output"], b::PERF_COUNT_SW_BPF_OUTPUT),
    (&["cgroup-switches"], b::PERF_COUNT_SW_CGROUP_SWITCHES),
];

const HARDWARE: &[(&[&str], u32)] = &[
    (&["cpu-cycles", "cycles"], b::PERF_COUNT_HW_CPU_CYCLES),
    (&["instructions"], b::PERF_COUNT_HW_INSTRUCTIONS),
    (&["cache-references"], b::PERF_COUNT_HW_CACHE_REFERENCES),
    (&["cache-misses"], b::PERF_COUNT_HW_CACHE_MISSES),
    (&["branch-instructions", "branches"], b::PERF_COUNT_HW_BRANCH_INSTRUCTIONS),
    (&["branch-misses"], b::PERF_COUNT_HW_BRANCH_MISSES),
    (&["bus-cycles"], b::PERF_COUNT_HW_BUS_CYCLES),
    (
        &["stalled-cycles-frontend", "idle-cycles-frontend"],
        b::PERF_COUNT_HW_STALLED_CYCLES_FRONTEND,
    ),
    (&["stalled-cycles-backend", "idle-cycles-backend"], b::PERF_COUNT_HW_STALLED_CYCLES_BACKEND),
    (&["ref-cycles"], b::PERF_COUNT_HW_REF_CPU_CYCLES),
];

/// Cache event names as perf spells them: `L1-dcache-loads`, `LLC-load-misses`, ...
/// config = cache id | op << 8 | result << 16.
const CACHES: &[(&str, u32)] = &[
    ("L1-dcache", b::PERF_COUNT_HW_CACHE_L1D),
    ("L1-icache", b::PERF_COUNT_HW_CACHE_L1I),
    ("LLC", b::PERF_COUNT_HW_CACHE_LL),
    ("dTLB", b::PERF_COUNT_HW_CACHE_DTLB),
    ("iTLB", b::PERF_COUNT_HW_CACHE_ITLB),
    ("branch", b::PERF_COUNT_HW_CACHE_BPU),
    ("node", b::PERF_COUNT_HW_CACHE_NODE),
];
const CACHE_OPS: &[(&str, &str, u32)] = &[
    ("loads", "load-misses", b::PERF_COUNT_HW_CACHE_OP_READ),
    ("stores", "store-misses", b::PERF_COUNT_HW_CACHE_OP_WRITE),
    ("prefetches", "prefetch-misses", b::PERF_COUNT_HW_CACHE_OP_PREFETCH),
];

/// Every symbolic event tp knows (software, hardware, cache), in `perf list` order.
pub fn symbolic_events() -> Vec<Symbolic> {
    let mut v = Vec::new();
    for (names, c) in HARDWARE {
        v.push(Symbolic { names: names.to_vec(), class: Class::Hardware, config: *c as u64 });
    }
    for (names, c) in SOFTWARE {
        v.push(Symbolic { names: names.to_vec(), class: Class::Software, config: *c as u64 });
    }
    for (cache, id) in CACHES {
        for (access, miss, op) in CACHE_OPS {
            for (suffix, result) in [
                (*access, b::PERF_COUNT_HW_CACHE_RESULT_ACCESS),
                (*miss, b::PERF_COUNT_HW_CACHE_RESULT_MISS),
            ] {
                let name: &'static str = Box::leak(format!("{cache}-{suffix}").into_boxed_str());
                let config = *id as u64 | (*op as u64) << 8 | (result as u64) << 16;
                v.push(Symbolic { names: vec![name], class: Class::HwCache, config });
            }
        }
    }
    v
}

fn lookup_symbolic(name: &str) -> Option<Symbolic> {
    symbolic_events().into_iter().find(|s| s.names.contains(&name))
}

/// `:u` (user space only) and `:k` (kernel only).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Modifiers {
    pub exclude_user: bool,
    pub exclude_kernel: bool,
}

/// A breakpoint's address: a number, or a symbol of the program to be resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BpAddr {
    Addr(u64),
    Symbol(String),
}

/// What a parsed name asks for, before tracefs and ELF lookups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// PERF_TYPE_SOFTWARE / HARDWARE / HW_CACHE and the config.
    Symbolic { class: Class, config: u64 },
    /// `mem:`: address, length (None: perf's default), access bits (HW_BREAKPOINT_R/W/X).
    Breakpoint { addr: BpAddr, len: Option<u64>, access: u32 },
    /// `sys:name`, `sys:*`, `sys` (a whole system), globs: resolved through tracefs.
    Tracepoint { glob: String },
}

/// One `-e` argument, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventSpec {
    /// As typed (what counts print).
    pub text: String,
    pub kind: Kind,
    pub modifiers: Modifiers,
}

fn parse_modifiers(text: &str, s: &str) -> Result<Modifiers> {
    let mut m = Modifiers::default();
    let (mut u, mut k) = (false, false);
    for c in s.chars() {
        match c {
            'u' => u = true,
            'k' => k = true,
            _ => {
                return Err(Error::UnknownEvent {
                    name: text.into(),
                    message: format!("unknown modifier {c:?} in {s:?} (tp knows :u and :k)"),
                    suggestions: vec![],
                })
            }
        }
    }
    // perf's rule: naming some privilege levels excludes the others.
    if u || k {
        m.exclude_user = !u;
        m.exclude_kernel = !k;
    }
    Ok(m)
}

fn parse_number(s: &str) -> Option<u64> {
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()
    } else {
        s.parse().ok()
    }
}

fn bad(text: &str, message: impl Into<String>) -> Error {
    Error::UnknownEvent { name: text.into(), message: message.into(), suggestions: vec![] }
}

fn parse_breakpoint(text: &str, rest: &str) -> Result<EventSpec> {
    let mut parts = rest.split(':');
    let target = parts.next().unwrap_or("");
    let (addr_s, len_s) = match target.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (target, None),
    };
    if addr_s.is_empty() {
        return Err(bad(text, "mem: needs an address or a symbol: mem:ADDR[/LEN][:rwx][:u|:k]"));
    }
    let addr = match parse_number(addr_s) {
        Some(a) => BpAddr::Addr(a),
        None if addr_s.starts_with(|c: char| c.is_ascii_digit()) => {
            return Err(bad(text, format!("{addr_s:?} is not a number")))
        }
        None => BpAddr::Symbol(addr_s.to_string()),
    };
    let len = match len_s {
        None => None,
        Some(l) => match parse_number(l) {
            Some(n @ (1 | 2 | 4 | 8)) => Some(n),
            _ => return Err(bad(text, format!("breakpoint length {l:?}: 1, 2, 4 or 8"))),
        },
    };
    let mut access = 0u32;
    let mut modifiers = Modifiers::default();
    let mut seen_mods = false;
    for seg in parts {
        if !seen_mods && access == 0 && !seg.is_empty() && seg.chars().all(|c| "rwx".contains(c)) {
            for c in seg.chars() {
                access |= match c {
                    'r' => b::HW_BREAKPOINT_R,
                    'w' => b::HW_BREAKPOINT_W,
                    _ => b::HW_BREAKPOINT_X,
                };
            }
        } else if !seen_mods {
            modifiers = parse_modifiers(text, seg)?;
            seen_mods = true;
        } else {
            return Err(bad(text, format!("unexpected {seg:?}: mem:ADDR[/LEN][:rwx][:u|:k]")));
        }
    }
    if access == 0 {
        access = b::HW_BREAKPOINT_R | b::HW_BREAKPOINT_W;
    }
    if access & b::HW_BREAKPOINT_X != 0 && access != b::HW_BREAKPOINT_X {
        return Err(bad(text, "an execute breakpoint (x) cannot also be r or w"));
    }
    Ok(EventSpec { text: text.into(), kind: Kind::Breakpoint { addr, len, access }, modifiers })
}

/// Parse one event name as perf spells it.
pub fn parse(text: &str) -> Result<EventSpec> {
    let t = text.trim();
    if t.is_empty() {
        return Err(bad(text, "empty event name"));
    }
    if let Some(rest) = t.strip_prefix("mem:") {
        return parse_breakpoint(t, rest);
    }
    let parts: Vec<&str> = t.split(':').collect();
    if let Some(s) = lookup_symbolic(parts[0]) {
        let modifiers = match parts.len() {
            1 => Modifiers::default(),
            2 => parse_modifiers(t, parts[1])?,
            _ => return Err(bad(t, "too many ':' (NAME[:u|:k])")),
        };
        return Ok(EventSpec {
            text: t.into(),
            kind: Kind::Symbolic { class: s.class, config: s.config },
            modifiers,
        });
    }
    // A tracepoint (or a glob of them): sys:name[:mods] or a system name / glob.
    let (glob, modifiers) = match parts.len() {
        1 => (parts[0].to_string(), Modifiers::default()),
        2 => (format!("{}:{}", parts[0], parts[1]), Modifiers::default()),
        3 => (format!("{}:{}", parts[0], parts[1]), parse_modifiers(t, parts[2])?),
        _ => return Err(bad(t, "too many ':' (SYS:NAME[:u|:k])")),
    };
    if glob.split(':').any(str::is_empty) {
        return Err(bad(t, "empty system or event name"));
    }
    Ok(EventSpec { text: t.into(), kind: Kind::Tracepoint { glob }, modifiers })
}

/// A fully resolved event, ready for perf_event_open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// What counts print: the name as typed, or `sys:name` for a tracepoint from a glob.
    pub name: String,
    pub class: Class,
    /// perf_event_attr.type and .config (for a tracepoint, its id in tracefs).
    pub type_: u32,
    pub config: u64,
    /// Breakpoint address, length, access (HW_BREAKPOINT_*).
    pub bp: Option<(u64, u64, u32)>,
    pub modifiers: Modifiers,
}

impl Event {
    /// A software page-fault event (`page-faults`, `minor-faults`, `major-faults`): the
    /// kernel gives its samples the faulting address (PERF_SAMPLE_ADDR).
    pub fn is_page_fault(&self) -> bool {
        self.type_ == b::PERF_TYPE_SOFTWARE
            && [
                b::PERF_COUNT_SW_PAGE_FAULTS,
                b::PERF_COUNT_SW_PAGE_FAULTS_MIN,
                b::PERF_COUNT_SW_PAGE_FAULTS_MAJ,
            ]
            .contains(&(self.config as u32))
    }

    /// A software/hardware/cache event needs no lookup.
    pub fn symbolic(name: &str) -> Result<Event> {
        let spec = parse(name)?;
        match spec.kind {
            Kind::Symbolic { .. } => Ok(resolve_one(&spec, &mut NoLookups)?.remove(0)),
            _ => Err(bad(name, "not a software, hardware or cache event")),
        }
    }

    /// True for hardware and cache events (a missing PMU means `<not supported>`).
    pub fn is_hardware(&self) -> bool {
        matches!(self.class, Class::Hardware | Class::HwCache)
    }
}

/// What [`resolve`] needs from the machine: tracepoints (tracefs) and symbols (ELF).
pub trait Lookups {
    /// Every tracepoint as (`sys:name`, id) matching `glob` (`sched`, `sched:*`, `*:*`).
    fn tracepoints(&mut self, glob: &str) -> Result<Vec<(String, u64)>>;
    /// All tracepoint names, for suggestions.
    fn tracepoint_names(&mut self) -> Vec<String>;
    /// A symbol's address and size in the program.
    fn symbol(&mut self, name: &str) -> Result<(u64, u64)>;
}

struct NoLookups;

impl Lookups for NoLookups {
    fn tracepoints(&mut self, glob: &str) -> Result<Vec<(String, u64)>> {
        Err(bad(glob, "tracepoints need tracefs"))
    }
    fn tracepoint_names(&mut self) -> Vec<String> {
        Vec::new()
    }
    fn symbol(&mut self, name: &str) -> Result<(u64, u64)> {
        Err(Error::Symbol { symbol: name.into(), message: "no program to look it up in".into() })
    }
}

/// The machine's lookups: tracefs for tracepoints, the program's ELF file for symbols.
pub struct MachineLookups<'a> {
    pub tracefs: Option<&'a tp_tracefs::Tracefs>,
    pub program: Option<&'a Path>,
    available: Option<Vec<tp_tracefs::EventId>>,
}

impl<'a> MachineLookups<'a> {
    pub fn new(tracefs: Option<&'a tp_tracefs::Tracefs>, program: Option<&'a Path>) -> Self {
        MachineLookups { tracefs, program, available: None }
    }

    fn available(&mut self) -> Result<&[tp_tracefs::EventId]> {
        if self.available.is_none() {
            let tfs = self.tracefs.ok_or_else(|| {
                bad("tracepoint", "tracepoints need tracefs (run as root; is it mounted?)")
            })?;
            let v = tfs.available_events().map_err(|e| bad("tracepoint", e.to_string()))?;
            self.available = Some(v);
        }
        Ok(self.available.as_deref().unwrap_or(&[]))
    }
}

impl Lookups for MachineLookups<'_> {
    fn tracepoints(&mut self, glob: &str) -> Result<Vec<(String, u64)>> {
        let tfs = self.tracefs;
        let matched: Vec<tp_tracefs::EventId> =
            tp_tracefs::match_glob(self.available()?, glob).into_iter().cloned().collect();
        let mut out = Vec::new();
        for ev in matched {
            let Some(tfs) = tfs else { break };
            let rel = format!("events/{}/{}/id", ev.system, ev.name);
            let id = tfs.read(&rel).map_err(|e| bad(&ev.to_string(), e.to_string()))?;
            let id = id
                .trim()
                .parse()
                .map_err(|_| bad(&ev.to_string(), format!("{rel}: not a number")))?;
            out.push((ev.to_string(), id));
        }
        Ok(out)
    }
    fn tracepoint_names(&mut self) -> Vec<String> {
        self.available().map(|v| v.iter().map(|e| e.to_string()).collect()).unwrap_or_default()
    }
    fn symbol(&mut self, name: &str) -> Result<(u64, u64)> {
        let prog = self.program.ok_or_else(|| Error::Symbol {
            symbol: name.into(),
            message: "a symbol needs a command (-- CMD) whose ELF file defines it".into(),
        })?;
        crate::elf::symbol(prog, name)
            .map_err(|message| Error::Symbol { symbol: name.into(), message })
    }
}

fn resolve_one(spec: &EventSpec, lk: &mut dyn Lookups) -> Result<Vec<Event>> {
    let one = |class, type_, config, bp| {
        vec![Event { name: spec.text.clone(), class, type_, config, bp, modifiers: spec.modifiers }]
    };
    Ok(match &spec.kind {
        Kind::Symbolic { class, config } => {
            let type_ = match class {
                Class::Software => b::PERF_TYPE_SOFTWARE,
                Class::Hardware => b::PERF_TYPE_HARDWARE,
                _ => b::PERF_TYPE_HW_CACHE,
            };
            one(*class, type_, *config, None)
        }
        Kind::Breakpoint { addr, len, access } => {
            let (a, sym_len) = match addr {
                BpAddr::Addr(a) => (*a, None),
                BpAddr::Symbol(s) => {
                    let (a, size) = lk.symbol(s)?;
                    (a, Some(size).filter(|s| matches!(s, 1 | 2 | 4 | 8)))
                }
            };
            // perf's default length: sizeof(long) for x, else 4; a symbol's own size if it
            // is one the debug registers take.
            let default = if *access == b::HW_BREAKPOINT_X { 8 } else { 4 };
            let l = len.or(sym_len).unwrap_or(default);
            if a % l != 0 {
                return Err(bad(
                    &spec.text,
                    format!("address {a:#x} is not aligned to its length {l}"),
                ));
            }
            one(Class::Breakpoint, b::PERF_TYPE_BREAKPOINT, 0, Some((a, l, *access)))
        }
        Kind::Tracepoint { glob } => {
            let found = lk.tracepoints(glob)?;
            if found.is_empty() {
                let mut names: Vec<String> = symbolic_events()
                    .iter()
                    .flat_map(|s| s.names.iter().map(|n| n.to_string()))
                    .collect();
                names.extend(lk.tracepoint_names());
                return Err(Error::UnknownEvent {
                    name: spec.text.clone(),
                    message: "no such event".into(),
                    suggestions: suggest(&spec.text, &names),
                });
            }
            let single = found.len() == 1 && !glob.contains(['*', '?', '[']) && glob.contains(':');
            found
                .into_iter()
                .map(|(name, id)| Event {
                    name: if single { spec.text.clone() } else { name },
                    class: Class::Tracepoint,
                    type_: b::PERF_TYPE_TRACEPOINT,
                    config: id,
                    bp: None,
                    modifiers: spec.modifiers,
                })
                .collect()
        }
    })
}

/// Resolve parsed names into events: globs expanded, symbols looked up.
pub fn resolve(specs: &[EventSpec], lk: &mut dyn Lookups) -> Result<Vec<Event>> {
    let mut out = Vec::new();
    for s in specs {
        out.extend(resolve_one(s, lk)?);
    }
    Ok(out)
}

/// The names nearest to `name` (edit distance), at most three.
pub fn suggest(name: &str, candidates: &[String]) -> Vec<String> {
    let name_l = name.to_ascii_lowercase();
    let bare = name_l.split(':').next_back().unwrap_or(&name_l).to_string();
    let limit = (name.len() / 3).clamp(2, 4);
    let mut scored: Vec<(usize, &String)> = candidates
        .iter()
        .map(|c| {
            let cl = c.to_ascii_lowercase();
            let whole = distance(&name_l, &cl);
            // `sys_enter_getpid` should find `syscalls:sys_enter_getpid`.
            let tail = cl.split_once(':').map(|(_, n)| distance(&bare, n)).unwrap_or(usize::MAX);
            (whole.min(tail), c)
        })
        .filter(|(d, _)| *d <= limit)
        .collect();
    scored.sort();
    scored.dedup_by(|a, b| a.1 == b.1);
    scored.into_iter().take(3).map(|(_, c)| c.clone()).collect()
}

fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// `0-3,5` -> `[0, 1, 2, 3, 5]`.
pub fn parse_cpu_list(s: &str) -> std::result::Result<Vec<u32>, String> {
    let mut v = Vec::new();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let a: u32 = a.trim().parse().map_err(|_| format!("bad CPU list {s:?}"))?;
        let b: u32 = b.trim().parse().map_err(|_| format!("bad CPU list {s:?}"))?;
        if b < a {
            return Err(format!("bad CPU range {part:?}"));
        }
        v.extend(a..=b);
    }
    if v.is_empty() {
        return Err(format!("empty CPU list {s:?}"));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sym(text: &str) -> (Class, u64, Modifiers) {
        match parse(text).unwrap() {
            EventSpec { kind: Kind::Symbolic { class, config }, modifiers, .. } => {
                (class, config, modifiers)
            }
            other => panic!("{text}: {other:?}"),
        }
    }

    #[test]
    fn software_and_hardware_names_and_aliases() {
        assert_eq!(sym("major-faults").1, b::PERF_COUNT_SW_PAGE_FAULTS_MAJ as u64);
        assert_eq!(sym("faults").1, sym("page-faults").1);
        assert_eq!(sym("cs").1, b::PERF_COUNT_SW_CONTEXT_SWITCHES as u64);
        assert_eq!(sym("cpu-migrations").1, b::PERF_COUNT_SW_CPU_MIGRATIONS as u64);
        assert_eq!(sym("task-clock").0, Class::Software);
        assert_eq!(sym("cycles"), (Class::Hardware, 0, Modifiers::default()));
        assert_eq!(sym("instructions").1, 1);
        assert_eq!(sym("alignment-faults").1, 7);
        assert_eq!(sym("emulation-faults").1, 8);
        // LLC (2), write (1), miss (1).
        assert_eq!(
            sym("LLC-store-misses"),
            (Class::HwCache, 2 | 1 << 8 | 1 << 16, Modifiers::default())
        );
    }

    #[test]
    fn modifiers() {
        let u = sym("cs:u").2;
        assert!(!u.exclude_user && u.exclude_kernel);
        let k = sym("page-faults:k").2;
        assert!(k.exclude_user && !k.exclude_kernel);
        assert_eq!(sym("cs:uk").2, Modifiers::default());
        assert!(parse("cs:z").unwrap_err().to_string().contains("unknown modifier"));
    }

    #[test]
    fn breakpoints() {
        let p = parse("mem:0x1000/8:w:u").unwrap();
        assert_eq!(
            p.kind,
            Kind::Breakpoint {
                addr: BpAddr::Addr(0x1000),
                len: Some(8),
                access: b::HW_BREAKPOINT_W
            }
        );
        assert!(p.modifiers.exclude_kernel);
        let p = parse("mem:4096").unwrap();
        assert_eq!(
            p.kind,
            Kind::Breakpoint { addr: BpAddr::Addr(4096), len: None, access: b::HW_BREAKPOINT_RW }
        );
        let p = parse("mem:counter:rw").unwrap();
        assert_eq!(
            p.kind,
            Kind::Breakpoint {
                addr: BpAddr::Symbol("counter".into()),
                len: None,
                access: b::HW_BREAKPOINT_RW
            }
        );
        let p = parse("mem:0x10:x").unwrap();
        assert_eq!(
            p.kind,
            Kind::Breakpoint { addr: BpAddr::Addr(16), len: None, access: b::HW_BREAKPOINT_X }
        );
        assert!(parse("mem:0x10/3").is_err());
        assert!(parse("mem:0x10:rx").is_err());
        assert!(parse("mem:").is_err());
        assert!(parse("mem:12zz").is_err());
        // Resolution: default length 4, alignment checked.
        let ev = resolve(&[parse("mem:0x1000:w").unwrap()], &mut NoLookups).unwrap();
        assert_eq!(ev[0].bp, Some((0x1000, 4, b::HW_BREAKPOINT_W)));
        assert!(resolve(&[parse("mem:0x1001:w").unwrap()], &mut NoLookups).is_err());
    }

    struct Fake;
    impl Lookups for Fake {
        fn tracepoints(&mut self, glob: &str) -> Result<Vec<(String, u64)>> {
            let all = [
                ("syscalls:sys_enter_getppid", 7u64),
                ("syscalls:sys_exit_getppid", 8),
                ("sched:sched_switch", 9),
            ];
            let glob = if glob.contains(':') { glob.to_string() } else { format!("{glob}:*") };
            Ok(all
                .iter()
                .filter(|(n, _)| tp_format::glob::glob_match(&glob, n))
                .map(|(n, i)| (n.to_string(), *i))
                .collect())
        }
        fn tracepoint_names(&mut self) -> Vec<String> {
            vec!["syscalls:sys_enter_getppid".into(), "sched:sched_switch".into()]
        }
        fn symbol(&mut self, _: &str) -> Result<(u64, u64)> {
            Ok((0x4000, 8))
        }
    }

    #[test]
    fn tracepoints_and_globs_resolve() {
        let ev = resolve(&[parse("syscalls:sys_enter_getppid").unwrap()], &mut Fake).unwrap();
        assert_eq!((ev[0].type_, ev[0].config), (b::PERF_TYPE_TRACEPOINT, 7));
        let ev = resolve(&[parse("syscalls:*getppid").unwrap()], &mut Fake).unwrap();
        assert_eq!(
            ev.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(),
            ["syscalls:sys_enter_getppid", "syscalls:sys_exit_getppid"]
        );
        assert_eq!(resolve(&[parse("sched").unwrap()], &mut Fake).unwrap()[0].config, 9);
        let ev = resolve(&[parse("mem:counter:w:u").unwrap()], &mut Fake).unwrap();
        assert_eq!(ev[0].bp, Some((0x4000, 8, b::HW_BREAKPOINT_W)));
    }

    #[test]
    fn unknown_names_get_suggestions() {
        let e = resolve(&[parse("major-fault").unwrap()], &mut Fake).unwrap_err().to_string();
        assert!(e.contains("did you mean major-faults"), "{e}");
        let e = resolve(&[parse("context-switch").unwrap()], &mut Fake).unwrap_err().to_string();
        assert!(e.contains("context-switches"), "{e}");
        let e = resolve(&[parse("syscalls:sys_enter_getpid").unwrap()], &mut Fake)
            .unwrap_err()
            .to_string();
        assert!(e.contains("syscalls:sys_enter_getppid"), "{e}");
        let e = resolve(&[parse("xyzzy-frobnicate").unwrap()], &mut Fake).unwrap_err().to_string();
        assert!(e.contains("no such event") && !e.contains("did you mean"), "{e}");
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-2,5").unwrap(), [0, 1, 2, 5]);
        assert_eq!(parse_cpu_list("1").unwrap(), [1]);
        assert!(parse_cpu_list("2-1").is_err());
        assert!(parse_cpu_list("a").is_err());
    }
}
