//! `marker-writer show`: the payload of the marker for this content; with `--all`, every
//! marker for it, local and from notes, each with the first reason it would be denied, and when
//! none is for it, which paths differ from the nearest published content.

use std::time::Duration;

use crate::cli::flags::print;
use crate::cli::output::diagnostic;
use crate::error::{Error, Result};
use crate::evidence::marker;
use crate::evidence::notes;
use crate::evidence::payload;
use crate::evidence::payload::{CheckName, Payload};
use crate::evidence::signing;
use crate::evidence::signing::Trust;
use crate::evidence::subject;
use crate::evidence::subject::Limits;
use crate::exit::Exit;
use crate::state::project::Project;
use crate::sys::git;

use super::{NAME, Options};

/// `show`: the payload of the marker of `check` for the content `subject_id`, as JSON; one
/// without its gate file is shown, and said to be uncommitted.
pub(super) fn show(project: &Project, check: &CheckName, subject_id: &str) -> Result<u8> {
    let (payload_path, gate_path) = marker::paths(project, check, subject_id);
    let payload = marker::read_payload(&payload_path).map_err(|denial| match denial {
        payload::Denial::Malformed(detail) if !payload_path.exists() => {
            Error::input(format!("{check}: no marker for {subject_id} ({detail})"))
        }
        other => Error::input(format!("{check}: {}", other.describe())),
    })?;
    if !gate_path.is_file() {
        diagnostic(
            NAME,
            &format!(
                "{check}: the payload has no gate file: it was never committed, and verify denies it"
            ),
        );
    }
    let mut json = serde_json::to_vec_pretty(&payload).expect("a payload serializes");
    json.push(b'\n');
    print(&json).map(Exit::code)
}

/// `show --all`: every marker for this content, local and from notes, newest first, each with
/// the first reason it would be denied; with none for it, what differs from the nearest content
/// that has one.
pub(super) fn show_all(
    project: &Project,
    check: &CheckName,
    subject_id: &str,
    limits: Limits,
    options: &Options,
) -> Result<u8> {
    let trust = signing::trusted_keys(project, options.verify_key.as_deref())?;
    let max_age = options.max_age.unwrap_or(payload::DEFAULT_MAX_AGE);
    let mut found: Vec<(Payload, &str, String)> = Vec::new();
    let mut unreadable: Vec<String> = Vec::new();
    let (payload_path, gate_path) = marker::paths(project, check, subject_id);
    if gate_path.is_file() || payload_path.is_file() {
        match marker::read_payload(&payload_path) {
            Ok(payload) => {
                let verdict = verdict(
                    &payload,
                    check,
                    subject_id,
                    max_age,
                    &trust,
                    gate_path.is_file(),
                );
                found.push((payload, "local", verdict));
            }
            Err(denial) => unreadable.push(format!("  local  denied: {}\n", denial.describe())),
        }
    }
    for note in notes::read(project, check, subject_id) {
        match note {
            Ok(payload) => {
                let verdict = verdict(&payload, check, subject_id, max_age, &trust, true);
                found.push((payload, "notes", verdict));
            }
            Err(denial) => unreadable.push(format!("  notes  denied: {}\n", denial.describe())),
        }
    }
    found.sort_by(|a, b| b.0.created_at.cmp(&a.0.created_at));
    let mut out = format!("{check} for {subject_id}:\n");
    for (payload, source, verdict) in &found {
        let signed = match &payload.signature {
            Some(signature) => format!("signed by {}", signature.key_id),
            None => "unsigned".to_string(),
        };
        let from = payload
            .origin
            .as_ref()
            .and_then(|o| o.run_url.clone())
            .unwrap_or_else(|| format!("{}@{}", payload.writer.user, payload.writer.host));
        out.push_str(&format!(
            "  {}  {source:<5}  {:<7}  {signed}  {from}  {verdict}\n",
            payload.created_at,
            payload.status.as_str()
        ));
    }
    out.extend(unreadable.iter().map(String::as_str));
    if found.is_empty() {
        out.push_str("  no marker, local or from notes, is for this content\n");
        out.push_str(&nearest(project, check, limits));
    }
    print(out.as_bytes()).map(Exit::code)
}

/// What verify would say of one marker: `passes`, or `denied:` and the first reason.
fn verdict(
    payload: &Payload,
    check: &CheckName,
    subject_id: &str,
    max_age: Duration,
    trust: &Trust,
    committed: bool,
) -> String {
    if !committed {
        return "denied: malformed: the payload has no gate file".into();
    }
    match marker::judge(payload, check, subject_id, max_age, trust) {
        Ok(()) => "passes".into(),
        Err(denial) => format!("denied: {}", denial.describe()),
    }
}

/// Which paths differ between this content and the nearest content a marker of `check` was
/// published for (the newest 20 looked at; a published tree must be in this repository's
/// objects to be compared).
fn nearest(project: &Project, check: &CheckName, limits: Limits) -> String {
    let mut published = notes::published(project, check);
    published.sort_by_key(|(_, payloads)| {
        std::cmp::Reverse(payloads.iter().map(|p| p.created_at.clone()).max())
    });
    published.truncate(20);
    if published.is_empty() {
        return "  nothing is published for this check: run `marker-writer sync` to fetch what CI published\n".into();
    }
    let here = match subject::worktree_listing(project, limits) {
        Ok(here) => here,
        Err(e) => return format!("  cannot list this content: {e}\n"),
    };
    let here: std::collections::BTreeMap<String, String> = here.into_iter().collect();
    let mut best: Option<(String, Vec<String>)> = None;
    for (subject, _) in &published {
        let Some(tree) = notes::object_id(subject) else {
            continue;
        };
        let Ok(listed) = git::git(
            &project.dir,
            // Informs only; and never fetches a missing tree from a promisor remote the
            // project's config names (that runs its upload-pack).
            &[
                "-c",
                "protocol.allow=never",
                "ls-tree",
                "-r",
                "-z",
                "--full-tree",
                tree,
            ],
            &[("GIT_NO_LAZY_FETCH", std::ffi::OsStr::new("1"))],
            Duration::from_secs(10),
        ) else {
            continue;
        };
        let there: std::collections::BTreeMap<String, String> = listed
            .split('\0')
            .filter_map(|entry| {
                let (meta, path) = entry.split_once('\t')?;
                let id = meta.split(' ').nth(2)?;
                Some((path.to_string(), id.to_string()))
            })
            .collect();
        let mut differ = Vec::new();
        for (path, id) in &here {
            match there.get(path) {
                None => differ.push(format!("{path} (only here)")),
                Some(other) if other != id => differ.push(format!("{path} (changed)")),
                Some(_) => {}
            }
        }
        for path in there.keys().filter(|p| !here.contains_key(*p)) {
            differ.push(format!("{path} (only there)"));
        }
        if best.as_ref().is_none_or(|(_, d)| differ.len() < d.len()) {
            best = Some((subject.clone(), differ));
        }
    }
    match best {
        None => format!(
            "  none of the {} published contents is in this repository's objects: `git fetch` the commits CI tested to compare\n",
            published.len()
        ),
        Some((subject, differ)) => {
            let shown: Vec<&str> = differ.iter().take(10).map(String::as_str).collect();
            let more = differ.len().saturating_sub(shown.len());
            format!(
                "  nearest published: {subject}, where {} {}: {}{}\n",
                differ.len(),
                if differ.len() == 1 {
                    "path differs"
                } else {
                    "paths differ"
                },
                shown.join(", "),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            )
        }
    }
}
