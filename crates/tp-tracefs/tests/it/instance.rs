use super::util::{sys_enter, tracefs};
use tp_tracefs::{Error, EventId, Instance};

#[test]
fn create_configure_remove() {
    let tfs = tracefs();
    let top_on = tfs.read("tracing_on").unwrap();
    let top_events = tfs.read("set_event").unwrap();
    let inst = Instance::create(&tfs).unwrap();
    let dir = inst.dir().to_path_buf();
    assert!(inst.name().starts_with("tp-"));
    assert!(dir.exists());
    inst.set_tracing_on(false).unwrap();
    assert!(!inst.tracing_on().unwrap());
    inst.set_buffer_size_kb(2048).unwrap();
    let kb = inst.buffer_size_kb().unwrap();
    assert!((2048..2048 + 64).contains(&kb), "{kb}"); // rounded up to whole pages
    inst.set_clock("mono").unwrap();
    assert_eq!(inst.clock().unwrap(), "mono");
    assert!(inst.set_clock("no-such-clock").is_err());
    inst.set_option("record-tgid", true).unwrap();
    assert!(inst.option("record-tgid").unwrap());
    inst.set_event_fork(true).unwrap();
    inst.set_event_pids(&[1, 2]).unwrap();
    let pids = inst.read("set_event_pid").unwrap();
    assert!(pids.contains('1') && pids.contains('2'), "{pids}");
    let sched = tfs.match_events("sched:sched_switch").unwrap();
    inst.enable_all(&sched).unwrap();
    assert_eq!(inst.enabled_events().unwrap(), sched);
    inst.set_filter(&sys_enter(), "id == 110").unwrap();
    assert!(inst.filter(&sys_enter()).unwrap().contains("id == 110"));
    inst.set_tracing_on(true).unwrap();
    drop(inst);
    assert!(!dir.exists(), "instance not removed");
    assert_eq!(tfs.read("tracing_on").unwrap(), top_on);
    assert_eq!(tfs.read("set_event").unwrap(), top_events);
}

#[test]
fn rejected_filter_shows_the_kernels_message() {
    let tfs = tracefs();
    let inst = Instance::create(&tfs).unwrap();
    let e = inst
        .set_filter(&EventId::new("raw_syscalls", "sys_enter"), "no_such_field == 1")
        .unwrap_err();
    match &e {
        Error::Filter { message, .. } => assert!(message.contains("no_such_field"), "{message}"),
        other => panic!("wanted a filter error, got {other}"),
    }
    assert!(e.to_string().contains("rejected filter"));
    inst.remove().unwrap();
}

#[test]
fn open_existing_restores_settings() {
    let tfs = tracefs();
    let owner = Instance::create(&tfs).unwrap();
    owner.set_clock("global").unwrap();
    owner.set_buffer_size_kb(1024).unwrap();
    let orig_kb = owner.buffer_size_kb().unwrap();
    {
        let b = Instance::open(&tfs, owner.name()).unwrap();
        assert!(!b.is_owned());
        b.set_clock("mono").unwrap();
        b.set_buffer_size_kb(512).unwrap();
        b.enable(&sys_enter()).unwrap();
        b.set_filter(&sys_enter(), "id == 1").unwrap();
        b.remove().unwrap();
    }
    assert_eq!(owner.clock().unwrap(), "global");
    assert_eq!(owner.buffer_size_kb().unwrap(), orig_kb);
    assert!(owner.enabled_events().unwrap().is_empty());
    assert_eq!(owner.filter(&sys_enter()).unwrap(), "none");
    assert!(owner.dir().exists());
}
