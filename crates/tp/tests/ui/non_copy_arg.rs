tp::trace_event! {
    app:ev(s: String) {
        fields { n: u32 = s.len() as u32 }
        printk("n=%u", n)
    }
}

fn main() {}
