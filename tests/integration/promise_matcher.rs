//! promise-matcher, driven as a user drives it (SPEC §3).

use std::io::Write;

use serde_json::{Value, json};

use crate::support::*;

/// Runs the default command with `--json` on `text`, checks the output against its schema and
/// that the exit code agrees with the verdict, and returns the report.
fn judge_with(text: &str, promise: &str) -> Value {
    let output = promise_matcher()
        .args(["--json", "--promise", promise])
        .write_stdin(text)
        .output()
        .unwrap();
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

// --- Rule 5 and P3: every mention form is not a declaration -------------------------------

#[test]
fn tag_inside_a_sentence_is_a_mention() {
    assert_verdict(
        "When finished I will print <promise>DONE</promise> on its own line.",
        "mentioned",
    );
    assert_verdict("Not yet: <promise>DONE</promise>", "mentioned");
}

#[test]
fn tag_in_inline_code_is_a_mention() {
    assert_verdict("The loop ends on `<promise>DONE</promise>`", "mentioned");
    assert_verdict("`<promise>DONE</promise>`", "mentioned");
}

#[test]
fn tag_in_a_fenced_block_is_a_mention() {
    assert_verdict(
        "Example:\n```text\n<promise>DONE</promise>\n```",
        "mentioned",
    );
    assert_verdict("Example:\n~~~\n<promise>DONE</promise>\n~~~\n", "mentioned");
    assert_verdict("   ```\n<promise>DONE</promise>\n   ```", "mentioned");
}

#[test]
fn tag_in_an_unclosed_fence_is_a_mention() {
    assert_verdict(
        "Here is the output:\n```\nall good\n<promise>DONE</promise>",
        "mentioned",
    );
}

#[test]
fn tag_in_a_blockquote_is_a_mention() {
    assert_verdict("The prompt says:\n> <promise>DONE</promise>", "mentioned");
    assert_verdict("  >   <promise>DONE</promise>", "mentioned");
}

#[test]
fn tag_followed_by_more_text_on_a_later_line_is_a_mention() {
    assert_verdict(
        "<promise>DONE</promise>\nActually, one test still fails.",
        "mentioned",
    );
}

#[test]
fn tag_preceded_by_a_list_marker_or_other_text_is_a_mention() {
    assert_verdict("- <promise>DONE</promise>", "mentioned");
    assert_verdict("1. <promise>DONE</promise>", "mentioned");
    assert_verdict("Status: <promise>DONE</promise>", "mentioned");
}

#[test]
fn tag_with_text_after_it_on_the_last_line_is_a_mention() {
    assert_verdict("<promise>DONE</promise> (once the tests pass)", "mentioned");
}

#[test]
fn wrong_case_is_not_a_declaration() {
    assert_verdict("<promise>done</promise>", "absent");
    assert_verdict("<promise>Done</promise>", "absent");
    assert_verdict("<PROMISE>DONE</PROMISE>", "absent");
}

#[test]
fn different_phrase_is_not_a_declaration() {
    assert_verdict("<promise>NOT DONE</promise>", "absent");
    assert_verdict("<promise>DONE!</promise>", "absent");
}

#[test]
fn bare_phrase_without_tags_is_absent() {
    assert_verdict("DONE", "absent");
    assert_verdict("All work is DONE\n\nDONE\n", "absent");
}

#[test]
fn mention_reports_the_line_of_the_first_mention() {
    let report = judge_with("one\ntwo `<promise>DONE</promise>`\nthree", "DONE");
    assert_eq!(
        report,
        json!({"verdict":"mentioned","promise":"DONE","line":2,"question":null})
    );
}

#[test]
fn absent_reports_no_line() {
    let report = judge_with("nothing here", "DONE");
    assert_eq!(
        report,
        json!({"verdict":"absent","promise":"DONE","line":null,"question":null})
    );
}

// --- Rules 2 to 4: declarations that must count --------------------------------------------

#[test]
fn declaration_after_paragraphs_of_text_counts() {
    let text = "I fixed the parser.\n\nAll 214 tests pass, clippy is clean.\n\n- item one\n- item two\n\n<promise>DONE</promise>";
    let report = judge_with(text, "DONE");
    assert_eq!(
        report,
        json!({"verdict":"declared","promise":"DONE","line":8,"question":null})
    );
}

#[test]
fn whitespace_inside_the_tags_is_trimmed() {
    assert_verdict("<promise>  DONE \t</promise>", "declared");
    assert_verdict("   <promise>DONE</promise>   ", "declared");
}

#[test]
fn multi_word_phrase_broken_across_lines_inside_the_tags_counts() {
    let text = "Summary.\n<promise>ALL TESTS\n   PASS\n</promise>";
    let report = judge_with(text, "ALL TESTS PASS");
    assert_eq!(report["verdict"], "declared");
    assert_eq!(report["line"], 2);
    assert_eq!(
        judge_with("<promise>\nALL  TESTS PASS\n</promise>", "ALL TESTS PASS")["verdict"],
        "declared"
    );
}

#[test]
fn promise_phrase_is_collapsed_before_comparing() {
    assert_eq!(
        judge_with("<promise>ALL TESTS PASS</promise>", "  ALL   TESTS\tPASS ")["verdict"],
        "declared"
    );
}

#[test]
fn crlf_line_endings_count() {
    assert_verdict(
        "Done with the work.\r\n\r\n<promise>DONE</promise>\r\n",
        "declared",
    );
    assert_verdict("```\r\n<promise>DONE</promise>\r\n```\r\n", "mentioned");
}

#[test]
fn trailing_blank_lines_are_ignored() {
    assert_verdict(
        "Finished.\n<promise>DONE</promise>\n\n   \n\t\n",
        "declared",
    );
}

#[test]
fn phrase_with_regex_and_glob_characters_is_matched_literally() {
    assert_eq!(
        judge_with(
            "<promise>a*b?c[d](e)+.$^|\\</promise>",
            "a*b?c[d](e)+.$^|\\"
        )["verdict"],
        "declared"
    );
    assert_eq!(
        judge_with("<promise>aab?c[d]</promise>", "a*b?c[d]")["verdict"],
        "absent"
    );
    assert_eq!(
        judge_with("<promise>*?[</promise>", "*?[")["verdict"],
        "declared"
    );
}

#[test]
fn declaration_after_a_closed_fence_counts() {
    assert_verdict(
        "```\n<promise>DONE</promise>\n```\n<promise>DONE</promise>",
        "declared",
    );
}

#[test]
fn opening_tag_on_an_earlier_line_must_be_first_on_its_line() {
    assert_verdict("Result: <promise>\nDONE\n</promise>", "mentioned");
}

#[test]
fn closing_tag_inside_a_fence_does_not_declare() {
    assert_verdict("<promise>DONE\n```\n</promise>", "absent");
}

// --- Rule 1: what CommonMark 0.31 reads as code, quotes or raw HTML is masked --------------

#[test]
fn rule1_a_fence_whose_info_string_holds_a_backtick_is_not_a_fence() {
    // The first line is a paragraph, so the second opens the real (unclosed) code block.
    assert_verdict("```a`b\n```\n<promise>DONE</promise>", "mentioned");
    assert_verdict("```a`b\n<promise>DONE</promise>", "declared");
    // A tilde fence may carry backticks in its info string.
    assert_verdict("~~~ a`b\n<promise>DONE</promise>", "mentioned");
}

#[test]
fn rule1_a_fence_opened_and_closed_in_a_list_item_masks_only_its_lines() {
    assert_verdict(
        "- item\n  ```\n  code\n  ```\n<promise>DONE</promise>",
        "declared",
    );
    assert_verdict("- ```\n  code\n  ```\n<promise>DONE</promise>", "declared");
    assert_verdict("- ```\n  <promise>DONE</promise>", "mentioned");
    assert_verdict(
        "1. item\n\n   ```\n   <promise>DONE</promise>\n   ```",
        "mentioned",
    );
}

#[test]
fn rule1_a_promise_line_right_after_a_list_is_a_lazy_paragraph_line_and_declares() {
    assert_verdict(
        "Done:\n- item one\n- item two\n<promise>DONE</promise>",
        "declared",
    );
    assert_verdict("- item\n  <promise>DONE</promise>", "declared");
}

#[test]
fn rule1_a_list_marker_before_the_tag_is_a_mention() {
    assert_verdict("- <promise>DONE</promise>", "mentioned");
    assert_verdict("* <promise>DONE</promise>\n", "mentioned");
}

#[test]
fn rule1_an_indented_code_block_is_masked() {
    assert_verdict("Output:\n\n    <promise>DONE</promise>", "mentioned");
    assert_verdict("Output:\n\n\t<promise>DONE</promise>", "mentioned");
    // Without the blank line it continues the paragraph: not code.
    assert_verdict("Output:\n    <promise>DONE</promise>", "declared");
}

#[test]
fn rule1_a_lazy_block_quote_line_is_masked() {
    assert_verdict("> quoted\n<promise>DONE</promise>", "mentioned");
    assert_verdict("> quoted\n\n<promise>DONE</promise>", "declared");
    assert_verdict("> > - nested\n<promise>DONE</promise>", "mentioned");
}

#[test]
fn rule1_everything_nested_in_a_block_quote_is_masked_and_a_fence_ends_with_it() {
    assert_verdict("> - a\n>   ```\n>   <promise>DONE</promise>", "mentioned");
    // A code block has no lazy lines: the quote ends, and the promise is a paragraph.
    assert_verdict("> - a\n>   ```\n>   b\n<promise>DONE</promise>", "declared");
}

#[test]
fn rule1_html_blocks_of_types_1_to_6_are_masked() {
    for text in [
        "<!--\n<promise>DONE</promise>",
        "<!-- a note\n\n<promise>DONE</promise>",
        "<pre>\n<promise>DONE</promise>",
        "<script>\n<promise>DONE</promise>",
        "<?php\n<promise>DONE</promise>",
        "<!DOCTYPE\n<promise>DONE</promise>",
        "<![CDATA[\n<promise>DONE</promise>",
        "<div>\n<promise>DONE</promise>",
        "Text.\n<div class=\"x\">\n<promise>DONE</promise>",
    ] {
        assert_verdict(text, "mentioned");
    }
    // Types 6 and 7 end at a blank line, types 1 to 5 at their end condition.
    assert_verdict("<div>x</div>\n\n<promise>DONE</promise>", "declared");
    assert_verdict("<!-- note -->\n<promise>DONE</promise>", "declared");
    assert_verdict("<!DOCTYPE html>\n<promise>DONE</promise>", "declared");
}

#[test]
fn rule1_a_type_7_html_block_is_not_masked() {
    assert_verdict("<promise>\nDONE\n</promise>", "declared");
    assert_verdict("Finished.\n\n<promise>\nDONE\n</promise>\n", "declared");
    assert_verdict("<custom-tag>\n<promise>DONE</promise>", "declared");
}

#[test]
fn rule1_setext_heading_text_is_not_masked() {
    assert_verdict("needs-decision: Which database?\n===", "blocked");
    assert_verdict("Result\n---\n<promise>DONE</promise>", "declared");
}

#[test]
fn rule1_a_lone_cr_ends_a_line() {
    assert_verdict("All done.\r\r<promise>DONE</promise>\r", "declared");
    assert_verdict("```\r<promise>DONE</promise>\r```\r", "mentioned");
    assert_verdict("Result: <promise>\rDONE\r</promise>", "mentioned");
    let report = judge_with("a\rb\r\nc\n<promise>DONE</promise>", "DONE");
    assert_eq!(report["line"], 4);
}

#[test]
fn rule1_a_closing_fence_followed_by_nbsp_or_vt_does_not_close() {
    for after in ["\u{a0}", "\u{b}", "\u{2003}", "x"] {
        assert_verdict(
            &format!("```\ncode\n```{after}\n<promise>DONE</promise>"),
            "mentioned",
        );
    }
    for after in ["", " ", "   "] {
        assert_verdict(
            &format!("```\ncode\n```{after}\n<promise>DONE</promise>"),
            "declared",
        );
    }
}

/// A tab shapes blocks as the spaces up to its tab stop. pulldown-cmark alone took a tab before
/// `>` for a quote marker's indent and a tab after a closing fence for no whitespace, so an agent
/// could end a quote early and declare in a line every renderer shows quoted.
#[test]
fn rule1_a_tab_counts_as_the_spaces_to_its_tab_stop() {
    // Four columns before `>`: no marker, so a lazy line, and the promise after it one too.
    assert_verdict("> quoted\n\t> <div>\n<promise>DONE</promise>", "mentioned");
    assert_verdict("> quoted\n \t> <div>\n<promise>DONE</promise>", "mentioned");
    assert_verdict("```\ncode\n```\t\n<promise>DONE</promise>", "declared");
    assert_verdict("Done.\n\n\t<promise>DONE</promise>", "mentioned");
    // In a list item whose content starts at column 4, the same tab is the item's indent.
    assert_verdict("-\tDone.\n\n\t<promise>DONE</promise>", "declared");
}

/// A vertical tab or form feed is no space to block structure: a line of one is not blank, and
/// `#` followed by one is no heading. pulldown-cmark alone read both as space, so an agent
/// could end an HTML block or a quote early and declare inside it.
#[test]
fn rule1_a_vertical_tab_or_form_feed_is_not_space() {
    for c in ["\u{b}", "\u{c}"] {
        assert_verdict(&format!("<div>\n{c}\n<promise>DONE</promise>"), "mentioned");
        assert_verdict(
            &format!("> quoted\n>{c}\n<promise>DONE</promise>"),
            "mentioned",
        );
        assert_verdict(
            &format!("> quoted\n#{c}\n<promise>DONE</promise>"),
            "mentioned",
        );
        assert_verdict(
            &format!("Done.\n{c}\n\n<promise>DONE</promise>"),
            "declared",
        );
    }
}

/// An HTML block of type 1 ends at a line holding any of the four end tags, in any case; read
/// only at its own name in lower case, the rest of the message stayed masked.
#[test]
fn rule1_a_type_1_html_block_ends_at_any_of_its_end_tags() {
    assert_verdict("<style>\na {}\n</pre>\n<promise>DONE</promise>", "declared");
    assert_verdict("<PRE>\nx\n</PRE>\n<promise>DONE</promise>", "declared");
    assert_verdict(
        "<script>\nx\n</scripts>\n<promise>DONE</promise>",
        "mentioned",
    );
}

#[test]
fn rule1_needs_decision_inside_every_masked_construct_does_not_block() {
    let question = "needs-decision: Which region?";
    for masked in [
        format!("```\n{question}\n```"),
        format!("~~~\n{question}\n~~~"),
        format!("- ```\n  {question}\n  ```"),
        format!("Output:\n\n    {question}"),
        format!("> {question}"),
        format!("> quoted\n{question}"),
        format!("> - {question}"),
        format!("<!--\n{question}\n-->"),
        format!("<pre>\n{question}\n</pre>"),
        format!("<div>\n{question}\n</div>"),
    ] {
        assert_verdict(&format!("{masked}\n\n<promise>DONE</promise>"), "declared");
    }
    assert_verdict(&format!("- item\n{question}\n"), "blocked");
    assert_verdict(&format!("<promise>\n{question}\n</promise>"), "blocked");
}

// --- Rule 6: escalation --------------------------------------------------------------------

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
    let output = promise_matcher()
        .arg("--json")
        .write_stdin(text)
        .output()
        .unwrap();
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

// --- Usage and input errors ----------------------------------------------------------------

#[test]
fn empty_promise_is_a_usage_error() {
    let output = promise_matcher()
        .args(["--promise", "  "])
        .write_stdin("x")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert_one_line_error(&output, "promise-matcher");
}

#[test]
fn promise_with_angle_brackets_is_a_usage_error() {
    for bad in ["<promise>DONE</promise>", "a<b", "a>b"] {
        let output = promise_matcher()
            .arg(format!("--promise={bad}"))
            .write_stdin("x")
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{bad}");
        assert_one_line_error(&output, "promise-matcher");
    }
}

#[test]
fn unknown_flag_is_a_usage_error() {
    let output = promise_matcher()
        .arg("--promis=DONE")
        .write_stdin("x")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = assert_one_line_error(&output, "promise-matcher");
    assert!(stderr.contains("--promis"), "{stderr}");
}

#[test]
fn two_files_is_a_usage_error() {
    let output = promise_matcher().args(["a", "b"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert_one_line_error(&output, "promise-matcher");
}

#[test]
fn missing_file_is_an_input_error_naming_it() {
    let output = promise_matcher()
        .arg("/nonexistent/answer.txt")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = assert_one_line_error(&output, "promise-matcher");
    assert!(stderr.contains("/nonexistent/answer.txt"), "{stderr}");
}

#[test]
fn text_from_a_file_argument_is_judged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.txt");
    std::fs::write(&path, "ok\n<promise>DONE</promise>\n").unwrap();
    promise_matcher()
        .arg(&path)
        .assert()
        .success()
        .stdout("declared\n");
}

#[test]
fn plain_output_is_the_verdict_word() {
    promise_matcher()
        .write_stdin("DONE")
        .assert()
        .code(1)
        .stdout("absent\n");
}

#[test]
fn invalid_utf8_text_is_judged_lossily_not_refused() {
    promise_matcher()
        .write_stdin(b"\xff\xfe garbage\n<promise>DONE</promise>\n".to_vec())
        .assert()
        .success()
        .stdout("declared\n");
}

#[test]
fn a_closed_stdout_pipe_keeps_the_verdict_exit_code() {
    let pm = assert_cmd::cargo::cargo_bin!("promise-matcher");
    for (text, code) in [("DONE", "1"), ("<promise>DONE</promise>", "0")] {
        let script = format!(
            "(sleep 0.3; echo '{text}') | '{}' | true; echo ${{PIPESTATUS[1]}}",
            pm.display()
        );
        let output = std::process::Command::new("bash")
            .arg("-c")
            .arg(&script)
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&output.stdout).trim(),
            code,
            "{text}"
        );
    }
}

#[test]
fn a_failed_write_to_stdout_is_one_line_naming_the_binary() {
    let output = std::process::Command::new(assert_cmd::cargo::cargo_bin!("promise-matcher"))
        .stdin(std::process::Stdio::null())
        .stdout(
            std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .unwrap(),
        )
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = assert_one_line_error(&output, "promise-matcher");
    assert!(
        stderr.contains("cannot write to standard output"),
        "{stderr}"
    );
}

#[test]
fn many_opening_tags_are_judged_in_one_pass() {
    // 200,000 opening tags before one closing tag: quadratic pairing would take minutes.
    let text = "<promise>".repeat(200_000) + "</promise>\n<promise>DONE</promise> trailing";
    assert_verdict(&text, "mentioned");
}

#[test]
fn text_over_16_mib_is_refused() {
    let big = vec![b'a'; 16 * 1024 * 1024 + 1];
    let output = promise_matcher().write_stdin(big).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(assert_one_line_error(&output, "promise-matcher").contains("16 MiB"));
}

#[test]
fn every_help_prints_usage_and_exits_0() {
    for args in [
        vec!["--help"],
        vec!["-h"],
        vec!["token", "--help"],
        vec!["scan", "--help"],
        vec!["defang", "--help"],
    ] {
        let output = promise_matcher().args(&args).output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{args:?}");
        assert!(stdout_of(&output).contains("Usage"), "{args:?}");
    }
}

// --- Hook input and the last assistant message (SPEC §2) -----------------------------------

fn hook(payload: &str) -> std::process::Output {
    promise_matcher()
        .args(["--hook", "--json"])
        .write_stdin(payload.to_string())
        .output()
        .unwrap()
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

#[test]
fn hook_reads_last_assistant_message_of_a_claude_stop() {
    let payload = read_fixture("samples/claude-stop.json");
    promise_matcher()
        .arg("--hook")
        .write_stdin(payload)
        .assert()
        .success()
        .stdout("declared\n");
}

#[test]
fn hook_reads_a_codex_stop_with_null_transcript() {
    let payload = read_fixture("samples/codex-stop.json");
    promise_matcher()
        .arg("--hook")
        .write_stdin(payload)
        .assert()
        .code(1)
        .stdout("absent\n");
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
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    let output = hook(&old_stop(&fifo));
    assert_eq!(output.status.code(), Some(2));
    assert!(assert_one_line_error(&output, "promise-matcher").contains("not a regular file"));
}

#[test]
fn empty_transcript_has_no_message() {
    let (_dir, path) = write_transcript(&[]);
    assert_eq!(hook_verdict(&old_stop(&path))["verdict"], "absent");
}

#[test]
fn transcript_that_does_not_exist_is_an_input_error() {
    let output = hook(&old_stop(std::path::Path::new("/nonexistent/t.jsonl")));
    assert_eq!(output.status.code(), Some(2));
    let stderr = assert_one_line_error(&output, "promise-matcher");
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
        let output = promise_matcher()
            .arg("--hook")
            .write_stdin(input)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{name}");
        let stderr = assert_one_line_error(&output, "promise-matcher");
        assert!(stderr.contains("hook input"), "{name}: {stderr}");
        assert!(output.stdout.is_empty(), "{name}");
    }
}

#[test]
fn hook_input_over_16_mib_is_refused() {
    let mut big = br#"{"last_assistant_message":""#.to_vec();
    big.extend(std::iter::repeat_n(b'a', 16 * 1024 * 1024));
    big.extend_from_slice(b"\"}");
    let output = promise_matcher()
        .arg("--hook")
        .write_stdin(big)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(assert_one_line_error(&output, "promise-matcher").contains("16 MiB"));
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

// --- Tokens, scan and defang ---------------------------------------------------------------

const TOKEN: &str = "9f3c2a7e5b1d4c6a8e0f2b4d6c8a0e1f";
const MARKER: &str = "<<<VIGIL_DONE_9f3c2a7e5b1d4c6a8e0f2b4d6c8a0e1f>>>";

fn scan_report(bytes: &[u8], extra: &[&str]) -> Value {
    let output = promise_matcher()
        .args(["scan", "--json", "--token", TOKEN])
        .args(extra)
        .write_stdin(bytes.to_vec())
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_valid("scan.schema.json", &report);
    let code = if report["found"] == true { 0 } else { 1 };
    assert_eq!(output.status.code(), Some(code), "{report}");
    report
}

#[test]
fn token_new_prints_128_random_bits_as_32_hex() {
    let a = stdout_of(&promise_matcher().args(["token", "new"]).output().unwrap());
    let b = stdout_of(&promise_matcher().args(["token", "new"]).output().unwrap());
    for token in [&a, &b] {
        let token = token.trim_end();
        assert_eq!(token.len(), 32, "{token}");
        assert!(
            token
                .bytes()
                .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
        );
    }
    assert_ne!(a, b);
}

#[test]
fn token_instruction_never_contains_the_assembled_marker() {
    for prefix in ["VIGIL", "ACME", "X"] {
        let output = promise_matcher()
            .args([
                "token",
                "instruction",
                "--token",
                TOKEN,
                &format!("--prefix={prefix}"),
            ])
            .output()
            .unwrap();
        assert!(output.status.success());
        let text = stdout_of(&output);
        let marker = format!("<<<{prefix}_DONE_{TOKEN}>>>");
        assert!(!text.contains(&marker), "{text}");
        assert!(
            text.contains(&format!("`<<<{prefix}_`")),
            "the first piece is given: {text}"
        );
        assert!(
            text.contains(&format!("`DONE_{TOKEN}>>>`")),
            "the second piece is given: {text}"
        );
        let flat: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        assert!(
            !flat.contains(&marker),
            "whitespace removed, the pieces must not join"
        );
    }
}

#[test]
fn echoed_instruction_text_does_not_scan_as_found() {
    let instruction = stdout_of(
        &promise_matcher()
            .args(["token", "instruction", "--token", TOKEN])
            .output()
            .unwrap(),
    );
    // Echoed as a TUI does: coloured, wrapped at 40 columns with gutters.
    let mut echoed = String::from("\x1b[2m");
    for chunk in instruction.as_bytes().chunks(36) {
        echoed.push_str("\u{2502} ");
        echoed.push_str(&String::from_utf8_lossy(chunk));
        echoed.push_str(" \u{2502}\r\n");
    }
    echoed.push_str("\x1b[0m");
    for cols in ["200", "40", "17"] {
        let report = scan_report(echoed.as_bytes(), &["--cols", cols]);
        assert_eq!(report["found"], false, "cols {cols}: {report}");
    }
}

#[test]
fn scan_finds_the_marker_as_plain_text() {
    let report = scan_report(format!("working...\n{MARKER}\n").as_bytes(), &[]);
    assert_eq!(report["views"], json!(["text", "flattened", "screen"]));
}

#[test]
fn scan_finds_a_marker_split_across_two_writes_with_an_escape_between() {
    let bytes = format!("{}\x1b[0m\x1b]0;claude\x07{}", &MARKER[..20], &MARKER[20..]);
    let report = scan_report(bytes.as_bytes(), &[]);
    assert_eq!(report["found"], true);
    assert_eq!(
        report["views"][0], "flattened",
        "not visible as raw text: {report}"
    );
}

#[test]
fn scan_finds_a_marker_drawn_inside_box_drawing_gutters() {
    let bytes = format!(
        "\u{256d}\u{2500}\u{2500}\u{256e}\r\n\u{2502} {} \u{2502}\r\n\u{2502} {} \u{2502}\r\n\u{2570}\u{2500}\u{2500}\u{256f}\r\n",
        &MARKER[..25],
        &MARKER[25..]
    );
    let report = scan_report(bytes.as_bytes(), &[]);
    assert_eq!(report["views"], json!(["flattened", "screen"]));
}

#[test]
fn scan_finds_a_marker_soft_wrapped_at_the_terminal_width() {
    // The TUI wraps at 30 columns by breaking the line and indenting the continuation.
    let mut bytes = String::from("\u{25cf} ");
    for (i, chunk) in MARKER.as_bytes().chunks(28).enumerate() {
        if i > 0 {
            bytes.push_str("\r\n  ");
        }
        bytes.push_str(std::str::from_utf8(chunk).unwrap());
    }
    let report = scan_report(bytes.as_bytes(), &["--cols", "30"]);
    assert_eq!(report["views"], json!(["flattened", "screen"]));
    // A real soft wrap by the terminal itself: the screen view joins the rows.
    let report = scan_report(format!("xx{MARKER}").as_bytes(), &["--cols", "10"]);
    assert!(
        report["views"]
            .as_array()
            .unwrap()
            .contains(&json!("screen")),
        "{report}"
    );
}

#[test]
fn scan_finds_a_marker_painted_with_cursor_moves_while_a_spinner_repaints_only_on_screen() {
    let (first, second) = MARKER.split_at(20);
    let mut bytes = String::from("\x1b[2J\x1b[H");
    bytes.push_str(&format!("\x1b[9;1H{first}"));
    for frame in ["\u{280b}", "\u{2819}", "\u{2839}"] {
        bytes.push_str(&format!("\x1b[23;1H\x1b[2K{frame} Thinking\u{2026} (3s)"));
    }
    bytes.push_str(&format!("\x1b[9;21H{second}"));
    bytes.push_str("\x1b[23;1H\x1b[2K");
    let report = scan_report(bytes.as_bytes(), &[]);
    assert_eq!(
        report["views"],
        json!(["screen"]),
        "only the replayed screen can see it"
    );
}

#[test]
fn scan_finds_the_marker_in_scrollback() {
    let mut bytes = format!("{MARKER}\r\n").into_bytes();
    for i in 0..500 {
        bytes.extend_from_slice(format!("log line {i}\r\n").as_bytes());
    }
    let report = scan_report(&bytes, &[]);
    assert_eq!(report["found"], true);
}

#[test]
fn scan_does_not_find_a_marker_outside_the_tail() {
    let mut bytes = format!("{MARKER}\n").into_bytes();
    bytes.extend(std::iter::repeat_n(b'.', 100_000));
    assert_eq!(scan_report(&bytes, &[])["found"], false);
    assert_eq!(scan_report(&bytes, &["--tail", "200000"])["found"], true);
}

#[test]
fn scan_of_a_file_reads_only_its_tail() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.log");
    let mut bytes = vec![b'x'; 5 * 1024 * 1024];
    bytes.extend_from_slice(MARKER.as_bytes());
    std::fs::write(&path, &bytes).unwrap();
    promise_matcher()
        .args(["scan", "--token", TOKEN])
        .arg(&path)
        .assert()
        .success();
    // Redirected standard input is a file too.
    let status = std::process::Command::new(assert_cmd::cargo::cargo_bin!("promise-matcher"))
        .args(["scan", "--token", TOKEN])
        .stdin(std::fs::File::open(&path).unwrap())
        .status()
        .unwrap();
    assert!(status.success());
    // A marker at the start of the file is outside the tail.
    let mut bytes = MARKER.as_bytes().to_vec();
    bytes.extend(vec![b'x'; 5 * 1024 * 1024]);
    std::fs::write(&path, &bytes).unwrap();
    promise_matcher()
        .args(["scan", "--token", TOKEN])
        .arg(&path)
        .assert()
        .code(1);
}

#[test]
fn scan_tail_cut_inside_a_character_still_finds_the_marker() {
    let mut bytes = "\u{00e9}".repeat(100).into_bytes();
    bytes.extend_from_slice(MARKER.as_bytes());
    let tail = (MARKER.len() + 1).to_string();
    assert_eq!(scan_report(&bytes, &["--tail", &tail])["found"], true);
}

#[test]
fn scan_with_another_token_or_prefix_is_not_found() {
    assert_eq!(
        scan_report(b"<<<VIGIL_DONE_0000000000000000aaaaaaaaaaaaaaaa>>>", &[])["found"],
        false
    );
    assert_eq!(
        scan_report(MARKER.as_bytes(), &["--prefix", "ACME"])["found"],
        false
    );
    assert_eq!(
        scan_report(
            MARKER.replace("VIGIL", "ACME").as_bytes(),
            &["--prefix", "ACME"]
        )["found"],
        true
    );
}

#[test]
fn scan_needs_a_valid_token() {
    for args in [
        vec!["scan"],
        vec!["scan", "--token", "short"],
        vec!["scan", "--token", TOKEN, "--cols", "0"],
        vec!["scan", "--token", TOKEN, "--tail", "x"],
    ] {
        let output = promise_matcher()
            .args(&args)
            .write_stdin("")
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert_one_line_error(&output, "promise-matcher");
    }
}

#[test]
fn defanged_marker_does_not_scan_as_found() {
    let output = promise_matcher()
        .arg("defang")
        .write_stdin(format!("{MARKER}\n"))
        .output()
        .unwrap();
    let defanged = stdout_of(&output);
    assert_eq!(
        defanged,
        format!("{}\n", MARKER.replace("<<<VIGIL_", "<<<VIG-IL_"))
    );
    assert_eq!(scan_report(defanged.as_bytes(), &[])["found"], false);
}

/// SPEC §3: the flattened view drops exactly what the screen model drops. Each of these bytes
/// inside a marker vanishes from the screen, so the marker is whole there; defang must see it
/// whole too, or it leaves a live marker on the screen.
#[test]
fn defang_breaks_a_marker_split_by_whatever_the_screen_swallows() {
    let (head, tail) = MARKER.split_at(6); // `<<<VIG` | `IL_DONE_…`
    for (what, between) in [
        ("a C1 CSI, which the screen ignores", "\u{9b}"),
        ("a C1 OSC", "\u{9d}"),
        ("a C1 DCS", "\u{90}"),
        ("a C1 NEL", "\u{85}"),
        ("an OSC cut short by CAN", "\x1b]0;title\x18"),
        ("an OSC cut short by SUB", "\x1b]0;title\x1a"),
        ("a DCS cut short by CAN", "\x1bPq#0\x18"),
        ("a CSI cut short by CAN", "\x1b[12\x18"),
        ("an APC cut short by SUB", "\x1b_x\x1a"),
        ("SOS, PM and APC strings", "\x1bXa\x1b\\\x1b^b\x1b\\"),
        ("invalid UTF-8, which the screen never draws", "\u{fffd}"),
        (
            "a zero-width character at the start of a line",
            "\r\n\u{200b}",
        ),
    ] {
        let marked = format!("{head}{between}{tail}\n");
        let report = scan_report(marked.as_bytes(), &[]);
        assert!(
            report["views"]
                .as_array()
                .unwrap()
                .contains(&json!("screen")),
            "{what}: the screen shows the marker whole ({report})"
        );
        let defanged = defanged(marked.as_bytes());
        let report = scan_report(&defanged, &[]);
        assert_eq!(
            report["found"],
            false,
            "{what}: {:?} {report}",
            String::from_utf8_lossy(&defanged)
        );
    }
    // Raw invalid bytes, and a repeat that completes the `<<<` on the screen.
    for marked in [
        [head.as_bytes(), b"\xff\xfe", tail.as_bytes()].concat(),
        [b"<<\x1b[b", &MARKER.as_bytes()[2..]].concat(),
    ] {
        assert_eq!(scan_report(&marked, &[])["found"], true);
        let defanged = defanged(&marked);
        let report = scan_report(&defanged, &[]);
        assert_eq!(
            report["found"],
            false,
            "{:?} {report}",
            String::from_utf8_lossy(&defanged)
        );
    }
}

/// A repeat count is read as the screen reads it: `ESC[0001b` repeats once, however many zeros
/// lead, and a control inside the digits does not split the number. A screen that read `0001`
/// as a large count painted a run of `<` that defang never saw.
#[test]
fn repeat_counts_are_read_alike_by_defang_and_the_screen() {
    let rest = &MARKER[3..];
    let once = format!("<\u{1b}[0001b{rest}\n");
    assert_eq!(scan_report(once.as_bytes(), &[])["found"], false);
    for twice in [
        format!("<\u{1b}[0002b{rest}\n"),
        format!("<\u{1b}[0\u{0}2b{rest}\n"),
    ] {
        let report = scan_report(twice.as_bytes(), &[]);
        assert_eq!(report["found"], true, "{twice:?}");
        let defanged = defanged(twice.as_bytes());
        assert_eq!(scan_report(&defanged, &[])["found"], false, "{twice:?}");
    }
    // A count past the screen, hidden behind a control, costs what a small one does.
    let started = std::time::Instant::now();
    let hostile = format!("x{}", "\u{1b}[6\u{0}5535b".repeat(7200));
    scan_report(hostile.as_bytes(), &[]);
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
}

/// What `promise-matcher defang` makes of `bytes`.
fn defanged(bytes: &[u8]) -> Vec<u8> {
    let output = promise_matcher()
        .arg("defang")
        .write_stdin(bytes.to_vec())
        .output()
        .unwrap();
    assert!(output.status.success());
    output.stdout
}

#[test]
fn defang_breaks_a_marker_right_after_an_escape_introducer() {
    for prefix in ["\x1b", "\x1b[", "\x1b]0;", "\x1bP", "\u{9b}"] {
        let text = format!("{prefix}{MARKER}");
        let defanged = promise_matcher()
            .arg("defang")
            .write_stdin(text.clone())
            .output()
            .unwrap()
            .stdout;
        assert_eq!(scan_report(&defanged, &[])["found"], false, "{text:?}");
    }
}

#[test]
fn scan_work_is_bounded_by_the_tail_even_for_hostile_repeat_sequences() {
    // `ESC[65535b` repeats the last character 65535 times: unclamped, this tail costs seconds.
    let bytes = b"x\x1b[65535b".repeat(8192);
    assert_eq!(scan_report(&bytes, &[])["found"], false);
    assert_eq!(scan_report(&bytes, &["--cols", "2"])["found"], false);
}

#[test]
fn defang_breaks_promise_tags_so_the_text_never_declares() {
    let text = "All done.\n<promise>DONE</promise>\n";
    let output = promise_matcher()
        .arg("defang")
        .write_stdin(text)
        .output()
        .unwrap();
    let defanged = stdout_of(&output);
    assert_eq!(defanged, "All done.\n<pro-mise>DONE</pro-mise>\n");
    assert_eq!(verdict_of(&defanged), "absent");
}

#[test]
fn defang_is_idempotent_and_only_adds_hyphens() {
    let text = "<<<VIGIL_DONE_x>>> <<<ACME_DONE_y>>> <promise>DONE</promise> caf\u{e9}\n";
    let once = stdout_of(
        &promise_matcher()
            .args(["defang", "--prefix", "ACME"])
            .write_stdin(text)
            .output()
            .unwrap(),
    );
    let twice = stdout_of(
        &promise_matcher()
            .args(["defang", "--prefix", "ACME"])
            .write_stdin(once.clone())
            .output()
            .unwrap(),
    );
    assert_eq!(once, twice);
    assert_eq!(
        once,
        "<<<VIG-IL_DONE_x>>> <<<AC-ME_DONE_y>>> <pro-mise>DONE</pro-mise> caf\u{e9}\n"
    );
}

// --- The documented bash Ralph loop (templates/ralph.sh) -----------------------------------

/// Runs templates/ralph.sh in a temp project with a stand-in `claude` that prints the given
/// replies in turn (the last one forever), returning the output and how often it ran.
fn ralph(replies: &[&str], max: u32) -> (std::process::Output, usize) {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    for (i, reply) in replies.iter().enumerate() {
        std::fs::write(dir.path().join(format!("reply{}", i + 1)), reply).unwrap();
    }
    let claude = bin.join("claude");
    std::fs::write(
        &claude,
        format!(
            "#!/usr/bin/env bash\nn=$(( $(cat count 2>/dev/null || echo 0) + 1 ))\necho $n > count\n\
             [ \"$1\" = -p ] && [ \"$2\" = \"$(cat PROMPT.md)\" ] || exit 9\n\
             f=reply$n; [ -f $f ] || f=reply{}\ncat $f\n",
            replies.len()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&claude, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::write(
        dir.path().join("PROMPT.md"),
        "Fix the parser. Say it's done with $(no) `subst`.\n",
    )
    .unwrap();
    let pm_dir = assert_cmd::cargo::cargo_bin!("promise-matcher")
        .parent()
        .unwrap()
        .to_path_buf();
    let path = format!("{}:{}:/usr/bin:/bin", bin.display(), pm_dir.display());
    let output = std::process::Command::new("bash")
        .arg(repo_path("templates/ralph.sh"))
        .current_dir(dir.path())
        .env("PATH", path)
        .env("RALPH_MAX", max.to_string())
        .output()
        .unwrap();
    let count =
        std::fs::read_to_string(dir.path().join("count")).map_or(0, |c| c.trim().parse().unwrap());
    (output, count)
}

#[test]
fn ralph_loop_ends_on_the_declaration_not_the_mention() {
    let (output, passes) = ralph(
        &[
            "Working on it.",
            "I will end with <promise>DONE</promise> later.",
            "All tests pass.\n\n<promise>DONE</promise>\n",
        ],
        20,
    );
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(passes, 3);
    let stdout = stdout_of(&output);
    assert!(
        stdout.contains("pass 1: absent") && stdout.contains("pass 2: mentioned"),
        "{stdout}"
    );
    assert!(stdout.contains("declared DONE on pass 3"), "{stdout}");
}

#[test]
fn ralph_loop_stops_at_its_iteration_cap() {
    let (output, passes) = ralph(&["Still going."], 3);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(passes, 3);
    assert!(String::from_utf8_lossy(&output.stderr).contains("NOT verified"));
}

#[test]
fn ralph_loop_stops_when_the_agent_asks_a_human() {
    let (output, passes) = ralph(
        &["needs-decision: Drop the legacy API?\n<promise>DONE</promise>"],
        5,
    );
    assert_eq!(output.status.code(), Some(3));
    assert_eq!(passes, 1);
}
