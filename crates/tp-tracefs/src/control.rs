//! Text bound for tracefs control files, checked before it is written.
//!
//! A control file takes commands (`uprobe_events` one definition a line; `filter` and
//! `trigger` one expression; event names are directory names). Text from the command line
//! that held a newline would be a second command (`x=%di\np:inj2 ./chain:0x1139` defines a
//! probe no one asked for), a `/` in an event name another directory. So every piece is
//! checked against the grammar of the file it goes to, and a bad one is refused with the
//! offending character shown.

use crate::error::{Error, Result};

/// What a piece of text is, and so which characters it may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Piece {
    /// A probe's group or event name in a definition: `[A-Za-z_][A-Za-z0-9_]*` (the
    /// kernel's `is_good_name`; a group may hold `.` too).
    ProbeName,
    /// A probe group (`sdt_postgresql`, `probe_libc`; `.` allowed).
    ProbeGroup,
    /// A probed file's path in a definition: no spaces or control characters.
    ProbePath,
    /// One fetcharg (`x=%di:u64`, `+0(%di):string`): no spaces or control characters.
    FetchArg,
    /// A filter expression: one line, no control characters.
    Filter,
    /// An event trigger (`stacktrace if prev_state == 2`): one line, no control characters.
    Trigger,
    /// An event's system or name as a directory under `events/`.
    EventDir,
}

impl Piece {
    fn what(self) -> &'static str {
        match self {
            Piece::ProbeName => "probe name",
            Piece::ProbeGroup => "probe group",
            Piece::ProbePath => "probed file",
            Piece::FetchArg => "probe argument",
            Piece::Filter => "filter",
            Piece::Trigger => "trigger",
            Piece::EventDir => "event name",
        }
    }

    fn rule(self) -> &'static str {
        match self {
            Piece::ProbeName => "a name is letters, digits and '_', not starting with a digit",
            Piece::ProbeGroup => {
                "a group is letters, digits, '_' and '.', not starting with a digit"
            }
            Piece::ProbePath | Piece::FetchArg => {
                "a probe definition is one line of words separated by spaces"
            }
            Piece::Filter | Piece::Trigger => "it is written to a tracefs file as one line",
            Piece::EventDir => "an event's system and name are directory names under events/",
        }
    }

    /// The first character `text` may not hold here, with its byte offset.
    fn first_bad(self, text: &str) -> Option<(usize, char)> {
        let ident = |i: usize, c: char, dot: bool| {
            c.is_ascii_alphabetic()
                || c == '_'
                || (i > 0 && (c.is_ascii_digit() || (dot && c == '.')))
        };
        text.char_indices().find(|&(i, c)| match self {
            Piece::ProbeName => !ident(i, c, false),
            Piece::ProbeGroup => !ident(i, c, true),
            Piece::ProbePath | Piece::FetchArg => c.is_control() || c.is_whitespace(),
            Piece::Filter | Piece::Trigger => c.is_control() && c != '\t',
            Piece::EventDir => c.is_control() || c.is_whitespace() || c == '/',
        })
    }
}

/// Check `text` as a `piece`: an error naming the piece, the text and the offending
/// character (and where it is) when it does not fit the file it is bound for.
pub fn check(piece: Piece, text: &str) -> Result<()> {
    if text.is_empty() && piece != Piece::Filter {
        return Err(Error::BadText {
            what: piece.what(),
            text: String::new(),
            found: "nothing".into(),
            rule: piece.rule(),
        });
    }
    if piece == Piece::EventDir && (text == "." || text == "..") {
        return Err(Error::BadText {
            what: piece.what(),
            text: text.into(),
            found: format!("{text:?}"),
            rule: piece.rule(),
        });
    }
    match piece.first_bad(text) {
        None => Ok(()),
        Some((at, c)) => Err(Error::BadText {
            what: piece.what(),
            text: text.into(),
            found: format!("{} at byte {at}", describe(c)),
            rule: piece.rule(),
        }),
    }
}

/// A character as a user reads it in a message.
fn describe(c: char) -> String {
    match c {
        '\n' => "a newline (\\n)".into(),
        '\r' => "a carriage return (\\r)".into(),
        '\t' => "a tab (\\t)".into(),
        ' ' => "a space".into(),
        c if c.is_control() || c.is_whitespace() => format!("the character U+{:04X}", c as u32),
        c => format!("{c:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_injection_is_refused_with_its_character() {
        let e = check(Piece::FetchArg, "x=%di\np:inj2 ./chain:0x1139").unwrap_err().to_string();
        assert!(e.contains("a newline (\\n) at byte 5"), "{e}");
        assert!(e.contains("probe argument \"x=%di\\np:inj2 ./chain:0x1139\""), "{e}");
    }

    #[test]
    fn each_file_has_its_grammar() {
        for (p, ok) in [
            (Piece::ProbeName, "query__start"),
            (Piece::ProbeGroup, "sdt_python3.11"),
            (Piece::ProbePath, "/usr/lib/postgresql/15/bin/postgres"),
            (Piece::FetchArg, "arg1=+0(%di):string"),
            (Piece::Filter, "prev_pid == 1 &&\tnext_pid > 0"),
            (Piece::Filter, ""),
            (Piece::Trigger, "stacktrace if prev_state == 2"),
            (Piece::EventDir, "sched_switch"),
        ] {
            assert!(check(p, ok).is_ok(), "{p:?} {ok:?}");
        }
        for (p, bad, found) in [
            (Piece::ProbeName, "1st", "'1' at byte 0"),
            (Piece::ProbeName, "a.b", "'.' at byte 1"),
            (Piece::ProbeName, "", "nothing"),
            (Piece::ProbePath, "/tmp/a b", "a space at byte 6"),
            (Piece::Filter, "pid == 1\n", "a newline (\\n) at byte 8"),
            (Piece::Trigger, "stacktrace\r", "a carriage return (\\r) at byte 10"),
            (Piece::EventDir, "../x", "'/' at byte 2"),
            (Piece::EventDir, "..", "\"..\""),
            (Piece::EventDir, "a\u{1}", "the character U+0001 at byte 1"),
        ] {
            let e = check(p, bad).unwrap_err().to_string();
            assert!(e.contains(found), "{p:?} {bad:?}: {e}");
        }
    }
}
