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

use std::fs::{self, File, Permissions};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

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
        // A file or a link is swapped out, not a directory: a rename onto one fails as before.
        // (One made in the instant between is swapped out to the temp name and stays there, in
        // a directory its maker can write.)
        let swappable = existing.is_some_and(|m| m.is_file() || m.file_type().is_symlink());
        if !swappable {
            return temp.persist(path).map(drop).map_err(|e| e.error);
        }
        let kept = temp.into_temp_path().keep().map_err(|e| e.error)?;
        let swapped = match (kept.file_name(), path.file_name()) {
            (Some(temp), Some(target)) => swap::swap(dir, temp, target),
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
    File::open(dir)?.sync_all()
}

/// Removes the files `Skip` writes swapped out (and those older than ten minutes that a killed
/// process left in the same directories), from a child process in a session of its own that
/// closes every file descriptor but its directories' first, so that whoever waits for this
/// process (an engine reading its output) never waits for the disk. The child is reaped when
/// it ends within 2 ms, as it does unless the disk holds it; else it is left to init.
pub fn release_replaced() -> Released {
    swap::release()
}

/// What [`release_replaced`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Released {
    /// There was nothing to remove, or no child could be made (the files then stay, dot-named
    /// like a crashed write's, until a write in their directory ten minutes on).
    Nothing,
    /// The child removed them and was reaped.
    Removed,
    /// The child is still removing them.
    Running(libc::pid_t),
}

#[cfg(target_os = "linux")]
mod swap {
    use std::ffi::{CString, OsStr};
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    use std::path::{Path, PathBuf};
    use std::sync::Mutex;
    use std::time::{Duration, Instant, SystemTime};

    use super::Released;

    /// What a process left by a kill between a swap and its exit is removed after.
    const STALE: Duration = Duration::from_secs(600);
    /// The most entries of a directory read for what a killed process left.
    const MOST_SCANNED: usize = 8192;
    /// How long the parent waits to reap the child.
    const REAP_WITHIN: Duration = Duration::from_millis(2);

    /// A directory a `Skip` write swapped a file out in, held open so that the removal happens
    /// in it even if its path is made to lead elsewhere, and the names to remove there.
    struct Dir {
        path: PathBuf,
        fd: OwnedFd,
        names: Vec<CString>,
    }

    static DIRS: Mutex<Vec<Dir>> = Mutex::new(Vec::new());

    fn c(name: &OsStr) -> Option<CString> {
        CString::new(name.as_bytes()).ok()
    }

    /// Swaps the entries `temp` and `target` of `dir` in one step and remembers `temp`, now the
    /// old file, for [`release`]. False when nothing moved.
    pub fn swap(dir: &Path, temp: &OsStr, target: &OsStr) -> bool {
        let (Some(temp), Some(target)) = (c(temp), c(target)) else {
            return false;
        };
        let mut dirs = DIRS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let at = match dirs.iter().position(|d| d.path == dir) {
            Some(at) => at,
            None => {
                let Some(opened) = open(dir) else {
                    return false;
                };
                dirs.push(opened);
                dirs.len() - 1
            }
        };
        let entry = &mut dirs[at];
        let fd = entry.fd.as_raw_fd();
        // SAFETY: the directory is open and both names are NUL-terminated and live past it.
        let done = unsafe {
            libc::syscall(
                libc::SYS_renameat2,
                fd,
                temp.as_ptr(),
                fd,
                target.as_ptr(),
                libc::RENAME_EXCHANGE,
            )
        };
        if done != 0 {
            return false;
        }
        entry.names.push(temp);
        true
    }

    /// Opens `dir` (not through a link) and notes the temp files older than [`STALE`] in it.
    fn open(dir: &Path) -> Option<Dir> {
        let path = c(dir.as_os_str())?;
        // SAFETY: a NUL-terminated path; the descriptor is owned from here on.
        let fd = unsafe {
            libc::open(
                path.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return None;
        }
        // SAFETY: a descriptor just opened, owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut names = Vec::new();
        // Listed through the descriptor held, not the path, which may lead elsewhere by now.
        if let Ok(entries) = std::fs::read_dir(format!("/proc/self/fd/{}", fd.as_raw_fd())) {
            let now = SystemTime::now();
            for entry in entries.take(MOST_SCANNED).flatten() {
                let name = entry.file_name();
                let bytes = name.as_bytes();
                if bytes.len() < 6 || !bytes.starts_with(b".") || !bytes.ends_with(b".tmp") {
                    continue;
                }
                // Judged in the directory held open, and never through a link.
                let Some(cname) = c(&name) else { continue };
                // SAFETY: a zeroed stat is a valid out-parameter; the names live past the call.
                let mut stat: libc::stat = unsafe { std::mem::zeroed() };
                let ok = unsafe {
                    libc::fstatat(
                        fd.as_raw_fd(),
                        cname.as_ptr(),
                        &mut stat,
                        libc::AT_SYMLINK_NOFOLLOW,
                    )
                } == 0;
                let kind = stat.st_mode & libc::S_IFMT;
                let changed =
                    SystemTime::UNIX_EPOCH + Duration::from_secs(stat.st_mtime.max(0) as u64);
                let stale = now.duration_since(changed).is_ok_and(|age| age > STALE);
                if ok && (kind == libc::S_IFREG || kind == libc::S_IFLNK) && stale {
                    names.push(cname);
                }
            }
        }
        Some(Dir {
            path: dir.to_path_buf(),
            fd,
            names,
        })
    }

    pub fn release() -> Released {
        let dirs = std::mem::take(
            &mut *DIRS
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        let dirs: Vec<Dir> = dirs.into_iter().filter(|d| !d.names.is_empty()).collect();
        if dirs.is_empty() {
            return Released::Nothing;
        }
        let mut keep: Vec<libc::c_int> = dirs.iter().map(|d| d.fd.as_raw_fd()).collect();
        keep.sort_unstable();
        let most_fds = most_fds();
        let delay = test_delay();
        // SAFETY: the child calls only async-signal-safe functions (setsid, close, nanosleep,
        // unlinkat, _exit) on memory made before the fork, so a lock another thread held
        // cannot hang it.
        match unsafe { libc::fork() } {
            0 => unsafe {
                libc::setsid();
                close_all_but(&keep, most_fds);
                if let Some(delay) = &delay {
                    libc::nanosleep(delay, std::ptr::null_mut());
                }
                for dir in &dirs {
                    for name in &dir.names {
                        libc::unlinkat(dir.fd.as_raw_fd(), name.as_ptr(), 0);
                    }
                }
                libc::_exit(0)
            },
            -1 => Released::Nothing,
            pid => {
                let started = Instant::now();
                loop {
                    let mut status = 0;
                    // SAFETY: asks after the child just made, without waiting.
                    match unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } {
                        // Reaped, or already reaped for us (SIGCHLD ignored).
                        done if done == pid || done == -1 => return Released::Removed,
                        _ => {}
                    }
                    if started.elapsed() >= REAP_WITHIN {
                        return Released::Running(pid);
                    }
                    std::thread::sleep(Duration::from_micros(100));
                }
            }
        }
    }

    /// The highest descriptor number this process can have, plus one.
    fn most_fds() -> libc::c_int {
        // SAFETY: a zeroed rlimit is a valid out-parameter.
        let mut limit: libc::rlimit = unsafe { std::mem::zeroed() };
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
            return 1024;
        }
        limit.rlim_cur.min(1 << 20) as libc::c_int
    }

    /// Closes every descriptor but `keep` (sorted): `close_range` where the kernel has it,
    /// else one by one up to `most`.
    ///
    /// # Safety
    /// Only for a child after a fork: the parent's descriptors are its business.
    unsafe fn close_all_but(keep: &[libc::c_int], most: libc::c_int) {
        let mut from: libc::c_int = 0;
        for &fd in keep.iter().chain(std::iter::once(&libc::c_int::MAX)) {
            if fd > from {
                let last = if fd == libc::c_int::MAX {
                    libc::c_uint::MAX
                } else {
                    (fd - 1) as libc::c_uint
                };
                // SAFETY: the caller is a child after a fork.
                let ranged =
                    unsafe { libc::syscall(libc::SYS_close_range, from as libc::c_uint, last, 0) }
                        == 0;
                if !ranged {
                    for each in from..fd.min(most) {
                        // SAFETY: as above.
                        unsafe { libc::close(each) };
                    }
                }
            }
            from = fd.saturating_add(1);
        }
    }

    /// Tests only (debug builds): the child waits this long before it removes anything, so a
    /// test can see that nothing waits for it. Read before the fork.
    fn test_delay() -> Option<libc::timespec> {
        if !cfg!(debug_assertions) {
            return None;
        }
        let ms: u64 = std::env::var("VIGIL_TEST_RELEASE_DELAY_MS")
            .ok()?
            .parse()
            .ok()?;
        Some(libc::timespec {
            tv_sec: (ms / 1000) as libc::time_t,
            tv_nsec: ((ms % 1000) * 1_000_000) as libc::c_long,
        })
    }
}

#[cfg(not(target_os = "linux"))]
mod swap {
    use std::ffi::OsStr;
    use std::path::Path;

    use super::Released;

    pub fn swap(_: &Path, _: &OsStr, _: &OsStr) -> bool {
        false
    }

    pub fn release() -> Released {
        Released::Nothing
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
    use std::path::PathBuf;

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

    /// The process's swapped-out files are one list: the tests that swap take turns on it.
    static SWAPS: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn take_turn() -> std::sync::MutexGuard<'static, ()> {
        SWAPS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

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
