//! SPEC §4, no loop ends unseen: every end has a reason in the record, one end status for each
//! reason, and a session that ends while its loop runs leaves it `cut`; a checkpoint never
//! does.

use serde_json::Value;

use crate::support::*;

/// Every end has its reason (issue 29, item 1): a session that ends after a failed turn cuts
/// its loop `turn-failed`; a checkpoint (Stop, StopFailure) never cuts one.
#[test]
fn session_end_cuts_a_live_loop_for_the_reason_its_last_turn_gives_and_a_checkpoint_never_does() {
    let dir = Project::git();
    dir.loop_for("s1").max_iterations(5).start();
    let hook = |args: &[&str], payload: Value| {
        ok(session_end_handoff()
            .args(args)
            .current_dir(dir.path())
            .write_stdin(payload.to_string())
            .output()
            .unwrap());
    };
    let cwd = dir.path();
    hook(
        &["--checkpoint"],
        serde_json::json!({"session_id": "s1", "hook_event_name": "Stop", "cwd": cwd}),
    );
    assert_eq!(loop_of(cwd, "s1")["status"], "running");
    hook(
        &["--checkpoint"],
        serde_json::json!({"session_id": "s1", "hook_event_name": "StopFailure", "cwd": cwd,
            "error": "rate_limit", "last_assistant_message": "API Error: rate limited"}),
    );
    assert_eq!(loop_of(cwd, "s1")["status"], "interrupted");
    // SessionEnd wired as a checkpoint by mistake, or a Stop given to the final writer: no cut.
    hook(
        &["--checkpoint"],
        serde_json::json!({"session_id": "s1", "hook_event_name": "SessionEnd", "cwd": cwd}),
    );
    hook(
        &[],
        serde_json::json!({"session_id": "s1", "hook_event_name": "Stop", "cwd": cwd}),
    );
    assert_eq!(loop_of(cwd, "s1")["status"], "interrupted");
    hook(
        &[],
        serde_json::json!({"session_id": "s1", "hook_event_name": "SessionEnd", "cwd": cwd, "reason": "prompt_input_exit"}),
    );
    let state = loop_of(cwd, "s1");
    assert_eq!(state["status"], "cut", "{state}");
    assert_eq!(state["end_reason"], "turn-failed", "{state}");
    let status = dir.loop_command(&["status", "--session", "s1"]);
    assert_contains!(
        stdout_of(&status),
        "cut, pass 1/5, promise DONE, ended: turn-failed"
    );
}

/// Statuses and end reasons, decided once (issue 29, item 1): each reason belongs to one end
/// status, the schema holds the same pairs, and a live loop has no reason.
#[test]
fn every_end_reason_belongs_to_one_end_status_and_the_schema_holds_the_same_pairs() {
    use vigil::state::loop_state::{EndReason, LoopState, LoopStatus, StartedBy};
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_path("schemas/loop.schema.json")).unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let promise = vigil::verdict::promise::Promise::new("DONE").unwrap();
    let fresh = || LoopState::new("s1", "Task".into(), &promise, 5, StartedBy::Terminal);
    let reasons = [
        EndReason::Declared,
        EndReason::NeedsDecision,
        EndReason::MaxIterations,
        EndReason::Stalled,
        EndReason::MaxDuration,
        EndReason::MaxTokens,
        EndReason::Cancelled,
        EndReason::BlockCap,
        EndReason::TurnFailed,
        EndReason::SessionEnded,
    ];
    let ends = [
        LoopStatus::Passed,
        LoopStatus::Blocked,
        LoopStatus::Aborted,
        LoopStatus::Cancelled,
        LoopStatus::Cut,
    ];
    for reason in reasons {
        let mut state = fresh();
        state.end(reason);
        assert!(!state.status.is_live(), "{reason:?}");
        let json = serde_json::to_value(&state).unwrap();
        assert_eq!(json["end_reason"], reason.as_str());
        assert_valid("loop.schema.json", &json);
        for other in ends.iter().filter(|s| **s != reason.status()) {
            let mut wrong = json.clone();
            wrong["status"] = Value::from(other.as_str());
            assert!(
                !validator.is_valid(&wrong),
                "{reason:?} passed the schema under {other:?}"
            );
        }
        let mut live = json.clone();
        live["status"] = Value::from("running");
        assert!(!validator.is_valid(&live), "a running loop with {reason:?}");
    }
    let mut unexplained = serde_json::to_value(fresh()).unwrap();
    unexplained["status"] = Value::from("cut");
    assert!(!validator.is_valid(&unexplained), "an end with no reason");
}
