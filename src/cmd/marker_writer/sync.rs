//! `marker-writer sync`: the notes a remote published, fetched into vigil's own repository in
//! the protected state, merged with those published here and written out for the gates; with
//! `--push`, pushed back. A verdict the sync brings for the content checked out wakes the
//! project's commander.

use std::time::Duration;

use crate::cli::flags::print;
use crate::cli::output::diagnostic;
use crate::error::{Error, Result};
use crate::evidence::notes;
use crate::evidence::notes::MAX_FETCH;
use crate::evidence::notes::SyncOptions;
use crate::evidence::signing;
use crate::evidence::subject::Limits;
use crate::evidence::subject::Subject;
use crate::exit::Exit;
use crate::state::project::Project;
use crate::state::wakes;
use crate::sys::time;

use super::{NAME, Options};

/// `sync`: the notes of a remote in, merged with those published here, written out for the
/// gates; with `--push`, out again. One line says what it did.
pub(super) fn sync(project: &Project, options: &Options) -> Result<u8> {
    let remote = options.remote.as_deref().unwrap_or("origin");
    let deadline = time::Deadline::after(options.timeout.unwrap_or(Duration::from_secs(30)));
    let url = notes::remote_url(project, remote, deadline)?;
    let max_fetch = options.max_fetch.unwrap_or(MAX_FETCH);
    // A remote given as a URL may carry its token: it is never said.
    let remote = notes::redact(remote);
    let sync_options = SyncOptions {
        push: options.push,
        max_fetch,
        checks: options.checks.clone(),
    };
    // The content checked out, and what CI had vouched for it before: a verdict the sync
    // brings wakes the project's commander (SPEC §10).
    let subject = Subject::Worktree.id(project, None, Limits::default()).ok();
    let before = subject
        .as_deref()
        .map(|id| ci_verdicts(project, id))
        .unwrap_or_default();
    let synced = notes::sync(project, &url, &sync_options, deadline)
        .map_err(|e| Error::Io(format!("sync with {remote}: {e}")))?;
    if let Some(id) = subject.as_deref() {
        for (check, status) in ci_verdicts(project, id) {
            if !before.contains(&(check.clone(), status.clone()))
                && let Err(e) = wakes::ci_verdict(&project.dir, &check, &status, id)
            {
                diagnostic(
                    NAME,
                    &format!("{e}; the commander is not woken for {check}"),
                );
            }
        }
    }
    for skipped in &synced.skipped {
        diagnostic(NAME, &format!("sync with {remote}: skipped {skipped}"));
    }
    let checks = if synced.checks.is_empty() {
        "no check has notes".to_string()
    } else {
        synced
            .checks
            .iter()
            .map(|(check, n)| format!("{check} ({n} content{})", if *n == 1 { "" } else { "s" }))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let pushed = if synced.pushed { ", pushed" } else { "" };
    print(format!("marker-writer: synced with {remote}{pushed}: {checks}\n").as_bytes())
        .map(Exit::code)
}

/// What the notes say of the content `subject_id`, one verdict per check: each note signed by
/// a trusted key (an unsigned one vouches for nothing) for this check and this content, the
/// newest.
fn ci_verdicts(project: &Project, subject_id: &str) -> Vec<(String, String)> {
    let Ok(trust) = signing::trusted_keys(project, None) else {
        return Vec::new();
    };
    if trust.keys.is_empty() {
        return Vec::new();
    }
    let mut verdicts = Vec::new();
    for check in notes::written_checks(project) {
        let newest = notes::read(project, &check, subject_id)
            .into_iter()
            .flatten()
            .filter(|p| {
                p.check == check.as_str() && p.subject == subject_id && trust.check(p).is_ok()
            })
            .max_by(|a, b| a.created_at.cmp(&b.created_at));
        if let Some(payload) = newest {
            verdicts.push((check.to_string(), payload.status.as_str().to_string()));
        }
    }
    verdicts
}
