//! SPEC §3, promise-matcher, driven as a user drives it: one file per group of §3's rules (a
//! declaration, a mention, CommonMark's structure, escalation, the hook input, tokens and
//! defang). Here the verdict every file asks for.

mod commonmark_structure;
mod declarations;
mod escalation;
mod hook_input;
mod mentions;
mod ralph_sh;
mod tokens;
mod usage;

use serde_json::Value;

use crate::support::*;

/// Runs the default command with `--json` on `text`, checks the output against its schema and
/// that the exit code agrees with the verdict, and returns the report.
fn judge_with(text: &str, promise: &str) -> Value {
    let output = promise_matcher_on(&["--json", "--promise", promise], text);
    let report: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {:?}",
            String::from_utf8_lossy(&output.stdout)
        )
    });
    assert_valid("verdict.schema.json", &report);
    let expected_code = if report["verdict"] == "declared" {
        0
    } else {
        1
    };
    assert_eq!(output.status.code(), Some(expected_code), "{report}");
    report
}

fn verdict_of(text: &str) -> String {
    judge_with(text, "DONE")["verdict"]
        .as_str()
        .unwrap()
        .to_string()
}

fn assert_verdict(text: &str, expected: &str) {
    assert_eq!(verdict_of(text), expected, "text: {text:?}");
}
