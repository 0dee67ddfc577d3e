//! The metadata sections v6 and v7 share (a v7 section's content is laid out as v6 writes
//! it inline): header info, event formats, kallsyms, printk formats, saved command lines.

use super::TraceDat;
use crate::format::EventFormat;
use crate::header::HeaderPage;
use crate::symbols::{Kallsyms, PrintkFormats};
use crate::tracedat::bytes::Bytes;
use crate::tracedat::{Error, ErrorKind};
use std::io::{Read, Seek};

impl<R: Read + Seek> TraceDat<R> {
    pub(super) fn parse_header_info(&mut self, b: &mut Bytes<'_>) -> Result<(), Error> {
        let at = b.offset();
        if b.take(12)? != b"header_page\0" {
            return Err(Error::tracedat_invalid(
                at,
                "header info",
                "expected \"header_page\"".into(),
            ));
        }
        let n = b.u64()?;
        let at_text = b.offset();
        self.header_page_text = b.text(n)?;
        self.header_page = HeaderPage::parse(&self.header_page_text)
            .map_err(|m| Error::tracedat_invalid(at_text, "header_page", m))?;
        if self.header_page.page_size() > self.page_size {
            return Err(Error::tracedat_invalid(
                at_text,
                "header_page",
                format!(
                    "page layout of {} bytes exceeds the page size {}",
                    self.header_page.page_size(),
                    self.page_size
                ),
            ));
        }
        let at = b.offset();
        if b.take(13)? != b"header_event\0" {
            return Err(Error::tracedat_invalid(
                at,
                "header info",
                "expected \"header_event\"".into(),
            ));
        }
        let n = b.u64()?;
        let at_text = b.offset();
        self.header_event_text = b.text(n)?;
        crate::header::check_header_event(&self.header_event_text)
            .map_err(|m| Error::tracedat_invalid(at_text, "header_event", m))?;
        Ok(())
    }

    fn add_format(&mut self, system: &str, text: String) {
        if self.defer_formats {
            self.deferred.push((system.to_string(), text));
            return;
        }
        match EventFormat::parse(system, &text) {
            Ok(f) => self.events.push(f),
            Err(e) => self.format_errors.push(e),
        }
    }

    /// Event formats kept as text by [`TraceDat::open_file_lazy`] and not parsed yet.
    pub fn unparsed_formats(&self) -> usize {
        self.deferred.len()
    }

    /// Parse the formats kept by [`TraceDat::open_file_lazy`] whose event ID `want`
    /// accepts, adding them to `events` (or `format_errors`) in file order. A format whose
    /// ID cannot be read without parsing it is parsed. The others stay unparsed: a later
    /// call may parse them.
    pub fn parse_formats(&mut self, mut want: impl FnMut(u32) -> bool) {
        let deferred = std::mem::take(&mut self.deferred);
        for (system, text) in deferred {
            if quick_id(&text).is_none_or(&mut want) {
                match EventFormat::parse(&system, &text) {
                    Ok(f) => self.events.push(f),
                    Err(e) => self.format_errors.push(e),
                }
            } else {
                self.deferred.push((system, text));
            }
        }
    }

    pub(super) fn parse_ftrace(&mut self, b: &mut Bytes<'_>) -> Result<(), Error> {
        let n = b.u32()?;
        for _ in 0..n {
            let size = b.u64()?;
            let t = b.text(size)?;
            self.add_format("ftrace", t);
        }
        Ok(())
    }

    pub(super) fn parse_event_formats(&mut self, b: &mut Bytes<'_>) -> Result<(), Error> {
        let systems = b.u32()?;
        for _ in 0..systems {
            let system = b.cstr()?;
            let n = b.u32()?;
            for _ in 0..n {
                let size = b.u64()?;
                let t = b.text(size)?;
                self.add_format(&system, t);
            }
        }
        Ok(())
    }

    /// The kallsyms block (`u32` length, text), taken over in place: the text is a few
    /// megabytes, not worth a second copy.
    pub(super) fn take_kallsyms(&mut self, mut data: Vec<u8>, base: u64) -> Result<(), Error> {
        let n = Bytes::new(&data, base, self.big_endian, "kallsyms").u32()? as u64;
        let have = data.len() as u64 - 4;
        if n > have {
            return Err(Error::tracedat(
                base + 4,
                "kallsyms",
                ErrorKind::Truncated { need: n, have },
            ));
        }
        data.truncate(4 + n as usize);
        // Trailing NULs dropped, as `text_of` does.
        let end = data.iter().rposition(|&c| c != 0).map_or(4, |i| i + 1).max(4);
        data.truncate(end);
        data.drain(..4);
        let text = String::from_utf8(data)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
        self.kallsyms = Kallsyms::from_text(text);
        Ok(())
    }

    pub(super) fn parse_printk(&mut self, b: &mut Bytes<'_>) -> Result<(), Error> {
        let n = b.u32()? as u64;
        self.printk = PrintkFormats::parse(&b.text(n)?);
        Ok(())
    }

    pub(super) fn parse_cmdlines(&mut self, b: &mut Bytes<'_>) -> Result<(), Error> {
        let n = b.u64()?;
        // Added to, not replaced: tgids from tp's option may have been read already.
        self.cmdlines.add_cmdlines(&b.text(n)?);
        Ok(())
    }
}

/// The ID a format file's parse would give (its last `ID: ` line before `print fmt: `),
/// without parsing the fields; `None` when it has none or it is not a number.
fn quick_id(text: &str) -> Option<u32> {
    let mut id = None;
    for line in text.lines() {
        if line.starts_with("print fmt: ") {
            break;
        }
        if let Some(v) = line.strip_prefix("ID: ") {
            id = Some(v.trim().parse::<u32>().ok()?);
        }
    }
    id
}

#[cfg(test)]
mod tests {
    use super::quick_id;

    #[test]
    fn quick_id_agrees_with_the_parser() {
        assert_eq!(quick_id("name: x\nID: 12\nformat:\nprint fmt: \"ID: 3\"\n"), Some(12));
        assert_eq!(quick_id("name: x\nID: zz\n"), None);
        assert_eq!(quick_id("name: x\n"), None);
    }
}
