//! SPEC §9, protected state: gate state out of the agent's reach (issue 14). Each attack is
//! played by an agent that writes only inside the project, as Claude Code's sandbox leaves it;
//! none may end, change or start a loop, silently or at all. Loops start and stop from the
//! human's prompt (§4). Here what the files beside it share.

mod attacks;
mod humans_prompt;
mod install_protect;
mod state_home;
mod what_vigil_runs;
mod your_hooks;

use std::path::Path;

use serde_json::{Value, json};

use crate::support::*;

const DECLARED: &str = "All green.\n\n<promise>DONE</promise>";

/// A git project whose `.gitignore` leaves `.vigil/` out, as a user's would.
fn project_builder() -> ProjectBuilder {
    Project::builder()
        .file("lib.rs", "fn main() {}\n")
        .file(".gitignore", ".vigil/\n")
        .git()
}

fn project() -> Project {
    project_builder().build()
}

/// A loop for `session` of the project in `dir`, of `max` passes: the human's real task.
fn start(dir: &Path, session: &str, max: u32) {
    Loop::for_session(dir, session)
        .max_iterations(max)
        .prompt("The real task.")
        .start();
}

/// A Stop in `session` with `message`: what the gate printed (`Null` for a silent allow).
fn stop(dir: &Path, session: &str, message: &str) -> Value {
    run_stop(
        dir,
        &[],
        &[],
        stop_payload(dir, session, Some(message)).to_string(),
    )
    .json
    .unwrap_or(Value::Null)
}

/// The UserPromptSubmit hook on `prompt`: the exit, and what it printed.
fn prompt(dir: &Path, session: &str, prompt: Value) -> (Option<i32>, Value) {
    let payload = json!({"session_id": session, "hook_event_name": "UserPromptSubmit",
        "cwd": dir, "prompt": prompt});
    prompt_raw(dir, payload.to_string())
}

fn prompt_raw(dir: &Path, payload: String) -> (Option<i32>, Value) {
    let out = stop_gate()
        .current_dir(dir)
        .write_stdin(payload)
        .output()
        .unwrap();
    if out.stdout.is_empty() {
        return (out.status.code(), Value::Null);
    }
    let said: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_valid("prompt-output.schema.json", &said);
    (out.status.code(), said)
}

fn still_looping(dir: &Path, session: &str) {
    let decision = stop(dir, session, "Not yet.");
    assert_eq!(decision["decision"], "block", "the loop ended: {decision}");
    assert_contains!(decision["reason"].as_str().unwrap(), "The real task.");
    assert_eq!(loop_of(dir, session)["status"], "running");
}

/// The loop ends as it should, on the real declaration: the attack before it left it whole.
fn ends_on_the_declaration(dir: &Path, session: &str) {
    let decision = stop(dir, session, DECLARED);
    assert_ne!(decision["decision"], "block", "{decision}");
    assert_eq!(loop_of(dir, session)["status"], "passed");
}
