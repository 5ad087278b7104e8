//! SPEC §2, the off switch: `VIGIL_DISABLE=1` makes the gate allow at once and say so in one
//! `systemMessage`, a running loop told NOT verified.

use serde_json::{Value, json};

use crate::support::*;

/// SPEC §2, the off switch: `VIGIL_DISABLE=1` allows at once, runs no check, writes nothing,
/// and a gate says so in one `systemMessage`, even to input it cannot read.
#[test]
fn vigil_disable_allows_at_once_and_says_so() {
    let p = Project::new();
    p.start_ok("s1", 3, "work");
    let disabled = |stdin: Vec<u8>| {
        let output = stop_gate()
            .args(["--run", "exit 1", "--require-marker", "tests"])
            .env("VIGIL_DISABLE", "1")
            .current_dir(p.path())
            .write_stdin(stdin)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0));
        assert!(output.stderr.is_empty(), "{}", said(&output));
        String::from_utf8(output.stdout).unwrap()
    };
    let said_now = disabled(b"not even JSON".to_vec());
    let json: Value = serde_json::from_str(&said_now).unwrap();
    assert_eq!(json["systemMessage"], "vigil is disabled by VIGIL_DISABLE");
    assert!(json.get("decision").is_none(), "{json}");
    assert_eq!(p.loop_state("s1")["iteration"], 1);
}

/// Issue 29, told, never silent: the off switch with a loop running says that loop is NOT
/// verified (and which one); a session with no loop hears only that vigil is off; a prompt
/// that is a vigil command hears that nothing was started, any other prompt passes silently.
#[test]
fn vigil_disable_with_a_loop_running_says_the_loop_is_not_verified() {
    let p = Project::new();
    p.start_ok("s1", 3, "work");
    let disabled = |payload: Value| {
        let output = ok(stop_gate()
            .env("VIGIL_DISABLE", "1")
            .current_dir(p.path())
            .write_stdin(payload.to_string())
            .output()
            .unwrap());
        let text = String::from_utf8(output.stdout).unwrap();
        if text.is_empty() {
            return None;
        }
        let json: Value = serde_json::from_str(&text).unwrap();
        assert!(json.get("decision").is_none(), "{json}");
        Some(json["systemMessage"].as_str().unwrap().to_string())
    };
    let told = disabled(p.payload("s1", Some("<promise>DONE</promise>"))).unwrap();
    assert_starts_with!(told, "vigil is disabled by VIGIL_DISABLE");
    assert_contains!(told, "NOT verified");
    assert_contains!(told, "pass 1/3");
    assert_eq!(p.loop_state("s1")["iteration"], 1, "nothing is written");
    assert_eq!(
        disabled(p.payload("s2", Some("hi"))).unwrap(),
        "vigil is disabled by VIGIL_DISABLE"
    );
    let prompt = |text: &str| {
        json!({"session_id": "s3", "hook_event_name": "UserPromptSubmit", "cwd": p.path(),
            "prompt": text})
    };
    let told = disabled(prompt("/vigil-loop Fix it --max-iterations 3")).unwrap();
    assert!(told.contains("no loop was started"), "{told}");
    assert_eq!(disabled(prompt("Just a question")), None);
}
