//! SPEC P1 and §4, a gate fails closed: malformed input, a config error, state it cannot keep
//! (unwritable, a planted FIFO or link, a damaged record) or a panic blocks with one useful
//! line, within the budget.

use serde_json::{Value, json};

use crate::support::*;

#[test]
fn malformed_input_denies_with_one_useful_line_and_writes_only_in_the_protected_state() {
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty", vec![]),
        ("not JSON", b"Stop now".to_vec()),
        ("array", b"[{\"session_id\":\"s\"}]".to_vec()),
        (
            "wrong type",
            br#"{"session_id":"s","stop_hook_active":"no"}"#.to_vec(),
        ),
        ("wrong type id", br#"{"session_id":42}"#.to_vec()),
        ("invalid UTF-8", b"{\"session_id\":\"\xff\"}".to_vec()),
        ("no session", br#"{"hook_event_name":"Stop"}"#.to_vec()),
        (
            "hostile id",
            br#"{"session_id":"../../x","hook_event_name":"Stop"}"#.to_vec(),
        ),
        (
            "absolute id",
            br#"{"session_id":"/tmp/x","hook_event_name":"Stop"}"#.to_vec(),
        ),
        (
            "NUL in id",
            br#"{"session_id":"a\u0000b","hook_event_name":"Stop"}"#.to_vec(),
        ),
        ("deeply nested", deeply_nested()),
        ("over 16 MiB", over_16_mib()),
    ];
    for (name, input) in cases {
        let p = Project::new();
        let stop = p.stop_with(&[], input);
        assert!(stop.blocked(), "{name}");
        let reason = stop.reason();
        assert_eq!(reason.lines().count(), 1, "{name}: {reason}");
        assert!(reason.starts_with("stop-gate: "), "{name}: {reason}");
        assert!(tree(p.path()).is_empty(), "{name} wrote into the project");
        assert!(
            p.protected().join("sessions/unknown.rec").exists(),
            "{name}: counted under `unknown`"
        );
    }
}

fn deeply_nested() -> Vec<u8> {
    format!(
        r#"{{"session_id":"s","x":{}{}}}"#,
        "[".repeat(5000),
        "]".repeat(5000)
    )
    .into_bytes()
}

fn over_16_mib() -> Vec<u8> {
    let mut big = br#"{"session_id":"s","last_assistant_message":""#.to_vec();
    big.extend(std::iter::repeat_n(b'a', 16 * 1024 * 1024));
    big.extend_from_slice(b"\"}");
    big
}

#[test]
fn malformed_input_is_denied_within_the_budget() {
    let p = Project::new();
    for _ in 0..3 {
        assert!(p.stop_with(&[], "garbage").blocked());
    }
    let fourth = p.stop_with(&[], "garbage");
    assert!(!fourth.blocked(), "the budget lets the 4th through");
    assert!(fourth.system_message().contains("NOT verified"));
}

#[test]
fn config_error_denies_with_one_useful_line() {
    let p = Project::new();
    for args in [
        vec!["--frobnicate"],
        vec!["--max-blocks", "lots"],
        vec!["--timeout", "0"],
        vec!["--require-marker", "../x"],
        vec!["--run", ""],
        vec!["--marker-max-age", "soon"],
        vec!["--deadline", "5"],
        vec!["--timeout", "600"],
        vec!["--deadline", "100", "--timeout", "90"],
        vec!["--max-file-size", "huge"],
    ] {
        // Each in a session of its own, so no budget runs out along the way.
        let session = format!("s{}", args.join("").len());
        let stop = p.stop(&args, &session, Some("x"));
        assert!(stop.blocked(), "{args:?}");
        assert_starts_with!(stop.reason(), "stop-gate: config error: ", "{args:?}");
        assert_eq!(stop.reason().lines().count(), 1);
    }
}

#[test]
fn unwritable_state_directory_blocks_once_then_lets_the_forced_continuation_stop() {
    let p = Project::new();
    // A file where the state directory should be: even root cannot create directories in it.
    let blocker = p.path().join("blocker");
    std::fs::write(&blocker, "not a directory").unwrap();
    let state = blocker.join("state");
    let args = ["--run", "exit 1", "--state-dir", state.to_str().unwrap()];
    // Neither the state home nor the fallback in the project can be written.
    let unwritable = |payload: String| {
        let output = stop_gate()
            .args(args)
            .current_dir(p.path())
            .env("VIGIL_STATE_HOME", blocker.join("home"))
            .write_stdin(payload)
            .output()
            .unwrap();
        Stop {
            json: serde_json::from_slice(&output.stdout).ok(),
        }
    };
    let first = unwritable(p.payload("s1", Some("x")).to_string());
    assert!(first.blocked());
    assert_contains!(first.system_message(), "cannot keep the block budget");
    let mut payload = p.payload("s1", Some("x"));
    payload["stop_hook_active"] = json!(true);
    let second = unwritable(payload.to_string());
    assert!(!second.blocked());
    assert!(second.system_message().contains("NOT verified"));
    assert_eq!(
        std::fs::read_to_string(&blocker).unwrap(),
        "not a directory"
    );
}

/// A damaged record (here, as if something outside the sandbox had written it) is never read as
/// "no loop": the human hears that the loop is over and NOT verified, once, and the record is
/// kept aside.
#[test]
fn a_damaged_session_record_is_told_as_not_verified_never_taken_for_no_loop() {
    let p = Project::new();
    p.start_ok("s1", 3, "Fix.");
    let record = p.protected().join("sessions/s1.rec");
    std::fs::write(&record, "{\"loop\": {\"status\": \"passed\"}}").unwrap();
    let stop = p.stop(&[], "s1", Some("Working."));
    assert!(!stop.blocked());
    let message = stop.system_message();
    assert_contains!(message, "damaged");
    assert_contains!(message, "NOT verified");
    assert!(p.stop_s1(&[]).silent_allow(), "told once");
    assert!(
        tree(&p.protected().join("sessions"))
            .iter()
            .any(|f| f.starts_with("s1.damaged-")),
        "the damaged record is kept"
    );
}

#[test]
fn a_fifo_planted_as_a_lock_file_denies_without_hanging() {
    let p = Project::new();
    assert!(p.stop(&[], "s0", Some("x")).silent_allow());
    std::fs::create_dir_all(p.protected().join("sessions")).unwrap();
    mkfifo(&p.protected().join("sessions/s1.lock"));
    let started = std::time::Instant::now();
    let stop = p.stop_s1(&["--run", "exit 1"]);
    assert_within(
        started,
        std::time::Duration::from_secs(5),
        "the hook hung on a FIFO",
    );
    assert!(stop.blocked());
    assert_contains!(stop.system_message(), "cannot keep the block budget");
}

#[test]
fn a_symlink_planted_as_a_lock_file_is_not_followed() {
    let p = Project::new();
    let outside = tempfile::tempdir().unwrap();
    assert!(p.stop(&[], "s0", Some("x")).silent_allow());
    std::fs::create_dir_all(p.protected().join("sessions")).unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("created-by-vigil"),
        p.protected().join("sessions/s1.lock"),
    )
    .unwrap();
    p.stop_s1(&["--run", "exit 1"]);
    assert!(
        tree(outside.path()).is_empty(),
        "vigil wrote through a planted link"
    );
}

#[test]
fn a_symlinked_state_directory_is_refused() {
    let p = Project::new();
    let outside = tempfile::tempdir().unwrap();
    assert!(p.stop(&[], "s0", Some("x")).silent_allow());
    let sessions = p.protected().join("sessions");
    let _ = std::fs::remove_dir_all(&sessions);
    std::os::unix::fs::symlink(outside.path(), &sessions).unwrap();
    let stop = p.stop_s1(&["--run", "exit 1"]);
    assert!(stop.blocked());
    assert_contains!(stop.system_message(), "symlink");
    assert!(
        tree(outside.path()).is_empty(),
        "state was written through the link"
    );
}

/// SPEC §9, gates fail closed: a gate that panics blocks the stop with one line and exits 0.
/// Exiting 101, as a Rust panic does, is a non-blocking error to both engines, which then let
/// the stop through as if the gate had allowed it. (Debug builds panic on VIGIL_TEST_PANIC.)
#[test]
fn a_gate_that_panics_blocks_the_stop() {
    let p = Project::new();
    let out = stop_gate()
        .env("VIGIL_TEST_PANIC", "1")
        .current_dir(p.path())
        .write_stdin(p.payload("s1", Some("Done.")).to_string())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let said: Value = serde_json::from_slice(&out.stdout).expect("one JSON answer");
    assert_valid("stop-output.schema.json", &said);
    assert_eq!(said["decision"], "block", "{said}");
    assert!(said["reason"].as_str().unwrap().contains("NOT verified"));
    assert_eq!(String::from_utf8_lossy(&out.stderr).lines().count(), 1);
}
