//! What a handoff says about the repository: HEAD, branch, and whether the working tree is
//! dirty, each from git calls bounded by a deadline. A git that is slow or hangs costs the
//! handoff its detail, never its budget.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::subject;
use crate::time::Deadline;

/// At most this many changed paths are named.
pub const MAX_CHANGED: usize = 50;
const MAX_PATH: usize = 200;

/// `schemas/handoff.schema.json#/$defs/git`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GitState {
    pub head: String,
    /// `None` on a detached HEAD.
    pub branch: Option<String>,
    /// `None` when `git status` did not answer within the budget.
    pub dirty: Option<bool>,
    /// Up to 50 changed paths (tracked and untracked); `None` with `dirty`.
    pub changed_files: Option<Vec<String>>,
}

/// The repository state at `dir`, or `None` outside a repository or when even HEAD could
/// not be read in time. `dirty` and `changed_files` are `None` when status ran out of time.
/// vigil's own state directory never counts as a change.
pub fn state(dir: &Path, state_dir: &Path, deadline: Deadline) -> Option<GitState> {
    let heads = subject::git(
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
    let toplevel = Path::new(lines.next()?);
    let head = lines.next()?.to_string();
    let branch = lines
        .next()
        .filter(|b| !b.is_empty() && *b != "HEAD")
        .map(str::to_string);
    let mut args = vec![
        "status",
        "--porcelain=v1",
        "-z",
        "--untracked-files=normal",
        "--",
        ":/",
    ];
    let exclusion = subject::state_exclusion(toplevel, state_dir, deadline.remaining())
        .ok()
        .flatten();
    args.extend(exclusion.as_deref());
    let status = subject::git_untrimmed(dir, &args, &[], deadline.remaining());
    let (dirty, changed_files) = match status {
        Ok(text) => {
            let changed = changed_paths(&text);
            (
                Some(!changed.is_empty()),
                Some(changed.into_iter().take(MAX_CHANGED).collect()),
            )
        }
        Err(_) => (None, None),
    };
    Some(GitState {
        head,
        branch,
        dirty,
        changed_files,
    })
}

/// The paths of `git status --porcelain=v1 -z`: `XY path`, and for renames a second entry
/// holding the old path, which is skipped.
fn changed_paths(text: &str) -> Vec<String> {
    let mut paths = Vec::new();
    let mut entries = text.split('\0').filter(|e| !e.is_empty());
    while let Some(entry) = entries.next() {
        let Some(path) = entry.get(3..) else { continue };
        let shown: String = path.chars().take(MAX_PATH).collect();
        paths.push(shown);
        if entry.starts_with('R') || entry.starts_with('C') {
            entries.next();
        }
    }
    paths
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn porcelain_paths() {
        let text = " M src/a.rs\0?? new file.txt\0R  new.rs\0old.rs\0D  gone.rs\0";
        assert_eq!(
            changed_paths(text),
            vec!["src/a.rs", "new file.txt", "new.rs", "gone.rs"]
        );
        assert!(changed_paths("").is_empty());
    }
}
