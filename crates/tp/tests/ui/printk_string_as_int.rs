tp::trace_event! {
    app:ev(s: &str) {
        fields { s: str }
        printk("s=%d", s)
    }
}

fn main() {}
