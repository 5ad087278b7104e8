//! Hook input: the JSON Claude Code and Codex send on stdin (SPEC §2), read once, at the door,
//! into a typed struct. Nothing past this module sees raw hook JSON.

use std::path::PathBuf;

use serde_json::{Map, Value};

use crate::cli::input::Source;
use crate::error::{Error, Result};

/// What a hook prints (SPEC §2), for every event and every answer: each field left out when
/// absent, serialised once, by [`Wire::line`]. Every answer is built as one: the Stop's
/// (`gate::StopOutput`), the prompt's (`slash::PromptOutput`), the guard's and the settings
/// hook's.
#[derive(Default, serde::Serialize)]
pub struct Wire<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'a str>,
    #[serde(rename = "systemMessage", skip_serializing_if = "Option::is_none")]
    pub system_message: Option<&'a str>,
    #[serde(rename = "hookSpecificOutput", skip_serializing_if = "Option::is_none")]
    pub hook_specific_output: Option<Specific<'a>>,
    /// Claude Code's desktop notification (OSC 9 and 777), for the person.
    #[serde(rename = "terminalSequence", skip_serializing_if = "Option::is_none")]
    pub terminal_sequence: Option<&'a str>,
}

impl Wire<'_> {
    /// The JSON line for stdout, or nothing when the answer says nothing (a silent allow).
    pub fn line(&self) -> Option<String> {
        let silent = self.decision.is_none()
            && self.reason.is_none()
            && self.system_message.is_none()
            && self.hook_specific_output.is_none()
            && self.terminal_sequence.is_none();
        (!silent).then(|| serde_json::to_string(self).expect("a hook's answer serializes"))
    }
}

/// `hookSpecificOutput`: context added for the model, or a tool call's permission.
#[derive(Default, serde::Serialize)]
pub struct Specific<'a> {
    #[serde(rename = "hookEventName")]
    pub hook_event_name: &'static str,
    #[serde(rename = "additionalContext", skip_serializing_if = "Option::is_none")]
    pub additional_context: Option<&'a str>,
    #[serde(rename = "permissionDecision", skip_serializing_if = "Option::is_none")]
    pub permission_decision: Option<&'static str>,
    #[serde(
        rename = "permissionDecisionReason",
        skip_serializing_if = "Option::is_none"
    )]
    pub permission_decision_reason: Option<&'a str>,
}

/// Hook input larger than this is malformed (SPEC §2).
pub const MAX_HOOK_INPUT: u64 = 16 * 1024 * 1024;

/// The fields vigil uses. Every one may be absent; a binary that needs one says so.
/// `null` counts as absent, since both engines send `null` for fields they do not have.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HookInput {
    pub session_id: Option<String>,
    pub transcript_path: Option<PathBuf>,
    pub cwd: Option<PathBuf>,
    pub hook_event_name: Option<String>,
    pub stop_hook_active: Option<bool>,
    pub last_assistant_message: Option<String>,
    /// SessionStart: `startup`, `resume`, `clear`, `compact`, `fork`.
    pub source: Option<String>,
    /// SessionEnd: why the session ended.
    pub reason: Option<String>,
    /// Codex only.
    pub turn_id: Option<String>,
    /// UserPromptSubmit: the prompt as the human typed it (a slash command before expansion).
    pub prompt: Option<String>,
    /// Stop and SubagentStop: the background work Claude Code lists, entries of a shape vigil
    /// knows only (any other entry is left out, never a reason to deny); `None` when absent.
    pub background_tasks: Option<Vec<BackgroundTask>>,
    /// SubagentStop: which subagent stopped, its type (`""` for Claude Code's own compaction),
    /// and its own transcript.
    pub agent_id: Option<String>,
    pub agent_type: Option<String>,
    pub agent_transcript_path: Option<PathBuf>,
    /// StopFailure: the failed turn's error category (`rate_limit`, `server_error`, …).
    pub error: Option<String>,
    /// StopFailure: detail of the error, as text (a JSON value other than a string is kept as
    /// its compact JSON: the record of a failure is never lost to a type).
    pub error_details: Option<String>,
    /// PreToolUse: the tool about to run, and its input (an object).
    pub tool_name: Option<String>,
    pub tool_input: Option<Value>,
    /// ConfigChange: the settings file that changed (`source` says which kind).
    pub file_path: Option<PathBuf>,
}

/// One entry of `background_tasks` (Claude Code 2.1.332): a shell or a subagent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackgroundTask {
    pub id: String,
    pub kind: TaskKind,
    pub status: String,
    pub description: Option<String>,
    /// A shell's command.
    pub command: Option<String>,
    /// A subagent's type.
    pub agent_type: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskKind {
    Shell,
    Subagent,
}

impl BackgroundTask {
    /// Whether the task is still going (`running`, or `pending` before it starts).
    pub fn is_running(&self) -> bool {
        matches!(self.status.as_str(), "running" | "pending")
    }

    /// The entry if it has the shape vigil knows: an object with a string `id`, a `type` of
    /// `shell` or `subagent`, and a string `status`; the other fields are taken when they are
    /// strings.
    fn from_value(value: &Value) -> Option<BackgroundTask> {
        let object = value.as_object()?;
        let text = |name: &str| object.get(name).and_then(Value::as_str).map(str::to_string);
        let kind = match object.get("type")?.as_str()? {
            "shell" => TaskKind::Shell,
            "subagent" => TaskKind::Subagent,
            _ => return None,
        };
        Some(BackgroundTask {
            id: text("id")?,
            kind,
            status: text("status")?,
            description: text("description"),
            command: text("command"),
            agent_type: text("agent_type"),
        })
    }
}

/// The hook events vigil handles, and the rest by name. Adding one: DEVELOPMENT.md, "A new
/// hook event".
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HookEvent {
    Stop,
    SubagentStop,
    SessionStart,
    SessionEnd,
    PreCompact,
    UserPromptSubmit,
    StopFailure,
    PreToolUse,
    ConfigChange,
    Other(String),
}

impl HookEvent {
    /// Every event vigil handles.
    pub const HANDLED: [HookEvent; 9] = [
        HookEvent::Stop,
        HookEvent::SubagentStop,
        HookEvent::SessionStart,
        HookEvent::SessionEnd,
        HookEvent::PreCompact,
        HookEvent::UserPromptSubmit,
        HookEvent::StopFailure,
        HookEvent::PreToolUse,
        HookEvent::ConfigChange,
    ];

    /// The event's name, as the engines send it in `hook_event_name` and key it in settings.
    pub fn name(&self) -> &str {
        match self {
            HookEvent::Stop => "Stop",
            HookEvent::SubagentStop => "SubagentStop",
            HookEvent::SessionStart => "SessionStart",
            HookEvent::SessionEnd => "SessionEnd",
            HookEvent::PreCompact => "PreCompact",
            HookEvent::UserPromptSubmit => "UserPromptSubmit",
            HookEvent::StopFailure => "StopFailure",
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::ConfigChange => "ConfigChange",
            HookEvent::Other(name) => name,
        }
    }

    /// The event of this name.
    pub fn named(name: &str) -> HookEvent {
        HookEvent::HANDLED
            .into_iter()
            .find(|event| event.name() == name)
            .unwrap_or_else(|| HookEvent::Other(name.to_string()))
    }
}

/// A hook's stdin, read once: the event it names, and its fields. The event is known whenever
/// the input is a JSON object naming one, even when a field of it has the wrong type, so that
/// each event's handler decides what input it cannot read means (a gate denies, a prompt
/// goes on).
#[derive(Debug)]
pub struct Hook {
    pub event: Option<HookEvent>,
    pub input: Result<HookInput>,
}

impl Hook {
    /// Reads standard input, known not to be a terminal (a hook's caller checked), without
    /// asking again: one system call fewer on the Stop's path.
    pub fn read_stdin() -> Hook {
        match crate::sys::files::read_capped(
            std::io::stdin().lock(),
            MAX_HOOK_INPUT,
            "hook input",
            "-".as_ref(),
        ) {
            Ok(bytes) => Hook::parse(&bytes),
            Err(e) => Hook {
                event: None,
                input: Err(Error::Input(e.to_string())),
            },
        }
    }

    /// Parses hook input once. Malformed (SPEC §2): empty, over 16 MiB, not UTF-8, not JSON,
    /// not an object, or a known field of the wrong type. Unknown fields are ignored.
    pub fn parse(bytes: &[u8]) -> Hook {
        let object = match object_of(bytes) {
            Ok(object) => object,
            Err(e) => {
                return Hook {
                    event: None,
                    input: Err(e),
                };
            }
        };
        let event = object
            .get("hook_event_name")
            .and_then(Value::as_str)
            .map(HookEvent::named);
        Hook {
            event,
            input: HookInput::of(&object),
        }
    }
}

impl HookInput {
    /// Reads and parses hook input from a source, refusing more than 16 MiB.
    pub fn read(source: &Source) -> Result<HookInput> {
        let bytes = source.read_capped(MAX_HOOK_INPUT, "hook input")?;
        HookInput::parse(&bytes)
    }

    /// Parses hook input (as [`Hook::parse`]).
    pub fn parse(bytes: &[u8]) -> Result<HookInput> {
        HookInput::of(&object_of(bytes)?)
    }

    /// The fields of a hook's JSON object.
    fn of(object: &Map<String, Value>) -> Result<HookInput> {
        Ok(HookInput {
            session_id: string_field(object, "session_id")?,
            transcript_path: string_field(object, "transcript_path")?.map(PathBuf::from),
            cwd: string_field(object, "cwd")?.map(PathBuf::from),
            hook_event_name: string_field(object, "hook_event_name")?,
            stop_hook_active: bool_field(object, "stop_hook_active")?,
            last_assistant_message: string_field(object, "last_assistant_message")?,
            source: string_field(object, "source")?,
            reason: string_field(object, "reason")?,
            turn_id: string_field(object, "turn_id")?,
            prompt: string_field(object, "prompt")?,
            background_tasks: tasks_field(object, "background_tasks")?,
            agent_id: string_field(object, "agent_id")?,
            agent_type: string_field(object, "agent_type")?,
            agent_transcript_path: string_field(object, "agent_transcript_path")?
                .map(PathBuf::from),
            error: string_field(object, "error")?,
            error_details: match object.get("error_details") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => Some(s.clone()),
                Some(other) => Some(other.to_string()),
            },
            tool_name: string_field(object, "tool_name")?,
            tool_input: match object.get("tool_input") {
                None | Some(Value::Null) => None,
                Some(value @ Value::Object(_)) => Some(value.clone()),
                Some(other) => return Err(wrong_type("tool_input", "an object", other)),
            },
            // Read only for ConfigChange, and leniently, as it always was: a field of another
            // type makes no other event's input malformed.
            file_path: object
                .get("file_path")
                .and_then(Value::as_str)
                .map(PathBuf::from),
        })
    }

    pub fn event(&self) -> Option<HookEvent> {
        self.hook_event_name.as_deref().map(HookEvent::named)
    }
}

/// Hook input as a JSON object, or why it is malformed.
fn object_of(bytes: &[u8]) -> Result<Map<String, Value>> {
    if bytes.len() as u64 > MAX_HOOK_INPUT {
        return Err(Error::input(
            "hook input is larger than 16 MiB; refusing to read it",
        ));
    }
    let text = std::str::from_utf8(bytes).map_err(|e| {
        Error::input(format!(
            "hook input is not valid UTF-8 (bad byte at offset {})",
            e.valid_up_to()
        ))
    })?;
    if text.trim().is_empty() {
        return Err(Error::input(
            "hook input is empty; a hook expects the event's JSON on stdin",
        ));
    }
    let value: Value = serde_json::from_str(text)
        .map_err(|e| Error::input(format!("hook input is not JSON: {e}")))?;
    match value {
        Value::Object(object) => Ok(object),
        other => Err(Error::input(format!(
            "hook input is {}, not a JSON object",
            json_type(&other)
        ))),
    }
}

fn string_field(object: &Map<String, Value>, name: &str) -> Result<Option<String>> {
    match object.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(wrong_type(name, "a string", other)),
    }
}

/// An array whose entries of a known shape are kept; an entry of another shape is left out.
fn tasks_field(object: &Map<String, Value>, name: &str) -> Result<Option<Vec<BackgroundTask>>> {
    match object.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(entries)) => Ok(Some(
            entries
                .iter()
                .filter_map(BackgroundTask::from_value)
                .collect(),
        )),
        Some(other) => Err(wrong_type(name, "an array", other)),
    }
}

fn bool_field(object: &Map<String, Value>, name: &str) -> Result<Option<bool>> {
    match object.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(other) => Err(wrong_type(name, "a boolean", other)),
    }
}

fn wrong_type(name: &str, expected: &str, got: &Value) -> Error {
    Error::input(format!(
        "hook input field `{name}` must be {expected}, not {}",
        json_type(got)
    ))
}

/// `a number`, `an array`: the JSON type of a value, for messages.
pub fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_fields_are_ignored() {
        let input = HookInput::parse(br#"{"session_id":"s","whatever":[1,{"x":2}]}"#).unwrap();
        assert_eq!(input.session_id.as_deref(), Some("s"));
    }

    #[test]
    fn null_fields_count_as_absent() {
        let input =
            HookInput::parse(br#"{"transcript_path":null,"last_assistant_message":null}"#).unwrap();
        assert_eq!(input, HookInput::default());
    }

    #[test]
    fn known_field_of_the_wrong_type_is_malformed() {
        let err = HookInput::parse(br#"{"stop_hook_active":"yes"}"#).unwrap_err();
        assert_eq!(
            err.to_string(),
            "hook input field `stop_hook_active` must be a boolean, not a string"
        );
        let err = HookInput::parse(br#"{"session_id":7}"#).unwrap_err();
        assert!(
            err.to_string()
                .contains("`session_id` must be a string, not a number")
        );
    }

    #[test]
    fn input_that_is_not_an_object_is_malformed() {
        let err = HookInput::parse(b"[1,2]").unwrap_err();
        assert_eq!(err.to_string(), "hook input is an array, not a JSON object");
    }

    #[test]
    fn input_over_16_mib_is_malformed() {
        let big = vec![b' '; MAX_HOOK_INPUT as usize + 1];
        assert!(
            HookInput::parse(&big)
                .unwrap_err()
                .to_string()
                .contains("16 MiB")
        );
    }

    #[test]
    fn non_utf8_input_is_malformed() {
        let err = HookInput::parse(b"{\"cwd\":\"\xff\"}").unwrap_err();
        assert!(err.to_string().contains("not valid UTF-8"), "{err}");
    }

    #[test]
    fn background_tasks_of_an_unknown_shape_are_left_out() {
        let input = HookInput::parse(
            br#"{"background_tasks":[7,{"id":"b1","type":"shell","status":"running","command":"npm test"},{"id":"x","type":"cron","status":"running"},{"type":"shell","status":"running"},{"id":"a1","type":"subagent","status":"completed","description":3}]}"#,
        )
        .unwrap();
        let tasks = input.background_tasks.unwrap();
        assert_eq!(tasks.len(), 2, "{tasks:?}");
        assert_eq!(tasks[0].command.as_deref(), Some("npm test"));
        assert!(tasks[0].is_running());
        assert!(!tasks[1].is_running());
        assert_eq!(tasks[1].description, None);
        let err = HookInput::parse(br#"{"background_tasks":{"id":"b1"}}"#).unwrap_err();
        assert!(err.to_string().contains("must be an array"), "{err}");
    }

    #[test]
    fn error_details_of_any_type_are_kept_as_text() {
        let input =
            HookInput::parse(br#"{"error":"rate_limit","error_details":{"retry_after":30}}"#)
                .unwrap();
        assert_eq!(input.error.as_deref(), Some("rate_limit"));
        assert_eq!(
            input.error_details.as_deref(),
            Some(r#"{"retry_after":30}"#)
        );
    }

    #[test]
    fn event_names_map_to_events() {
        let input = HookInput::parse(br#"{"hook_event_name":"PreCompact"}"#).unwrap();
        assert_eq!(input.event(), Some(HookEvent::PreCompact));
        for event in HookEvent::HANDLED {
            assert_eq!(HookEvent::named(event.name()), event);
        }
        assert_eq!(
            HookEvent::named("Notification"),
            HookEvent::Other("Notification".into())
        );
    }

    #[test]
    fn the_event_is_read_with_the_input_even_when_a_field_is_malformed() {
        let hook = Hook::parse(br#"{"hook_event_name":"ConfigChange","session_id":7}"#);
        assert_eq!(hook.event, Some(HookEvent::ConfigChange));
        assert!(hook.input.is_err());
        let hook = Hook::parse(b"not json");
        assert_eq!(hook.event, None);
        assert!(hook.input.is_err());
    }

    #[test]
    fn an_answer_that_says_nothing_prints_nothing() {
        assert_eq!(Wire::default().line(), None);
        let told = Wire {
            terminal_sequence: Some("x"),
            ..Wire::default()
        };
        assert_eq!(told.line().unwrap(), r#"{"terminalSequence":"x"}"#);
        let denied = Wire {
            hook_specific_output: Some(Specific {
                hook_event_name: "PreToolUse",
                permission_decision: Some("deny"),
                permission_decision_reason: Some("r"),
                ..Specific::default()
            }),
            ..Wire::default()
        };
        assert_eq!(
            denied.line().unwrap(),
            r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"r"}}"#
        );
    }
}
