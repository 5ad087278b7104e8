//! Declaration versus mention (SPEC §3, rules 1 to 6).
//!
//! A message *declares* completion only when its last line closes a `<promise>` pair that
//! stands alone on its lines, outside code and quotes, and holds exactly the promise phrase.
//! Anything else that shows the pair merely *mentions* it.

use serde::Serialize;

use crate::error::{Error, Result};

const OPEN: &str = "<promise>";
const CLOSE: &str = "</promise>";

/// A completion phrase: trimmed, inner whitespace runs collapsed, never empty, no `<` or `>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Promise(String);

impl Promise {
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
        Ok(Promise(phrase))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The line a model writes to declare this promise.
    pub fn tagged(&self) -> String {
        format!("{OPEN}{}{CLOSE}", self.0)
    }
}

impl Default for Promise {
    fn default() -> Promise {
        Promise("DONE".to_string())
    }
}

/// Trims and collapses every whitespace run to one space.
pub fn collapse_whitespace(text: &str) -> String {
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
    pub fn as_str(self) -> &'static str {
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

/// Applies rules 1 to 6 of SPEC §3 to a message.
pub fn assess(text: &str, promise: &Promise) -> Assessment {
    let lines: Vec<&str> = text
        .split('\n')
        .map(|line| line.strip_suffix('\r').unwrap_or(line))
        .collect();
    let masked = mask(&lines);
    let (verdict, line, question) = if let Some((line, question)) = escalation(&lines, &masked) {
        (Verdict::Blocked, Some(line), Some(question))
    } else if let Some(line) = declaration(&lines, &masked, promise) {
        (Verdict::Declared, Some(line), None)
    } else if let Some(line) = mention(text, promise) {
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

/// Rule 1: lines inside fenced code blocks (fences included, to the end when unclosed) and
/// blockquote lines are masked.
fn mask(lines: &[&str]) -> Vec<bool> {
    let mut masked = Vec::with_capacity(lines.len());
    let mut open_fence: Option<(char, usize)> = None;
    for line in lines {
        if let Some((fence_char, fence_len)) = open_fence {
            if closes_fence(line, fence_char, fence_len) {
                open_fence = None;
            }
            masked.push(true);
        } else if let Some(fence) = opens_fence(line) {
            open_fence = Some(fence);
            masked.push(true);
        } else {
            masked.push(line.trim_start().starts_with('>'));
        }
    }
    masked
}

/// Up to three spaces, then a run of at least three backticks or tildes.
fn fence_run(line: &str) -> Option<(char, usize, &str)> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let rest = &line[indent..];
    let fence_char = rest.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let run = rest.len() - rest.trim_start_matches(fence_char).len();
    (run >= 3).then(|| (fence_char, run, &rest[run..]))
}

fn opens_fence(line: &str) -> Option<(char, usize)> {
    fence_run(line).map(|(fence_char, run, _)| (fence_char, run))
}

/// A closing fence: the same character, at least as long, nothing after it but spaces.
fn closes_fence(line: &str, fence_char: char, fence_len: usize) -> bool {
    matches!(fence_run(line), Some((c, run, rest)) if c == fence_char && run >= fence_len && rest.trim().is_empty())
}

/// Rules 2 to 4: the 1-based line of the opening tag when the message declares the promise.
fn declaration(lines: &[&str], masked: &[bool], promise: &Promise) -> Option<usize> {
    // Rule 2: ignore trailing blank lines; the last line must end with the closing tag.
    let last = lines.iter().rposition(|line| !line.trim().is_empty())?;
    if masked[last] {
        return None;
    }
    let closing = lines[last].trim();
    let before_close = closing.strip_suffix(CLOSE)?;

    // Rule 3: the nearest opening tag, first on its line, every line between unmasked.
    let mut pieces = vec![before_close];
    let mut index = last;
    let open_at = loop {
        if let Some(at) = pieces.last()?.rfind(OPEN) {
            break at;
        }
        index = index.checked_sub(1)?;
        if masked[index] {
            return None;
        }
        pieces.push(lines[index]);
    };
    let opening = pieces.pop()?;
    if !opening[..open_at].trim().is_empty() {
        return None;
    }
    pieces.push(&opening[open_at + OPEN.len()..]);
    pieces.reverse();
    let content = pieces.join("\n");
    // Rule 4: the content, trimmed and collapsed, equals the phrase exactly.
    (collapse_whitespace(&content) == promise.as_str()).then_some(index + 1)
}

/// Rule 5: the 1-based line of the first `<promise>…</promise>` pair holding the phrase,
/// masked or not.
fn mention(text: &str, promise: &Promise) -> Option<usize> {
    let mut from = 0;
    while let Some(at) = text[from..].find(OPEN) {
        let open = from + at;
        let content_start = open + OPEN.len();
        let close = content_start + text[content_start..].find(CLOSE)?;
        let content = &text[content_start..close];
        // A later opening tag inside the content starts the pair instead.
        if !content.contains(OPEN) && collapse_whitespace(content) == promise.as_str() {
            return Some(text[..open].matches('\n').count() + 1);
        }
        from = content_start;
    }
    None
}

/// Rule 6: the first unmasked `needs-decision: TEXT` line with real text.
fn escalation(lines: &[&str], masked: &[bool]) -> Option<(usize, String)> {
    lines
        .iter()
        .zip(masked)
        .enumerate()
        .find_map(|(index, (line, masked))| {
            if *masked {
                return None;
            }
            let question = line.trim().strip_prefix("needs-decision:")?.trim();
            (!is_placeholder(question)).then(|| (index + 1, question.to_string()))
        })
}

/// Empty, an angle-bracket placeholder like `<question>`, or none / n/a / na / nothing / -.
fn is_placeholder(text: &str) -> bool {
    if text.is_empty() {
        return true;
    }
    if text.starts_with('<') && text.ends_with('>') && !text[1..text.len() - 1].contains(['<', '>'])
    {
        return true;
    }
    let word = text.strip_suffix('.').unwrap_or(text).to_ascii_lowercase();
    matches!(word.as_str(), "none" | "n/a" | "na" | "nothing" | "-")
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
    fn tilde_fence_masks_until_a_tilde_fence_of_at_least_the_same_length() {
        let text = "~~~~\n<promise>DONE</promise>\n~~~\n<promise>DONE</promise>";
        assert_eq!(verdict(text), Verdict::Mentioned);
        let closed = "~~~~\nx\n~~~~~\n<promise>DONE</promise>";
        assert_eq!(verdict(closed), Verdict::Declared);
    }

    #[test]
    fn a_fence_indented_four_spaces_is_not_a_fence() {
        assert_eq!(
            verdict("    ```\n<promise>DONE</promise>"),
            Verdict::Declared
        );
    }

    #[test]
    fn a_backtick_fence_is_not_closed_by_tildes() {
        assert_eq!(
            verdict("```\n~~~\n<promise>DONE</promise>"),
            Verdict::Mentioned
        );
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
        for q in ["Which database?", "<a> or <b>?", "no", "none of these work"] {
            assert!(!is_placeholder(q), "{q:?}");
        }
    }
}
