//! The `worktree` subject (SPEC §5, §9): the git tree id of the files as they are on disk,
//! computed here from their bytes. No git process runs and nothing git caches is believed: not
//! the index's stat data, its cached trees or its object ids, not `core.worktree`, end-of-line
//! conversion, filters or attributes, not `GIT_*` variables. The index gives only its path list
//! (tracked files inside ignored directories count), the `.gitignore` files, `info/exclude` and
//! `core.excludesFile` can only leave untracked files out (read by the `ignore` crate, ripgrep's),
//! and every file named is read and hashed, in parallel.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::error;
use crate::error::{Error, Result};
use crate::evidence::subject::tree::{self, BlobHasher, Mode, ObjectId};
use crate::sys::files;
use crate::sys::files::read_regular;
use crate::sys::git::Repository;
use crate::sys::paths;
use crate::sys::time::Deadline;

/// The largest file hashed by default: a larger one denies at once (`--max-file-size`).
pub const DEFAULT_MAX_FILE_SIZE: u64 = 1 << 30;
/// Files are read in pieces of this size, so a large one never sits in memory whole.
const CHUNK: usize = 256 * 1024;
/// From how many tracked files the tree is walked and hashed by several threads.
const PARALLEL_FROM: u64 = 2000;
/// Or from how many bytes of tracked files, by the sizes the index caches.
const PARALLEL_BYTES: u64 = 32 << 20;

/// How the tree is computed.
pub struct Options<'a> {
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

pub mod warm;

/// What the index caches for a tracked path: its stat data, blob id and mode. Only
/// `by_stat` believes it, for what informs (SPEC §9); no gate reads it.
#[derive(Clone, Copy)]
struct Cached {
    stat: gix_index::entry::Stat,
    mode: Mode,
    id: ObjectId,
}

/// The paths the index tracks, in its (byte) order, with what it caches for each.
struct Tracked {
    paths: Vec<Vec<u8>>,
    /// For each path when asked for (else empty); `None` for a conflict, or a mode the tree
    /// cannot hold.
    cached: Vec<Option<Cached>>,
    /// The sum of the sizes cached, a hint for how much hashing is ahead.
    cached_bytes: u64,
    /// When the index was last written: an entry whose file changed at or after this time
    /// may hold stat data that is the same before and after the change (git's "racy" entry).
    written: filetime::FileTime,
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
struct Known<'a> {
    tracked: &'a Tracked,
    /// Whether the tree's id is wanted: without it, an untracked file is changed unread.
    subject: bool,
    /// Whether a `.gitattributes` file was seen.
    attributes: std::sync::atomic::AtomicBool,
}

impl Known<'_> {
    /// The range of the index's paths that lie below `dir` ("" for the top).
    fn range(&self, dir: &[u8]) -> std::ops::Range<usize> {
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
    fn cached(&self, range: std::ops::Range<usize>, relative: &[u8]) -> Option<Cached> {
        let start = range.start;
        let found = self.tracked.paths[range]
            .binary_search_by(|p| p.as_slice().cmp(relative))
            .ok()?;
        self.tracked.cached[start + found]
    }

    /// The cached id and mode of `name` in `dir`, when its stat data is what the index holds
    /// and the entry is not racy: the file is then taken as unchanged without reading it.
    fn unchanged(
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
    fn differs(&self, hashed: &Hashed) -> bool {
        self.cached(0..self.tracked.paths.len(), &hashed.path)
            .is_none_or(|cached| cached.mode != hashed.mode || cached.id != hashed.id)
    }
}

/// Stat data as the index keeps it: seconds and sizes cut to 32 bits.
fn index_stat(stat: &files::StatAt) -> gix_index::entry::Stat {
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
fn file_mode(owner_may_execute: bool) -> Mode {
    if owner_may_execute {
        Mode::Executable
    } else {
        Mode::File
    }
}

/// The working tree as the index's stat data tells it (SPEC §9: it only informs, and says
/// `by stat, not verified`): its tree id and the paths that differ from the index.
pub struct ByStat {
    /// `None` when not asked for, or when attribute files are in the tree or the repository:
    /// the index then holds blobs after git's conversions (end of line, filters), which are
    /// not the bytes a marker's subject hashes.
    pub tree: Option<ObjectId>,
    /// Modified, untracked or gone, against the index, in byte order.
    pub changed: Vec<Vec<u8>>,
}

/// The largest index a `by_stat` walk reads: some 800,000 entries, far more than a handoff's
/// budget can stat (an index is the agent's to write).
const MAX_STAT_INDEX: u64 = 64 << 20;

/// The paths the index tracks, and with `cache` what it caches for each (only a `by_stat`
/// walk asks, and believes it; for a gate `cached` stays empty). A submodule or a sparse
/// checkout denies: the files the tree would name are not all on disk to be read.
fn tracked(repository: &Repository, cache: bool) -> Result<Tracked> {
    read_index(&repository.git_dir.join("index"), cache)
}

impl Tracked {
    fn empty() -> Tracked {
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
fn read_index(path: &Path, cache: bool) -> Result<Tracked> {
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
const PLAIN_COMPONENTS: gix_index::validate::path::component::Options =
    gix_index::validate::path::component::Options {
        protect_windows: files::NTFS_NAMES,
        protect_hfs: false,
        protect_ntfs: files::NTFS_NAMES,
    };
/// The largest index read: far past any real one, short of what would exhaust memory.
const MAX_INDEX: u64 = 2 << 30;
/// The largest ignore file read, and all of them together: past this they deny.
const MAX_IGNORE_FILE: u64 = 1 << 20;
const MAX_IGNORE_TOTAL: u64 = 8 << 20;

/// `git-tree:<id>` of the working tree that holds `start`.
pub fn tree_id(start: &Path, options: &Options) -> Result<String> {
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
pub fn hash(repository: &Repository, options: &Options) -> Result<ObjectId> {
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
pub fn by_stat(repository: &Repository, options: &Options, subject: bool) -> Result<ByStat> {
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
pub fn warm_sync(repository: &Repository, options: &Options) -> Result<Synced> {
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
pub struct Synced {
    pub tree: ObjectId,
    files: Vec<Hashed>,
}

impl Synced {
    /// The links of the tree, by their paths from the top.
    pub fn links(&self) -> impl Iterator<Item = &[u8]> {
        self.files
            .iter()
            .filter(|f| f.mode == Mode::Symlink)
            .map(|f| f.path.as_slice())
    }

    /// The mode and blob id the copy holds at `path`.
    pub fn entry(&self, path: &[u8]) -> Option<(Mode, ObjectId)> {
        let at = self
            .files
            .binary_search_by(|f| f.path.as_slice().cmp(path))
            .ok()?;
        Some((self.files[at].mode, self.files[at].id))
    }

    /// Writes the cache: after the last change vigil makes to the copy, before the check runs.
    /// `touched`: the paths (or directories) changed in the copy since the walk.
    pub fn seal(&self, index: &Path, copy: &Path, touched: &[String]) -> Result<()> {
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
pub fn listing(repository: &Repository, options: &Options) -> Result<Vec<(Vec<u8>, ObjectId)>> {
    let (_, files) = walk(repository, options, None)?;
    Ok(files.into_iter().map(|f| (f.path, f.id)).collect())
}

/// The ignore rules that hold in a directory: its own `.gitignore`, then its parents'.
struct Rules {
    here: Option<ignore::gitignore::Gitignore>,
    parent: Option<Arc<Rules>>,
}

/// Work for a walker: a directory to read, by its path from the top ("" for the top), or a
/// large file to hash on its own, so that several threads share one directory's big files.
enum Job {
    Dir { dir: Vec<u8>, rules: Arc<Rules> },
    File { relative: Vec<u8> },
}

/// From this size, with several threads, a file is hashed as a job of its own.
const LARGE_FILE: u64 = 1 << 20;

/// The walk of a working tree as `git add -A` sees it: every directory that is not ignored is
/// read, every file and symlink in it that is not ignored is hashed, by `threads` workers.
/// Files are opened from their directory's descriptor, so no path is looked up twice.
struct Walk<'a> {
    top: &'a Path,
    exclude: Option<&'a [u8]>,
    options: &'a Options<'a>,
    /// Below every `.gitignore`: `info/exclude`, then `core.excludesFile`.
    repository_rules: Vec<ignore::gitignore::Gitignore>,
    /// The bytes of ignore rules read so far, held under `MAX_IGNORE_TOTAL`.
    ignore_bytes: std::sync::atomic::AtomicU64,
    /// How many threads walk: with more than one, large files become jobs of their own.
    threads: std::sync::atomic::AtomicUsize,
    queue: Mutex<Queue>,
    ready: std::sync::Condvar,
    found: Mutex<Vec<Hashed>>,
    /// In a `by_stat` walk, the index's stat data.
    known: Option<&'a Known<'a>>,
    /// In a warm walk, the warm copy's cache.
    warm: Option<Known<'a>>,
}

#[derive(Default)]
struct Queue {
    jobs: Vec<Job>,
    /// Workers reading a directory now (which may queue more).
    busy: usize,
    failure: Option<Error>,
}

impl<'a> Walk<'a> {
    fn new(
        top: &'a Path,
        git_dir: &Path,
        exclude: Option<&'a [u8]>,
        options: &'a Options<'a>,
        known: Option<&'a Known<'a>>,
    ) -> Walk<'a> {
        let ignore_bytes = std::sync::atomic::AtomicU64::new(0);
        let mut repository_rules = Vec::new();
        // Below the tree's own .gitignore files: info/exclude, then core.excludesFile of the
        // user's git configuration (as git finds it: $HOME, XDG).
        let mut failure = None;
        let info = ignore_rules(&git_dir.join("info/exclude"), b"", true, &ignore_bytes);
        // The user's own file, out of the agent's reach: one it cannot read, git passes over
        // (with a warning), and so does vigil, to name the tree git would.
        let global = ignore::gitignore::gitconfig_excludes_path().filter(|file| {
            !matches!(std::fs::File::open(file), Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied)
        });
        let global = global.map(|file| ignore_rules(&file, b"", true, &ignore_bytes));
        for rules in [Some(info), global].into_iter().flatten() {
            match rules {
                Ok(Some(rules)) => repository_rules.push(rules),
                Ok(None) => {}
                Err(e) => {
                    failure.get_or_insert(e);
                }
            }
        }
        Walk {
            top,
            exclude,
            options,
            repository_rules,
            ignore_bytes,
            threads: std::sync::atomic::AtomicUsize::new(1),
            queue: Mutex::new(Queue {
                failure,
                ..Queue::default()
            }),
            ready: std::sync::Condvar::new(),
            found: Mutex::default(),
            known,
            warm: options.warm.map(|warm| Known {
                tracked: &warm.tracked,
                subject: true,
                attributes: std::sync::atomic::AtomicBool::new(false),
            }),
        }
    }

    fn run(self, threads: usize) -> Result<Vec<Hashed>> {
        let root = Arc::new(Rules {
            here: None,
            parent: None,
        });
        self.queue.lock().unwrap().jobs.push(Job::Dir {
            dir: Vec::new(),
            rules: root,
        });
        let threads = threads.max(1);
        self.threads
            .store(threads, std::sync::atomic::Ordering::Relaxed);
        std::thread::scope(|scope| {
            for _ in 1..threads {
                scope.spawn(|| self.work());
            }
            self.work();
        });
        let queue = self.queue.into_inner().unwrap();
        match queue.failure {
            Some(e) => Err(e),
            None => Ok(self.found.into_inner().unwrap()),
        }
    }

    /// One worker: takes directories until none is left and none is being read.
    fn work(&self) {
        let mut reader = Reader::new(self.options);
        let mut mine = Vec::new();
        loop {
            let job = {
                let mut queue = self.queue.lock().unwrap();
                loop {
                    if queue.failure.is_some() {
                        break None;
                    }
                    if let Some(job) = queue.jobs.pop() {
                        queue.busy += 1;
                        break Some(job);
                    }
                    if queue.busy == 0 {
                        break None;
                    }
                    queue = self.ready.wait(queue).unwrap();
                }
            };
            let Some(job) = job else {
                self.ready.notify_all();
                break;
            };
            let result = match job {
                Job::Dir { dir, rules } => self.read_dir(&dir, &rules, &mut reader, &mut mine),
                Job::File { relative } => self.hash_large(relative, &mut reader, &mut mine),
            };
            let mut queue = self.queue.lock().unwrap();
            queue.busy -= 1;
            match result {
                Ok(jobs) => queue.jobs.extend(jobs),
                Err(e) => {
                    queue.failure.get_or_insert(e);
                }
            }
            drop(queue);
            self.ready.notify_all();
        }
        self.found.lock().unwrap().append(&mut mine);
    }

    /// A large file, queued by the walk of its directory.
    fn hash_large(
        &self,
        relative: Vec<u8>,
        reader: &mut Reader,
        found: &mut Vec<Hashed>,
    ) -> Result<Vec<Job>> {
        self.options.deadline.check("hashing the worktree")?;
        let shown = String::from_utf8_lossy(&relative).into_owned();
        let file = files::open_no_follow(&self.top.join(paths::os_str(&relative)))
            .map_err(|e| unreadable(&shown, &e))?;
        found.extend(self.compared(reader.hash(Source::File(file), relative)?));
        Ok(Vec::new())
    }

    /// Reads one directory: hashes its files and links, and answers its subdirectories.
    fn read_dir(
        &self,
        dir: &[u8],
        parent_rules: &Arc<Rules>,
        reader: &mut Reader,
        found: &mut Vec<Hashed>,
    ) -> Result<Vec<Job>> {
        self.options.deadline.check("hashing the worktree")?;
        let path = self.top.join(paths::os_str(dir));
        let shown = || {
            if dir.is_empty() {
                ".".to_string()
            } else {
                String::from_utf8_lossy(dir).into_owned()
            }
        };
        let walk_error = |e: std::io::Error| {
            Error::input(format!(
                "cannot read the directory {}: {}; the worktree subject reads every directory that is not ignored",
                shown(),
                error::plain_io(&e)
            ))
        };
        let handle = files::open_dir_no_follow(&path).map_err(walk_error)?;
        let mut entries = Vec::new();
        for entry in std::fs::read_dir(&path).map_err(walk_error)? {
            let entry = entry.map_err(walk_error)?;
            let kind = entry.file_type().map_err(walk_error)?;
            entries.push((entry.file_name(), kind));
        }
        // This directory's own rules come first: read them before judging its entries. A
        // .gitignore that is a symlink is not read, as git does not read it.
        let rules = match entries
            .iter()
            .find(|(name, kind)| name == ".gitignore" && kind.is_file())
        {
            Some(_) => {
                let file = path.join(".gitignore");
                let here = ignore_rules(&file, dir, false, &self.ignore_bytes)?;
                Arc::new(Rules {
                    here,
                    parent: Some(Arc::clone(parent_rules)),
                })
            }
            None => Arc::clone(parent_rules),
        };
        let mut jobs = Vec::new();
        let range = self.known.map(|known| known.range(dir));
        let warm_range = self.warm.as_ref().map(|known| known.range(dir));
        let copy_dir = self.options.warm.and_then(|warm| warm.copy_dir(dir));
        for (name, kind) in entries {
            let name = paths::bytes(&name);
            if name == b".git" {
                if dir.is_empty() {
                    continue;
                }
                return Err(Error::input(format!(
                    "{} is a nested git repository; the worktree subject cannot vouch for its content (ignore it, or make it a plain directory)",
                    shown()
                )));
            }
            if name.eq_ignore_ascii_case(b".git") {
                return Err(Error::input(format!(
                    "{}/{} is named .git in another case, which git refuses to add; rename it",
                    shown(),
                    String::from_utf8_lossy(name)
                )));
            }
            // Windows reads some names as others (`a.` as `a`, `NUL` as the device, `GIT~1` as
            // `.git`): git for Windows refuses to add them (`core.protectNTFS`), and so does
            // the subject, rather than hash one name's content under another's.
            if files::NTFS_NAMES
                && gix_index::validate::path::component(name.into(), None, PLAIN_COMPONENTS)
                    .is_err()
            {
                return Err(Error::input(format!(
                    "{}/{} has a name Windows reads as another (a trailing dot or space, a device name, a short name), which git cannot add here; rename it",
                    shown(),
                    String::from_utf8_lossy(name)
                )));
            }
            let mut relative = Vec::with_capacity(dir.len() + 1 + name.len());
            if !dir.is_empty() {
                relative.extend_from_slice(dir);
                relative.push(b'/');
            }
            relative.extend_from_slice(name);
            if self.exclude == Some(relative.as_slice()) {
                continue;
            }
            let is_dir = kind.is_dir();
            if !(is_dir || kind.is_file() || kind.is_symlink()) {
                continue; // FIFOs, sockets, devices: as `git add` skips them
            }
            if self.ignored(&rules, &relative, is_dir) {
                continue;
            }
            if is_dir {
                jobs.push(Job::Dir {
                    dir: relative,
                    rules: Arc::clone(&rules),
                });
                continue;
            }
            self.options.deadline.check("hashing the worktree")?;
            let shown = || String::from_utf8_lossy(&relative).into_owned();
            let cname = paths::os_str(name);
            if matches!(cname, std::borrow::Cow::Owned(_)) {
                // Windows: a name that is not valid Unicode, which git for Windows cannot add.
                return Err(Error::input(format!(
                    "{} has a name that is not valid Unicode, which git cannot add here; rename it",
                    shown()
                )));
            }
            let mut stat = None;
            let source = if kind.is_symlink() {
                Source::Link(
                    files::readlink_at(&handle, &cname).map_err(|e| unreadable(&shown(), &e))?,
                )
            } else {
                if let Some((known, range)) = self.known.zip(range.clone()) {
                    if name == b".gitattributes" {
                        known
                            .attributes
                            .store(true, std::sync::atomic::Ordering::Relaxed);
                    }
                    if let Some(cached) = known.unchanged(range.clone(), &relative, &handle, &cname)
                    {
                        found.push(Hashed {
                            path: relative,
                            mode: cached.mode,
                            id: cached.id,
                            changed: false,
                            stat: None,
                        });
                        continue;
                    }
                    // Untracked, and no tree wanted: changed, whatever its bytes.
                    if !known.subject && known.cached(range, &relative).is_none() {
                        found.push(Hashed {
                            path: relative,
                            mode: Mode::File,
                            id: [0; 20],
                            changed: true,
                            stat: None,
                        });
                        continue;
                    }
                }
                let mut file = files::open_at_no_follow(&handle, &cname)
                    .map_err(|e| unreadable(&shown(), &e))?;
                if let (Some(known), Some(warm), Some(range)) =
                    (&self.warm, self.options.warm, warm_range.clone())
                {
                    // Every file is read (its stat data vouches for nothing: a write through a
                    // memory mapping, or one still under way, leaves it as it was); what the
                    // copy already holds is not written again.
                    if let Some(cached) =
                        warm.copy_holds(known, range, &relative, copy_dir.as_ref(), &cname)
                        && reader.probe(&mut file, &relative)? == Some((cached.mode, cached.id))
                    {
                        found.push(Hashed {
                            path: relative,
                            mode: cached.mode,
                            id: cached.id,
                            changed: false,
                            stat: Some(cached.stat),
                        });
                        continue;
                    }
                    file.seek(std::io::SeekFrom::Start(0))
                        .map_err(|e| unreadable(&shown(), &e))?;
                    stat = files::stat_of(&file)
                        .filter(|s| s.regular)
                        .map(|s| index_stat(&s));
                }
                // In a warm walk a large file is read here, from the file just opened (and
                // perhaps read once already).
                let parallel = self.threads.load(std::sync::atomic::Ordering::Relaxed) > 1
                    && self.options.warm.is_none();
                if parallel && file.metadata().is_ok_and(|m| m.len() >= LARGE_FILE) {
                    jobs.push(Job::File { relative });
                    continue;
                }
                Source::File(file)
            };
            found.extend(
                self.compared(reader.hash(source, relative)?)
                    .map(|hashed| Hashed { stat, ..hashed }),
            );
        }
        Ok(jobs)
    }

    /// A file hashed, marked changed in a `by_stat` walk when the index holds something else.
    fn compared(&self, hashed: Option<Hashed>) -> Option<Hashed> {
        hashed.map(|mut hashed| {
            hashed.changed = self.known.is_some_and(|known| known.differs(&hashed));
            hashed
        })
    }

    /// Whether git ignores `relative`: the deepest `.gitignore` that has a say decides, then
    /// `info/exclude`, then `core.excludesFile` (in each, the last matching pattern).
    fn ignored(&self, rules: &Rules, relative: &[u8], dir: bool) -> bool {
        let path = paths::os_str(relative);
        let path = Path::new(&*path);
        let mut level = Some(rules);
        while let Some(rules) = level {
            if let Some(here) = &rules.here {
                match here.matched(path, dir) {
                    ignore::Match::Ignore(_) => return true,
                    ignore::Match::Whitelist(_) => return false,
                    ignore::Match::None => {}
                }
            }
            level = rules.parent.as_deref();
        }
        for rules in &self.repository_rules {
            match rules.matched(path, dir) {
                ignore::Match::Ignore(_) => return true,
                ignore::Match::Whitelist(_) => return false,
                ignore::Match::None => {}
            }
        }
        false
    }
}

/// The rules of one ignore file, matched against paths from the top (`base` is the directory
/// the file stands in). Held to `MAX_IGNORE_FILE` each and `MAX_IGNORE_TOTAL` together, and to
/// UTF-8 (the matcher's patterns are text): past either, or unreadable, it denies, since a rule
/// dropped could show or hide a file. `None` when there is no such file.
fn ignore_rules(
    file: &Path,
    base: &[u8],
    follow: bool,
    total: &std::sync::atomic::AtomicU64,
) -> Result<Option<ignore::gitignore::Gitignore>> {
    let denied = |why: String| {
        Error::input(format!(
            "cannot read the ignore rules in {}: {why}; the worktree subject needs every rule git would use",
            file.display()
        ))
    };
    let bytes = match read_regular(file, MAX_IGNORE_FILE, follow) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Ok(None),
        Err(e) => return Err(denied(error::plain_io(&e))),
    };
    let before = total.fetch_add(bytes.len() as u64, std::sync::atomic::Ordering::Relaxed);
    if before + bytes.len() as u64 > MAX_IGNORE_TOTAL {
        return Err(denied(format!(
            "the ignore files together hold over {MAX_IGNORE_TOTAL} bytes"
        )));
    }
    let text = std::str::from_utf8(&bytes)
        .map_err(|e| denied(format!("it is not UTF-8 at byte {}", e.valid_up_to())))?;
    let mut builder = ignore::gitignore::GitignoreBuilder::new(paths::os_str(base));
    for line in text.lines() {
        if unplain_brackets(line) {
            return Err(denied(format!(
                "the pattern `{line}` uses a bracket form that git and the matcher read differently (unclosed, escaped, `[]…]` or `[[:class:]]`); write it as a plain [abc], [a-z] or [!abc]"
            )));
        }
        // Git skips a pattern it cannot use; so does the matcher.
        let _ = builder.add_line(Some(file.to_path_buf()), line);
    }
    builder.build().map(Some).map_err(|e| denied(e.to_string()))
}

/// Whether a pattern holds a bracket expression other than a plain `[abc]`, `[a-z]` or
/// `[!abc]`: git's wildmatch and globset part ways on the others (an unclosed `[` is literal to
/// one and matches nothing in the other; escapes and classes inside brackets differ).
fn unplain_brackets(pattern: &str) -> bool {
    let bytes = pattern.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b'\\' => at += 2,
            b'[' => {
                let mut inside = at + 1;
                if matches!(bytes.get(inside), Some(b'!' | b'^')) {
                    inside += 1;
                }
                if bytes.get(inside) == Some(&b']') {
                    return true;
                }
                let Some(close) = bytes[inside..].iter().position(|b| *b == b']') else {
                    return true;
                };
                if bytes[inside..inside + close]
                    .iter()
                    .any(|b| matches!(b, b'\\' | b'['))
                {
                    return true;
                }
                at = inside + close + 1;
            }
            _ => at += 1,
        }
    }
    false
}

fn threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().min(8))
}

/// Reads and hashes files, one thread's worth: its buffer, and the snapshot it copies to.
struct Reader<'a> {
    buffer: Vec<u8>,
    options: &'a Options<'a>,
}

impl<'a> Reader<'a> {
    fn new(options: &'a Options<'a>) -> Reader<'a> {
        Reader {
            buffer: vec![0; CHUNK],
            options,
        }
    }

    /// A tracked path the walk did not reach. Gone (or behind a symlink, where git no longer
    /// looks) leaves it out; a special file denies, as `git add` fails on one.
    fn tracked(&mut self, top: &Path, relative: &[u8]) -> Result<Option<Hashed>> {
        let mut at = top.to_path_buf();
        let mut parts = relative.split(|b| *b == b'/').peekable();
        while let Some(part) = parts.next() {
            at.push(paths::os_str(part));
            let Ok(meta) = std::fs::symlink_metadata(&at) else {
                return Ok(None);
            };
            if parts.peek().is_some() {
                if !meta.is_dir() {
                    return Ok(None);
                }
                continue;
            }
            if meta.is_dir() {
                return Ok(None);
            }
            if !meta.is_file() && !meta.file_type().is_symlink() {
                return Err(Error::input(format!(
                    "{} is tracked but is now a FIFO, socket or device; git cannot add it, and the worktree subject cannot hash it",
                    String::from_utf8_lossy(relative)
                )));
            }
            let shown = || String::from_utf8_lossy(relative).into_owned();
            let source = if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&at).map_err(|e| unreadable(&shown(), &e))?;
                Source::Link(paths::into_bytes(target.into_os_string()))
            } else {
                Source::File(files::open_no_follow(&at).map_err(|e| unreadable(&shown(), &e))?)
            };
            return self.hash(source, relative.to_vec());
        }
        Ok(None)
    }

    /// Where a file goes in the snapshot (in a warm copy, in place of whatever is there).
    fn copy_path(&self, snapshot: &Path, relative: &[u8]) -> Result<PathBuf> {
        if self.options.warm.is_some() {
            warm::place(snapshot, relative)
        } else {
            copy_path(snapshot, relative)
        }
    }

    fn hash(&mut self, source: Source, relative: Vec<u8>) -> Result<Option<Hashed>> {
        let shown = || String::from_utf8_lossy(&relative).into_owned();
        let (mode, id) = match source {
            Source::Link(target) => {
                if let Some(snapshot) = self.options.snapshot {
                    // In the copy, a link out of the tree would reach the live file.
                    if leaves_the_tree(&relative, &target) {
                        return Err(Error::input(format!(
                            "{} is a symlink to {}, outside the tree: in a snapshot the command would read the live file, which no marker vouches for; make it relative and inside, or run in place",
                            shown(),
                            String::from_utf8_lossy(&target)
                        )));
                    }
                    let copy = self.copy_path(snapshot, &relative)?;
                    files::symlink(&paths::os_str(&target), &copy)
                        .map_err(|e| Error::io("write", &copy, &e))?;
                }
                (Mode::Symlink, tree::blob_id(&target)?)
            }
            Source::File(file) => match self.file(file, &relative)? {
                Some(found) => found,
                // Swapped for something else between the walk and the read.
                None => {
                    return Err(Error::input(format!(
                        "{} changed while it was hashed; hash again when the worktree is still",
                        shown()
                    )));
                }
            },
        };
        Ok(Some(Hashed {
            path: relative,
            mode,
            id,
            changed: false,
            stat: None,
        }))
    }

    /// A regular file's mode and blob id, read without copying it anywhere; `None` when it
    /// changed under the read (the caller then reads it again, copying).
    fn probe(&mut self, file: &mut File, relative: &[u8]) -> Result<Option<(Mode, ObjectId)>> {
        let shown = || String::from_utf8_lossy(relative).into_owned();
        let meta = file.metadata().map_err(|e| unreadable(&shown(), &e))?;
        if !meta.is_file() || meta.len() > self.options.max_file_size {
            return Ok(None);
        }
        let mode = file_mode(files::owner_may_execute(&meta));
        Ok(self
            .hash_bytes(file, meta.len(), None, relative)?
            .map(|id| (mode, id)))
    }

    /// A regular file's mode and blob id, from one read of its bytes; `None` when it changed
    /// under the read.
    fn file(&mut self, mut file: File, relative: &[u8]) -> Result<Option<(Mode, ObjectId)>> {
        let shown = || String::from_utf8_lossy(relative).into_owned();
        let meta = file.metadata().map_err(|e| unreadable(&shown(), &e))?;
        if !meta.is_file() {
            return Ok(None);
        }
        let size = meta.len();
        if size > self.options.max_file_size {
            return Err(Error::input(format!(
                "{} is {size} bytes, over the {} of --max-file-size; raise it, or ignore the file",
                shown(),
                self.options.max_file_size
            )));
        }
        let mode = file_mode(files::owner_may_execute(&meta));
        let mut copy = match self.options.snapshot {
            Some(snapshot) => {
                let path = self.copy_path(snapshot, relative)?;
                let perms = if mode == Mode::Executable {
                    0o755
                } else {
                    0o644
                };
                Some(files::create_new(&path, perms).map_err(|e| Error::io("write", &path, &e))?)
            }
            None => None,
        };
        Ok(self
            .hash_bytes(&mut file, size, copy.as_mut(), relative)?
            .map(|id| (mode, id)))
    }

    /// The blob id of the `size` bytes `file` holds, each written to `copy` as it is read;
    /// `None` when they were not `size` bytes (the file changed under the read).
    fn hash_bytes(
        &mut self,
        file: &mut File,
        size: u64,
        mut copy: Option<&mut File>,
        relative: &[u8],
    ) -> Result<Option<ObjectId>> {
        let shown = || String::from_utf8_lossy(relative).into_owned();
        let mut hasher = BlobHasher::new(size);
        let mut left = size;
        loop {
            // One byte more than is left: a read that comes short of it is at the end, so a
            // small file costs one read, and one that grew is still seen.
            let ask = usize::try_from(left.saturating_add(1)).map_or(CHUNK, |n| n.min(CHUNK));
            let n = match file.read(&mut self.buffer[..ask]) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(unreadable(&shown(), &e)),
            };
            left = left.saturating_sub(n as u64);
            hasher.update(&self.buffer[..n]);
            if let Some(copy) = copy.as_mut() {
                copy.write_all(&self.buffer[..n]).map_err(|e| {
                    Error::Io(format!("cannot copy {} to the snapshot: {e}", shown()))
                })?;
            }
            if n < ask && left == 0 {
                break;
            }
        }
        hasher.finish(&shown())
    }
}

/// Whether a symlink at `relative` (from the top) with `target` points outside the tree, read
/// as written: absolute, or climbing above the top with `..`.
fn leaves_the_tree(relative: &[u8], target: &[u8]) -> bool {
    if target.first() == Some(&b'/') {
        return true;
    }
    let mut depth = relative.iter().filter(|b| **b == b'/').count();
    for part in target.split(|b| *b == b'/') {
        match part {
            b"" | b"." => {}
            b".." if depth == 0 => return true,
            b".." => depth -= 1,
            _ => depth += 1,
        }
    }
    false
}

/// What a path holds: a file opened for reading, or a symlink's target.
enum Source {
    File(File),
    Link(Vec<u8>),
}

fn unreadable(shown: &str, e: &std::io::Error) -> Error {
    Error::input(format!(
        "cannot read {shown}: {}; the worktree subject hashes every file that is not ignored",
        error::plain_io(e)
    ))
}

/// Where a file goes in the snapshot; its directories are made on the way.
fn copy_path(snapshot: &Path, relative: &[u8]) -> Result<PathBuf> {
    let path = snapshot.join(paths::os_str(relative));
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| Error::io("create", parent, &e))?;
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_bracket_expressions_pass() {
        for plain in [
            "*.log",
            "[abc]",
            "[a-z]*.rs",
            "[!a]",
            "[^a]b[cd]",
            "\\[literal",
            "a]b",
        ] {
            assert!(!unplain_brackets(plain), "{plain}");
        }
        for unplain in [
            "[ab",
            "[a\\]]",
            "[]a]",
            "[!]a]",
            "[[:alpha:]]",
            "x[",
            "[a[b]",
        ] {
            assert!(unplain_brackets(unplain), "{unplain}");
        }
    }

    #[test]
    fn a_link_leaves_the_tree_when_absolute_or_climbing_above_the_top() {
        assert!(leaves_the_tree(b"a", b"/etc/passwd"));
        assert!(leaves_the_tree(b"a", b"../x"));
        assert!(leaves_the_tree(b"d/a", b"../../x"));
        assert!(leaves_the_tree(b"d/a", b"x/../../../y"));
        assert!(!leaves_the_tree(b"d/a", b"../x"));
        assert!(!leaves_the_tree(b"a", b"./b"));
        assert!(!leaves_the_tree(b"d/e/a", b"../../f/g"));
    }
}
