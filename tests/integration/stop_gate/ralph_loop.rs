//! SPEC §4 check 1, the loop: a declaration ends it, a mention never does, `max_iterations`
//! bounds it, each session has its own; what belongs here is how a Stop drives a running loop.

use serde_json::{Value, json};

use super::DECLARED;
use crate::support::*;

#[test]
fn loop_without_a_declaration_blocks_until_max_iterations_then_allows_as_aborted() {
    let p = Project::new();
    p.start_ok("s1", 3, "Fix the parser.");
    let first = p.stop(&[], "s1", Some("Working on it."));
    assert!(first.blocked());
    assert_eq!(first.task(), "Fix the parser.");
    assert_eq!(
        first.system_message(),
        "vigil loop 2/3: finish only by ending with <promise>DONE</promise> on its own last line, when it is true"
    );
    let second = p.stop(&[], "s1", Some("Still going."));
    assert!(second.blocked());
    assert!(second.system_message().starts_with("vigil loop 3/3:"));
    let third = p.stop(&[], "s1", Some("Nearly."));
    third.assert_allowed_saying("aborted");
    assert_contains!(third.system_message(), "NOT verified");
    let state = p.loop_state("s1");
    assert_eq!(state["status"], "aborted");
    assert_eq!(state["iteration"], 3);
    // The loop is over: the next stop is not the loop's business.
    assert!(p.stop(&[], "s1", Some("bye")).silent_allow());
}

#[test]
fn declaration_on_pass_two_ends_the_loop_as_passed() {
    let p = Project::new();
    p.start_ok("s1", 5, "Fix it.");
    assert!(p.stop(&[], "s1", Some("Looking.")).blocked());
    let done = p.stop(&[], "s1", Some(DECLARED));
    done.assert_allowed_saying("passed on pass 2/5");
    assert_eq!(p.loop_state("s1")["status"], "passed");
    assert_eq!(p.loop_state("s1")["iteration"], 2);
}

#[test]
fn mention_only_keeps_the_loop_going() {
    let p = Project::new();
    p.start_ok("s1", 5, "Fix it.");
    for mention in [
        "I will print <promise>DONE</promise> when it is.",
        "```\n<promise>DONE</promise>\n```",
        "> <promise>DONE</promise>",
        "DONE",
    ] {
        assert!(
            p.stop(&[], "s1", Some(mention)).blocked(),
            "{mention:?} ended the loop"
        );
    }
    assert_eq!(p.loop_state("s1")["status"], "running");
}

/// The agent's attack on rule 1: Markdown that a hand-written fence reader takes for closed
/// code, while every CommonMark renderer shows the promise inside a code block, a quote or an
/// HTML comment. None of it may end a running loop.
#[test]
fn promise_hidden_in_markdown_structure_never_ends_the_loop() {
    let p = Project::new();
    p.start_ok("s1", 20, "Fix it.");
    for hidden in [
        "Notes:\n```a`b\n```\n<promise>DONE</promise>",
        "1. Ran the suite:\n\n    ```\n    <promise>DONE</promise>",
        "Log:\n\n    <promise>DONE</promise>",
        "> The prompt said\n<promise>DONE</promise>",
        "<!-- draft\n<promise>DONE</promise>",
        "<pre>\n<promise>DONE</promise>",
        "```\ncode\n```\u{a0}\n<promise>DONE</promise>",
        "```\rcode\r<promise>DONE</promise>",
        "> The prompt said\n\t> <div>\n<promise>DONE</promise>",
        "<div>\n\u{c}\n<promise>DONE</promise>",
    ] {
        assert!(
            p.stop(&[], "s1", Some(hidden)).blocked(),
            "{hidden:?} ended the loop"
        );
    }
    assert_eq!(p.loop_state("s1")["status"], "running");
    // The same declaration outside the structure ends it.
    let done = p.stop(&[], "s1", Some("- ```\n  ```\n\n<promise>DONE</promise>"));
    assert!(!done.blocked());
    assert_eq!(p.loop_state("s1")["status"], "passed");
}

#[test]
fn declaration_while_the_check_fails_is_blocked_with_the_check_line_before_the_prompt() {
    let p = Project::new();
    p.start_ok("s1", 5, "Make the tests pass.");
    let stop = p.stop(&["--run", "echo 1 failed; exit 1"], "s1", Some(DECLARED));
    assert!(stop.blocked());
    assert_eq!(
        stop.task(),
        "stop-gate: `echo 1 failed; exit 1` failed (exit 1); fix it and run it again before stopping\n\nMake the tests pass."
    );
    assert_eq!(p.loop_state("s1")["status"], "running");
    // Once the check passes, the same declaration ends the loop.
    assert!(!p.stop(&["--run", "true"], "s1", Some(DECLARED)).blocked());
    assert_eq!(p.loop_state("s1")["status"], "passed");
}

#[test]
fn a_check_is_not_run_before_the_agent_declares() {
    let p = Project::new();
    p.start_ok("s1", 5, "Go.");
    let ran = p.path().join("ran");
    let stop = p.stop(
        &["--run", &format!("touch {}", ran.display())],
        "s1",
        Some("working"),
    );
    assert!(stop.blocked());
    assert!(!ran.exists(), "the check ran although nothing was declared");
}

#[test]
fn blocked_verdict_ends_the_loop_and_allows_with_the_question() {
    let p = Project::new();
    p.start_ok("s1", 5, "Migrate.");
    let stop = p.stop(
        &[],
        "s1",
        Some("needs-decision: Drop the legacy table?\n<promise>DONE</promise>"),
    );
    stop.assert_allowed_saying("Drop the legacy table?");
    assert_eq!(p.loop_state("s1")["status"], "blocked");
}

/// The question reaches the human's terminal: escape sequences in it would run there (an OSC
/// can set the title or the clipboard), and a huge one would flood it. It is shown as plain
/// text, capped, and fast whatever the agent put in it.
#[test]
fn a_blocked_question_is_shown_as_capped_plain_text() {
    let p = Project::new();
    p.start_ok("s1", 5, "Migrate.");
    let question = format!(
        "needs-decision: Drop \u{1b}]52;c;cm0gLXJmIH4=\u{7}the table?{}",
        "<\u{1b}[999b".repeat(200_000)
    );
    // Fast is CPU time, the gate's own (bash's `times` for its child): a clock on the wall
    // measures the machine's other work too. Here it takes about 0.4 s.
    let mut timed = std::process::Command::new("bash");
    isolated(&mut timed)
        .current_dir(p.path())
        .args(["-c", "\"$0\"; times >&2"])
        .arg(bin_dir().join("stop-gate"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let payload = p.payload("s1", Some(&question)).to_string();
    let out = spawn_fed(&mut timed, payload.as_bytes())
        .wait_with_output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let cpu = cpu_seconds(stderr.lines().last().unwrap_or_default());
    assert!(cpu < 2.0, "{cpu} s of CPU: {stderr}");
    let stop = Stop {
        json: Some(serde_json::from_slice(&out.stdout).unwrap()),
    };
    let message = stop.system_message();
    assert!(message.contains("Drop the table?"), "{message}");
    assert!(!message.contains('\u{1b}'), "an escape reached the human");
    assert!(
        message.chars().count() < 700,
        "{} chars",
        message.chars().count()
    );
    assert_eq!(p.loop_state("s1")["status"], "blocked");
}

#[test]
fn a_blocked_questions_bidi_and_format_controls_never_reach_the_person() {
    // An override that shows `rm -rf ~` reversed, isolates, marks, a zero-width space, a soft
    // hyphen, a word joiner, a BOM and invisible tag characters (U+E0041: "A" nobody sees).
    let p = Project::new();
    p.start_ok("s1", 5, "Migrate.");
    let hidden = "\u{202E}~ fr- mr\u{202C} \u{2066}x\u{2069}\u{200F}\u{061C}\u{200B}\u{AD}\u{2060}\u{FEFF}\u{E0041}\u{E007F}";
    let question = format!("needs-decision: Run it?{hidden} Keep the table?");
    let stop = p.stop(&[], "s1", Some(&question));
    let message = stop.system_message();
    assert!(message.contains("Run it?"), "{message}");
    assert!(message.contains("Keep the table?"), "{message}");
    for c in hidden.chars().filter(|c| !c.is_ascii()) {
        assert!(
            !message.contains(c),
            "U+{:04X} reached the person: {message:?}",
            c as u32
        );
    }
    assert_eq!(p.loop_state("s1")["status"], "blocked");
}

/// The user and system seconds of bash's `times` line for its children (`0m0.412s 0m0.020s`).
fn cpu_seconds(line: &str) -> f64 {
    line.split_whitespace()
        .map(|t| {
            let (minutes, seconds) = t.trim_end_matches('s').split_once('m').unwrap();
            minutes.parse::<f64>().unwrap() * 60.0 + seconds.parse::<f64>().unwrap()
        })
        .sum()
}

#[test]
fn loop_in_session_a_leaves_session_b_untouched() {
    let p = Project::new();
    p.start_ok("session-a", 5, "A's work.");
    let a_state = p.session_record("session-a");
    let stop = p.stop(&[], "session-b", Some("B is done."));
    assert!(stop.silent_allow(), "B has no loop");
    assert_eq!(p.session_record("session-a"), a_state, "A's state changed");
    assert!(!p.protected().join("sessions/session-b.rec").exists());
}

#[test]
fn many_sessions_loop_side_by_side_in_one_project() {
    let p = Project::new();
    for s in ["a", "b", "c"] {
        p.start_ok(s, 4, &format!("work of {s}"));
    }
    assert_eq!(p.stop(&[], "b", Some("x")).task(), "work of b");
    assert!(p.stop(&[], "b", Some("x")).blocked());
    assert_eq!(p.stop(&[], "a", Some("x")).task(), "work of a");
    assert!(!p.stop(&[], "c", Some(DECLARED)).blocked());
    assert_eq!(p.loop_state("a")["iteration"], 2);
    assert_eq!(p.loop_state("b")["iteration"], 3);
    assert_eq!(p.loop_state("c")["status"], "passed");
}

#[test]
fn stop_without_last_assistant_message_reads_the_transcript() {
    let p = Project::new();
    p.start_ok("s1", 5, "Fix.");
    let mut payload = p.payload("s1", None);
    payload["transcript_path"] = json!(fixture("samples/claude-transcript.jsonl"));
    let stop = p.stop_with(&[], payload.to_string());
    assert!(!stop.blocked(), "the sample transcript declares DONE");
    assert_eq!(p.loop_state("s1")["status"], "passed");
}

#[test]
fn loop_prefers_last_assistant_message_over_the_transcript() {
    let p = Project::new();
    p.start_ok("s1", 5, "Fix.");
    let mut payload = p.payload("s1", Some("not yet"));
    payload["transcript_path"] = json!(fixture("samples/claude-transcript.jsonl"));
    assert!(p.stop_with(&[], payload.to_string()).blocked());
}

#[test]
fn subagent_stop_never_counts_as_a_pass() {
    let p = Project::new();
    p.start_ok("s1", 5, "Fix.");
    let mut payload = p.payload("s1", Some(DECLARED));
    payload["hook_event_name"] = json!("SubagentStop");
    assert!(p.stop_with(&[], payload.to_string()).silent_allow());
    assert!(
        p.stop_with(&["--subagents"], payload.to_string())
            .silent_allow()
    );
    let state = p.loop_state("s1");
    assert_eq!(
        (state["iteration"].clone(), state["status"].clone()),
        (json!(1), json!("running"))
    );
}

#[test]
fn subagent_stop_is_allowed_untouched_unless_subagents_is_given() {
    let p = Project::new();
    let mut payload: Value =
        serde_json::from_str(&read_fixture("samples/claude-subagent-stop.json")).unwrap();
    payload["cwd"] = json!(p.path());
    assert!(
        p.stop_with(&["--run", "exit 1"], payload.to_string())
            .silent_allow()
    );
    assert!(
        !p.vigil().exists(),
        "nothing recorded for an untouched SubagentStop"
    );
    assert!(
        p.stop_with(&["--run", "exit 1", "--subagents"], payload.to_string())
            .blocked()
    );
}

#[test]
fn feedback_context_gives_the_block_as_stop_additional_context() {
    let p = Project::new();
    p.start_ok("s1", 5, "Fix it.");
    let stop = p.stop(&["--feedback", "context"], "s1", Some("Not yet."));
    let json = stop.json.clone().expect("a continuation");
    assert!(json.get("decision").is_none(), "{json}");
    assert_eq!(json["hookSpecificOutput"]["hookEventName"], "Stop");
    assert_contains!(additional_context(&json), "Fix it.", "{json}");
    assert_eq!(
        p.loop_state("s1")["iteration"],
        json!(2),
        "it counts as a block"
    );
    // The default, and a SubagentStop even with context asked for, stay decision:block.
    assert!(
        p.stop(&["--feedback", "block"], "s1", Some("Not yet."))
            .blocked()
    );
    let mut payload: Value =
        serde_json::from_str(&read_fixture("samples/claude-subagent-stop.json")).unwrap();
    payload["cwd"] = json!(p.path());
    assert!(
        p.stop_with(
            &["--run", "exit 1", "--subagents", "--feedback", "context"],
            payload.to_string()
        )
        .blocked()
    );
}

#[test]
fn feedback_other_than_block_or_context_is_a_config_error_that_blocks() {
    let p = Project::new();
    let stop = p.stop(&["--feedback", "loud"], "s1", Some("Done."));
    assert!(stop.blocked());
    assert!(stop.reason().contains("--feedback"), "{}", stop.reason());
}

#[test]
fn codex_stop_drives_the_loop_too() {
    let p = Project::new();
    p.start_ok("019a1b2c-3d4e-7f60-8a9b-0c1d2e3f4a5b", 3, "Rename it.");
    let mut payload: Value =
        serde_json::from_str(&read_fixture("samples/codex-stop.json")).unwrap();
    payload["cwd"] = json!(p.path());
    let stop = p.stop_with(&[], payload.to_string());
    assert!(stop.blocked());
    assert_eq!(stop.task(), "Rename it.");
}

#[test]
fn no_loop_and_no_checks_allows_without_writing_anything() {
    let p = Project::new();
    assert!(p.stop(&[], "s1", Some("hello")).silent_allow());
    assert!(!p.vigil().exists());
}

/// Loops lived in `.vigil/loops/` once: a file the agent plants there (a symlink, a running
/// loop of its own, a v1 loop that says `passed`) starts, ends or changes nothing.
#[test]
fn a_loop_file_planted_in_the_project_starts_or_ends_nothing() {
    let p = Project::new();
    p.start_ok("s1", 3, "The real task.");
    let loops = p.vigil().join("loops");
    std::fs::create_dir_all(&loops).unwrap();
    std::os::unix::fs::symlink("/nonexistent/loop.json", loops.join("s1.json")).unwrap();
    let planted = json!({"schema": "vigil.loop/v1", "session_id": "s2", "prompt": "Planted.",
        "completion_promise": "DONE", "max_iterations": 9, "iteration": 1, "status": "running",
        "started_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z"});
    std::fs::write(loops.join("s2.json"), planted.to_string()).unwrap();
    let stop = p.stop(&[], "s1", Some("Working."));
    stop.assert_blocked_starting("The real task.\n");
    assert!(p.stop(&[], "s2", Some("x")).silent_allow(), "no loop in s2");
}

/// SPEC §4: a loop started from a terminal has told the model nothing, so every block's
/// `reason` (what the model reads) ends with the line that says how to finish: after the
/// failing check's line and the prompt, the same line the human gets as `systemMessage`.
#[test]
fn every_loop_block_reason_tells_the_model_how_to_finish() {
    let p = Project::git();
    p.start_ok("s1", 5, "The real task.");
    let stop = p.stop(&[], "s1", Some("Working."));
    let finish = "vigil loop 2/5: finish only by ending with <promise>DONE</promise> on its own last line, when it is true";
    assert_eq!(stop.reason(), format!("The real task.\n\n{finish}"));
    assert_eq!(stop.system_message(), finish);
    let stop = p.stop(
        &["--run", "exit 3"],
        "s1",
        Some("All green.\n\n<promise>DONE</promise>"),
    );
    assert!(stop.blocked());
    let reason = stop.reason();
    let (first, rest) = reason.split_once('\n').unwrap();
    assert!(first.contains("`exit 3` failed (exit 3)"), "{reason}");
    assert!(
        rest.ends_with("The real task.\n\nvigil loop 3/5: finish only by ending with <promise>DONE</promise> on its own last line, when it is true"),
        "{reason}"
    );
}

#[test]
fn an_unreadable_transcript_during_a_loop_says_so() {
    let p = Project::new();
    p.start_ok("s1", 5, "Fix.");
    let mut payload = p.payload("s1", None);
    payload["transcript_path"] = json!("/nonexistent/transcript.jsonl");
    let stop = p.stop_with(&[], payload.to_string());
    let reason = stop.assert_blocked_starting("stop-gate: cannot read the transcript");
    assert_contains!(reason, "\n\nFix.\n\nvigil loop 2/5: finish only");
}

#[test]
fn thirty_two_stops_in_parallel_across_eight_looping_sessions_count_each_pass_exactly() {
    let p = Project::new();
    let sessions: Vec<String> = (0..8).map(|i| format!("s{i}")).collect();
    for session in &sessions {
        p.start_ok(session, 100, &format!("Task of {session}."));
    }
    // Four Stops per session, all 32 at once, none declaring: each is one block, one pass.
    let children: Vec<_> = (0..32)
        .map(|i| {
            let session = &sessions[i % 8];
            // Each its own message: the same one on three passes would be a stall.
            let payload = p.payload(session, Some(&format!("Still working ({i}).")));
            let child = spawn_fed(
                vigil_process("stop-gate")
                    .current_dir(p.path())
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped()),
                payload.to_string().as_bytes(),
            );
            (session.clone(), child)
        })
        .collect();
    for (session, child) in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        let decision: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(decision["decision"], "block", "{session}: {decision}");
        assert_contains!(
            decision["reason"].as_str().unwrap(),
            &format!("Task of {session}."),
            "each session is fed its own prompt: {decision}"
        );
    }
    for session in &sessions {
        let state = p.loop_state(session);
        assert_eq!(
            (state["iteration"].clone(), state["status"].clone()),
            (json!(5), json!("running")),
            "{session}: 1 + 4 passes, no lost or double count"
        );
    }
}

/// A loop that passes on the declaration alone tells the human that nothing verified it, and
/// its record names no check; with a check, the record names it.
#[test]
fn a_loop_passed_with_no_check_says_nothing_verified_it() {
    let dir = Project::git();
    let start = |session: &str| {
        dir.loop_for(session).start();
    };
    let stop = |session: &str, args: &[&str]| {
        let payload = serde_json::json!({"session_id": session, "hook_event_name": "Stop",
            "cwd": dir.path(), "last_assistant_message": "<promise>DONE</promise>"});
        let out = stop_gate()
            .args(args)
            .current_dir(dir.path())
            .write_stdin(payload.to_string())
            .output()
            .unwrap();
        stdout_of(&out)
    };
    start("bare");
    let said = stop("bare", &[]);
    assert_contains!(said, "no check is configured");
    assert_contains!(said, "nothing verified the work");
    assert_eq!(loop_of(dir.path(), "bare")["checks"], serde_json::json!([]));
    start("checked");
    let said = stop("checked", &["--run", "true"]);
    assert!(said.contains("every check passed"), "{said}");
    assert_eq!(
        loop_of(dir.path(), "checked")["checks"],
        serde_json::json!(["`true`"])
    );
}
