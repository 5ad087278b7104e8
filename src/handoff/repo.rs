//! What a handoff says about the repository: HEAD, the branch and the staged changes, from git
//! calls bounded by a deadline (the working tree's changes come from the handoff's own walk by
//! stat data, `subject::worktree_by_stat`). A git that is slow or hangs costs the handoff its
//! detail, never its budget.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::sys::git::{git, git_untrimmed};
use crate::sys::paths;
use crate::sys::time::Deadline;

/// At most this many changed paths are named.
pub(crate) const MAX_CHANGED: usize = 50;
const MAX_PATH: usize = 200;

/// `schemas/handoff.schema.json#/$defs/git`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct GitState {
    pub head: String,
    /// `None` on a detached HEAD.
    pub branch: Option<String>,
    /// By the index's stat data; `None` when it could not be told within the budget.
    pub dirty: Option<bool>,
    /// Up to 50 changed paths (tracked and untracked); `None` with `dirty`.
    pub changed_files: Option<Vec<String>>,
}

/// HEAD, the branch, and the top of the working tree, as git finds them.
pub(crate) struct Heads {
    pub toplevel: PathBuf,
    pub head: String,
    /// `None` on a detached HEAD.
    pub branch: Option<String>,
}

/// HEAD and the branch at `dir`, or `None` outside a repository, on an unborn branch, or when
/// git did not answer in time.
pub(crate) fn heads(dir: &Path, deadline: Deadline) -> Option<Heads> {
    let heads = git(
        dir,
        &[
            "rev-parse",
            "--show-toplevel",
            "HEAD",
            "--abbrev-ref",
            "HEAD",
        ],
        &[],
        deadline.remaining(),
    )
    .ok()?;
    let mut lines = heads.lines().map(str::trim);
    let toplevel = PathBuf::from(lines.next()?);
    let head = lines.next()?.to_string();
    let branch = lines
        .next()
        .filter(|b| !b.is_empty() && *b != "HEAD")
        .map(str::to_string);
    Some(Heads {
        toplevel,
        head,
        branch,
    })
}

/// The paths whose staged content differs from HEAD's (`git diff-index --cached`, which reads
/// no working file), vigil's own state left out.
pub(crate) fn staged(
    dir: &Path,
    heads: &Heads,
    state_dir: &Path,
    deadline: Deadline,
) -> Result<Vec<String>> {
    let text = git_untrimmed(
        dir,
        &[
            "diff-index",
            "--cached",
            "--name-only",
            "-z",
            "--no-renames",
            "HEAD",
            "--",
        ],
        &[],
        deadline.remaining(),
    )?;
    let state = inside(&heads.toplevel, state_dir);
    Ok(text
        .split('\0')
        .filter(|path| !path.is_empty())
        .filter(|path| !state.as_deref().is_some_and(|state| within(path, state)))
        .map(|path| path.chars().take(MAX_PATH).collect())
        .collect())
}

/// `path` (from the top) is `dir` or inside it.
fn within(path: &str, dir: &str) -> bool {
    path.strip_prefix(dir)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// Where `state_dir` lies inside the tree at `toplevel`, from its top.
fn inside(toplevel: &Path, state_dir: &Path) -> Option<String> {
    let state = paths::canonical(state_dir);
    let top = paths::canonical(toplevel);
    let inside = state.strip_prefix(&top).ok()?;
    (!inside.as_os_str().is_empty()).then(|| inside.to_string_lossy().into_owned())
}
