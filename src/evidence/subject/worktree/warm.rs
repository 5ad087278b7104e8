//! The warm copy (SPEC §11): the copy a check under a hold runs in, kept in the protected state
//! from one Stop to the next and brought to the tree's content by what changed, so a Stop reads
//! and hashes the tree (as an unheld Stop does) but writes only what changed.
//!
//! What it believes, and why the agent cannot turn it into approval:
//!
//! - Nothing of the live tree but its bytes: every file is read and hashed on every Stop (SPEC
//!   §9: stat data vouches for no content; a write through a memory mapping, or one still under
//!   way, leaves it as it was). The cache (git's index format, in the protected state, which
//!   the agent cannot write) says what the copy holds at each path.
//! - A file or directory of the copy is taken as vigil left it when its ctime is before the
//!   cache was written (the seal), and a directory only while it keeps the inode it was sealed
//!   with: every change the check makes to the copy later moves a ctime past the seal (on the
//!   file systems where a write through a memory mapping is stamped too: ext4, XFS, Btrfs).
//!   Everything else is replaced or removed before the next check runs, so what a check writes
//!   is discarded, as a fresh copy discards it.
//!
//! The copy and the subject are always one: the id of each file is that of the bytes in the
//! copy. A cache that is missing or damaged believes nothing.

use std::path::{Path, PathBuf};

use super::{Hashed, Known, Tracked};
use crate::error::{Error, Result};
use crate::evidence::subject::tree::Mode;
use crate::sys::{atomic, files, paths};

/// The cache and the copy it describes.
pub(crate) struct Warm {
    pub(super) tracked: Tracked,
    pub(super) copy: PathBuf,
    /// Each directory of the copy vigil left, by its inode when sealed: one in its place with
    /// another (a directory the check moved there, whose files keep their old times) is not
    /// vigil's, whatever its times say.
    dirs: std::collections::HashMap<Vec<u8>, u64>,
}

impl Warm {
    /// The cache at `index` for the copy at `copy`; one that cannot be read believes nothing.
    pub(crate) fn load(index: &Path, copy: &Path) -> Warm {
        let tracked = super::read_index(index, true).unwrap_or_else(|_| Tracked::empty());
        let dirs = files::read_regular(&dirs_file(index), MAX_DIRS, true)
            .ok()
            .flatten()
            .and_then(|bytes| serde_json::from_slice::<Vec<(String, u64)>>(&bytes).ok())
            .unwrap_or_default()
            .into_iter()
            .map(|(path, ino)| (path.into_bytes(), ino))
            .collect();
        Warm {
            tracked,
            copy: copy.to_path_buf(),
            dirs,
        }
    }

    /// The time before which the copy is as vigil left it (the cache's own mtime).
    fn sealed(&self) -> filetime::FileTime {
        self.tracked.written
    }

    /// Whether `name` in the copy's directory `copy_dir` is unchanged since the seal: a
    /// regular file of `mode` and `size`, its ctime and mtime before the seal.
    fn copy_intact(
        &self,
        copy_dir: &std::fs::File,
        name: &std::ffi::OsStr,
        mode: Mode,
        size: u32,
    ) -> bool {
        let Some(stat) = files::stat_at(copy_dir, name) else {
            return false;
        };
        let time =
            |(secs, nsecs): (i64, i64)| filetime::FileTime::from_unix_time(secs, nsecs as u32);
        stat.regular
            && stat.size as u32 == size
            && super::file_mode(stat.owner_may_execute) == mode
            && self.before_seal(time(stat.ctime), time(stat.mtime))
    }

    /// Whether times `ctime` and `mtime` are before the seal (never, without a cache).
    fn before_seal(&self, ctime: filetime::FileTime, mtime: filetime::FileTime) -> bool {
        let sealed = self.sealed();
        sealed != filetime::FileTime::zero() && ctime < sealed && mtime < sealed
    }

    /// `before_seal` of a directory's metadata.
    fn dir_before_seal(&self, meta: &std::fs::Metadata) -> bool {
        files::change_time(meta).is_some_and(|ctime| {
            self.before_seal(ctime, filetime::FileTime::from_last_modification_time(meta))
        })
    }

    /// The copy's directory `dir` (from the top), opened for [`Warm::kept`]; `None` when it is
    /// not a directory (nothing in it is then kept).
    pub(super) fn copy_dir(&self, dir: &[u8]) -> Option<std::fs::File> {
        files::open_dir_no_follow(&self.copy.join(paths::os_str(dir))).ok()
    }

    /// What the copy holds at `relative` (`name` in the copy's directory `copy_dir`), as the
    /// cache names it, when that file is as vigil left it: the live file is then read and,
    /// when its bytes are these, not copied again.
    pub(super) fn copy_holds(
        &self,
        known: &Known,
        range: std::ops::Range<usize>,
        relative: &[u8],
        copy_dir: Option<&std::fs::File>,
        name: &std::ffi::OsStr,
    ) -> Option<super::Cached> {
        let cached = known.cached(range, relative)?;
        // Zeroed: a path vigil placed and must write again (a link, what a hold wrote over).
        if cached.stat == gix_index::entry::Stat::default()
            || cached.mode == Mode::Symlink
            || !self.copy_intact(copy_dir?, name, cached.mode, cached.stat.size)
        {
            return None;
        }
        Some(cached)
    }

    /// Before the walk: every directory of the copy changed since the seal is read, and what
    /// the cache does not name in it removed (what a check wrote), so that no link or file the
    /// check made is written through or left for the next check. A directory unchanged since
    /// the seal holds only what vigil put there.
    pub(super) fn sweep(&self) -> Result<()> {
        let expected = Expected::of(self.tracked.paths.iter().map(Vec::as_slice));
        files::make_private_dir(&self.copy).map_err(|e| Error::io("create", &self.copy, &e))?;
        let mut dirs = vec![Vec::new()];
        while let Some(dir) = dirs.pop() {
            let path = self.copy.join(paths::os_str(&dir));
            let meta = fs_err::symlink_metadata(&path).map_err(Error::fs)?;
            // Not the directory vigil left there (moved in whole by the check): removed, all
            // it holds with it, and made again by the walk.
            if !dir.is_empty()
                && (!meta.is_dir() || self.dirs.get(&dir) != Some(&files::inode(&meta)))
            {
                remove_any(&path)?;
                continue;
            }
            let children = expected.dirs_in(&dir);
            if meta.is_dir() && self.dir_before_seal(&meta) {
                dirs.extend(children.into_iter().filter(|child| {
                    std::fs::symlink_metadata(self.copy.join(paths::os_str(child)))
                        .is_ok_and(|m| m.is_dir())
                }));
                continue;
            }
            // Changed since the seal: its mode and ACL as vigil makes a directory, then what
            // the check added in it removed.
            let mode = if dir.is_empty() { 0o700 } else { 0o755 };
            files::reset_dir(&path, mode).map_err(|e| Error::io("reset", &path, &e))?;
            for entry in fs_err::read_dir(&path).map_err(Error::fs)? {
                let entry = entry.map_err(Error::fs)?;
                let mut relative = dir.clone();
                if !relative.is_empty() {
                    relative.push(b'/');
                }
                relative.extend_from_slice(paths::bytes(&entry.file_name()));
                let kind = entry.file_type().map_err(Error::fs)?;
                if kind.is_dir() && expected.is_dir(&relative) {
                    dirs.push(relative);
                } else if !(kind.is_file() && expected.is_file(&relative)) {
                    remove_any(&entry.path())?;
                }
            }
        }
        Ok(())
    }

    /// After the walk: what the cache named and the tree no longer holds goes from the copy,
    /// and the directories it leaves empty.
    pub(super) fn prune(&self, files: &[Hashed]) -> Result<()> {
        let mut next = files.iter().map(|f| f.path.as_slice()).peekable();
        for path in &self.tracked.paths {
            while next.next_if(|now| *now < path.as_slice()).is_some() {}
            if next.peek() == Some(&path.as_slice()) {
                continue;
            }
            let mut place = self.copy.join(paths::os_str(path));
            match std::fs::symlink_metadata(&place) {
                Ok(meta) if !meta.is_dir() => {
                    fs_err::remove_file(&place).map_err(Error::fs)?;
                }
                _ => continue,
            }
            while place.pop() && place != self.copy && std::fs::remove_dir(&place).is_ok() {}
        }
        Ok(())
    }
}

/// The paths a cache names, and the directories on the way to them, for the sweep.
struct Expected<'a> {
    files: std::collections::HashSet<&'a [u8]>,
    /// Each directory (from the top, "" for it) and its subdirectories.
    dirs: std::collections::HashMap<&'a [u8], Vec<&'a [u8]>>,
}

impl<'a> Expected<'a> {
    fn of(paths: impl Iterator<Item = &'a [u8]>) -> Expected<'a> {
        let mut files = std::collections::HashSet::new();
        let mut dirs: std::collections::HashMap<&[u8], Vec<&[u8]>> =
            std::collections::HashMap::new();
        dirs.insert(b"", Vec::new());
        for path in paths {
            files.insert(path);
            let mut parent: &[u8] = b"";
            for (at, byte) in path.iter().enumerate() {
                if *byte != b'/' {
                    continue;
                }
                let dir = &path[..at];
                if !dirs.contains_key(dir) {
                    dirs.insert(dir, Vec::new());
                    dirs.entry(parent).or_default().push(dir);
                }
                parent = dir;
            }
        }
        Expected { files, dirs }
    }

    fn is_file(&self, path: &[u8]) -> bool {
        self.files.contains(path)
    }

    fn is_dir(&self, path: &[u8]) -> bool {
        self.dirs.contains_key(path)
    }

    fn dirs_in(&self, dir: &[u8]) -> Vec<Vec<u8>> {
        self.dirs
            .get(dir)
            .map(|children| children.iter().map(|c| c.to_vec()).collect())
            .unwrap_or_default()
    }
}

/// The largest list of the copy's directories read.
const MAX_DIRS: u64 = 256 << 20;

/// Where the inodes of the copy's directories are kept, beside the cache.
fn dirs_file(index: &Path) -> PathBuf {
    index.with_file_name("dirs")
}

/// Where a file goes in the warm copy: its parent directories made real (a file or link the
/// check left in the way of one removed, never followed), and whatever is at the path removed.
pub(crate) fn place(copy: &Path, relative: &[u8]) -> Result<PathBuf> {
    let mut at = copy.to_path_buf();
    let parts: Vec<&[u8]> = relative.split(|b| *b == b'/').collect();
    for part in &parts[..parts.len().saturating_sub(1)] {
        at.push(paths::os_str(part));
        match std::fs::symlink_metadata(&at) {
            Ok(meta) if meta.is_dir() => continue,
            Ok(_) => remove_any(&at)?,
            Err(_) => {}
        }
        fs_err::create_dir(&at).map_err(Error::fs)?;
    }
    let path = copy.join(paths::os_str(relative));
    remove_any(&path)?;
    Ok(path)
}

/// Removes what is at `path`, a directory with all it holds, whatever modes a check gave the
/// directories in it.
fn remove_any(path: &Path) -> Result<()> {
    let removed = match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => remove_tree(path),
        Ok(_) => std::fs::remove_file(path),
        Err(_) => Ok(()),
    };
    removed.map_err(|e| Error::io("remove", path, &e))
}

fn remove_tree(dir: &Path) -> std::io::Result<()> {
    if std::fs::remove_dir_all(dir).is_ok() {
        return Ok(());
    }
    // A directory the check made unreadable or unwritable: opened up, never through a link.
    let _ = files::reset_dir(dir, 0o700);
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            remove_tree(&entry.path())?;
        } else {
            std::fs::remove_file(entry.path())?;
        }
    }
    std::fs::remove_dir(dir)
}

/// Removes a warm copy and its cache, so the next sync starts from nothing.
pub(crate) fn discard(copy: &Path, index: &Path) {
    let _ = std::fs::remove_file(index);
    let _ = std::fs::remove_file(dirs_file(index));
    let aside = copy.with_file_name(format!("discarded-{}", std::process::id()));
    let gone = if std::fs::rename(copy, &aside).is_ok() {
        remove_tree(&aside)
    } else {
        remove_tree(copy)
    };
    let _ = gone;
}

/// Writes the cache of `files` to `index`, in git's index format. Every path vigil placed is
/// in it, so that it is removed from the copy once the tree no longer has it; those whose
/// copy must be written again next time carry zeroed stat data: links, files read outside the
/// walk, and what `touched` names (paths, or directories of them, that a hold wrote over or
/// removed after the walk). Its mtime is the seal: it is written after the last change
/// vigil makes to the copy, before the check runs.
pub(super) fn seal(index: &Path, copy: &Path, files: &[Hashed], touched: &[String]) -> Result<()> {
    // The directories first: their inodes as the seal leaves them (a name that is not UTF-8
    // is left out, and its directory is made again each time).
    let expected = Expected::of(files.iter().map(|f| f.path.as_slice()));
    let mut dirs = Vec::new();
    for dir in expected.dirs.keys().filter(|d| !d.is_empty()) {
        let (Ok(name), Ok(meta)) = (
            std::str::from_utf8(dir),
            std::fs::symlink_metadata(copy.join(paths::os_str(dir))),
        ) else {
            continue;
        };
        if meta.is_dir() {
            dirs.push((name.to_string(), files::inode(&meta)));
        }
    }
    let listed = serde_json::to_vec(&dirs)
        .map_err(|e| Error::Io(format!("cannot write the check's cache: {e}")))?;
    let at = dirs_file(index);
    atomic::write_atomic_as(&at, &listed, 0o600, atomic::Durability::Skip)
        .map_err(|e| Error::io("write", &at, &e))?;
    let mut state = gix_index::State::new(gix_index::hash::Kind::Sha1);
    let under = |path: &[u8]| {
        touched.iter().any(|t| {
            let t = t.as_bytes();
            path.starts_with(t) && (path.len() == t.len() || path[t.len()] == b'/')
        })
    };
    for file in files {
        let mode = match file.mode {
            Mode::File => gix_index::entry::Mode::FILE,
            Mode::Executable => gix_index::entry::Mode::FILE_EXECUTABLE,
            Mode::Symlink => gix_index::entry::Mode::SYMLINK,
        };
        let stat = match file.stat {
            Some(stat) if file.mode != Mode::Symlink && !under(&file.path) => stat,
            _ => gix_index::entry::Stat::default(),
        };
        state.dangerously_push_entry(
            stat,
            gix_index::hash::ObjectId::from_bytes_or_panic(&file.id),
            gix_index::entry::Flags::empty(),
            mode,
            file.path.as_slice().into(),
        );
    }
    state.sort_entries();
    let mut bytes = Vec::new();
    state
        .write_to(&mut bytes, gix_index::write::Options::default())
        .map_err(|e| Error::Io(format!("cannot write the check's cache: {e}")))?;
    // The trailer git's reader expects (no checksum: the file is in the protected state).
    bytes.extend_from_slice(&[0u8; 20]);
    atomic::write_atomic_as(index, &bytes, 0o600, atomic::Durability::Skip)
        .map_err(|e| Error::io("write", index, &e))
}
