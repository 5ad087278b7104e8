//! The ignore rules the worktree subject takes, as git does: each directory's `.gitignore`
//! above its parents', then `info/exclude` and `core.excludesFile`. Each file is held to a size,
//! all of them together to another, and a bracket form git and the matcher read differently
//! denies: a rule dropped or misread could show or hide a file.

use std::path::Path;
use std::sync::Arc;

use crate::error;
use crate::error::{Error, Result};
use crate::sys::files::read_regular;
use crate::sys::paths;

/// The largest ignore file read, and all of them together: past this they deny.
const MAX_IGNORE_FILE: u64 = 1 << 20;
const MAX_IGNORE_TOTAL: u64 = 8 << 20;

/// The ignore rules that hold in a directory: its own `.gitignore`, then its parents'.
pub(super) struct Rules {
    pub(super) here: Option<ignore::gitignore::Gitignore>,
    pub(super) parent: Option<Arc<Rules>>,
}

/// The rules of one ignore file, matched against paths from the top (`base` is the directory
/// the file stands in). Held to `MAX_IGNORE_FILE` each and `MAX_IGNORE_TOTAL` together, and to
/// UTF-8 (the matcher's patterns are text): past either, or unreadable, it denies, since a rule
/// dropped could show or hide a file. `None` when there is no such file.
pub(super) fn ignore_rules(
    file: &Path,
    base: &[u8],
    follow: bool,
    total: &std::sync::atomic::AtomicU64,
) -> Result<Option<ignore::gitignore::Gitignore>> {
    let denied = |why: String| {
        Error::input(format!(
            "cannot read the ignore rules in {}: {why}; the worktree subject needs every rule git would use",
            file.display()
        ))
    };
    let bytes = match read_regular(file, MAX_IGNORE_FILE, follow) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Ok(None),
        Err(e) => return Err(denied(error::plain_io(&e))),
    };
    let before = total.fetch_add(bytes.len() as u64, std::sync::atomic::Ordering::Relaxed);
    if before + bytes.len() as u64 > MAX_IGNORE_TOTAL {
        return Err(denied(format!(
            "the ignore files together hold over {MAX_IGNORE_TOTAL} bytes"
        )));
    }
    let text = std::str::from_utf8(&bytes)
        .map_err(|e| denied(format!("it is not UTF-8 at byte {}", e.valid_up_to())))?;
    let mut builder = ignore::gitignore::GitignoreBuilder::new(paths::os_str(base));
    for line in text.lines() {
        if unplain_brackets(line) {
            return Err(denied(format!(
                "the pattern `{line}` uses a bracket form that git and the matcher read differently (unclosed, escaped, `[]…]` or `[[:class:]]`); write it as a plain [abc], [a-z] or [!abc]"
            )));
        }
        // Git skips a pattern it cannot use; so does the matcher.
        let _ = builder.add_line(Some(file.to_path_buf()), line);
    }
    builder.build().map(Some).map_err(|e| denied(e.to_string()))
}

/// Whether a pattern holds a bracket expression other than a plain `[abc]`, `[a-z]` or
/// `[!abc]`: git's wildmatch and globset part ways on the others (an unclosed `[` is literal to
/// one and matches nothing in the other; escapes and classes inside brackets differ).
fn unplain_brackets(pattern: &str) -> bool {
    let bytes = pattern.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b'\\' => at += 2,
            b'[' => {
                let mut inside = at + 1;
                if matches!(bytes.get(inside), Some(b'!' | b'^')) {
                    inside += 1;
                }
                if bytes.get(inside) == Some(&b']') {
                    return true;
                }
                let Some(close) = bytes[inside..].iter().position(|b| *b == b']') else {
                    return true;
                };
                if bytes[inside..inside + close]
                    .iter()
                    .any(|b| matches!(b, b'\\' | b'['))
                {
                    return true;
                }
                at = inside + close + 1;
            }
            _ => at += 1,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_bracket_expressions_pass() {
        for plain in [
            "*.log",
            "[abc]",
            "[a-z]*.rs",
            "[!a]",
            "[^a]b[cd]",
            "\\[literal",
            "a]b",
        ] {
            assert!(!unplain_brackets(plain), "{plain}");
        }
        for unplain in [
            "[ab",
            "[a\\]]",
            "[]a]",
            "[!]a]",
            "[[:alpha:]]",
            "x[",
            "[a[b]",
        ] {
            assert!(unplain_brackets(unplain), "{unplain}");
        }
    }
}
