//! The protected state (SPEC §9): what a gate trusts lives outside the project, under a state
//! home that a sandboxed agent cannot write (Claude Code's sandbox lets the Bash tool write only
//! the project and `$TMPDIR`). One directory per project, named from its canonical path.

use std::path::{Path, PathBuf};

use crate::subject::worktree::Repository;

/// `$VIGIL_STATE_HOME`, else `$XDG_STATE_HOME/vigil`, else `~/.local/state/vigil`. A relative
/// value is ignored, as the XDG rules say: it would name a place inside whatever directory a
/// hook runs in, which is the project.
pub fn home() -> Option<PathBuf> {
    let set = |name: &str| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|dir| dir.is_absolute())
    };
    set("VIGIL_STATE_HOME")
        .or_else(|| set("XDG_STATE_HOME").map(|dir| dir.join("vigil")))
        .or_else(|| set("HOME").map(|dir| dir.join(".local/state/vigil")))
}

/// The project's own directory in the state home: `projects/<name>-<hash>`, where the hash is
/// of the git top level's canonical path (the directory itself outside git), so every
/// subdirectory and every spelling of the path finds the same one.
pub fn project_dir(project_dir: &Path) -> Option<PathBuf> {
    let top = match Repository::locate(project_dir) {
        Ok(repository) => repository.top,
        Err(_) => crate::subject::canonical(project_dir),
    };
    dir_for(&top)
}

/// Every directory of the state home that may hold this project's trusted keys: the located
/// top's, and that of each directory from the project up to the root. The agent can move the
/// located top (a `.git/HEAD` planted in a subdirectory moves it down, a `.git` made a symlink
/// moves it up to a parent repository), so a key trusted for the real top is found wherever
/// the search for `.git` now ends.
pub fn key_dirs(project_dir: &Path) -> Vec<PathBuf> {
    let mut tops: Vec<PathBuf> = crate::subject::canonical(project_dir)
        .ancestors()
        .map(Path::to_path_buf)
        .collect();
    if let Ok(repository) = Repository::locate(project_dir) {
        tops.push(repository.top);
    }
    let mut dirs: Vec<PathBuf> = tops
        .iter()
        .filter_map(|top| dir_for(top))
        .map(|dir| dir.join("trusted-keys"))
        .collect();
    dirs.sort();
    dirs.dedup();
    dirs
}

fn dir_for(top: &Path) -> Option<PathBuf> {
    let name: String = top
        .file_name()
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
        .take(48)
        .collect();
    let hash = crate::subject::sha256_hex(top.as_os_str().as_encoded_bytes());
    Some(
        home()?
            .join("projects")
            .join(format!("{name}-{}", &hash[..16])),
    )
}

/// Where the keys trusted for every project live.
pub fn global_keys() -> Option<PathBuf> {
    Some(home()?.join("trusted-keys"))
}

/// Where `marker-writer trust` puts a key for this project.
pub fn project_keys(project_dir: &Path) -> Option<PathBuf> {
    Some(self::project_dir(project_dir)?.join("trusted-keys"))
}
