//! An exclusive lock on a sidecar file, so that read-modify-write of a state file by hooks
//! running at the same moment never loses an update.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::{Duration, Instant};

/// Held until dropped (closing the file releases the lock).
pub struct FileLock {
    _file: File,
}

impl FileLock {
    /// Takes the lock on `path` (created when missing), waiting at most `wait`. The lock file
    /// must be a regular file: a symlink is not followed and a FIFO is not waited on, so a file
    /// planted in its place can neither redirect the open nor hang it.
    pub fn acquire(path: &Path, wait: Duration) -> std::io::Result<FileLock> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(path)?;
        if !file.metadata()?.is_file() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "the lock is not a regular file",
            ));
        }
        let deadline = Instant::now() + wait;
        loop {
            // SAFETY: flock on a descriptor this function owns.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
                return Ok(FileLock { _file: file });
            }
            let err = std::io::Error::last_os_error();
            if err.kind() != std::io::ErrorKind::WouldBlock {
                return Err(err);
            }
            if Instant::now() >= deadline {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "another vigil process holds the lock",
                ));
            }
            std::thread::sleep(Duration::from_millis(2));
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
}
