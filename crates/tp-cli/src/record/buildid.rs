//! perf.data's BUILD_ID feature: the GNU build id of every file a recording's MMAP2 records
//! map (from the file's `.note.gnu.build-id`), and the kernel's (from /sys/kernel/notes), so
//! `perf report` and `perf buildid-list -i` find the binaries the samples were taken in.

use std::collections::BTreeSet;

use tp_format::perfdata::{self as pd, BuildId};
use tp_symbols::elf;

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
        if let Some(id) =
            std::fs::read("/sys/kernel/notes").ok().and_then(|n| elf::gnu_build_id_note(&n))
        {
            ids.push(BuildId {
                cpumode: pd::misc::KERNEL,
                pid: HOST,
                build_id: id,
                filename: "[kernel.kallsyms]".into(),
            });
        }
        for f in &self.files {
            if let Some(id) = elf::build_id(std::path::Path::new(f)) {
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
