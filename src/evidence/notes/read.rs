//! What the gates read: a check's notes as written out, plain files, one per content; no git
//! runs (SPEC §9).

use crate::evidence::notes::{BROKEN, ERROR_LINE, MAX_NOTE, MAX_NOTES, cache_dir};
use crate::evidence::payload::{CheckName, Denial, Payload};
use crate::evidence::subject;
use crate::state::project::Project;
use crate::sys::files;

/// What a check's written-out notes say about one subject: each payload line, parsed, or why
/// it cannot be (`malformed`). Nothing published for it: empty.
pub(crate) fn read(
    project: &Project,
    check: &CheckName,
    subject_id: &str,
) -> Vec<std::result::Result<Payload, Denial>> {
    let dir = cache_dir(project, check);
    if let Ok(why) = std::fs::read_to_string(dir.join(BROKEN)) {
        return vec![Err(Denial::Malformed(format!(
            "the notes of `{check}` cannot be read: {}",
            why.trim()
        )))];
    }
    let path = dir.join(format!("{}.jsonl", subject::key(subject_id)));
    let bytes = match files::open_state(&path) {
        Ok(file) => match files::read_capped(file, MAX_NOTE + 4096, "the note", &path) {
            Ok(bytes) => bytes,
            Err(e) => return vec![Err(Denial::Malformed(e.to_string()))],
        },
        Err(_) => return Vec::new(),
    };
    parse_lines(&String::from_utf8_lossy(&bytes))
}

fn parse_lines(text: &str) -> Vec<std::result::Result<Payload, Denial>> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|line| {
            if let Some(why) = line.strip_prefix(ERROR_LINE) {
                return Err(Denial::Malformed(why.to_string()));
            }
            serde_json::from_str::<Payload>(line)
                .map_err(|e| Denial::Malformed(format!("a note is not a valid marker: {e}")))
        })
        .collect()
}

/// Whether any content has notes for this check (so a denial for this content is `subject
/// mismatch`, not `missing`).
pub(crate) fn has_any(project: &Project, check: &CheckName) -> bool {
    std::fs::read_dir(cache_dir(project, check)).is_ok_and(|entries| {
        entries
            .flatten()
            .any(|e| e.file_name().to_string_lossy().ends_with(".jsonl"))
    })
}

/// Every published subject of a check and its payloads (those that parse), for `show --all`.
pub(crate) fn published(project: &Project, check: &CheckName) -> Vec<(String, Vec<Payload>)> {
    let Ok(entries) = std::fs::read_dir(cache_dir(project, check)) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in entries.flatten().take(MAX_NOTES) {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(key) = name.strip_suffix(".jsonl") else {
            continue;
        };
        let Some(id) = key.strip_prefix("git-tree-") else {
            continue;
        };
        let subject = format!("git-tree:{id}");
        let payloads: Vec<Payload> = read(project, check, &subject)
            .into_iter()
            .flatten()
            .collect();
        found.push((subject, payloads));
    }
    found
}
