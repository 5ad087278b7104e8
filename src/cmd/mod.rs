//! The top layer: what each binary does, from its command line to its exit code. A binary in
//! `src/bin/` is one call into its module here (`stop-gate` into `stop_gate`); each parses its
//! flags, prints its help, and does its work through the layers below.

pub mod marker_writer;
pub mod promise_matcher;
pub mod session_end_handoff;
pub mod session_start_loader;
pub mod settings_merge;
pub mod stop_gate;
