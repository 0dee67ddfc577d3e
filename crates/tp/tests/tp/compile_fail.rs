//! Mistakes in `trace_event!` and its use are compile errors that say what is wrong.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
