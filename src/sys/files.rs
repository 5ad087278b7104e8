//! Opening and reading files the agent may have planted: never blocking on a FIFO, never
//! following a link where one is not expected, never reading more than a cap. The system's
//! side of each is in the platform's `fs` module.

use std::fs::File;
use std::io::{IsTerminal, Read};
use std::path::Path;

use crate::error::{Error, Result};
use crate::sys::platform::fs as os;

pub use os::symlink;
pub(crate) use os::{
    MODES_ON_DISK, NTFS_NAMES, being_removed, can_write, change_time, create_new, identity, inode,
    make_private_dir, open_at_no_follow, owner_may_execute, program_name, readlink_at, reset_dir,
    same_file, set_mode, stamps_every_write, stat_at, stat_of, stdin_file,
};

/// Whether standard input is a terminal: a hook run by hand, not by an engine.
pub(crate) fn stdin_is_terminal() -> bool {
    std::io::stdin().is_terminal()
}

/// Opens a file that must be a regular file, without ever blocking: a FIFO or device planted
/// where a transcript or a state file should be is refused, not waited on.
pub fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    regular(os::open_read(path, true)?)
}

/// Opens one of vigil's own state files: a regular file, and never through a symlink (a link
/// there was planted, and reading through it would trust whatever it points at; a dangling
/// one must not read as "no state").
pub fn open_state(path: &Path) -> std::io::Result<std::fs::File> {
    regular(os::open_read(path, false)?)
}

fn regular(file: File) -> std::io::Result<File> {
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
pub(crate) enum Beneath {
    /// `..`, an absolute path, or nothing to open.
    Outside,
    /// A component of the path is a symlink.
    Symlink,
    /// Not a regular file, or one with other hard links (which may be outside).
    NotPlain,
    Io(std::io::Error),
}

/// Why the platform's `open_at` refused a name.
#[derive(Debug)]
pub(crate) enum AtError {
    /// The name is a symlink (or, on Windows, any reparse point: a junction too).
    Link,
    /// A file where a directory was asked for, or not a file at all.
    NotPlain,
    Io(std::io::Error),
}

/// Opens `relative` beneath the directory `top`, one component at a time from `top`'s own
/// handle and never through a symlink, so that a directory swapped for a link while it is
/// opened cannot send the read outside `top`. The file must be a regular file with one link,
/// and is opened without blocking.
pub(crate) fn open_beneath(
    top: &Path,
    relative: &Path,
) -> std::result::Result<std::fs::File, Beneath> {
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
    let at = |e| match e {
        AtError::Link => Beneath::Symlink,
        AtError::NotPlain => Beneath::NotPlain,
        AtError::Io(e) => Beneath::Io(e),
    };
    let mut dir = os::open_dir(top, true).map_err(Beneath::Io)?;
    for name in dirs {
        dir = os::open_at(&dir, name, true).map_err(at)?;
    }
    let file = os::open_at(&dir, last, false).map_err(at)?;
    let meta = file.metadata().map_err(Beneath::Io)?;
    if !meta.is_file() || os::links(&file).map_err(Beneath::Io)? != 1 {
        return Err(Beneath::NotPlain);
    }
    Ok(file)
}

/// Reads at most `cap` bytes; one more byte makes the input too large.
pub(crate) fn read_capped(reader: impl Read, cap: u64, what: &str, path: &Path) -> Result<Vec<u8>> {
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
pub(crate) fn human_bytes(n: u64) -> String {
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
pub(crate) fn utf8(bytes: Vec<u8>, what: &str) -> Result<String> {
    String::from_utf8(bytes).map_err(|e| {
        Error::input(format!(
            "{what} is not valid UTF-8 (bad byte at offset {})",
            e.utf8_error().valid_up_to()
        ))
    })
}

/// A regular file's bytes, at most `cap` of them (more is an error), opened never waiting on a
/// FIFO and, unless `follow`, never through a symlink. `None` when there is no such file.
pub(crate) fn read_regular(
    path: &Path,
    cap: u64,
    follow: bool,
) -> std::io::Result<Option<Vec<u8>>> {
    let file = match os::open_read(path, follow) {
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

/// Whether `path` is a regular file (through links) that the system would run: its mode lets
/// anyone run it (Unix), or it has a name that runs (Windows: `.exe`, `.cmd`, ...).
pub(crate) fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && os::is_executable(path, &m))
}

/// Where the shell finds `program` (a name without a slash) on this process's PATH: the first
/// directory that holds it executable, under any of the names the system tries.
pub(crate) fn find_on_path(program: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    let names = os::program_names(program);
    std::env::split_paths(&path)
        .flat_map(|dir| names.iter().map(move |name| dir.join(name)))
        .find(|candidate| is_executable(candidate))
}

/// What [`stat_at`] sees of a name in a directory.
pub(crate) struct StatAt {
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

/// Whether the regular file at `path` (not followed) has other names, hard links that may be
/// anywhere on its file system: a write to it lands in all of them. `false` when it is not
/// there or cannot be opened.
pub(crate) fn has_other_names(path: &Path) -> bool {
    os::open_read(path, false)
        .ok()
        .filter(|file| file.metadata().is_ok_and(|m| m.is_file()))
        .and_then(|file| os::links(&file).ok())
        .is_some_and(|links| links > 1)
}

/// Opens a file to read, never through a symlink and never waiting on a FIFO (whatever it is:
/// [`open_state`] also refuses what is not a regular file).
pub(crate) fn open_no_follow(path: &Path) -> std::io::Result<File> {
    os::open_read(path, false)
}

/// Opens a directory, never through a symlink.
pub(crate) fn open_dir_no_follow(path: &Path) -> std::io::Result<File> {
    os::open_dir(path, false)
}

/// Opens a file to write in place (or creates it, with `create`), never through a symlink,
/// never waiting on a FIFO, never truncating: a lock, a record's slot.
pub(crate) fn open_write_no_follow(path: &Path, create: bool) -> std::io::Result<File> {
    os::open_write(path, create)
}

/// The permission bits of a file (`0o644`); on Windows, 0o644, or 0o444 when read-only.
pub(crate) fn mode(meta: &std::fs::Metadata) -> u32 {
    os::mode(meta)
}
