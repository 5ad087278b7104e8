//! A session's other hooks (SPEC §6, §7): SessionStart through the real session-start-loader,
//! SessionEnd and checkpoints through the real session-end-handoff, and the records they leave.

use std::path::Path;

use assert_cmd::Command;
use serde_json::{Value, json};

use super::{assert_valid, session_end_handoff, session_start_loader};

/// session-start-loader in `dir` on the SessionStart input of `session` from `source`
/// (`startup`, `resume`, `compact`…), not yet run.
pub fn session_start_command(dir: &Path, session: &str, source: &str) -> Command {
    let payload = json!({"session_id": session, "cwd": dir, "hook_event_name": "SessionStart",
        "source": source});
    let mut cmd = session_start_loader();
    cmd.current_dir(dir).write_stdin(payload.to_string());
    cmd
}

/// [`session_start_command`], run: whatever it answered.
pub fn session_start(dir: &Path, session: &str, source: &str) -> std::process::Output {
    session_start_command(dir, session, source)
        .output()
        .unwrap()
}

/// session-end-handoff in `dir` with `args` (`--checkpoint`) on `payload`, whatever it answers.
pub fn session_end(dir: &Path, args: &[&str], payload: impl Into<Vec<u8>>) -> std::process::Output {
    session_end_handoff()
        .args(args)
        .current_dir(dir)
        .write_stdin(payload)
        .output()
        .unwrap()
}

/// The handoff record `file` (`final.json`, `checkpoint.json`) of the project in `dir`,
/// validated against its schema.
pub fn handoff_record(dir: &Path, file: &str) -> Value {
    let record: Value =
        serde_json::from_slice(&std::fs::read(dir.join(".vigil/handoff").join(file)).unwrap())
            .unwrap();
    assert_valid("handoff.schema.json", &record);
    record
}
