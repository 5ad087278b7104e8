//! Replacing a file atomically, the Windows side. The temp file's data is flushed
//! (`FlushFileBuffers`) before it is renamed over the target (`MoveFileExW`, replacing), so a
//! crash leaves the old file or the new one. There is no directory to sync: NTFS journals the
//! rename itself, and a crash may at worst undo it, leaving the old file whole. There is no
//! swap that frees nothing and no file size signal: those are Linux's.

use std::ffi::OsStr;
use std::path::Path;

use crate::sys::atomic::Released;

/// NTFS journals a rename; nothing more to sync.
pub(crate) fn sync_dir(_: &Path) -> std::io::Result<()> {
    Ok(())
}

/// No exchanging rename here: a write that skips durability renames as any other.
pub(crate) fn swap(_: &Path, _: &OsStr, _: &OsStr) -> bool {
    false
}

/// Nothing was swapped out, so nothing is left to free.
pub(crate) fn release() -> Released {
    Released::Nothing
}

/// Windows has no file size signal: a write past a limit fails like a full disk.
pub(crate) fn ignore_file_size_signal() {}
