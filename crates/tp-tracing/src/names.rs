//! Names: `tracing`'s targets, callsite names and field names made into the C identifiers
//! trace-cmd and print fmts need, and the text of print fmts.

/// `s` as a C identifier: `::` becomes `__`, any other character outside `[A-Za-z0-9_]`
/// becomes `_`, and a leading digit gets a `_` before it.
pub fn c_identifier(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for (i, part) in s.split("::").enumerate() {
        if i > 0 {
            out.push_str("__");
        }
        out.extend(
            part.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }),
        );
    }
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

/// The tp event name of an event callsite: `TARGET__NAME` with the target's `::` as `__`.
/// `tracing` names an event without `name:` `event FILE:LINE`: that becomes `L{LINE}`; the
/// `log` crate's records (through `tracing-log`, one callsite per level) become `log__info`
/// and so on.
pub fn event_name(target: &str, name: &str, line: Option<u32>, level: &str) -> String {
    let part = if name == "log event" {
        level.to_ascii_lowercase()
    } else if name.starts_with("event ") {
        match line {
            Some(l) => format!("L{l}"),
            None => c_identifier(name),
        }
    } else {
        c_identifier(name)
    };
    format!("{}__{part}", c_identifier(target))
}

/// Literal text inside a print fmt's quoted format: `%`, `"` and `\` escaped.
pub fn fmt_literal(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '%' => out.push_str("%%"),
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out
}

/// The print fmt argument that prints the `level` field as `INFO` etc.
pub const LEVEL_ARG: &str = "__print_symbolic(REC->level, { 1, \"ERROR\" }, { 2, \"WARN\" }, { 3, \"INFO\" }, { 4, \"DEBUG\" }, { 5, \"TRACE\" })";

/// The `level` field's value: 1 (ERROR) to 5 (TRACE), as the `log` crate numbers them.
pub fn level_value(level: &tracing_core::Level) -> u8 {
    match *level {
        tracing_core::Level::ERROR => 1,
        tracing_core::Level::WARN => 2,
        tracing_core::Level::INFO => 3,
        tracing_core::Level::DEBUG => 4,
        tracing_core::Level::TRACE => 5,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers() {
        assert_eq!(c_identifier("myapp::db"), "myapp__db");
        assert_eq!(c_identifier("log.target"), "log_target");
        assert_eq!(c_identifier("my-crate::a b"), "my_crate__a_b");
        assert_eq!(c_identifier("9lives"), "_9lives");
        assert_eq!(c_identifier(""), "_");
        assert_eq!(
            event_name("myapp::db", "event src/db.rs:12", Some(12), "INFO"),
            "myapp__db__L12"
        );
        assert_eq!(event_name("myapp", "query", Some(3), "INFO"), "myapp__query");
        assert_eq!(event_name("log", "log event", None, "WARN"), "log__warn");
        assert_eq!(fmt_literal("50% \"x\" \\"), "50%% \\\"x\\\" \\\\");
    }
}
