//! Who and where this process runs: the host's name, the user's name, the user's home and where
//! vigil keeps its state by default. The system's side is the platform's `user` module.

/// `home`: the user's home directory, the one the engines read `~/.claude` and `~/.codex` in,
/// found as each system finds it.
pub(crate) use crate::sys::platform::user::{
    default_state_home, home, host_name, passwd_home, user_name,
};

/// Whether `dir` is the user's home (compared as the system names them): the "project" of the
/// user's own settings, which no walk of a project's files may take for one.
pub(crate) fn is_home(dir: &std::path::Path) -> bool {
    home().is_some_and(|home| {
        crate::sys::paths::canonical(&home) == crate::sys::paths::canonical(dir)
    })
}
