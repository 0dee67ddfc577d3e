//! Typed probe arguments, bpftrace's and perf's way of saying what an argument holds, put
//! onto the kernel's fetchargs:
//!
//! | written | fetcharg (for an argument in `%di`) |
//! |---|---|
//! | `arg1:string` | `arg1=+0(%di):string` (the text the pointer points to, as bpftrace's `str(arg1)`) |
//! | `arg2:u32` | `arg2=%si:u32` |
//! | `+8(arg1):u64` | `arg1=+8(%di):u64` (memory at an offset from the pointer) |
//! | `q=arg1:string` | `q=+0(%di):string` (another name) |
//!
//! `argN` is where the N-th argument is: an SDT probe's from its note (its own numbering,
//! 1-based as in the note and in perf's `argN` names), a function's from the x86-64 calling
//! convention (`%di %si %dx %cx %r8 %r9`, 1-based as the kernel's `$argN`). A typed
//! argument named `argN` replaces that argument; another name is added.

use anyhow::{bail, Result};

/// A typed argument as written: the name it prints under, the argument's number, the
/// offset to read at (none: the value itself), and its type.
#[derive(Debug, PartialEq, Eq)]
pub struct Typed {
    pub name: String,
    pub n: usize,
    pub deref: Option<i64>,
    pub ty: String,
}

/// `[NAME=]argN:TYPE` or `[NAME=]±OFF(argN):TYPE`; none when `s` is not of that form (a
/// fetcharg or a variable name, passed on as it is).
pub fn parse(s: &str) -> Option<Typed> {
    let (name, rest) = match s.split_once('=') {
        Some((n, r)) => (Some(n), r),
        None => (None, s),
    };
    let (expr, ty) = rest.rsplit_once(':')?;
    let arg_n = |a: &str| a.strip_prefix("arg")?.parse::<usize>().ok().filter(|&n| n > 0);
    let (n, deref) = match expr.strip_suffix(')').and_then(|e| e.split_once('(')) {
        Some((off, inner)) => {
            let off = off.strip_prefix('+').unwrap_or(off);
            (arg_n(inner)?, Some(off.parse::<i64>().ok()?))
        }
        None => (arg_n(expr)?, None),
    };
    if ty.is_empty() {
        return None;
    }
    // A string is the text a pointer points to: `arg1:string` reads at +0.
    let deref = deref.or((ty == "string" || ty == "ustring").then_some(0));
    let name = name.map_or_else(|| format!("arg{n}"), str::to_string);
    Some(Typed { name, n, deref, ty: ty.to_string() })
}

impl Typed {
    /// The fetcharg, `place` being where argument N is (`%di`, `-8(%bp)`).
    pub fn fetcharg(&self, place: &str) -> Result<String> {
        if let Some(imm) = place.strip_prefix('\\') {
            bail!("arg{} is the constant {imm}: it points to nothing", self.n);
        }
        let at = match self.deref {
            Some(off) => format!("{off:+}({place})"),
            None => place.to_string(),
        };
        Ok(format!("{}={at}:{}", self.name, self.ty))
    }
}

/// Apply the typed arguments of `typed` to a probe's `args` (`argK=PLACE:TYPE`, as an SDT
/// note gives them): each replaces the argument of its name or is added. Any other word of
/// `typed` is an error naming the forms.
pub fn apply_sdt(args: &[String], typed: &[String]) -> Result<Vec<String>> {
    let mut out = args.to_vec();
    for t in typed {
        let Some(ty) = parse(t) else {
            bail!("{t:?}: an SDT probe's arguments are typed as argN:TYPE, +OFF(argN):TYPE or NAME=argN:TYPE (argN:string, arg2:u32)");
        };
        let Some(place) = args.get(ty.n - 1).and_then(|a| sdt_place(a)) else {
            bail!("{t:?}: the probe has {} arguments", args.len());
        };
        let arg = ty.fetcharg(place)?;
        match out.iter().position(|a| a.split_once('=').is_some_and(|(n, _)| n == ty.name)) {
            Some(i) => out[i] = arg,
            None => out.push(arg),
        }
    }
    Ok(out)
}

/// The place of `NAME=PLACE:TYPE` (PLACE may hold ':' of its own? it does not: registers,
/// `OFF(%REG)` and `\IMM`).
fn sdt_place(arg: &str) -> Option<&str> {
    let (_, rest) = arg.split_once('=')?;
    Some(rest.rsplit_once(':').map_or(rest, |(p, _)| p))
}

/// The register of a function's N-th integer argument (x86-64 System V).
pub fn abi_register(n: usize) -> Option<&'static str> {
    ["%di", "%si", "%dx", "%cx", "%r8", "%r9"].get(n.checked_sub(1)?).copied()
}

/// A function probe's typed argument as a fetcharg (its place from the calling convention).
pub fn function_arg(t: &Typed) -> Result<String> {
    let Some(reg) = abi_register(t.n) else {
        bail!("arg{}: a function's first 6 arguments are in registers, the rest on the stack (give a fetcharg such as +8(%sp):u64)", t.n);
    };
    t.fetcharg(reg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_become_fetchargs() {
        let sdt: Vec<String> = ["arg1=%bp:u64", "arg2=-8(%bp):s32", "arg3=\\5:u32"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let typed = |t: &[&str]| {
            apply_sdt(&sdt, &t.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .map_err(|e| e.to_string())
        };
        assert_eq!(
            typed(&["arg1:string", "arg2:u32"]).unwrap(),
            ["arg1=+0(%bp):string", "arg2=-8(%bp):u32", "arg3=\\5:u32"]
        );
        assert_eq!(typed(&["+8(arg2):string"]).unwrap()[1], "arg2=+8(-8(%bp)):string");
        assert_eq!(typed(&["q=arg1:string"]).unwrap()[3], "q=+0(%bp):string");
        assert!(typed(&["arg4:u8"]).unwrap_err().contains("has 3 arguments"));
        assert!(typed(&["arg3:string"]).unwrap_err().contains("constant 5"));
        assert!(typed(&["%di:u64"]).unwrap_err().contains("argN:TYPE"));
        assert_eq!(function_arg(&parse("arg2:string").unwrap()).unwrap(), "arg2=+0(%si):string");
        assert_eq!(parse("arg0:u8"), None);
        assert_eq!(parse("x=%di:u64"), None);
        assert_eq!(parse("count"), None);
    }
}
