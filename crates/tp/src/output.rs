//! Writing a finished recording: a trace.dat v7 file (`tp_format::tracedat::Writer`), one
//! stream of pages per recorded thread (trace.dat calls them CPUs), every tracepoint's
//! `format` under its system, the threads in `saved_cmdlines`, the clock `mono`, and per
//! stream a `stats` text whose `dropped events:` line is the count of events lost because the
//! thread's buffer was full (pages also carry it in their commit words, as the kernel's do).
//!
//! The background thread spools each stream's pages with their timestamps already in ns,
//! either as they are or compressed into the chunks trace.dat v7 stores ([`Chunker`]); the
//! file is assembled by copying them.

use crate::ring::PAGE_SIZE;
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use tp_format::tracedat::{BufferPages, Compression, CpuPages, Metadata, Writer, WriterOptions};

/// zstd level of the recorder's chunks. Negative levels are zstd's fast modes. Chosen with
/// `examples/codec.rs` (pages of the three-integer benchmark event, one core): see the
/// README's numbers.
pub(crate) const ZSTD_LEVEL: i32 = -1;
/// The level while the background thread is far behind (many pages waiting): about 1.7 times
/// as fast, 2.7x instead of 6x smaller (same measurement).
pub(crate) const ZSTD_FAST_LEVEL: i32 = -10;
/// Pages per compressed chunk (at most): bigger chunks compress a little better, and a
/// reader decompresses a whole chunk to read any page of it.
pub(crate) const CHUNK_PAGES: usize = 64;

/// Compresses runs of pages into trace.dat v7's compressed chunks: per chunk a u32
/// compressed size, a u32 size (whole pages), then a zstd frame.
pub(crate) struct Chunker {
    z: zstd::bulk::Compressor<'static>,
    out: Vec<u8>,
    fast: bool,
}

impl Chunker {
    pub fn new() -> std::io::Result<Chunker> {
        Chunker::with_level(ZSTD_LEVEL)
    }

    pub fn with_level(level: i32) -> std::io::Result<Chunker> {
        let mut c =
            Chunker { z: zstd::bulk::Compressor::new(level)?, out: Vec::new(), fast: false };
        // Allocate (and fault in) the context and the output for a whole chunk now, not
        // on a burst's first pages.
        c.chunks(&[0; CHUNK_PAGES * PAGE_SIZE])?;
        Ok(c)
    }

    /// Compress at [`ZSTD_FAST_LEVEL`] (`fast`) or [`ZSTD_LEVEL`] from now on.
    pub fn set_fast(&mut self, fast: bool) -> std::io::Result<()> {
        if fast != self.fast {
            let level = if fast { ZSTD_FAST_LEVEL } else { ZSTD_LEVEL };
            self.z.set_parameter(zstd::stream::raw::CParameter::CompressionLevel(level))?;
            self.fast = fast;
        }
        Ok(())
    }

    /// The chunks of `pages` (a run of whole pages), valid until the next call.
    pub fn chunks(&mut self, pages: &[u8]) -> std::io::Result<&[u8]> {
        let mut pos = 0;
        for run in pages.chunks(CHUNK_PAGES * PAGE_SIZE) {
            let need = pos + 8 + zstd::zstd_safe::compress_bound(run.len());
            if self.out.len() < need {
                self.out.resize(need, 0);
            }
            let n = self.z.compress_to_buffer(run, &mut self.out[pos + 8..need])?;
            self.out[pos..pos + 4].copy_from_slice(&(n as u32).to_le_bytes());
            self.out[pos + 4..pos + 8].copy_from_slice(&(run.len() as u32).to_le_bytes());
            pos += 8 + n;
        }
        Ok(&self.out[..pos])
    }
}

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
    /// Bytes of the file.
    pub bytes: u64,
    /// Most bytes of the threads' buffers faulted in at once (they grow as a burst that comes
    /// faster than the background thread compresses reaches them, see
    /// [`RecorderBuilder::pages_per_thread`](crate::RecorderBuilder::pages_per_thread)).
    pub memory_peak: u64,
}

/// Errors of the recorder: what failed and on which path.
#[derive(Debug)]
#[non_exhaustive]
pub enum RecordError {
    /// Another recording is already running in this process.
    AlreadyRecording,
    /// Creating, writing or renaming a file failed.
    Io { path: PathBuf, op: &'static str, source: std::io::Error },
    /// An environment setting has a value it can't take.
    BadSetting { name: &'static str, value: String, expected: &'static str },
}

impl std::fmt::Display for RecordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecordError::AlreadyRecording => write!(f, "a tp recording is already running"),
            RecordError::BadSetting { name, value, expected } => {
                write!(f, "{name}={value:?}: expected {expected}")
            }
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
    /// The stream's latest timestamp, in ns: the next page's times start no earlier.
    pub last_ns: u64,
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
        // For the user stacks of events that record them (`crate::stack`).
        ftrace_formats: vec![crate::stack::format_text()],
        procmaps: vec![crate::stack::self_maps()],
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

/// A finished recording's spool: its directory and streams.
pub(crate) struct Spooled {
    pub dir: PathBuf,
    pub streams: Vec<Stream>,
    /// The spool files hold zstd chunks ([`Chunker`]), else whole pages.
    pub chunked: bool,
    /// See [`Stats::memory_peak`].
    pub memory_peak: u64,
}

pub(crate) fn write(
    path: &Path,
    compression: Compression,
    spooled: Result<Spooled, RecordError>,
) -> Result<Stats, RecordError> {
    let Spooled { dir, streams, chunked, memory_peak } = spooled?;
    let err = |op: &'static str, p: &Path| {
        let p = p.to_path_buf();
        move |source| RecordError::Io { path: p, op, source }
    };
    let meta = metadata(&streams);
    let mut cpus = Vec::new();
    for (i, s) in streams.iter().enumerate() {
        let f = File::open(&s.spool).map_err(err("open", &s.spool))?;
        let pages = BufReader::with_capacity(1 << 20, f);
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
    let compression = if chunked { Compression::Zstd } else { compression };
    let opts = WriterOptions {
        version: 7,
        compression,
        precompressed: chunked,
        ..WriterOptions::default()
    };
    let written = Writer::new(opts)
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
        bytes: written.bytes,
        memory_peak,
    })
}
