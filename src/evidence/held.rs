//! Held tests as evidence (SPEC §11): what a hold takes from the working tree or a commit, how
//! the tree now differs from it, and the copy a check runs in under it (the content the
//! verdict names, every held file as held, unheld files under a held pattern absent, the
//! declared environment put in).
//!
//! Here: taking files into a hold, comparing the tree with it, and the patterns and
//! environment it holds; `copy` makes the check's copy.

mod copy;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{Error, Result};
use crate::evidence::subject::{self, Limits, tree};
use crate::state::hold::{self, HeldFile, Hold, Matcher};
use crate::state::project::Project;
use crate::sys::files;
use crate::sys::git::{self, Repository};
use crate::sys::paths;
use copy::refuse_links;
pub(crate) use copy::{Applied, Prepared, apply, prepare};

/// How long a git call of `hold add --at` may take.
const GIT_TIMEOUT: Duration = Duration::from_secs(120);
/// The most new files named.
pub(crate) const MAX_NAMED: usize = 200;

/// A file as a hold takes it: its entry, and its bytes.
pub(crate) type Taken = (HeldFile, Vec<u8>);

/// The file at the repository's top that may say what to hold (a pattern a line, `#` for
/// comments): read only when a human makes the hold with no paths, or by CI from a base
/// branch; what the agent writes there takes effect only through them.
pub(crate) const SETTING: &str = ".vigil-hold";

/// The repository's top, where held paths start.
pub(crate) fn top(project: &Project) -> Result<PathBuf> {
    Ok(Repository::locate(&project.dir)?.top)
}

/// The files under `matcher` as the working tree has them (tracked and untracked files that
/// git does not ignore, as the worktree subject lists them), read now.
pub(crate) fn from_worktree(
    project: &Project,
    matcher: &Matcher,
    limits: Limits,
) -> Result<Vec<Taken>> {
    let top = top(project)?;
    let mut taken = Vec::new();
    for (path, _) in subject::worktree_listing(project, limits)? {
        if !matcher.matches(&path) {
            continue;
        }
        let Some((mode, bytes)) = read_live(&top, &path)? else {
            continue;
        };
        taken.push(entry(path, mode, bytes)?);
        if taken.len() > hold::MAX_HELD_FILES {
            return Err(too_many());
        }
    }
    Ok(taken)
}

/// The files under `matcher` at the commit `rev`, and the commit's id.
pub(crate) fn from_commit(
    project: &Project,
    rev: &str,
    matcher: &Matcher,
) -> Result<(String, Vec<Taken>)> {
    let top = top(project)?;
    if rev.starts_with('-') {
        return Err(Error::usage(format!("`{rev}` is not a commit")));
    }
    let commit = git::git(
        &top,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{rev}^{{commit}}"),
        ],
        &[],
        GIT_TIMEOUT,
    )
    .map_err(|_| Error::usage(format!("`{rev}` names no commit of this repository")))?;
    let listing = git::git_bytes(
        &top,
        &["ls-tree", "-r", "-z", "--full-tree", &commit],
        &[],
        GIT_TIMEOUT,
    )?;
    let mut taken = Vec::new();
    for record in listing.split(|b| *b == 0).filter(|r| !r.is_empty()) {
        let text = String::from_utf8_lossy(record);
        let Some((head, path)) = text.split_once('\t') else {
            continue;
        };
        let mut words = head.split(' ');
        let (Some(mode), Some(kind), Some(id)) = (words.next(), words.next(), words.next()) else {
            continue;
        };
        if kind != "blob" || !matcher.matches(path) {
            continue;
        }
        let bytes = git::git_bytes(&top, &["cat-file", "blob", id], &[], GIT_TIMEOUT)?;
        let (held, bytes) = entry(path.to_string(), mode.to_string(), bytes)?;
        if held.blob != id {
            return Err(Error::input(format!(
                "{path} at {rev} is not a SHA-1 blob vigil can name; hold the working tree instead"
            )));
        }
        taken.push((held, bytes));
        if taken.len() > hold::MAX_HELD_FILES {
            return Err(too_many());
        }
    }
    Ok((commit, taken))
}

fn too_many() -> Error {
    Error::usage(format!(
        "a hold keeps at most {} files; hold the test directories, not the whole tree",
        hold::MAX_HELD_FILES
    ))
}

fn entry(path: String, mode: String, bytes: Vec<u8>) -> Result<Taken> {
    hold::check_path(&path)?;
    if bytes.len() as u64 > hold::MAX_HELD_FILE {
        return Err(Error::usage(format!(
            "{path} is larger than {}: a hold keeps test files, not data",
            files::human_bytes(hold::MAX_HELD_FILE)
        )));
    }
    let blob = tree::hex(&tree::blob_id(&bytes)?);
    Ok((HeldFile { path, blob, mode }, bytes))
}

/// A file of the live tree at `path` from `top`: its mode and bytes (a link's target), `None`
/// when there is none. Never follows a link, never blocks on a FIFO.
fn read_live(top: &Path, path: &str) -> Result<Option<(String, Vec<u8>)>> {
    let full = top.join(path);
    let meta = match fs_err::symlink_metadata(&full) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::fs(e)),
    };
    if meta.file_type().is_symlink() {
        let target = fs_err::read_link(&full).map_err(Error::fs)?;
        return Ok(Some((
            "120000".into(),
            paths::bytes(target.as_os_str()).to_vec(),
        )));
    }
    if !meta.is_file() {
        return Ok(None);
    }
    let mode = if files::owner_may_execute(&meta) {
        "100755"
    } else {
        "100644"
    };
    match files::read_regular(&full, hold::MAX_HELD_FILE + 1, false)
        .map_err(|e| Error::io("read", &full, &e))?
    {
        Some(bytes) => Ok(Some((mode.into(), bytes))),
        None => Ok(None),
    }
}

/// How a held file differs from the hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Change {
    Modified,
    Deleted,
}

impl Change {
    pub(crate) fn word(&self) -> &'static str {
        match self {
            Change::Modified => "modified",
            Change::Deleted => "deleted",
        }
    }
}

/// How the tree differs from the hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Comparison {
    /// Held files that are not as held.
    pub changed: Vec<(String, Change)>,
    /// Files under a held pattern that the hold does not hold: new tests, which the check's
    /// copy leaves out (at most `MAX_NAMED`, in order).
    pub new: Vec<String>,
}

impl Comparison {
    /// The changed files as one phrase: `tests/a.py (modified), tests/b.py (deleted)`.
    pub(crate) fn changed_phrase(&self, max: usize) -> String {
        let mut text = self
            .changed
            .iter()
            .take(max)
            .map(|(path, change)| format!("{} ({})", hold::shown(path), change.word()))
            .collect::<Vec<_>>()
            .join(", ");
        if self.changed.len() > max {
            text.push_str(&format!(" and {} more", self.changed.len() - max));
        }
        text
    }
}

/// The live tree against the hold: every held file read and hashed, and the files under each
/// held pattern that git does not ignore listed.
pub(crate) fn compare(project: &Project, hold: &Hold) -> Result<Comparison> {
    let top = top(project)?;
    let mut comparison = Comparison::default();
    for held in &hold.files {
        let change = match read_live(&top, &held.path)? {
            None => Some(Change::Deleted),
            Some((_, bytes)) => {
                let same = bytes.len() as u64 <= hold::MAX_HELD_FILE
                    && tree::hex(&tree::blob_id(&bytes)?) == held.blob;
                (!same).then_some(Change::Modified)
            }
        };
        if let Some(change) = change {
            comparison.changed.push((held.path.clone(), change));
        }
    }
    comparison.new = unheld_live(&top, project, hold);
    Ok(comparison)
}

/// What the check's copy would leave out of the live tree (files git does not ignore): new
/// tests under a held pattern, runner configuration in a held path or on the way to one, names
/// that are not UTF-8 there (what informs: the copy decides, not this list).
fn unheld_live(top: &Path, project: &Project, hold: &Hold) -> Vec<String> {
    let matcher = hold.matcher();
    let mut found = BTreeSet::new();
    for (start, deep) in areas(top, hold, &project.dir) {
        if !start.exists() {
            continue;
        }
        let walk = ignore::WalkBuilder::new(&start)
            .hidden(false)
            .parents(true)
            .require_git(false)
            .max_depth((!deep).then_some(1))
            .filter_entry(|e| e.file_name() != ".git")
            .build();
        for entry in walk.flatten() {
            if entry.file_type().is_none_or(|t| t.is_dir()) {
                continue;
            }
            if entry.path().starts_with(&project.state) {
                continue;
            }
            match relative(top, entry.path()) {
                Some(path) if hold.unheld(&matcher, &path).is_some() => {
                    found.insert(path);
                }
                Some(_) => {}
                None => {
                    found.insert(lossy(top, entry.path()));
                }
            }
            if found.len() >= MAX_NAMED {
                return found.into_iter().collect();
            }
        }
    }
    found.into_iter().collect()
}

/// Where files the copy leaves out can be: each held prefix and all below it (`deep`), and
/// each directory on the way to one, and the project's (the check's) directory, alone.
fn areas(top: &Path, hold: &Hold, project: &Path) -> Vec<(PathBuf, bool)> {
    let mut areas = Vec::new();
    let mut shallow = BTreeSet::new();
    for prefix in hold.prefixes() {
        areas.push((top.join(&prefix), true));
        let mut dir = String::new();
        shallow.insert(String::new());
        for part in prefix.split('/').filter(|p| !p.is_empty()) {
            if !dir.is_empty() {
                dir.push('/');
            }
            dir.push_str(part);
            shallow.insert(dir.clone());
        }
    }
    if let Some(here) = relative(top, &crate::sys::paths::canonical(project)) {
        shallow.insert(here);
    }
    areas.extend(shallow.into_iter().map(|dir| (top.join(dir), false)));
    areas
}

/// A path from the top as a person reads it, whatever bytes its name holds.
fn lossy(top: &Path, path: &Path) -> String {
    path.strip_prefix(top)
        .unwrap_or(path)
        .to_string_lossy()
        .replace('\\', "/")
}

fn relative(top: &Path, path: &Path) -> Option<String> {
    let rest = path.strip_prefix(top).ok()?;
    let text = rest.to_str()?;
    Some(text.replace('\\', "/"))
}

/// A hold made in memory from the commit `rev` (CI's `marker-writer run --hold-from`): the
/// patterns given, else those `.vigil-hold` names at `rev`; the files as `rev` has them, with
/// their bytes; and the commit's id.
pub(crate) fn from_ref(
    project: &Project,
    rev: &str,
    patterns: &[String],
) -> Result<(Hold, std::collections::HashMap<String, Vec<u8>>, String)> {
    let patterns = if patterns.is_empty() {
        setting_patterns(project, Some(rev))?
    } else {
        let top = top(project)?;
        normalized(&top, &top, patterns)?
    };
    let matcher = Matcher::new(patterns.iter().map(String::as_str));
    let (commit, taken) = from_commit(project, rev, &matcher)?;
    if taken.is_empty() {
        return Err(Error::usage(format!(
            "{} holds no file at {rev}",
            patterns.join(", ")
        )));
    }
    let mut record = Hold::new();
    record.patterns = patterns
        .into_iter()
        .map(|pattern| hold::Pattern {
            pattern,
            at: commit.clone(),
        })
        .collect();
    let mut blobs = std::collections::HashMap::new();
    for (file, bytes) in taken {
        blobs.insert(file.blob.clone(), bytes);
        record.files.push(file);
    }
    record.settle();
    Ok((record, blobs, commit))
}

/// A digest of what a hold holds (`sha256:` of each file's path, mode and blob id, a line
/// each, in path order): what a marker records of the hold it ran under.
pub(crate) fn digest(hold: &Hold) -> String {
    let text: String = hold
        .files
        .iter()
        .map(|f| format!("{} {} {}\n", f.mode, f.blob, f.path))
        .collect();
    format!("sha256:{}", crate::sys::digest::sha256_hex(text.as_bytes()))
}

/// An argument as a hold keeps it: taken from `here`, made a path from the repository's
/// `top`, `/`-separated, no trailing `/`; a glob is checked to compile.
pub(crate) fn normalize(top: &Path, here: &Path, arg: &str) -> Result<String> {
    let here = paths::canonical(here);
    let full = paths::lexical(&here.join(arg));
    let rest = full.strip_prefix(top).map_err(|_| {
        Error::usage(format!(
            "`{arg}` is outside the repository at {}; hold paths inside it",
            top.display()
        ))
    })?;
    let text = rest
        .to_str()
        .ok_or_else(|| Error::usage(format!("`{arg}` is not valid UTF-8")))?
        .replace('\\', "/");
    let text = text.trim_end_matches('/').to_string();
    if text.is_empty() {
        return Err(Error::usage(
            "a hold names the tests, not the whole repository: name the test directories or files",
        ));
    }
    hold::check_path(&text)?;
    if hold::is_glob(&text) {
        hold::compile(&text)?;
    }
    Ok(text)
}

/// Every argument, normalized.
pub(crate) fn normalized(top: &Path, here: &Path, args: &[String]) -> Result<Vec<String>> {
    args.iter().map(|arg| normalize(top, here, arg)).collect()
}

/// The patterns `.vigil-hold` names, in the working tree or at the commit `at`.
pub(crate) fn setting_patterns(project: &Project, at: Option<&str>) -> Result<Vec<String>> {
    let top = top(project)?;
    let text = match at {
        Some(rev) => {
            if rev.starts_with('-') {
                return Err(Error::usage(format!("`{rev}` is not a commit")));
            }
            let bytes = git::git_bytes(
                &top,
                &["cat-file", "blob", &format!("{rev}:{SETTING}")],
                &[],
                GIT_TIMEOUT,
            )
            .map_err(|_| {
                Error::usage(format!(
                    "there is no {SETTING} at {rev}: name the tests to hold, e.g. tests/"
                ))
            })?;
            String::from_utf8(bytes)
                .map_err(|_| Error::input(format!("{SETTING} at {rev} is not UTF-8")))?
        }
        None => match files::read_regular(&top.join(SETTING), 1 << 20, false) {
            Ok(Some(bytes)) => String::from_utf8(bytes)
                .map_err(|_| Error::input(format!("{SETTING} is not UTF-8")))?,
            Ok(None) => {
                return Err(Error::usage(format!(
                    "name the tests to hold, e.g. tests/ (or list them in {SETTING} at the repository's top)"
                )));
            }
            Err(e) => return Err(Error::io("read", &top.join(SETTING), &e)),
        },
    };
    let patterns: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(|line| normalize(&top, &top, line))
        .collect::<Result<_>>()?;
    if patterns.is_empty() {
        return Err(Error::usage(format!(
            "{SETTING} names nothing to hold; name the tests, e.g. tests/"
        )));
    }
    Ok(patterns)
}

/// What `add` held.
pub(crate) struct Added {
    pub patterns: Vec<String>,
    pub added: usize,
    pub total: usize,
    /// Runner configuration on the way to the held tests that the hold does not hold.
    pub config: Vec<String>,
}

impl Added {
    pub(crate) fn told(&self) -> String {
        let mut told = format!(
            "held {} files under {} ({} files held in all); the Stop hook's check now runs on them as held, and a declaration while one differs is refused",
            self.added,
            self.patterns.join(", "),
            self.total
        );
        if !self.config.is_empty() {
            let shown: Vec<String> = self.config.iter().map(|p| hold::shown(p)).collect();
            told.push_str(&format!(
                "; not held, so left out of the check's copy: {} (runner configuration on the way to the tests; hold it too if the tests need it)",
                shown.join(", ")
            ));
        }
        told
    }
}

/// Holds `patterns` (normalized) as the working tree, or the commit `at`, has them: their
/// files' bytes kept, the hold saved. A pattern that holds no file is refused, and nothing is
/// saved.
pub(crate) fn add(project: &Project, patterns: &[String], at: Option<&str>) -> Result<Added> {
    if patterns.is_empty() {
        return Err(Error::usage(
            "hold add needs the tests to hold, e.g. stop-gate hold add tests/",
        ));
    }
    let mut record = hold::load(project)?.unwrap_or_default();
    let mut added = 0;
    for pattern in patterns {
        let matcher = Matcher::new(std::iter::once(pattern.as_str()));
        let (from, taken) = match at {
            Some(rev) => from_commit(project, rev, &matcher)?,
            None => (
                hold::WORKING_TREE.to_string(),
                from_worktree(project, &matcher, Limits::default())?,
            ),
        };
        if taken.is_empty() {
            return Err(Error::usage(format!(
                "`{pattern}` holds no file {}; name test files or directories that are there (files git ignores are never held)",
                match at {
                    Some(rev) => format!("at {rev}"),
                    None => "in the working tree".to_string(),
                }
            )));
        }
        added += taken.len();
        keep(project, &mut record, taken)?;
        record.patterns.retain(|p| p.pattern != *pattern);
        record.patterns.push(hold::Pattern {
            pattern: pattern.clone(),
            at: from,
        });
    }
    record.settle();
    hold::save(project, &record)?;
    // Runner configuration the hold now leaves out of the check's copy: the human is told,
    // since a project's own conftest.py at the top may be one its tests need.
    let matcher = record.matcher();
    let config = unheld_live(&top(project)?, project, &record)
        .into_iter()
        .filter(|path| record.unheld(&matcher, path) == Some(hold::Unheld::RunnerConfig))
        .collect();
    Ok(Added {
        patterns: patterns.to_vec(),
        added,
        total: record.files.len(),
        config,
    })
}

/// Stores each taken file's bytes and puts its entry in the hold.
pub(crate) fn keep(project: &Project, record: &mut Hold, taken: Vec<Taken>) -> Result<()> {
    for (file, bytes) in taken {
        hold::store_blob(project, &file.blob, &bytes)?;
        record.files.push(file);
    }
    Ok(())
}

/// Holds the environment at `path` (from the top) as a copy in the hold's `env/`: every file,
/// link and directory as it is now, modes kept; refused over `max` bytes, and nothing kept.
pub(crate) fn copy_env(project: &Project, path: &str, max: u64) -> Result<hold::EnvCopy> {
    let top = top(project)?;
    refuse_links(&top, path)?;
    let from = top.join(path);
    let name = crate::sys::digest::sha256_hex(path.as_bytes())[..16].to_string();
    let dir = hold::env_dir(project);
    files::make_private_dir(&dir).map_err(|e| Error::io("create", &dir, &e))?;
    let fresh = tempfile::Builder::new()
        .prefix("new-")
        .tempdir_in(&dir)
        .map_err(|e| Error::io("create a copy in", &dir, &e))?;
    let mut bytes = 0;
    copy_tree(&from, &fresh.path().join("env"), &mut bytes, max, path)?;
    let place = dir.join(&name);
    let _ = std::fs::remove_dir_all(&place);
    std::fs::rename(fresh.path().join("env"), &place)
        .map_err(|e| Error::io("keep the copy at", &place, &e))?;
    Ok(hold::EnvCopy {
        path: path.to_string(),
        copy: name,
        bytes,
        made_at: crate::sys::time::now_rfc3339(),
    })
}

/// Copies `from` to `to` (links as links), counting `bytes` against `max`.
fn copy_tree(from: &Path, to: &Path, bytes: &mut u64, max: u64, shown: &str) -> Result<()> {
    let meta = fs_err::symlink_metadata(from).map_err(Error::fs)?;
    if meta.file_type().is_symlink() {
        let target = fs_err::read_link(from).map_err(Error::fs)?;
        return files::symlink(target.as_os_str(), to).map_err(|e| Error::io("copy", to, &e));
    }
    if meta.is_dir() {
        fs_err::create_dir(to).map_err(Error::fs)?;
        let entries = fs_err::read_dir(from).map_err(Error::fs)?;
        for entry in entries {
            let entry = entry.map_err(Error::fs)?;
            copy_tree(
                &entry.path(),
                &to.join(entry.file_name()),
                bytes,
                max,
                shown,
            )?;
        }
        return Ok(());
    }
    if !meta.is_file() {
        return Ok(());
    }
    *bytes += meta.len();
    if *bytes > max {
        return Err(Error::usage(format!(
            "{shown} is larger than {}: declare it bound as it is (without --copy), or raise --max-size",
            files::human_bytes(max)
        )));
    }
    fs_err::copy(from, to).map_err(Error::fs)?;
    Ok(())
}

/// Whether a marker's run held the same tests as `hold` (SPEC §11: under a hold the verdict's
/// subject is the tree and the hold): `Err` says why not, as a phrase.
pub(crate) fn marker_held(
    payload: &crate::evidence::payload::Payload,
    hold: &Hold,
) -> std::result::Result<(), &'static str> {
    let recorded = payload
        .run
        .as_ref()
        .and_then(|run| run.hold.as_ref())
        .map(|h| h.digest.as_str());
    match recorded {
        Some(found) if found == digest(hold) => Ok(()),
        Some(_) => Err("its run held other files"),
        None => Err("its run records no hold"),
    }
}
