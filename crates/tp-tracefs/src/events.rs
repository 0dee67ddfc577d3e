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

/// Shell-style wildcard match: `*`, `?`, `[set]`, `[!set]`, ranges `a-z`.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    // Iterative matcher with backtracking to the last `*`.
    let (mut pi, mut ti) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() {
            match p[pi] {
                '*' => {
                    star = Some((pi, ti));
                    pi += 1;
                    continue;
                }
                '?' => {
                    pi += 1;
                    ti += 1;
                    continue;
                }
                '[' => {
                    if let Some((matched, next)) = match_class(&p, pi, t[ti]) {
                        if matched {
                            pi = next;
                            ti += 1;
                            continue;
                        }
                    } else if t[ti] == '[' {
                        pi += 1;
                        ti += 1;
                        continue;
                    }
                }
                c if c == t[ti] => {
                    pi += 1;
                    ti += 1;
                    continue;
                }
                _ => {}
            }
        }
        match star {
            Some((sp, st)) => {
                pi = sp + 1;
                ti = st + 1;
                star = Some((sp, st + 1));
            }
            None => return false,
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

/// Match `c` against the class starting at `p[start] == '['`. Returns (matched, index after
/// the class), or None if the class is unterminated.
fn match_class(p: &[char], start: usize, c: char) -> Option<(bool, usize)> {
    let mut i = start + 1;
    let negate = i < p.len() && (p[i] == '!' || p[i] == '^');
    if negate {
        i += 1;
    }
    let mut matched = false;
    let mut first = true;
    while i < p.len() && (p[i] != ']' || first) {
        first = false;
        if i + 2 < p.len() && p[i + 1] == '-' && p[i + 2] != ']' {
            if p[i] <= c && c <= p[i + 2] {
                matched = true;
            }
            i += 3;
        } else {
            if p[i] == c {
                matched = true;
            }
            i += 1;
        }
    }
    if i >= p.len() {
        return None;
    }
    Some((matched != negate, i + 1))
}

/// The events of `available` that `glob` selects, in `available`'s order.
pub fn match_glob<'a>(available: &'a [EventId], glob: &str) -> Vec<&'a EventId> {
    let glob = glob.trim();
    if let Some((sg, ng)) = glob.split_once(':').or_else(|| glob.split_once('/')) {
        let ng = if ng.is_empty() { "*" } else { ng };
        return available
            .iter()
            .filter(|e| glob_match(sg, &e.system) && glob_match(ng, &e.name))
            .collect();
    }
    // A single word: a system if any system matches, else an event name in any system.
    let by_system: Vec<&EventId> =
        available.iter().filter(|e| glob_match(glob, &e.system)).collect();
    if !by_system.is_empty() {
        return by_system;
    }
    available.iter().filter(|e| glob_match(glob, &e.name)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob_match("sched_*", "sched_switch"));
        assert!(glob_match("*", ""));
        assert!(glob_match("sys_enter_open*", "sys_enter_openat"));
        assert!(!glob_match("sys_enter_open", "sys_enter_openat"));
        assert!(glob_match("sys_[ex]*", "sys_exit"));
        assert!(!glob_match("sys_[!ex]*", "sys_exit"));
        assert!(glob_match("a?c", "abc"));
        assert!(glob_match("*a*b*", "xxaxxbxx"));
        assert!(!glob_match("*a*b", "xxaxxbxx"));
    }

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
