//! The `worktree` subject (SPEC §5, §9): the git tree id of the files as they are on disk,
//! computed here from their bytes. No git process runs and nothing git caches is believed: not
//! the index's stat data, its cached trees or its object ids, not `core.worktree`, end-of-line
//! conversion, filters or attributes, not `GIT_*` variables. The index gives only its path list
//! (tracked files inside ignored directories count), the `.gitignore` files, `info/exclude` and
//! `core.excludesFile` can only leave untracked files out (read by the `ignore` crate, ripgrep's),
//! and every file named is read and hashed, in parallel.
//!
//! Here: `index` (the index's path list, and the stat data it caches), `rules` (the ignore
//! rules), `walk` (the walk of the tree, by several threads), `reader` (a file read and hashed,
//! copied for a snapshot) and `warm` (the warm copy's cache).

mod index;
mod reader;
mod rules;
mod walk;
pub(crate) mod warm;

use std::path::Path;

use crate::error::{Error, Result};
use crate::evidence::subject::tree::{self, Mode, ObjectId};
use crate::sys::files;
use crate::sys::git::Repository;
use crate::sys::paths;
use crate::sys::time::Deadline;
use index::{Cached, Known, MAX_STAT_INDEX, Tracked, file_mode, read_index, tracked};
use reader::Reader;
use walk::{Walk, threads};

/// The largest file hashed by default: a larger one denies at once (`--max-file-size`).
pub(crate) const DEFAULT_MAX_FILE_SIZE: u64 = 1 << 30;
/// From how many tracked files the tree is walked and hashed by several threads.
const PARALLEL_FROM: u64 = 2000;
/// Or from how many bytes of tracked files, by the sizes the index caches.
const PARALLEL_BYTES: u64 = 32 << 20;

/// How the tree is computed.
pub(crate) struct Options<'a> {
    pub max_file_size: u64,
    pub deadline: Deadline,
    /// Left out of the tree, tracked or not: vigil's own state directory (writing a marker
    /// must not change what it vouches for).
    pub exclude: Option<&'a Path>,
    /// `run --snapshot`: every file hashed is also written here, from the same bytes, so the
    /// copy is exactly the content the id names.
    pub snapshot: Option<&'a Path>,
    /// With `snapshot`, the warm copy's cache: the copy is kept, and brought to the tree.
    pub warm: Option<&'a warm::Warm>,
}

/// The working tree as the index's stat data tells it (SPEC §9: it only informs, and says
/// `by stat, not verified`): its tree id and the paths that differ from the index.
pub(crate) struct ByStat {
    /// `None` when not asked for, or when attribute files are in the tree or the repository:
    /// the index then holds blobs after git's conversions (end of line, filters), which are
    /// not the bytes a marker's subject hashes.
    pub tree: Option<ObjectId>,
    /// Modified, untracked or gone, against the index, in byte order.
    pub changed: Vec<Vec<u8>>,
}

/// `git-tree:<id>` of the working tree that holds `start`.
pub(crate) fn tree_id(start: &Path, options: &Options) -> Result<String> {
    let repository = Repository::locate(start)?;
    let id = hash(&repository, options)?;
    Ok(format!("git-tree:{}", tree::hex(&id)))
}

/// A file of the tree: its path from the top, mode and blob id.
struct Hashed {
    path: Vec<u8>,
    mode: Mode,
    id: ObjectId,
    /// In a `by_stat` walk: whether it differs from the index (or is not in it).
    changed: bool,
    /// In a warm walk: the stat data it was read with, for the cache.
    stat: Option<gix_index::entry::Stat>,
}

/// The tree id of `repository`'s working tree, from the bytes of every file.
pub(crate) fn hash(repository: &Repository, options: &Options) -> Result<ObjectId> {
    walk(repository, options, None)?
        .0
        .tree
        .ok_or_else(|| Error::input("the tree was not hashed"))
}

/// The tree id of `repository`'s working tree by the index's stat data: a tracked file whose
/// stat data is what the index holds (and not racy) is taken as the blob the index names,
/// unread, as `git status` takes it; every other file is read (an untracked one only when
/// `subject`, the tree's id, is wanted). For what only informs (the handoff's dirty state and
/// its markers' match, SPEC §9): a gate never calls this.
pub(crate) fn by_stat(repository: &Repository, options: &Options, subject: bool) -> Result<ByStat> {
    if options.snapshot.is_some() {
        return Err(Error::input(
            "a snapshot copies the bytes it hashes; it cannot be taken by stat",
        ));
    }
    walk(repository, options, Some(subject)).map(|(by_stat, _)| by_stat)
}

fn walk(
    repository: &Repository,
    options: &Options,
    by_stat: Option<bool>,
) -> Result<(ByStat, Vec<Hashed>)> {
    let top = repository.top.as_path();
    let exclude = options
        .exclude
        .and_then(|dir| {
            paths::canonical(dir)
                .strip_prefix(top)
                .ok()
                .map(Path::to_path_buf)
        })
        .filter(|inside| !inside.as_os_str().is_empty());
    let exclude = exclude.as_ref().map(|dir| paths::bytes(dir.as_os_str()));
    let excluded = |relative: &[u8]| {
        exclude.is_some_and(|dir| {
            relative.starts_with(dir)
                && (relative.len() == dir.len() || relative[dir.len()] == b'/')
        })
    };
    // Threads cost a millisecond or two to start and settle: a small tree is walked in one.
    // The index's size tells a large tree (an entry takes some 70 bytes) before it is read; a
    // small index is read first, and the sizes it caches for its files say whether there is
    // much to hash (a hint for the work only: no size from it is believed for a file).
    let index_size =
        std::fs::symlink_metadata(repository.git_dir.join("index")).map_or(0, |m| m.len());
    let large = index_size >= PARALLEL_FROM * 70;
    // No tree id when not wanted, or when the index's blobs may be converted ones.
    let mut no_tree = false;
    let (tracked, walked) = if let Some(subject) = by_stat {
        if index_size > MAX_STAT_INDEX {
            return Err(Error::input(format!(
                "the index is over {} MiB, more than a handoff can stat in its budget",
                MAX_STAT_INDEX >> 20
            )));
        }
        // The walk looks every file up in the index: it is read first.
        let tracked = tracked(repository, true)?;
        let known = Known {
            tracked: &tracked,
            subject,
            attributes: std::sync::atomic::AtomicBool::new(false),
        };
        let threads = if large { threads() } else { 1 };
        let walked =
            Walk::new(top, &repository.git_dir, exclude, options, Some(&known)).run(threads);
        no_tree = known.attributes.into_inner()
            || repository.git_dir.join("info/attributes").exists()
            || !subject;
        (Ok(tracked), walked)
    } else if large {
        // The index is read while the tree is walked.
        std::thread::scope(|scope| {
            let tracked = scope.spawn(|| tracked(repository, !files::MODES_ON_DISK));
            let walked = Walk::new(top, &repository.git_dir, exclude, options, None).run(threads());
            let tracked = tracked.join().expect("reading the index does not panic");
            (tracked, walked)
        })
    } else {
        let tracked = tracked(repository, !files::MODES_ON_DISK);
        let much = tracked
            .as_ref()
            .is_ok_and(|tracked| tracked.cached_bytes >= PARALLEL_BYTES);
        let threads = if much { threads() } else { 1 };
        let walked = Walk::new(top, &repository.git_dir, exclude, options, None).run(threads);
        (tracked, walked)
    };
    let tracked = tracked?;
    let mut files = walked?;
    files.sort_unstable_by(|a, b| a.path.cmp(&b.path));
    // Tracked paths the walk did not reach (ignored, or inside an ignored directory). Both
    // lists are in byte order, the index's own: one pass over each.
    let mut reader = Reader::new(options);
    let mut extra = Vec::new();
    let mut gone = Vec::new();
    let mut next = files.iter().map(|f| f.path.as_slice()).peekable();
    for (at, path) in tracked.paths.iter().enumerate() {
        while next.next_if(|walked| *walked < path.as_slice()).is_some() {}
        if next.next_if(|walked| *walked == path.as_slice()).is_some() || excluded(path) {
            continue;
        }
        options.deadline.check("hashing the worktree")?;
        match reader.tracked(top, path)? {
            Some(mut hashed) => {
                hashed.changed = by_stat.is_some()
                    && tracked.cached[at]
                        .is_none_or(|c| c.mode != hashed.mode || c.id != hashed.id);
                extra.push(hashed);
            }
            None if by_stat.is_some() => gone.push(path.clone()),
            None => {}
        }
    }
    if !extra.is_empty() {
        files.extend(extra);
        files.sort_unstable_by(|a, b| a.path.cmp(&b.path));
    }
    if !files::MODES_ON_DISK {
        modes_from_the_index(&mut files, &tracked);
    }
    let tree = if no_tree {
        None
    } else {
        Some(tree::tree_id(
            files.iter().map(|f| (f.path.as_slice(), f.mode, f.id)),
        )?)
    };
    let mut changed: Vec<Vec<u8>> = files
        .iter()
        .filter(|f| f.changed)
        .map(|f| f.path.clone())
        .chain(gone)
        .collect();
    changed.sort_unstable();
    Ok((ByStat { tree, changed }, files))
}

/// The warm copy brought to the working tree (`options.snapshot` the copy, `options.warm` its
/// cache): what the check wrote removed, each changed file read, hashed and copied, each
/// unchanged one taken from the cache, what is gone removed. The tree's id is that of the copy.
pub(crate) fn warm_sync(repository: &Repository, options: &Options) -> Result<Synced> {
    let warm = options
        .warm
        .ok_or_else(|| Error::input("a warm walk needs its cache"))?;
    warm.sweep()?;
    let (by_stat, files) = walk(repository, options, None)?;
    warm.prune(&files)?;
    Ok(Synced {
        tree: by_stat
            .tree
            .ok_or_else(|| Error::input("the tree was not hashed"))?,
        files,
    })
}

/// A warm copy as [`warm_sync`] left it.
pub(crate) struct Synced {
    pub tree: ObjectId,
    files: Vec<Hashed>,
}

impl Synced {
    /// The links of the tree, by their paths from the top.
    pub(crate) fn links(&self) -> impl Iterator<Item = &[u8]> {
        self.files
            .iter()
            .filter(|f| f.mode == Mode::Symlink)
            .map(|f| f.path.as_slice())
    }

    /// The mode and blob id the copy holds at `path`.
    pub(crate) fn entry(&self, path: &[u8]) -> Option<(Mode, ObjectId)> {
        let at = self
            .files
            .binary_search_by(|f| f.path.as_slice().cmp(path))
            .ok()?;
        Some((self.files[at].mode, self.files[at].id))
    }

    /// Writes the cache: after the last change vigil makes to the copy, before the check runs.
    /// `touched`: the paths (or directories) changed in the copy since the walk.
    pub(crate) fn seal(&self, index: &Path, copy: &Path, touched: &[String]) -> Result<()> {
        warm::seal(index, copy, &self.files, touched)
    }
}

/// Where the disk keeps no modes (Windows: `core.fileMode` and `core.symlinks` false), a file's
/// mode is what the index records for its path, as `git add` keeps it there: executable, or a
/// link checked out as a file that holds its target (the same blob). A file the index does not
/// hold, or holds as a plain file, is a plain file.
fn modes_from_the_index(files: &mut [Hashed], tracked: &Tracked) {
    let mut at = 0;
    for file in files.iter_mut().filter(|f| f.mode == Mode::File) {
        at += tracked.paths[at..].partition_point(|p| p.as_slice() < file.path.as_slice());
        if tracked.paths.get(at).is_some_and(|p| *p == file.path)
            && let Some(Some(cached)) = tracked.cached.get(at)
            && matches!(cached.mode, Mode::Executable | Mode::Symlink)
        {
            file.mode = cached.mode;
        }
    }
}

/// Every file of the working tree as its subject hashes it: the path from the top and the
/// blob id, in byte order (what `marker-writer show --all` compares with a published tree).
pub(crate) fn listing(
    repository: &Repository,
    options: &Options,
) -> Result<Vec<(Vec<u8>, ObjectId)>> {
    let (_, files) = walk(repository, options, None)?;
    Ok(files.into_iter().map(|f| (f.path, f.id)).collect())
}
