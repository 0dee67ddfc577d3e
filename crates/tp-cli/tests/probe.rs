//! `tp probe` on the running kernel (needs root, tracefs with `uprobe_events`, gcc; CI has
//! them): uprobes and uretprobes on a C program's function, recorded by `tp record`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const TP: &str = env!("CARGO_BIN_EXE_tp");
const UPROBE_EVENTS: &str = "/sys/kernel/tracing/uprobe_events";

/// A directory with a C program built from `src` as `name`; on drop, every probe of the
/// program's groups is removed (a failing test leaves nothing in `uprobe_events`) and the
/// directory too.
struct Prog {
    dir: PathBuf,
    exe: PathBuf,
    groups: Vec<String>,
}

impl Prog {
    fn build(name: &str, src: &str) -> Prog {
        assert!(
            Path::new(UPROBE_EVENTS).exists(),
            "these tests need root and {UPROBE_EVENTS} (CI runs as root)"
        );
        let dir = std::env::temp_dir().join(format!("tp-probe-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let c = dir.join(format!("{name}.c"));
        std::fs::write(&c, src).unwrap();
        // The binary's name carries the pid: parallel runs get groups of their own.
        let exe = dir.join(format!("{name}{}", std::process::id()));
        let out = Command::new("gcc").args(["-O1", "-g", "-o"]).arg(&exe).arg(&c).output().unwrap();
        assert!(out.status.success(), "gcc: {}", String::from_utf8_lossy(&out.stderr));
        let group = format!("probe_{name}{}", std::process::id());
        Prog { dir, exe, groups: vec![group] }
    }
}

impl Drop for Prog {
    fn drop(&mut self) {
        for g in &self.groups {
            let _ = Command::new(TP).args(["probe", "--del", &format!("{g}:*")]).output();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn tp(args: &[&str]) -> Output {
    Command::new(TP).args(args).output().unwrap()
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "tp failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn uprobe_lines(group: &str) -> Vec<String> {
    std::fs::read_to_string(UPROBE_EVENTS)
        .unwrap()
        .lines()
        .filter(|l| l.contains(&format!(":{group}/")))
        .map(str::to_string)
        .collect()
}

const CALLS: &str = r#"
#include <stdlib.h>
__attribute__((noinline)) int f(int x) { return x * 7 - 3; }
__attribute__((noinline)) int g_unused(int x) { return x; }
int main(int argc, char **argv) {
    int n = atoi(argv[1]);
    volatile int s = 0;
    for (int i = 0; i < n; i++) s += f(i);
    return 0;
}
"#;

#[test]
fn uprobe_and_uretprobe_record_every_call_with_its_argument_and_return_value() {
    let p = Prog::build("calls", CALLS);
    let exe = p.exe.to_str().unwrap();
    let group = &p.groups[0];
    let funcs = ok(&tp(&["probe", "-x", exe, "--funcs", "g_*"]));
    assert_eq!(funcs.lines().collect::<Vec<_>>(), ["g_unused"], "{funcs}");
    let all = ok(&tp(&["probe", "-x", exe, "--funcs"]));
    assert!(all.lines().any(|l| l == "f") && all.lines().any(|l| l == "main"), "{all}");

    ok(&tp(&["probe", "-x", exe, "--add", "f", "x=%di:s32"]));
    ok(&tp(&["probe", "-x", exe, "f%return", "ret=$retval:s32"]));
    let list = ok(&tp(&["probe", "--list"]));
    assert!(list.contains(&format!("{group}:f\t")), "{list}");
    assert!(list.contains(&format!("{group}:f__return\t")), "{list}");
    assert_eq!(uprobe_lines(group).len(), 2);

    const N: i32 = 25;
    let out = p.dir.join("t.dat");
    let n = N.to_string();
    ok(&tp(&[
        "record",
        "-q",
        "-o",
        out.to_str().unwrap(),
        "-e",
        &format!("{group}:f*"),
        "--",
        exe,
        &n,
    ]));
    let text = ok(&tp(&["report", "-i", out.to_str().unwrap()]));
    let values = |key: &str, ev: &str| -> Vec<i32> {
        text.lines()
            .filter(|l| l.contains(&format!(" {ev}: (")))
            .map(|l| {
                let v = l.rsplit_once(key).unwrap_or_else(|| panic!("no {key} in {l}")).1;
                v.trim().parse().unwrap()
            })
            .collect()
    };
    let want_x: Vec<i32> = (0..N).collect();
    let want_ret: Vec<i32> = (0..N).map(|i| i * 7 - 3).collect();
    assert_eq!(values("x=", "f"), want_x, "{text}");
    assert_eq!(values("ret=", "f__return"), want_ret, "{text}");

    let del = ok(&tp(&["probe", "--del", &format!("{group}:f*")]));
    assert_eq!(del.lines().count(), 2, "{del}");
    assert!(uprobe_lines(group).is_empty(), "{:?}", uprobe_lines(group));
    assert!(!Path::new(&format!("/sys/kernel/tracing/events/{group}")).exists());
}

#[test]
fn a_definition_the_kernel_rejects_shows_its_error_log_with_the_caret() {
    let p = Prog::build("reject", CALLS);
    let exe = p.exe.to_str().unwrap();
    let out = tp(&["probe", "-x", exe, "f", "x=%nosuchreg"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("Invalid register name"), "{err}");
    assert!(err.contains("Command: p:"), "{err}");
    assert!(err.lines().any(|l| l.trim() == "^"), "{err}");
    assert!(uprobe_lines(&p.groups[0]).is_empty());

    let out = tp(&["probe", "-x", exe, "ff"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(err.contains("did you mean f?"), "{err}");
    let out = tp(&["probe", "-x", "/etc/passwd", "f"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("not an ELF file"));
    let out = tp(&["probe", "--del", "no_such_group_xyz:*"]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn kernel_functions_without_kprobe_events_are_refused_clearly() {
    if Path::new("/sys/kernel/tracing/kprobe_events").exists() {
        // This kernel has kprobes: the refusal below does not apply.
        let out = tp(&["probe", "do_sys_open"]);
        assert_eq!(out.status.code(), Some(1));
        return;
    }
    let out = tp(&["probe", "do_sys_open"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no kprobe events"), "{err}");
}
