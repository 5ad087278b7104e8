//! The Ralph loop (SPEC §4): one loop per session, kept in the session's record in the
//! protected state (`session`), where the agent cannot start, change or end it. Loops are
//! started by a human: from a terminal (`stop-gate loop start`), or with the slash command that
//! vigil's UserPromptSubmit hook reads from the human's own prompt.
//!
//! Here a loop is begun (`begin`, the one door that checks every flag), left pending for a
//! session still to start, and claimed; how it ends outside a Stop is `end`.

mod end;

pub(crate) use end::{
    Cancelled, cancel, changed_after, end_session, engine_cut_of, note_engine_cut, record_failure,
    told_end, told_passed, witness, witness_unrecorded,
};

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::cli::defs;
use crate::cli::defs::Scope;
use crate::cli::input::Source;
use crate::cli::loop_args::StartRequest;
use crate::error::{Error, Result};
use crate::state::loop_state::{Limits, LoopState, MAX_PROMPT_CHARS, StartedBy};
use crate::state::project::{Project, SessionId};
use crate::state::protected;
use crate::state::session;
use crate::state::session::Session;
use crate::state::wakes;
use crate::sys::atomic::write_atomic;
use crate::sys::files;
use crate::sys::lock::FileLock;
use crate::sys::time;
use crate::verdict::promise::Promise;
use crate::verdict::token::Token;

pub(crate) const DEFAULT_CLAIM_WITHIN: Duration = Duration::from_secs(600);
/// How long `loop run`'s loop may wait for its session by default: a day.
pub(crate) const RUN_CLAIM_WITHIN: Duration = Duration::from_secs(24 * 3600);
/// A pending loop file larger than this is not vigil's.
const MAX_STATE: u64 = 1024 * 1024;

/// The file name stem of a pending loop, so no session may be called this.
pub(crate) const PENDING: &str = crate::state::loop_state::PENDING_SESSION;

/// The variable `loop run` gives its command: the id of the loop that the session the command
/// starts claims (and no other session does).
pub(crate) const RUN_ENV: &str = "VIGIL_LOOP_RUN";

/// A loop waiting for its session: the one `--next-session` leaves for the next session that
/// starts in the project, or the one `loop run` leaves for the session its command starts,
/// named by an id only that command's environment holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Pending {
    Next,
    Run(String),
}

impl Pending {
    /// A new `loop run` id: 128 random bits in hex, as a per-task token is made.
    pub(crate) fn new_run() -> Result<Pending> {
        Ok(Pending::Run(Token::generate()?.as_str().to_string()))
    }

    /// `loop run`'s id, for a run's pending loop.
    pub(crate) fn run_id(&self) -> Option<&str> {
        match self {
            Pending::Run(id) => Some(id),
            Pending::Next => None,
        }
    }

    /// The pending loop a session starting now may claim: `loop run`'s when its id is in this
    /// process's environment (a hook inherits it from the engine `loop run` started), else
    /// `--next-session`'s.
    pub(crate) fn for_this_session() -> Pending {
        match std::env::var(RUN_ENV) {
            Ok(id) if is_run_id(&id) => Pending::Run(id),
            _ => Pending::Next,
        }
    }

    pub(crate) fn path(&self, project: &Project) -> PathBuf {
        let dir = project.protected().dir.join("loops");
        match self {
            Pending::Next => dir.join("pending.json"),
            Pending::Run(id) => dir.join(format!("run-{id}.json")),
        }
    }

    /// Where the session that claimed a `loop run` loop is written for `loop run` to read.
    fn claim_path(&self, project: &Project) -> Option<PathBuf> {
        self.run_id()
            .map(|_| self.path(project).with_extension("claimed"))
    }
}

/// 32 lowercase hex digits.
fn is_run_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Who claimed a `loop run` loop (`<protected>/loops/run-<id>.claimed`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RunClaim {
    pub session_id: String,
    /// The session's transcript, where the engine's cut of a turn is read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcript_path: Option<PathBuf>,
}

/// The session that claimed the `loop run` loop `pending`, once one did.
pub(crate) fn run_claim(project: &Project, pending: &Pending) -> Result<Option<RunClaim>> {
    let Some(path) = pending.claim_path(project) else {
        return Ok(None);
    };
    let file = match files::open_state(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("read the loop's claim", &path, &e)),
    };
    let bytes = files::read_capped(file, MAX_STATE, "the loop's claim", &path)?;
    let claim: RunClaim = serde_json::from_slice(&bytes)
        .map_err(|e| Error::input(format!("the claim {} is not valid: {e}", path.display())))?;
    SessionId::parse(&claim.session_id)?;
    Ok(Some(claim))
}

/// Removes what `loop run` left in the protected state: the loop if no session claimed it,
/// and the claim.
pub(crate) fn forget_run(project: &Project, pending: &Pending) {
    // A loop no session claimed never ran: nothing reports to its commander.
    if let Ok(Some(state)) = load_pending(&pending.path(project)) {
        wakes::forget(&state);
    }
    let _ = std::fs::remove_file(pending.path(project));
    if let Some(claim) = pending.claim_path(project) {
        let _ = std::fs::remove_file(claim);
    }
}

/// The session's loop as its record holds it now; `Ok(None)` when it never had one. A damaged
/// or vanished record is an error here: only a Stop, which tells the human, begins a new one.
pub(crate) fn load(project: &Project, session: &SessionId) -> Result<Option<LoopState>> {
    match session::peek(project, session) {
        Ok(record) => Ok(record.and_then(|r| r.ralph)),
        Err(lost) => Err(Error::input(format!("{lost}; the loop is NOT verified"))),
    }
}

/// Reads a pending loop; `Ok(None)` when there is none.
fn load_pending(path: &Path) -> Result<Option<LoopState>> {
    let file = match files::open_state(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("read the pending loop", path, &e)),
    };
    let bytes = files::read_capped(file, MAX_STATE, "the pending loop", path)?;
    let state: LoopState = serde_json::from_slice(&bytes).map_err(|e| {
        Error::input(format!(
            "the pending loop {} is not valid: {e}",
            path.display()
        ))
    })?;
    state
        .check()
        .map_err(|e| Error::input(format!("the pending loop {}: {e}", path.display())))?;
    Ok(Some(state))
}

/// Starts a loop for a session, refusing when one is already running there. With the state,
/// what the human must hear of the record it replaces, if that was damaged or gone.
pub(crate) fn start(
    project: &Project,
    session: &SessionId,
    mut state: LoopState,
) -> Result<(LoopState, Option<String>)> {
    let mut record = Session::open(project, session)?;
    let lost = record.take_lost();
    if let Some(existing) = &record.record.ralph
        && existing.status.is_live()
    {
        return Err(Error::usage(format!(
            "a loop is already running in session {session} ({}); cancel it first with `stop-gate loop cancel --session {session}` or /vigil-cancel",
            existing.summary()
        )));
    }
    state.updated_at = time::now_rfc3339();
    record.record.ralph = Some(state.clone());
    record.save()?;
    Ok((state, lost))
}

/// Writes the loop that the next session starting in the project (or the session `loop
/// run`'s command starts) will claim within `within`. A pending loop still waiting is not
/// replaced: like a loop running in a session, it is cancelled first.
pub(crate) fn start_pending(
    project: &Project,
    pending: &Pending,
    mut state: LoopState,
    within: Duration,
) -> Result<LoopState> {
    let path = pending.path(project);
    // Two starts at once: the second sees the first's loop waiting.
    let _lock = FileLock::transient_at(&path.with_extension("lock"), Duration::from_secs(5))?;
    if let Some(waiting) = load_pending(&path)?
        && !lapsed(&waiting)
    {
        return Err(Error::usage(format!(
            "a loop is already pending for the next session to start in this project ({}, claimable until {}); cancel it first with `stop-gate loop cancel`",
            waiting.summary(),
            waiting.claim_before.as_deref().unwrap_or("?")
        )));
    }
    let deadline = std::time::SystemTime::now() + within;
    state.claim_before = Some(time::format_rfc3339(deadline));
    state.updated_at = time::now_rfc3339();
    let dir = path.parent().unwrap_or(Path::new("."));
    fs_err::create_dir_all(dir).map_err(Error::fs)?;
    let mut json = serde_json::to_vec_pretty(&state).expect("loop state serializes");
    json.push(b'\n');
    write_atomic(&path, &json, 0o600)
        .map_err(|e| Error::io("write the pending loop", &path, &e))?;
    Ok(state)
}

/// Whether a pending loop is past its `claim_before`, so no session may claim it.
fn lapsed(state: &LoopState) -> bool {
    let deadline = state
        .claim_before
        .as_deref()
        .and_then(time::parse_rfc3339)
        .unwrap_or(0.0);
    time::now_secs() > deadline
}

/// The pending loop `which`, if one is there, and whether it lapsed.
pub(crate) fn waiting(project: &Project, which: &Pending) -> Result<Option<(LoopState, bool)>> {
    Ok(load_pending(&which.path(project))?.map(|state| {
        let lapsed = lapsed(&state);
        (state, lapsed)
    }))
}

/// Removes the pending loop of `--next-session`; whether there was one.
pub(crate) fn cancel_pending(project: &Project) -> Result<Option<LoopState>> {
    let path = Pending::Next.path(project);
    let Some(state) = load_pending(&path)? else {
        return Ok(None);
    };
    match std::fs::remove_file(&path) {
        Ok(()) => {
            wakes::forget(&state);
            Ok(Some(state))
        }
        // Claimed meanwhile: it is a session's loop now.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io("remove the pending loop", &path, &e)),
    }
}

/// The project's most recently started loop, in any session whose record is in its
/// protected state: for `loop status` and `loop cancel` given no session.
pub(crate) fn latest(project: &Project) -> Option<(SessionId, LoopState)> {
    let dir = project.protected().dir.join("sessions");
    let mut latest: Option<(SessionId, LoopState)> = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten().take(100_000) {
        let name = entry.file_name();
        let Some(stem) = name.to_str().and_then(|n| n.strip_suffix(".rec")) else {
            continue;
        };
        let Ok(session) = SessionId::parse(stem) else {
            continue;
        };
        let Ok(Some(state)) = load(project, &session) else {
            continue;
        };
        let newer = latest.as_ref().is_none_or(|(_, best)| {
            state.started_secs() > best.started_secs()
                || (state.started_secs() == best.started_secs()
                    && state.updated_at > best.updated_at)
        });
        if newer {
            latest = Some((session, state));
        }
    }
    latest
}

/// Claims a pending loop for `session` by an atomic rename, so exactly one session owns it.
/// A pending loop past its `claim_before` is never claimed. `loop run`'s claim also says which
/// session took it, and where its transcript is. `Ok(None)` when there is nothing to claim.
pub(crate) fn claim_pending(
    project: &Project,
    session: &SessionId,
    which: &Pending,
    transcript: Option<&Path>,
) -> Result<Option<LoopState>> {
    let pending = which.path(project);
    let Some(state) = load_pending(&pending)? else {
        return Ok(None);
    };
    if lapsed(&state) {
        return Ok(None);
    }
    let mut record = Session::open(project, session)?;
    if record
        .record
        .ralph
        .as_ref()
        .is_some_and(|existing| existing.status.is_live())
    {
        return Ok(None);
    }
    // Whoever renames first owns it; the others find nothing to rename.
    let claimed = pending.with_file_name(format!(".{session}.claimed"));
    match std::fs::rename(&pending, &claimed) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("claim", &pending, &e)),
    }
    let taken = load_pending(&claimed)
        .and_then(|state| state.ok_or_else(|| Error::input("the claimed loop vanished")));
    let result = taken.and_then(|mut state| {
        state.session_id = session.to_string();
        state.claim_before = None;
        state.run_id = which.run_id().map(str::to_string);
        state.updated_at = time::now_rfc3339();
        record.record.ralph = Some(state.clone());
        record.save().map(|()| state)
    });
    match result {
        Ok(state) => {
            let _ = std::fs::remove_file(&claimed);
            let _ = wakes::register(&state);
            if let Some(path) = which.claim_path(project) {
                let claim = RunClaim {
                    session_id: session.to_string(),
                    transcript_path: transcript.map(Path::to_path_buf),
                };
                let mut json = serde_json::to_vec(&claim).expect("a claim serializes");
                json.push(b'\n');
                write_atomic(&path, &json, 0o600)
                    .map_err(|e| Error::io("write the loop's claim", &path, &e))?;
            }
            Ok(Some(state))
        }
        Err(e) => {
            // Not ours after all: put it back for the next session to claim.
            let _ = std::fs::rename(&claimed, &pending);
            Err(e)
        }
    }
}

/// The loops left in `<state>/loops/` by a vigil that kept them in the project: they are not
/// taken over (their origin is unknown), only counted, so the human is told once.
pub(crate) fn legacy_loops(project: &Project) -> usize {
    std::fs::read_dir(project.legacy_loops()).map_or(0, |entries| {
        entries
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
            .count()
    })
}

/// A slash command's `--prompt-file`, which the hook reads outside the agent's sandbox from a
/// path the agent can replace: only a plain file inside the project, reached without a symlink
/// (`fs::open_beneath`), and opened without blocking (a FIFO there would hold the prompt up).
fn read_prompt_in_project(project: &Project, file: &Path) -> Result<String> {
    use crate::sys::files::Beneath;
    let shown = file.display();
    let opened = files::open_beneath(&project.dir, file).map_err(|why| match why {
        Beneath::Outside => Error::input(format!(
            "--prompt-file {shown} is outside the project; a slash command reads a prompt file only from inside it"
        )),
        Beneath::Symlink => Error::input(format!(
            "--prompt-file {shown} goes through a symlink; a slash command reads only a plain file in the project"
        )),
        Beneath::NotPlain => Error::input(format!(
            "--prompt-file {shown} is not a regular file (or has other hard links)"
        )),
        Beneath::Io(e) => Error::io("read", &project.dir.join(file), &e),
    })?;
    let path = project.dir.join(file);
    let bytes = files::read_capped(opened, MAX_PROMPT_BYTES, "the prompt file", &path)?;
    files::utf8(bytes, "the prompt file")
}

/// The largest prompt file or argument text `loop start` reads.
pub(crate) const MAX_PROMPT_BYTES: u64 = 1024 * 1024;

/// Whose loop `begin` starts: a session's, or one pending for a session still to start.
pub(crate) enum For {
    Session(SessionId),
    Pending(Pending),
}

/// A loop just started: what to tell, to a terminal or as the prompt hook's context.
pub(crate) struct Started {
    pub state: LoopState,
    /// One paragraph: who, how many passes, how it ends, and the task.
    pub told: String,
}

/// Starts the loop a request asks for, in `session` (or, with none, for the next session to
/// start in the project), checking every flag: the one door for a terminal and for the
/// human's slash command.
pub(crate) fn begin(
    project: &Project,
    request: StartRequest,
    session: For,
    started_by: StartedBy,
) -> Result<Started> {
    let max = request.max_iterations.as_deref().ok_or_else(|| {
        Error::usage(
            "`loop start` needs --max-iterations N (1 to 10000): a loop must never run forever",
        )
    })?;
    let max = defs::flag(Scope::Start, "--max-iterations")?.number(max)? as u32;
    let promise = request.completion_promise.as_deref().ok_or_else(|| {
        Error::usage("`loop start` needs --completion-promise P, the phrase the agent ends with, e.g. --completion-promise DONE")
    })?;
    let promise = Promise::new(promise)?;
    let limits = limits_of(&request)?;
    let told_limits = limits_told(&limits);
    let notify = request
        .notify
        .as_deref()
        .map(|id| {
            SessionId::parse(id).map_err(|_| {
                Error::usage(format!(
                    "--notify {id:?} is not a session id (1 to 128 letters, digits, `.`, `_` or `-`); give the commander's session id, e.g. from /status"
                ))
            })
        })
        .transpose()?;
    let report = wakes::report_for(project, request.name.as_deref(), notify.as_ref())?;
    let prompt = prompt_of(
        project,
        request.prompt_file.as_deref(),
        request.prompt,
        started_by,
    )?;
    let session = match session {
        For::Session(session) => session,
        For::Pending(pending) => {
            // `loop run`'s loop waits for the command it starts, however long that takes to
            // start its session: it is removed when the command ends.
            let within = match (&request.claim_within, &pending) {
                (Some(text), _) => defs::flag(Scope::Start, "--claim-within")?.duration(text)?,
                (None, Pending::Run(_)) => RUN_CLAIM_WITHIN,
                (None, Pending::Next) => DEFAULT_CLAIM_WITHIN,
            };
            let mut state = LoopState::new(PENDING, prompt, &promise, max, started_by);
            state.limits = limits;
            state.report = Some(report);
            let state = start_pending(project, &pending, state, within)?;
            let _ = wakes::register(&state);
            if let Pending::Run(_) = pending {
                let told = format!(
                    "vigil loop pending for the session this command starts: up to {max} passes{told_limits}, ending on {} with every check passing",
                    promise.tagged()
                );
                return Ok(Started { state, told });
            }
            // Named, because a session started above a nested `.git` is another project's.
            let top = protected::state_top(&project.dir);
            let told = format!(
                "vigil loop pending: the next session to start in this project ({}) within {}s claims it; up to {max} passes{told_limits}, ending on {} with every check passing",
                top.display(),
                within.as_secs(),
                promise.tagged()
            );
            return Ok(Started { state, told });
        }
    };
    if request.claim_within.is_some() {
        return Err(Error::usage("--claim-within goes with --next-session"));
    }
    let mut state = LoopState::new(session.as_str(), prompt.clone(), &promise, max, started_by);
    state.limits = limits;
    state.report = Some(report);
    let (state, lost) = start(project, &session, state)?;
    let _ = wakes::register(&state);
    let before = lost.map_or(String::new(), |lost| {
        format!("vigil: {lost}; the loop it held is over, NOT verified.\n")
    });
    let told = format!(
        "{before}vigil loop started in session {session}: up to {max} passes{told_limits}; it ends only when your reply's last line is {} and every check passes. The task:\n\n{prompt}",
        promise.tagged()
    );
    Ok(Started { state, told })
}

/// The limits a request asks for besides `--max-iterations`, each checked by its flag's rule.
fn limits_of(request: &StartRequest) -> Result<Limits> {
    Ok(Limits {
        stall_after: request
            .stall_after
            .as_deref()
            .map(|k| Ok::<_, Error>(defs::flag(Scope::Start, "--stall-after")?.number(k)? as u32))
            .transpose()?,
        max_duration_secs: request
            .max_duration
            .as_deref()
            .map(|d| {
                Ok::<_, Error>(
                    defs::flag(Scope::Start, "--max-duration")?
                        .duration(d)?
                        .as_secs(),
                )
            })
            .transpose()?,
        max_tokens: request
            .max_tokens
            .as_deref()
            .map(|n| defs::flag(Scope::Start, "--max-tokens")?.tokens(n))
            .transpose()?,
    })
}

/// The loop's prompt: the text given, or the file's (read only inside the project for a slash
/// command); never both, never blank, never longer than a loop feeds back.
fn prompt_of(
    project: &Project,
    prompt_file: Option<&Path>,
    prompt: Option<String>,
    started_by: StartedBy,
) -> Result<String> {
    let prompt = match (prompt_file, prompt) {
        (Some(_), Some(_)) => {
            return Err(Error::usage(
                "give the prompt as text or with --prompt-file, not both",
            ));
        }
        (Some(file), None) if started_by == StartedBy::SlashCommand => {
            read_prompt_in_project(project, file)?
        }
        (Some(file), None) => {
            let bytes = Source::File(file.to_path_buf())
                .read_capped(MAX_PROMPT_BYTES, "the prompt file")?;
            files::utf8(bytes, "the prompt file")?
        }
        (None, Some(prompt)) => prompt,
        (None, None) => {
            return Err(Error::usage(
                "`loop start` needs the prompt: as text after the flags, or --prompt-file F",
            ));
        }
    };
    if prompt.trim().is_empty() {
        return Err(Error::usage("the prompt is empty"));
    }
    if prompt.chars().count() > MAX_PROMPT_CHARS {
        return Err(Error::usage(format!(
            "the prompt has more than {MAX_PROMPT_CHARS} characters; it is fed back on every pass, so keep it short and point to files for the rest"
        )));
    }
    Ok(prompt)
}

/// `, at most 2h, at most 500000 tokens, stalled after 5 same messages`: the limits a loop
/// was started with, as told when it starts.
fn limits_told(limits: &Limits) -> String {
    let mut told = String::new();
    if let Some(secs) = limits.max_duration_secs {
        told.push_str(&format!(
            ", at most {}",
            time::format_duration(Duration::from_secs(secs))
        ));
    }
    if let Some(tokens) = limits.max_tokens {
        told.push_str(&format!(", at most {tokens} tokens"));
    }
    match limits.stall_after {
        Some(0) => told.push_str(", never ended as stalled"),
        Some(n) => told.push_str(&format!(
            ", ended as stalled after {n} passes with the same message"
        )),
        None => {}
    }
    told
}
