//! Event globs (`sched`, `sched:sched_*`, `sys_[ex]*`): the one meaning of an event glob
//! ([`select_events`]) and the one shell-style matcher ([`glob_match`]), for the kernel-side
//! selection (`tp record -e`, `tp list`), `tp report -e` and the `tp` crate's `TP_EVENTS`.
//!
//! ```
//! use tp_format::glob::select_events;
//! let events = [("sched", "sched_switch"), ("sched", "sched_wakeup"), ("irq", "irq_handler_entry")];
//! let id = |e: &(&'static str, &'static str)| (e.0, e.1);
//! assert_eq!(select_events(&events, "sched", id).len(), 2); // a system
//! assert_eq!(select_events(&events, "irq_*", id).len(), 1); // else an event name
//! assert_eq!(select_events(&events, "sched:*wake*", id).len(), 1);
//! ```

/// An event's full name split as [`select_events`] wants it: `sys:name` into its parts, a
/// name without a system (perf's `cpu-clock`) into `("", name)`.
pub fn system_and_name(full: &str) -> (&str, &str) {
    full.split_once(':').unwrap_or(("", full))
}

/// The events that `glob` selects, in their order; `id` gives an event's (system, name).
/// - `SYS:NAME` or `SYS/NAME`: each part matched on its own (an empty `NAME` is `*`);
/// - a single word: every event of the systems it matches if it matches any (as `trace-cmd
///   -e sched`), else the events it matches by name in any system.
pub fn select_events<'a, T: ?Sized>(
    events: impl IntoIterator<Item = &'a T> + Clone,
    glob: &str,
    id: impl Fn(&'a T) -> (&'a str, &'a str),
) -> Vec<&'a T> {
    let glob = glob.trim();
    let pick = |f: &dyn Fn(&str, &str) -> bool| {
        events
            .clone()
            .into_iter()
            .filter(|&e| {
                let (s, n) = id(e);
                f(s, n)
            })
            .collect::<Vec<_>>()
    };
    if let Some((sg, ng)) = glob.split_once(':').or_else(|| glob.split_once('/')) {
        let ng = if ng.is_empty() { "*" } else { ng };
        return pick(&|s, n| glob_match(sg, s) && glob_match(ng, n));
    }
    let by_system = pick(&|s, _| glob_match(glob, s));
    if !by_system.is_empty() {
        return by_system;
    }
    pick(&|_, n| glob_match(glob, n))
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
        let av = [
            ("sched", "sched_switch"),
            ("sched", "sched_wakeup"),
            ("syscalls", "sys_enter_openat"),
            ("syscalls", "sys_exit_openat"),
            ("raw_syscalls", "sys_enter"),
        ];
        let sel = |g: &str| select_events(&av, g, |e| (e.0, e.1)).len();
        assert_eq!(sel("sched"), 2);
        assert_eq!(sel("sched:sched_w*"), 1);
        assert_eq!(sel("sched/"), 2);
        assert_eq!(sel("syscalls:sys_enter_openat"), 1);
        assert_eq!(sel("*:*"), 5);
        assert_eq!(sel("sys_enter"), 1);
        assert_eq!(sel("*syscalls"), 3);
        assert_eq!(sel("nope"), 0);
    }
}
