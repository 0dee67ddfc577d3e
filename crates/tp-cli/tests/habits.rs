//! Habits and privileges (issue 22): the files tp writes are created safely (never through
//! a symlink, 0600 whatever the umask), and text bound for tracefs control files is checked.

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::{require_tracefs, run, Tmp, TP};

/// `tp ARGS` under umask 022 (root's usual), stdin closed.
fn tp_umask_022(args: &[&str]) -> Output {
    let line = std::iter::once(TP)
        .chain(args.iter().copied())
        .map(|a| format!("'{}'", a.replace('\'', r"'\''")))
        .collect::<Vec<_>>()
        .join(" ");
    Command::new("sh")
        .args(["-c", &format!("umask 022; exec {line}")])
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// `out` is a symlink to a file holding "victim": after `args` (which write `out`) the
/// victim is unchanged and `out` is a regular file of mode 0600.
fn writes_safely(t: &Tmp, out: &Path, args: &[&str]) {
    let victim = t.path(&format!("victim-of-{}", out.file_name().unwrap().to_string_lossy()));
    std::fs::write(&victim, "victim").unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::os::unix::fs::symlink(&victim, out).unwrap();
    let r = tp_umask_022(args);
    assert!(
        r.status.success(),
        "tp {args:?}: {}\n{}",
        r.status,
        String::from_utf8_lossy(&r.stderr)
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "victim", "tp {args:?} wrote through");
    let m = std::fs::symlink_metadata(out).unwrap();
    assert!(m.is_file(), "tp {args:?}: {} is not a regular file", out.display());
    assert_eq!(m.mode() & 0o777, 0o600, "tp {args:?}: mode of {}", out.display());
    assert!(m.len() > 0, "tp {args:?}: {} is empty", out.display());
    // Nothing else is left beside it.
    let left: Vec<String> = std::fs::read_dir(&t.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tp-"))
        .collect();
    assert!(left.is_empty(), "tp {args:?} left {left:?}");
}

#[test]
fn every_written_file_is_private_and_never_written_through_a_symlink() {
    require_tracefs();
    let t = Tmp::new("symlinks");
    let s = |p: &Path| p.to_str().unwrap().to_string();
    // tp record, the tracefs door (trace.dat) and the perf door (perf.data, with stacks).
    let dat = t.path("out.dat");
    writes_safely(
        &t,
        &dat,
        &["record", "-q", "-e", "sched:sched_process_exec", "-o", &s(&dat), "--", "true"],
    );
    let data = t.path("out.data");
    writes_safely(
        &t,
        &data,
        &["record", "-q", "-e", "page-faults", "-g", "-o", &s(&data), "--", "true"],
    );
    // tp convert, both formats.
    let pf = t.path("out.perfetto");
    writes_safely(&t, &pf, &["convert", "--to", "perfetto", "-i", &s(&dat), "-o", &s(&pf)]);
    let ff = t.path("out.json");
    writes_safely(&t, &ff, &["convert", "--to", "firefox", "-i", &s(&data), "-o", &s(&ff)]);
    // tp report --flamegraph.
    let svg = t.path("out.svg");
    writes_safely(&t, &svg, &["report", "-i", &s(&data), "--flamegraph", &s(&svg)]);
    // tp extract, from a private instance.
    let tfs = tp_tracefs::Tracefs::discover().unwrap();
    let inst = tp_tracefs::Instance::create(&tfs).unwrap();
    let ev = tp_tracefs::EventId::new("sched", "sched_process_exec");
    inst.enable(&ev).unwrap();
    run(&mut Command::new("true"));
    let x = t.path("out.extract");
    writes_safely(&t, &x, &["extract", "-q", "-B", inst.name(), "-o", &s(&x)]);
}

#[test]
fn the_probe_ledger_directory_is_the_owners_only() {
    require_tracefs();
    let t = Tmp::new("ledger");
    // A run that defines a probe lists it in /run/tp/uprobes/PID.
    let py = "/usr/bin/python3.11";
    let out = t.path("x.dat");
    let r = tp_umask_022(&[
        "record",
        "-q",
        "-e",
        &format!("usdt:{py}:python:function__entry"),
        "-o",
        out.to_str().unwrap(),
        "--",
        py,
        "-c",
        "pass",
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    for d in ["/run/tp", "/run/tp/uprobes"] {
        let m = std::fs::metadata(d).unwrap();
        assert_eq!(m.mode() & 0o077, 0, "{d} is open to others: {:o}", m.mode() & 0o777);
    }
    assert_eq!(std::fs::metadata(&out).unwrap().mode() & 0o777, 0o600);
}

#[test]
fn under_sudo_the_files_belong_to_the_sudo_user() {
    require_tracefs();
    let t = Tmp::new("sudo-owner");
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let dat = t.path("out.dat");
    let data = t.path("out.data");
    for args in [
        vec!["record", "-q", "-e", "sched:sched_process_exec", "-o", &s(&dat), "--", "true"],
        vec!["record", "-q", "-e", "page-faults", "-o", &s(&data), "--", "true"],
    ] {
        let r = Command::new(TP)
            .args(&args)
            .env("SUDO_UID", "65534")
            .env("SUDO_GID", "65533")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(r.status.success(), "{args:?}: {}", String::from_utf8_lossy(&r.stderr));
    }
    for f in [&dat, &data] {
        let m = std::fs::metadata(f).unwrap();
        assert_eq!((m.uid(), m.gid()), (65534, 65533), "{}", f.display());
    }
}

/// Text for tracefs control files is checked first: a newline in a probe argument would
/// be a second definition (`p:inj2 ...`), one in a filter or trigger a second command.
#[test]
fn control_file_text_with_a_newline_is_refused() {
    require_tracefs();
    let t = Tmp::new("inject");
    let libc = "/lib/x86_64-linux-gnu/libc.so.6";
    let inj = format!("p:tpinj{} /bin/true:0x100", std::process::id());
    let arg = format!("x=%di\n{inj}");
    let out = t.path("x.dat");
    let o = out.to_str().unwrap();
    for (args, says) in [
        (vec!["probe", "-x", libc, "--add", "getpid", &arg], "probe argument"),
        (
            vec![
                "record",
                "-e",
                "sched:sched_switch",
                "-f",
                "prev_pid == 1\nnext_pid == 2",
                "-o",
                o,
                "--",
                "true",
            ],
            "filter",
        ),
    ] {
        let r = Command::new(TP).args(&args).stdin(Stdio::null()).output().unwrap();
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(says) && err.contains("refused a newline (\\n) at byte"), "{err}");
    }
    let defined = std::fs::read_to_string("/sys/kernel/tracing/uprobe_events").unwrap();
    assert!(!defined.contains(&format!("tpinj{}", std::process::id())), "{defined}");
    assert!(!out.exists());
}

/// `tp record -a -- CMD` (both doors): every process, for the command's life, as
/// `perf record -a -- sleep 1` does.
#[test]
fn all_while_a_command_runs_records_other_processes() {
    require_tracefs();
    let t = Tmp::new("all-cmd");
    // Another process that switches all the time, not a child of the command.
    let mut other = Command::new("sh")
        .args(["-c", "while :; do sleep 0.01; done"])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let pid = other.id();
    for (file, door) in [("a.dat", None), ("a.data", Some("--perf"))] {
        let out = t.path(file);
        let mut args = vec!["record", "-q", "-a", "-e", "sched:sched_switch", "-o"];
        args.push(out.to_str().unwrap());
        args.extend(door);
        args.extend(["--", "sleep", "1"]);
        let r = Command::new(TP).args(&args).stdin(Stdio::null()).output().unwrap();
        assert!(r.status.success(), "{args:?}: {}", String::from_utf8_lossy(&r.stderr));
        let rep = run(Command::new(TP).args(["report", "-i", out.to_str().unwrap()]));
        let text = String::from_utf8_lossy(&rep.stdout);
        assert!(
            text.contains(&format!("prev_pid={pid} ")),
            "{args:?}: no switch of pid {pid} in {} lines",
            text.lines().count()
        );
    }
    let _ = other.kill();
    let _ = other.wait();
}

/// `-c N`, perf's sample period, is tp record's trace-cmd `-c` (follow children): one line
/// names `--period N`.
#[test]
fn perf_s_dash_c_is_answered_with_period() {
    for args in [
        &["record", "-c", "1", "-e", "cpu-clock", "--", "true"][..],
        &["record", "-e", "cpu-clock", "-c1", "--", "true"][..],
    ] {
        let r = Command::new(TP).args(args).stdin(Stdio::null()).output().unwrap();
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("give --period 1"), "{err}");
    }
}

/// `-a` recordings save the maps of every process, so `tp faults` names the file of another
/// process's fault: a process started before the recording maps a file of its own again
/// and again.
#[test]
fn all_recordings_save_every_process_s_maps() {
    require_tracefs();
    let t = Tmp::new("all-maps");
    let data = t.path("mapped-by-another-process.bin");
    std::fs::write(&data, vec![7u8; 64 << 12]).unwrap();
    let script = format!(
        "import mmap, time\nf = open({:?}, 'rb')\nwhile True:\n    m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)\n    sum(m[i] for i in range(0, len(m), 4096))\n    m.close()\n    time.sleep(0.005)\n",
        data.to_str().unwrap()
    );
    let mut other =
        Command::new("python3").args(["-c", &script]).stdin(Stdio::null()).spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let out = t.path("f.dat");
    let o = out.to_str().unwrap();
    let r = Command::new(TP)
        .args([
            "record",
            "-q",
            "-a",
            "-e",
            "exceptions:page_fault_user",
            "-o",
            o,
            "--",
            "sleep",
            "1",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let _ = other.kill();
    let _ = other.wait();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let rep = run(Command::new(TP).args(["faults", "-i", o]));
    let text = String::from_utf8_lossy(&rep.stdout);
    assert!(text.contains("mapped-by-another-process.bin"), "{text}");
}
