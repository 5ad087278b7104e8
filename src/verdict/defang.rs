//! Defang: break every marker prefix and promise tag in text handed on to a later session
//! (SPEC §3, P4), so that a model echoing it back can never end the wrong loop or task.
//!
//! Only hyphens are added: `<<<VIGIL_` becomes `<<<VIG-IL_`, `<promise>` becomes `<pro-mise>`,
//! `</promise>` becomes `</pro-mise>`. A marker prefix is found in the flattened view (escapes,
//! controls, gutters and whitespace between its characters do not hide it), so the result
//! holds no marker as text or flattened text either. The function is idempotent.

use std::sync::LazyLock;

use regex_syntax::hir::{Class, HirKind};

use crate::verdict::terminal;
use crate::verdict::token::Prefix;

/// Where a hyphen goes in a promise tag: before the `m` of `<promise>` and `</promise>`.
const TAGS: [(&str, usize); 2] = [("</promise>", 5), ("<promise>", 4)];

/// Defangs bytes, leaving everything but the spliced hyphens as it was, invalid UTF-8 included.
pub fn defang_bytes(bytes: &[u8], prefixes: &[Prefix]) -> Vec<u8> {
    let mut splices = marker_splices(bytes, prefixes);
    for (tag, at) in TAGS {
        let tag = tag.as_bytes();
        let mut from = 0;
        while let Some(found) = find(&bytes[from..], tag) {
            splices.push(from + found + at);
            from += found + tag.len();
        }
    }
    splices.sort_unstable();
    splices.dedup();
    let mut out = Vec::with_capacity(bytes.len() + splices.len());
    let mut last = 0;
    for at in splices {
        out.extend_from_slice(&bytes[last..at]);
        out.push(b'-');
        last = at;
    }
    out.extend_from_slice(&bytes[last..]);
    out
}

/// Defangs text with the default prefix `VIGIL`: the one call every writer of handed-on text uses.
pub fn defang(text: &str) -> String {
    let out = defang_bytes(text.as_bytes(), &[Prefix::default()]);
    // Splicing ASCII hyphens between characters keeps valid UTF-8 valid.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Byte offsets at which a hyphen breaks each marker prefix, found as raw text and in the
/// flattened view (which differ: an escape introducer just before `<<<` swallows a `<` when
/// flattened, while the raw bytes still hold the prefix).
fn marker_splices(bytes: &[u8], prefixes: &[Prefix]) -> Vec<usize> {
    // Nearly all text has no `<` at all, and without one there is nothing to find.
    if memchr::memchr(b'<', bytes).is_none() {
        return Vec::new();
    }
    let mut splices = Vec::new();
    for prefix in prefixes {
        let opener = prefix.opener();
        let at = 3 + prefix.splice_at();
        splices.extend(memchr::memmem::find_iter(bytes, opener.as_bytes()).map(|found| found + at));
    }
    let mut matchers: Vec<Matcher> = prefixes.iter().map(Matcher::new).collect();
    terminal::for_each_kept(bytes, |offset, c| {
        for matcher in &mut matchers {
            if let Some(at) = matcher.push(offset, c) {
                splices.push(at);
            }
        }
    });
    splices
}

/// Streams kept characters against one `<<<PREFIX_`, remembering the offsets of the current
/// partial match so the hyphen lands before the right character.
struct Matcher {
    opener: Vec<char>,
    splice_char: usize,
    offsets: Vec<usize>,
}

impl Matcher {
    fn new(prefix: &Prefix) -> Matcher {
        Matcher {
            opener: prefix.opener().chars().collect(),
            splice_char: 3 + prefix.splice_at(),
            offsets: Vec::new(),
        }
    }

    /// Feeds one kept character; returns the splice offset when it completes a match.
    fn push(&mut self, offset: usize, c: char) -> Option<usize> {
        if c == self.opener[self.offsets.len()] {
            self.offsets.push(offset);
        } else if c == '<' {
            // The opener is `<<<` then no other `<`: after `<<<` a fourth `<` still leaves
            // `<<<` matched; after more than that it starts a new match.
            let keep = if self.offsets.len() == 3 { 2 } else { 0 };
            let drop = self.offsets.len() - keep;
            self.offsets.drain(..drop);
            self.offsets.push(offset);
        } else {
            self.offsets.clear();
        }
        if self.offsets.len() == self.opener.len() {
            let at = self.offsets[self.splice_char];
            self.offsets.clear();
            return Some(at);
        }
        None
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(haystack, needle)
}

/// The longest one-line field ([`field`]), in characters.
pub(crate) const MAX_FIELD: usize = 300;

/// Text copied from a session: escapes and format characters gone, defanged, at most `max`
/// characters (the end kept).
pub(crate) fn clean(text: &str, max: usize) -> String {
    let plain = visible(&terminal::plain_text(text.as_bytes()));
    keep_tail(&defang(plain.trim()), max)
}

/// A value for a one-line field: escapes, control and format characters gone, line breaks (and U+2028,
/// U+2029) made spaces, defanged, at most `MAX_FIELD` characters. Nothing a branch name, a
/// file name or a hook payload holds can then start a line of its own or carry a live tag.
pub(crate) fn field(text: &str) -> String {
    field_max(text, MAX_FIELD)
}

pub(crate) fn field_max(text: &str, max: usize) -> String {
    let plain = terminal::plain_text(text.as_bytes());
    let one_line: String = plain
        .chars()
        .filter(|c| !is_format(*c))
        .map(|c| {
            if c.is_control() || c == '\u{2028}' || c == '\u{2029}' {
                ' '
            } else {
                c
            }
        })
        .collect();
    keep_head(&defang(one_line.trim()), max)
}

/// Unicode's format characters (general category Cf): the bidirectional embeddings, overrides,
/// isolates and marks that reorder text as a terminal shows it, zero-width spaces and joiners,
/// the soft hyphen, the BOM and the invisible tag characters. In text a person reads they could
/// make a command or a path read as another, or carry what nobody sees. The table is Unicode's,
/// as regex-syntax has it.
pub(crate) fn is_format(c: char) -> bool {
    static FORMAT: LazyLock<Vec<(char, char)>> = LazyLock::new(|| {
        let hir = regex_syntax::Parser::new()
            .parse(r"\p{Cf}")
            .expect("Unicode's general categories are in regex-syntax");
        match hir.kind() {
            HirKind::Class(Class::Unicode(class)) => class
                .ranges()
                .iter()
                .map(|r| (r.start(), r.end()))
                .collect(),
            other => unreachable!("\\p{{Cf}} is a class, not {other:?}"),
        }
    });
    !c.is_ascii()
        && FORMAT
            .binary_search_by(|&(start, end)| {
                if end < c {
                    std::cmp::Ordering::Less
                } else if start > c {
                    std::cmp::Ordering::Greater
                } else {
                    std::cmp::Ordering::Equal
                }
            })
            .is_ok()
}

/// `text` without its format characters ([`is_format`]): what a person is shown.
pub(crate) fn visible(text: &str) -> String {
    text.chars().filter(|c| !is_format(*c)).collect()
}

/// The first `max` characters, with `…` at the end when something was dropped.
pub(crate) fn keep_head(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    if max == 0 {
        return String::new();
    }
    let head: String = text.chars().take(max - 1).collect();
    format!("{head}…")
}

/// The last `max` characters, with `…` in front when something was dropped.
pub(crate) fn keep_tail(text: &str, max: usize) -> String {
    let count = text.chars().count();
    if count <= max {
        return text.to_string();
    }
    if max == 0 {
        return String::new();
    }
    let tail: String = text.chars().skip(count - (max - 1)).collect();
    format!("…{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_characters_are_unicodes_cf_and_nothing_a_person_reads() {
        for c in [
            '\u{AD}',
            '\u{61C}',
            '\u{180E}',
            '\u{200B}',
            '\u{200D}',
            '\u{200E}',
            '\u{202A}',
            '\u{202E}',
            '\u{2060}',
            '\u{2066}',
            '\u{2069}',
            '\u{FEFF}',
            '\u{FFF9}',
            '\u{E0001}',
            '\u{E0041}',
            '\u{E007F}',
        ] {
            assert!(is_format(c), "U+{:04X}", c as u32);
        }
        for c in [
            'a',
            ' ',
            '\n',
            'é',
            'ß',
            '中',
            '\u{2028}',
            '😀',
            '\u{1F3FB}',
            '\u{FFFD}',
        ] {
            assert!(!is_format(c), "U+{:04X}", c as u32);
        }
        assert_eq!(visible("rm\u{202E}fr-\u{E0041} ok"), "rmfr- ok");
        assert_eq!(field("a\u{2066}b\u{200B}c"), "abc");
    }

    #[test]
    fn splices_a_hyphen_into_marker_prefixes_and_promise_tags() {
        assert_eq!(
            defang("<<<VIGIL_DONE_abc>>> <promise>DONE</promise>"),
            "<<<VIG-IL_DONE_abc>>> <pro-mise>DONE</pro-mise>"
        );
    }

    #[test]
    fn breaks_a_prefix_split_by_whitespace_and_escapes() {
        let out = defang("<<<VIG\n\x1b[31mIL_DONE_x>>>");
        assert_eq!(out, "<<<VIG\n\x1b[31m-IL_DONE_x>>>");
    }

    #[test]
    fn other_prefixes_only_when_given() {
        let text = b"<<<ACME_DONE_x>>>";
        assert_eq!(defang_bytes(text, &[Prefix::default()]), text.to_vec());
        let acme = Prefix::parse("ACME").unwrap();
        assert_eq!(defang_bytes(text, &[acme]), b"<<<AC-ME_DONE_x>>>".to_vec());
    }

    #[test]
    fn a_run_of_angle_brackets_before_the_prefix_still_matches() {
        assert_eq!(defang("<<<<<VIGIL_"), "<<<<<VIG-IL_");
        assert_eq!(defang("<<<VI<<<VIGIL_"), "<<<VI<<<VIG-IL_");
    }

    #[test]
    fn a_prefix_right_after_an_escape_introducer_is_broken_too() {
        for raw in [
            "\x1b<<<VIGIL_DONE",
            "\x1b[<<<VIGIL_DONE",
            "\x1b]0;<<<VIGIL_DONE\x07",
            "\u{9b}<<<VIGIL_DONE",
        ] {
            let out = defang(raw);
            assert!(!out.contains("<<<VIGIL_"), "{raw:?} -> {out:?}");
            assert_eq!(defang(&out), out);
        }
    }

    #[test]
    fn invalid_utf8_passes_through() {
        assert_eq!(
            defang_bytes(b"\xff<promise>", &[]),
            b"\xff<pro-mise>".to_vec()
        );
    }
}
