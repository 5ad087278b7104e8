//! An exclusive lock on a sidecar file, so that read-modify-write of a state file by hooks
//! running at the same moment never loses an update.

use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::Error;
use crate::error::Result;
use crate::sys::files;

/// Held until dropped (closing the file releases the lock).
pub(crate) struct FileLock {
    _file: File,
    path: PathBuf,
    transient: bool,
}

impl FileLock {
    /// Takes the lock on `path` (created when missing), waiting at most `wait`. The lock file
    /// must be a regular file: a symlink is not followed and a FIFO is not waited on, so a file
    /// planted in its place can neither redirect the open nor hang it. The lock is the file the
    /// path names once it is held: a holder may remove it ([`FileLock::transient`]), and a waiter
    /// that locked the removed file opens the path again.
    pub(crate) fn acquire(path: &Path, wait: Duration) -> std::io::Result<FileLock> {
        let deadline = Instant::now() + wait;
        let timed_out = || {
            std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "another vigil process holds the lock",
            )
        };
        loop {
            let file = match files::open_write_no_follow(path, true) {
                Ok(file) => file,
                // A lock file its holder is removing (Windows) cannot be opened until the
                // holder closes it; the path is locked afresh then.
                Err(e) if files::being_removed(&e) => {
                    if Instant::now() >= deadline {
                        return Err(timed_out());
                    }
                    std::thread::sleep(Duration::from_millis(2));
                    continue;
                }
                Err(e) => return Err(e),
            };
            if !file.metadata()?.is_file() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "the lock is not a regular file",
                ));
            }
            loop {
                match file.try_lock() {
                    Ok(()) => break,
                    Err(TryLockError::WouldBlock) => {}
                    Err(TryLockError::Error(e)) => return Err(e),
                }
                if Instant::now() >= deadline {
                    return Err(timed_out());
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            if files::same_file(&file, path) {
                return Ok(FileLock {
                    _file: file,
                    path: path.to_path_buf(),
                    transient: false,
                });
            }
            // Removed (or replaced) by the holder before us: this lock guards nothing.
        }
    }

    /// A lock that leaves nothing behind: its directory is made when missing (again, if another
    /// process removed it in between), and the lock file goes when released. An error names
    /// the path.
    pub(crate) fn transient_at(path: &Path, wait: Duration) -> Result<FileLock> {
        let dir = path.parent().unwrap_or(Path::new("."));
        let mut tries = 0;
        loop {
            fs_err::create_dir_all(dir).map_err(Error::fs)?;
            match FileLock::acquire(path, wait) {
                Ok(lock) => return Ok(lock.transient()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && tries < 100 => tries += 1,
                Err(e) => return Err(Error::io("lock", path, &e)),
            }
        }
    }

    /// Makes the lock file go when the lock is released (removed first, then unlocked), for a
    /// lock that should leave nothing behind beside the file it guards. Waiters notice and lock
    /// the path afresh.
    pub(crate) fn transient(mut self) -> FileLock {
        self.transient = true;
        self
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        if self.transient {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_waits_then_times_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.lock");
        let first = FileLock::acquire(&path, Duration::from_secs(1)).unwrap();
        let err = FileLock::acquire(&path, Duration::from_millis(20))
            .err()
            .unwrap();
        assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
        drop(first);
        FileLock::acquire(&path, Duration::from_millis(20)).unwrap();
    }

    #[test]
    fn a_waiter_on_a_removed_lock_locks_the_path_afresh() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.lock");
        let first = FileLock::acquire(&path, Duration::from_secs(1))
            .unwrap()
            .transient();
        let waiter = {
            let path = path.clone();
            std::thread::spawn(move || FileLock::acquire(&path, Duration::from_secs(5)).unwrap())
        };
        std::thread::sleep(Duration::from_millis(50));
        drop(first);
        let second = waiter.join().unwrap();
        // The waiter holds the file the path names now, so a third comer must wait for it.
        assert!(path.exists());
        let third = FileLock::acquire(&path, Duration::from_millis(30));
        assert_eq!(third.err().unwrap().kind(), std::io::ErrorKind::TimedOut);
        drop(second);
    }
}
