//! Ring-buffer pages: decode any bytes as a page stream (x86_64 layout and big-endian).
#![no_main]
use libfuzzer_sys::fuzz_target;
use tp_format::page::{Page, PageLayout};
use tp_format::tracedat::{PageSource, ReadPages, Records};

fuzz_target!(|data: &[u8]| {
    for big_endian in [false, true] {
        let layout = PageLayout { big_endian, ..PageLayout::X86_64 };
        if let Ok(p) = Page::parse(&layout, data) {
            assert!(p.events().count() <= data.len() / 4 + 1);
        }
        let half = data.len() / 2;
        let srcs: Vec<(u32, Box<dyn PageSource>)> = vec![
            (0, Box::new(ReadPages::new(&data[..half], 4096))),
            (1, Box::new(ReadPages::new(&data[half..], 4096))),
        ];
        let mut r = Records::new(layout, srcs);
        let mut n = 0usize;
        while r.next().is_some() {
            n += 1;
            assert!(n <= data.len() + 10);
        }
    }
});
