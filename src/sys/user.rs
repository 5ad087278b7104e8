//! Who and where this process runs: the host's name, the user's name, the user's home and where
//! vigil keeps its state by default. The system's side is the platform's `user` module.

use std::path::PathBuf;

pub use crate::sys::platform::user::{default_state_home, host_name, passwd_home, user_name};

/// The user's home directory: `$HOME` when it is absolute (Git Bash sets it on Windows too),
/// else where the system keeps it (`%USERPROFILE%` on Windows).
pub fn home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|home| home.is_absolute())
        .or_else(crate::sys::platform::user::system_home)
}
