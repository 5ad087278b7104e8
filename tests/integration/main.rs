//! One test binary for every CLI test (as `just` does): the binaries driven as Claude Code, Codex,
//! CI and a person drive them, one module per part of SPEC.md, each file opening with the rule it
//! covers. The project, loop, Stop and command builders they share are in `tests/support/`.
//!
//! - §2 and §3: `promise_matcher/`, `commonmark.rs`, `properties.rs`, `hostile.rs`, `help.rs`
//! - §4 (stop-gate): `stop_gate/`, its limits in `stop_gate/limits/`
//! - §5 (marker-writer): `marker_writer/`, `worktree/` (the subject), `notes/` (markers that
//!   travel), `signing.rs`
//! - §6 and §7 (the handoff): `handoff/`, `by_stat.rs`
//! - §8 (the installer): `installer/`, `plugin/`, `release.rs`; stop-gate's flag table: `flags.rs`
//! - §9 (tamper resistance): `protected/`, `planted.rs`, and the §9 files of the folders above
//! - §10 (wakes): `wakes.rs`
//! - P6 (nothing is lost): `faults.rs`
//! - the spec's citations, and its copy in the repository: `spec.rs`
//! - the test command itself: `test_command.rs`

mod by_stat;
mod commonmark;
mod faults;
mod flags;
mod fuzz_regressions;
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
mod spec;
mod stop_gate;
#[path = "../support/mod.rs"]
mod support;
mod test_command;
mod wakes;
mod worktree;
