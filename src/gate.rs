//! `stop-gate`'s decision (SPEC §4): the loop, then the check command, then the markers; the
//! first that denies blocks the stop, within a budget so that it never blocks forever.

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use crate::budget::{self, Charge};
use crate::check;
use crate::defang::defang;
use crate::error::Error;
use crate::hook::{HookEvent, HookInput};
use crate::loops::{self, LoopState, LoopStatus};
use crate::marker::{self, CheckName};
use crate::promise::{Verdict, assess};
use crate::state::{Project, SessionId};
use crate::subject::Subject;
use crate::transcript;

/// The longest `reason` a block carries.
pub const MAX_REASON: usize = 4000;

/// How stop-gate was configured on its command line.
#[derive(Clone, Debug)]
pub struct GateConfig {
    pub run: Option<String>,
    pub timeout: Duration,
    pub markers: Vec<CheckName>,
    pub marker_max_age: Duration,
    pub max_blocks: u32,
    pub subagents: bool,
    pub state_dir: Option<PathBuf>,
}

impl Default for GateConfig {
    fn default() -> GateConfig {
        GateConfig {
            run: None,
            timeout: check::DEFAULT_TIMEOUT,
            markers: Vec::new(),
            marker_max_age: marker::DEFAULT_MAX_AGE,
            max_blocks: budget::DEFAULT_MAX_BLOCKS,
            subagents: false,
            state_dir: None,
        }
    }
}

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

#[derive(Serialize)]
struct Wire<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    decision: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
    #[serde(rename = "systemMessage", skip_serializing_if = "Option::is_none")]
    system_message: Option<&'a str>,
}

impl StopOutput {
    /// The JSON line for stdout, or nothing for a silent allow.
    pub fn to_json(&self) -> Option<String> {
        let wire = match self {
            StopOutput::Allow(None) => return None,
            StopOutput::Allow(Some(message)) => Wire {
                decision: None,
                reason: None,
                system_message: Some(message),
            },
            StopOutput::Block {
                reason,
                system_message,
            } => Wire {
                decision: Some("block"),
                reason: Some(reason),
                system_message: system_message.as_deref(),
            },
        };
        Some(serde_json::to_string(&wire).expect("stop output serializes"))
    }
}

/// Decides a Stop or SubagentStop. `config` and `input` arrive as results so that a broken
/// command line or payload is denied here, within the budget, like any other failure.
pub fn decide(config: Result<GateConfig, Error>, input: Result<HookInput, Error>) -> StopOutput {
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
    let raw_session = input.as_ref().ok().and_then(|i| i.session_id.clone());
    let session = raw_session.as_deref().map(SessionId::parse);
    let gate = Gate {
        project,
        max_blocks,
        stop_hook_active,
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
            return gate.deny(
                &session,
                &format!(
                    "stop-gate: config error: {e}; fix the stop-gate command in the hook settings"
                ),
            );
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
    let subagent = input.event() == Some(HookEvent::SubagentStop);
    if subagent && !config.subagents {
        return StopOutput::Allow(None);
    }
    // The loop belongs to the main agent: a subagent's stop never counts as a pass.
    if !subagent && let Some(output) = gate.run_loop(&config, &input, &session) {
        return output;
    }
    match gate.checks(&config) {
        Ok(()) => {
            let _ = budget::reset(&gate.project, &session);
            StopOutput::Allow(None)
        }
        Err(failure) => gate.deny(&session, &failure.reason()),
    }
}

struct Gate {
    project: Project,
    max_blocks: u32,
    stop_hook_active: bool,
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

impl Gate {
    /// Blocks within the budget; when it is spent, allows and says the work is NOT verified.
    fn deny(&self, session: &SessionId, reason: &str) -> StopOutput {
        let reason = cap(reason, MAX_REASON);
        match budget::charge(&self.project, session, self.max_blocks) {
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

    /// Check 1. `None` when no loop is running for this session.
    fn run_loop(
        &self,
        config: &GateConfig,
        input: &HookInput,
        session: &SessionId,
    ) -> Option<StopOutput> {
        let path = loops::path(&self.project, session);
        if !path.exists() {
            return None;
        }
        let _lock = match loops::lock(&self.project, session) {
            Ok(lock) => lock,
            Err(e) => return Some(self.deny(session, &format!("stop-gate: {e}"))),
        };
        let mut state = match loops::load(&path) {
            Ok(Some(state)) if state.status == LoopStatus::Running => state,
            Ok(_) => return None,
            Err(e) => {
                return Some(self.deny(
                    session,
                    &format!("stop-gate: {e}; end the loop with `stop-gate loop cancel --session {session}` or fix the file"),
                ));
            }
        };
        let promise = match state.promise() {
            Ok(promise) => promise,
            Err(e) => {
                return Some(self.deny(
                    session,
                    &format!("stop-gate: the loop's promise is unusable: {e}"),
                ));
            }
        };
        let message = transcript::last_message(input)
            .ok()
            .flatten()
            .map(|(text, _)| text);
        let assessment = assess(message.as_deref().unwrap_or(""), &promise);
        let (k, max) = (state.iteration, state.max_iterations);
        let mut failing = None;
        match assessment.verdict {
            Verdict::Blocked => {
                let question = assessment.question.unwrap_or_default();
                return Some(self.end_loop(
                    session,
                    &path,
                    &mut state,
                    LoopStatus::Blocked,
                    format!(
                        "vigil loop stopped at pass {k}/{max}: the agent asks for a decision: {}",
                        defang(&question)
                    ),
                ));
            }
            Verdict::Declared => match self.checks(config) {
                Ok(()) => {
                    let _ = budget::reset(&self.project, session);
                    return Some(self.end_loop(session, &path, &mut state, LoopStatus::Passed, format!(
                        "vigil loop passed on pass {k}/{max}: completion declared and every check passed"
                    )));
                }
                Err(failure) => failing = Some(failure),
            },
            Verdict::Mentioned | Verdict::Absent => {}
        }
        if k >= max {
            let why = failing.map_or(String::new(), |f| {
                format!(" Last problem: {}", defang(&f.line))
            });
            return Some(self.end_loop(session, &path, &mut state, LoopStatus::Aborted, format!(
                "vigil loop aborted after {max} passes without a verified completion: the work is NOT verified.{why}"
            )));
        }
        state.iteration = k + 1;
        if let Err(e) = loops::save(&path, &mut state) {
            return Some(self.deny(session, &format!("stop-gate: {e}")));
        }
        let reason = match &failing {
            Some(failure) => format!("{}\n\n{}", defang(&failure.line), state.prompt),
            None => state.prompt.clone(),
        };
        Some(StopOutput::Block {
            reason,
            system_message: Some(format!(
                "vigil loop {}/{max}: finish only by ending with {} on its own last line, when it is true",
                state.iteration,
                promise.tagged()
            )),
        })
    }

    fn end_loop(
        &self,
        session: &SessionId,
        path: &std::path::Path,
        state: &mut LoopState,
        status: LoopStatus,
        message: String,
    ) -> StopOutput {
        state.status = status;
        match loops::save(path, state) {
            Ok(()) => StopOutput::Allow(Some(message)),
            Err(e) => self.deny(session, &format!("stop-gate: {e}")),
        }
    }

    /// Checks 2 and 3, in order; the first failure.
    fn checks(&self, config: &GateConfig) -> Result<(), Failure> {
        if let Some(command) = &config.run {
            check::run_check(command, &self.project.dir, config.timeout).map_err(|f| Failure {
                line: f.line,
                detail: f.tail,
            })?;
        }
        if config.markers.is_empty() {
            return Ok(());
        }
        let subject = Subject::Worktree.id(&self.project, None).map_err(|e| {
            Failure::line(format!(
                "stop-gate: cannot tell what the markers must vouch for: {e}"
            ))
        })?;
        for check in &config.markers {
            if let Err(denial) =
                marker::verify(&self.project, check, &subject, config.marker_max_age)
            {
                let command = marker::last_command(&self.project, check)
                    .unwrap_or_else(|| "<the check's command>".to_string());
                return Err(Failure::line(format!(
                    "stop-gate: marker `{check}` {}; the protected writer must run `marker-writer run --check {check} -- {command}` on this content before you stop",
                    denial.describe()
                )));
            }
        }
        Ok(())
    }
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
}
