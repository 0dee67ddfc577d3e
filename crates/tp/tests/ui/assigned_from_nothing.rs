tp::trace_event! {
    app:ev(a: u32) {
        fields { a: u32, b: u32 }
        printk("a=%u b=%u", a, b)
    }
}

fn main() {}
