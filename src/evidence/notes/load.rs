//! The notes a ref holds, read from the notes repository: every note listed, sized, and read
//! in checked batches, within the limits (the newest [`MAX_NOTES`] contents, no note over
//! [`MAX_NOTE`], [`MAX_TOTAL`] in all); an answer of git's that is not what was asked is an error.

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::{Error, Result};
use crate::evidence::notes::repo::{git, git_bytes};
use crate::evidence::notes::{MAX_NOTE, MAX_NOTES, MAX_TOTAL, OUTPUT};
use crate::sys::time::Deadline;

/// A note as git holds it: its bytes, or why they are not taken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Note {
    Text(Vec<u8>),
    Unreadable(String),
}

/// The object a path in a notes tree annotates, as git reads it: the path without its `/`s
/// (any fanout), in any case (`4E85…` is the note of `4e85…`, so a decoy in capitals names it
/// too). `None` when that is no object id.
pub(super) fn object_of_note_path(path: &str) -> Option<String> {
    let object = path
        .chars()
        .filter(|c| *c != '/')
        .collect::<String>()
        .to_ascii_lowercase();
    is_object_id(&object).then_some(object)
}

/// Whether `id` is a git object id as git prints it.
fn is_object_id(id: &str) -> bool {
    matches!(id.len(), 40 | 64) && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// How many bytes of notes one `cat-file --batch` is asked for: git's answer is checked whole
/// against what was asked, so it must fit in what is kept of its output.
const BATCH: u64 = 4 << 20;

/// The notes under `reference`: (annotated object id, note), and how many contents were left
/// out (beyond [`MAX_NOTES`], the ones whose notes were last changed longest ago). A ref that
/// is not a history of notes, or an answer of git's that is not what was asked, is an error:
/// nothing is read from it rather than part of it.
pub(super) fn read_notes(
    repo: &Path,
    reference: &str,
    deadline: Deadline,
) -> Result<(Vec<(String, Note)>, usize)> {
    // `git notes --ref` reads any other name as one under refs/notes/.
    debug_assert!(reference.starts_with("refs/notes/"), "{reference}");
    let kind = git(repo, &["cat-file", "-t", reference], None, deadline)?;
    if kind.trim() != "commit" {
        return Err(Error::input(format!(
            "{reference} names a {}, not a history of notes",
            kind.trim()
        )));
    }
    let listed = git(repo, &["notes", "--ref", reference, "list"], None, deadline)?;
    let mut pairs: Vec<(String, String)> = listed
        .lines()
        .filter_map(|l| {
            let (blob, object) = l.split_once(' ')?;
            let object = object.trim();
            (is_object_id(blob) && is_object_id(object))
                .then(|| (blob.to_string(), object.to_string()))
        })
        .collect();
    let mut left_out = 0;
    if pairs.len() > MAX_NOTES {
        let newest = newest_annotated(repo, reference, deadline)?;
        left_out = pairs.len() - MAX_NOTES;
        pairs.retain(|(_, object)| newest.contains(object));
        pairs.truncate(MAX_NOTES);
    }
    if pairs.is_empty() {
        return Ok((Vec::new(), left_out));
    }
    let request: String = pairs.iter().map(|(blob, _)| format!("{blob}\n")).collect();
    let sizes = git(
        repo,
        &["cat-file", "--batch-check"],
        Some(request.into_bytes()),
        deadline,
    )?;
    let mut notes: BTreeMap<String, Note> = BTreeMap::new();
    let mut batch: Vec<(String, u64)> = Vec::new();
    let mut batched = 0;
    let mut total: u64 = 0;
    let mut answers = sizes.lines();
    for (blob, _) in &pairs {
        let line = answers.next().unwrap_or("");
        let mut fields = line.split(' ');
        if fields.next() != Some(blob.as_str()) {
            return Err(Error::input(format!(
                "git answered {line:?} for the note {blob}; the notes are not read"
            )));
        }
        let kind = fields.next();
        let size: Option<u64> = fields.next().and_then(|s| s.parse().ok());
        match (kind, size) {
            (Some("blob"), Some(size)) if size <= MAX_NOTE => {
                total += size;
                if total > MAX_TOTAL {
                    return Err(Error::input(format!(
                        "the notes of {reference} are over {} MiB in all; not read",
                        MAX_TOTAL >> 20
                    )));
                }
                if batched + size > BATCH {
                    read_batch(repo, &std::mem::take(&mut batch), &mut notes, deadline)?;
                    batched = 0;
                }
                batched += size;
                batch.push((blob.clone(), size));
            }
            (Some("blob"), Some(size)) => {
                notes.insert(
                    blob.clone(),
                    Note::Unreadable(format!(
                        "the note is {size} bytes, over the {MAX_NOTE} limit"
                    )),
                );
            }
            _ => {
                notes.insert(
                    blob.clone(),
                    Note::Unreadable("the note is not a blob".to_string()),
                );
            }
        }
    }
    read_batch(repo, &batch, &mut notes, deadline)?;
    let notes = pairs
        .into_iter()
        .map(|(blob, object)| {
            let note = notes
                .get(&blob)
                .cloned()
                .unwrap_or_else(|| Note::Unreadable("the note could not be read".to_string()));
            (object, note)
        })
        .collect();
    Ok((notes, left_out))
}

/// Reads the blobs of `batch` (id, size as git said) with one `cat-file --batch`, each answer
/// checked to be the one asked for, of the size said, in full.
fn read_batch(
    repo: &Path,
    batch: &[(String, u64)],
    notes: &mut BTreeMap<String, Note>,
    deadline: Deadline,
) -> Result<()> {
    if batch.is_empty() {
        return Ok(());
    }
    let request: String = batch.iter().map(|(blob, _)| format!("{blob}\n")).collect();
    let expected: u64 = batch.iter().map(|(_, size)| size + 100).sum();
    let out = git_bytes(
        repo,
        &["cat-file", "--batch"],
        Some(request.into_bytes()),
        deadline,
        usize::try_from(expected + 4096).unwrap_or(usize::MAX),
    )?;
    let mut rest = out.as_slice();
    for (blob, size) in batch {
        let header = format!("{blob} blob {size}\n");
        let size = usize::try_from(*size).unwrap_or(usize::MAX);
        let whole = rest.strip_prefix(header.as_bytes()).and_then(|after| {
            let body = after.get(..size)?;
            let next = after.get(size..)?.strip_prefix(b"\n")?;
            Some((body, next))
        });
        let Some((body, next)) = whole else {
            return Err(Error::input(format!(
                "git's answer for the note {blob} is not the note asked for; the notes are not read"
            )));
        };
        notes.insert(blob.clone(), Note::Text(body.to_vec()));
        rest = next;
    }
    Ok(())
}

/// The objects whose notes were changed most recently, at most [`MAX_NOTES`], newest first:
/// the paths each commit of the notes history changed, in git's order (newest commit first;
/// a merge's own changes are those of the commits it merges).
fn newest_annotated(
    repo: &Path,
    reference: &str,
    deadline: Deadline,
) -> Result<std::collections::HashSet<String>> {
    let changed = git(
        repo,
        &[
            "log",
            "--format=",
            "--name-only",
            "--no-renames",
            reference,
            "--",
        ],
        None,
        deadline,
    )?;
    if changed.len() >= OUTPUT {
        return Err(Error::input(format!(
            "the history of {reference} is too long to tell which notes are newest"
        )));
    }
    let mut newest = std::collections::HashSet::new();
    for path in changed.lines() {
        if let Some(object) = object_of_note_path(path) {
            newest.insert(object);
            if newest.len() == MAX_NOTES {
                break;
            }
        }
    }
    Ok(newest)
}
