//! The one atomic write every vigil writer uses (SPEC P6): a temp file in the same directory,
//! fsync, rename over the target, fsync of the directory. A crash leaves the old file or the
//! new one, never a mix. A handoff record alone skips both syncs (`Durability::Skip`): P6 lets
//! it, since a record a crash left empty or torn fails to parse and the loader skips it, and
//! while the disk writes back a large file one sync can take a second.

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
    /// Neither: the rename is still atomic for every reader, and only a crash can tear it.
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
    let mode = match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_file() => meta.permissions().mode() & 0o7777,
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
        return temp.persist(path).map(drop).map_err(|e| e.error);
    }
    // fdatasync: the data and the size are made durable; timestamps need not be.
    temp.as_file().sync_data()?;
    temp.persist(path).map_err(|e| e.error)?;
    File::open(dir)?.sync_all()
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
