//! What the next session is told at SessionStart (SPEC §7): the handoff records, newest first,
//! each labelled by kind, with the progress file's tail; defanged, and at most 10,000
//! characters of SessionStart JSON.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::defang::defang;
use crate::handoff::{self, HandoffKind, Record, Unusable};
use crate::state::{Project, SessionId};
use crate::subject;
use crate::time::Deadline;

/// The most SessionStart JSON the loader prints.
pub const MAX_OUTPUT: usize = 10_000;
/// The most of the progress file that is shown: its tail.
pub const MAX_PROGRESS: usize = 4 * 1024;
/// How long the loader may spend asking git whether markers still match.
const SUBJECT_BUDGET: Duration = Duration::from_millis(500);

pub struct Request<'a> {
    pub project: &'a Project,
    pub session: &'a SessionId,
    /// `startup`, `resume`, `clear`, `compact` or `fork`.
    pub source: &'a str,
    pub max_age: Duration,
    pub progress_flag: Option<&'a Path>,
    /// A line about the loop this session just claimed, if it claimed one.
    pub claimed: Option<String>,
}

/// The context for the new session, or `None` when there is nothing to tell.
pub fn context(request: &Request) -> Option<String> {
    let mut notes = Vec::new();
    let mut records = Vec::new();
    for kind in [HandoffKind::Final, HandoffKind::Intermediate] {
        let path = handoff::dir(request.project).join(kind.file_name());
        match handoff::read(&path) {
            Ok(record) if record.kind != kind => notes.push(format!(
                "vigil: skipped {}: it says kind {}",
                kind.file_name(),
                record.kind.as_str()
            )),
            Ok(record) => records.push(record),
            Err(Unusable::Missing) => {}
            Err(why) => notes.push(format!(
                "vigil: skipped {}: {}",
                kind.file_name(),
                why.describe()
            )),
        }
    }
    // After compaction the session goes on: what it needs back is its own checkpoint.
    if request.source == "compact" {
        records.retain(|r| r.session_id == request.session.as_str());
    }
    records.retain(|record| match handoff::age_secs(record) {
        Some(age) if age <= request.max_age.as_secs_f64() => true,
        Some(_) => {
            notes.push(format!(
                "vigil: the {} record of session {} from {} is stale (older than {}); not loaded",
                record.kind.as_str(),
                record.session_id,
                record.written_at,
                crate::time::format_duration(request.max_age)
            ));
            false
        }
        None => {
            notes.push(format!(
                "vigil: the {} record has an unreadable time; not loaded",
                record.kind.as_str()
            ));
            false
        }
    });
    records.sort_by(|a, b| b.written_at.cmp(&a.written_at));
    let progress = progress_tail(request, &records);
    if records.is_empty() && notes.is_empty() && progress.is_none() && request.claimed.is_none() {
        return None;
    }
    let worktree = records
        .iter()
        .any(|r| !r.markers.is_empty())
        .then(|| {
            subject::worktree_tree(
                &request.project.dir,
                &request.project.state,
                Deadline::after(SUBJECT_BUDGET).remaining(),
            )
            .ok()
        })
        .flatten();

    let mut text = String::from(
        "vigil handoff: what earlier sessions left in this project. It orients you and approves nothing: check the code and run the checks before relying on it.\n",
    );
    if let Some(claimed) = &request.claimed {
        let _ = writeln!(text, "{claimed}");
    }
    for note in &notes {
        let _ = writeln!(text, "{note}");
    }
    for record in &records {
        text.push('\n');
        render(&mut text, record, worktree.as_deref());
    }
    let body = defang(&text);
    let progress =
        progress.map(|(name, tail)| defang(&format!("\nProgress file {name}, its end:\n{tail}\n")));
    Some(fit(&body, progress.as_deref()))
}

fn render(text: &mut String, record: &Record, worktree: Option<&str>) {
    match record.kind {
        HandoffKind::Final => {
            let _ = write!(
                text,
                "[final] session {} ended at {}",
                record.session_id, record.written_at
            );
            if let Some(reason) = &record.reason {
                let _ = write!(text, " ({reason})");
            }
            text.push('\n');
        }
        HandoffKind::Intermediate => {
            let _ = writeln!(
                text,
                "[intermediate] session {}, checkpoint at {} ({}): the session was still going; this is NOT a finished task",
                record.session_id,
                record.written_at,
                record.event.as_deref().unwrap_or("checkpoint")
            );
        }
    }
    match &record.git {
        Some(git) => {
            let short: String = git.head.chars().take(12).collect();
            let at = match &git.branch {
                Some(branch) => format!("branch {branch} at {short}"),
                None => format!("detached HEAD at {short}"),
            };
            let state = match (git.dirty, &git.changed_files) {
                (Some(false), _) => "clean".to_string(),
                (Some(true), Some(files)) => format!("dirty: {}", files.join(", ")),
                (Some(true), None) => "dirty".to_string(),
                (None, _) => "dirty state unknown (git status was too slow)".to_string(),
            };
            let _ = writeln!(text, "  git: {at}, {state}");
        }
        None => text.push_str("  git: not known\n"),
    }
    if let Some(summary) = &record.loop_summary {
        let _ = writeln!(
            text,
            "  loop: {}, pass {}/{}, promise {}; prompt: {}",
            summary.status.as_str(),
            summary.iteration,
            summary.max_iterations,
            summary.completion_promise,
            summary.prompt.replace('\n', " ")
        );
    }
    if !record.markers.is_empty() {
        let list: Vec<String> = record
            .markers
            .iter()
            .map(|m| {
                let now = match worktree {
                    Some(current) if current == m.subject => "matches the working tree now",
                    Some(_) => "does NOT match the working tree now",
                    None => "match with the working tree unknown",
                };
                format!("{} {} ({now})", m.check, m.status.as_str())
            })
            .collect();
        let _ = writeln!(text, "  markers: {}", list.join("; "));
    }
    if let Some(message) = &record.last_message {
        let _ = writeln!(text, "  last message:\n{}", indent(message));
    }
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("    {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The progress file named by the flag or a record (else found in the project), and its tail.
fn progress_tail(request: &Request, records: &[Record]) -> Option<(String, String)> {
    let named = request
        .progress_flag
        .map(|p| p.display().to_string())
        .or_else(|| records.iter().find_map(|r| r.progress_file.clone()))
        .or_else(|| {
            handoff::PROGRESS_FILES
                .iter()
                .find(|n| request.project.dir.join(n).is_file())
                .map(|n| n.to_string())
        })?;
    let path = request.project.dir.join(&named);
    let file = crate::input::open_regular(&path).ok()?;
    let bytes = crate::terminal::read_tail(
        &crate::input::Source::File(path.clone()),
        MAX_PROGRESS as u64,
    )
    .ok()?;
    drop(file);
    let text = crate::terminal::plain_text(&bytes);
    let len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    let tail = if len > MAX_PROGRESS as u64 {
        format!("[…]\n{text}")
    } else {
        text
    };
    Some((named, tail))
}

/// The SessionStart JSON, at most `MAX_OUTPUT` characters: the progress tail is shortened
/// first, then the records' text, from its end.
fn fit(body: &str, progress: Option<&str>) -> String {
    let wrap = |context: &str| {
        json!({"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": context}}).to_string()
    };
    let mut progress = progress.unwrap_or("").to_string();
    loop {
        let out = wrap(&format!("{body}{progress}"));
        let over = out.chars().count().saturating_sub(MAX_OUTPUT);
        if over == 0 {
            return out;
        }
        if progress.is_empty() {
            break;
        }
        let keep = progress.chars().count().saturating_sub(over + 16);
        progress = if keep < 64 {
            String::new()
        } else {
            handoff::keep_tail(&progress, keep)
        };
    }
    let mut body: String = body.to_string();
    loop {
        let out = wrap(&format!("{body}\n[… cut to fit]"));
        let over = out.chars().count().saturating_sub(MAX_OUTPUT);
        if over == 0 {
            return out;
        }
        let keep = body.chars().count().saturating_sub(over.max(1) + 8);
        body = body.chars().take(keep).collect();
    }
}
