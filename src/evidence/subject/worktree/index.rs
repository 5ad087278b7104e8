//! The index, as the worktree subject reads it: its path list (checked as git checks a path;
//! a submodule, a sparse checkout or a split index denies), and for what only informs, the
//! stat data, blob id and mode it caches for each path, looked up during a `by_stat` walk.

use std::fs::File;
use std::path::Path;

use crate::error;
use crate::error::{Error, Result};
use crate::evidence::subject::tree::{Mode, ObjectId};
use crate::evidence::subject::worktree::Hashed;
use crate::sys::files;
use crate::sys::files::read_regular;
use crate::sys::git::Repository;

/// What the index caches for a tracked path: its stat data, blob id and mode. Only
/// `by_stat` believes it, for what informs (SPEC §9); no gate reads it.
#[derive(Clone, Copy)]
pub(super) struct Cached {
    pub(super) stat: gix_index::entry::Stat,
    pub(super) mode: Mode,
    pub(super) id: ObjectId,
}

/// The paths the index tracks, in its (byte) order, with what it caches for each.
pub(super) struct Tracked {
    pub(super) paths: Vec<Vec<u8>>,
    /// For each path when asked for (else empty); `None` for a conflict, or a mode the tree
    /// cannot hold.
    pub(super) cached: Vec<Option<Cached>>,
    /// The sum of the sizes cached, a hint for how much hashing is ahead.
    pub(super) cached_bytes: u64,
    /// When the index was last written: an entry whose file changed at or after this time
    /// may hold stat data that is the same before and after the change (git's "racy" entry).
    pub(super) written: filetime::FileTime,
}

/// How stat data is compared: as git compares it by default (`core.trustctime`,
/// `core.checkStat=default`), with nanoseconds.
const STAT_MATCH: gix_index::entry::stat::Options = gix_index::entry::stat::Options {
    trust_ctime: true,
    check_stat: true,
    use_nsec: true,
    use_stdev: false,
};

/// The index's stat data, looked up by path during a `by_stat` walk. Its paths are in byte
/// order, so a directory's entries lie together: each directory finds its own range once, and
/// each of its files is looked up in that range (a hash map of every path cost more, in cache
/// misses, than the stat calls it served).
pub(super) struct Known<'a> {
    pub(super) tracked: &'a Tracked,
    /// Whether the tree's id is wanted: without it, an untracked file is changed unread.
    pub(super) subject: bool,
    /// Whether a `.gitattributes` file was seen.
    pub(super) attributes: std::sync::atomic::AtomicBool,
}

impl Known<'_> {
    /// The range of the index's paths that lie below `dir` ("" for the top).
    pub(super) fn range(&self, dir: &[u8]) -> std::ops::Range<usize> {
        let paths = &self.tracked.paths;
        if dir.is_empty() {
            return 0..paths.len();
        }
        // Below "d" lies exactly what sorts from "d/" up to "d0" ('0' follows '/').
        let mut from = dir.to_vec();
        from.push(b'/');
        let start = paths.partition_point(|p| p.as_slice() < from.as_slice());
        *from.last_mut().expect("just pushed") = b'0';
        let end = start + paths[start..].partition_point(|p| p.as_slice() < from.as_slice());
        start..end
    }

    /// What the index caches for `relative`, looked up within `range`.
    pub(super) fn cached(&self, range: std::ops::Range<usize>, relative: &[u8]) -> Option<Cached> {
        let start = range.start;
        let found = self.tracked.paths[range]
            .binary_search_by(|p| p.as_slice().cmp(relative))
            .ok()?;
        self.tracked.cached[start + found]
    }

    /// The cached id and mode of `name` in `dir`, when its stat data is what the index holds
    /// and the entry is not racy: the file is then taken as unchanged without reading it.
    pub(super) fn unchanged(
        &self,
        range: std::ops::Range<usize>,
        relative: &[u8],
        dir: &File,
        name: &std::ffi::OsStr,
    ) -> Option<Cached> {
        let cached = self.cached(range, relative)?;
        if cached.mode == Mode::Symlink || cached.stat.is_racy(self.tracked.written, STAT_MATCH) {
            return None;
        }
        let stat = files::stat_at(dir, name)?;
        if !stat.regular || file_mode(stat.owner_may_execute) != cached.mode {
            return None;
        }
        cached
            .stat
            .matches(&index_stat(&stat), STAT_MATCH)
            .then_some(cached)
    }

    /// Whether what was hashed differs from what the index holds (or the index lacks it).
    pub(super) fn differs(&self, hashed: &Hashed) -> bool {
        self.cached(0..self.tracked.paths.len(), &hashed.path)
            .is_none_or(|cached| cached.mode != hashed.mode || cached.id != hashed.id)
    }
}

/// Stat data as the index keeps it: seconds and sizes cut to 32 bits.
pub(super) fn index_stat(stat: &files::StatAt) -> gix_index::entry::Stat {
    let time = |secs: i64, nsecs: i64| gix_index::entry::stat::Time {
        secs: secs as u32,
        nsecs: nsecs as u32,
    };
    gix_index::entry::Stat {
        mtime: time(stat.mtime.0, stat.mtime.1),
        ctime: time(stat.ctime.0, stat.ctime.1),
        dev: stat.dev as u32,
        ino: stat.ino as u32,
        uid: stat.uid,
        gid: stat.gid,
        size: stat.size as u32,
    }
}

/// A regular file's mode in a tree: executable when its owner may execute it (core.fileMode).
pub(super) fn file_mode(owner_may_execute: bool) -> Mode {
    if owner_may_execute {
        Mode::Executable
    } else {
        Mode::File
    }
}

/// The largest index a `by_stat` walk reads: some 800,000 entries, far more than a handoff's
/// budget can stat (an index is the agent's to write).
pub(super) const MAX_STAT_INDEX: u64 = 64 << 20;

/// The paths the index tracks, and with `cache` what it caches for each (only a `by_stat`
/// walk asks, and believes it; for a gate `cached` stays empty). A submodule or a sparse
/// checkout denies: the files the tree would name are not all on disk to be read.
pub(super) fn tracked(repository: &Repository, cache: bool) -> Result<Tracked> {
    read_index(&repository.git_dir.join("index"), cache)
}

impl Tracked {
    pub(super) fn empty() -> Tracked {
        Tracked {
            paths: Vec::new(),
            cached: Vec::new(),
            cached_bytes: 0,
            written: filetime::FileTime::zero(),
        }
    }
}

/// The paths of the index at `path` (a repository's, or the warm copy's cache), with `cache`
/// what it caches for each.
pub(super) fn read_index(path: &Path, cache: bool) -> Result<Tracked> {
    let path = path.to_path_buf();
    // Taken before the read: an index written meanwhile only makes more entries racy.
    let written = std::fs::symlink_metadata(&path).map_or(filetime::FileTime::zero(), |m| {
        filetime::FileTime::from_last_modification_time(&m)
    });
    let unreadable = |why: String| {
        Error::input(format!(
            "cannot read the index {}: {why}; the worktree subject needs its path list",
            path.display()
        ))
    };
    // Read here, never waiting on a FIFO in its place, and never more than an index can be.
    let bytes = match read_regular(&path, MAX_INDEX, true) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => {
            return Ok(Tracked {
                paths: Vec::new(),
                cached: Vec::new(),
                cached_bytes: 0,
                written,
            });
        }
        Err(e) => return Err(unreadable(error::plain_io(&e))),
    };
    // Its checksum is not verified: the agent can write the index and its checksum alike,
    // and only the path list is used.
    let (index, _) = gix_index::State::from_bytes(
        &bytes,
        filetime::FileTime::zero(),
        gix_index::hash::Kind::Sha1,
        Default::default(),
    )
    .map_err(|e| unreadable(e.to_string()))?;
    if index.link().is_some() {
        return Err(unreadable(
            "it is a split index, whose paths lie in another file (run `git update-index --no-split-index`)".into(),
        ));
    }
    let mut paths: Vec<Vec<u8>> = Vec::with_capacity(index.entries().len());
    let mut cached: Vec<Option<Cached>> =
        Vec::with_capacity(if cache { index.entries().len() } else { 0 });
    let mut cached_bytes = 0u64;
    for entry in index.entries() {
        cached_bytes = cached_bytes.saturating_add(u64::from(entry.stat.size));
        let name = entry.path(&index);
        let shown = || String::from_utf8_lossy(name).into_owned();
        if entry.mode.is_submodule() {
            return Err(Error::input(format!(
                "{} is a submodule; the worktree subject cannot vouch for a submodule's content (use --subject file:PATH, or check it in CI)",
                shown()
            )));
        }
        if index.is_sparse()
            || entry.mode.is_sparse()
            || entry.flags.contains(gix_index::entry::Flags::SKIP_WORKTREE)
        {
            return Err(Error::input(format!(
                "{} is outside a sparse checkout (skip-worktree); the worktree subject needs every tracked file on disk (run `git sparse-checkout disable`)",
                shown()
            )));
        }
        // Windows names are Unicode: bytes that are not UTF-8 would be read with U+FFFD in
        // their place, two index paths naming one file.
        if files::NTFS_NAMES && std::str::from_utf8(name).is_err() {
            return Err(Error::input(format!(
                "the index names {:?}, which is not UTF-8 and so names no file here; the worktree subject cannot vouch for it",
                shown()
            )));
        }
        // As git's own verify_path: no empty, `.`, `..` or `.git` (in any case) component,
        // so no path leaves the tree or names one thing in two spellings.
        for component in name.split(|b| *b == b'/') {
            gix_index::validate::path::component(component.into(), None, PLAIN_COMPONENTS)
                .map_err(|e| {
                    Error::input(format!(
                        "the index names {:?}, which git never tracks ({e}); the worktree subject cannot vouch for it",
                        shown()
                    ))
                })?;
        }
        // An unmerged path has an entry per stage: it is one path of the tree, and it
        // differs from what the index holds, whatever the stat data says.
        if paths.last().is_some_and(|last| last.as_slice() == name) {
            if let Some(last) = cached.last_mut() {
                *last = None;
            }
            continue;
        }
        paths.push(name.to_vec());
        if !cache {
            continue;
        }
        let mode = match entry.mode {
            gix_index::entry::Mode::FILE => Some(Mode::File),
            gix_index::entry::Mode::FILE_EXECUTABLE => Some(Mode::Executable),
            gix_index::entry::Mode::SYMLINK => Some(Mode::Symlink),
            _ => None,
        };
        let id = <ObjectId>::try_from(entry.id.as_bytes()).ok();
        cached.push(match (mode, id) {
            (Some(mode), Some(id)) if entry.stage_raw() == 0 => Some(Cached {
                stat: entry.stat,
                mode,
                id,
            }),
            _ => None,
        });
    }
    Ok(Tracked {
        paths,
        cached,
        cached_bytes,
        written,
    })
}

/// Git's own rules for a path component: on Windows with git for Windows' protections
/// (`core.protectNTFS`: no `GIT~1`, no trailing dot or space, no reserved names, no `:`), so
/// no tracked path names `.git` in another spelling; elsewhere git's on Linux.
pub(super) const PLAIN_COMPONENTS: gix_index::validate::path::component::Options =
    gix_index::validate::path::component::Options {
        protect_windows: files::NTFS_NAMES,
        protect_hfs: false,
        protect_ntfs: files::NTFS_NAMES,
    };
/// The largest index read: far past any real one, short of what would exhaust memory.
const MAX_INDEX: u64 = 2 << 30;
