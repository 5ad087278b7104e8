//! vigil: hooks for Claude Code and Codex that turn "the agent says it is done" into evidence.
//!
//! The binaries in `src/bin/` are thin doors, one call each into [`cmd`]; everything they do
//! lives in this library, one concern per module. `SPEC.md` of the project is the contract they
//! implement.
//!
//! # The map
//!
//! The library is in layers, lowest first. A module imports only from its own layer or the
//! layers below it, never upward, so there is no import cycle (`DEVELOPMENT.md` shows how to
//! check). `error` and `exit`, the vocabulary, are used by every layer.
//!
//! | layer | what it holds | SPEC |
//! |---|---|---|
//! | [`sys`] | the platform: atomic writes, safe reads, locks, records, processes, time, digests, paths, git discovery | P6 |
//! | [`cli`] | a binary's door: flag values, input, hook JSON, output | §2 |
//! | [`verdict`] | declaration versus mention, terminal output, tokens, defanging | §3 |
//! | [`transcript`] | the last assistant message, token usage | §2 |
//! | [`state`] | the project, the protected state, sessions, the Ralph loop | §4, §9 |
//! | [`reach`] | what the agent's code can reach: confinement, the file-tool guard, the sandbox | §9 |
//! | [`evidence`] | subjects, markers, signatures, git notes, snapshots | §5 |
//! | [`handoff`] | what one session leaves for the next, and the briefing it reads | §6, §7 |
//! | [`gate`] | the Stop hook's decision: the loop, the check command, the markers, the budget | §4 |
//! | [`install`] | settings merge, `--protect`, planted code, Codex trust, the doctor | §8, §9 |
//! | [`cmd`] | each binary's work: its flags, its help, its commands | §2 |
//! | [`fuzzing`] | what each fuzz target checks, replayed by the tests | P1 |

// Only what a binary, a test or a fuzz target names is `pub`; the rest is `pub(crate)`, and the
// lint keeps it so (issue 42).
#![warn(unreachable_pub)]

// One layer per group, lowest first (rustfmt keeps the order of groups).
pub mod exit;

pub(crate) mod error;

pub mod sys;

pub mod cli;

pub mod verdict;

pub mod transcript;

pub mod state;

pub(crate) mod reach;

pub mod evidence;

pub mod handoff;

pub(crate) mod gate;

pub mod install;

pub mod cmd;

pub mod fuzzing;

#[cfg(test)]
mod layers;

pub use error::{Error, Result};
pub use exit::Exit;
