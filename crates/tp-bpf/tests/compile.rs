//! The compiler without a kernel (parse, types, instructions, against formats given here),
//! and with one: the kernel's verifier accepts every program of bpftrace's one-liner
//! tutorial that this kernel supports, and refuses a bad one with the program's line.

use tp_bpf::insn::disassemble;
use tp_bpf::probes::{self, Attach, Machine, RawArg};
use tp_bpf::{compile, parse, Compiled, Error, Options};
use tp_format::format::EventFormat;

const SYS_ENTER: &str = "name: sys_enter
ID: 443
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:long id;\toffset:8;\tsize:8;\tsigned:1;
\tfield:unsigned long args[6];\toffset:16;\tsize:48;\tsigned:0;

print fmt: \"NR %ld\", REC->id
";

const EXEC: &str = "name: sched_process_exec
ID: 365
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:__data_loc char[] filename;\toffset:8;\tsize:4;\tsigned:0;
\tfield:pid_t pid;\toffset:12;\tsize:4;\tsigned:1;
\tfield:pid_t old_pid;\toffset:16;\tsize:4;\tsigned:1;

print fmt: \"filename=%s\", __get_str(filename)
";

/// Two tracepoints, and BTF's word that sys_enter's raw arguments are (regs, id).
struct Fake;

impl Machine for Fake {
    fn tracepoints(&mut self, system: &str, event: &str) -> tp_bpf::Result<Vec<(String, String)>> {
        let all = [("raw_syscalls", "sys_enter"), ("sched", "sched_process_exec")];
        Ok(all
            .iter()
            .filter(|(s, e)| tp_tracefs::glob_match(system, s) && tp_tracefs::glob_match(event, e))
            .map(|(s, e)| (s.to_string(), e.to_string()))
            .collect())
    }
    fn format(&mut self, system: &str, event: &str) -> tp_bpf::Result<EventFormat> {
        let text = if event == "sys_enter" { SYS_ENTER } else { EXEC };
        Ok(EventFormat::parse(system, text).unwrap())
    }
    fn raw_tracepoint_args(&mut self, name: &str) -> Option<Vec<RawArg>> {
        (name == "sys_enter").then(|| {
            vec![
                RawArg { name: "regs".into(), int: None },
                RawArg { name: "id".into(), int: Some((8, true)) },
            ]
        })
    }
}

fn build(src: &str, m: &mut dyn Machine) -> tp_bpf::Result<Compiled> {
    let ast = parse(src)?;
    let mut attaches: Vec<Vec<Attach>> = Vec::new();
    for p in &ast.probes {
        let mut v = Vec::new();
        for (s, _) in &p.specs {
            v.extend(probes::resolve(s, m)?);
        }
        attaches.push(v);
    }
    compile(&ast, &attaches, &Options::default())
}

fn fake(src: &str) -> tp_bpf::Result<Compiled> {
    build(src, &mut Fake)
}

mod pure {
    use super::*;

    #[test]
    fn kaddr_reads_kallsyms_text() {
        use tp_bpf::codegen::kallsyms_address;
        let text = "0000000000000000 T hidden\nffffffff81000000 T _text\nffffffff81234560 t vfs_read\nffffffffc0001000 t vfs_read\t[ext4]\n";
        assert_eq!(kallsyms_address(text, "vfs_read"), Some(0xffffffff81234560));
        assert_eq!(kallsyms_address(text, "hidden"), None);
        assert_eq!(kallsyms_address(text, "vfs_rea"), None);
    }

    /// The hot path of a comm-keyed count: the comm read once into the key, its slot in the
    /// per-CPU cache (an array the kernel inlines), the same key there: the count bumped in
    /// place; another: its count written back into the hash, the slot taken. A raw
    /// tracepoint, since no field is read.
    #[test]
    fn comm_count_instructions() {
        let c = fake("tracepoint:raw_syscalls:sys_enter { @[comm] = count(); }").unwrap();
        assert_eq!(c.programs.len(), 1);
        let p = &c.programs[0];
        assert!(p.raw, "no field read: attached raw");
        let text = disassemble(&p.insns);
        let expect = [
            "r6 = r1",
            "r1 = r10",
            "r1 += -16",
            "r2 = 16",
            "call get_current_comm#16",
            // The slot: a multiplicative hash of the key's two words, its top 8 bits.
            "r3 = 0x9e3779b97f4a7c15 ll",
            "r1 = 0",
            "r2 = *(u64 *)(r10 -16)",
            "r1 ^= r2",
            "r1 *= r3",
            "r2 = *(u64 *)(r10 -8)",
            "r1 ^= r2",
            "r1 *= r3",
            "r1 >>= 56",
            "*(u32 *)(r10 -24) = r1",
            "r1 = map[1]",
            "r2 = r10",
            "r2 += -24",
            "call map_lookup_elem#1",
            "if r0 == 0x0 goto pc+35",
            "r7 = r0",
            // The same key: count in place.
            "r1 = *(u64 *)(r7 +0)",
            "r2 = *(u64 *)(r10 -16)",
            "if r1 != r2 goto pc+7",
            "r1 = *(u64 *)(r7 +8)",
            "r2 = *(u64 *)(r10 -8)",
            "if r1 != r2 goto pc+4",
            "r1 = *(u64 *)(r7 +16)",
            "r1 += 1",
            "*(u64 *)(r7 +16) = r1",
            "goto pc+24",
            // Another key with a count: added to the hash's element, or inserted.
            "r1 = *(u64 *)(r7 +16)",
            "if r1 == 0x0 goto pc+17",
            "r1 = map[0]",
            "r2 = r7",
            "call map_lookup_elem#1",
            "if r0 == 0x0 goto pc+5",
            "r1 = *(u64 *)(r0 +0)",
            "r2 = *(u64 *)(r7 +16)",
            "r1 += r2",
            "*(u64 *)(r0 +0) = r1",
            "goto pc+7",
            "r1 = map[0]",
            "r2 = r7",
            "r3 = r7",
            "r3 += 16",
            "r4 = 0",
            "call map_update_elem#2",
            // The slot taken.
            "r1 = *(u64 *)(r10 -16)",
            "*(u64 *)(r7 +0) = r1",
            "r1 = *(u64 *)(r10 -8)",
            "*(u64 *)(r7 +8) = r1",
            "*(u64 *)(r7 +16) = 1",
            "r0 = 0",
            "exit",
        ];
        assert_eq!(text, expect);
        assert_eq!(c.maps[0].kind, tp_bpf::types::MapKind::PercpuHash);
        assert_eq!((c.maps[0].key_size, c.maps[0].value_size), (16, 8));
        assert_eq!(c.maps[1].kind, tp_bpf::types::MapKind::PercpuArray);
        assert_eq!((c.maps[1].value_size, c.maps[1].max_entries), (24, 256));
        // A map a program deletes from has no cache (delete could not reach other CPUs').
        let c =
            fake("tracepoint:raw_syscalls:sys_enter { @[pid] = count(); delete(@[1]); }").unwrap();
        assert_eq!(c.maps.len(), 1);
    }

    /// `args->id` is sys_enter's raw argument 1 (BTF), so the record is not built; reading
    /// `args->args[0]` needs the record.
    #[test]
    fn raw_when_fields_are_arguments() {
        let c = fake("tracepoint:raw_syscalls:sys_enter { @[pid, args->id] = count(); }").unwrap();
        assert!(c.programs[0].raw);
        let text = disassemble(&c.programs[0].insns);
        assert!(text.contains(&"r0 = *(u64 *)(r6 +8)".to_string()), "{text:#?}");
        let c = fake("tracepoint:raw_syscalls:sys_enter { @ = hist(args->args[0]); }").unwrap();
        assert!(!c.programs[0].raw);
        let text = disassemble(&c.programs[0].insns);
        assert!(text.contains(&"r0 = *(u64 *)(r6 +16)".to_string()), "{text:#?}");
        // No key: a per-CPU array indexed by bucket.
        assert_eq!(c.maps[0].kind, tp_bpf::types::MapKind::PercpuArray);
        assert_eq!(c.maps[0].max_entries, 66);
    }

    #[test]
    fn wildcards_make_one_program_per_event() {
        let c = fake("t:*:sys_enter,tracepoint:sched:sched_* { @[probe] = count(); }").unwrap();
        let names: Vec<&str> = c.programs.iter().map(|p| p.attach.name.as_str()).collect();
        assert_eq!(
            names,
            ["tracepoint:raw_syscalls:sys_enter", "tracepoint:sched:sched_process_exec"]
        );
        assert_eq!(c.probe_names, names);
    }

    #[test]
    fn data_loc_string() {
        let c = fake("tracepoint:sched:sched_process_exec { printf(\"%s %d\\n\", str(args->filename), args->pid); }").unwrap();
        let text = disassemble(&c.programs[0].insns).join("\n");
        // The u32 at offset 8: low half is where the string is in the record.
        assert!(text.contains("r3 = *(u32 *)(r6 +8)\nr3 &= 65535\nr3 += r6"), "{text}");
        assert!(text.contains("call probe_read_kernel_str#115"), "{text}");
        assert_eq!(c.printfs[0].format, "%s %d\n");
    }

    #[test]
    fn errors_name_the_place() {
        let e = fake("BEGIN { @x = 1 }\ntracepoint:raw_syscalls:sys_enter { @y = args->nope; }")
            .unwrap_err();
        match e {
            Error::Semantic { pos, message } => {
                assert_eq!(pos.line, 2);
                assert!(
                    message.contains("no field `nope`") && message.contains("id, args"),
                    "{message}"
                );
            }
            other => panic!("{other}"),
        }
        let e = fake("BEGIN { printf(\"%d\\n\", 1, 2); }").unwrap_err();
        assert!(e.to_string().contains("takes 1 arguments, 2 given"), "{e}");
        let e = fake("BEGIN { @x = 1 +; }").unwrap_err();
        assert!(matches!(e, Error::Syntax { pos, .. } if pos.line == 1 && pos.col == 17), "{e:?}");
        let e = fake("kprobe:vfs_read { @ = count(); }").unwrap_err();
        assert!(e.to_string().contains("no kprobes"), "{e}");
        let e = fake("BEGIN { @m[1] = count(); @m[\"a\"] = count(); }").unwrap_err();
        assert!(e.to_string().contains("@m: key"), "{e}");
    }

    #[test]
    fn language_parses() {
        let src = r#"
#!/usr/bin/env bpftrace
/* a comment */
BEGIN { $x = 1; $y = $x > 0 ? 2 : 3; if ($y == 2) { @a = $y * 3 % 4; } else if (!$x) { @a = 0; } else { @a = -1 }
        @t = (1, "two"); @s = "str"; $x += 5; $x++; @c++; unroll(3) { @u = count(); } }
END { printf("%d %s\n", @a, @s); print(@t); clear(@c); zero(@u); delete(@m[1]); exit() }
BEGIN { @m[1] = 2 }
"#;
        let c = fake(src).unwrap();
        assert_eq!(c.programs.len(), 3);
        let names: Vec<&str> = c.user_maps.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["a", "t", "s", "c", "u", "m"]);
    }
}

/// The kernel's verifier on the real machine (root).
mod verifier {
    use super::*;
    use tp_bpf::machine::System;
    use tp_bpf::session::Session;

    fn load(src: &str) -> tp_bpf::Result<()> {
        let c = build(src, &mut System::new())?;
        Session::load(c, src).map(drop)
    }

    /// bpftrace's one-liner tutorial, every one that does not need kprobes, and the cases
    /// the issue names.
    #[test]
    fn tutorial_one_liners_load() {
        let programs = [
            r#"BEGIN { printf("hello world\n"); }"#,
            r#"tracepoint:syscalls:sys_enter_openat { printf("%s %s\n", comm, str(args->filename)); }"#,
            "tracepoint:raw_syscalls:sys_enter { @[comm] = count(); }",
            "tracepoint:syscalls:sys_exit_read /pid == 18644/ { @bytes = hist(args->ret); }",
            "tracepoint:sched:sched* { @[probe] = count(); } interval:s:5 { exit(); }",
            "profile:hz:99 { @[kstack] = count(); }",
            "tracepoint:sched:sched_switch { @[kstack] = count(); }",
            "tracepoint:block:block_rq_issue { @ = hist(args->bytes); }",
            "tracepoint:raw_syscalls:sys_exit /pid > 1/ { @ = hist(args->ret); }",
            "tracepoint:raw_syscalls:sys_enter { @[pid, args->id] = count(); }",
            "tracepoint:syscalls:sys_enter_write { @ = lhist(args->count, 0, 1000, 100); @s = stats(args->count); @a = avg(args->count); @mn = min(args->count); @mx = max(args->count); @sum[tid] = sum(args->count); }",
            r#"tracepoint:sched:sched_process_exec { printf("%s %d %d\n", str(args->filename), args->pid, elapsed); }"#,
            r#"tracepoint:syscalls:sys_enter_nanosleep { @start[tid] = nsecs; } tracepoint:syscalls:sys_exit_nanosleep /@start[tid]/ { @ns[comm] = hist(nsecs - @start[tid]); delete(@start[tid]); }"#,
            "profile:hz:99 { @[ustack] = count(); }",
            r#"tracepoint:sched:sched_switch /args->prev_comm == "swapper/0" || comm != "bash"/ { @[args->prev_comm, args->next_comm] = count(); }"#,
            "software:cpu-clock:1000000 { @[cpu] = count(); } interval:ms:100 { time(); print(@); clear(@); }",
        ];
        for p in programs {
            if let Err(e) = load(p) {
                panic!("{p}: {e}");
            }
        }
    }

    /// A program the verifier refuses: reading past the end of a tracepoint's record (the
    /// context). The error names the program's line.
    #[test]
    fn refusal_names_the_line() {
        // `args->args[5]` is in range; build a bad access by hand: a 64-bit read at an
        // offset the record does not have.
        let src =
            "BEGIN { @x = 1; }\ntracepoint:raw_syscalls:sys_enter { @y[args->args[0]] = count(); }";
        let mut c = build(src, &mut System::new()).unwrap();
        let p = c.programs.iter_mut().find(|p| p.attach.name.contains("sys_enter")).unwrap();
        let at = p
            .insns
            .iter()
            .position(|i| i.code == 0x79 && i.src == 6 && i.off == 16)
            .expect("the args[0] load");
        p.insns[at].off = 30000;
        match Session::load(c, src) {
            Err(Error::Verifier { pos: Some(pos), reason, source_line, .. }) => {
                assert_eq!(pos.line, 2, "{reason}");
                assert!(source_line.unwrap().contains("args->args[0]"));
                assert!(reason.contains("invalid bpf_context access"), "{reason}");
            }
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("the verifier accepted a read past the record"),
        }
    }
}
