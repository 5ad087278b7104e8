//! The copy a check runs in under a hold: the content the verdict names (the snapshot), every
//! held file written as held, unheld files under a held pattern removed, and the declared
//! environment's mount points made.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::evidence::held::{areas, lossy, relative, top};
use crate::evidence::snapshot::{self, Snapshot};
use crate::evidence::subject::{self, Limits, tree};
use crate::state::hold::{self, HeldFile, Hold, Matcher};
use crate::state::project::Project;
use crate::sys::files;
use crate::sys::paths;

/// The copy a check runs in under a hold.
pub(crate) struct Prepared {
    pub snapshot: Snapshot,
    /// What the check may not write in the copy: every held pattern's directory (or file).
    pub read_only: Vec<PathBuf>,
    /// The declared environment: each place in the project, and its mount point in the copy.
    pub bound: Vec<(PathBuf, PathBuf)>,
    /// Files under a held pattern that the copy left out (the agent's new tests).
    pub left_out: Vec<String>,
}

/// Copies the content the verdict names (the snapshot), then makes every held path as held:
/// held files written from the hold's copies (edited ones restored, deleted ones back), unheld
/// files under a held pattern removed, the declared environment's mount points made (the confinement shows it there, read-only).
pub(crate) fn prepare(project: &Project, hold: &Hold, limits: Limits) -> Result<Prepared> {
    let snapshot = snapshot::take_warm(project, limits)?;
    let hold_dir = hold::dir(project);
    let stored = |held: &HeldFile| hold::blob_in(&hold_dir, &held.blob);
    // In a warm copy, a held file the copy already holds as held is left as it is.
    let kept = |held: &HeldFile| {
        snapshot
            .warm()
            .and_then(|synced| synced.entry(held.path.as_bytes()))
            .is_some_and(|(mode, id)| tree::hex(&id) == held.blob && mode_octal(mode) == held.mode)
    };
    let copies = hold::env_dir(project);
    let applied = apply(
        &top(project)?,
        &project.dir,
        snapshot.path(),
        hold,
        &stored,
        &kept,
        Some(&copies),
    )?;
    // An unwritten seal leaves the last one, before every change made here: the next Stop
    // then reads again what changed since, and believes no more.
    let _ = snapshot.seal(&applied.touched);
    Ok(Prepared {
        snapshot,
        read_only: applied.read_only,
        bound: applied.bound,
        left_out: applied.left_out,
    })
}

/// What [`apply`] did to a copy.
pub(crate) struct Applied {
    /// Paths (or directories) of the copy written or removed here, from the top.
    pub touched: Vec<String>,
    pub read_only: Vec<PathBuf>,
    pub bound: Vec<(PathBuf, PathBuf)>,
    pub left_out: Vec<String>,
}

/// Makes every held path of the copy at `copy` (of the repository at `top`) as held: each held
/// file written from `bytes_of` (checked against its blob id), unheld files under a held
/// pattern removed, the declared environment's mount points made.
pub(crate) fn apply(
    top: &Path,
    project_dir: &Path,
    copy: &Path,
    hold: &Hold,
    bytes_of: &dyn Fn(&HeldFile) -> Result<Vec<u8>>,
    kept: &dyn Fn(&HeldFile) -> bool,
    env_copies: Option<&Path>,
) -> Result<Applied> {
    let copy = fs_err::canonicalize(copy).map_err(Error::fs)?;
    let mut touched = Vec::new();
    for held in &hold.files {
        if kept(held) {
            continue;
        }
        let bytes = bytes_of(held)?;
        if tree::hex(&tree::blob_id(&bytes)?) != held.blob {
            return Err(Error::input(format!(
                "the held copy of {} is damaged; a human must run `stop-gate hold refresh {}`",
                held.path, held.path
            )));
        }
        put(&copy, &held.path, &held.mode, &bytes)?;
        touched.push(held.path.clone());
    }
    let matcher = hold.matcher();
    let mut left_out = Vec::new();
    let here = crate::sys::paths::canonical(project_dir);
    let here = here
        .strip_prefix(top)
        .map(|rest| copy.join(rest))
        .unwrap_or_else(|_| copy.clone());
    for (start, deep) in areas(&copy, hold, &here) {
        remove_unheld(&copy, &start, deep, hold, &matcher, &mut left_out)?;
    }
    left_out.sort();
    left_out.dedup();
    let mut read_only = Vec::new();
    for prefix in hold.prefixes() {
        if prefix.is_empty() {
            read_only.extend(hold.files.iter().map(|f| copy.join(&f.path)));
        } else if std::fs::symlink_metadata(copy.join(&prefix)).is_ok() {
            read_only.push(copy.join(&prefix));
        }
    }
    let mut bound = Vec::new();
    let sources = hold
        .env
        .iter()
        .map(|env| (env.clone(), top.join(env)))
        .chain(hold.env_copies.iter().map(|held| {
            (
                held.path.clone(),
                env_copies.map_or_else(PathBuf::new, |dir| dir.join(&held.copy)),
            )
        }));
    for (env, live) in sources {
        // What is mounted is the human's declared place, never where a link the agent made
        // leads (the state home, the user's sockets).
        refuse_links(top, &env)?;
        let Ok(meta) = std::fs::symlink_metadata(&live) else {
            continue;
        };
        if meta.file_type().is_symlink() {
            return Err(Error::input(format!(
                "the held copy of the environment {env} is a link; make it again with `stop-gate hold add --env {env} --copy`"
            )));
        }
        // The mount point: an empty directory or file where the environment goes.
        let place = real_parent(&copy, &env)?;
        if meta.is_dir() {
            fs_err::create_dir(&place).map_err(Error::fs)?;
        } else {
            files::create_new(&place, 0o644).map_err(|e| Error::io("create", &place, &e))?;
        }
        bound.push((live, place));
        touched.push(env);
    }
    touched.extend(left_out.iter().cloned());
    Ok(Applied {
        touched,
        read_only,
        bound,
        left_out,
    })
}

/// Refuses a declared environment `env` (from the repository's `top`) whose path holds a
/// link, or that is not inside the repository as it really is.
pub(super) fn refuse_links(top: &Path, env: &str) -> Result<()> {
    let mut at = top.to_path_buf();
    for part in env.split('/') {
        at.push(part);
        match std::fs::symlink_metadata(&at) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(Error::input(format!(
                    "the declared environment {env} goes through a link ({}), which could show the check what it must not see; make it a real directory, or declare it again",
                    at.display()
                )));
            }
            Ok(_) => {}
            Err(_) => return Ok(()),
        }
    }
    if !crate::sys::paths::canonical(&at).starts_with(top) {
        return Err(Error::input(format!(
            "the declared environment {env} is not inside the repository"
        )));
    }
    Ok(())
}

/// A tree mode as a hold records it.
fn mode_octal(mode: tree::Mode) -> &'static str {
    match mode {
        tree::Mode::File => "100644",
        tree::Mode::Executable => "100755",
        tree::Mode::Symlink => "120000",
    }
}

/// Writes a held file into the copy at `path`, through real directories only.
fn put(copy: &Path, path: &str, mode: &str, bytes: &[u8]) -> Result<()> {
    let place = real_parent(copy, path)?;
    if mode == "120000" {
        return files::symlink(&paths::os_str(bytes), &place)
            .map_err(|e| Error::io("write", &place, &e));
    }
    let bits = if mode == "100755" { 0o755 } else { 0o644 };
    let mut file = files::create_new(&place, bits).map_err(|e| Error::io("write", &place, &e))?;
    file.write_all(bytes)
        .map_err(|e| Error::io("write", &place, &e))
}

/// Where `path` goes in `copy`: its parent directories made real and whatever is at it
/// removed (a link or file in the way removed, never followed, so a held file is never
/// written through a link the agent made), as the warm copy places its files.
fn real_parent(copy: &Path, path: &str) -> Result<PathBuf> {
    hold::check_path(path)?;
    subject::worktree::warm::place(copy, path.as_bytes())
}

/// Removes from the copy at `start` (all below it when `deep`, else its own files) every file or
/// link the hold leaves out (`Hold::unheld`), and any whose name is not UTF-8 (no hold holds one).
fn remove_unheld(
    copy: &Path,
    start: &Path,
    deep: bool,
    hold: &Hold,
    matcher: &Matcher,
    left_out: &mut Vec<String>,
) -> Result<()> {
    let meta = match std::fs::symlink_metadata(start) {
        Ok(meta) => meta,
        Err(_) => return Ok(()),
    };
    if !meta.is_dir() {
        let out = match relative(copy, start) {
            Some(path) => hold.unheld(matcher, &path).is_some().then_some(path),
            None => Some(lossy(copy, start)),
        };
        if let Some(path) = out {
            fs_err::remove_file(start).map_err(Error::fs)?;
            left_out.push(path);
        }
        return Ok(());
    }
    let entries = fs_err::read_dir(start).map_err(Error::fs)?;
    for entry in entries {
        let entry = entry.map_err(Error::fs)?;
        let kind = entry.file_type().map_err(Error::fs)?;
        if kind.is_dir() && !deep {
            continue;
        }
        remove_unheld(copy, &entry.path(), deep, hold, matcher, left_out)?;
    }
    Ok(())
}
