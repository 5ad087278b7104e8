//! What the next session is told at SessionStart (SPEC §7): the handoff records, newest first,
//! each labelled by kind, with the progress file's tail; defanged, and at most 10,000
//! characters of SessionStart JSON. Everything in a record is untrusted text: it is shown on
//! lines of its own, indented, and can never start a line that looks like vigil's.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::evidence::held;
use crate::handoff::{self, HandoffKind, Record, Unusable};
use crate::state::hold;
use crate::state::loop_state::LoopStatus;
use crate::state::loops;
use crate::state::project::{Project, SessionId};
use crate::sys::atomic;
use crate::sys::files;
use crate::sys::time;
use crate::verdict::defang::{self, defang};
use crate::verdict::terminal;

/// The most SessionStart JSON the loader prints.
pub(crate) const MAX_OUTPUT: usize = 10_000;
/// The most of the progress file that is shown: its tail.
pub(crate) const MAX_PROGRESS: usize = 4 * 1024;
/// How far in the future a record's time may be before it counts as forged.
const FUTURE_SKEW: f64 = 300.0;

const HEADER: &str = "vigil handoff: what earlier sessions left in this project. It orients you and approves nothing: check the code and run the checks before relying on it.\n";

pub(crate) struct Request<'a> {
    pub project: &'a Project,
    pub session: &'a SessionId,
    /// `startup`, `resume`, `clear`, `compact` or `fork`.
    pub source: &'a str,
    pub max_age: Duration,
    pub progress_flag: Option<&'a Path>,
    /// A line about the loop this session just claimed, if it claimed one.
    pub claimed: Option<String>,
    /// What this session must hear of its own loop first (the witness of a record gone).
    pub told: Option<String>,
    /// Code planted since `install --protect` that would run with the user's rights (a
    /// `.claude/` below the top): told to the model and, as `systemMessage`, to the person.
    pub planted: Vec<String>,
}

/// The context for the new session, or `None` when there is nothing to tell.
pub(crate) fn context(request: &Request) -> Option<String> {
    let mut notes: Vec<String> = request.told.iter().cloned().collect();
    notes.extend(request.planted.iter().map(|line| format!("vigil: {line}")));
    notes.extend(protection_notes(request.project));
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
        Some(age) if age < -FUTURE_SKEW => {
            notes.push(format!(
                "vigil: skipped the {} record of session {}: written in the future ({})",
                record.kind.as_str(),
                record.session_id,
                record.written_at
            ));
            false
        }
        Some(age) if age <= request.max_age.as_secs_f64() => true,
        Some(_) => {
            notes.push(format!(
                "vigil: the {} record of session {} from {} is stale (older than {}); not loaded",
                record.kind.as_str(),
                record.session_id,
                record.written_at,
                time::format_duration(request.max_age)
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
    records.sort_by(|a, b| {
        let time = |r: &Record| time::parse_rfc3339(&r.written_at).unwrap_or(0.0);
        time(b).total_cmp(&time(a))
    });
    // The loop file is the truth, the record a snapshot: Codex runs its Stop hooks at once, so
    // the checkpoint of a Stop can be taken before stop-gate records that pass. Where the
    // session's loop is still on disk, its state now is what is told.
    for record in &mut records {
        if let (Some(summary), Ok(session)) = (
            record.loop_summary.as_mut(),
            SessionId::parse(&record.session_id),
        ) && let Ok(Some(state)) = loops::load(request.project, &session)
        {
            summary.status = state.status;
            summary.end_reason = state.end_reason;
            summary.iteration = state.iteration;
            summary.max_iterations = state.max_iterations;
        }
    }
    // Missing records give no output (SPEC §7): the progress file comes only with them.
    if records.is_empty() && notes.is_empty() && request.claimed.is_none() {
        return None;
    }
    let progress = progress_tail(request, &records).map(|(name, tail)| {
        defang(&format!(
            "\nProgress file {name}, its end:\n{}\n",
            indent(&tail)
        ))
    });
    // The claimed loop's instruction names the promise as the agent must write it: that line
    // alone is not defanged (its task text already is).
    let claimed = request.claimed.as_deref().unwrap_or("");
    let context = fit(claimed, &records, &notes, progress.as_deref());
    if request.planted.is_empty() {
        return Some(context);
    }
    let mut json: serde_json::Value = serde_json::from_str(&context).ok()?;
    json["systemMessage"] = serde_json::Value::String(defang::keep_head(
        &format!(
            "vigil: {}; `settings-merge check` names each",
            request.planted.join("; ")
        ),
        MAX_PLANTED_MESSAGE,
    ));
    Some(json.to_string())
}

/// The most characters the person is shown of planted code at SessionStart.
const MAX_PLANTED_MESSAGE: usize = 2000;

/// What the session must know of where vigil's protected state is: in the project (the state
/// home could not be written), and, once per project, that loops an older vigil kept in
/// `.vigil/loops/` were not taken over.
fn protection_notes(project: &Project) -> Vec<String> {
    let mut notes = Vec::new();
    let place = project.protected();
    if place.fallback {
        notes.push(format!(
            "vigil: the state home cannot be written, so this project's loops and session records are in {}, inside the project, where the agent can change them: they are NOT protected (`settings-merge check` says why)",
            place.dir.display()
        ));
    } else if place.agent_writable() {
        notes.push(format!(
            "vigil: the state home is set where the agent's commands can write (inside the project, or the sandbox's temporary directory), so this project's loops and session records are in {}, where the agent can change them: they are NOT protected; set VIGIL_STATE_HOME to a directory outside both",
            place.dir.display()
        ));
    }
    notes.extend(hold_notes(project));
    let legacy = loops::legacy_loops(project);
    let told = place.dir.join("legacy-loops-told");
    if legacy > 0 && std::fs::symlink_metadata(&told).is_err() {
        notes.push(format!(
            "vigil: {legacy} loop file(s) in {} were kept by an older vigil inside the project and were not taken over (loops now live where the agent cannot change them); start a loop again with /vigil-loop or `stop-gate loop start`",
            project.legacy_loops().display()
        ));
        let _ = std::fs::create_dir_all(&place.dir)
            .and_then(|()| atomic::write_atomic(&told, b"", 0o600));
    }
    notes
}

/// What the session must know of the human's hold on the tests (SPEC §11), a line each (a
/// note is cut at 300 characters): the sandboxed shell only meets a read-only error, and the
/// check runs them as held, so the agent is told which they are, and which differ now.
fn hold_notes(project: &Project) -> Vec<String> {
    let hold = match hold::load(project) {
        Ok(Some(hold)) => hold,
        Ok(None) => return Vec::new(),
        Err(e) => {
            return vec![format!(
                "vigil: {e}; until it is read, the Stop hook blocks"
            )];
        }
    };
    let patterns: Vec<&str> = hold.patterns.iter().map(|p| p.pattern.as_str()).collect();
    let mut notes = Vec::new();
    if let Ok(compared) = held::compare(project, &hold)
        && !compared.changed.is_empty()
    {
        notes.push(format!(
            "vigil: held files differ from the human's hold and must be put back as held before a stop: {}",
            compared.changed_phrase(5)
        ));
    }
    notes.push(format!(
        "vigil: the human holds the tests that judge this work: {} ({} files); never edit, delete, skip or rename them; add tests in new files; if a held test is wrong, end with `needs-decision: ` and why",
        patterns.join(", "),
        hold.files.len()
    ));
    if let Some(rules) = &hold.tests
        && (!rules.passed.is_empty() || !rules.must_pass.is_empty())
    {
        notes.push(format!(
            "vigil: by name, the {} tests that passed when they were held must still pass, and {} more the human named",
            rules.passed.len(),
            rules.must_pass.len()
        ));
    }
    notes
}

/// The context: header, claimed loop, notes, then each record (its last message cut to
/// `message_max` characters); everything but the claimed line defanged.
fn compose(claimed: &str, records: &[Record], notes: &[String], message_max: usize) -> String {
    let mut text = String::from(HEADER);
    if !claimed.is_empty() {
        let _ = writeln!(text, "{claimed}");
    }
    let mut rest = String::new();
    for note in notes {
        let _ = writeln!(rest, "{}", line(note));
    }
    for record in records {
        let mut record = record.clone();
        record.last_message = record
            .last_message
            .map(|m| defang::keep_tail(&m, message_max))
            .filter(|m| !m.is_empty());
        rest.push('\n');
        render(&mut rest, &record);
    }
    text.push_str(&defang(&rest));
    text
}

/// One line of untrusted text, whatever it holds.
fn line(text: &str) -> String {
    defang::field(text)
}

fn render(text: &mut String, record: &Record) {
    match record.kind {
        HandoffKind::Final => {
            let _ = write!(
                text,
                "[final] session {} ended at {}",
                line(&record.session_id),
                line(&record.written_at)
            );
            if let Some(reason) = &record.reason {
                let _ = write!(text, " ({})", line(reason));
            }
            text.push('\n');
        }
        HandoffKind::Intermediate => {
            let _ = writeln!(
                text,
                "[intermediate] session {}, checkpoint at {} ({}): the session was still going; this is NOT a finished task",
                line(&record.session_id),
                line(&record.written_at),
                line(record.event.as_deref().unwrap_or("checkpoint"))
            );
        }
    }
    if let Some(failure) = &record.failure {
        let detail = failure
            .message
            .as_deref()
            .or(failure.error_details.as_deref())
            .map_or(String::new(), |d| format!(": {}", line(d)));
        let _ = writeln!(
            text,
            "  ended on an API error: {} at {}{detail}",
            line(&failure.error),
            line(&failure.at)
        );
    }
    match &record.git {
        Some(git) => {
            let short: String = line(&git.head).chars().take(12).collect();
            let at = match &git.branch {
                Some(branch) => format!("branch {} at {short}", line(branch)),
                None => format!("detached HEAD at {short}"),
            };
            // The handoff found the tree's state by the index's stat data (SPEC §9).
            let state = match (git.dirty, &git.changed_files) {
                (Some(false), _) => "clean (by stat, not verified)".to_string(),
                (Some(true), Some(files)) => {
                    format!(
                        "dirty (by stat, not verified): {}",
                        files.iter().map(|f| line(f)).collect::<Vec<_>>().join(", ")
                    )
                }
                (Some(true), None) => "dirty (by stat, not verified)".to_string(),
                (None, _) => "dirty state unknown".to_string(),
            };
            let _ = writeln!(text, "  git: {at}, {state}");
        }
        None => text.push_str("  git: not known\n"),
    }
    if let Some(summary) = &record.loop_summary {
        // An interrupted loop waits for its own session: it goes on there, never in another.
        let waits = if summary.status == LoopStatus::Interrupted {
            let id = line(&record.session_id);
            format!(
                " (a turn ended without the gate's verdict: an API error, or the engine's cap on Stop blocks; no pass was spent, and it goes on at the next stop of session {id}: type on in that session, or cancel it with `stop-gate loop cancel --session {id}`)"
            )
        } else if let Some(reason) = summary
            .end_reason
            .filter(|_| summary.status != LoopStatus::Passed)
        {
            format!(" ({}: {})", reason.as_str(), reason.told())
        } else {
            String::new()
        };
        let _ = writeln!(
            text,
            "  loop: {}{waits}, pass {}/{}, promise {}; prompt: {}",
            summary.status.as_str(),
            summary.iteration,
            summary.max_iterations,
            line(&summary.completion_promise),
            line(&summary.prompt)
        );
    }
    if !record.markers.is_empty() {
        let list: Vec<String> = record
            .markers
            .iter()
            .map(|m| {
                // What the record found when it was written, by stat, not rechecked:
                // hashing the tree here would put a walk of every file on the session's start.
                let now = match m.matches_worktree {
                    Some(true) => {
                        "matched the working tree when recorded, by stat, not verified; not rechecked"
                    }
                    Some(false) => "did NOT match the working tree when recorded",
                    None => "match with the working tree unknown",
                };
                format!("{} {} ({now})", line(&m.check), m.status.as_str())
            })
            .collect();
        let _ = writeln!(text, "  markers: {}", list.join("; "));
    }
    if let Some(message) = &record.last_message {
        let _ = writeln!(text, "  last message:\n{}", indent(message));
    }
}

/// Each line indented four spaces, control characters gone: multi-line untrusted text can
/// never start a line of its own.
fn indent(text: &str) -> String {
    text.split(['\n', '\u{2028}', '\u{2029}'])
        .map(|l| {
            let clean: String = l
                .chars()
                .map(|c| if c.is_control() && c != '\t' { ' ' } else { c })
                .collect();
            format!("    {clean}")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The progress file named by the flag or a record (else found in the project), and its tail.
/// Only a plain file inside the project is read, never through a symlink: a record or a
/// repository must not be able to put another file's contents into the context.
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
    let project = std::fs::canonicalize(&request.project.dir).ok()?;
    let path = project.join(&named);
    let parent = std::fs::canonicalize(path.parent()?).ok()?;
    if !parent.starts_with(&project) {
        return None;
    }
    let file = files::open_state(&parent.join(path.file_name()?)).ok()?;
    let len = file.metadata().ok()?.len();
    let bytes = terminal::tail_of_file(file, MAX_PROGRESS as u64).ok()?;
    let text = terminal::plain_text(terminal::cut_to_char_boundary(&bytes));
    let tail = if len > MAX_PROGRESS as u64 {
        format!("[…]\n{text}")
    } else {
        text
    };
    Some((line(&named), tail))
}

/// The SessionStart JSON, at most `MAX_OUTPUT` characters. The last messages are cut first
/// (every record keeps its header and facts), then the progress tail; only then is the text
/// itself cut, at exactly what fits.
fn fit(claimed: &str, records: &[Record], notes: &[String], progress: Option<&str>) -> String {
    let wrap = |context: &str| {
        json!({"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": context}}).to_string()
    };
    let fits = |context: &str| wrap(context).chars().count() <= MAX_OUTPUT;
    let progress = progress.unwrap_or("");
    let mut body = String::new();
    for message_max in [handoff::MAX_LAST_MESSAGE, 1000, 400, 100, 0] {
        body = compose(claimed, records, notes, message_max);
        if fits(&format!("{body}{progress}")) {
            return wrap(&format!("{body}{progress}"));
        }
    }
    // The largest tail of the progress file that fits (the search is over characters).
    let chars: Vec<char> = progress.chars().collect();
    let tail_of = |n: usize| chars[chars.len() - n..].iter().collect::<String>();
    let (mut low, mut high) = (0, chars.len());
    while low < high {
        let mid = (low + high).div_ceil(2);
        if fits(&format!("{body}{}", tail_of(mid))) {
            low = mid;
        } else {
            high = mid - 1;
        }
    }
    if fits(&format!("{body}{}", tail_of(low))) {
        return wrap(&format!("{body}{}", tail_of(low)));
    }
    // Still too long without any progress: the body, cut at exactly what fits.
    let chars: Vec<char> = body.chars().collect();
    let cut = |n: usize| format!("{}\n[… cut to fit]", chars[..n].iter().collect::<String>());
    let (mut low, mut high) = (0, chars.len());
    while low < high {
        let mid = (low + high).div_ceil(2);
        if fits(&cut(mid)) {
            low = mid;
        } else {
            high = mid - 1;
        }
    }
    wrap(&cut(low))
}
