tp::trace_event! {
    app:ev(a: u32) {
        fields { a: u32 }
        printk("a=%u b=%u", a, bogus)
    }
}

fn main() {}
