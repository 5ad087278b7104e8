//! Opening files without following links, directories held open by handle, file identity,
//! permissions and what runs, and names as bytes: the Windows side.
//!
//! A "link" here is any reparse point: a symbolic link, a junction (which needs no privilege
//! to make, so an agent can plant one), or a mount point. Names are compared by the system as
//! it does (case-insensitively on NTFS). A FIFO cannot sit at a path in a project (named pipes
//! live under `\\.\pipe\`), so an open never waits on one.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::os::windows::ffi::OsStringExt;
use std::os::windows::fs::OpenOptionsExt;
use std::os::windows::io::{AsHandle, AsRawHandle};
use std::path::{Path, PathBuf};

use windows_sys::Win32::Storage::FileSystem::{
    BY_HANDLE_FILE_INFORMATION, FILE_ATTRIBUTE_DIRECTORY, FILE_ATTRIBUTE_READONLY,
    FILE_ATTRIBUTE_REPARSE_POINT, FILE_FLAG_BACKUP_SEMANTICS, FILE_FLAG_OPEN_REPARSE_POINT,
    FILE_NAME_NORMALIZED, FILE_SHARE_DELETE, FILE_SHARE_READ, FILE_SHARE_WRITE,
    GetFileInformationByHandle, GetFinalPathNameByHandleW,
};

use super::super::files::{AtError, StatAt};
use super::last_error;

/// What a handle's file is, by the handle.
fn info(file: &File) -> std::io::Result<BY_HANDLE_FILE_INFORMATION> {
    // SAFETY: a zeroed structure is a valid out-parameter, and the handle is open.
    let mut info: BY_HANDLE_FILE_INFORMATION = unsafe { std::mem::zeroed() };
    if unsafe { GetFileInformationByHandle(file.as_raw_handle(), &mut info) } == 0 {
        return Err(last_error());
    }
    Ok(info)
}

fn is_link(info: &BY_HANDLE_FILE_INFORMATION) -> bool {
    info.dwFileAttributes & FILE_ATTRIBUTE_REPARSE_POINT != 0
}

fn is_dir(info: &BY_HANDLE_FILE_INFORMATION) -> bool {
    info.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY != 0
}

fn link_refused() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        "it is a symbolic link or a junction",
    )
}

/// Opens `path` with `flags`, refusing a reparse point when `follow` is false (the open then
/// stops at the link itself, never at what it names).
fn open_as(
    options: &mut std::fs::OpenOptions,
    path: &Path,
    flags: u32,
    follow: bool,
) -> std::io::Result<File> {
    let flags = flags
        | if follow {
            0
        } else {
            FILE_FLAG_OPEN_REPARSE_POINT
        };
    let file = match options.custom_flags(flags).open(path) {
        Ok(file) => file,
        // A link that cannot be opened as itself (wine's, or one whose target is gone) is
        // still a link, not a missing file.
        Err(e)
            if !follow
                && e.kind() == std::io::ErrorKind::NotFound
                && std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) =>
        {
            return Err(link_refused());
        }
        Err(e) => return Err(e),
    };
    if !follow && is_link(&info(&file)?) {
        return Err(link_refused());
    }
    Ok(file)
}

/// Opens `path` to read, unless `follow` never through a symbolic link or junction.
pub(crate) fn open_read(path: &Path, follow: bool) -> std::io::Result<File> {
    open_as(File::options().read(true), path, 0, follow)
}

/// Opens a file to write in place (or creates it, with `create`), never through a link, never
/// truncating.
pub(crate) fn open_write(path: &Path, create: bool) -> std::io::Result<File> {
    open_as(
        File::options().write(true).create(create).truncate(false),
        path,
        0,
        false,
    )
}

/// Opens a directory, unless `follow` never through a link. It is held without delete
/// sharing: while it is open nobody can rename or remove it, which is what keeps a name opened
/// in it ([`open_at`]) inside it.
pub(crate) fn open_dir(path: &Path, follow: bool) -> std::io::Result<File> {
    let dir = open_as(
        File::options()
            .read(true)
            .share_mode(FILE_SHARE_READ | FILE_SHARE_WRITE),
        path,
        FILE_FLAG_BACKUP_SEMANTICS,
        follow,
    )?;
    if !is_dir(&info(&dir)?) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotADirectory,
            "not a directory",
        ));
    }
    Ok(dir)
}

/// The path the system has for an open handle (`\\?\C:\...`): what it is now, whatever the
/// path it was opened by.
fn final_path(file: &File) -> std::io::Result<PathBuf> {
    let mut buffer = vec![0u16; 512];
    loop {
        // SAFETY: the buffer's length is given, and the handle is open.
        let n = unsafe {
            GetFinalPathNameByHandleW(
                file.as_raw_handle(),
                buffer.as_mut_ptr(),
                buffer.len() as u32,
                FILE_NAME_NORMALIZED,
            )
        } as usize;
        if n == 0 {
            return Err(last_error());
        }
        if n < buffer.len() {
            return Ok(PathBuf::from(OsString::from_wide(&buffer[..n])));
        }
        buffer.resize(n + 1, 0);
    }
}

/// A name of one component: not `.` or `..`, no separator, and no `:` (which would name an
/// alternate data stream of the file, or a drive).
fn one_component(name: &OsStr) -> std::io::Result<&OsStr> {
    let text = name.to_string_lossy();
    if text.is_empty() || text == "." || text == ".." || text.contains(['\\', '/', ':']) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a single name",
        ));
    }
    Ok(name)
}

/// The open directory's own path, with `name` in it.
fn in_dir(dir: &File, name: &OsStr) -> std::io::Result<PathBuf> {
    Ok(final_path(dir)?.join(one_component(name)?))
}

/// A name in an open directory, never through a link: a directory when `want_dir` (held as
/// [`open_dir`] holds one), else a file to read. The directory cannot move while it is held,
/// so the name is looked up where the handle is.
pub(crate) fn open_at(dir: &File, name: &OsStr, want_dir: bool) -> Result<File, AtError> {
    let path = in_dir(dir, name).map_err(AtError::Io)?;
    let mut options = File::options();
    options.read(true);
    let mut flags = FILE_FLAG_OPEN_REPARSE_POINT;
    if want_dir {
        options.share_mode(FILE_SHARE_READ | FILE_SHARE_WRITE);
        flags |= FILE_FLAG_BACKUP_SEMANTICS;
    }
    let file = options
        .custom_flags(flags)
        .open(&path)
        .map_err(AtError::Io)?;
    let found = info(&file).map_err(AtError::Io)?;
    if is_link(&found) {
        return Err(AtError::Link);
    }
    if is_dir(&found) != want_dir {
        return Err(AtError::NotPlain);
    }
    Ok(file)
}

/// A file of an open directory, by name: never through a link.
pub(crate) fn open_at_no_follow(dir: &File, name: &OsStr) -> std::io::Result<File> {
    match open_at(dir, name, false) {
        Ok(file) => Ok(file),
        Err(AtError::Io(e)) => Err(e),
        Err(AtError::Link) => Err(link_refused()),
        Err(AtError::NotPlain) => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        )),
    }
}

/// 100 ns ticks since 1601 to seconds and nanoseconds since 1970.
fn unix_time(time: windows_sys::Win32::Foundation::FILETIME) -> (i64, i64) {
    let ticks = (u64::from(time.dwHighDateTime) << 32 | u64::from(time.dwLowDateTime)) as i64;
    let since_1970 = ticks - 116_444_736_000_000_000;
    (
        since_1970.div_euclid(10_000_000),
        since_1970.rem_euclid(10_000_000) * 100,
    )
}

/// What git for Windows records of a name in an open directory, not following a link: the
/// last write time as mtime, the creation time as ctime, and no device, inode, owner or
/// executable bit (it stores zeros there, and `core.fileMode` is false).
pub(crate) fn stat_at(dir: &File, name: &OsStr) -> Option<StatAt> {
    let path = in_dir(dir, name).ok()?;
    let file = File::options()
        .access_mode(0)
        .share_mode(FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE)
        .custom_flags(FILE_FLAG_OPEN_REPARSE_POINT | FILE_FLAG_BACKUP_SEMANTICS)
        .open(path)
        .ok()?;
    let found = info(&file).ok()?;
    Some(StatAt {
        regular: !is_dir(&found) && !is_link(&found),
        owner_may_execute: false,
        mtime: unix_time(found.ftLastWriteTime),
        ctime: unix_time(found.ftCreationTime),
        dev: 0,
        ino: 0,
        uid: 0,
        gid: 0,
        size: u64::from(found.nFileSizeHigh) << 32 | u64::from(found.nFileSizeLow),
    })
}

/// A symbolic link's target, by name in an open directory, as git for Windows records it:
/// with forward slashes.
pub(crate) fn readlink_at(dir: &File, name: &OsStr) -> std::io::Result<Vec<u8>> {
    let target = std::fs::read_link(in_dir(dir, name)?)?;
    let text = target.to_str().ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "the link's target is not valid Unicode",
        )
    })?;
    Ok(text.replace('\\', "/").into_bytes())
}

/// How many names the file has.
pub(crate) fn links(file: &File) -> std::io::Result<u64> {
    Ok(u64::from(info(file)?.nNumberOfLinks))
}

/// A file's identity, whatever its name: its volume's serial number and its file index.
pub(crate) fn identity(file: &File) -> std::io::Result<(u64, u64)> {
    let found = info(file)?;
    Ok((
        u64::from(found.dwVolumeSerialNumber),
        u64::from(found.nFileIndexHigh) << 32 | u64::from(found.nFileIndexLow),
    ))
}

/// Whether `path` names the open `file` itself (not following a link at `path`).
pub(crate) fn same_file(file: &File, path: &Path) -> bool {
    let now = File::options()
        .access_mode(0)
        .share_mode(FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE)
        .custom_flags(FILE_FLAG_OPEN_REPARSE_POINT | FILE_FLAG_BACKUP_SEMANTICS)
        .open(path);
    match (identity(file), now.and_then(|now| identity(&now))) {
        (Ok(held), Ok(now)) => held == now,
        _ => false,
    }
}

/// The permission bits Windows has: 0o444 for a read-only file, else 0o644.
pub(crate) fn mode(meta: &std::fs::Metadata) -> u32 {
    use std::os::windows::fs::MetadataExt;
    if meta.file_attributes() & FILE_ATTRIBUTE_READONLY != 0 {
        0o444
    } else {
        0o644
    }
}

/// Gives a file what Windows keeps of `mode`: read-only when no one may write it.
pub(crate) fn set_mode(file: &File, mode: u32) -> std::io::Result<()> {
    if mode & 0o222 == 0 {
        let mut permissions = file.metadata()?.permissions();
        permissions.set_readonly(true);
        file.set_permissions(permissions)?;
    }
    Ok(())
}

/// The extensions of a program `cmd.exe` runs (`%PATHEXT%`), lower case, with their dots.
fn program_extensions() -> Vec<String> {
    let listed = std::env::var("PATHEXT").unwrap_or_default();
    let mut extensions: Vec<String> = listed
        .split(';')
        .filter(|e| e.starts_with('.') && e.len() > 1)
        .map(str::to_ascii_lowercase)
        .collect();
    if extensions.is_empty() {
        extensions = [".com", ".exe", ".bat", ".cmd"].map(String::from).to_vec();
    }
    extensions
}

/// Whether an open failed because the file's holder is removing it: a file whose delete is
/// pending cannot be opened until its last handle closes (access denied).
pub(crate) fn being_removed(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::PermissionDenied
}

/// The program a path or name runs, as Windows names programs: the last component (after `\`
/// or `/`), in lower case (names are compared without regard to case), without `.exe`.
pub(crate) fn program_name(word: &str) -> String {
    let name = word
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or(word)
        .to_lowercase();
    match name.strip_suffix(".exe") {
        Some(stem) => stem.to_string(),
        None => name,
    }
}

/// Whether a file is one Windows runs: its name ends in an extension of `%PATHEXT%`.
pub(crate) fn is_executable(path: &Path, _: &std::fs::Metadata) -> bool {
    let name = path.to_string_lossy().to_ascii_lowercase();
    program_extensions().iter().any(|e| name.ends_with(e))
}

/// Git for Windows keeps no executable bit on disk (`core.fileMode` false) and, by default,
/// checks a link out as a file holding its target (`core.symlinks` false): the index keeps
/// those modes, not the disk.
pub(crate) const MODES_ON_DISK: bool = false;

/// git for Windows guards paths against NTFS's other spellings of a name (`GIT~1`, a trailing
/// dot or space, `::$DATA`, reserved names): `core.protectNTFS` is on there.
pub(crate) const NTFS_NAMES: bool = true;

/// Windows: no inode numbers that std reads (unused: no warm copy here).
pub(crate) fn inode(_: &std::fs::Metadata) -> u64 {
    0
}

/// Windows: stat data of an open file (unused: no warm copy here).
pub(crate) fn stat_of(_: &File) -> Option<StatAt> {
    None
}

/// Windows: no change time to believe.
pub(crate) fn stamps_every_write(_: &Path) -> bool {
    false
}

/// Windows: a directory of a warm copy is never kept (no change time), so nothing to undo.
pub(crate) fn reset_dir(_: &Path, _: u32) -> std::io::Result<()> {
    Ok(())
}

/// Windows keeps no change time that std reads: `None`, so nothing is believed by it.
pub(crate) fn change_time(_: &std::fs::Metadata) -> Option<filetime::FileTime> {
    None
}

/// Git for Windows does not record the executable bit (`core.fileMode` is false).
pub(crate) fn owner_may_execute(_: &std::fs::Metadata) -> bool {
    false
}

/// The names `cmd.exe` tries for `program` in a directory of PATH: the name as given when it
/// has a program's extension, else the name with each extension of `%PATHEXT%`.
pub(crate) fn program_names(program: &str) -> Vec<String> {
    let lower = program.to_ascii_lowercase();
    let extensions = program_extensions();
    if extensions.iter().any(|e| lower.ends_with(e)) {
        return vec![program.to_string()];
    }
    extensions.iter().map(|e| format!("{program}{e}")).collect()
}

/// Makes `dir` and its missing parents. Windows has no mode bits: a directory under
/// `%LOCALAPPDATA%` inherits its ACL, which grants the user (and administrators) alone.
pub(crate) fn make_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}

/// Whether this process may write `path` (with `search`, create files in the directory): a
/// read-only file may not be written; a directory is tried with a file made and removed.
pub(crate) fn can_write(path: &Path, search: bool) -> std::io::Result<()> {
    let meta = std::fs::metadata(path)?;
    if meta.is_dir() {
        if search {
            tempfile::tempfile_in(path)?;
        }
        return Ok(());
    }
    if meta.permissions().readonly() {
        return Err(std::io::Error::from(std::io::ErrorKind::PermissionDenied));
    }
    Ok(())
}

/// Creates a file that must not exist yet, to write (read-only if `mode` lets no one write).
pub(crate) fn create_new(path: &Path, mode: u32) -> std::io::Result<File> {
    let file = File::options().write(true).create_new(true).open(path)?;
    set_mode(&file, mode)?;
    Ok(file)
}

/// Makes `link` a symbolic link to the file `target` (which needs the privilege, or Developer
/// Mode, on Windows).
pub fn symlink(target: &OsStr, link: &Path) -> std::io::Result<()> {
    std::os::windows::fs::symlink_file(target, link)
}

/// Standard input as a file of its own (a duplicate of the handle).
pub(crate) fn stdin_file() -> std::io::Result<File> {
    Ok(File::from(
        std::io::stdin().as_handle().try_clone_to_owned()?,
    ))
}

/// The name or path in `bytes`: UTF-8, as git for Windows writes names. Bytes that are not
/// UTF-8 cannot name a file here: they are read with U+FFFD in their place.
pub(crate) fn os_str(bytes: &[u8]) -> std::borrow::Cow<'_, OsStr> {
    match std::str::from_utf8(bytes) {
        Ok(text) => std::borrow::Cow::Borrowed(OsStr::new(text)),
        Err(_) => {
            std::borrow::Cow::Owned(OsString::from(String::from_utf8_lossy(bytes).into_owned()))
        }
    }
}

/// The bytes of a name (WTF-8: UTF-8 for every name that is valid Unicode).
pub(crate) fn bytes(name: &OsStr) -> &[u8] {
    name.as_encoded_bytes()
}

/// The bytes of an owned name.
pub(crate) fn into_bytes(name: OsString) -> Vec<u8> {
    name.into_encoded_bytes()
}

/// The most links followed in one path (Windows' own limit is 63 reparse points).
pub(crate) const MAX_LINKS: usize = 63;

/// The path made absolute with `.` and `..` taken by spelling, as Windows itself takes them
/// (`GetFullPathNameW`), keeping the drive.
pub(crate) fn lexical(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Where a write to `path` lands, as the system resolves it: `..` by spelling first (Windows
/// does that before it looks at the disk), then its longest existing part by the handle's
/// final path, which follows symbolic links and junctions and spells 8.3 short names and
/// case as the disk has them (`\\?\C:\...`). `None` where a loop of links stops the system.
pub(crate) fn resolve(path: &Path) -> Option<PathBuf> {
    let absolute = lexical(path);
    let mut existing = absolute.as_path();
    let mut rest = Vec::new();
    loop {
        match std::fs::canonicalize(existing) {
            Ok(found) => {
                return Some(
                    rest.iter()
                        .rev()
                        .fold(found, |acc: PathBuf, part| acc.join(part)),
                );
            }
            // ERROR_CANT_RESOLVE_FILENAME: a loop of links.
            Err(e) if e.raw_os_error() == Some(1921) => return None,
            Err(_) => {}
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                existing = parent;
            }
            _ => return Some(absolute),
        }
    }
}

/// Whether `place` is `dir` or below it, as NTFS compares names: without regard to case, and
/// with `\\?\` and the plain spelling of a drive alike.
pub(crate) fn within(place: &Path, dir: &Path) -> bool {
    let plain = |path: &Path| {
        let text = path.to_string_lossy().to_lowercase().replace('/', "\\");
        let text = text
            .strip_prefix("\\\\?\\")
            .map(str::to_string)
            .unwrap_or(text);
        text.trim_end_matches('\\').to_string()
    };
    let (place, dir) = (plain(place), plain(dir));
    place == dir || place.starts_with(&format!("{dir}\\"))
}

/// The temporary directory: `%TEMP%` (`GetTempPath2W`).
pub(crate) fn temp_dir() -> PathBuf {
    std::env::temp_dir()
}
