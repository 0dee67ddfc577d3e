//! How long tasks wait to run. From `sched_waking` (or `sched_wakeup`
//! when waking was not recorded; `sched_wakeup_new` for new tasks), `sched_switch` and
//! `sched_migrate_task`:
//! - wait (scheduling latency): from the moment a task becomes runnable (woken, or preempted
//!   while still runnable: `prev_state` R) to its next switch in; per task count, average,
//!   max with both timestamps, and log2 histograms as bcc's runqlat prints them;
//! - run time: complete on-CPU intervals (switch in to switch out) inside the window;
//! - switches in, preemptions (switched out while runnable), migrations.
//!
//! perf sched latency's table is the default view. Events lost on a CPU drop what was in
//! flight there (the task on it, tasks woken to run there) instead of pairing across the gap.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use tp_format::format::{EventFormat, Field};

use tp_format::render::push_json_str;

use crate::timeline::{str_field, Ev, IntField, Summary, Timeline};
use crate::{dur, secs, Error, Log2Hist, Result, Select};

/// The events to record for this analysis.
pub const EVENTS: &[&str] = &["sched"];

/// Why a task was runnable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    Wakeup,
    Preempted,
}

impl Reason {
    fn as_str(self) -> &'static str {
        match self {
            Reason::Wakeup => "wakeup",
            Reason::Preempted => "preempted",
        }
    }
}

/// One wait: runnable at `from` (on `cpu` for a preemption, the wakeup's target CPU for a
/// wakeup), switched in at `to` on `ran_on`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wait {
    pub pid: i32,
    pub from: u64,
    pub to: u64,
    pub ran_on: u32,
    pub reason: Reason,
}

impl Wait {
    pub fn ns(&self) -> u64 {
        self.to - self.from
    }
}

/// Per task.
#[derive(Debug, Default, Clone)]
pub struct Task {
    pub comm: String,
    pub waits: u64,
    pub wait_total: u64,
    pub max_wait: Option<Wait>,
    pub hist: Log2Hist,
    pub run_ns: u64,
    /// Switches in.
    pub switches: u64,
    pub preemptions: u64,
    pub migrations: u64,
    /// Runnable since (ts, CPU it will likely run on, why).
    runnable: Option<(u64, u32, Reason)>,
    /// On CPU since (ts, CPU).
    running: Option<(u64, u32)>,
}

/// The scheduling summary, fed one event at a time.
#[derive(Debug, Default)]
pub struct Stats {
    pub tasks: BTreeMap<i32, Task>,
    pub hist: Log2Hist,
    /// The `worst` longest waits, longest first.
    pub worst: Vec<Wait>,
    worst_n: usize,
    /// Task on each CPU (pid), as the last switch said.
    on_cpu: HashMap<u32, i32>,
    /// Waits and run intervals dropped because events were lost on their CPU.
    pub dropped_by_loss: u64,
}

impl Stats {
    pub fn new(worst: usize) -> Stats {
        Stats { worst_n: worst, ..Stats::default() }
    }

    fn task(&mut self, pid: i32) -> &mut Task {
        self.tasks.entry(pid).or_default()
    }

    /// `pid` woken (sched_waking / sched_wakeup / sched_wakeup_new), to run on `target_cpu`.
    pub fn wakeup(&mut self, ts: u64, pid: i32, comm: &str, target_cpu: u32) {
        if pid == 0 {
            return;
        }
        let t = self.task(pid);
        set_comm(t, comm);
        // Already runnable or running (a wakeup of a running task): nothing starts waiting.
        if t.runnable.is_none() && t.running.is_none() {
            t.runnable = Some((ts, target_cpu, Reason::Wakeup));
        }
    }

    /// sched_switch on `cpu`: `prev` off (still runnable when `prev_runnable`), `next` on.
    #[allow(clippy::too_many_arguments)]
    pub fn switch(
        &mut self,
        ts: u64,
        cpu: u32,
        prev: i32,
        prev_comm: &str,
        prev_runnable: bool,
        next: i32,
        next_comm: &str,
    ) {
        if prev != 0 {
            let t = self.task(prev);
            set_comm(t, prev_comm);
            if let Some((since, c)) = t.running.take() {
                if c == cpu {
                    t.run_ns += ts.saturating_sub(since);
                }
            }
            if prev_runnable {
                t.preemptions += 1;
                t.runnable = Some((ts, cpu, Reason::Preempted));
            }
        }
        self.on_cpu.insert(cpu, next);
        if next == 0 {
            return;
        }
        let t = self.task(next);
        set_comm(t, next_comm);
        t.switches += 1;
        t.running = Some((ts, cpu));
        if let Some((from, _, reason)) = t.runnable.take() {
            let w = Wait { pid: next, from, to: ts, ran_on: cpu, reason };
            let ns = w.ns();
            t.waits += 1;
            t.wait_total += ns;
            t.hist.add(ns);
            if t.max_wait.is_none_or(|m| ns > m.ns()) {
                t.max_wait = Some(w);
            }
            self.hist.add(ns);
            self.keep_worst(w);
        }
    }

    pub fn migrate(&mut self, pid: i32, comm: &str) {
        if pid != 0 {
            let t = self.task(pid);
            set_comm(t, comm);
            t.migrations += 1;
        }
    }

    fn keep_worst(&mut self, w: Wait) {
        if self.worst_n == 0 {
            return;
        }
        if self.worst.len() == self.worst_n && self.worst.last().is_some_and(|l| l.ns() >= w.ns()) {
            return;
        }
        let at = self.worst.partition_point(|x| x.ns() >= w.ns());
        self.worst.insert(at, w);
        self.worst.truncate(self.worst_n);
    }

    /// Events were lost on `cpu`: the task on it and the tasks waiting to run there are in
    /// an unknown state.
    pub fn lost(&mut self, cpu: u32) {
        let mut dropped = 0;
        if let Some(pid) = self.on_cpu.remove(&cpu) {
            if let Some(t) = self.tasks.get_mut(&pid) {
                dropped += t.running.take().is_some() as u64;
            }
        }
        for t in self.tasks.values_mut() {
            if t.runnable.is_some_and(|(_, c, _)| c == cpu) {
                t.runnable = None;
                dropped += 1;
            }
            if t.running.is_some_and(|(_, c)| c == cpu) {
                t.running = None;
                dropped += 1;
            }
        }
        self.dropped_by_loss += dropped;
    }
}

fn set_comm(t: &mut Task, comm: &str) {
    if !comm.is_empty() && t.comm != comm {
        t.comm = comm.to_string();
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Other,
    Wake,
    Switch,
    Migrate,
}

/// The scheduling summary of the window `select` of `tl`, with the `worst` longest waits.
pub fn analyze(tl: &Timeline, select: &Select, worst: usize) -> Result<Summary<Stats>> {
    let be = tl.big_endian;
    let mut kinds: Vec<Kind> = vec![Kind::Other; u16::MAX as usize + 1];
    let mut set = |system: &str, name: &str, k: Kind| -> Option<&EventFormat> {
        let f = tl.event(system, name)?;
        let id = u16::try_from(f.id).ok()?;
        kinds[id as usize] = k;
        Some(f)
    };
    let switch = set("sched", "sched_switch", Kind::Switch).cloned();
    let waking = set("sched", "sched_waking", Kind::Wake).cloned();
    // Without sched_waking, the wakeup is the next best start of the wait.
    let wakeup =
        if waking.is_none() { set("sched", "sched_wakeup", Kind::Wake).cloned() } else { None };
    let wakeup_new = set("sched", "sched_wakeup_new", Kind::Wake).cloned();
    let migrate = set("sched", "sched_migrate_task", Kind::Migrate).cloned();
    let mut missing = Vec::new();
    let Some(switch) = switch else {
        return Err(Error::Missing {
            input: tl.input().to_string(),
            what: "sched:sched_switch events: record with -e sched (nothing to analyse)".into(),
        });
    };
    if waking.is_none() && wakeup.is_none() {
        missing.push("sched_waking/sched_wakeup: waits after wakeups are unknown (only preemptions are timed)".to_string());
    } else if waking.is_none() {
        missing
            .push("sched_waking: waits start at sched_wakeup (after the waker's work)".to_string());
    }
    if wakeup_new.is_none() {
        missing.push("sched_wakeup_new: the first wait of new tasks is unknown".to_string());
    }
    if migrate.is_none() {
        missing.push("sched_migrate_task: migrations are not counted".to_string());
    }
    let field = |f: &EventFormat, n: &str| {
        IntField::of(f, n, be).ok_or_else(|| Error::NoField {
            event: format!("{}:{}", f.system, f.name),
            field: n.to_string(),
        })
    };
    let sw = (
        field(&switch, "prev_pid")?,
        field(&switch, "prev_state")?,
        field(&switch, "next_pid")?,
        switch.field("prev_comm").cloned(),
        switch.field("next_comm").cloned(),
    );
    // Wake events: pid, comm, target_cpu by ID.
    let mut wake: HashMap<u16, (IntField, Option<Field>, Option<IntField>)> = HashMap::new();
    for f in [&waking, &wakeup, &wakeup_new].into_iter().flatten() {
        wake.insert(
            f.id as u16,
            (field(f, "pid")?, f.field("comm").cloned(), IntField::of(f, "target_cpu", be)),
        );
    }
    let mig = match &migrate {
        Some(f) => Some((field(f, "pid")?, f.field("comm").cloned())),
        None => None,
    };
    let mut stats = Stats::new(worst);
    let mut sched_buffer = None;
    let coverage = tl.run(select, |ev| match ev {
        Ev::Event(e) => match kinds[e.id as usize] {
            Kind::Other => {}
            Kind::Switch => {
                let s = |f: &Option<Field>| f.as_ref().map_or("", |f| str_field(f, e.data, be));
                // prev_state: 0 is TASK_RUNNING (the kernel prints R, or R+ with the
                // preemption bit above the state bits).
                let runnable = sw.1.get(e.data) & 0xff == 0;
                sched_buffer.get_or_insert(e.buffer);
                stats.switch(
                    e.ts,
                    e.cpu,
                    sw.0.get(e.data) as i32,
                    s(&sw.3),
                    runnable,
                    sw.2.get(e.data) as i32,
                    s(&sw.4),
                );
            }
            Kind::Wake => {
                if let Some((pid, comm, target)) = wake.get(&e.id) {
                    let comm = comm.as_ref().map_or("", |f| str_field(f, e.data, be));
                    let cpu = target.map_or(e.cpu, |t| t.get(e.data) as u32);
                    stats.wakeup(e.ts, pid.get(e.data) as i32, comm, cpu);
                }
            }
            Kind::Migrate => {
                if let Some((pid, comm)) = &mig {
                    let comm = comm.as_ref().map_or("", |f| str_field(f, e.data, be));
                    stats.migrate(pid.get(e.data) as i32, comm);
                }
            }
        },
        // Losses in other buffers (a Rust program's) say nothing about scheduling.
        Ev::Lost { buffer, cpu, .. } if sched_buffer.is_none_or(|b| b == buffer) => stats.lost(cpu),
        _ => {}
    })?;
    // Names from the file where no event named the task.
    for (pid, t) in stats.tasks.iter_mut() {
        if t.comm.is_empty() {
            t.comm = tl.comm(&coverage, *pid).to_string();
        }
    }
    if select.filters_tasks() {
        stats.keep_selected(select);
    }
    Ok(Summary { stats, coverage, missing })
}

impl Stats {
    /// Only the tasks `select` wants (by pid and name, once every task has its name): their
    /// worst waits and the histogram of their waits.
    fn keep_selected(&mut self, select: &Select) {
        self.tasks.retain(|p, t| select.wants_task(*p, &t.comm));
        let tasks = &self.tasks;
        self.worst.retain(|w| tasks.contains_key(&w.pid));
        self.hist = Log2Hist::default();
        for t in self.tasks.values() {
            for (k, n) in t.hist.buckets.iter().enumerate() {
                if self.hist.buckets.len() <= k {
                    self.hist.buckets.resize(k + 1, 0);
                }
                self.hist.buckets[k] += n;
            }
        }
    }
}

fn ms(ns: u64) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

/// The summary as perf sched latency's table (`top` tasks), runqlat's histograms (one per
/// task too with `per_task`), the longest waits and what the window held.
pub fn write_text(
    out: &mut String,
    summary: &Summary<Stats>,
    tl: &Timeline,
    top: usize,
    per_task: bool,
) {
    let stats = &summary.stats;
    write_tables(out, stats, top, per_task);
    if stats.dropped_by_loss > 0 {
        let _ = writeln!(
            out,
            "\n{} waits or run intervals dropped where events were lost",
            stats.dropped_by_loss
        );
    }
    let _ = writeln!(out, "\nrun time counts complete on-CPU intervals inside the window; waits count from runnable to switch in");
    tl.write_coverage(out, &summary.coverage, &summary.missing);
}

fn write_tables(out: &mut String, stats: &Stats, top: usize, per_task: bool) {
    let mut tasks: Vec<_> = stats.tasks.iter().collect();
    tasks.sort_by(|a, b| {
        let m = |t: &Task| t.max_wait.map_or(0, |w| w.ns());
        m(b.1).cmp(&m(a.1)).then(b.1.run_ns.cmp(&a.1.run_ns)).then(a.0.cmp(b.0))
    });
    let rule = "-".repeat(138);
    let _ = writeln!(out, "{rule}");
    let _ = writeln!(
        out,
        " {:<24} | {:>12} | {:>8} | {:>7} | {:>6} | {:>12} | {:>12} | {:>17} | {:>17} |",
        "Task",
        "Runtime",
        "Switches",
        "Preempt",
        "Migr",
        "Avg delay",
        "Max delay",
        "Max delay start",
        "Max delay end"
    );
    let _ = writeln!(out, "{rule}");
    for (pid, t) in tasks.iter().take(top) {
        let avg = t.wait_total.checked_div(t.waits).map_or("-".into(), ms);
        let (max, start, end) = match t.max_wait {
            Some(w) => (ms(w.ns()), secs(w.from), secs(w.to)),
            None => ("-".into(), "-".into(), "-".into()),
        };
        let _ = writeln!(
            out,
            " {:<24} | {:>12} | {:>8} | {:>7} | {:>6} | {:>12} | {:>12} | {:>17} | {:>17} |",
            format!("{}:{}", t.comm, pid),
            ms(t.run_ns),
            t.switches,
            t.preemptions,
            t.migrations,
            avg,
            max,
            start,
            end
        );
    }
    let _ = writeln!(out, "{rule}");
    if tasks.len() > top {
        let _ = writeln!(out, " ({} more tasks; --top N or --json)", tasks.len() - top);
    }
    let waits: u64 = stats.tasks.values().map(|t| t.waits).sum();
    let _ = writeln!(out, "\nwait from runnable to running, all tasks ({waits} waits):");
    stats.hist.write(out, "usecs");
    if per_task {
        for (pid, t) in &tasks {
            if t.waits > 0 {
                let _ = writeln!(out, "\n{}:{} ({} waits):", t.comm, pid, t.waits);
                t.hist.write(out, "usecs");
            }
        }
    }
    if !stats.worst.is_empty() {
        let _ = writeln!(out, "\nlongest waits (times as tp report prints them):");
        for w in &stats.worst {
            let comm = stats.tasks.get(&w.pid).map_or("", |t| t.comm.as_str());
            let _ = writeln!(
                out,
                "  {:>12}  {}:{}  {} {} -> ran on CPU {} at {}",
                dur(w.ns()),
                comm,
                w.pid,
                w.reason.as_str(),
                secs(w.from),
                w.ran_on,
                secs(w.to)
            );
        }
    }
}

fn wait_json(out: &mut String, w: &Wait) {
    let _ = write!(
        out,
        "{{\"pid\":{},\"ns\":{},\"from_ns\":{},\"to_ns\":{},\"cpu\":{},\"reason\":\"{}\"}}",
        w.pid,
        w.ns(),
        w.from,
        w.to,
        w.ran_on,
        w.reason.as_str()
    );
}

/// The summary as one JSON object (every task).
pub fn write_json(out: &mut String, summary: &Summary<Stats>, tl: &Timeline) {
    let (stats, cov, missing) = (&summary.stats, &summary.coverage, &summary.missing);
    out.push_str("{\"tasks\":[");
    for (i, (pid, t)) in stats.tasks.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{{\"pid\":{pid},\"comm\":");
        push_json_str(out, &t.comm);
        let _ = write!(
            out,
            ",\"run_ns\":{},\"switches\":{},\"preemptions\":{},\"migrations\":{},\"waits\":{},\"wait_total_ns\":{},\"max_wait\":",
            t.run_ns, t.switches, t.preemptions, t.migrations, t.waits, t.wait_total
        );
        match &t.max_wait {
            Some(w) => wait_json(out, w),
            None => out.push_str("null"),
        }
        out.push_str(",\"hist\":");
        t.hist.json(out);
        out.push('}');
    }
    out.push_str("],\"hist\":");
    stats.hist.json(out);
    out.push_str(",\"worst\":[");
    for (i, w) in stats.worst.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        wait_json(out, w);
    }
    let _ = write!(out, "],\"dropped_by_loss\":{},", stats.dropped_by_loss);
    tl.json_coverage(out, cov, missing);
    out.push_str("}\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_runs_preemptions() {
        let mut s = Stats::new(2);
        s.wakeup(100, 5, "a", 0);
        s.wakeup(150, 5, "a", 0); // already runnable: the wait still starts at 100
        s.switch(400, 0, 0, "", false, 5, "a"); // waited 300
        s.switch(1400, 0, 5, "a", true, 6, "b"); // a ran 1000, preempted
        s.switch(1500, 0, 6, "b", false, 5, "a"); // a waited 100
        s.migrate(5, "a");
        s.switch(2500, 0, 5, "a", false, 0, "");
        let a = &s.tasks[&5];
        assert_eq!(
            (a.waits, a.wait_total, a.switches, a.preemptions, a.migrations),
            (2, 400, 2, 1, 1)
        );
        assert_eq!(a.run_ns, 2000);
        assert_eq!(a.max_wait.unwrap().from, 100);
        assert_eq!(s.tasks[&6].run_ns, 100);
        assert_eq!(s.tasks[&6].waits, 0); // its wakeup was not seen
        assert_eq!(s.worst.iter().map(|w| w.ns()).collect::<Vec<_>>(), vec![300, 100]);
        assert_eq!(s.hist.buckets.iter().sum::<u64>(), 2);
    }

    #[test]
    fn lost_events_drop_what_was_in_flight() {
        let mut s = Stats::new(5);
        s.switch(0, 1, 0, "", false, 7, "x");
        s.wakeup(10, 8, "y", 1);
        s.wakeup(10, 9, "z", 0);
        s.lost(1);
        s.switch(50, 1, 7, "x", false, 8, "y");
        s.switch(60, 0, 0, "", false, 9, "z");
        assert_eq!(s.dropped_by_loss, 2);
        assert_eq!((s.tasks[&7].run_ns, s.tasks[&8].waits, s.tasks[&9].waits), (0, 0, 1));
    }
}
