//! The kernel's `trace` text layout: header block and per-event context columns.
