tp::trace_event! {
    app:ev(a: u32, b: u32) {
        fields { a: u32, b: u32 }
        printk("a=%u", a, b)
    }
}

fn main() {}
