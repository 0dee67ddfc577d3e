//! `tp list [GLOB]`: the running kernel's events, optionally with their fields.

use std::io::Write;

use anyhow::Context;
use tp_tracefs::Tracefs;

#[derive(clap::Args)]
pub struct Args {
    /// Event glob: `sched`, `sched:sched_*`, `syscalls:sys_enter_openat`, `*:*` (default all).
    glob: Option<String>,
    /// Also print each event's fields (C type, name, offset, size).
    #[arg(short = 'F', long)]
    fields: bool,
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    let fs = Tracefs::discover()?;
    let events = match &args.glob {
        Some(g) => fs.match_events(g)?,
        None => fs.available_events()?,
    };
    if events.is_empty() {
        anyhow::bail!("no event matches {:?} (see `tp list`)", args.glob.unwrap_or_default());
    }
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for ev in &events {
        writeln!(out, "{ev}")?;
        if args.fields {
            let f = fs.event_format(ev).with_context(|| format!("reading the format of {ev}"))?;
            for field in &f.fields {
                let sign = if field.signed { "signed" } else { "unsigned" };
                writeln!(
                    out,
                    "    {:<40} offset:{:<4} size:{:<4} {sign}",
                    field.declaration, field.offset, field.size
                )?;
            }
        }
    }
    out.flush()?;
    Ok(0)
}
