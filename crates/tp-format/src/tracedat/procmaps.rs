//! trace-cmd's `PROCMAPS` option: the mappings of a traced process, one option per process.
//! Its text (NUL-terminated) is a line `PID NR COMM` (PID and NR in hex), then NR lines
//! `START END NAME` (hex addresses, `END` exclusive). trace-cmd `--proc-map` writes the
//! file-backed mappings merged per library; tp writes every named mapping as its own line,
//! anonymous ones as `[anon]`. A mapping's file offset is not stored.

/// One mapping of a [`ProcMaps`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LibMap {
    pub start: u64,
    pub end: u64,
    pub name: String,
}

/// A process's mappings as the PROCMAPS option stores them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcMaps {
    pub pid: i32,
    pub comm: String,
    pub maps: Vec<LibMap>,
}

impl ProcMaps {
    /// The option's text (without its NUL).
    pub fn to_text(&self) -> String {
        let mut s = format!("{:x} {:x} {}\n", self.pid, self.maps.len(), self.comm);
        for m in &self.maps {
            s.push_str(&format!("{:x} {:x} {}\n", m.start, m.end, m.name));
        }
        s
    }

    /// Parse the option's text; `None` when its first line is not `PID NR COMM`. Lines
    /// past the text's end or malformed ones are left out.
    pub fn parse(text: &str) -> Option<ProcMaps> {
        let mut lines = text.trim_end_matches('\0').lines();
        let mut head = lines.next()?.splitn(3, ' ');
        let pid = i32::from_str_radix(head.next()?, 16).ok()?;
        let nr = usize::from_str_radix(head.next()?, 16).ok()?;
        let comm = head.next().unwrap_or("").to_string();
        let maps = lines
            .take(nr)
            .filter_map(|l| {
                let mut f = l.splitn(3, ' ');
                let start = u64::from_str_radix(f.next()?, 16).ok()?;
                let end = u64::from_str_radix(f.next()?, 16).ok()?;
                Some(LibMap { start, end, name: f.next()?.to_string() })
            })
            .collect();
        Some(ProcMaps { pid, comm, maps })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_round_trips_as_trace_cmd_writes_it() {
        let p = ProcMaps {
            pid: 0x1234,
            comm: "my prog".into(),
            maps: vec![
                LibMap { start: 0x5500_0000, end: 0x5500_1000, name: "/usr/bin/my prog".into() },
                LibMap { start: 0x7f00_0000, end: 0x7f00_2000, name: "[anon]".into() },
            ],
        };
        let t = p.to_text();
        assert_eq!(t.lines().next(), Some("1234 2 my prog"));
        assert_eq!(t.lines().nth(1), Some("55000000 55001000 /usr/bin/my prog"));
        assert_eq!(ProcMaps::parse(&(t + "\0")), Some(p));
        assert_eq!(ProcMaps::parse("zz 1 x\n"), None);
    }
}
