//! How a loop stops by itself (issue 17, README "When a loop stops by itself"): background work
//! is not a finish, stalls, time and token budgets, a turn that ends on an API error
//! (StopFailure), the engine's own cap on blocks, and the subagent contract; one file each, and
//! here what they share.

mod background_work;
mod block_cap;
mod budgets;
mod stalls;
mod stop_failure;
mod subagent_contract;
mod wiring;

use serde_json::{Value, json};

use crate::support::*;

/// A loop for `session` with `max` passes and the `extra` flags of `loop start`, its prompt
/// `Task of SESSION.`.
fn start_with(p: &Project, session: &str, max: u32, extra: &[&str]) {
    p.loop_for(session)
        .max_iterations(max)
        .flags(extra)
        .prompt(&format!("Task of {session}."))
        .start();
}

fn stop_failure(
    p: &Project,
    session: &str,
    sample: &str,
    changes: &[(&str, Value)],
) -> std::process::Output {
    let mut all = vec![("session_id", json!(session)), ("cwd", json!(p.path()))];
    all.extend(changes.iter().cloned());
    let payload = sample_payload(sample, &all);
    let out = session_end_handoff()
        .arg("--checkpoint")
        .current_dir(p.path())
        .write_stdin(payload)
        .output()
        .unwrap();
    assert_ne!(
        out.status.code(),
        Some(2),
        "StopFailure cannot block; never exit 2"
    );
    out
}

const REPORT: &str = r#"{"status":"done","answer":"There is one file.","evidence":["ls: 1 entry"],"changed":[],"open_questions":[],"tokens_used":1200}"#;
