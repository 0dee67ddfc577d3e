//! Stacks and symbols of perf.data samples against perf itself: the same files (recorded
//! here by `perf record -g` around a C program built with frame pointers and a Rust one)
//! through `perf script` and `tp report` name the same function for the frames, kernel and
//! user; `--folded` is what stackcollapse-perf (inferno's port) makes of perf script's
//! output; the flame graph is an SVG holding the program's functions. Needs root, perf, gcc
//! and rustc (CI has them; fails loudly without them).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::{Tmp, TP};

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// `main -> a -> b -> c`, c calling getppid and spinning: kernel and user frames.
const C_PROGRAM: &str = r#"
#include <stdlib.h>
#include <unistd.h>
static volatile long sink;
__attribute__((noinline)) void c(int n) {
    for (int i = 0; i < n; i++) { sink += getppid(); for (int j = 0; j < 300; j++) sink += j; }
}
__attribute__((noinline)) void b(int n) { c(n); }
__attribute__((noinline)) void a(int n) { b(n); }
int main(int argc, char **argv) { a(argc > 1 ? atoi(argv[1]) : 1000); return 0; }
"#;

const RUST_PROGRAM: &str = r#"
use std::hint::black_box;
#[inline(never)]
fn work(n: u64) -> u64 {
    let mut s = 0u64;
    for i in 0..n { s = s.wrapping_add(std::process::id() as u64); for j in 0..300 { s = black_box(s.wrapping_add(j)); } let _ = i; }
    s
}
#[inline(never)]
fn middle(n: u64) -> u64 { black_box(work(black_box(n))) }
#[inline(never)]
fn outer(n: u64) -> u64 { black_box(middle(black_box(n))) }
fn main() {
    let n = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(1000);
    println!("{}", outer(n));
}
"#;

/// The C program, with frame pointers or without.
fn build_c(tmp: &Tmp, frame_pointers: bool) -> PathBuf {
    let src = tmp.path("prog.c");
    std::fs::write(&src, C_PROGRAM).unwrap();
    let bin = tmp.path(if frame_pointers { "prog" } else { "prog-nofp" });
    let fp = if frame_pointers { "-fno-omit-frame-pointer" } else { "-fomit-frame-pointer" };
    run(Command::new("gcc").args(["-O1", "-g", fp, "-o"]).arg(&bin).arg(&src));
    bin
}

fn build_rust(tmp: &Tmp) -> PathBuf {
    let src = tmp.path("rprog.rs");
    std::fs::write(&src, RUST_PROGRAM).unwrap();
    let bin = tmp.path("rprog");
    run(Command::new("rustc")
        .args(["-O", "-g", "-C", "force-frame-pointers=yes", "-o"])
        .arg(&bin)
        .arg(&src));
    bin
}

fn perf_record(data: &Path, event: &[&str], cmd: &[&str]) {
    run(Command::new("perf")
        .args(["record", "-q"])
        .args(if event.contains(&"--call-graph") { &[][..] } else { &["-g"][..] })
        .args(event)
        .arg("-o")
        .arg(data)
        .arg("--")
        .args(cmd));
}

fn perf_script(data: &Path) -> String {
    run(Command::new("perf").arg("script").arg("-i").arg(data))
}

fn tp_report(data: &Path, extra: &[&str]) -> String {
    run(Command::new(TP).arg("report").arg("-i").arg(data).args(extra))
}

/// The frames under each sample: blocks of `\t`-lines.
fn stacks(text: &str) -> Vec<Vec<String>> {
    let mut v: Vec<Vec<String>> = Vec::new();
    let mut cur: Option<Vec<String>> = None;
    for l in text.lines() {
        if let Some(frame) = l.strip_prefix('\t') {
            cur.get_or_insert_with(Vec::new).push(frame.trim_start().to_string());
        } else if let Some(s) = cur.take() {
            v.push(s);
        }
    }
    v.extend(cur);
    v
}

/// `ADDR SYMBOL (DSO)` of a frame line: (symbol, dso).
fn symbol(frame: &str) -> (&str, &str) {
    let rest = frame.split_once(' ').map_or(frame, |x| x.1);
    let (sym, dso) = rest.rsplit_once(" (").unwrap_or((rest, ""));
    (sym, dso.trim_end_matches(')'))
}

/// tp report's stacks against perf script's on `data`: at least 99% of kernel frames and
/// of user frames name the same symbol (with the same offset and file); the differences
/// are printed. Returns the functions tp named.
fn same_symbols(data: &Path) -> Vec<String> {
    same_symbols_of(data, true)
}

/// [`same_symbols`], kernel frames required or not.
fn same_symbols_of(data: &Path, kernel_too: bool) -> Vec<String> {
    let perf = stacks(&perf_script(data));
    let tp = stacks(&tp_report(data, &[]));
    assert_eq!(tp.len(), perf.len(), "samples with a stack: tp {} perf {}", tp.len(), perf.len());
    assert!(perf.len() >= 20, "only {} samples with a stack", perf.len());
    let (mut kernel, mut user) = ((0usize, 0usize), (0usize, 0usize));
    let mut differ: BTreeMap<String, usize> = BTreeMap::new();
    let mut names = Vec::new();
    for (t, p) in tp.iter().zip(&perf) {
        // Frames are paired in order (a frame one side lacks, such as an inlined call only
        // one DWARF reader finds, counts as one differing frame, not as a failed sample).
        let same_frame = |tf: &str, pf: &str| {
            symbol(tf) == symbol(pf) && tf.split(' ').next() == pf.split(' ').next()
        };
        let pairs = common_in_order(t, p, same_frame);
        for (j, pf) in p.iter().enumerate() {
            let count = if symbol(pf).1 == "[kernel.kallsyms]" { &mut kernel } else { &mut user };
            count.0 += 1;
            if pairs.iter().any(|&(_, pj)| pj == j) {
                count.1 += 1;
            } else {
                *differ.entry(format!("perf {pf} / tp {t:?}")).or_default() += 1;
            }
        }
        for (i, tf) in t.iter().enumerate() {
            if !pairs.iter().any(|&(ti, _)| ti == i) {
                let count =
                    if symbol(tf).1 == "[kernel.kallsyms]" { &mut kernel } else { &mut user };
                count.0 += 1;
                *differ.entry(format!("tp {tf} / perf {p:?}")).or_default() += 1;
            }
            names.push(symbol(tf).0.split('+').next().unwrap().to_string());
        }
    }
    for (d, n) in &differ {
        eprintln!("{}: {n} x {d}", data.display());
    }
    for (what, (all, same)) in [("kernel", kernel), ("user", user)] {
        assert!(
            all > 0 || (what == "kernel" && !kernel_too),
            "no {what} frame in {}",
            data.display()
        );
        assert!(same * 100 >= all * 99, "{what} frames: {same} of {all} the same as perf script's");
    }
    names.sort();
    names.dedup();
    names
}

/// The longest run of frames `a` and `b` share in order (`same` decides), as index pairs.
fn common_in_order(
    a: &[String],
    b: &[String],
    same: impl Fn(&str, &str) -> bool,
) -> Vec<(usize, usize)> {
    let (n, m) = (a.len(), b.len());
    let mut len = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            len[i][j] = if same(&a[i], &b[j]) {
                len[i + 1][j + 1] + 1
            } else {
                len[i + 1][j].max(len[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut pairs) = (0, 0, Vec::new());
    while i < n && j < m {
        if same(&a[i], &b[j]) {
            pairs.push((i, j));
            (i, j) = (i + 1, j + 1);
        } else if len[i + 1][j] >= len[i][j + 1] {
            i += 1;
        } else {
            j += 1;
        }
    }
    pairs
}

/// inferno's stackcollapse-perf of perf script's output, as sorted lines.
fn collapse_perf_script(data: &Path) -> Vec<String> {
    use inferno::collapse::perf::{Folder, Options};
    use inferno::collapse::Collapse;
    let script = perf_script(data);
    let mut out = Vec::new();
    Folder::from(Options::default()).collapse(script.as_bytes(), &mut out).unwrap();
    let mut v: Vec<String> = String::from_utf8(out).unwrap().lines().map(String::from).collect();
    v.sort();
    v
}

#[test]
fn c_program_symbols_folded_and_flame_graph_agree_with_perf() {
    let tmp = Tmp::new("c");
    let prog = build_c(&tmp, true);
    let prog = prog.to_str().unwrap();

    let cpu = tmp.path("cpu.data");
    perf_record(&cpu, &["-e", "cpu-clock", "-F", "999"], &[prog, "300000"]);
    let names = same_symbols(&cpu);
    for f in ["a", "b", "c", "main"] {
        assert!(names.iter().any(|n| n == f), "{f} not among {names:?}");
    }
    let mut folded: Vec<String> =
        tp_report(&cpu, &["--folded"]).lines().map(String::from).collect();
    folded.sort();
    assert_eq!(folded, collapse_perf_script(&cpu));
    assert!(
        folded.iter().any(|l| l.starts_with("prog;") && l.contains(";main;a;b;c")),
        "{folded:?}"
    );

    let sys = tmp.path("sys.data");
    perf_record(&sys, &["-e", "raw_syscalls:sys_enter"], &[prog, "2000"]);
    let names = same_symbols(&sys);
    for f in ["a", "b", "main", "syscall_trace_enter"] {
        assert!(names.iter().any(|n| n == f), "{f} not among {names:?}");
    }
    let folded: BTreeMap<String, u64> = tp_report(&sys, &["--folded"])
        .lines()
        .map(|l| {
            let (s, n) = l.rsplit_once(' ').unwrap();
            (s.to_string(), n.parse().unwrap())
        })
        .collect();
    assert_eq!(folded, fold_tracepoint_samples(&perf_script(&sys)));

    // The flame graph: well-formed XML, an <svg>, a frame per function of the program.
    let svg = tmp.path("flame.svg");
    tp_report(&cpu, &["--flamegraph", svg.to_str().unwrap()]);
    let titles = svg_titles(&std::fs::read_to_string(&svg).unwrap());
    for f in ["main", "a", "b", "c"] {
        assert!(titles.iter().any(|t| t.starts_with(&format!("{f} ("))), "{f}: {titles:?}");
    }

    // --json: each sample's stack, symbols named.
    // (Samples taken while the dynamic loader starts the program have no `main`.)
    let json = tp_report(&cpu, &["--json"]);
    let in_main = json
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|s| s["stack"].as_array().is_some_and(|st| st.iter().any(|f| f["symbol"] == "main")));
    let first = in_main.unwrap_or_else(|| panic!("no sample's stack has main: {json:.2000}"));
    let stack = first["stack"].as_array().unwrap();
    assert!(stack.iter().any(|f| f["symbol"] == "main" && f["dso"] == prog), "{first}");

    // --srcline: the C file's lines under the program's frames.
    let src = tp_report(&cpu, &["--srcline"]);
    assert!(
        src.lines()
            .any(|l| l.trim_start().starts_with(&format!("{}:", tmp.path("prog.c").display()))),
        "no prog.c:LINE in --srcline"
    );

    // tp convert --to firefox: the Firefox Profiler's processed profile, one sample per
    // perf script sample, stacks decoded through its tables ending main -> a -> b -> c.
    let ff = tmp.path("profile.json");
    run(Command::new(TP)
        .args(["convert", "-i", cpu.to_str().unwrap(), "--to", "firefox", "-o"])
        .arg(&ff));
    let p: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&ff).unwrap()).unwrap();
    assert!(p["meta"]["version"].is_u64(), "{}", p["meta"]);
    let t = &p["threads"][0];
    assert_eq!(t["name"], "prog");
    let n = t["samples"]["length"].as_u64().unwrap() as usize;
    assert_eq!(n, stacks(&perf_script(&cpu)).len(), "samples in the profile");
    let stacks_in_profile: Vec<Vec<String>> = (0..n)
        .map(|i| {
            let mut names = Vec::new();
            let mut at = t["samples"]["stack"][i].as_u64();
            while let Some(st) = at {
                let frame = t["stackTable"]["frame"][st as usize].as_u64().unwrap() as usize;
                let func = t["frameTable"]["func"][frame].as_u64().unwrap() as usize;
                let name = t["funcTable"]["name"][func].as_u64().unwrap() as usize;
                names.push(t["stringArray"][name].as_str().unwrap().to_string());
                at = t["stackTable"]["prefix"][st as usize].as_u64();
            }
            names.reverse();
            names
        })
        .collect();
    assert!(
        stacks_in_profile.iter().any(|s| s.windows(4).any(|w| w == ["main", "a", "b", "c"])),
        "{stacks_in_profile:?}"
    );

    // --top: the spinning function is the hottest, main is in (nearly) every stack: a
    // sample taken while ld.so starts the program has none.
    let top = tp_report(&cpu, &["--top"]);
    let rows: Vec<&str> = top.lines().filter(|l| !l.starts_with('#')).collect();
    assert!(rows[0].ends_with(" c"), "{top}");
    let children = |r: &str| r.split_whitespace().next()?.trim_end_matches('%').parse::<f64>().ok();
    assert!(
        rows.iter().any(|r| r.ends_with(" main") && children(r).is_some_and(|c| c >= 95.0)),
        "{top}"
    );
}

/// `--call-graph dwarf` on the program built without frame pointers: tp unwinds the stack
/// copies (tp-stack) and names the frames as perf script does (its return addresses one
/// byte back, DWARF's functions at each frame as `(inlined)` lines); then tp's own
/// recording (`tp record -F 999 -g` and `--call-graph dwarf`) has the whole call chain.
#[test]
fn dwarf_stacks_agree_with_perf_and_tp_records_profiles() {
    let tmp = Tmp::new("dwarf");
    let prog = build_c(&tmp, false);
    let prog = prog.to_str().unwrap();
    let dw = tmp.path("dwarf.data");
    perf_record(&dw, &["--call-graph", "dwarf", "-e", "cpu-clock", "-F", "999"], &[prog, "200000"]);
    let names = same_symbols(&dw);
    for f in ["a", "b", "c", "main"] {
        assert!(names.iter().any(|n| n == f), "{f} not among {names:?}");
    }
    let folded = tp_report(&dw, &["--folded"]);
    assert!(folded.lines().any(|l| l.contains(";main;a;b;c ")), "{folded}");

    for (data, how, bin) in [
        ("fp.data", "-g", build_c(&tmp, true)),
        ("dw2.data", "--call-graph=dwarf", build_c(&tmp, false)),
    ] {
        let data = tmp.path(data);
        run(Command::new(TP)
            .args(["record", "-F", "999", how, "-o"])
            .arg(&data)
            .arg("--")
            .arg(&bin)
            .arg("200000"));
        let folded = tp_report(&data, &["--folded"]);
        let whole = folded.lines().filter(|l| l.contains(";main;a;b;c")).count();
        assert!(whole > 0, "{how}: no main;a;b;c stack in\n{folded}");
        let text = tp_report(&data, &[]);
        assert!(text.contains(" c+0x") && text.contains(" main+0x"), "{how}:\n{text}");
    }
}

#[test]
fn rust_program_symbols_agree_with_perf() {
    let tmp = Tmp::new("rust");
    let prog = build_rust(&tmp);
    let cpu = tmp.path("cpu.data");
    perf_record(&cpu, &["-e", "cpu-clock", "-F", "999"], &[prog.to_str().unwrap(), "300000"]);
    let names = same_symbols(&cpu);
    for f in ["rprog::work", "rprog::middle", "rprog::outer"] {
        assert!(names.iter().any(|n| n == f), "{f} not among {names:?}");
    }
    let mut folded: Vec<String> =
        tp_report(&cpu, &["--folded"]).lines().map(String::from).collect();
    folded.sort();
    assert_eq!(folded, collapse_perf_script(&cpu));
}

/// A JIT's code (anonymous executable memory) named by its `/tmp/perf-PID.map`, as perf
/// script names it.
#[test]
fn jit_code_is_named_from_the_perf_map() {
    let tmp = Tmp::new("jit");
    let src = tmp.path("jit.c");
    std::fs::write(&src, JIT_PROGRAM).unwrap();
    let bin = tmp.path("jit");
    run(Command::new("gcc").args(["-O1", "-fno-omit-frame-pointer", "-o"]).arg(&bin).arg(&src));
    let data = tmp.path("jit.data");
    let out = Command::new("perf")
        .args(["record", "-q", "-g", "-e", "cpu-clock", "-F", "999", "-o"])
        .arg(&data)
        .arg("--")
        .arg(&bin)
        .arg("50000000")
        .output()
        .unwrap();
    let pid = String::from_utf8_lossy(&out.stdout).trim().to_string();
    // The map is the program's: removed on every path once read.
    struct Remove(String);
    impl Drop for Remove {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
    let _map = Remove(format!("/tmp/perf-{pid}.map"));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let names = same_symbols_of(&data, false);
    assert!(names.iter().any(|n| n == "jit_spin"), "{names:?}");
}

const JIT_PROGRAM: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
int main(int argc, char **argv) {
    /* jit_spin(n): dec %rdi; jnz .-3; ret */
    static const unsigned char code[] = {0x48, 0xff, 0xcf, 0x75, 0xfb, 0xc3};
    unsigned char *p = mmap(0, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 1;
    memcpy(p, code, sizeof code);
    char path[64];
    snprintf(path, sizeof path, "/tmp/perf-%d.map", getpid());
    FILE *f = fopen(path, "w");
    fprintf(f, "%lx %zx jit_spin\n", (unsigned long)p, sizeof code);
    fclose(f);
    long (*fn)(long) = (long (*)(long))p;
    long n = argc > 1 ? atol(argv[1]) : 100000000;
    for (int i = 0; i < 4; i++) fn(n);
    printf("%d\n", getpid());
    return 0;
}
"#;

/// stackcollapse-perf's folding of perf script's tracepoint samples, which inferno's port
/// does not parse (their lines end in the event's text): `comm;outer;...;inner`, a frame
/// without symbol named by its file (`[libc.so.6]`) or `[unknown]`, 1 per sample (perf
/// script prints no period for tracepoints).
fn fold_tracepoint_samples(script: &str) -> BTreeMap<String, u64> {
    let mut folded = BTreeMap::new();
    let mut comm = String::new();
    let mut frames: Vec<String> = Vec::new();
    let mut flush = |comm: &str, frames: &mut Vec<String>| {
        if !frames.is_empty() {
            frames.reverse();
            *folded.entry(format!("{comm};{}", frames.join(";"))).or_default() += 1;
            frames.clear();
        }
    };
    for l in script.lines() {
        if let Some(f) = l.strip_prefix('\t') {
            let (sym, dso) = symbol(f.trim_start());
            let name = match sym.rsplit_once("+0x") {
                Some((n, off)) if off.chars().all(|c| c.is_ascii_hexdigit()) => n,
                _ => sym,
            };
            frames.push(match (name, dso) {
                ("[unknown]", "[unknown]") => name.to_string(),
                ("[unknown]", d) => format!("[{}]", d.rsplit('/').next().unwrap()),
                (n, _) => n.split('(').next().unwrap().replace(';', ":"),
            });
        } else if l.is_empty() {
            flush(&comm, &mut frames);
        } else {
            // `comm tid [cpu] time: event: text`; the comm may hold spaces.
            let t: Vec<&str> = l.split_whitespace().collect();
            let at = (1..t.len())
                .find(|&i| {
                    t[i].parse::<u32>().is_ok() && t.get(i + 1).is_some_and(|n| n.starts_with('['))
                })
                .unwrap_or_else(|| panic!("perf script header: {l}"));
            comm = t[..at].join("_");
        }
    }
    flush(&comm, &mut frames);
    folded
}

/// The `<title>` texts of an SVG, parsing all of it (an error fails the test).
fn svg_titles(svg: &str) -> Vec<String> {
    use quick_xml::events::Event;
    let mut r = quick_xml::Reader::from_str(svg);
    let (mut titles, mut in_title, mut root) = (Vec::new(), false, None);
    loop {
        match r.read_event().unwrap_or_else(|e| panic!("SVG: {e}")) {
            Event::Start(e) => {
                let name = String::from_utf8_lossy(e.name().as_ref()).to_string();
                root.get_or_insert(name.clone());
                in_title = name == "title";
            }
            Event::Text(t) if in_title => {
                titles.push(t.decode().unwrap().into_owned());
            }
            Event::End(_) => in_title = false,
            Event::Eof => break,
            _ => {}
        }
    }
    assert_eq!(root.as_deref(), Some("svg"));
    titles
}
