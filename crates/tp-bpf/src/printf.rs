//! printf: the conversions a format takes (checked when compiling) and the text of one
//! record (C's printf rules for flags, width, precision and length modifiers).

use crate::types::Ty;

/// One `%...` conversion: flags, width, precision, and its letter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Conv {
    pub letter: char,
    pub left: bool,
    pub zero: bool,
    pub plus: bool,
    pub space: bool,
    pub alt: bool,
    pub width: Option<usize>,
    pub precision: Option<usize>,
}

/// A piece of a parsed format: literal text or a conversion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    Text(String),
    Conv(Conv),
}

/// Split a format into text and conversions (`%%` is text).
pub fn pieces(format: &str) -> Result<Vec<Piece>, String> {
    let mut out = Vec::new();
    let mut text = String::new();
    let mut it = format.chars().peekable();
    while let Some(c) = it.next() {
        if c != '%' {
            text.push(c);
            continue;
        }
        if it.peek() == Some(&'%') {
            it.next();
            text.push('%');
            continue;
        }
        let mut conv = Conv {
            letter: ' ',
            left: false,
            zero: false,
            plus: false,
            space: false,
            alt: false,
            width: None,
            precision: None,
        };
        while let Some(&f) = it.peek() {
            match f {
                '-' => conv.left = true,
                '0' => conv.zero = true,
                '+' => conv.plus = true,
                ' ' => conv.space = true,
                '#' => conv.alt = true,
                _ => break,
            }
            it.next();
        }
        let num = |it: &mut std::iter::Peekable<std::str::Chars<'_>>| {
            let mut s = String::new();
            while let Some(&d) = it.peek().filter(|d| d.is_ascii_digit()) {
                s.push(d);
                it.next();
            }
            s.parse::<usize>().ok()
        };
        conv.width = num(&mut it);
        if it.peek() == Some(&'.') {
            it.next();
            conv.precision = Some(num(&mut it).unwrap_or(0));
        }
        while it.peek().is_some_and(|&l| matches!(l, 'l' | 'h' | 'z' | 'j' | 't')) {
            it.next();
        }
        let Some(letter) = it.next() else {
            return Err("the format ends inside a `%` conversion".into());
        };
        if !"diuxXoscp".contains(letter) && letter != 'r' {
            return Err(format!("printf does not take `%{letter}`"));
        }
        conv.letter = letter;
        if !text.is_empty() {
            out.push(Piece::Text(std::mem::take(&mut text)));
        }
        out.push(Piece::Conv(conv));
    }
    if !text.is_empty() {
        out.push(Piece::Text(text));
    }
    Ok(out)
}

pub fn conversions(format: &str) -> Result<Vec<Conv>, String> {
    Ok(pieces(format)?
        .into_iter()
        .filter_map(|p| match p {
            Piece::Conv(c) => Some(c),
            Piece::Text(_) => None,
        })
        .collect())
}

/// Whether an argument of type `t` fits the conversion.
pub fn check(c: Conv, t: &Ty) -> Result<(), String> {
    let ok = match c.letter {
        's' => true,
        'r' => matches!(t, Ty::Buf(_) | Ty::Str(_)),
        _ => matches!(t, Ty::Int { .. } | Ty::Ksym | Ty::Usym),
    };
    if ok {
        Ok(())
    } else {
        Err(format!("`%{}` does not print a {}", c.letter, t.name()))
    }
}

/// What a conversion prints.
#[derive(Debug, Clone)]
pub enum Arg {
    Int(i64),
    Text(String),
}

fn pad(c: &Conv, body: String, numeric: bool) -> String {
    let Some(w) = c.width else { return body };
    let len = body.chars().count();
    if len >= w {
        return body;
    }
    if c.left {
        return format!("{body}{}", " ".repeat(w - len));
    }
    if c.zero && numeric && c.precision.is_none() {
        let (sign, digits) = match body.strip_prefix(['-', '+', ' ']) {
            Some(d) => (&body[..1], d.to_string()),
            None => ("", body.clone()),
        };
        let (prefix, digits) = match digits.strip_prefix("0x").or(digits.strip_prefix("0X")) {
            Some(d) => (&digits[..2], d.to_string()),
            None => ("", digits.clone()),
        };
        return format!("{sign}{prefix}{}{digits}", "0".repeat(w - len));
    }
    format!("{}{body}", " ".repeat(w - len))
}

/// One conversion's text.
pub fn render(c: &Conv, a: &Arg) -> String {
    match (c.letter, a) {
        ('s' | 'r', Arg::Text(s)) => {
            let s = match c.precision {
                Some(p) => s.chars().take(p).collect(),
                None => s.clone(),
            };
            pad(c, s, false)
        }
        ('s', Arg::Int(v)) => pad(c, v.to_string(), false),
        ('c', Arg::Int(v)) => pad(c, ((*v as u8) as char).to_string(), false),
        (_, Arg::Text(s)) => pad(c, s.clone(), false),
        (l, Arg::Int(v)) => {
            let mut digits = match l {
                'd' | 'i' => v.unsigned_abs().to_string(),
                'u' => (*v as u64).to_string(),
                'x' | 'p' => format!("{:x}", *v as u64),
                'X' => format!("{:X}", *v as u64),
                'o' => format!("{:o}", *v as u64),
                _ => v.to_string(),
            };
            if let Some(p) = c.precision {
                if digits.len() < p {
                    digits = format!("{}{digits}", "0".repeat(p - digits.len()));
                }
            }
            let prefix = match l {
                'p' => "0x",
                'x' if c.alt && *v != 0 => "0x",
                'X' if c.alt && *v != 0 => "0X",
                'o' if c.alt => "0",
                _ => "",
            };
            let sign = match l {
                'd' | 'i' if *v < 0 => "-",
                'd' | 'i' if c.plus => "+",
                'd' | 'i' if c.space => " ",
                _ => "",
            };
            pad(c, format!("{sign}{prefix}{digits}"), true)
        }
    }
}

/// The whole text of a printf with its arguments.
pub fn format(pieces: &[Piece], args: &[Arg]) -> String {
    let mut out = String::new();
    let mut it = args.iter();
    for p in pieces {
        match p {
            Piece::Text(t) => out.push_str(t),
            Piece::Conv(c) => out.push_str(&render(c, it.next().unwrap_or(&Arg::Int(0)))),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(fmt: &str, args: &[Arg]) -> String {
        format(&pieces(fmt).unwrap(), args)
    }

    #[test]
    fn c_rules() {
        // The same line bpftrace 0.17 printed for this printf.
        assert_eq!(
            f(
                "hello %d %s %5d|%-5s|%x\n",
                &[
                    Arg::Int(42),
                    Arg::Text("str".into()),
                    Arg::Int(7),
                    Arg::Text("ab".into()),
                    Arg::Int(255)
                ]
            ),
            "hello 42 str     7|ab   |ff\n"
        );
        assert_eq!(
            f("%05d %-4d| %+d %lu %%", &[Arg::Int(-42), Arg::Int(3), Arg::Int(5), Arg::Int(-1)]),
            "-0042 3   | +5 18446744073709551615 %"
        );
        assert_eq!(
            f(
                "%#x %08x %.3s %c",
                &[Arg::Int(255), Arg::Int(255), Arg::Text("abcdef".into()), Arg::Int(65)]
            ),
            "0xff 000000ff abc A"
        );
        assert!(pieces("%q").is_err());
    }
}
