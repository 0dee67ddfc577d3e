//! Helpers shared by the tp-cli test binaries (each says `mod common;`). Not every binary
//! uses every helper, hence the allow.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub const TP: &str = env!("CARGO_BIN_EXE_tp");
pub const TRACEFS: &str = "/sys/kernel/tracing";

/// Fails the test, loudly, where there is no root or tracefs (CI runs as root).
pub fn require_tracefs() {
    assert!(
        Path::new(TRACEFS).join("instances").is_dir(),
        "these tests need root and tracefs at {TRACEFS} (CI runs as root)"
    );
}

/// A directory of one test's files, named for the test binary, the tag and this process,
/// removed when dropped.
pub struct Tmp(pub PathBuf);

impl Tmp {
    pub fn new(tag: &str) -> Tmp {
        // The binary is target/<profile>/deps/<name>-<hash>.
        let exe = std::env::current_exe().unwrap();
        let stem = exe.file_stem().unwrap().to_string_lossy().into_owned();
        let bin = stem.rsplit_once('-').map_or(stem.as_str(), |(n, _)| n);
        let p = std::env::temp_dir().join(format!("tp-{bin}-test-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Tmp(p)
    }

    /// `name` inside the directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `cmd` with no stdin, asserting success (the status and stderr in the message).
pub fn run(cmd: &mut Command) -> Output {
    let out = cmd.stdin(Stdio::null()).output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A small tmpfs, unmounted on every path.
pub struct SmallDisk(pub Tmp);

impl SmallDisk {
    pub fn new(tag: &str, size: &str) -> SmallDisk {
        let t = Tmp::new(tag);
        let st = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&t.0)
            .status()
            .unwrap();
        assert!(st.success(), "mount -t tmpfs on {}", t.0.display());
        SmallDisk(t)
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0 .0).status();
    }
}

/// Build an example of crate `tp` (`cargo rustc`, with `rustc_args` for the example alone).
pub fn build_example(name: &str, rustc_args: &[&str]) -> PathBuf {
    build_example_of("tp", name, rustc_args)
}

/// [`build_example`] of another package of the workspace.
pub fn build_example_of(package: &str, name: &str, rustc_args: &[&str]) -> PathBuf {
    // target/<profile>/deps/NAME-HASH
    let me = std::env::current_exe().unwrap();
    let profile_dir = me.parent().unwrap().parent().unwrap();
    let target_dir = profile_dir.parent().unwrap();
    let release = profile_dir.file_name().is_some_and(|n| n == "release");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["rustc", "--quiet", "-p", package, "--example", name, "--target-dir"])
        .arg(target_dir)
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    if release {
        cmd.arg("--release");
    }
    cmd.arg("--").args(rustc_args);
    let st = cmd.status().expect("running cargo to build the example");
    assert!(st.success(), "cargo rustc -p {package} --example {name} failed: {st}");
    let exe = profile_dir.join("examples").join(name);
    assert!(exe.is_file(), "{} missing after the build", exe.display());
    exe
}
