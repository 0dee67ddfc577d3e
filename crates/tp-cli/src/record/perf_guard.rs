//! The perf door's guard: a fork of tp taken once the events are open and the file's
//! header is written ([`tp_tracefs::guard::Guard::spawn_holding`]), so that it holds the
//! events' file descriptors and the output. When tp dies (SIGKILL included), it stops the
//! events, takes over the records tp wrote (each ring's records reach the file before
//! their space goes back to the kernel: nothing read is only in tp's memory), drains what
//! the rings still hold, writes the features and the header's sizes, and closes the events
//! (the recording's probes are then removed by the guard's registered actions).

use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom};
use std::path::Path;

use anyhow::{Context, Result};
use tp_format::perfdata::Writer;
use tp_perf::counter::Counter;
use tp_perf::events::Event;
use tp_perf::Ring;

use super::buildid::Dsos;

/// The output's writer, as the perf door uses it.
pub type Out = Writer<BufWriter<File>>;

/// What the guard holds of tp's recording: its copies (a fork's) of tp's values.
pub struct Held<'a> {
    pub out_path: &'a Path,
    /// The writer as it was at the fork (header and synthesized records written, flushed).
    pub writer: &'a mut Option<Out>,
    /// The output under its temporary name, renamed into place once finished.
    pub pending: &'a mut Option<crate::outfile::NewFile>,
    /// Every event's fd; `owners` index the ones that own a CPU's ring.
    pub counters: &'a mut Vec<Counter>,
    pub owners: &'a [usize],
    pub ring_pages: usize,
    pub dsos: &'a mut Dsos,
    pub tfs: Option<&'a tp_tracefs::Tracefs>,
    pub events: &'a [Event],
}

/// In the guard, at once: map every ring too. A ring lives while a mapping of it does: when
/// tp's goes (the kernel marks perf rings VM_DONTCOPY, so a fork has none), the guard's
/// keeps the records tp had not read. Returns the guard's work after tp died.
pub fn hold(h: Held<'_>) -> impl FnOnce(i32) + '_ {
    let rings: Vec<Result<Ring>> = h
        .owners
        .iter()
        .map(|&i| Ring::map(&h.counters[i], h.ring_pages).map_err(anyhow::Error::from))
        .collect();
    move |tp_pid| take_over(h, rings, tp_pid)
}

/// The guard's work after tp died: say what became of the recording.
fn take_over(h: Held<'_>, rings: Vec<Result<Ring>>, tp_pid: i32) {
    let killed = format!("tp record (pid {tp_pid}) was killed");
    let out = h.out_path.display().to_string();
    let counters = std::mem::take(h.counters);
    match finish(h, &counters, rings) {
        Ok((taken, drained)) => eprintln!(
            "tp: {killed}; its guard finished {out}: {} samples ({} from the rings after the kill)",
            taken + drained,
            drained
        ),
        Err(e) => eprintln!("tp: {killed}; its guard could not finish {out}: {e:#}"),
    }
    // The events are closed here, before the guard removes the recording's probes.
    drop(counters);
}

/// Stop the events, take the file over, drain the rings, finish: the samples tp wrote and
/// those drained.
fn finish(h: Held<'_>, counters: &[Counter], rings: Vec<Result<Ring>>) -> Result<(u64, u64)> {
    for c in counters {
        c.disable()?;
    }
    let mut w = h.writer.take().context("no writer")?;
    let dsos = h.dsos;
    w = adopt_file(w, dsos)?;
    let taken = w.stats().samples;
    let mut unmapped = None;
    for ring in rings {
        let mut ring = match ring {
            Ok(r) => r,
            Err(e) => {
                unmapped = Some(e);
                continue;
            }
        };
        ring.read(|rec| {
            dsos.note_record(rec);
            // A record the writer refuses (cut) is left out; the rest still goes in.
            let _ = w.write_raw(rec);
        });
    }
    if let Some(e) = unmapped {
        eprintln!("tp: the guard could not keep a ring ({e:#}): its last records are lost");
    }
    w.finished_round()?;
    let drained = w.stats().samples - taken;
    let mut features = super::perf::features(h.tfs);
    features.build_ids = dsos.build_ids();
    let tracing = match h.tfs {
        Some(t) => Some(super::perf::tracing_data(t, h.events)?),
        None => None,
    };
    w.finish(&features, tracing.as_deref())?;
    h.pending.take().context("no output")?.commit()?;
    Ok((taken, drained))
}

/// Count in the records tp wrote after the fork (up to the last whole one) and cut the file
/// there, ready to write on.
fn adopt_file(mut w: Out, dsos: &mut Dsos) -> Result<Out> {
    use std::os::unix::fs::FileExt;
    let mut at = w.stats().bytes;
    let mut buf: Vec<u8> = Vec::with_capacity(CHUNK);
    loop {
        let have = buf.len();
        buf.resize(have + CHUNK, 0);
        let n = w.get_ref().get_ref().read_at(&mut buf[have..], at)?;
        buf.truncate(have + n);
        at += n as u64;
        let taken = w.adopt(&buf, |rec| dsos.note_record(rec));
        buf.drain(..taken);
        if n == 0 {
            break;
        }
    }
    let w = w.reopen(|out, end| {
        let f = out.into_inner().map_err(|e| e.into_error())?;
        f.set_len(end)?;
        (&f).seek(SeekFrom::Start(end))?;
        Ok(BufWriter::with_capacity(super::perf::OUT_BUFFER, f))
    })?;
    Ok(w)
}

/// The file is read back in pieces of this size.
const CHUNK: usize = 4 << 20;
