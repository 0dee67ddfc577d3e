//! `events/header_page` and `events/header_event`: the ring-buffer page and event-header
//! layout the kernel publishes.
//!
//! ```text
//!     field: u64 timestamp;    offset:0;    size:8;    signed:0;
//!     field: local_t commit;    offset:8;    size:8;    signed:1;
//!     field: int overwrite;    offset:8;    size:1;    signed:1;
//!     field: char data;    offset:16;    size:4080;    signed:0;
//! ```

use crate::format::parse_field_line;

/// Page layout from `header_page`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderPage {
    pub timestamp_offset: usize,
    pub commit_offset: usize,
    /// 8 on 64-bit kernels, 4 on 32-bit ones.
    pub commit_size: usize,
    pub data_offset: usize,
    /// Bytes of event data a page can hold (page size minus the header).
    pub data_size: usize,
}

impl HeaderPage {
    /// The layout of this machine's kernel (x86_64, 4 KiB pages), for writers and tests.
    pub const X86_64: HeaderPage = HeaderPage {
        timestamp_offset: 0,
        commit_offset: 8,
        commit_size: 8,
        data_offset: 16,
        data_size: 4080,
    };

    /// Page size: header plus data.
    pub fn page_size(&self) -> usize {
        self.data_offset + self.data_size
    }

    pub fn parse(text: &str) -> Result<HeaderPage, String> {
        let mut h = HeaderPage {
            timestamp_offset: 0,
            commit_offset: 0,
            commit_size: 0,
            data_offset: 0,
            data_size: 0,
        };
        let mut seen = 0;
        for (i, line) in text.lines().enumerate() {
            let t = line.trim();
            if t.is_empty() {
                continue;
            }
            let f = parse_field_line(t).map_err(|m| format!("header_page line {}: {m}", i + 1))?;
            match f.name.as_str() {
                "timestamp" => (h.timestamp_offset, seen) = (f.offset, seen | 1),
                "commit" => (h.commit_offset, h.commit_size, seen) = (f.offset, f.size, seen | 2),
                "data" => (h.data_offset, h.data_size, seen) = (f.offset, f.size, seen | 4),
                _ => {}
            }
        }
        if seen != 7 {
            return Err("header_page: missing timestamp, commit or data field".into());
        }
        if !matches!(h.commit_size, 4 | 8) || h.data_size == 0 || h.data_size > 1 << 24 {
            return Err(format!("header_page: implausible layout {h:?}"));
        }
        Ok(h)
    }

    /// The header_page text as the kernel prints it (for writers).
    pub fn to_text(&self) -> String {
        format!(
            "\tfield: u64 timestamp;\toffset:{};\tsize:8;\tsigned:0;\n\
             \tfield: local_t commit;\toffset:{};\tsize:{};\tsigned:1;\n\
             \tfield: int overwrite;\toffset:{};\tsize:1;\tsigned:1;\n\
             \tfield: char data;\toffset:{};\tsize:{};\tsigned:0;\n",
            self.timestamp_offset,
            self.commit_offset,
            self.commit_size,
            self.commit_offset,
            self.data_offset,
            self.data_size
        )
    }
}

/// The `header_event` text the kernel prints; the layout it describes is fixed
/// (5-bit type_len, 27-bit time_delta, then a 32-bit array word) and [`crate::page`] decodes it.
pub const HEADER_EVENT_TEXT: &str = "# compressed entry header\n\
\ttype_len    :    5 bits\n\
\ttime_delta  :   27 bits\n\
\tarray       :   32 bits\n\
\n\
\tpadding     : type == 29\n\
\ttime_extend : type == 30\n\
\ttime_stamp : type == 31\n\
\tdata max type_len  == 28\n";

/// Check that a `header_event` text describes the layout tp decodes.
pub fn check_header_event(text: &str) -> Result<(), String> {
    let has = |k: &str, v: &str| {
        text.lines().any(|l| {
            let mut it = l.split(':');
            it.next().map(str::trim) == Some(k) && it.next().map(|s| s.trim()) == Some(v)
        })
    };
    if has("type_len", "5 bits") && has("time_delta", "27 bits") {
        Ok(())
    } else {
        Err("header_event: not the 5-bit type_len / 27-bit time_delta layout".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_this_kernels_header() {
        let text = HeaderPage::X86_64.to_text();
        assert_eq!(HeaderPage::parse(&text).unwrap(), HeaderPage::X86_64);
        assert_eq!(HeaderPage::X86_64.page_size(), 4096);
        assert!(check_header_event(HEADER_EVENT_TEXT).is_ok());
        assert!(check_header_event("type_len : 6 bits").is_err());
        assert!(
            HeaderPage::parse("\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n").is_err()
        );
    }
}
