//! The platform layer on Windows: `windows-sys` and `std::os::windows`.
//!
//! What Windows lacks is said where it matters: no process groups or signals (a Job Object
//! holds a child's tree, and kills it at a deadline or when vigil ends), no `openat` (a
//! directory's handle is held open without delete sharing, so it cannot be renamed or removed
//! while a name in it is opened), no file size limit for a child, no executable bit (a program
//! is a name with an extension in `%PATHEXT%`), and no sandbox for a check.

pub(super) mod alarm;
pub(super) mod fs;
pub(super) mod process;
pub(super) mod replace;
pub(super) mod user;

/// The last error of the calling thread as an `io::Error`, for a call that returned failure.
fn last_error() -> std::io::Error {
    std::io::Error::last_os_error()
}
