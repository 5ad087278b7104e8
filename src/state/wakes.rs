//! Wakes (SPEC §10, seed 003): when a loop settles, or a sync brings CI's verdict, vigil writes a
//! durable wake into the queue of the commander the human named, in the protected state. A
//! waiter (`stop-gate wait`, Claude Code's `asyncRewake`) or, when none is live, the next
//! SessionStart or UserPromptSubmit delivers it: at most once, only while it is still news, and
//! removed only after it was written out.
//!
//! A queue is a directory: `<wake>.json` files (named so that they sort by time), `claimed/`
//! (a wake a reader took and has not written out yet; one older than two minutes is put back),
//! and `loops/` (one entry per loop that reports to it, for `loop list` and for a waiter to know
//! whether anything may still come). The project's queue is in the protected state of its main
//! checkout, so every worktree of the repository reports to the same one; a session named with
//! `--notify` has its own under the state home.
//!
//! Here wakes and entries are written; how they are taken and told, and the waiters, is
//! `deliver`.

mod deliver;

pub(crate) use deliver::{
    Claimed, anything_to_wait_for, become_waiter, for_context, headless, is_worker, live_waiters,
    queues_of, still_waiter, stop_waiting, take, told,
};

use deliver::claim;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::state::loop_state::{EndReason, HeldTold, LoopState, LoopStatus, Report};
use crate::state::project::{Project, SessionId};
use crate::state::protected;
use crate::sys::atomic::{self, Durability};
use crate::sys::files;
use crate::sys::git;
use crate::sys::paths;
use crate::sys::time;
use crate::verdict::defang;
use crate::verdict::token::Token;

pub(crate) const SCHEMA: &str = "vigil.wake/v1";
const ENTRY_SCHEMA: &str = "vigil.wake-loop/v1";
/// How long a waiter waits (the seed's 55 minutes), inside the hour its handler gets.
pub(crate) const GIVE_UP_SECS: u64 = 3300;
/// A claim older than this is its holder's, who died or hangs: it is put back.
pub(crate) const CLAIM_EXPIRES: Duration = Duration::from_secs(120);
/// The most wakes one delivery reads, and one queue keeps entries of loops for.
const MAX_WAKES: usize = 200;
const MAX_ENTRIES: usize = 500;
/// An ended loop's entry is kept this long for `loop list`.
const ENTRY_KEPT: Duration = Duration::from_secs(14 * 24 * 3600);
const MAX_FILE: u64 = 64 * 1024;

/// A loop's name: what `--name` takes.
pub(crate) fn parse_name(raw: &str) -> Result<String> {
    if crate::state::project::is_file_name(raw, 64) {
        Ok(raw.to_string())
    } else {
        Err(Error::usage(format!(
            "--name {raw:?} is not 1 to 64 letters, digits, `.`, `_` or `-`"
        )))
    }
}

/// The main checkout of the repository `dir` is a linked worktree of (`sys::git`).
pub(crate) fn main_checkout(dir: &Path) -> PathBuf {
    git::main_checkout(dir)
}

/// Where a loop started now in `project` reports: a new id, its name (`--name`, else the
/// checkout's directory name), the checkout, the main checkout's queue, or `notify`'s.
pub(crate) fn report_for(
    project: &Project,
    name: Option<&str>,
    notify: Option<&SessionId>,
) -> Result<Report> {
    let worktree = paths::canonical(&project.dir);
    let name = match name {
        Some(name) => parse_name(name)?,
        None => default_name(&worktree),
    };
    Ok(Report {
        id: Token::generate()?.as_str().to_string(),
        name,
        commander: main_checkout(&worktree),
        worktree,
        notify: notify.map(|s| s.as_str().to_string()),
    })
}

fn default_name(worktree: &Path) -> String {
    let name = protected::plain_name(worktree, 64);
    if name.is_empty() || name == "." || name == ".." {
        "loop".to_string()
    } else {
        name
    }
}

/// A project's queue: in the protected state of its main checkout.
pub(crate) fn project_queue(commander: &Path) -> Option<PathBuf> {
    Some(protected::dir_in(&protected::home()?, commander).join("wakes"))
}

/// A session's own queue (`--notify SESSION`), wherever it works.
pub(crate) fn session_queue(session: &str) -> Option<PathBuf> {
    Some(protected::home()?.join("wakes/sessions").join(session))
}

impl Report {
    /// The queue this loop's wake goes to.
    pub(crate) fn queue(&self) -> Option<PathBuf> {
        match &self.notify {
            Some(session) => session_queue(session),
            None => project_queue(&self.commander),
        }
    }

    /// The worktree as its commander would type it: `.`, `./sub`, `../wt-parser`, or absolute.
    pub(crate) fn worktree_shown(&self) -> String {
        if self.worktree == self.commander {
            return ".".into();
        }
        if let Ok(below) = self.worktree.strip_prefix(&self.commander) {
            return format!("./{}", below.display());
        }
        if let (Some(a), Some(b)) = (self.worktree.parent(), self.commander.parent())
            && a == b
            && let Some(name) = self.worktree.file_name()
        {
            return format!("../{}", name.to_string_lossy());
        }
        self.worktree.display().to_string()
    }
}

/// One loop that reports to a queue (`loops/<id>.json`): for `loop list`, and for a waiter to
/// know whether anything may still come.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Entry {
    pub schema: String,
    pub report: Report,
    /// The session that runs it, once one claimed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    pub status: LoopStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_reason: Option<EndReason>,
    pub iteration: u32,
    pub max_iterations: u32,
    pub started_at: String,
    pub updated_at: String,
    /// What the human's hold saw at the loop's last declared Stop (SPEC §11), for the person.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<String>,
}

impl Entry {
    fn of(state: &LoopState, report: &Report) -> Entry {
        Entry {
            schema: ENTRY_SCHEMA.to_string(),
            report: report.clone(),
            session_id: (state.session_id != crate::state::loop_state::PENDING_SESSION)
                .then(|| state.session_id.clone()),
            status: state.status,
            end_reason: state.end_reason,
            iteration: state.iteration,
            max_iterations: state.max_iterations,
            started_at: state.started_at.clone(),
            updated_at: time::now_rfc3339(),
            held: state.held.as_ref().and_then(HeldTold::phrase),
        }
    }
}

/// What settled, as the queue keeps it until it is delivered (`schemas/wake.schema.json`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Wake {
    pub schema: String,
    pub kind: Kind,
    /// The loop's id, or the CI check's name.
    pub id: String,
    /// The loop's name (a loop's wake).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub worktree: PathBuf,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// A loop's status now (`passed`, `cut`…), or CI's result (`passed`, `failed`…).
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_reason: Option<EndReason>,
    /// The subject CI vouched for (a CI wake).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// What the commander's model is told: one line, defanged.
    pub line: String,
    pub at: String,
    /// A reader claimed it and died before it said it was told: it may have reached the
    /// commander or not, and is told once more as such (issue 44: never silently twice).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unconfirmed: bool,
}

impl Wake {
    /// The wake of `state`'s loop as it is now, settled this moment.
    fn of_loop(state: &LoopState, report: &Report) -> Wake {
        Wake {
            schema: SCHEMA.to_string(),
            kind: Kind::Loop,
            id: report.id.clone(),
            name: Some(report.name.clone()),
            worktree: report.worktree.clone(),
            session_id: Some(state.session_id.clone()),
            status: state.status.as_str().to_string(),
            end_reason: state.end_reason,
            subject: None,
            line: defang::field_max(&loop_line(state, report), 600),
            at: time::now_rfc3339(),
            unconfirmed: false,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Kind {
    Loop,
    Ci,
}

/// Records that `state`'s loop (just started, or just claimed by a session) reports to its
/// queue. Nothing for a loop without a report.
pub(crate) fn register(state: &LoopState) -> Result<()> {
    let Some(report) = &state.report else {
        return Ok(());
    };
    for queue in entry_queues(report) {
        write_entry(&queue, &Entry::of(state, report))?;
    }
    Ok(())
}

/// A loop that never ran (pending, and no session claimed it): its entries go.
pub(crate) fn forget(state: &LoopState) {
    if let Some(report) = &state.report {
        for queue in entry_queues(report) {
            let (started, ended) = entry_paths(&queue, &report.id);
            let _ = std::fs::remove_file(started);
            let _ = std::fs::remove_file(ended);
        }
    }
}

/// Where a loop's entry is in `queue`: `loops/<id>.json` as it started (or was claimed), and
/// `loops/<id>.end.json` once it ended, a file of its own so that the Stop that ends a loop
/// only creates a small file and replaces none.
fn entry_paths(queue: &Path, id: &str) -> (PathBuf, PathBuf) {
    let dir = queue.join("loops");
    (
        dir.join(format!("{id}.json")),
        dir.join(format!("{id}.end.json")),
    )
}

/// The queues that list a loop: its commander project's (for `loop list`), and the session's
/// it notifies.
fn entry_queues(report: &Report) -> Vec<PathBuf> {
    let mut queues: Vec<PathBuf> = project_queue(&report.commander).into_iter().collect();
    if let Some(session) = report.notify.as_deref().and_then(session_queue) {
        queues.push(session);
    }
    queues
}

fn write_entry(queue: &Path, entry: &Entry) -> Result<()> {
    let (path, ended) = entry_paths(queue, &entry.report.id);
    let dir = path.parent().unwrap_or(queue);
    files::make_private_dir(dir).map_err(|e| Error::io("create", dir, &e))?;
    let json = serde_json::to_vec(entry).expect("an entry serializes");
    if !entry.status.is_live() {
        // `loop list`'s line: a crash may lose it or leave it torn, and a torn one is skipped
        // (the wake is what must not be lost). Written once; a second end keeps the first.
        use std::io::Write;
        return match files::create_new(&ended, 0o600) {
            Ok(mut file) => file
                .write_all(&json)
                .map_err(|e| Error::io("write", &ended, &e)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
            Err(e) => Err(Error::io("write", &ended, &e)),
        };
    }
    atomic::write_atomic_as(&path, &json, 0o600, Durability::Skip)
        .map_err(|e| Error::io("write", &path, &e))
}

/// The loop `state` has settled (any end status): its wake goes into its commander's queue,
/// durable before this returns, and its entry says how it ended. Nothing for a loop started
/// without a report (before wakes existed).
pub(crate) fn settled(state: &LoopState) -> Result<()> {
    let Some(report) = &state.report else {
        return Ok(());
    };
    let Some(queue) = report.queue() else {
        return Err(Error::input(
            "no state home ($VIGIL_STATE_HOME and $HOME are not absolute paths), so the loop's wake cannot be written",
        ));
    };
    // At most once: a wake of this loop's end already queued, claimed or told (a drain after a
    // kill between the wake and the save that cleared its debt) is not written again.
    if !already_woken(&queue, &report.id) {
        enqueue(&queue, &Wake::of_loop(state, report))?;
    }
    // `loop list`'s line: the wake is queued already, whatever becomes of it.
    for queue in entry_queues(report) {
        let _ = write_entry(&queue, &Entry::of(state, report));
    }
    Ok(())
}

/// The wake of a loop whose end was given a truer reason after it settled (a StopFailure that
/// comes after the SessionEnd that cut it) says that reason, if no one has taken it yet: it is
/// taken out of the queue as a reader takes it (a rename, so a reader coming meanwhile finds it
/// gone or takes it whole), rewritten, and put back. A wake already told stays told, once.
/// `loop list`'s entry of the end is rewritten too.
pub(crate) fn amend(state: &LoopState) {
    let Some(report) = &state.report else {
        return;
    };
    let Some(queue) = report.queue() else {
        return;
    };
    for (path, wake) in queued(&queue) {
        if wake.kind != Kind::Loop || wake.id != report.id {
            continue;
        }
        let Some(claimed) = claim(&path, wake) else {
            continue;
        };
        let amended = Wake {
            at: claimed.wake.at.clone(),
            ..Wake::of_loop(state, report)
        };
        let json = serde_json::to_vec(&amended).expect("a wake serializes");
        let _ = atomic::write_atomic(&claimed.at, &json, 0o600);
        claimed.put_back();
    }
    // The end's entry is written once as the loop ends; here it is replaced.
    let json = serde_json::to_vec(&Entry::of(state, report)).expect("an entry serializes");
    for queue in entry_queues(report) {
        let (_, ended) = entry_paths(&queue, &report.id);
        if ended.is_file() {
            // It only informs `loop list`, as when first written: not waited to the disk.
            let _ = atomic::write_atomic_as(&ended, &json, 0o600, Durability::Skip);
        }
    }
}

/// [`settled`], for a caller that must go on whatever happens to the wake: a wake that cannot
/// be written is said in one line on stderr, and returned, for the caller to tell where a
/// person sees it (issue 44).
pub(crate) fn settle(state: &LoopState) -> Option<String> {
    let e = settled(state).err()?;
    let binary = std::env::args()
        .next()
        .and_then(|a| {
            Path::new(&a)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "vigil".into());
    let line = format!("{e}; the loop's commander may not be woken");
    // Not eprintln!, which panics when stderr is gone (a hook that outlives its engine).
    crate::cli::output::diagnostic(&binary, &line);
    Some(line)
}

/// The wake `record`'s ended loop owes (`wake_owed`), written, and the debt cleared in the
/// record: right after the save that ended the loop, and at the next hook of the session where
/// a kill came between the two. The line of a wake that could not be written, for the caller
/// to tell the person; it stays owed.
pub(crate) fn settle_owed(record: &mut crate::state::session::Session) -> Option<String> {
    let state = record.record.ralph.as_ref()?;
    if !state.wake_owed || state.status.is_live() {
        return None;
    }
    if let Some(line) = settle(state) {
        return Some(line);
    }
    if let Some(state) = record.record.ralph.as_mut() {
        state.wake_owed = false;
    }
    // A save that fails leaves it owed: the next hook finds the wake queued, and writes none.
    let _ = record.save();
    None
}

/// The name a delivered wake leaves in its queue's `told/`, so it is never told again.
pub(crate) fn told_mark(queue: &Path, id: &str) -> PathBuf {
    queue.join("told").join(file_safe(id))
}

/// Whether `queue` holds a wake of the loop `id` (waiting or claimed), or told one.
fn already_woken(queue: &Path, id: &str) -> bool {
    let suffix = format!("-{}.json", file_safe(id));
    let holds = |dir: &Path| {
        std::fs::read_dir(dir).is_ok_and(|entries| {
            entries
                .flatten()
                .any(|e| e.file_name().to_string_lossy().ends_with(&suffix))
        })
    };
    holds(queue)
        || holds(&queue.join("claimed"))
        || std::fs::symlink_metadata(told_mark(queue, id)).is_ok()
}

/// `loop parser-fix in ../wt-parser: running -> passed after 7 passes, checks green`.
pub(crate) fn loop_line(state: &LoopState, report: &Report) -> String {
    let k = state.iteration;
    let passes = if k == 1 {
        "1 pass".to_string()
    } else {
        format!("{k} passes")
    };
    let mut outcome = match (state.status, state.end_reason) {
        (LoopStatus::Passed, _) if state.changed_after => format!(
            "passed after {passes}, but the tree changed after its checks passed, NOT verified"
        ),
        (LoopStatus::Passed, _) if state.checks.as_ref().is_some_and(|c| !c.is_empty()) => {
            format!(
                "passed after {passes}, checks green ({})",
                state.checks.as_ref().expect("checked").join(", ")
            )
        }
        (LoopStatus::Passed, _) => {
            format!("passed after {passes} on the declaration alone: no check verified the work")
        }
        (LoopStatus::Blocked, _) => {
            format!("blocked after {passes}: the agent asks a human to decide (see its last reply)")
        }
        (LoopStatus::Cancelled, _) => format!("cancelled by a human at pass {k}"),
        (status, reason) => format!(
            "{} after {passes} ({}), NOT verified",
            status.as_str(),
            reason.map_or("", EndReason::told)
        ),
    };
    if let Some(held) = state.held.as_ref().and_then(HeldTold::phrase) {
        outcome.push_str(&format!("; {held}"));
    }
    format!(
        "loop {} in {}: running -> {outcome}",
        report.name,
        report.worktree_shown()
    )
}

/// CI's verdict for the content checked out in `worktree`, brought by a sync: one wake in the
/// project's queue, replacing an earlier one for the same check not delivered yet.
pub(crate) fn ci_verdict(worktree: &Path, check: &str, result: &str, subject: &str) -> Result<()> {
    let worktree = paths::canonical(worktree);
    let commander = main_checkout(&worktree);
    let Some(queue) = project_queue(&commander) else {
        return Ok(());
    };
    for (path, old) in queued(&queue) {
        if old.kind == Kind::Ci && old.id == check && old.worktree == worktree {
            let _ = std::fs::remove_file(path);
        }
    }
    let verb = if result == "passed" {
        "vouched"
    } else {
        "reported"
    };
    let line = format!("CI {verb}: {check} {result} for {subject}");
    let wake = Wake {
        schema: SCHEMA.to_string(),
        kind: Kind::Ci,
        id: check.to_string(),
        name: None,
        worktree,
        session_id: None,
        status: result.to_string(),
        end_reason: None,
        subject: Some(subject.to_string()),
        line: defang::field_max(&line, 600),
        at: time::now_rfc3339(),
        unconfirmed: false,
    };
    enqueue(&queue, &wake)
}

fn enqueue(queue: &Path, wake: &Wake) -> Result<()> {
    files::make_private_dir(queue).map_err(|e| Error::io("create", queue, &e))?;
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let path = queue.join(format!("{nanos:020}-{}.json", file_safe(&wake.id)));
    let json = serde_json::to_vec(wake).expect("a wake serializes");
    atomic::write_atomic(&path, &json, 0o600).map_err(|e| Error::io("write the wake", &path, &e))
}

fn file_safe(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect()
}

/// The wakes waiting in `queue`, oldest first (at most `MAX_WAKES`); a file that is not a wake
/// vigil wrote is left where it is.
pub(crate) fn queued(queue: &Path) -> Vec<(PathBuf, Wake)> {
    let Ok(entries) = std::fs::read_dir(queue) else {
        return Vec::new();
    };
    let mut names: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    names.sort();
    names
        .into_iter()
        .take(MAX_WAKES)
        .filter_map(|path| {
            read_json::<Wake>(&path)
                .filter(|w| w.schema == SCHEMA)
                .map(|w| (path, w))
        })
        .collect()
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Option<T> {
    let file = files::open_state(path).ok()?;
    let bytes = files::read_capped(file, MAX_FILE, "a wake", path).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// The loops that report to `queue`, oldest first; entries of loops ended long ago are
/// removed as they are read.
pub(crate) fn entries(queue: &Path) -> Vec<Entry> {
    let Ok(dir) = std::fs::read_dir(queue.join("loops")) else {
        return Vec::new();
    };
    let now = time::now_secs();
    let mut found: Vec<Entry> = Vec::new();
    for entry in dir.flatten().take(MAX_ENTRIES * 2) {
        let path = entry.path();
        let name = entry.file_name();
        let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".json")) else {
            continue;
        };
        if id.ends_with(".end") {
            continue;
        }
        let (_, ended) = entry_paths(queue, id);
        // How it ended, once it did; else how it started.
        let read = read_json::<Entry>(&ended)
            .or_else(|| read_json::<Entry>(&path))
            .filter(|e| e.schema == ENTRY_SCHEMA && e.report.id == id);
        let Some(read) = read else {
            continue;
        };
        let age = now - time::parse_rfc3339(&read.updated_at).unwrap_or(0.0);
        // Ended long ago, or pending for a day with no session to claim it (it lapsed).
        let lapsed = read.session_id.is_none() && age > 24.0 * 3600.0;
        if (!read.status.is_live() && age > ENTRY_KEPT.as_secs_f64()) || lapsed {
            let _ = std::fs::remove_file(&path);
            let _ = std::fs::remove_file(&ended);
            continue;
        }
        found.push(read);
    }
    // Oldest first; loops started in the same instant by name, so the order is the same each time.
    found.sort_by(|a, b| {
        (a.started_at.as_str(), a.report.name.as_str())
            .cmp(&(b.started_at.as_str(), b.report.name.as_str()))
    });
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worktree_is_shown_as_its_commander_types_it() {
        let report = |worktree: &str| Report {
            id: "0".repeat(32),
            name: "x".into(),
            worktree: worktree.into(),
            commander: "/src/app".into(),
            notify: None,
        };
        assert_eq!(report("/src/app").worktree_shown(), ".");
        assert_eq!(report("/src/app/sub").worktree_shown(), "./sub");
        assert_eq!(report("/src/wt-parser").worktree_shown(), "../wt-parser");
        assert_eq!(report("/elsewhere/wt").worktree_shown(), "/elsewhere/wt");
    }
}
