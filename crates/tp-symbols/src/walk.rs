//! Every wanted sample of a perf.data file with its stack named, in time order, with its
//! task's name at that time (COMM and FORK records): what `--folded`, `--flamegraph`,
//! `--top` and `tp convert --to firefox` sum or export.

use std::collections::HashMap;

use tp_format::perfdata::{Error, PerfData, Record, Sample};

use crate::perf::{Frame, Symbols};

/// One sample: its event (index in the file's attrs), the sample, its task's name (`None`
/// when the file never named the task) and its frames, innermost first.
pub struct Walked<'a, 's> {
    pub event: usize,
    pub sample: &'a Sample<'s>,
    pub comm: Option<&'a str>,
    pub frames: &'a [Frame],
}

/// Feed `f` each sample `keep(event, sample)` accepts. Returns the errors of records that
/// did not parse (the records after them are still read); the symbolizer's notes stay in
/// `syms.notes` for the caller to say.
pub fn walk<R: std::io::Read + std::io::Seek>(
    data: &PerfData<R>,
    syms: &mut Symbols,
    mut keep: impl FnMut(usize, &Sample<'_>) -> bool,
    mut f: impl FnMut(Walked<'_, '_>),
) -> Result<Vec<Error>, Error> {
    let mut comms: HashMap<u32, String> = HashMap::new();
    let mut frames: Vec<Frame> = Vec::new();
    let mut errors = Vec::new();
    let mut records = data.records(true)?;
    while let Some(item) = records.next() {
        let parsed = item.and_then(|i| {
            let event = i.event;
            i.parse().map(|r| (event, r))
        });
        let (event, r) = match parsed {
            Ok(x) => x,
            Err(e) => {
                errors.push(e);
                continue;
            }
        };
        match r {
            Record::Sample(ref s) => {
                let Some(event) = event.filter(|&e| keep(e, s)) else { continue };
                syms.stack(data.attrs.get(event), s, &mut frames);
                let tid = s.tid.or(s.pid).unwrap_or(0);
                let comm = comms.get(&tid).map(String::as_str);
                f(Walked { event, sample: s, comm, frames: &frames });
            }
            Record::Comm { tid, comm, .. } => {
                comms.insert(tid, comm.to_string());
                syms.note(&r);
            }
            Record::Fork(t, _) => {
                if let Some(c) = comms.get(&t.ptid).cloned() {
                    comms.insert(t.tid, c);
                }
                syms.note(&r);
            }
            _ => syms.note(&r),
        }
    }
    Ok(errors)
}
