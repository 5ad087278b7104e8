//! What every test binary shares (as ripgrep's `tests/util.rs`, fd's `tests/testenv/`): the
//! binaries under test as commands, git with a test's author, a [`Project`] builder, loops
//! started through `stop-gate loop start` ([`Loop`]), Stops run through the real gate
//! ([`Stop`]), SessionStart and SessionEnd, fixtures and schemas, and ways to run a process and
//! read what it did, and the assertions made of what it did.
//!
//! Each test binary includes it with `#[path = "../support/mod.rs"] mod support;` and takes
//! what it needs with `use crate::support::*;`.

// Each test binary uses a part of it.
#![allow(dead_code, unused_imports)]

mod assertions;
mod commands;
mod files;
mod git;
mod holds;
mod loops;
mod process;
mod project;
pub mod release;
pub mod serve;
mod sessions;
mod state;
mod stop;
mod strace;

pub use assertions::*;
pub use commands::*;
pub use files::*;
pub use git::*;
pub use holds::*;
pub use loops::*;
pub use process::*;
pub use project::*;
pub use sessions::*;
pub use state::*;
pub use stop::*;
pub use strace::*;
