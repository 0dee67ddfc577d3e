tp::trace_event! {
    app:ev(name: &str) {
        fields { n: u32 = name }
        printk("n=%u", n)
    }
}

fn main() {}
