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

/// A private PostgreSQL 15 server (initdb in a test directory, its own socket and port),
/// stopped on drop.
struct Postgres {
    data: std::path::PathBuf,
    sock: String,
    port: String,
}

const PG_BIN: &str = "/usr/lib/postgresql/15/bin";

impl Postgres {
    fn start(t: &Tmp) -> Postgres {
        let data = t.path("pgdata");
        let sock = t.path("pgsock");
        for d in [&data, &sock] {
            std::fs::create_dir(d).unwrap();
            run(Command::new("chown").args(["postgres:postgres", d.to_str().unwrap()]));
        }
        std::fs::set_permissions(&t.0, std::fs::Permissions::from_mode(0o755)).unwrap();
        let as_pg = |prog: &str| {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--", &format!("{PG_BIN}/{prog}")]);
            c
        };
        run(as_pg("initdb").args(["-A", "trust", "-U", "postgres", "-D"]).arg(&data));
        let port = (5400 + std::process::id() % 500).to_string();
        let pg = Postgres { data, sock: sock.to_str().unwrap().into(), port };
        let opts = format!("-k {} -p {} -c listen_addresses= -c fsync=off", pg.sock, pg.port);
        // A log file: the server must not hold the test's pipes open.
        let log = pg.data.join("log");
        run(as_pg("pg_ctl")
            .args(["-w", "-D"])
            .arg(&pg.data)
            .arg("-l")
            .arg(&log)
            .args(["-o", &opts, "start"]));
        run(Command::new("pgbench").args(["-q", "-i"]).args(pg.conn()));
        pg
    }

    fn conn(&self) -> [&str; 7] {
        ["-h", &self.sock, "-p", &self.port, "-U", "postgres", "postgres"]
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = Command::new("runuser")
            .args(["-u", "postgres", "--", &format!("{PG_BIN}/pg_ctl"), "-m", "immediate", "-D"])
            .arg(&self.data)
            .arg("stop")
            .output();
    }
}

/// bpftrace running a program until stopped; its output when stopped.
struct Bpftrace(std::process::Child);

impl Bpftrace {
    fn start(prog: &str) -> Bpftrace {
        use std::io::BufRead;
        // Line-buffered: its "Attaching" line arrives while it runs.
        let mut c = Command::new("bpftrace")
            .args(["-B", "line", "-e", prog])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut first = String::new();
        let mut out = std::io::BufReader::new(c.stdout.take().unwrap());
        out.read_line(&mut first).unwrap();
        assert!(first.starts_with("Attaching"), "bpftrace: {first}");
        c.stdout = Some(out.into_inner());
        Bpftrace(c)
    }

    fn stop(self) -> String {
        // SAFETY: kill has no memory preconditions.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGINT) };
        String::from_utf8_lossy(&self.0.wait_with_output().unwrap().stdout).into_owned()
    }
}

/// `arg1:string` on PostgreSQL's query__start prints each query's text; as many of
/// pgbench's UPDATEs as pgbench made, and as bpftrace's `str(arg0)` counts in the same run.
#[test]
fn typed_usdt_arguments_print_postgresql_s_queries() {
    require_tracefs();
    let t = Tmp::new("pg");
    let pg = Postgres::start(&t);
    let postgres = format!("{PG_BIN}/postgres");
    let bt = Bpftrace::start(&format!(
        "usdt:{postgres}:postgresql:query__start {{ @[str(arg0, 24)] = count(); }}"
    ));
    let out = t.path("q.dat");
    let mut args: Vec<String> = ["record", "-q", "-a", "-e"].map(String::from).to_vec();
    args.push(format!("usdt:{postgres}:postgresql:query__start arg1:string"));
    args.extend(["-o".into(), out.to_str().unwrap().into(), "--".into(), "pgbench".into()]);
    args.extend(["-c", "2", "-t", "50"].map(String::from));
    args.extend(pg.conn().map(String::from));
    let r = Command::new(TP).args(&args).stdin(Stdio::null()).output().unwrap();
    let counted = bt.stop();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let rep = run(Command::new(TP).args(["report", "-i", out.to_str().unwrap()]));
    let text = String::from_utf8_lossy(&rep.stdout);
    let updates = text
        .lines()
        .filter(|l| {
            l.contains(" query__start: (0x") && l.contains(" arg1=\"UPDATE pgbench_accounts ")
        })
        .count();
    // pgbench: one UPDATE of pgbench_accounts per transaction, 2 clients x 50.
    assert_eq!(updates, 100, "{}", text.lines().take(20).collect::<Vec<_>>().join("\n"));
    let by_bpftrace: u64 = counted
        .lines()
        .filter(|l| l.starts_with("@[UPDATE pgbench_accounts "))
        .filter_map(|l| l.rsplit_once(": ")?.1.trim().parse::<u64>().ok())
        .sum();
    assert_eq!(by_bpftrace, updates as u64, "bpftrace:\n{counted}");
}

/// Python's function__entry with arg1/arg2 as strings: the file and function names
/// bpftrace's `str(arg0)`/`str(arg1)` print.
#[test]
fn typed_usdt_arguments_print_python_s_function_names() {
    require_tracefs();
    let t = Tmp::new("py");
    let py = "/usr/bin/python3.11";
    let out = t.path("py.dat");
    let o = out.to_str().unwrap();
    let spec = format!("usdt:{py}:python:function__entry arg1:string arg2:string");
    run(Command::new(TP).args(["record", "-q", "-e", &spec, "-o", o, "--", py, "-c", "pass"]));
    let rep = run(Command::new(TP).args(["report", "-i", o]));
    let ours: Vec<String> = String::from_utf8_lossy(&rep.stdout)
        .lines()
        .filter_map(|l| {
            let (_, a) = l.split_once(" arg1=\"")?;
            let (file, b) = a.split_once("\" arg2=\"")?;
            Some(format!("{file} {}", b.split_once('"')?.0))
        })
        .collect();
    let prog = format!(
        "usdt:{py}:python:function__entry {{ printf(\"%s %s\\n\", str(arg0), str(arg1)); }}"
    );
    let bt = run(Command::new("bpftrace").args(["-e", &prog, "-c", &format!("{py} -c pass")]));
    let theirs: Vec<String> = String::from_utf8_lossy(&bt.stdout)
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with("Attaching"))
        .map(String::from)
        .collect();
    assert!(!ours.is_empty());
    assert_eq!(ours, theirs);
}

/// Under sudo the command runs as the user who ran sudo (uid, gid, HOME/USER/LOGNAME) and
/// a USDT semaphore tp sets still reaches it; `--as-root` keeps root.
#[test]
fn under_sudo_the_command_runs_as_the_sudo_user() {
    require_tracefs();
    let t = Tmp::new("sudo-cmd");
    std::fs::set_permissions(&t.0, std::fs::Permissions::from_mode(0o777)).unwrap();
    let id = t.path("id");
    let script = format!("echo $(id -u) $(id -g) $HOME $USER $LOGNAME > {}", id.display());
    let sudo = |args: &[&str]| {
        let r = Command::new(TP)
            .args(args)
            .env("SUDO_UID", "65534")
            .env("SUDO_GID", "65534")
            .env("SUDO_USER", "nobody")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(r.status.success(), "{args:?}: {}", String::from_utf8_lossy(&r.stderr));
    };
    let out = t.path("o.dat");
    let o = out.to_str().unwrap();
    let e = "sched:sched_process_exec";
    sudo(&["record", "-q", "-e", e, "-o", o, "--", "sh", "-c", &script]);
    assert_eq!(std::fs::read_to_string(&id).unwrap(), "65534 65534 /nonexistent nobody nobody\n");
    assert_eq!(std::fs::metadata(&id).unwrap().uid(), 65534);
    std::fs::remove_file(&id).unwrap();
    sudo(&["record", "-q", "--as-root", "-e", e, "-o", o, "--", "sh", "-c", &script]);
    assert!(std::fs::read_to_string(&id).unwrap().starts_with("0 0 "));
    assert_eq!(std::fs::metadata(&out).unwrap().uid(), 0);
    // A semaphore-gated USDT probe fires in the command run as the user.
    let py = "/usr/bin/python3.11";
    let spec = format!("usdt:{py}:python:function__entry");
    sudo(&["record", "-q", "-e", &spec, "-o", o, "--", py, "-c", "pass"]);
    let rep = run(Command::new(TP).args(["report", "-i", o]));
    let n = String::from_utf8_lossy(&rep.stdout).matches(" function__entry: ").count();
    assert!(n > 0, "no function__entry from python run as nobody");
    assert_eq!(std::fs::metadata(&out).unwrap().uid(), 65534);
}

/// Without root (`runuser -u nobody`, paranoid 2): `tp stat` counts the user's own
/// task-clock, `tp list GLOB` lists the perf events and says in one line why tracefs's are
/// not listed, naming the setting that would allow it.
#[test]
fn without_root_tp_does_what_the_user_may() {
    let t = Tmp::new("nobody");
    std::fs::set_permissions(&t.0, std::fs::Permissions::from_mode(0o755)).unwrap();
    let tp = t.path("tp");
    std::fs::copy(TP, &tp).unwrap();
    let nobody = |args: &[&str]| {
        Command::new("runuser")
            .args(["-u", "nobody", "--"])
            .arg(&tp)
            .args(args)
            .current_dir(&t.0)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let r = nobody(&["stat", "-e", "task-clock", "--", "true"]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(r.status.success(), "{err}");
    assert!(err.contains(" task-clock"), "{err}");
    let r = nobody(&["list", "cpu-*"]);
    let (out, err) = (String::from_utf8_lossy(&r.stdout), String::from_utf8_lossy(&r.stderr));
    assert!(r.status.success(), "{err}");
    assert!(out.contains("cpu-clock") && out.contains("[Software event]"), "{out}");
    if !std::fs::metadata("/sys/kernel/tracing/events").is_ok_and(|m| m.mode() & 0o005 == 0o005) {
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("tracefs events not listed") && err.contains("gid="), "{err}");
    }
}

/// The perf door leaves tp's own samples out (its threads and its guard), and says how many.
#[test]
fn the_perf_door_leaves_tp_itself_out() {
    require_tracefs();
    let t = Tmp::new("own");
    let out = t.path("own.data");
    let o = out.to_str().unwrap();
    let c = Command::new(TP)
        .args(["record", "-a", "-e", "cpu-clock", "-F", "199", "-o", o, "--duration", "1"])
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = c.id();
    let r = c.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(r.status.success(), "{err}");
    let rep = run(Command::new(TP).args(["report", "-i", o]));
    let text = String::from_utf8_lossy(&rep.stdout);
    assert!(text.lines().count() > 10, "{text}");
    // `COMM TID [CPU] ...`: tp's main thread's tid is its pid.
    let own: Vec<&str> = text
        .lines()
        .filter(|l| l.split_whitespace().nth(1) == Some(&pid.to_string()))
        .take(3)
        .collect();
    assert!(own.is_empty(), "tp's own samples: {own:?}");
}
