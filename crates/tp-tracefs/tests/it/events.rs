use super::util::{kernel_events, tracefs};
use tp_tracefs::EventId;

#[test]
fn globs_select_what_the_listing_says() {
    let tfs = tracefs();
    let all = tfs.available_events().unwrap();
    let sched = tfs.match_events("sched").unwrap();
    let want: Vec<_> = all.iter().filter(|e| e.system == "sched").cloned().collect();
    assert_eq!(sched, want);
    assert!(!sched.is_empty());
    let sw = tfs.match_events("sched:sched_*").unwrap();
    assert!(sw.iter().all(|e| e.system == "sched" && e.name.starts_with("sched_")));
    assert!(sw.contains(&EventId::new("sched", "sched_switch")));
    let one = tfs.match_events("syscalls:sys_enter_openat").unwrap();
    assert_eq!(one, vec![EventId::new("syscalls", "sys_enter_openat")]);
    // Other processes' probes come and go between the two listings: compare the kernel's own.
    let every = kernel_events(&tfs, &tfs.match_events("*:*").unwrap());
    let listed = kernel_events(&tfs, &all);
    let only = |a: &[EventId], b: &[EventId]| -> Vec<EventId> {
        a.iter().filter(|e| !b.contains(e)).cloned().collect()
    };
    assert!(
        every == listed,
        "*:* and the listing differ: only in *:* {:?}, only in the listing {:?}",
        only(&every, &listed),
        only(&listed, &every)
    );
    assert!(tfs.match_events("no_such_system_xyz").unwrap().is_empty());
    let u = tfs.match_all(&["sched:sched_switch", "sched", "raw_syscalls"]).unwrap();
    assert_eq!(u.len(), sched.len() + 2);
    assert!(matches!(tfs.match_all(&["nope_nope"]), Err(tp_tracefs::Error::NoSuchEvent { .. })));
}
