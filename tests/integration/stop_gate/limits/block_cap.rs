//! SPEC §4, no loop ends unseen: the engine's own cap on consecutive Stop blocks ends a turn
//! over the gate, found in the transcript and recorded `interrupted`; a loop whose record is
//! gone is told NOT verified from the witness in the transcript (§9).

use serde_json::{Value, json};

use crate::support::*;

use super::{REPORT, start_with, stop_failure};

/// A transcript whose last lines are Claude Code's own: an assistant line that only mentions
/// the words, then (with `cut_at`) the informational line it writes when it ends a turn over a
/// Stop hook's block, at that time.
fn transcript_with(p: &Project, cut_at: Option<std::time::SystemTime>) -> std::path::PathBuf {
    let path = p.path().join("transcript.jsonl");
    let mut text = std::fs::read_to_string(fixture("samples/claude-transcript.jsonl")).unwrap();
    let mention = json!({"type": "assistant", "timestamp": "2099-01-01T00:00:00.000Z",
        "content": "the client is overriding and ending turn, it says"});
    text.push_str(&format!("{mention}\n"));
    if let Some(at) = cut_at {
        let mut line: Value = serde_json::from_str(&read_fixture(
            "samples/claude-transcript-block-cap-line.json",
        ))
        .unwrap();
        line["timestamp"] = json!(vigil::sys::time::format_rfc3339(at));
        text.push_str(&format!("{line}\n"));
    }
    std::fs::write(&path, text).unwrap();
    path
}

/// A cut the next prompt's hook did not see (no UserPromptSubmit hook wired, or a turn that
/// began without a prompt) is found by the first Stop of the next turn (`stop_hook_active`
/// false): recorded, told with the loop's block, and the loop goes on. A continuation Stop does
/// not read the transcript for it.
#[test]
fn the_first_stop_of_the_next_turn_records_a_cut_no_prompt_saw() {
    let p = Project::new();
    let cut = blocked_then_cut(&p);
    let stop = |active: bool| {
        let mut payload = p.payload("s1", Some("still not yet"));
        payload["transcript_path"] = json!(cut);
        payload["stop_hook_active"] = json!(active);
        p.stop_with(&[], payload.to_string())
    };
    let continued = stop(true);
    assert!(continued.blocked());
    assert_lacks!(continued.system_message(), "ended a turn");
    assert_eq!(p.loop_state("s1")["status"], "running");
    let first = stop(false);
    assert!(first.blocked(), "the loop goes on");
    assert_contains!(
        first.system_message(),
        "ended a turn of this session's loop over its Stop hook"
    );
    let state = p.loop_state("s1");
    assert_eq!(state["status"], "running", "{state}");
    assert_eq!(state["failures"][0]["error"], "block_cap", "{state}");
    assert_lacks!(stop(false).system_message(), "ended a turn", "told once");
}

/// Claude Code overrides a Stop hook that blocked 8 times in a row and ends the turn; no hook
/// payload says so, only a line in the transcript. The session's next prompt (and SessionEnd)
/// find it, record the loop `interrupted` with the failure `block_cap`, and tell the human,
/// once. A mention in the model's own words, or a cut from before the loop last moved, is no
/// cut.
#[test]
fn a_turn_the_engine_ended_over_the_gate_is_recorded_and_told() {
    let p = Project::new();
    blocked_once_of_twenty(&p);
    let prompt = |transcript: &std::path::Path| {
        let payload = json!({"session_id": "s1", "hook_event_name": "UserPromptSubmit",
            "cwd": p.path(), "prompt": "go on", "transcript_path": transcript});
        let out = ok(p.run_gate(&payload));
        let text = String::from_utf8(out.stdout).unwrap();
        if text.is_empty() {
            return None;
        }
        let json: Value = serde_json::from_str(&text).unwrap();
        assert_valid("prompt-output.schema.json", &json);
        Some(json["systemMessage"].as_str().unwrap().to_string())
    };
    let past = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    assert_eq!(
        prompt(&transcript_with(&p, None)),
        None,
        "a mention is no cut"
    );
    assert_eq!(
        prompt(&transcript_with(&p, Some(past))),
        None,
        "an old cut is no news"
    );
    assert_eq!(p.loop_state("s1")["status"], "running");
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(2);
    let cut = transcript_with(&p, Some(later));
    let told = prompt(&cut).expect("the human is told");
    assert_contains!(told, "ended a turn of this session's loop");
    assert_contains!(told, "NOT verified");
    let state = p.loop_state("s1");
    assert_eq!(state["status"], "interrupted", "{state}");
    assert_eq!(state["failures"][0]["error"], "block_cap", "{state}");
    assert_eq!(prompt(&cut), None, "told once");
    // SessionEnd finds a cut the same way (under claude -p no prompt follows it).
    assert!(p.stop(&[], "s1", Some("not yet")).blocked());
    let again = transcript_with(&p, Some(later + std::time::Duration::from_secs(5)));
    let payload = json!({"session_id": "s1", "hook_event_name": "SessionEnd", "cwd": p.path(),
        "reason": "other", "transcript_path": again});
    ok(session_end_handoff()
        .current_dir(p.path())
        .write_stdin(payload.to_string())
        .output()
        .unwrap());
    // The session is over: the loop is cut, for the engine's cap (issue 29, item 1).
    let state = p.loop_state("s1");
    assert_eq!(state["status"], "cut", "{state}");
    assert_eq!(state["end_reason"], "block-cap", "{state}");
    assert_eq!(state["failures"].as_array().unwrap().len(), 2, "{state}");
}

/// [`blocked_once_of_twenty`], then the engine's cut of the turn in the transcript, written in
/// 2 s: its path.
fn blocked_then_cut(p: &Project) -> std::path::PathBuf {
    blocked_once_of_twenty(p);
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(2);
    transcript_with(p, Some(later))
}

/// A loop of s1 (20 passes) started in the project, whose first Stop it blocks.
fn blocked_once_of_twenty(p: &Project) {
    start_with(p, "s1", 20, &[]);
    assert!(p.stop(&[], "s1", Some("not yet")).blocked());
}

/// A loop of s1 (5 passes) started in the project, whose first Stop it blocks: the line Claude
/// Code writes in the transcript for that block.
fn blocked_once(p: &Project) -> Value {
    start_with(p, "s1", 5, &[]);
    assert!(p.stop(&[], "s1", Some("not yet")).blocked());
    json!({"type": "attachment", "attachment": {"type": "hook_blocking_error",
        "hookName": "Stop", "hookEvent": "Stop", "blockingError": {"blockingError":
        "Task of s1.\n\nvigil loop 2/5: finish only by ending with <promise>DONE</promise>",
        "command": "/usr/local/bin/stop-gate"}}})
}

/// Issue 29, a witness the agent cannot delete: with the state home removed mid-loop (the
/// record gone), a Stop of a session whose transcript holds vigil's loop blocks, as Claude
/// Code writes them (`hook_blocking_error` attachments on Stop), says the loop is NOT
/// verified, once. The model's own words are no witness, and a witness never passes anything.
#[test]
fn a_loop_whose_record_is_gone_is_told_not_verified_from_the_transcripts_blocks() {
    let p = Project::new();
    let block = blocked_once(&p);
    let transcript = p.path().join("t.jsonl");
    let words = json!({"type": "assistant", "message": {"content":
        "hook_blocking_error vigil loop 2/5"}});
    let stop_with_transcript = |lines: &[&Value], args: &[&str]| {
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(&transcript, text).unwrap();
        let mut payload: Value =
            serde_json::from_str(&read_fixture("samples/claude-stop.json")).unwrap();
        payload["session_id"] = json!("s1");
        payload["cwd"] = json!(p.path());
        payload["transcript_path"] = json!(transcript);
        payload["last_assistant_message"] = json!("<promise>DONE</promise>");
        p.stop_with(args, payload.to_string())
    };
    std::fs::remove_dir_all(protected_dir(p.path())).unwrap();
    assert!(
        stop_with_transcript(&[&words], &[]).silent_allow(),
        "the model's words are no witness"
    );
    std::fs::remove_dir_all(protected_dir(p.path())).unwrap();
    let told = stop_with_transcript(&[&block, &words], &[]);
    assert!(!told.blocked());
    let message = told.system_message();
    assert_contains!(message, "record is gone");
    assert_contains!(message, "NOT verified");
    assert!(
        stop_with_transcript(&[&block, &words], &[]).silent_allow(),
        "told once"
    );
    // A witness never passes what a check denies.
    std::fs::remove_dir_all(protected_dir(p.path())).unwrap();
    let denied = stop_with_transcript(&[&block], &["--run", "exit 1"]);
    assert!(denied.blocked());
    assert!(denied.system_message().contains("NOT verified"));
}

/// The witness at the other hooks of a session that goes on (issue 29, item 6): the next
/// prompt (UserPromptSubmit) and a resumed session's start say the loop is NOT verified, once
/// in all; a fresh session (startup) has no witness of its own to read.
#[test]
fn the_next_prompt_and_a_resumed_start_tell_a_loop_whose_record_is_gone() {
    let p = Project::new();
    let block = blocked_once(&p);
    let transcript = p.path().join("t.jsonl");
    std::fs::write(&transcript, format!("{block}\n")).unwrap();
    let prompt = || {
        let payload = json!({"session_id": "s1", "hook_event_name": "UserPromptSubmit",
            "cwd": p.path(), "prompt": "go on", "transcript_path": &transcript});
        let out = ok(p.run_gate(&payload));
        stdout_of(&out)
    };
    let start = |source: &str| {
        let payload = json!({"session_id": "s1", "hook_event_name": "SessionStart",
            "cwd": p.path(), "source": source, "transcript_path": &transcript});
        let out = ok(session_start_loader()
            .current_dir(p.path())
            .write_stdin(payload.to_string())
            .output()
            .unwrap());
        stdout_of(&out)
    };
    std::fs::remove_dir_all(protected_dir(p.path())).unwrap();
    let told = prompt();
    assert_contains!(told, "record is gone");
    assert_contains!(told, "NOT verified");
    assert!(!told.contains("\"decision\""), "the prompt goes on: {told}");
    assert_eq!(prompt(), "", "told once");
    std::fs::remove_dir_all(protected_dir(p.path())).unwrap();
    assert!(!start("startup").contains("record is gone"));
    let resumed = start("resume");
    assert_contains!(resumed, "record is gone");
    assert_contains!(resumed, "NOT verified");
    assert!(!start("resume").contains("record is gone"), "told once");
}

/// A record lost while its loop ran must be told by the next Stop, even when another hook
/// (a StopFailure, a subagent's stop) opened the session first.
#[test]
fn a_lost_loop_record_is_still_told_after_a_stop_failure_or_a_subagent_stop_touched_it() {
    for first in ["StopFailure", "SubagentStop", "damaged then SubagentStop"] {
        let p = Project::git();
        start_with(&p, "s1", 5, &[]);
        let record = p.protected().join("sessions/s1.rec");
        if first.starts_with("damaged") {
            std::fs::write(&record, "{\"loop\": {\"status\": \"passed\"}}").unwrap();
        } else {
            std::fs::remove_file(&record).unwrap();
        }
        if first == "StopFailure" {
            ok(stop_failure(
                &p,
                "s1",
                "claude-stop-failure-rate-limit.json",
                &[],
            ));
        } else {
            let stop = p.stop_with(
                &["--contract", "default"],
                sample_payload(
                    "claude-subagent-stop-real.json",
                    &[
                        ("session_id", json!("s1")),
                        ("cwd", json!(p.path())),
                        ("last_assistant_message", json!(REPORT)),
                    ],
                ),
            );
            assert!(stop.silent_allow(), "{first}: {}", stop.reason());
        }
        let stop = p.stop(&[], "s1", Some("Working."));
        assert!(!stop.blocked(), "{first}");
        assert_contains!(
            stop.system_message(),
            "NOT verified",
            "{first}: the loss is told: {:?}",
            stop.system_message()
        );
        assert!(p.stop_s1(&[]).silent_allow(), "{first}: told once");
    }
}

#[test]
fn a_damaged_records_notice_survives_a_subagent_stop_that_opens_it_first() {
    let p = Project::new();
    start_with(&p, "s5", 5, &[]);
    let cancel = p.loop_command(&["cancel", "--session", "s5"]);
    assert!(cancel.status.success());
    std::fs::write(
        p.protected().join("sessions/s5.rec"),
        vec![b'x'; 2 * vigil::sys::record::SLOT],
    )
    .unwrap();
    let report = sample_payload(
        "claude-subagent-stop-real.json",
        &[
            ("session_id", json!("s5")),
            ("cwd", json!(p.path())),
            ("last_assistant_message", json!(REPORT)),
        ],
    );
    assert!(
        p.stop_with(&["--contract", "default"], report)
            .silent_allow()
    );
    let stop = p.stop(&[], "s5", Some("Working."));
    let told = stop.system_message();
    assert_contains!(told, "damaged");
    assert_contains!(told, "NOT verified");
}

/// Review: a cut found by a prompt that is refused (a `/vigil-loop` without its flags) is said
/// with the refusal, since it is recorded already and would never be said again.
#[test]
fn a_cut_found_by_a_refused_prompt_is_said_with_the_refusal() {
    let p = Project::new();
    let cut = blocked_then_cut(&p);
    let payload = json!({"session_id": "s1", "hook_event_name": "UserPromptSubmit",
        "cwd": p.path(), "prompt": "/vigil-loop", "transcript_path": cut});
    let out = p.run_gate(&payload);
    stop_of(&out).assert_blocked_saying("ended a turn of this session's loop");
}
