//! trace.dat reading and writing against files trace-cmd made on this machine
//! (fixtures/tracedat/, see its README), and bad input.

use std::io::Cursor;
use std::path::PathBuf;
use tp_format::tracedat::{Compression, Item, TraceDat};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/tracedat").join(name)
}

fn read(name: &str) -> Vec<u8> {
    std::fs::read(fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// (cpu, timestamp as `sec.usec`, pid, event name) of each line of the kernel's trace text.
fn expected_events() -> Vec<(u32, String, i32, String)> {
    let text = String::from_utf8(read("expected.txt")).unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let open = l.find("] ").unwrap();
            let cpu_start = l[..open].rfind('[').unwrap();
            let head = &l[..cpu_start];
            let pid: i32 = head.trim_end().rsplit('-').next().unwrap().parse().unwrap();
            let cpu: u32 = l[cpu_start + 1..open].parse().unwrap();
            let rest = &l[open + 2..];
            let mut it = rest.split_whitespace();
            let _flags = it.next().unwrap();
            let ts = it.next().unwrap().trim_end_matches(':').to_string();
            // Syscall events print as `sys_openat(...)` / `sys_openat -> 0x3`.
            let name = it.next().unwrap().trim_end_matches(':');
            let name = name.split('(').next().unwrap().to_string();
            (cpu, ts, pid, name)
        })
        .collect()
}

fn decode(dat: &TraceDat<Cursor<Vec<u8>>>) -> Vec<(u32, String, i32, String)> {
    let idx = dat.buffers().iter().position(|b| !b.cpus.is_empty()).expect("a buffer with data");
    let mut recs = dat.records(idx).unwrap();
    let mut out = Vec::new();
    while let Some(item) = recs.next() {
        match item.unwrap_or_else(|e| panic!("{e}")) {
            Item::Event(r) => {
                let id = u16::from_le_bytes([r.data[0], r.data[1]]) as u32;
                let pid = i32::from_le_bytes(r.data[4..8].try_into().unwrap());
                let ev = dat.events().iter().find(|e| e.id == id).expect("event id known");
                // The kernel prints ftrace's `print` as `tracing_mark_write`.
                let name = if ev.name == "print" {
                    "tracing_mark_write".to_string()
                } else if let Some(s) =
                    ev.name.strip_prefix("sys_enter_").or(ev.name.strip_prefix("sys_exit_"))
                {
                    format!("sys_{s}")
                } else {
                    ev.name.clone()
                };
                // The kernel rounds to the nearest microsecond (ns2usecs).
                let us = (r.ts + 500) / 1000;
                let ts = format!("{}.{:06}", us / 1_000_000, us % 1_000_000);
                out.push((r.cpu, ts, pid, name));
            }
            Item::Lost(l) => panic!("unexpected lost events {l:?}"),
        }
    }
    out
}

fn check_fixture(name: &str, version: u32, comp: Compression) {
    let dat = TraceDat::open(Cursor::new(read(name))).unwrap();
    assert_eq!(dat.version(), version, "{name}");
    assert_eq!(dat.compression(), comp, "{name}");
    assert_eq!((dat.page_size(), dat.long_size(), dat.big_endian()), (4096, 8, false));
    assert_eq!(dat.header_page(), tp_format::header::HeaderPage::X86_64);
    assert!(dat.format_errors().is_empty(), "{:?}", dat.format_errors());
    assert!(dat.events().iter().any(|e| e.system == "ftrace" && e.name == "print"));
    assert!(dat.events().iter().any(|e| e.system == "sched" && e.name == "sched_switch"));
    assert!(!dat.kallsyms().is_empty());
    assert!(dat.cmdlines().known(1).is_some() || dat.cmdlines().iter().count() > 0);
    assert_eq!(dat.clock(), Some("local"));
    assert!(dat.uname().unwrap_or("").starts_with("Linux"), "{:?}", dat.uname());
    assert!(dat.cpustats().contains("CPU: 0"));
    assert!(
        dat.buffers().iter().any(|b| b.name == "tpfx" && b.cpus.len() == 2),
        "{:?}",
        dat.buffers()
    );
    let got = decode(&dat);
    let want = expected_events();
    assert_eq!(got.len(), want.len(), "{name}: event count");
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "{name}: event {i}");
    }
}

#[test]
fn reads_trace_cmd_v7_zstd() {
    check_fixture("v7-zstd.dat", 7, Compression::Zstd);
}

#[test]
fn reads_trace_cmd_v7_uncompressed() {
    check_fixture("v7-none.dat", 7, Compression::None);
}

#[test]
fn reads_trace_cmd_v6() {
    check_fixture("v6.dat", 6, Compression::None);
}

mod writer {
    use super::*;
    use std::io::Read as _;
    use tp_format::tracedat::{BufferPages, CpuPages, Metadata, Writer, WriterOptions};

    /// Metadata of a file, as the writer takes it (formats regenerated from the parsed ones).
    pub(crate) fn metadata_of(dat: &TraceDat<Cursor<Vec<u8>>>) -> Metadata {
        let mut systems: Vec<(String, Vec<String>)> = Vec::new();
        let mut ftrace = Vec::new();
        for e in dat.events() {
            if e.system == "ftrace" {
                ftrace.push(e.to_format_text());
            } else if let Some(s) = systems.iter_mut().find(|(n, _)| *n == e.system) {
                s.1.push(e.to_format_text());
            } else {
                systems.push((e.system.clone(), vec![e.to_format_text()]));
            }
        }
        let kallsyms: String = dat
            .kallsyms()
            .symbols()
            .iter()
            .map(|s| match &s.module {
                Some(m) => format!("{:016x} t {}\t[{m}]\n", s.addr, s.name),
                None => format!("{:016x} t {}\n", s.addr, s.name),
            })
            .collect();
        let mut cmd: Vec<_> = dat.cmdlines().iter().collect();
        cmd.sort();
        Metadata {
            header_page: dat.header_page(),
            header_event_text: dat.header_event_text().to_string(),
            ftrace_formats: ftrace,
            event_formats: systems,
            kallsyms,
            printk: String::new(),
            cmdlines: cmd.iter().map(|(p, c)| format!("{p} {c}\n")).collect(),
            clock: dat.clock().unwrap().to_string(),
            uname: dat.uname().map(str::to_string),
            cpustats: Vec::new(),
            cpu_count: dat.cpu_count().unwrap_or(2),
            ..Metadata::default()
        }
    }

    /// Rewrite a fixture's data buffer with tp's writer.
    pub(crate) fn rewrite(name: &str, version: u32, compression: Compression) -> Vec<u8> {
        let dat = TraceDat::open(Cursor::new(read(name))).unwrap();
        let mut out = Cursor::new(Vec::new());
        let opts = WriterOptions { version, compression, ..WriterOptions::default() };
        Writer::new(opts).write(&mut out, &metadata_of(&dat), data_buffer(&dat)).unwrap();
        out.into_inner()
    }

    /// The pages of a file's first buffer with data, as the writer takes them.
    fn data_buffer(dat: &TraceDat<Cursor<Vec<u8>>>) -> Vec<BufferPages<'static>> {
        let idx = dat.buffers().iter().position(|b| !b.cpus.is_empty()).unwrap();
        let mut cpus = Vec::new();
        for (i, c) in dat.buffers()[idx].cpus.iter().enumerate() {
            let mut src = dat.page_source(idx, i).unwrap();
            let mut pages = Vec::new();
            while src.advance().unwrap() {
                pages.extend_from_slice(src.page());
            }
            cpus.push(CpuPages { cpu: c.cpu, pages: Box::new(Cursor::new(pages)) });
        }
        vec![BufferPages { name: dat.buffers()[idx].name.clone(), cpus }]
    }

    fn round_trip(version: u32, compression: Compression) {
        let bytes = rewrite("v7-zstd.dat", version, compression);
        let dat = TraceDat::open(Cursor::new(bytes)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((dat.version(), dat.compression()), (version, compression));
        assert_eq!(decode(&dat), expected_events());
    }

    #[test]
    fn round_trips_v7_zstd() {
        round_trip(7, Compression::Zstd);
    }

    #[test]
    fn round_trips_v7_zlib() {
        round_trip(7, Compression::Zlib);
    }

    #[test]
    fn round_trips_v7_uncompressed() {
        round_trip(7, Compression::None);
    }

    #[test]
    fn round_trips_v6() {
        round_trip(6, Compression::None);
    }

    /// Chunks compressed by the caller (as tp's recorder does while it records, of any
    /// number of pages and at any zstd level) are copied as they are: the file reads back
    /// the same events, and has exactly those chunks.
    #[test]
    fn precompressed_chunks_are_copied() {
        let src = TraceDat::open(Cursor::new(read("v7-zstd.dat"))).unwrap();
        let mut bufs = data_buffer(&src);
        let mut chunk_bytes = 0;
        for c in &mut bufs[0].cpus {
            let mut pages = Vec::new();
            c.pages.read_to_end(&mut pages).unwrap();
            let mut chunks = Vec::new();
            for (i, run) in pages.chunks(3 * 4096).enumerate() {
                let z = zstd::bulk::compress(run, if i % 2 == 0 { -5 } else { 1 }).unwrap();
                chunks.extend_from_slice(&(z.len() as u32).to_le_bytes());
                chunks.extend_from_slice(&(run.len() as u32).to_le_bytes());
                chunks.extend_from_slice(&z);
            }
            chunk_bytes += chunks.len();
            c.pages = Box::new(Cursor::new(chunks));
        }
        let opts = WriterOptions {
            compression: Compression::Zstd,
            precompressed: true,
            ..WriterOptions::default()
        };
        let mut out = Cursor::new(Vec::new());
        Writer::new(opts).write(&mut out, &metadata_of(&src), bufs).unwrap();
        let bytes = out.into_inner();
        let dat = TraceDat::open(Cursor::new(bytes)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(decode(&dat), expected_events());
        let idx = dat.buffers().iter().position(|b| !b.cpus.is_empty()).unwrap();
        // Per CPU: the chunk count (4 bytes, outside the stated size) then the chunks.
        let stored: u64 = dat.buffers()[idx].cpus.iter().map(|c| c.size).sum();
        assert_eq!(stored, chunk_bytes as u64);

        // A stream cut inside a chunk is an error, not a short file.
        let mut bufs = data_buffer(&src);
        bufs[0].cpus[0].pages = Box::new(Cursor::new(vec![9, 0, 0, 0, 0, 16, 0, 0, 1, 2]));
        let err = Writer::new(opts)
            .write(&mut Cursor::new(Vec::new()), &metadata_of(&src), bufs)
            .unwrap_err();
        assert!(err.to_string().contains("cut short"), "{err}");
    }

    /// saved_tgids travel in tp's own option; trace-cmd still reads the file.
    #[test]
    fn tgids_round_trip_and_trace_cmd_skips_them() {
        let src = TraceDat::open(Cursor::new(read("v7-zstd.dat"))).unwrap();
        let mut meta = metadata_of(&src);
        meta.tgids = "25614 25610\n25620 25620\n".into();
        let dir = std::env::temp_dir().join(format!("tp-tgids-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for version in [6, 7] {
            let mut out = Cursor::new(Vec::new());
            let opts = WriterOptions { version, ..WriterOptions::default() };
            Writer::new(opts).write(&mut out, &meta, data_buffer(&src)).unwrap();
            let bytes = out.into_inner();
            let dat = TraceDat::open(Cursor::new(bytes.clone())).unwrap();
            assert_eq!(dat.cmdlines().tgid(25614), Some(25610), "v{version}");
            assert_eq!(dat.cmdlines().tgid(25620), Some(25620), "v{version}");
            assert_eq!(dat.cmdlines().known(25614), src.cmdlines().known(25614), "v{version}");
            let path = dir.join(format!("v{version}.dat"));
            std::fs::write(&path, bytes).unwrap();
            let out = std::process::Command::new("trace-cmd")
                .args(["report", "-i"])
                .arg(&path)
                .output()
                .expect("trace-cmd must be installed");
            assert!(out.status.success(), "v{version}: {}", String::from_utf8_lossy(&out.stderr));
        }
        std::fs::remove_dir_all(&dir).ok();
    }

    /// `trace-cmd report` renders tp's files exactly as it renders its own original.
    #[test]
    fn trace_cmd_reports_tp_files() {
        let want = String::from_utf8(read("trace-cmd-report.txt")).unwrap();
        let dir = std::env::temp_dir().join(format!("tp-tracedat-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (version, comp) in
            [(7, Compression::Zstd), (7, Compression::None), (6, Compression::None)]
        {
            let path = dir.join(format!("v{version}-{}.dat", comp.name()));
            std::fs::write(&path, rewrite("v7-zstd.dat", version, comp)).unwrap();
            let out = std::process::Command::new("trace-cmd")
                .arg("report")
                .arg("-i")
                .arg(&path)
                .output()
                .expect("trace-cmd must be installed (Debian package trace-cmd) for this test");
            let got = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "{path:?}: {}", String::from_utf8_lossy(&out.stderr));
            let (g, w): (Vec<_>, Vec<_>) = (got.lines().collect(), want.lines().collect());
            assert_eq!(g.len(), w.len(), "{path:?}: line count");
            for (i, (g, w)) in g.iter().zip(&w).enumerate() {
                assert_eq!(g, w, "{path:?}: line {i}");
            }
        }
        std::fs::remove_dir_all(&dir).ok();
    }
}

mod bad_input {
    use super::*;
    use tp_format::tracedat::ErrorKind;

    /// Open and stream everything; never panic, never loop: the number of items is bounded
    /// by the file size. Returns (events, errors, last error text).
    pub(crate) fn exercise(bytes: Vec<u8>) -> (usize, usize, Option<String>) {
        let len = bytes.len();
        let dat = match TraceDat::open(Cursor::new(bytes)) {
            Ok(d) => d,
            Err(e) => return (0, 1, Some(e.to_string())),
        };
        let (mut events, mut errors, mut last) = (0, 0, None);
        for i in 0..dat.buffers().len() {
            let Ok(mut recs) = dat.records(i) else {
                errors += 1;
                continue;
            };
            let mut n = 0usize;
            while let Some(item) = recs.next() {
                n += 1;
                // Decompressed chunks can hold more than the file: allow 64 pages per byte.
                assert!(n <= 64 * len + 100, "records do not end");
                match item {
                    Ok(Item::Event(_)) => events += 1,
                    Ok(Item::Lost(_)) => {}
                    Err(e) => {
                        errors += 1;
                        last = Some(e.to_string());
                    }
                }
            }
        }
        (events, errors, last)
    }

    #[test]
    fn wrong_magic_and_empty_files() {
        for bytes in [Vec::new(), b"\x17\x08".to_vec(), b"not a trace file at all".to_vec()] {
            let e = TraceDat::open(Cursor::new(bytes)).unwrap_err();
            assert!(matches!(e.kind, ErrorKind::BadMagic), "{e}");
            assert!(e.to_string().contains("offset 0x0"), "{e}");
        }
        let mut v = read("v7-zstd.dat");
        v[10] = b'9';
        let e = TraceDat::open(Cursor::new(v)).unwrap_err();
        assert!(e.to_string().contains("file version 9"), "{e}");
    }

    /// Every prefix of every fixture: a clean error or a partial result, never a panic.
    #[test]
    fn truncated_anywhere() {
        for name in ["v7-zstd.dat", "v7-none.dat", "v6.dat"] {
            let full = read(name);
            let step = if full.len() > 20000 { 97 } else { 13 };
            for cut in (0..full.len()).step_by(step) {
                exercise(full[..cut].to_vec());
            }
        }
    }

    /// A file cut in its last CPU's data still yields every complete page, then says so.
    #[test]
    fn truncated_data_yields_complete_pages_then_error() {
        // (v7 files keep the BUFFER option after the data, so only v6 can be read when cut
        // in its data; a cut v7 file fails to open with an error naming the options.)
        let name = "v6.dat";
        {
            let full = read(name);
            let dat = TraceDat::open(Cursor::new(full.clone())).unwrap();
            let b = dat.buffers().iter().find(|b| !b.cpus.is_empty()).unwrap();
            let last = b.cpus.iter().max_by_key(|c| c.offset).unwrap();
            let cut = (last.offset + 4096 + 1000) as usize;
            let all = decode(&dat).len();
            let (events, errors, msg) = exercise(full[..cut].to_vec());
            let msg = msg.unwrap();
            assert_eq!(errors, 1, "{name}: {msg}");
            assert!(msg.contains("truncated"), "{name}: {msg}");
            assert!(msg.contains(&format!("CPU {}", last.cpu)), "{name}: {msg}");
            assert!(events > 0 && events < all, "{name}: {events} of {all}");
        }
    }

    /// Corrupt the compressed chunk of CPU 0: an error naming the offset, the rest still read.
    #[test]
    fn corrupt_compressed_chunk() {
        let mut v = read("v7-zstd.dat");
        let dat = TraceDat::open(Cursor::new(v.clone())).unwrap();
        let b = dat.buffers().iter().find(|b| !b.cpus.is_empty()).unwrap();
        let c0 = b.cpus[0];
        for i in 0..40 {
            v[c0.offset as usize + 12 + 20 + i] ^= 0x5a;
        }
        let (events, errors, msg) = exercise(v);
        let msg = msg.unwrap();
        assert!(errors >= 1 && events > 0, "{msg}");
        assert!(msg.contains(&format!("{:#x}", c0.offset + 4)), "{msg}");
    }

    /// Lying sizes in every section header and option: errors, no huge allocations.
    #[test]
    fn lying_sizes() {
        let orig = read("v7-none.dat");
        // Overwrite each aligned u32/u64 with huge values in turn (a cheap structured fuzz).
        for at in (10..orig.len().min(40000)).step_by(41) {
            for val in [u64::MAX, 0x1_0000_0000] {
                let mut v = orig.clone();
                let end = (at + 8).min(v.len());
                let bytes = val.to_le_bytes();
                v[at..end].copy_from_slice(&bytes[..end - at]);
                exercise(v);
            }
        }
    }

    /// Random byte mutations of the fixtures (a property test standing in for the fuzzer).
    #[test]
    fn random_mutations() {
        let mut x = 0x2545F4914F6CDD1Du64;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for name in ["v7-zstd.dat", "v7-none.dat", "v6.dat"] {
            let orig = read(name);
            for _ in 0..300 {
                let mut v = orig.clone();
                for _ in 0..1 + rnd() % 8 {
                    let i = (rnd() % v.len() as u64) as usize;
                    v[i] = rnd() as u8;
                }
                exercise(v);
            }
        }
    }

    #[test]
    fn truncated_v7_names_the_options() {
        let full = read("v7-none.dat");
        let e = TraceDat::open(Cursor::new(full[..0x10000].to_vec())).unwrap_err();
        assert!(e.is_truncation(), "{e}");
        assert!(e.to_string().contains("(options)"), "{e}");
    }

    /// A format file with a non-ASCII byte in a field name (found by `random_mutations`:
    /// `format.rs` sliced inside a multi-byte character).
    #[test]
    fn format_with_non_ascii_field_name() {
        let text = "name: x\nID: 1\nformat:\n\tfield:char prev_\u{fffd}omm[16];\toffset:8;\tsize:16;\tsigned:0;\n\nprint fmt: \"\"\n";
        let _ = tp_format::EventFormat::parse("sched", text);
    }

    /// Format files that crashed the format parser (fuzz target `format`).
    #[test]
    fn bad_format_files_never_panic() {
        for e in std::fs::read_dir(fixture("bad/format")).unwrap() {
            let bytes = std::fs::read(e.unwrap().path()).unwrap();
            let _ = tp_format::EventFormat::parse("fuzz", &String::from_utf8_lossy(&bytes));
        }
    }

    /// Regression inputs (fuzzer crashes and hand-made corruptions) in fixtures/tracedat/bad/.
    #[test]
    fn bad_inputs_never_panic() {
        let dir = fixture("bad");
        let mut n = 0;
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() || p.extension().is_some_and(|x| x == "md") {
                continue;
            }
            let bytes = std::fs::read(&p).unwrap();
            exercise(bytes.clone());
            // Also as raw pages.
            let src: Vec<(u32, Box<dyn tp_format::tracedat::PageSource>)> =
                vec![(0, Box::new(tp_format::tracedat::ReadPages::new(&bytes[..], 4096)))];
            let mut r = tp_format::tracedat::Records::new(tp_format::page::PageLayout::X86_64, src);
            while r.next().is_some() {}
            n += 1;
        }
        assert!(n > 0, "no regression inputs in {dir:?}");
    }
}

/// Sizes a file claims are checked against the bytes it has before anything is allocated:
/// the reader runs in a child of this test binary under `RLIMIT_AS`, over the reproducers in
/// fixtures/tracedat/bad/ (a BUFFER option and a chunk header that both lie) and over every
/// pairing of a lying CPU data size with a huge u32 anywhere in the file.
mod bounded_memory {
    use super::bad_input::exercise;
    use super::*;

    /// Address space the child may use: the test binary and its heap, a decompressed chunk
    /// (at most 64 MiB) and a fixed margin; far below the 2-4 GiB the lying files used to cost.
    const LIMIT: u64 = 320 << 20;

    /// The offsets of each CPU's data size (the u64 after its offset) in the options.
    fn cpu_size_fields(bytes: &[u8]) -> Vec<usize> {
        let dat = TraceDat::open(Cursor::new(bytes.to_vec())).unwrap();
        let mut at = Vec::new();
        for b in dat.buffers() {
            for c in &b.cpus {
                let mut pat = c.offset.to_le_bytes().to_vec();
                pat.extend_from_slice(&c.size.to_le_bytes());
                let i = bytes.windows(16).position(|w| w == pat).expect("CPU entry in the file");
                at.push(i + 8);
            }
        }
        at
    }

    fn in_child() {
        for name in ["oom-abort-v7zstd.dat", "oom-2g-v7zstd.dat", "oom-abort-lying-chunk-1byte.dat"]
        {
            let (events, errors, last) = exercise(read(&format!("bad/{name}")));
            let last = last.unwrap_or_default();
            assert!(errors > 0 && last.contains("CPU 0 data"), "{name}: {events} events, {last}");
        }
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for name in ["v7-zstd.dat", "v7-none.dat", "v6.dat"] {
            let orig = read(name);
            let dat = TraceDat::open(Cursor::new(orig.clone())).unwrap();
            // Every word of each CPU's chunk count and first chunk header, and words anywhere.
            let mut words: Vec<usize> = dat
                .buffers()
                .iter()
                .flat_map(|b| b.cpus.iter().flat_map(|c| (c.offset as usize..).step_by(4).take(4)))
                .collect();
            words.extend((0..150).map(|_| (rnd() as usize % (orig.len() - 4)) & !3));
            for size_at in cpu_size_fields(&orig) {
                for &at in &words {
                    for huge in [0xffff_ff00u32, 0x7fff_ffff] {
                        let mut v = orig.clone();
                        v[size_at..size_at + 8].copy_from_slice(&0xffff_ffffu64.to_le_bytes());
                        v[at..at + 4].copy_from_slice(&huge.to_le_bytes());
                        exercise(v);
                    }
                }
            }
        }
    }

    #[test]
    fn lying_sizes_allocate_nothing_the_file_cannot_hold() {
        if std::env::var_os("TP_TEST_RLIMIT_CHILD").is_some() {
            let lim = libc::rlimit { rlim_cur: LIMIT, rlim_max: LIMIT };
            // SAFETY: setrlimit reads the struct we pass; it only lowers this process's limit.
            assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &lim) }, 0);
            in_child();
            return;
        }
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "bounded_memory::lying_sizes_allocate_nothing_the_file_cannot_hold"])
            .args(["--test-threads=1", "--nocapture"])
            .env("TP_TEST_RLIMIT_CHILD", "1")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "reader under a {} MiB address-space limit: {:?}\n{}{}",
            LIMIT >> 20,
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A real capture on this kernel: raw pages from a private instance, written by tp's writer,
/// rendered by `trace-cmd report` with every event the kernel's own `trace` text has.
/// Needs root and tracefs (CI runs as root); fails loudly without them.
mod real_capture {
    use super::*;
    use std::fs;
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt;
    use std::path::{Path, PathBuf};
    use tp_format::tracedat::{BufferPages, CpuPages, Metadata, Writer, WriterOptions};

    const TRACEFS: &str = "/sys/kernel/tracing";
    const EVENTS: &[&str] =
        &["sched/sched_switch", "syscalls/sys_enter_getppid", "syscalls/sys_exit_getppid"];

    /// A private instance, removed on every path.
    struct Instance(PathBuf);

    impl Drop for Instance {
        fn drop(&mut self) {
            let _ = fs::write(self.0.join("tracing_on"), "0");
            let _ = fs::write(self.0.join("events/enable"), "0");
            let _ = fs::remove_dir(&self.0);
        }
    }

    fn put(p: &Path, v: &str) {
        fs::write(p, v).unwrap_or_else(|e| panic!("writing {p:?}: {e}"));
    }

    /// Read a tracefs file with large reads: some (events/header_page) return only what
    /// the first read asked for when read in small pieces, as `read_to_string`'s first
    /// 32-byte probe does.
    fn get(p: impl AsRef<Path>) -> String {
        let p = p.as_ref();
        let mut f = fs::File::open(p).unwrap_or_else(|e| panic!("reading {p:?}: {e}"));
        let mut out = Vec::new();
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = f.read(&mut buf).unwrap_or_else(|e| panic!("reading {p:?}: {e}"));
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        String::from_utf8(out).unwrap()
    }

    /// All pages of a CPU's trace_pipe_raw, without blocking.
    fn drain(path: &Path) -> Vec<u8> {
        let mut f = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .unwrap_or_else(|e| panic!("{path:?}: {e}"));
        let mut out = Vec::new();
        let mut page = vec![0u8; 4096];
        loop {
            match f.read(&mut page) {
                Ok(0) => break,
                Ok(n) => out.extend_from_slice(&page[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("{path:?}: {e}"),
            }
        }
        out
    }

    #[test]
    fn trace_cmd_reports_every_event_of_a_real_capture() {
        assert!(
            Path::new(TRACEFS).join("instances").is_dir(),
            "tracefs is not mounted at {TRACEFS} (this test needs root and tracefs)"
        );
        let dir =
            Path::new(TRACEFS).join(format!("instances/tp-tracedat-test-{}", std::process::id()));
        fs::create_dir(&dir).unwrap_or_else(|e| panic!("mkdir {dir:?}: {e} (run as root)"));
        let inst = Instance(dir);
        put(&inst.0.join("options/hash-ptr"), "0");
        put(&inst.0.join("buffer_size_kb"), "512");
        put(&inst.0.join("trace_clock"), "mono");
        for e in EVENTS {
            put(&inst.0.join("events").join(e).join("enable"), "1");
        }
        for _ in 0..2000 {
            std::hint::black_box(std::os::unix::process::parent_id());
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
        put(&inst.0.join("tracing_on"), "0");
        let kernel_text = get(inst.0.join("trace"));
        let kernel_events = kernel_text.lines().filter(|l| !l.starts_with('#')).count();
        assert!(kernel_events >= 4000, "only {kernel_events} events");

        let ncpu = fs::read_dir(inst.0.join("per_cpu")).unwrap().count() as u32;
        let mut cpus = Vec::new();
        for cpu in 0..ncpu {
            let pages = drain(&inst.0.join(format!("per_cpu/cpu{cpu}/trace_pipe_raw")));
            assert_eq!(pages.len() % 4096, 0);
            cpus.push(CpuPages { cpu, pages: Box::new(Cursor::new(pages)) });
        }
        let mut ftrace = Vec::new();
        for e in fs::read_dir(Path::new(TRACEFS).join("events/ftrace")).unwrap() {
            let p = e.unwrap().path().join("format");
            if p.exists() {
                ftrace.push(get(p));
            }
        }
        let mut systems: Vec<(String, Vec<String>)> = Vec::new();
        for e in EVENTS {
            let (sys, _) = e.split_once('/').unwrap();
            let text = get(Path::new(TRACEFS).join("events").join(e).join("format"));
            match systems.iter_mut().find(|(s, _)| s == sys) {
                Some(s) => s.1.push(text),
                None => systems.push((sys.to_string(), vec![text])),
            }
        }
        let hp_text = get(format!("{TRACEFS}/events/header_page"));
        let header_page = tp_format::header::HeaderPage::parse(&hp_text)
            .unwrap_or_else(|e| panic!("{e}: {hp_text:?}"));
        let meta = Metadata {
            header_page,
            header_event_text: get(format!("{TRACEFS}/events/header_event")),
            ftrace_formats: ftrace,
            event_formats: systems,
            kallsyms: get("/proc/kallsyms"),
            printk: get(format!("{TRACEFS}/printk_formats")),
            cmdlines: get(format!("{TRACEFS}/saved_cmdlines")),
            clock: "mono".into(),
            uname: Some("Linux test".into()),
            cpustats: (0..ncpu)
                .map(|c| get(inst.0.join(format!("per_cpu/cpu{c}/stats"))))
                .collect(),
            cpu_count: ncpu,
            ..Metadata::default()
        };
        drop(inst);

        let tmp = std::env::temp_dir().join(format!("tp-real-{}.dat", std::process::id()));
        let mut f = fs::File::create(&tmp).unwrap();
        let buffers = vec![BufferPages { name: String::new(), cpus }];
        Writer::new(WriterOptions::default()).write(&mut f, &meta, buffers).unwrap();
        drop(f);

        // tp reads back every event.
        let dat = TraceDat::open(std::io::BufReader::new(fs::File::open(&tmp).unwrap())).unwrap();
        let mut recs = dat.records(0).unwrap();
        let mut ours = 0;
        while let Some(item) = recs.next() {
            if let Item::Event(_) = item.unwrap() {
                ours += 1;
            }
        }
        assert_eq!(ours, kernel_events, "tp's reader");

        let out = std::process::Command::new("trace-cmd")
            .args(["report", "-i"])
            .arg(&tmp)
            .output()
            .expect("trace-cmd must be installed (Debian package trace-cmd) for this test");
        fs::remove_file(&tmp).ok();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with("cpus=")).collect();
        assert_eq!(lines.len(), kernel_events, "trace-cmd report's events");
        let getppid = lines.iter().filter(|l| l.contains("sys_enter_getppid")).count();
        let kernel_getppid = kernel_text.lines().filter(|l| l.contains("sys_getppid()")).count();
        assert_eq!(getppid, kernel_getppid);
        assert!(getppid >= 2000);
    }
}

/// Peak memory while streaming a large file stays bounded. Ignored by default (it writes
/// `TP_BIG_MB` MiB, default 1024, to the temp directory):
/// `cargo test --release -p tp-format --test tracedat memory -- --ignored --nocapture`
#[test]
#[ignore]
fn memory_stays_bounded_on_a_large_file() {
    use std::io::Read;
    use tp_format::tracedat::{BufferPages, CpuPages, Writer, WriterOptions};

    /// Repeats a fixture CPU's pages up to `left` bytes, without holding more than them.
    struct Repeat {
        pages: Vec<u8>,
        pos: usize,
        left: u64,
    }
    impl Read for Repeat {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = buf.len().min(self.pages.len() - self.pos).min(self.left as usize);
            buf[..n].copy_from_slice(&self.pages[self.pos..self.pos + n]);
            self.pos = (self.pos + n) % self.pages.len();
            self.left -= n as u64;
            Ok(n)
        }
    }
    fn hwm_kb() -> u64 {
        let s = std::fs::read_to_string("/proc/self/status").unwrap();
        let l = s.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
        l.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    let mb: u64 = std::env::var("TP_BIG_MB").ok().and_then(|v| v.parse().ok()).unwrap_or(1024);
    let dat = TraceDat::open(Cursor::new(read("v6.dat"))).unwrap();
    let idx = dat.buffers().iter().position(|b| !b.cpus.is_empty()).unwrap();
    let meta = writer::metadata_of(&dat);
    let mut raw = Vec::new();
    for (i, c) in dat.buffers()[idx].cpus.iter().enumerate() {
        let mut src = dat.page_source(idx, i).unwrap();
        let mut pages = Vec::new();
        while src.advance().unwrap() {
            pages.extend_from_slice(src.page());
        }
        raw.push((c.cpu, pages));
    }
    drop(dat);
    for (name, comp) in [("none", Compression::None), ("zstd", Compression::Zstd)] {
        let path = std::env::temp_dir().join(format!("tp-big-{}-{name}.dat", std::process::id()));
        let opts = WriterOptions { compression: comp, ..WriterOptions::default() };
        let bufs = vec![BufferPages {
            name: String::new(),
            // Half of the size per CPU.
            cpus: raw
                .iter()
                .map(|(cpu, pages)| CpuPages {
                    cpu: *cpu,
                    pages: Box::new(Repeat { pages: pages.clone(), pos: 0, left: mb << 19 }),
                })
                .collect(),
        }];
        let mut f = std::fs::File::create(&path).unwrap();
        Writer::new(opts).write(&mut f, &meta, bufs).unwrap();
        drop(f);
        let size = std::fs::metadata(&path).unwrap().len();
        let before = hwm_kb();
        let t = std::time::Instant::now();
        let dat =
            TraceDat::open(std::io::BufReader::new(std::fs::File::open(&path).unwrap())).unwrap();
        let mut recs = dat.records(0).unwrap();
        let mut n = 0u64;
        while let Some(item) = recs.next() {
            if let Item::Event(r) = item.unwrap() {
                n += r.data.len() as u64 & 1;
                n += 1;
            }
        }
        let after = hwm_kb();
        eprintln!(
            "{name}: file {} MiB, {n} records in {:?}; peak RSS {} MiB before reading, {} MiB after",
            size >> 20,
            t.elapsed(),
            before >> 10,
            after >> 10
        );
        std::fs::remove_file(&path).ok();
        assert!(after < 64 << 10, "peak RSS {after} KiB");
    }
}
