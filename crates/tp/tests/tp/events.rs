//! The events the tests fire.

tp::trace_event! {
    /// Three integers, like the LTTng peer's event.
    pub tptest:ev3(a: i32, b: i32, c: i64) {
        fields { a: i32, b: i32, c: i64 }
        printk("a=%d b=%d c=%ld", a, b, c)
    }

    /// Every kind of field.
    pub tptest:kinds(n: u64, name: &str, data: &[u8], flag: bool) {
        fields {
            small: u8 = n as u8,
            neg: i16 = -(n as i16),
            word: u32 = n as u32 * 2,
            big: u64 = n,
            flag: bool,
            comm: tp::CharArray<8> = name,
            arr: [u32; 3] = [1, 2, n as u32],
            bytes4: [u8; 4] = [0xde, 0xad, 0xbe, 0xef],
            name: str,
            data: [u8],
        }
        printk("small=%u neg=%d word=%u big=%llu flag=%d comm=%s arr=%s bytes4=%s name=%s data=%s",
            small, neg, word, big, flag, comm, arr, bytes4, name, data)
    }

    /// Used by the control tests only.
    pub tpctl:req_start(id: u32) {
        fields { id: u32 }
        printk("id=%u", id)
    }

    pub tpctl:req_end(id: u32) {
        fields { id: u32 }
        printk("id=%u", id)
    }

    pub tpother:noise(id: u32) {
        fields { id: u32 }
        printk("id=%u", id)
    }

    /// Used by the stress tests only.
    pub tpstress:hit(x: u64) {
        fields { x: u64 }
        printk("x=%llu", x)
    }

    /// A record too big for one page.
    pub tptest:huge(s: &str) {
        fields { a: str = s, b: str = s, c: str = s, d: str = s, e: str = s }
        printk("%s", a)
    }
}
