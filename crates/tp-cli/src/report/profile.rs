//! `tp report -i perf.data --folded | --flamegraph SVG | --top`: the samples' stacks
//! summed instead of printed.
//!
//! - `--folded`: one line per distinct stack, `comm;outermost;...;innermost weight`, as
//!   stackcollapse-perf makes from perf script's output of the same file (a frame without
//!   a symbol is `[file name]`, or `[unknown]`; `;` in names becomes `:`, argument lists
//!   are cut; the weight is the samples' period, 1 per tracepoint sample, as perf script
//!   prints no period for them).
//! - `--flamegraph`: those lines drawn by inferno.
//! - `--top`: per function (task, file, symbol, as perf report sorts by default) the share
//!   of the weight sampled in the function itself (self) and in it or below it (children).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Write as _;

use anyhow::Context as _;
use tp_format::perfdata::{PerfData, Sample};

use super::perf::{symbolizer, Event};
use super::{Args, Output};
use tp_symbols::walk;
use tp_symbols::Frame;

/// The functions of a frame, outermost first: the frame's own function (`None`:
/// unknown) unless DWARF names it otherwise, then the ones inlined in it.
pub fn outer_first(f: &Frame) -> impl Iterator<Item = Option<&str>> + '_ {
    let own = f.sym.shown.then(|| f.sym.name.as_deref());
    own.into_iter().chain(f.sym.inlined.iter().rev().map(|n| Some(&**n)))
}

pub fn run<R: std::io::Read + std::io::Seek>(
    args: &Args,
    data: &PerfData<R>,
    events: &[Event],
) -> anyhow::Result<i32> {
    let Some(mut syms) = symbolizer(args, data) else {
        anyhow::bail!("{}: its samples carry no addresses (record with -g for stacks)", args.input);
    };
    let mut folded: HashMap<String, u64> = HashMap::new();
    let mut stacks = 0u64;
    let keep = |e: usize, s: &Sample<'_>| {
        let cpu_ok = args.cpus.is_empty() || s.cpu.is_some_and(|c| args.cpus.contains(&c));
        let pid_ok = args.pids.is_empty()
            || [s.pid, s.tid].iter().flatten().any(|&p| args.pids.contains(&(p as i32)));
        events.get(e).is_some_and(|ev| ev.wanted) && cpu_ok && pid_ok
    };
    let errors = walk(data, &mut syms, keep, |w| {
        if w.frames.is_empty() {
            return;
        }
        let s = w.sample;
        let tid = s.tid.or(s.pid).unwrap_or(0);
        let weight = if events[w.event].tracepoint { 1 } else { s.period.unwrap_or(1) };
        let mut line = match w.comm {
            Some(c) => c.replace(' ', "_"),
            None => format!(":{tid}"),
        };
        for f in w.frames.iter().rev() {
            for name in outer_first(f) {
                line.push(';');
                push_folded_name(&mut line, name, &f.sym.dso);
            }
        }
        *folded.entry(line).or_default() += weight;
        stacks += 1;
    })?;
    let status = say_walk_errors(&args.input, &errors, &syms.notes);
    let mut lines: Vec<(String, u64)> = folded.into_iter().collect();
    lines.sort();
    if let Some(svg) = &args.flamegraph {
        if lines.is_empty() {
            anyhow::bail!("{}: no sample with a stack to draw", args.input);
        }
        let file = std::fs::File::create(svg).with_context(|| format!("cannot create {svg}"))?;
        let mut w = std::io::BufWriter::new(file);
        let text: Vec<String> = lines.iter().map(|(s, n)| format!("{s} {n}")).collect();
        let mut opts = inferno::flamegraph::Options::default();
        opts.title = format!("tp report -i {}", args.input);
        inferno::flamegraph::from_lines(&mut opts, text.iter().map(String::as_str), &mut w)
            .with_context(|| format!("cannot write the flame graph to {svg}"))?;
        w.flush().with_context(|| format!("cannot write {svg}"))?;
        eprintln!("tp: {svg}: flame graph of {stacks} samples ({} distinct stacks)", lines.len());
        return Ok(status);
    }
    let mut out = Output::new();
    if args.top {
        top(&mut out.buf, &lines);
    } else {
        for (s, n) in &lines {
            let _ = writeln!(out.buf, "{s} {n}");
            if out.buf.len() > 1 << 16 {
                out.flush()?;
            }
        }
    }
    out.flush()?;
    Ok(status)
}

/// Print what a [`walk`] could not read and the symbolizer's notes; the status: 1 when a
/// record could not be read.
pub fn say_walk_errors(
    input: &str,
    errors: &[tp_format::perfdata::Error],
    notes: &[String],
) -> i32 {
    for e in errors {
        eprintln!("tp: {input}: {e}");
    }
    for n in notes {
        eprintln!("tp: {n}");
    }
    i32::from(!errors.is_empty())
}

/// One frame of a folded line, as stackcollapse-perf tidies it.
fn push_folded_name(line: &mut String, name: Option<&str>, dso: &str) {
    let name = match name {
        Some(n) => n,
        None if dso == "[unknown]" => "[unknown]",
        None => {
            let base = &dso[dso.rfind('/').map_or(0, |i| i + 1)..];
            let _ = write!(line, "[{base}]");
            return;
        }
    };
    line.push_str(&tidy(name));
}

/// `;` -> `:` and the argument list cut (not inside `<>`, `{}`, `[]`, nor a Go method's
/// `.(` or C++'s `(anonymous namespace)`): stackcollapse-perf's generic tidying.
fn tidy(func: &str) -> String {
    let func = func.replace(';', ":");
    let mut depth = 0i32;
    let mut after_dot = None;
    for (i, c) in func.char_indices() {
        match c {
            '<' | '{' | '[' => depth += 1,
            '>' | '}' | ']' | ')' => depth -= 1,
            '(' => {
                if depth == 0
                    && after_dot != Some(i)
                    && !func[i..].starts_with("(anonymous namespace)")
                {
                    return func[..i].to_string();
                }
                depth += 1;
            }
            '.' => after_dot = Some(i + 1),
            _ => {}
        }
    }
    func
}

/// `--top`: per (task, file, function) the weight in the function itself and in it or
/// below, as percentages of all, hottest self first.
fn top(o: &mut String, lines: &[(String, u64)]) {
    #[derive(Default)]
    struct Hot {
        own: u64,
        children: u64,
    }
    let total: u64 = lines.iter().map(|l| l.1).sum();
    let mut hot: HashMap<(&str, &str), Hot> = HashMap::new();
    for (stack, n) in lines {
        let mut parts = stack.split(';');
        let comm = parts.next().unwrap_or("");
        let frames: Vec<&str> = parts.collect();
        let mut seen: Vec<&str> = Vec::with_capacity(frames.len());
        for f in &frames {
            if !seen.contains(f) {
                seen.push(f);
                hot.entry((comm, f)).or_default().children += n;
            }
        }
        if let Some(leaf) = frames.last() {
            hot.entry((comm, leaf)).or_default().own += n;
        }
    }
    let mut v: Vec<_> = hot.into_iter().collect();
    v.sort_by(|a, b| (b.1.own, b.1.children).cmp(&(a.1.own, a.1.children)).then(a.0.cmp(&b.0)));
    let pct = |n: u64| if total == 0 { 0.0 } else { n as f64 * 100.0 / total as f64 };
    let width = v.iter().map(|((c, _), _)| c.len()).max().unwrap_or(7).max(7);
    let _ = writeln!(o, "# total weight {total} (sum of sample periods; 1 per tracepoint sample)");
    let _ = writeln!(o, "#  Children      Self  {:<width$}  Symbol", "Command");
    for ((comm, func), h) in v {
        let _ = writeln!(
            o,
            "  {:>7.2}%  {:>7.2}%  {comm:<width$}  {func}",
            pct(h.children),
            pct(h.own)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::tidy;

    #[test]
    fn tidies_as_stackcollapse() {
        assert_eq!(tidy("foo(int, char)"), "foo");
        assert_eq!(tidy("a;b"), "a:b");
        assert_eq!(tidy("Vec<(u8, u8)>::push"), "Vec<(u8, u8)>::push");
        assert_eq!(tidy("(anonymous namespace)::f(int)"), "(anonymous namespace)::f");
        assert_eq!(tidy("net/http.(*Client).Do"), "net/http.(*Client).Do");
    }
}
