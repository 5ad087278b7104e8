//! Who and where this process runs, the Windows side: `%COMPUTERNAME%`, `%USERNAME%`,
//! `%USERPROFILE%`, and `%LOCALAPPDATA%\vigil` for the state.

use std::path::PathBuf;

fn absolute(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute())
}

/// The host's name: `%COMPUTERNAME%`, else `$HOSTNAME`, else empty.
pub(crate) fn host_name() -> String {
    std::env::var("COMPUTERNAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

/// The user's name: `%USERNAME%`, else `$USER`.
pub(crate) fn user_name() -> String {
    std::env::var("USERNAME")
        .or_else(|_| std::env::var("USER"))
        .unwrap_or_else(|_| "unknown user".to_string())
}

/// The user's profile directory, the home Windows programs use.
pub(crate) fn passwd_home() -> Option<PathBuf> {
    absolute("USERPROFILE")
}

/// The user's home directory: the profile (`%USERPROFILE%`, which Claude Code's and Rust's own
/// home are, whatever `HOME` says), else an absolute `HOME`.
pub(crate) fn home() -> Option<PathBuf> {
    passwd_home().or_else(|| absolute("HOME"))
}

/// Where vigil keeps its state with no `%VIGIL_STATE_HOME%`: `%LOCALAPPDATA%\vigil`, which is
/// the user's alone and does not roam.
pub(crate) fn default_state_home() -> Option<PathBuf> {
    absolute("LOCALAPPDATA")
        .map(|dir| dir.join("vigil"))
        .or_else(|| passwd_home().map(|home| home.join("AppData").join("Local").join("vigil")))
}
