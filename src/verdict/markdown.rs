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
    pub(crate) fn index_of(&self, offset: usize) -> usize {
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
    let normal = structural_text(lines.text);
    // The normal form ends its lines where the message does, so line `i` is line `i` in both.
    let normal_lines;
    let (text, spans) = match &normal {
        Cow::Borrowed(_) => (lines.text, &lines.spans),
        Cow::Owned(normal) => {
            normal_lines = Lines::new(normal);
            (normal.as_str(), &normal_lines.spans)
        }
    };
    let mut masked = vec![false; spans.len()];
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
        let first = spans.partition_point(|span| span.end < range.start);
        for (index, span) in spans.iter().enumerate().skip(first) {
            if span.start >= range.end {
                break;
            }
            masked[index] = true;
        }
        marked_to = marked_to.max(range.end);
    }
    masked
}

/// The text as pulldown-cmark reads it the way CommonMark means it, with the same lines.
///
/// pulldown-cmark 0.13 misreads a few shapes, as the differential test against commonmark.js
/// (the reference implementation) found; each is rewritten into one it reads right, keeping
/// every line ending where it was:
/// - a lone CR, read as LF everywhere but in nested list items holding HTML blocks: made LF;
/// - a tab, which shapes blocks as the spaces up to its tab stop (4 columns) but before `>`
///   was read as one column (`"> a\n\t> b"` went on quoting a lazy line): made those spaces
///   (elsewhere a space and a tab are both just whitespace);
/// - the end of an HTML block of type 1, which is any of `</pre>`, `</script>`, `</style>`,
///   `</textarea>` in any case but was only the start tag's own name in lower case: every such
///   start tag is made `<pre` and every end tag `</pre>`, the four names being alike in every
///   other rule of block structure;
/// - a vertical tab or form feed, which CommonMark's block structure never takes for space (a
///   blank line, the space after `#` or `>`, the space around a tag are spaces and tabs), but
///   pulldown-cmark did (`"<div>\n\x0c\n<promise>…"` ended the HTML block and declared): made
///   U+0001, another ASCII control that no rule treats as space.
fn structural_text(text: &str) -> Cow<'_, str> {
    let bytes = text.as_bytes();
    let lone = |at: usize| bytes[at] == b'\r' && bytes.get(at + 1) != Some(&b'\n');
    let has_lone_cr = memchr::memchr_iter(b'\r', bytes).any(lone);
    let has_tab = memchr::memchr3(b'\t', 0x0b, 0x0c, bytes).is_some();
    let has_raw_tag =
        memchr::memchr_iter(b'<', bytes).any(|at| raw_text_tag(&bytes[at..]).is_some());
    if !has_lone_cr && !has_tab && !has_raw_tag {
        return Cow::Borrowed(text);
    }
    let mut normal = String::with_capacity(text.len());
    // The column in the message's own line, where the next tab's stop is counted from.
    let mut column = 0;
    let mut copied = 0;
    let special = |b: &u8| matches!(b, b'\t' | b'\r' | b'<' | 0x0b | 0x0c);
    let found = bytes
        .iter()
        .enumerate()
        .filter(|(_, b)| special(b))
        .map(|(at, _)| at);
    for at in found {
        if at < copied {
            continue; // inside a tag already rewritten
        }
        let run = &text[copied..at];
        normal.push_str(run);
        column = match run.rfind('\n') {
            Some(end) => chars(&run[end + 1..]),
            None => column + chars(run),
        };
        copied = at + 1;
        match bytes[at] {
            b'\t' => {
                let spaces = 4 - column % 4;
                normal.extend(std::iter::repeat_n(' ', spaces));
                column += spaces;
            }
            b'\r' => {
                normal.push(if lone(at) { '\n' } else { '\r' });
                column = 0;
            }
            0x0b | 0x0c => {
                normal.push('\u{1}');
                column += 1;
            }
            _ => match raw_text_tag(&bytes[at..]) {
                Some((len, tag)) => {
                    normal.push_str(tag);
                    column += len;
                    copied = at + len;
                }
                None => {
                    normal.push('<');
                    column += 1;
                }
            },
        }
    }
    normal.push_str(&text[copied..]);
    Cow::Owned(normal)
}

/// The characters in `text` (each starts with a byte that is not a UTF-8 continuation byte).
fn chars(text: &str) -> usize {
    text.bytes().filter(|b| (b & 0xC0) != 0x80).count()
}

/// The HTML block type 1 names: a start tag of one opens the block, an end tag of any ends it.
const RAW_TEXT_NAMES: [&[u8]; 4] = [b"pre", b"script", b"style", b"textarea"];

/// At a `<`: a type-1 start tag's `<name` (the whole name: what follows is the parser's to
/// judge) or an end tag `</name>`, in any case; its length and what it is made.
fn raw_text_tag(at: &[u8]) -> Option<(usize, &'static str)> {
    let (rest, close) = match at.get(1) {
        Some(b'/') => (&at[2..], true),
        _ => (&at[1..], false),
    };
    let name = RAW_TEXT_NAMES
        .iter()
        .find(|name| rest.len() >= name.len() && rest[..name.len()].eq_ignore_ascii_case(name))?;
    let after = rest.get(name.len()).copied();
    if close {
        (after == Some(b'>')).then_some((name.len() + 3, "</pre>"))
    } else {
        let name_goes_on = after.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'-');
        (!name_goes_on).then_some((name.len() + 1, "<pre"))
    }
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
    fn a_tab_is_read_as_the_spaces_to_its_tab_stop() {
        // Four columns before `>`: no quote marker, so a lazy line of the quote's paragraph,
        // and so is the line after it (pulldown-cmark alone reads a second quote line there).
        assert_eq!(mask("> a\n\t> <div>\nb"), [true, true, true]);
        assert_eq!(mask("> a\n \t> <div>\nb"), [true, true, true]);
        assert_eq!(mask("\tcode\n\nb"), [true, false, false]);
        assert_eq!(mask("a\tb\n\nc"), [false, false, false]);
        assert_eq!(structural_text("ab\tc\r\td"), "ab  c\n    d");
        assert_eq!(structural_text("é\t"), "é   ");
    }

    #[test]
    fn a_vertical_tab_or_form_feed_is_never_space_to_block_structure() {
        for c in ["\u{b}", "\u{c}"] {
            // Not a blank line: the HTML block goes on, and the quote's paragraph with it.
            assert_eq!(mask(&format!("<div>\n{c}\nb")), [true, true, true]);
            assert_eq!(mask(&format!(">{c}\nb")), [true, true]);
            // Not the space after `#`: no heading, so a lazy line of the quote.
            assert_eq!(mask(&format!("> a\n#{c}\nb")), [true, true, true]);
        }
        assert_eq!(structural_text("a\u{b}b\u{c}"), "a\u{1}b\u{1}");
    }

    #[test]
    fn any_type_one_end_tag_in_any_case_ends_a_type_one_block() {
        assert_eq!(mask("<style>\n</pre>\nb"), [true, true, false]);
        assert_eq!(mask("<pre>\n</PRE>\nb"), [true, true, false]);
        assert_eq!(mask("<SCRIPT type=x>\n</TextArea>\nb"), [true, true, false]);
        assert_eq!(mask("<pre>\n</pres>\nb"), [true, true, true]);
        assert_eq!(mask("<prex>\n</pre>\nb"), [false, false, false]);
        assert_eq!(structural_text("<Style>a</SCRIPT>"), "<pre>a</pre>");
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
