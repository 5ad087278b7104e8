//! The block budget (SPEC §4): consecutive blocks per session from the check command, the
//! markers, malformed input and config errors, in `.vigil/sessions/<session_id>.json`. A pass
//! resets it; when it is spent the stop is allowed and the session records `aborted`.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::atomic::write_atomic;
use crate::error::{Error, Result};
use crate::lock::FileLock;
use crate::state::{Project, SessionId};
use crate::time;

pub const SCHEMA: &str = "vigil.session/v1";
pub const DEFAULT_MAX_BLOCKS: u32 = 3;
const LOCK_WAIT: Duration = Duration::from_secs(5);

/// `schemas/session.schema.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionRecord {
    pub schema: String,
    pub session_id: String,
    /// Blocks since the last pass.
    pub consecutive_blocks: u32,
    /// `ok`, or `aborted` once a spent budget let a stop through unverified.
    pub status: String,
    /// How many times the budget was spent in this session.
    pub budget_spent: u32,
    pub updated_at: String,
}

/// What the budget says about a block the gate wants to give.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Charge {
    /// Block: this is block `count` of `max`.
    Block { count: u32, max: u32 },
    /// The budget is spent: allow, and say the work is not verified.
    Spent { max: u32 },
}

/// Whose stops a budget counts: the main agent's, or its subagents' (kept apart, so that a
/// subagent passing never resets the main agent's count, nor spends it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    Main,
    Subagent,
}

impl Scope {
    fn dir(self) -> &'static str {
        match self {
            Scope::Main => "sessions",
            Scope::Subagent => "sessions/subagents",
        }
    }
}

pub fn path(project: &Project, session: &SessionId, scope: Scope) -> PathBuf {
    project
        .state
        .join(scope.dir())
        .join(format!("{session}.json"))
}

/// The session's record; a missing or unreadable one starts from zero (it is rewritten whole).
fn load(path: &std::path::Path, session: &SessionId) -> SessionRecord {
    crate::input::open_state(path)
        .ok()
        .and_then(|file| {
            crate::input::read_capped(file, 64 * 1024, "the session record", path).ok()
        })
        .and_then(|bytes| serde_json::from_slice::<SessionRecord>(&bytes).ok())
        .filter(|record| record.schema == SCHEMA)
        .unwrap_or_else(|| SessionRecord {
            schema: SCHEMA.to_string(),
            session_id: session.to_string(),
            consecutive_blocks: 0,
            status: "ok".to_string(),
            budget_spent: 0,
            updated_at: String::new(),
        })
}

fn save(path: &std::path::Path, record: &mut SessionRecord) -> Result<()> {
    record.updated_at = time::now_rfc3339();
    let mut json = serde_json::to_vec_pretty(record).expect("session record serializes");
    json.push(b'\n');
    write_atomic(path, &json, 0o644).map_err(|e| Error::io("write the session record", path, &e))
}

fn locked(project: &Project, session: &SessionId, scope: Scope) -> Result<(FileLock, PathBuf)> {
    let dir = project.owned_dir(scope.dir())?;
    let lock_path = dir.join(format!("{session}.lock"));
    let lock =
        FileLock::acquire(&lock_path, LOCK_WAIT).map_err(|e| Error::io("lock", &lock_path, &e))?;
    Ok((lock, path(project, session, scope)))
}

/// Counts one more block. When that would exceed `max`, the budget is spent instead: the
/// count starts again from zero and the session records `aborted`.
pub fn charge(project: &Project, session: &SessionId, scope: Scope, max: u32) -> Result<Charge> {
    let (_lock, path) = locked(project, session, scope)?;
    let mut record = load(&path, session);
    record.consecutive_blocks += 1;
    let charge = if record.consecutive_blocks > max {
        record.consecutive_blocks = 0;
        record.status = "aborted".to_string();
        record.budget_spent += 1;
        Charge::Spent { max }
    } else {
        Charge::Block {
            count: record.consecutive_blocks,
            max,
        }
    };
    save(&path, &mut record)?;
    Ok(charge)
}

/// A pass: the count of consecutive blocks goes back to zero and the status to `ok` (nothing
/// is written when that is so already, so a clean stop costs one failed stat at most).
pub fn reset(project: &Project, session: &SessionId, scope: Scope) -> Result<()> {
    let path = path(project, session, scope);
    if std::fs::symlink_metadata(&path).is_err() {
        return Ok(());
    }
    let (_lock, path) = locked(project, session, scope)?;
    let mut record = load(&path, session);
    if record.consecutive_blocks == 0 && record.status == "ok" {
        return Ok(());
    }
    record.consecutive_blocks = 0;
    record.status = "ok".to_string();
    save(&path, &mut record)
}
