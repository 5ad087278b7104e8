//! Declaration versus mention (SPEC §3, rules 1 to 6).
//!
//! A message *declares* completion only when its last line closes a `<promise>` pair that
//! stands alone on its lines, outside what CommonMark reads as code, quotes or raw HTML
//! (`markdown`), and holds exactly the promise phrase.
//! Anything else that shows the pair merely *mentions* it.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::verdict::markdown::{self, Lines};

const OPEN: &str = "<promise>";
const CLOSE: &str = "</promise>";
const ESCALATION: &str = "needs-decision:";

/// The longest promise phrase: it is written as a line, and kept in every loop record.
pub(crate) const MAX_PROMISE_CHARS: usize = 200;

/// A completion phrase: trimmed, inner whitespace runs collapsed, never empty, no `<` or `>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Promise(String);

impl Promise {
    /// Refuses an empty phrase, one with `<` or `>`, and one longer than `MAX_PROMISE_CHARS`.
    pub fn new(raw: &str) -> Result<Promise> {
        let phrase = collapse_whitespace(raw);
        if phrase.is_empty() {
            return Err(Error::usage(
                "the promise phrase is empty; give one with --promise, e.g. --promise DONE",
            ));
        }
        if phrase.contains(['<', '>']) {
            return Err(Error::usage(format!(
                "the promise phrase {phrase:?} contains `<` or `>`; give the phrase without tags, e.g. --promise DONE"
            )));
        }
        if phrase.chars().count() > MAX_PROMISE_CHARS {
            return Err(Error::usage(format!(
                "the promise phrase has more than {MAX_PROMISE_CHARS} characters; a model writes it as its last line: keep it a few words, e.g. --promise DONE"
            )));
        }
        Ok(Promise(phrase))
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    /// The line a model writes to declare this promise.
    pub(crate) fn tagged(&self) -> String {
        format!("{OPEN}{}{CLOSE}", self.0)
    }
}

impl Default for Promise {
    fn default() -> Promise {
        Promise("DONE".to_string())
    }
}

/// Trims and collapses every whitespace run to one space.
pub(crate) fn collapse_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// The last line declares the promise (rules 1 to 4).
    Declared,
    /// The promise pair appears, but not as a declaration (rule 5).
    Mentioned,
    /// No promise pair with this phrase appears at all (rule 5).
    Absent,
    /// The message escalates a question to a human (rule 6); wins over `Declared`.
    Blocked,
}

impl Verdict {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Verdict::Declared => "declared",
            Verdict::Mentioned => "mentioned",
            Verdict::Absent => "absent",
            Verdict::Blocked => "blocked",
        }
    }
}

/// What `assess` found: the verdict, the 1-based line it rests on, and the escalated question.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Assessment {
    pub verdict: Verdict,
    pub promise: String,
    /// Declared and mentioned: the line of the opening `<promise>`; blocked: the
    /// `needs-decision:` line; absent: none.
    pub line: Option<usize>,
    pub question: Option<String>,
}

/// Applies rules 1 to 6 of SPEC §3 to a message. Linear in its length, whatever it holds.
pub fn assess(text: &str, promise: &Promise) -> Assessment {
    // Without a closing tag or an escalation key nothing can be declared, mentioned or
    // escalated: the Markdown structure is not needed (most Stops of a running loop).
    if !contains_ignore_ascii_case(text.as_bytes(), CLOSE.as_bytes())
        && !contains_ignore_ascii_case(text.as_bytes(), ESCALATION.as_bytes())
    {
        return Assessment {
            verdict: Verdict::Absent,
            promise: promise.as_str().to_string(),
            line: None,
            question: None,
        };
    }
    let lines = Lines::new(text);
    let masked = markdown::masked_lines(&lines);
    // Rule 6: the first unmasked escalation wins over everything else.
    let escalation = (0..lines.len())
        .filter(|&index| !masked[index])
        .find_map(|index| needs_decision(lines.get(index)).map(|question| (index + 1, question)));
    let (verdict, line, question) = if let Some((line, question)) = escalation {
        (Verdict::Blocked, Some(line), Some(question))
    } else if let Some(line) = declaration(&lines, &masked, promise) {
        (Verdict::Declared, Some(line), None)
    } else if let Some(line) = mention(&lines, promise) {
        (Verdict::Mentioned, Some(line), None)
    } else {
        (Verdict::Absent, None, None)
    };
    Assessment {
        verdict,
        promise: promise.as_str().to_string(),
        line,
        question,
    }
}

/// Rules 2 to 4: the 1-based line of the opening tag when the message declares the promise.
fn declaration(lines: &Lines, masked: &[bool], promise: &Promise) -> Option<usize> {
    let text = lines.text;
    // Rule 2: ignore trailing blank lines; the last line must be unmasked and end with the
    // closing tag.
    let last = (0..lines.len())
        .rev()
        .find(|&index| !lines.get(index).trim().is_empty())?;
    if masked[last] {
        return None;
    }
    let start = lines.spans[last].start;
    let trimmed = lines.get(last).trim_end();
    trimmed.strip_suffix(CLOSE)?;
    let close_at = start + trimmed.len() - CLOSE.len();

    // Rule 3: the nearest opening tag, first on its line, every line between unmasked.
    let (open_line, open_at) = match text[start..close_at].rfind(OPEN) {
        Some(at) => (last, start + at),
        None => (0..last).rev().find_map(|index| {
            if masked[index] {
                return Some(None);
            }
            let span = &lines.spans[index];
            text[span.clone()]
                .rfind(OPEN)
                .map(|at| Some((index, span.start + at)))
        })??,
    };
    if !text[lines.spans[open_line].start..open_at]
        .trim()
        .is_empty()
    {
        return None;
    }
    // Rule 4: the content, trimmed and collapsed, equals the phrase exactly.
    let content = &text[open_at + OPEN.len()..close_at];
    (collapse_whitespace(content) == promise.as_str()).then_some(open_line + 1)
}

/// Rule 5: the 1-based line of the first `<promise>…</promise>` pair holding the phrase,
/// masked or not. A closing tag pairs with the nearest opening tag before it; one pass.
fn mention(lines: &Lines, promise: &Promise) -> Option<usize> {
    let text = lines.text;
    let mut opens = memchr::memmem::find_iter(text.as_bytes(), OPEN.as_bytes()).peekable();
    let mut last_open = None;
    for close in memchr::memmem::find_iter(text.as_bytes(), CLOSE.as_bytes()) {
        while let Some(&open) = opens.peek() {
            if open + OPEN.len() > close {
                break;
            }
            last_open = Some(open);
            opens.next();
        }
        if let Some(open) = last_open.take()
            && collapse_whitespace(&text[open + OPEN.len()..close]) == promise.as_str()
        {
            return Some(lines.index_of(open) + 1);
        }
    }
    None
}

/// Rule 6 for one unmasked line: `needs-decision: TEXT` (the key in any case) with real text.
fn needs_decision(line: &str) -> Option<String> {
    let trimmed = line.trim();
    let head = trimmed.get(..ESCALATION.len())?;
    if !head.eq_ignore_ascii_case(ESCALATION) {
        return None;
    }
    let question = trimmed[ESCALATION.len()..].trim();
    (!is_placeholder(question)).then(|| question.to_string())
}

/// Whether `needle` (ASCII) occurs in `haystack`, ignoring ASCII case.
fn contains_ignore_ascii_case(haystack: &[u8], needle: &[u8]) -> bool {
    let first = needle[0];
    memchr::memchr2_iter(
        first.to_ascii_lowercase(),
        first.to_ascii_uppercase(),
        haystack,
    )
    .any(|at| {
        haystack
            .get(at..at + needle.len())
            .is_some_and(|found| found.eq_ignore_ascii_case(needle))
    })
}

/// Placeholders never escalate: empty, an angle-bracket placeholder such as `<question>` or
/// `<your question here>` (words only: a `?` inside makes it a real question), or none, n/a,
/// na, nothing, `-`; any case, with or without a final period.
fn is_placeholder(text: &str) -> bool {
    let text = text.strip_suffix('.').unwrap_or(text).trim_end();
    if text.is_empty() {
        return true;
    }
    if let Some(inner) = text.strip_prefix('<').and_then(|t| t.strip_suffix('>')) {
        return inner.len() <= 40
            && inner
                .chars()
                .all(|c| c.is_alphanumeric() || matches!(c, ' ' | '_' | '-'));
    }
    matches!(
        text.to_ascii_lowercase().as_str(),
        "none" | "n/a" | "na" | "nothing" | "-"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(text: &str) -> Verdict {
        assess(text, &Promise::default()).verdict
    }

    #[test]
    fn phrase_is_trimmed_and_collapsed() {
        assert_eq!(
            Promise::new("  ALL \t TESTS\nPASS ").unwrap().as_str(),
            "ALL TESTS PASS"
        );
    }

    #[test]
    fn empty_phrase_or_phrase_with_angle_brackets_is_a_usage_error() {
        assert!(Promise::new("  ").is_err());
        assert!(Promise::new("<promise>DONE</promise>").is_err());
        assert!(Promise::new("a>b").is_err());
    }

    #[test]
    fn multi_line_pair_with_a_masked_line_between_does_not_declare() {
        assert_eq!(verdict("<promise>\n> DONE\n</promise>"), Verdict::Absent);
    }

    #[test]
    fn placeholders() {
        for p in [
            "",
            "<question>",
            "<question>.",
            "<your question here>",
            "none",
            "None.",
            "N/A",
            "na",
            "NOTHING.",
            "-",
            "-.",
        ] {
            assert!(is_placeholder(p), "{p:?}");
        }
        for q in [
            "Which database?",
            "<a> or <b>?",
            "<Should I drop the users table?>",
            "no",
            "none of these work",
            "<x>y",
        ] {
            assert!(!is_placeholder(q), "{q:?}");
        }
    }

    #[test]
    fn the_escalation_key_is_read_in_any_case() {
        assert_eq!(
            needs_decision("Needs-Decision: Which DB?").as_deref(),
            Some("Which DB?")
        );
        assert_eq!(
            needs_decision("  NEEDS-DECISION:   x  ").as_deref(),
            Some("x")
        );
        assert_eq!(needs_decision("- needs-decision: x"), None);
    }
}
