//! perf.data reader: open any bytes, stream and parse every record, sorted and in file order.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::io::Cursor;
use tp_format::perfdata::PerfData;

fuzz_target!(|data: &[u8]| {
    let Ok(d) = PerfData::open(Cursor::new(data.to_vec())) else { return };
    for sorted in [true, false] {
        let Ok(mut r) = d.records(sorted) else { return };
        let mut n = 0usize;
        while let Some(item) = r.next() {
            n += 1;
            assert!(n <= data.len() / 8 + 2, "records do not end");
            if let Ok(i) = item {
                let _ = i.parse();
            }
        }
    }
});
