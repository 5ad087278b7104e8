//! Time and token budgets (`--max-duration`, `--max-tokens`): a spent budget ends the loop
//! `aborted`; tokens are counted from the transcripts' usage records, each message once, only
//! since the loop started, subagents' included.

use std::io::Write;

use serde_json::json;

use crate::stop_gate::DECLARED;
use crate::support::*;

use super::start_with;

/// An assistant line of a transcript, as Claude Code writes one content block of a message.
fn usage_line(id: &str, usage: [u64; 4], when: &str) -> String {
    format!(
        "{}\n",
        json!({"type": "assistant", "timestamp": when, "isSidechain": false,
            "message": {"id": id, "role": "assistant",
                "content": [{"type": "text", "text": "working"}],
                "usage": {"input_tokens": usage[0], "cache_creation_input_tokens": usage[1],
                    "output_tokens": usage[2], "cache_read_input_tokens": usage[3],
                    "service_tier": "standard"}}})
    )
}

fn now_plus(secs: i64) -> String {
    let t = std::time::SystemTime::now()
        .checked_add(std::time::Duration::from_secs(secs.max(0) as u64))
        .unwrap()
        .checked_sub(std::time::Duration::from_secs((-secs).max(0) as u64))
        .unwrap();
    vigil::sys::time::format_rfc3339(t)
}

fn stop_with_transcript(
    p: &Project,
    args: &[&str],
    session: &str,
    transcript: &std::path::Path,
) -> Stop {
    let mut payload = p.payload(session, Some(&format!("Working {}.", now_plus(0))));
    payload["transcript_path"] = json!(transcript);
    p.stop_with(args, payload.to_string())
}

#[test]
fn a_spent_time_budget_ends_the_loop_aborted_and_a_verified_pass_still_passes() {
    let p = Project::new();
    start_with(&p, "s1", 10, &["--max-duration", "1s"]);
    start_with(&p, "s2", 10, &["--max-duration", "1s"]);
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let over = p.stop(&[], "s1", Some("Working."));
    over.assert_allowed_saying("time budget of 1s is spent");
    assert_eq!(p.loop_state("s1")["end_reason"], "max-duration");
    let done = p.stop(&[], "s2", Some(DECLARED));
    assert!(!done.blocked());
    assert_eq!(
        p.loop_state("s2")["status"],
        "passed",
        "the work was verified"
    );
}

#[test]
fn a_spent_token_budget_ends_the_loop_counting_each_message_once_and_only_since_it_started() {
    let p = Project::new();
    let transcript = p.path().join("t.jsonl");
    let mut file = std::fs::File::create(&transcript).unwrap();
    // Before the loop: not counted.
    write!(
        file,
        "{}",
        usage_line("old", [9000, 0, 9000, 0], &now_plus(-3600))
    )
    .unwrap();
    start_with(&p, "s1", 10, &["--max-tokens", "100"]);
    // One message, three content blocks: its usage counts once (10 + 20 + 30 = 60), and the
    // cache reads (5000) are shown, not counted.
    for _ in 0..3 {
        write!(
            file,
            "{}",
            usage_line("msg_1", [10, 20, 30, 5000], &now_plus(1))
        )
        .unwrap();
    }
    let first = stop_with_transcript(&p, &[], "s1", &transcript);
    assert!(first.blocked(), "60 of 100: the loop goes on");
    let tokens = p.loop_state("s1")["progress"]["tokens"].clone();
    assert_eq!(
        (
            &tokens["input"],
            &tokens["cache_creation"],
            &tokens["output"],
            &tokens["cache_read"]
        ),
        (&json!(10), &json!(20), &json!(30), &json!(5000)),
        "{tokens}"
    );
    write!(
        file,
        "{}",
        usage_line("msg_2", [20, 0, 25, 6000], &now_plus(2))
    )
    .unwrap();
    let second = stop_with_transcript(&p, &[], "s1", &transcript);
    assert!(!second.blocked(), "105 of 100: spent");
    assert!(
        second
            .system_message()
            .contains("token budget of 100 is spent (105"),
        "{}",
        second.system_message()
    );
    let state = p.loop_state("s1");
    assert_eq!(state["end_reason"], "max-tokens");
    assert_eq!(state["status"], "aborted");
}

#[test]
fn a_stop_reads_only_what_the_transcript_gained_since_the_last_one() {
    let p = Project::new();
    let transcript = p.path().join("t.jsonl");
    start_with(&p, "s1", 10, &["--max-tokens", "1000000"]);
    let first_line = usage_line("msg_1", [100, 0, 100, 0], &now_plus(1));
    std::fs::write(&transcript, &first_line).unwrap();
    assert!(stop_with_transcript(&p, &[], "s1", &transcript).blocked());
    let counted = |p: &Project| p.loop_state("s1")["progress"]["tokens"]["input"].clone();
    assert_eq!(counted(&p), 100);
    // The bytes already read are rewritten in place, the same length, with other figures: a
    // Stop that read the transcript again would count them.
    let forged = usage_line("msg_X", [900, 0, 100, 0], &now_plus(1));
    assert_eq!(forged.len(), first_line.len());
    let mut bytes = forged.into_bytes();
    bytes.extend_from_slice(usage_line("msg_2", [7, 0, 1, 0], &now_plus(2)).as_bytes());
    {
        use std::os::unix::fs::FileExt;
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(&transcript)
            .unwrap();
        file.write_all_at(&bytes, 0).unwrap();
    }
    assert!(stop_with_transcript(&p, &[], "s1", &transcript).blocked());
    assert_eq!(counted(&p), 107, "only the new line was read");
    let offset = &p.loop_state("s1")["progress"]["tokens"]["files"][0]["offset"];
    assert_eq!(
        *offset,
        json!(std::fs::metadata(&transcript).unwrap().len())
    );
}

#[test]
fn subagent_transcripts_count_towards_the_token_budget() {
    let p = Project::new();
    let transcript = p.path().join("sess.jsonl");
    start_with(&p, "s1", 10, &["--max-tokens", "50"]);
    std::fs::write(&transcript, usage_line("m1", [10, 0, 10, 0], &now_plus(1))).unwrap();
    let agents = p.path().join("sess/subagents");
    std::fs::create_dir_all(&agents).unwrap();
    let mut line = usage_line("sub1", [20, 0, 20, 0], &now_plus(1));
    line = line.replace("\"isSidechain\":false", "\"isSidechain\":true");
    std::fs::write(agents.join("agent-a83a05b9f36df9644.jsonl"), line).unwrap();
    let stop = stop_with_transcript(&p, &[], "s1", &transcript);
    assert!(!stop.blocked(), "20 + 40 = 60 of 50: spent");
    assert_eq!(p.loop_state("s1")["end_reason"], "max-tokens");
}

#[test]
fn a_transcript_whose_usage_records_are_malformed_counts_nothing_and_never_denies() {
    let p = Project::new();
    let transcript = p.path().join("t.jsonl");
    start_with(&p, "s1", 10, &["--max-tokens", "10"]);
    let mut text = String::new();
    text.push_str("not json at all \"usage\"\n");
    text.push_str("{\"type\":\"assistant\",\"message\":{\"usage\":[1,2,3]}}\n");
    text.push_str("{\"type\":\"assistant\",\"message\":{\"id\":{},\"usage\":{\"input_tokens\":\"5\",\"output_tokens\":-3}}}\n");
    text.push_str("\u{0}\u{0}\u{0}\n");
    text.push_str(&format!("{{\"type\":\"assistant\",\"timestamp\":7,\"message\":{{\"id\":\"m\",\"usage\":{{\"output_tokens\":{}}}}}}}\n", "9".repeat(40)));
    std::fs::write(&transcript, text).unwrap();
    let mut bad = std::fs::read(&transcript).unwrap();
    bad.extend_from_slice(b"\xff\xfe{\"usage\"\n");
    std::fs::write(&transcript, bad).unwrap();
    let stop = stop_with_transcript(&p, &[], "s1", &transcript);
    assert!(stop.blocked(), "nothing countable: the loop goes on");
    assert_eq!(p.loop_state("s1")["progress"]["tokens"]["output"], 0);
    // A transcript that is not a file at all is left for the next stop.
    let stop = stop_with_transcript(&p, &[], "s1", p.path());
    assert!(stop.blocked());
}

#[test]
fn subagent_transcripts_from_before_the_loop_are_not_followed_and_past_the_cap_the_budget_ends_it()
{
    let p = Project::new();
    let transcript = p.path().join("sess.jsonl");
    std::fs::write(
        &transcript,
        usage_line("m0", [1, 0, 1, 0], &now_plus(-7200)),
    )
    .unwrap();
    let agents = p.path().join("sess/subagents");
    std::fs::create_dir_all(&agents).unwrap();
    // 200 subagents of an earlier hour: their files are older than the loop.
    for i in 0..200 {
        let file = agents.join(format!("agent-old{i}.jsonl"));
        std::fs::write(
            &file,
            usage_line(&format!("o{i}"), [9, 0, 9, 0], &now_plus(-3600)),
        )
        .unwrap();
        let hour_ago =
            filetime::FileTime::from_unix_time((vigil::sys::time::now_secs() as i64) - 3600, 0);
        filetime::set_file_mtime(&file, hour_ago).unwrap();
    }
    start_with(&p, "s1", 10, &["--max-tokens", "1000000"]);
    std::fs::write(
        agents.join("agent-new.jsonl"),
        usage_line("n1", [500, 0, 500, 0], &now_plus(1)),
    )
    .unwrap();
    assert!(stop_with_transcript(&p, &[], "s1", &transcript).blocked());
    let tokens = p.loop_state("s1")["progress"]["tokens"].clone();
    assert_eq!(tokens["input"], 500, "the new subagent counts: {tokens}");
    assert_eq!(
        tokens["files"].as_array().unwrap().len(),
        2,
        "the old ones are not followed"
    );
    // 130 subagents written since the loop started: past the 128 followed, the budget cannot be
    // kept, and the loop ends rather than go on uncounted.
    for i in 0..130 {
        std::fs::write(
            agents.join(format!("agent-late{i}.jsonl")),
            usage_line(&format!("l{i}"), [1, 0, 1, 0], &now_plus(1)),
        )
        .unwrap();
    }
    let stop = stop_with_transcript(&p, &[], "s1", &transcript);
    stop.assert_allowed_saying("cannot be kept");
    assert_eq!(p.loop_state("s1")["end_reason"], "max-tokens");
}

#[test]
fn a_token_budget_with_no_transcript_to_count_says_so_to_the_human() {
    let p = Project::new();
    start_with(&p, "s1", 10, &["--max-tokens", "100"]);
    let stop = p.stop(&[], "s1", Some("Working."));
    assert!(stop.blocked());
    assert_contains!(stop.system_message(), "--max-tokens counts nothing");
    let missing = p.path().join("nowhere.jsonl");
    let stop = stop_with_transcript(&p, &[], "s1", &missing);
    assert_contains!(stop.system_message(), "counts nothing of the transcript");
}
