//! Taking a remote's notes in: the fetch (capped, its leftovers removed when cut), the refs it
//! brought sorted (a remote ref that would refuse every push marked for repair, at most
//! [`MAX_CHECKS`] checks taken), and each merged into the local notes as a union of their lines.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::error::{Error, Result};
use crate::evidence::notes::load::{Note, object_of_note_path, read_notes};
use crate::evidence::notes::repo::{failed, git, git_bytes, ident_host, local_refs, lock, run_git};
use crate::evidence::notes::{MAX_NOTE, OUTPUT, REF_PREFIX, notes_ref};
use crate::evidence::payload::CheckName;
use crate::state::project::Project;
use crate::sys::process;
use crate::sys::process::Outcome;
use crate::sys::time::Deadline;

/// Where a sync fetches a remote's notes refs to, before merging them into the local ones.
/// Under `refs/notes/`, as `git notes --ref` wants a ref it reads (it puts `refs/notes/` before
/// any other name), and outside `refs/notes/vigil/`, which is pushed.
const FETCHED_PREFIX: &str = "refs/notes/vigil-fetched/";
/// The most checks a sync merges and writes out (those it had first, then by name): with the
/// total per check, what a remote can make a sync write is bounded (32 × 16 MiB).
const MAX_CHECKS: usize = 32;

/// Fetches the remote's notes refs and merges each into the local one; a remote ref that is not
/// a history of notes is skipped (the local notes stay as they were) and said. The fetch may
/// write no file over `max_fetch`; the merge is made under the lock. The checks of `prefer`
/// are taken first. Returns those remote refs
/// that are no history of notes, with the object each names.
pub(super) fn fetch_and_merge(
    project: &Project,
    repo: &Path,
    url: &str,
    max_fetch: u64,
    prefer: &[CheckName],
    deadline: Deadline,
    skipped: &mut Vec<String>,
) -> Result<BTreeMap<String, Repair>> {
    let _held = lock(project, deadline)?;
    fetch(repo, url, max_fetch, deadline)?;
    let fetched = git(
        repo,
        &[
            "for-each-ref",
            "--format=%(refname) %(objecttype) %(objectname)",
            FETCHED_PREFIX,
        ],
        None,
        deadline,
    )?;
    let mut broken = BTreeMap::new();
    let had: BTreeSet<String> = local_refs(repo, deadline)?.into_iter().collect();
    let mut checks = fetched_checks(&fetched, &mut broken, skipped);
    take_room(&mut checks, prefer, &had, skipped);
    for (check, reference, id) in checks {
        if let Err(e) = merge(repo, &check, &reference, deadline) {
            // Notes on the remote that cannot be read (over the limits) would refuse every
            // push of this check for good (it would not fast-forward): a push replaces them.
            if matches!(read_notes(repo, &reference, deadline), Err(Error::Input(_))) {
                broken.insert(notes_ref(&check), Repair::Replace(id));
                skipped.push(format!("{check}: {e}; a push replaces the remote's"));
            } else {
                skipped.push(format!("{check}: {e}"));
            }
        }
    }
    Ok(broken)
}

/// Fetches the remote's notes refs to [`FETCHED_PREFIX`], writing no file over `max_fetch`: a
/// fetch cut at the limit leaves nothing behind, and says so.
fn fetch(repo: &Path, url: &str, max_fetch: u64, deadline: Deadline) -> Result<()> {
    let spec = format!("+{REF_PREFIX}*:{FETCHED_PREFIX}*");
    let args = [
        "fetch",
        "--quiet",
        "--prune",
        "--no-tags",
        "--no-write-fetch-head",
        "--no-recurse-submodules",
        "--end-of-options",
        url,
        &spec,
    ];
    let ran = run_git(Some(repo), &args, None, deadline, OUTPUT, Some(max_fetch))?;
    if !ran.status.success() {
        // A pack cut at the limit (index-pack got SIGXFSZ, fetch says its output was invalid).
        let cut = remove_partial_packs(repo, max_fetch);
        if cut || ran.status == Outcome::Signaled(process::FILE_SIZE_SIGNAL) {
            return Err(Error::Io(format!(
                "the remote's notes are over {} MiB (--max-fetch); nothing of them was kept",
                max_fetch >> 20
            )));
        }
        return Err(failed(&args, &ran));
    }
    Ok(())
}

/// The checks the fetched refs (`for-each-ref` lines: ref, type, id) are for, each with its ref
/// and id; a ref that is no check's, or no history of notes, is said in `skipped`, and those
/// that would refuse every push go in `broken`.
fn fetched_checks(
    fetched: &str,
    broken: &mut BTreeMap<String, Repair>,
    skipped: &mut Vec<String>,
) -> Vec<(CheckName, String, String)> {
    let mut checks: Vec<(CheckName, String, String)> = Vec::new();
    for line in fetched.lines() {
        let mut fields = line.split(' ');
        let (Some(reference), Some(kind), Some(id)) = (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let name = reference.strip_prefix(FETCHED_PREFIX).unwrap_or(reference);
        let Ok(check) = CheckName::parse(name) else {
            // A ref below a check's name (`tests/x`) would refuse every push of that check
            // (a ref cannot be both a file and a directory): it goes, as a blob there does.
            if let Some((head, _)) = name.split_once('/')
                && CheckName::parse(head).is_ok()
            {
                skipped.push(format!(
                    "{REF_PREFIX}{name} on the remote is below the check `{head}`; a push takes it away"
                ));
                broken.insert(
                    format!("{REF_PREFIX}{name}"),
                    Repair::Delete(id.to_string()),
                );
            } else {
                skipped.push(format!("{reference}: not a check name"));
            }
            continue;
        };
        if kind != "commit" {
            skipped.push(format!(
                "{REF_PREFIX}{check} on the remote names a {kind}, not a history of notes; the local notes stay as they were"
            ));
            broken.insert(notes_ref(&check), Repair::Replace(id.to_string()));
            continue;
        }
        checks.push((check, reference.to_string(), id.to_string()));
    }
    checks
}

/// Keeps of `checks` those a sync takes, said in `skipped` for the others.
fn take_room(
    checks: &mut Vec<(CheckName, String, String)>,
    prefer: &[CheckName],
    had: &BTreeSet<String>,
    skipped: &mut Vec<String>,
) {
    // The checks named (`sync --check`), then those this machine had, then the others by
    // name, up to MAX_CHECKS in all: which checks a sync takes is not the remote's choice.
    let rank = |check: &CheckName| {
        if prefer.contains(check) {
            0
        } else if had.contains(&notes_ref(check)) {
            1
        } else {
            2
        }
    };
    checks.sort_by_key(|(check, _, _)| rank(check));
    let must = checks
        .iter()
        .filter(|(check, _, _)| rank(check) < 2)
        .count();
    let named_new = checks
        .iter()
        .filter(|(check, _, _)| rank(check) == 0 && !had.contains(&notes_ref(check)))
        .count();
    let room = must + MAX_CHECKS.saturating_sub(had.len() + named_new);
    if checks.len() > room {
        let left: Vec<String> = checks[room..]
            .iter()
            .map(|(c, _, _)| c.to_string())
            .collect();
        skipped.push(format!(
            "the notes of {} more checks on the remote ({}), over the {MAX_CHECKS} a sync takes; `sync --check NAME` takes one",
            left.len(),
            left.join(", ")
        ));
        checks.truncate(room);
    }
}

/// What a push does to a remote ref that would refuse it for good, only while the ref still
/// names the object fetched (`--force-with-lease`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Repair {
    /// A check's ref naming no history of notes: pushed over.
    Replace(String),
    /// A ref below a check's name: deleted.
    Delete(String),
}

impl Repair {
    pub(super) fn id(&self) -> &str {
        match self {
            Repair::Replace(id) | Repair::Delete(id) => id,
        }
    }
}

/// Where a merge is made before it becomes the local notes: under `refs/notes/` (as `git
/// notes --ref` wants) but outside what is pushed and written out.
const MERGING_PREFIX: &str = "refs/notes/vigil-merging/";

/// Merges the fetched notes `theirs` into the local notes of `check`, as a union: every line of
/// every note either side holds is kept. git's merge (cat_sort_uniq) joins notes both sides
/// changed, but takes a note one side deleted or cut, or a fast-forward to a history that
/// dropped lines, as it comes; whatever line it dropped is put back. The merge is made on a
/// ref of its own and becomes the local notes only whole (and only if they did not move
/// meanwhile): a merge cut off at the deadline leaves them as they were.
fn merge(repo: &Path, check: &CheckName, theirs: &str, deadline: Deadline) -> Result<()> {
    let local = notes_ref(check);
    let before = git(
        repo,
        &[
            "rev-parse",
            "--verify",
            "-q",
            &format!("{local}^{{commit}}"),
        ],
        None,
        deadline,
    )
    .ok()
    .map(|id| id.trim().to_string());
    if let Some(before) = &before
        && git(
            repo,
            &["merge-base", "--is-ancestor", theirs, before],
            None,
            deadline,
        )
        .is_ok()
    {
        return Ok(());
    }
    let work = format!("{MERGING_PREFIX}{check}");
    let merged =
        merge_into(repo, &work, &local, before.as_deref(), theirs, deadline).and_then(|()| {
            let old = before.as_deref().unwrap_or("");
            git(repo, &["update-ref", &local, &work, old], None, deadline).map(drop)
        });
    let _ = git(repo, &["update-ref", "-d", &work], None, deadline);
    merged
}

/// `merge`'s work on the ref `work`: starts from the local notes `local` (at `before`, if
/// there are any), merges `theirs`, and puts back what the merge dropped. Under the lock, so
/// `local` stays at `before`.
fn merge_into(
    repo: &Path,
    work: &str,
    local: &str,
    before: Option<&str>,
    theirs: &str,
    deadline: Deadline,
) -> Result<()> {
    let ours = match before {
        Some(_) => read_notes(repo, local, deadline)?.0,
        None => Vec::new(),
    };
    let fetched = read_notes(repo, theirs, deadline)?.0;
    match before {
        Some(before) => {
            git(repo, &["update-ref", work, before], None, deadline)?;
            git(
                repo,
                &[
                    "notes",
                    "--ref",
                    work,
                    "merge",
                    "-q",
                    "-s",
                    "cat_sort_uniq",
                    theirs,
                ],
                None,
                deadline,
            )?;
        }
        None => {
            git(repo, &["update-ref", work, theirs], None, deadline)?;
        }
    }
    let merged: BTreeMap<String, Note> = read_notes(repo, work, deadline)?.0.into_iter().collect();
    let mut wanted: BTreeMap<&str, BTreeSet<&[u8]>> = BTreeMap::new();
    for (object, note) in ours.iter().chain(&fetched) {
        if let Note::Text(bytes) = note {
            wanted.entry(object).or_default().extend(lines(bytes));
        }
    }
    let mut put_back: Vec<(&str, Vec<u8>)> = Vec::new();
    let ours_lines: BTreeMap<&str, &[u8]> = ours
        .iter()
        .filter_map(|(object, note)| match note {
            Note::Text(bytes) => Some((object.as_str(), bytes.as_slice())),
            Note::Unreadable(_) => None,
        })
        .collect();
    for (object, mut want) in wanted {
        let has: BTreeSet<&[u8]> = match merged.get(object) {
            Some(Note::Text(bytes)) => lines(bytes).collect(),
            // Too large (a push of junk over CI's note) or no blob: what either side could
            // read takes its place, else CI's payload would be lost with the junk, for good.
            Some(Note::Unreadable(_)) => {
                let joined: u64 = want.iter().map(|l| l.len() as u64 + 1).sum();
                if joined > MAX_NOTE {
                    want = ours_lines
                        .get(object)
                        .map(|bytes| lines(bytes).collect())
                        .unwrap_or_default();
                }
                Default::default()
            }
            None => Default::default(),
        };
        if want.is_empty() || want.is_subset(&has) {
            continue;
        }
        want.extend(has);
        let mut text = Vec::new();
        for line in want {
            text.extend_from_slice(line);
            text.push(b'\n');
        }
        put_back.push((object, text));
    }
    restore(repo, work, &put_back, deadline)
}

/// Writes each (object, note) of `notes` into the notes at `work`, as one commit on top of it,
/// with one `git fast-import` however many there are (a remote that dropped 4096 notes costs
/// one process, not 4096). A note replaces the one at the path it is at, else goes at the top.
fn restore(repo: &Path, work: &str, notes: &[(&str, Vec<u8>)], deadline: Deadline) -> Result<()> {
    if notes.is_empty() {
        return Ok(());
    }
    let listed = git_bytes(
        repo,
        &["ls-tree", "-r", "-z", "--name-only", work],
        None,
        deadline,
        OUTPUT,
    )?;
    // Every path that names the object once its `/`s are taken out: git's own fanout, and any
    // decoy beside it (`8e4/d2…` reads as no note, and a note written there would be lost).
    let mut paths: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for path in listed.split(|b| *b == 0).filter(|p| !p.is_empty()) {
        let path = String::from_utf8_lossy(path);
        if let Some(object) = object_of_note_path(&path) {
            paths.entry(object).or_default().push(path.into_owned());
        }
    }
    let base = git(repo, &["rev-parse", "--verify", work], None, deadline)?;
    let host = ident_host();
    let message = "vigil: put back the notes a merge dropped\n";
    let mut stream = format!(
        "commit {work}\ncommitter marker-writer <marker-writer@{host}> now\ndata {}\n{message}from {}\n",
        message.len(),
        base.trim()
    )
    .into_bytes();
    for (object, text) in notes {
        for path in paths.get(*object).into_iter().flatten() {
            stream.extend_from_slice(format!("D {path}\n").as_bytes());
        }
        // At the top, where git notes reads a note whatever the fanout of the others.
        stream.extend_from_slice(
            format!("M 100644 inline {object}\ndata {}\n", text.len()).as_bytes(),
        );
        stream.extend_from_slice(text);
        stream.push(b'\n');
    }
    stream.extend_from_slice(b"done\n");
    git(
        repo,
        &["fast-import", "--quiet", "--done", "--date-format=now"],
        Some(stream),
        deadline,
    )
    .map(drop)
}

/// The lines of a note that say something.
fn lines(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    bytes
        .split(|b| *b == b'\n')
        .map(|l| l.trim_ascii())
        .filter(|l| !l.is_empty())
}

/// Removes what a fetch cut off left in the object store (`tmp_pack_*`, `tmp_idx_*`,
/// `tmp_obj_*`): nothing of a refused fetch stays on the disk. Whether one of them had reached
/// `limit` (the fetch was cut there).
fn remove_partial_packs(repo: &Path, limit: u64) -> bool {
    let mut cut = false;
    let objects = repo.join("objects");
    let mut dirs = vec![objects.join("pack"), objects.clone()];
    if let Ok(entries) = std::fs::read_dir(&objects) {
        dirs.extend(entries.flatten().map(|e| e.path()).filter(|p| p.is_dir()));
    }
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().starts_with("tmp_") {
                cut |= entry.metadata().is_ok_and(|m| m.len() >= limit);
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
    cut
}
