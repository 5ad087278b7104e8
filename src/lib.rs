//! vigil: hooks for Claude Code and Codex that turn "the agent says it is done" into evidence.
//!
//! The binaries in `src/bin/` are thin doors; everything they do lives in these modules, one
//! concern each. `../SPEC.md` of the project is the contract they implement.

pub mod atomic;
pub mod briefing;
pub mod budget;
pub mod check;
pub mod cli;
pub mod codex;
pub mod confine;
pub mod contract;
pub mod defang;
pub mod digest;
pub mod error;
pub mod exclude;
pub mod exit;
pub mod finding;
pub mod fs;
pub mod gate;
pub mod gateflags;
pub mod git;
pub mod guard;
pub mod handoff;
pub mod hook;
pub mod input;
pub mod lock;
pub mod loop_state;
pub mod loops;
pub mod markdown;
pub mod marker;
pub mod notes;
pub mod output;
pub mod paths;
pub mod payload;
pub mod planted;
pub mod process;
pub mod promise;
pub mod protect;
pub mod protected;
pub mod reach;
pub mod record;
pub mod repo;
pub mod sandbox;
pub mod session;
pub mod settings;
pub mod signing;
pub mod slash;
pub mod snapshot;
pub mod state;
pub mod subject;
pub mod terminal;
pub mod time;
pub mod token;
pub mod transcript;
pub mod usage;

pub use error::{Error, Result};
pub use exit::Exit;
