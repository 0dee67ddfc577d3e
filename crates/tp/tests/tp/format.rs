//! Generated `format` text: kernel layout, round trip through tp-format.

use crate::events::*;
use tp_format::EventFormat;

#[test]
fn three_integer_event_format_is_the_kernels_text() {
    let site = tracepoint_ev3();
    let id = site.id();
    assert!(id >= tp::registry::ID_BASE);
    let want = format!(
        "name: ev3\nID: {id}\nformat:\n\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\
\n\
\tfield:int a;\toffset:8;\tsize:4;\tsigned:1;\n\
\tfield:int b;\toffset:12;\tsize:4;\tsigned:1;\n\
\tfield:long c;\toffset:16;\tsize:8;\tsigned:1;\n\
\n\
print fmt: \"a=%d b=%d c=%ld\", REC->a, REC->b, REC->c\n"
    );
    assert_eq!(site.format_text(), want);
    let parsed = EventFormat::parse("tptest", &want).unwrap();
    assert_eq!(&parsed, site.format());
    assert_eq!(site.docs(), " Three integers, like the LTTng peer's event.\n");
}

#[test]
fn every_field_kind_round_trips() {
    let site = tracepoint_kinds();
    let text = site.format_text();
    for line in [
        "\tfield:unsigned char small;\toffset:8;\tsize:1;\tsigned:0;\n",
        "\tfield:short neg;\toffset:10;\tsize:2;\tsigned:1;\n",
        "\tfield:unsigned int word;\toffset:12;\tsize:4;\tsigned:0;\n",
        "\tfield:unsigned long big;\toffset:16;\tsize:8;\tsigned:0;\n",
        "\tfield:bool flag;\toffset:24;\tsize:1;\tsigned:0;\n",
        "\tfield:char comm[8];\toffset:25;\tsize:8;\tsigned:0;\n",
        "\tfield:u32 arr[3];\toffset:36;\tsize:12;\tsigned:0;\n",
        "\tfield:u8 bytes4[4];\toffset:48;\tsize:4;\tsigned:0;\n",
        "\tfield:__data_loc char[] name;\toffset:52;\tsize:4;\tsigned:0;\n",
        "\tfield:__data_loc u8[] data;\toffset:56;\tsize:4;\tsigned:0;\n",
        "print fmt: \"small=%u neg=%d word=%u big=%llu flag=%d comm=%s arr=%s bytes4=%s name=%s data=%s\", \
REC->small, REC->neg, REC->word, REC->big, REC->flag, REC->comm, __print_array(REC->arr, 3, 4), \
__print_hex(REC->bytes4, 4), __get_str(name), \
__print_hex(__get_dynamic_array(data), __get_dynamic_array_len(data))\n",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
    let parsed = EventFormat::parse("tptest", &text).unwrap();
    assert_eq!(&parsed, site.format());
    assert_eq!(parsed.to_format_text(), text);
    assert!(parsed.field("name").unwrap().is_string());
    assert!(!parsed.field("data").unwrap().is_string());
}

#[test]
fn registry_lists_every_tracepoint_with_unique_ids() {
    let all = tp::tracepoints();
    let names: Vec<String> = all.iter().map(|s| s.full_name()).collect();
    for n in ["tptest:ev3", "tptest:kinds", "tpctl:req_start", "tpstress:hit"] {
        assert!(names.iter().any(|x| x == n), "{n} not in {names:?}");
    }
    let mut ids: Vec<u16> = all.iter().map(|s| s.id()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), all.len());
    assert!(std::ptr::eq(tp::find("tptest:ev3").unwrap(), tracepoint_ev3()));
}

#[test]
fn print_fmt_compiles_with_tp_format() {
    for site in tp::tracepoints() {
        if let Err(e) = tp_format::printfmt::Compiled::compile(site.format()) {
            panic!("{}: {e}", site.full_name());
        }
    }
}

#[test]
fn a_program_lists_its_tracepoints_on_request() {
    let out = std::process::Command::new(crate::recording::example("record"))
        .env("TP_LIST_FORMATS", "-")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let blocks: Vec<&str> = text.split("system: ").filter(|b| !b.is_empty()).collect();
    assert_eq!(blocks.len(), 2, "{text}");
    for b in blocks {
        let (sys, fmt) = b.split_once('\n').unwrap();
        assert_eq!(sys, "demo");
        let f = tp_format::EventFormat::parse(sys, fmt.trim_end_matches('\n')).unwrap();
        assert!(["work_start", "work_end"].contains(&f.name.as_str()));
    }
}
