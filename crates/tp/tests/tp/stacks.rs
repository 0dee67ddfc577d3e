//! User stacks of Rust events: a program with a known call chain (`main -> a -> b -> c`,
//! `examples/stacks.rs`), built with frame pointers, records with `TP_STACKS`; each
//! `stacks:leaf` event is followed in its thread's pages by an `ftrace:user_stack` record
//! whose return addresses are in `c`, `b`, `a`, `main`, in that order; `stacks:plain` has
//! none. trace-cmd reads the file.

use std::path::PathBuf;
use std::process::Command;
use tp::Recording;
use tp_format::render::{Options, Renderer, Tables};

/// The `stacks` example built with frame pointers (`cargo rustc`: the flag for the example
/// alone; the walk is compiled in the program's crate, see `stack::capture`), in this test
/// binary's target directory and profile.
fn build_program() -> PathBuf {
    // target/<profile>/deps/tp-HASH
    let me = std::env::current_exe().unwrap();
    let profile_dir = me.parent().unwrap().parent().unwrap();
    let target_dir = profile_dir.parent().unwrap();
    let release = profile_dir.file_name().is_some_and(|n| n == "release");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["rustc", "--quiet", "-p", "tp", "--example", "stacks", "--target-dir"])
        .arg(target_dir)
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    if release {
        cmd.arg("--release");
    }
    let st = cmd.args(["--", "-C", "force-frame-pointers=yes"]).status().expect("run cargo");
    assert!(st.success(), "cargo rustc -p tp --example stacks failed: {st}");
    profile_dir.join("examples").join("stacks")
}

#[test]
fn events_carry_their_callers_in_order() {
    let dir = crate::temp_dir("stacks");
    let exe = build_program();
    let file = dir.join("stacks.dat");
    let out = Command::new(&exe)
        .arg("100")
        .env("TP_STACKS", "stacks:leaf")
        .env("TP_RECORD", &file)
        .env_remove("TP_EVENTS")
        .env_remove("TP_TEXT")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let addr = |name: &str| -> u64 {
        let l = stdout.lines().find(|l| l.starts_with(&format!("{name} "))).unwrap();
        u64::from_str_radix(l.split_whitespace().nth(1).unwrap(), 16).unwrap()
    };
    let pid = stdout.lines().find_map(|l| l.strip_prefix("pid ")).unwrap().parse::<u64>().unwrap();
    let funcs = [("c", addr("c")), ("b", addr("b")), ("a", addr("a")), ("main", addr("main"))];
    // The function a return address is in: the nearest start below it.
    let func_of =
        |ra: u64| funcs.iter().filter(|(_, s)| *s < ra).max_by_key(|(_, s)| *s).map(|(n, _)| *n);

    let r = Recording::open(&file).unwrap();
    let id_of = |sys: &str, name: &str| {
        r.formats.iter().find(|f| f.system == sys && f.name == name).unwrap().id as u16
    };
    let (leaf, plain, ustack) =
        (id_of("stacks", "leaf"), id_of("stacks", "plain"), id_of("ftrace", "user_stack"));
    let renderer = Renderer::new(r.formats.clone(), Tables::default(), Options::default());
    let id = |rec: &[u8]| u16::from_le_bytes([rec[0], rec[1]]);
    let mut leaves = 0;
    for (i, (stream, ts, rec)) in r.records.iter().enumerate() {
        if id(rec) == ustack {
            let (_, _, before) = &r.records[i - 1];
            assert_eq!(id(before), leaf, "a user stack follows only stacks:leaf");
            continue;
        }
        if id(rec) == plain {
            assert!(r.records.get(i + 1).is_none_or(|(_, _, n)| id(n) != ustack));
            continue;
        }
        assert_eq!(id(rec), leaf);
        leaves += 1;
        let (s2, ts2, st) = &r.records[i + 1];
        assert_eq!((s2, ts2, id(st)), (stream, ts, ustack), "the stack right after the event");
        let callers: Vec<u64> =
            st[16..80].chunks(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect();
        let names: Vec<Option<&str>> = callers[..4].iter().map(|&ra| func_of(ra)).collect();
        assert_eq!(names, [Some("c"), Some("b"), Some("a"), Some("main")], "{callers:x?}");
        assert_eq!(&st[4..8], &rec[4..8], "the event's thread");
        assert_eq!(u32::from_le_bytes(st[8..12].try_into().unwrap()) as u64, pid, "tgid");
        // Printed as the kernel prints a user stack.
        let mut text = String::new();
        renderer.render_text(st, &mut text);
        let mut want = String::from("<user stack trace>");
        for ra in callers.iter().take_while(|&&ra| ra != 0) {
            want.push_str(&format!("\n =>  <{ra:016x}>"));
        }
        assert_eq!(text, want);
    }
    assert_eq!(leaves, 100);

    // trace-cmd reads the file: the same number of user stacks, the same first frames.
    let tc = Command::new("trace-cmd").args(["report", "-i"]).arg(&file).output();
    let tc = tc.expect("trace-cmd is installed (CI installs it)");
    assert!(tc.status.success(), "{}", String::from_utf8_lossy(&tc.stderr));
    let text = String::from_utf8_lossy(&tc.stdout);
    assert_eq!(text.matches("user_stack:").count(), 100, "{text}");
    let first = format!("=> 0x{:x}", {
        let i = r.records.iter().position(|(_, _, rec)| id(rec) == ustack).unwrap();
        u64::from_le_bytes(r.records[i].2[16..24].try_into().unwrap())
    });
    assert!(text.contains(&first), "{first} in\n{text}");
    std::fs::remove_dir_all(dir).unwrap();
}

tp::trace_event! {
    /// Records its user stack from the declaration on.
    pub stk:declared(i: u32) {
        stacks = true;
        fields { i: u32 }
        printk("i=%u", i)
    }
    /// Records none unless asked.
    pub stk:plain(i: u32) {
        fields { i: u32 }
        printk("i=%u", i)
    }
}

/// Record both events; for each event in the file, whether a user stack follows it.
fn stacks_followed(tag: &str) -> Vec<(String, bool)> {
    let dir = crate::temp_dir(tag);
    let path = dir.join("t.dat");
    let rec = tp::Recorder::start(&path).unwrap();
    for i in 0..3 {
        trace_declared(i);
        trace_plain(i);
    }
    rec.stop().unwrap();
    let r = Recording::open(&path).unwrap();
    let name = |rec: &[u8]| r.format(u16::from_le_bytes([rec[0], rec[1]])).unwrap().name.clone();
    let mut out = Vec::new();
    for (i, (_, _, rec)) in r.records.iter().enumerate() {
        let n = name(rec);
        if n == "declared" || n == "plain" {
            let next = r.records.get(i + 1).map(|(_, _, n)| name(n));
            out.push((n, next.as_deref() == Some("user_stack")));
        }
    }
    std::fs::remove_dir_all(dir).unwrap();
    out
}

/// `stacks = true;` in `trace_event!` turns stacks on for that event; `tp::set_stacks`
/// (TP_STACKS's syntax) changes the events it names and leaves the others. The program is
/// built without frame pointers here: the walk finds what it finds, and must not fault.
#[test]
fn declared_stacks_and_set_stacks() {
    let _g = crate::global();
    assert!(tracepoint_declared().stacks() && !tracepoint_plain().stacks());
    let got = stacks_followed("declared");
    let want: Vec<(String, bool)> =
        (0..3).flat_map(|_| [("declared".into(), true), ("plain".into(), false)]).collect();
    assert_eq!(got, want);
    assert!(tp::set_stacks("stk:plain,-stk:declared") >= 1);
    assert!(!tracepoint_declared().stacks() && tracepoint_plain().stacks());
    let got = stacks_followed("swapped");
    let want: Vec<(String, bool)> =
        (0..3).flat_map(|_| [("declared".into(), false), ("plain".into(), true)]).collect();
    assert_eq!(got, want);
    tp::set_stacks("stk:declared,-stk:plain");
    assert!(tracepoint_declared().stacks() && !tracepoint_plain().stacks());
}
