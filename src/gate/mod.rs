//! `stop-gate`'s decision (SPEC §4): the loop, then the check command, then the markers; the
//! first that denies blocks the stop, within a budget so that it never blocks forever.

pub(crate) mod budget;
mod checks;
pub(crate) mod command;
mod config;
pub(crate) mod contract;
pub(crate) mod held_check;
mod output;
mod pass;
pub(crate) mod project_config;
pub(crate) mod slash;

pub(crate) use config::{DEFAULT_DEADLINE, Feedback, GateConfig, RESERVE, RequiredMarker};
pub(crate) use output::{Decision, MAX_REASON, StopOutput, Watchdog, desktop_notification};

use crate::cli::hook::{HookEvent, HookInput};
use crate::error::Error;
use crate::error::Result;
use crate::gate::budget::{Charge, Scope};
use crate::gate::output::{Heard, cap, first_line};
use crate::state::loops::{self};
use crate::state::project::{Project, SessionId};
use crate::state::session;
use crate::sys::time::Deadline;

/// Decides a Stop or SubagentStop. `config` and `input` arrive as results so that a broken
/// command line or payload is denied here, within the budget, like any other failure.
pub(crate) fn decide(
    config: Result<GateConfig, Error>,
    input: Result<HookInput, Error>,
) -> Decision {
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
    let gate = Gate::new(&config, &input, heard);
    let subagent = matches!(gate.scope, Scope::Subagent(_));
    let (config, input, session) = match gate.readable(config, input) {
        Ok(read) => read,
        Err(output) => return output,
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
    if let Some(Ok(Some(record))) = &peeked {
        gate.tell_blocked_changes(record, &session);
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
        && !gate.stop_hook_active
        && let Some(Ok(Some(record))) = &peeked
    {
        gate.tell_engine_cut(record, &session, &input);
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

impl<'h> Gate<'h> {
    /// The gate for this Stop, from whatever of its flags and input could be read.
    fn new(
        config: &Result<GateConfig, Error>,
        input: &Result<HookInput, Error>,
        heard: &'h std::cell::RefCell<Heard>,
    ) -> Gate<'h> {
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
        let subagent =
            input.as_ref().ok().and_then(HookInput::event) == Some(HookEvent::SubagentStop);
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
        Gate {
            project,
            max_blocks,
            stop_hook_active,
            scope,
            deadline,
            heard,
        }
    }
}

impl Gate<'_> {
    /// The Stop's input, flags and session, or the denial of the first of them that cannot be
    /// read (a session is named in a config error when it can be).
    fn readable(
        &self,
        config: Result<GateConfig, Error>,
        input: Result<HookInput, Error>,
    ) -> Result<(GateConfig, HookInput, SessionId), StopOutput> {
        let raw_session = input.as_ref().ok().and_then(|i| i.session_id.clone());
        let session = raw_session.as_deref().map(SessionId::parse);
        let input = match input {
            Ok(input) => input,
            Err(e) => {
                return Err(self.deny(
                    &SessionId::unknown(),
                    &format!("stop-gate: {e}; the Stop hook got input it cannot read"),
                ));
            }
        };
        // A `cwd` that is no directory names no project vigil can judge, and nothing is made
        // for it, in it or in the state home (issue 44): the stop is blocked once, and the
        // forced continuation let through NOT verified.
        if let Some(cwd) = input.cwd.as_deref()
            && !cwd.is_dir()
        {
            let line = format!(
                "stop-gate: the hook input's cwd {} is not a directory, so there is no project to check",
                crate::verdict::defang::field(&cwd.display().to_string())
            );
            return Err(if self.stop_hook_active {
                StopOutput::Allow(Some(format!(
                    "vigil: {line}; allowing this stop. The work is NOT verified"
                )))
            } else {
                StopOutput::Block {
                    reason: line,
                    system_message: None,
                }
            });
        }
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
                return Err(self.deny(&session, &line));
            }
        };
        let session = match session {
            Some(Ok(session)) => session,
            Some(Err(e)) => {
                return Err(self.deny(&SessionId::unknown(), &format!("stop-gate: {e}")));
            }
            None => {
                return Err(self.deny(
                    &SessionId::unknown(),
                    "stop-gate: the hook input has no session_id; a Stop hook needs one",
                ));
            }
        };
        Ok((config, input, session))
    }

    /// Tells the settings changes the ConfigChange hook blocked and the person was not told of.
    fn tell_blocked_changes(&self, record: &session::SessionRecord, session: &SessionId) {
        if record.blocked_changes.iter().any(|change| !change.told)
            && let Ok(untold) = session::tell_blocked_changes(&self.project, session)
        {
            for reason in untold {
                self.tell(format!(
                    "vigil blocked a settings change during this session: {reason}"
                ));
            }
        }
    }

    /// Records and tells a turn of the session's loop that the engine ended over the gate's
    /// block, if there was one (read from the Stop's transcript).
    fn tell_engine_cut(
        &self,
        record: &session::SessionRecord,
        session: &SessionId,
        input: &HookInput,
    ) {
        if let Some(state) = &record.ralph
            && let Some(transcript) = input.transcript_path.as_deref()
        {
            match loops::engine_cut_of(&self.project, session, state, transcript) {
                Ok(Some(told)) => self.tell(told),
                Ok(None) => {}
                Err(e) => self.tell(format!(
                    "vigil: {e}; a cut of this session's loop by the engine could not be recorded"
                )),
            }
        }
    }

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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn required_markers_may_name_their_command() {
        let plain = RequiredMarker::parse("tests").unwrap();
        assert_eq!((plain.check.as_str(), plain.command), ("tests", None));
        let with = RequiredMarker::parse("tests=cargo test --locked").unwrap();
        assert_eq!(with.command.as_deref(), Some("cargo test --locked"));
        assert!(RequiredMarker::parse("../x=y").is_err());
    }
}
