// A Copy type by value has no SDT argument form: the error says to pass it by reference.
#[derive(Clone, Copy)]
struct Point {
    x: u32,
}

tp::trace_event! {
    app:moved(p: Point) {
        fields { x: u32 = p.x }
        printk("x=%u", x)
    }
}

fn main() {}
