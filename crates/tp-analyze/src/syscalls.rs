//! `strace -c`'s summary from a recording of
//! `raw_syscalls` (or `syscalls:sys_enter_*`/`sys_exit_*`): calls, errors by errno name,
//! total/average/max time per syscall and per task.
//!
//! Counting follows strace: a call counts when it returns (so `exit_group`, which never
//! returns, is listed apart as "entered, did not return"). A call is timed from its entry
//! to its exit by the same task; one whose entry came before the recording or the window is
//! counted but not timed, and what was in flight on a CPU that lost events is left untimed
//! too (its pairing is unknown). Names are the x86_64 table of the `syscalls` crate, which is
//! generated from the kernel's syscall tables (checked against `asm/unistd_64.h` in the tests).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use tp_format::render::push_json_str;

use crate::timeline::{Ev, IntField, Summary, Timeline};
use crate::{dur, Result, Select, TaskFilter};

/// The events to record for this analysis.
pub const EVENTS: &[&str] = &["raw_syscalls"];

/// The name of syscall `nr` on x86_64 (`NR 999` when the table has none).
pub fn name(nr: i64) -> String {
    usize::try_from(nr)
        .ok()
        .and_then(syscalls::x86_64::Sysno::new)
        .map(|s| s.name().to_string())
        .unwrap_or_else(|| format!("NR {nr}"))
}

/// `ENOENT` for 2 (kernel-internal codes such as `ERESTARTSYS` included).
pub fn errno_name(errno: i64) -> String {
    i32::try_from(errno)
        .ok()
        .and_then(|e| syscalls::Errno::new(e).name())
        .map(str::to_string)
        .unwrap_or_else(|| format!("errno {errno}"))
}

/// Per syscall.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Call {
    /// Returns seen (strace's "calls").
    pub calls: u64,
    /// Returns with a value in -4095..=-1.
    pub errors: u64,
    pub errnos: BTreeMap<i64, u64>,
    /// Calls whose entry was seen too, and their time.
    pub timed: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    /// When the longest call returned, and its task.
    pub max_at: (u64, i32),
}

/// Per task (thread).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Task {
    pub calls: u64,
    pub errors: u64,
    pub timed: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    pub max_nr: i64,
}

#[derive(Debug, Clone, Copy)]
struct Pending {
    nr: i64,
    ts: u64,
    cpu: (usize, u32),
    /// The task was wanted (`--pid/--comm`) when it entered: a call that never returns
    /// counts where it entered.
    wanted: bool,
}

/// The summary, fed one entry/exit at a time.
#[derive(Debug, Default)]
pub struct Stats {
    pub calls: BTreeMap<i64, Call>,
    pub tasks: BTreeMap<i32, Task>,
    pending: HashMap<i32, Pending>,
    /// Returns without an entry (the call began before the recording or the window).
    pub began_before: u64,
    /// Entries without a return, per syscall: never returned (exit_group), still in the
    /// kernel when the recording ended, or the return was not recorded.
    pub no_return: BTreeMap<i64, u64>,
    /// Calls in flight on a CPU that lost events: not timed.
    pub cut_by_loss: u64,
}

impl Stats {
    /// A call's entry. Every task's are kept (`wanted`: the task filter's answer now), so
    /// that a task whose name changes in a call (execve) pairs its return with its own
    /// entry, whichever name the filter wants.
    pub fn enter(&mut self, pid: i32, cpu: (usize, u32), nr: i64, ts: u64, wanted: bool) {
        if let Some(p) = self.pending.insert(pid, Pending { nr, ts, cpu, wanted }) {
            self.did_not_return(p);
        }
    }

    /// A wanted call that was entered and never returned (exit_group, or one whose return
    /// is not in the window).
    fn did_not_return(&mut self, p: Pending) {
        if p.wanted {
            *self.no_return.entry(p.nr).or_default() += 1;
        }
    }

    /// The return of a call of a task the filter does not want now: not counted.
    pub fn skip_exit(&mut self, pid: i32, nr: i64) {
        if let Some(p) = self.pending.remove(&pid) {
            if p.nr != nr {
                self.did_not_return(p);
            }
        }
    }

    pub fn exit(&mut self, pid: i32, nr: i64, ret: i64, ts: u64) {
        let took = match self.pending.remove(&pid) {
            Some(p) if p.nr == nr => Some(ts.saturating_sub(p.ts)),
            Some(p) => {
                self.did_not_return(p);
                self.began_before += 1;
                None
            }
            None => {
                self.began_before += 1;
                None
            }
        };
        let c = self.calls.entry(nr).or_default();
        let t = self.tasks.entry(pid).or_default();
        c.calls += 1;
        t.calls += 1;
        if (-4095..=-1).contains(&ret) {
            c.errors += 1;
            t.errors += 1;
            *c.errnos.entry(-ret).or_default() += 1;
        }
        if let Some(ns) = took {
            c.timed += 1;
            c.total_ns += ns;
            t.timed += 1;
            t.total_ns += ns;
            if ns >= c.max_ns {
                c.max_ns = ns;
                c.max_at = (ts, pid);
            }
            if ns >= t.max_ns {
                t.max_ns = ns;
                t.max_nr = nr;
            }
        }
    }

    /// Events were lost on `cpu`: calls that entered there may have lost their return.
    pub fn lost(&mut self, cpu: (usize, u32)) {
        let cut = self.pending.values().filter(|p| p.cpu == cpu && p.wanted).count();
        self.pending.retain(|_, p| p.cpu != cpu);
        self.cut_by_loss += cut as u64;
    }

    /// The end of the window: calls still pending did not return in it.
    pub fn finish(&mut self) {
        for p in std::mem::take(&mut self.pending).into_values() {
            self.did_not_return(p);
        }
    }

    pub fn total(&self) -> Call {
        let mut t = Call::default();
        for c in self.calls.values() {
            t.calls += c.calls;
            t.errors += c.errors;
            t.timed += c.timed;
            t.total_ns += c.total_ns;
            if c.max_ns >= t.max_ns {
                t.max_ns = c.max_ns;
                t.max_at = c.max_at;
            }
        }
        t
    }
}

/// Per event ID: what it is to this analysis.
#[derive(Clone, Copy)]
enum Kind {
    Other,
    Enter(IntField),
    Exit(IntField, IntField),
}

/// The summary of the window `select` of `tl`'s syscall events.
pub fn analyze(tl: &Timeline, select: &Select) -> Result<Summary<Stats>> {
    let be = tl.big_endian;
    let mut kinds: Vec<Kind> = vec![Kind::Other; u16::MAX as usize + 1];
    let mut missing = Vec::new();
    let (enter, exit) = raw_events(tl);
    let mut have_enter = enter.is_some();
    let mut have_exit = exit.is_some();
    if let Some((id, f)) = enter {
        kinds[id as usize] = Kind::Enter(f);
    }
    if let Some((id, f, r)) = exit {
        kinds[id as usize] = Kind::Exit(f, r);
    }
    // syscalls:sys_enter_NAME / sys_exit_NAME carry `__syscall_nr` (and `ret`).
    if !have_enter || !have_exit {
        for f in tl.formats().iter().filter(|f| f.system == "syscalls") {
            let Some(nr) = IntField::of(f, "__syscall_nr", be) else { continue };
            if f.id > u16::MAX as u32 {
                continue;
            }
            if f.name.starts_with("sys_enter_") && !have_enter {
                kinds[f.id as usize] = Kind::Enter(nr);
            } else if f.name.starts_with("sys_exit_") && !have_exit {
                if let Some(ret) = IntField::of(f, "ret", be) {
                    kinds[f.id as usize] = Kind::Exit(nr, ret);
                }
            }
        }
        if kinds.iter().any(|k| !matches!(k, Kind::Other)) {
            missing.push(
                "raw_syscalls: counted from syscalls:sys_enter_*/sys_exit_*, so only the syscalls whose events were enabled".to_string(),
            );
        }
        have_enter |= kinds.iter().any(|k| matches!(k, Kind::Enter(_)));
        have_exit |= kinds.iter().any(|k| matches!(k, Kind::Exit(..)));
    }
    if !have_exit {
        missing.push(
            "syscall returns (raw_syscalls:sys_exit or syscalls:sys_exit_*): no calls can be counted; record with -e raw_syscalls".to_string(),
        );
    }
    if !have_enter {
        missing.push(
            "syscall entries (raw_syscalls:sys_enter or syscalls:sys_enter_*): calls are counted, not timed".to_string(),
        );
    }
    let mut stats = Stats::default();
    let mut wanted = TaskFilter::new(select);
    let coverage = tl.run(select, |ev| match ev {
        Ev::Event(e) => {
            let kind = kinds[e.id as usize];
            if matches!(kind, Kind::Other) {
                return;
            }
            let want = wanted.wants(e.pid, e.names);
            match kind {
                Kind::Enter(nr) => {
                    stats.enter(e.pid, (e.buffer, e.cpu), nr.get(e.data), e.ts, want)
                }
                Kind::Exit(nr, ret) if want => {
                    stats.exit(e.pid, nr.get(e.data), ret.get(e.data), e.ts)
                }
                Kind::Exit(nr, _) => stats.skip_exit(e.pid, nr.get(e.data)),
                Kind::Other => {}
            }
        }
        Ev::Lost { buffer, cpu, .. } => stats.lost((buffer, cpu)),
        _ => {}
    })?;
    stats.finish();
    Ok(Summary { stats, coverage, missing })
}

/// `raw_syscalls:sys_enter` (ID, its `id` field) and `sys_exit` (ID, `id`, `ret`), if recorded.
#[allow(clippy::type_complexity)]
fn raw_events(tl: &Timeline) -> (Option<(u16, IntField)>, Option<(u16, IntField, IntField)>) {
    let be = tl.big_endian;
    let enter = tl
        .event("raw_syscalls", "sys_enter")
        .and_then(|f| Some((u16::try_from(f.id).ok()?, IntField::of(f, "id", be)?)));
    let exit = tl.event("raw_syscalls", "sys_exit").and_then(|f| {
        Some((u16::try_from(f.id).ok()?, IntField::of(f, "id", be)?, IntField::of(f, "ret", be)?))
    });
    (enter, exit)
}

/// Syscalls by total time, then calls (strace's order is by time).
fn by_time(stats: &Stats) -> Vec<(&i64, &Call)> {
    let mut v: Vec<_> = stats.calls.iter().collect();
    v.sort_by(|a, b| {
        b.1.total_ns.cmp(&a.1.total_ns).then(b.1.calls.cmp(&a.1.calls)).then(a.0.cmp(b.0))
    });
    v
}

/// The summary as tables (`top` tasks in the per-task one), with what the window held.
pub fn write_text(out: &mut String, summary: &Summary<Stats>, tl: &Timeline, top: usize) {
    let (stats, cov) = (&summary.stats, &summary.coverage);
    write_tables(out, summary, tl, top);
    if stats.began_before > 0 {
        let _ = writeln!(
            out,
            "\n{} calls began before the window (counted, not timed)",
            stats.began_before
        );
    }
    if stats.cut_by_loss > 0 {
        let _ = writeln!(
            out,
            "{} calls in flight where events were lost (not counted or timed)",
            stats.cut_by_loss
        );
    }
    tl.write_coverage(out, cov, &summary.missing);
}

fn write_tables(out: &mut String, summary: &Summary<Stats>, tl: &Timeline, top: usize) {
    let (stats, cov) = (&summary.stats, &summary.coverage);
    let total = stats.total();
    let _ = writeln!(
        out,
        "{:>6} {:>12} {:>12} {:>12} {:>9} {:>9}  syscall",
        "% time", "total", "avg", "max", "calls", "errors"
    );
    let rule =
        "------ ------------ ------------ ------------ --------- ---------  ----------------";
    let _ = writeln!(out, "{rule}");
    let pct =
        |ns: u64| if total.total_ns == 0 { 0.0 } else { ns as f64 * 100.0 / total.total_ns as f64 };
    let avg = |c: &Call| c.total_ns.checked_div(c.timed).map_or("-".into(), dur);
    let row = |out: &mut String, c: &Call, label: &str| {
        let errors = if c.errors > 0 { c.errors.to_string() } else { String::new() };
        let _ = writeln!(
            out,
            "{:>6.2} {:>12} {:>12} {:>12} {:>9} {:>9}  {}",
            pct(c.total_ns),
            dur(c.total_ns),
            avg(c),
            dur(c.max_ns),
            c.calls,
            errors,
            label
        );
    };
    for (nr, c) in by_time(stats) {
        row(out, c, &name(*nr));
    }
    let _ = writeln!(out, "{rule}");
    row(out, &total, "total");
    if stats.calls.values().any(|c| c.errors > 0) {
        let _ = writeln!(out, "\nerrors:");
        for (nr, c) in &stats.calls {
            if c.errors == 0 {
                continue;
            }
            let list: Vec<String> =
                c.errnos.iter().map(|(e, n)| format!("{} {n}", errno_name(*e))).collect();
            let _ = writeln!(out, "  {:<20} {}", name(*nr), list.join(", "));
        }
    }
    if !stats.no_return.is_empty() {
        let list: Vec<String> =
            stats.no_return.iter().map(|(nr, n)| format!("{} {n}", name(*nr))).collect();
        let _ = writeln!(out, "\nentered, did not return in the window: {}", list.join(", "));
    }
    let mut longest: Vec<_> = stats.calls.iter().filter(|(_, c)| c.timed > 0).collect();
    longest.sort_by_key(|c| std::cmp::Reverse(c.1.max_ns));
    if !longest.is_empty() {
        let _ = writeln!(out, "\nlongest calls (return time as tp report prints it):");
        for (nr, c) in longest.iter().take(5) {
            let (ts, pid) = c.max_at;
            let _ = writeln!(
                out,
                "  {:>12}  {:<16} {} {}-{}",
                dur(c.max_ns),
                name(**nr),
                crate::secs(ts),
                tl.comm(cov, pid),
                pid
            );
        }
    }
    let mut tasks: Vec<_> = stats.tasks.iter().collect();
    tasks.sort_by(|a, b| b.1.total_ns.cmp(&a.1.total_ns).then(b.1.calls.cmp(&a.1.calls)));
    let _ = writeln!(
        out,
        "\nper task{}:",
        if tasks.len() > top { format!(" (top {top} of {})", tasks.len()) } else { String::new() }
    );
    let _ = writeln!(
        out,
        "  {:>8} {:<16} {:>9} {:>9} {:>12} {:>12}  longest",
        "pid", "comm", "calls", "errors", "total", "max"
    );
    for (pid, t) in tasks.iter().take(top) {
        let _ = writeln!(
            out,
            "  {:>8} {:<16} {:>9} {:>9} {:>12} {:>12}  {}",
            pid,
            tl.comm(cov, **pid),
            t.calls,
            t.errors,
            dur(t.total_ns),
            dur(t.max_ns),
            if t.timed > 0 { name(t.max_nr) } else { "-".into() }
        );
    }
}

/// The summary as one JSON object (every task).
pub fn write_json(out: &mut String, summary: &Summary<Stats>, tl: &Timeline) {
    let (stats, cov, missing) = (&summary.stats, &summary.coverage, &summary.missing);
    let call = |out: &mut String, c: &Call| {
        let _ = write!(
            out,
            "\"calls\":{},\"errors\":{},\"timed\":{},\"total_ns\":{},\"max_ns\":{},\"max_at_ns\":{},\"max_pid\":{},\"errnos\":{{",
            c.calls, c.errors, c.timed, c.total_ns, c.max_ns, c.max_at.0, c.max_at.1
        );
        for (i, (e, n)) in c.errnos.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            push_json_str(out, &errno_name(*e));
            let _ = write!(out, ":{n}");
        }
        out.push('}');
    };
    out.push_str("{\"syscalls\":[");
    for (i, (nr, c)) in by_time(stats).into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{{\"nr\":{nr},\"name\":");
        push_json_str(out, &name(*nr));
        out.push(',');
        call(out, c);
        out.push('}');
    }
    out.push_str("],\"total\":{");
    call(out, &stats.total());
    out.push_str("},\"tasks\":[");
    for (i, (pid, t)) in stats.tasks.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{{\"pid\":{pid},\"comm\":");
        push_json_str(out, tl.comm(cov, *pid));
        let _ = write!(
            out,
            ",\"calls\":{},\"errors\":{},\"timed\":{},\"total_ns\":{},\"max_ns\":{}}}",
            t.calls, t.errors, t.timed, t.total_ns, t.max_ns
        );
    }
    out.push_str("],\"no_return\":{");
    for (i, (nr, n)) in stats.no_return.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_json_str(out, &name(*nr));
        let _ = write!(out, ":{n}");
    }
    let _ = write!(
        out,
        "}},\"began_before\":{},\"cut_by_loss\":{},",
        stats.began_before, stats.cut_by_loss
    );
    tl.json_coverage(out, cov, missing);
    out.push_str("}\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_counts_and_times_like_strace() {
        let mut s = Stats::default();
        let cpu = (0, 0);
        // A return with no entry (began before): counted, not timed.
        s.exit(7, 0, 5, 100);
        s.enter(7, cpu, 2, 1000, true);
        s.exit(7, 2, -2, 1500); // openat... ENOENT
        s.enter(7, cpu, 2, 2000, true);
        s.exit(7, 2, 3, 2100);
        s.enter(8, (0, 1), 0, 2000, true);
        s.lost((0, 1)); // its return may be lost
        s.exit(8, 0, 1, 9000);
        s.enter(7, cpu, 231, 3000, true); // exit_group
        s.finish();
        let open = &s.calls[&2];
        assert_eq!(
            (open.calls, open.errors, open.timed, open.total_ns, open.max_ns),
            (2, 1, 2, 600, 500)
        );
        assert_eq!(open.errnos[&2], 1);
        assert_eq!(open.max_at, (1500, 7));
        assert_eq!((s.calls[&0].calls, s.calls[&0].timed), (2, 0));
        assert_eq!((s.began_before, s.cut_by_loss), (2, 1));
        assert_eq!(s.no_return[&231], 1);
        assert_eq!(s.tasks[&7].calls, 3);
        assert_eq!(s.total().calls, 4);
    }

    #[test]
    fn a_call_counts_where_it_returns() {
        let mut s = Stats::default();
        // execve entered as an unwanted name, returned as a wanted one: counted and timed.
        s.enter(7, (0, 0), 59, 1000, false);
        s.exit(7, 59, 0, 1600);
        // The other way round: not counted, and nothing left pending.
        s.enter(7, (0, 0), 59, 2000, true);
        s.skip_exit(7, 59);
        // An unwanted task's exit_group is no wanted call that did not return.
        s.enter(8, (0, 0), 231, 3000, false);
        s.finish();
        assert_eq!((s.calls[&59].calls, s.calls[&59].timed, s.calls[&59].total_ns), (1, 1, 600));
        assert!(s.no_return.is_empty());
        assert_eq!(s.began_before, 0);
    }

    #[test]
    fn names() {
        assert_eq!(name(0), "read");
        assert_eq!(name(110), "getppid");
        assert_eq!(name(262), "newfstatat");
        assert_eq!(name(100_000), "NR 100000");
        assert_eq!(name(-1), "NR -1");
        assert_eq!(errno_name(2), "ENOENT");
        assert_eq!(errno_name(512), "ERESTARTSYS");
    }

    /// The table agrees with this machine's `asm/unistd_64.h` (linux-libc-dev) wherever both
    /// have a number.
    #[test]
    fn table_matches_unistd_64() {
        let path = "/usr/include/x86_64-linux-gnu/asm/unistd_64.h";
        let text = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("{path}: {e} (Debian package linux-libc-dev)"));
        let mut checked = 0;
        for line in text.lines() {
            let mut w = line.split_whitespace();
            let (Some("#define"), Some(n), Some(v)) = (w.next(), w.next(), w.next()) else {
                continue;
            };
            let (Some(n), Ok(v)) = (n.strip_prefix("__NR_"), v.parse::<i64>()) else { continue };
            assert_eq!(name(v), n, "syscall {v}");
            checked += 1;
        }
        assert!(checked > 300, "only {checked} syscalls in {path}");
    }
}
