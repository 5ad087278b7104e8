//! The one atomic write every vigil writer uses (SPEC P6): a temp file in the same directory,
//! fsync, rename over the target, fsync of the directory. A crash leaves the old file or the
//! new one, never a mix. A handoff record alone skips both syncs (`Durability::Skip`): P6 lets
//! it, since a record a crash left empty or torn fails to parse and the loader skips it, and
//! while the disk writes back a large file one sync can take a second.
//!
//! Such a write does not free the file it replaces either. On ext4 a rename over a file frees
//! that file's blocks inside the call, and while the disk writes back a large file freeing a
//! block waits for the journal, which waits for that writeback: 0.1 to 2 s measured here for a
//! record of a few KiB. A `Skip` write swaps the new file in (`RENAME_EXCHANGE`, Linux), which
//! frees nothing, and leaves the old one under the temp name; [`release_replaced`], which every
//! binary runs as it exits, removes those from a child process that nothing waits for.

use std::ffi::CString;
use std::fs::{self, File, Permissions};
use std::io::Write;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Writes `bytes` to `path` atomically. An existing file keeps its permissions; a new one gets
/// `new_mode`. A symlink at `path` is replaced, never followed: a link planted in a state
/// directory cannot redirect a write elsewhere (callers that must follow a link, such as a
/// settings file, resolve it first).
pub fn write_atomic(path: &Path, bytes: &[u8], new_mode: u32) -> std::io::Result<()> {
    write_atomic_as(path, bytes, new_mode, Durability::Wait)
}

/// Whether a write waits until its bytes are on the disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// fdatasync of the file before the rename, fsync of the directory after it.
    Wait,
    /// Neither, and the replaced file is freed as the process exits, by a child nothing waits
    /// for: the swap is still atomic for every reader, and only a crash can tear it.
    Skip,
}

/// `write_atomic`, choosing whether to wait for durability.
pub fn write_atomic_as(
    path: &Path,
    bytes: &[u8],
    new_mode: u32,
    durability: Durability,
) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map_or_else(|| "file".into(), |n| n.to_string_lossy());
    let existing = fs::symlink_metadata(path).ok();
    let mode = match &existing {
        Some(meta) if meta.is_file() => meta.permissions().mode() & 0o7777,
        _ => new_mode,
    };
    let mut temp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .tempfile_in(dir)?;
    temp.as_file()
        .set_permissions(Permissions::from_mode(mode))?;
    temp.write_all(bytes)?;
    if durability == Durability::Skip {
        // A file or a link is swapped out, never a directory: a rename onto one fails as before.
        let swappable = existing.is_some_and(|m| m.is_file() || m.file_type().is_symlink());
        if !swappable {
            return temp.persist(path).map(drop).map_err(|e| e.error);
        }
        let kept = temp.into_temp_path().keep().map_err(|e| e.error)?;
        if exchange(&kept, path).is_ok() {
            remember_replaced(kept);
            return Ok(());
        }
        // Not swapped (no such call, or the file went in between): nothing moved, so a rename
        // is as it always was.
        return fs::rename(&kept, path).inspect_err(|_| {
            let _ = fs::remove_file(&kept);
        });
    }
    // fdatasync: the data and the size are made durable; timestamps need not be.
    temp.as_file().sync_data()?;
    temp.persist(path).map_err(|e| e.error)?;
    File::open(dir)?.sync_all()
}

/// Swaps the entries at `a` and `b` in one step. Where the call does not exist, an error, and
/// nothing moved.
#[cfg(target_os = "linux")]
fn exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    let a = CString::new(a.as_os_str().as_bytes())?;
    let b = CString::new(b.as_os_str().as_bytes())?;
    // SAFETY: both paths are NUL-terminated strings that outlive the call.
    let done = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if done == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
fn exchange(_: &Path, _: &Path) -> std::io::Result<()> {
    Err(std::io::ErrorKind::Unsupported.into())
}

/// The files `Skip` writes swapped out, still to be removed.
static REPLACED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn remember_replaced(path: PathBuf) {
    REPLACED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(path);
}

/// Removes the files `Skip` writes swapped out, from a child process that closes every file
/// descriptor first, so that whoever waits for this process (an engine reading its output)
/// never waits for the disk. Answers the child's pid, or `None` when there was nothing to
/// remove or no child could be made (the files then stay, dot-named like a crashed write's).
pub fn release_replaced() -> Option<libc::pid_t> {
    let paths: Vec<CString> = std::mem::take(
        &mut *REPLACED
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    )
    .into_iter()
    .filter_map(|p| CString::new(p.into_os_string().into_vec()).ok())
    .collect();
    if paths.is_empty() {
        return None;
    }
    // SAFETY: the child calls only async-signal-safe functions (close, unlink, _exit) on
    // memory made before the fork, so another thread holding a lock cannot hang it.
    match unsafe { libc::fork() } {
        0 => unsafe {
            for fd in 0..1024 {
                libc::close(fd);
            }
            for path in &paths {
                libc::unlink(path.as_ptr());
            }
            libc::_exit(0)
        },
        -1 => None,
        pid => Some(pid),
    }
}

/// A write past the file size limit (`ulimit -f`) raises SIGXFSZ, whose default kills the
/// process before it can say anything: a gate would then die silently, which an engine reads
/// as "allow". Ignored, the write fails with EFBIG like a full disk, the temp file is removed,
/// and the caller fails in its documented direction. Every binary calls it first thing
/// (`cli::start`). Children get the default back (`process::isolate`).
pub fn ignore_file_size_signal() {
    // SAFETY: setting a signal's disposition to SIG_IGN is always sound.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_new_files_with_the_given_mode_and_keeps_an_existing_mode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        write_atomic(&path, b"one", 0o644).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"one");
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o644
        );
        fs::set_permissions(&path, Permissions::from_mode(0o600)).unwrap();
        write_atomic(&path, b"two", 0o644).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"two");
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let leftovers: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temp file is left behind");
    }

    /// The files in `dir` other than `keep`.
    fn others(dir: &Path, keep: &str) -> Vec<PathBuf> {
        fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.file_name().unwrap() != keep)
            .collect()
    }

    #[test]
    fn a_write_that_skips_durability_frees_the_replaced_file_only_in_a_child() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("final.json");
        fs::write(&path, b"old").unwrap();
        write_atomic_as(&path, b"new", 0o644, Durability::Skip).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"new");
        if cfg!(target_os = "linux") {
            // Swapped out, not freed by the write: the old bytes wait under the temp name.
            let left = others(dir.path(), "final.json");
            assert_eq!(left.len(), 1, "{left:?}");
            assert_eq!(fs::read(&left[0]).unwrap(), b"old");
            let child = release_replaced().expect("a child removes what was swapped out");
            let mut status = 0;
            // SAFETY: waits for the child just made.
            assert_eq!(unsafe { libc::waitpid(child, &mut status, 0) }, child);
            assert_eq!(status, 0);
        }
        assert_eq!(others(dir.path(), "final.json"), Vec::<PathBuf>::new());
    }

    #[test]
    fn a_write_that_skips_durability_replaces_a_symlink_and_fails_on_a_directory() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        fs::write(&outside, b"precious").unwrap();
        let link = dir.path().join("final.json");
        std::os::unix::fs::symlink(&outside, &link).unwrap();
        write_atomic_as(&link, b"record", 0o644, Durability::Skip).unwrap();
        assert_eq!(fs::read(&outside).unwrap(), b"precious");
        assert_eq!(fs::read(&link).unwrap(), b"record");
        assert!(fs::symlink_metadata(&link).unwrap().is_file());

        let taken = dir.path().join("taken");
        fs::create_dir(&taken).unwrap();
        fs::write(taken.join("inside"), b"kept").unwrap();
        write_atomic_as(&taken, b"record", 0o644, Durability::Skip).unwrap_err();
        assert_eq!(fs::read(taken.join("inside")).unwrap(), b"kept");
    }

    #[test]
    fn a_symlink_is_replaced_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        fs::write(&outside, b"precious").unwrap();
        let link = dir.path().join("state.json");
        std::os::unix::fs::symlink(&outside, &link).unwrap();
        write_atomic(&link, b"state", 0o644).unwrap();
        assert_eq!(fs::read(&outside).unwrap(), b"precious");
        assert!(fs::symlink_metadata(&link).unwrap().is_file());
    }
}
