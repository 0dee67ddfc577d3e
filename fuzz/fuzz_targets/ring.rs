//! perf ring-buffer records: any bytes, split anywhere (the wrap), are handed out as whole
//! records of their declared size or stop at the first impossible one; never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&cut, rest)) = data.split_first() else { return };
    let split = if rest.is_empty() { 0 } else { cut as usize % (rest.len() + 1) };
    let (first, second) = rest.split_at(split.min(rest.len()));
    let mut total = 0u64;
    let stats = tp_perf::ring::records_in(first, second, |rec| {
        assert!(rec.len() >= 8);
        assert_eq!(u16::from_ne_bytes([rec[6], rec[7]]) as usize, rec.len());
        total += rec.len() as u64;
    });
    assert_eq!(stats.bytes, total);
    assert!(total as usize <= rest.len());
});
