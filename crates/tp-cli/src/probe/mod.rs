//! `tp probe`: dynamic probes on a binary's functions (uprobes, uretprobes), defined in
//! tracefs `uprobe_events` under perf's names (`probe_BINARY:FUNC`, `FUNC__return`), so that
//! `tp record -e probe_BINARY:FUNC` records them like any tracepoint. They stay until
//! `tp probe --del`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use tp_format::glob::glob_match;
use tp_tracefs::{ProbeKind, Tracefs, Uprobe};

pub mod run;
pub mod typed;

use tp_symbols::elf;
use tp_symbols::probe::{dwarf, sdt};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The binary (executable or shared library) the probe goes into.
    #[arg(short = 'x', long = "exec", value_name = "BINARY")]
    pub exec: Option<PathBuf>,
    /// Define a probe: FUNC[%return][+OFF], then fetch arguments (NAME=FETCHARG or
    /// FETCHARG: %di:u64, +0(%si):string, $retval). The default action with a FUNC.
    #[arg(short = 'a', long)]
    pub add: bool,
    /// List the binary's functions (demangled), those matching GLOB.
    #[arg(short = 'F', long, value_name = "GLOB", num_args = 0..=1, default_missing_value = "*")]
    pub funcs: Option<String>,
    /// List the binary's USDT probes (`.note.stapsdt`): provider, name, location, semaphore,
    /// argument specs.
    #[arg(long)]
    pub sdt: bool,
    /// List the probes defined now.
    #[arg(short = 'l', long)]
    pub list: bool,
    /// Remove the probes GROUP:EVENT matching GLOB (`probe_x:*`).
    #[arg(short = 'd', long, value_name = "GLOB")]
    pub del: Option<String>,
    /// FUNC[%return][+OFF] [NAME=FETCHARG ...], or sdt_PROVIDER:NAME (a USDT probe, its
    /// arguments from its note). Typed arguments in both: argN:string (the text argN points
    /// to), argN:u32, +OFF(argN):TYPE, NAME=argN:TYPE
    #[arg(value_name = "PROBE")]
    pub spec: Vec<String>,
}

pub fn run(a: Args) -> Result<i32> {
    if let Some(g) = &a.funcs {
        let bin = elf::Binary::read(need_exec(&a, "--funcs")?)?;
        for name in function_names(&bin, g)? {
            println!("{name}");
        }
        return Ok(0);
    }
    if a.sdt {
        let bin = elf::Binary::read(need_exec(&a, "--sdt")?)?;
        for n in sdt::notes(&bin)? {
            println!(
                "sdt_{}:{}\tlocation {:#x}  semaphore {:#x}  arguments {}",
                event_name(&n.provider),
                n.name,
                n.location,
                n.semaphore,
                n.args
            );
        }
        return Ok(0);
    }
    let tfs = Tracefs::discover()?;
    if a.list {
        for p in tfs.uprobes()? {
            println!("  {}:{}\t(on {})", p.group, p.event, place(&p));
        }
        return Ok(0);
    }
    if let Some(g) = &a.del {
        return delete(&tfs, g);
    }
    if a.spec.is_empty() {
        bail!("nothing to do: give FUNC to probe (with -x BINARY), or --list, --del GLOB, --funcs");
    }
    let Some(exec) = &a.exec else {
        if tfs.has_kprobes() {
            bail!("kernel function probes (kprobes) are not supported by tp probe yet; give -x BINARY for a user-space probe");
        }
        bail!("this kernel has no kprobe events (no {}: CONFIG_KPROBE_EVENTS is off), so kernel functions cannot be probed; give -x BINARY for a user-space probe", tfs.path("kprobe_events").display());
    };
    if a.spec[0].starts_with("sdt_") {
        return add_sdt(&tfs, exec, &a.spec);
    }
    let p = uprobe_for(exec, &a.spec[0], &a.spec[1..])?;
    define(&tfs, &p)?;
    println!(
        "\nYou can now use it in all tp tools, such as:\n\n\ttp record -e {}:{} -- COMMAND",
        p.group, p.event
    );
    Ok(0)
}

/// `--add sdt_PROVIDER:NAME`: the USDT probes of the binary matching it, defined until
/// `--del` (as `perf probe --add sdt_...` does).
fn add_sdt(tfs: &Tracefs, exec: &Path, spec: &[String]) -> Result<i32> {
    let bin = elf::Binary::read(exec)?;
    let mut want = run::sdt_uprobes(std::slice::from_ref(&bin), &spec[0])?;
    for p in &mut want {
        p.args = typed::apply_sdt(&p.args, &spec[1..])?;
    }
    if want.is_empty() {
        bail!(
            "{} has no SDT probe matching {} (tp probe -x {} --sdt lists them)",
            bin.path.display(),
            spec[0],
            exec.display()
        );
    }
    for p in want {
        define(tfs, &p)?;
    }
    Ok(0)
}

/// Define `p` unless its name is taken, and say so as perf probe does.
fn define(tfs: &Tracefs, p: &Uprobe) -> Result<()> {
    if tfs.uprobes()?.iter().any(|q| q.group == p.group && q.event == p.event) {
        let name = format!("{}:{}", p.group, p.event);
        bail!("{name} is already defined (tp probe --list; remove it with tp probe --del {name})");
    }
    tfs.add_uprobe(p)?;
    println!("Added new event:\n  {}:{}\t(on {})", p.group, p.event, place(p));
    Ok(())
}

fn need_exec<'a>(a: &'a Args, what: &str) -> Result<&'a Path> {
    a.exec.as_deref().with_context(|| format!("{what} needs -x BINARY"))
}

/// `PATH:0xOFF [ARGS]` of a probe, for listings.
pub(crate) fn place(p: &Uprobe) -> String {
    let mut s = format!("{}:0x{:x}", p.path, p.offset);
    if let Some(r) = p.ref_ctr {
        s.push_str(&format!("(0x{r:x})"));
    }
    if p.kind == ProbeKind::Return {
        s.push_str(" return");
    }
    for a in &p.args {
        s.push(' ');
        s.push_str(a);
    }
    s
}

fn delete(tfs: &Tracefs, glob: &str) -> Result<i32> {
    let (gg, eg) = glob.split_once(':').unwrap_or(("*", glob));
    let mut n = 0;
    for p in tfs.uprobes()? {
        if glob_match(gg, &p.group) && glob_match(eg, &p.event) {
            tfs.remove_uprobe(&p.group, &p.event)?;
            println!("Removed event: {}:{}", p.group, p.event);
            n += 1;
        }
    }
    if n == 0 {
        bail!("no probe matches {glob:?} (tp probe --list)");
    }
    Ok(0)
}

/// Demangled function names matching `glob` (or whose symbol matches), sorted, once each.
pub fn function_names(bin: &elf::Binary, glob: &str) -> Result<Vec<String>> {
    let mut v: Vec<String> = bin
        .functions()?
        .into_iter()
        .filter(|f| glob_match(glob, &f.name) || glob_match(glob, &f.mangled))
        .map(|f| f.name)
        .collect();
    v.dedup();
    Ok(v)
}

/// perf's group for a binary: `probe_` and its name up to the first dot, other characters
/// than letters, digits and `_` as `_` (`libc.so.6` -> `probe_libc`).
pub fn group_for(path: &Path) -> String {
    let base = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let stem = base.split('.').next().unwrap_or("");
    format!("probe_{}", event_name(stem))
}

/// A name the kernel takes as an event name: letters, digits and `_`, not starting with a
/// digit.
pub fn event_name(s: &str) -> String {
    let mut n: String =
        s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
    if n.is_empty() || n.starts_with(|c: char| c.is_ascii_digit()) {
        n.insert(0, '_');
    }
    n
}

/// The uprobe `FUNC[%return][+OFF]` in `exec` with `args` passed through.
pub fn uprobe_for(exec: &Path, spec: &str, args: &[String]) -> Result<Uprobe> {
    let path = std::fs::canonicalize(exec)
        .with_context(|| format!("-x {}: no such file", exec.display()))?;
    let (spec, kind) = match spec.strip_suffix("%return") {
        Some(s) => (s, ProbeKind::Return),
        None => (spec, ProbeKind::Entry),
    };
    let (func, off) = match spec.split_once('+') {
        Some((f, o)) => (f, parse_offset(o)?),
        None => (spec, 0),
    };
    if func.is_empty() {
        bail!("no function in probe {spec:?} (FUNC[%return][+OFF])");
    }
    let bin = elf::Binary::read(&path)?;
    let funcs = bin.functions()?;
    let mut addrs: Vec<u64> =
        funcs.iter().filter(|f| f.mangled == func || f.name == func).map(|f| f.address).collect();
    addrs.sort_unstable();
    addrs.dedup();
    let addr = match addrs[..] {
        [a] => a,
        [] => {
            let names: Vec<String> = funcs.iter().map(|f| f.name.clone()).collect();
            let near = tp_perf::events::suggest(func, &names);
            let hint = if near.is_empty() {
                "tp probe -x BINARY --funcs lists them".to_string()
            } else {
                format!("did you mean {}?", near.join(", "))
            };
            bail!("{} has no function {func:?} (stripped?): {hint}", path.display());
        }
        _ => bail!(
            "{func:?} names {} functions in {} (at {}): give the mangled symbol",
            addrs.len(),
            path.display(),
            addrs.iter().map(|a| format!("{a:#x}")).collect::<Vec<_>>().join(", ")
        ),
    };
    // argN:TYPE by the calling convention; the other arguments by name from DWARF, which
    // may move the probe past the prologue.
    let named: Vec<dwarf::Named<'_>> =
        args.iter().filter(|a| typed::parse(a).is_none()).filter_map(|a| variable_arg(a)).collect();
    let (pc, mut by_name) = match named.first() {
        None => (addr + off, Vec::new()),
        Some(_) if kind == ProbeKind::Return => bail!(
            "argument {:?}: a function's arguments by name are at its entry, not its return (use $retval)",
            named[0].1
        ),
        Some(_) => dwarf::fetchargs(&bin, addr, addr + off, &named)?,
    };
    by_name.reverse();
    let args: Vec<String> = args
        .iter()
        .map(|a| match (typed::parse(a), variable_arg(a)) {
            (Some(t), _) => typed::function_arg(&t),
            (None, Some(_)) => Ok(by_name.pop().unwrap_or_default()),
            (None, None) => Ok(a.clone()),
        })
        .collect::<Result<_>>()?;
    let offset = bin.file_offset(pc)?;
    let mut event = event_name(&tp_symbols::demangle(func).replace("::", "_"));
    if off != 0 {
        event = format!("{event}_{off}");
    }
    if kind == ProbeKind::Return {
        event.push_str("__return");
    }
    Ok(Uprobe {
        kind,
        group: group_for(&path),
        event,
        path: path.to_string_lossy().into_owned(),
        offset,
        ref_ctr: None,
        args,
    })
}

/// `[NAME=]VAR[:TYPE]` with VAR a C identifier: a function argument by name, as (NAME, VAR,
/// TYPE); none for a fetcharg (`%di`, `+0(%si):string`, `$retval`, `@sym` ...).
fn variable_arg(a: &str) -> Option<dwarf::Named<'_>> {
    let (name, rest) = a.split_once('=').unwrap_or(("", a));
    let (var, ty) = match rest.split_once(':') {
        Some((v, t)) => (v, Some(t)),
        None => (rest, None),
    };
    let ident = |s: &str| {
        s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    ident(var).then_some((if name.is_empty() { var } else { name }, var, ty))
}

fn parse_offset(s: &str) -> Result<u64> {
    let r = match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse(),
    };
    r.map_err(|_| anyhow::anyhow!("bad offset {s:?} (decimal or 0x hex)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_like_perf() {
        assert_eq!(group_for(Path::new("/lib/x86_64-linux-gnu/libc.so.6")), "probe_libc");
        assert_eq!(group_for(Path::new("/tmp/my-prog")), "probe_my_prog");
        assert_eq!(event_name("9x"), "_9x");
    }

    #[test]
    fn variables_are_told_from_fetchargs() {
        assert_eq!(variable_arg("x"), Some(("x", "x", None)));
        assert_eq!(variable_arg("n=len:u16"), Some(("n", "len", Some("u16"))));
        for f in ["%di", "x=%di:s32", "+0(%si):string", "$retval", "@sym", "\\5", "9x"] {
            assert_eq!(variable_arg(f), None, "{f}");
        }
    }
}
