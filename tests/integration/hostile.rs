//! SPEC §2 (malformed input) and P1, hostile input (issue 8), table-driven: every hook binary
//! against every malformed input it can be given on stdin. No panic, the documented exit code
//! and direction (a gate denies, a handoff skips, a loader starts the session without context),
//! at most one line on stderr, and nothing written outside the project's `.vigil/`.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::support::*;

/// The inputs: a name and the bytes, given a project directory for the well-formed parts.
fn inputs(project: &Path) -> Vec<(&'static str, Vec<u8>)> {
    let good = |session: &str| {
        json!({
            "session_id": session, "hook_event_name": "Stop", "cwd": project,
            "transcript_path": null, "last_assistant_message": "x", "source": "startup",
            "reason": "exit",
        })
    };
    let mut huge =
        br#"{"session_id":"s1","hook_event_name":"Stop","last_assistant_message":""#.to_vec();
    huge.resize(100 * 1024 * 1024, b'a');
    huge.extend_from_slice(br#""}"#);
    vec![
        ("empty", Vec::new()),
        ("truncated", br#"{"session_id":"s1","hook_ev"#.to_vec()),
        ("not JSON", b"session_id=s1\n".to_vec()),
        ("invalid UTF-8", b"{\"session_id\":\"s\xff\xfe1\"}".to_vec()),
        ("deeply nested", {
            let mut v = b"[".repeat(100_000);
            v.extend(b"]".repeat(100_000));
            v
        }),
        ("an array", b"[]".to_vec()),
        (
            "wrong types",
            br#"{"session_id":5,"hook_event_name":[],"cwd":{}}"#.to_vec(),
        ),
        ("100 MB", huge),
        ("id ../x", good("../x").to_string().into_bytes()),
        ("id absolute", good("/etc/passwd").to_string().into_bytes()),
        ("id with NUL", good("a\u{0}b").to_string().into_bytes()),
        (
            "id too long",
            good(&"a".repeat(200)).to_string().into_bytes(),
        ),
    ]
}

/// What a binary must do with input it cannot use.
#[derive(Clone, Copy)]
enum Direction {
    /// Exit 2, nothing on stdout (promise-matcher: a verdict needs valid input).
    Refuse,
    /// Exit 0 and a `decision: block` (or, once the budget is spent, an allow that says the
    /// work is NOT verified): the gate fails closed.
    Deny,
    /// Exit 1, no record (the handoff is skipped).
    Skip,
    /// Exit 0, nothing on stdout (the session starts without a handoff).
    Start,
}

fn run(bin: &str, args: &[&str], cwd: &Path, stdin: &[u8]) -> std::process::Output {
    let mut cmd = Command::new(bin_dir().join(bin));
    cmd.args(args)
        .current_dir(cwd)
        .env_remove("CLAUDE_PROJECT_DIR")
        .env_remove("VIGIL_STATE_DIR")
        .env_remove("VIGIL_DISABLE");
    output_with_stdin(cmd, stdin)
}

#[test]
fn every_hook_binary_meets_every_hostile_input_in_its_documented_direction() {
    let table: [(&str, &[&str], Direction); 5] = [
        (
            "promise-matcher",
            &["--hook", "--promise", "DONE"],
            Direction::Refuse,
        ),
        ("stop-gate", &[], Direction::Deny),
        ("session-end-handoff", &[], Direction::Skip),
        ("session-end-handoff", &["--checkpoint"], Direction::Skip),
        ("session-start-loader", &[], Direction::Start),
    ];
    for (bin, args, direction) in table {
        let parent = tempfile::tempdir().unwrap();
        let project = parent.path().join("project");
        std::fs::create_dir(&project).unwrap();
        git(&project, &["init", "-q"]);
        let before = outside_vigil(parent.path());
        for (name, stdin) in inputs(&project) {
            let out = run(bin, args, &project, &stdin);
            let stderr = String::from_utf8_lossy(&out.stderr);
            let stdout = String::from_utf8_lossy(&out.stdout);
            let case = format!("{bin} {args:?} on {name}: {stderr}");
            assert!(!stderr.contains("panicked"), "{case}");
            assert!(stderr.lines().count() <= 1, "one line at most: {case}");
            // promise-matcher reads no session id, so a hostile one leaves it usable input.
            let usable = name.starts_with("id ");
            match direction {
                Direction::Refuse if !usable => {
                    assert_eq!(out.status.code(), Some(2), "{case}");
                    assert!(stdout.is_empty(), "{case}");
                }
                Direction::Refuse => assert!(matches!(out.status.code(), Some(0..=2)), "{case}"),
                Direction::Deny => {
                    assert_eq!(out.status.code(), Some(0), "{case}");
                    let decision: Value = serde_json::from_str(&stdout)
                        .unwrap_or_else(|e| panic!("{case}: not JSON ({e}): {stdout}"));
                    let denied = decision["decision"] == "block"
                        || decision["systemMessage"]
                            .as_str()
                            .is_some_and(|m| m.contains("NOT verified"));
                    assert!(denied, "{case}: {decision}");
                }
                Direction::Skip => {
                    assert_eq!(out.status.code(), Some(1), "{case}");
                    assert!(
                        stderr.contains("no handoff was written") || stderr.contains("refus"),
                        "{case}"
                    );
                    assert!(!project.join(".vigil/handoff").exists(), "{case}");
                }
                Direction::Start => {
                    assert_eq!(out.status.code(), Some(0), "{case}");
                    assert!(stdout.is_empty(), "{case}: {stdout}");
                }
            }
            assert_eq!(
                outside_vigil(parent.path()),
                before,
                "{case}: wrote outside .vigil/"
            );
        }
    }
}

/// Every file under `dir` except the project's `.vigil/` (and git's own files).
fn outside_vigil(dir: &Path) -> Vec<String> {
    tree(dir)
        .into_iter()
        .filter(|f| !f.starts_with("project/.vigil/") && !f.starts_with("project/.git/"))
        .collect()
}

/// A hook binary run by hand on a terminal answers at once with the one line of what it
/// expects: a gate or promise-matcher as a usage error (2), a fail-open hook with 1 (never 2,
/// which would block), and nothing is counted or written for a session `unknown`.
#[test]
fn hook_binaries_on_a_terminal_say_what_they_expect_at_once() {
    let bin = bin_dir();
    for (binary, args, code) in [
        ("stop-gate", &[][..], 2),
        ("stop-gate", &["--run", "true"][..], 2),
        ("promise-matcher", &["--hook"][..], 2),
        ("promise-matcher", &["--promise", "DONE"][..], 2),
        ("promise-matcher", &["defang"][..], 2),
        ("session-end-handoff", &[][..], 1),
        ("session-start-loader", &[][..], 1),
    ] {
        let began = std::time::Instant::now();
        let out = on_a_terminal(&bin.join(binary), args);
        assert_within(
            began,
            std::time::Duration::from_secs(5),
            &format!("{binary} {args:?} waited on the terminal"),
        );
        assert_eq!(out.status.code(), Some(code), "{binary} {args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.lines().count(), 1, "{binary}: {stderr}");
        assert_starts_with!(stderr, &format!("{binary}: "), "{binary}");
        assert_contains!(stderr, "terminal", "{binary}");
        assert!(out.stdout.is_empty(), "{binary}: nothing for the engine");
    }
}

/// Issue 44 item 5, hooks never create what the payload names: a `cwd` that does not exist
/// blocks a Stop (a gate that cannot tell its project denies) and lets the forced continuation
/// through NOT verified, refuses a loop command at the prompt, and is a skip for a handoff
/// (exit 1, one line). Nothing is made at that path, and nothing in the state home for it.
/// Before, the handoff made the whole path and wrote a record there, and the prompt started a
/// loop for it.
#[test]
fn a_cwd_that_does_not_exist_is_never_made() {
    let dir = tempfile::tempdir().unwrap();
    let gone = dir.path().join("gone/deeper");
    let projects = |name: &str| -> Vec<String> {
        std::fs::read_dir(state_home().join("projects"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(&format!("{name}-")))
            .collect()
    };
    let payload = |event: &str, active: bool| {
        json!({"session_id": "s1", "hook_event_name": event, "cwd": gone,
            "stop_hook_active": active, "last_assistant_message": "x", "reason": "other",
            "prompt": "/vigil-loop do it --max-iterations 3 --completion-promise DONE"})
        .to_string()
    };
    let stop = stop_gate()
        .write_stdin(payload("Stop", false))
        .output()
        .unwrap();
    let blocked = stop_of(&stop);
    blocked.assert_blocked_saying("is not a directory, so there is no project to check");
    let forced = stop_gate()
        .write_stdin(payload("Stop", true))
        .output()
        .unwrap();
    let allowed = stop_of(&forced);
    allowed.assert_allowed_saying("NOT verified");
    let prompt = stop_gate()
        .write_stdin(payload("UserPromptSubmit", false))
        .output()
        .unwrap();
    assert_contains!(stdout_of(&prompt), "so no loop can be tied to a project");
    let end = session_end_handoff()
        .write_stdin(payload("SessionEnd", false))
        .output()
        .unwrap();
    assert_eq!(end.status.code(), Some(1), "{}", said(&end));
    assert_contains!(String::from_utf8_lossy(&end.stderr), "is not a directory");
    assert!(
        !dir.path().join("gone").exists(),
        "the payload's path was made"
    );
    assert!(projects("deeper").is_empty(), "{:?}", projects("deeper"));
}
