//! The walk of a working tree as `git add -A` sees it, by several threads: every directory that
//! is not ignored read, every file and link in it that is not ignored hashed (or, in a
//! `by_stat` walk, taken unread as the index holds it; in a warm walk, taken from the copy when
//! the copy holds it).

use std::ffi::{OsStr, OsString};
use std::fs::{File, FileType};
use std::io::Seek;
use std::ops::Range;
use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::error;
use crate::error::{Error, Result};
use crate::evidence::subject::tree::{Mode, ObjectId};
use crate::evidence::subject::worktree::index::{Cached, Known, PLAIN_COMPONENTS, index_stat};
use crate::evidence::subject::worktree::reader::{Reader, Source, unreadable};
use crate::evidence::subject::worktree::rules::{Rules, ignore_rules};
use crate::evidence::subject::worktree::{Hashed, Options};
use crate::sys::files;
use crate::sys::paths;

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
pub(super) struct Walk<'a> {
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
    pub(super) fn new(
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

    pub(super) fn run(self, threads: usize) -> Result<Vec<Hashed>> {
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
        let (handle, entries) = list(&path, dir)?;
        let rules = self.rules_here(&path, dir, &entries, parent_rules)?;
        let here = Here {
            handle,
            range: self.known.map(|known| known.range(dir)),
            warm_range: self.warm.as_ref().map(|known| known.range(dir)),
            copy_dir: self.options.warm.and_then(|warm| warm.copy_dir(dir)),
        };
        let mut jobs = Vec::new();
        for (name, kind) in entries {
            let name = paths::bytes(&name);
            if !takes_name(dir, name)? {
                continue;
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
            let link = kind.is_symlink();
            jobs.extend(self.read_file(&here, name, link, relative, reader, found)?);
        }
        Ok(jobs)
    }

    /// The rules that hold in the directory `dir` (at `path`, holding `entries`): its own
    /// `.gitignore` first, then its parent's. Its own are read before its entries are judged;
    /// a `.gitignore` that is a symlink is not read, as git does not read it.
    fn rules_here(
        &self,
        path: &Path,
        dir: &[u8],
        entries: &[(OsString, FileType)],
        parent_rules: &Arc<Rules>,
    ) -> Result<Arc<Rules>> {
        Ok(
            match entries
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
            },
        )
    }

    /// One file or link of a directory, at `relative` (`link`: a symlink): hashed into
    /// `found`, or taken unread as the index or the warm copy holds it; or, a large file with
    /// several threads walking, answered as a job of its own.
    fn read_file(
        &self,
        here: &Here,
        name: &[u8],
        link: bool,
        relative: Vec<u8>,
        reader: &mut Reader,
        found: &mut Vec<Hashed>,
    ) -> Result<Option<Job>> {
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
        let source = if link {
            Source::Link(
                files::readlink_at(&here.handle, &cname).map_err(|e| unreadable(&shown(), &e))?,
            )
        } else {
            if let Some((mode, id, changed)) = self.as_indexed(here, name, &relative, &cname) {
                found.push(Hashed {
                    path: relative,
                    mode,
                    id,
                    changed,
                    stat: None,
                });
                return Ok(None);
            }
            let mut file = files::open_at_no_follow(&here.handle, &cname)
                .map_err(|e| unreadable(&shown(), &e))?;
            match self.in_copy(here, &relative, &cname, &mut file, reader)? {
                InCopy::Holds(cached) => {
                    found.push(Hashed {
                        path: relative,
                        mode: cached.mode,
                        id: cached.id,
                        changed: false,
                        stat: Some(cached.stat),
                    });
                    return Ok(None);
                }
                InCopy::Read(read_with) => stat = read_with,
            }
            // In a warm walk a large file is read here, from the file just opened (and
            // perhaps read once already).
            let parallel = self.threads.load(std::sync::atomic::Ordering::Relaxed) > 1
                && self.options.warm.is_none();
            if parallel && file.metadata().is_ok_and(|m| m.len() >= LARGE_FILE) {
                return Ok(Some(Job::File { relative }));
            }
            Source::File(file)
        };
        found.extend(
            self.compared(reader.hash(source, relative)?)
                .map(|hashed| Hashed { stat, ..hashed }),
        );
        Ok(None)
    }

    /// In a `by_stat` walk, a file taken as the index has it, unread: (mode, blob id,
    /// changed). Unchanged when its stat data is what the index holds; untracked, with no tree
    /// wanted, changed whatever its bytes. A `.gitattributes` seen is noted.
    fn as_indexed(
        &self,
        here: &Here,
        name: &[u8],
        relative: &[u8],
        cname: &OsStr,
    ) -> Option<(Mode, ObjectId, bool)> {
        let (known, range) = self.known.zip(here.range.clone())?;
        if name == b".gitattributes" {
            known
                .attributes
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        if let Some(cached) = known.unchanged(range.clone(), relative, &here.handle, cname) {
            return Some((cached.mode, cached.id, false));
        }
        // Untracked, and no tree wanted: changed, whatever its bytes.
        if !known.subject && known.cached(range, relative).is_none() {
            return Some((Mode::File, [0; 20], true));
        }
        None
    }

    /// In a warm walk, whether the copy already holds the file just opened as it is now; if
    /// not, the file is read again from its start, with the stat data it is read with.
    fn in_copy(
        &self,
        here: &Here,
        relative: &[u8],
        cname: &OsStr,
        file: &mut File,
        reader: &mut Reader,
    ) -> Result<InCopy> {
        let (Some(known), Some(warm), Some(range)) =
            (&self.warm, self.options.warm, here.warm_range.clone())
        else {
            return Ok(InCopy::Read(None));
        };
        // Every file is read (its stat data vouches for nothing: a write through a memory
        // mapping, or one still under way, leaves it as it was); what the copy already holds
        // is not written again.
        if let Some(cached) = warm.copy_holds(known, range, relative, here.copy_dir.as_ref(), cname)
            && reader.probe(file, relative)? == Some((cached.mode, cached.id))
        {
            return Ok(InCopy::Holds(cached));
        }
        file.seek(std::io::SeekFrom::Start(0))
            .map_err(|e| unreadable(&String::from_utf8_lossy(relative), &e))?;
        Ok(InCopy::Read(
            files::stat_of(file)
                .filter(|s| s.regular)
                .map(|s| index_stat(&s)),
        ))
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

pub(super) fn threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().min(8))
}

/// A directory being read: its handle, and what the index and the warm copy hold below it.
struct Here {
    handle: File,
    /// In a `by_stat` walk, the range of the index's paths below it.
    range: Option<Range<usize>>,
    /// In a warm walk, the range of the cache's paths below it, and the copy's own directory.
    warm_range: Option<Range<usize>>,
    copy_dir: Option<File>,
}

/// What a warm walk finds of a file in the copy.
enum InCopy {
    /// The copy holds it as it is now: read, and hashed the same.
    Holds(Cached),
    /// It is to be read and hashed: the stat data it is read with, for the cache (none outside
    /// a warm walk).
    Read(Option<gix_index::entry::Stat>),
}

/// The directory `dir` (at `path`) opened, and its entries with their types.
fn list(path: &Path, dir: &[u8]) -> Result<(File, Vec<(OsString, FileType)>)> {
    let walk_error = |e: std::io::Error| {
        Error::input(format!(
            "cannot read the directory {}: {}; the worktree subject reads every directory that is not ignored",
            shown_dir(dir),
            error::plain_io(&e)
        ))
    };
    let handle = files::open_dir_no_follow(path).map_err(walk_error)?;
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(path).map_err(walk_error)? {
        let entry = entry.map_err(walk_error)?;
        let kind = entry.file_type().map_err(walk_error)?;
        entries.push((entry.file_name(), kind));
    }
    Ok((handle, entries))
}

/// A directory as a message names it: its path from the top, `.` for the top.
fn shown_dir(dir: &[u8]) -> String {
    if dir.is_empty() {
        ".".to_string()
    } else {
        String::from_utf8_lossy(dir).into_owned()
    }
}

/// Whether the walk takes the entry `name` of `dir`: not the top's own `.git`. A nested
/// repository, `.git` in another case, or (Windows) a name read as another denies.
fn takes_name(dir: &[u8], name: &[u8]) -> Result<bool> {
    if name == b".git" {
        if dir.is_empty() {
            return Ok(false);
        }
        return Err(Error::input(format!(
            "{} is a nested git repository; the worktree subject cannot vouch for its content (ignore it, or make it a plain directory)",
            shown_dir(dir)
        )));
    }
    if name.eq_ignore_ascii_case(b".git") {
        return Err(Error::input(format!(
            "{}/{} is named .git in another case, which git refuses to add; rename it",
            shown_dir(dir),
            String::from_utf8_lossy(name)
        )));
    }
    // Windows reads some names as others (`a.` as `a`, `NUL` as the device, `GIT~1` as
    // `.git`): git for Windows refuses to add them (`core.protectNTFS`), and so does the
    // subject, rather than hash one name's content under another's.
    if files::NTFS_NAMES
        && gix_index::validate::path::component(name.into(), None, PLAIN_COMPONENTS).is_err()
    {
        return Err(Error::input(format!(
            "{}/{} has a name Windows reads as another (a trailing dot or space, a device name, a short name), which git cannot add here; rename it",
            shown_dir(dir),
            String::from_utf8_lossy(name)
        )));
    }
    Ok(true)
}
