//! Per-CPU capture of ring-buffer pages from `per_cpu/cpuN/trace_pipe_raw`.
//!
//! One thread per CPU waits (poll) until the kernel says pages are ready, then moves them
//! with splice(2) into a pipe and from the pipe into the output file, so page data never
//! passes through user space. If splice is not available for the pair, it falls back to
//! read(2)/write(2). splice only hands over full pages; at the end, [`Capture::finish`]
//! drains what is left with nonblocking read(2), which also returns the partly filled page.
//!
//! Pages are stored verbatim: each is `page_size` bytes, header included.

use std::fs::File;
use std::marker::PhantomData;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::error::{Error, Result};
use crate::instance::Instance;
use crate::sys::{self, Io};

/// How capture threads behave.
#[derive(Debug, Clone)]
pub struct CaptureConfig {
    /// Use splice (true) or always read/write (false).
    pub splice: bool,
    /// Bytes of the intermediate pipe (rounded by the kernel; capped by pipe-max-size).
    pub pipe_size: usize,
    /// Wake at least this often (ms) to move full pages even when poll has not fired.
    pub poll_interval_ms: i32,
    /// Keep each CPU's reader off that CPU, so draining never preempts the task producing
    /// the events there (when the machine has another CPU to run it on).
    pub avoid_own_cpu: bool,
}

impl Default for CaptureConfig {
    fn default() -> Self {
        CaptureConfig {
            splice: true,
            pipe_size: 1 << 20,
            poll_interval_ms: 500,
            avoid_own_cpu: true,
        }
    }
}

/// What one CPU's capture produced.
#[derive(Debug, Clone)]
pub struct CpuCapture {
    pub cpu: u32,
    /// Bytes written to the output (a multiple of the page size).
    pub bytes: u64,
    /// True if splice moved the data; false if the read() fallback did.
    pub spliced: bool,
    /// The output's disk filled: this CPU's capture stopped there (the file may end inside
    /// a page; what the kernel kept in the buffer afterwards is counted as lost).
    pub disk_full: bool,
}

/// Running capture of some CPUs of an instance. It borrows the instance so that the
/// readers are closed before the instance can be removed. Dropping it stops the threads
/// without the final drain; call [`Capture::finish`] to get every page.
pub struct Capture<'a> {
    threads: Vec<(u32, JoinHandle<Result<CpuCapture>>)>,
    stop_w: Option<OwnedFd>,
    counters: Vec<(u32, Arc<AtomicU64>)>,
    _inst: PhantomData<&'a Instance>,
}

impl Instance {
    /// Start capturing the given CPUs, each into its `File` (written from its current
    /// position). Turn tracing on after this (or before; pages wait in the buffer).
    pub fn capture(&self, outputs: Vec<(u32, File)>, cfg: &CaptureConfig) -> Result<Capture<'_>> {
        let (stop_r, stop_w) = sys::pipe(0)?;
        let stop_r = Arc::new(stop_r);
        let page = sys::page_size();
        let mut threads = Vec::new();
        let mut counters = Vec::new();
        let mut cap = Capture {
            threads: Vec::new(),
            stop_w: Some(stop_w),
            counters: Vec::new(),
            _inst: PhantomData,
        };
        for (cpu, out) in outputs {
            let path = self.raw_path(cpu);
            let raw = sys::open_read(&path, true)?;
            let counter = Arc::new(AtomicU64::new(0));
            counters.push((cpu, counter.clone()));
            let stop_r = stop_r.clone();
            let cfg = cfg.clone();
            let h = std::thread::Builder::new()
                .name(format!("tp-cpu{cpu}"))
                .spawn(move || cpu_loop(cpu, raw, path, out, stop_r, counter, cfg, page))
                .map_err(|e| Error::sys("spawn thread", "(capture)", e))?;
            threads.push((cpu, h));
        }
        cap.threads = threads;
        cap.counters = counters;
        Ok(cap)
    }

    /// Read every page now in one CPU's buffer (nonblocking; includes the partly filled
    /// page). Consumes them, as any trace_pipe_raw read does.
    pub fn drain_cpu(&self, cpu: u32) -> Result<Vec<u8>> {
        let path = self.raw_path(cpu);
        let raw = sys::open_read(&path, true)?;
        let page = sys::page_size();
        let mut out = Vec::new();
        let mut buf = vec![0u8; page];
        while let Io::Bytes(n) = sys::read_fd(raw.as_raw_fd(), &mut buf, &path)? {
            out.extend_from_slice(&buf[..n]);
        }
        Ok(out)
    }

    /// Move the pages now in one CPU's buffer into `out` (nonblocking reads, partly filled
    /// page included), at most `max_bytes` (so a buffer still being written cannot keep
    /// this going forever). Returns the bytes written.
    pub fn drain_cpu_to(&self, cpu: u32, out: &mut File, max_bytes: u64) -> Result<u64> {
        let path = self.raw_path(cpu);
        let raw = sys::open_read(&path, true)?;
        let page = sys::page_size();
        let mut buf = vec![0u8; page];
        let mut total = 0u64;
        while total < max_bytes {
            match sys::read_fd(raw.as_raw_fd(), &mut buf, &path)? {
                Io::Bytes(n) => {
                    sys::write_all_fd(out.as_raw_fd(), &buf[..n], Path::new("(extract output)"))?;
                    total += n as u64;
                }
                _ => break,
            }
        }
        Ok(total)
    }

    /// Open one CPU's `trace_pipe_raw` for page-by-page reading (e.g. live streaming).
    pub fn raw_reader(&self, cpu: u32) -> Result<RawReader<'_>> {
        let path = self.raw_path(cpu);
        let fd = sys::open_read(&path, true)?;
        Ok(RawReader { cpu, fd, path, _inst: PhantomData })
    }
}

/// A nonblocking reader of one CPU's raw pages.
pub struct RawReader<'a> {
    pub cpu: u32,
    fd: OwnedFd,
    path: PathBuf,
    _inst: PhantomData<&'a Instance>,
}

impl RawReader<'_> {
    /// Read one page into `buf` (at least a page long): `Ok(0)` when none is ready.
    pub fn read_page(&mut self, buf: &mut [u8]) -> Result<usize> {
        match sys::read_fd(self.fd.as_raw_fd(), buf, &self.path)? {
            Io::Bytes(n) => Ok(n),
            _ => Ok(0),
        }
    }

    /// The descriptor, for poll.
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// Wait until any of the readers has data or `timeout_ms` passes; returns which are ready.
pub fn poll_readers(readers: &[RawReader<'_>], timeout_ms: i32) -> Result<Vec<bool>> {
    let fds: Vec<RawFd> = readers.iter().map(|r| r.raw_fd()).collect();
    sys::poll_readable(&fds, timeout_ms)
}

impl Capture<'_> {
    /// Bytes captured so far per CPU (for a live status line).
    pub fn bytes(&self) -> Vec<(u32, u64)> {
        self.counters.iter().map(|(c, n)| (*c, n.load(Ordering::Relaxed))).collect()
    }

    /// Stop the threads after they have drained every page left in the buffer (turn tracing
    /// off first so the buffer stops filling), and report what each CPU wrote.
    pub fn finish(mut self) -> Result<Vec<CpuCapture>> {
        self.stop_w.take();
        let mut out = Vec::new();
        let mut first_err = None;
        for (cpu, h) in std::mem::take(&mut self.threads) {
            match h.join() {
                Ok(Ok(c)) => out.push(c),
                Ok(Err(e)) => {
                    first_err.get_or_insert(e);
                }
                Err(_) => {
                    first_err.get_or_insert(Error::Other(format!(
                        "capture thread of CPU {cpu} panicked"
                    )));
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }
}

impl Drop for Capture<'_> {
    fn drop(&mut self) {
        // Closing the write end wakes every thread; they drain and exit.
        self.stop_w.take();
        for (_, h) in self.threads.drain(..) {
            let _ = h.join();
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn cpu_loop(
    cpu: u32,
    raw: OwnedFd,
    path: PathBuf,
    out: File,
    stop_r: Arc<OwnedFd>,
    counter: Arc<AtomicU64>,
    cfg: CaptureConfig,
    page: usize,
) -> Result<CpuCapture> {
    let rfd = raw.as_raw_fd();
    let ofd = out.as_raw_fd();
    if cfg.avoid_own_cpu {
        // Best effort: a failure only costs the optimisation.
        let _ = sys::avoid_cpu(cpu);
    }
    let mut mover = Mover::new(&cfg, page, &path)?;
    let disk_full = match capture_loop(rfd, ofd, &stop_r, &counter, &cfg, page, &path, &mut mover) {
        Ok(()) => false,
        Err(e) if matches!(e.errno(), Some(libc::ENOSPC | libc::EDQUOT)) => true,
        Err(e) => return Err(e),
    };
    Ok(CpuCapture {
        cpu,
        bytes: counter.load(Ordering::Relaxed),
        spliced: mover.spliced,
        disk_full,
    })
}

/// Move pages until told to stop, then drain the rest.
#[allow(clippy::too_many_arguments)]
fn capture_loop(
    rfd: RawFd,
    ofd: RawFd,
    stop_r: &OwnedFd,
    counter: &AtomicU64,
    cfg: &CaptureConfig,
    page: usize,
    path: &Path,
    mover: &mut Mover,
) -> Result<()> {
    loop {
        let ready = sys::poll_readable(&[rfd, stop_r.as_raw_fd()], cfg.poll_interval_ms)?;
        let stopping = ready[1];
        // Move full pages (splice only hands over full ones).
        loop {
            let n = mover.move_some(rfd, ofd, path)?;
            if n == 0 {
                break;
            }
            counter.fetch_add(n as u64, Ordering::Relaxed);
        }
        if stopping {
            // The rest, including the partly filled page: read() until empty.
            let mut buf = vec![0u8; page];
            while let Io::Bytes(n) = sys::read_fd(rfd, &mut buf, path)? {
                sys::write_all_fd(ofd, &buf[..n], Path::new("(capture output)"))?;
                counter.fetch_add(n as u64, Ordering::Relaxed);
            }
            return Ok(());
        }
    }
}

/// Moves pages from trace_pipe_raw to the output, by splice through a pipe or by read/write.
struct Mover {
    pipe: Option<(OwnedFd, OwnedFd)>,
    pipe_len: usize,
    buf: Vec<u8>,
    spliced: bool,
}

impl Mover {
    fn new(cfg: &CaptureConfig, page: usize, _path: &Path) -> Result<Mover> {
        let pipe = if cfg.splice { Some(sys::pipe(cfg.pipe_size)?) } else { None };
        let pipe_len = match &pipe {
            Some((r, _)) => (sys::pipe_size(r.as_raw_fd()) / page).max(1) * page,
            None => page,
        };
        Ok(Mover { pipe, pipe_len, buf: Vec::new(), spliced: false })
    }

    /// Move what is ready (nonblocking); returns the bytes moved (0 = nothing ready).
    fn move_some(&mut self, rfd: RawFd, ofd: RawFd, path: &Path) -> Result<usize> {
        if let Some((pr, pw)) = &self.pipe {
            let (pr, pw) = (pr.as_raw_fd(), pw.as_raw_fd());
            match sys::splice(rfd, pw, self.pipe_len, true, path)? {
                Io::Bytes(n) => {
                    let mut left = n;
                    while left > 0 {
                        match sys::splice(pr, ofd, left, false, Path::new("(capture output)"))? {
                            Io::Bytes(m) => left -= m,
                            Io::Empty => {
                                return Err(Error::Other(
                                    "splice to the output moved nothing".into(),
                                ))
                            }
                            Io::Unsupported => {
                                // The output does not take splice: copy the pipe out instead.
                                self.copy_pipe_out(pr, ofd, left)?;
                                left = 0;
                            }
                        }
                    }
                    self.spliced = true;
                    return Ok(n);
                }
                Io::Empty => return Ok(0),
                Io::Unsupported => {
                    self.pipe = None;
                }
            }
        }
        if self.buf.is_empty() {
            self.buf = vec![0u8; sys::page_size()];
        }
        match sys::read_fd(rfd, &mut self.buf, path)? {
            Io::Bytes(n) => {
                sys::write_all_fd(ofd, &self.buf[..n], Path::new("(capture output)"))?;
                Ok(n)
            }
            _ => Ok(0),
        }
    }

    fn copy_pipe_out(&mut self, pr: RawFd, ofd: RawFd, mut left: usize) -> Result<()> {
        let mut buf = vec![0u8; 65536];
        while left > 0 {
            let want = left.min(buf.len());
            match sys::read_fd(pr, &mut buf[..want], Path::new("(pipe)"))? {
                Io::Bytes(n) => {
                    sys::write_all_fd(ofd, &buf[..n], Path::new("(capture output)"))?;
                    left -= n;
                }
                _ => break,
            }
        }
        Ok(())
    }
}
