//! Event format files: `events/SYS/NAME/format`.
//!
//! ```text
//! name: sched_switch
//! ID: 372
//! format:
//!     field:unsigned short common_type;    offset:0;    size:2;    signed:0;
//!     ...
//!
//!     field:char prev_comm[16];    offset:8;    size:16;    signed:0;
//!     ...
//!
//! print fmt: "prev_comm=%s ...", REC->prev_comm, ...
//! ```
//!
//! The fields before the first blank line are the common fields. The print fmt is kept as
//! text here; [`crate::printfmt`] parses and compiles it.

use std::fmt;

/// One event's layout and print format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventFormat {
    /// Subsystem (the directory under `events/`), e.g. `sched`.
    pub system: String,
    pub name: String,
    pub id: u32,
    /// `common_type`, `common_flags`, `common_preempt_count`, `common_pid`.
    pub common_fields: Vec<Field>,
    /// The event's own fields, in file order.
    pub fields: Vec<Field>,
    /// The text after `print fmt: `, not yet parsed.
    pub print_fmt: String,
}

/// How a field's bytes are laid out in the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    /// An integer (or enum, bool, pointer-sized value) of `size` bytes.
    Scalar,
    /// A pointer value (`void *`, `const char *`): printed as an integer, never followed.
    Pointer,
    /// A fixed array `type name[len]`, elements of `size / len` bytes.
    Array { len: usize },
    /// `type name[]` with size 0: the rest of the record from `offset`.
    Flexible,
    /// `__data_loc type[] name`: a u32 at `offset`, low 16 bits the offset of the data from
    /// the start of the record, high 16 bits its length.
    DataLoc,
    /// `__rel_loc type[] name`: as `DataLoc`, the offset relative to the end of this field.
    RelLoc,
}

/// One field of an event record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    /// The C type without the name and array suffix: `char`, `unsigned long`, `const char *`.
    /// For `__data_loc`/`__rel_loc` fields, the element type (`char`, `u64`, `cpumask_t`).
    pub type_name: String,
    /// The declaration exactly as the format file wrote it, e.g. `char prev_comm[16]`.
    pub declaration: String,
    pub offset: usize,
    pub size: usize,
    pub signed: bool,
    pub kind: FieldKind,
}

impl Field {
    /// Size in bytes of one element: the field's size for scalars, `size / len` for arrays,
    /// and the element type's natural size for dynamic arrays.
    pub fn element_size(&self) -> usize {
        match self.kind {
            FieldKind::Scalar | FieldKind::Pointer => self.size,
            FieldKind::Array { len } => self.size.checked_div(len).unwrap_or(0),
            FieldKind::Flexible | FieldKind::DataLoc | FieldKind::RelLoc => {
                c_type_size(&self.type_name).unwrap_or(1)
            }
        }
    }

    /// True for character data (`char` arrays and dynamic `char[]`), printed as strings.
    pub fn is_string(&self) -> bool {
        let base = self.type_name.trim_start_matches("const ").trim();
        matches!(
            self.kind,
            FieldKind::Array { .. } | FieldKind::Flexible | FieldKind::DataLoc | FieldKind::RelLoc
        ) && matches!(base, "char" | "unsigned char" | "signed char")
            && self.element_size() == 1
    }

    /// The bytes this field's value occupies in `record` (for dynamic fields, the data the
    /// location word points at). `None` when the record is too short or the location lies.
    pub fn bytes<'r>(&self, record: &'r [u8], big_endian: bool) -> Option<&'r [u8]> {
        match self.kind {
            FieldKind::Scalar | FieldKind::Pointer | FieldKind::Array { .. } => {
                record.get(self.offset..self.offset.checked_add(self.size)?)
            }
            FieldKind::Flexible => record.get(self.offset..),
            FieldKind::DataLoc | FieldKind::RelLoc => {
                let word = read_uint(record.get(self.offset..self.offset + 4)?, big_endian) as u32;
                let mut start = (word & 0xffff) as usize;
                let len = (word >> 16) as usize;
                if self.kind == FieldKind::RelLoc {
                    start += self.offset + self.size;
                }
                record.get(start..start.checked_add(len)?)
            }
        }
    }

    /// The field read as an integer, sign-extended when the field is signed.
    /// `None` when the record is too short or the field is not 1, 2, 4 or 8 bytes.
    pub fn read_int(&self, record: &[u8], big_endian: bool) -> Option<i128> {
        let bytes = record.get(self.offset..self.offset.checked_add(self.size)?)?;
        read_int(bytes, self.signed, big_endian)
    }
}

/// First event ID of Rust tracepoints (crate `tp` numbers its events from here); kernel
/// event IDs stay far below it, so an ID says whether an event is a Rust program's.
pub const RUST_ID_BASE: u16 = 40000;

/// Read a 1, 2, 4 or 8 byte unsigned integer (other lengths give 0).
pub fn read_uint(bytes: &[u8], big_endian: bool) -> u64 {
    macro_rules! conv {
        ($t:ty) => {{
            let a = bytes.try_into().unwrap_or([0; std::mem::size_of::<$t>()]);
            (if big_endian { <$t>::from_be_bytes(a) } else { <$t>::from_le_bytes(a) }) as u64
        }};
    }
    match bytes.len() {
        1 => bytes[0] as u64,
        2 => conv!(u16),
        4 => conv!(u32),
        8 => conv!(u64),
        _ => 0,
    }
}

/// Read a 1, 2, 4 or 8 byte integer, sign-extending when `signed`.
pub fn read_int(bytes: &[u8], signed: bool, big_endian: bool) -> Option<i128> {
    let n = bytes.len();
    if !matches!(n, 1 | 2 | 4 | 8) {
        return None;
    }
    let v = read_uint(bytes, big_endian);
    Some(if signed {
        let shift = 64 - 8 * n as u32;
        (((v << shift) as i64) >> shift) as i128
    } else {
        v as i128
    })
}

/// Natural size of the C element types that appear in dynamic arrays.
pub fn c_type_size(t: &str) -> Option<usize> {
    let t = t.trim().trim_start_matches("const ").trim();
    if t.ends_with('*') {
        return Some(8);
    }
    Some(match t {
        "char" | "signed char" | "unsigned char" | "u8" | "s8" | "__u8" | "__s8" | "bool"
        | "uint8_t" | "int8_t" => 1,
        "short" | "unsigned short" | "u16" | "s16" | "__u16" | "__s16" | "uint16_t" | "int16_t" => {
            2
        }
        "int" | "unsigned int" | "unsigned" | "u32" | "s32" | "__u32" | "__s32" | "uint32_t"
        | "int32_t" | "pid_t" => 4,
        "long" | "unsigned long" | "long long" | "unsigned long long" | "u64" | "s64" | "__u64"
        | "__s64" | "uint64_t" | "int64_t" | "size_t" | "ssize_t" => 8,
        _ => return None,
    })
}

/// A malformed format file: which event, which line, what was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FormatError {
    /// `system/name` as far as known.
    pub event: String,
    /// 1-based line number in the format file (0 when not about one line).
    pub line: usize,
    pub message: String,
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(f, "events/{}/format line {}: {}", self.event, self.line, self.message)
        } else {
            write!(f, "events/{}/format: {}", self.event, self.message)
        }
    }
}

impl std::error::Error for FormatError {}

impl EventFormat {
    /// Parse one format file. `system` is the directory it came from (format files do not
    /// name their system).
    pub fn parse(system: &str, text: &str) -> Result<EventFormat, FormatError> {
        let mut name = None;
        let mut id = None;
        let mut common_fields = Vec::new();
        let mut fields = Vec::new();
        let mut in_common = true;
        let mut print_fmt = None;
        let err = |name: &Option<String>, line: usize, message: String| FormatError {
            event: format!("{}/{}", system, name.as_deref().unwrap_or("?")),
            line,
            message,
        };
        let mut offset = 0;
        for (i, line) in text.lines().enumerate() {
            let lineno = i + 1;
            let line_start = offset;
            offset += line.len() + 1;
            let t = line.trim();
            if line.starts_with("print fmt: ") {
                // The print fmt runs to the end of the file: a few kernel formats have
                // string literals with raw newlines in them (ext4_fc_stats, ext4 fsmap).
                let rest = &text[line_start + "print fmt: ".len()..];
                print_fmt = Some(rest.strip_suffix('\n').unwrap_or(rest).to_string());
                break;
            } else if let Some(v) = line.strip_prefix("name: ") {
                name = Some(v.trim().to_string());
            } else if let Some(v) = line.strip_prefix("ID: ") {
                id = Some(
                    v.trim()
                        .parse::<u32>()
                        .map_err(|_| err(&name, lineno, format!("bad ID {:?}", v.trim())))?,
                );
            } else if t == "format:" {
            } else if t.is_empty() {
                if !common_fields.is_empty() {
                    in_common = false;
                }
            } else if t.starts_with("field:") {
                let f = parse_field_line(t).map_err(|m| err(&name, lineno, m))?;
                if in_common {
                    common_fields.push(f);
                } else {
                    fields.push(f);
                }
            } else {
                return Err(err(&name, lineno, format!("unexpected line {t:?}")));
            }
        }
        let name = name.ok_or_else(|| err(&None, 0, "no `name:` line".into()))?;
        let id = id.ok_or_else(|| err(&Some(name.clone()), 0, "no `ID:` line".into()))?;
        let print_fmt =
            print_fmt.ok_or_else(|| err(&Some(name.clone()), 0, "no `print fmt:` line".into()))?;
        Ok(EventFormat { system: system.to_string(), name, id, common_fields, fields, print_fmt })
    }

    /// Look up a field (own fields first, then common fields) by name.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().chain(&self.common_fields).find(|f| f.name == name)
    }

    /// All fields: common fields, then the event's own.
    pub fn all_fields(&self) -> impl Iterator<Item = &Field> {
        self.common_fields.iter().chain(&self.fields)
    }

    /// The format file text as the kernel prints it (for `tp format` and trace.dat writers).
    pub fn to_format_text(&self) -> String {
        let mut s = format!("name: {}\nID: {}\nformat:\n", self.name, self.id);
        let line = |s: &mut String, f: &Field| {
            s.push_str(&format!(
                "\tfield:{};\toffset:{};\tsize:{};\tsigned:{};\n",
                f.declaration, f.offset, f.size, f.signed as u8
            ))
        };
        self.common_fields.iter().for_each(|f| line(&mut s, f));
        s.push('\n');
        self.fields.iter().for_each(|f| line(&mut s, f));
        s.push_str(&format!("\nprint fmt: {}\n", self.print_fmt));
        s
    }
}

/// Parse `field:DECL;\toffset:N;\tsize:N;\tsigned:N;` (header_page writes `field: DECL;`).
pub fn parse_field_line(line: &str) -> Result<Field, String> {
    let mut declaration = None;
    let (mut offset, mut size, mut signed) = (None, None, None);
    for part in line.split(';') {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        let (key, value) =
            part.split_once(':').ok_or_else(|| format!("expected `key:value`, got {part:?}"))?;
        let value = value.trim();
        let num = || value.parse::<usize>().map_err(|_| format!("bad {key} value {value:?}"));
        match key.trim() {
            "field" => declaration = Some(value.to_string()),
            "offset" => offset = Some(num()?),
            "size" => size = Some(num()?),
            "signed" => signed = Some(num()? != 0),
            _ => {} // newer kernels may add attributes; they are not needed to decode
        }
    }
    let declaration = declaration.ok_or("no `field:` part")?;
    let offset = offset.ok_or("no `offset:` part")?;
    let size = size.ok_or("no `size:` part")?;
    let (name, type_name, kind) = parse_declaration(&declaration, size)?;
    Ok(Field { name, type_name, declaration, offset, size, signed: signed.unwrap_or(false), kind })
}

/// Split a C declaration into (name, type, kind).
fn parse_declaration(decl: &str, size: usize) -> Result<(String, String, FieldKind), String> {
    let d = decl.trim();
    for (prefix, kind) in [("__data_loc ", FieldKind::DataLoc), ("__rel_loc ", FieldKind::RelLoc)] {
        if let Some(rest) = d.strip_prefix(prefix) {
            let (ty, name) = split_name(rest)?;
            let ty = ty.trim_end_matches("[]").trim().to_string();
            return Ok((name, ty, kind));
        }
    }
    if let Some(open) = d.find('[') {
        let close =
            d.rfind(']').filter(|&c| c > open).ok_or_else(|| format!("unclosed `[` in {d:?}"))?;
        let (ty, name) = split_name(&d[..open])?;
        let dim = d[open + 1..close].trim();
        if dim.is_empty() {
            return Ok((name, ty, FieldKind::Flexible));
        }
        // Dimensions are numbers on this kernel; anything else (a macro) is sized by `size`.
        let len = dim.parse::<usize>().unwrap_or(size.max(1));
        if len == 0 {
            return Ok((name, ty, FieldKind::Flexible));
        }
        return Ok((name, ty, FieldKind::Array { len }));
    }
    let (ty, name) = split_name(d)?;
    let kind = if ty.contains('*') { FieldKind::Pointer } else { FieldKind::Scalar };
    Ok((name, ty, kind))
}

/// `unsigned long foo` -> (`unsigned long`, `foo`); `const char * p` -> (`const char *`, `p`).
fn split_name(d: &str) -> Result<(String, String), String> {
    let d = d.trim();
    let start = d.rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).map_or(0, |i| {
        // Past that character (it may be several bytes long).
        i + d[i..].chars().next().map_or(1, char::len_utf8)
    });
    let name = &d[start..];
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(format!("no field name in declaration {d:?}"));
    }
    let ty = d[..start].trim();
    if ty.is_empty() {
        return Err(format!("no type in declaration {d:?}"));
    }
    Ok((ty.to_string(), name.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SWITCH: &str = "name: sched_switch\nID: 372\nformat:\n\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\
\n\
\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\
\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n\
\tfield:__data_loc char[] name;\toffset:28;\tsize:4;\tsigned:0;\n\
\tfield:const char * filename;\toffset:32;\tsize:8;\tsigned:0;\n\
\tfield:char buf[];\toffset:40;\tsize:0;\tsigned:0;\n\
\n\
print fmt: \"prev_comm=%s\", REC->prev_comm\n";

    #[test]
    fn parses_fields_and_kinds() {
        let e = EventFormat::parse("sched", SWITCH).unwrap();
        assert_eq!((e.name.as_str(), e.id), ("sched_switch", 372));
        assert_eq!(e.common_fields.len(), 4);
        assert_eq!(e.fields.len(), 5);
        let comm = e.field("prev_comm").unwrap();
        assert_eq!(comm.kind, FieldKind::Array { len: 16 });
        assert!(comm.is_string());
        assert_eq!(e.field("prev_pid").unwrap().type_name, "pid_t");
        assert!(e.field("prev_pid").unwrap().signed);
        let name = e.field("name").unwrap();
        assert_eq!((name.kind, name.type_name.as_str()), (FieldKind::DataLoc, "char"));
        let f = e.field("filename").unwrap();
        assert_eq!((f.kind, f.type_name.as_str()), (FieldKind::Pointer, "const char *"));
        assert_eq!(e.field("buf").unwrap().kind, FieldKind::Flexible);
        assert_eq!(e.print_fmt, "\"prev_comm=%s\", REC->prev_comm");
        assert_eq!(EventFormat::parse("sched", &e.to_format_text()).unwrap(), e);
    }

    #[test]
    fn reads_dynamic_fields() {
        let e = EventFormat::parse("sched", SWITCH).unwrap();
        let mut rec = vec![0u8; 48];
        rec[28..32].copy_from_slice(&((3u32 << 16) | 44).to_le_bytes());
        rec[44..47].copy_from_slice(b"ab\0");
        assert_eq!(e.field("name").unwrap().bytes(&rec, false), Some(&b"ab\0"[..]));
        rec[28..32].copy_from_slice(&((300u32 << 16) | 44).to_le_bytes());
        assert_eq!(e.field("name").unwrap().bytes(&rec, false), None);
        rec[4..8].copy_from_slice(&(-5i32).to_le_bytes());
        assert_eq!(e.field("common_pid").unwrap().read_int(&rec, false), Some(-5));
    }

    #[test]
    fn print_fmt_may_span_lines() {
        let text = "name: x\nID: 1\nformat:\n\tfield:int a;\toffset:8;\tsize:4;\tsigned:1;\n\n\
print fmt: \"a\nb=%d\", REC->a\n";
        let e = EventFormat::parse("s", text).unwrap();
        assert_eq!(e.print_fmt, "\"a\nb=%d\", REC->a");
    }

    #[test]
    fn errors_name_event_and_line() {
        let bad = "name: x\nID: 1\nformat:\n\tfield:int;\toffset:0;\tsize:4;\tsigned:1;\n";
        let e = EventFormat::parse("s", bad).unwrap_err();
        assert_eq!(e.line, 4);
        assert!(e.to_string().starts_with("events/s/x/format line 4:"), "{e}");
        assert!(EventFormat::parse("s", "name: x\nID: zz\n").is_err());
        assert!(EventFormat::parse("s", "").is_err());
    }
}
