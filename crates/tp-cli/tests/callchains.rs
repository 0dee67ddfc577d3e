//! Call stacks (`tp record -g`, `--call-graph dwarf`) on a program with a known call chain,
//! `main -> a -> b -> c -> getppid`, built by gcc with and without frame pointers (Debian's
//! libc has none). At least 99% of its getppid samples must show `c, b, a, main` in order:
//! in tp's file as read here (the frame-pointer chain as recorded, the DWARF one unwound by
//! `tp_stack`; addresses resolved from the program's own ELF symbol table and the file's
//! MMAP2 records), in `tp report`'s printed stacks, and in `perf script` on the same file
//! (whose user symbols tp report must print alike). Needs root, tracefs, gcc and perf (CI
//! installs them and runs as root; fails loudly without them).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use object::{Object, ObjectSegment, ObjectSymbol};
use tp_format::perfdata::{context, PerfData, Record};

mod common;
use common::{Tmp, TP};

const GETPPID: i64 = 110;
const CHAIN: [&str; 4] = ["c", "b", "a", "main"];

/// `c` calls getppid in a loop: through libc (whose getppid is a frameless leaf), or with
/// `-DDIRECT` by its own `syscall` instruction. A frame-pointer walk starts at the caller
/// of the leaf's frame, so through libc it skips `c` (perf shows the same): the
/// frame-pointer build makes the system call itself, the DWARF one goes through libc. (gcc
/// 12 gives a leaf function no frame even under `-fno-omit-frame-pointer
/// -mno-omit-leaf-frame-pointer`: `c` calls `not_a_leaf` first to have one.)
const PROGRAM: &str = r#"
#include <stdlib.h>
#include <unistd.h>
#include <sys/syscall.h>
static long sys_getppid(void) {
#ifdef DIRECT
    long r;
    __asm__ volatile("syscall" : "=a"(r) : "0"((long)SYS_getppid) : "rcx", "r11", "memory");
    return r;
#else
    return getppid();
#endif
}
__attribute__((noinline)) void not_a_leaf(void) { __asm__ volatile("" ::: "memory"); }
__attribute__((noinline)) long c(long n) { long s = 0; not_a_leaf(); for (long i = 0; i < n; i++) s += sys_getppid(); return s; }
__attribute__((noinline)) long b(long n) { long r = c(n); __asm__ volatile("" ::: "memory"); return r + 1; }
__attribute__((noinline)) long a(long n) { long r = b(n); __asm__ volatile("" ::: "memory"); return r + 1; }
int main(int argc, char **argv) { long n = argc > 1 ? atol(argv[1]) : 1000; return a(n) == 42; }
"#;

fn build(tmp: &Tmp, name: &str, flags: &[&str]) -> PathBuf {
    let src = tmp.path("chain.c");
    std::fs::write(&src, PROGRAM).unwrap();
    let exe = tmp.path(name);
    let st = Command::new("gcc")
        .arg("-O2")
        .args(flags)
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .status()
        .expect("running gcc (Debian package gcc)");
    assert!(st.success(), "gcc failed: {st}");
    exe
}

/// `tp record ARGS -o FILE -- EXE CALLS`.
fn record(tmp: &Tmp, args: &[&str], exe: &Path, calls: u32) -> PathBuf {
    let data = tmp.path(&format!("{}.data", exe.file_name().unwrap().to_str().unwrap()));
    let out = Command::new(TP)
        .arg("record")
        .args(args)
        .arg("-o")
        .arg(&data)
        .arg("--")
        .arg(exe)
        .arg(calls.to_string())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() || out.status.code() == Some(1), "tp record failed: {err}");
    assert!(err.contains("lost: "), "no summary: {err}");
    data
}

/// One getppid sample of the program: its callchain as recorded and, unwound from its stack
/// copy, its user chain.
struct Hit {
    callchain: Vec<u64>,
    unwound: Option<Vec<u64>>,
}

/// The program's getppid samples, and its executable's maps (addr, len, pgoff).
fn hits(data: &Path, exe: &Path) -> (Vec<Hit>, Vec<(u64, u64, u64)>) {
    let pd = PerfData::open_file(std::fs::File::open(data).unwrap()).unwrap();
    let tracing = pd.features.tracing.clone().expect("tracing data");
    let sys_enter = tracing.events.iter().find(|e| e.name == "sys_enter").expect("sys_enter");
    let id_off = sys_enter.fields.iter().find(|f| f.name == "id").unwrap().offset;
    let exe_s = exe.to_str().unwrap();
    let comm: String = exe.file_name().unwrap().to_str().unwrap().chars().take(15).collect();
    let mut pid = None;
    let mut maps = Vec::new();
    let mut out = Vec::new();
    let mut unwinder = tp_stack::Unwinder::new();
    let mut records = pd.records(true).unwrap();
    while let Some(item) = records.next() {
        let item = item.unwrap();
        let r = item.parse().unwrap();
        unwinder.observe(&r);
        match r {
            Record::Comm { pid: p, comm: c, exec: true, .. } if c == comm => pid = Some(p),
            Record::Mmap2(m, _) if m.filename == exe_s && Some(m.pid) == pid => {
                maps.push((m.addr, m.len, m.pgoff))
            }
            Record::Sample(s) if s.pid.is_some() && s.pid == pid => {
                let raw = s.raw.unwrap();
                let nr = i64::from_le_bytes(raw[id_off..id_off + 8].try_into().unwrap());
                if nr != GETPPID {
                    continue;
                }
                let attr = &item.attr.unwrap().attr;
                out.push(Hit {
                    callchain: s.callchain().collect(),
                    unwound: unwinder.user_chain(&s, attr),
                });
            }
            _ => {}
        }
    }
    assert!(pid.is_some(), "no COMM exec of {comm} in {}", data.display());
    (out, maps)
}

/// The program's functions by address, placed where the file's maps put them.
struct Symbols {
    /// (start, end, name) at the program's own addresses.
    funcs: Vec<(u64, u64, String)>,
    /// PT_LOAD: (file offset, address, size).
    loads: Vec<(u64, u64, u64)>,
    maps: Vec<(u64, u64, u64)>,
}

impl Symbols {
    fn new(exe: &Path, maps: Vec<(u64, u64, u64)>) -> Symbols {
        let bytes = std::fs::read(exe).unwrap();
        let obj = object::File::parse(&*bytes).unwrap();
        let funcs = obj
            .symbols()
            .filter(|s| s.kind() == object::SymbolKind::Text && s.size() > 0)
            .map(|s| (s.address(), s.address() + s.size(), s.name().unwrap().to_string()))
            .collect();
        let loads =
            obj.segments().map(|s| (s.file_range().0, s.address(), s.file_range().1)).collect();
        assert!(!maps.is_empty(), "no MMAP2 of {}", exe.display());
        Symbols { funcs, loads, maps }
    }

    /// The program's function at `addr` in the process ("?" outside the program).
    fn name(&self, addr: u64) -> &str {
        let Some(&(start, _, pgoff)) =
            self.maps.iter().find(|&&(s, len, _)| s <= addr && addr < s + len)
        else {
            return "?";
        };
        let off = addr - start + pgoff;
        let Some(&(seg_off, seg_addr, _)) =
            self.loads.iter().find(|&&(o, _, size)| o <= off && off < o + size)
        else {
            return "?";
        };
        let a = off - seg_off + seg_addr;
        self.funcs.iter().find(|(s, e, _)| *s <= a && a < *e).map_or("?", |f| f.2.as_str())
    }

    /// Names of a user chain: the first address is where the task was, the others return
    /// addresses (looked up one byte back: inside the call).
    fn names(&self, chain: &[u64]) -> Vec<String> {
        chain
            .iter()
            .enumerate()
            .map(|(i, &a)| self.name(if i == 0 { a } else { a - 1 }).to_string())
            .collect()
    }
}

/// The user part of a recorded callchain (after PERF_CONTEXT_USER).
fn user_part(chain: &[u64]) -> &[u64] {
    match chain.iter().position(|&a| a == context::USER) {
        Some(i) => &chain[i + 1..],
        None => &[],
    }
}

/// Does the chain show c, b, a, main in order, with at most `leading` frames before (the
/// libc function making the system call)?
fn shows_chain(names: &[String], leading: usize) -> bool {
    let Some(first) = names.iter().position(|n| CHAIN.contains(&n.as_str())) else {
        return false;
    };
    first <= leading
        && names.len() >= first + 4
        && names[first..first + 4].iter().zip(CHAIN).all(|(n, c)| n == c)
}

/// `perf script` on tp's file: per getppid sample of `comm`, the symbol of each user frame
/// (the kernel's part varies: `__traceiter_sys_enter` is in it while other probes share
/// the tracepoint).
fn perf_chains(data: &Path, comm: &str) -> Vec<Vec<String>> {
    let out = Command::new("perf")
        .args(["script", "-F", "comm,event,trace,ip,sym,dso", "-i"])
        .arg(data)
        .output()
        .expect("running perf (Debian package linux-perf)");
    assert!(out.status.success(), "perf script: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let mut chains = Vec::new();
    for block in text.split("\n\n") {
        let mut lines = block.lines().filter(|l| !l.trim().is_empty());
        let Some(head) = lines.next() else { continue };
        if !(head.trim_start().starts_with(comm) && head.contains(&format!("NR {GETPPID} "))) {
            continue;
        }
        let names: Vec<String> = lines
            .filter(|l| !l.ends_with("([kernel.kallsyms])"))
            .filter_map(|l| l.split_whitespace().nth(1).map(|s| s.to_string()))
            .collect();
        chains.push(names);
    }
    chains
}

/// `tp report` on a file: per getppid sample of `comm`, the symbol of each user frame it
/// prints under the event line (perf script's layout: `addr sym+off (file)`).
fn tp_report_chains(data: &Path, comm: &str) -> Vec<Vec<String>> {
    let out = Command::new(TP).arg("report").arg("-i").arg(data).output().unwrap();
    assert!(out.status.success(), "tp report: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let mut chains = Vec::new();
    let mut current: Option<Vec<String>> = None;
    for line in text.lines() {
        if let Some(frame) = line.strip_prefix('\t') {
            if let Some(c) = current.as_mut() {
                if !frame.ends_with("([kernel.kallsyms])") {
                    let sym = frame.split_whitespace().nth(1).unwrap_or("");
                    c.push(sym.split("+0x").next().unwrap().to_string());
                }
            }
            continue;
        }
        chains.extend(current.take());
        let head = line.trim_start();
        if head.starts_with(&format!("{comm}-")) && head.contains(&format!("NR {GETPPID} ")) {
            current = Some(Vec::new());
        }
    }
    chains.extend(current);
    chains
}

fn at_least_99_percent(what: &str, ok: usize, total: usize, example: &dyn std::fmt::Debug) {
    assert!(total > 0, "{what}: no getppid samples");
    assert!(
        ok * 100 >= total * 99,
        "{what}: {ok} of {total} samples show c, b, a, main; e.g. {example:?}"
    );
}

#[test]
fn frame_pointer_stacks_show_the_whole_chain() {
    let tmp = Tmp::new("fp");
    let exe = build(&tmp, "chain-fp", &["-fno-omit-frame-pointer", "-DDIRECT"]);
    // ~180 bytes a sample: 2.7 MB, within one CPU's 4 MiB ring even if the recorder does not
    // get a CPU while the program runs (a loaded machine).
    let calls = 15_000;
    let data = record(&tmp, &["-g", "-e", "raw_syscalls:sys_enter"], &exe, calls);
    let (hits, maps) = hits(&data, &exe);
    let syms = Symbols::new(&exe, maps);
    assert!(hits.len() as u32 >= calls * 99 / 100, "{} samples of {calls} calls", hits.len());
    let names: Vec<Vec<String>> =
        hits.iter().map(|h| syms.names(user_part(&h.callchain))).collect();
    let ok = names.iter().filter(|n| shows_chain(n, 0)).count();
    let bad = names.iter().find(|n| !shows_chain(n, 0));
    at_least_99_percent("tp's file, frame pointers", ok, hits.len(), &bad);
    // The kernel's part too: a raw_syscalls hit is in the kernel's syscall entry.
    let kernel = hits
        .iter()
        .filter(|h| h.callchain.first() == Some(&context::KERNEL) && h.callchain.len() > 2)
        .count();
    at_least_99_percent("kernel frames", kernel, hits.len(), &hits.first().map(|h| &h.callchain));

    perf_script_agrees(&data, "chain-fp", hits.len(), 0);
}

/// perf script on tp's file `data` shows each of the `hits` getppid samples, 99% of them with
/// the chain (`skip` as in `shows_chain`), and tp report's printed stacks name the same user
/// symbols.
fn perf_script_agrees(data: &Path, tag: &str, hits: usize, skip: usize) {
    let perf = perf_chains(data, tag);
    assert_eq!(perf.len(), hits, "perf script shows as many getppid samples as tp reads");
    let ok = perf.iter().filter(|n| shows_chain(n, skip)).count();
    at_least_99_percent(
        "perf script on tp's file",
        ok,
        perf.len(),
        &perf.iter().find(|n| !shows_chain(n, skip)),
    );
    same_as_perf(tag, &tp_report_chains(data, tag), &perf, skip);
}

/// `tp report`'s printed stacks: c, b, a, main for 99% of the samples, and the same user
/// symbols as perf script's for 99% of them.
fn same_as_perf(comm: &str, tp: &[Vec<String>], perf: &[Vec<String>], leading: usize) {
    assert_eq!(tp.len(), perf.len(), "{comm}: tp report and perf script show as many samples");
    let ok = tp.iter().filter(|n| shows_chain(n, leading)).count();
    at_least_99_percent("tp report", ok, tp.len(), &tp.iter().find(|n| !shows_chain(n, leading)));
    let same = tp.iter().zip(perf).filter(|(a, b)| a == b).count();
    let differ = tp.iter().zip(perf).find(|(a, b)| a != b);
    assert!(
        same * 100 >= tp.len() * 99,
        "{comm}: {same} of {} samples symbolized as perf script does: {differ:?}",
        tp.len()
    );
}

#[test]
fn dwarf_stacks_unwind_through_libc_without_frame_pointers() {
    let tmp = Tmp::new("dwarf");
    let exe = build(&tmp, "chain-dwarf", &["-fomit-frame-pointer"]);
    // ~8.4 KiB a sample: 12.6 MB, within one CPU's 16 MiB ring even if the recorder does
    // not get a CPU while the program runs (a loaded machine).
    let calls = 1_500;
    let data =
        record(&tmp, &["--call-graph", "dwarf", "-e", "raw_syscalls:sys_enter"], &exe, calls);
    let (hits, maps) = hits(&data, &exe);
    let syms = Symbols::new(&exe, maps);
    assert!(hits.len() as u32 >= calls * 99 / 100, "{} samples of {calls} calls", hits.len());
    // Unwound by tp: libc's getppid, then c, b, a, main.
    let names: Vec<Vec<String>> =
        hits.iter().map(|h| syms.names(h.unwound.as_deref().unwrap_or(&[]))).collect();
    let ok = names.iter().filter(|n| shows_chain(n, 1)).count();
    at_least_99_percent(
        "tp's unwinding",
        ok,
        hits.len(),
        &names.iter().find(|n| !shows_chain(n, 1)),
    );
    // The recorded callchain holds the kernel's part only (as perf records DWARF samples).
    assert!(hits.iter().all(|h| user_part(&h.callchain).is_empty()));
    // perf script unwinds the same samples from tp's file.
    perf_script_agrees(&data, "chain-dwarf", hits.len(), 1);
}

/// `:u` keeps the user part of the stack only, `:k` the kernel's only, on a tracepoint
/// (whose hits are all in the kernel, so the event itself is not filtered); `--max-stack`
/// bounds the frames.
#[test]
fn modifiers_choose_the_stack_part_and_max_stack_bounds_it() {
    let tmp = Tmp::new("mods");
    let exe = build(&tmp, "chain-mods", &["-fno-omit-frame-pointer", "-DDIRECT"]);
    let mut parts: HashMap<&str, (usize, usize, usize)> = HashMap::new();
    for (tag, args) in [
        ("u", vec!["-g", "-e", "raw_syscalls:sys_enter:u"]),
        ("k", vec!["-g", "-e", "raw_syscalls:sys_enter:k"]),
        ("max", vec!["-g", "--max-stack", "3", "-e", "raw_syscalls:sys_enter"]),
    ] {
        let data = record(&tmp, &args, &exe, 500);
        let (hits, _) = hits(&data, &exe);
        assert!(hits.len() >= 495, "{tag}: {} samples of 500 calls", hits.len());
        let kernel = hits.iter().filter(|h| h.callchain.contains(&context::KERNEL)).count();
        let user = hits.iter().filter(|h| !user_part(&h.callchain).is_empty()).count();
        let most = hits
            .iter()
            .map(|h| h.callchain.iter().filter(|&&a| a < context::MAX).count())
            .max()
            .unwrap();
        parts.insert(tag, (kernel, user, most));
        std::fs::remove_file(&data).unwrap();
    }
    assert_eq!((parts["u"].0, parts["u"].1 > 0), (0, true), ":u: user frames only {parts:?}");
    assert_eq!((parts["k"].0 > 0, parts["k"].1), (true, 0), ":k: kernel frames only {parts:?}");
    assert!(parts["max"].2 <= 3, "--max-stack 3: {parts:?}");
}

#[test]
fn call_graph_arguments_are_checked() {
    let out_file = Path::new(env!("CARGO_TARGET_TMPDIR")).join("call-graph-arguments.data");
    for (args, says) in [
        (vec!["--call-graph", "lbr"], "fp or dwarf"),
        (vec!["--call-graph", "dwarf,0"], "8 to 65528"),
        (vec!["--call-graph", "dwarf,x"], "not a number"),
        (vec!["--max-stack", "5"], "give -g or --call-graph"),
        (vec!["-g", "--max-stack", "60000"], "perf_event_max_stack"),
    ] {
        let out = Command::new(TP)
            .arg("record")
            .args(&args)
            .args(["-e", "raw_syscalls:sys_enter", "-o"])
            .arg(&out_file)
            .args(["--", "true"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

/// Every sample's user frames as `perf script -F ip,dso --no-inline` prints them: (file,
/// address in the file), return addresses one byte back (inside the call, as perf's DWARF
/// unwinder gives them); `unwound` by tp_stack, or else the recorded chain's user part.
fn tp_frames(data: &Path) -> Vec<Vec<(String, u64)>> {
    let pd = PerfData::open_file(std::fs::File::open(data).unwrap()).unwrap();
    let mut maps: HashMap<u32, Vec<(u64, u64, u64, String)>> = HashMap::new();
    let mut unwinder = tp_stack::Unwinder::new();
    let mut out = Vec::new();
    let mut records = pd.records(true).unwrap();
    while let Some(item) = records.next() {
        let item = item.unwrap();
        let r = item.parse().unwrap();
        unwinder.observe(&r);
        match r {
            Record::Mmap2(m, _) => maps.entry(m.pid).or_default().push((
                m.addr,
                m.len,
                m.pgoff,
                m.filename.to_string(),
            )),
            Record::Sample(s) => {
                let attr = &item.attr.unwrap().attr;
                let chain = unwinder.user_chain(&s, attr).unwrap_or_default();
                let pid_maps = maps.get(&s.pid.unwrap()).map(Vec::as_slice).unwrap_or(&[]);
                let frames = chain
                    .iter()
                    .enumerate()
                    .map(|(i, &a)| {
                        let a = if i == 0 { a } else { a - 1 };
                        // The latest map holding the address.
                        match pid_maps.iter().rev().find(|m| m.0 <= a && a < m.0 + m.1) {
                            Some(m) => (m.3.clone(), a - m.0 + m.2),
                            None => ("[unknown]".to_string(), a),
                        }
                    })
                    .collect();
                out.push(frames);
            }
            _ => {}
        }
    }
    out
}

/// `perf script --no-inline` on a file: every sample's user frames (file, address).
fn perf_frames(data: &Path) -> Vec<Vec<(String, u64)>> {
    let out = Command::new("perf")
        .args(["script", "-F", "tid,ip,dso", "--no-inline", "-i"])
        .arg(data)
        .output()
        .expect("running perf (Debian package linux-perf)");
    assert!(out.status.success(), "perf script: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let mut samples = Vec::new();
    for block in text.split("\n\n").filter(|b| !b.trim().is_empty()) {
        let frames = block
            .lines()
            .skip(1)
            .filter_map(|l| {
                let (addr, dso) = l.trim().split_once(' ')?;
                let dso = dso.trim().trim_start_matches('(').trim_end_matches(')');
                let addr = u64::from_str_radix(addr, 16).ok()?;
                // perf ends some chains with an address of -1 (no frame): not a frame.
                (dso != "[kernel.kallsyms]" && addr != u64::MAX).then(|| (dso.to_string(), addr))
            })
            .collect();
        samples.push(frames);
    }
    samples
}

/// A Rust program built without frame pointers (tp itself, as cargo built it for this
/// test): tp's unwinding and perf's give the same user frames, sample by sample.
#[test]
fn dwarf_unwinding_agrees_with_perf_script_on_a_rust_program() {
    let tmp = Tmp::new("rust");
    let data = tmp.path("rust.data");
    let out = Command::new(TP)
        .args(["record", "-q", "--call-graph", "dwarf", "-e", "raw_syscalls:sys_enter", "-o"])
        .arg(&data)
        .args(["--", TP, "list", "sched:*"])
        .output()
        .unwrap();
    assert!(out.status.success(), "tp record: {}", String::from_utf8_lossy(&out.stderr));
    let ours = tp_frames(&data);
    let perf = perf_frames(&data);
    assert_eq!(ours.len(), perf.len(), "as many samples");
    let same = ours.iter().zip(&perf).filter(|(a, b)| a == b).count();
    let deep = ours.iter().filter(|f| f.len() >= 5).count();
    let differ: Vec<_> = ours.iter().zip(&perf).filter(|(a, b)| a != b).take(2).collect();
    assert!(deep * 2 >= ours.len(), "most stacks are deep: {deep} of {}", ours.len());
    assert!(
        same * 100 >= ours.len() * 99,
        "{same} of {} samples agree; e.g. {differ:#?}",
        ours.len()
    );
}
