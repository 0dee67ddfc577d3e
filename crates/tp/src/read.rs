//! Reading back what the recorder wrote (the interim `tp-pages` file described in
//! [`crate::output`]), for tests and tools until trace.dat output lands.

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

/// One stream of a recording.
#[derive(Debug, Clone)]
pub struct StreamInfo {
    pub tid: i32,
    pub pages: u64,
    pub lost: u64,
    pub comm: String,
}

/// A recording read back.
#[derive(Debug, Clone)]
pub struct Recording {
    pub formats: Vec<EventFormat>,
    pub streams: Vec<StreamInfo>,
    pub events: u64,
    pub lost: u64,
    /// All pages, stream by stream (`streams[i].pages` of them each).
    pub pages: Vec<u8>,
}

impl Recording {
    /// Parse a `tp-pages` file.
    pub fn parse(bytes: &[u8]) -> Result<Recording, String> {
        let mut pos = 0;
        fn line<'b>(bytes: &'b [u8], pos: &mut usize) -> Result<&'b str, String> {
            let end = bytes[*pos..].iter().position(|&b| b == b'\n').ok_or("truncated header")?;
            let l = std::str::from_utf8(&bytes[*pos..*pos + end]).map_err(|e| e.to_string())?;
            *pos += end + 1;
            Ok(l)
        }
        if line(bytes, &mut pos)? != "tp-pages 1" {
            return Err("not a tp-pages file".into());
        }
        let mut rec =
            Recording { formats: vec![], streams: vec![], events: 0, lost: 0, pages: vec![] };
        loop {
            let l = line(bytes, &mut pos)?;
            if l == "end" {
                break;
            }
            if let Some(v) = l.strip_prefix("events: ") {
                rec.events = v.parse().map_err(|_| "bad events")?;
            } else if let Some(v) = l.strip_prefix("lost: ") {
                rec.lost = v.parse().map_err(|_| "bad lost")?;
            } else if let Some(v) = l.strip_prefix("stream: ") {
                let p: Vec<&str> = v.splitn(5, ' ').collect();
                let num =
                    |i: usize| p.get(i).and_then(|s| s.parse::<i64>().ok()).ok_or("bad stream");
                rec.streams.push(StreamInfo {
                    tid: num(1)? as i32,
                    pages: num(2)? as u64,
                    lost: num(3)? as u64,
                    comm: p.get(4).unwrap_or(&"").to_string(),
                });
            } else if let Some(v) = l.strip_prefix("format: ") {
                let (sys, len) = v.split_once(' ').ok_or("bad format line")?;
                let len: usize = len.parse().map_err(|_| "bad format length")?;
                let sys = sys.to_string();
                let text =
                    std::str::from_utf8(bytes.get(pos..pos + len).ok_or("truncated format")?)
                        .map_err(|e| e.to_string())?;
                pos += len;
                rec.formats.push(EventFormat::parse(&sys, text).map_err(|e| e.to_string())?);
            }
        }
        rec.pages = bytes[pos..].to_vec();
        Ok(rec)
    }

    /// Every event: `(stream, timestamp, record)`, stream by stream in page order.
    pub fn events(&self) -> impl Iterator<Item = (usize, u64, &[u8])> {
        let mut starts = Vec::new();
        let mut p = 0usize;
        for s in &self.streams {
            starts.push(p);
            p += s.pages as usize;
        }
        self.pages.chunks_exact(4096).enumerate().flat_map(move |(i, page)| {
            let stream = starts.iter().rposition(|&s| s <= i).unwrap_or(0);
            page_records(page).map(move |(ts, r)| (stream, ts, r))
        })
    }

    /// Lost counts recorded in page commit words.
    pub fn missed_in_pages(&self) -> u64 {
        self.pages.chunks_exact(4096).filter_map(page_missed).sum()
    }

    pub fn format(&self, id: u16) -> Option<&EventFormat> {
        self.formats.iter().find(|f| f.id == id as u32)
    }
}
