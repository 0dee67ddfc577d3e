//! `tp convert -i FILE --to perfetto|firefox -o OUT`: a recording in another tool's format.

pub mod firefox;
pub mod perfetto;
mod proto;

use std::path::PathBuf;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Perfetto's protobuf trace (ui.perfetto.dev opens it).
    Perfetto,
    /// The Firefox Profiler's processed profile of a perf.data's samples and stacks
    /// (profiler.firefox.com opens it).
    Firefox,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The recording: a trace.dat (v6 or v7) or a perf.data.
    #[arg(short = 'i', long = "input", default_value = "trace.dat")]
    pub input: PathBuf,
    /// The format to write.
    #[arg(long = "to", value_enum)]
    pub to: Format,
    /// Output file.
    #[arg(short = 'o', long = "output")]
    pub output: PathBuf,
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    match args.to {
        Format::Perfetto => perfetto::run(&args.input, &args.output),
        Format::Firefox => firefox::run(&args.input, &args.output),
    }
}
