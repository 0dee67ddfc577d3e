//! Stacks in tracefs recordings: the kernel writes an `ftrace:kernel_stack` record (and with
//! `-U` an `ftrace:user_stack` one) right after each event, from the instance's
//! `options/stacktrace` and `options/userstacktrace`, or only for some events and hits
//! through the per-event `stacktrace` trigger (`events/SYS/NAME/trigger`, with an optional
//! `if FILTER`). They are ordinary records in the pages; `tp report` prints them as the
//! kernel's `trace` file does (`<stack trace>` and ` => symbol` lines).

use anyhow::{bail, Context, Result};
use tp_tracefs::{EventId, Instance, Tracefs};

/// Stack options of `tp record` and `tp stream`.
#[derive(clap::Args, Debug, Default, Clone)]
pub struct StackOpts {
    /// Follow every recorded event with the kernel's stack at that point (the instance's
    /// `stacktrace` option; `ftrace:kernel_stack` records).
    #[arg(short = 'T', long = "kernel-stack")]
    pub kernel: bool,
    /// Follow every recorded event with the user-space stack of its task, as the kernel walks
    /// it by frame pointers (the `userstacktrace` option; `ftrace:user_stack` records, up to
    /// 8 return addresses); a traced Rust program's own events too (`TP_STACKS`, unless set).
    #[arg(short = 'U', long = "user-stack")]
    pub user: bool,
    /// The kernel stack only for events matching GLOB, and with `if FILTER` only for the
    /// hits the filter keeps: the per-event `stacktrace` trigger, e.g.
    /// `--stack-trigger 'sched:sched_switch if prev_state == 2'` (repeatable; the events
    /// must be recorded, -e).
    #[arg(long = "stack-trigger", value_name = "GLOB[ if FILTER]")]
    pub triggers: Vec<String>,
}

impl StackOpts {
    pub fn any(&self) -> bool {
        self.kernel || self.user || !self.triggers.is_empty()
    }
}

/// `GLOB` or `GLOB if FILTER`: the glob and the trigger text to write (`stacktrace` or
/// `stacktrace if FILTER`).
fn parse_trigger(spec: &str) -> Result<(&str, String)> {
    let spec = spec.trim();
    let (glob, filter) = match spec.split_once(" if ") {
        Some((g, f)) => (g.trim(), Some(f.trim())),
        None => (spec, None),
    };
    if glob.is_empty() || glob.contains(char::is_whitespace) {
        bail!("--stack-trigger {spec:?}: expected `GLOB` or `GLOB if FILTER` (e.g. 'sched:sched_switch if prev_state == 2')");
    }
    Ok(match filter {
        Some("") => bail!("--stack-trigger {spec:?}: `if` without a filter"),
        Some(f) => (glob, format!("stacktrace if {f}")),
        None => (glob, "stacktrace".to_string()),
    })
}

/// Configure `inst` (tracing off) for the stacks asked for; `events` are the recorded ones.
pub fn apply(tfs: &Tracefs, inst: &Instance, events: &[EventId], opts: &StackOpts) -> Result<()> {
    for (on, option, flag) in
        [(opts.kernel, "stacktrace", "-T"), (opts.user, "userstacktrace", "-U")]
    {
        if !on {
            continue;
        }
        if !inst.file(&format!("options/{option}")).exists() {
            bail!("{flag}: this kernel has no `{option}` trace option");
        }
        inst.set_option(option, true).with_context(|| format!("setting option {option}"))?;
    }
    for spec in &opts.triggers {
        let (glob, trigger) = parse_trigger(spec)?;
        let matched = tfs.match_events(glob)?;
        if matched.is_empty() {
            bail!(
                "--stack-trigger: no event matches {glob:?}: {}",
                super::session::nearest_events(tfs, glob, &[])
            );
        }
        let recorded: Vec<&EventId> = matched.iter().filter(|e| events.contains(e)).collect();
        if recorded.is_empty() {
            bail!("--stack-trigger {spec:?}: none of the events it matches is recorded; add -e {glob}");
        }
        for e in recorded {
            inst.add_trigger(e, &trigger)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trigger_specs() {
        assert_eq!(
            parse_trigger("sched:sched_switch").unwrap(),
            ("sched:sched_switch", "stacktrace".into())
        );
        assert_eq!(
            parse_trigger(" sched:sched_switch if prev_state == 2 ").unwrap(),
            ("sched:sched_switch", "stacktrace if prev_state == 2".into())
        );
        assert!(parse_trigger("sched:sched_switch if ").is_err());
        assert!(parse_trigger("a b").is_err());
        assert!(parse_trigger("").is_err());
    }
}
