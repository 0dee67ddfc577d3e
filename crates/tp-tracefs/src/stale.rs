//! Stale instances: `tp-<pid>[-<n>]` left by a tp that was killed (its process is gone, and
//! so is its guard, which would still be cleaning up after it).

use crate::error::Result;
use crate::guard::guard_alive;
use crate::instance::{instance_pid, remove_instance_dir};
use crate::sys;
use crate::tracefs::Tracefs;

/// Remove `tp-<pid>` instances whose process is gone (left by a tp that was killed).
/// Returns the names removed.
pub fn remove_stale(tfs: &Tracefs) -> Result<Vec<String>> {
    let mut removed = Vec::new();
    for name in tfs.instances()? {
        let Some(pid) = instance_pid(&name) else { continue };
        if pid == sys::getpid() || sys::process_alive(pid) || guard_alive(pid) {
            continue;
        }
        remove_instance_dir(&tfs.path("instances").join(&name))?;
        removed.push(name);
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without root: a directory stands in for tracefs, the fake for the process table and
    /// the calls that would change tracefs.
    #[test]
    fn remove_stale_removes_only_instances_of_dead_processes() {
        let root = std::env::temp_dir().join(format!("tp-fake-tracefs-{}", std::process::id()));
        let me = format!("tp-{}", sys::getpid());
        for name in ["tp-2000000001", "tp-2000000002-1", "tp-2000000003", "other", &me] {
            std::fs::create_dir_all(root.join("instances").join(name)).unwrap();
        }
        std::fs::create_dir_all(root.join("events")).unwrap();
        let tfs = Tracefs::at(&root).unwrap();
        sys::fake::install(&[2000000003]);
        let removed = remove_stale(&tfs);
        let calls = sys::fake::finish();
        std::fs::remove_dir_all(&root).unwrap();
        let mut removed = removed.unwrap();
        removed.sort();
        assert_eq!(removed, ["tp-2000000001", "tp-2000000002-1"]);
        use sys::fake::Call;
        let inst = root.join("instances");
        for name in ["tp-2000000001", "tp-2000000002-1"] {
            let d = inst.join(name);
            assert!(calls.contains(&Call::Write(d.join("tracing_on"), b"0".to_vec())), "{calls:?}");
            assert!(calls.contains(&Call::Write(d.join("set_event"), Vec::new())), "{calls:?}");
            assert!(calls.contains(&Call::Rmdir(d)), "{calls:?}");
        }
        assert_eq!(calls.len(), 6, "{calls:?}");
    }
}
