//! trace.dat reader: open any bytes, stream every buffer.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::io::Cursor;
use tp_format::tracedat::TraceDat;

fuzz_target!(|data: &[u8]| {
    let Ok(dat) = TraceDat::open(Cursor::new(data.to_vec())) else { return };
    for i in 0..dat.buffers().len() {
        if let Ok(mut r) = dat.records(i) {
            let mut n = 0usize;
            while let Some(item) = r.next() {
                n += 1;
                assert!(n <= 64 * data.len() + 100, "records do not end");
                let _ = item;
            }
        }
    }
});
