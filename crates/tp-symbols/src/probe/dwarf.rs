//! Function arguments by name, as `perf probe -x BIN 'f x'` takes them: the DWARF formal
//! parameter `x` of the function at the probe's address, where it is at that address (a
//! register, or memory at a register plus an offset) and its type's size and sign, as a
//! fetcharg (`x=%di:s32`).

use std::fmt;

use gimli::{AttributeValue, EndianSlice, Operation, RunTimeEndian, UnitOffset};
use object::{Object, ObjectSection};

use crate::elf::Binary;
use crate::{Error, Result};

type R<'a> = EndianSlice<'a, RunTimeEndian>;

/// A function argument by name: (field NAME, VAR, optional TYPE).
pub type Named<'s> = (&'s str, &'s str, Option<&'s str>);

/// The probe address and `NAME=PLACE:TYPE` fetchargs for the parameters `vars` of the
/// function starting at `func`, where they are at `pc` (the probe's address). When one is
/// still to be written by the prologue at the entry (unoptimized code keeps arguments in
/// the frame) and the probe is at the entry, the probe moves past the prologue (to the
/// function's second line-table row, as perf probe does) and every place is taken there.
pub fn fetchargs(
    bin: &Binary,
    func: u64,
    pc: u64,
    vars: &[Named<'_>],
) -> Result<(u64, Vec<String>)> {
    let file = bin.parse()?;
    let no_debug_info = |what: String| Error::NoDebugInfo { path: bin.path.clone(), what };
    if file.section_by_name(".debug_info").is_none() {
        let what = "no debug information (DWARF): give the argument by register (%di, %si, ...)";
        return Err(no_debug_info(what.into()));
    }
    let dw = |source: gimli::Error| Error::Dwarf { path: bin.path.clone(), source };
    let endian = if file.is_little_endian() { RunTimeEndian::Little } else { RunTimeEndian::Big };
    let dwarf = gimli::Dwarf::load(|id| -> Result<R<'_>, gimli::Error> {
        let data = file.section_by_name(id.name()).and_then(|s| s.data().ok()).unwrap_or(&[]);
        Ok(EndianSlice::new(data, endian))
    })
    .map_err(dw)?;
    let mut units = dwarf.units();
    while let Some(header) = units.next().map_err(dw)? {
        let unit = dwarf.unit(header).map_err(dw)?;
        let mut entries = unit.entries();
        while let Some(e) = entries.next_dfs().map_err(dw)? {
            if e.tag() != gimli::DW_TAG_subprogram {
                continue;
            }
            let low = match e.attr_value(gimli::DW_AT_low_pc) {
                Some(v) => dwarf.attr_address(&unit, v).map_err(dw)?,
                None => None,
            };
            if low != Some(func) {
                continue;
            }
            // DW_OP_fbreg's base: the CFA (gcc) or a register (LLVM: %rsp or %rbp).
            let base = match e.attr_value(gimli::DW_AT_frame_base) {
                Some(AttributeValue::Exprloc(x)) => {
                    x.operations(unit.encoding()).next().map_err(dw)?
                }
                _ => None,
            };
            // The place of DW_OP_fbreg OFF at an address: none at the entry, except
            // incoming stack arguments above the CFA (the prologue sets the frame up).
            let frame = |pc: u64, off: i64| -> Result<String, Why> {
                let (reg, k) = match base {
                    Some(Operation::CallFrameCFA) => {
                        if pc == func && off < 0 {
                            return Err(Why::InFrame);
                        }
                        cfa_at(&file, endian, pc)?
                    }
                    _ if pc == func => return Err(Why::InFrame),
                    Some(Operation::Register { register }) => (register.0, 0),
                    Some(Operation::RegisterOffset { register, offset, .. }) => {
                        (register.0, offset)
                    }
                    other => {
                        return Err(why(format!("a frame base tp does not evaluate ({other:?})")))
                    }
                };
                Ok(format!("{:+}(%{})", off + k, register_name(reg)?))
            };
            let params = params(&dwarf, &unit, e.offset()).map_err(dw)?;
            let mut found = Vec::new();
            for &(name, var, ty) in vars {
                let Some(p) = params.iter().find(|p| p.name == var) else {
                    let known = params.iter().map(|p| p.name.clone()).collect();
                    return Err(Error::NoSuchArgument { func, name: var.to_string(), known });
                };
                let ty = match ty {
                    Some(t) => t.to_string(),
                    None => type_name(&unit, p.ty).map_err(|w| Error::Argument {
                        name: var.to_string(),
                        reason: format!("give its type (NAME:u32): {w}"),
                    })?,
                };
                found.push((name, var, p, ty));
            }
            let places = |pc| -> Result<Vec<String>, (&str, Why)> {
                found
                    .iter()
                    .map(|(name, var, p, ty)| {
                        let place = place(&dwarf, &unit, p, pc, &frame).map_err(|w| (*var, w))?;
                        Ok(format!("{name}={place}:{ty}"))
                    })
                    .collect()
            };
            let named = |(var, w): (&str, Why)| Error::Argument {
                name: var.to_string(),
                reason: w.to_string(),
            };
            return match places(pc) {
                Ok(v) => Ok((pc, v)),
                Err((var, Why::InFrame)) if pc == func => {
                    let Some(after) = prologue_end(&unit, func).map_err(dw)? else {
                        return Err(named((var, Why::InFrame)));
                    };
                    Ok((after, places(after).map_err(named)?))
                }
                Err(e) => Err(named(e)),
            };
        }
    }
    let what = format!("no debug information for the function at {func:#x} (built without -g?)");
    Err(no_debug_info(what))
}

/// Why an argument cannot be fetched at an address.
#[derive(Debug)]
enum Why {
    /// Kept in the function's own frame, below the CFA: written by the prologue.
    InFrame,
    Dwarf(gimli::Error),
    Other(String),
}

fn why(s: String) -> Why {
    Why::Other(s)
}

impl From<gimli::Error> for Why {
    fn from(e: gimli::Error) -> Why {
        Why::Dwarf(e)
    }
}

impl fmt::Display for Why {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Why::InFrame => f.write_str(
                "kept in the function's stack frame, which its prologue writes after this address \
                 (unoptimized code): give it by register (%di, %si, ...)",
            ),
            Why::Dwarf(e) => write!(f, "DWARF: {e}"),
            Why::Other(s) => f.write_str(s),
        }
    }
}

/// The end of the prologue of the function at `func`: its second line-table row (the first
/// at a later address), where perf probe puts a probe on a function whose arguments it
/// fetches by name.
fn prologue_end(unit: &gimli::Unit<R<'_>>, func: u64) -> Result<Option<u64>, gimli::Error> {
    let Some(program) = unit.line_program.clone() else { return Ok(None) };
    let mut rows = program.rows();
    let mut in_func = false;
    while let Some((_, row)) = rows.next_row()? {
        if row.end_sequence() {
            in_func = false;
        } else if row.address() == func {
            in_func = true;
        } else if in_func && row.address() > func {
            return Ok(Some(row.address()));
        }
    }
    Ok(None)
}

/// The CFA at `pc` as (DWARF register, offset), from `.eh_frame`.
fn cfa_at(file: &object::File<'_>, endian: RunTimeEndian, pc: u64) -> Result<(u16, i64), Why> {
    use gimli::UnwindSection;
    let sec = file
        .section_by_name(".eh_frame")
        .ok_or_else(|| why("no .eh_frame to find the frame in".into()))?;
    let data = sec.data().map_err(|e| why(format!(".eh_frame: {e}")))?;
    let mut eh = gimli::EhFrame::new(data, endian);
    eh.set_address_size(8);
    let mut bases = gimli::BaseAddresses::default().set_eh_frame(sec.address());
    if let Some(t) = file.section_by_name(".text") {
        bases = bases.set_text(t.address());
    }
    let mut ctx = gimli::UnwindContext::new();
    let row = eh
        .unwind_info_for_address(&bases, &mut ctx, pc, gimli::EhFrame::cie_from_offset)
        .map_err(|e| why(format!("no frame information (.eh_frame) at {pc:#x}: {e}")))?;
    match row.cfa() {
        gimli::CfaRule::RegisterAndOffset { register, offset } => Ok((register.0, *offset)),
        _ => Err(why(format!(
            "the frame at {pc:#x} is described by an expression tp does not evaluate"
        ))),
    }
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
) -> Result<Vec<Param<'a>>, gimli::Error> {
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

/// Where the parameter is at `pc`, as a fetcharg place; `frame` places a frame offset.
fn place(
    dwarf: &gimli::Dwarf<R<'_>>,
    unit: &gimli::Unit<R<'_>>,
    p: &Param<'_>,
    pc: u64,
    frame: &dyn Fn(u64, i64) -> Result<String, Why>,
) -> Result<String, Why> {
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
            found.ok_or_else(|| {
                why("not available at the function's entry (optimized out)".into())
            })?
        }
        None => return Err(why("optimized out (no location)".into())),
    };
    let mut ops = expr.operations(unit.encoding());
    let first = ops.next()?.ok_or_else(|| why("an empty location".into()))?;
    if ops.next()?.is_some() {
        return Err(why(
            "a location tp cannot turn into a fetcharg (more than one operation)".into()
        ));
    }
    Ok(match first {
        Operation::Register { register } => format!("%{}", register_name(register.0)?),
        Operation::RegisterOffset { register, offset, .. } => {
            format!("{offset:+}(%{})", register_name(register.0)?)
        }
        Operation::FrameOffset { offset } => frame(pc, offset)?,
        other => return Err(why(format!("a location tp cannot turn into a fetcharg ({other:?})"))),
    })
}

/// The fetcharg name of an x86-64 DWARF register number.
fn register_name(n: u16) -> Result<&'static str, Why> {
    const NAMES: [&str; 17] = [
        "ax", "dx", "cx", "bx", "si", "di", "bp", "sp", "r8", "r9", "r10", "r11", "r12", "r13",
        "r14", "r15", "ip",
    ];
    match NAMES.get(usize::from(n)) {
        Some(r) if n < 16 => Ok(r),
        _ => Err(why(format!(
            "in DWARF register {n}, which a uprobe cannot fetch (general registers only)"
        ))),
    }
}

/// The fetcharg type of a DWARF type: `u8`..`u64`, `s8`..`s64`, `x64` for pointers.
fn type_name(unit: &gimli::Unit<R<'_>>, mut ty: Option<UnitOffset>) -> Result<String, Why> {
    for _ in 0..16 {
        let Some(off) = ty else { return Err(why("it has no type".into())) };
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
                    _ => Err(why(format!("a {}-byte value, not 1, 2, 4 or 8", size.unwrap_or(0)))),
                };
            }
            t => return Err(why(format!("a {t} value (not an integer or pointer)"))),
        }
    }
    Err(why("its type is a chain of more than 16 typedefs".into()))
}
