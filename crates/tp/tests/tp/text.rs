//! The text sink: trace_pipe-like lines.

use crate::events::*;
use std::io::Write;
use std::sync::{Arc, Mutex};

#[derive(Clone, Default)]
struct Buf(Arc<Mutex<Vec<u8>>>);

impl Write for Buf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn lines_look_like_trace_pipe() {
    let _g = crate::global();
    let buf = Buf::default();
    let sink = tp::TextSink::start(tp::text::TextOutput::Writer(Box::new(buf.clone())));
    std::thread::Builder::new()
        .name("texter".into())
        .spawn(|| {
            trace_ev3(1, -2, 3_000_000_000);
            trace_kinds(7, "nm", b"\x0a\xff", false);
        })
        .unwrap()
        .join()
        .unwrap();
    drop(sink);
    let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    // `          texter-1234    [001] .....  1234.567890: ev3: a=1 b=-2 c=3000000000`
    let (ctx, rest) = lines[0].split_once(": ").unwrap();
    assert_eq!(rest, "ev3: a=1 b=-2 c=3000000000");
    assert!(ctx.starts_with("          texter-"), "{ctx:?}");
    let after_cpu = ctx.split_once("] ").unwrap().1;
    assert!(after_cpu.starts_with("..... "), "{ctx:?}");
    let ts = after_cpu[6..].trim();
    let (s, us) = ts.split_once('.').unwrap();
    assert!(s.parse::<u64>().is_ok() && us.len() == 6, "{ts:?}");
    assert!(
        lines[1].ends_with(
            "kinds: small=7 neg=-7 word=14 big=7 flag=0 comm=nm arr={0x1,0x2,0x7} \
             bytes4=de ad be ef name=nm data=0a ff"
        ),
        "{}",
        lines[1]
    );
}

#[test]
fn fallback_renderer_matches_the_printk() {
    let mut out = String::new();
    let site = tracepoint_ev3();
    let mut rec = vec![0u8; 24];
    rec[8..12].copy_from_slice(&5i32.to_le_bytes());
    rec[12..16].copy_from_slice(&(-6i32).to_le_bytes());
    rec[16..24].copy_from_slice(&7i64.to_le_bytes());
    tp::text::render_printk(site, &rec, &mut out);
    assert_eq!(out, "a=5 b=-6 c=7");
}
