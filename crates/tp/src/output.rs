//! Writing a finished recording: a trace.dat v7 file (`tp_format::tracedat::Writer`), one
//! stream of pages per recorded thread (trace.dat calls them CPUs), every tracepoint's
//! `format` under its system, the threads in `saved_cmdlines`, the clock `mono`, and per
//! stream a `stats` text whose `dropped events:` line is the count of events lost because the
//! thread's buffer was full (pages also carry it in their commit words, as the kernel's do).
//!
//! The spooled pages hold raw clock readings; they are converted to CLOCK_MONOTONIC ns here,
//! while they are copied into the file, with the calibration points taken over the recording
//! (`clock::Anchors`: piecewise linear, so times stay monotonic within each stream).

use crate::ring::{convert_page, PAGE_SIZE};
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use tp_format::tracedat::{BufferPages, Compression, CpuPages, Metadata, Writer, WriterOptions};

/// What a finished recording wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    pub path: PathBuf,
    /// Events in the file.
    pub events: u64,
    /// Events dropped because a thread's buffer was full.
    pub lost: u64,
    /// Pages in the file.
    pub pages: u64,
    /// Streams (threads) in the file.
    pub streams: usize,
}

/// Errors of the recorder: what failed and on which path.
#[derive(Debug)]
#[non_exhaustive]
pub enum RecordError {
    /// Another recording is already running in this process.
    AlreadyRecording,
    /// Creating, writing or renaming a file failed.
    Io { path: PathBuf, op: &'static str, source: std::io::Error },
}

impl std::fmt::Display for RecordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecordError::AlreadyRecording => write!(f, "a tp recording is already running"),
            RecordError::Io { path, op, source } => {
                write!(f, "{op} {}: {source}", path.display())
            }
        }
    }
}

impl std::error::Error for RecordError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RecordError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

pub(crate) fn io_err(path: &Path, op: &'static str) -> impl FnOnce(std::io::Error) -> RecordError {
    let path = path.to_path_buf();
    move |source| RecordError::Io { path, op, source }
}

/// One stream (a thread's pages), spooled to a file.
#[derive(Debug)]
pub(crate) struct Stream {
    pub spool: PathBuf,
    pub pages: u64,
    pub events: u64,
    pub tid: i32,
    pub comm: String,
    pub lost: u64,
}

/// The trace.dat metadata for this process's tracepoints and `streams`.
pub(crate) fn metadata(streams: &[Stream]) -> Metadata {
    let mut systems: Vec<(String, Vec<String>)> = Vec::new();
    for site in crate::tracepoints() {
        let text = site.format_text();
        match systems.iter_mut().find(|(s, _)| s == site.system()) {
            Some((_, v)) => v.push(text),
            None => systems.push((site.system().to_string(), vec![text])),
        }
    }
    let mut cmdlines = String::new();
    let mut cpustats = Vec::new();
    for s in streams {
        cmdlines.push_str(&format!("{} {}\n", s.tid, s.comm));
        cpustats.push(format!(
            "entries: {}\noverrun: 0\ncommit overrun: 0\nbytes: {}\ndropped events: {}\nread events: {}\n",
            s.events,
            s.pages * 4096,
            s.lost,
            s.events
        ));
    }
    Metadata {
        event_formats: systems,
        cmdlines,
        clock: "mono".into(),
        cpustats,
        cpu_count: streams.len().max(1) as u32,
        uname: Some(format!(
            "{} (tp in-process recorder, pid {})",
            std::env::consts::OS,
            std::process::id()
        )),
        ..Metadata::default()
    }
}

/// A finished recording's spool: its directory, streams and clock calibration points.
pub(crate) struct Spooled {
    pub dir: PathBuf,
    pub streams: Vec<Stream>,
    pub anchors: crate::clock::Anchors,
}

pub(crate) fn write(
    path: &Path,
    compression: Compression,
    spooled: Result<Spooled, RecordError>,
) -> Result<Stats, RecordError> {
    let Spooled { dir, streams, anchors } = spooled?;
    let err = |op: &'static str, p: &Path| {
        let p = p.to_path_buf();
        move |source| RecordError::Io { path: p, op, source }
    };
    let meta = metadata(&streams);
    let mut cpus = Vec::new();
    for (i, s) in streams.iter().enumerate() {
        let f = File::open(&s.spool).map_err(err("open", &s.spool))?;
        let pages = NsPages::new(BufReader::with_capacity(1 << 20, f), anchors.converter());
        cpus.push(CpuPages { cpu: i as u32, pages: Box::new(pages) });
    }
    let tmp = {
        let mut s = path.as_os_str().to_owned();
        s.push(".tmp");
        PathBuf::from(s)
    };
    let mut out = std::io::BufWriter::with_capacity(
        1 << 20,
        File::create(&tmp).map_err(err("create", &tmp))?,
    );
    let opts = WriterOptions { version: 7, compression, ..WriterOptions::default() };
    Writer::new(opts)
        .write(&mut out, &meta, vec![BufferPages { name: String::new(), cpus }])
        .map_err(|e| RecordError::Io {
            path: tmp.clone(),
            op: "write trace.dat",
            source: std::io::Error::other(e.to_string()),
        })?;
    out.into_inner().map_err(|e| err("write", &tmp)(e.into_error()))?;
    std::fs::rename(&tmp, path).map_err(err("rename into", path))?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(Stats {
        path: path.to_path_buf(),
        events: streams.iter().map(|s| s.events).sum(),
        lost: streams.iter().map(|s| s.lost).sum(),
        pages: streams.iter().map(|s| s.pages).sum(),
        streams: streams.len(),
    })
}

/// Reads whole pages of raw timestamps and hands them out with ns timestamps.
struct NsPages<R, F> {
    inner: R,
    page: Box<[u8; PAGE_SIZE]>,
    /// Bytes of `page` already handed out.
    pos: usize,
    last_ns: u64,
    to_ns: F,
}

impl<R: Read, F: Fn(u64) -> u64> NsPages<R, F> {
    fn new(inner: R, to_ns: F) -> Self {
        NsPages { inner, page: Box::new([0; PAGE_SIZE]), pos: PAGE_SIZE, last_ns: 0, to_ns }
    }
}

impl<R: Read, F: Fn(u64) -> u64> Read for NsPages<R, F> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.pos == PAGE_SIZE {
            // The spool holds whole pages: EOF is only allowed between them.
            let mut got = 0;
            while got < PAGE_SIZE {
                match self.inner.read(&mut self.page[got..])? {
                    0 if got == 0 => return Ok(0),
                    0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
                    n => got += n,
                }
            }
            convert_page(&mut self.page[..], &mut self.last_ns, &self.to_ns);
            self.pos = 0;
        }
        let n = buf.len().min(PAGE_SIZE - self.pos);
        buf[..n].copy_from_slice(&self.page[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}
