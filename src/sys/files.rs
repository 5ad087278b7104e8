//! Opening and reading files the agent may have planted: never blocking on a FIFO, never
//! following a link where one is not expected, never reading more than a cap.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::error::{Error, Result};

/// Whether standard input is a terminal: a hook run by hand, not by an engine.
pub fn stdin_is_terminal() -> bool {
    // SAFETY: isatty only inspects the descriptor.
    unsafe { libc::isatty(libc::STDIN_FILENO) == 1 }
}

/// Opens a file that must be a regular file, without ever blocking: a FIFO or device planted
/// where a transcript or a state file should be is refused, not waited on.
pub fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    open_file(path, libc::O_NONBLOCK)
}

/// Opens one of vigil's own state files: a regular file, and never through a symlink (a link
/// there was planted, and reading through it would trust whatever it points at; a dangling
/// one must not read as "no state").
pub fn open_state(path: &Path) -> std::io::Result<std::fs::File> {
    open_file(path, libc::O_NONBLOCK | libc::O_NOFOLLOW)
}

fn open_file(path: &Path, flags: i32) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok(file)
}

/// Why `open_beneath` refused a path.
#[derive(Debug)]
pub enum Beneath {
    /// `..`, an absolute path, or nothing to open.
    Outside,
    /// A component of the path is a symlink.
    Symlink,
    /// Not a regular file, or one with other hard links (which may be outside).
    NotPlain,
    Io(std::io::Error),
}

/// Opens `relative` beneath the directory `top`, one component at a time from `top`'s own
/// descriptor and never through a symlink, so that a directory swapped for a link while it is
/// opened cannot send the read outside `top`. The file must be a regular file with one link,
/// and is opened without blocking.
pub fn open_beneath(top: &Path, relative: &Path) -> std::result::Result<std::fs::File, Beneath> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    use std::path::Component;
    let mut names = Vec::new();
    for component in relative.components() {
        match component {
            Component::Normal(name) => names.push(name),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(Beneath::Outside);
            }
        }
    }
    let Some((last, dirs)) = names.split_last() else {
        return Err(Beneath::Outside);
    };
    let mut dir = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY)
        .open(top)
        .map_err(Beneath::Io)?;
    let open_at = |dir: &std::fs::File, name: &std::ffi::OsStr, flags: libc::c_int| {
        let name = std::ffi::CString::new(name.as_encoded_bytes()).map_err(|_| Beneath::Outside)?;
        open_at(dir, &name, flags | libc::O_NOFOLLOW | libc::O_CLOEXEC).map_err(|e| {
            if !matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)) {
                return Beneath::Io(e);
            }
            // A link refused by O_NOFOLLOW (ELOOP, or ENOTDIR where a directory was asked
            // for), or a file where a directory should be.
            // SAFETY: a zeroed stat buffer filled by fstatat on the same name.
            let is_link = unsafe {
                let mut stat: libc::stat = std::mem::zeroed();
                libc::fstatat(
                    dir.as_raw_fd(),
                    name.as_ptr(),
                    &mut stat,
                    libc::AT_SYMLINK_NOFOLLOW,
                ) == 0
                    && stat.st_mode & libc::S_IFMT == libc::S_IFLNK
            };
            if is_link {
                Beneath::Symlink
            } else {
                Beneath::NotPlain
            }
        })
    };
    for name in dirs {
        let next = open_at(&dir, name, libc::O_RDONLY | libc::O_DIRECTORY)?;
        dir = next;
    }
    let file = open_at(&dir, last, libc::O_RDONLY | libc::O_NONBLOCK)?;
    let meta = file.metadata().map_err(Beneath::Io)?;
    if !meta.is_file() || meta.nlink() != 1 {
        return Err(Beneath::NotPlain);
    }
    Ok(file)
}

/// `openat` with exactly `flags`: a name in an open directory, opened without looking its path
/// up again (the worktree walk, and `open_beneath`).
pub(crate) fn open_at(
    dir: &std::fs::File,
    name: &std::ffi::CStr,
    flags: libc::c_int,
) -> std::io::Result<std::fs::File> {
    use std::os::fd::{AsRawFd, FromRawFd};
    // SAFETY: a valid directory descriptor and a NUL-terminated name; the descriptor returned
    // is owned by the `File` from here on.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is owned by nobody else.
    Ok(unsafe { std::fs::File::from_raw_fd(fd) })
}

/// Reads at most `cap` bytes; one more byte makes the input too large.
pub fn read_capped(reader: impl Read, cap: u64, what: &str, path: &Path) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    reader
        .take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io("read", path, &e))?;
    if bytes.len() as u64 > cap {
        return Err(Error::input(format!(
            "{what} is larger than {}; refusing to read it",
            human_bytes(cap)
        )));
    }
    Ok(bytes)
}

/// `16 MiB`, `64 KiB`, `12 bytes`.
pub fn human_bytes(n: u64) -> String {
    const KIB: u64 = 1024;
    const MIB: u64 = 1024 * 1024;
    if n >= MIB && n.is_multiple_of(MIB) {
        format!("{} MiB", n / MIB)
    } else if n >= KIB && n.is_multiple_of(KIB) {
        format!("{} KiB", n / KIB)
    } else {
        format!("{n} bytes")
    }
}

/// Text that must be UTF-8, with the offset of the first bad byte in the error.
pub fn utf8(bytes: Vec<u8>, what: &str) -> Result<String> {
    String::from_utf8(bytes).map_err(|e| {
        Error::input(format!(
            "{what} is not valid UTF-8 (bad byte at offset {})",
            e.utf8_error().valid_up_to()
        ))
    })
}

/// A regular file's bytes, at most `cap` of them (more is an error), opened never waiting on a
/// FIFO and, unless `follow`, never through a symlink. `None` when there is no such file.
pub fn read_regular(path: &Path, cap: u64, follow: bool) -> std::io::Result<Option<Vec<u8>>> {
    let flags = libc::O_NONBLOCK | libc::O_CLOEXEC | if follow { 0 } else { libc::O_NOFOLLOW };
    let file = match File::options().read(true).custom_flags(flags).open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("it is not a regular file"));
    }
    if meta.len() > cap {
        return Err(std::io::Error::other(format!(
            "it is {} bytes, over the {cap} read",
            meta.len()
        )));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(cap + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(std::io::Error::other(format!(
            "it grew past the {cap} read"
        )));
    }
    Ok(Some(bytes))
}
