//! Finding tracefs and reading what the kernel publishes there: event formats, the page and
//! event headers, symbol tables, cmdlines, the clock.

use std::path::{Path, PathBuf};

use tp_format::format::EventFormat;
use tp_format::header::HeaderPage;

use crate::error::{Error, Result};
use crate::events::{self, EventId};
use crate::sys;

/// Where tracefs is usually mounted, in the order tp looks.
pub const MOUNT_POINTS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// A mounted tracefs.
#[derive(Debug, Clone)]
pub struct Tracefs {
    root: PathBuf,
}

/// uname fields, as trace.dat stores them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uname {
    pub sysname: String,
    pub release: String,
    pub version: String,
    pub machine: String,
}

impl Uname {
    /// `Linux 6.18.44 #1 SMP ... x86_64`, the string trace-cmd stores in its uname option.
    pub fn to_line(&self) -> String {
        format!("{} {} {} {}", self.sysname, self.release, self.version, self.machine)
    }
}

impl Tracefs {
    /// Find tracefs at the usual places; if it is mounted at none, mount it at
    /// `/sys/kernel/tracing`. Errors say whether it is missing or the mount was refused.
    pub fn discover() -> Result<Tracefs> {
        for p in MOUNT_POINTS {
            let root = PathBuf::from(p);
            // EACCES here means tracefs may well be mounted but this user may not look:
            // say "run as root", not "not mounted".
            if sys::probe(&root.join("events"))? {
                return Ok(Tracefs { root });
            }
        }
        let root = PathBuf::from(MOUNT_POINTS[0]);
        if !sys::exists(&root) {
            return Err(Error::NotMounted {
                path: root,
                detail: "the directory does not exist (kernel without CONFIG_TRACING, or \
                         sysfs not mounted)"
                    .into(),
            });
        }
        match sys::mount_tracefs(&root) {
            Ok(()) => Ok(Tracefs { root }),
            Err(Error::NotRoot { .. }) => Err(Error::NotMounted {
                path: root,
                detail: "mounting it was refused: run as root \
                         (mount -t tracefs nodev /sys/kernel/tracing)"
                    .into(),
            }),
            Err(e) => {
                Err(Error::NotMounted { path: root, detail: format!("mounting it failed: {e}") })
            }
        }
    }

    /// Use tracefs at `root` without checks beyond existence.
    pub fn at(root: impl Into<PathBuf>) -> Result<Tracefs> {
        let root = root.into();
        if !sys::exists(&root.join("events")) {
            return Err(Error::NotMounted {
                path: root,
                detail: "no events/ directory there".into(),
            });
        }
        Ok(Tracefs { root })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `root/rel`.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// Read a tracefs file (relative to the root) as text.
    pub fn read(&self, rel: &str) -> Result<String> {
        sys::read_string(&self.path(rel))
    }

    /// Read a tracefs file (relative to the root) as bytes.
    pub fn read_bytes(&self, rel: &str) -> Result<Vec<u8>> {
        sys::read_file(&self.path(rel))
    }

    /// Every event of the running kernel, from `available_events`, sorted.
    ///
    /// The kernel hands the file out a page per `read`, finding its place again by count at
    /// each: a probe another process adds or removes meanwhile shifts the list under it, and
    /// one read of the file misses or repeats events of the kernel's own (seen beside a loop
    /// of probe definitions). So it is read until two reads agree; under churn that never
    /// lets up, the union of the reads, in which no event is missing.
    pub fn available_events(&self) -> Result<Vec<EventId>> {
        const READS: usize = 20;
        let mut last = events::parse_available_events(&self.read("available_events")?);
        let mut union = last.clone();
        for _ in 1..READS {
            let now = events::parse_available_events(&self.read("available_events")?);
            if now == last {
                return Ok(now);
            }
            union.extend(now.iter().cloned());
            last = now;
        }
        union.sort();
        union.dedup();
        Ok(union)
    }

    /// The events `glob` selects (see [`crate::events`] for the syntax); empty if none.
    pub fn match_events(&self, glob: &str) -> Result<Vec<EventId>> {
        let av = self.available_events()?;
        Ok(events::match_glob(&av, glob).into_iter().cloned().collect())
    }

    /// The events any of `globs` selects, deduplicated, in `available_events` order.
    /// A glob that selects nothing is an error ([`Error::NoSuchEvent`]).
    pub fn match_all(&self, globs: &[&str]) -> Result<Vec<EventId>> {
        let av = self.available_events()?;
        let mut picked = vec![false; av.len()];
        for g in globs {
            let m = events::match_glob(&av, g);
            if m.is_empty() {
                return Err(Error::NoSuchEvent { glob: g.to_string() });
            }
            for e in m {
                // Indices into `av`: `m` borrows from it.
                let i = av.iter().position(|x| std::ptr::eq(x, e)).unwrap_or(0);
                picked[i] = true;
            }
        }
        Ok(av.into_iter().zip(picked).filter(|(_, p)| *p).map(|(e, _)| e).collect())
    }

    /// The text of `events/SYS/NAME/format`.
    pub fn event_format_text(&self, ev: &EventId) -> Result<String> {
        self.read(&format!("events/{}/{}/format", ev.system, ev.name))
    }

    /// `events/SYS/NAME/format`, parsed.
    pub fn event_format(&self, ev: &EventId) -> Result<EventFormat> {
        let text = self.event_format_text(ev)?;
        EventFormat::parse(&ev.system, &text).map_err(|e| Error::Parse {
            path: self.path(&format!("events/{}/{}/format", ev.system, ev.name)),
            message: e.to_string(),
        })
    }

    /// Event systems (directories under `events/`), sorted.
    pub fn systems(&self) -> Result<Vec<String>> {
        sys::list_subdirs(&self.path("events"))
    }

    /// Events of one system (directories under `events/SYS/`), sorted.
    pub fn system_events(&self, system: &str) -> Result<Vec<EventId>> {
        Ok(sys::list_subdirs(&self.path(&format!("events/{system}")))?
            .into_iter()
            .map(|n| EventId::new(system, &n))
            .collect())
    }

    /// The `ftrace` system's internal events (`function`, `print`, `bprint`, ...), which
    /// trace.dat stores separately from the others.
    pub fn ftrace_events(&self) -> Result<Vec<EventId>> {
        self.system_events("ftrace")
    }

    /// `events/header_page` text.
    pub fn header_page_text(&self) -> Result<String> {
        self.read("events/header_page")
    }

    /// `events/header_page`, parsed.
    pub fn header_page(&self) -> Result<HeaderPage> {
        let t = self.header_page_text()?;
        HeaderPage::parse(&t)
            .map_err(|m| Error::Parse { path: self.path("events/header_page"), message: m })
    }

    /// `events/header_event` text.
    pub fn header_event_text(&self) -> Result<String> {
        self.read("events/header_event")
    }

    /// `/proc/kallsyms` text (addresses are zero unless root).
    pub fn kallsyms(&self) -> Result<String> {
        sys::read_string(Path::new("/proc/kallsyms"))
    }

    /// `printk_formats` text.
    pub fn printk_formats(&self) -> Result<String> {
        self.read("printk_formats")
    }

    /// `saved_cmdlines` text (`pid comm` lines).
    pub fn saved_cmdlines(&self) -> Result<String> {
        self.read("saved_cmdlines")
    }

    /// `saved_tgids` text (`pid tgid` lines).
    pub fn saved_tgids(&self) -> Result<String> {
        self.read("saved_tgids")
    }

    /// uname(2).
    pub fn uname(&self) -> Result<Uname> {
        let (sysname, release, version, machine) = sys::uname()?;
        Ok(Uname { sysname, release, version, machine })
    }

    /// The CPUs that have a `per_cpu/cpuN` directory, sorted.
    pub fn cpus(&self) -> Result<Vec<u32>> {
        cpus_in(&self.path("per_cpu"))
    }

    /// Names of the existing instances.
    pub fn instances(&self) -> Result<Vec<String>> {
        sys::list_subdirs(&self.path("instances"))
    }
}

pub(crate) fn cpus_in(per_cpu: &Path) -> Result<Vec<u32>> {
    let mut v: Vec<u32> = sys::list_subdirs(per_cpu)?
        .iter()
        .filter_map(|n| n.strip_prefix("cpu")?.parse().ok())
        .collect();
    v.sort_unstable();
    Ok(v)
}

/// Parse a `trace_clock` file: `[local] global counter ...` -> (selected, all).
pub fn parse_trace_clock(text: &str) -> (String, Vec<String>) {
    let mut sel = String::new();
    let mut all = Vec::new();
    for w in text.split_whitespace() {
        if let Some(s) = w.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
            sel = s.to_string();
            all.push(s.to_string());
        } else {
            all.push(w.to_string());
        }
    }
    (sel, all)
}

/// One CPU's `per_cpu/cpuN/stats`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CpuStats {
    pub cpu: u32,
    pub entries: u64,
    /// Events overwritten before they were read (overwrite mode).
    pub overrun: u64,
    pub commit_overrun: u64,
    pub bytes: u64,
    pub oldest_event_ts: String,
    pub now_ts: String,
    /// Events dropped because the buffer was full (non-overwrite mode).
    pub dropped_events: u64,
    pub read_events: u64,
    /// The file as the kernel wrote it (trace.dat stores this text).
    pub text: String,
}

impl CpuStats {
    /// Events the kernel lost on this CPU: overwritten, commit-overrun and dropped.
    pub fn lost(&self) -> u64 {
        self.overrun + self.commit_overrun + self.dropped_events
    }

    pub fn parse(cpu: u32, text: &str) -> CpuStats {
        let mut s = CpuStats { cpu, text: text.to_string(), ..Default::default() };
        for line in text.lines() {
            let Some((k, v)) = line.split_once(':') else { continue };
            let v = v.trim();
            let n = v.parse::<u64>().unwrap_or(0);
            match k.trim() {
                "entries" => s.entries = n,
                "overrun" => s.overrun = n,
                "commit overrun" => s.commit_overrun = n,
                "bytes" => s.bytes = n,
                "oldest event ts" => s.oldest_event_ts = v.to_string(),
                "now ts" => s.now_ts = v.to_string(),
                "dropped events" => s.dropped_events = n,
                "read events" => s.read_events = n,
                _ => {}
            }
        }
        s
    }
}
