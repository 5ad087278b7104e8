//! The protected state (SPEC §9): what a gate trusts lives outside the project, under a state
//! home that a sandboxed agent cannot write (Claude Code's sandbox lets the Bash tool write only
//! the project and `$TMPDIR`). One directory per project, named from its canonical path.

use std::path::{Path, PathBuf};

use crate::sys::atomic;
use crate::sys::digest;
use crate::sys::files;
use crate::sys::git::Repository;
use crate::sys::{paths, user};

/// The install record's file name, in the project's protected state.
pub(crate) const RECORD_FILE: &str = "installed.json";

/// `$VIGIL_STATE_HOME`, else `$XDG_STATE_HOME/vigil`, else `~/.local/state/vigil`; on
/// Windows `%LOCALAPPDATA%\vigil`. A relative value is ignored, as the XDG rules say: it would
/// name a place inside whatever directory a hook runs in, which is the project.
pub(crate) fn home() -> Option<PathBuf> {
    std::env::var_os("VIGIL_STATE_HOME")
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute())
        .or_else(user::default_state_home)
}

/// The project's own directory in the state home: `projects/<name>-<hash>`, where the hash is
/// of the git top level's canonical path (the directory itself outside git), so every
/// subdirectory and every spelling of the path finds the same one.
pub(crate) fn project_dir(project_dir: &Path) -> Option<PathBuf> {
    dir_for(&state_top(project_dir))
}

/// The directory of the state home that keeps what a human's install vouched for in the
/// project directory `project` (the install record, the planted-code baseline): named after
/// that directory itself, canonical, and not after its git top as [`project_dir`] is, since the
/// agent can move the top (a `.git` planted in a monorepo project moves it down) but not the
/// directory it works in.
pub(crate) fn install_dir(project: &Path) -> Option<PathBuf> {
    dir_for(&paths::canonical(project))
}

/// [`install_dir`], made when missing (owner only, the project it is named after written in
/// it).
pub(crate) fn made_install_dir(project: &Path) -> std::io::Result<PathBuf> {
    let Some(dir) = install_dir(project) else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "no state home: $VIGIL_STATE_HOME and $HOME are not absolute paths",
        ));
    };
    files::make_private_dir(&dir)?;
    mark_top(&dir, &paths::canonical(project));
    Ok(dir)
}

/// Whether a human installed vigil into `project` with `--protect`, for either engine: its
/// install record, in the protected state, names what `--protect` changed in some settings
/// file. A record that exists but cannot be read counts as one that says so (a check is then
/// not run unconfined). Read only when a check cannot be confined.
pub(crate) fn installed_protected(project: &Path) -> bool {
    let Some(dir) = install_dir(project) else {
        return false;
    };
    let path = dir.join(RECORD_FILE);
    let file = match files::open_state(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return false,
        Err(_) => return true,
    };
    let Ok(bytes) = files::read_capped(file, 64 << 20, "the install record", &path) else {
        return true;
    };
    let Ok(record) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return true;
    };
    record["files"]
        .as_object()
        .is_some_and(|files| files.values().any(|file| file["protect"].is_object()))
}

/// The project a hook or command works on (SPEC §2), from the directory the engine started in
/// (or the command runs in). The agent can plant a `.git` (`git init`) or delete one, and so
/// move where the search for `.git` ends, but can write neither the state home nor, under
/// `--protect`, the project's git directory; so what those hold decides first:
/// 1. the nearest directory at or above the start that a human installed vigil into (its
///    install record; your home directory's is a `--user` install's, which names no project),
///    unless a repository between it and the start is registered in the git directory of the
///    installed one or one above it (a worktree, `claude --worktree`'s too, or a submodule):
///    that repository is a project of its own. A `.git` nobody registered moves nothing;
/// 2. else, up to the git top, the outermost directory vigil keeps protected state for (a
///    `.git` planted below it and removed again leaves state behind, which must not anchor);
/// 3. else the git top (the nearest `.git` of any kind), else the directory itself.
pub(crate) fn project_top(start: &Path) -> PathBuf {
    let canonical = paths::canonical(start);
    let top = top_of(&canonical);
    let Some(home) = home() else {
        return top;
    };
    let user = crate::sys::user::home().map(|h| paths::canonical(&h));
    let installed = canonical.ancestors().find(|dir| {
        Some(*dir) != user.as_deref()
            && std::fs::symlink_metadata(dir_in(&home, dir).join(RECORD_FILE))
                .is_ok_and(|meta| meta.is_file())
    });
    if let Some(installed) = installed {
        let own = canonical
            .ancestors()
            .take_while(|dir| *dir != installed)
            .find(|dir| registered(dir, installed));
        return own.unwrap_or(installed).to_path_buf();
    }
    let kept = canonical
        .ancestors()
        .take_while(|dir| dir.starts_with(&top))
        .filter(|dir| dir_in(&home, dir).is_dir())
        .last();
    kept.map_or(top, Path::to_path_buf)
}

/// Whether the repository at `dir` is registered in the git directory of `outer` or of a
/// directory above it: its `.git` is a file naming `<that>/.git/worktrees/<name>` whose
/// `gitdir` names it back (`git worktree add`), or a directory under `<that>/.git/modules/`
/// (a submodule). What registers it is written in a git directory the agent cannot write
/// under `--protect`; a bare `git init` registers nothing.
pub(crate) fn registered(dir: &Path, outer: &Path) -> bool {
    let dotgit = dir.join(".git");
    let small_file =
        std::fs::symlink_metadata(&dotgit).is_ok_and(|meta| meta.is_file() && meta.len() <= 4096);
    if !small_file {
        return false;
    }
    let Ok(text) = std::fs::read_to_string(&dotgit) else {
        return false;
    };
    let Some(named) = text.trim().strip_prefix("gitdir:") else {
        return false;
    };
    let target = paths::canonical(&dir.join(named.trim()));
    let Some(git_dir) = outer
        .ancestors()
        .map(|above| above.join(".git"))
        .find(|git_dir| target.starts_with(git_dir))
    else {
        return false;
    };
    let Ok(inside) = target.strip_prefix(&git_dir) else {
        return false;
    };
    let mut parts = inside.components().map(|c| c.as_os_str());
    match parts.next().and_then(|first| first.to_str()) {
        Some("modules") => parts.next().is_some(),
        Some("worktrees") => {
            let back = std::fs::read_to_string(target.join("gitdir")).unwrap_or_default();
            paths::canonical(Path::new(back.trim())) == paths::canonical(&dotgit)
        }
        _ => false,
    }
}

/// The directory a project's protected state is named after: the nearest one at or above it
/// that holds a `.git` of any kind (a symlink too, so the agent cannot send the search on to a
/// parent repository by making `.git` one), else the directory itself.
pub(crate) fn state_top(project_dir: &Path) -> PathBuf {
    top_of(&paths::canonical(project_dir))
}

/// `state_top` of a path already canonical.
fn top_of(canonical: &Path) -> PathBuf {
    canonical
        .ancestors()
        .find(|dir| std::fs::symlink_metadata(dir.join(".git")).is_ok())
        .unwrap_or(canonical)
        .to_path_buf()
}

/// Where a project's protected state is, and how sure that is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Place {
    /// The directory loops, session records and trusted keys live in.
    pub dir: PathBuf,
    /// The state home could not be written, so the state is in the project
    /// (`<state dir>/state/`), where the agent can change it.
    pub fallback: bool,
    /// Every directory of the state home the project's records may be in: its own first, then
    /// those named after each directory above the project (the agent can move where the search
    /// for `.git` ends by deleting `.git`, and a record must not vanish with it).
    pub candidates: Vec<PathBuf>,
    /// The project's canonical path: a directory of the state home named after a top at or
    /// above it, or below it, may hold this project's sessions (see `session::path`).
    pub project: PathBuf,
}

impl Place {
    /// The place for the project at `project_dir` whose shared state is in `state_dir`, made
    /// when missing (0700): the state home's, else the fallback in the project.
    pub(crate) fn of(project_dir: &Path, state_dir: &Path) -> Place {
        let fallback = state_dir.join("state");
        // Canonical once: every name below is derived from it.
        let project = paths::canonical(project_dir);
        let top = top_of(&project);
        let Some(dir) = dir_for(&top) else {
            return Place::fallback(fallback, None, project);
        };
        // A directory that is there is the place, writable or not: falling back from one
        // that exists would lose what is in it without a word, and a write that fails is
        // told (and a gate denies).
        if !dir.is_dir() {
            let made = files::make_private_dir(&dir).is_ok();
            if !made {
                return Place::fallback(fallback, Some(dir), project);
            }
        }
        mark_top(&dir, &top);
        Place::at(dir, project)
    }

    /// The place as `of` would find it, making nothing: the state home's directory when it is
    /// there, else the fallback when that is, else the state home's (empty).
    pub(crate) fn find(project_dir: &Path, state_dir: &Path) -> Place {
        let fallback = state_dir.join("state");
        let project = paths::canonical(project_dir);
        let Some(dir) = dir_for(&top_of(&project)) else {
            return Place::fallback(fallback, None, project);
        };
        if !dir.is_dir() && fallback.is_dir() {
            return Place::fallback(fallback, Some(dir), project);
        }
        Place::at(dir, project)
    }

    /// `project` is canonical.
    fn at(dir: PathBuf, project: PathBuf) -> Place {
        let mut candidates = vec![dir.clone()];
        for above in project.ancestors() {
            if let Some(other) = dir_for(above)
                && !candidates.contains(&other)
            {
                candidates.push(other);
            }
        }
        Place {
            dir,
            fallback: false,
            candidates,
            project,
        }
    }

    /// Whether the agent can write this place: the fallback, or a state home set inside the
    /// project (`VIGIL_STATE_HOME` pointing into it, or into its git top), or where Claude
    /// Code's sandbox lets commands write besides (`$TMPDIR`, `/tmp/claude`).
    pub(crate) fn agent_writable(&self) -> bool {
        let dir = paths::canonical(&self.dir);
        self.fallback
            || dir.starts_with(&self.project)
            || dir.starts_with(top_of(&self.project))
            || sandbox_writable(&dir)
    }

    /// The fallback: state goes into the project, but a record already in the state home
    /// (under the top's name `own`, or an ancestor's) is still looked for there first.
    fn fallback(dir: PathBuf, own: Option<PathBuf>, project: PathBuf) -> Place {
        let mut place = match own {
            Some(own) => Place::at(own, project),
            None => Place {
                dir: dir.clone(),
                fallback: true,
                candidates: Vec::new(),
                project,
            },
        };
        place.candidates.push(dir.clone());
        place.dir = dir;
        place.fallback = true;
        place
    }

    /// Whether the state home's directory `dir` is named after a top at, above or below this
    /// project (what its top file says; one without it is not taken to be).
    pub(crate) fn is_related(&self, dir: &Path) -> bool {
        let Ok(file) = files::open_state(&dir.join(TOP_FILE)) else {
            return false;
        };
        let Ok(bytes) = files::read_capped(file, 4096, "a project's top", dir) else {
            return false;
        };
        let top = &paths::from_bytes(&bytes);
        top.is_absolute()
            && dir_for(top).as_deref() == Some(dir)
            && (top.starts_with(&self.project) || self.project.starts_with(top))
    }
}

/// The file in each project directory of the state home that names its top.
const TOP_FILE: &str = "top";

/// Writes the top a project directory of the state home is named after, when it is not there
/// yet (for a Stop whose project is above or below it; see `Place::is_related`).
pub(crate) fn mark_top(dir: &Path, top: &Path) {
    let file = dir.join(TOP_FILE);
    if std::fs::symlink_metadata(&file).is_err() {
        let _ = atomic::write_atomic(&file, top.as_os_str().as_encoded_bytes(), 0o600);
    }
}

/// Whether the state home can be made and written (else the state falls back into the
/// project). Makes the state home when missing, as the hooks would.
pub(crate) fn home_is_writable() -> bool {
    let Some(home) = home() else { return false };
    files::make_private_dir(&home).is_ok() && is_writable(&home)
}

/// Whether the process can create files in `dir` (a read-only home is the usual reason not).
fn is_writable(dir: &Path) -> bool {
    files::can_write(dir, true).is_ok()
}

/// Every directory of the state home that may hold this project's trusted keys: the state
/// top's, the located repository top's, and that of each directory from the project up to the
/// root. The agent can move the located top (a `.git/HEAD` planted in a subdirectory moves it
/// down, a `.git` made a symlink or deleted moves it up to a parent repository), so a key
/// trusted for the real top is found wherever the search for `.git` now ends.
pub(crate) fn key_dirs(project_dir: &Path) -> Vec<PathBuf> {
    let mut tops: Vec<PathBuf> = paths::canonical(project_dir)
        .ancestors()
        .map(Path::to_path_buf)
        .collect();
    tops.push(state_top(project_dir));
    if let Ok(repository) = Repository::locate(project_dir) {
        tops.push(repository.top);
    }
    // A linked worktree shares the keys trusted for its main checkout (SPEC §10).
    tops.push(crate::sys::git::main_checkout(project_dir));
    let mut dirs: Vec<PathBuf> = tops
        .iter()
        .filter_map(|top| dir_for(top))
        .map(|dir| dir.join("trusted-keys"))
        .collect();
    dirs.sort();
    dirs.dedup();
    dirs
}

/// The state home's directories of `start` and of each directory above it, nearest first
/// (`start` canonical): whatever the git top is now (the agent can move it, with a `.git` it
/// plants or moves away), the directory of the top a human configured is among them.
pub(crate) fn dirs_above(start: &Path) -> Vec<PathBuf> {
    start.ancestors().filter_map(dir_for).collect()
}

fn dir_for(top: &Path) -> Option<PathBuf> {
    Some(dir_in(&home()?, top))
}

/// The last component of `path` in letters, digits, `.`, `_` and `-` (any other character
/// becomes `_`), at most `max` of them: a name safe in a file name.
pub(crate) fn plain_name(path: &Path, max: usize) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .take(max)
        .collect()
}

/// The directory of the state home `home` named after the project top `top` (a canonical path).
pub fn dir_in(home: &Path, top: &Path) -> PathBuf {
    let name = plain_name(top, 48);
    let hash = digest::sha256_hex(top.as_os_str().as_encoded_bytes());
    home.join("projects")
        .join(format!("{name}-{}", &hash[..16]))
}

/// Every project directory the state home holds (none when it has none, or cannot be read).
pub(crate) fn project_dirs() -> Vec<PathBuf> {
    let Some(projects) = home().map(|home| home.join("projects")) else {
        return Vec::new();
    };
    std::fs::read_dir(projects).map_or_else(
        |_| Vec::new(),
        |entries| {
            entries
                .flatten()
                .filter(|entry| entry.file_type().is_ok_and(|t| t.is_dir()))
                .map(|entry| entry.path())
                .collect()
        },
    )
}

/// Where the keys trusted for every project live.
pub(crate) fn global_keys() -> Option<PathBuf> {
    Some(home()?.join("trusted-keys"))
}

/// Where `marker-writer trust` puts a key for this project.
pub(crate) fn project_keys(project_dir: &Path) -> Option<PathBuf> {
    Some(self::project_dir(project_dir)?.join("trusted-keys"))
}

/// Whether Claude Code's sandbox lets the agent's commands write `path` besides the project
/// (seen with 2.1.332): `$TMPDIR`, and `/tmp/claude`.
pub(crate) fn sandbox_writable(path: &Path) -> bool {
    let path = paths::canonical(path);
    let tmpdir = std::env::var_os("TMPDIR").filter(|t| Path::new(t).is_absolute());
    path.starts_with("/tmp/claude")
        || path.starts_with("/private/tmp/claude")
        || tmpdir.is_some_and(|t| path.starts_with(paths::canonical(Path::new(&t))))
}
