//! The bottom layer: the platform, and the small tools every layer above shares. Every system
//! call vigil makes, every `libc` item and every `std::os` extension is here, behind the small
//! interfaces below, so a second platform is added here and nowhere else (`layers` checks it).
//! Nothing here imports from another layer of vigil. The system's side of each concern is in
//! `unix/` or `windows/`, chosen once below; the rest of `sys` is the same on both.
//!
//! - `atomic`: the one atomic write (temp file, sync, rename) every writer uses (SPEC P6).
//! - `files`: opening files the agent may have planted (no FIFO waits, no unexpected links,
//!   always a size cap), private directories, permissions, a name's stat in a directory.
//! - `lock`: an exclusive lock on a sidecar file.
//! - `record`: a record rewritten on every Stop with one sync.
//! - `process`: a child with a deadline, its tree (process group, Job Object) killed on
//!   timeout; a clean environment; what a child inherits; signals.
//! - `watchdog`: a process's last word, at a deadline or on a panic.
//! - `user`: the host's and the user's names, the user's home, the state home's default.
//! - `time`: RFC 3339 timestamps, durations, deadlines.
//! - `digest`: sha256 in hex, canonical JSON.
//! - `paths`: paths compared by what they name; names as the system spells them in bytes.
//! - `programs`: the programs vigil starts of its own accord (git, sh), found in the system's
//!   places, and the PATH they get: never an entry the agent can fill.
//! - `git`: the repository that holds a directory, found from the files alone; git run with
//!   settings the repository cannot override, and (`git::sealed`) git in a repository vigil
//!   owns, sealed off from its caller's environment.

// The platform: one module per concern, with the same names on each side (`fs`, `replace`,
// `process`, `alarm`, `user`). Nothing outside `sys` uses them directly.
#[cfg(unix)]
#[path = "unix/mod.rs"]
mod platform;
#[cfg(windows)]
#[path = "windows/mod.rs"]
mod platform;

pub mod atomic;
pub mod digest;
pub mod files;
pub(crate) mod git;
pub(crate) mod lock;
pub(crate) mod paths;
pub mod process;
pub(crate) mod programs;
pub mod record;
pub mod time;
pub(crate) mod user;
pub(crate) mod watchdog;
