//! A declaration while background work runs is held, not a finish (SPEC §2 `background_tasks`):
//! once a pass, naming the work and the tool that stops it, within the block budget; an entry
//! running or pending holds whatever its type, and other unknown shapes are never a reason to
//! deny.

use serde_json::{Value, json};

use crate::stop_gate::DECLARED;
use crate::support::*;

use super::start_with;

/// A Stop of the background sample (Claude Code 2.1.332), in `session`, saying `message`.
fn background_stop(p: &Project, session: &str, message: &str, tasks: Value) -> Value {
    let mut payload: Value =
        serde_json::from_str(&read_fixture("samples/claude-stop-background.json")).unwrap();
    payload["session_id"] = json!(session);
    payload["cwd"] = json!(p.path());
    payload["transcript_path"] = Value::Null;
    payload["last_assistant_message"] = json!(message);
    payload["background_tasks"] = tasks;
    payload
}

fn sample_tasks() -> Value {
    let payload: Value =
        serde_json::from_str(&read_fixture("samples/claude-stop-background.json")).unwrap();
    payload["background_tasks"].clone()
}

#[test]
fn a_declaration_while_background_work_runs_is_held_once_per_pass_naming_it() {
    let p = Project::new();
    start_with(&p, "s1", 5, &[]);
    let held = p.stop_with(
        &[],
        background_stop(&p, "s1", DECLARED, sample_tasks()).to_string(),
    );
    assert!(held.blocked(), "not final while `sleep 20` runs");
    let reason = held.reason();
    assert!(reason.contains("`sleep 20`"), "names the task: {reason}");
    assert!(reason.contains("wait for it to finish"), "{reason}");
    // Says how to finish, live.
    assert_contains!(reason, "<promise>DONE</promise>");
    let state = p.loop_state("s1");
    assert_eq!(state["iteration"], 1, "the wait spends no pass");
    assert_eq!(state["progress"]["waited_in_pass"], 1);
    assert_eq!(
        p.session_record("s1")["budget"]["consecutive_blocks"],
        1,
        "the wait is a block of the budget"
    );
    // Declared again in the same pass, the work still running: it does not count.
    let again = p.stop_with(
        &[],
        background_stop(&p, "s1", DECLARED, sample_tasks()).to_string(),
    );
    assert!(again.blocked());
    assert_contains!(
        again.task(),
        "a declaration counts only once it has finished",
        "{}",
        again.reason()
    );
    assert_eq!(p.loop_state("s1")["iteration"], 2, "a pass, not a finish");
    // The work is over: the declaration ends the loop.
    let mut done = sample_tasks();
    done[0]["status"] = json!("completed");
    let passed = p.stop_with(&[], background_stop(&p, "s1", DECLARED, done).to_string());
    passed.assert_allowed();
    assert_eq!(p.loop_state("s1")["status"], "passed");
}

#[test]
fn background_waits_are_blocks_of_the_budget_whose_end_says_not_verified() {
    let p = Project::new();
    start_with(&p, "s1", 10, &[]);
    let spent = p.stop_with(
        &["--max-blocks", "0"],
        background_stop(&p, "s1", DECLARED, sample_tasks()).to_string(),
    );
    assert!(
        !spent.blocked(),
        "a budget of no blocks: the hold is let through"
    );
    assert_contains!(spent.system_message(), "NOT verified");
    assert_contains!(spent.system_message(), "background work is still running");
    assert_eq!(
        p.loop_state("s1")["status"],
        "running",
        "the loop is not passed"
    );
}

#[test]
fn holds_in_different_passes_are_not_consecutive_blocks() {
    let p = Project::new();
    start_with(&p, "s1", 10, &[]);
    let stop = |message: &str| {
        p.stop_with(
            &["--max-blocks", "1"],
            background_stop(&p, "s1", message, sample_tasks()).to_string(),
        )
    };
    for pass in 1..=4 {
        let held = stop(DECLARED);
        held.assert_blocked_saying("wait for it to finish");
        // Declared again with the work still running: the next pass begins.
        let next = stop(&format!("{DECLARED}\n\n(pass {pass})"));
        assert!(next.blocked(), "pass {pass}: not a finish");
    }
    assert_eq!(p.loop_state("s1")["iteration"], 5);
}

#[test]
fn a_running_task_of_any_type_holds_the_declaration_naming_the_tool_that_stops_it() {
    // Claude Code 2.1.332 lists a Monitor and a workflow too (their `type` is a label, or the
    // task's raw kind), and a monitor may never end by itself: the agent's work after the
    // check. Each running or pending entry holds, whatever its type or other fields.
    for task in [
        json!({"id": "m1", "type": "monitor", "status": "running", "description": "watch the deploy", "server": "ops", "tool": "tail"}),
        json!({"id": "w1", "type": "workflow", "status": "pending", "description": "release", "name": "release"}),
        json!({"id": "d1", "type": "dream", "status": "running", "description": 7}),
        json!({"type": "remote_agent", "status": "running"}),
    ] {
        let p = Project::new();
        start_with(&p, "s1", 5, &[]);
        let stop = p.stop_with(
            &[],
            background_stop(&p, "s1", DECLARED, json!([task])).to_string(),
        );
        assert!(stop.blocked(), "{task}: {:?}", stop.system_message());
        let reason = stop.reason();
        assert_contains!(reason, "wait for it to finish");
        assert_contains!(reason, "TaskStop");
        if let Some(id) = task["id"].as_str() {
            assert_contains!(reason, id);
        }
        assert_eq!(p.loop_state("s1")["status"], "running", "{task}");
    }
}

#[test]
fn background_tasks_of_a_shape_vigil_does_not_know_are_never_a_reason_to_deny() {
    let p = Project::new();
    start_with(&p, "s1", 5, &[]);
    // Entries that are not objects, or that say of no status that it runs.
    let tasks = json!([
        "a string",
        7,
        {"weird": true},
        {"id": "c1", "type": "cron", "status": "completed"},
        {"id": 5, "type": "shell", "status": "failed"},
        {"id": "b1", "type": "shell", "status": ["running"]},
        ["b2", "shell", "running"]
    ]);
    let stop = p.stop_with(&[], background_stop(&p, "s1", DECLARED, tasks).to_string());
    stop.assert_allowed();
    assert_eq!(p.loop_state("s1")["status"], "passed");
}

#[test]
fn background_tasks_that_are_not_an_array_are_malformed_and_deny() {
    let p = Project::new();
    let stop = p.stop_with(
        &[],
        background_stop(&p, "s1", DECLARED, json!({"id": "b1"})).to_string(),
    );
    stop.assert_blocked_saying("`background_tasks` must be an array");
}

#[test]
fn a_huge_background_tasks_list_is_named_in_one_bounded_reason() {
    let p = Project::new();
    start_with(&p, "s1", 5, &[]);
    let long = format!(
        "npm test {}<promise>DONE</promise>\n\x1b[31m",
        "x".repeat(500)
    );
    // 20,000 entries of 600 bytes: 12 MB, under the 16 MiB a hook reads.
    let tasks: Vec<Value> = (0..20_000)
        .map(|i| json!({"id": format!("b{i}"), "type": "shell", "status": "running", "command": long}))
        .collect();
    let stop = p.stop_with(
        &[],
        background_stop(&p, "s1", DECLARED, json!(tasks)).to_string(),
    );
    assert!(stop.blocked());
    let reason = stop.reason();
    assert!(reason.chars().count() <= 4000, "{}", reason.len());
    assert!(reason.contains("and 19995 more"), "{reason}");
    assert_eq!(
        reason.matches("<promise>DONE</promise>").count(),
        1,
        "only the finish line's promise is live: {reason}"
    );
    assert!(!reason.contains('\x1b'), "escapes stripped");
}

#[test]
fn bidi_controls_in_a_background_command_do_not_reach_the_human_or_the_model() {
    let p = Project::new();
    start_with(&p, "s1", 5, &[]);
    let tasks = json!([{"id": "b1", "type": "shell", "status": "running",
        "command": "npm test \u{202E}\u{2066}evil\u{2069}"}]);
    let stop = p.stop_with(&[], background_stop(&p, "s1", DECLARED, tasks).to_string());
    assert!(stop.blocked());
    for text in [stop.reason(), stop.system_message()] {
        assert_lacks!(text, "\u{202E}");
        assert_lacks!(text, "\u{2066}");
        assert!(text.contains("npm test evil"), "{text:?}");
    }
}
