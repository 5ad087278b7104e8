//! SPEC §3 rule 5 and P3, a declaration is not a mention: every form of talking about the
//! promise (in a sentence, quoted, in inline code, followed by more text) is `mentioned`.

use serde_json::json;

use super::{assert_verdict, judge_with};

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
