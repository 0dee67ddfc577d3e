//! `tp faults [-i FILE] [-- CMD]`: page faults from `exceptions:page_fault_user` and
//! `exceptions:page_fault_kernel` (x86): per task, by kind (the x86 error code's bits:
//! read/write/instruction fetch, page not present or protection fault), the pages and
//! instruction addresses that fault most (kernel ones named from the file's kallsyms), and,
//! when `filemap:mm_filemap_fault` was recorded, the files whose pages were faulted through
//! the page cache (device and inode).
//!
//! What a trace.dat cannot tell, and the report says: whether a fault was major or minor
//! (the kernel decides after these tracepoints fire; perf's `major-faults`/`minor-faults`
//! software events will feed this analysis once tp reads perf.data); how long a fault took
//! (there is no fault-exit tracepoint); which mapping or file an address belongs to (the
//! file holds no `/proc/PID/maps`: trace-cmd's PROCMAPS option, which tp record does not
//! write yet); user-space symbols and call paths (stacks come with the perf door).

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::fmt::Write as _;

use super::timeline::{Ev, IntField, Timeline};
use super::{json_str, Select};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub select: Select,
    /// Rows in each table (all tasks in JSON; addresses up to this many there too).
    #[arg(long, default_value = "10")]
    pub top: usize,
    /// Record `exceptions` and `filemap:mm_filemap_fault` while this command runs (with its
    /// children), then report.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

/// x86 page-fault error code bits (arch/x86/include/asm/trap_pf.h).
const PF_PROT: u64 = 1 << 0;
const PF_WRITE: u64 = 1 << 1;
const PF_INSTR: u64 = 1 << 4;

/// Fault counts by kind.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Faults taken in user mode (page_fault_user).
    pub user: u64,
    /// Faults taken in kernel mode (page_fault_kernel), e.g. copying to or from user memory.
    pub kernel: u64,
    pub write: u64,
    pub instr: u64,
    /// Protection faults (the page was present: copy-on-write, write to read-only...).
    pub prot: u64,
}

impl Counts {
    pub fn total(&self) -> u64 {
        self.user + self.kernel
    }

    fn add(&mut self, kernel: bool, error_code: u64) {
        if kernel {
            self.kernel += 1;
        } else {
            self.user += 1;
        }
        self.write += (error_code & PF_WRITE != 0) as u64;
        self.instr += (error_code & PF_INSTR != 0) as u64;
        self.prot += (error_code & PF_PROT != 0) as u64;
    }
}

/// The faults summary, fed one fault at a time.
#[derive(Debug, Default)]
pub struct Stats {
    pub total: Counts,
    pub tasks: BTreeMap<i32, Counts>,
    /// Faulting pages (address rounded down to 4 KiB), with (user, kernel) counts.
    pub pages: HashMap<u64, (u64, u64)>,
    /// Faulting instruction addresses, with whether they are kernel addresses.
    pub ips: HashMap<(u64, bool), u64>,
    /// Faults through the page cache per file: (device, inode) -> count.
    pub files: BTreeMap<(u64, u64), u64>,
}

impl Stats {
    pub fn fault(&mut self, pid: i32, kernel: bool, address: u64, ip: u64, error_code: u64) {
        self.total.add(kernel, error_code);
        self.tasks.entry(pid).or_default().add(kernel, error_code);
        let p = self.pages.entry(address & !0xfff).or_default();
        if kernel {
            p.1 += 1;
        } else {
            p.0 += 1;
        }
        // page_fault_kernel's ip is in the kernel; page_fault_user's in user space.
        *self.ips.entry((ip, kernel)).or_default() += 1;
    }

    pub fn filemap(&mut self, dev: u64, ino: u64) {
        *self.files.entry((dev, ino)).or_default() += 1;
    }

    /// The `n` entries with the highest counts (ties: lowest key first).
    fn top<K: Ord + Copy>(map: impl Iterator<Item = (K, u64)>, n: usize) -> Vec<(K, u64)> {
        let mut v: Vec<_> = map.collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v.truncate(n);
        v
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Other,
    Fault { kernel: bool, address: IntField, ip: IntField, error: IntField },
    Filemap { dev: IntField, ino: IntField },
}

pub fn run(mut args: Args) -> anyhow::Result<i32> {
    let events =
        ["exceptions:page_fault_user", "exceptions:page_fault_kernel", "filemap:mm_filemap_fault"];
    if let Some((_dir, status)) =
        super::record_given_command(&events, &mut args.command, &mut args.select.input)?
    {
        run(args)?;
        return Ok(status);
    }
    let tl = Timeline::open(&args.select.input)?;
    let be = tl.big_endian;
    let mut kinds: Vec<Kind> = vec![Kind::Other; u16::MAX as usize + 1];
    let mut missing = Vec::new();
    for (name, kernel) in [("page_fault_user", false), ("page_fault_kernel", true)] {
        let fault = tl.event("exceptions", name).and_then(|f| {
            let kind = Kind::Fault {
                kernel,
                address: IntField::of(f, "address", be)?,
                ip: IntField::of(f, "ip", be)?,
                error: IntField::of(f, "error_code", be)?,
            };
            Some((u16::try_from(f.id).ok()?, kind))
        });
        match fault {
            Some((id, k)) => kinds[id as usize] = k,
            None => missing.push(format!("exceptions:{name} (record with -e exceptions)")),
        }
    }
    if missing.len() == 2 {
        anyhow::bail!(
            "{} has no exceptions:page_fault_user/page_fault_kernel events: record with -e exceptions (nothing to analyse)",
            tl.input()
        );
    }
    let filemap = tl.event("filemap", "mm_filemap_fault").and_then(|f| {
        let kind = Kind::Filemap {
            dev: IntField::of(f, "s_dev", be)?,
            ino: IntField::of(f, "i_ino", be)?,
        };
        Some((u16::try_from(f.id).ok()?, kind))
    });
    match filemap {
        Some((id, k)) => kinds[id as usize] = k,
        None => missing.push("filemap:mm_filemap_fault: faults per file are unknown".into()),
    }
    missing.push("major/minor, fault duration, mappings (/proc/PID/maps), user symbols and stacks: not in a trace.dat of tracepoints".into());
    let select = &args.select;
    let filter = select.filters_tasks();
    let mut wanted: HashMap<i32, bool> = HashMap::new();
    let mut stats = Stats::default();
    let cov = tl.run(select, |ev| {
        let Ev::Event(e) = ev else { return };
        let kind = kinds[e.id as usize];
        if matches!(kind, Kind::Other) {
            return;
        }
        if filter
            && !*wanted.entry(e.pid).or_insert_with(|| select.wants_task(e.pid, tl.comm(e.pid)))
        {
            return;
        }
        match kind {
            Kind::Fault { kernel, address, ip, error } => stats.fault(
                e.pid,
                kernel,
                address.get(e.data) as u64,
                ip.get(e.data) as u64,
                error.get(e.data) as u64,
            ),
            Kind::Filemap { dev, ino } => {
                stats.filemap(dev.get(e.data) as u64, ino.get(e.data) as u64)
            }
            Kind::Other => {}
        }
    })?;
    let mut out = String::new();
    if select.json {
        write_json(&mut out, &stats, &tl, &cov, &missing, args.top);
    } else {
        write_text(&mut out, &stats, &tl, args.top);
        tl.write_coverage(&mut out, &cov, &missing);
    }
    super::print(&out)?;
    Ok(if cov.errors.is_empty() { 0 } else { 1 })
}

/// `0x7f..` or `sym+0x12` for a kernel address the file's kallsyms knows.
fn ip_name(tl: &Timeline, ip: u64, kernel: bool) -> String {
    if kernel {
        if let Some(r) = tl.kallsyms().resolve(ip) {
            return format!("{}+{:#x}", r.name, r.offset);
        }
    }
    format!("{ip:#x}")
}

/// `dev=M:m` as the kernel prints it (`MAJOR`/`MINOR` of a kernel dev_t: 12/20 bits).
fn dev_name(dev: u64) -> String {
    format!("{}:{}", dev >> 20, dev & ((1 << 20) - 1))
}

fn write_text(out: &mut String, stats: &Stats, tl: &Timeline, top: usize) {
    let head = |out: &mut String, first: &str| {
        let _ = writeln!(
            out,
            "{first:<26} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
            "faults", "user", "kernel", "write", "exec", "prot"
        );
    };
    let row = |out: &mut String, label: &str, c: &Counts| {
        let _ = writeln!(
            out,
            "{label:<26} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
            c.total(),
            c.user,
            c.kernel,
            c.write,
            c.instr,
            c.prot
        );
    };
    head(out, "task");
    let tasks = Stats::top(stats.tasks.iter().map(|(p, c)| (*p, c.total())), usize::MAX);
    for (pid, _) in tasks.iter().take(top) {
        row(out, &format!("{}:{}", tl.comm(*pid), pid), &stats.tasks[pid]);
    }
    if tasks.len() > top {
        let _ = writeln!(out, "({} more tasks; --top N or --json)", tasks.len() - top);
    }
    row(out, "total", &stats.total);
    let _ = writeln!(
        out,
        "(user/kernel: the mode the fault was taken in; write/exec/prot: the error code's bits, prot = the page was present)"
    );
    let _ = writeln!(out, "\nmost faulted pages:");
    for (page, n) in Stats::top(stats.pages.iter().map(|(p, (u, k))| (*p, u + k)), top) {
        let (u, k) = stats.pages[&page];
        let _ = writeln!(out, "  {page:#018x} {n:>9}  (user {u}, kernel {k})");
    }
    let _ = writeln!(out, "\nmost faulting instructions:");
    for ((ip, kernel), n) in Stats::top(stats.ips.iter().map(|(k, n)| (*k, *n)), top) {
        let _ = writeln!(
            out,
            "  {:<40} {n:>9}  {}",
            ip_name(tl, ip, kernel),
            if kernel { "kernel" } else { "user" }
        );
    }
    if !stats.files.is_empty() {
        let _ = writeln!(out, "\nfaults through the page cache (filemap_fault) per file:");
        for ((dev, ino), n) in Stats::top(stats.files.iter().map(|(k, n)| (*k, *n)), top) {
            let _ = writeln!(out, "  dev {} inode {ino:<12} {n:>9}", dev_name(dev));
        }
    }
}

fn write_json(
    out: &mut String,
    stats: &Stats,
    tl: &Timeline,
    cov: &super::timeline::Coverage,
    missing: &[String],
    top: usize,
) {
    let counts = |out: &mut String, c: &Counts| {
        let _ = write!(
            out,
            "\"faults\":{},\"user\":{},\"kernel\":{},\"write\":{},\"exec\":{},\"prot\":{}",
            c.total(),
            c.user,
            c.kernel,
            c.write,
            c.instr,
            c.prot
        );
    };
    out.push_str("{\"total\":{");
    counts(out, &stats.total);
    out.push_str("},\"tasks\":[");
    for (i, (pid, c)) in stats.tasks.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{{\"pid\":{pid},\"comm\":");
        json_str(out, tl.comm(*pid));
        out.push(',');
        counts(out, c);
        out.push('}');
    }
    out.push_str("],\"pages\":[");
    for (i, (page, n)) in
        Stats::top(stats.pages.iter().map(|(p, (u, k))| (*p, u + k)), top).into_iter().enumerate()
    {
        if i > 0 {
            out.push(',');
        }
        let (u, k) = stats.pages[&page];
        let _ = write!(out, "{{\"page\":{page},\"faults\":{n},\"user\":{u},\"kernel\":{k}}}");
    }
    out.push_str("],\"ips\":[");
    for (i, ((ip, kernel), n)) in
        Stats::top(stats.ips.iter().map(|(k, n)| (*k, *n)), top).into_iter().enumerate()
    {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{{\"ip\":{ip},\"kernel\":{kernel},\"name\":");
        json_str(out, &ip_name(tl, ip, kernel));
        let _ = write!(out, ",\"faults\":{n}}}");
    }
    out.push_str("],\"files\":[");
    for (i, ((dev, ino), n)) in stats.files.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{{\"dev\":");
        json_str(out, &dev_name(*dev));
        let _ = write!(out, ",\"inode\":{ino},\"faults\":{n}}}");
    }
    out.push_str("],");
    tl.json_coverage(out, cov, missing);
    out.push_str("}\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_task_kind_page_and_ip() {
        let mut s = Stats::default();
        s.fault(1, false, 0x1000_0010, 0x400000, PF_WRITE); // write, not present
        s.fault(1, false, 0x1000_0ff0, 0x400000, PF_WRITE | PF_PROT); // copy-on-write
        s.fault(1, false, 0x2000_0000, 0x2000_0000, PF_INSTR);
        s.fault(2, true, 0x1000_0000, 0xffff_ffff_8100_0000, PF_WRITE);
        s.filemap(8 << 20 | 1, 42);
        let c = s.tasks[&1];
        assert_eq!((c.user, c.kernel, c.write, c.instr, c.prot), (3, 0, 2, 1, 1));
        assert_eq!(s.total.total(), 4);
        assert_eq!(s.pages[&0x1000_0000], (2, 1));
        assert_eq!(
            Stats::top(s.ips.iter().map(|(k, n)| (*k, *n)), 1),
            vec![((0x400000, false), 2)]
        );
        assert_eq!(dev_name(8 << 20 | 1), "8:1");
        assert_eq!(s.files[&(8 << 20 | 1, 42)], 1);
    }
}
