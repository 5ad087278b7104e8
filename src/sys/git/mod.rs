//! Git: the repository that holds a directory, found from the files alone (the nearest `.git`
//! above it: a directory, or a file naming one, as in a linked worktree), and running git with
//! settings the repository's configuration cannot override, within a timeout.

pub(crate) mod sealed;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::sys::files::read_regular;
use crate::sys::paths;
use crate::sys::process;
use crate::sys::programs;

/// A working tree and its repository, found from the files alone: the nearest `.git` above
/// the start (a directory, or a file naming one, as in a linked worktree).
#[derive(Clone, Debug)]
pub(crate) struct Repository {
    /// The top of the working tree: the directory holding `.git`, whatever the configuration
    /// says (`core.worktree` never moves it).
    pub top: PathBuf,
    pub git_dir: PathBuf,
}

impl Repository {
    pub(crate) fn locate(start: &Path) -> Result<Repository> {
        let start = fs_err::canonicalize(start).map_err(Error::fs)?;
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

/// The main checkout of the repository `dir` is a linked worktree of (`git worktree add`),
/// found from what git registered: `dir/.git` names `<main>/.git/worktrees/<n>`, whose
/// `gitdir` names it back. Any other directory is its own (canonical). Claude Code reads the
/// main checkout's `.claude/settings.local.json` in each of its worktrees (2.1.332), and vigil
/// reports a worktree's loops to it.
pub(crate) fn main_checkout(dir: &Path) -> PathBuf {
    let dir = paths::canonical(dir);
    let dot_git = dir.join(".git");
    let is_file = std::fs::symlink_metadata(&dot_git).is_ok_and(|m| m.is_file());
    if !is_file {
        return dir;
    }
    let Some(named) = gitdir_of(&dot_git) else {
        return dir;
    };
    let registration = paths::canonical(&dir.join(named));
    let (Some(worktrees), Some(git_dir)) = (
        registration.parent(),
        registration.parent().and_then(Path::parent),
    ) else {
        return dir;
    };
    let registered = worktrees.file_name().is_some_and(|n| n == "worktrees")
        && git_dir.file_name().is_some_and(|n| n == ".git")
        && std::fs::read_to_string(registration.join("gitdir"))
            .is_ok_and(|back| paths::canonical(Path::new(back.trim())) == dot_git);
    match git_dir.parent() {
        Some(main) if registered && !writable_beside(main, &dir) => main.to_path_buf(),
        _ => dir,
    }
}

/// Whether a "main checkout" is one the agent working in `dir` could have made: at or under
/// `dir` itself, or in the temporary directories Claude Code's sandbox lets it write
/// (`$TMPDIR`, `/tmp/claude`). The agent can rewrite a worktree's `.git` file to name one.
fn writable_beside(main: &Path, dir: &Path) -> bool {
    let tmpdir = std::env::var_os("TMPDIR")
        .map(PathBuf::from)
        .filter(|t| t.is_absolute())
        .map(|t| paths::canonical(&t));
    main.starts_with(dir)
        || main.starts_with("/tmp/claude")
        || main.starts_with("/private/tmp/claude")
        || tmpdir.is_some_and(|t| main.starts_with(t))
}

/// Whether `dir`'s `.git` is a file that names a linked worktree's registration
/// (`…/worktrees/<name>`), whatever that holds: with [`main_checkout`] finding no main for it,
/// the claim is the agent's, and a reader of settings fails closed.
pub(crate) fn claims_worktree(dir: &Path) -> bool {
    let dot_git = dir.join(".git");
    std::fs::symlink_metadata(&dot_git).is_ok_and(|m| m.is_file())
        && gitdir_of(&dot_git).is_some_and(|named| {
            named
                .parent()
                .and_then(Path::file_name)
                .is_some_and(|n| n == "worktrees")
        })
}

/// The `gitdir:` a `.git` file names.
pub(crate) fn gitdir_of(dot_git: &Path) -> Option<PathBuf> {
    let text = read_regular(dot_git, 4096, false).ok()??;
    let line = text.split(|b| *b == b'\n').next()?;
    let dir = line.strip_prefix(b"gitdir: ")?;
    let dir = dir.strip_suffix(b"\r").unwrap_or(dir);
    Some(paths::from_bytes(dir))
}

/// Settings that override the repository's own for every git call vigil makes. Only what informs
/// (a handoff's HEAD and dirty state) runs git to look at the tree; a gate runs it only to read
/// the configuration before a check (`settings`), which runs nothing it names (SPEC §9).
const TRUSTED_SETTINGS: [&str; 8] = [
    "core.trustctime=true",
    "core.fileMode=true",
    "core.checkStat=default",
    "core.ignoreStat=false",
    "core.fsmonitor=false",
    "core.untrackedCache=false",
    "core.splitIndex=false",
    "core.sparseCheckout=false",
];

/// How a git call ended.
struct GitOutput {
    outcome: process::Outcome,
    stdout: Vec<u8>,
    /// What a failure says: the command and the first line of its stderr.
    failure: String,
}

/// Runs git in `dir`, with `env` added to its environment, within `timeout`.
fn git_run(
    dir: &Path,
    args: &[&str],
    env: &[(&str, &OsStr)],
    timeout: Duration,
) -> Result<GitOutput> {
    // The system's git, never one a PATH entry inside the project holds, and the same PATH
    // less those entries for whatever git starts itself (a filter the user installed).
    let program = programs::git(dir).ok_or_else(|| {
        Error::Io(format!(
            "cannot run `git {}`: git is not installed where vigil looks (the system's places, then PATH outside the project)",
            args.join(" ")
        ))
    })?;
    let mut cmd = Command::new(program);
    cmd.arg("-C")
        .arg(dir)
        .env("PATH", programs::trusted_path(dir));
    // The repository's configuration is the agent's to edit: nothing in it may make git
    // trust stale stat data, skip files, or ask a hook what changed.
    for setting in TRUSTED_SETTINGS {
        cmd.arg("-c").arg(setting);
    }
    cmd.args(args)
        .env("GIT_OPTIONAL_LOCKS", "0")
        .envs(env.iter().copied());
    let shown = format!("git {}", args.join(" "));
    // The whole output is needed (ls-files of a large repository is megabytes).
    let done = process::run(cmd, timeout, false, 64 << 20)
        .map_err(|e| Error::Io(format!("cannot run `{shown}`: {e}")))?;
    let failure = match done.outcome {
        process::Outcome::TimedOut => {
            format!("`{shown}` timed out after {}ms", timeout.as_millis())
        }
        other => {
            let stderr = String::from_utf8_lossy(&done.errors);
            let first = stderr
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("no message");
            format!("`{shown}` failed (exit {}): {first}", other.code())
        }
    };
    Ok(GitOutput {
        outcome: done.outcome,
        stdout: done.output,
        failure,
    })
}

/// One setting of a repository's configuration as git reads it: the file it came from
/// (`None` for one not from a file), its key as git spells it (section and name in lower case)
/// and its value (`None` for a bare `key`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Setting {
    pub origin: Option<PathBuf>,
    pub key: String,
    pub value: Option<String>,
}

/// Every setting git reads for the repository whose `.git` is `dot_git` (a directory, or a
/// file naming one), its includes followed as git follows them (`includeIf` conditions
/// judged): git's own parser, never one of vigil's. A relative origin is from the working
/// tree's top. Reading runs nothing the configuration names.
pub(crate) fn settings(dot_git: &Path, timeout: Duration) -> Result<Vec<Setting>> {
    let Some(top) = dot_git.parent() else {
        return Ok(Vec::new());
    };
    let dot_git = dot_git.as_os_str().to_string_lossy();
    let bytes = git_bytes(
        top,
        &[
            &format!("--git-dir={dot_git}"),
            "config",
            "--list",
            "-z",
            "--show-origin",
            "--includes",
        ],
        &[],
        timeout,
    )?;
    let mut found = Vec::new();
    let mut fields = bytes.split(|b| *b == 0);
    while let (Some(origin), Some(entry)) = (fields.next(), fields.next()) {
        let origin = String::from_utf8_lossy(origin);
        let entry = String::from_utf8_lossy(entry);
        let (key, value) = match entry.split_once('\n') {
            Some((key, value)) => (key.to_string(), Some(value.to_string())),
            None => (entry.into_owned(), None),
        };
        if key.is_empty() {
            continue;
        }
        let origin = origin.strip_prefix("file:").map(|file| top.join(file));
        found.push(Setting { origin, key, value });
    }
    Ok(found)
}

/// Runs git, returning its trimmed stdout; anything but exit 0 is an error.
pub(crate) fn git(
    dir: &Path,
    args: &[&str],
    env: &[(&str, &OsStr)],
    timeout: Duration,
) -> Result<String> {
    git_untrimmed(dir, args, env, timeout).map(|out| out.trim().to_string())
}

/// Runs git, returning its stdout exactly (porcelain formats begin with meaningful spaces).
pub(crate) fn git_untrimmed(
    dir: &Path,
    args: &[&str],
    env: &[(&str, &OsStr)],
    timeout: Duration,
) -> Result<String> {
    git_bytes(dir, args, env, timeout).map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
}

/// Runs git, returning its stdout as bytes (a blob's content, paths with `-z`).
pub(crate) fn git_bytes(
    dir: &Path,
    args: &[&str],
    env: &[(&str, &OsStr)],
    timeout: Duration,
) -> Result<Vec<u8>> {
    let output = git_run(dir, args, env, timeout)?;
    match output.outcome {
        process::Outcome::Exited(0) => Ok(output.stdout),
        _ => Err(Error::Io(output.failure)),
    }
}
