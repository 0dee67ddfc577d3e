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
    last_bytes: u64,
    last_t: Duration,
    ncpus: usize,
}

impl Status {
    pub fn new(live: bool, ncpus: usize) -> Status {
        Status { live, last_draw: None, last_bytes: 0, last_t: Duration::ZERO, ncpus }
    }

    /// Redraw at most every 250 ms: elapsed, bytes, MB/s, lost events per CPU.
    pub fn update(&mut self, elapsed: Duration, bytes: &[(u32, u64)], inst: &Instance) {
        if !self.live {
            return;
        }
        if self.last_draw.is_some_and(|t| t.elapsed() < Duration::from_millis(250)) {
            return;
        }
        self.last_draw = Some(Instant::now());
        let total: u64 = bytes.iter().map(|(_, b)| b).sum();
        let dt = (elapsed - self.last_t).as_secs_f64().max(1e-3);
        let rate = (total - self.last_bytes.min(total)) as f64 / dt / 1e6;
        self.last_bytes = total;
        self.last_t = elapsed;
        let mut line = format!(
            "tp: {:6.1}s  {:>9}  {:7.1} MB/s  lost:",
            elapsed.as_secs_f64(),
            human(total),
            rate
        );
        let stats = inst.all_stats().unwrap_or_default();
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
    capture_cpu: Duration,
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
        "tp: {events} events, {} ({pages} pages) on {} CPUs in {:.2}s ({why}){}",
        human(bytes),
        stats.len(),
        elapsed.as_secs_f64(),
        if written { format!(" -> {}", out.display()) } else { String::new() }
    );
    let (user, sys) = tp_tracefs::process::self_cpu_time();
    eprintln!(
        "tp: recorder CPU {:.3}s (user {:.3}s, system {:.3}s; {:.3}s until the recording stopped, \
         the rest writing the file)",
        (user + sys).as_secs_f64(),
        user.as_secs_f64(),
        sys.as_secs_f64(),
        capture_cpu.as_secs_f64()
    );
    let total_lost: u64 = lost.iter().map(|l| l.from_stats.max(l.from_pages)).sum();
    let flagged: u64 = lost.iter().map(|l| l.flagged_pages).sum();
    if total_lost == 0 && flagged == 0 {
        eprintln!("tp: no events lost");
    } else {
        eprintln!("tp: LOST EVENTS: {total_lost} in total (increase the buffer with -b KB)");
        for l in lost.iter().filter(|l| l.from_stats > 0 || l.flagged_pages > 0) {
            eprintln!(
                "tp:   cpu{}: {} lost (kernel counters), {} pages flagged with missed events ({} counted on them)",
                l.cpu, l.from_stats, l.flagged_pages, l.from_pages
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
