//! A recording in another tool's format: [`perfetto`] (a trace.dat or perf.data's events as
//! Perfetto's protobuf trace, ui.perfetto.dev), [`firefox`] (a perf.data's samples as the
//! Firefox Profiler's processed profile, profiler.firefox.com).

pub mod firefox;
pub mod perfetto;
mod proto;
