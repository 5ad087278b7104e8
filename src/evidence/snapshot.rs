//! `marker-writer run --snapshot` (SPEC §5): the command runs in a private copy of exactly the
//! content the marker names, with a clean environment, so nothing that changes the worktree
//! while it runs (even a change undone before the end) reaches what it tests.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::evidence::subject::worktree::Synced;
use crate::evidence::subject::{self, Limits, tree};
use crate::reach;
use crate::state::project::Project;
use crate::state::protected;
use crate::sys::files;
use crate::sys::git::Repository;
use crate::sys::lock::FileLock;

/// A copy of the worktree: a fresh one is removed when dropped; a warm one (under a hold) is
/// kept for the next Stop, locked while in use.
pub(crate) struct Snapshot {
    place: Place,
    /// The id of exactly what was copied.
    pub subject: String,
    /// Where the command starts: the copy of the directory marker-writer was run from.
    pub cwd: PathBuf,
    /// Whether the copy is in the protected state (else in the temp directory, which a
    /// sandboxed agent can write).
    pub protected: bool,
}

enum Place {
    Fresh(tempfile::TempDir),
    Warm {
        copy: PathBuf,
        index: PathBuf,
        synced: Synced,
        _lock: FileLock,
    },
}

impl Snapshot {
    pub(crate) fn path(&self) -> &Path {
        match &self.place {
            Place::Fresh(dir) => dir.path(),
            Place::Warm { copy, .. } => copy,
        }
    }

    /// What a warm copy holds, file by file (`None` for a fresh copy).
    pub(crate) fn warm(&self) -> Option<&Synced> {
        match &self.place {
            Place::Fresh(_) => None,
            Place::Warm { synced, .. } => Some(synced),
        }
    }

    /// Seals a warm copy once it is as the check must find it (its cache written): what
    /// changes it afterwards is undone before the next check. `touched`: the paths changed in
    /// it since it was brought to the tree (read again next time). A fresh copy needs nothing.
    pub(crate) fn seal(&self, touched: &[String]) -> Result<()> {
        match &self.place {
            Place::Fresh(_) => Ok(()),
            Place::Warm {
                index,
                copy,
                synced,
                ..
            } => synced.seal(index, copy, touched),
        }
    }
}

/// Copies the worktree into a fresh private directory of the protected state (the system's
/// temp directory when that cannot be made), hashing what it copies.
pub(crate) fn take(project: &Project, limits: Limits) -> Result<Snapshot> {
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
    let cwd = start_in(project, dir.path())?;
    Ok(Snapshot {
        place: Place::Fresh(dir),
        subject,
        cwd,
        protected: in_protected,
    })
}

/// The warm copy of the project's worktree (SPEC §11), in the protected state, brought to the
/// tree by what changed since the last one; a fresh copy ([`take`]) where there is no
/// protected state, where another check holds the warm one, or where it cannot be brought
/// to the tree (it is then discarded, and made anew next time), or where the state home's
/// file system does not move a change time for every write (tmpfs, for a write through a
/// memory mapping; only ext4, XFS and Btrfs on Linux are known to).
pub(crate) fn take_warm(project: &Project, limits: Limits) -> Result<Snapshot> {
    if !cfg!(unix) || std::env::var_os("VIGIL_CHECK_COPY").is_some_and(|v| v == "fresh") {
        return take(project, limits);
    }
    let Some(dir) = protected::project_dir(&project.dir).map(|dir| dir.join("check-copy")) else {
        return take(project, limits);
    };
    if files::make_private_dir(&dir).is_err() {
        return take(project, limits);
    }
    let Ok(lock) = FileLock::acquire(&dir.join("lock"), std::time::Duration::ZERO) else {
        return take(project, limits);
    };
    // The copy is believed as vigil left it only where every write the check makes to it
    // moves a change time (a write through a memory mapping included).
    if !files::stamps_every_write(&dir) {
        return take(project, limits);
    }
    let copy = dir.join("copy");
    let index = dir.join("index");
    let synced = subject::worktree_warm(project, limits, &copy, &index).and_then(|synced| {
        for link in synced.links() {
            link_stays_inside(&copy, link)?;
        }
        Ok(synced)
    });
    let synced = match synced {
        Ok(synced) => synced,
        Err(_) => {
            // Made anew next time; this check runs in a fresh copy, which says what failed.
            subject::worktree::warm::discard(&copy, &index);
            drop(lock);
            return take(project, limits);
        }
    };
    let cwd = start_in(project, &copy)?;
    Ok(Snapshot {
        subject: format!("git-tree:{}", tree::hex(&synced.tree)),
        place: Place::Warm {
            copy,
            index,
            synced,
            _lock: lock,
        },
        cwd,
        protected: true,
    })
}

/// Removes the project's warm copy once nothing is held (it is as large as the project's
/// files); one a check holds now is left for the next release.
pub(crate) fn discard_warm(project: &Project) {
    let Some(dir) = protected::project_dir(&project.dir).map(|dir| dir.join("check-copy")) else {
        return;
    };
    if let Ok(_lock) = FileLock::acquire(&dir.join("lock"), std::time::Duration::ZERO) {
        subject::worktree::warm::discard(&dir.join("copy"), &dir.join("index"));
    }
}

/// Where the command starts in the copy at `root`: the copy of the project's directory (the
/// gate's check runs at the project, SPEC §2, whatever directory the writer was started in),
/// or the nearest directory above it that the copy has.
fn start_in(project: &Project, root: &Path) -> Result<PathBuf> {
    let top = Repository::locate(&project.dir)?.top;
    let here = std::fs::canonicalize(&project.dir)
        .ok()
        .and_then(|dir| dir.strip_prefix(&top).ok().map(Path::to_path_buf))
        .unwrap_or_default();
    let cwd = root.join(here);
    // A directory that held only ignored files is not in the copy: start at the nearest one.
    Ok(cwd
        .ancestors()
        .find(|d| d.is_dir())
        .unwrap_or(root)
        .to_path_buf())
}

/// A link of the warm copy at `relative` leads inside the copy (as [`links_stay_inside`]
/// judges each link of a fresh one).
fn link_stays_inside(copy: &Path, relative: &[u8]) -> Result<()> {
    let root = std::fs::canonicalize(copy).map_err(|e| Error::io("read the snapshot", copy, &e))?;
    let path = root.join(crate::sys::paths::os_str(relative));
    match reach::resolve(&path) {
        Some(place) if place.starts_with(&root) => Ok(()),
        _ => Err(Error::input(format!(
            "{} is a symlink that leads out of the tree",
            String::from_utf8_lossy(relative)
        ))),
    }
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
