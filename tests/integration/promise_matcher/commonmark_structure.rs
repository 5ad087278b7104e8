//! SPEC §3 rule 1, what CommonMark 0.31 reads as code, a quote or raw HTML is masked: a promise
//! inside one never declares, one construct a test.

use super::{assert_verdict, judge_with};

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
