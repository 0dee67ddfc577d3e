//! print fmt compiler: any text as the print fmt of a fixed sched_switch-like layout, and
//! when it compiles, rendering of arbitrary record bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use tp_format::printfmt::{Compiled, RenderCtx};
use tp_format::symbols::{Kallsyms, PrintkFormats};

const FORMAT: &str = "name: fuzz\nID: 1\nformat:\n\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
\tfield:char comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\
\tfield:long val;\toffset:24;\tsize:8;\tsigned:1;\n\
\tfield:__data_loc char[] name;\toffset:32;\tsize:4;\tsigned:0;\n\
\tfield:unsigned long ip;\toffset:40;\tsize:8;\tsigned:0;\n\n\
print fmt: \"%d\", REC->val\n";

fuzz_target!(|data: &[u8]| {
    let split = data.iter().position(|&b| b == 0).unwrap_or(data.len());
    let (fmt, record) = data.split_at(split);
    let mut ev = tp_format::EventFormat::parse("fuzz", FORMAT).expect("fixed format parses");
    ev.print_fmt = String::from_utf8_lossy(fmt).into_owned();
    if let Ok(c) = Compiled::compile(&ev) {
        let (k, p) = (Kallsyms::default(), PrintkFormats::default());
        let ctx = RenderCtx { kallsyms: &k, printk: &p, big_endian: false, long_size: 8 };
        let mut out = String::new();
        c.render(record, &ctx, &mut out);
    }
});
