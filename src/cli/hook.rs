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
pub(crate) struct Wire<'a> {
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
    pub(crate) fn line(&self) -> Option<String> {
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
pub(crate) struct Specific<'a> {
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
pub(crate) const MAX_HOOK_INPUT: u64 = 16 * 1024 * 1024;

/// The fields vigil uses, read by serde's derive (SPEC §2): every one may be absent, and
/// `null` counts as absent, since both engines send `null` for fields they do not have.
/// Unknown fields are ignored; a known field of the wrong type is malformed, and the error
/// names it. Each field's reader is in [`field`].
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(default)]
pub struct HookInput {
    #[serde(deserialize_with = "field::text")]
    pub session_id: Option<String>,
    #[serde(deserialize_with = "field::path")]
    pub transcript_path: Option<PathBuf>,
    #[serde(deserialize_with = "field::path")]
    pub cwd: Option<PathBuf>,
    #[serde(deserialize_with = "field::text")]
    pub hook_event_name: Option<String>,
    #[serde(deserialize_with = "field::flag")]
    pub stop_hook_active: Option<bool>,
    #[serde(deserialize_with = "field::text")]
    pub last_assistant_message: Option<String>,
    /// SessionStart: `startup`, `resume`, `clear`, `compact`, `fork`.
    #[serde(deserialize_with = "field::text")]
    pub source: Option<String>,
    /// SessionEnd: why the session ended.
    #[serde(deserialize_with = "field::text")]
    pub reason: Option<String>,
    /// Codex only.
    #[serde(deserialize_with = "field::text")]
    pub turn_id: Option<String>,
    /// UserPromptSubmit: the prompt as the human typed it (a slash command before expansion).
    #[serde(deserialize_with = "field::text")]
    pub prompt: Option<String>,
    /// Stop and SubagentStop: the background work Claude Code lists, each entry an object with a
    /// string `status` (any other entry is left out, never a reason to deny); `None` when
    /// absent.
    #[serde(deserialize_with = "field::tasks")]
    pub background_tasks: Option<Vec<BackgroundTask>>,
    /// SubagentStop: which subagent stopped, its type (`""` for Claude Code's own compaction),
    /// and its own transcript.
    #[serde(deserialize_with = "field::text")]
    pub agent_id: Option<String>,
    #[serde(deserialize_with = "field::text")]
    pub agent_type: Option<String>,
    #[serde(deserialize_with = "field::path")]
    pub agent_transcript_path: Option<PathBuf>,
    /// StopFailure: the failed turn's error category (`rate_limit`, `server_error`, …).
    #[serde(deserialize_with = "field::text")]
    pub error: Option<String>,
    /// StopFailure: detail of the error, as text (a JSON value other than a string is kept as
    /// its compact JSON: the record of a failure is never lost to a type).
    #[serde(deserialize_with = "field::any_as_text")]
    pub error_details: Option<String>,
    /// PreToolUse: the tool about to run, and its input (an object).
    #[serde(deserialize_with = "field::text")]
    pub tool_name: Option<String>,
    #[serde(deserialize_with = "field::object")]
    pub tool_input: Option<Value>,
    /// ConfigChange: the settings file that changed (`source` says which kind). Read only for
    /// ConfigChange, and leniently, as it always was: a field of another type makes no other
    /// event's input malformed.
    #[serde(deserialize_with = "field::path_if_text")]
    pub file_path: Option<PathBuf>,
}

/// One entry of `background_tasks` (Claude Code 2.1.332): a shell, a subagent, a Monitor, a
/// workflow, or a kind vigil does not know (its `type` is a label, or the task's raw kind). An
/// entry that is not an object, or has no string `status`, is left out; every other field is
/// taken when it is a string (SPEC §2: a running or pending entry holds a declaration whatever
/// its type).
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize)]
pub struct BackgroundTask {
    #[serde(default, deserialize_with = "field::text_or_none")]
    pub id: Option<String>,
    #[serde(rename = "type", default, deserialize_with = "field::kind")]
    pub kind: TaskKind,
    pub status: String,
    /// Taken when it is a string, as the two below.
    #[serde(default, deserialize_with = "field::text_or_none")]
    pub description: Option<String>,
    /// A shell's command.
    #[serde(default, deserialize_with = "field::text_or_none")]
    pub command: Option<String>,
    /// A subagent's type.
    #[serde(default, deserialize_with = "field::text_or_none")]
    pub agent_type: Option<String>,
    /// A workflow's name.
    #[serde(default, deserialize_with = "field::text_or_none")]
    pub name: Option<String>,
    /// A Monitor's or an MCP task's tool.
    #[serde(default, deserialize_with = "field::text_or_none")]
    pub tool: Option<String>,
}

/// A task's `type`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum TaskKind {
    Shell,
    Subagent,
    /// Any other label (`monitor`, `workflow`, a raw kind), `""` when it has none.
    Other(String),
    #[default]
    Unnamed,
}

impl BackgroundTask {
    /// Whether the task is still going (`running`, or `pending` before it starts).
    pub(crate) fn is_running(&self) -> bool {
        matches!(self.status.as_str(), "running" | "pending")
    }
}

/// How each field of hook input is read. Each takes the field's JSON value and keeps what
/// SPEC §2 keeps; an error says only what the field must be, and [`HookInput::parse`] puts
/// the field's name before it.
mod field {
    use std::path::PathBuf;

    use serde::de::{Deserialize, Deserializer, Error};
    use serde_json::Value;

    use super::{BackgroundTask, TaskKind, json_type};

    fn wrong<E: Error>(expected: &str, got: &Value) -> E {
        E::custom(format_args!("must be {expected}, not {}", json_type(got)))
    }

    pub(super) fn text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        match Value::deserialize(d)? {
            Value::Null => Ok(None),
            Value::String(s) => Ok(Some(s)),
            other => Err(wrong("a string", &other)),
        }
    }

    pub(super) fn path<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PathBuf>, D::Error> {
        Ok(text(d)?.map(PathBuf::from))
    }

    pub(super) fn flag<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
        match Value::deserialize(d)? {
            Value::Null => Ok(None),
            Value::Bool(b) => Ok(Some(b)),
            other => Err(wrong("a boolean", &other)),
        }
    }

    pub(super) fn object<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
        match Value::deserialize(d)? {
            Value::Null => Ok(None),
            value @ Value::Object(_) => Ok(Some(value)),
            other => Err(wrong("an object", &other)),
        }
    }

    /// An array whose entries of a known shape are kept; an entry of another shape is left out.
    pub(super) fn tasks<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Vec<BackgroundTask>>, D::Error> {
        match Value::deserialize(d)? {
            Value::Null => Ok(None),
            Value::Array(entries) => Ok(Some(
                entries
                    .into_iter()
                    .filter(Value::is_object)
                    .filter_map(|entry| serde_json::from_value(entry).ok())
                    .collect(),
            )),
            other => Err(wrong("an array", &other)),
        }
    }

    /// A task's `type`: its label when it is a string, else unnamed (never a reason to leave
    /// the task out: a running task holds whatever its type).
    pub(super) fn kind<'de, D: Deserializer<'de>>(d: D) -> Result<TaskKind, D::Error> {
        Ok(match Value::deserialize(d)? {
            Value::String(s) if s == "shell" => TaskKind::Shell,
            Value::String(s) if s == "subagent" => TaskKind::Subagent,
            Value::String(s) if !s.is_empty() => TaskKind::Other(s),
            _ => TaskKind::Unnamed,
        })
    }

    /// Any value: a string as it is, another value as its compact JSON, `null` as absent.
    pub(super) fn any_as_text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        Ok(match Value::deserialize(d)? {
            Value::Null => None,
            Value::String(s) => Some(s),
            other => Some(other.to_string()),
        })
    }

    /// A string, and anything else as absent.
    pub(super) fn text_or_none<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<String>, D::Error> {
        Ok(match Value::deserialize(d)? {
            Value::String(s) => Some(s),
            _ => None,
        })
    }

    pub(super) fn path_if_text<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<PathBuf>, D::Error> {
        Ok(text_or_none(d)?.map(PathBuf::from))
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
    PostToolUse,
    ConfigChange,
    Other(String),
}

impl HookEvent {
    /// Every event vigil handles.
    pub(crate) const HANDLED: [HookEvent; 10] = [
        HookEvent::Stop,
        HookEvent::SubagentStop,
        HookEvent::SessionStart,
        HookEvent::SessionEnd,
        HookEvent::PreCompact,
        HookEvent::UserPromptSubmit,
        HookEvent::StopFailure,
        HookEvent::PreToolUse,
        HookEvent::PostToolUse,
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
            HookEvent::PostToolUse => "PostToolUse",
            HookEvent::ConfigChange => "ConfigChange",
            HookEvent::Other(name) => name,
        }
    }

    /// The event of this name.
    pub(crate) fn named(name: &str) -> HookEvent {
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
pub(crate) struct Hook {
    pub event: Option<HookEvent>,
    pub input: Result<HookInput>,
}

impl Hook {
    /// Reads standard input, known not to be a terminal (a hook's caller checked), without
    /// asking again: one system call fewer on the Stop's path.
    pub(crate) fn read_stdin() -> Hook {
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
    pub(crate) fn parse(bytes: &[u8]) -> Hook {
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
            input: HookInput::of(Value::Object(object)),
        }
    }
}

impl HookInput {
    /// Reads and parses hook input from a source, refusing more than 16 MiB.
    pub(crate) fn read(source: &Source) -> Result<HookInput> {
        let bytes = source.read_capped(MAX_HOOK_INPUT, "hook input")?;
        HookInput::parse(&bytes)
    }

    /// Parses hook input (as [`Hook::parse`]).
    pub fn parse(bytes: &[u8]) -> Result<HookInput> {
        HookInput::of(Value::Object(object_of(bytes)?))
    }

    /// The fields of a hook's JSON object. Read from the parsed value, not the text: a
    /// field's error has no line and column, and a key given twice counts once, its last.
    /// Taken by value: each string moves into its field.
    fn of(object: Value) -> Result<HookInput> {
        serde_path_to_error::deserialize(object)
            .map_err(|e| Error::input(format!("hook input field `{}` {}", e.path(), e.inner())))
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

/// `a number`, `an array`: the JSON type of a value, for messages.
pub(crate) fn json_type(value: &Value) -> &'static str {
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
    fn a_key_given_twice_counts_once_its_last() {
        let input = HookInput::parse(br#"{"session_id":7,"session_id":"s"}"#).unwrap();
        assert_eq!(input.session_id.as_deref(), Some("s"));
    }

    #[test]
    fn a_field_of_the_wrong_type_is_named_without_a_position() {
        for (json, message) in [
            (
                &br#"{"cwd":["/"]}"#[..],
                "`cwd` must be a string, not an array",
            ),
            (
                br#"{"tool_input":"ls"}"#,
                "`tool_input` must be an object, not a string",
            ),
            (
                br#"{"background_tasks":7}"#,
                "`background_tasks` must be an array, not a number",
            ),
        ] {
            let err = HookInput::parse(json).unwrap_err().to_string();
            assert_eq!(err, format!("hook input field {message}"));
        }
        // Lenient fields: `file_path` of another type is absent, `error_details` is text.
        let input = HookInput::parse(br#"{"file_path":7,"error_details":[1]}"#).unwrap();
        assert_eq!(input.file_path, None);
        assert_eq!(input.error_details.as_deref(), Some("[1]"));
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
    fn background_tasks_without_a_status_are_left_out_and_any_type_is_kept() {
        let input = HookInput::parse(
            br#"{"background_tasks":[7,{"id":"b1","type":"shell","status":"running","command":"npm test"},{"id":"x","type":"cron","status":"running"},{"type":"shell"},{"id":"a1","type":"subagent","status":"completed","description":3},{"status":"pending","type":7}]}"#,
        )
        .unwrap();
        let tasks = input.background_tasks.unwrap();
        assert_eq!(tasks.len(), 4, "{tasks:?}");
        assert_eq!(tasks[0].command.as_deref(), Some("npm test"));
        assert!(tasks[0].is_running());
        assert_eq!(tasks[1].kind, TaskKind::Other("cron".into()));
        assert!(tasks[1].is_running());
        assert!(!tasks[2].is_running());
        assert_eq!(tasks[2].description, None);
        assert_eq!((&tasks[3].kind, &tasks[3].id), (&TaskKind::Unnamed, &None));
        assert!(tasks[3].is_running());
        let err = HookInput::parse(br#"{"background_tasks":{"id":"b1"}}"#).unwrap_err();
        assert!(err.to_string().contains("must be an array"), "{err}");
    }

    #[test]
    fn background_tasks_are_objects() {
        // serde's other form of a struct (an array) is another shape; a type of serde's map
        // form of an enum is a type vigil does not know.
        let input = HookInput::parse(
            br#"{"background_tasks":[["b1","shell","running"],{"id":"b2","type":{"shell":null},"status":"running"}]}"#,
        )
        .unwrap();
        let tasks = input.background_tasks.unwrap();
        assert_eq!(tasks.len(), 1);
        assert_eq!(tasks[0].kind, TaskKind::Unnamed);
    }

    #[test]
    fn numbers_handed_on_keep_their_text() {
        // As serde_json passes a value on: exact where its text is not what an i64, a u64 or
        // an f64 would print (`-0` becomes `0`, as in any value serde_json passes on).
        let input = HookInput::parse(
            br#"{"error_details":1.50,"tool_input":{"n":123456789012345678901234567890}}"#,
        )
        .unwrap();
        assert_eq!(input.error_details.as_deref(), Some("1.50"));
        assert_eq!(
            input.tool_input.unwrap().to_string(),
            r#"{"n":123456789012345678901234567890}"#
        );
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
