//! `marker-writer sync`: the remote's notes fetched and merged in, the local notes pushed back
//! (merged again and pushed again when another writer pushed first, a remote ref that would
//! refuse every push repaired), and every check's notes written out.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::evidence::notes::merge::{Repair, fetch_and_merge};
use crate::evidence::notes::publish::materialize;
use crate::evidence::notes::remote::{Remote, is_local};
use crate::evidence::notes::repo::{ensure, failed, git, local_refs, lock, run_git};
use crate::evidence::notes::{MAX_NOTES, OUTPUT, REF_PREFIX, redact};
use crate::evidence::payload::CheckName;
use crate::state::project::Project;
use crate::sys::time::Deadline;

/// How often a push that lost a race is merged and tried again.
const PUSH_ATTEMPTS: usize = 5;

/// What a sync did.
#[derive(Debug, Default)]
pub(crate) struct Synced {
    /// Each check that has notes now, with how many contents they are for.
    pub checks: Vec<(String, usize)>,
    /// What could not be taken, one line each (a remote ref that is no history of notes).
    pub skipped: Vec<String>,
    /// Whether the local notes were pushed.
    pub pushed: bool,
}

/// The most a sync fetches unless told otherwise: every file git writes for it (the pack) is
/// capped at this, so a remote cannot fill the disk.
pub(crate) const MAX_FETCH: u64 = 256 << 20;

/// How a sync goes.
#[derive(Clone, Debug)]
pub(crate) struct SyncOptions {
    /// Push the local notes too.
    pub push: bool,
    /// The most a fetch may write (`--max-fetch`).
    pub max_fetch: u64,
    /// The checks taken first, whatever the cap (`--check`).
    pub checks: Vec<CheckName>,
}

/// `marker-writer sync`: fetches the remote's `refs/notes/vigil/*`, merges each into the local
/// notes (keeping every payload of both), writes them out for the gates, and with `push` pushes
/// the local notes back, merging and trying again when another writer pushed first. Every git
/// call shares `deadline`; a fetch writes no file over `max_fetch` bytes.
pub(crate) fn sync(
    project: &Project,
    remote: &Remote,
    options: &SyncOptions,
    deadline: Deadline,
) -> Result<Synced> {
    let push = options.push;
    let url = remote.url.as_str();
    if push && remote.from_config && is_local(url) {
        // The agent writes `.git/config`: a path there to a repository of its own makes the
        // push run that repository's hooks (receive-pack does not take vigil's settings).
        return Err(Error::input(format!(
            "the remote's URL {:?} is a path on this machine, read from the project's config, which the agent can write; a push there would run that repository's hooks: give it with --remote PATH",
            redact(url)
        )));
    }
    let repo = ensure(project, deadline)?;
    let mut synced = Synced::default();
    // Fetched and merged once, and again after each push another writer got in before.
    let fetch = |skipped: &mut Vec<_>| {
        fetch_and_merge(
            project,
            &repo,
            url,
            options.max_fetch,
            &options.checks,
            deadline,
            skipped,
        )
    };
    let mut broken = fetch(&mut synced.skipped)?;
    if push {
        for attempt in 0..PUSH_ATTEMPTS {
            delete_below_checks(&repo, url, &broken, deadline, &mut synced.skipped)?;
            // A remote ref that names no history of notes (a blob put there) would refuse
            // every push for good: it is replaced, only if it still names what was fetched.
            let replace: BTreeMap<&String, &str> = leased(&broken, false).into_iter().collect();
            let mut args = push_args(replace.iter().map(|(r, id)| (*r, *id)), url);
            if replace.is_empty() {
                args.push(format!("{REF_PREFIX}*:{REF_PREFIX}*"));
            } else {
                for reference in local_refs(&repo, deadline)? {
                    let force = if replace.contains_key(&reference) {
                        "+"
                    } else {
                        ""
                    };
                    args.push(format!("{force}{reference}:{reference}"));
                }
            }
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let ran = run_git(Some(&repo), &args, None, deadline, OUTPUT, None)?;
            if ran.status.success() {
                synced.pushed = true;
                break;
            }
            match rejection(&ran.stdout) {
                Some((reason, true)) if attempt + 1 < PUSH_ATTEMPTS => {
                    // A ref where the checks' directory is (`refs/notes/vigil` itself) also
                    // refuses the update, and no fetch of `refs/notes/vigil/*` sees it.
                    let parents = if reason.starts_with("[remote rejected]") {
                        refs_above_checks(&repo, url, deadline)?
                    } else {
                        BTreeMap::new()
                    };
                    // Another writer pushed first: take its notes in, and push the union.
                    std::thread::sleep(Duration::from_millis(20 << attempt));
                    broken = fetch(&mut synced.skipped)?;
                    broken.extend(parents);
                }
                Some((reason, _)) => {
                    return Err(Error::Io(format!(
                        "`git push` was refused: {}",
                        redact(&reason)
                    )));
                }
                None => return Err(failed(&args, &ran)),
            }
        }
    }
    let _held = lock(project, deadline)?;
    for reference in local_refs(&repo, deadline)? {
        let Some(name) = reference.strip_prefix(REF_PREFIX) else {
            continue;
        };
        let Ok(check) = CheckName::parse(name) else {
            continue;
        };
        match materialize(project, &repo, &check, deadline) {
            Ok(written) => {
                if written.left_out > 0 {
                    synced.skipped.push(format!(
                        "the notes of {} older contents of `{check}` (only the newest {MAX_NOTES} are kept)",
                        written.left_out
                    ));
                }
                synced.checks.push((check.to_string(), written.contents))
            }
            Err(e) => synced.skipped.push(format!("{check}: {e}")),
        }
    }
    Ok(synced)
}

/// What `git push --porcelain` said of the first ref it did not push: git's reason, and
/// whether it is one a merge and another push mend (the remote moved on since the fetch:
/// `[rejected] (fetch first)` or `(non-fast-forward)`; or it moved while the push was being
/// received: `[remote rejected] (cannot lock ref …)`, `(failed to update ref)`).
fn rejection(porcelain: &[u8]) -> Option<(String, bool)> {
    let text = String::from_utf8_lossy(porcelain);
    let line = text.lines().find(|l| l.starts_with('!'))?;
    let reason = line.split('\t').nth(2).unwrap_or(line).trim().to_string();
    let race = reason.starts_with("[rejected]")
        || (reason.starts_with("[remote rejected]")
            && [
                "cannot lock ref",
                "failed to update ref",
                "incorrect old value",
            ]
            .iter()
            .any(|said| reason.contains(said)));
    Some((reason, race))
}

/// Deletes, on the remote, the refs below a check's name that `broken` holds (each only while
/// it names what was fetched), in a push of its own before the check's: git cannot make a
/// ref where a directory of refs still is. What it could not do is said.
fn delete_below_checks(
    repo: &Path,
    url: &str,
    broken: &BTreeMap<String, Repair>,
    deadline: Deadline,
    skipped: &mut Vec<String>,
) -> Result<()> {
    let delete = leased(broken, true);
    if delete.is_empty() {
        return Ok(());
    }
    let mut args = push_args(delete.iter().copied(), url);
    args.extend(delete.iter().map(|(reference, _)| format!(":{reference}")));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let ran = run_git(Some(repo), &args, None, deadline, OUTPUT, None)?;
    if !ran.status.success() {
        let why = rejection(&ran.stdout).map_or_else(|| ran.first.clone(), |(reason, _)| reason);
        skipped.push(format!(
            "deleting what is below a check's name: {}",
            redact(&why)
        ));
    }
    Ok(())
}

/// The refs of `broken` to delete (`delete`) or to push over, each with the id it must still
/// name on the remote.
fn leased(broken: &BTreeMap<String, Repair>, delete: bool) -> Vec<(&String, &str)> {
    broken
        .iter()
        .filter(|(_, repair)| matches!(repair, Repair::Delete(_)) == delete)
        .map(|(reference, repair)| (reference, repair.id()))
        .collect()
}

/// `git push --porcelain` to `url`, with a `--force-with-lease` for each (ref, id): the
/// refspecs are the caller's to add.
fn push_args<'a>(leases: impl Iterator<Item = (&'a String, &'a str)>, url: &str) -> Vec<String> {
    let mut args: Vec<String> = vec!["push".into(), "--porcelain".into()];
    args.extend(leases.map(|(reference, id)| format!("--force-with-lease={reference}:{id}")));
    args.extend(["--end-of-options".into(), url.to_string()]);
    args
}

/// The remote's refs named exactly `refs/notes` or `refs/notes/vigil`, where the checks' refs
/// would go: each to be deleted (only while it names what was seen here).
fn refs_above_checks(
    repo: &Path,
    url: &str,
    deadline: Deadline,
) -> Result<BTreeMap<String, Repair>> {
    let listed = git(
        repo,
        &[
            "ls-remote",
            "--refs",
            "--end-of-options",
            url,
            "refs/notes",
            "refs/notes/vigil",
        ],
        None,
        deadline,
    )?;
    let above = ["refs/notes", REF_PREFIX.trim_end_matches('/')];
    Ok(listed
        .lines()
        .filter_map(|line| line.split_once('\t'))
        .filter(|(_, reference)| above.contains(reference))
        .map(|(id, reference)| (reference.to_string(), Repair::Delete(id.to_string())))
        .collect())
}
