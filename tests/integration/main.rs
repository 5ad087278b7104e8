//! One test binary for every CLI test (as `just` does): modules per binary, shared support.

mod by_stat;
mod commonmark;
mod faults;
mod handoff;
mod help;
mod hostile;
mod installer;
mod marker_writer;
mod notes;
mod planted;
mod plugin;
mod promise_matcher;
mod properties;
mod protected;
mod release;
mod signing;
mod stop_gate;
#[path = "../support/mod.rs"]
mod support;
mod worktree;
