//! The live status line (only when stderr is a terminal) and the summary at the end.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use tp_tracefs::{CpuStats, Instance};

use super::output::Lost;
use super::Stop;

pub struct Status {
    live: bool,
    last_draw: Option<Instant>,
    /// (elapsed, bytes produced) of the last draws, for the rate over about a second.
    samples: std::collections::VecDeque<(Duration, u64)>,
    ncpus: usize,
}

impl Status {
    pub fn new(live: bool, ncpus: usize) -> Status {
        Status { live, last_draw: None, samples: Default::default(), ncpus }
    }

    /// Redraw at most every 250 ms: elapsed, events, bytes, MB/s, lost events per CPU.
    pub fn update(&mut self, elapsed: Duration, bytes: &[(u32, u64)], inst: &Instance) {
        if !self.live {
            return;
        }
        if self.last_draw.is_some_and(|t| t.elapsed() < Duration::from_millis(250)) {
            return;
        }
        self.last_draw = Some(Instant::now());
        let stats = inst.all_stats().unwrap_or_default();
        let saved: u64 = bytes.iter().map(|(_, b)| b).sum();
        // The capture threads move pages only when a buffer is half full: the bytes still
        // in the buffers count too, or the rate would read 0.0 between wakeups.
        let produced = saved + stats.iter().map(|s| s.bytes).sum::<u64>();
        let events: u64 = stats.iter().map(|s| s.read_events + s.entries).sum();
        self.samples.push_back((elapsed, produced));
        while self.samples.len() > 2 && elapsed - self.samples[1].0 >= Duration::from_secs(1) {
            self.samples.pop_front();
        }
        let (t_old, b_old) = self.samples[0];
        let dt = (elapsed - t_old).as_secs_f64();
        let rate = if dt > 0.0 { produced.saturating_sub(b_old) as f64 / dt / 1e6 } else { 0.0 };
        let mut line = format!(
            "tp: {:6.1}s  {:>12}  {:>9}  {:7.1} MB/s  lost:",
            elapsed.as_secs_f64(),
            count(events, "event"),
            human(saved),
            rate
        );
        for s in stats.iter().take(self.ncpus.min(16)) {
            line.push_str(&format!(" {}:{}", s.cpu, s.lost()));
        }
        let mut e = std::io::stderr().lock();
        let _ = write!(e, "\r\x1b[K{line}");
        let _ = e.flush();
    }

    pub fn clear(&mut self) {
        if self.live && self.last_draw.is_some() {
            let mut e = std::io::stderr().lock();
            let _ = write!(e, "\r\x1b[K");
            let _ = e.flush();
        }
    }
}

/// `1 page`, `2 pages`.
pub fn count(n: u64, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

pub fn human(b: u64) -> String {
    if b >= 1 << 30 {
        format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64)
    } else if b >= 1 << 20 {
        format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64)
    } else if b >= 1 << 10 {
        format!("{:.1} KiB", b as f64 / 1024.0)
    } else {
        format!("{b} B")
    }
}

/// tp's own CPU time (user + system) when recording started and when it stopped.
#[derive(Clone, Copy, Debug)]
pub struct CpuTimes {
    pub setup: Duration,
    pub recording: Duration,
}

/// The summary on stderr. Lost events are always spelled out, per CPU.
#[allow(clippy::too_many_arguments)]
pub fn summary(
    out: &Path,
    elapsed: Duration,
    bytes: u64,
    page_size: usize,
    stats: &[CpuStats],
    lost: &[Lost],
    stop: Stop,
    written: bool,
    cpu: CpuTimes,
) {
    let events: u64 = stats.iter().map(|s| s.read_events + s.entries).sum();
    let why = match stop {
        Stop::CommandExited(_) => "command exited".to_string(),
        Stop::Duration => "duration reached".to_string(),
        Stop::Signal(s) => format!("signal {}", signal_name(s)),
        Stop::PidsGone => "traced processes exited".to_string(),
    };
    let pages = bytes / page_size.max(1) as u64;
    eprintln!(
        "tp: {}, {} ({}) on {} in {:.2}s ({why}){}",
        count(events, "event"),
        human(bytes),
        count(pages, "page"),
        count(stats.len() as u64, "CPU"),
        elapsed.as_secs_f64(),
        if written { format!(" -> {}", out.display()) } else { String::new() }
    );
    let (user, sys) = tp_tracefs::process::self_cpu_time();
    let total = user + sys;
    eprintln!(
        "tp: tp's own CPU time {:.3}s: {:.3}s setting up (formats, buffers), {:.3}s while recording, \
         {:.3}s writing the file",
        total.as_secs_f64(),
        cpu.setup.as_secs_f64(),
        cpu.recording.saturating_sub(cpu.setup).as_secs_f64(),
        total.saturating_sub(cpu.recording).as_secs_f64()
    );
    let in_kernel: u64 = lost.iter().map(|l| l.in_kernel()).sum();
    let flagged: u64 = lost.iter().map(|l| l.flagged_pages).sum();
    let unwritten: u64 = lost.iter().map(|l| l.unwritten).sum();
    if in_kernel == 0 && flagged == 0 && unwritten == 0 {
        eprintln!("tp: no events lost");
        return;
    }
    // The advice fits the cause: a bigger buffer does not help a full disk.
    let mut advice = Vec::new();
    if in_kernel > 0 || flagged > 0 {
        advice.push("increase the buffer with -b KB");
    }
    if unwritten > 0 {
        advice.push("the disk was full: free space or give -o on another disk");
    }
    eprintln!("tp: LOST EVENTS: {} in total ({})", in_kernel + unwritten, advice.join("; "));
    for l in lost {
        if l.from_stats > 0 || l.flagged_pages > 0 {
            eprintln!(
                "tp:   cpu{}: {} lost (kernel counters), {} pages flagged with missed events ({} counted on them)",
                l.cpu, l.from_stats, l.flagged_pages, l.from_pages
            );
        }
        if l.unwritten > 0 || l.unwritten_pages > 0 {
            let pages = match l.unwritten_pages {
                0 => String::new(),
                n => format!(" ({} dropped to fit the file)", count(n, "page")),
            };
            eprintln!(
                "tp:   cpu{}: {} not written: disk full{pages}",
                l.cpu,
                count(l.unwritten, "event")
            );
        }
    }
}

fn signal_name(s: i32) -> &'static str {
    match s {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        _ => "?",
    }
}
