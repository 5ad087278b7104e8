//! What a marker vouches for (SPEC §5): the exact content, as a hash.
//!
//! `worktree` is the git tree of the working tree with untracked, non-ignored files, computed
//! through a temporary index so the user's index, HEAD and files are never touched.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::process;
use crate::state::Project;
use crate::time::Deadline;

/// Settings that override the repository's own for every git call vigil makes.
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

/// How long computing a subject may take before it counts as unknown.
pub const GIT_TIMEOUT: Duration = Duration::from_secs(60);

/// A subject as named on the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Subject {
    Worktree,
    File(PathBuf),
    Stdin,
}

impl Subject {
    /// `worktree`, `file:PATH` or `stdin`.
    pub fn parse(text: &str) -> Result<Subject> {
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
    pub fn id(&self, project: &Project, stdin: Option<&[u8]>) -> Result<String> {
        match self {
            Subject::Worktree => {
                worktree_tree(&project.dir, &project.state, Deadline::after(GIT_TIMEOUT))
            }
            Subject::File(path) => {
                let path = project.dir.join(path);
                let file =
                    crate::input::open_regular(&path).map_err(|e| Error::io("read", &path, &e))?;
                let hex = sha256_reader(file).map_err(|e| Error::io("read", &path, &e))?;
                Ok(format!("sha256:{hex}"))
            }
            Subject::Stdin => Ok(sha256_id(stdin.unwrap_or_default())),
        }
    }
}

/// The file-name key of a subject id: `:` becomes `-`.
pub fn key(subject_id: &str) -> String {
    subject_id.replace(':', "-")
}

pub fn sha256_id(bytes: &[u8]) -> String {
    format!("sha256:{}", sha256_hex(bytes))
}

/// The sha256 of everything a reader yields, read in 1 MiB chunks (never all at once).
pub fn sha256_reader(mut reader: impl std::io::Read) -> std::io::Result<String> {
    let mut hasher = Sha256::new();
    let mut chunk = vec![0u8; 1 << 20];
    loop {
        match reader.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => hasher.update(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(hex(&hasher.finalize()))
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `git-tree:<id>` of the working tree, tracked and untracked non-ignored files alike. vigil's
/// own state directory is left out: writing a marker must not change what it vouches for.
/// All of it is done by `deadline`: each git call gets what is left.
pub fn worktree_tree(project_dir: &Path, state_dir: &Path, deadline: Deadline) -> Result<String> {
    let toplevel = git(
        project_dir,
        &["rev-parse", "--show-toplevel"],
        &[],
        deadline.remaining(),
    )
    .map_err(|e| Error::input(format!("the worktree subject needs a git repository: {e}")))?;
    let toplevel = PathBuf::from(toplevel);
    let dirs = git(
        &toplevel,
        &[
            "rev-parse",
            "--path-format=absolute",
            "--git-dir",
            "--git-path",
            "objects",
        ],
        &[],
        deadline.remaining(),
    )?;
    let mut dirs = dirs.lines().map(PathBuf::from);
    let (Some(git_dir), Some(objects)) = (dirs.next(), dirs.next()) else {
        return Err(Error::Io("git did not name its directories".into()));
    };
    // A scratch index, and a scratch object store that reads the real one: hashing the tree
    // writes nothing into the user's repository.
    let scratch = tempfile::Builder::new()
        .prefix("vigil-subject-")
        .tempdir()
        .map_err(|e| Error::Io(format!("cannot make a temporary index: {e}")))?;
    let index = scratch.path().join("index");
    let scratch_objects = scratch.path().join("objects");
    std::fs::create_dir(&scratch_objects).map_err(|e| Error::io("create", &scratch_objects, &e))?;
    let env: [(&str, &OsStr); 3] = [
        ("GIT_INDEX_FILE", index.as_os_str()),
        ("GIT_OBJECT_DIRECTORY", scratch_objects.as_os_str()),
        ("GIT_ALTERNATE_OBJECT_DIRECTORIES", objects.as_os_str()),
    ];
    // Starting from a copy of the real index lets git reuse its stat cache.
    let real_index = git_dir.join("index");
    if real_index.is_file() {
        copy_index(&real_index, &index)?;
        // Entries marked assume-unchanged or skip-worktree would hide edits from `add`: such
        // an index is not trusted, and the tree is hashed from scratch instead.
        let flags = git(
            &toplevel,
            &["ls-files", "-v", "-z"],
            &env,
            deadline.remaining(),
        )?;
        let hides = flags
            .split('\0')
            .any(|entry| entry.starts_with(|c: char| c.is_ascii_lowercase() || c == 'S'));
        if hides {
            std::fs::remove_file(&index).map_err(|e| Error::io("remove", &index, &e))?;
        }
    }
    let mut add = vec!["add".to_string(), "--all".into(), "--".into(), ".".into()];
    add.extend(state_exclusion(&toplevel, state_dir, deadline.remaining())?);
    let add: Vec<&str> = add.iter().map(String::as_str).collect();
    git(&toplevel, &add, &env, deadline.remaining())?;
    let tree = git(&toplevel, &["write-tree"], &env, deadline.remaining())?;
    Ok(format!("git-tree:{tree}"))
}

/// Copies the index with its modification time: git re-reads an entry whose file is not
/// older than the index ("racy git"), and a copy stamped now would hide an edit made in the
/// same second as the last `git add`.
fn copy_index(from: &Path, to: &Path) -> Result<()> {
    std::fs::copy(from, to).map_err(|e| Error::io("copy", from, &e))?;
    let modified = std::fs::metadata(from)
        .and_then(|m| m.modified())
        .map_err(|e| Error::io("read", from, &e))?;
    std::fs::File::options()
        .write(true)
        .open(to)
        .and_then(|f| f.set_modified(modified))
        .map_err(|e| Error::io("stamp", to, &e))
}

/// The canonical form of a path that may not exist yet: its longest existing ancestor
/// canonicalized, the rest appended (so the answer is the same before and after it is made).
fn canonical(path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut existing = absolute.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(found) = std::fs::canonicalize(existing) {
            return rest
                .iter()
                .rev()
                .fold(found, |acc: PathBuf, part| acc.join(part));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                existing = parent;
            }
            _ => return absolute,
        }
    }
}

/// How a git call ended.
struct GitOutput {
    outcome: process::Outcome,
    stdout: String,
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
    let mut cmd = Command::new("git");
    cmd.arg("-C").arg(dir);
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
        stdout: String::from_utf8_lossy(&done.output).into_owned(),
        failure,
    })
}

/// Runs git, returning its trimmed stdout; anything but exit 0 is an error.
pub fn git(dir: &Path, args: &[&str], env: &[(&str, &OsStr)], timeout: Duration) -> Result<String> {
    git_untrimmed(dir, args, env, timeout).map(|out| out.trim().to_string())
}

/// Runs git, returning its stdout exactly (porcelain formats begin with meaningful spaces).
pub fn git_untrimmed(
    dir: &Path,
    args: &[&str],
    env: &[(&str, &OsStr)],
    timeout: Duration,
) -> Result<String> {
    let output = git_run(dir, args, env, timeout)?;
    match output.outcome {
        process::Outcome::Exited(0) => Ok(output.stdout),
        _ => Err(Error::Io(output.failure)),
    }
}

/// The pathspec that leaves vigil's state directory out of `add` or `status`, when it lies in
/// the repository and git does not ignore it already (git refuses a pathspec that names
/// ignored files, and an ignored directory is left out anyway).
pub fn state_exclusion(
    toplevel: &Path,
    state_dir: &Path,
    timeout: Duration,
) -> Result<Option<String>> {
    let state = canonical(state_dir);
    let top = canonical(toplevel);
    match state.strip_prefix(&top) {
        Ok(inside) if !inside.as_os_str().is_empty() && !is_ignored(toplevel, inside, timeout)? => {
            Ok(Some(format!(":(exclude,top,literal){}", inside.display())))
        }
        _ => Ok(None),
    }
}

/// Whether git ignores `path`, relative to the top of the repository at `toplevel`.
fn is_ignored(toplevel: &Path, path: &Path, timeout: Duration) -> Result<bool> {
    let path = path.to_string_lossy();
    let output = git_run(toplevel, &["check-ignore", "-q", "--", &path], &[], timeout)?;
    match output.outcome {
        process::Outcome::Exited(0) => Ok(true),
        process::Outcome::Exited(1) => Ok(false),
        _ => Err(Error::Io(output.failure)),
    }
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
