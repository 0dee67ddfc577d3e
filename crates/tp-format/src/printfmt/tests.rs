//! Unit tests with outputs the real kernel produced (captured on 6.18 in private tracefs
//! instances, `options/hash-ptr` off), and the all-formats compile test.

use super::*;
use crate::format::EventFormat;

const TRACEFS: &str = "/sys/kernel/tracing";

fn ctx<'a>(k: &'a Kallsyms, p: &'a PrintkFormats) -> RenderCtx<'a> {
    RenderCtx { kallsyms: k, printk: p, big_endian: false, long_size: 8 }
}

/// Every format file of the running kernel parses and compiles. Tracefs must be there:
/// CI runs as root with it mounted, and a silent skip would hide a regression.
#[test]
fn compiles_every_format_of_running_kernel() {
    let events = std::path::Path::new(TRACEFS).join("events");
    let systems = std::fs::read_dir(&events).unwrap_or_else(|e| {
        panic!("tracefs not readable at {}: {e} (run as root)", events.display())
    });
    let (mut n, mut special, mut partial) = (0, 0, 0);
    let mut failures = Vec::new();
    let mut partial_list = Vec::new();
    for sys in systems.flatten() {
        if !sys.path().is_dir() {
            continue;
        }
        for ev in std::fs::read_dir(sys.path()).into_iter().flatten().flatten() {
            let Ok(text) = std::fs::read_to_string(ev.path().join("format")) else { continue };
            let sysname = sys.file_name().to_string_lossy().into_owned();
            // Format-file errors belong to `crate::format` (reported, not counted here).
            let f = match EventFormat::parse(&sysname, &text) {
                Ok(f) => f,
                Err(e) => {
                    eprintln!("  format file does not parse (crate::format): {e}");
                    continue;
                }
            };
            n += 1;
            match Compiled::compile(&f) {
                Ok(c) => {
                    special += c.is_special() as usize;
                    if !c.unsupported().is_empty() {
                        partial += 1;
                        partial_list.extend(c.unsupported().iter().map(|e| e.to_string()));
                    }
                }
                Err(e) => failures.push(e.to_string()),
            }
        }
    }
    eprintln!(
        "{n} formats: {} compiled ({special} printed by kernel C code), {partial} with \
         arguments that need kernel state, {} failed",
        n - failures.len(),
        failures.len()
    );
    for p in &partial_list {
        eprintln!("  partial: {p}");
    }
    assert!(n > 1000, "only {n} formats found under {}", events.display());
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}
