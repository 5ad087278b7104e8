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
    let file = open_with(path, flags)?;
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

/// Makes `dir` and its missing parents, owner only (0700).
pub fn make_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Whether this process may write `path` (with `search`, also enter it: create files in a
/// directory), as the system would decide for it.
pub fn can_write(path: &Path, search: bool) -> std::io::Result<()> {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    let mode = if search {
        libc::W_OK | libc::X_OK
    } else {
        libc::W_OK
    };
    // SAFETY: access(2) reads the NUL-terminated path and nothing else.
    if unsafe { libc::access(c.as_ptr(), mode) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Permissions of `mode` (`0o600`), for a file about to be made.
pub fn permissions(mode: u32) -> std::fs::Permissions {
    use std::os::unix::fs::PermissionsExt;
    std::fs::Permissions::from_mode(mode)
}

/// Whether `path` is a regular file (through links) whose mode lets anyone run it.
pub fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Where `sh` finds `program` (a name without a slash) on this process's PATH: the first
/// directory that holds it executable.
pub fn find_on_path(program: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
}

/// A file's identity, whatever its name: its device and inode.
pub fn identity(meta: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (meta.dev(), meta.ino())
}

/// Standard input as a file of its own (a duplicate of the descriptor).
pub fn stdin_file() -> std::io::Result<File> {
    use std::os::fd::AsFd;
    Ok(File::from(std::io::stdin().as_fd().try_clone_to_owned()?))
}

/// What [`stat_at`] sees of a name in a directory.
pub struct StatAt {
    pub regular: bool,
    pub owner_may_execute: bool,
    /// Seconds and nanoseconds.
    pub mtime: (i64, i64),
    pub ctime: (i64, i64),
    pub dev: u64,
    pub ino: u64,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
}

/// `fstatat` of a name in an open directory, not following a symlink.
pub fn stat_at(dir: &File, name: &std::ffi::CStr) -> Option<StatAt> {
    use std::os::fd::AsRawFd;
    let mut stat = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: a valid directory descriptor, a NUL-terminated name, and room for the answer,
    // which is read only when the call succeeded.
    let done = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            stat.as_mut_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if done != 0 {
        return None;
    }
    // SAFETY: fstatat filled it.
    let stat = unsafe { stat.assume_init() };
    Some(StatAt {
        regular: stat.st_mode & libc::S_IFMT == libc::S_IFREG,
        owner_may_execute: stat.st_mode & 0o100 != 0,
        mtime: (stat.st_mtime, stat.st_mtime_nsec),
        ctime: (stat.st_ctime, stat.st_ctime_nsec),
        dev: stat.st_dev,
        ino: stat.st_ino,
        uid: stat.st_uid,
        gid: stat.st_gid,
        size: stat.st_size as u64,
    })
}

/// Whether a file's owner may execute it (git's `core.fileMode`).
pub fn owner_may_execute(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o100 != 0
}

/// Files read for a subject are opened never following a link, and never waiting on a FIFO
/// put in their place.
const NO_FOLLOW: libc::c_int =
    libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC;

/// Opens a file to read, never through a symlink and never waiting on a FIFO (whatever it is:
/// [`open_state`] also refuses what is not a regular file).
pub fn open_no_follow(path: &Path) -> std::io::Result<File> {
    open_with(path, libc::O_NOFOLLOW | libc::O_NONBLOCK)
}

/// Opens `path` to read with `flags` added (std adds `O_CLOEXEC`).
fn open_with(path: &Path, flags: libc::c_int) -> std::io::Result<File> {
    File::options().read(true).custom_flags(flags).open(path)
}

/// A file of an open directory, by name, without looking its path up again: never through a
/// symlink, never waiting on a FIFO.
pub fn open_at_no_follow(dir: &File, name: &std::ffi::CStr) -> std::io::Result<File> {
    open_at(dir, name, NO_FOLLOW)
}

/// Opens a directory, never through a symlink.
pub fn open_dir_no_follow(path: &Path) -> std::io::Result<File> {
    open_with(path, libc::O_DIRECTORY | libc::O_NOFOLLOW)
}

/// `readlinkat`: a symlink's target, by name in an open directory.
pub fn readlink_at(dir: &File, name: &std::ffi::CStr) -> std::io::Result<Vec<u8>> {
    use std::os::fd::AsRawFd;
    let mut buffer = vec![0u8; libc::PATH_MAX as usize + 1];
    // SAFETY: a valid directory descriptor, a NUL-terminated name and a buffer of the length
    // given.
    let n = unsafe {
        libc::readlinkat(
            dir.as_raw_fd(),
            name.as_ptr(),
            buffer.as_mut_ptr().cast(),
            buffer.len(),
        )
    };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    buffer.truncate(n as usize);
    Ok(buffer)
}

/// Creates a file that must not exist yet, with `mode`, to write.
pub fn create_new(path: &Path, mode: u32) -> std::io::Result<File> {
    File::options()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
}

/// Makes `link` a symlink to `target`.
pub fn symlink(target: &std::ffi::OsStr, link: &Path) -> std::io::Result<()> {
    std::os::unix::fs::symlink(target, link)
}
