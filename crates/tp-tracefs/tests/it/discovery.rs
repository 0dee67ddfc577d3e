use super::util::{tracefs, vanished};

#[test]
fn finds_tracefs_and_its_metadata() {
    let tfs = tracefs();
    assert!(tfs.root().join("available_events").exists());
    let hp = tfs.header_page().unwrap();
    assert_eq!(hp.page_size(), 4096);
    assert!(tfs.header_event_text().unwrap().contains("type_len"));
    assert!(!tfs.printk_formats().unwrap().is_empty() || tfs.printk_formats().is_ok());
    let ks = tfs.kallsyms().unwrap();
    assert!(ks.lines().count() > 1000);
    tfs.saved_cmdlines().unwrap();
    tfs.saved_tgids().unwrap();
    let u = tfs.uname().unwrap();
    assert_eq!(u.sysname, "Linux");
    assert!(!tfs.cpus().unwrap().is_empty());
    assert!(tfs.ftrace_events().unwrap().iter().any(|e| e.name == "print"));
}

#[test]
fn every_format_parses() {
    let tfs = tracefs();
    let evs = tfs.available_events().unwrap();
    assert!(evs.len() > 100);
    let mut bad = Vec::new();
    for e in &evs {
        // Another process's probe may vanish between the listing and its format's read.
        if let Err(err) = tfs.event_format(e) {
            if vanished(&err) {
                continue;
            }
            bad.push(err.to_string());
        }
    }
    assert!(
        bad.is_empty(),
        "{} of {} formats failed: {:?}",
        bad.len(),
        evs.len(),
        &bad[..bad.len().min(5)]
    );
}

#[test]
fn errors_name_the_call_and_path() {
    let tfs = tracefs();
    let e = tfs.read("no/such/file").unwrap_err().to_string();
    assert!(e.contains("open") && e.contains("no/such/file"), "{e}");
}
