//! Replacing a file atomically, the Unix side: the directory's sync that makes a rename
//! durable, the swap that frees nothing (`RENAME_EXCHANGE`, Linux) and the child that frees
//! what it swapped out, and the file size signal.

use std::path::Path;

#[cfg(target_os = "linux")]
pub(crate) use linux::{release, swap};
#[cfg(not(target_os = "linux"))]
pub use other::{release, swap};

/// Makes a rename in `dir` durable: fsync of the directory.
pub(crate) fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(target_os = "linux")]
mod linux {
    use std::ffi::{CString, OsStr};
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    use std::path::{Path, PathBuf};
    use std::sync::Mutex;
    use std::time::{Duration, Instant, SystemTime};

    use crate::sys::atomic::Released;

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
    pub(crate) fn swap(dir: &Path, temp: &OsStr, target: &OsStr) -> bool {
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

    pub(crate) fn release() -> Released {
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
mod other {
    use std::ffi::OsStr;
    use std::path::Path;

    use crate::sys::atomic::Released;

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
pub(crate) fn ignore_file_size_signal() {
    // SAFETY: setting a signal's disposition to SIG_IGN is always sound.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}
