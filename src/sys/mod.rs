//! The bottom layer: what touches the operating system, and the small tools every layer above
//! shares. Nothing here imports from another layer of vigil; a second platform is added here
//! and nowhere else.
//!
//! - `atomic`: the one atomic write (temp file, sync, rename) every writer uses (SPEC P6).
//! - `files`: opening files the agent may have planted: no FIFO waits, no unexpected links,
//!   always a size cap.
//! - `lock`: an exclusive lock on a sidecar file.
//! - `record`: a record rewritten on every Stop with one sync.
//! - `process`: a child with a deadline, its process group killed on timeout; a clean
//!   environment.
//! - `time`: RFC 3339 timestamps, durations, deadlines.
//! - `digest`: sha256 in hex, canonical JSON.
//! - `paths`: paths compared by what they name.
//! - `git`: the repository that holds a directory, found from the files alone.

pub mod atomic;
pub mod digest;
pub mod files;
pub mod git;
pub mod lock;
pub mod paths;
pub mod process;
pub mod record;
pub mod time;
