//! One test binary for every CLI test (as `just` does): modules per binary, shared support.

mod by_stat;
mod commonmark;
mod faults;
mod flags;
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
mod serve;
mod signing;
mod stop_gate;
mod support;
mod worktree;
