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

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::state::loop_state::{EndReason, HeldTold, LoopState, LoopStatus, Report};
use crate::state::project::{Project, SessionId};
use crate::state::protected;
use crate::state::session;
use crate::sys::atomic::{self, Durability};
use crate::sys::files;
use crate::sys::git;
use crate::sys::paths;
use crate::sys::process;
use crate::sys::time;
use crate::verdict::defang;
use crate::verdict::token::Token;

pub const SCHEMA: &str = "vigil.wake/v1";
const ENTRY_SCHEMA: &str = "vigil.wake-loop/v1";
const WAITER_SCHEMA: &str = "vigil.waiter/v1";
/// How long a waiter waits (the seed's 55 minutes), inside the hour its handler gets.
pub const GIVE_UP_SECS: u64 = 3300;
/// A claim older than this is its holder's, who died or hangs: it is put back.
pub const CLAIM_EXPIRES: Duration = Duration::from_secs(120);
/// The most wakes one delivery reads, and one queue keeps entries of loops for.
const MAX_WAKES: usize = 200;
const MAX_ENTRIES: usize = 500;
/// An ended loop's entry is kept this long for `loop list`.
const ENTRY_KEPT: Duration = Duration::from_secs(14 * 24 * 3600);
const MAX_FILE: u64 = 64 * 1024;

/// A loop's name: what `--name` takes.
pub fn parse_name(raw: &str) -> Result<String> {
    if crate::state::project::is_file_name(raw, 64) {
        Ok(raw.to_string())
    } else {
        Err(Error::usage(format!(
            "--name {raw:?} is not 1 to 64 letters, digits, `.`, `_` or `-`"
        )))
    }
}

/// The main checkout of the repository `dir` is a linked worktree of (`sys::git`).
pub fn main_checkout(dir: &Path) -> PathBuf {
    git::main_checkout(dir)
}

/// Where a loop started now in `project` reports: a new id, its name (`--name`, else the
/// checkout's directory name), the checkout, the main checkout's queue, or `notify`'s.
pub fn report_for(
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
pub fn project_queue(commander: &Path) -> Option<PathBuf> {
    Some(protected::dir_in(&protected::home()?, commander).join("wakes"))
}

/// A session's own queue (`--notify SESSION`), wherever it works.
pub fn session_queue(session: &str) -> Option<PathBuf> {
    Some(protected::home()?.join("wakes/sessions").join(session))
}

fn waiters_dir() -> Option<PathBuf> {
    Some(protected::home()?.join("wakes/waiters"))
}

impl Report {
    /// The queue this loop's wake goes to.
    pub fn queue(&self) -> Option<PathBuf> {
        match &self.notify {
            Some(session) => session_queue(session),
            None => project_queue(&self.commander),
        }
    }

    /// The worktree as its commander would type it: `.`, `./sub`, `../wt-parser`, or absolute.
    pub fn worktree_shown(&self) -> String {
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
pub struct Entry {
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
pub struct Wake {
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
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Loop,
    Ci,
}

/// Records that `state`'s loop (just started, or just claimed by a session) reports to its
/// queue. Nothing for a loop without a report.
pub fn register(state: &LoopState) -> Result<()> {
    let Some(report) = &state.report else {
        return Ok(());
    };
    for queue in entry_queues(report) {
        write_entry(&queue, &Entry::of(state, report))?;
    }
    Ok(())
}

/// A loop that never ran (pending, and no session claimed it): its entries go.
pub fn forget(state: &LoopState) {
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
pub fn settled(state: &LoopState) -> Result<()> {
    let Some(report) = &state.report else {
        return Ok(());
    };
    let Some(queue) = report.queue() else {
        return Err(Error::input(
            "no state home ($VIGIL_STATE_HOME and $HOME are not absolute paths), so the loop's wake cannot be written",
        ));
    };
    enqueue(&queue, &Wake::of_loop(state, report))?;
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
pub fn amend(state: &LoopState) {
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
/// be written is said in one line on stderr.
pub fn settle(state: &LoopState) {
    if let Err(e) = settled(state) {
        let binary = std::env::args()
            .next()
            .and_then(|a| {
                Path::new(&a)
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
            })
            .unwrap_or_else(|| "vigil".into());
        // Not eprintln!, which panics when stderr is gone (a hook that outlives its engine).
        crate::cli::output::diagnostic(
            &binary,
            &format!("{e}; the loop's commander will not be woken"),
        );
    }
}

/// `loop parser-fix in ../wt-parser: running -> passed after 7 passes, checks green`.
pub fn loop_line(state: &LoopState, report: &Report) -> String {
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
pub fn ci_verdict(worktree: &Path, check: &str, result: &str, subject: &str) -> Result<()> {
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
pub fn queued(queue: &Path) -> Vec<(PathBuf, Wake)> {
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
pub fn entries(queue: &Path) -> Vec<Entry> {
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

/// A wake taken out of its queue by one reader: written out, then `done`; else put back.
pub struct Claimed {
    pub wake: Wake,
    from: PathBuf,
    at: PathBuf,
}

impl Claimed {
    /// Delivered: gone for good.
    pub fn done(self) {
        let _ = std::fs::remove_file(&self.at);
    }

    /// Not delivered: back in the queue for the next reader.
    pub fn put_back(self) {
        let _ = std::fs::rename(&self.at, &self.from);
    }
}

/// Takes `path` for this reader (a rename: only one reader gets it). `None` when another was
/// first.
fn claim(path: &Path, wake: Wake) -> Option<Claimed> {
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

/// Puts back every claim in `queue` older than [`CLAIM_EXPIRES`]: its holder died.
pub fn recover(queue: &Path) {
    recover_older(queue, CLAIM_EXPIRES);
}

fn recover_older(queue: &Path, expires: Duration) {
    let Ok(dir) = std::fs::read_dir(queue.join("claimed")) else {
        return;
    };
    for entry in dir.flatten() {
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age >= expires);
        if old {
            let _ = std::fs::rename(entry.path(), queue.join(entry.file_name()));
        }
    }
}

/// Whether `wake` is still news: a loop's, when the loop's session still holds that loop with
/// that status (not restarted or changed since); a CI verdict's always (a newer one replaced it
/// when it came).
pub fn is_news(wake: &Wake) -> bool {
    if wake.kind == Kind::Ci {
        return true;
    }
    let Some(session) = wake
        .session_id
        .as_deref()
        .and_then(|s| SessionId::parse(s).ok())
    else {
        return false;
    };
    let project = Project::at(&wake.worktree).for_reading();
    match session::peek(&project, &session) {
        Ok(Some(record)) => record.ralph.is_some_and(|ralph| {
            ralph.report.is_some_and(|r| r.id == wake.id) && ralph.status.as_str() == wake.status
        }),
        _ => false,
    }
}

/// The most one delivery tells, in characters: the wakes beyond it stay queued for the next.
pub const TOLD_MAX: usize = 6000;

/// Takes the wakes of `queues` that are still news (a stale one is dropped), oldest first, as
/// many as [`told`] can say within [`TOLD_MAX`]: what a reader then writes out, and marks
/// `done` or puts back.
pub fn take(queues: &[PathBuf]) -> Vec<Claimed> {
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
            if is_news(&claimed.wake) {
                size += cost;
                taken.push(claimed);
            } else {
                claimed.done();
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
pub fn told(taken: &[Claimed]) -> String {
    let lines: Vec<String> = taken
        .iter()
        .map(|c| format!("- {}", shown(&c.wake.line)))
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
pub fn anything_to_wait_for(queues: &[PathBuf]) -> bool {
    queues.iter().any(|queue| {
        !queued(queue).is_empty()
            || std::fs::read_dir(queue.join("claimed")).is_ok_and(|mut d| d.next().is_some())
            || entries(queue).iter().any(|e| e.status.is_live())
    })
}

/// Which queues a session reads: its own, and the project's when `with_project`.
pub fn queues_of(session: &SessionId, project: Option<&Path>) -> Vec<PathBuf> {
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
pub fn for_context(project: &Project, session: &SessionId) -> Vec<Claimed> {
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
pub fn is_worker(project: &Project, session: &SessionId) -> bool {
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
pub fn headless() -> bool {
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
pub struct Waiter {
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
pub const WAITER_WORD: &str = "wait";

impl Waiter {
    /// Whether the process this names is alive and is this waiter: registered within the time a
    /// waiter waits, the same process (its start time), and a `stop-gate wait` by its command
    /// line.
    pub fn is_live(&self) -> bool {
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
pub fn become_waiter(session: &SessionId, queues: &[PathBuf]) -> Result<PathBuf> {
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
pub fn still_waiter(path: &Path) -> bool {
    read_json::<Waiter>(path).is_some_and(|w| w.pid == std::process::id())
}

/// Removes this process's registration, if it is still its own.
pub fn stop_waiting(path: &Path) {
    if still_waiter(path) {
        let _ = std::fs::remove_file(path);
    }
}

/// The live waiters that read `queue`.
pub fn live_waiters(queue: &Path) -> Vec<Waiter> {
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
