//! Who and where this process runs: the host's name, the user's name, the user's home and where
//! vigil keeps its state by default. The system's side is the platform's `user` module.

/// `home`: the user's home directory, the one the engines read `~/.claude` and `~/.codex` in,
/// found as each system finds it.
pub(crate) use crate::sys::platform::user::{
    default_state_home, home, host_name, passwd_home, user_name,
};
