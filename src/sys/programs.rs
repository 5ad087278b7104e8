//! The programs vigil starts of its own accord (git, the shell a check runs in) and the PATH
//! they are given: found in the system's own places, never through a PATH entry the agent can
//! fill. The client is often started with a project's `.venv/bin` or `node_modules/.bin` on
//! PATH, which the agent's sandboxed shell writes; a `git` planted there would run with the
//! user's rights at the next handoff. What a user's own command runs (the check's `pytest`, a
//! writer's command) keeps the PATH the user gave it: that is the user's choice, not vigil's.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Where the system keeps its programs, in the order looked in: the distribution's, then the
/// administrator's and Homebrew's, then NixOS's system profile. All are the administrator's to
/// write (Homebrew's the user's), never the project's or a temporary directory.
pub(crate) const SYSTEM_DIRS: &[&str] = &[
    "/usr/bin",
    "/bin",
    "/usr/local/bin",
    "/opt/homebrew/bin",
    "/run/current-system/sw/bin",
    "/usr/sbin",
    "/sbin",
];

/// The system's PATH: [`SYSTEM_DIRS`] joined.
pub(crate) fn system_path() -> OsString {
    SYSTEM_DIRS.join(":").into()
}

/// The shell a check runs in on Unix (and inside a confinement): the system's own, by absolute
/// path.
pub(crate) const SH: &str = "/bin/sh";

/// The `git` vigil runs in a project: in the system's places first; else (a git the user keeps
/// in `~/.local/bin`, Linuxbrew, a Nix profile, or on Windows wherever its installer put it)
/// through the caller's PATH with every entry the agent could fill taken off ([`trusted_path`]).
/// `None`: no git anywhere vigil looks.
pub(crate) fn git(project: &Path) -> Option<PathBuf> {
    // Debug builds only (the test suite's): a git that hangs, or is slow, in the system's place.
    #[cfg(debug_assertions)]
    if let Some(path) = std::env::var_os("VIGIL_TEST_GIT") {
        return Some(PathBuf::from(path));
    }
    #[cfg(unix)]
    if let Some(found) = find_in(std::env::split_paths(&system_path()), "git") {
        return Some(found);
    }
    find_in(std::env::split_paths(&trusted_path(project)), "git")
}

/// The caller's PATH less every entry the agent could fill: a relative or empty entry (it names
/// a directory of wherever the program runs: the project), an entry inside `project`, and the
/// temporary directories the agent's sandboxed shell writes. The order of the rest is kept.
pub(crate) fn trusted_path(project: &Path) -> OsString {
    let Some(path) = std::env::var_os("PATH") else {
        return OsString::new();
    };
    let project = super::paths::canonical(project);
    let temp = [
        super::paths::canonical(&super::paths::temp_dir()),
        super::paths::canonical(&std::env::temp_dir()),
    ];
    let kept = std::env::split_paths(&path).filter(|entry| {
        if !entry.is_absolute() {
            return false;
        }
        let real = super::paths::canonical(entry);
        !super::paths::within(&real, &project)
            && !temp.iter().any(|dir| super::paths::within(&real, dir))
    });
    std::env::join_paths(kept.collect::<Vec<_>>()).unwrap_or_default()
}

/// The PATH entries inside `project`, as the caller has them: each finds programs the agent can
/// put there, for every command that runs with this PATH (the doctor names them).
pub(crate) fn path_entries_inside(project: &Path) -> Vec<PathBuf> {
    let Some(path) = std::env::var_os("PATH") else {
        return Vec::new();
    };
    let project = super::paths::canonical(project);
    std::env::split_paths(&path)
        .filter(|entry| {
            !entry.is_absolute() || super::paths::within(&super::paths::canonical(entry), &project)
        })
        .collect()
}

/// The first of `dirs` that holds `program` executable, under any of the names the system
/// tries.
fn find_in(dirs: impl Iterator<Item = PathBuf>, program: &str) -> Option<PathBuf> {
    let names = super::platform::fs::program_names(program);
    dirs.flat_map(|dir| names.iter().map(move |name| dir.join(name)))
        .find(|candidate| super::files::is_executable(candidate))
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn the_system_path_has_no_relative_or_temporary_entry() {
        for dir in SYSTEM_DIRS {
            assert!(Path::new(dir).is_absolute(), "{dir}");
            assert!(
                !dir.starts_with("/tmp") && !dir.starts_with("/var/tmp"),
                "{dir}"
            );
        }
        assert!(
            system_path()
                .to_string_lossy()
                .contains("/run/current-system/sw/bin")
        );
    }

    #[test]
    fn the_shell_is_the_systems_by_absolute_path() {
        assert!(Path::new(SH).is_absolute());
    }
}
