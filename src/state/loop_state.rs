//! A Ralph loop's state (SPEC §4), as the session's record keeps it: its statuses and end
//! reasons, its limits, its progress, and the checks that failed. What happens to a loop (it
//! is started, claimed, ended, cancelled) is `loops`.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::sys::time;
use crate::transcript::usage::Tally;
use crate::verdict::promise::Promise;

pub(crate) const SCHEMA: &str = "vigil.loop/v2";
pub(crate) const MAX_ITERATIONS: u32 = 10_000;
/// The session a loop that waits for its session names (`pending.json`, `loop run`'s).
pub(crate) const PENDING_SESSION: &str = "pending";
/// A loop's prompt is fed back on every pass: it may be at most this long.
pub(crate) const MAX_PROMPT_CHARS: usize = 16_000;

/// Where a loop stands (SPEC §4, `schemas/loop.schema.json`). Two are live: `running`, and
/// `interrupted` (a turn ended without the gate's verdict: an API error, or the engine's own
/// cap on Stop blocks; the loop goes on at the session's next stop, no pass spent). The others
/// are ends, each with its [`EndReason`]s: `passed` (verified), `blocked` (a human must
/// decide), `aborted` (a bound vigil keeps was reached), `cancelled` (by a human), and `cut`
/// (the session ended while the loop was live: nothing will judge it again).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LoopStatus {
    Running,
    Interrupted,
    Passed,
    Blocked,
    Aborted,
    Cancelled,
    Cut,
}

/// Why a loop ended: exactly one per end, and each belongs to one status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EndReason {
    /// `passed`: the promise declared, and every check passed.
    Declared,
    /// `blocked`: the agent asked a human (`needs-decision:`).
    NeedsDecision,
    /// `aborted`: the last pass ended without a verified finish.
    MaxIterations,
    /// `aborted`: passes in a row ended with the same message.
    Stalled,
    /// `aborted`: the time budget was spent.
    MaxDuration,
    /// `aborted`: the token budget was spent, or could no longer be kept.
    MaxTokens,
    /// `cancelled`: a human cancelled it.
    Cancelled,
    /// `cut`: the session ended after the engine ended a turn over the gate's block (Claude
    /// Code's cap on consecutive Stop blocks).
    BlockCap,
    /// `cut`: the session ended after a turn failed on an API error (StopFailure).
    TurnFailed,
    /// `cut`: the session ended (exit, `/clear`, a kill, the command of `loop run` returning)
    /// while the loop ran.
    SessionEnded,
}

impl EndReason {
    pub fn as_str(self) -> &'static str {
        match self {
            EndReason::Declared => "declared",
            EndReason::NeedsDecision => "needs-decision",
            EndReason::MaxIterations => "max-iterations",
            EndReason::Stalled => "stalled",
            EndReason::MaxDuration => "max-duration",
            EndReason::MaxTokens => "max-tokens",
            EndReason::Cancelled => "cancelled",
            EndReason::BlockCap => "block-cap",
            EndReason::TurnFailed => "turn-failed",
            EndReason::SessionEnded => "session-ended",
        }
    }

    /// The status a loop that ended for this reason has.
    pub fn status(self) -> LoopStatus {
        match self {
            EndReason::Declared => LoopStatus::Passed,
            EndReason::NeedsDecision => LoopStatus::Blocked,
            EndReason::MaxIterations
            | EndReason::Stalled
            | EndReason::MaxDuration
            | EndReason::MaxTokens => LoopStatus::Aborted,
            EndReason::Cancelled => LoopStatus::Cancelled,
            EndReason::BlockCap | EndReason::TurnFailed | EndReason::SessionEnded => {
                LoopStatus::Cut
            }
        }
    }

    /// What it means, for a human: `the session ended while it ran`.
    pub(crate) fn told(self) -> &'static str {
        match self {
            EndReason::Declared => "completion declared and every check passed",
            EndReason::NeedsDecision => "the agent asks a human to decide",
            EndReason::MaxIterations => "its last pass ended without a verified finish",
            EndReason::Stalled => "it stalled, ending pass after pass with the same message",
            EndReason::MaxDuration => "its time budget is spent",
            EndReason::MaxTokens => "its token budget is spent",
            EndReason::Cancelled => "a human cancelled it",
            EndReason::BlockCap => {
                "Claude Code ended the session over the Stop hook's blocks (its cap on blocks in a row)"
            }
            EndReason::TurnFailed => "the session ended after a turn failed on an API error",
            EndReason::SessionEnded => "the session ended while it ran",
        }
    }
}

impl LoopStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            LoopStatus::Running => "running",
            LoopStatus::Interrupted => "interrupted",
            LoopStatus::Passed => "passed",
            LoopStatus::Blocked => "blocked",
            LoopStatus::Aborted => "aborted",
            LoopStatus::Cancelled => "cancelled",
            LoopStatus::Cut => "cut",
        }
    }

    /// Whether the loop still runs: a Stop judges it, and no other loop may start beside it.
    pub fn is_live(self) -> bool {
        matches!(self, LoopStatus::Running | LoopStatus::Interrupted)
    }
}

/// What bounds a loop besides `max_iterations`, as `loop start` was told; what it leaves out
/// comes from the Stop hook's flags, then the defaults (`--stall-after 3`, no time or token
/// budget).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Limits {
    /// End the loop `stalled` when this many passes in a row end with the same message (0: never).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stall_after: Option<u32>,
    /// End the loop when this long has passed since it started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_duration_secs: Option<u64>,
    /// End the loop when the transcripts' usage records since it started count this many tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
}

impl Limits {
    pub(crate) fn is_empty(&self) -> bool {
        *self == Limits::default()
    }
}

/// The default of `--stall-after`.
pub(crate) const DEFAULT_STALL_AFTER: u32 = 3;

/// What a loop has counted towards its limits.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Progress {
    /// The last pass's message (whitespace runs collapsed), as a sha256, and how many passes in
    /// a row ended with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub same_message: Option<Repeat>,
    /// The pass whose stop was held once for background work still running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waited_in_pass: Option<u32>,
    /// The tokens counted since the loop started, and how far each transcript was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<Tally>,
}

impl Progress {
    pub(crate) fn is_empty(&self) -> bool {
        *self == Progress::default()
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Repeat {
    pub sha256: String,
    pub passes: u32,
}

/// A failed turn (StopFailure), as the loop and the session record it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Failure {
    /// The engine's error category: `rate_limit`, `server_error`, `overloaded`, ….
    pub error: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_details: Option<String>,
    /// The API's own message (Claude Code sends it as the last assistant message), shortened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    pub at: String,
    /// The pass that was running, for a loop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iteration: Option<u32>,
    /// A subagent's failed turn: its id (the main agent's turn goes on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
}

/// How many checks a passed loop names (the first: `--run`, then the markers).
pub(crate) const MAX_CHECKS: usize = 16;

/// How many failures a loop or a session keeps: the most recent.
pub(crate) const MAX_FAILURES: usize = 5;

/// Who started a loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StartedBy {
    /// `stop-gate loop start` in a terminal.
    Terminal,
    /// The human's `/vigil-loop`, read by the UserPromptSubmit hook.
    SlashCommand,
}

/// `schemas/loop.schema.json` (v2): the loop of a session, as its record holds it and as
/// `loop status --json` prints it. The fields after `reported` are optional, for what a loop
/// may later be bounded by and how it ended, so the format changes once.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoopState {
    pub schema: String,
    pub session_id: String,
    pub prompt: String,
    pub completion_promise: String,
    pub max_iterations: u32,
    /// The pass now running: starts at 1.
    pub iteration: u32,
    pub status: LoopStatus,
    pub started_at: String,
    pub updated_at: String,
    pub started_by: StartedBy,
    /// Only in `pending.json`: after this time no session may claim it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_before: Option<String>,
    /// Whether a Stop has told the human how the loop ended (a cancel happens outside a Stop,
    /// so the next Stop reports it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reported: bool,
    /// Why the loop ended: set with every end status, and only then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_reason: Option<EndReason>,
    /// Limits beyond `max_iterations` (stalls, time, tokens), as `loop start` set them.
    #[serde(default, skip_serializing_if = "Limits::is_empty")]
    pub(crate) limits: Limits,
    /// What the loop has counted towards them.
    #[serde(default, skip_serializing_if = "Progress::is_empty")]
    pub(crate) progress: Progress,
    /// Failed turns (an API error, a rate limit), the most recent last.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) failures: Vec<Failure>,
    /// A `passed` loop: the checks that passed with the declaration that ended it (the Stop
    /// hook's `--run` and `--require-marker`). None: the declaration alone, nothing verified.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checks: Option<Vec<String>>,
    /// The `loop run` that started it, when one did: its id, so that `loop run` reads its own
    /// loop's end and no other.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// Who hears when the loop settles, and under what name (SPEC §10): set when it starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) report: Option<Report>,
    /// What the human's hold on the tests saw at the last declared Stop (SPEC §11).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) held: Option<HeldTold>,
    /// A `passed` loop: the tree (`git-tree:…`) its passing Stop vouched for, so that a change
    /// after it (something left running) is told at the run's end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vouched: Option<String>,
    /// The tree changed after the passing Stop vouched for it (seen by `loop run` at its end):
    /// the pass stands for a tree that is no longer there, NOT verified.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub changed_after: bool,
    /// The loop ended with a report, and its wake is not known to be queued yet: written with
    /// the end in one save, cleared once the wake is, so a kill between the two leaves the end
    /// and its wake owed, which the next hook of the session writes (issue 44).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) wake_owed: bool,
}

/// How many paths or tests a loop keeps in each list of [`HeldTold`].
pub(crate) const MAX_HELD_TOLD: usize = 20;

/// What the human's hold saw at a loop's last declared Stop (SPEC §11), for the person:
/// held files that differed, new test files it does not judge, tests whose outcome moved.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct HeldTold {
    /// Held files that differ from the hold: `tests/a.py (modified)`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub differ: Vec<String>,
    /// Files under a held path that the hold does not hold (the check's copy leaves them out).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub new_tests: Vec<String>,
    /// Tests whose outcome moved from the baseline: `tests/a.py::t (failed -> passed)`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub moved: Vec<String>,
}

impl HeldTold {
    /// The lists kept at most [`MAX_HELD_TOLD`] long.
    pub(crate) fn capped(mut self) -> HeldTold {
        for list in [&mut self.differ, &mut self.new_tests, &mut self.moved] {
            list.truncate(MAX_HELD_TOLD);
        }
        self
    }

    /// One phrase for the person: `held files differ: …; new test files, not judged: …;
    /// tests moved: …`; `None` when there is nothing to tell.
    pub(crate) fn phrase(&self) -> Option<String> {
        let mut parts = Vec::new();
        if !self.differ.is_empty() {
            parts.push(format!("held files differ: {}", self.differ.join(", ")));
        }
        if !self.new_tests.is_empty() {
            parts.push(format!(
                "new test files, not judged by the hold: {}",
                self.new_tests.join(", ")
            ));
        }
        if !self.moved.is_empty() {
            parts.push(format!("tests moved: {}", self.moved.join(", ")));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

/// Where a loop reports (SPEC §10): its id and name, the checkout it runs in, and its
/// commander, decided when a human starts it, so nothing the agent writes later moves it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Report {
    /// The loop's own id (32 hex digits): its wake and its line in `loop list` are named by it.
    pub id: String,
    /// `--name`, else the checkout's directory name.
    pub name: String,
    /// The checkout the loop runs in (its project: the main checkout or a linked worktree).
    pub worktree: std::path::PathBuf,
    /// The project whose queue hears of it: the main checkout of the worktree's repository.
    pub commander: std::path::PathBuf,
    /// `--notify SESSION`: that session's own queue instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notify: Option<String>,
}

impl LoopState {
    pub fn new(
        session: &str,
        prompt: String,
        promise: &Promise,
        max_iterations: u32,
        started_by: StartedBy,
    ) -> LoopState {
        let now = time::now_rfc3339();
        LoopState {
            schema: SCHEMA.to_string(),
            session_id: session.to_string(),
            prompt,
            completion_promise: promise.as_str().to_string(),
            max_iterations,
            iteration: 1,
            status: LoopStatus::Running,
            started_at: now.clone(),
            updated_at: now,
            started_by,
            claim_before: None,
            reported: false,
            end_reason: None,
            limits: Limits::default(),
            progress: Progress::default(),
            failures: Vec::new(),
            checks: None,
            run_id: None,
            report: None,
            held: None,
            vouched: None,
            changed_after: false,
            wake_owed: false,
        }
    }

    pub fn promise(&self) -> Result<Promise> {
        Promise::new(&self.completion_promise)
    }

    /// Ends the loop for `reason`, with the status that reason belongs to.
    pub fn end(&mut self, reason: EndReason) {
        self.status = reason.status();
        self.end_reason = Some(reason);
        self.updated_at = time::now_rfc3339();
    }

    /// When the loop started, in seconds since the epoch (0 when its time cannot be read, so
    /// that a limit counts from the earliest time, never from none).
    pub(crate) fn started_secs(&self) -> f64 {
        time::parse_rfc3339(&self.started_at).unwrap_or(0.0)
    }

    /// `running, pass 2/5, promise DONE`, then what it counted towards its limits and how it
    /// ended or was interrupted.
    pub(crate) fn summary(&self) -> String {
        let mut text = format!(
            "{}, pass {}/{}, promise {}",
            self.status.as_str(),
            self.iteration,
            self.max_iterations,
            self.completion_promise
        );
        if let Some(tokens) = &self.progress.tokens {
            text.push_str(&format!(
                ", {} tokens counted (input {}, cache creation {}, output {}; cache reads {} not counted)",
                tokens.counted(),
                tokens.input,
                tokens.cache_creation,
                tokens.output,
                tokens.cache_read
            ));
        }
        if let Some(reason) = self.end_reason {
            text.push_str(&format!(", ended: {}", reason.as_str()));
        }
        if self.status == LoopStatus::Interrupted
            && let Some(failure) = self.failures.last()
        {
            text.push_str(&format!(
                ", interrupted by {} at {}",
                failure.error, failure.at
            ));
        }
        if let Some(report) = &self.report {
            text.push_str(&format!(", name {}", report.name));
        }
        if self.changed_after {
            text.push_str(", the tree changed after its checks passed: NOT verified");
        }
        if let Some(told) = self.held.as_ref().and_then(HeldTold::phrase) {
            text.push_str(&format!("; {told}"));
        }
        text
    }

    /// Whether the state is one vigil could have written.
    pub(crate) fn check(&self) -> Result<()> {
        if self.schema != SCHEMA
            || self.max_iterations == 0
            || self.max_iterations > MAX_ITERATIONS
            || Promise::new(&self.completion_promise).is_err()
        {
            return Err(Error::input(
                "the loop has another schema, or an impossible max_iterations or completion_promise",
            ));
        }
        Ok(())
    }
}
