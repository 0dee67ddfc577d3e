//! Tracepoints defined at run time: recorded as `trace_event!` sites are, following the
//! enable rules applied before they existed, with their formats in the file.

use tp::dynamic::{define, DefineError, FieldDef, FieldType};
use tp_format::printfmt::{Compiled, RenderCtx};

fn render(f: &tp_format::EventFormat, rec: &[u8]) -> String {
    let c = Compiled::compile(f).unwrap();
    let (k, p) = (Default::default(), Default::default());
    let ctx = RenderCtx {
        kallsyms: &k,
        printk: &p,
        big_endian: false,
        long_size: 8,
        user_maps: None,
        sym: Default::default(),
    };
    let mut s = String::new();
    c.render(rec, &ctx, &mut s);
    s
}

#[test]
fn a_run_time_tracepoint_is_recorded_with_its_format() {
    let _g = crate::global();
    let fields = [
        FieldDef::new("flag", FieldType::Bool),
        FieldDef::new("n", FieldType::I64),
        FieldDef::new("s", FieldType::Str),
        FieldDef::new("u", FieldType::U64),
        FieldDef::new("t", FieldType::Str),
    ];
    let tp = define("dyntest", "rec", &fields, None).unwrap();
    assert!(matches!(define("dyntest", "rec", &fields, None), Err(DefineError::Exists { .. })));
    assert!(matches!(define("dyn test", "x", &[], None), Err(DefineError::BadName { .. })));
    assert!(matches!(
        define("dyntest", "bad_fmt", &fields, Some("\"%s\", REC->nope".into())),
        Err(DefineError::PrintFmt { .. })
    ));
    assert!(tp::tracepoints().iter().any(|s| std::ptr::eq(*s, tp.site())));
    assert!(tp::formats_text().contains("name: rec\n"));
    let dir = crate::temp_dir("dynamic");
    let path = dir.join("t.dat");
    let rec = tp::Recorder::start(&path).unwrap();
    assert!(tp.is_active());
    let mut buf = Vec::new();
    for i in 0..100i64 {
        let mut b = tp.body(&mut buf);
        b.put_u64(0, (i % 2) as u64);
        b.put_i64(1, -i);
        b.put_str(2, &format!("s{i}"));
        b.put_display(3, "not a string field"); // ignored
        b.put_u64(3, i as u64 * 3);
        // field 4 left out: an empty string
        tp.fire(b.finish());
    }
    let stats = rec.stop().unwrap();
    assert_eq!((stats.events, stats.lost), (100, 0));
    assert!(!tp.is_active());
    let r = tp::Recording::open(&path).unwrap();
    let f = r.format(tp.site().id()).unwrap();
    assert_eq!(f, tp.site().format());
    assert_eq!(r.records.len(), 100);
    for (i, (_, _, rec)) in r.records.iter().enumerate() {
        assert_eq!(
            render(f, rec),
            format!("flag={} n={} s=s{i} u={} t=", i % 2, -(i as i64), i * 3)
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

static CHANGES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
fn count_change() {
    CHANGES.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
}

#[test]
fn rules_applied_before_a_definition_decide_its_state() {
    let _g = crate::global();
    tp::on_change(count_change);
    let before = CHANGES.load(std::sync::atomic::Ordering::SeqCst);
    tp::set_events("dynrules:on_*");
    assert!(CHANGES.load(std::sync::atomic::Ordering::SeqCst) > before);
    assert!(!tp::would_take("dynrules", "on_a"), "nothing records yet");
    let dir = crate::temp_dir("dynrules");
    let rec = tp::Recorder::start(dir.join("t.dat")).unwrap();
    assert!(tp::would_take("dynrules", "on_a"));
    assert!(!tp::would_take("dynrules", "off_a"));
    let on = define("dynrules", "on_a", &[], None).unwrap();
    let off = define("dynrules", "off_a", &[], None).unwrap();
    assert!(on.is_active() && !off.is_active());
    tp::enable("dynrules:off_*");
    assert!(off.is_active() && tp::would_take("dynrules", "off_b"));
    let stats = rec.stop().unwrap();
    assert_eq!(stats.events, 0);
    assert!(!on.is_active());
    tp::set_events("*");
    std::fs::remove_dir_all(&dir).unwrap();
}
