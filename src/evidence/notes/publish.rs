//! Publishing: a payload appended to the note of its content, and a check's notes written
//! out as plain files for the gates (`materialize`, after each publish and sync).

use std::path::Path;

use crate::error::{Error, Result};
use crate::evidence::notes::load::{Note, read_notes};
use crate::evidence::notes::repo::{ensure, git, lock};
use crate::evidence::notes::{BROKEN, ERROR_LINE, MAX_NOTE, cache_dir, notes_ref, object_id};
use crate::evidence::payload::{CheckName, Payload};
use crate::evidence::subject;
use crate::state::project::Project;
use crate::sys::atomic;
use crate::sys::atomic::Durability;
use crate::sys::time::Deadline;

/// Publishes a payload: appends it, one line of JSON, to the note of its content under
/// `refs/notes/vigil/<check>`, then writes the check's notes out for the gates. A worktree
/// subject only: it is the one whose id is a git object id.
pub(crate) fn publish(project: &Project, payload: &Payload, deadline: Deadline) -> Result<()> {
    let check = CheckName::parse(&payload.check)?;
    let Some(object) = object_id(&payload.subject) else {
        return Err(Error::usage(format!(
            "--publish needs a worktree subject (a git tree id, the same on every machine); {} is not one",
            payload.subject
        )));
    };
    let repo = ensure(project, deadline)?;
    let line = serde_json::to_string(payload).expect("a payload serializes");
    let reference = notes_ref(&check);
    let _held = lock(project, deadline)?;
    // A note too large to be read (junk pushed over it) is replaced, not appended to: the
    // payload would be as lost in it as the others.
    let existing = git(
        &repo,
        &["notes", "--ref", &reference, "list", object],
        None,
        deadline,
    )
    .ok();
    let unreadable = existing.is_some_and(|blob| {
        git(&repo, &["cat-file", "-s", blob.trim()], None, deadline)
            .ok()
            .and_then(|size| size.trim().parse::<u64>().ok())
            .is_none_or(|size| size > MAX_NOTE)
    });
    let mut args = vec!["notes", "--ref", &reference];
    args.extend(if unreadable {
        &["add", "-f"][..]
    } else {
        &["append"][..]
    });
    args.extend(["-m", &line, object]);
    git(&repo, &args, None, deadline)?;
    materialize(project, &repo, &check, deadline)?;
    Ok(())
}

/// What `materialize` wrote out.
pub(super) struct Written {
    pub(super) contents: usize,
    /// Contents whose notes were left out, the oldest beyond [`MAX_NOTES`].
    pub(super) left_out: usize,
}

/// Writes the notes of `check` out as `<key>.jsonl` files (replacing what was there), or,
/// when they cannot be read, the reason in `broken`. Called under the lock.
pub(super) fn materialize(
    project: &Project,
    repo: &Path,
    check: &CheckName,
    deadline: Deadline,
) -> Result<Written> {
    let dir = cache_dir(project, check);
    fs_err::create_dir_all(&dir).map_err(Error::fs)?;
    let broken = dir.join(BROKEN);
    let written = read_notes(repo, &notes_ref(check), deadline).and_then(|(notes, left_out)| {
        let mut keep = std::collections::HashSet::new();
        for (object, note) in &notes {
            deadline.check("writing the notes out")?;
            let key = subject::key(&format!("git-tree:{object}"));
            let name = format!("{key}.jsonl");
            let path = dir.join(&name);
            let text = match note {
                Note::Text(bytes) => bytes.clone(),
                Note::Unreadable(why) => format!("{ERROR_LINE}{why}\n").into_bytes(),
            };
            // A note that did not change is not written again: a sync rewrites nothing.
            if std::fs::read(&path).ok().as_deref() != Some(text.as_slice()) {
                // What is written here can be made again from the notes repository by the
                // next sync: no wait for the disk.
                atomic::write_atomic_as(&path, &text, 0o600, Durability::Skip)
                    .map_err(|e| Error::io("write", &path, &e))?;
            }
            keep.insert(name);
        }
        for entry in fs_err::read_dir(&dir).map_err(Error::fs)? {
            let entry = entry.map_err(Error::fs)?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(".jsonl") && !keep.contains(&name) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
        Ok(Written {
            contents: notes.len(),
            left_out,
        })
    });
    match written {
        Ok(written) => {
            let _ = std::fs::remove_file(&broken);
            Ok(written)
        }
        Err(e) => {
            let _ = atomic::write_atomic(&broken, e.to_string().as_bytes(), 0o600);
            Err(e)
        }
    }
}
