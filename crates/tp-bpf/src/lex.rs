//! Tokens of the bpftrace language. The lexer is pulled by the parser, which asks for a raw
//! attach point (`uprobe:/bin/bash:readline`, `tracepoint:sched:*`) where one may stand,
//! since those are not made of ordinary tokens.

use crate::ast::Pos;
use crate::error::Error;

#[derive(Debug, Clone, PartialEq)]
pub enum Tok {
    Ident(String),
    Int(i64),
    Str(String),
    Var(String),
    Map(String),
    /// Punctuation and operators, as written (`{`, `->`, `<<=`, ...).
    P(&'static str),
    Eof,
}

const PUNCT: [&str; 45] = [
    "<<=", ">>=", "->", "++", "--", "==", "!=", "<=", ">=", "&&", "||", "<<", ">>", "+=", "-=",
    "*=", "/=", "%=", "&=", "|=", "^=", "{", "}", "(", ")", "[", "]", ",", ";", ":", "/", "?", "!",
    "~", "+", "-", "*", "%", "&", "|", "^", "<", ">", "=", ".",
];

pub struct Lexer<'a> {
    src: &'a [u8],
    at: usize,
    line: u32,
    line_start: usize,
}

impl<'a> Lexer<'a> {
    pub fn new(src: &'a str) -> Lexer<'a> {
        Lexer { src: src.as_bytes(), at: 0, line: 1, line_start: 0 }
    }

    pub fn pos(&self) -> Pos {
        Pos { line: self.line, col: (self.at - self.line_start + 1) as u32 }
    }

    fn bump(&mut self) -> u8 {
        let c = self.src[self.at];
        self.at += 1;
        if c == b'\n' {
            self.line += 1;
            self.line_start = self.at;
        }
        c
    }

    fn peek_byte(&self, k: usize) -> Option<u8> {
        self.src.get(self.at + k).copied()
    }

    /// Skip blanks, `//` and `/* */` comments, and lines starting with `#` (a shebang or a
    /// preprocessor line, which bpftrace hands to its C parser).
    pub fn skip_space(&mut self) -> Result<(), Error> {
        loop {
            match (self.peek_byte(0), self.peek_byte(1)) {
                (Some(c), _) if c.is_ascii_whitespace() => {
                    self.bump();
                }
                (Some(b'/'), Some(b'/')) => {
                    while self.peek_byte(0).is_some_and(|c| c != b'\n') {
                        self.bump();
                    }
                }
                (Some(b'/'), Some(b'*')) => {
                    let pos = self.pos();
                    self.bump();
                    self.bump();
                    loop {
                        match (self.peek_byte(0), self.peek_byte(1)) {
                            (Some(b'*'), Some(b'/')) => {
                                self.bump();
                                self.bump();
                                break;
                            }
                            (Some(_), _) => {
                                self.bump();
                            }
                            (None, _) => return Err(Error::syntax(pos, "unterminated comment")),
                        }
                    }
                }
                (Some(b'#'), _) if self.at == self.line_start => {
                    while self.peek_byte(0).is_some_and(|c| c != b'\n') {
                        self.bump();
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    /// One attach point's text: everything up to a blank, `,` or `{`; `None` at the end.
    pub fn attach_point(&mut self) -> Result<Option<(String, Pos)>, Error> {
        self.skip_space()?;
        let pos = self.pos();
        let start = self.at;
        while let Some(c) = self.peek_byte(0) {
            if c.is_ascii_whitespace() || c == b',' || c == b'{' {
                break;
            }
            // `tracepoint:a:b/pid == 1/`: a predicate right after the name.
            if c == b'/' && self.at > start && self.src[self.at - 1] != b':' && !self.in_path(start)
            {
                break;
            }
            self.bump();
        }
        if self.at == start {
            return Ok(None);
        }
        Ok(Some((String::from_utf8_lossy(&self.src[start..self.at]).into_owned(), pos)))
    }

    /// Inside a path (`uprobe:/usr/bin/x`): a `/` after the provider's `:` began one.
    fn in_path(&self, start: usize) -> bool {
        let text = &self.src[start..self.at];
        text.windows(2).any(|w| w == b":/")
    }

    pub fn token(&mut self) -> Result<(Tok, Pos), Error> {
        self.skip_space()?;
        let pos = self.pos();
        let Some(c) = self.peek_byte(0) else { return Ok((Tok::Eof, pos)) };
        if c.is_ascii_digit() {
            return self.number(pos).map(|t| (t, pos));
        }
        if c == b'"' {
            return self.string(pos).map(|t| (t, pos));
        }
        if c.is_ascii_alphabetic() || c == b'_' {
            return Ok((Tok::Ident(self.word()), pos));
        }
        if c == b'$' || c == b'@' {
            self.bump();
            let w = self.word();
            if c == b'$' {
                if w.is_empty() {
                    return Err(Error::syntax(pos, "`$` without a name"));
                }
                return Ok((Tok::Var(w), pos));
            }
            return Ok((Tok::Map(w), pos));
        }
        for p in PUNCT {
            if self.src[self.at..].starts_with(p.as_bytes()) {
                for _ in 0..p.len() {
                    self.bump();
                }
                return Ok((Tok::P(p), pos));
            }
        }
        Err(Error::syntax(pos, format!("unexpected character `{}`", c as char)))
    }

    fn word(&mut self) -> String {
        let start = self.at;
        while self.peek_byte(0).is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_') {
            self.bump();
        }
        String::from_utf8_lossy(&self.src[start..self.at]).into_owned()
    }

    fn number(&mut self, pos: Pos) -> Result<Tok, Error> {
        let start = self.at;
        while self.peek_byte(0).is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_') {
            self.bump();
        }
        let text: String = String::from_utf8_lossy(&self.src[start..self.at])
            .chars()
            .filter(|&c| c != '_')
            .collect();
        let (digits, radix) = if let Some(h) = text.strip_prefix("0x").or(text.strip_prefix("0X")) {
            (h.to_string(), 16)
        } else if text.len() > 1 && text.starts_with('0') {
            (text[1..].to_string(), 8)
        } else {
            (text.clone(), 10)
        };
        // Scale suffixes as bpftrace has them (1K, 4M, 2G are not among them; only
        // time units `ns us ms s` are, in 0.17 none): plain numbers only.
        u64::from_str_radix(&digits, radix)
            .map(|v| Tok::Int(v as i64))
            .map_err(|_| Error::syntax(pos, format!("bad number `{text}`")))
    }

    fn string(&mut self, pos: Pos) -> Result<Tok, Error> {
        self.bump();
        let mut out = Vec::new();
        loop {
            let Some(c) = self.peek_byte(0) else {
                return Err(Error::syntax(pos, "unterminated string"));
            };
            self.bump();
            match c {
                b'"' => break,
                b'\\' => {
                    let Some(e) = self.peek_byte(0) else {
                        return Err(Error::syntax(pos, "unterminated string"));
                    };
                    self.bump();
                    let c = match e {
                        b'n' => b'\n',
                        b't' => b'\t',
                        b'r' => b'\r',
                        b'0' => 0,
                        b'\\' => b'\\',
                        b'"' => b'"',
                        b'x' => {
                            let hex: Vec<u8> = (0..2).filter_map(|k| self.peek_byte(k)).collect();
                            match std::str::from_utf8(&hex)
                                .ok()
                                .and_then(|h| u8::from_str_radix(h, 16).ok())
                            {
                                Some(v) => {
                                    self.bump();
                                    self.bump();
                                    v
                                }
                                None => {
                                    return Err(Error::syntax(pos, "`\\x` needs two hex digits"))
                                }
                            }
                        }
                        other => {
                            out.push(b'\\');
                            other
                        }
                    };
                    out.push(c);
                }
                c => out.push(c),
            }
        }
        Ok(Tok::Str(String::from_utf8_lossy(&out).into_owned()))
    }
}
