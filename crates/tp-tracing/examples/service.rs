//! A small service instrumented with `tracing` (and one `log` record), recorded by tp with
//! the kernel's events:
//!
//! ```sh
//! cargo build --example service -p tp-tracing
//! tp record -e sched:sched_switch -e 'syscalls:sys_enter_nanosleep' -e 'tracing:*' \
//!     -- target/debug/examples/service 20
//! tp report                                     # kernel and tracing events, one timeline
//! tp convert --to perfetto -o service.pftrace   # request > db query slices per thread
//! ```
//!
//! Each request is a span (`service::http` `request`) holding a database call span
//! (`service::db` `query`, which sleeps 200 us: the thread is switched out inside it), an
//! event with the rows fetched, and every fourth request an ERROR event; the request's
//! `status` is recorded at its end. It prints what it emitted, for the tests to compare.

use std::time::Duration;
use tracing_subscriber::prelude::*;

fn main() {
    let n: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(10);
    let _recording = tp::init_from_env().expect("TP_* environment");
    tracing_subscriber::registry().with(tp_tracing::layer()).init();
    tp_tracing::init_log().expect("no other logger");
    let mut errors = 0;
    for i in 0..n {
        let request = tracing::info_span!(
            target: "service::http",
            "request",
            id = i,
            path = "/items",
            status = tracing::field::Empty
        );
        let _in_request = request.enter();
        let rows = {
            let query =
                tracing::info_span!(target: "service::db", "query", sql = "SELECT * FROM items");
            let _in_query = query.enter();
            std::thread::sleep(Duration::from_micros(200));
            let rows = i % 5;
            tracing::info!(name: "rows", target: "service::db", rows, "fetched");
            rows
        };
        if i % 4 == 3 {
            errors += 1;
            tracing::error!(name: "failed", target: "service::http", id = i, error = "timeout", "request failed");
            request.record("status", 500u64);
        } else {
            request.record("status", 200u64 + rows);
        }
    }
    log::warn!(target: "service", "served {n} requests");
    println!("requests={n} queries={n} rows_events={n} errors={errors} log_records=1");
}
