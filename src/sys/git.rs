//! Git discovery from the files alone: the nearest `.git` above a directory (a directory, or a
//! file naming one, as in a linked worktree), never running git.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::sys::files::read_regular;
use crate::sys::paths;

/// A working tree and its repository, found from the files alone: the nearest `.git` above
/// the start (a directory, or a file naming one, as in a linked worktree).
#[derive(Clone, Debug)]
pub struct Repository {
    /// The top of the working tree: the directory holding `.git`, whatever the configuration
    /// says (`core.worktree` never moves it).
    pub top: PathBuf,
    pub git_dir: PathBuf,
}

impl Repository {
    pub fn locate(start: &Path) -> Result<Repository> {
        let start = std::fs::canonicalize(start).map_err(|e| Error::io("read", start, &e))?;
        for dir in start.ancestors() {
            let dot_git = dir.join(".git");
            let Ok(meta) = std::fs::symlink_metadata(&dot_git) else {
                continue;
            };
            let git_dir = if meta.is_dir() {
                dot_git
            } else if meta.is_file() {
                match gitdir_of(&dot_git) {
                    Some(git_dir) => dir.join(git_dir),
                    None => continue,
                }
            } else {
                continue;
            };
            if git_dir.join("HEAD").is_file() {
                return Ok(Repository {
                    top: dir.to_path_buf(),
                    git_dir,
                });
            }
        }
        Err(Error::input(format!(
            "the worktree subject needs a git repository, and {} is not in one; use --subject file:PATH outside git",
            start.display()
        )))
    }
}

/// The `gitdir:` a `.git` file names.
pub fn gitdir_of(dot_git: &Path) -> Option<PathBuf> {
    let text = read_regular(dot_git, 4096, false).ok()??;
    let line = text.split(|b| *b == b'\n').next()?;
    let dir = line.strip_prefix(b"gitdir: ")?;
    let dir = dir.strip_suffix(b"\r").unwrap_or(dir);
    Some(paths::from_bytes(dir))
}
