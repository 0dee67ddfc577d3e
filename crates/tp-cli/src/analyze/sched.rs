//! `tp sched [-i FILE]`: how long tasks wait to run (`tp_analyze::sched`).

use tp_analyze::sched;

use super::Select;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub select: Select,
    /// Tasks in the table (all in JSON).
    #[arg(long, default_value = "20")]
    pub top: usize,
    /// The longest waits listed with their timestamps.
    #[arg(long, default_value = "10")]
    pub worst: usize,
    /// A histogram per task (runqlat -P) besides the one over all tasks.
    #[arg(long)]
    pub per_task: bool,
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    let tl = super::open(&args.select.input)?;
    let summary = sched::analyze(&tl, &args.select.window(), args.worst)?;
    let mut out = String::new();
    if args.select.json {
        sched::write_json(&mut out, &summary, &tl);
    } else {
        sched::write_text(&mut out, &summary, &tl, args.top, args.per_task);
    }
    super::print(&out, &summary)
}
