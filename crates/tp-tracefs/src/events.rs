//! Event names and the globs users select them with.
//!
//! A glob is `SYSTEM:EVENT` with shell wildcards (`*`, `?`, `[abc]`, `[a-z]`, `[!x]`) on
//! each side, or a single word: `sched` selects every event of the system `sched`, and a
//! word that is no system's name selects events of that name in any system
//! (`sched_switch`). `*:*` and `*` select everything. Matching is against
//! `available_events`, so `tp list GLOB` and `tp record -e GLOB` agree.

use std::fmt;

/// One event, `system:name` as `available_events` lists it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EventId {
    pub system: String,
    pub name: String,
}

impl EventId {
    pub fn new(system: &str, name: &str) -> EventId {
        EventId { system: system.to_string(), name: name.to_string() }
    }

    /// Parse `system:name` (also accepts `system/name`).
    pub fn parse(s: &str) -> Option<EventId> {
        let (sys, name) = s.split_once(':').or_else(|| s.split_once('/'))?;
        if sys.is_empty() || name.is_empty() {
            return None;
        }
        Some(EventId::new(sys.trim(), name.trim()))
    }
}

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.system, self.name)
    }
}

/// Parse `available_events` text (`sched:sched_switch` lines), sorted and deduplicated.
pub fn parse_available_events(text: &str) -> Vec<EventId> {
    let mut v: Vec<EventId> = text.lines().filter_map(|l| EventId::parse(l.trim())).collect();
    v.sort();
    v.dedup();
    v
}

pub use tp_format::glob::glob_match;

/// The events of `available` that `glob` selects, in `available`'s order (the meaning of
/// an event glob: [`tp_format::glob::select_events`]).
pub fn match_glob<'a>(available: &'a [EventId], glob: &str) -> Vec<&'a EventId> {
    tp_format::glob::select_events(available, glob, |e| (&e.system, &e.name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selects_like_the_listing() {
        let av = parse_available_events(
            "sched:sched_switch\nsched:sched_wakeup\nsyscalls:sys_enter_openat\nsyscalls:sys_exit_openat\nraw_syscalls:sys_enter\n",
        );
        assert_eq!(match_glob(&av, "sched").len(), 2);
        assert_eq!(match_glob(&av, "sched:sched_w*").len(), 1);
        assert_eq!(match_glob(&av, "syscalls:sys_enter_openat").len(), 1);
        assert_eq!(match_glob(&av, "*:*").len(), 5);
        assert_eq!(match_glob(&av, "sys_enter").len(), 1);
        assert_eq!(match_glob(&av, "*syscalls").len(), 3);
        assert!(match_glob(&av, "nope").is_empty());
    }
}
