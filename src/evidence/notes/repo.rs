//! The notes repository: made as vigil makes it, refused where the agent could write it or
//! where it is not as vigil made it, changed under one lock; and git run in it, sealed off from
//! the caller (`sys::git::sealed`), as marker-writer.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::evidence::notes::{OUTPUT, REF_PREFIX, repository};
use crate::evidence::payload;
use crate::state::project::Project;
use crate::sys::atomic;
use crate::sys::files;
use crate::sys::git::sealed::{self, Ident, Ran};
use crate::sys::lock::FileLock;
use crate::sys::time::Deadline;

/// Runs git in the notes repository (`repo`, or none) within `deadline`, as
/// [`sealed::run`] does, its commits marker-writer's.
pub(super) fn run_git(
    repo: Option<&Path>,
    args: &[&str],
    input: Option<Vec<u8>>,
    deadline: Deadline,
    output: usize,
    file_limit: Option<u64>,
) -> Result<Ran> {
    sealed::run(repo, args, input, deadline, output, file_limit, || {
        let host = ident_host();
        Ident {
            name: "marker-writer".to_string(),
            email: format!("marker-writer@{host}"),
        }
    })
}

/// The host name for the identity of the notes commits, as git takes it in an email (no `<`,
/// `>` or line break, whatever the host name or `$HOSTNAME` says).
pub(super) fn ident_host() -> String {
    let host: String = payload::writer()
        .host
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
        .take(64)
        .collect();
    if host.is_empty() {
        "localhost".to_string()
    } else {
        host
    }
}

/// `run_git` that must succeed: its standard output, else one line of why.
pub(super) fn git_bytes(
    repo: &Path,
    args: &[&str],
    input: Option<Vec<u8>>,
    deadline: Deadline,
    output: usize,
) -> Result<Vec<u8>> {
    let ran = run_git(Some(repo), args, input, deadline, output, None)?;
    if ran.status.success() {
        return Ok(ran.stdout);
    }
    Err(failed(args, &ran))
}

pub(super) fn failed(args: &[&str], ran: &Ran) -> Error {
    Error::Io(format!(
        "`git {}` failed (exit {}): {}",
        args.first().unwrap_or(&""),
        ran.status.code(),
        ran.first
    ))
}

/// `git_bytes` as text.
pub(super) fn git(
    repo: &Path,
    args: &[&str],
    input: Option<Vec<u8>>,
    deadline: Deadline,
) -> Result<String> {
    git_bytes(repo, args, input, deadline, OUTPUT)
        .map(|out| String::from_utf8_lossy(&out).into_owned())
}

/// Refuses a notes repository the agent could write into. Its config is git's to obey:
/// `protocol.ext.allow` with a `url.*.insteadOf` there turns the next fetch into a command of
/// the agent's, run wherever the sync runs (CI's signing job included). That is so when the
/// protected state fell back into the project, or the state home is inside it.
fn refuse_agent_writable(project: &Project) -> Result<()> {
    let place = project.protected();
    if place.agent_writable() {
        return Err(Error::input(format!(
            "the protected state ({}) is inside the project, where the agent can write the notes repository's config; set VIGIL_STATE_HOME to a directory outside it",
            place.dir.display()
        )));
    }
    Ok(())
}

/// The lock every change of the notes repository and of what is written out from it is made
/// under: two publishes at once would each append to the same note and one line would be lost.
pub(super) fn lock(project: &Project, deadline: Deadline) -> Result<FileLock> {
    let dir = project.repository_state();
    // A worktree's main checkout may have no protected state yet.
    files::make_private_dir(&dir).map_err(|e| Error::io("create", &dir, &e))?;
    let path = dir.join("notes.lock");
    FileLock::acquire(&path, deadline.remaining()).map_err(|e| Error::io("lock", &path, &e))
}

/// The config of the notes repository, as vigil writes it. git obeys whatever is there
/// (`protocol.ext.allow` with a `url.*.insteadOf` makes a fetch a command), so any other
/// content is refused.
const CONFIG: &str = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = true\n";

/// The notes repository, made when missing, and refused where the agent could write it or
/// where it is not as vigil made it (its config, or a file that sends git to another
/// repository's objects or config).
pub(super) fn ensure(project: &Project, deadline: Deadline) -> Result<PathBuf> {
    refuse_agent_writable(project)?;
    let repo = repository(project);
    if !repo.join("HEAD").is_file() {
        let _held = lock(project, deadline)?;
        if !repo.join("HEAD").is_file() {
            // Made beside it and renamed into place whole: no one sees git's own config.
            let staging = repo.with_file_name(format!(".notes.git.{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&staging);
            fs_err::create_dir_all(&staging).map_err(Error::fs)?;
            // No template: no sample hooks, nothing but what git needs.
            git(
                &staging,
                &["init", "--bare", "-q", "--template="],
                None,
                deadline,
            )?;
            let config = staging.join("config");
            atomic::write_atomic(&config, CONFIG.as_bytes(), 0o600)
                .map_err(|e| Error::io("write", &config, &e))?;
            // What is there has no HEAD: the rest of an init that was cut off.
            let _ = std::fs::remove_dir_all(&repo);
            fs_err::rename(&staging, &repo).map_err(Error::fs)?;
        }
    }
    let config = repo.join("config");
    let as_written = files::open_state(&config)
        .ok()
        .and_then(|file| files::read_capped(file, 4096, "the config", &config).ok())
        .is_some_and(|bytes| bytes == CONFIG.as_bytes());
    let redirected = ["commondir", "objects/info/alternates"]
        .iter()
        .find(|name| std::fs::symlink_metadata(repo.join(name)).is_ok());
    if !as_written || redirected.is_some() {
        let what = redirected.map_or_else(|| "config".to_string(), |name| name.to_string());
        return Err(Error::input(format!(
            "{} is not as vigil made it (its {what} was changed); nothing is run in it: remove it, and the next sync makes it again",
            repo.display()
        )));
    }
    Ok(repo)
}

/// The local refs under [`REF_PREFIX`]: the notes of each check.
pub(super) fn local_refs(repo: &Path, deadline: Deadline) -> Result<Vec<String>> {
    let listed = git(
        repo,
        &["for-each-ref", "--format=%(refname)", REF_PREFIX],
        None,
        deadline,
    )?;
    Ok(listed.lines().map(str::to_string).collect())
}
