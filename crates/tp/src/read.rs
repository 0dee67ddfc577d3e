//! Reading back what the recorder wrote: a page decoder (the recorder counts events with
//! it) and [`Recording`], a trace.dat read through `tp_format::tracedat`.

use tp_format::EventFormat;

/// Decode one kernel-format page: `(timestamp, record bytes)` per data event.
pub fn page_records(page: &[u8]) -> impl Iterator<Item = (u64, &[u8])> {
    let ts0 = u64::from_le_bytes(page[0..8].try_into().unwrap_or([0; 8]));
    let commit = u64::from_le_bytes(page[8..16].try_into().unwrap_or([0; 8]));
    let len = ((commit & 0x3fff_ffff) as usize).min(page.len().saturating_sub(16));
    let data = &page[16..16 + len];
    let mut pos = 0;
    let mut ts = ts0;
    std::iter::from_fn(move || loop {
        if pos + 4 > data.len() {
            return None;
        }
        let w = u32::from_le_bytes(data[pos..pos + 4].try_into().ok()?);
        let (tl, delta) = (w & 31, (w >> 5) as u64);
        let a0 = || data.get(pos + 4..pos + 8).map(|b| u32::from_le_bytes(b.try_into().unwrap()));
        match tl {
            1..=28 => {
                let end = pos + 4 + tl as usize * 4;
                let rec = data.get(pos + 4..end)?;
                ts += delta;
                pos = end;
                return Some((ts, rec));
            }
            0 => {
                let end = pos + 4 + a0()? as usize;
                let rec = data.get(pos + 8..end)?;
                ts += delta;
                pos = end;
                return Some((ts, rec));
            }
            30 => {
                ts += ((a0()? as u64) << 27) | delta;
                pos += 8;
            }
            29 => pos += 4 + a0()? as usize,
            _ => return None,
        }
    })
}

/// Lost-event count a page's commit word reports (`None` when none were lost).
pub fn page_missed(page: &[u8]) -> Option<u64> {
    let commit = u64::from_le_bytes(page[8..16].try_into().ok()?);
    if commit & crate::ring::MISSED_EVENTS == 0 {
        return None;
    }
    if commit & crate::ring::MISSED_STORED == 0 {
        return Some(0);
    }
    let off = 16 + (commit & 0x3fff_ffff) as usize;
    Some(u64::from_le_bytes(page.get(off..off + 8)?.try_into().ok()?))
}

/// A recording read back with `tp_format::tracedat` (for tests and tools).
#[derive(Debug, Clone)]
pub struct Recording {
    /// Every event format in the file.
    pub formats: Vec<EventFormat>,
    /// Every event, merged by time: `(stream, timestamp, record)`.
    pub records: Vec<(u32, u64, Vec<u8>)>,
    /// Sum of the lost-event counts the pages report.
    pub lost_in_pages: u64,
    /// Sum of the `dropped events:` lines of the per-stream stats.
    pub dropped: u64,
    /// The trace clock the file names.
    pub clock: Option<String>,
    /// `saved_cmdlines`: thread ids and names.
    pub cmdlines: Vec<(i32, String)>,
}

impl Recording {
    /// Read a trace.dat file.
    pub fn open(path: impl AsRef<std::path::Path>) -> Result<Recording, String> {
        let bytes = std::fs::read(path.as_ref()).map_err(|e| e.to_string())?;
        Self::parse(bytes)
    }

    /// Read trace.dat bytes.
    pub fn parse(bytes: Vec<u8>) -> Result<Recording, String> {
        use tp_format::tracedat::{Item, TraceDat};
        let dat = TraceDat::open(std::io::Cursor::new(bytes)).map_err(|e| e.to_string())?;
        let mut records = Vec::new();
        let mut lost_in_pages = 0;
        {
            let mut recs = dat.records(0).map_err(|e| e.to_string())?;
            while let Some(item) = recs.next() {
                match item.map_err(|e| e.to_string())? {
                    Item::Event(r) => records.push((r.cpu, r.ts, r.data.to_vec())),
                    Item::Lost(l) => lost_in_pages += l.count.unwrap_or(0),
                }
            }
        }
        let dropped = dat
            .cpustats()
            .lines()
            .filter_map(|l| l.strip_prefix("dropped events:"))
            .filter_map(|v| v.trim().parse::<u64>().ok())
            .sum();
        Ok(Recording {
            formats: dat.events().to_vec(),
            records,
            lost_in_pages,
            dropped,
            clock: dat.clock().map(str::to_string),
            cmdlines: dat.cmdlines().iter().map(|(p, c)| (p, c.to_string())).collect(),
        })
    }

    pub fn format(&self, id: u16) -> Option<&EventFormat> {
        self.formats.iter().find(|f| f.id == id as u32)
    }
}
