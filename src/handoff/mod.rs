//! Handoff records (SPEC §6, §7): what one session leaves for the next. They only orient:
//! both ends fail open, and nothing in a record is ever trusted as approval.

pub(crate) mod briefing;
pub(crate) mod repo;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::cli::hook::HookEvent;
use crate::cli::hook::HookInput;
use crate::error;
use crate::error::{Error, Result};
use crate::evidence::marker;
use crate::evidence::payload;
use crate::evidence::subject;
use crate::handoff::repo::GitState;
use crate::state::loop_state;
use crate::state::loops;
use crate::state::project::{Project, SessionId};
use crate::sys::atomic::{Durability, write_atomic_as};
use crate::sys::files;
use crate::sys::time::{self, Deadline};
use crate::transcript;
use crate::verdict::defang::{self, clean, defang, field, field_max, keep_tail};

pub(crate) const SCHEMA: &str = "vigil.handoff/v1";
/// A record larger than this is not written, and not read.
pub(crate) const MAX_RECORD: usize = 16 * 1024;
pub(crate) const MAX_LAST_MESSAGE: usize = 2000;
const MAX_LOOP_PROMPT: usize = 500;
const MAX_CHECKS: usize = 32;
/// The progress files looked for in the project, in this order.
pub(crate) const PROGRESS_FILES: [&str; 3] = ["PROGRESS.md", "progress.md", "progress.txt"];

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum HandoffKind {
    /// Written at SessionEnd: the session is over.
    Final,
    /// A checkpoint from Stop or PreCompact: the session was still going.
    Intermediate,
}

impl HandoffKind {
    pub(crate) fn file_name(self) -> &'static str {
        match self {
            HandoffKind::Final => "final.json",
            HandoffKind::Intermediate => "checkpoint.json",
        }
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            HandoffKind::Final => "final",
            HandoffKind::Intermediate => "intermediate",
        }
    }
}

/// The loop of the session, as the next one should see it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LoopSummary {
    pub status: loop_state::LoopStatus,
    /// Why it ended, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_reason: Option<loop_state::EndReason>,
    pub iteration: u32,
    pub max_iterations: u32,
    pub completion_promise: String,
    /// The start of the loop's prompt, defanged.
    pub prompt: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MarkerState {
    pub check: String,
    pub status: payload::Status,
    pub subject: String,
    /// Whether the marker was for the working tree as it was when the record was written;
    /// `None` when that could not be computed in time.
    pub matches_worktree: Option<bool>,
}

/// `schemas/handoff.schema.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    pub schema: String,
    pub(crate) kind: HandoffKind,
    pub session_id: String,
    pub event: Option<String>,
    pub reason: Option<String>,
    pub written_at: String,
    pub cwd: Option<String>,
    pub(crate) git: Option<GitState>,
    pub last_message: Option<String>,
    #[serde(rename = "loop")]
    pub(crate) loop_summary: Option<LoopSummary>,
    pub(crate) markers: Vec<MarkerState>,
    pub progress_file: Option<String>,
    /// A checkpoint of StopFailure: the API error the session's last turn ended on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) failure: Option<FailureNote>,
}

/// The API error a turn ended on (StopFailure), as the next session is told it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FailureNote {
    /// The engine's category: `rate_limit`, `server_error`, `overloaded`, ….
    pub error: String,
    pub error_details: Option<String>,
    /// The API's message (Claude Code sends it as the last assistant message).
    pub message: Option<String>,
    pub at: String,
}

impl FailureNote {
    /// The failure a StopFailure payload reports, each field made one safe line; `None` for a
    /// subagent's (the session goes on: the main agent is told in a `<task-notification>`).
    pub(crate) fn of(input: &HookInput) -> Option<FailureNote> {
        if input.agent_id.is_some() {
            return None;
        }
        let (error, error_details, message) = failure_fields(input, MAX_FIELD)?;
        Some(FailureNote {
            error,
            error_details,
            message,
            at: time::now_rfc3339(),
        })
    }
}

/// A StopFailure's error, its details and the API's message, each one safe line (the error at
/// most `MAX_ERROR` characters, the others `max`); `None` without an error.
pub(crate) fn failure_fields(
    input: &HookInput,
    max: usize,
) -> Option<(String, Option<String>, Option<String>)> {
    let error = field_max(input.error.as_deref()?, MAX_ERROR);
    let line = |text: &str| field_max(text, max);
    Some((
        error,
        input.error_details.as_deref().map(line),
        input.last_assistant_message.as_deref().map(line),
    ))
}

/// StopFailure (SPEC §6): the failed turn, recorded in the session and its loop, which waits,
/// interrupted, for the session's next stop (the checkpoint tells it too). Nothing for input
/// that names no error.
pub(crate) fn record_failure(
    project: &Project,
    session: &SessionId,
    input: &HookInput,
) -> Result<()> {
    let Some((error, error_details, message)) = failure_fields(input, 200) else {
        return Ok(());
    };
    let failure = loop_state::Failure {
        error,
        error_details,
        message,
        at: time::now_rfc3339(),
        iteration: None,
        agent_id: input.agent_id.as_deref().map(|id| field_max(id, 128)),
    };
    loops::record_failure(project, session, failure)
}

/// The longest error category kept.
const MAX_ERROR: usize = 64;

pub(crate) fn dir(project: &Project) -> PathBuf {
    project.state.join("handoff")
}

/// The most any one-line field of a record holds.
const MAX_FIELD: usize = defang::MAX_FIELD;

/// Leaves the record of a session (SPEC §6). What is quick to know (the session, its loop, its
/// last message, its markers) is written first; then the repository's state, found by
/// `refine_by`, is added and the record written again. Neither write waits for the disk, so a
/// disk busy writing back something else does not hold the hook past its budget. An error is
/// that nothing was written; `Ok(Some(e))` that the first record stays, unrefined, because of e.
pub(crate) fn leave(
    project: &Project,
    session: &SessionId,
    input: &HookInput,
    kind: HandoffKind,
    progress_flag: Option<&Path>,
    refine_by: Deadline,
) -> Result<Option<Error>> {
    let mut record = first(project, session, input, kind, progress_flag, refine_by);
    write(project, &mut record)?;
    refine(project, &mut record, refine_by);
    Ok(write(project, &mut record).err())
}

/// The record without the repository's state: no git call, no walk of the tree.
fn first(
    project: &Project,
    session: &SessionId,
    input: &HookInput,
    kind: HandoffKind,
    progress_flag: Option<&Path>,
    deadline: Deadline,
) -> Record {
    // The transcript's tail is read while the markers are.
    let (last_message, markers) = std::thread::scope(|scope| {
        let message = scope.spawn(|| {
            transcript::last_message(input)
                .ok()
                .flatten()
                .map(|(text, _)| clean(&text, MAX_LAST_MESSAGE))
        });
        let markers = newest_markers(project, deadline);
        (message.join().ok().flatten(), markers)
    });
    let loop_summary = loops::load(project, session)
        .ok()
        .flatten()
        .map(|state| LoopSummary {
            status: state.status,
            end_reason: state.end_reason,
            iteration: state.iteration,
            max_iterations: state.max_iterations,
            completion_promise: field(&state.completion_promise),
            prompt: clean(&state.prompt, MAX_LOOP_PROMPT),
        });
    Record {
        schema: SCHEMA.to_string(),
        kind,
        session_id: session.to_string(),
        event: input.hook_event_name.as_deref().map(field),
        reason: input.reason.as_deref().map(field),
        written_at: time::now_rfc3339(),
        cwd: input.cwd.as_ref().map(|c| field(&c.display().to_string())),
        git: None,
        last_message,
        loop_summary,
        markers,
        progress_file: progress_file(&project.dir, progress_flag).map(|p| field(&p)),
        failure: (input.event() == Some(HookEvent::StopFailure))
            .then(|| FailureNote::of(input))
            .flatten(),
    }
}

/// Adds what the repository says, within `deadline`: HEAD and the branch from git, the staged
/// changes from git, and the working tree's changes and the markers' match from one walk by the
/// index's stat data (SPEC §9: it informs only), side by side. The walk runs on a thread of its
/// own that is not waited for past the deadline (a huge file or index is the agent's to make);
/// what is not known in time stays null. No git command that reads working files runs: the
/// repository's configuration is the agent's, and a clean filter named there would run, out of
/// any sandbox, for `git status`.
fn refine(project: &Project, record: &mut Record, deadline: Deadline) {
    let (sender, walked) = std::sync::mpsc::channel();
    let subject = !record.markers.is_empty();
    let walking = project.clone();
    std::thread::spawn(move || {
        let limits = subject::Limits {
            deadline,
            ..subject::Limits::default()
        };
        let _ = sender.send(subject::worktree_by_stat(&walking, limits, subject).ok());
    });
    let heads = repo::heads(&project.dir, deadline);
    let staged = heads
        .as_ref()
        .and_then(|heads| repo::staged(&project.dir, heads, &project.state, deadline).ok());
    let view = walked.recv_timeout(deadline.remaining()).ok().flatten();
    for marker in &mut record.markers {
        marker.matches_worktree = view
            .as_ref()
            .and_then(|view| view.subject.as_ref())
            .map(|subject| field(subject) == marker.subject);
    }
    let Some(heads) = heads else {
        return;
    };
    let changed = staged
        .zip(view.map(|view| view.changed))
        .map(|(staged, unstaged)| {
            let mut all: Vec<String> = staged.into_iter().chain(unstaged).collect();
            all.sort_unstable();
            all.dedup();
            all
        });
    record.git = Some(GitState {
        head: field(&heads.head),
        branch: heads.branch.as_deref().map(field),
        dirty: changed.as_ref().map(|all| !all.is_empty()),
        changed_files: changed.map(|all| {
            all.iter()
                .take(repo::MAX_CHANGED)
                .map(|f| field_max(f, 200))
                .collect()
        }),
    });
}

fn marker_checks(project: &Project) -> Vec<payload::CheckName> {
    let Ok(entries) = std::fs::read_dir(project.markers()) else {
        return Vec::new();
    };
    let mut checks: Vec<payload::CheckName> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| payload::CheckName::parse(&e.file_name().to_string_lossy()).ok())
        .collect();
    checks.sort_by(|a, b| a.as_str().cmp(b.as_str()));
    checks.truncate(MAX_CHECKS);
    checks
}

/// The newest committed marker of each check, its match with the working tree not yet known;
/// checks not reached by the deadline are left out.
fn newest_markers(project: &Project, deadline: Deadline) -> Vec<MarkerState> {
    marker_checks(project)
        .into_iter()
        .take_while(|_| !deadline.passed())
        .filter_map(|check| {
            let payload = marker::newest(project, &check)?;
            Some(MarkerState {
                check: check.to_string(),
                status: payload.status,
                subject: field(&payload.subject),
                matches_worktree: None,
            })
        })
        .collect()
}

fn progress_file(project_dir: &Path, flag: Option<&Path>) -> Option<String> {
    if let Some(path) = flag {
        return Some(path.display().to_string());
    }
    PROGRESS_FILES
        .iter()
        .find(|name| project_dir.join(name).is_file())
        .map(|name| name.to_string())
}

/// Serializes a record within `MAX_RECORD` bytes, shedding detail (changed paths, then the
/// last message) until it fits.
pub(crate) fn to_json(record: &mut Record) -> Result<Vec<u8>> {
    loop {
        let mut json = serde_json::to_vec_pretty(record).expect("a record serializes");
        json.push(b'\n');
        if json.len() <= MAX_RECORD {
            return Ok(json);
        }
        if let Some(changed) = record
            .git
            .as_mut()
            .and_then(|g| g.changed_files.as_mut())
            .filter(|c| !c.is_empty())
        {
            changed.truncate(changed.len() / 2);
        } else if let Some(message) = record
            .last_message
            .as_mut()
            .filter(|m| m.chars().count() > 100)
        {
            *message = keep_tail(message, message.chars().count() / 2);
        } else if record.markers.len() > 1 {
            record.markers.truncate(record.markers.len() / 2);
        } else {
            return Err(Error::input(format!(
                "the record is larger than {} KiB",
                MAX_RECORD / 1024
            )));
        }
    }
}

/// Writes a record atomically, then reads it back and checks it is what was meant. It does not
/// wait for the disk (SPEC P6): a record a crash tore fails to parse, and the loader skips it.
pub(crate) fn write(project: &Project, record: &mut Record) -> Result<PathBuf> {
    let dir = project.owned_dir("handoff")?;
    let path = dir.join(record.kind.file_name());
    let json = to_json(record)?;
    write_atomic_as(&path, &json, 0o644, Durability::Skip)
        .map_err(|e| Error::io("write", &path, &e))?;
    match read(&path) {
        Ok(back) if back == *record => Ok(path),
        Ok(_) => Err(Error::Io(format!(
            "{} does not read back as written",
            path.display()
        ))),
        Err(e) => Err(Error::Io(format!(
            "{} does not read back: {}",
            path.display(),
            e.describe()
        ))),
    }
}

/// Why a record was not loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Unusable {
    Missing,
    TooLarge,
    Unreadable(String),
    NewerSchema(String),
    Invalid(String),
}

impl Unusable {
    pub(crate) fn describe(&self) -> String {
        match self {
            Unusable::Missing => "missing".into(),
            Unusable::TooLarge => format!("larger than {} KiB", MAX_RECORD / 1024),
            Unusable::Unreadable(e) => format!("unreadable ({e})"),
            Unusable::NewerSchema(s) => format!("written by a newer vigil (schema {s:?})"),
            Unusable::Invalid(e) => format!("not a valid record ({e})"),
        }
    }
}

/// Reads a record with typed parsing (the schema, enforced at run time).
pub(crate) fn read(path: &Path) -> std::result::Result<Record, Unusable> {
    let file = match files::open_state(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Unusable::Missing),
        Err(e) => return Err(Unusable::Unreadable(error::plain_io(&e))),
    };
    let bytes = files::read_capped(file, MAX_RECORD as u64, "the record", path)
        .map_err(|_| Unusable::TooLarge)?;
    let value: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| Unusable::Invalid(e.to_string()))?;
    match value.get("schema").and_then(|s| s.as_str()) {
        Some(SCHEMA) => {}
        Some(other) if other.starts_with("vigil.handoff/") => {
            return Err(Unusable::NewerSchema(other.to_string()));
        }
        _ => return Err(Unusable::Invalid("no vigil.handoff/v1 schema".into())),
    }
    let record: Record =
        serde_json::from_value(value).map_err(|e| Unusable::Invalid(e.to_string()))?;
    record.validate().map_err(Unusable::Invalid)?;
    Ok(record)
}

impl Record {
    /// The limits of `schemas/handoff.schema.json` that typing alone does not enforce. A record
    /// is read by the next session: one that breaks them was not written by vigil.
    pub fn validate(&self) -> std::result::Result<(), String> {
        SessionId::parse(&self.session_id).map_err(|e| e.to_string())?;
        let one_line = |name: &str, value: &str, max: usize| {
            if value.chars().count() > max
                || value
                    .chars()
                    .any(|c| c.is_control() || c == '\u{2028}' || c == '\u{2029}')
            {
                return Err(format!(
                    "`{name}` is not one line of at most {max} characters"
                ));
            }
            if defang(value) != value {
                return Err(format!("`{name}` holds a live promise tag or marker"));
            }
            Ok(())
        };
        for (name, value) in [
            ("event", &self.event),
            ("reason", &self.reason),
            ("cwd", &self.cwd),
            ("progress_file", &self.progress_file),
        ] {
            if let Some(value) = value {
                one_line(name, value, MAX_FIELD)?;
            }
        }
        time::parse_rfc3339(&self.written_at).ok_or("`written_at` is not an RFC 3339 time")?;
        if let Some(git) = &self.git {
            one_line("git.head", &git.head, MAX_FIELD)?;
            if let Some(branch) = &git.branch {
                one_line("git.branch", branch, MAX_FIELD)?;
            }
            if let Some(files) = &git.changed_files {
                if files.len() > repo::MAX_CHANGED {
                    return Err("`git.changed_files` has more than 50 paths".into());
                }
                files
                    .iter()
                    .try_for_each(|f| one_line("git.changed_files", f, 200))?;
            }
        }
        if let Some(message) = &self.last_message
            && (message.chars().count() > MAX_LAST_MESSAGE || defang(message) != *message)
        {
            return Err("`last_message` is too long or holds a live tag".into());
        }
        if let Some(summary) = &self.loop_summary {
            if summary.iteration == 0
                || summary.max_iterations == 0
                || summary.max_iterations > loop_state::MAX_ITERATIONS
            {
                return Err("the loop's passes are out of range".into());
            }
            one_line(
                "loop.completion_promise",
                &summary.completion_promise,
                MAX_FIELD,
            )?;
            if summary.prompt.chars().count() > MAX_LOOP_PROMPT
                || defang(&summary.prompt) != summary.prompt
            {
                return Err("the loop's prompt is too long or holds a live tag".into());
            }
        }
        if let Some(failure) = &self.failure {
            one_line("failure.error", &failure.error, MAX_ERROR)?;
            for value in [&failure.error_details, &failure.message]
                .into_iter()
                .flatten()
            {
                one_line("failure", value, MAX_FIELD)?;
            }
            time::parse_rfc3339(&failure.at).ok_or("`failure.at` is not an RFC 3339 time")?;
        }
        for marker in &self.markers {
            payload::CheckName::parse(&marker.check).map_err(|e| e.to_string())?;
            one_line("markers.subject", &marker.subject, MAX_FIELD)?;
        }
        Ok(())
    }
}

/// The age of a record in seconds, when its time can be read.
pub fn age_secs(record: &Record) -> Option<f64> {
    time::parse_rfc3339(&record.written_at).map(|t| time::now_secs() - t)
}

pub(crate) const DEFAULT_MAX_AGE: Duration = Duration::from_secs(7 * 86_400);
