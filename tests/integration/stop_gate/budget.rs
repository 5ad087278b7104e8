//! SPEC §4, the budget: `--max-blocks` consecutive blocks per session, counted in the session's
//! record and reset by a pass; when it is spent the stop is allowed as NOT verified.

use serde_json::json;

use crate::support::*;

/// A project, where the check looks for its flag, and that check: it passes once the flag is
/// there.
fn green_flagged() -> (Project, std::path::PathBuf, String) {
    let p = Project::new();
    let flag = p.path().join("green");
    let check = format!("test -f {}", flag.display());
    (p, flag, check)
}

#[test]
fn budget_allows_after_n_blocks_and_says_not_verified() {
    let p = Project::new();
    let args = ["--run", "exit 1", "--max-blocks", "2"];
    assert!(p.stop_s1(&args).blocked());
    assert!(p.stop_s1(&args).blocked());
    let third = p.stop_s1(&args);
    third.assert_allowed_saying("NOT verified");
    // Names the last problem.
    assert_contains!(third.system_message(), "`exit 1` failed");
    assert_eq!(p.session_record("s1")["budget"]["status"], "aborted");
}

#[test]
fn a_pass_resets_the_budget() {
    let (p, flag, check) = green_flagged();
    let args = ["--run", check.as_str(), "--max-blocks", "2"];
    assert!(p.stop_s1(&args).blocked());
    assert!(p.stop_s1(&args).blocked());
    std::fs::write(&flag, "").unwrap();
    assert!(p.stop_s1(&args).silent_allow());
    assert_eq!(p.session_record("s1")["budget"]["consecutive_blocks"], 0);
    std::fs::remove_file(&flag).unwrap();
    assert!(p.stop_s1(&args).blocked(), "the count started again");
    assert!(p.stop_s1(&args).blocked());
}

#[test]
fn budget_is_per_session() {
    let p = Project::new();
    let args = ["--run", "exit 1", "--max-blocks", "1"];
    assert!(p.stop(&args, "a", Some("x")).blocked());
    assert!(
        p.stop(&args, "b", Some("x")).blocked(),
        "b has its own budget"
    );
    assert!(!p.stop(&args, "a", Some("x")).blocked());
}

#[test]
fn subagent_passes_never_reset_the_main_agents_budget() {
    let p = Project::new();
    let mut subagent = p.payload("s1", Some("x"));
    subagent["hook_event_name"] = json!("SubagentStop");
    let main = ["--run", "exit 1", "--max-blocks", "2"];
    assert!(p.stop_s1(&main).blocked());
    assert!(p.stop_s1(&main).blocked());
    assert!(
        p.stop_with(&["--subagents", "--run", "true"], subagent.to_string())
            .silent_allow()
    );
    let third = p.stop_s1(&main);
    assert!(!third.blocked(), "the main budget was reset by a subagent");
    assert!(third.system_message().contains("NOT verified"));
}

#[test]
fn a_pass_sets_the_session_record_back_to_ok() {
    let (p, flag, check) = green_flagged();
    let args = ["--run", check.as_str(), "--max-blocks", "1"];
    assert!(p.stop_s1(&args).blocked());
    assert!(!p.stop_s1(&args).blocked());
    assert_eq!(p.session_record("s1")["budget"]["status"], "aborted");
    std::fs::write(&flag, "").unwrap();
    assert!(p.stop_s1(&args).silent_allow());
    let budget = p.session_record("s1")["budget"].clone();
    assert_eq!(
        (
            budget.get("status").cloned(),
            budget["budget_spent"].clone()
        ),
        (None, json!(1))
    );
}
