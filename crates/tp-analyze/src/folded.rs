//! A perf.data's samples' stacks summed instead of printed (`tp report -i perf.data
//! --folded | --flamegraph SVG | --top`):
//!
//! - [`fold`]: one line per distinct stack, `comm;outermost;...;innermost weight`, as
//!   stackcollapse-perf makes from perf script's output of the same file (a frame without
//!   a symbol is `[file name]`, or `[unknown]`; `;` in names becomes `:`, argument lists
//!   are cut; the weight is the samples' period, 1 per tracepoint sample, as perf script
//!   prints no period for them).
//! - [`flamegraph`]: those lines drawn by inferno.
//! - [`write_top`]: per function (task, file, symbol, as perf report sorts by default) the share
//!   of the weight sampled in the function itself (self) and in it or below it (children).

use std::collections::HashMap;
use std::fmt::Write as _;

use tp_format::perfdata::{Error, PerfData, Sample};
use tp_symbols::{walk, Symbols};

/// Folded stacks: `comm;outermost;...;innermost` and its weight, sorted.
#[derive(Debug, Default)]
pub struct Folded {
    pub lines: Vec<(String, u64)>,
    /// Samples with a stack that were summed.
    pub samples: u64,
    /// Records that could not be read (the ones after them were).
    pub errors: Vec<Error>,
}

/// The stacks of the samples `keep(event, sample)` accepts, named by `syms`, each weighing
/// `weight(event, sample)`.
pub fn fold<R: std::io::Read + std::io::Seek>(
    data: &PerfData<R>,
    syms: &mut Symbols,
    keep: impl FnMut(usize, &Sample<'_>) -> bool,
    weight: impl Fn(usize, &Sample<'_>) -> u64,
) -> Result<Folded, Error> {
    let mut folded: HashMap<String, u64> = HashMap::new();
    let mut samples = 0u64;
    let errors = walk(data, syms, keep, |w| {
        if w.frames.is_empty() {
            return;
        }
        let s = w.sample;
        let tid = s.tid.or(s.pid).unwrap_or(0);
        let mut line = match w.comm {
            Some(c) => c.replace(' ', "_"),
            None => format!(":{tid}"),
        };
        for f in w.frames.iter().rev() {
            for name in f.outer_first() {
                line.push(';');
                push_folded_name(&mut line, name, &f.sym.dso);
            }
        }
        *folded.entry(line).or_default() += weight(w.event, s);
        samples += 1;
    })?;
    let mut lines: Vec<(String, u64)> = folded.into_iter().collect();
    lines.sort();
    Ok(Folded { lines, samples, errors })
}

/// Folded `lines` drawn as a flame graph (SVG) titled `title`.
pub fn flamegraph(
    lines: &[(String, u64)],
    title: &str,
    out: impl std::io::Write,
) -> std::io::Result<()> {
    let text: Vec<String> = lines.iter().map(|(s, n)| format!("{s} {n}")).collect();
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = title.to_string();
    inferno::flamegraph::from_lines(&mut opts, text.iter().map(String::as_str), out)
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

/// perf report's table of folded `lines`: per (task, file, function) the weight in the
/// function itself and in it or below, as percentages of all, hottest self first.
pub fn write_top(o: &mut String, lines: &[(String, u64)]) {
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
