//! What a check run in place makes below the top: no mount forbids a name before it exists, so
//! the read-only set below the top is walked before the run and again after it (issue 43), and
//! what appeared is listed in the protected state until it is gone.

use std::path::{Path, PathBuf};

use super::{Mount, Unavailable, git_dirs};
use crate::reach::{Entry, nested};
use crate::sys::atomic;
use crate::sys::atomic::Durability;
use crate::sys::files;

/// The read-only set below an in-place check's top as it was before the run: the walk's
/// finds, and the places git would run that did not exist (no mount can keep them unmade).
#[derive(Clone, Debug)]
pub(crate) struct Watch {
    work: PathBuf,
    before: nested::Found,
    absent: Vec<PathBuf>,
    /// Where what a run made is listed (in the protected state), so every later run is no
    /// pass either while one is still there: the next run's walk would take it for the user's.
    ledger: Option<PathBuf>,
}

impl Watch {
    /// The read-only names and places git runs from, below the top, that this run or an
    /// earlier one made and that are still there.
    pub(super) fn appeared(&self) -> Appeared {
        let mut made = nested::appeared(&self.before, &nested::walk(&self.work));
        made.extend(
            self.absent
                .iter()
                .filter(|path| std::fs::symlink_metadata(path).is_ok())
                .cloned(),
        );
        let Some(ledger) = &self.ledger else {
            return Appeared {
                made,
                unrecorded: None,
            };
        };
        let listed = left_behind_in(ledger);
        for path in &listed {
            if !made.contains(path) {
                made.push(path.clone());
            }
        }
        let mut unrecorded = None;
        if made != listed {
            let text: String = made
                .iter()
                .filter_map(|path| Some(format!("{}\n", path.to_str()?)))
                .collect();
            let written = if made.is_empty() {
                std::fs::remove_file(ledger)
            } else {
                atomic::write_atomic_as(ledger, text.as_bytes(), 0o600, Durability::Wait)
            };
            unrecorded = written.err().map(|e| e.to_string());
        }
        Appeared { made, unrecorded }
    }
}

/// What a confined run made below the top (with what earlier runs made that is still there),
/// and why it could not be recorded for the next run, if it could not: then only this run
/// knows, and says so.
#[derive(Debug, Default)]
pub(crate) struct Appeared {
    pub made: Vec<PathBuf>,
    pub unrecorded: Option<String>,
}

impl Appeared {
    /// What was made, as `made X, Y, which the engine or git would run with your rights{then}
    /// remove them and find what made them`, each path from `base` (an empty `base` keeps them
    /// whole), with why it could not be recorded for the next run, if it could not.
    pub(crate) fn told(&self, base: &Path, then: &str) -> String {
        let named: Vec<String> = self
            .made
            .iter()
            .map(|path| {
                path.strip_prefix(base)
                    .unwrap_or(path)
                    .display()
                    .to_string()
            })
            .collect();
        let them = if self.made.len() == 1 { "it" } else { "them" };
        let unrecorded = self.unrecorded.as_ref().map_or_else(String::new, |why| {
            format!(" (vigil could not record this for the next check: {why}; it will not see it)")
        });
        format!(
            "made {}, which the engine or git would run with your rights{then} remove {them} and find what made {them}{unrecorded}",
            named.join(", ")
        )
    }
}

/// The file in a project's protected state that lists what a confined run made below the
/// top that the engine or git would run (`Watch`).
const LEFT_BEHIND: &str = "left-behind";

/// What a confined run made below the top, listed in the protected state directory `dir`, that
/// is still there: told at session start, and no check passes while one is.
pub(crate) fn left_behind(dir: &Path) -> Vec<PathBuf> {
    left_behind_in(&dir.join(LEFT_BEHIND))
}

fn left_behind_in(ledger: &Path) -> Vec<PathBuf> {
    let Ok(file) = files::open_state(ledger) else {
        return Vec::new();
    };
    let Ok(bytes) = files::read_capped(file, 1 << 20, "the left-behind list", ledger) else {
        return Vec::new();
    };
    String::from_utf8_lossy(&bytes)
        .lines()
        .map(PathBuf::from)
        .filter(|path| std::fs::symlink_metadata(path).is_ok())
        .collect()
}

/// The read-only set below the top of an in-place `work` (`nested`): each name found bound
/// read-only (with the git directories a `.git` file names), and each place git runs from
/// that exists; what does not exist yet is watched. A link among them, or a configuration git
/// cannot read in time: the project cannot be confined.
pub(super) fn nested_entries(
    work: &Path,
    hidden: &[(PathBuf, Entry)],
    mounts: &mut Vec<Mount>,
    ledger: Option<&Path>,
) -> Result<Watch, Unavailable> {
    let before = nested::walk(work);
    if let Some(link) = before.links.first() {
        return Err(Unavailable::Project(format!(
            "{} is a symlink, which a confined check could replace with files of its own that the engine or git would then run; make it a real file or directory",
            link.display()
        )));
    }
    let mut repos = nested::repositories(work, &before);
    // The repository the project is a part of, where its top is above the project's.
    if let Ok(holder) = crate::sys::git::Repository::locate(work)
        && holder.top != work
    {
        repos.push(holder.top.join(".git"));
    }
    if repos.len() > nested::MAX_REPOSITORIES {
        return Err(Unavailable::Project(format!(
            "{} holds {} git repositories, more than the {} whose configuration a check reads before it runs",
            work.display(),
            repos.len(),
            nested::MAX_REPOSITORIES
        )));
    }
    for (path, _) in &before.entries {
        if path.file_name().is_some_and(|n| n == ".git")
            && std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file())
        {
            mounts.extend(
                git_dirs(path)
                    .into_iter()
                    .filter(|dir| !hidden.iter().any(|(h, _)| dir.starts_with(h)))
                    .map(Mount::ReadOnly),
            );
        }
        mounts.push(Mount::ReadOnly(path.clone()));
    }
    let mut absent = Vec::new();
    let deadline = crate::sys::time::Deadline::after(nested::CONFIG_BUDGET);
    for repo in repos {
        let runs = nested::git_runs(work, &repo, deadline).map_err(|e| {
            Unavailable::Project(format!(
                "what git runs from {} cannot be read ({e}), so a check cannot be kept from it",
                repo.display()
            ))
        })?;
        for run in runs {
            if run.through_link {
                return Err(Unavailable::Project(format!(
                    "git reaches {} through a symlink in the project ({}), which a confined check could point elsewhere; make it a real path",
                    run.path.display(),
                    run.why
                )));
            }
            match std::fs::symlink_metadata(&run.path) {
                Ok(_) => mounts.push(Mount::ReadOnly(run.path)),
                Err(_) => absent.push(run.path),
            }
        }
    }
    Ok(Watch {
        work: work.to_path_buf(),
        before,
        absent,
        ledger: ledger.map(|l| l.with_file_name(LEFT_BEHIND)),
    })
}
