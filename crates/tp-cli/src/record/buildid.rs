//! perf.data's BUILD_ID feature: the GNU build id of every file a recording's MMAP2 records
//! map (from the file's `.note.gnu.build-id`), and the kernel's (from /sys/kernel/notes), so
//! `perf report` and `perf buildid-list -i` find the binaries the samples were taken in.

use std::collections::BTreeSet;

use object::read::elf::NoteIterator;
use object::{Endianness, Object};
use tp_format::perfdata::{self as pd, BuildId};

/// `NT_GNU_BUILD_ID`.
const NT_GNU_BUILD_ID: u32 = 3;
/// perf's pid of the host's build ids.
const HOST: i32 = -1;

/// The files mapped in a recording, in MMAP2 records as they pass to the file.
#[derive(Default)]
pub struct Dsos {
    files: BTreeSet<String>,
}

impl Dsos {
    /// A record on its way to the file: an MMAP2's file is noted.
    pub fn note_record(&mut self, rec: &[u8]) {
        let Some(raw) = pd::RawRecord::from_bytes(rec).filter(|r| r.kind == pd::kind::MMAP2) else {
            return;
        };
        if let Ok(pd::Record::Mmap2(m, _)) = raw.parse(None) {
            self.note(m.filename);
        }
    }

    /// A mapped file's path (anonymous and special mappings, `[heap]` or `//anon`, are not
    /// files).
    pub fn note(&mut self, path: &str) {
        if path.starts_with('/') && !self.files.contains(path) {
            self.files.insert(path.to_string());
        }
    }

    /// The build ids: the kernel's, then each noted file that has one (a file gone or
    /// without the note is left out, as perf leaves it).
    pub fn build_ids(&self) -> Vec<BuildId> {
        let mut ids = Vec::new();
        if let Some(id) = std::fs::read("/sys/kernel/notes").ok().and_then(|n| gnu_note(&n)) {
            ids.push(BuildId {
                cpumode: pd::misc::KERNEL,
                pid: HOST,
                build_id: id,
                filename: "[kernel.kallsyms]".into(),
            });
        }
        for f in &self.files {
            if let Some(id) = file_build_id(f) {
                ids.push(BuildId {
                    cpumode: pd::misc::USER,
                    pid: HOST,
                    build_id: id,
                    filename: f.clone(),
                });
            }
        }
        ids
    }
}

/// An ELF file's build id, reading only its headers and notes.
fn file_build_id(path: &str) -> Option<Vec<u8>> {
    let file = std::fs::File::open(path).ok()?;
    let cache = object::read::ReadCache::new(file);
    let elf = object::File::parse(&cache).ok()?;
    let id = elf.build_id().ok()??;
    Some(id.to_vec())
}

/// The GNU build id among ELF notes as the kernel exports them (4-byte aligned).
fn gnu_note(notes: &[u8]) -> Option<Vec<u8>> {
    type Elf = object::elf::FileHeader64<Endianness>;
    let endian = Endianness::default();
    let mut it = NoteIterator::<Elf>::new(endian, 4, notes).ok()?;
    while let Ok(Some(n)) = it.next() {
        if n.name() == b"GNU" && n.n_type(endian) == NT_GNU_BUILD_ID {
            return Some(n.desc().to_vec());
        }
    }
    None
}
