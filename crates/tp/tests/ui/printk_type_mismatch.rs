tp::trace_event! {
    app:ev(a: u64, s: &str) {
        fields { a: u64, s: str }
        printk("a=%d s=%s", a, s)
    }
}

fn main() {}
