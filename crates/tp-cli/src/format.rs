//! `tp format EVENT`: an event's format file, as the kernel publishes it.

use std::io::Write;

use tp_tracefs::Tracefs;

#[derive(clap::Args)]
pub struct Args {
    /// `system:name` or a glob selecting events (each format is printed).
    event: String,
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    let fs = Tracefs::discover()?;
    let events = fs.match_events(&args.event)?;
    if events.is_empty() {
        anyhow::bail!("no event matches {:?} (see `tp list`)", args.event);
    }
    let mut out = std::io::stdout().lock();
    for ev in &events {
        // Print the kernel's own text, and check that it parses.
        let text = fs.event_format_text(ev)?;
        fs.event_format(ev)?;
        if events.len() > 1 {
            writeln!(out, "# {ev}")?;
        }
        out.write_all(text.as_bytes())?;
    }
    Ok(0)
}
