//! What a marker vouches for (SPEC §5): the exact content, as a hash.
//!
//! `worktree` is the git tree of the files on disk, computed in-process from their bytes
//! (`worktree`, with git's object ids in `tree`); `file:PATH` and `stdin` are sha256s.

pub(crate) mod tree;
pub(crate) mod worktree;

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{Error, Result};
use crate::state::project::Project;
use crate::sys::digest;
use crate::sys::files;
use crate::sys::git::Repository;
use crate::sys::time::Deadline;

/// How long computing a subject may take by default before it counts as unknown.
pub(crate) const DEFAULT_BUDGET: Duration = Duration::from_secs(60);

/// What bounds computing a subject.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    pub max_file_size: u64,
    pub deadline: Deadline,
}

impl Limits {
    /// The same limits with a fresh default budget (for a second look after a long run).
    pub(crate) fn renewed(self) -> Limits {
        Limits {
            deadline: Deadline::after(DEFAULT_BUDGET),
            ..self
        }
    }
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_file_size: worktree::DEFAULT_MAX_FILE_SIZE,
            deadline: Deadline::after(DEFAULT_BUDGET),
        }
    }
}

/// A subject as named on the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Subject {
    Worktree,
    File(PathBuf),
    Stdin,
}

impl Subject {
    /// `worktree`, `file:PATH` or `stdin`.
    pub(crate) fn parse(text: &str) -> Result<Subject> {
        match text {
            "worktree" => Ok(Subject::Worktree),
            "stdin" => Ok(Subject::Stdin),
            _ => match text.strip_prefix("file:") {
                Some(path) if !path.is_empty() => Ok(Subject::File(PathBuf::from(path))),
                _ => Err(Error::usage(format!(
                    "unknown subject {text:?}; use worktree, file:PATH or stdin"
                ))),
            },
        }
    }

    /// The subject's id, e.g. `git-tree:4b825d…` or `sha256:e3b0c4…`. `stdin` hashes `stdin`.
    pub(crate) fn id(
        &self,
        project: &Project,
        stdin: Option<&[u8]>,
        limits: Limits,
    ) -> Result<String> {
        match self {
            Subject::Worktree => worktree_tree(project, limits),
            Subject::File(path) => {
                let path = project.dir.join(path);
                let file = files::open_regular(&path).map_err(|e| Error::io("read", &path, &e))?;
                let hex = digest::sha256_reader(file).map_err(|e| Error::io("read", &path, &e))?;
                Ok(format!("sha256:{hex}"))
            }
            Subject::Stdin => Ok(sha256_id(stdin.unwrap_or_default())),
        }
    }
}

/// The file-name key of a subject id: `:` becomes `-`.
pub(crate) fn key(subject_id: &str) -> String {
    subject_id.replace(':', "-")
}

pub(crate) fn sha256_id(bytes: &[u8]) -> String {
    format!("sha256:{}", digest::sha256_hex(bytes))
}

/// `git-tree:<id>` of the project's working tree, tracked and untracked non-ignored files
/// alike. vigil's own state directory is left out: writing a marker must not change what it
/// vouches for.
pub(crate) fn worktree_tree(project: &Project, limits: Limits) -> Result<String> {
    worktree_copied(project, limits, None)
}

/// `run --snapshot`: the worktree's id, computed while copying exactly the files it names into
/// `into` (an empty directory), from the same bytes.
pub(crate) fn worktree_snapshot(project: &Project, limits: Limits, into: &Path) -> Result<String> {
    worktree_copied(project, limits, Some(into))
}

fn worktree_copied(project: &Project, limits: Limits, snapshot: Option<&Path>) -> Result<String> {
    worktree::tree_id(&project.dir, &options(project, limits, snapshot))
}

/// The warm copy at `copy` (its cache at `index`) brought to the project's worktree: the id
/// of exactly what it then holds (SPEC §11).
pub(crate) fn worktree_warm(
    project: &Project,
    limits: Limits,
    copy: &Path,
    index: &Path,
) -> Result<worktree::Synced> {
    let repository = Repository::locate(&project.dir)?;
    let warm = worktree::warm::Warm::load(index, copy);
    let options = worktree::Options {
        warm: Some(&warm),
        ..options(project, limits, Some(copy))
    };
    worktree::warm_sync(&repository, &options)
}

/// The project's worktree as its subject hashes it: each file's path from the top and blob id
/// (hex), in byte order.
pub(crate) fn worktree_listing(project: &Project, limits: Limits) -> Result<Vec<(String, String)>> {
    let repository = Repository::locate(&project.dir)?;
    Ok(
        worktree::listing(&repository, &options(project, limits, None))?
            .into_iter()
            .map(|(path, id)| (String::from_utf8_lossy(&path).into_owned(), tree::hex(&id)))
            .collect(),
    )
}

/// How the project's worktree is walked: within `limits`, vigil's own state left out.
fn options<'a>(
    project: &'a Project,
    limits: Limits,
    snapshot: Option<&'a Path>,
) -> worktree::Options<'a> {
    worktree::Options {
        max_file_size: limits.max_file_size,
        deadline: limits.deadline,
        exclude: Some(&project.state),
        snapshot,
        warm: None,
    }
}

/// The working tree by the index's stat data (SPEC §9: what only informs, `by stat, not
/// verified`): its `git-tree:` id when `subject` asks for it and attributes cannot have made
/// the index's blobs differ from the bytes, and the paths from the top that differ from the
/// index. vigil's own state is left out, as in `worktree_tree`.
pub(crate) struct StatView {
    pub subject: Option<String>,
    pub changed: Vec<String>,
}

pub(crate) fn worktree_by_stat(
    project: &Project,
    limits: Limits,
    subject: bool,
) -> Result<StatView> {
    let repository = Repository::locate(&project.dir)?;
    let found = worktree::by_stat(&repository, &options(project, limits, None), subject)?;
    Ok(StatView {
        subject: found
            .tree
            .map(|tree| format!("git-tree:{}", tree::hex(&tree))),
        changed: found
            .changed
            .iter()
            .map(|path| String::from_utf8_lossy(path).into_owned())
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_parse() {
        assert_eq!(Subject::parse("worktree").unwrap(), Subject::Worktree);
        assert_eq!(
            Subject::parse("file:a/b.txt").unwrap(),
            Subject::File("a/b.txt".into())
        );
        assert_eq!(Subject::parse("stdin").unwrap(), Subject::Stdin);
        assert!(Subject::parse("file:").is_err());
        assert!(Subject::parse("tree").is_err());
    }

    #[test]
    fn keys_replace_colons() {
        assert_eq!(key("git-tree:abc"), "git-tree-abc");
        assert_eq!(
            sha256_id(b""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
