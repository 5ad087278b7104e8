//! Paths compared by what they name, not how they are spelled.

use std::path::{Path, PathBuf};

use crate::sys::platform;

/// Keeps the first of the paths that name one file, whatever their spelling ([`canonical`]).
pub(crate) fn dedup_canonical(paths: &mut Vec<PathBuf>) {
    let mut seen = Vec::new();
    paths.retain(|path| {
        let key = canonical(path);
        let fresh = !seen.contains(&key);
        seen.push(key);
        fresh
    });
}

/// The canonical form of a path that may not exist yet: its longest existing ancestor
/// canonicalized, the rest appended (so the answer is the same before and after it is made).
pub(crate) fn canonical(path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut existing = absolute.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(found) = std::fs::canonicalize(existing) {
            return rest
                .iter()
                .rev()
                .fold(found, |acc: PathBuf, part| acc.join(part));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                existing = parent;
            }
            _ => return absolute,
        }
    }
}

/// A path from the bytes a file holds (a `gitdir:` line, a recorded top).
pub(crate) fn from_bytes(bytes: &[u8]) -> PathBuf {
    PathBuf::from(os_str(bytes).into_owned())
}

/// The name or path in `bytes`, as the system spells it. On Windows, where names are UTF-16,
/// bytes that are not UTF-8 name nothing that exists: they are read with U+FFFD in place.
pub(crate) fn os_str(bytes: &[u8]) -> std::borrow::Cow<'_, std::ffi::OsStr> {
    platform::fs::os_str(bytes)
}

/// The bytes of a name or path, as the system spells it (on Windows, WTF-8: UTF-8 for every
/// name that is valid Unicode).
pub(crate) fn bytes(name: &std::ffi::OsStr) -> &[u8] {
    platform::fs::bytes(name)
}

/// The bytes of an owned name or path.
pub(crate) fn into_bytes(name: std::ffi::OsString) -> Vec<u8> {
    platform::fs::into_bytes(name)
}

/// The most links followed in one path.
pub(crate) use platform::fs::MAX_LINKS;

/// The path with `.` dropped and `..` taken by spelling: as Node's path.resolve does on Unix,
/// as Windows itself does there (keeping the drive).
pub(crate) fn lexical(path: &Path) -> PathBuf {
    platform::fs::lexical(path)
}

/// Where a write to `path` lands: on Unix each component as the kernel takes it, a link
/// followed to its target, a missing directory as `mkdir -p` would make it; on Windows as the
/// system resolves it (links, junctions, short names, case). `None` past `MAX_LINKS`.
pub(crate) fn resolve(path: &Path) -> Option<PathBuf> {
    platform::fs::resolve(path)
}

/// Whether `place` is `dir` or below it, names compared as the system compares them (on
/// Windows without regard to case).
pub(crate) fn within(place: &Path, dir: &Path) -> bool {
    platform::fs::within(place, dir)
}

/// The temporary directory the agent's shell may write.
pub(crate) fn temp_dir() -> PathBuf {
    platform::fs::temp_dir()
}
