//! The human's slash commands (SPEC §4, §11): `/vigil-loop …`, `/vigil-cancel` and
//! `/vigil-hold …` (and the plugin's `/vigil:vigil-loop`, …), read by `stop-gate` on
//! UserPromptSubmit from the prompt as typed, before the command expands. Only a prompt that
//! begins with one starts or cancels a loop, or holds the tests: a mention, a quote, a `<task-notification>` turn (background work ending),
//! or anything the agent writes never does. The commands' own `!` blocks only show the result.

use std::path::Path;

use crate::cli::hook::{HookInput, Specific, Wire};
use crate::cli::loop_args;
use crate::error::Error;
use crate::state::loop_state::StartedBy;
use crate::state::loops::{self};
use crate::state::project::{Project, SessionId};
use crate::state::session;
use crate::state::wakes;

/// What a prompt asks of vigil.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Command<'a> {
    /// `/vigil-loop ARGS`: the arguments as typed.
    Loop(&'a str),
    Cancel,
    /// `/vigil-hold ARGS` (SPEC §11): the human holds the tests.
    Hold(&'a str),
    /// Anything else: vigil does nothing.
    None,
}

/// The command a prompt begins with. The name must stand at the very start and end at
/// whitespace or the end of the prompt.
pub(crate) fn command_of(prompt: &str) -> Command<'_> {
    let Some(rest) = prompt.strip_prefix('/') else {
        return Command::None;
    };
    let rest = rest.strip_prefix("vigil:").unwrap_or(rest);
    let after = |name: &str| {
        rest.strip_prefix(name)
            .filter(|tail| tail.is_empty() || tail.starts_with(char::is_whitespace))
    };
    if let Some(args) = after("vigil-loop") {
        return Command::Loop(args.trim_start());
    }
    if after("vigil-cancel").is_some() {
        return Command::Cancel;
    }
    if let Some(args) = after("vigil-hold") {
        return Command::Hold(args.trim_start());
    }
    Command::None
}

/// What the hook prints for a UserPromptSubmit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum PromptOutput {
    /// Not vigil's business: nothing is printed.
    Nothing,
    /// Done: `context` goes to the model with the prompt, `message` to the human.
    Done { context: String, message: String },
    /// The command could not be done: the prompt is blocked, and the human reads why.
    Refused(String),
    /// Not a command, but the human must hear this (the engine cut the session's loop).
    Told(String),
}

impl PromptOutput {
    pub(crate) fn to_json(&self) -> Option<String> {
        self.wire().line()
    }

    /// The answer as the engines read it.
    pub(crate) fn wire(&self) -> Wire<'_> {
        match self {
            PromptOutput::Nothing => Wire::default(),
            PromptOutput::Done { context, message } => Wire {
                system_message: Some(message),
                hook_specific_output: Some(Specific {
                    hook_event_name: "UserPromptSubmit",
                    additional_context: Some(context),
                    ..Specific::default()
                }),
                ..Wire::default()
            },
            PromptOutput::Told(message) => Wire {
                system_message: Some(message),
                ..Wire::default()
            },
            PromptOutput::Refused(reason) => Wire {
                decision: Some("block"),
                reason: Some(reason),
                ..Wire::default()
            },
        }
    }

    /// This answer with `told` added to what the model reads with the prompt and to what the
    /// person reads. A refused prompt is left as it is: what it would be told comes with the
    /// next.
    fn with_told(self, told: &str) -> PromptOutput {
        match self {
            PromptOutput::Nothing => PromptOutput::Done {
                context: told.to_string(),
                message: told.to_string(),
            },
            PromptOutput::Done { context, message } => PromptOutput::Done {
                context: format!("{context}\n\n{told}"),
                message: format!("{message}\n{told}"),
            },
            PromptOutput::Told(message) => PromptOutput::Done {
                context: told.to_string(),
                message: format!("{message}\n{told}"),
            },
            refused @ PromptOutput::Refused(_) => refused,
        }
    }
}

/// A prompt hook's answer, the wakes it tells (done when the answer is written out, put back
/// when it is not: the alarm answered first), and a line for stderr.
pub(crate) struct Prompted {
    pub output: PromptOutput,
    pub woken: Vec<wakes::Claimed>,
    pub said: Option<String>,
}

/// The UserPromptSubmit hook: the human's `/vigil-loop` or `/vigil-cancel`; for any prompt, a
/// turn of the session's loop that the engine ended over the gate's block since the loop last
/// moved (read from the transcript's tail), recorded and told; and work that settled while no
/// waiter was live (SPEC §10), as context for the model. `config` is the hook's state
/// directory, or what is wrong with its flags. Input it cannot read lets the prompt through
/// (and is said on stderr): only a prompt that is plainly a vigil command is ever held up.
pub(crate) fn hook(
    config: Result<Option<&Path>, &Error>,
    input: &Result<HookInput, Error>,
) -> Prompted {
    let input = match input {
        Ok(input) => input,
        Err(e) => {
            return Prompted {
                output: PromptOutput::Nothing,
                woken: Vec::new(),
                said: Some(format!(
                    "{e}; the prompt goes on, and no loop was started or cancelled"
                )),
            };
        }
    };
    let told = engine_cut(config, input);
    let output = match (command_output(config, input), told) {
        (PromptOutput::Nothing, Some(told)) => PromptOutput::Told(told),
        (PromptOutput::Done { context, message }, Some(told)) => PromptOutput::Done {
            context,
            message: format!("{message}\n{told}"),
        },
        // Recorded already: said with the refusal, or it would never be said.
        (PromptOutput::Refused(reason), Some(told)) => {
            PromptOutput::Refused(format!("{reason}\n{told}"))
        }
        (output, _) => output,
    };
    // A prompt that is blocked hears no wakes: they come with the next.
    let woken = match output {
        PromptOutput::Refused(_) => Vec::new(),
        _ => prompt_wakes(config, input),
    };
    let output = match woken.is_empty() {
        true => output,
        false => output.with_told(&wakes::told(&woken)),
    };
    Prompted {
        output,
        woken,
        said: None,
    }
}

/// The wakes this prompt's session hears, when no waiter is live to deliver them.
fn prompt_wakes(config: Result<Option<&Path>, &Error>, input: &HookInput) -> Vec<wakes::Claimed> {
    let Ok(state_dir) = config else {
        return Vec::new();
    };
    let Some(session) = input
        .session_id
        .as_deref()
        .and_then(|id| SessionId::parse(id).ok())
    else {
        return Vec::new();
    };
    let project = Project::resolve(state_dir, input.cwd.as_deref()).for_reading();
    wakes::for_context(&project, &session)
}

/// What the engine's cut of this session's loop, if there was a new one, has the human hear.
fn engine_cut(config: Result<Option<&Path>, &Error>, input: &HookInput) -> Option<String> {
    let state_dir = config.ok()?;
    let transcript = input.transcript_path.as_deref()?;
    let session = SessionId::parse(input.session_id.as_deref()?).ok()?;
    // Looked up as a reader: a running loop's place is there already, and none is made.
    let project = Project::resolve(state_dir, input.cwd.as_deref()).for_reading();
    let cut = match session::peek(&project, &session) {
        Ok(Some(record)) => match &record.ralph {
            Some(state) => loops::engine_cut_of(&project, &session, state, transcript),
            None => Ok(None),
        },
        // No record at all, but the transcript holds the loop's blocks: the witness.
        Ok(None) => Ok(loops::witness_unrecorded(&project, &session, transcript)),
        Err(_) => Ok(None),
    };
    cut.unwrap_or_else(|e| {
        Some(format!(
            "vigil: {e}; a cut of this session's loop by the engine could not be recorded"
        ))
    })
}

/// The human's `/vigil-loop` or `/vigil-cancel`, nothing else.
fn command_output(config: Result<Option<&Path>, &Error>, input: &HookInput) -> PromptOutput {
    if command_of(input.prompt.as_deref().unwrap_or("")) == Command::None {
        return PromptOutput::Nothing;
    }
    match config {
        Ok(state_dir) => handle(&Project::resolve(state_dir, input.cwd.as_deref()), input),
        Err(e) => PromptOutput::Refused(format!(
            "vigil: config error: {e}; fix the stop-gate command of the UserPromptSubmit hook"
        )),
    }
}

/// Handles a UserPromptSubmit: starts or cancels the session's loop when the human's prompt
/// begins with a vigil command. Bad input blocks the prompt with the reason (only when the
/// prompt could be a command: a hook that cannot read its input otherwise lets it through, as
/// a prompt that is not vigil's must never be held up).
pub(crate) fn handle(project: &Project, input: &HookInput) -> PromptOutput {
    let prompt = input.prompt.as_deref().unwrap_or("");
    let command = command_of(prompt);
    if command == Command::None {
        return PromptOutput::Nothing;
    }
    let refused = |e: &dyn std::fmt::Display| PromptOutput::Refused(format!("vigil: {e}"));
    // A `cwd` that is no directory names no project: no loop is started for it (issue 44).
    if let Some(cwd) = input.cwd.as_deref()
        && !cwd.is_dir()
    {
        return refused(&format!(
            "the hook input's cwd {} is not a directory, so no loop can be tied to a project",
            crate::verdict::defang::field(&cwd.display().to_string())
        ));
    }
    let session = match input.session_id.as_deref().map(SessionId::parse) {
        Some(Ok(session)) => session,
        Some(Err(e)) => return refused(&e),
        None => {
            return refused(
                &"the prompt hook got no session_id, so no loop can be tied to this session",
            );
        }
    };
    match command {
        Command::Loop(raw) => {
            let words = loop_args::split_words(raw);
            let mut request = match loop_args::parse_start(&words, Some(raw)) {
                Ok(request) => request,
                Err(e) => return refused(&e),
            };
            if request.help {
                return refused(
                    &"usage: /vigil-loop PROMPT --max-iterations N --completion-promise TEXT",
                );
            }
            if request.next_session {
                return refused(
                    &"--next-session is for a terminal: a slash command's loop belongs to this session",
                );
            }
            match request.session.take() {
                Some(given) if given != session.as_str() => {
                    return refused(&format!(
                        "--session {given} is not this session ({session}); a slash command starts the loop of its own session"
                    ));
                }
                _ => {}
            }
            if request.state_dir.is_some() {
                return refused(
                    &"--state-dir belongs in the hook's settings, not in a slash command",
                );
            }
            match loops::begin(
                project,
                request,
                loops::For::Session(session),
                StartedBy::SlashCommand,
            ) {
                Ok(started) => {
                    let promise = started.state.completion_promise.clone();
                    PromptOutput::Done {
                        context: format!(
                            "{}\n\nFinish only by ending your reply with <promise>{promise}</promise> on its own last line, when it is completely true; if you need a human decision, end with a line `needs-decision: QUESTION` instead.",
                            started.told
                        ),
                        message: format!(
                            "vigil loop started: up to {} passes, ending on <promise>{promise}</promise> with every check passing",
                            started.state.max_iterations
                        ),
                    }
                }
                Err(e) => refused(&e),
            }
        }
        Command::Cancel => match loops::cancel(project, &session) {
            Ok(Some(loops::Cancelled::Lost(lost))) => PromptOutput::Done {
                context: "The vigil loop of this session is over: its record could not be read."
                    .into(),
                message: format!("vigil: {lost}; the loop is over, NOT verified"),
            },
            Ok(Some(loops::Cancelled::Loop(state))) => PromptOutput::Done {
                context: format!(
                    "The human cancelled the vigil loop of this session at pass {}/{}; it no longer feeds the task back.",
                    state.iteration, state.max_iterations
                ),
                message: format!(
                    "vigil loop cancelled at pass {}/{}: the work is NOT verified",
                    state.iteration, state.max_iterations
                ),
            },
            Ok(None) => PromptOutput::Done {
                context: "There is no running vigil loop in this session.".into(),
                message: "vigil: no running loop in this session".into(),
            },
            Err(e) => refused(&e),
        },
        Command::Hold(raw) => match hold(project, input, raw) {
            Ok(told) => PromptOutput::Done {
                context: format!(
                    "The human holds the tests that judge this work: {told}. Held files are the human's: do not edit, delete, skip or rename them, and add no runner configuration under them; new tests in new files are yours to add, but the Stop hook's check does not run them. If a held test is wrong, end your reply with a line `needs-decision: ` and say why."
                ),
                message: format!("vigil: {told}"),
            },
            Err(e) => refused(&e),
        },
        Command::None => PromptOutput::Nothing,
    }
}

/// `/vigil-hold [PATH...] [--at REV] [--baseline CMD]`: `stop-gate hold add`, from the human's
/// own prompt; paths are taken from the directory the session runs in, and none means what
/// the repository's `.vigil-hold` names.
fn hold(project: &Project, input: &HookInput, raw: &str) -> crate::Result<String> {
    use crate::Error;
    use crate::evidence::held;

    let words: Vec<String> = loop_args::split_words(raw)
        .into_iter()
        .map(|word| word.text)
        .collect();
    let mut at = None;
    let mut baseline = None;
    let mut paths = Vec::new();
    let mut words = words.into_iter();
    while let Some(word) = words.next() {
        let (flag, inline) = match word.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => {
                (flag.to_string(), Some(value.to_string()))
            }
            _ => (word.clone(), None),
        };
        let mut value = |name: &str| {
            inline
                .clone()
                .or_else(|| words.next())
                .ok_or_else(|| Error::usage(format!("{name} needs a value")))
        };
        match flag.as_str() {
            "--at" => at = Some(value("--at")?),
            "--baseline" => baseline = Some(value("--baseline")?),
            other if other.starts_with('-') => {
                return Err(Error::usage(format!(
                    "/vigil-hold takes paths, --at REV and --baseline CMD, not {other}"
                )));
            }
            _ => paths.push(word),
        }
    }
    let top = held::top(project)?;
    let here = input.cwd.clone().unwrap_or_else(|| project.dir.clone());
    let patterns = if paths.is_empty() {
        held::setting_patterns(project, at.as_deref())?
    } else {
        held::normalized(&top, &here, &paths)?
    };
    let added = held::add(project, &patterns, at.as_deref())?;
    let mut told = added.told();
    if let Some(command) = baseline {
        let recorded = crate::gate::held_check::record_baseline(
            project,
            &command,
            false,
            std::time::Duration::from_secs(300),
        )?;
        told.push_str(&format!("; {}", recorded.told));
    }
    Ok(told)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_prompt_that_begins_with_the_command_is_one() {
        assert_eq!(
            command_of("/vigil-loop Fix it --max-iterations 3"),
            Command::Loop("Fix it --max-iterations 3")
        );
        assert_eq!(command_of("/vigil:vigil-loop  x"), Command::Loop("x"));
        assert_eq!(command_of("/vigil-loop"), Command::Loop(""));
        assert_eq!(command_of("/vigil-cancel"), Command::Cancel);
        assert_eq!(command_of("/vigil:vigil-cancel please"), Command::Cancel);
        assert_eq!(command_of("/vigil-hold tests/"), Command::Hold("tests/"));
        assert_eq!(command_of("/vigil:vigil-hold"), Command::Hold(""));
        for not in [
            "please run /vigil-loop x",
            " /vigil-loop x",
            "/vigil-loops x",
            "/vigil-cancelled",
            "/vigil-holds",
            "please /vigil-hold tests",
            "<task-notification>/vigil-cancel</task-notification>",
            "`/vigil-loop x`",
            "/other:vigil-loop x",
            "",
        ] {
            assert_eq!(command_of(not), Command::None, "{not:?}");
        }
    }
}
