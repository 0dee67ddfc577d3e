//! trace-cmd's `trace.dat`, versions 6 and 7.
