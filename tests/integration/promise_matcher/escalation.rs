//! SPEC §3 rule 6, escalation: a real `needs-decision:` question is `blocked` (over a
//! declaration too) and carries the question; placeholders never are.

use serde_json::{Value, json};

use super::{assert_verdict, judge_with};
use crate::support::*;

#[test]
fn needs_decision_with_a_real_question_is_blocked_and_carries_it() {
    let text =
        "I can go either way.\nneeds-decision: Should the cache live in Redis or in memory?\n";
    let report = judge_with(text, "DONE");
    assert_eq!(
        report,
        json!({"verdict":"blocked","promise":"DONE","line":2,"question":"Should the cache live in Redis or in memory?"})
    );
}

#[test]
fn blocked_wins_over_declared() {
    let text = "needs-decision: Ship to production on Friday?\n<promise>DONE</promise>";
    let output = promise_matcher_on(&["--json"], text);
    assert_eq!(output.status.code(), Some(1), "blocked must not exit 0");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["verdict"], "blocked");
}

#[test]
fn needs_decision_placeholders_never_block() {
    for placeholder in [
        "",
        "<question>",
        "<question>.",
        "<your question here>",
        "none",
        "None.",
        "N/A",
        "n/a.",
        "na",
        "NA",
        "nothing",
        "Nothing.",
        "-",
        "-.",
    ] {
        let text = format!("needs-decision: {placeholder}\n<promise>DONE</promise>");
        let report = judge_with(&text, "DONE");
        assert_eq!(
            report["verdict"], "declared",
            "placeholder {placeholder:?} blocked: {report}"
        );
    }
}

#[test]
fn needs_decision_with_a_question_in_angle_brackets_still_blocks() {
    let report = judge_with(
        "needs-decision: <Should I drop the users table?>\n<promise>DONE</promise>",
        "DONE",
    );
    assert_eq!(report["verdict"], "blocked");
    assert_eq!(report["question"], "<Should I drop the users table?>");
}

#[test]
fn needs_decision_key_in_any_case_blocks() {
    assert_verdict(
        "Needs-Decision: Which database?\n<promise>DONE</promise>",
        "blocked",
    );
    assert_verdict("NEEDS-DECISION: Which database?", "blocked");
}
