//! SPEC §6 and §7, the handoff: session-end-handoff writes what a session leaves, and
//! session-start-loader tells the next session, driven as the engines drive them. Here what the
//! files beside it share.

mod pending_loop;
mod session_end;
mod session_start;

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{Value, json};

use crate::support::*;

const MARKER: &str = "<<<VIGIL_DONE_9f3c2a7e5b1d4c6a8e0f2b4d6c8a0e1f>>>";

fn end_payload(dir: &Path, session: &str, event: &str, transcript: Option<&Path>) -> String {
    let mut payload = json!({
        "session_id": session, "cwd": dir, "hook_event_name": event, "reason": "prompt_input_exit",
        "transcript_path": transcript,
    });
    if event == "Stop" {
        payload["last_assistant_message"] = json!(format!(
            "Half way there.\n{MARKER}\n<promise>DONE</promise>"
        ));
    }
    payload.to_string()
}

/// SessionEnd (or, with `--checkpoint`, a checkpoint) of `session` on `event`, which must
/// succeed.
fn hand_off(dir: &Path, args: &[&str], session: &str, event: &str, transcript: Option<&Path>) {
    ok(session_end(
        dir,
        args,
        end_payload(dir, session, event, transcript),
    ));
}

/// The context a SessionStart run injects, after checking its shape and size.
fn context(output: &Output) -> String {
    assert_eq!(output.status.code(), Some(0));
    let stdout = String::from_utf8(output.stdout.clone()).unwrap();
    assert!(
        stdout.chars().count() <= 10_001,
        "{} characters",
        stdout.chars().count()
    );
    let json: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout:?}"));
    assert_eq!(json["hookSpecificOutput"]["hookEventName"], "SessionStart");
    additional_context(&json).to_string()
}

fn transcript(dir: &Path, last: &str) -> PathBuf {
    let path = dir.join("transcript.jsonl");
    let line = json!({"type": "assistant", "message": {"id": "m1", "role": "assistant", "content": [{"type": "text", "text": last}]}});
    std::fs::write(&path, format!("{line}\n")).unwrap();
    path
}

/// A repository with more to hand off than fits: `files` untracked files named by `name`
/// holding `contents`, and PROGRESS.md holding `progress`.
fn crowded(
    files: usize,
    name: impl Fn(usize) -> String,
    contents: &str,
    progress: String,
) -> Project {
    let repo = Project::git();
    for i in 0..files {
        write_file(&repo.path().join(name(i)), contents);
    }
    std::fs::write(repo.path().join("PROGRESS.md"), progress).unwrap();
    repo
}
