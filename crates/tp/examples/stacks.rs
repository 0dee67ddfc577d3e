//! Rust events with their user stacks: a known call chain (`main -> a -> b -> c`) where `c`
//! fires `stacks:leaf` and `stacks:plain`, N times (default 100). Build it with frame
//! pointers and ask for the stacks of `stacks:leaf` by `TP_STACKS`:
//!
//! ```sh
//! RUSTFLAGS="-C force-frame-pointers=yes" cargo build -p tp --example stacks
//! TP_STACKS=stacks:leaf tp record -e 'stacks:*' -- target/debug/examples/stacks
//! tp report    # each leaf line is followed by `<user stack trace>` and its ` =>  <addr>`
//! ```
//!
//! It prints its pid and its functions' addresses (for the tests).

tp::trace_event! {
    /// Fired in `c`, with its user stack (`TP_STACKS=stacks:leaf`, or `stacks = true;` here).
    pub stacks:leaf(i: u32) {
        fields { i: u32 }
        printk("i=%u", i)
    }
    /// Fired in `c` too, without a stack.
    pub stacks:plain(i: u32) {
        fields { i: u32 }
        printk("i=%u", i)
    }
}

#[inline(never)]
fn c(i: u32) {
    trace_leaf(i);
    trace_plain(i);
    std::hint::black_box(i);
}

#[inline(never)]
fn b(i: u32) {
    c(i);
    std::hint::black_box(i);
}

#[inline(never)]
fn a(i: u32) {
    b(i);
    std::hint::black_box(i);
}

fn main() {
    let n: u32 = std::env::args().nth(1).map_or(100, |s| s.parse().expect("N"));
    for (name, f) in [("a", a as fn(u32)), ("b", b), ("c", c)] {
        println!("{name} {:x}", f as usize);
    }
    println!("main {:x}", main as fn() as usize);
    println!("pid {}", std::process::id());
    // TP_EVENTS, TP_STACKS, TP_RECORD (set by `tp record`); the file is written when `env`
    // is dropped.
    let env = tp::init_from_env().expect("TP_* environment");
    for i in 0..n {
        a(i);
    }
    drop(env);
}
