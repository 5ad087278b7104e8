//! The Stop hook (SPEC §4), run through the real stop-gate on a hook payload for a session,
//! and the UserPromptSubmit hook beside it.

use std::path::Path;

use serde_json::{Value, json};

use super::{Project, assert_valid, read_fixture, spawn_fed, stop_gate, vigil_process};

/// What a Stop hook run printed.
pub struct Stop {
    pub json: Option<Value>,
}

impl Stop {
    pub fn blocked(&self) -> bool {
        self.json.as_ref().is_some_and(|j| j["decision"] == "block")
    }

    pub fn reason(&self) -> String {
        self.json
            .as_ref()
            .and_then(|j| j["reason"].as_str())
            .unwrap_or("")
            .to_string()
    }

    /// The reason without the loop's closing line, which must be there (SPEC §4): what the
    /// check said, and the loop's prompt.
    pub fn task(&self) -> String {
        let reason = self.reason();
        let (task, finish) = reason
            .rsplit_once("\n\n")
            .unwrap_or_else(|| panic!("no finish line: {reason:?}"));
        assert!(
            finish.starts_with("vigil loop ") && finish.contains("finish only by ending with"),
            "{reason:?}"
        );
        task.to_string()
    }

    pub fn system_message(&self) -> String {
        self.json
            .as_ref()
            .and_then(|j| j["systemMessage"].as_str())
            .unwrap_or("")
            .to_string()
    }

    pub fn silent_allow(&self) -> bool {
        self.json.is_none()
    }

    /// The stop was blocked, and its reason says `text`.
    #[track_caller]
    pub fn assert_blocked_saying(&self, text: &str) {
        assert!(self.blocked(), "not blocked: {:?}", self.json);
        assert!(self.reason().contains(text), "{}", self.reason());
    }

    /// The stop was blocked, and its reason begins with `prefix`: the reason.
    #[track_caller]
    pub fn assert_blocked_starting(&self, prefix: &str) -> String {
        assert!(self.blocked(), "not blocked: {:?}", self.json);
        starting(self.reason(), prefix)
    }

    /// The stop was blocked, and what comes before the loop's closing line ([`Stop::task`])
    /// begins with `prefix`: that task.
    #[track_caller]
    pub fn assert_task_starting(&self, prefix: &str) -> String {
        assert!(self.blocked(), "not blocked: {:?}", self.json);
        starting(self.task(), prefix)
    }

    /// The stop was blocked, its reason closed by the loop's line ([`Stop::task`]), and what
    /// comes before that line says `text`.
    #[track_caller]
    pub fn assert_task_saying(&self, text: &str) {
        assert!(self.blocked(), "not blocked: {:?}", self.json);
        let task = self.task();
        assert!(task.contains(text), "{text:?} is not in: {task}");
    }

    /// The stop was let through (else the test fails with the reason it was not).
    #[track_caller]
    pub fn assert_allowed(&self) {
        assert!(!self.blocked(), "{}", self.reason());
    }

    /// The stop was let through, and the note for the human says `text`.
    #[track_caller]
    pub fn assert_allowed_saying(&self, text: &str) {
        assert!(!self.blocked(), "blocked: {:?}", self.json);
        let message = self.system_message();
        assert!(message.contains(text), "{text:?} is not in: {message}");
    }
}

/// `said`, which must begin with `prefix`.
#[track_caller]
fn starting(said: String, prefix: &str) -> String {
    super::assert_text(super::Holds::StartsWith, &said, prefix, None);
    said
}

/// What a Stop hook printed (its stdout one JSON object), without the checks of [`run_stop`].
pub fn stop_of(out: &std::process::Output) -> Stop {
    Stop {
        json: Some(serde_json::from_slice(&out.stdout).unwrap()),
    }
}

/// The Claude Code Stop sample for `session` in the project in `dir`, saying `message` (none:
/// the field is absent), with no transcript.
pub fn stop_payload(dir: &Path, session: &str, message: Option<&str>) -> Value {
    let mut payload: Value =
        serde_json::from_str(&read_fixture("samples/claude-stop.json")).unwrap();
    payload["session_id"] = json!(session);
    payload["cwd"] = json!(dir);
    payload["transcript_path"] = Value::Null;
    match message {
        Some(text) => payload["last_assistant_message"] = json!(text),
        None => {
            payload
                .as_object_mut()
                .unwrap()
                .remove("last_assistant_message");
        }
    }
    payload
}

/// Runs the Stop hook in `dir` with `args` on `stdin`, its environment changed by `env` (a
/// name and its value each), checking the rules every output obeys: exit 0, stdout empty or
/// one JSON object of the Stop output schema, never plain text.
pub fn run_stop(
    dir: &Path,
    args: &[&str],
    env: &[(&str, &std::ffi::OsStr)],
    stdin: impl Into<Vec<u8>>,
) -> Stop {
    let mut cmd = stop_gate();
    for (name, value) in env {
        cmd.env(name, value);
    }
    let output = cmd
        .args(args)
        .current_dir(dir)
        .write_stdin(stdin)
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "a hook exits 0; stderr {:?}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8(output.stdout).expect("stdout is UTF-8");
    if stdout.is_empty() {
        return Stop { json: None };
    }
    assert!(
        stdout.ends_with('\n') && stdout.trim_end().lines().count() == 1,
        "one JSON line: {stdout:?}"
    );
    let json: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("plain text on stdout ({e}): {stdout:?}"));
    assert_valid("stop-output.schema.json", &json);
    Stop { json: Some(json) }
}

impl Project {
    /// [`stop_payload`] for this project.
    pub fn payload(&self, session: &str, message: Option<&str>) -> Value {
        stop_payload(self.path(), session, message)
    }

    /// [`run_stop`] in this project.
    pub fn stop_with(&self, args: &[&str], stdin: impl Into<Vec<u8>>) -> Stop {
        run_stop(self.path(), args, &[], stdin)
    }

    /// [`run_stop`] in this project, the hook's environment changed by `env`.
    pub fn stop_with_env(
        &self,
        args: &[&str],
        env: &[(&str, &std::ffi::OsStr)],
        stdin: impl Into<Vec<u8>>,
    ) -> Stop {
        run_stop(self.path(), args, env, stdin)
    }

    /// The Stop of session s1, not declared, with the hook's environment changed by `env`.
    pub fn stop_env(&self, args: &[&str], env: &[(&str, &std::ffi::OsStr)]) -> Stop {
        self.stop_with_env(args, env, self.payload("s1", Some("x")).to_string())
    }

    /// stop-gate with `args` started in this project on the Stop of session s1 (not declared),
    /// its stdout thrown away: a gate the test signals or kills while its check runs.
    pub fn stop_in_background(&self, args: &[&str]) -> std::process::Child {
        spawn_fed(
            vigil_process("stop-gate")
                .args(args)
                .current_dir(self.path())
                .stdout(std::process::Stdio::null()),
            self.payload("s1", Some("x")).to_string().as_bytes(),
        )
    }

    /// stop-gate run in this project as the hook of whatever event `payload` is, with no
    /// flags, whatever it answers.
    pub fn run_gate(&self, payload: &Value) -> std::process::Output {
        stop_gate()
            .current_dir(self.path())
            .write_stdin(payload.to_string())
            .output()
            .unwrap()
    }

    pub fn stop(&self, args: &[&str], session: &str, message: Option<&str>) -> Stop {
        self.stop_with(args, self.payload(session, message).to_string())
    }

    /// [`Project::stop`] of session s1 saying `x`: no declaration.
    pub fn stop_s1(&self, args: &[&str]) -> Stop {
        self.stop(args, "s1", Some("x"))
    }

    /// Runs the UserPromptSubmit hook (stop-gate) on `prompt` in `session`: what it printed.
    pub fn prompt(&self, session: &str, prompt: &str) -> Value {
        let payload = json!({"session_id": session, "hook_event_name": "UserPromptSubmit",
            "cwd": self.path(), "prompt": prompt});
        let output = self.run_gate(&payload);
        assert_eq!(output.status.code(), Some(0));
        if output.stdout.is_empty() {
            return Value::Null;
        }
        let said: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_valid("prompt-output.schema.json", &said);
        said
    }
}

/// Whether a handler (`{"type": "command", "command": …}`) runs vigil's stop-gate, by its path.
pub fn runs_stop_gate(handler: &Value) -> bool {
    handler["command"]
        .as_str()
        .unwrap()
        .trim_end_matches('\'')
        .ends_with("/stop-gate")
}

/// Whether a handler's command is vigil's waiter (`stop-gate wait`, SPEC §10) rather than its
/// gate: by absolute path, or through the PATH search a shared install writes.
pub fn is_waiter(command: &str) -> bool {
    command.contains("stop-gate wait") || command.contains("\"$b\" wait;")
}

/// What the PreToolUse hook (the file-tool guard, SPEC §9, §11) said of `stdin` in `cwd`, with
/// `HOME` at `home`: `None` allowed (silent), `Some(reason)` denied, in one line.
pub fn pre_tool_use(home: &Path, cwd: &Path, stdin: Vec<u8>) -> Option<String> {
    let output = stop_gate()
        .env("HOME", home)
        .env("TMPDIR", "/tmp")
        .current_dir(cwd)
        .write_stdin(stdin)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", super::said(&output));
    if output.stdout.is_empty() {
        return None;
    }
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    let decision = &json["hookSpecificOutput"];
    assert_eq!(decision["hookEventName"], "PreToolUse", "{json}");
    assert_eq!(decision["permissionDecision"], "deny", "{json}");
    let reason = decision["permissionDecisionReason"].as_str().unwrap();
    assert!(
        reason.starts_with("vigil: ") && !reason.contains('\n'),
        "{reason}"
    );
    Some(reason.to_string())
}

impl Project {
    /// What the PreToolUse hook said of the file tool `tool` writing `path` (its input field
    /// `field`) from the project, with `HOME` at `home`.
    pub fn file_tool(&self, home: &Path, tool: &str, field: &str, path: &str) -> Option<String> {
        let payload = json!({
            "session_id": "s1", "hook_event_name": "PreToolUse", "cwd": self.path(),
            "permission_mode": "acceptEdits", "tool_name": tool, "tool_use_id": "toolu_1",
            "tool_input": {field: path, "content": "x"},
        });
        pre_tool_use(home, self.path(), payload.to_string().into_bytes())
    }
}
