//! `marker-writer run --snapshot` (SPEC §5): the command runs in a private copy of exactly the
//! content the marker names, with a clean environment, so nothing that changes the worktree
//! while it runs (even a change undone before the end) reaches what it tests.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::evidence::subject::{self, Limits};
use crate::reach;
use crate::state::project::Project;
use crate::state::protected;
use crate::sys::files;
use crate::sys::git::Repository;

/// A copy of the worktree, removed when dropped.
pub struct Snapshot {
    dir: tempfile::TempDir,
    /// The id of exactly what was copied.
    pub subject: String,
    /// Where the command starts: the copy of the directory marker-writer was run from.
    pub cwd: PathBuf,
    /// Whether the copy is in the protected state (else in the temp directory, which a
    /// sandboxed agent can write).
    pub protected: bool,
}

impl Snapshot {
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// Copies the worktree into a fresh private directory of the protected state (the system's
/// temp directory when that cannot be made), hashing what it copies.
pub fn take(project: &Project, limits: Limits) -> Result<Snapshot> {
    let protected = protected::project_dir(&project.dir).map(|dir| dir.join("snapshots"));
    let made = protected.as_ref().and_then(|dir| {
        files::make_private_dir(dir).ok()?;
        tempfile::Builder::new().prefix("run-").tempdir_in(dir).ok()
    });
    let in_protected = made.is_some();
    let dir = match made {
        Some(dir) => dir,
        None => tempfile::Builder::new()
            .prefix("vigil-snapshot-")
            .tempdir()
            .map_err(|e| Error::Io(format!("cannot make a snapshot directory: {e}")))?,
    };
    let subject = subject::worktree_snapshot(project, limits, dir.path())?;
    links_stay_inside(dir.path())?;
    // The command runs where the gate's check runs: at the project (SPEC §2), whatever
    // directory the writer was started in.
    let top = Repository::locate(&project.dir)?.top;
    let here = std::fs::canonicalize(&project.dir)
        .ok()
        .and_then(|dir| dir.strip_prefix(&top).ok().map(Path::to_path_buf))
        .unwrap_or_default();
    let cwd = dir.path().join(here);
    // A directory that held only ignored files is not in the copy: start at the nearest one.
    let cwd = cwd
        .ancestors()
        .find(|d| d.is_dir())
        .unwrap_or(dir.path())
        .to_path_buf();
    Ok(Snapshot {
        dir,
        subject,
        cwd,
        protected: in_protected,
    })
}

/// Every link in the copy leads inside it, judged by where it resolves: a link whose target
/// reads as inside can still leave through another link (`z -> a/top/..` where `a/top -> ..`),
/// and in the copy it would reach the live files the marker does not vouch for.
fn links_stay_inside(root: &Path) -> Result<()> {
    let root = std::fs::canonicalize(root)
        .map_err(|e| Error::Io(format!("cannot read the snapshot: {e}")))?;
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        let entries =
            std::fs::read_dir(&dir).map_err(|e| Error::io("read the snapshot", &dir, &e))?;
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = entry.path();
            if kind.is_dir() {
                dirs.push(path);
            } else if kind.is_symlink() {
                let shown = path
                    .strip_prefix(&root)
                    .unwrap_or(&path)
                    .display()
                    .to_string();
                match reach::resolve(&path) {
                    Some(place) if place.starts_with(&root) => {}
                    Some(place) => {
                        return Err(Error::input(format!(
                            "{shown} is a symlink that leads out of the tree through another link (to {}): in a snapshot the command would read the live file, which no marker vouches for; make it lead inside, or run in place",
                            place.display()
                        )));
                    }
                    None => {
                        return Err(Error::input(format!(
                            "{shown} is a symlink in a loop of links; make it lead to a file of the tree"
                        )));
                    }
                }
            }
        }
    }
    Ok(())
}
