//! perf.data interop with perf itself: files tp writes read back by `perf script`, files
//! `perf record` writes read by `tp report`. Needs root, tracefs and perf (CI installs
//! Debian's `linux-perf` and runs as root; fails loudly without them).

mod common;
use common::{SmallDisk, Tmp, TP};

use std::io::{BufRead, BufReader, Cursor, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use tp_format::perfdata::attr::{event_type, flag};
use tp_format::perfdata::record::{Sample, SampleId};
use tp_format::perfdata::{sample, EventAttr, Features, PerfData, Record, Writer, WriterAttr};
use tp_format::tracedat::Metadata;
use tp_format::EventFormat;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/perfdata").join(name)
}

/// `perf script` (extra arguments first) on `file`: its stdout, asserting success.
fn perf_script(file: &Path, args: &[&str]) -> String {
    let out = Command::new("perf")
        .arg("script")
        .args(args)
        .arg("-i")
        .arg(file)
        .output()
        .expect("running perf (Debian package linux-perf)");
    assert!(
        out.status.success(),
        "perf script -i {} failed: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// trace.dat metadata holding `formats` (as perf stores them in TRACING_DATA).
fn metadata_of(formats: &[EventFormat]) -> Metadata {
    let mut meta = Metadata::default();
    for f in formats {
        match meta.event_formats.iter_mut().find(|(s, _)| *s == f.system) {
            Some((_, v)) => v.push(f.to_format_text()),
            None => meta.event_formats.push((f.system.clone(), vec![f.to_format_text()])),
        }
    }
    meta
}

/// Every record of perf's own file copied through tp's writer (samples and side records
/// parsed and encoded again, the tracing data written by trace.dat's writer from the parsed
/// formats): `perf script` prints the copy exactly as it prints the original.
#[test]
fn writer_copy_of_a_perf_file_prints_the_same_in_perf_script() {
    let tmp = Tmp::new("copy");
    let orig = PerfData::open_file(std::fs::File::open(fixture("file.data")).unwrap()).unwrap();
    let attrs: Vec<WriterAttr> = orig
        .attrs
        .iter()
        .map(|a| WriterAttr {
            attr: a.attr.clone(),
            ids: a.ids.clone(),
            name: a.name.clone().unwrap(),
        })
        .collect();
    let out = std::io::BufWriter::new(std::fs::File::create(tmp.path("copy.data")).unwrap());
    let mut w = Writer::new(out, attrs).unwrap();
    let mut records = orig.records(false).unwrap();
    let mut samples = 0;
    while let Some(item) = records.next() {
        let item = item.unwrap();
        let Some(index) = item.event else {
            // Side records perf synthesized with a zero id (the kernel's map, its own comm)
            // are copied as they are; perf's own records (attrs, id index...) are not.
            if item.raw.kind < tp_format::perfdata::kind::HEADER_ATTR {
                w.write_raw(item.raw.bytes).unwrap();
            }
            continue;
        };
        match item.parse().unwrap() {
            Record::Other(_) => {}
            r => {
                samples += matches!(r, Record::Sample(_)) as usize;
                w.write(index, &r).unwrap();
            }
        }
    }
    w.finished_round().unwrap();
    let tracing = orig.features.tracing.as_ref().unwrap();
    let meta = metadata_of(&tracing.events);
    let td = tp_format::tracedat::Writer::new(Default::default()).tracing_data(&meta);
    let features = Features {
        hostname: orig.features.hostname.clone(),
        osrelease: orig.features.osrelease.clone(),
        arch: orig.features.arch.clone(),
        nr_cpus: orig.features.nr_cpus,
        build_ids: orig.features.build_ids.clone(),
        ..Default::default()
    };
    let (_, stats) = w.finish(&features, Some(&td)).unwrap();
    assert_eq!(stats.samples as usize, samples);
    // perf script of the original now, not the stored file.script: perf names kernel
    // addresses from the running kernel's symbols, which move between kernel builds.
    let want = perf_script(&fixture("file.data"), &[]);
    let got = perf_script(&tmp.path("copy.data"), &[]);
    assert_eq!(got.lines().count(), want.lines().count());
    for (i, (g, w)) in got.lines().zip(want.lines()).enumerate() {
        assert_eq!(g, w, "line {i}");
    }
    // perf report: the same per-event, per-comm summary.
    let report = |f: &Path| {
        let out = Command::new("perf")
            .args(["report", "--stdio", "--sort", "comm", "-i"])
            .arg(f)
            .output()
            .expect("running perf report");
        assert!(out.status.success(), "perf report: {}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8(out.stdout).unwrap();
        let keep = |l: &&str| l.starts_with("# Samples") || l.starts_with("    ");
        text.lines().filter(keep).map(str::to_string).collect::<Vec<_>>()
    };
    let want = report(&fixture("file.data"));
    assert!(want.len() >= 6, "{want:?}");
    assert_eq!(report(&tmp.path("copy.data")), want);
    // And tp reads its own file back with the same samples.
    let copy = PerfData::open(Cursor::new(std::fs::read(tmp.path("copy.data")).unwrap())).unwrap();
    assert!(copy.warnings.is_empty(), "{:?}", copy.warnings);
    let names: Vec<_> = copy.attrs.iter().map(|a| a.name.clone().unwrap()).collect();
    assert_eq!(names, ["sched:sched_switch", "raw_syscalls:sys_enter", "major-faults"]);
    assert_eq!(copy.features.sample_time, Some((stats.first_time.unwrap(), stats.last_time)));
}

/// sched_switch samples made up by tp (the record laid out by the running kernel's
/// format): `perf script` prints each with the values written.
#[test]
fn synthetic_tracepoint_samples_print_in_perf_script() {
    let text = std::fs::read_to_string("/sys/kernel/tracing/events/sched/sched_switch/format")
        .expect("these tests need root and tracefs (CI runs as root)");
    let format = EventFormat::parse("sched", &text).unwrap();
    let size = format.all_fields().map(|f| f.offset + f.size).max().unwrap();
    let set = |rec: &mut Vec<u8>, name: &str, bytes: &[u8]| {
        let f = format.field(name).unwrap();
        rec[f.offset..f.offset + bytes.len().min(f.size)]
            .copy_from_slice(&bytes[..bytes.len().min(f.size)]);
    };
    let attr = EventAttr {
        type_: event_type::TRACEPOINT,
        config: format.id as u64,
        sample_period: 1,
        sample_type: sample::IDENTIFIER
            | sample::IP
            | sample::TID
            | sample::TIME
            | sample::CPU
            | sample::PERIOD
            | sample::RAW,
        flags: flag::SAMPLE_ID_ALL | flag::COMM | flag::TASK,
        ..Default::default()
    };
    let tmp = Tmp::new("synthetic");
    let out = std::io::BufWriter::new(std::fs::File::create(tmp.path("syn.data")).unwrap());
    let attrs = vec![WriterAttr { attr, ids: vec![100, 101], name: "sched:sched_switch".into() }];
    let mut w = Writer::new(out, attrs).unwrap();
    const N: u32 = 1000;
    for i in 0..N {
        let pid = 5000 + i % 7;
        let next = 6000 + i % 5;
        let time = 1_000_000_000 + i as u64 * 1500;
        if i < 7 {
            let id =
                SampleId { pid: Some(pid), tid: Some(pid), time: Some(time), ..Default::default() };
            w.write(
                0,
                &Record::Comm { pid, tid: pid, comm: &format!("tpw{}", i % 7), exec: false, id },
            )
            .unwrap();
        }
        let mut rec = vec![0u8; size];
        set(&mut rec, "common_type", &(format.id as u16).to_le_bytes());
        set(&mut rec, "common_pid", &(pid as i32).to_le_bytes());
        set(&mut rec, "prev_comm", format!("tpw{}", i % 7).as_bytes());
        set(&mut rec, "prev_pid", &(pid as i32).to_le_bytes());
        set(&mut rec, "prev_prio", &120i32.to_le_bytes());
        set(&mut rec, "prev_state", &1u64.to_le_bytes());
        set(&mut rec, "next_comm", format!("next{}", i % 5).as_bytes());
        set(&mut rec, "next_pid", &(next as i32).to_le_bytes());
        set(&mut rec, "next_prio", &(100 + i as i32 % 20).to_le_bytes());
        let s = Sample {
            ip: Some(0xffff_ffff_8100_0000),
            pid: Some(pid),
            tid: Some(pid),
            time: Some(time),
            cpu: Some(i % 2),
            period: Some(1),
            raw: Some(&rec),
            misc: tp_format::perfdata::misc::KERNEL,
            ..Default::default()
        };
        w.write(0, &Record::Sample(s)).unwrap();
        if i % 100 == 99 {
            w.finished_round().unwrap();
        }
    }
    let td = tp_format::tracedat::Writer::new(Default::default())
        .tracing_data(&metadata_of(std::slice::from_ref(&format)));
    let (_, stats) = w.finish(&Features::default(), Some(&td)).unwrap();
    assert_eq!(stats.samples, N as u64);
    let got = perf_script(&tmp.path("syn.data"), &["-F", "comm,pid,cpu,time,event,trace"]);
    let lines: Vec<&str> = got.lines().collect();
    assert_eq!(lines.len(), N as usize, "{got}");
    for (i, l) in lines.iter().enumerate() {
        let i = i as u32;
        let (pid, next) = (5000 + i % 7, 6000 + i % 5);
        let t = 1_000_000_000 + i as u64 * 1500;
        let want = format!(
            "tpw{} {pid} [{:03}] {}.{:06}: sched:sched_switch: prev_comm=tpw{} prev_pid={pid} prev_prio=120 prev_state=S ==> next_comm=next{} next_pid={next} next_prio={}",
            i % 7,
            i % 2,
            t / 1_000_000_000,
            t % 1_000_000_000 / 1000,
            i % 7,
            i % 5,
            100 + i % 20
        );
        let squeezed: Vec<&str> = l.split_whitespace().collect();
        assert_eq!(squeezed.join(" "), want, "line {i}");
    }
}

/// The tests that run `perf record -a` take turns: with two system-wide sessions at once, the
/// kernel-text oracle below found a few of perf's samples missing from the instance's text
/// (not understood yet; alone it finds every one).
static SYSTEM_WIDE: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn tp_report(args: &[&str]) -> (String, String, i32) {
    let out = Command::new(TP).arg("report").args(args).output().unwrap();
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
        out.status.code().unwrap_or(-1),
    )
}

/// A perf.data of the command: `perf record -e sched:sched_switch -e
/// raw_syscalls:sys_enter -e major-faults -a` around a workload that major-faults (a copy of
/// `ls` dropped from the page cache, then run).
fn perf_record_all(tmp: &Tmp) -> PathBuf {
    let data = tmp.path("perf.data");
    let ls = tmp.path("ls");
    let script = format!(
        "cp /bin/ls {ls} && dd if=/dev/null of={ls} oflag=nocache conv=notrunc,fdatasync count=0 2>/dev/null && {ls} / >/dev/null && sleep 0.2",
        ls = ls.display()
    );
    let st = Command::new("perf")
        .args(["record", "-q", "-e", "sched:sched_switch", "-e", "raw_syscalls:sys_enter"])
        .args(["-e", "major-faults", "-a", "-o"])
        .arg(&data)
        .args(["--", "sh", "-c", &script])
        .status()
        .expect("running perf record (Debian package linux-perf)");
    assert!(st.success(), "perf record failed: {st}");
    data
}

/// A `tp report` tracepoint line: (comm, tid, cpu, µs, event name, text).
fn parse_tp_line(l: &str) -> Option<(String, u32, u32, u64, String, String)> {
    // "            comm-PID     [CPU] flags  SECS.USECS: name: text"
    let (head, rest) = l.split_once("]")?;
    let (task, cpu) = head.rsplit_once('[')?;
    let (comm, pid) = task.trim_end().rsplit_once('-')?;
    let mut w = rest.split_whitespace();
    w.next()?; // flags
    let ts = w.next()?.strip_suffix(':')?;
    let (s, us) = ts.split_once('.')?;
    let after_ts = rest.split_once(": ")?.1;
    let (name, text) = after_ts.split_once(": ").unwrap_or((after_ts, ""));
    Some((
        comm.trim_start().to_string(),
        pid.parse().ok()?,
        cpu.parse().ok()?,
        s.parse::<u64>().ok()? * 1_000_000 + us.parse::<u64>().ok()?,
        name.to_string(),
        text.to_string(),
    ))
}

/// A `perf script -F comm,tid,cpu,time,event,trace --ns` line: (comm, tid, cpu, ns,
/// system:name, text). perf prints tid -1 (comm `:-1`) for a sample it cannot tie to a
/// thread.
fn parse_perf_line(l: &str) -> Option<(String, i64, u32, u64, String, String)> {
    let (head, rest) = l.split_once("] ")?;
    let (task, cpu) = head.rsplit_once('[')?;
    let (comm, tid) = task.trim_end().rsplit_once(' ')?;
    let rest = rest.trim_start();
    let (ts, rest) = rest.split_once(": ")?;
    let (s, ns) = ts.split_once('.')?;
    let rest = rest.trim_start();
    let (name, text) = rest.split_once(": ").unwrap_or((rest.trim_end_matches(':'), ""));
    Some((
        comm.trim().to_string(),
        tid.trim().parse().ok()?,
        cpu.parse().ok()?,
        s.parse::<u64>().ok()? * 1_000_000_000 + ns.parse::<u64>().ok()?,
        name.to_string(),
        text.to_string(),
    ))
}

/// `tp report` on perf's own file shows every sample perf script shows, in the same order,
/// with the same task, CPU and time (the kernel rounds to the microsecond, perf script
/// truncates: compared in nanoseconds rounded as the kernel does), and tracepoint text equal
/// to perf script's (libtraceevent prints these two events as the kernel does; tp's text is
/// the renderer crates/tp-cli/tests/fidelity.rs holds to the kernel's own).
#[test]
fn tp_report_shows_every_sample_perf_script_shows() {
    let _turn = SYSTEM_WIDE.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = Tmp::new("record");
    let data = perf_record_all(&tmp);
    let (out, err, code) = tp_report(&["-i", data.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let perf = perf_script(&data, &["--ns", "-F", "comm,tid,cpu,time,event,trace"]);
    // Lost records (a busy machine: perf's rings overflow) are lines of their own in tp,
    // as in trace.dat's report; perf script shows them with --show-lost-events (not always
    // one line per record: only tp's at least as many is checked).
    let (lost, tp_lines): (Vec<&str>, Vec<&str>) = out.lines().partition(|l| l.contains(" [LOST "));
    let perf_lost = perf_script(&data, &["--show-lost-events"])
        .lines()
        .filter(|l| l.contains("PERF_RECORD_LOST"))
        .count();
    assert!(lost.len() >= perf_lost, "lost records: tp {} perf script {perf_lost}", lost.len());
    let perf_lines: Vec<&str> = perf.lines().collect();
    assert_eq!(tp_lines.len(), perf_lines.len(), "tp report and perf script sample counts");
    let mut faults = 0;
    let mut unknown_thread = 0;
    for (i, (t, p)) in tp_lines.iter().zip(&perf_lines).enumerate() {
        let pp = parse_perf_line(p).unwrap_or_else(|| panic!("perf line {i}: {p}"));
        if pp.4 == "major-faults" {
            // perf script's layout: comm tid [cpu] time: period event: ip.
            faults += 1;
            // Compared with white space folded: a thread name may hold a space
            // (rustc's "opt cgu.05").
            let folded = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
            let task = format!("{} {} ", folded(&pp.0), pp.1);
            assert!(folded(t).starts_with(&task), "line {i}: {t} (perf: {p})");
            assert!(t.contains("major-faults:"), "line {i}: {t}");
            continue;
        }
        let tt = parse_tp_line(t).unwrap_or_else(|| panic!("tp line {i}: {t}"));
        let us = (pp.3 + 500) / 1000;
        if pp.1 == -1 {
            // The sample's pid/tid are -1: the kernel gives them for a task that is no
            // longer alive (perf_event_tid), e.g. the last switch away from an exiting
            // task. perf script cannot name it; tp prints the record's common_pid, the
            // task switching out.
            unknown_thread += 1;
            assert_eq!((tt.2, tt.3), (pp.2, us), "line {i}:\n tp:   {t}\n perf: {p}");
            let prev_pid = tt.5.split("prev_pid=").nth(1).and_then(|r| r.split(' ').next());
            assert_eq!(prev_pid, Some(tt.1.to_string().as_str()), "line {i}: {t}");
        } else {
            // The idle task: the kernel's trace names pid 0 `<idle>`, perf `swapper`.
            let perf_comm = if pp.1 == 0 && pp.0 == "swapper" { "<idle>" } else { pp.0.as_str() };
            assert_eq!(
                (tt.0.as_str(), tt.1 as i64, tt.2, tt.3),
                (perf_comm, pp.1, pp.2, us),
                "line {i}:\n tp:   {t}\n perf: {p}"
            );
        }
        assert!(pp.4.ends_with(&format!(":{}", tt.4)), "line {i}: {t} / {p}");
        assert_eq!(tt.5, pp.5, "line {i} text:\n tp:   {t}\n perf: {p}");
    }
    assert!(faults > 0, "the workload made no major fault");
    assert!(
        unknown_thread * 100 <= perf_lines.len(),
        "{unknown_thread} samples without a thread in perf script"
    );
    // The same samples through the filters: -e, -C, -P.
    let (out, _, _) = tp_report(&["-i", data.to_str().unwrap(), "-e", "sched", "-C", "1"]);
    let want = perf_lines
        .iter()
        .filter(|l| l.contains("sched:sched_switch") && l.contains("[001]"))
        .count();
    assert_eq!(out.lines().filter(|l| !l.contains(" [LOST ")).count(), want);
    let (stat, _, _) = tp_report(&["-i", data.to_str().unwrap(), "--stat"]);
    assert!(stat.contains(&format!("total samples {}", perf_lines.len())), "{stat}");
    let (json, _, _) = tp_report(&["-i", data.to_str().unwrap(), "--json"]);
    assert_eq!(json.lines().count(), perf_lines.len() + lost.len());
    for l in json.lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        assert!(v["ts"].is_u64() && (v["event"].is_string() || v["lost"].is_u64()), "{l}");
    }
}

/// A perf.data cut anywhere in its data prints the samples before the cut, then says where
/// the file ends, and exits 1.
#[test]
fn truncated_perf_data_reads_up_to_the_damage() {
    let tmp = Tmp::new("cut");
    let bytes = std::fs::read(fixture("file.data")).unwrap();
    let full = perf_script(&fixture("file.data"), &[]).lines().count();
    let d = PerfData::open(Cursor::new(bytes.clone())).unwrap();
    let cut = (d.data_offset + d.data_size / 2) as usize;
    let path = tmp.path("cut.data");
    std::fs::write(&path, &bytes[..cut]).unwrap();
    let (out, err, code) = tp_report(&["-i", path.to_str().unwrap()]);
    assert_eq!(code, 1);
    let n = out.lines().count();
    assert!(n > full / 4 && n < full, "{n} of {full} lines");
    assert!(err.contains("perf.data offset") && err.contains("truncated"), "{err}");
    assert_eq!(err.lines().filter(|l| l.contains("truncated")).count(), 1, "{err}");
}

/// A disk that fills while `tp record` writes perf.data: one line says so (with the samples
/// kept and those not written, counted as lost), the events' fds are closed while the
/// command runs on, tp exits 1, and the file, cut back to its last whole round with its
/// features and header written, reads in tp report and perf script alike.
#[test]
fn a_full_disk_keeps_a_readable_perf_data() {
    // The file keeps whole rounds (one pass over the rings: up to MBs when tp falls behind),
    // so the disk holds several.
    let disk = SmallDisk::new("full", "8m");
    let f = disk.0.path("perf.data");
    // 200,000 syscalls: about 24 MB of samples, three times the disk; then 3 s to look at tp
    // while the command runs on unrecorded.
    let work = "dd if=/dev/zero of=/dev/null bs=1 count=100000 2>/dev/null; sleep 3";
    let mut c = Command::new(TP)
        .args(["record", "--perf", "-e", "raw_syscalls:sys_enter", "-o"])
        .arg(&f)
        .args(["--", "sh", "-c", work])
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let tp_pid = c.id();
    let mut err = BufReader::new(c.stderr.take().unwrap());
    let mut stderr = String::new();
    while !stderr.contains("the disk of") {
        let mut line = String::new();
        if err.read_line(&mut line).unwrap() == 0 {
            break;
        }
        stderr.push_str(&line);
    }
    assert!(stderr.contains("the command runs on"), "{stderr}");
    let state = std::fs::read_to_string(format!("/proc/{tp_pid}/stat")).unwrap();
    let state = state.rsplit(") ").next().unwrap().chars().next();
    assert!(state.is_some_and(|s| s != 'Z'), "tp exited before the command: {stderr}");
    let perf_fds: Vec<String> = std::fs::read_dir(format!("/proc/{tp_pid}/fd"))
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .map(|l| l.display().to_string())
        .filter(|l| l.contains("perf_event"))
        .collect();
    assert!(perf_fds.is_empty(), "{perf_fds:?}\n{stderr}");
    let instances: Vec<String> = std::fs::read_dir("/sys/kernel/tracing/instances")
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(&tp_pid.to_string()))
        .collect();
    assert!(instances.is_empty(), "{instances:?}");
    err.read_to_string(&mut stderr).unwrap();
    let st = c.wait().unwrap();
    assert_eq!(st.code(), Some(1), "{stderr}");
    let says: Vec<&str> = stderr.lines().filter(|l| l.contains("the disk of")).collect();
    assert_eq!(says.len(), 1, "{stderr}");
    assert!(says[0].contains(&f.display().to_string()) && says[0].contains("readable"), "{stderr}");
    assert!(stderr.matches("No space left on device").count() <= 1, "{stderr}");
    let number_after = |key: &str| -> u64 {
        let at = says[0].find(key).unwrap_or_else(|| panic!("no {key:?}: {stderr}")) + key.len();
        let digits: String = says[0][at..].chars().take_while(char::is_ascii_digit).collect();
        digits.parse().unwrap()
    };
    let kept = number_after("keeps the first ");
    let unwritten = number_after("samples and is readable; ");
    assert!(kept > 0 && unwritten > 0, "{stderr}");
    assert!(stderr.contains(&format!("not written {unwritten}")), "the summary's lost: {stderr}");
    let (out, rerr, code) = tp_report(&["-i", f.to_str().unwrap()]);
    assert_eq!(code, 0, "{rerr}");
    let tp_samples = out.lines().filter(|l| !l.contains(" [LOST ")).count() as u64;
    let perf_samples = perf_script(&f, &[]).lines().count() as u64;
    assert_eq!((tp_samples, perf_samples), (kept, kept), "{stderr}");
    let mount = disk.0 .0.display().to_string();
    drop(disk);
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
    assert!(!mounts.contains(&mount), "{mount} still mounted");
}

/// A private tracefs instance, removed on every path.
struct Instance(PathBuf);

impl Instance {
    fn new(tag: &str) -> Instance {
        let root = Path::new("/sys/kernel/tracing/instances");
        assert!(root.is_dir(), "these tests need root and tracefs (CI runs as root)");
        let p = root.join(format!("tp-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir(&p);
        std::fs::create_dir(&p).unwrap();
        Instance(p)
    }
    fn write(&self, file: &str, v: &str) {
        std::fs::write(self.0.join(file), v).unwrap_or_else(|e| panic!("{file}: {e}"));
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = std::fs::write(self.0.join("tracing_on"), "0");
        let _ = std::fs::write(self.0.join("events/enable"), "0");
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// The kernel's own text of the same tracepoint hits: a tracefs instance records the same
/// two events while perf samples them (each hit writes the ftrace record and the perf
/// sample from the same arguments), and every tracepoint line tp prints from perf's raw
/// sample is found, byte for byte after the timestamp, in the kernel's `trace` text of that
/// CPU (same task, within 20 ms: the two probes read the clock separately, and this VM's
/// CPU can be taken away between them; the window was 1 ms, so on a loaded machine a hit
/// near either end of perf's span could have its twin just outside it). The flags
/// column is not compared: perf's probe writes the record one preemption level deeper
/// (`common_preempt_count` is one more than in the ftrace record of the same hit, e.g.
/// `d..3.` for the kernel's `d..2.`), and tp prints the record as perf stored it.
#[test]
fn tracepoint_lines_are_the_kernels_text_of_the_same_hits() {
    let _turn = SYSTEM_WIDE.lock().unwrap_or_else(|e| e.into_inner());
    let inst = Instance::new("perfk");
    inst.write("buffer_size_kb", "16384");
    // perf's clock (local_clock), which differs from ftrace's `local` (raw sched_clock) by
    // milliseconds on this VM.
    inst.write("trace_clock", "perf");
    inst.write("events/sched/sched_switch/enable", "1");
    inst.write("events/raw_syscalls/sys_enter/enable", "1");
    let tmp = Tmp::new("kernel");
    let data = tmp.path("perf.data");
    let st = Command::new("perf")
        .args([
            "record",
            "-q",
            "-m",
            "4M",
            "-e",
            "sched:sched_switch",
            "-e",
            "raw_syscalls:sys_enter",
            "-a",
            "-o",
        ])
        .arg(&data)
        .args(["--", "sh", "-c", "ls -R /usr/share/doc > /dev/null; sleep 0.05"])
        .status()
        .expect("running perf record");
    assert!(st.success());
    inst.write("tracing_on", "0");
    let kernel = std::fs::read_to_string(inst.0.join("trace")).unwrap();
    // Events the kernel's buffer did not keep (overwritten, or dropped when a write could
    // not be committed).
    let mut not_kept = 0u64;
    for cpu in 0.. {
        let Ok(stats) = std::fs::read_to_string(inst.0.join(format!("per_cpu/cpu{cpu}/stats")))
        else {
            break;
        };
        for l in stats.lines() {
            for key in ["overrun:", "commit overrun:", "dropped events:"] {
                if let Some(v) = l.strip_prefix(key) {
                    not_kept += v.trim().parse::<u64>().unwrap_or(0);
                }
            }
        }
    }
    drop(inst);
    let (out, err, code) = tp_report(&["-i", data.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let tp: Vec<_> = out
        .lines()
        .filter(|l| !l.contains(" [LOST "))
        .map(|l| parse_tp_line(l).unwrap_or_else(|| panic!("{l}")))
        .collect();
    let (first, last) = (tp.first().unwrap().3, tp.last().unwrap().3);
    // Per (CPU, task, event text): kernel lines within perf's time span and 20 ms (the two
    // probes read the clock separately) minus tp's lines. A hit's two records can be
    // written in different orders (an interrupt's tracepoint between the two probes), so
    // lines are compared as multisets, not in sequence.
    const SLACK_US: u64 = 20_000;
    let key = |cpu: u32, tid: u32, name: &str, text: &str| (cpu, tid, format!("{name}: {text}"));
    let mut count: std::collections::HashMap<(u32, u32, String), i64> = Default::default();
    for l in kernel.lines().filter(|l| !l.starts_with('#')) {
        if let Some(k) = parse_tp_line(l) {
            if k.3 + SLACK_US >= first && k.3 <= last + SLACK_US {
                *count.entry(key(k.2, k.1, &k.4, &k.5)).or_default() += 1;
            }
        }
    }
    // On a busy machine the instance's buffer may overwrite its oldest events: compare
    // from the first event it kept on each CPU.
    let mut kept_from: std::collections::HashMap<u32, u64> = Default::default();
    for k in kernel.lines().filter(|l| !l.starts_with('#')).filter_map(parse_tp_line) {
        kept_from.entry(k.2).or_insert(k.3);
    }
    let mut found = 0usize;
    for t in &tp {
        if not_kept > 0 && kept_from.get(&t.2).is_none_or(|&f| t.3 < f + SLACK_US) {
            continue;
        }
        found += 1;
        *count.entry(key(t.2, t.1, &t.4, &t.5)).or_default() -= 1;
    }
    let missing: Vec<_> =
        count.iter().filter(|(_, &n)| n < 0).map(|(k, n)| format!("{n} x {k:?}")).collect();
    let n_missing: i64 = count.values().filter(|&&n| n < 0).map(|n| -n).sum();
    assert!(found > 100, "{found} lines compared");
    // Runs here once found hits without a twin (about one line in 40,000, once bursts of
    // another process's calls) with the buffer reporting nothing dropped; not seen since the
    // window became 20 ms and the -a tests take turns (10 runs beside CPU and syscall
    // load), but not explained either: the tolerance stays.
    if n_missing > 0 {
        eprintln!("{n_missing} of {found} lines not in the kernel's text: {missing:?}");
    }
    assert!(
        n_missing as usize * 10_000 <= found,
        "of {found} lines, these are not (as often) in the kernel's text: {:?}",
        &missing[..missing.len().min(5)]
    );
}

/// The time of a `tp report` line (trace.dat's or perf.data's layout) in µs: its first
/// `SECS.USECS:` word.
fn line_us(l: &str) -> Option<u64> {
    l.split_whitespace().find_map(|w| {
        let (s, us) = w.strip_suffix(':')?.split_once('.')?;
        (us.len() == 6).then_some(())?;
        Some(s.parse::<u64>().ok()? * 1_000_000 + us.parse::<u64>().ok()?)
    })
}

/// `tp report -i trace.dat -i perf.data`: a tracefs recording (`tp record -a`) and a perf
/// door recording (`tp record -e raw_syscalls:sys_enter -e page-faults -- CMD`, tracepoint
/// and software samples) made at the same time, both on CLOCK_MONOTONIC, print as one
/// timeline: exactly the lines of each file alone (the trace.dat without its header), each
/// file's in their own order, interleaved, times never going back (by more than the 1 µs
/// of rounding: the kernel's text rounds to the microsecond, perf script's truncates).
#[test]
fn several_inputs_merge_into_one_timeline() {
    use std::io::BufRead;
    let _turn = SYSTEM_WIDE.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = Tmp::new("merge");
    let (dat, data) = (tmp.path("t.dat"), tmp.path("p.data"));
    let mut tracefs = Command::new(TP)
        .args(["record", "-e", "sched:sched_switch", "-a", "--duration", "2", "-o"])
        .arg(&dat)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Its start line: the instance records from now on.
    let mut err = std::io::BufReader::new(tracefs.stderr.take().unwrap());
    let mut start = String::new();
    err.read_line(&mut start).unwrap();
    assert!(start.contains("recording"), "tp record -a: {start}");
    let st = Command::new(TP)
        .args(["record", "-e", "raw_syscalls:sys_enter", "-e", "page-faults", "-o"])
        .arg(&data)
        .args(["--", "sh", "-c", "ls / > /dev/null; sleep 0.1; ls /usr > /dev/null"])
        .output()
        .unwrap();
    assert!(st.status.success(), "{}", String::from_utf8_lossy(&st.stderr));
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    assert!(tracefs.wait().unwrap().success(), "tp record -a: {start}{rest}");

    let (dat, data) = (dat.to_str().unwrap(), data.to_str().unwrap());
    let (a, e, code) = tp_report(&["-i", dat, "--no-header"]);
    assert_eq!(code, 0, "{e}");
    let (b, e, code) = tp_report(&["-i", data]);
    assert_eq!(code, 0, "{e}");
    let (merged, e, code) = tp_report(&["-i", dat, "-i", data]);
    assert_eq!(code, 0, "{e}");
    let (a, b): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    assert!(b.iter().any(|l| l.contains("page-faults")), "no software sample: {b:?}");
    assert!(b.iter().any(|l| l.contains("sys_enter")), "no tracepoint sample: {b:?}");
    // Every merged line is the next line of one input; which one, by position.
    let (mut i, mut j) = (0, 0);
    let mut from_b = Vec::new();
    let mut last = 0;
    for (n, l) in merged.lines().enumerate() {
        if a.get(i) == Some(&l) {
            i += 1;
        } else if b.get(j) == Some(&l) {
            j += 1;
            from_b.push(n);
        } else {
            panic!("merged line {n} is neither file's next line: {l:?}");
        }
        let us = line_us(l).unwrap_or_else(|| panic!("no time in {l:?}"));
        assert!(us + 1 >= last, "line {n} goes back in time: {l:?}");
        last = last.max(us);
    }
    assert_eq!((i, j), (a.len(), b.len()), "lines missing from the merge");
    // The perf door's lines fall inside the tracefs recording's time: interleaved.
    let n = a.len() + b.len();
    assert!(from_b[0] > 0 && *from_b.last().unwrap() < n - 1, "not interleaved: {from_b:?}");
}

/// BUILD_ID: `perf buildid-list -i` on tp's perf.data lists the kernel's build id as perf
/// reads the running kernel's (`perf buildid-list -k`) and, for each file the recording
/// mapped (the command, its loader, libc...), the id perf reads from that file itself
/// (`perf buildid-list -i FILE`).
#[test]
fn build_ids_of_the_kernel_and_every_mapped_file() {
    let tmp = Tmp::new("buildid");
    let data = tmp.path("p.data");
    let out = Command::new(TP)
        .args(["record", "-q", "-e", "page-faults", "-o"])
        .arg(&data)
        .args(["--", "ls", "/"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let perf = |args: &[&str], file: &Path| {
        let out = Command::new("perf").arg("buildid-list").args(args).arg(file).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let listed = perf(&["-i"], &data);
    let ids: Vec<(&str, &str)> = listed.lines().filter_map(|l| l.split_once(' ')).collect();
    let kernel = Command::new("perf").args(["buildid-list", "-k"]).output().unwrap();
    let kernel = String::from_utf8(kernel.stdout).unwrap();
    assert!(kernel.trim().len() == 40, "perf buildid-list -k: {kernel:?}");
    assert!(ids.contains(&(kernel.trim(), "[kernel.kallsyms]")), "{listed}");
    let ls = std::fs::canonicalize(
        String::from_utf8(
            Command::new("sh").args(["-c", "command -v ls"]).output().unwrap().stdout,
        )
        .unwrap()
        .trim(),
    )
    .unwrap();
    let files: Vec<&str> = ids.iter().map(|i| i.1).collect();
    assert!(files.contains(&ls.to_str().unwrap()), "{ls:?} not in {listed}");
    assert!(files.iter().any(|f| f.contains("/libc.so")), "no libc in {listed}");
    for (id, file) in ids.iter().filter(|i| i.1.starts_with('/')) {
        assert_eq!(perf(&["-i"], Path::new(file)).trim(), *id, "{file}");
    }
}

/// Whether a live process is named `name` (the guard of tp PID is `tpg-PID`).
fn process_named(name: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        stat.split_once(" (")
            .and_then(|(_, rest)| rest.rsplit_once(") "))
            .is_some_and(|(comm, state)| comm == name && !state.starts_with('Z'))
    })
}

/// The sched_switch samples `tp report --stat` and `perf script` count in `file`, and tp's
/// stderr. (--stat: naming the stacks of every process of a busy machine takes minutes.)
fn switches_read(file: &Path) -> (usize, usize, String) {
    let rep = Command::new(TP).args(["report", "--stat", "-i"]).arg(file).output().unwrap();
    let err = String::from_utf8_lossy(&rep.stderr).into_owned();
    assert!(rep.status.success(), "tp report: {err}");
    let stat = String::from_utf8_lossy(&rep.stdout).into_owned();
    let tp = stat
        .lines()
        .find_map(|l| l.trim().strip_suffix("  sched:sched_switch")?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no sched_switch line in {stat}"));
    let perf =
        perf_script(file, &["-G"]).lines().filter(|l| l.contains("sched:sched_switch:")).count();
    (tp, perf, err)
}

/// A perf-door recording killed with SIGKILL: its guard (holding the events and the file)
/// drains the rings and finishes the file, which tp report and perf script read alike, with
/// the samples of that time; then the guard exits and nothing of the recording stays open.
#[test]
fn a_killed_perf_door_recording_is_finished_by_its_guard() {
    common::require_tracefs();
    let tmp = Tmp::new("killed");
    let out = tmp.path("kg.data");
    let mut rec = Command::new(TP)
        .args(["record", "-g", "-a", "-e", "sched:sched_switch", "-o"])
        .arg(&out)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = rec.id();
    let mut stderr = rec.stderr.take().unwrap();
    // The guard writes to the same stderr: its end is the guard's.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        let _ = tx.send(s);
    });
    std::thread::sleep(std::time::Duration::from_millis(1500));
    rec.kill().unwrap();
    rec.wait().unwrap();
    let err = rx.recv_timeout(std::time::Duration::from_secs(120)).expect("the guard never ended");
    let t0 = std::time::Instant::now();
    while process_named(&format!("tpg-{pid}")) {
        assert!(t0.elapsed().as_secs() < 10, "the guard lives on");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(err.contains("its guard finished"), "{err}");
    let (tp, perf, report_err) = switches_read(&out);
    assert!(tp > 0, "no samples: {err}");
    assert_eq!(tp, perf, "{err}");
    let said: usize = err
        .split("its guard finished")
        .nth(1)
        .and_then(|s| s.split(": ").nth(1)?.split(' ').next()?.parse().ok())
        .unwrap_or(0);
    assert_eq!(said, tp, "{err}");
    assert!(!report_err.contains("not finished"), "{report_err}");
}

/// A perf.data whose writer died before finishing it (data size 0, no features, as a
/// SIGKILL without a guard leaves it): tp report prints its records and says the file
/// was not finished; a file with no records at all is an error, not an empty success.
#[test]
fn tp_report_reads_an_unfinished_perf_data_and_refuses_a_header_only_one() {
    common::require_tracefs();
    let tmp = Tmp::new("unfinished");
    let whole = tmp.path("whole.data");
    common::run(
        Command::new(TP)
            .args([
                "record",
                "-q",
                "--perf",
                "-e",
                "sched:sched_switch",
                "-a",
                "--duration",
                "300ms",
                "-o",
            ])
            .arg(&whole),
    );
    let (samples, _, _) = switches_read(&whole);
    assert!(samples > 0);
    let mut bytes = std::fs::read(&whole).unwrap();
    let u64_at = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
    let (data_at, data_size) = (u64_at(&bytes, 40), u64_at(&bytes, 48));
    // As the writer leaves the header until it finishes: data size and features 0.
    bytes[48..56].fill(0);
    bytes[72..104].fill(0);
    bytes.truncate((data_at + data_size) as usize);
    let unfinished = tmp.path("unfinished.data");
    std::fs::write(&unfinished, &bytes).unwrap();
    let rep = Command::new(TP).args(["report", "-i"]).arg(&unfinished).output().unwrap();
    let err = String::from_utf8_lossy(&rep.stderr);
    assert!(rep.status.success(), "{err}");
    assert!(err.contains("not finished"), "{err}");
    let text = String::from_utf8_lossy(&rep.stdout);
    // Without the formats the samples print as unknown events, one line each.
    assert_eq!(text.lines().filter(|l| !l.trim().is_empty()).count(), samples, "{text}");

    bytes.truncate(data_at as usize);
    let header_only = tmp.path("header-only.data");
    std::fs::write(&header_only, &bytes).unwrap();
    let rep = Command::new(TP).args(["report", "-i"]).arg(&header_only).output().unwrap();
    let err = String::from_utf8_lossy(&rep.stderr);
    assert!(!rep.status.success(), "a header-only file read as a success: {err}");
    assert!(err.contains("not finished") && err.contains("no records"), "{err}");
}
