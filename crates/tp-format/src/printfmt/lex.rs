//! Tokens of the print fmt text: the C subset that `TP_printk` arguments are written in,
//! after the preprocessor ran (what tracefs publishes).

/// One token and the byte offset where it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Tok {
    /// A string literal, escapes resolved.
    Str(Vec<u8>),
    /// An integer or character literal: value, `U` suffix (or a hex/octal literal that does
    /// not fit `int`), `L`/`LL` suffix.
    Num {
        value: u64,
        unsigned: bool,
        long: bool,
        hex: bool,
    },
    Ident(String),
    /// Operators and punctuation, longest match first (`<<=` is never used; `->`, `<<`,
    /// `>>`, `<=`, `>=`, `==`, `!=`, `&&`, `||` are).
    Punct(&'static str),
}

pub(crate) struct Token {
    pub tok: Tok,
    pub pos: usize,
}

const PUNCTS: &[&str] = &[
    "->", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "++", "--", "(", ")", "[", "]", "{", "}",
    ",", ";", "?", ":", "+", "-", "*", "/", "%", "<", ">", "!", "~", "&", "|", "^", ".", "=",
];

/// Upper bound on tokens, so a hostile print fmt cannot make the lexer allocate without limit
/// (the longest print fmt on a 6.18 kernel has a few thousand tokens).
const MAX_TOKENS: usize = 1 << 18;

pub(crate) fn lex(src: &str) -> Result<Vec<Token>, (usize, String)> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if out.len() >= MAX_TOKENS {
            return Err((i, "too many tokens".into()));
        }
        let start = i;
        if c == b'"' {
            let (s, next) = string_lit(b, i + 1, b'"')?;
            out.push(Token { tok: Tok::Str(s), pos: start });
            i = next;
        } else if c == b'\'' {
            let (s, next) = string_lit(b, i + 1, b'\'')?;
            if s.len() != 1 {
                return Err((start, "character literal must hold one character".into()));
            }
            // `char` is signed on the architectures tracefs runs on; the literal has type int.
            let v = s[0] as i8 as i64 as u64;
            out.push(Token {
                tok: Tok::Num { value: v, unsigned: false, long: false, hex: false },
                pos: start,
            });
            i = next;
        } else if c.is_ascii_digit() {
            let (tok, next) = number(b, i)?;
            out.push(Token { tok, pos: start });
            i = next;
        } else if c.is_ascii_alphabetic() || c == b'_' {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(Token { tok: Tok::Ident(src[start..i].to_string()), pos: start });
        } else {
            let p = PUNCTS
                .iter()
                .find(|p| b[i..].starts_with(p.as_bytes()))
                .ok_or_else(|| (i, format!("unexpected character {:?}", c as char)))?;
            out.push(Token { tok: Tok::Punct(p), pos: start });
            i += p.len();
        }
    }
    Ok(out)
}

fn string_lit(b: &[u8], mut i: usize, quote: u8) -> Result<(Vec<u8>, usize), (usize, String)> {
    let start = i - 1;
    let mut s = Vec::new();
    loop {
        let Some(&c) = b.get(i) else {
            return Err((start, "unterminated literal".into()));
        };
        i += 1;
        if c == quote {
            return Ok((s, i));
        }
        if c != b'\\' {
            s.push(c);
            continue;
        }
        let Some(&e) = b.get(i) else {
            return Err((start, "unterminated literal".into()));
        };
        i += 1;
        match e {
            b'n' => s.push(b'\n'),
            b't' => s.push(b'\t'),
            b'r' => s.push(b'\r'),
            b'a' => s.push(7),
            b'b' => s.push(8),
            b'f' => s.push(12),
            b'v' => s.push(11),
            b'e' => s.push(27),
            b'0'..=b'7' => {
                let mut v = (e - b'0') as u32;
                for _ in 0..2 {
                    match b.get(i) {
                        Some(&d @ b'0'..=b'7') => {
                            v = v * 8 + (d - b'0') as u32;
                            i += 1;
                        }
                        _ => break,
                    }
                }
                s.push(v as u8);
            }
            b'x' => {
                let mut v = 0u32;
                let mut n = 0;
                while let Some(d) = b.get(i).and_then(|d| (*d as char).to_digit(16)) {
                    v = (v << 4 | d) & 0xff;
                    i += 1;
                    n += 1;
                }
                if n == 0 {
                    return Err((i - 2, "\\x without hex digits".into()));
                }
                s.push(v as u8);
            }
            other => s.push(other), // \\ \" \' \?
        }
    }
}

fn number(b: &[u8], mut i: usize) -> Result<(Tok, usize), (usize, String)> {
    let start = i;
    let (radix, hex) = if b[i..].starts_with(b"0x") || b[i..].starts_with(b"0X") {
        i += 2;
        (16, true)
    } else if b[i] == b'0' {
        (8, false)
    } else {
        (10, false)
    };
    let mut value: u64 = 0;
    let mut digits = 0;
    while let Some(d) = b.get(i).and_then(|d| (*d as char).to_digit(radix)) {
        value = value
            .checked_mul(radix as u64)
            .and_then(|v| v.checked_add(d as u64))
            .ok_or_else(|| (start, "integer literal too large".into()))?;
        i += 1;
        digits += 1;
    }
    if hex && digits == 0 {
        return Err((start, "0x without digits".into()));
    }
    let (mut unsigned, mut long) = (false, false);
    while let Some(&c) = b.get(i) {
        match c {
            b'u' | b'U' => unsigned = true,
            b'l' | b'L' => long = true,
            _ => break,
        }
        i += 1;
    }
    if b.get(i).is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_' || *c == b'.') {
        return Err((i, "malformed number".into()));
    }
    Ok((Tok::Num { value, unsigned, long, hex: radix != 10 }, i))
}
