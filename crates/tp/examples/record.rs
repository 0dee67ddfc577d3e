//! Record a program's own tracepoints into a file, and see each way a run can end leave a
//! readable file.
//!
//! `cargo run --example record -p tp -- PATH [drop|exit|panic]`
//!
//! - `drop`: the recorder handle goes out of scope (the usual way);
//! - `exit`: `std::process::exit` without dropping it (the exit hook writes the file);
//! - `panic`: the main thread panics (the panic hook writes the file).
//!
//! Set `TP_TEXT=stderr` to also see each event as a trace_pipe line.

tp::trace_event! {
    /// A unit of work started.
    pub demo:work_start(id: u32, what: &str) {
        fields { id: u32, what: str }
        printk("id=%u what=%s", id, what)
    }

    /// A unit of work ended.
    pub demo:work_end(id: u32, ns: u64) {
        fields { id: u32, us: u64 = ns / 1000 }
        printk("id=%u us=%llu", id, us)
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().unwrap_or_else(|| "demo.tp".into());
    let mode = args.next().unwrap_or_else(|| "drop".into());
    let env = tp::init_from_env().expect("TP_* environment");
    let rec = tp::Recorder::start(&path).expect("start recorder");
    // A probe: count work items as they start.
    let h = register_trace_work_start(|id, what| {
        if id == 0 {
            eprintln!("first work item: {what}");
        }
    });
    for id in 0..3 {
        let t = std::time::Instant::now();
        trace_work_start(id, "compute");
        trace_work_end(id, t.elapsed().as_nanos() as u64);
    }
    unregister_trace_work_start(h);
    match mode.as_str() {
        "exit" => {
            std::mem::forget(rec);
            std::process::exit(0)
        }
        "panic" => {
            let _keep = rec; // unwinding drops it; with panic=abort the hook writes the file
            panic!("demo panic")
        }
        _ => {
            let stats = rec.stop().expect("write recording");
            eprintln!("{} events, {} lost, in {}", stats.events, stats.lost, stats.path.display());
        }
    }
    drop(env);
}
