//! The traced processes' mappings, saved in the trace.dat (trace-cmd's PROCMAPS option, one
//! per process) so that `tp faults` can name the file or mapping of a user address.
//!
//! How: a process's mappings are gone by the time it has exited, and reading
//! `/proc/PID/maps` at some moment misses what a short-lived process mapped later. So tp
//! asks the kernel for perf's side-band records while recording: a `dummy` software event
//! per CPU on the command (enabled at its exec, inherited by its children) or on the `-p`
//! processes (their current maps read from /proc first), whose ring receives a MMAP2
//! record for every mapping made (data mappings too), and COMM/FORK records for execs and
//! new processes. At the end the records are replayed in time order: the maps saved are
//! each process's mappings as they were at its exit or at the recording's end, including
//! mappings later unmapped unless another took their place (so addresses of the trace stay
//! nameable). With `-a` the side-band events are per CPU (every process) and the running
//! processes' maps are read from /proc first: every process seen is saved (on a busy
//! machine some 6% of a page-fault recording's file).
//!
//! The ring is read once, at the end: what did not fit (over [`RING_PAGES`] pages of
//! records per CPU) is counted and reported, not guessed.

use anyhow::{Context, Result};
use tp_format::perfdata::{self as pd, Record};
use tp_format::tracedat::{LibMap, ProcMaps};
use tp_perf::counter::{self, Counter, CounterOptions, Sampling, Target};
use tp_perf::events::Event;
use tp_perf::Ring;

use tp_format::maps::{display_name, parse_proc_maps_line, Maps};

/// Data pages per CPU ring (1 MiB): some 8,000 mapping records.
const RING_PAGES: usize = 256;

/// The side-band recording, from before the command runs to its end.
pub struct MapsRecorder {
    _counters: Vec<Counter>,
    rings: Vec<Ring>,
    attr: pd::EventAttr,
    /// Processes seen at the start (-p): (pid, comm, /proc/PID/maps).
    initial: Vec<(i32, String, String)>,
}

/// What was saved: the processes' maps and the records lost.
pub struct Saved {
    pub procmaps: Vec<ProcMaps>,
    pub lost: u64,
}

impl MapsRecorder {
    /// For `-- CMD` (`child`: its pid, not yet exec'd), `-p PIDS` (`threads`: theirs;
    /// `children`: follow new processes) or `-a` (`all`: every process, with or without a
    /// command).
    pub fn start(
        child: Option<i32>,
        pids: &[i32],
        threads: &[i32],
        children: bool,
        all: bool,
    ) -> Result<Option<MapsRecorder>> {
        let (child, threads) = if all { (None, &[][..]) } else { (child, threads) };
        let running: Vec<i32>;
        let pids = if all {
            running = tp_tracefs::process::all_pids();
            &running[..]
        } else {
            pids
        };
        if !all && child.is_none() && threads.is_empty() {
            return Ok(None);
        }
        let ev = Event::symbolic("dummy")?;
        let o = CounterOptions {
            inherit: child.is_some() || children,
            enable_on_exec: child.is_some(),
            disabled: true,
            sampling: Some(Sampling {
                sample_type: pd::sample::TID | pd::sample::TIME,
                period: 1,
                freq: false,
                clockid: Some(libc::CLOCK_MONOTONIC),
                side_records: true,
                mmap_data: true,
                watermark: 0,
                stacks: Default::default(),
            }),
            ..Default::default()
        };
        let targets: Vec<i32> = match child {
            Some(c) => vec![c],
            None => threads.to_vec(),
        };
        let mut counters = Vec::new();
        let mut rings = Vec::new();
        for cpu in counter::online_cpus()? {
            let first = counters.len();
            let on_cpu: Vec<Target> = match all {
                true => vec![Target::Cpu(cpu)],
                false => targets.iter().map(|&t| Target::ThreadOnCpu(t, cpu)).collect(),
            };
            for t in on_cpu {
                let c = Counter::open(&ev, t, &o, None).context(
                    "opening perf's side-band records for the traced processes' mappings",
                )?;
                if counters.len() == first {
                    rings.push(Ring::map(&c, RING_PAGES)?);
                } else {
                    c.set_output(&counters[first])?;
                }
                counters.push(c);
            }
        }
        let initial = pids
            .iter()
            .filter_map(|&p| {
                let comm = std::fs::read_to_string(format!("/proc/{p}/comm")).ok()?;
                let maps = std::fs::read_to_string(format!("/proc/{p}/maps")).ok()?;
                Some((p, comm.trim_end().to_string(), maps))
            })
            .collect();
        if child.is_none() {
            for c in &counters {
                c.enable()?;
            }
        }
        Ok(Some(MapsRecorder {
            attr: counter::file_attr(&ev, &o),
            _counters: counters,
            rings,
            initial,
        }))
    }

    /// Read the records and replay them: each process's maps.
    pub fn finish(mut self) -> Saved {
        let mut maps = Maps::default();
        let mut comms: std::collections::BTreeMap<i32, String> = Default::default();
        for (pid, comm, text) in &self.initial {
            comms.insert(*pid, comm.clone());
            for line in text.lines() {
                if let Some(m) = parse_proc_maps_line(line) {
                    let name = if m.name.is_empty() { "//anon" } else { m.name };
                    maps.map(*pid, m.start, m.end - m.start, m.offset, name);
                }
            }
        }
        // (time, order, record bytes): the rings are per CPU, replayed by time.
        let mut records: Vec<(u64, usize, Vec<u8>)> = Vec::new();
        let mut lost = 0;
        for r in &mut self.rings {
            r.read(|rec| {
                let parsed =
                    pd::RawRecord::from_bytes(rec).and_then(|r| r.parse(Some(&self.attr)).ok());
                let time = parsed.and_then(|r| time_of(&r));
                records.push((time.unwrap_or(0), records.len(), rec.to_vec()));
            });
            let s = r.stats();
            lost += s.lost + s.lost_samples;
        }
        records.sort_by_key(|r| (r.0, r.1));
        for (_, _, bytes) in &records {
            match pd::RawRecord::from_bytes(bytes).map(|r| r.parse(Some(&self.attr))) {
                Some(Ok(Record::Mmap2(m, _) | Record::Mmap(m, _))) => {
                    maps.map(m.pid as i32, m.addr, m.len, m.pgoff, m.filename)
                }
                Some(Ok(Record::Comm { pid, tid, comm, exec, .. })) if pid == tid => {
                    if exec {
                        maps.exec(pid as i32);
                    }
                    comms.insert(pid as i32, comm.to_string());
                }
                Some(Ok(Record::Fork(t, _))) if t.pid != t.ppid => {
                    maps.fork(t.pid as i32, t.ppid as i32);
                    if let Some(c) = comms.get(&(t.ppid as i32)).cloned() {
                        comms.insert(t.pid as i32, c);
                    }
                }
                _ => {}
            }
        }
        let procmaps = maps
            .processes()
            .map(|(pid, list)| ProcMaps {
                pid,
                comm: comms.get(&pid).cloned().unwrap_or_default(),
                maps: list
                    .map(|m| LibMap {
                        start: m.start,
                        end: m.end,
                        name: display_name(&m.name).to_string(),
                    })
                    .collect(),
            })
            .filter(|p| !p.maps.is_empty())
            .collect();
        Saved { procmaps, lost }
    }
}

fn time_of(r: &Record<'_>) -> Option<u64> {
    match r {
        Record::Mmap(_, id) | Record::Mmap2(_, id) | Record::Fork(_, id) | Record::Exit(_, id) => {
            id.time
        }
        Record::Comm { id, .. } => id.time,
        _ => None,
    }
}
