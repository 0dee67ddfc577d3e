//! `tp generate-docs DIR` (hidden): the man pages (`DIR/man/tp.1`, `tp-record.1`, ...) and
//! the shell completions (`DIR/completions/`: bash, zsh, fish) from the command line's own
//! definition, so they cannot drift from it. The repository keeps them in `docs/`, and
//! `.ci/run` regenerates them and fails when they differ.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap_complete::{Generator as _, Shell};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The directory to write `man/` and `completions/` into.
    #[arg(default_value = "docs")]
    pub dir: PathBuf,
}

pub fn run(args: Args, cmd: clap::Command) -> anyhow::Result<i32> {
    let man = args.dir.join("man");
    let completions = args.dir.join("completions");
    for d in [&man, &completions] {
        std::fs::create_dir_all(d).with_context(|| format!("cannot create {}", d.display()))?;
    }
    let mut cmd = cmd.name("tp").bin_name("tp");
    // `tp.1`, then one page per visible subcommand (`tp-record.1`), `tp help` left out.
    clap_mangen::generate_to(cmd.clone(), &man)
        .with_context(|| format!("cannot write the man pages into {}", man.display()))?;
    cmd.build();
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        let mut buf = Vec::new();
        clap_complete::generate(shell, &mut cmd, "tp", &mut buf);
        let path = completions.join(shell.file_name("tp"));
        write(&path, &buf)?;
    }
    Ok(0)
}

fn write(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    std::fs::write(path, bytes).with_context(|| format!("cannot write {}", path.display()))
}
