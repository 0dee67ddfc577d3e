//! `tracing`'s field values into a tp record body: [`Types`] notes each field's type at a
//! callsite's first record (which defines its tp event), [`Encode`] writes the values.

use crate::callsite::Seen;
use std::fmt;
use tp::dynamic::{Body, FieldType};
use tracing_core::field::{Field, Visit};

/// The type of each field given, by the field's index in its callsite.
#[derive(Debug, Default)]
pub struct Types(pub Vec<Option<Seen>>);

impl Types {
    fn set(&mut self, f: &Field, ty: FieldType, quoted: bool) {
        let i = f.index();
        if self.0.len() <= i {
            self.0.resize(i + 1, None);
        }
        self.0[i] = Some(Seen { ty, quoted });
    }
}

impl Visit for Types {
    fn record_i64(&mut self, f: &Field, _: i64) {
        self.set(f, FieldType::I64, false);
    }
    fn record_u64(&mut self, f: &Field, _: u64) {
        self.set(f, FieldType::U64, false);
    }
    fn record_bool(&mut self, f: &Field, _: bool) {
        self.set(f, FieldType::Bool, false);
    }
    fn record_str(&mut self, f: &Field, _: &str) {
        self.set(f, FieldType::Str, true);
    }
    fn record_debug(&mut self, f: &Field, _: &dyn fmt::Debug) {
        self.set(f, FieldType::Str, false);
    }
}

/// Writes each value into `body`'s field `first + index` (a value of another type than the
/// field's is converted: see [`Body::put_u64`]). Floats, 128-bit integers, errors and
/// `Debug` values are written as text (kernel formats have no floating-point type; Rust's
/// shortest round-trip text keeps a float exact).
pub struct Encode<'a, 't, 'b> {
    pub body: &'a mut Body<'t, 'b>,
    pub first: usize,
}

/// `Debug` printed as `Display` (into a string field).
struct AsDisplay<'a>(&'a dyn fmt::Debug);

impl fmt::Display for AsDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.0, f)
    }
}

impl Visit for Encode<'_, '_, '_> {
    fn record_i64(&mut self, f: &Field, v: i64) {
        self.body.put_i64(self.first + f.index(), v);
    }
    fn record_u64(&mut self, f: &Field, v: u64) {
        self.body.put_u64(self.first + f.index(), v);
    }
    fn record_bool(&mut self, f: &Field, v: bool) {
        self.body.put_u64(self.first + f.index(), u64::from(v));
    }
    fn record_f64(&mut self, f: &Field, v: f64) {
        self.body.put_display(self.first + f.index(), v);
    }
    fn record_str(&mut self, f: &Field, v: &str) {
        self.body.put_str(self.first + f.index(), v);
    }
    fn record_error(&mut self, f: &Field, v: &(dyn std::error::Error + 'static)) {
        self.body.put_display(self.first + f.index(), v);
    }
    fn record_debug(&mut self, f: &Field, v: &dyn fmt::Debug) {
        self.body.put_display(self.first + f.index(), AsDisplay(v));
    }
}
