//! Reading back what the recorder wrote: [`Recording`], a trace.dat read through
//! `tp_format::tracedat`.

use tp_format::EventFormat;

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
