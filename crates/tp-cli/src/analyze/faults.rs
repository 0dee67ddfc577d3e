//! `tp faults [-i FILE] [-- CMD]`: page faults from a recording of either door
//! (`tp_analyze::faults`).

use std::ffi::OsString;

use tp_analyze::faults;

use super::Select;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub select: Select,
    /// Rows in each table (all tasks in JSON; addresses up to this many there too).
    #[arg(long, default_value = "10")]
    pub top: usize,
    /// Record while this command runs (with its children), then report: through
    /// perf_event_open, every fault of `major-faults`, `minor-faults` (with the faulting
    /// address, the data mappings and call stacks) and the `exceptions` tracepoints.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

pub fn run(mut args: Args) -> anyhow::Result<i32> {
    if !args.command.is_empty() {
        let (dir, file, status) = super::record_command_perf(faults::EVENTS, &args.command)?;
        args.command.clear();
        args.select.input = file;
        run(args)?;
        drop(dir);
        return Ok(status);
    }
    let mut tl = super::open(&args.select.input)?;
    let summary = faults::analyze(&mut tl, &args.select.window())?;
    let mut out = String::new();
    if args.select.json {
        faults::write_json(&mut out, &summary, &tl, args.top);
    } else {
        faults::write_text(&mut out, &summary, &tl, args.top);
    }
    super::print(&out, &summary)
}
