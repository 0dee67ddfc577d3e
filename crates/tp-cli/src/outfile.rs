//! Creating the files and directories tp writes, the one way every command does it.
//!
//! A file is written under a temporary name in the target's directory, created with
//! `O_CREAT|O_EXCL|O_NOFOLLOW` and mode 0600, and renamed over the target when complete.
//! So a symlink at the target (or at the temporary name) is never written through: the
//! rename replaces the link itself and its target stays untouched. Traces hold kernel
//! addresses and other users' command lines, so they are readable by their owner only,
//! and under `sudo` that owner is the user who ran sudo (`SUDO_UID`/`SUDO_GID`),.

use std::fs::File;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

static KEEP_ROOT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `--as-root`: the files stay root's under sudo.
pub fn keep_root() {
    KEEP_ROOT.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// The user and group tp's files are given: the sudo user's when tp runs as root through
/// sudo, else none (they stay the creator's).
pub fn owner() -> Option<(u32, u32)> {
    if KEEP_ROOT.load(std::sync::atomic::Ordering::Relaxed) {
        return None;
    }
    tp_tracefs::process::sudo_user().map(|u| u.ids())
}

/// Refuse an output tp could not write, before anything is recorded: a directory, a
/// directory that does not exist, something that is not a regular file (renaming the
/// finished file onto `/dev/null` would replace the device).
pub fn check(out: &Path) -> Result<()> {
    let shown = out.display();
    if out.as_os_str().as_encoded_bytes().ends_with(b"/") || out.is_dir() {
        anyhow::bail!(
            "-o {shown} is a directory: give a file name (e.g. -o {})",
            out.join("trace.dat").display()
        );
    }
    refuse_special(out)?;
    let parent = parent_of(out);
    match std::fs::metadata(&parent) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => anyhow::bail!("-o {shown}: {} is not a directory", parent.display()),
        Err(e) => anyhow::bail!("-o {shown}: directory {} does not exist ({e})", parent.display()),
    }
}

/// Refuse a target that exists and is neither a regular file nor a symlink: renaming the
/// finished file over `/dev/null` (as root) would replace the device. A symlink is replaced
/// by the file (its target untouched), as a regular file is.
fn refuse_special(out: &Path) -> Result<()> {
    match std::fs::symlink_metadata(out) {
        Ok(m) if !m.is_file() && !m.is_symlink() => anyhow::bail!(
            "-o {} exists and is not a regular file: give another name",
            out.display()
        ),
        _ => Ok(()),
    }
}

/// The directory the output goes into.
pub fn parent_of(out: &Path) -> PathBuf {
    match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// A file being written under a temporary name beside its target; [`NewFile::commit`]
/// renames it into place, dropping it uncommitted removes it.
#[derive(Debug)]
pub struct NewFile {
    tmp: PathBuf,
    target: PathBuf,
    committed: bool,
}

/// The temporary name a file for `target` is written under: `NAME.tp-PID.tmp` beside it
/// (fixed per process, so a guard and the next run can find what a killed run left).
pub fn tmp_name(target: &Path) -> PathBuf {
    let mut name =
        target.file_name().map(|n| n.to_os_string()).unwrap_or_else(|| "trace.dat".into());
    name.push(format!(".tp-{}.tmp", std::process::id()));
    target.with_file_name(name)
}

/// Create the file that will become `target`: its temporary name, new, 0600, not through a
/// symlink, owned by [`owner`].
pub fn create(target: &Path) -> Result<(File, NewFile)> {
    refuse_special(target)?;
    let tmp = tmp_name(target);
    let file = match create_new(&tmp) {
        // Left by a killed run of this PID, or placed by someone: remove the name (a
        // symlink goes, its target stays) and create it anew, still exclusively.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            std::fs::remove_file(&tmp).with_context(|| format!("removing {}", tmp.display()))?;
            create_new(&tmp)
        }
        r => r,
    }
    .with_context(|| format!("cannot create {}", tmp.display()))?;
    let pending = NewFile { tmp, target: target.to_path_buf(), committed: false };
    if let Some((uid, gid)) = owner() {
        std::os::unix::fs::fchown(&file, Some(uid), Some(gid))
            .with_context(|| format!("giving {} to user {uid}", pending.tmp.display()))?;
    }
    Ok((file, pending))
}

fn create_new(path: &Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new()
        .write(true)
        .read(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

impl NewFile {
    /// Rename the complete file into place (replacing a symlink there, not its target).
    pub fn commit(mut self) -> Result<()> {
        let was_link = std::fs::symlink_metadata(&self.target).is_ok_and(|m| m.is_symlink());
        // Complete but not in place: it stays, and the message says where the data is.
        self.committed = true;
        std::fs::rename(&self.tmp, &self.target).with_context(|| {
            format!(
                "the file is complete in {}, but renaming it to {} failed",
                self.tmp.display(),
                self.target.display()
            )
        })?;
        if was_link {
            eprintln!(
                "tp: {} was a symlink: replaced the link itself, its target is untouched",
                self.target.display()
            );
        }
        Ok(())
    }
}

impl Drop for NewFile {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Create a directory only its owner can enter (0700); an existing name, a symlink
/// included, is an error.
pub fn create_dir(path: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new().mode(0o700).create(path)
}

/// A page file in one of tp's private directories (new, 0600, not through a symlink).
pub fn create_private(path: &Path) -> Result<File> {
    create_new(path).with_context(|| format!("creating {}", path.display()))
}

/// A private (0700) temporary directory under `$TMPDIR`, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    /// `PREFIX-PID-N`: the first N whose name is free (a name someone placed is skipped).
    pub fn new(prefix: &str) -> Result<TempDir> {
        let base = std::env::temp_dir();
        for n in 0..100u32 {
            let p = base.join(format!("{prefix}-{}-{n}", std::process::id()));
            if create_dir(&p).is_ok() {
                return Ok(TempDir(p));
            }
        }
        anyhow::bail!("cannot create a temporary directory in {}", base.display())
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
