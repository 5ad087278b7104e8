//! Who and where this process runs, the Unix side: the host's name, the user's name, the
//! password database's home, and the XDG state directory.

use std::path::PathBuf;

use crate::sys::paths;

/// The host's name: the kernel's, else `$HOSTNAME`, else empty.
pub(crate) fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

/// The user's name: `$USER`, else `$LOGNAME`, else `uid N`.
pub(crate) fn user_name() -> String {
    std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        // SAFETY: getuid cannot fail and touches no memory.
        .unwrap_or_else(|_| format!("uid {}", unsafe { libc::getuid() }))
}

/// The user's home directory as the password database has it.
pub(crate) fn passwd_home() -> Option<PathBuf> {
    let mut buffer = vec![0 as libc::c_char; 16 * 1024];
    let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: getpwuid_r writes only into `entry` and `buffer`, whose sizes it is given, and
    // sets `found` to `&entry` or null.
    let status = unsafe {
        libc::getpwuid_r(
            libc::getuid(),
            &mut entry,
            buffer.as_mut_ptr(),
            buffer.len(),
            &mut found,
        )
    };
    if status != 0 || found.is_null() || entry.pw_dir.is_null() {
        return None;
    }
    // SAFETY: pw_dir points into `buffer`, NUL-terminated by getpwuid_r.
    let dir = unsafe { std::ffi::CStr::from_ptr(entry.pw_dir) };
    Some(paths::from_bytes(dir.to_bytes()))
}

/// The variable `name` when it is an absolute path.
fn absolute(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute())
}

/// The user's home directory: `$HOME` when it is absolute, else the password database's.
pub(crate) fn home() -> Option<PathBuf> {
    absolute("HOME").or_else(passwd_home)
}

/// Where vigil keeps its state with no `$VIGIL_STATE_HOME`: `$XDG_STATE_HOME/vigil`, else
/// `~/.local/state/vigil` (a relative value is ignored, as the XDG rules say).
pub(crate) fn default_state_home() -> Option<PathBuf> {
    absolute("XDG_STATE_HOME")
        .map(|dir| dir.join("vigil"))
        .or_else(|| absolute("HOME").map(|dir| dir.join(".local/state/vigil")))
}
