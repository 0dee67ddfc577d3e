//! Counters: one perf event opened on one task or CPU, read with time_enabled/time_running
//! so a multiplexed count can be scaled; groups; a [`CounterSet`] for counting many events
//! over many tasks or CPUs at once (what `tp stat` does).

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use perf_event_open_sys::bindings::{self as b, perf_event_attr};

use crate::error::{Error, Result};
use crate::events::Event;
use crate::sys;

/// Where a counter counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// One thread (and, with `inherit`, the tasks it creates later), on any CPU.
    Thread(i32),
    /// Every task on one CPU (needs CAP_PERFMON or perf_event_paranoid <= 0).
    Cpu(u32),
    /// One thread (and with `inherit` its children) while it runs on one CPU: how a
    /// recording gets one ring per CPU for a command.
    ThreadOnCpu(i32, u32),
}

impl Target {
    fn pid_cpu(self) -> (i32, i32) {
        match self {
            Target::Thread(t) => (t, -1),
            Target::Cpu(c) => (-1, c as i32),
            Target::ThreadOnCpu(t, c) => (t, c as i32),
        }
    }
}

/// Sampling: what each sample carries and how often one is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sampling {
    /// PERF_SAMPLE_* bits.
    pub sample_type: u64,
    /// A sample every `period` events, or (`freq`) about `period` samples a second.
    pub period: u64,
    pub freq: bool,
    /// A clock for the samples' time (CLOCK_MONOTONIC shares tracefs' `mono` timeline).
    pub clockid: Option<i32>,
    /// COMM/MMAP2/FORK/EXIT side records (put on one event of each ring).
    pub side_records: bool,
    /// With the side records: data (non-executable) mappings too, e.g. to tell which file or
    /// mapping a faulting address is in.
    pub mmap_data: bool,
    /// Wake the reader after this many bytes are in the ring.
    pub watermark: u32,
    /// Call stacks on each sample (none by default).
    pub stacks: Stacks,
}

/// What each sample carries of its call stack: the kernel's walk (PERF_SAMPLE_CALLCHAIN:
/// kernel frames, then user frames by frame pointers) and/or the user registers and a copy
/// of the top of the user stack (PERF_SAMPLE_REGS_USER | STACK_USER) for unwinding offline.
/// The sample_type bits follow from these fields ([`attr_for`] sets them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stacks {
    /// PERF_SAMPLE_CALLCHAIN of at most this many frames (`sample_max_stack`; the kernel
    /// refuses more than `kernel.perf_event_max_stack`); 0: no callchain.
    pub max_stack: u16,
    /// Leave the kernel's / the user's part out of the callchain
    /// (`exclude_callchain_kernel` / `exclude_callchain_user`).
    pub exclude_kernel: bool,
    pub exclude_user: bool,
    /// PERF_SAMPLE_REGS_USER with this register mask (0: none).
    pub regs_user: u64,
    /// PERF_SAMPLE_STACK_USER: copy this many bytes from the user stack pointer up (a
    /// multiple of 8; 0: none).
    pub stack_user: u32,
}

impl Stacks {
    /// The registers perf copies for DWARF unwinding on x86-64 (`PERF_REG_X86_*`: ax..flags,
    /// cs, ss, r8..r15; not ds/es/fs/gs).
    pub const X86_64_REGS: u64 = 0xff0fff;

    /// The PERF_SAMPLE_* bits these stacks need.
    pub fn sample_type(&self) -> u64 {
        let mut t = 0;
        if self.max_stack > 0 {
            t |= b::PERF_SAMPLE_CALLCHAIN as u64;
        }
        if self.regs_user != 0 {
            t |= b::PERF_SAMPLE_REGS_USER as u64;
        }
        if self.stack_user > 0 {
            t |= b::PERF_SAMPLE_STACK_USER as u64;
        }
        t
    }
}

/// How to open a counter.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CounterOptions {
    /// Count the tasks the target creates after the open, too.
    pub inherit: bool,
    /// Start disabled and enable at the target's next exec (a command counted from its first
    /// instruction; tp's own set-up not counted).
    pub enable_on_exec: bool,
    /// Start disabled (enable with [`Counter::enable`]).
    pub disabled: bool,
    /// Read the whole group through the leader (PERF_FORMAT_GROUP).
    pub read_group: bool,
    pub sampling: Option<Sampling>,
}

/// The perf_event_attr for an event (pure; what [`Counter::open`] passes to the kernel).
pub fn attr_for(ev: &Event, o: &CounterOptions) -> perf_event_attr {
    let mut a = perf_event_attr {
        type_: ev.type_,
        config: ev.config,
        read_format: (b::PERF_FORMAT_TOTAL_TIME_ENABLED | b::PERF_FORMAT_TOTAL_TIME_RUNNING) as u64,
        ..Default::default()
    };
    if o.read_group {
        a.read_format |= (b::PERF_FORMAT_GROUP | b::PERF_FORMAT_ID) as u64;
    }
    if let Some((addr, len, access)) = ev.bp {
        a.bp_type = access;
        a.bp_addr = addr;
        a.bp_len = len;
        // As perf does: a breakpoint "samples" every hit; counting ignores it.
        a.sample_period = 1;
    }
    a.set_exclude_user(ev.modifiers.exclude_user as u64);
    a.set_exclude_kernel(ev.modifiers.exclude_kernel as u64);
    a.set_exclude_hv(ev.modifiers.exclude_kernel as u64);
    a.set_inherit(o.inherit as u64);
    a.set_disabled((o.disabled || o.enable_on_exec) as u64);
    a.set_enable_on_exec(o.enable_on_exec as u64);
    if let Some(s) = o.sampling {
        a.sample_type = s.sample_type | s.stacks.sample_type();
        a.sample_max_stack = s.stacks.max_stack;
        a.set_exclude_callchain_kernel(s.stacks.exclude_kernel as u64);
        a.set_exclude_callchain_user(s.stacks.exclude_user as u64);
        a.sample_regs_user = s.stacks.regs_user;
        a.sample_stack_user = s.stacks.stack_user;
        if s.freq {
            a.set_freq(1);
            a.sample_freq = s.period;
        } else {
            a.sample_period = s.period;
        }
        if let Some(c) = s.clockid {
            a.set_use_clockid(1);
            a.clockid = c;
        }
        a.set_sample_id_all(1);
        if s.side_records {
            a.set_mmap(1);
            a.set_mmap2(1);
            a.set_comm(1);
            a.set_comm_exec(1);
            a.set_task(1);
            a.set_mmap_data(s.mmap_data as u64);
        }
        if s.watermark > 0 {
            a.set_watermark(1);
            a.wakeup_watermark = s.watermark;
        } else {
            a.wakeup_events = 1;
        }
    }
    a
}

/// The attr as perf.data stores it (the kernel's struct, read back by tp-format).
pub fn file_attr(ev: &Event, o: &CounterOptions) -> tp_format::perfdata::EventAttr {
    let mut a = attr_for(ev, o);
    a.size = std::mem::size_of::<perf_event_attr>() as u32;
    // SAFETY: perf_event_attr is a plain repr(C) struct of integers (bindgen checks its
    // layout has no padding); viewing its bytes is sound.
    let bytes = unsafe {
        std::slice::from_raw_parts(
            (&a as *const perf_event_attr).cast::<u8>(),
            std::mem::size_of::<perf_event_attr>(),
        )
    };
    tp_format::perfdata::EventAttr::parse(bytes)
}

/// One value as read(2) returns it with TOTAL_TIME_ENABLED|RUNNING.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reading {
    pub value: u64,
    /// Nanoseconds the event was enabled / actually counting (less when multiplexed).
    pub enabled: u64,
    pub running: u64,
}

impl Reading {
    /// The value scaled to the time enabled (perf stat's estimate for a multiplexed event).
    pub fn scaled(&self) -> f64 {
        if self.running == 0 || self.running >= self.enabled {
            self.value as f64
        } else {
            self.value as f64 * self.enabled as f64 / self.running as f64
        }
    }
    /// Fraction of the enabled time the event was counting (1.0: not multiplexed).
    pub fn running_fraction(&self) -> f64 {
        if self.enabled == 0 {
            1.0
        } else {
            (self.running as f64 / self.enabled as f64).min(1.0)
        }
    }
    /// Sum of readings of one event over threads or CPUs.
    pub fn add(&mut self, o: &Reading) {
        self.value += o.value;
        self.enabled += o.enabled;
        self.running += o.running;
    }
    /// The difference since `earlier` (interval counts).
    pub fn since(&self, earlier: &Reading) -> Reading {
        Reading {
            value: self.value.wrapping_sub(earlier.value),
            enabled: self.enabled.saturating_sub(earlier.enabled),
            running: self.running.saturating_sub(earlier.running),
        }
    }
}

/// Parse a PERF_FORMAT_GROUP|ID|TOTAL_TIME_ENABLED|TOTAL_TIME_RUNNING read:
/// `nr, enabled, running, {value, id} * nr` -> (id, reading) per member.
pub fn parse_group_read(words: &[u64]) -> Option<Vec<(u64, Reading)>> {
    let (&nr, rest) = words.split_first()?;
    let (&enabled, rest) = rest.split_first()?;
    let (&running, rest) = rest.split_first()?;
    let nr = usize::try_from(nr).ok()?;
    if rest.len() < nr.checked_mul(2)? {
        return None;
    }
    Some(
        rest.chunks_exact(2)
            .take(nr)
            .map(|p| (p[1], Reading { value: p[0], enabled, running }))
            .collect(),
    )
}

/// An open perf event.
#[derive(Debug)]
pub struct Counter {
    fd: OwnedFd,
    name: String,
    read_group: bool,
}

impl Counter {
    /// perf_event_open for `ev` on `target`; `group`: the leader to join.
    pub fn open(
        ev: &Event,
        target: Target,
        o: &CounterOptions,
        group: Option<&Counter>,
    ) -> Result<Counter> {
        let mut attr = attr_for(ev, o);
        let (pid, cpu) = target.pid_cpu();
        let ctx = sys::OpenCtx {
            event: &ev.name,
            hardware: ev.is_hardware(),
            system_wide: pid == -1,
            pid,
        };
        let fd = sys::perf_event_open(&mut attr, pid, cpu, group.map(|g| g.fd.as_raw_fd()), &ctx)?;
        Ok(Counter { fd, name: ev.name.clone(), read_group: o.read_group })
    }

    /// The event's name as given.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The kernel's id of this event (what samples and group reads carry).
    pub fn id(&self) -> Result<u64> {
        sys::event_id(&self.fd, &self.name)
    }

    pub fn enable(&self) -> Result<()> {
        sys::ioctl(&self.fd, sys::Ioctl::Enable, false, &self.name)
    }
    pub fn disable(&self) -> Result<()> {
        sys::ioctl(&self.fd, sys::Ioctl::Disable, false, &self.name)
    }
    pub fn reset(&self) -> Result<()> {
        sys::ioctl(&self.fd, sys::Ioctl::Reset, false, &self.name)
    }
    /// Enable/disable a whole group through its leader.
    pub fn enable_group(&self) -> Result<()> {
        sys::ioctl(&self.fd, sys::Ioctl::Enable, true, &self.name)
    }
    pub fn disable_group(&self) -> Result<()> {
        sys::ioctl(&self.fd, sys::Ioctl::Disable, true, &self.name)
    }

    /// Send this event's records into `target`'s ring (PERF_EVENT_IOC_SET_OUTPUT; same
    /// CPU), so one ring per CPU carries every event.
    pub fn set_output(&self, target: &Counter) -> Result<()> {
        sys::set_output(&self.fd, &target.fd, &self.name)
    }

    /// Run the BPF program `prog` on each of this event's hits (PERF_EVENT_IOC_SET_BPF); the
    /// program stays attached until this counter's fd is closed.
    pub fn set_bpf(&self, prog: BorrowedFd<'_>) -> Result<()> {
        sys::set_bpf(&self.fd, prog.as_raw_fd(), &self.name)
    }

    /// The current count (not for a leader opened with `read_group`).
    pub fn read(&self) -> Result<Reading> {
        let mut w = [0u64; 3];
        let n = sys::read_counter(&self.fd, &mut w, &self.name)?;
        if n < 3 || self.read_group {
            return Err(self.short_read(n));
        }
        Ok(Reading { value: w[0], enabled: w[1], running: w[2] })
    }

    /// Every member's count, read at once through the leader (opened with `read_group`).
    pub fn read_group(&self, members: usize) -> Result<Vec<(u64, Reading)>> {
        let mut w = vec![0u64; 3 + 2 * members];
        let n = sys::read_counter(&self.fd, &mut w, &self.name)?;
        parse_group_read(&w[..n]).ok_or_else(|| self.short_read(n))
    }

    fn short_read(&self, n: usize) -> Error {
        Error::Sys {
            call: "read",
            event: self.name.clone(),
            source: std::io::Error::new(std::io::ErrorKind::UnexpectedEof, format!("{n} words")),
        }
    }

    pub(crate) fn fd(&self) -> &OwnedFd {
        &self.fd
    }
}

impl AsFd for Counter {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// One event counted on several targets; `None` when the machine does not support it.
#[derive(Debug)]
pub struct EventCounters {
    pub event: Event,
    pub counters: Option<Vec<Counter>>,
    /// Why it is not supported (for `--verbose` style messages).
    pub unsupported: Option<String>,
    /// In a group: the index of its leader in [`CounterSet::events`] (its own for the
    /// leader); the group is read at once through the leader (PERF_FORMAT_GROUP).
    pub leader: Option<usize>,
}

impl EventCounters {
    /// The sum over targets, `None` for `<not supported>`.
    pub fn read(&self) -> Result<Option<Reading>> {
        let Some(cs) = &self.counters else { return Ok(None) };
        let mut sum = Reading::default();
        for c in cs {
            sum.add(&c.read()?);
        }
        Ok(Some(sum))
    }
}

/// Many events over many targets (each event opened separately on each target, as perf stat
/// does; events in a group are opened as one group per target, read through its leader).
#[derive(Debug)]
pub struct CounterSet {
    pub events: Vec<EventCounters>,
}

impl CounterSet {
    /// Open every event on every target. An event the machine lacks (no PMU) is kept as
    /// `<not supported>`; any other failure is an error (nothing stays open).
    pub fn open(events: &[Event], targets: &[Target], o: &CounterOptions) -> Result<CounterSet> {
        CounterSet::open_groups(events, &[], targets, o)
    }

    /// As [`CounterSet::open`], `events[g]` for each range `g` of `groups` opened as a group
    /// (perf's `{a,b}`: its first event leads, the others join it, all scheduled onto the
    /// PMU together and read together with PERF_FORMAT_GROUP). A member the machine lacks
    /// is `<not supported>`, the others still count as a group.
    pub fn open_groups(
        events: &[Event],
        groups: &[std::ops::Range<usize>],
        targets: &[Target],
        o: &CounterOptions,
    ) -> Result<CounterSet> {
        let mut out: Vec<EventCounters> = Vec::new();
        for (i, ev) in events.iter().enumerate() {
            let mut ev = ev.clone();
            let mut cs = Vec::new();
            let mut unsupported = None;
            let group = groups.iter().find(|g| g.contains(&i));
            // A member joins its leader when the leader could be opened.
            let leader = group
                .map(|g| g.start)
                .filter(|&l| l == i || out[l].counters.is_some() && out[l].leader == Some(l));
            let member = leader.is_some_and(|l| l != i);
            // Members are enabled with their leader, as perf opens them: one enabled
            // apart while the leader is off did not count here.
            let o = CounterOptions {
                read_group: leader.is_some(),
                disabled: o.disabled && !member,
                enable_on_exec: o.enable_on_exec && !member,
                ..*o
            };
            for (k, &t) in targets.iter().enumerate() {
                let lead = leader.filter(|&l| l != i).and_then(|l| out[l].counters.as_ref());
                let lead = lead.map(|cs| &cs[k]);
                let opened = match Counter::open(&ev, t, &o, lead) {
                    // As perf does: where perf_event_paranoid forbids counting the kernel's
                    // share for this user, count user space only and say so (`cs:u`).
                    Err(Error::Permission { .. }) if user_only_may_work(&ev, t) => {
                        ev.modifiers.exclude_kernel = true;
                        ev.name.push_str(":u");
                        Counter::open(&ev, t, &o, lead)
                    }
                    r => r,
                };
                match opened {
                    Ok(c) => cs.push(c),
                    Err(e) if e.is_not_supported() => {
                        unsupported = Some(e.to_string());
                        break;
                    }
                    Err(e) => return Err(e),
                }
            }
            let counters = if unsupported.is_some() { None } else { Some(cs) };
            let leader = leader.filter(|_| counters.is_some());
            out.push(EventCounters { event: ev, counters, unsupported, leader });
        }
        Ok(CounterSet { events: out })
    }

    fn each(&self, f: impl Fn(&Counter) -> Result<()>) -> Result<()> {
        for e in &self.events {
            for c in e.counters.iter().flatten() {
                f(c)?;
            }
        }
        Ok(())
    }

    pub fn enable(&self) -> Result<()> {
        self.each(Counter::enable)
    }
    pub fn disable(&self) -> Result<()> {
        self.each(Counter::disable)
    }

    /// Every event's sum, in order (`None`: not supported). A group's events are read at
    /// once through their leader on each target.
    pub fn read(&self) -> Result<Vec<Option<Reading>>> {
        let mut out = Vec::with_capacity(self.events.len());
        for e in &self.events {
            out.push(if e.leader.is_some() { Some(Reading::default()) } else { e.read()? });
        }
        for (l, e) in self.events.iter().enumerate() {
            if e.leader == Some(l) {
                self.read_group(l, &mut out)?;
            }
        }
        Ok(out)
    }

    /// Add the group led by `events[l]` into `out`: each member's sum over the targets,
    /// found in each target's group read by its id.
    fn read_group(&self, l: usize, out: &mut [Option<Reading>]) -> Result<()> {
        let members: Vec<usize> =
            (l..self.events.len()).filter(|&j| self.events[j].leader == Some(l)).collect();
        let Some(leads) = &self.events[l].counters else { return Ok(()) };
        for (k, lead) in leads.iter().enumerate() {
            let values = lead.read_group(members.len())?;
            for &j in &members {
                let Some(c) = self.events[j].counters.as_ref().map(|cs| &cs[k]) else { continue };
                let id = c.id()?;
                if let (Some((_, r)), Some(sum)) =
                    (values.iter().find(|(v, _)| *v == id), out[j].as_mut())
                {
                    sum.add(r);
                }
            }
        }
        Ok(())
    }
}

/// A refused per-task event without modifiers, not a tracepoint (whose kernel share is
/// the whole point): retried for user space only.
fn user_only_may_work(ev: &Event, t: Target) -> bool {
    matches!(t, Target::Thread(_))
        && ev.modifiers == crate::events::Modifiers::default()
        && !matches!(ev.class, crate::events::Class::Tracepoint)
}

/// Can this machine count `ev` (for this process)? False only for `<not supported>`:
/// another refusal (permissions) says nothing about the PMU.
pub fn supported(ev: &Event) -> bool {
    let o = CounterOptions { disabled: true, ..Default::default() };
    !matches!(Counter::open(ev, Target::Thread(0), &o, None), Err(e) if e.is_not_supported())
}

/// The online CPUs (`/sys/devices/system/cpu/online`).
pub fn online_cpus() -> Result<Vec<u32>> {
    sys::online_cpus()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attr_has_what_counting_needs() {
        let ev = Event::symbolic("major-faults:u").unwrap();
        let o = CounterOptions { inherit: true, enable_on_exec: true, ..Default::default() };
        let a = attr_for(&ev, &o);
        assert_eq!(
            (a.type_, a.config),
            (b::PERF_TYPE_SOFTWARE, b::PERF_COUNT_SW_PAGE_FAULTS_MAJ as u64)
        );
        assert_eq!(a.inherit(), 1);
        assert_eq!(a.disabled(), 1, "enable_on_exec needs the event disabled until exec");
        assert_eq!(a.enable_on_exec(), 1);
        assert_eq!(a.exclude_kernel(), 1);
        assert_eq!(a.exclude_user(), 0);
        assert_eq!(a.read_format, 3);
    }

    #[test]
    fn attr_for_sampling_on_the_mono_clock() {
        let ev = Event::symbolic("cpu-clock").unwrap();
        let s = Sampling {
            sample_type: (b::PERF_SAMPLE_TID | b::PERF_SAMPLE_TIME) as u64,
            period: 997,
            freq: true,
            clockid: Some(libc::CLOCK_MONOTONIC),
            side_records: true,
            mmap_data: false,
            watermark: 0,
            stacks: Stacks::default(),
        };
        let a = attr_for(&ev, &CounterOptions { sampling: Some(s), ..Default::default() });
        assert_eq!(
            (a.freq(), a.sample_freq, a.use_clockid(), a.clockid),
            (1, 997, 1, libc::CLOCK_MONOTONIC)
        );
        assert_eq!((a.sample_id_all(), a.mmap2(), a.comm(), a.task()), (1, 1, 1, 1));
        assert_eq!((a.sample_max_stack, a.sample_regs_user, a.sample_stack_user), (0, 0, 0));
    }

    #[test]
    fn attr_for_stacks() {
        let ev = Event::symbolic("cpu-clock").unwrap();
        let stacks = Stacks {
            max_stack: 127,
            exclude_kernel: false,
            exclude_user: true,
            regs_user: Stacks::X86_64_REGS,
            stack_user: 8192,
        };
        let s = Sampling {
            sample_type: b::PERF_SAMPLE_TID as u64,
            period: 1,
            freq: false,
            clockid: None,
            side_records: false,
            mmap_data: false,
            watermark: 0,
            stacks,
        };
        let a = attr_for(&ev, &CounterOptions { sampling: Some(s), ..Default::default() });
        let want = b::PERF_SAMPLE_TID
            | b::PERF_SAMPLE_CALLCHAIN
            | b::PERF_SAMPLE_REGS_USER
            | b::PERF_SAMPLE_STACK_USER;
        assert_eq!(a.sample_type, want as u64);
        assert_eq!(
            (a.sample_max_stack, a.sample_regs_user, a.sample_stack_user),
            (127, 0xff0fff, 8192)
        );
        assert_eq!((a.exclude_callchain_kernel(), a.exclude_callchain_user()), (0, 1));
    }

    #[test]
    fn scaling_and_group_reads() {
        let r = Reading { value: 100, enabled: 2000, running: 500 };
        assert_eq!(r.scaled(), 400.0);
        assert_eq!(r.running_fraction(), 0.25);
        let full = Reading { value: 7, enabled: 10, running: 10 };
        assert_eq!(full.scaled(), 7.0);
        let g = parse_group_read(&[2, 100, 50, 11, 1001, 22, 1002]).unwrap();
        assert_eq!(
            g,
            vec![
                (1001, Reading { value: 11, enabled: 100, running: 50 }),
                (1002, Reading { value: 22, enabled: 100, running: 50 }),
            ]
        );
        assert!(parse_group_read(&[3, 1, 1, 5, 6]).is_none());
        assert!(parse_group_read(&[]).is_none());
    }
}
