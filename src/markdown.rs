//! Which lines of a message Markdown puts out of play (SPEC §3, rule 1).
//!
//! A promise shown in code, quoted, or inside raw HTML is a mention, never a declaration. What
//! counts as code or a quote is what a CommonMark 0.31 renderer makes of the text, so the
//! structure comes from a conforming parser (pulldown-cmark, no extensions) with the source
//! range of every block; nothing here parses Markdown by hand.

use std::borrow::Cow;
use std::ops::Range;

use pulldown_cmark::{Event, Options, Parser, Tag};

/// A message cut into lines: LF, CRLF and a lone CR each end one (as in CommonMark). Each
/// line's span excludes its ending; the text after the last ending is a line too, possibly
/// empty.
pub struct Lines<'a> {
    pub text: &'a str,
    pub spans: Vec<Range<usize>>,
}

impl<'a> Lines<'a> {
    pub fn new(text: &'a str) -> Lines<'a> {
        let bytes = text.as_bytes();
        let mut spans = Vec::new();
        let mut start = 0;
        let mut from = 0;
        while let Some(found) = memchr::memchr2(b'\n', b'\r', &bytes[from..]) {
            let end = from + found;
            let crlf = bytes[end] == b'\r' && bytes.get(end + 1) == Some(&b'\n');
            spans.push(start..end);
            start = end + if crlf { 2 } else { 1 };
            from = start;
        }
        spans.push(start..text.len());
        Lines { text, spans }
    }

    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// The text of line `index` (0-based), without its ending.
    pub fn get(&self, index: usize) -> &'a str {
        &self.text[self.spans[index].clone()]
    }

    /// The 0-based index of the line holding byte `offset`.
    pub fn index_of(&self, offset: usize) -> usize {
        self.spans
            .partition_point(|span| span.start <= offset)
            .saturating_sub(1)
    }
}

/// For every line, whether rule 1 masks it: it lies in a code block (fenced, wherever it opens,
/// or indented), in a block quote (lazy continuation lines and everything nested included), or
/// in an HTML block of CommonMark types 1 to 6. Paragraphs, headings and type-7 HTML blocks (a
/// line holding only a tag such as `<promise>`) stay unmasked.
pub fn masked_lines(lines: &Lines) -> Vec<bool> {
    let text = &*lf_for_lone_cr(lines.text);
    let mut masked = vec![false; lines.len()];
    // Blocks nest inside the one that opened before them, so a range that ends before this
    // offset is already marked whole: skipping it keeps deep nesting linear.
    let mut marked_to = 0;
    for (event, range) in Parser::new_ext(text, Options::empty()).into_offset_iter() {
        let hides = match event {
            Event::Start(Tag::CodeBlock(_) | Tag::BlockQuote(_)) => true,
            Event::Start(Tag::HtmlBlock) => !is_type_seven(&text[range.clone()]),
            _ => false,
        };
        if !hides || range.end <= marked_to {
            continue;
        }
        let first = lines.spans.partition_point(|span| span.end < range.start);
        for (index, span) in lines.spans.iter().enumerate().skip(first) {
            if span.start >= range.end {
                break;
            }
            masked[index] = true;
        }
        marked_to = marked_to.max(range.end);
    }
    masked
}

/// The text with every lone CR made an LF. CommonMark reads both as the same line ending, but
/// pulldown-cmark 0.13 misreads a lone CR in places (nested list items holding HTML blocks, as
/// the differential test against markdown-rs found). One byte for one keeps every offset.
fn lf_for_lone_cr(text: &str) -> Cow<'_, str> {
    let bytes = text.as_bytes();
    let lone = |at: usize| bytes[at] == b'\r' && bytes.get(at + 1) != Some(&b'\n');
    if !memchr::memchr_iter(b'\r', bytes).any(lone) {
        return Cow::Borrowed(text);
    }
    let normal: String = text
        .char_indices()
        .map(|(at, c)| if c == '\r' && lone(at) { '\n' } else { c })
        .collect();
    Cow::Owned(normal)
}

/// Whether an HTML block is of type 7 (a lone complete tag of any other name), the one kind that
/// cannot interrupt a paragraph: the parser itself decides, by reading the block's first line
/// right after a paragraph line.
fn is_type_seven(block: &str) -> bool {
    let first = block
        .split(['\n', '\r'])
        .next()
        .unwrap_or("")
        .trim_start_matches([' ', '\t']);
    let probe = format!("x\n{first}");
    !Parser::new_ext(&probe, Options::empty())
        .any(|event| matches!(event, Event::Start(Tag::HtmlBlock)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(text: &str) -> Vec<&str> {
        let lines = Lines::new(text);
        (0..lines.len()).map(|i| lines.get(i)).collect()
    }

    fn mask(text: &str) -> Vec<bool> {
        masked_lines(&Lines::new(text))
    }

    #[test]
    fn lf_crlf_and_a_lone_cr_each_end_a_line() {
        assert_eq!(split(""), [""]);
        assert_eq!(split("a"), ["a"]);
        assert_eq!(split("a\n"), ["a", ""]);
        assert_eq!(split("a\r\nb\rc\n\rd"), ["a", "b", "c", "", "d"]);
        assert_eq!(split("\r\r\n"), ["", "", ""]);
    }

    #[test]
    fn index_of_finds_the_line_of_an_offset() {
        let lines = Lines::new("ab\r\ncd\ref");
        let at: Vec<usize> = (0..=9).map(|o| lines.index_of(o)).collect();
        assert_eq!(at, [0, 0, 0, 0, 1, 1, 1, 2, 2, 2]);
    }

    #[test]
    fn blocks_mask_their_lines_and_paragraphs_do_not() {
        assert_eq!(mask("a\n```\nb\n```\nc"), [false, true, true, true, false]);
        assert_eq!(mask("> a\nb\n\nc"), [true, true, false, false]);
        assert_eq!(mask("<div>\na\n\nb"), [true, true, false, false]);
        assert_eq!(mask("<promise>\nDONE\n</promise>"), [false, false, false]);
        assert_eq!(mask("a\n\n    b\nc"), [false, false, true, false]);
    }

    #[test]
    fn the_parser_sorts_html_blocks_by_type() {
        for block in ["<promise>", "</promise>", "<a href=\"x\">", "<source>"] {
            assert!(is_type_seven(block), "{block}");
        }
        for block in [
            "<div>",
            "</DIV>",
            "<!-- x",
            "<pre>",
            "<?php",
            "<!DOCTYPE",
            "<search>",
        ] {
            assert!(!is_type_seven(block), "{block}");
        }
    }
}
