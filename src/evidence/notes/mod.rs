//! Markers that travel (issue 19): a payload published as a git note, keyed by the git tree id
//! of the content it vouches for, so the same content on another machine finds it.
//!
//! Every git command here runs in a bare repository vigil owns, in the protected state
//! (`<protected>/notes.git`), never in the project's: the project's `.git` (its config, hooks,
//! alternates) is the agent's to write, and `git fetch` or `git push` there would run what it
//! names. Notes live under `refs/notes/vigil/<check>`, one compact JSON payload per line, so
//! git's `cat_sort_uniq` merge keeps every payload two writers published.
//!
//! No gate runs git (SPEC §9): after each publish and sync, the notes of a check are written
//! out as plain files, `<protected>/notes/<check>/<key>.jsonl`, and `marker::verify` reads
//! those. What they hold came from a remote anyone with push access could write, so a payload
//! from notes is judged exactly as a local marker is (`marker::judge`).
//!
//! Here: `repo` (the notes repository, its lock, and git run in it), `publish` (a payload
//! appended, and the notes written out), `load` (the notes a ref holds, read from git), `read`
//! (what the gates read of them), `remote` (where a sync goes), `sync` (fetch, merge, push) and
//! `merge` (a remote's notes taken in).

mod load;
mod merge;
mod publish;
mod read;
mod remote;
mod repo;
mod sync;

use std::path::PathBuf;

use crate::evidence::payload::CheckName;
use crate::state::project::Project;

pub(crate) use crate::sys::git::sealed::redact;
pub(crate) use publish::publish;
pub(crate) use read::{has_any, published, read};
pub(crate) use remote::remote_url;
pub(crate) use sync::{MAX_FETCH, SyncOptions, sync};

/// Where vigil's notes refs live, locally and on a remote.
pub(crate) const REF_PREFIX: &str = "refs/notes/vigil/";
/// The largest note read: the payloads published for one content.
pub(crate) const MAX_NOTE: u64 = 1 << 20;
/// The most bytes of notes one check may hold in all (a small pack can name one large blob
/// from thousands of notes; each would be written out).
pub(crate) const MAX_TOTAL: u64 = 16 << 20;
/// The most notes of one check written out; beyond, the oldest are left out (and said).
const MAX_NOTES: usize = 4096;
/// A cache line vigil wrote itself, for a note it could not take (too large, unreadable).
const ERROR_LINE: &str = "!";
/// The file that says a check's notes could not be read at all, and why.
const BROKEN: &str = "broken";

/// How much of a git command's standard output is kept, unless a call says otherwise.
const OUTPUT: usize = 64 << 20;

/// The bare repository the notes are kept in.
pub(crate) fn repository(project: &Project) -> PathBuf {
    project.repository_state().join("notes.git")
}

/// The directory the notes of a check are written out to, for the gates.
pub(crate) fn cache_dir(project: &Project, check: &CheckName) -> PathBuf {
    project
        .repository_state()
        .join("notes")
        .join(check.as_str())
}

/// The checks whose notes are written out for the gates.
pub(crate) fn written_checks(project: &Project) -> Vec<CheckName> {
    std::fs::read_dir(project.repository_state().join("notes"))
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| CheckName::parse(e.file_name().to_str()?).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The git object id a subject is published under: the tree id of `git-tree:<id>`. Other
/// subjects (sha256 of a file or of stdin) name no git object and do not travel.
pub(crate) fn object_id(subject_id: &str) -> Option<&str> {
    let id = subject_id.strip_prefix("git-tree:")?;
    (matches!(id.len(), 40 | 64) && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
        .then_some(id)
}

fn notes_ref(check: &CheckName) -> String {
    format!("{REF_PREFIX}{check}")
}
