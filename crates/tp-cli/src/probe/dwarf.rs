//! Function arguments by name, as `perf probe -x BIN 'f x'` takes them: the DWARF formal
//! parameter `x` of the function at the probe's address, where it is at that address (a
//! register, or memory at a register plus an offset) and its type's size and sign, as a
//! fetcharg (`x=%di:s32`).

use anyhow::{bail, Context, Result};
use gimli::{AttributeValue, EndianSlice, Operation, RunTimeEndian, UnitOffset};
use object::{Object, ObjectSection};

use super::elf::Binary;

type R<'a> = EndianSlice<'a, RunTimeEndian>;

/// `NAME=PLACE:TYPE` for the parameter `var` of the function starting at `func`, where it is
/// at `pc` (the probe's address); `ty` overrides the type (`x:u16`), `name` the field name.
pub fn fetcharg(
    bin: &Binary,
    func: u64,
    pc: u64,
    var: &str,
    name: &str,
    ty: Option<&str>,
) -> Result<String> {
    let file = bin.parse()?;
    let endian = if file.is_little_endian() { RunTimeEndian::Little } else { RunTimeEndian::Big };
    let dwarf = gimli::Dwarf::load(|id| -> Result<R<'_>, gimli::Error> {
        let data = file.section_by_name(id.name()).and_then(|s| s.data().ok()).unwrap_or(&[]);
        Ok(EndianSlice::new(data, endian))
    })?;
    if file.section_by_name(".debug_info").is_none() {
        bail!(
            "{} has no debug information (DWARF): give the argument by register (%di, %si, ...)",
            bin.path.display()
        );
    }
    let mut units = dwarf.units();
    while let Some(header) = units.next()? {
        let unit = dwarf.unit(header)?;
        let mut entries = unit.entries();
        while let Some(e) = entries.next_dfs()? {
            if e.tag() != gimli::DW_TAG_subprogram {
                continue;
            }
            let low = match e.attr_value(gimli::DW_AT_low_pc) {
                Some(v) => dwarf.attr_address(&unit, v)?,
                None => None,
            };
            if low != Some(func) {
                continue;
            }
            let params = params(&dwarf, &unit, e.offset())?;
            let Some(p) = params.iter().find(|p| p.name == var) else {
                let names: Vec<&str> = params.iter().map(|p| p.name.as_str()).collect();
                bail!(
                    "the function at {func:#x} has no argument {var:?} (its arguments: {})",
                    if names.is_empty() { "none".to_string() } else { names.join(", ") }
                );
            };
            let place = place(&dwarf, &unit, p, pc).with_context(|| format!("argument {var:?}"))?;
            let ty = match ty {
                Some(t) => t.to_string(),
                None => type_name(&unit, p.ty)
                    .with_context(|| format!("argument {var:?}: give its type (NAME:u32)"))?,
            };
            return Ok(format!("{name}={place}:{ty}"));
        }
    }
    bail!(
        "{}: no debug information for the function at {func:#x} (built without -g?)",
        bin.path.display()
    )
}

/// A formal parameter: its name, location attribute and type (through
/// `DW_AT_abstract_origin` for an out-of-line copy of an inlined function).
struct Param<'a> {
    name: String,
    location: Option<AttributeValue<R<'a>>>,
    ty: Option<UnitOffset>,
}

fn params<'a>(
    dwarf: &gimli::Dwarf<R<'a>>,
    unit: &gimli::Unit<R<'a>>,
    func: UnitOffset,
) -> Result<Vec<Param<'a>>> {
    let mut tree = unit.entries_tree(Some(func))?;
    let mut children = tree.root()?.children();
    let mut out = Vec::new();
    while let Some(child) = children.next()? {
        let e = child.entry();
        if e.tag() != gimli::DW_TAG_formal_parameter {
            continue;
        }
        let origin = match e.attr_value(gimli::DW_AT_abstract_origin) {
            Some(AttributeValue::UnitRef(o)) => Some(unit.entry(o)?),
            _ => None,
        };
        let attr = |at| e.attr_value(at).or_else(|| origin.as_ref().and_then(|o| o.attr_value(at)));
        let name = match attr(gimli::DW_AT_name) {
            Some(v) => dwarf.attr_string(unit, v)?.to_string_lossy().into_owned(),
            None => continue,
        };
        let ty = match attr(gimli::DW_AT_type) {
            Some(AttributeValue::UnitRef(o)) => Some(o),
            _ => None,
        };
        out.push(Param { name, location: e.attr_value(gimli::DW_AT_location), ty });
    }
    Ok(out)
}

/// Where the parameter is at `pc`, as a fetcharg place.
fn place(
    dwarf: &gimli::Dwarf<R<'_>>,
    unit: &gimli::Unit<R<'_>>,
    p: &Param<'_>,
    pc: u64,
) -> Result<String> {
    let expr = match &p.location {
        Some(AttributeValue::Exprloc(e)) => *e,
        Some(v) => {
            let mut found = None;
            if let Some(mut locs) = dwarf.attr_locations(unit, *v)? {
                while let Some(l) = locs.next()? {
                    if l.range.begin <= pc && pc < l.range.end {
                        found = Some(l.data);
                        break;
                    }
                }
            }
            found.context("not available at the function's entry (optimized out)")?
        }
        None => bail!("optimized out (no location)"),
    };
    let mut ops = expr.operations(unit.encoding());
    let first = ops.next()?.context("an empty location")?;
    if ops.next()?.is_some() {
        bail!("a location tp cannot turn into a fetcharg (more than one operation)");
    }
    Ok(match first {
        Operation::Register { register } => format!("%{}", register_name(register.0)?),
        Operation::RegisterOffset { register, offset, .. } => {
            format!("{offset:+}(%{})", register_name(register.0)?)
        }
        // The frame base is the CFA (gcc, rustc), at the entry %sp + 8; below it, the
        // function's own frame, which its prologue has not written yet.
        Operation::FrameOffset { offset } if offset >= 0 => format!("{:+}(%sp)", offset + 8),
        Operation::FrameOffset { .. } => bail!(
            "kept in the function's stack frame, which its prologue writes after the probe \
             (unoptimized code): give it by register (%di, %si, ...)"
        ),
        other => bail!("a location tp cannot turn into a fetcharg ({other:?})"),
    })
}

/// The fetcharg name of an x86-64 DWARF register number.
fn register_name(n: u16) -> Result<&'static str> {
    const NAMES: [&str; 17] = [
        "ax", "dx", "cx", "bx", "si", "di", "bp", "sp", "r8", "r9", "r10", "r11", "r12", "r13",
        "r14", "r15", "ip",
    ];
    match NAMES.get(usize::from(n)) {
        Some(r) if n < 16 => Ok(r),
        _ => bail!("in DWARF register {n}, which a uprobe cannot fetch (general registers only)"),
    }
}

/// The fetcharg type of a DWARF type: `u8`..`u64`, `s8`..`s64`, `x64` for pointers.
fn type_name(unit: &gimli::Unit<R<'_>>, mut ty: Option<UnitOffset>) -> Result<String> {
    for _ in 0..16 {
        let Some(off) = ty else { bail!("it has no type") };
        let e = unit.entry(off)?;
        let size = match e.attr_value(gimli::DW_AT_byte_size) {
            Some(v) => v.udata_value(),
            None => None,
        };
        match e.tag() {
            gimli::DW_TAG_typedef
            | gimli::DW_TAG_const_type
            | gimli::DW_TAG_volatile_type
            | gimli::DW_TAG_restrict_type => {
                ty = match e.attr_value(gimli::DW_AT_type) {
                    Some(AttributeValue::UnitRef(o)) => Some(o),
                    _ => None,
                };
            }
            gimli::DW_TAG_pointer_type
            | gimli::DW_TAG_reference_type
            | gimli::DW_TAG_rvalue_reference_type => return Ok("x64".into()),
            gimli::DW_TAG_base_type | gimli::DW_TAG_enumeration_type => {
                let signed = matches!(
                    e.attr_value(gimli::DW_AT_encoding),
                    Some(AttributeValue::Encoding(gimli::DW_ATE_signed))
                        | Some(AttributeValue::Encoding(gimli::DW_ATE_signed_char))
                );
                return match size {
                    Some(s @ (1 | 2 | 4 | 8)) => {
                        Ok(format!("{}{}", if signed { 's' } else { 'u' }, s * 8))
                    }
                    _ => bail!("a {}-byte value, not 1, 2, 4 or 8", size.unwrap_or(0)),
                };
            }
            t => bail!("a {t} value (not an integer or pointer)"),
        }
    }
    bail!("its type is a chain of more than 16 typedefs")
}
