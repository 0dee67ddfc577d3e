//! USDT: the `.note.stapsdt` notes `<sys/sdt.h>` leaves in a binary (one per probe site:
//! its address, the link-time address of `.stapsdt.base`, the semaphore's address, then
//! provider, name and argument specs such as `-4@%edi 8@-16(%rbp)`), and the uprobe that
//! fires at a site with the arguments fetched as the kernel's fetchargs.

use object::{Object, ObjectSection};

use crate::elf::Binary;
use crate::{Error, Result};

/// One SDT probe site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SdtNote {
    pub provider: String,
    pub name: String,
    /// Address of the site (adjusted for a prelinked `.stapsdt.base`).
    pub location: u64,
    /// Address of the semaphore, 0 when the probe has none.
    pub semaphore: u64,
    /// The argument specs as the note has them, space-separated.
    pub args: String,
}

const NT_STAPSDT: u32 = 3;

/// The SDT notes of `bin`, in file order (none when it has no `.note.stapsdt`).
pub fn notes(bin: &Binary) -> Result<Vec<SdtNote>> {
    let file = bin.parse()?;
    let Some(sec) = file.section_by_name(".note.stapsdt") else { return Ok(Vec::new()) };
    let base = file.section_by_name(".stapsdt.base").map(|s| s.address());
    let data = sec.data().map_err(|e| bin.elf_error(e))?;
    let mut v = parse_notes(data, file.is_little_endian(), file.is_64())
        .map_err(|reason| Error::SdtNote { path: bin.path.clone(), reason })?;
    // A prelinked binary moved `.stapsdt.base`; the notes still hold the link-time address.
    if let Some(actual) = base {
        for (n, note_base) in &mut v {
            if *note_base != 0 && actual != *note_base {
                let d = actual.wrapping_sub(*note_base);
                n.location = n.location.wrapping_add(d);
                if n.semaphore != 0 {
                    n.semaphore = n.semaphore.wrapping_add(d);
                }
            }
        }
    }
    Ok(v.into_iter().map(|(n, _)| n).collect())
}

/// Decode a `.note.stapsdt` section: (note, its `.stapsdt.base` address) per stapsdt note.
pub fn parse_notes(mut d: &[u8], little: bool, is_64: bool) -> Result<Vec<(SdtNote, u64)>, String> {
    let u32_at = |b: &[u8]| -> u32 {
        let a = [b[0], b[1], b[2], b[3]];
        if little {
            u32::from_le_bytes(a)
        } else {
            u32::from_be_bytes(a)
        }
    };
    let word = if is_64 { 8 } else { 4 };
    let addr_at = |b: &[u8]| -> u64 {
        if is_64 {
            let a: [u8; 8] = b[..8].try_into().unwrap_or_default();
            if little {
                u64::from_le_bytes(a)
            } else {
                u64::from_be_bytes(a)
            }
        } else {
            u64::from(u32_at(b))
        }
    };
    let pad4 = |n: usize| n.div_ceil(4) * 4;
    let mut out = Vec::new();
    while d.len() >= 12 {
        let namesz = u32_at(d) as usize;
        let descsz = u32_at(&d[4..]) as usize;
        let ty = u32_at(&d[8..]);
        let name_end = 12usize.checked_add(pad4(namesz)).ok_or("note name size overflows")?;
        let desc_end = name_end.checked_add(pad4(descsz)).ok_or("note size overflows")?;
        if desc_end > d.len() || name_end + descsz > d.len() {
            return Err(format!("a note of {desc_end} bytes in {} left", d.len()));
        }
        let name = &d[12..12 + namesz];
        let desc = &d[name_end..name_end + descsz];
        d = &d[desc_end..];
        if ty != NT_STAPSDT || name != b"stapsdt\0" {
            continue;
        }
        if desc.len() < 3 * word {
            return Err(format!("a stapsdt note of {} bytes", desc.len()));
        }
        let (location, base, semaphore) =
            (addr_at(desc), addr_at(&desc[word..]), addr_at(&desc[2 * word..]));
        let mut strs = desc[3 * word..].split(|&b| b == 0);
        let mut next = || strs.next().map(|s| String::from_utf8_lossy(s).into_owned());
        let (Some(provider), Some(pname)) = (next(), next()) else {
            return Err("a stapsdt note without provider and name".into());
        };
        let args = next().unwrap_or_default();
        out.push((SdtNote { provider, name: pname, location, semaphore, args }, base));
    }
    Ok(out)
}

/// The fetchargs for a note's argument specs: `arg1=%di:s32 arg2=-16(%bp):u64 ...`.
pub fn fetchargs(args: &str) -> Result<Vec<String>> {
    args.split_whitespace()
        .enumerate()
        .map(|(i, spec)| Ok(format!("arg{}={}", i + 1, fetcharg(spec)?)))
        .collect()
}

/// One x86-64 argument spec (`[-]SIZE@OPERAND`; an operand alone is an unsigned long)
/// as a fetcharg with its type.
pub fn fetcharg(spec: &str) -> Result<String> {
    let bad = |reason: String| Error::SdtArgument { spec: spec.to_string(), reason };
    let (size, op) = match spec.split_once('@') {
        Some((s, op)) => {
            let n: i32 = s.parse().map_err(|_| bad(format!("bad size {s:?}")))?;
            (n, op)
        }
        None => (8, spec),
    };
    let ty = match size {
        1 | 2 | 4 | 8 => format!("u{}", size * 8),
        -1 | -2 | -4 | -8 => format!("s{}", -size * 8),
        _ => return Err(bad(format!("size {size} is not 1, 2, 4 or 8 bytes"))),
    };
    let place = if let Some(r) = op.strip_prefix('%') {
        format!("%{}", register(r, spec)?)
    } else if let Some(imm) = op.strip_prefix('$') {
        format!("\\{imm}")
    } else if let Some((off, rest)) = op.split_once('(') {
        let reg = rest
            .strip_suffix(')')
            .and_then(|r| r.strip_prefix('%'))
            .filter(|r| !r.contains(','))
            .ok_or_else(|| bad("only OFFSET(%REG) memory operands are supported".into()))?;
        if reg == "rip" {
            return Err(bad("%rip-relative operands cannot be fetched by a uprobe".into()));
        }
        let off: i64 = match off {
            "" => 0,
            o => o.parse().map_err(|_| bad(format!("offset {o:?} is not a number")))?,
        };
        format!("{off:+}(%{})", register(reg, spec)?)
    } else {
        return Err(bad("operand not understood".into()));
    };
    Ok(format!("{place}:{ty}"))
}

/// The kernel's name (pt_regs) of an x86-64 register in any of its widths.
fn register(r: &str, spec: &str) -> Result<&'static str> {
    const REGS: [(&str, [&str; 4]); 8] = [
        ("ax", ["rax", "eax", "ax", "al"]),
        ("bx", ["rbx", "ebx", "bx", "bl"]),
        ("cx", ["rcx", "ecx", "cx", "cl"]),
        ("dx", ["rdx", "edx", "dx", "dl"]),
        ("si", ["rsi", "esi", "si", "sil"]),
        ("di", ["rdi", "edi", "di", "dil"]),
        ("bp", ["rbp", "ebp", "bp", "bpl"]),
        ("sp", ["rsp", "esp", "sp", "spl"]),
    ];
    const HIGH: [&str; 8] = ["r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15"];
    if let Some((k, _)) = REGS.iter().find(|(_, names)| names.contains(&r)) {
        return Ok(k);
    }
    for h in HIGH {
        if let Some(sfx) = r.strip_prefix(h) {
            if ["", "d", "w", "b"].contains(&sfx) {
                return Ok(h);
            }
        }
    }
    Err(Error::SdtArgument {
        spec: spec.to_string(),
        reason: format!("register %{r} cannot be fetched (x86-64 general registers only)"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_become_fetchargs() {
        assert_eq!(fetcharg("-4@%edi").unwrap(), "%di:s32");
        assert_eq!(fetcharg("8@%rax").unwrap(), "%ax:u64");
        assert_eq!(fetcharg("8@-16(%rbp)").unwrap(), "-16(%bp):u64");
        assert_eq!(fetcharg("-2@8(%rsp)").unwrap(), "+8(%sp):s16");
        assert_eq!(fetcharg("1@(%r12)").unwrap(), "+0(%r12):u8");
        assert_eq!(fetcharg("4@%r9d").unwrap(), "%r9:u32");
        assert_eq!(fetcharg("-4@$5").unwrap(), "\\5:s32");
        assert_eq!(fetcharg("%rdx").unwrap(), "%dx:u64");
        assert!(fetcharg("8@x(%rip)").is_err());
        assert!(fetcharg("8@(%rax,%rbx,8)").is_err());
        assert!(fetcharg("3@%eax").is_err());
        assert!(fetcharg("4@%ah").is_err());
        assert_eq!(fetchargs("-4@%edi 8@%rax").unwrap(), ["arg1=%di:s32", "arg2=%ax:u64"]);
    }

    #[test]
    fn notes_decode_and_bad_ones_are_errors() {
        let mut d = Vec::new();
        let desc: Vec<u8> = [0x1151u64, 0x2004, 0x4010]
            .iter()
            .flat_map(|a| a.to_le_bytes())
            .chain(b"tpt\0tick\0-4@%edi 8@%rax\0".iter().copied())
            .collect();
        d.extend(8u32.to_le_bytes());
        d.extend((desc.len() as u32).to_le_bytes());
        d.extend(3u32.to_le_bytes());
        d.extend(b"stapsdt\0");
        d.extend(&desc);
        d.resize(d.len().div_ceil(4) * 4, 0);
        let v = parse_notes(&d, true, true).unwrap();
        assert_eq!(v.len(), 1);
        let (n, base) = &v[0];
        assert_eq!((n.provider.as_str(), n.name.as_str()), ("tpt", "tick"));
        assert_eq!((n.location, *base, n.semaphore), (0x1151, 0x2004, 0x4010));
        assert_eq!(n.args, "-4@%edi 8@%rax");
        for cut in 1..d.len() {
            let _ = parse_notes(&d[..cut], true, true);
        }
        assert!(parse_notes(&d[..20], true, true).is_err());
    }
}
