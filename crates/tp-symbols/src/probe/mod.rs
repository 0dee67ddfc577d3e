//! Where a uprobe goes and what it fetches, from the binary alone: a function's arguments by
//! name from DWARF ([`dwarf`]), USDT sites and their argument specs from `.note.stapsdt`
//! ([`sdt`]). The probes themselves are defined through `tp_tracefs`.

pub mod dwarf;
pub mod sdt;
