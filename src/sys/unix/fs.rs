//! Opening files without following links or waiting on a FIFO, directories read by descriptor,
//! permissions and the executable bit, file identity, and names as bytes: the Unix side.

use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, FromRawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::super::files::{AtError, StatAt};

fn c_name(name: &OsStr) -> std::io::Result<CString> {
    CString::new(name.as_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))
}

/// Opens `path` to read without waiting on a FIFO, and unless `follow` never through a symlink.
pub(crate) fn open_read(path: &Path, follow: bool) -> std::io::Result<File> {
    let no_follow = if follow { 0 } else { libc::O_NOFOLLOW };
    File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | no_follow)
        .open(path)
}

/// Opens an existing file to write (or creates it, with `create`), never through a symlink,
/// never waiting on a FIFO, never truncating.
pub(crate) fn open_write(path: &Path, create: bool) -> std::io::Result<File> {
    File::options()
        .write(true)
        .create(create)
        .truncate(false)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
}

/// Opens a directory (to read its entries by name), unless `follow` never through a symlink.
pub(crate) fn open_dir(path: &Path, follow: bool) -> std::io::Result<File> {
    let no_follow = if follow { 0 } else { libc::O_NOFOLLOW };
    File::options()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | no_follow)
        .open(path)
}

/// `openat` with exactly `flags`.
fn openat(dir: &File, name: &OsStr, flags: libc::c_int) -> std::io::Result<File> {
    let name = c_name(name)?;
    // SAFETY: a valid directory descriptor and a NUL-terminated name; the descriptor returned
    // is owned by the `File` from here on.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is owned by nobody else.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// A name in an open directory, opened without looking its path up again and never through a
/// symlink: a directory when `want_dir`, else a file to read without waiting on a FIFO.
pub(crate) fn open_at(dir: &File, name: &OsStr, want_dir: bool) -> Result<File, AtError> {
    let flags = libc::O_RDONLY
        | libc::O_NOFOLLOW
        | if want_dir {
            libc::O_DIRECTORY
        } else {
            libc::O_NONBLOCK
        };
    openat(dir, name, flags).map_err(|e| {
        if !matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)) {
            return AtError::Io(e);
        }
        // A link refused by O_NOFOLLOW (ELOOP, or ENOTDIR where a directory was asked for),
        // or a file where a directory should be.
        if lstat_at(dir, name).is_some_and(|s| s.st_mode & libc::S_IFMT == libc::S_IFLNK) {
            AtError::Link
        } else {
            AtError::NotPlain
        }
    })
}

/// A file of an open directory, by name: never through a symlink, never waiting on a FIFO.
pub(crate) fn open_at_no_follow(dir: &File, name: &OsStr) -> std::io::Result<File> {
    openat(
        dir,
        name,
        libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK,
    )
}

fn lstat_at(dir: &File, name: &OsStr) -> Option<libc::stat> {
    let name = c_name(name).ok()?;
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
    // SAFETY: fstatat filled it.
    (done == 0).then(|| unsafe { stat.assume_init() })
}

/// `fstatat` of a name in an open directory, not following a symlink.
pub(crate) fn stat_at(dir: &File, name: &OsStr) -> Option<StatAt> {
    let stat = lstat_at(dir, name)?;
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

/// What [`stat_at`] sees, of a file already open (`fstat`): its data and its stat data are
/// then of one file, whatever is renamed around it.
pub(crate) fn stat_of(file: &File) -> Option<StatAt> {
    let meta = file.metadata().ok()?;
    Some(StatAt {
        regular: meta.file_type().is_file(),
        owner_may_execute: meta.mode() & 0o100 != 0,
        mtime: (meta.mtime(), meta.mtime_nsec()),
        ctime: (meta.ctime(), meta.ctime_nsec()),
        dev: meta.dev(),
        ino: meta.ino(),
        uid: meta.uid(),
        gid: meta.gid(),
        size: meta.size(),
    })
}

/// Whether the file system at `path` moves a file's change time for every write, a write
/// through a shared memory mapping included (ext4, XFS, Btrfs, by their `page_mkwrite`):
/// tmpfs and others do not, so stat data cannot vouch for a file's bytes there.
#[cfg(target_os = "linux")]
pub(crate) fn stamps_every_write(path: &Path) -> bool {
    const EXT4: u64 = 0xEF53;
    const XFS: u64 = 0x5846_5342;
    const BTRFS: u64 = 0x9123_683E;
    let Ok(c_path) = CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    let mut found = std::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: a NUL-terminated path and room for the answer, read only when the call succeeded.
    if unsafe { libc::statfs(c_path.as_ptr(), found.as_mut_ptr()) } != 0 {
        return false;
    }
    // SAFETY: statfs filled it.
    let kind = unsafe { found.assume_init() }.f_type as u64;
    matches!(kind, EXT4 | XFS | BTRFS)
}

#[cfg(not(target_os = "linux"))]
pub fn stamps_every_write(_: &Path) -> bool {
    false
}

/// `readlinkat`: a symlink's target, by name in an open directory.
pub(crate) fn readlink_at(dir: &File, name: &OsStr) -> std::io::Result<Vec<u8>> {
    let name = c_name(name)?;
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

/// How many names the file has.
pub(crate) fn links(file: &File) -> std::io::Result<u64> {
    Ok(file.metadata()?.nlink())
}

/// A file's identity, whatever its name: its device and inode.
pub(crate) fn identity(file: &File) -> std::io::Result<(u64, u64)> {
    let meta = file.metadata()?;
    Ok((meta.dev(), meta.ino()))
}

/// The inode number of what `meta` describes.
pub(crate) fn inode(meta: &std::fs::Metadata) -> u64 {
    meta.ino()
}

/// Whether `path` names the open `file` itself (not following a link at `path`).
pub(crate) fn same_file(file: &File, path: &Path) -> bool {
    match (file.metadata(), std::fs::symlink_metadata(path)) {
        (Ok(held), Ok(now)) => held.dev() == now.dev() && held.ino() == now.ino(),
        _ => false,
    }
}

/// The permission bits of a file (`0o644`).
pub(crate) fn mode(meta: &std::fs::Metadata) -> u32 {
    meta.permissions().mode() & 0o7777
}

/// Gives an open file the permission bits `mode` (`0o600`).
pub(crate) fn set_mode(file: &File, mode: u32) -> std::io::Result<()> {
    file.set_permissions(std::fs::Permissions::from_mode(mode))
}

/// Gives the directory at `path` (never through a link) the mode `mode` and no ACL: what a
/// check may have set on a directory of its copy (a mode that hides it from the next check or
/// keeps vigil out, a default ACL its new files would inherit) is undone.
pub(crate) fn reset_dir(path: &Path, mode: u32) -> std::io::Result<()> {
    if !std::fs::symlink_metadata(path)?.is_dir() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a directory",
        ));
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "a NUL in the path"))?;
    for name in [c"system.posix_acl_access", c"system.posix_acl_default"] {
        // SAFETY: NUL-terminated path and name.
        if unsafe { libc::lremovexattr(c_path.as_ptr(), name.as_ptr()) } != 0 {
            let e = std::io::Error::last_os_error();
            // No such ACL, or a file system without them: nothing to undo.
            if !matches!(e.raw_os_error(), Some(libc::ENODATA) | Some(libc::ENOTSUP)) {
                return Err(e);
            }
        }
    }
    Ok(())
}

/// Whether a file's mode lets anyone run it.
pub(crate) fn is_executable(_: &Path, meta: &std::fs::Metadata) -> bool {
    meta.permissions().mode() & 0o111 != 0
}

/// Whether files carry an executable bit (git's `core.fileMode`) and links are links
/// (`core.symlinks`): on Unix, both.
pub(crate) const MODES_ON_DISK: bool = true;

/// Whether git guards paths against NTFS's other spellings of a name (`core.protectNTFS`):
/// not by default on Unix.
pub(crate) const NTFS_NAMES: bool = false;

/// Whether a file's owner may execute it (git's `core.fileMode`).
pub(crate) fn owner_may_execute(meta: &std::fs::Metadata) -> bool {
    meta.permissions().mode() & 0o100 != 0
}

/// When the kernel last changed a file's inode (content, mode, links, name): no call sets it
/// to a time of the caller's choosing.
pub(crate) fn change_time(meta: &std::fs::Metadata) -> Option<filetime::FileTime> {
    use std::os::unix::fs::MetadataExt;
    Some(filetime::FileTime::from_unix_time(
        meta.ctime(),
        meta.ctime_nsec() as u32,
    ))
}

/// Whether an open failed because the file's holder is removing it: never on Unix, where a
/// removed name is simply gone.
pub(crate) fn being_removed(_: &std::io::Error) -> bool {
    false
}

/// The program a path or name runs, as the system names programs: the last `/` component.
pub(crate) fn program_name(word: &str) -> String {
    word.rsplit('/').next().unwrap_or(word).to_string()
}

/// The names `sh` would try for `program` in a directory of PATH: the name itself.
pub(crate) fn program_names(program: &str) -> Vec<String> {
    vec![program.to_string()]
}

/// Makes `dir` and its missing parents, owner only (0700).
pub(crate) fn make_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Whether this process may write `path` (with `search`, also enter it: create files in a
/// directory), as the system would decide for it.
pub(crate) fn can_write(path: &Path, search: bool) -> std::io::Result<()> {
    let c = c_name(path.as_os_str())?;
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

/// Creates a file that must not exist yet, with `mode`, to write.
pub(crate) fn create_new(path: &Path, mode: u32) -> std::io::Result<File> {
    File::options()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
}

/// Makes `link` a symlink to `target`.
pub fn symlink(target: &OsStr, link: &Path) -> std::io::Result<()> {
    std::os::unix::fs::symlink(target, link)
}

/// Standard input as a file of its own (a duplicate of the descriptor).
pub(crate) fn stdin_file() -> std::io::Result<File> {
    Ok(File::from(std::io::stdin().as_fd().try_clone_to_owned()?))
}

/// The name or path in `bytes`, as the system spells it: any bytes.
pub(crate) fn os_str(bytes: &[u8]) -> std::borrow::Cow<'_, OsStr> {
    std::borrow::Cow::Borrowed(OsStr::from_bytes(bytes))
}

/// The bytes of a name or path, as the system spells it.
pub(crate) fn bytes(name: &OsStr) -> &[u8] {
    name.as_bytes()
}

/// The bytes of an owned name or path.
pub(crate) fn into_bytes(name: OsString) -> Vec<u8> {
    name.into_vec()
}

/// The most links followed in one path (as the kernel's 40).
pub(crate) const MAX_LINKS: usize = 40;

/// The path with `.` dropped and `..` taken by spelling, as Node's path.resolve does.
pub(crate) fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for component in path.components() {
        match component {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::Normal(name) => out.push(name),
            std::path::Component::RootDir
            | std::path::Component::CurDir
            | std::path::Component::Prefix(_) => {}
        }
    }
    out
}

/// Where a write to `path` lands: each component as the kernel takes it, a link followed to
/// its target, a missing directory as `mkdir -p` would make it. `None` past `MAX_LINKS`.
pub(crate) fn resolve(path: &Path) -> Option<PathBuf> {
    let mut links = 0;
    let mut done = PathBuf::from("/");
    let mut left: Vec<std::ffi::OsString> = path
        .components()
        .rev()
        .filter_map(|c| match c {
            std::path::Component::Normal(name) => Some(name.to_os_string()),
            std::path::Component::ParentDir => Some("..".into()),
            _ => None,
        })
        .collect();
    while let Some(name) = left.pop() {
        if name == ".." {
            done.pop();
            continue;
        }
        let next = done.join(&name);
        match std::fs::symlink_metadata(&next) {
            Ok(meta) if meta.file_type().is_symlink() => {
                links += 1;
                if links > MAX_LINKS {
                    return None;
                }
                let target = std::fs::read_link(&next).ok()?;
                if target.is_absolute() {
                    done = PathBuf::from("/");
                }
                for component in target.components().rev() {
                    match component {
                        std::path::Component::Normal(n) => left.push(n.to_os_string()),
                        std::path::Component::ParentDir => left.push("..".into()),
                        _ => {}
                    }
                }
            }
            _ => done = next,
        }
    }
    Some(done)
}

/// Whether `place` is `dir` or below it: names compared byte for byte, as Unix does.
pub(crate) fn within(place: &Path, dir: &Path) -> bool {
    place.starts_with(dir)
}

/// The temporary directory a sandboxed shell may write: `$TMPDIR`, else `/tmp`.
pub(crate) fn temp_dir() -> PathBuf {
    std::env::var_os("TMPDIR")
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute())
        .unwrap_or_else(|| PathBuf::from("/tmp"))
}
