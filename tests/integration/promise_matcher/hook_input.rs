//! SPEC §2 and §3, the hook input: the last assistant message, else the last main-chain text of
//! the transcript (sidechains, thinking and tool use skipped), read from its tail; a FIFO, a
//! missing file or malformed input is an input error.

use std::io::Write;

use serde_json::{Value, json};

use crate::support::*;

fn hook(payload: &str) -> std::process::Output {
    promise_matcher_on(&["--hook", "--json"], payload.to_string())
}

fn hook_verdict(payload: &str) -> Value {
    let output = hook(payload);
    let report: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|_| {
        panic!(
            "no report; stderr {:?}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    assert_valid("verdict.schema.json", &report);
    report
}

/// `promise-matcher --hook` fed the sample payload `name`.
fn hook_on_sample(name: &str) -> assert_cmd::assert::Assert {
    promise_matcher()
        .arg("--hook")
        .write_stdin(read_fixture(&format!("samples/{name}")))
        .assert()
}

#[test]
fn hook_reads_last_assistant_message_of_a_claude_stop() {
    hook_on_sample("claude-stop.json")
        .success()
        .stdout("declared\n");
}

#[test]
fn hook_reads_a_codex_stop_with_null_transcript() {
    hook_on_sample("codex-stop.json").code(1).stdout("absent\n");
}

#[test]
fn hook_prefers_last_assistant_message_over_a_lagging_transcript() {
    let transcript = fixture("samples/claude-transcript.jsonl");
    let payload = sample_payload(
        "claude-stop.json",
        &[
            ("transcript_path", json!(transcript)),
            ("last_assistant_message", json!("Still working on it.")),
        ],
    );
    assert_eq!(hook_verdict(&payload)["verdict"], "absent");
}

#[test]
fn transcript_fallback_finds_the_last_main_chain_text_of_the_sample() {
    let transcript = fixture("samples/claude-transcript.jsonl");
    let payload = sample_payload(
        "claude-stop-old-version.json",
        &[("transcript_path", json!(transcript))],
    );
    let report = hook_verdict(&payload);
    assert_eq!(report["verdict"], "declared", "{report}");
    assert_eq!(report["line"], 3);
}

/// A transcript line as Claude Code writes it: one content block per line.
fn entry(kind: &str, sidechain: bool, content: Value) -> String {
    let role = if kind == "assistant" {
        "assistant"
    } else {
        "user"
    };
    json!({
        "type": kind, "isSidechain": sidechain, "uuid": "x", "sessionId": "s",
        "message": {"role": role, "content": content}
    })
    .to_string()
        + "\n"
}

fn text_block(text: &str) -> Value {
    json!([{"type": "text", "text": text}])
}

fn write_transcript(lines: &[String]) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jsonl");
    std::fs::write(&path, lines.concat()).unwrap();
    (dir, path)
}

fn old_stop(transcript: &std::path::Path) -> String {
    sample_payload(
        "claude-stop-old-version.json",
        &[("transcript_path", json!(transcript))],
    )
}

#[test]
fn transcript_fallback_skips_sidechain_thinking_tool_use_and_malformed_lines() {
    let (_dir, path) = write_transcript(&[
        entry("user", false, json!("Fix it")),
        entry(
            "assistant",
            false,
            text_block("Fixed.\n<promise>DONE</promise>"),
        ),
        entry(
            "assistant",
            false,
            json!([{"type": "thinking", "thinking": "<promise>NOPE</promise>"}]),
        ),
        entry(
            "assistant",
            false,
            json!([{"type": "tool_use", "id": "t", "name": "Bash", "input": {}}]),
        ),
        entry(
            "user",
            false,
            json!([{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]),
        ),
        entry(
            "assistant",
            true,
            text_block("sidechain says something else"),
        ),
        "{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"trunc"
            .to_string()
            + "\n",
        "not json at all\n".to_string(),
    ]);
    assert_eq!(hook_verdict(&old_stop(&path))["verdict"], "declared");
}

#[test]
fn transcript_fallback_does_not_reach_past_the_last_user_prompt() {
    // The assistant declared in an earlier turn, the user asked for more, and this turn has no
    // text yet: the old declaration must not end the loop.
    let (_dir, path) = write_transcript(&[
        entry("assistant", false, text_block("<promise>DONE</promise>")),
        entry("user", false, json!("No, the docs are missing too.")),
        entry(
            "assistant",
            false,
            json!([{"type": "tool_use", "id": "t", "name": "Edit", "input": {}}]),
        ),
    ]);
    assert_eq!(hook_verdict(&old_stop(&path))["verdict"], "absent");
}

#[test]
fn transcript_fallback_judges_a_mention_in_the_last_text() {
    let (_dir, path) = write_transcript(&[
        entry("assistant", false, text_block("<promise>DONE</promise>")),
        entry(
            "assistant",
            false,
            text_block("I will say <promise>DONE</promise> when it is."),
        ),
    ]);
    assert_eq!(hook_verdict(&old_stop(&path))["verdict"], "mentioned");
}

#[test]
fn transcript_that_ends_in_a_malformed_line_uses_the_last_good_one() {
    let (_dir, path) = write_transcript(&[
        entry(
            "assistant",
            false,
            text_block("All good.\n<promise>DONE</promise>"),
        ),
        "{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"te".to_string(),
    ]);
    assert_eq!(hook_verdict(&old_stop(&path))["verdict"], "declared");
}

#[test]
fn transcript_fallback_judges_every_text_block_of_the_last_message() {
    // One message, two text blocks, each its own line (as with citations): the question in the
    // first block must not be lost behind the declaration in the second.
    let block = |text: &str| {
        json!({"type": "assistant", "isSidechain": false, "message": {"id": "msg_9", "role": "assistant",
            "content": [{"type": "text", "text": text}]}})
        .to_string()
            + "\n"
    };
    let (_dir, path) = write_transcript(&[
        entry("user", false, json!("Migrate the schema")),
        block("needs-decision: Drop the legacy table?"),
        json!({"type": "assistant", "isSidechain": false, "message": {"id": "msg_9", "role": "assistant",
            "content": [{"type": "thinking", "thinking": "hmm"}]}}).to_string() + "\n",
        block("<promise>DONE</promise>"),
    ]);
    let report = hook_verdict(&old_stop(&path));
    assert_eq!(report["verdict"], "blocked", "{report}");
}

#[test]
fn transcript_fallback_does_not_join_an_earlier_message() {
    let message = |id: &str, text: &str| {
        json!({"type": "assistant", "message": {"id": id, "role": "assistant", "content": [{"type": "text", "text": text}]}}).to_string() + "\n"
    };
    let (_dir, path) = write_transcript(&[
        message("msg_1", "needs-decision: old question"),
        message("msg_2", "<promise>DONE</promise>"),
    ]);
    assert_eq!(hook_verdict(&old_stop(&path))["verdict"], "declared");
}

#[test]
fn transcript_that_is_a_fifo_is_refused_not_waited_on() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("t.jsonl");
    mkfifo(&fifo);
    let output = hook(&old_stop(&fifo));
    assert_contains!(
        usage_error(&output, "promise-matcher"),
        "not a regular file"
    );
}

#[test]
fn empty_transcript_has_no_message() {
    let (_dir, path) = write_transcript(&[]);
    assert_eq!(hook_verdict(&old_stop(&path))["verdict"], "absent");
}

#[test]
fn transcript_that_does_not_exist_is_an_input_error() {
    let output = hook(&old_stop(std::path::Path::new("/nonexistent/t.jsonl")));
    let stderr = usage_error(&output, "promise-matcher");
    assert!(stderr.contains("/nonexistent/t.jsonl"), "{stderr}");
    assert!(output.stdout.is_empty());
}

#[test]
fn large_generated_transcript_is_read_from_its_tail() {
    // 64 MiB of older turns (over the 32 MiB backwards budget) before the final text: found,
    // because only the tail is read.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.jsonl");
    let mut file = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    let filler = entry(
        "user",
        false,
        json!([{"type": "tool_result", "tool_use_id": "t", "content": "x".repeat(4000)}]),
    );
    let mut written = 0;
    while written < 64 * 1024 * 1024 {
        file.write_all(filler.as_bytes()).unwrap();
        written += filler.len();
    }
    file.write_all(
        entry(
            "assistant",
            false,
            text_block("Done.\n<promise>DONE</promise>"),
        )
        .as_bytes(),
    )
    .unwrap();
    file.write_all(
        entry(
            "assistant",
            false,
            json!([{"type": "tool_use", "id": "t", "name": "X", "input": {}}]),
        )
        .as_bytes(),
    )
    .unwrap();
    drop(file);
    assert_eq!(hook_verdict(&old_stop(&path))["verdict"], "declared");
}

#[test]
fn transcript_with_no_text_within_the_budget_has_no_message() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.jsonl");
    let mut content = entry("assistant", false, text_block("<promise>DONE</promise>")).into_bytes();
    let filler = entry(
        "user",
        false,
        json!([{"type": "tool_result", "tool_use_id": "t", "content": "y".repeat(8000)}]),
    );
    while content.len() < 40 * 1024 * 1024 {
        content.extend_from_slice(filler.as_bytes());
    }
    std::fs::write(&path, content).unwrap();
    assert_eq!(hook_verdict(&old_stop(&path))["verdict"], "absent");
}

#[test]
fn malformed_hook_input_is_an_input_error() {
    let deep = "[".repeat(10_000) + &"]".repeat(10_000);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty", b"".to_vec()),
        ("whitespace", b"  \n".to_vec()),
        ("not JSON", b"Stop".to_vec()),
        ("truncated", br#"{"session_id":"s","#.to_vec()),
        ("not an object", b"[\"Stop\"]".to_vec()),
        ("string", b"\"Stop\"".to_vec()),
        (
            "wrong type",
            br#"{"last_assistant_message":["<promise>DONE</promise>"]}"#.to_vec(),
        ),
        (
            "wrong type bool",
            br#"{"stop_hook_active":"false"}"#.to_vec(),
        ),
        ("wrong type path", br#"{"transcript_path":42}"#.to_vec()),
        ("invalid UTF-8", b"{\"cwd\":\"\xff\xfe\"}".to_vec()),
        ("deeply nested", deep.into_bytes()),
    ];
    for (name, input) in cases {
        let output = promise_matcher_on(&["--hook"], input);
        let stderr = usage_error(&output, "promise-matcher");
        assert!(stderr.contains("hook input"), "{name}: {stderr}");
        assert!(output.stdout.is_empty(), "{name}");
    }
}

#[test]
fn hook_input_over_16_mib_is_refused() {
    let mut big = br#"{"last_assistant_message":""#.to_vec();
    big.extend(std::iter::repeat_n(b'a', 16 * 1024 * 1024));
    big.extend_from_slice(b"\"}");
    let output = promise_matcher_on(&["--hook"], big);
    assert_contains!(usage_error(&output, "promise-matcher"), "16 MiB");
}

#[test]
fn every_sample_payload_parses() {
    for name in [
        "claude-stop.json",
        "claude-stop-old-version.json",
        "claude-subagent-stop.json",
        "claude-session-start.json",
        "claude-session-end.json",
        "claude-precompact.json",
        "codex-stop.json",
        "codex-session-start.json",
    ] {
        let payload = sample_payload(name, &[("transcript_path", Value::Null)]);
        let output = hook(&payload);
        assert!(
            matches!(output.status.code(), Some(0 | 1)),
            "{name}: {:?}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}
