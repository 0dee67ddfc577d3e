//! A perf.data's samples and their stacks as the Firefox Profiler's processed profile
//! (profiler.firefox.com opens it serialized as JSON: File > Load), built with
//! `fxprof-processed-profile`. One process per pid and one thread per tid, named as the
//! file names them; each sample at its time with its stack, functions named by tp (kernel
//! frames in the Kernel category, user ones in User), the CPU time of cpu-clock and
//! task-clock samples (their period, ns) as the sample's CPU delta.

use std::collections::HashMap;

use fxprof_processed_profile::{
    CategoryColor, CpuDelta, Frame, FrameFlags, FrameInfo, Profile, ReferenceTimestamp,
    SamplingInterval, ThreadHandle, Timestamp,
};
use tp_format::perfdata::{Error, PerfData};
use tp_symbols::{walk, Options, Symbols};

/// The profile and what went into it.
pub struct Firefox {
    pub profile: Profile,
    pub samples: u64,
    pub threads: usize,
    pub processes: usize,
    /// Records that could not be read (the ones after them were).
    pub errors: Vec<Error>,
    /// What the symbolizer could not find (kernel symbols, files), each said once.
    pub notes: Vec<String>,
}

/// The profile of every sample of `data`, titled `title`.
pub fn profile<R: std::io::Read + std::io::Seek>(
    data: &PerfData<R>,
    title: &str,
) -> Result<Firefox, Error> {
    let first = data.features.sample_time.map(|t| t.0);
    // The profile's zero: the wall-clock time of the first sample when the file says how
    // its clock relates to the wall clock (CLOCK_DATA), else the epoch.
    let reference = match (data.features.clock_data, first) {
        (Some(c), Some(f)) => {
            let wall = c.tod_ns as i128 + (f as i128 - c.clockid_ns as i128);
            ReferenceTimestamp::from_millis_since_unix_epoch(wall as f64 / 1e6)
        }
        _ => ReferenceTimestamp::from_millis_since_unix_epoch(0.0),
    };
    let freq = data
        .attrs
        .iter()
        .find(|a| a.attr.flags & tp_format::perfdata::attr::flag::FREQ != 0)
        .map(|a| a.attr.sample_period);
    let interval = match freq {
        Some(hz) if hz > 0 => SamplingInterval::from_hz(hz as f32),
        _ => SamplingInterval::from_millis(1),
    };
    let mut profile = Profile::new(title, reference, interval);
    profile.set_symbolicated(true);
    let kernel_cat = profile.add_category("Kernel", CategoryColor::Orange).into();
    let user_cat = profile.add_category("User", CategoryColor::Yellow).into();
    // CPU time per sample: the period of the clock events (nanoseconds).
    let clock: Vec<bool> = data
        .attrs
        .iter()
        .map(|a| matches!(a.name.as_deref(), Some("cpu-clock" | "task-clock")))
        .collect();
    let mut syms =
        Symbols::new(&data.attrs, &data.features, Options { srcline: false, inline: true });
    let mut processes = HashMap::new();
    let mut threads: HashMap<u32, ThreadHandle> = HashMap::new();
    let mut samples = 0u64;
    let errors = walk(
        data,
        &mut syms,
        |_, _| true,
        |w| {
            let s = w.sample;
            let pid = s.pid.unwrap_or(0);
            let tid = s.tid.unwrap_or(pid);
            let t = s.time.unwrap_or(0);
            let at = Timestamp::from_nanos_since_reference(t.saturating_sub(first.unwrap_or(t)));
            let comm = w.comm.map(str::to_string).unwrap_or_else(|| format!(":{tid}"));
            let process =
                *processes.entry(pid).or_insert_with(|| profile.add_process(&comm, pid, at));
            let thread = *threads.entry(tid).or_insert_with(|| {
                let th = profile.add_thread(process, tid, at, tid == pid);
                profile.set_thread_name(th, &comm);
                th
            });
            let mut infos = Vec::with_capacity(w.frames.len());
            for f in w.frames.iter().rev() {
                let cat = if &*f.sym.dso == "[kernel.kallsyms]" { kernel_cat } else { user_cat };
                for n in f.outer_first() {
                    let label = match n {
                        Some(n) => n.to_string(),
                        None => format!("{:#x} ({})", f.ip, f.sym.dso),
                    };
                    let frame = Frame::Label(profile.intern_string(&label));
                    infos.push(FrameInfo { frame, category_pair: cat, flags: FrameFlags::empty() });
                }
            }
            let stack = profile.intern_stack_frames(thread, infos.into_iter());
            let cpu = match (clock.get(w.event), s.period) {
                (Some(true), Some(p)) => CpuDelta::from_nanos(p),
                _ => CpuDelta::ZERO,
            };
            profile.add_sample(thread, at, stack, cpu, 1);
            samples += 1;
        },
    )?;
    let (threads, processes) = (threads.len(), processes.len());
    Ok(Firefox { profile, samples, threads, processes, errors, notes: syms.notes })
}
