//! The one atomic write every vigil writer uses (SPEC P6): a temp file in the same directory,
//! fsync, rename over the target, fsync of the directory. A crash leaves the old file or the
//! new one, never a mix. A handoff record alone skips both syncs (`Durability::Skip`): P6 lets
//! it, since a record a crash left empty or torn fails to parse and the loader skips it, and
//! while the disk writes back a large file one sync can take a second.
//!
//! Such a write does not free the file it replaces either. On a filesystem mounted with
//! `discard` (ext4 here), freeing a file's blocks sends the disk a discard and waits for it
//! (`ext4_free_blocks` → `blkdev_issue_discard`, seen in the process's kernel stack), and while
//! the disk writes back a large file that discard waits behind it: a rename over a record of a
//! few KiB took 0.05 to 2.2 s. A `Skip` write swaps the new file in (`RENAME_EXCHANGE`, Linux),
//! which frees nothing, and leaves the old one under the temp name; [`release_replaced`], which
//! every binary runs as it exits, removes those from a child process that nothing waits for.
//! Without ext4's flush on a rename over a file, a crash is likelier to leave such a file
//! empty, which P6 allows for them: a torn record is skipped, a torn written-out note denies
//! until the next sync writes it again.

use std::fs;
use std::io::Write;
use std::path::Path;

use crate::sys::files;
use crate::sys::platform::replace;

pub(crate) use replace::ignore_file_size_signal;

/// Writes `bytes` to `path` atomically. An existing file keeps its permissions; a new one gets
/// `new_mode`. A symlink at `path` is replaced, never followed: a link planted in a state
/// directory cannot redirect a write elsewhere (callers that must follow a link, such as a
/// settings file, resolve it first).
pub fn write_atomic(path: &Path, bytes: &[u8], new_mode: u32) -> std::io::Result<()> {
    write_atomic_as(path, bytes, new_mode, Durability::Wait)
}

/// Whether a write waits until its bytes are on the disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Durability {
    /// fdatasync of the file before the rename, fsync of the directory after it.
    Wait,
    /// Neither, and the replaced file is freed as the process exits, by a child nothing waits
    /// for: the swap is still atomic for every reader, and only a crash can tear it.
    Skip,
}

/// `write_atomic`, choosing whether to wait for durability.
pub(crate) fn write_atomic_as(
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
        Some(meta) if meta.is_file() => files::mode(meta),
        _ => new_mode,
    };
    let mut temp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .tempfile_in(dir)?;
    files::set_mode(temp.as_file(), mode)?;
    temp.write_all(bytes)?;
    if durability == Durability::Skip {
        // A file or a link is swapped out, not a directory: a rename onto one fails as before.
        // (One made in the instant between is swapped out to the temp name and stays there, in
        // a directory its maker can write.)
        let swappable = existing.is_some_and(|m| m.is_file() || m.file_type().is_symlink());
        if !swappable {
            return temp.persist(path).map(drop).map_err(|e| e.error);
        }
        let kept = temp.into_temp_path().keep().map_err(|e| e.error)?;
        let swapped = match (kept.file_name(), path.file_name()) {
            (Some(temp), Some(target)) => replace::swap(dir, temp, target),
            _ => false,
        };
        if swapped {
            return Ok(());
        }
        // Not swapped (no such call, a directory that is a link, or the file went in
        // between): nothing moved, so a rename is as it always was.
        return fs::rename(&kept, path).inspect_err(|_| {
            let _ = fs::remove_file(&kept);
        });
    }
    // fdatasync: the data and the size are made durable; timestamps need not be.
    temp.as_file().sync_data()?;
    temp.persist(path).map_err(|e| e.error)?;
    replace::sync_dir(dir)
}

/// Removes the files `Skip` writes swapped out (and those older than ten minutes that a killed
/// process left in the same directories), from a child process in a session of its own that
/// closes every file descriptor but its directories' first, so that whoever waits for this
/// process (an engine reading its output) never waits for the disk. The child is reaped when
/// it ends within 2 ms, as it does unless the disk holds it; else it is left to init.
pub(crate) fn release_replaced() -> Released {
    replace::release()
}

/// What [`release_replaced`] did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Released {
    /// There was nothing to remove, or no child could be made (the files then stay, dot-named
    /// like a crashed write's, until a write in their directory ten minutes on).
    Nothing,
    /// The child removed them and was reaped (a child only on Unix).
    #[cfg_attr(windows, allow(dead_code))]
    Removed,
    /// The child is still removing them.
    #[cfg_attr(windows, allow(dead_code))]
    Running(i32),
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    #[cfg(unix)]
    use std::{fs::Permissions, os::unix::fs::PermissionsExt};

    #[test]
    fn a_write_replaces_the_whole_file_and_leaves_no_temp_file_on_every_system() {
        // It releases what was swapped out: its turn on the one list, or it could take what
        // another test swapped out and waits to release.
        #[cfg(unix)]
        let _turn = take_turn();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        write_atomic(&path, b"a longer first version", 0o644).unwrap();
        write_atomic(&path, b"short", 0o644).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"short");
        write_atomic_as(&path, b"skipped", 0o644, Durability::Skip).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"skipped");
        let _ = release_replaced();
        let names: Vec<PathBuf> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| !p.to_string_lossy().ends_with(".tmp"))
            .collect();
        assert_eq!(names, vec![path]);
    }

    #[cfg(unix)]
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

    #[cfg(unix)]
    /// The files in `dir` other than `keep`.
    fn others(dir: &Path, keep: &str) -> Vec<PathBuf> {
        fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.file_name().unwrap() != keep)
            .collect()
    }

    #[cfg(unix)]
    /// The process's swapped-out files are one list: the tests that swap take turns on it.
    static SWAPS: std::sync::Mutex<()> = std::sync::Mutex::new(());

    #[cfg(unix)]
    fn take_turn() -> std::sync::MutexGuard<'static, ()> {
        SWAPS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    #[cfg(unix)]
    /// Runs `release_replaced` and waits for its child, which must have had work.
    fn released() {
        match release_replaced() {
            Released::Removed => {}
            Released::Running(child) => {
                let mut status = 0;
                // SAFETY: waits for the child just made.
                assert_eq!(unsafe { libc::waitpid(child, &mut status, 0) }, child);
                assert_eq!(status, 0);
            }
            Released::Nothing => panic!("nothing was released"),
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn what_a_killed_writer_swapped_out_goes_at_a_later_write_after_ten_minutes() {
        let _turn = take_turn();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("final.json");
        fs::write(&path, b"old").unwrap();
        let stale = dir.path().join(".final.json.a1b2c3.tmp");
        let fresh = dir.path().join(".final.json.d4e5f6.tmp");
        let other = dir.path().join("notes.tmp");
        for left in [&stale, &fresh, &other] {
            fs::write(left, b"left").unwrap();
        }
        let old =
            filetime::FileTime::from_unix_time(filetime::FileTime::now().unix_seconds() - 601, 0);
        filetime::set_file_mtime(&stale, old).unwrap();
        filetime::set_file_mtime(&other, old).unwrap();
        write_atomic_as(&path, b"new", 0o644, Durability::Skip).unwrap();
        released();
        let mut left: Vec<_> = others(dir.path(), "final.json");
        left.sort();
        // A fresh one may be another writer's, still at work; a name not made as a temp
        // file's is nobody's to remove.
        assert_eq!(left, vec![fresh, other]);
    }

    #[cfg(unix)]
    #[test]
    fn a_write_that_skips_durability_frees_the_replaced_file_only_in_a_child() {
        let _turn = take_turn();
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
            released();
        }
        assert_eq!(others(dir.path(), "final.json"), Vec::<PathBuf>::new());
    }

    #[cfg(unix)]
    #[test]
    fn a_write_that_skips_durability_replaces_a_symlink_and_fails_on_a_directory() {
        let _turn = take_turn();
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

    #[cfg(unix)]
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
