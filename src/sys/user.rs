//! Who and where this process runs: the host's name, the user's name, the user's home and where
//! vigil keeps its state by default. The system's side is the platform's `user` module.

use std::path::PathBuf;

pub use crate::sys::platform::user::{default_state_home, host_name, passwd_home, user_name};

/// The user's home directory, the one the engines read `~/.claude` and `~/.codex` in: on Unix
/// `$HOME` when it is absolute, else the passwd entry's; on Windows the profile
/// (`%USERPROFILE%`, which Claude Code's and Rust's own home are, whatever `HOME` says), else an
/// absolute `HOME`.
pub fn home() -> Option<PathBuf> {
    let set = || {
        std::env::var_os("HOME")
            .map(PathBuf::from)
            .filter(|home| home.is_absolute())
    };
    if cfg!(windows) {
        crate::sys::platform::user::system_home().or_else(set)
    } else {
        set().or_else(crate::sys::platform::user::system_home)
    }
}
