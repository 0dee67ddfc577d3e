//! `tp syscalls [-i FILE] [-- CMD]`: `strace -c`'s summary from a recording of
//! `raw_syscalls` (`tp_analyze::syscalls`).

use std::ffi::OsString;

use tp_analyze::syscalls;

use super::Select;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub select: Select,
    /// Tasks shown in the per-task table (all in JSON).
    #[arg(long, default_value = "20")]
    pub top: usize,
    /// Record `raw_syscalls` while this command runs (with its children), then summarise.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

pub fn run(mut args: Args) -> anyhow::Result<i32> {
    if let Some((_dir, status)) =
        super::record_given_command(syscalls::EVENTS, &mut args.command, &mut args.select.input)?
    {
        run(args)?;
        return Ok(status);
    }
    let tl = super::open(&args.select.input)?;
    let summary = syscalls::analyze(&tl, &args.select.window())?;
    let mut out = String::new();
    if args.select.json {
        syscalls::write_json(&mut out, &summary, &tl);
    } else {
        syscalls::write_text(&mut out, &summary, &tl, args.top);
    }
    super::print(&out, &summary)
}
