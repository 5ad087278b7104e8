//! SPEC §3 rules 2 to 4, declarations that must count: the promise alone on the last line,
//! trimmed, its inner whitespace collapsed, in the tag.

use serde_json::json;

use super::{assert_verdict, judge_with};

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
