tp::trace_event! {
    app:ev(a: u32) {
        fields { a: u32 }
        printk("a=%u", a)
    }
}

fn main() {
    trace_ev("not a number");
}
