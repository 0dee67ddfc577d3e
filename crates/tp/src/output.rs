//! Writing a finished recording to its file.
//!
//! Interim format, until `tp_format::tracedat`'s writer lands (then the same inputs become
//! a trace.dat v7): a `tp-pages` file —
//!
//! ```text
//! tp-pages 1\n
//! <header: UTF-8 text, `key: value` lines, ending with a line `end`>\n
//! <pages: 4096-byte kernel-format ring-buffer pages, stream 0's pages, then stream 1's, ...>
//! ```
//!
//! Header lines: `clock: mono`, `page_size: 4096`, `events: N`, `lost: N`,
//! `stream: CPU TID PAGES LOST COMM` per stream in file order, `header_page:` followed by
//! the kernel's header_page text indented by a tab, and for each event
//! `format: SYSTEM LEN` followed by LEN bytes of its `format` file text.

use crate::recorder::{RecordError, Stats};
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};

/// One stream (a thread's pages), spooled to a file.
#[derive(Debug)]
pub(crate) struct Stream {
    pub spool: PathBuf,
    pub pages: u64,
    pub tid: i32,
    pub comm: String,
    pub lost: u64,
}

pub(crate) fn write(
    path: &Path,
    spooled: Result<(PathBuf, Vec<Stream>), RecordError>,
) -> Result<Stats, RecordError> {
    let (dir, streams) = spooled?;
    let err = |op: &'static str, p: &Path| {
        let p = p.to_path_buf();
        move |source| RecordError::Io { path: p, op, source }
    };
    let events = count_events(&streams);
    let lost: u64 = streams.iter().map(|s| s.lost).sum();
    let mut hdr = String::from("tp-pages 1\nclock: mono\npage_size: 4096\n");
    hdr.push_str(&format!("events: {events}\nlost: {lost}\n"));
    for (i, s) in streams.iter().enumerate() {
        hdr.push_str(&format!("stream: {i} {} {} {} {}\n", s.tid, s.pages, s.lost, s.comm));
    }
    hdr.push_str("header_page:\n");
    hdr.push_str(&tp_format::header::HeaderPage::X86_64.to_text());
    for site in crate::tracepoints() {
        let text = site.format_text();
        hdr.push_str(&format!("format: {} {}\n{text}", site.system(), text.len()));
    }
    hdr.push_str("end\n");
    let tmp = {
        let mut s = path.as_os_str().to_owned();
        s.push(".tmp");
        PathBuf::from(s)
    };
    let f = File::create(&tmp).map_err(err("create", &tmp))?;
    let mut w = BufWriter::with_capacity(1 << 20, f);
    w.write_all(hdr.as_bytes()).map_err(err("write", &tmp))?;
    let mut pages = 0;
    for s in &streams {
        let mut r = File::open(&s.spool).map_err(err("open", &s.spool))?;
        pages += std::io::copy(&mut r, &mut w).map_err(err("copy into", &tmp))? / 4096;
    }
    w.flush().map_err(err("write", &tmp))?;
    drop(w);
    std::fs::rename(&tmp, path).map_err(err("rename into", path))?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(Stats { path: path.to_path_buf(), events, lost, pages, streams: streams.len() })
}

fn count_events(streams: &[Stream]) -> u64 {
    let mut n = 0;
    let mut page = vec![0u8; 4096];
    for s in streams {
        let Ok(mut f) = File::open(&s.spool) else { continue };
        while f.read_exact(&mut page).is_ok() {
            n += crate::read::page_records(&page).count() as u64;
        }
    }
    n
}
