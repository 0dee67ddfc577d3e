//! tp's integration tests, one binary, modules by purpose.

mod alloc;
mod compile_fail;
mod control;
mod dynamic;
mod events;
mod format;
mod probes;
mod recording;
mod stacks;
mod stress;
mod text;

use std::sync::{Mutex, MutexGuard};

/// The recorder, sinks and enable state are process-wide: tests that use them take this.
pub fn global() -> MutexGuard<'static, ()> {
    static M: Mutex<()> = Mutex::new(());
    M.lock().unwrap_or_else(|e| e.into_inner())
}

/// A fresh temporary directory for one test.
pub fn temp_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("tp-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Run this test binary again with `--exact TEST` and extra environment; returns its output.
pub fn run_child(test: &str, env: &[(&str, &str)]) -> std::process::Output {
    let mut c = std::process::Command::new(std::env::current_exe().unwrap());
    c.args(["--exact", test, "--nocapture", "--test-threads", "1"]).env("TP_CHILD", test);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

pub fn is_child(test: &str) -> bool {
    std::env::var("TP_CHILD").as_deref() == Ok(test)
}
