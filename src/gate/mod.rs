//! `stop-gate`'s decision (SPEC §4): the loop, then the check command, then the markers; the
//! first that denies blocks the stop, within a budget so that it never blocks forever.

pub mod budget;
pub mod command;
mod config;
pub mod contract;
pub mod held_check;
pub mod project_config;
pub mod slash;

pub use config::{DEFAULT_DEADLINE, Feedback, GateConfig, RESERVE, RequiredMarker};

use crate::cli::flags;
use crate::cli::hook::BackgroundTask;
use crate::cli::hook::TaskKind;
use crate::cli::hook::{HookEvent, HookInput, Specific, Wire};
use crate::cli::output;
use crate::error::Error;
use crate::error::Result;
use crate::evidence::held;
use crate::evidence::marker;
use crate::evidence::payload;
use crate::evidence::signing;
use crate::evidence::subject::{self, Subject};
use crate::gate::budget::{Charge, Scope};
use crate::gate::contract::Contract;
use crate::gate::contract::Source;
use crate::reach::sandbox;
use crate::state::hold;
use crate::state::loop_state;
use crate::state::loop_state::DEFAULT_STALL_AFTER;
use crate::state::loop_state::HeldTold;
use crate::state::loop_state::Limits;
use crate::state::loop_state::Repeat;
use crate::state::loop_state::{EndReason, LoopState, LoopStatus};
use crate::state::loops::{self};
use crate::state::project::{Project, SessionId};
use crate::state::session;
use crate::state::session::Budget;
use crate::state::session::Session;
use crate::state::wakes;
use crate::sys::digest;
use crate::sys::time;
use crate::sys::time::Deadline;
use crate::sys::watchdog;
use crate::transcript;
use crate::transcript::usage;
use crate::transcript::usage::Tally;
use crate::verdict::defang::{self, defang};
use crate::verdict::promise::{Verdict, assess};
use crate::verdict::terminal;

/// The longest `reason` a block carries.
pub const MAX_REASON: usize = 4000;

/// What a Stop hook prints (both engines accept these fields).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StopOutput {
    /// Let the stop happen; the message, if any, is for the human.
    Allow(Option<String>),
    /// Keep the agent working: `reason` is what it reads next.
    Block {
        reason: String,
        system_message: Option<String>,
    },
}

impl StopOutput {
    /// The JSON line for stdout, or nothing for a silent allow.
    pub fn to_json(&self) -> Option<String> {
        self.wire(Feedback::Block, false).line()
    }

    /// The answer with a block given as `feedback`; `subagent` for a SubagentStop (which
    /// always gets `decision: block`).
    pub fn wire(&self, feedback: Feedback, subagent: bool) -> Wire<'_> {
        match self {
            StopOutput::Allow(message) => Wire {
                system_message: message.as_deref(),
                ..Wire::default()
            },
            StopOutput::Block {
                reason,
                system_message,
            } if feedback == Feedback::Context && !subagent => Wire {
                system_message: system_message.as_deref(),
                hook_specific_output: Some(Specific {
                    hook_event_name: "Stop",
                    additional_context: Some(reason),
                    ..Specific::default()
                }),
                ..Wire::default()
            },
            StopOutput::Block {
                reason,
                system_message,
            } => Wire {
                decision: Some("block"),
                reason: Some(reason),
                system_message: system_message.as_deref(),
                ..Wire::default()
            },
        }
    }

    /// The output with `notice` added to what the person reads, after anything there.
    fn told(self, notice: Option<String>) -> StopOutput {
        let Some(notice) = notice else {
            return self;
        };
        let join = |message: Option<String>| {
            Some(match message {
                Some(message) => format!("{message}\n{notice}"),
                None => notice.clone(),
            })
        };
        match self {
            StopOutput::Allow(message) => StopOutput::Allow(join(message)),
            StopOutput::Block {
                reason,
                system_message,
            } => StopOutput::Block {
                reason,
                system_message: join(system_message),
            },
        }
    }
}

/// What the gate decided at a Stop: its answer, with every line the person must hear in it,
/// and the line of the loop that settled at this Stop, if one did (its wake's, SPEC §10).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub output: StopOutput,
    pub settled: Option<String>,
}

/// How long after its deadline the watchdog answers for a gate that has not: room for the
/// gate's own answer, which comes at the deadline, and still inside the handler's 5 s margin.
const WATCHDOG_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// The last line of defence for the deadline (SPEC §9): whatever hangs (a filesystem, a lock
/// held by another process, an input that never ends), the stop is blocked just after the
/// deadline and the process ends, so the engine never kills the hook and lets the stop through
/// unchecked. Its block is not counted against the budget (that would take the state it could
/// be stuck on); the engine's own cap on consecutive blocks bounds it.
///
/// An alarm, not a thread (`sys::watchdog`): starting a thread cost more than the rest of a
/// Stop without a loop.
pub struct Watchdog {
    alarm: watchdog::Alarm,
}

impl Watchdog {
    pub fn start(deadline: std::time::Duration) -> Watchdog {
        let reason = format!(
            "stop-gate: ran past its --deadline of {} s (something it reads hangs); the stop is blocked, NOT verified",
            deadline.as_secs()
        );
        let block = StopOutput::Block {
            reason,
            system_message: None,
        };
        let json = block.to_json().unwrap_or_default();
        // A panic must not let the stop through: exiting 101 is a non-blocking error to both
        // engines, which then go on as if the gate had allowed. The gate's last act is a
        // block, unless its own answer is already being written.
        let on_panic = |info: &std::panic::PanicHookInfo| {
            let where_ = info
                .location()
                .map(|l| format!(" at {}:{}", l.file(), l.line()))
                .unwrap_or_default();
            let block = StopOutput::Block {
                reason: format!(
                    "stop-gate: an internal error stopped it{where_}; the stop is blocked, NOT verified (please report it)"
                ),
                system_message: None,
            };
            (
                format!("{}\n", block.to_json().unwrap_or_default()).into_bytes(),
                output::diagnostic_line("stop-gate", &format!("internal error{where_}: {info}")),
            )
        };
        Watchdog {
            alarm: watchdog::Alarm::start(
                deadline + WATCHDOG_GRACE,
                format!("{json}\n").into_bytes(),
                on_panic,
            ),
        }
    }

    /// Prints the gate's own answer, unless the alarm has answered already (then the process
    /// is gone): only one answer is ever written.
    /// Whether the answer was written out.
    pub fn answer(&self, json: Option<String>) -> bool {
        self.alarm
            .answer(json.map(|json| format!("{json}\n").into_bytes()).as_deref())
    }
}

/// The `terminalSequence` that tells the person `line` (SPEC §10): a desktop notification as
/// OSC 9 and as OSC 777, which Claude Code emits for the hook (it allows only those, and BEL).
/// Control characters go, and `;` (OSC 777's separator); the body begins with `vigil`, since
/// an OSC 9 body may not begin with a digit.
pub fn desktop_notification(line: &str) -> String {
    let body: String = format!("vigil: {line}")
        .chars()
        .filter(|c| !c.is_control())
        .map(|c| if c == ';' { ',' } else { c })
        .take(200)
        .collect();
    format!("\u{1b}]9;{body}\u{7}\u{1b}]777;notify;vigil;{body}\u{7}")
}

/// What the person must hear whatever the decision (a check that ran unconfined, a settings
/// change blocked), and what settled, gathered while the gate decides.
#[derive(Default)]
struct Heard {
    notices: Vec<String>,
    settled: Option<String>,
}

impl Heard {
    /// The notices, the latest first, as one message.
    fn notice(&self) -> Option<String> {
        (!self.notices.is_empty()).then(|| {
            let mut lines: Vec<&str> = self.notices.iter().map(String::as_str).collect();
            lines.reverse();
            lines.join("\n")
        })
    }
}

/// Decides a Stop or SubagentStop. `config` and `input` arrive as results so that a broken
/// command line or payload is denied here, within the budget, like any other failure.
pub fn decide(config: Result<GateConfig, Error>, input: Result<HookInput, Error>) -> Decision {
    let heard = std::cell::RefCell::new(Heard::default());
    let output = decide_checked(config, input, &heard);
    let heard = heard.into_inner();
    Decision {
        output: output.told(heard.notice()),
        settled: heard.settled,
    }
}

fn decide_checked(
    config: Result<GateConfig, Error>,
    input: Result<HookInput, Error>,
    heard: &std::cell::RefCell<Heard>,
) -> StopOutput {
    // Debug builds only (the test suite's): a way to make the gate panic, to prove it blocks.
    #[cfg(debug_assertions)]
    if std::env::var_os("VIGIL_TEST_PANIC").is_some() {
        panic!("VIGIL_TEST_PANIC is set");
    }
    let deadline = Deadline::after(config.as_ref().map_or(DEFAULT_DEADLINE, |c| c.deadline));
    let state_dir = config.as_ref().ok().and_then(|c| c.state_dir.clone());
    let cwd = input.as_ref().ok().and_then(|i| i.cwd.clone());
    let project = Project::resolve(state_dir.as_deref(), cwd.as_deref());
    let max_blocks = config
        .as_ref()
        .map_or(budget::DEFAULT_MAX_BLOCKS, |c| c.max_blocks);
    let stop_hook_active = input
        .as_ref()
        .ok()
        .and_then(|i| i.stop_hook_active)
        .unwrap_or(false);
    let subagent = input.as_ref().ok().and_then(HookInput::event) == Some(HookEvent::SubagentStop);
    // A subagent's blocks are counted by its agent_id; an id that could not be vigil's (too
    // long, or odd characters) shares the session's subagent budget.
    let agent = input
        .as_ref()
        .ok()
        .and_then(|i| i.agent_id.as_deref())
        .and_then(|id| SessionId::parse(id).ok())
        .map(|id| id.to_string());
    let scope = if subagent {
        Scope::Subagent(agent)
    } else {
        Scope::Main
    };
    let raw_session = input.as_ref().ok().and_then(|i| i.session_id.clone());
    let session = raw_session.as_deref().map(SessionId::parse);
    let gate = Gate {
        project,
        max_blocks,
        stop_hook_active,
        scope,
        deadline,
        heard,
    };

    let input = match input {
        Ok(input) => input,
        Err(e) => {
            return gate.deny(
                &SessionId::unknown(),
                &format!("stop-gate: {e}; the Stop hook got input it cannot read"),
            );
        }
    };
    let config = match config {
        Ok(config) => config,
        Err(e) => {
            let session = session
                .and_then(Result::ok)
                .unwrap_or_else(SessionId::unknown);
            // The hook's own flags are wrong, or (an input error) the project's, which say
            // how to set them again.
            let line = match e {
                Error::Input(_) | Error::Io(_) => format!("stop-gate: config error: {e}"),
                Error::Usage(_) => format!(
                    "stop-gate: config error: {e}; fix the stop-gate command in the hook settings"
                ),
            };
            return gate.deny(&session, &line);
        }
    };
    let session = match session {
        Some(Ok(session)) => session,
        Some(Err(e)) => return gate.deny(&SessionId::unknown(), &format!("stop-gate: {e}")),
        None => {
            return gate.deny(
                &SessionId::unknown(),
                "stop-gate: the hook input has no session_id; a Stop hook needs one",
            );
        }
    };
    if subagent && !config.subagents && config.contract.is_none() {
        return StopOutput::Allow(None);
    }
    // Claude Code's `/compact` (and its automatic compaction) stops a subagent of no type whose
    // message is the summary: that is no subagent's report, and no work of its own to check.
    if subagent && input.agent_type.as_deref() == Some("") {
        return StopOutput::Allow(None);
    }
    // Read once: a session with no record has no loop and no count to reset (one stat per
    // place at most).
    let peeked =
        (session.as_str() != loops::PENDING).then(|| session::peek(&gate.project, &session));
    let recorded = !matches!(peeked, None | Some(Ok(None)));
    // Settings changes the ConfigChange hook blocked since the last Stop: told now (the
    // person may not have seen the hook's own message: under `claude -p` nothing shows it).
    if let Some(Ok(Some(record))) = &peeked
        && record.blocked_changes.iter().any(|change| !change.told)
        && let Ok(untold) = session::tell_blocked_changes(&gate.project, &session)
    {
        for reason in untold {
            gate.tell(format!(
                "vigil blocked a settings change during this session: {reason}"
            ));
        }
    }
    // The subagent's report is an API: its shape first; the checks run there too only with
    // --subagents (a research subagent need not pass the project's test suite).
    if subagent && let Some(source) = &config.contract {
        if let Err(failure) = gate.contract(source, &config, &input) {
            return gate.deny(&session, &failure.reason());
        }
        if !config.subagents {
            if recorded {
                let _ = budget::reset(&gate.project, &session, &gate.scope);
            }
            return StopOutput::Allow(None);
        }
    }
    // The first Stop of a new turn: a turn of this session's loop that the engine ended over
    // the gate's block since the loop last moved (Claude Code's cap) is recorded and told,
    // when no prompt's hook did (issue 29). Continuations never read the transcript for it.
    if !subagent
        && !stop_hook_active
        && let Some(Ok(Some(record))) = &peeked
        && let Some(state) = &record.ralph
        && let Some(transcript) = input.transcript_path.as_deref()
    {
        match loops::engine_cut_of(&gate.project, &session, state, transcript) {
            Ok(Some(told)) => gate.tell(told),
            Ok(None) => {}
            Err(e) => gate.tell(format!(
                "vigil: {e}; a cut of this session's loop by the engine could not be recorded"
            )),
        }
    }
    // The loop belongs to the main agent: a subagent's stop never counts as a pass.
    if !subagent
        && recorded
        && let Some(output) = gate.run_loop(&config, &input, &session)
    {
        return output;
    }
    // No record, but the transcript holds this session's loop blocks: the record is gone
    // (the state home removed). Told once, NOT verified; the witness never passes anything.
    if !subagent
        && !recorded
        && let Some(transcript) = input.transcript_path.as_deref()
        && let Some(told) = loops::witness_unrecorded(&gate.project, &session, transcript)
    {
        gate.tell(told);
    }
    match gate.checks(&config) {
        Ok(()) => {
            if recorded {
                let _ = budget::reset(&gate.project, &session, &gate.scope);
            }
            StopOutput::Allow(None)
        }
        Err(failure) => gate.deny(&session, &failure.reason()),
    }
}

struct Gate<'h> {
    project: Project,
    max_blocks: u32,
    stop_hook_active: bool,
    scope: Scope,
    /// `--deadline` from the start: an engine that kills a slow hook lets the stop through
    /// unchecked, so the gate answers by then, and a check it could not finish denies.
    deadline: Deadline,
    /// What the person must hear, and what settled (`decide` returns them).
    heard: &'h std::cell::RefCell<Heard>,
}

/// A failing check: the one useful line, and detail the model can use.
struct Failure {
    line: String,
    detail: String,
}

impl Failure {
    fn line(line: String) -> Failure {
        Failure {
            line,
            detail: String::new(),
        }
    }

    /// The block reason: the line, then the detail; defanged and at most `MAX_REASON` chars.
    fn reason(&self) -> String {
        let text = if self.detail.is_empty() {
            self.line.clone()
        } else {
            format!("{}\n{}", self.line, self.detail)
        };
        cap(&defang(&text), MAX_REASON)
    }
}

/// Keeps the first line and as much of the end as fits in `max` characters.
fn cap(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let first = text.lines().next().unwrap_or("");
    let first: String = first.chars().take(max / 2).collect();
    let marker = "\n[…]\n";
    let room = max.saturating_sub(first.chars().count() + marker.chars().count());
    let tail: Vec<char> = text.chars().rev().take(room).collect();
    format!(
        "{first}{marker}{}",
        tail.into_iter().rev().collect::<String>()
    )
}

/// What the first look at a running loop found.
struct Seen {
    /// The last message; `None` when it could not be read.
    message: Option<String>,
    /// Why the message could not be read, when it could not.
    note: Option<String>,
    bounds: Bounds,
    /// For the human: why the token budget cannot count, when it cannot.
    warning: Option<String>,
    /// The checks a declaration must pass (`--run`, `--require-marker`), as a person names
    /// them; none: the declaration alone ends the loop, and verifies nothing.
    checks: Vec<String>,
}

/// The token tally as a Stop found it, and as the transcripts have it now.
struct Counted {
    before: Tally,
    after: Tally,
    warning: Option<String>,
}

/// A loop's limits in force: its own, else the hook's, else the defaults.
#[derive(Clone, Copy, Debug)]
struct Bounds {
    stall_after: u32,
    max_duration: Option<std::time::Duration>,
    max_tokens: Option<u64>,
}

impl Bounds {
    fn of(own: &Limits, hook: &Limits) -> Bounds {
        Bounds {
            stall_after: own
                .stall_after
                .or(hook.stall_after)
                .unwrap_or(DEFAULT_STALL_AFTER),
            max_duration: own
                .max_duration_secs
                .or(hook.max_duration_secs)
                .map(std::time::Duration::from_secs),
            max_tokens: own.max_tokens.or(hook.max_tokens),
        }
    }
}

/// Counts this pass's message against the last ones: the number of passes in a row that ended
/// with it, when that reaches `after` (0: stalls are not looked for).
fn stalled(state: &mut LoopState, message: &str, after: u32) -> Option<u32> {
    let normal = message.split_whitespace().collect::<Vec<_>>().join(" ");
    let sha256 = digest::sha256_hex(normal.as_bytes());
    let passes = match &state.progress.same_message {
        Some(last) if last.sha256 == sha256 => last.passes.saturating_add(1),
        _ => 1,
    };
    state.progress.same_message = Some(Repeat { sha256, passes });
    (after > 0 && passes >= after).then_some(passes)
}

/// `tally` with what the Stop's transcripts gained since it was counted, and why they could not
/// be read, when they could not.
fn recount(state: &LoopState, input: &HookInput, mut tally: Tally) -> (Tally, Option<String>) {
    let warning = match &input.transcript_path {
        None => Some("--max-tokens counts nothing: this Stop names no transcript".to_string()),
        Some(transcript) => usage::update(&mut tally, transcript, state.started_secs())
            .err()
            .map(|why| {
                format!(
                    "--max-tokens counts nothing of the transcript {}: {why}",
                    transcript.display()
                )
            }),
    };
    (tally, warning)
}

/// The time or token budget that is spent, if one is: its end reason and what to tell.
fn spent(state: &LoopState, bounds: &Bounds) -> Option<(EndReason, String)> {
    if let Some(max) = bounds.max_duration {
        let ran = (time::now_secs() - state.started_secs()).max(0.0);
        if ran >= max.as_secs_f64() {
            return Some((
                EndReason::MaxDuration,
                format!(
                    "its time budget of {} is spent (it started {} ago)",
                    time::format_duration(max),
                    time::format_duration(std::time::Duration::from_secs(ran as u64))
                ),
            ));
        }
    }
    if let Some(max) = bounds.max_tokens {
        let untracked = state.progress.tokens.as_ref().map_or(0, |t| t.untracked);
        if untracked > 0 {
            return Some((
                EndReason::MaxTokens,
                format!(
                    "its token budget of {max} cannot be kept: {untracked} subagent transcript(s) written since it started are past the 128 a loop follows"
                ),
            ));
        }
        let counted = state.progress.tokens.as_ref().map_or(0, |t| t.counted());
        if counted >= max {
            return Some((
                EndReason::MaxTokens,
                format!(
                    "its token budget of {max} is spent ({counted} input, cache-creation and output tokens counted since it started)"
                ),
            ));
        }
    }
    None
}

/// The background tasks of a Stop still running, named for the model: a shell by its command,
/// a subagent by its description; at most five, each at most 80 characters of plain text.
fn running_tasks(input: &HookInput) -> String {
    let running: Vec<&BackgroundTask> = input
        .background_tasks
        .iter()
        .flatten()
        .filter(|t| t.is_running())
        .collect();
    let named: Vec<String> = running
        .iter()
        .take(5)
        .map(|task| {
            let short = |text: &str| defang::field_max(text, 80);
            match task.kind {
                TaskKind::Shell => match &task.command {
                    Some(command) => format!("`{}` (shell {})", short(command), short(&task.id)),
                    None => format!(
                        "{} (shell {})",
                        short(task.description.as_deref().unwrap_or("a shell")),
                        short(&task.id)
                    ),
                },
                TaskKind::Subagent => format!(
                    "{} (subagent {})",
                    short(
                        task.description
                            .as_deref()
                            .or(task.agent_type.as_deref())
                            .unwrap_or("a subagent")
                    ),
                    short(&task.id)
                ),
            }
        })
        .collect();
    let mut text = named.join(", ");
    if running.len() > 5 {
        text.push_str(&format!(" and {} more", running.len() - 5));
    }
    text
}

/// Defangs `text` but keeps the one live `keep` (the promise as the model must write it).
fn defang_except(text: &str, keep: &str) -> String {
    if keep.is_empty() {
        return defang(text);
    }
    text.split(keep).map(defang).collect::<Vec<_>>().join(keep)
}

impl Gate<'_> {
    /// Adds a line the person must hear, whatever the decision.
    fn tell(&self, line: String) {
        self.heard.borrow_mut().notices.push(line);
    }

    /// Blocks within the budget; when it is spent, allows and says the work is NOT verified.
    fn deny(&self, session: &SessionId, reason: &str) -> StopOutput {
        let reason = cap(reason, MAX_REASON);
        match budget::charge(&self.project, session, &self.scope, self.max_blocks) {
            Ok(Charge::Block { .. }) => StopOutput::Block {
                reason,
                system_message: None,
            },
            Ok(Charge::Spent { max }) => StopOutput::Allow(Some(format!(
                "vigil: stop allowed after {max} consecutive blocks; the work is NOT verified. Last problem: {}",
                first_line(&reason)
            ))),
            // No budget can be kept: block once, and let the forced continuation stop.
            Err(e) if self.stop_hook_active => StopOutput::Allow(Some(format!(
                "vigil: cannot keep the block budget ({e}); allowing this stop. The work is NOT verified. Last problem: {}",
                first_line(&reason)
            ))),
            Err(e) => StopOutput::Block {
                reason,
                system_message: Some(format!(
                    "vigil: cannot keep the block budget ({e}); the next stop will be allowed"
                )),
            },
        }
    }

    /// Check 1. `None` when no loop is running for this session (and none ended unreported).
    /// The loop's lock is held to read and to write its state, not while the checks run: a
    /// long test run must not keep `loop cancel` out. A pass that declared nothing needs no
    /// check, and is decided in one locked step.
    fn run_loop(
        &self,
        config: &GateConfig,
        input: &HookInput,
        session: &SessionId,
    ) -> Option<StopOutput> {
        let mut seen: Option<Seen> = None;
        // The transcripts are read before the lock is taken: `loop cancel`, a StopFailure or
        // a subagent's stop need not wait on them.
        let counted = self.count_tokens(config, input, session);
        let first = self.with_loop(session, |state, budget| {
            let bounds = Bounds::of(&state.limits, &config.loop_limits);
            let mut warning = None;
            if let Some(counted) = counted {
                let now = state.progress.tokens.clone().unwrap_or_default();
                let (tally, said) = if now == counted.before {
                    (counted.after, counted.warning)
                } else {
                    // Another Stop counted meanwhile: count again from where it got to.
                    recount(state, input, now)
                };
                warning = said;
                state.progress.tokens = Some(tally);
            }
            let promise = state.promise()?;
            let (message, note) = match transcript::last_message(input) {
                Ok(found) => (Some(found.map(|(text, _)| text).unwrap_or_default()), None),
                Err(e) => (
                    None,
                    Some(format!(
                        "stop-gate: cannot read the transcript ({e}); this pass counts as not done"
                    )),
                ),
            };
            let assessment = assess(message.as_deref().unwrap_or(""), &promise);
            let pass = Seen {
                message,
                note,
                bounds,
                warning,
                checks: config.check_names(),
            };
            match assessment.verdict {
                Verdict::Blocked => {
                    let question = assessment.question.unwrap_or_default();
                    Ok(Step::End(
                        EndReason::NeedsDecision,
                        format!(
                            "vigil loop stopped at pass {}/{}: the agent asks for a decision: {}",
                            state.iteration,
                            state.max_iterations,
                            shown_question(&question)
                        ),
                    ))
                }
                Verdict::Declared => {
                    let running = running_tasks(input);
                    if running.is_empty() {
                        seen = Some(pass);
                        return Ok(Step::Continue);
                    }
                    // Not final while background work runs (its result is still to come).
                    let work = format!("background work is still running: {running}");
                    if state.progress.waited_in_pass != Some(state.iteration)
                        && spent(state, &bounds).is_none()
                    {
                        state.progress.waited_in_pass = Some(state.iteration);
                        return Ok(self.wait(state, budget, &running));
                    }
                    let line = format!(
                        "stop-gate: {work}; a declaration counts only once it has finished (stop a task that never ends, such as a server, before you finish)"
                    );
                    self.advance(state, budget, Verdict::Absent, Some(line), &pass)
                }
                _ => self.advance(state, budget, Verdict::Absent, None, &pass),
            }
        });
        match first {
            Ok(Some(Step::Continue)) => {}
            Ok(Some(Step::Output(output))) => return Some(output),
            Ok(_) => return None,
            Err(output) => return Some(output),
        }
        let pass = seen?;
        // The promise was declared: checks 2 and 3 run, without the lock.
        let judged = self.judged(config);
        let failing = judged.result.err().map(|f| defang(&f.line));
        // What a pass vouches for: the tree its check ran on (the hold's copy), else the tree
        // as it is once the checks passed; a change after it is told at the run's end.
        let vouched = match (&failing, judged.told.subject) {
            (Some(_), _) => None,
            (None, Some(subject)) => Some(subject),
            (None, None) if !pass.checks.is_empty() => {
                subject::worktree_tree(&self.project, config.limits(self.deadline)).ok()
            }
            (None, None) => None,
        };
        let held = judged.told.held.map(HeldTold::capped);
        match self.with_loop(session, |state, budgets| {
            if held.is_some() {
                state.held = held;
            }
            state.vouched = vouched;
            self.advance(state, budgets, Verdict::Declared, failing, &pass)
        }) {
            Ok(Some(Step::Output(output))) => Some(output),
            Ok(_) => None,
            Err(output) => Some(output),
        }
    }

    /// Reads what the transcripts gained, for a running loop with a token budget, without the
    /// record's lock (the tally read is checked again under it).
    fn count_tokens(
        &self,
        config: &GateConfig,
        input: &HookInput,
        session: &SessionId,
    ) -> Option<Counted> {
        let state = loops::load(&self.project, session).ok().flatten()?;
        if !state.status.is_live() {
            return None;
        }
        Bounds::of(&state.limits, &config.loop_limits).max_tokens?;
        let before = state.progress.tokens.clone().unwrap_or_default();
        let (after, warning) = recount(&state, input, before.clone());
        Some(Counted {
            before,
            after,
            warning,
        })
    }

    /// Holds a declared stop once in a pass while background work runs: a block within the
    /// main agent's budget, no pass spent. When the budget is spent the stop is allowed, NOT
    /// verified, and the loop goes on at the next stop.
    fn wait(&self, state: &LoopState, budget: &mut Budget, running: &str) -> Step {
        let work = format!("background work is still running: {running}");
        let promise = state.promise().map(|p| p.tagged()).unwrap_or_default();
        match budget::charge_budget(budget, self.max_blocks) {
            Charge::Block { .. } => {
                let line = format!(
                    "stop-gate: {work}; wait for it to finish (its result comes back to you; stop a task that never ends, such as a server), then finish by ending with {promise} on its own last line, when it is true"
                );
                Step::Output(StopOutput::Block {
                    reason: cap(&defang_except(&line, &promise), MAX_REASON),
                    system_message: Some(defang(&format!(
                        "vigil loop {}/{}: waiting for background work before the declaration counts: {running}",
                        state.iteration, state.max_iterations,
                    ))),
                })
            }
            Charge::Spent { max } => Step::Output(StopOutput::Allow(Some(defang(&format!(
                "vigil: stop allowed after {max} consecutive blocks; the work is NOT verified. Last problem: {work}"
            ))))),
        }
    }

    /// The end of a pass: passed when declared with every check passing; aborted at the last
    /// pass, or when a limit is spent (a stall, the time, the tokens); and otherwise the next
    /// pass, with the problem (if any) before the prompt. A pass resets the main agent's budget
    /// (`budget`, saved with the loop in one write).
    fn advance(
        &self,
        state: &mut LoopState,
        budget: &mut Budget,
        verdict: Verdict,
        failing: Option<String>,
        pass: &Seen,
    ) -> Result<Step> {
        let (k, max) = (state.iteration, state.max_iterations);
        if verdict == Verdict::Declared && failing.is_none() {
            *budget = Budget {
                budget_spent: budget.budget_spent,
                ..Budget::default()
            };
            state.checks = Some(
                pass.checks
                    .iter()
                    .take(loop_state::MAX_CHECKS)
                    .cloned()
                    .collect(),
            );
            return Ok(Step::End(EndReason::Declared, loops::told_passed(state)));
        }
        let problem = failing.or(pass.note.clone());
        let why = problem
            .as_ref()
            .map_or(String::new(), |line| format!(" Last problem: {line}"));
        if k >= max {
            return Ok(Step::End(
                EndReason::MaxIterations,
                format!(
                    "vigil loop aborted after {max} passes without a verified completion: the work is NOT verified.{why}"
                ),
            ));
        }
        if let Some(message) = &pass.message
            && let Some(repeats) = stalled(state, message, pass.bounds.stall_after)
        {
            return Ok(Step::End(
                EndReason::Stalled,
                format!(
                    "vigil loop aborted at pass {k}/{max}: it stalled, ending {repeats} passes in a row with the same message; the work is NOT verified. Change the task or the prompt, then start it again.{why}"
                ),
            ));
        }
        if let Some((reason, told)) = spent(state, &pass.bounds) {
            return Ok(Step::End(
                reason,
                format!(
                    "vigil loop aborted at pass {k}/{max}: {told}; the work is NOT verified.{why}"
                ),
            ));
        }
        state.iteration = k + 1;
        // A new pass: the blocks counted so far (a hold for background work) were not in a row
        // with what comes now.
        budget.consecutive_blocks = 0;
        budget.status = None;
        let promise = state.promise()?;
        // The finish line goes to the model too, however the loop was started (SPEC §4): a
        // loop started from a terminal has told the model nothing else.
        let finish = format!(
            "vigil loop {}/{max}: finish only by ending with {} on its own last line, when it is true",
            state.iteration,
            promise.tagged()
        );
        let reason = match problem {
            Some(line) => format!("{line}\n\n{}\n\n{finish}", state.prompt),
            None => format!("{}\n\n{finish}", state.prompt),
        };
        let told = match &pass.warning {
            Some(warning) => format!("{finish} (vigil: {})", defang::field(warning)),
            None => finish,
        };
        Ok(Step::Output(StopOutput::Block {
            reason,
            system_message: Some(told),
        }))
    }

    /// Locks the session's record, and applies `step` to its running loop (with the main
    /// agent's budget beside it), saving what it changed in one write. A loop that is not
    /// running is reported once if it was cancelled and never reported (a cancel happens
    /// outside a Stop; the human must hear of it). A record that is damaged, or gone while its
    /// loop was known to run, is told to the human as NOT verified, never taken for "no loop".
    /// `Ok(None)`: no loop.
    fn with_loop(
        &self,
        session: &SessionId,
        step: impl FnOnce(&mut LoopState, &mut Budget) -> Result<Step>,
    ) -> Result<Option<Step>, StopOutput> {
        // The record's lock is let go before a denial charges the budget, which takes it again.
        self.locked(session, step)
            .map_err(|e: Error| self.deny(session, &format!("stop-gate: {e}")))
    }

    /// `with_loop`'s work, under the record's lock.
    fn locked(
        &self,
        session: &SessionId,
        step: impl FnOnce(&mut LoopState, &mut Budget) -> Result<Step>,
    ) -> Result<Option<Step>> {
        let mut record = Session::open(&self.project, session)?;
        if let Some(lost) = record.take_lost() {
            // Told now: the record is saved without it (and without the running marker).
            record.save()?;
            return Ok(Some(Step::Output(StopOutput::Allow(Some(format!(
                "vigil: {lost}; the loop is over, and its work is NOT verified. Start it again with /vigil-loop or `stop-gate loop start`"
            ))))));
        }
        let Some(state) = record.record.ralph.as_mut() else {
            return Ok(None);
        };
        if !state.status.is_live() {
            // An end that happened outside a Stop (a cancel, a session that ended with its
            // loop running, then resumed) is told once.
            if !state.reported {
                state.reported = true;
                let line = loops::told_end(state);
                record.save()?;
                return Ok(Some(Step::Output(StopOutput::Allow(Some(line)))));
            }
            return Ok(None);
        }
        let before = record.record.clone();
        let state = record.record.ralph.as_mut().expect("the loop is there");
        // Back from a failed turn (StopFailure): the pass that failed goes on.
        if state.status == LoopStatus::Interrupted {
            state.status = LoopStatus::Running;
        }
        let step = step(state, &mut record.record.budget)?;
        if let Step::End(why, message) = step {
            let state = record.record.ralph.as_mut().expect("the loop is there");
            state.end(why);
            state.reported = true;
            record.save()?;
            let state = record.record.ralph.as_ref().expect("the loop is there");
            wakes::settle(state);
            if let Some(report) = &state.report {
                let line = wakes::loop_line(state, report);
                self.heard.borrow_mut().settled = Some(line);
            }
            return Ok(Some(Step::Output(StopOutput::Allow(Some(message)))));
        }
        if record.record != before {
            if let Some(state) = record.record.ralph.as_mut() {
                state.updated_at = time::now_rfc3339();
            }
            record.save()?;
        }
        Ok(Some(step))
    }

    /// The subagent contract: the report is one JSON object the schema accepts.
    fn contract(
        &self,
        source: &Source,
        config: &GateConfig,
        input: &HookInput,
    ) -> Result<(), Failure> {
        let contract = Contract::load(source, &self.project.dir).map_err(|e| {
            Failure::line(format!(
                "stop-gate: config error: {e}; fix --contract in the hook settings (`settings-merge check` validates it)"
            ))
        })?;
        let message = match &input.last_assistant_message {
            Some(message) => message.clone(),
            None => match &input.agent_transcript_path {
                Some(path) => transcript::last_assistant_text_of(path, true)
                    .map_err(|e| {
                        Failure::line(format!(
                            "stop-gate: cannot read the subagent's transcript ({e}); its report cannot be checked"
                        ))
                    })?
                    .unwrap_or_default(),
                None => String::new(),
            },
        };
        contract
            .check(&message, config.contract_max_tokens)
            .map_err(|v| Failure {
                line: v.line,
                detail: v.shape,
            })
    }

    /// Checks 2 and 3, in order; the first failure.
    fn checks(&self, config: &GateConfig) -> Result<(), Failure> {
        self.judged(config).result
    }

    /// Checks 2 and 3, and what the hold saw on the way.
    fn judged(&self, config: &GateConfig) -> Judged {
        let mut told = Told::default();
        let result = self.checks_in_time(config, &mut told);
        let result = if self.deadline.passed() {
            Err(Failure::line(format!(
                "stop-gate: the checks did not finish within --deadline {} s; the stop is blocked, NOT verified (raise --deadline, and the hook's timeout above it)",
                config.deadline.as_secs()
            )))
        } else {
            result
        };
        Judged { result, told }
    }

    fn checks_in_time(&self, config: &GateConfig, told: &mut Told) -> Result<(), Failure> {
        // The human's hold (SPEC §11): held files as held, before anything runs.
        let hold = hold::load(&self.project).map_err(|e| {
            Failure::line(format!(
                "stop-gate: {e}; the stop is blocked while the human's hold on the tests cannot be read"
            ))
        })?;
        if hold.is_none()
            && let Some(outer) = hold::above(&self.project)
        {
            return Err(Failure::line(format!(
                "stop-gate: the human holds the tests of {}, and {} is a repository of its own inside it that git was not told of (a `.git` made there); the stop is blocked: remove {}/.git",
                outer.display(),
                self.project.dir.display(),
                self.project.dir.display()
            )));
        }
        if let Some(hold) = &hold {
            let compared = held::compare(&self.project, hold).map_err(|e| {
                Failure::line(format!(
                    "stop-gate: cannot compare the tree with the human's hold on the tests: {e}"
                ))
            })?;
            told.held = Some(HeldTold {
                differ: compared
                    .changed
                    .iter()
                    .map(|(path, change)| format!("{} ({})", hold::shown(path), change.word()))
                    .collect(),
                new_tests: compared.new.iter().map(|p| hold::shown(p)).collect(),
                moved: Vec::new(),
            });
            if !compared.changed.is_empty() {
                return Err(Failure::line(held_differ(&compared)));
            }
            if !compared.new.is_empty() {
                self.tell(format!(
                    "vigil: files the human's hold does not judge (a check under the hold leaves them out): {}",
                    held_check::named(&compared.new)
                ));
            }
        }
        if let Some(command) = &config.run {
            // The reserve is kept for the markers and the gate's state, whatever came before.
            let timeout = || {
                let left = self.deadline.remaining().saturating_sub(RESERVE);
                config
                    .timeout
                    .min(left)
                    .max(std::time::Duration::from_secs(1))
            };
            let plan = command::plan(
                &self.project,
                config.check_write.clone(),
                config.check_network,
            );
            let required = || sandbox::sandbox_on(&self.project.dir);
            if let Some(hold) = &hold {
                // Under a hold the check runs on what it judges, and its tests are read one by
                // one (SPEC §11).
                let decided = held_check::check(
                    &self.project,
                    hold,
                    command,
                    &plan,
                    &required,
                    &timeout,
                    config.limits(self.deadline),
                );
                for line in decided.notices {
                    self.tell(line);
                }
                if let Some(held) = told.held.as_mut() {
                    held.moved = decided.moved;
                }
                told.subject = decided.subject;
                decided.result.map_err(|r| Failure {
                    line: r.line,
                    detail: r.detail,
                })?;
            } else {
                let (checked, _) = held_check::run_reported(
                    &self.project,
                    command,
                    plan,
                    required,
                    timeout(),
                    command::OUTPUT_TAIL,
                )
                .map_err(Failure::line)?;
                if let Some(notice) = checked.unconfined {
                    self.tell(notice);
                }
                checked.result.map_err(|f| Failure {
                    line: f.line,
                    detail: f.tail,
                })?;
            }
        }
        if config.markers.is_empty() {
            return Ok(());
        }
        let limits = config.limits(self.deadline);
        let subject = Subject::Worktree
            .id(&self.project, None, limits)
            .map_err(|e| {
                Failure::line(format!(
                    "stop-gate: cannot tell what the markers must vouch for: {e}"
                ))
            })?;
        // The same trusted keys as `marker-writer verify`: the flag, $VIGIL_VERIFY_KEY, or the
        // keys of the protected state. A key that cannot be read denies.
        let trust = signing::trusted_keys(&self.project, config.verify_key.as_deref())
            .map_err(|e| Failure::line(format!("stop-gate: {e}")))?;
        for required in &config.markers {
            let check = &required.check;
            let verified = marker::verify(
                &self.project,
                check,
                &subject,
                config.marker_max_age,
                &trust,
                required.command.as_deref(),
            );
            // Under a hold a marker counts only when its run held the same tests (SPEC §11): a
            // run of the tree as the agent left it could include what the hold leaves out.
            if let (Ok(payload), Some(hold)) = (&verified, &hold)
                && let Err(why) = held::marker_held(payload, hold)
            {
                return Err(Failure::line(format!(
                    "stop-gate: marker `{check}` was not made under the human's hold on the tests ({why}); a protected writer must run it holding the same tests: `marker-writer run --check {check} --snapshot -- CMD` here, or `--hold-from REF` in CI"
                )));
            }
            if let Err(denial) = verified {
                // What to paste: a command with shell syntax runs (and is recorded) as sh -c.
                let command = match required.command.as_deref() {
                    Some(command) if payload::needs_shell(command) => {
                        format!("sh -c {}", flags::shell_quote(command))
                    }
                    Some(command) => command.to_string(),
                    None => "<the command that checks it>".to_string(),
                };
                return Err(Failure::line(format!(
                    "stop-gate: marker `{check}` {}; a protected writer (CI, a git hook, a human) must run `marker-writer run --check {check} -- {command}` on this content before you stop",
                    denial.describe()
                )));
            }
        }
        Ok(())
    }
}

/// The one useful line of a Stop whose held files differ from the human's hold (SPEC §11).
fn held_differ(compared: &held::Comparison) -> String {
    let first = compared
        .changed
        .first()
        .map_or_else(|| "PATH".to_string(), |(path, _)| hold::shown(path));
    format!(
        "stop-gate: held files differ from the human's hold: {}; the tests that judge the work are the human's, so put them back as held (`stop-gate hold diff` shows how they differ; `stop-gate hold cat {first} > {first}` restores one), and if a held test is wrong, end with `needs-decision: ` and why, for the human to run `stop-gate hold refresh {first}`",
        compared.changed_phrase(10)
    )
}

/// What the checks decided, and what the hold saw on the way.
struct Judged {
    result: Result<(), Failure>,
    told: Told,
}

/// What a declared Stop tells of the hold (SPEC §11), kept with the loop for the person.
#[derive(Default)]
struct Told {
    held: Option<HeldTold>,
    /// The tree the check ran on, when it ran in a copy.
    subject: Option<String>,
}

/// What one look at a running loop leads to.
enum Step {
    /// Go on: the promise was declared, and the checks decide.
    Continue,
    /// End the loop for this reason, allowing the stop with this message.
    End(EndReason, String),
    /// Print this.
    Output(StopOutput),
}

/// The longest question a human is shown.
const MAX_QUESTION: usize = 500;

/// An escalated question as the human reads it: plain text (escape sequences would run in the
/// human's terminal), at most `MAX_QUESTION` characters, defanged.
fn shown_question(question: &str) -> String {
    let plain = terminal::plain_text(question.as_bytes());
    let mut shown: String = plain.chars().take(MAX_QUESTION).collect();
    if shown.len() < plain.len() {
        shown.push('…');
    }
    defang(&shown)
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_keeps_the_first_line_and_the_end() {
        let text = format!("first line\n{}\nlast line", "x".repeat(10_000));
        let capped = cap(&text, 100);
        assert!(capped.chars().count() <= 100);
        assert!(capped.starts_with("first line\n"));
        assert!(capped.ends_with("last line"));
    }

    #[test]
    fn outputs_are_the_wire_shapes() {
        assert_eq!(StopOutput::Allow(None).to_json(), None);
        assert_eq!(
            StopOutput::Allow(Some("m".into())).to_json().unwrap(),
            r#"{"systemMessage":"m"}"#
        );
        let block = StopOutput::Block {
            reason: "r".into(),
            system_message: None,
        };
        assert_eq!(
            block.to_json().unwrap(),
            r#"{"decision":"block","reason":"r"}"#
        );
    }

    #[test]
    fn required_markers_may_name_their_command() {
        let plain = RequiredMarker::parse("tests").unwrap();
        assert_eq!((plain.check.as_str(), plain.command), ("tests", None));
        let with = RequiredMarker::parse("tests=cargo test --locked").unwrap();
        assert_eq!(with.command.as_deref(), Some("cargo test --locked"));
        assert!(RequiredMarker::parse("../x=y").is_err());
    }
}
