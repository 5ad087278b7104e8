//! Rule 1 against two other CommonMark implementations: for Markdown assembled from the pieces
//! that decide what is code, quoted or raw HTML, the lines vigil masks (from pulldown-cmark) are
//! never fewer than the lines that both comrak (a port of cmark-gfm) and markdown-rs (a port of
//! micromark) put in code blocks, block quotes and HTML blocks of types 1 to 6. A line only vigil
//! masks can refuse a declaration but never accept one, and those cases are where the parsers
//! differ among themselves: comrak and markdown-rs let a lone tag such as `</pre>` end a lazy
//! quote line, where cmark and commonmark.js keep it in the quote, and each misreads shapes on
//! its own (markdown-rs lets a type-7 tag interrupt a paragraph), so neither alone is an oracle.

use comrak::nodes::NodeValue;
use comrak::{Arena, Options, parse_document};
use markdown::mdast::Node;
use proptest::prelude::*;
use vigil::markdown::{Lines, masked_lines};

/// The lines comrak masks, by the same rule as vigil's. Its source positions count lines the
/// way CommonMark ends them (LF, CRLF, lone CR), as `Lines` does.
fn masked_by_comrak(lines: &Lines) -> Vec<bool> {
    let arena = Arena::new();
    let root = parse_document(&arena, lines.text, &Options::default());
    let mut masked = vec![false; lines.len()];
    for node in root.descendants() {
        let data = node.data.borrow();
        let hides = match &data.value {
            NodeValue::CodeBlock(_) | NodeValue::BlockQuote => true,
            NodeValue::HtmlBlock(html) => html.block_type != 7,
            _ => false,
        };
        if hides {
            // cmark ends a container's position before its lazy lines; its paragraph has them.
            let first = data.sourcepos.start.line;
            let last = node
                .descendants()
                .map(|inner| inner.data.borrow().sourcepos.end.line)
                .max()
                .unwrap_or(first);
            for line in first.max(1)..=last.min(lines.len()) {
                masked[line - 1] = true;
            }
        }
    }
    masked
}

/// The lines markdown-rs (a port of micromark) masks; `None` where markdown-rs 1.0 fails on its
/// own (it panics building its tree for some list shapes).
fn masked_by_markdown_rs(lines: &Lines) -> Option<Vec<bool>> {
    let text = lines.text.to_string();
    let root = std::panic::catch_unwind(|| {
        markdown::to_mdast(&text, &markdown::ParseOptions::default()).unwrap()
    })
    .ok()?;
    let mut masked = vec![false; lines.len()];
    mark_markdown_rs(&root, lines, &mut masked);
    Some(masked)
}

fn mark_markdown_rs(node: &Node, lines: &Lines, masked: &mut [bool]) {
    let flow = matches!(
        node,
        Node::Root(_) | Node::Blockquote(_) | Node::ListItem(_)
    );
    for child in node.children().into_iter().flatten() {
        let hides = match child {
            Node::Code(_) | Node::Blockquote(_) => true,
            Node::Html(_) => flow && !markdown_rs_type_seven(child, lines.text),
            _ => false,
        };
        if hides && let Some(position) = child.position() {
            for line in position.start.line..=position.end.line.min(lines.len()) {
                masked[line - 1] = true;
            }
        }
        mark_markdown_rs(child, lines, masked);
    }
}

/// Type 7 is the HTML block that cannot interrupt a paragraph; markdown-rs decides.
fn markdown_rs_type_seven(node: &Node, text: &str) -> bool {
    let start = node.position().unwrap().start.offset;
    let first = text[start..]
        .split(['\n', '\r'])
        .next()
        .unwrap()
        .trim_start_matches([' ', '\t']);
    let probe = format!("x\n{first}");
    let probe = markdown::to_mdast(&probe, &markdown::ParseOptions::default()).unwrap();
    !probe
        .children()
        .unwrap()
        .iter()
        .any(|child| matches!(child, Node::Html(_)))
}

fn markdownish() -> impl Strategy<Value = String> {
    let prefix = prop::sample::select(vec![
        "", "", "", "> ", ">", "> > ", "- ", "* ", "1. ", "  ", "   ", "    ", "\t",
    ]);
    let body = prop::sample::select(vec![
        "```",
        "```rust",
        "```a`b",
        "~~~",
        "~~~ a`b",
        "````",
        "<promise>DONE</promise>",
        "needs-decision: which?",
        "<div>",
        "</div>",
        "<!--",
        "-->",
        "<pre>",
        "</pre>",
        "<?x",
        "?>",
        "<promise>",
        "</promise>",
        "<custom-tag>",
        "DONE",
        "text",
        "more text",
        "===",
        "---",
        "# heading",
        "***",
        "",
        "``` \u{a0}",
        "```\u{b}",
    ]);
    let ending = prop::sample::select(vec!["\n", "\n", "\n", "\r\n", "\r"]);
    prop::collection::vec((prefix.clone(), prefix, body, ending), 0..14).prop_map(|lines| {
        lines
            .into_iter()
            .map(|(a, b, body, ending)| format!("{a}{b}{body}{ending}"))
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn rule1_masks_what_a_second_commonmark_parser_reads_as_code_quotes_and_html(text in markdownish()) {
        let lines = Lines::new(&text);
        let ours = masked_lines(&lines);
        let comrak = masked_by_comrak(&lines);
        let micromark = masked_by_markdown_rs(&lines);
        prop_assume!(micromark.is_some());
        let micromark = micromark.unwrap();
        for index in 0..lines.len() {
            if lines.get(index).trim().is_empty() {
                continue;
            }
            // A line both others hide in code, a quote or HTML is never one vigil reads.
            prop_assert!(
                ours[index] || !(comrak[index] && micromark[index]),
                "line {} of {:?} is masked by comrak and markdown-rs, not by vigil",
                index + 1,
                text
            );
        }
    }
}
