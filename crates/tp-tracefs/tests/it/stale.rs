use super::util::tracefs;
use tp_tracefs::{remove_stale, Instance};

#[test]
fn stale_instances_of_dead_processes_are_removed() {
    let tfs = tracefs();
    // A pid that is certainly gone: a child that has exited and been reaped.
    let child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    let mut child = child;
    child.wait().unwrap();
    let name = format!("tp-{pid}");
    let dir = tfs.path("instances").join(&name);
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("events/raw_syscalls/sys_enter/enable"), "1").unwrap();
    let removed = remove_stale(&tfs).unwrap();
    assert!(removed.contains(&name), "{removed:?}");
    assert!(!dir.exists());
    // Our own live instances are left alone.
    let mine = Instance::create(&tfs).unwrap();
    let removed = remove_stale(&tfs).unwrap();
    assert!(!removed.contains(&mine.name().to_string()));
    assert!(mine.dir().exists());
}
