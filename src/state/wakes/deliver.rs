//! Delivering wakes: a reader takes each wake by a rename (`claim`), so one reader alone tells
//! it, writes it out, then marks it `done` or puts it back; a claim whose holder died is put back
//! (`recover`). What a session is told and when (`take`, `for_context`), and the waiters
//! (`stop-gate wait`) that deliver while they are live.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::state::project::{Project, SessionId};
use crate::state::protected;
use crate::state::session;
use crate::state::wakes::{
    CLAIM_EXPIRES, GIVE_UP_SECS, Kind, Wake, entries, main_checkout, project_queue, queued,
    read_json, session_queue,
};
use crate::sys::atomic::{self, Durability};
use crate::sys::files;
use crate::sys::process;
use crate::sys::time;
use crate::verdict::defang;

const WAITER_SCHEMA: &str = "vigil.waiter/v1";

fn waiters_dir() -> Option<PathBuf> {
    Some(protected::home()?.join("wakes/waiters"))
}

/// A wake taken out of its queue by one reader: written out, then `done`; else put back.
pub(crate) struct Claimed {
    pub wake: Wake,
    from: PathBuf,
    pub(super) at: PathBuf,
}

impl Claimed {
    /// Delivered: gone for good. A mark in the queue's `told/` is left first, so a claim that
    /// cannot be removed is never put back and told again (issue 44).
    pub(crate) fn done(self) {
        if let Some(queue) = self.from.parent() {
            let mark = super::told_mark(queue, &self.wake.id);
            if let Some(dir) = mark.parent()
                && files::make_private_dir(dir).is_ok()
            {
                let _ = atomic::write_atomic_as(&mark, b"", 0o600, Durability::Skip);
            }
        }
        let _ = std::fs::remove_file(&self.at);
    }

    /// Not delivered: back in the queue for the next reader.
    pub(crate) fn put_back(self) {
        let _ = std::fs::rename(&self.at, &self.from);
    }
}

/// Takes `path` for this reader (a rename: only one reader gets it). `None` when another was
/// first.
pub(super) fn claim(path: &Path, wake: Wake) -> Option<Claimed> {
    let queue = path.parent()?;
    let dir = queue.join("claimed");
    files::make_private_dir(&dir).ok()?;
    let at = dir.join(path.file_name()?);
    // The claim's age is its own: a rename keeps the wake's time, and a claim that looked old
    // the moment it was made would be put back by another reader's `recover` and told twice. So
    // the time is set before the rename.
    if let Ok(file) = std::fs::OpenOptions::new().write(true).open(path) {
        let _ = file.set_modified(SystemTime::now());
    }
    std::fs::rename(path, &at).ok()?;
    Some(Claimed {
        wake,
        from: path.to_path_buf(),
        at,
    })
}

/// Puts back every claim in `queue` older than [`CLAIM_EXPIRES`]: its holder died. The marks
/// of wakes told more than [`TOLD_KEPT`] ago go.
pub(crate) fn recover(queue: &Path) {
    recover_older(queue, CLAIM_EXPIRES);
    if let Ok(told) = std::fs::read_dir(queue.join("told")) {
        for entry in told.flatten() {
            if older_than(&entry, TOLD_KEPT) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
}

/// How long the mark of a told wake is kept: far longer than a kill and the next hook apart.
const TOLD_KEPT: Duration = Duration::from_secs(30 * 24 * 3600);

fn recover_older(queue: &Path, expires: Duration) {
    let Ok(dir) = std::fs::read_dir(queue.join("claimed")) else {
        return;
    };
    for entry in dir.flatten() {
        // Told already (its removal failed): never put back.
        let told = read_json::<Wake>(&entry.path()).is_some_and(|wake| {
            std::fs::symlink_metadata(super::told_mark(queue, &wake.id)).is_ok()
        });
        if told {
            let _ = std::fs::remove_file(entry.path());
            continue;
        }
        if older_than(&entry, expires) {
            // Its holder died: it may have been told, or not. Back in the queue marked so, to be
            // told once more as such, never silently twice (issue 44).
            let back = queue.join(entry.file_name());
            match read_json::<Wake>(&entry.path()) {
                Some(wake) => {
                    let marked = Wake {
                        unconfirmed: true,
                        ..wake
                    };
                    let json = serde_json::to_vec(&marked).expect("a wake serializes");
                    if atomic::write_atomic(&back, &json, 0o600).is_ok() {
                        let _ = std::fs::remove_file(entry.path());
                    }
                }
                None => {
                    let _ = std::fs::rename(entry.path(), back);
                }
            }
        }
    }
}

/// Whether `entry` was last modified at least `age` ago.
fn older_than(entry: &std::fs::DirEntry, age: Duration) -> bool {
    entry
        .metadata()
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|elapsed| elapsed >= age)
}

/// Whether `wake` is still news: a loop's, when the loop's session still holds that loop with
/// that status (not restarted or changed since); a CI verdict's always (a newer one replaced it
/// when it came). `None`: not known now, the session's record could not be read (an I/O
/// error): the wake stays queued for a reader that can tell (issue 44).
pub(crate) fn is_news(wake: &Wake) -> Option<bool> {
    if wake.kind == Kind::Ci {
        return Some(true);
    }
    let Some(session) = wake
        .session_id
        .as_deref()
        .and_then(|s| SessionId::parse(s).ok())
    else {
        return Some(false);
    };
    let project = Project::at(&wake.worktree).for_reading();
    match session::peek(&project, &session) {
        Ok(Some(record)) => Some(record.ralph.is_some_and(|ralph| {
            ralph.report.is_some_and(|r| r.id == wake.id) && ralph.status.as_str() == wake.status
        })),
        Err(unread) if unread.io => None,
        _ => Some(false),
    }
}

/// The most one delivery tells, in characters: the wakes beyond it stay queued for the next.
pub(crate) const TOLD_MAX: usize = 6000;

/// Takes the wakes of `queues` that are still news (a stale one is dropped), oldest first, as
/// many as [`told`] can say within [`TOLD_MAX`]: what a reader then writes out, and marks
/// `done` or puts back.
pub(crate) fn take(queues: &[PathBuf]) -> Vec<Claimed> {
    let mut taken: Vec<Claimed> = Vec::new();
    let mut size = 0;
    for queue in queues {
        recover(queue);
        for (path, wake) in queued(queue) {
            let cost = shown(&wake.line).chars().count() + 3;
            if !taken.is_empty() && size + cost > TOLD_MAX - 200 {
                return taken;
            }
            let Some(claimed) = claim(&path, wake) else {
                continue;
            };
            match is_news(&claimed.wake) {
                Some(true) => {
                    size += cost;
                    taken.push(claimed);
                }
                Some(false) => claimed.done(),
                None => claimed.put_back(),
            }
        }
    }
    taken
}

/// A wake's line as it is told: one line, defanged again on reading (a queue the agent could
/// write, with the state home inside its reach, would hand it on as written).
fn shown(line: &str) -> String {
    defang::field_max(line, 600)
}

/// What the commander is told: one line per wake.
pub(crate) fn told(taken: &[Claimed]) -> String {
    let lines: Vec<String> = taken
        .iter()
        .map(|c| {
            let maybe = if c.wake.unconfirmed {
                "(may not have reached you before) "
            } else {
                ""
            };
            format!("- {maybe}{}", shown(&c.wake.line))
        })
        .collect();
    format!(
        "vigil: {} settled since you last heard:\n{}\nRun `stop-gate loop list` for every loop of this project.",
        if taken.len() == 1 {
            "one piece of work"
        } else {
            "work"
        },
        lines.join("\n")
    )
}

/// Whether anything may still come to `queues`: a wake waiting, or a loop reporting there that
/// is still live.
pub(crate) fn anything_to_wait_for(queues: &[PathBuf]) -> bool {
    queues.iter().any(|queue| {
        !queued(queue).is_empty()
            || std::fs::read_dir(queue.join("claimed")).is_ok_and(|mut d| d.next().is_some())
            || entries(queue).iter().any(|e| e.status.is_live())
    })
}

/// Which queues a session reads: its own, and the project's when `with_project`.
pub(crate) fn queues_of(session: &SessionId, project: Option<&Path>) -> Vec<PathBuf> {
    let mut queues: Vec<PathBuf> = session_queue(session.as_str()).into_iter().collect();
    if let Some(commander) = project.and_then(project_queue) {
        queues.push(commander);
    }
    queues
}

/// The wakes a session hears as context when it starts or its human prompts (SPEC §10):
/// those of its own queue and of its project's, each taken only where no waiter is live to
/// deliver it. None for a session that runs a loop of its own (a worker reports, it is not
/// told). The caller writes them out, then marks each `done`, or puts them back.
pub(crate) fn for_context(project: &Project, session: &SessionId) -> Vec<Claimed> {
    if is_worker(project, session) {
        return Vec::new();
    }
    let commander = (!headless()).then(|| main_checkout(&project.dir));
    let queues: Vec<PathBuf> = queues_of(session, commander.as_deref())
        .into_iter()
        .filter(|queue| queue.is_dir() && live_waiters(queue).is_empty())
        .collect();
    take(&queues)
}

/// Whether `session` is a worker, which reports and is not told: `loop run`'s command (its
/// id in the environment), or a session whose loop is live now.
pub(crate) fn is_worker(project: &Project, session: &SessionId) -> bool {
    std::env::var_os(RUN_ENV).is_some()
        || match session::peek(project, session) {
            Ok(Some(record)) => record.ralph.is_some_and(|ralph| ralph.status.is_live()),
            Ok(None) => false,
            // A record that cannot be read: a Stop tells it; this session is not told more.
            Err(_) => true,
        }
}

/// `loop run`'s variable (see `loops::RUN_ENV`).
const RUN_ENV: &str = "VIGIL_LOOP_RUN";

/// Whether this is a headless Claude Code session (`claude -p`, an SDK, a CI action), by the
/// entrypoint Claude Code gives its hooks: only `cli` (the terminal) and the editors are
/// interactive, and unset is another engine (Codex) or a person. A headless session hears only
/// its own session's queue: the project's would be taken by any one-shot `claude -p`, and
/// waiting on it would hold that session open.
pub(crate) fn headless() -> bool {
    match std::env::var("CLAUDE_CODE_ENTRYPOINT") {
        Err(_) => false,
        Ok(entry) => !matches!(
            entry.as_str(),
            "" | "cli" | "claude-vscode" | "claude-desktop"
        ),
    }
}

/// A waiter as it registers itself: `wakes/waiters/<session>.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Waiter {
    pub schema: String,
    pub pid: u32,
    /// When the process began, as the system counts it (`/proc/<pid>/stat`): a pid reused by
    /// another process since does not match.
    #[serde(default)]
    pub process_start: Option<u64>,
    pub session_id: String,
    pub queues: Vec<PathBuf>,
    pub started_at: String,
}

/// The word a waiter's command line holds, besides the binary: how it is told from any other
/// process with its pid.
pub(crate) const WAITER_WORD: &str = "wait";

impl Waiter {
    /// Whether the process this names is alive and is this waiter: registered within the time a
    /// waiter waits, the same process (its start time), and a `stop-gate wait` by its command
    /// line.
    pub(crate) fn is_live(&self) -> bool {
        let age = time::now_secs() - time::parse_rfc3339(&self.started_at).unwrap_or(0.0);
        age <= (GIVE_UP_SECS + 120) as f64
            && process::is_alive(self.pid)
            && self.process_start.is_some()
            && process::start_time(self.pid) == self.process_start
            && process::command_line(self.pid).is_some_and(|words| {
                words
                    .first()
                    .is_some_and(|w| files::program_name(w) == "stop-gate")
                    && words.get(1).is_some_and(|w| w == WAITER_WORD)
            })
    }
}

/// Registers this process as `session`'s waiter on `queues`, replacing the waiter that was
/// there, which sees it is no longer registered and exits at its next look (no signal is
/// sent: a pid may have been reused). The path of the registration.
pub(crate) fn become_waiter(session: &SessionId, queues: &[PathBuf]) -> Result<PathBuf> {
    let Some(dir) = waiters_dir() else {
        return Err(Error::input("no state home, so there is nowhere to wait"));
    };
    files::make_private_dir(&dir).map_err(|e| Error::io("create", &dir, &e))?;
    let path = dir.join(format!("{session}.json"));
    let me = Waiter {
        schema: WAITER_SCHEMA.to_string(),
        pid: std::process::id(),
        process_start: process::start_time(std::process::id()),
        session_id: session.to_string(),
        queues: queues.to_vec(),
        started_at: time::now_rfc3339(),
    };
    let json = serde_json::to_vec(&me).expect("a waiter serializes");
    atomic::write_atomic_as(&path, &json, 0o600, Durability::Skip)
        .map_err(|e| Error::io("write", &path, &e))?;
    Ok(path)
}

/// Whether the registration at `path` still names this process (a newer waiter replaces it).
pub(crate) fn still_waiter(path: &Path) -> bool {
    read_json::<Waiter>(path).is_some_and(|w| w.pid == std::process::id())
}

/// Removes this process's registration, if it is still its own.
pub(crate) fn stop_waiting(path: &Path) {
    if still_waiter(path) {
        let _ = std::fs::remove_file(path);
    }
}

/// The live waiters that read `queue`.
pub(crate) fn live_waiters(queue: &Path) -> Vec<Waiter> {
    let Some(dir) = waiters_dir() else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| read_json::<Waiter>(&e.path()))
        .filter(|w| w.schema == WAITER_SCHEMA && w.queues.iter().any(|q| q == queue))
        .filter(Waiter::is_live)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_older_than_its_expiry_is_put_back_and_a_fresh_one_is_not() {
        let queue = tempfile::tempdir().unwrap();
        let claimed = queue.path().join("claimed");
        std::fs::create_dir(&claimed).unwrap();
        std::fs::write(claimed.join("1-a.json"), "{}").unwrap();
        recover_older(queue.path(), Duration::from_secs(3600));
        assert!(
            claimed.join("1-a.json").exists(),
            "a fresh claim was taken back"
        );
        recover_older(queue.path(), Duration::ZERO);
        assert!(
            queue.path().join("1-a.json").exists(),
            "an expired claim stayed claimed"
        );
    }
}
