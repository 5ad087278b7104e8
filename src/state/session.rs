//! A session's record in the protected state (SPEC §4, §9): its Ralph loop and its block
//! budgets, in `<protected>/sessions/<session_id>.rec`, a two-slot record (`record`) so that a
//! Stop writes it with one sync. The agent cannot reach it when the protected state is in the
//! state home; a record that is missing after vigil wrote it, or damaged, is never taken for
//! "no loop": it is told to the human, as NOT verified.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::state::loop_state::Failure;
use crate::state::loop_state::LoopState;
use crate::state::project;
use crate::state::project::{Project, SessionId};
use crate::state::protected;
use crate::sys::atomic;
use crate::sys::files;
use crate::sys::lock::FileLock;
use crate::sys::record;
use crate::sys::time;
use crate::verdict::defang;

pub(crate) const SCHEMA: &str = "vigil.session/v2";
const LOCK_WAIT: Duration = Duration::from_secs(5);

/// `schemas/session.schema.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SessionRecord {
    pub schema: String,
    pub session_id: String,
    /// The main agent's block budget.
    #[serde(default)]
    pub budget: Budget,
    /// Its subagents' without an `agent_id` (kept apart, so that a subagent passing never
    /// resets the main agent's).
    #[serde(default)]
    pub subagent_budget: Budget,
    /// Each subagent's, by its `agent_id` (at most `budget::MAX_AGENT_BUDGETS`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agent_budgets: Vec<AgentBudget>,
    /// The session's failed turns (StopFailure), the most recent last.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<Failure>,
    /// A loss not yet told to the human (the record was damaged, or gone while its loop ran):
    /// kept here by whoever opened the record first, so that whichever hook saves next does not
    /// make it vanish; the next Stop tells it (SPEC §9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost: Option<String>,
    /// The session's Ralph loop, once one was started (kept when it ends, with its status).
    #[serde(default, rename = "loop", skip_serializing_if = "Option::is_none")]
    pub ralph: Option<LoopState>,
    /// Settings changes the ConfigChange hook blocked in this session, the most recent last:
    /// told at the next Stop, and by `loop run` (under `claude -p` a hook's message is shown
    /// nowhere).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocked_changes: Vec<BlockedChange>,
    pub updated_at: String,
}

/// A settings change the ConfigChange hook blocked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct BlockedChange {
    /// The hook's one useful line, shortened.
    pub reason: String,
    pub at: String,
    /// Whether a Stop has told it.
    #[serde(default)]
    pub told: bool,
}

/// How many blocked changes a session keeps: the most recent.
pub(crate) const MAX_BLOCKED_CHANGES: usize = 5;

/// Records a settings change the ConfigChange hook blocked in `session`, for the next Stop and
/// `loop run` to tell.
pub(crate) fn note_blocked_change(
    project: &Project,
    session: &SessionId,
    reason: &str,
) -> Result<()> {
    let mut record = Session::open(project, session)?;
    let list = &mut record.record.blocked_changes;
    list.push(BlockedChange {
        reason: defang::field_max(reason, 500),
        at: time::now_rfc3339(),
        told: false,
    });
    if list.len() > MAX_BLOCKED_CHANGES {
        list.drain(..list.len() - MAX_BLOCKED_CHANGES);
    }
    record.save()
}

/// The blocked changes of `session` no Stop has told yet, now marked told: what the Stop says.
pub(crate) fn tell_blocked_changes(project: &Project, session: &SessionId) -> Result<Vec<String>> {
    let mut record = Session::open(project, session)?;
    let untold: Vec<String> = record
        .record
        .blocked_changes
        .iter_mut()
        .filter(|change| !change.told)
        .map(|change| {
            change.told = true;
            change.reason.clone()
        })
        .collect();
    if !untold.is_empty() {
        record.save()?;
    }
    Ok(untold)
}

/// Consecutive blocks since the last pass.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Budget {
    pub consecutive_blocks: u32,
    /// `aborted` once a spent budget let a stop through unverified.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// How many times the budget was spent in this session.
    pub budget_spent: u32,
}

/// A subagent's block budget.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct AgentBudget {
    pub agent_id: String,
    pub budget: Budget,
}

impl SessionRecord {
    fn new(session: &SessionId) -> SessionRecord {
        SessionRecord {
            schema: SCHEMA.to_string(),
            session_id: session.to_string(),
            budget: Budget::default(),
            subagent_budget: Budget::default(),
            agent_budgets: Vec::new(),
            failures: Vec::new(),
            lost: None,
            ralph: None,
            blocked_changes: Vec::new(),
            updated_at: String::new(),
        }
    }
}

/// A session's record, locked for a read-modify-write.
pub(crate) struct Session {
    pub record: SessionRecord,
    path: PathBuf,
    seq: u64,
    /// What reading found that the human must hear of (a damaged or vanished record); see
    /// `take_lost`.
    lost: Option<String>,
    _lock: FileLock,
}

/// Where a session's record is. A session's id is its own, so its record is looked for
/// wherever the state home may hold it: the project's candidates first (see
/// `protected::Place::candidates`), then every project directory of the state home (a loop
/// begun below a nested `.git`, or kept under a top the agent has since moved, is still this
/// session's). The in-project fallback comes last: what the agent can write there never hides
/// a record in the state home. A directory that holds only the loop's running marker is where
/// the record was, and reading it there tells the human it is gone.
pub(crate) fn path(project: &Project, session: &SessionId) -> PathBuf {
    let file = format!("sessions/{session}.rec");
    let place = project.protected();
    let holds = |dir: &Path| {
        let record = dir.join(&file);
        std::fs::symlink_metadata(&record).is_ok()
            || std::fs::symlink_metadata(running_marker(&record, session)).is_ok()
    };
    if let Some(dir) = place
        .candidates
        .iter()
        .filter(|dir| !place.fallback || **dir != place.dir)
        .find(|dir| holds(dir))
    {
        return dir.join(&file);
    }
    if let Some(dir) = protected::project_dirs()
        .into_iter()
        .filter(|dir| !place.candidates.contains(dir))
        .find(|dir| holds(dir) && place.is_related(dir))
    {
        return dir.join(&file);
    }
    place.dir.join(&file)
}

/// The marker that says a loop runs in `session`, kept beside the records: while it is there,
/// a record that is gone did not simply never exist.
fn running_marker(record: &Path, session: &SessionId) -> PathBuf {
    record
        .parent()
        .and_then(Path::parent)
        .unwrap_or(Path::new("."))
        .join("running")
        .join(session.as_str())
}

/// What a session's record holds now, read without a lock and without changing anything: the
/// record (`None` when there is none), or why it cannot be trusted (damaged, or gone while its
/// loop was known to run). Readers that only report use it; a Stop uses `Session::open`, which
/// also tells the human and begins again.
pub(crate) fn peek(
    project: &Project,
    session: &SessionId,
) -> std::result::Result<Option<SessionRecord>, Unread> {
    let path = path(project, session);
    match record::read(&path) {
        record::Read::Found { payload, .. } => {
            match serde_json::from_slice::<SessionRecord>(&payload) {
                Ok(record) if record.schema == SCHEMA && record.session_id == session.as_str() => {
                    match record.lost {
                        // Found by a hook that could not tell it: the next Stop does.
                        Some(lost) => Err(Unread::said(lost)),
                        None => Ok(Some(record)),
                    }
                }
                _ => Err(Unread::said(format!(
                    "the session record {} is not one vigil wrote",
                    path.display()
                ))),
            }
        }
        record::Read::Corrupt(why) => Err(Unread::said(format!(
            "the session record {} is damaged: {why}",
            path.display()
        ))),
        record::Read::Failed(e) => Err(Unread {
            why: format!(
                "the session record {} cannot be read: {}",
                path.display(),
                crate::error::plain_io(&e)
            ),
            io: true,
        }),
        record::Read::Missing => {
            if std::fs::symlink_metadata(running_marker(&path, session)).is_ok() {
                Err(Unread::said(format!(
                    "the record of this session's loop is gone from {}",
                    path.parent().unwrap_or(Path::new(".")).display()
                )))
            } else {
                Ok(None)
            }
        }
    }
}

/// Why a session's record could not be taken at its word: damaged, gone while its loop was
/// known to run, or (`io`) not read at all, an I/O error that says nothing of what it holds.
#[derive(Debug)]
pub(crate) struct Unread {
    pub(crate) why: String,
    pub(crate) io: bool,
}

impl Unread {
    fn said(why: String) -> Unread {
        Unread { why, io: false }
    }
}

impl std::fmt::Display for Unread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.why)
    }
}

impl Session {
    /// Locks and reads the record of `session`. A damaged record is moved aside and a fresh one
    /// begun, with `lost` saying what happened; so is a missing one whose loop was known to run.
    pub(crate) fn open(project: &Project, session: &SessionId) -> Result<Session> {
        let path = path(project, session);
        let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
        owned_dir(&dir)?;
        let lock_path = dir.join(format!("{session}.lock"));
        let lock = FileLock::acquire(&lock_path, LOCK_WAIT)
            .map_err(|e| Error::io("lock", &lock_path, &e))?;
        let fresh = || SessionRecord::new(session);
        let (record, seq, lost) = match record::read(&path) {
            record::Read::Found { payload, seq } => {
                match serde_json::from_slice::<SessionRecord>(&payload) {
                    Ok(record)
                        if record.schema == SCHEMA && record.session_id == session.as_str() =>
                    {
                        (record, seq, None)
                    }
                    Ok(_) | Err(_) => {
                        let kept = set_aside(&path);
                        (
                            fresh(),
                            0,
                            Some(format!(
                                "the session record {} is not one vigil wrote (kept as {kept})",
                                path.display()
                            )),
                        )
                    }
                }
            }
            // Nothing is known of what it holds: neither an older copy nor a fresh record may
            // stand for it, and it is never moved aside (issue 44). The caller blocks.
            record::Read::Failed(e) => {
                return Err(Error::io("read the session record", &path, &e));
            }
            record::Read::Corrupt(why) => {
                let kept = set_aside(&path);
                (
                    fresh(),
                    0,
                    Some(format!(
                        "the session record {} is damaged: {why} (kept as {kept})",
                        path.display()
                    )),
                )
            }
            record::Read::Missing => {
                let marker = running_marker(&path, session);
                let lost = std::fs::symlink_metadata(&marker).is_ok().then(|| {
                    format!(
                        "the record of this session's loop is gone from {}",
                        dir.display()
                    )
                });
                (fresh(), 0, lost)
            }
        };
        // Not told yet: the fresh record carries it, and the running marker stays until a
        // save, so that a hook that opens the record and does not save cannot lose it either.
        let mut record = record;
        if lost.is_some() {
            record.lost = lost.clone();
        }
        let mut opened = Session {
            record,
            path,
            seq,
            lost,
            _lock: lock,
        };
        // Written at once, whatever the caller does next: a hook that opens the record and does
        // not save must not make the loss vanish with the record it set aside.
        if opened.lost.is_some() {
            opened.save()?;
        }
        Ok(opened)
    }

    /// The loss the human must be told, if any (found now, or kept by an earlier hook), taken
    /// out of the record: the caller tells it and saves.
    pub(crate) fn take_lost(&mut self) -> Option<String> {
        let found = self.lost.take();
        let kept = self.record.lost.take();
        found.or(kept)
    }

    /// Writes the record: one `pwrite` and one `fdatasync` once it exists. The running marker
    /// follows the loop: made when one starts running, removed when it ends.
    pub(crate) fn save(&mut self) -> Result<()> {
        self.record.updated_at = time::now_rfc3339();
        let payload = serde_json::to_vec(&self.record).expect("a session record serializes");
        let next = self.seq + 1;
        let session = SessionId::parse(&self.record.session_id)?;
        let marker = running_marker(&self.path, &session);
        let running = self
            .record
            .ralph
            .as_ref()
            .is_some_and(|ralph| ralph.status.is_live());
        let marked = std::fs::symlink_metadata(&marker).is_ok();
        // The record's write is the one commit point (issue 44): the marker a running loop
        // needs is made before it, and taken back if the record cannot be written, so a save
        // that reports failure took no effect.
        let made = running && !marked;
        if made {
            let dir = marker.parent().unwrap_or(Path::new("."));
            fs_err::create_dir_all(dir).map_err(Error::fs)?;
            atomic::write_atomic(&marker, b"", 0o600)
                .map_err(|e| Error::io("write", &marker, &e))?;
        }
        if let Err(e) = record::write(&self.path, next, &payload) {
            if made {
                let _ = std::fs::remove_file(&marker);
            }
            return Err(Error::io("write the session record", &self.path, &e));
        }
        self.seq = next;
        if !running && marked {
            let _ = std::fs::remove_file(&marker);
        }
        Ok(())
    }
}

/// Moves a record vigil cannot read out of the way, so a fresh one can begin; the name it got.
fn set_aside(path: &Path) -> String {
    let kept = path.with_extension(format!("damaged-{}", time::now_rfc3339().replace(':', "")));
    match std::fs::rename(path, &kept) {
        Ok(()) => kept.display().to_string(),
        Err(_) => "where it was".to_string(),
    }
}

/// Makes a session records directory (`<protected dir>/sessions`), refusing a symlink in its
/// place or in place of the protected directory above it (a link could send writes outside);
/// private (0700) in the state home.
fn owned_dir(dir: &Path) -> Result<()> {
    let root = dir.parent().unwrap_or(dir);
    for path in [root, dir] {
        project::refuse_symlink(path)?;
    }
    files::make_private_dir(dir).map_err(|e| Error::io("create", dir, &e))?;
    project::refuse_symlink(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::loop_state::{Failure, LoopState, MAX_FAILURES, StartedBy};
    use crate::transcript::usage::{Mark, Seen, Tally};

    /// Everything a session record can hold, each part at its largest, still fits one slot of
    /// the record: a record that did not would make every Stop of the session deny.
    #[test]
    fn the_largest_session_record_fits_its_slot() {
        let promise = crate::verdict::promise::Promise::new(
            &"\u{1F600}".repeat(crate::verdict::promise::MAX_PROMISE_CHARS),
        )
        .unwrap();
        // Control characters are the longest in JSON (`\u0001`, six bytes each).
        let prompt = "\u{1}".repeat(crate::state::loop_state::MAX_PROMPT_CHARS);
        let mut ralph = LoopState::new("s", prompt, &promise, 10_000, StartedBy::Terminal);
        let wide = |n: usize| "\u{1F600}".repeat(n);
        let failure = Failure {
            error: wide(64),
            error_details: Some(wide(200)),
            message: Some(wide(200)),
            at: crate::sys::time::now_rfc3339(),
            iteration: Some(10_000),
            agent_id: Some("a".repeat(128)),
        };
        ralph.failures = vec![failure.clone(); MAX_FAILURES];
        let seen = Seen {
            id: "m".repeat(64),
            usage: [u64::MAX; 4],
        };
        let mark = |path: String| Mark {
            path,
            dev: u64::MAX,
            ino: u64::MAX,
            offset: u64::MAX,
            recent: vec![seen.clone(); 2],
            last_ms: u64::MAX,
            backlog: Some(crate::transcript::usage::Backlog {
                from: u64::MAX,
                to: u64::MAX,
            }),
        };
        let mut files = vec![mark("transcript".into())];
        files.extend((0..129).map(|i| mark(format!("agent-{i:0>64}.jsonl"))));
        ralph.progress.tokens = Some(Tally {
            input: u64::MAX,
            cache_creation: u64::MAX,
            output: u64::MAX,
            cache_read: u64::MAX,
            files,
            untracked: u32::MAX,
        });
        let record = SessionRecord {
            schema: SCHEMA.into(),
            session_id: "s".repeat(128),
            budget: Budget::default(),
            subagent_budget: Budget::default(),
            agent_budgets: (0..crate::gate::budget::MAX_AGENT_BUDGETS)
                .map(|i| AgentBudget {
                    agent_id: format!("{i:a>128}"),
                    budget: Budget {
                        consecutive_blocks: u32::MAX,
                        status: Some("aborted".into()),
                        budget_spent: u32::MAX,
                    },
                })
                .collect(),
            failures: vec![failure; MAX_FAILURES],
            lost: Some(wide(1000)),
            ralph: Some(LoopState {
                checks: Some(vec![wide(210); crate::state::loop_state::MAX_CHECKS]),
                run_id: Some("f".repeat(32)),
                ..ralph
            }),
            blocked_changes: vec![
                BlockedChange {
                    reason: wide(501),
                    at: crate::sys::time::now_rfc3339(),
                    told: false,
                };
                MAX_BLOCKED_CHANGES
            ],
            updated_at: crate::sys::time::now_rfc3339(),
        };
        let size = serde_json::to_vec(&record).unwrap().len();
        eprintln!("the largest record: {size} bytes");
        assert!(
            size <= record::MAX_PAYLOAD,
            "{size} bytes, over the {} a slot holds",
            record::MAX_PAYLOAD
        );
    }
}
