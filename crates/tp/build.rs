fn main() {
    // `--cfg loom` runs the RCU model test (src/rcu.rs).
    println!("cargo::rustc-check-cfg=cfg(loom)");
}
