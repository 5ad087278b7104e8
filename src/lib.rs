//! vigil: hooks for Claude Code and Codex that turn "the agent says it is done" into evidence.
//!
//! The binaries in `src/bin/` are thin doors; everything they do lives in these modules, one
//! concern each. `../SPEC.md` of the project is the contract they implement.

pub mod defang;
pub mod error;
pub mod exit;
pub mod hook;
pub mod input;
pub mod output;
pub mod promise;
pub mod terminal;
pub mod token;
pub mod transcript;

pub use error::{Error, Result};
pub use exit::Exit;
