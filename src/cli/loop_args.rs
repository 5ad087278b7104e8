//! `loop start`'s arguments (SPEC §4), as a terminal gives them and as the human's
//! `/vigil-loop` types them: flags before the prompt and after it, `--flag value` or
//! `--flag=value`, `--` ending them; each flag is one the table (`defs`) gives `loop start`.
//! What they ask for is checked, by the same table's rules, where the loop begins
//! (`state::loops::begin`).

use std::path::PathBuf;

use crate::cli::defs;
use crate::cli::defs::{Flag, Scope};
use crate::error::{Error, Result};

/// What `loop start` was asked for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct StartRequest {
    pub max_iterations: Option<String>,
    pub completion_promise: Option<String>,
    pub session: Option<String>,
    pub next_session: bool,
    pub claim_within: Option<String>,
    pub prompt_file: Option<PathBuf>,
    pub state_dir: Option<PathBuf>,
    pub prompt: Option<String>,
    pub help: bool,
    pub stall_after: Option<String>,
    pub max_duration: Option<String>,
    pub max_tokens: Option<String>,
    pub name: Option<String>,
    pub notify: Option<String>,
}

impl StartRequest {
    /// Fills what this request leaves unsaid from `defaults` (the command-line flags that came
    /// with `--args-stdin`); an empty `--session` counts as unsaid.
    pub(crate) fn merge_defaults(&mut self, defaults: StartRequest) {
        let present = |v: &Option<String>| v.as_deref().is_some_and(|s| !s.is_empty());
        if !present(&self.session) && present(&defaults.session) {
            self.session = defaults.session;
        }
        self.max_iterations = self.max_iterations.take().or(defaults.max_iterations);
        self.completion_promise = self
            .completion_promise
            .take()
            .or(defaults.completion_promise);
        self.claim_within = self.claim_within.take().or(defaults.claim_within);
        self.stall_after = self.stall_after.take().or(defaults.stall_after);
        self.max_duration = self.max_duration.take().or(defaults.max_duration);
        self.max_tokens = self.max_tokens.take().or(defaults.max_tokens);
        self.name = self.name.take().or(defaults.name);
        self.notify = self.notify.take().or(defaults.notify);
        self.prompt_file = self.prompt_file.take().or(defaults.prompt_file);
        self.state_dir = self.state_dir.take().or(defaults.state_dir);
        self.next_session |= defaults.next_session;
        self.help |= defaults.help;
    }
}

/// A word of the arguments: its text (outer quotes removed) and where it stood in raw text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Word {
    pub text: String,
    pub span: Option<(usize, usize)>,
    quoted: bool,
}

impl Word {
    pub(crate) fn plain(text: &str) -> Word {
        Word {
            text: text.to_string(),
            span: None,
            quoted: false,
        }
    }
}

/// Splits raw argument text into words without a shell: whitespace separates words; a word
/// that opens with `"` or `'` runs to the matching quote (an apostrophe inside a word, as in
/// `don't`, is just a letter); nothing is expanded.
pub(crate) fn split_words(raw: &str) -> Vec<Word> {
    let bytes = raw.as_bytes();
    let mut words = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        if let Some(end) = quoted_end(raw, i) {
            words.push(Word {
                text: raw[i + 1..end - 1].to_string(),
                span: Some((start, end)),
                quoted: true,
            });
            i = end;
            continue;
        }
        let mut text = String::new();
        while i < bytes.len() && !bytes[i].is_ascii_whitespace() {
            // `--flag="a b"`: a quoted value after `=` runs to its closing quote.
            if bytes[i] == b'='
                && raw[start..].starts_with("--")
                && let Some(end) = quoted_end(raw, i + 1)
            {
                text.push('=');
                text.push_str(&raw[i + 2..end - 1]);
                i = end;
                break;
            }
            let c = raw[i..].chars().next().unwrap_or(' ');
            text.push(c);
            i += c.len_utf8();
        }
        words.push(Word {
            text,
            span: Some((start, i)),
            quoted: false,
        });
    }
    words
}

/// When a quote opens at `at` and closes before whitespace or the end: the index after it.
fn quoted_end(raw: &str, at: usize) -> Option<usize> {
    let quote = *raw.as_bytes().get(at)?;
    if !matches!(quote, b'"' | b'\'') {
        return None;
    }
    let end = at + 1 + raw[at + 1..].find(char::from(quote))? + 1;
    (end == raw.len() || raw.as_bytes()[end].is_ascii_whitespace()).then_some(end)
}

/// How many of `args` are leading flags with their values (up to `--` or the first word
/// of the prompt).
pub(crate) fn leading_flags(args: &[String]) -> usize {
    let mut i = 0;
    while i < args.len() && is_flag_word(&args[i]) {
        let takes_value = !args[i].contains('=')
            && defs::find(Scope::Start, &args[i]).is_some_and(Flag::takes_value);
        i += if takes_value { 2 } else { 1 };
    }
    i.min(args.len())
}

/// `--name` or `--name=value`: two dashes and a letter (`---` and `--` are not flags).
fn is_flag_word(text: &str) -> bool {
    text.len() > 2 && text.starts_with("--") && text.as_bytes()[2].is_ascii_alphabetic()
}

/// Parses `loop start` words: flags before the prompt and after it, in `--flag value` or
/// `--flag=value` form; `--` ends the flags and everything after it is prompt. An unknown flag,
/// or one of ours inside the prompt, is an error: a flag is never swallowed into the prompt.
/// With `raw`, the prompt is cut from it verbatim; otherwise its words are joined by spaces.
pub(crate) fn parse_start(words: &[Word], raw: Option<&str>) -> Result<StartRequest> {
    let mut request = StartRequest::default();
    let mut i = 0;
    let mut end = words.len();
    // Leading flags.
    while i < end {
        let text = words[i].text.as_str();
        if text == "--" && !words[i].quoted {
            i += 1;
            break;
        }
        if words[i].quoted || !(is_flag_word(text) || (i == 0 && text == "-h")) {
            // A short flag where the flags are (`-n 3`): loop start has none but -h, and one
            // taken for the start of the prompt would be blamed on a flag after it.
            if !words[i].quoted && is_short_flag(text, words.get(i + 1).map(|w| w.text.as_str())) {
                return Err(Error::usage(format!(
                    "unknown flag {text} for `loop start`; its flags are long ones ({}, --next-session); to start the prompt with {text}, put -- before it",
                    defs::valued(Scope::Start).join(", ")
                )));
            }
            break;
        }
        i += take_flag(&mut request, &words[i..end])?;
    }
    // Trailing flags, unless `--` ended them.
    let ended = i > 0 && words[i - 1].text == "--";
    if !ended {
        loop {
            if end > i && !words[end - 1].quoted && is_flag_word(&words[end - 1].text) {
                take_flag(&mut request, &words[end - 1..end])?;
                end -= 1;
            } else if end >= i + 2
                && !words[end - 2].quoted
                && defs::find(Scope::Start, &words[end - 2].text).is_some_and(Flag::takes_value)
            {
                take_flag(&mut request, &words[end - 2..end])?;
                end -= 2;
            } else {
                break;
            }
        }
        if let Some(word) = words[i..end]
            .iter()
            .find(|w| !w.quoted && flag_name(&w.text).is_some())
        {
            return Err(Error::usage(format!(
                "{} stands inside the prompt: flags go before or after it; to keep it as text, quote it, put -- before the prompt, or use --prompt-file",
                word.text
            )));
        }
    }
    if i < end {
        let prompt = match (raw, words[i].span, words[end - 1].span) {
            (Some(raw), Some((start, _)), Some((_, stop))) => {
                if end - i == 1 && words[i].quoted {
                    words[i].text.clone()
                } else {
                    raw[start..stop].to_string()
                }
            }
            _ => words[i..end]
                .iter()
                .map(|w| w.text.as_str())
                .collect::<Vec<_>>()
                .join(" "),
        };
        request.prompt = Some(prompt);
    }
    Ok(request)
}

/// `-n 3`, `-m --completion-promise`: a dash and one letter, followed by a number or by a
/// flag, which reads as a short flag meant as one (`-fix the parser` or `-v output is wrong`
/// read as the prompt's own words, as they always did).
fn is_short_flag(text: &str, next: Option<&str>) -> bool {
    let bytes = text.as_bytes();
    let short = bytes.len() == 2 && bytes[0] == b'-' && bytes[1].is_ascii_alphabetic();
    let flag_like = |next: &str| {
        next.starts_with("--") || (!next.is_empty() && next.bytes().all(|b| b.is_ascii_digit()))
    };
    short && next.is_some_and(flag_like)
}

fn flag_name(text: &str) -> Option<&str> {
    let name = text.split_once('=').map_or(text, |(name, _)| name);
    is_flag_word(name).then_some(name)
}

/// Applies the flag at `words[0]`, returning how many words it used.
fn take_flag(request: &mut StartRequest, words: &[Word]) -> Result<usize> {
    let text = words[0].text.as_str();
    let (name, inline) = match text.split_once('=') {
        Some((name, value)) => (name, Some(value.to_string())),
        None => (text, None),
    };
    if name == "-h" || name == "--help" {
        request.help = true;
        return Ok(1);
    }
    if name == "--next-session" {
        if inline.is_some() {
            return Err(Error::usage("--next-session takes no value"));
        }
        request.next_session = true;
        return Ok(1);
    }
    if !defs::find(Scope::Start, name).is_some_and(Flag::takes_value) {
        let meant = match name {
            "--promise" | "--completion" | "--done" => Some("--completion-promise"),
            "--max" | "--iterations" | "--max-iteration" | "--max-passes" => {
                Some("--max-iterations")
            }
            "--prompt" | "--file" => Some("--prompt-file"),
            _ => None,
        };
        let hint = meant.map_or(String::new(), |m| format!(" (did you mean {m}?)"));
        return Err(Error::usage(format!(
            "unknown flag {name} for `loop start`{hint}; the flags are {} and --next-session",
            defs::valued(Scope::Start).join(", ")
        )));
    }
    let (value, used) = match inline {
        Some(value) => (value, 1),
        None => match words.get(1) {
            Some(word) => (word.text.clone(), 2),
            None => return Err(Error::usage(format!("{name} needs a value"))),
        },
    };
    let given_twice = || Error::usage(format!("{name} is given twice; give each flag once"));
    match name {
        "--prompt-file" | "--state-dir" => {
            let slot = if name == "--prompt-file" {
                &mut request.prompt_file
            } else {
                &mut request.state_dir
            };
            if slot.replace(PathBuf::from(value)).is_some() {
                return Err(given_twice());
            }
        }
        _ => {
            let slot = match name {
                "--max-iterations" => &mut request.max_iterations,
                "--completion-promise" => &mut request.completion_promise,
                "--session" => &mut request.session,
                "--stall-after" => &mut request.stall_after,
                "--max-duration" => &mut request.max_duration,
                "--max-tokens" => &mut request.max_tokens,
                "--name" => &mut request.name,
                "--notify" => &mut request.notify,
                _ => &mut request.claim_within,
            };
            if slot.replace(value).is_some() {
                return Err(given_twice());
            }
        }
    }
    Ok(used)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> StartRequest {
        parse_start(&split_words(text), Some(text)).unwrap()
    }

    #[test]
    fn leading_flags_in_both_forms_then_the_prompt_verbatim() {
        let r =
            raw("--max-iterations=5 --completion-promise 'ALL DONE' Fix it; don't stop $(x) \"q\"");
        assert_eq!(r.max_iterations.as_deref(), Some("5"));
        assert_eq!(r.completion_promise.as_deref(), Some("ALL DONE"));
        assert_eq!(r.prompt.as_deref(), Some("Fix it; don't stop $(x) \"q\""));
    }

    #[test]
    fn trailing_flags_as_ralph_users_write_them() {
        let r = raw("Fix the tests --max-iterations 5 --completion-promise=\"ALL TESTS PASS\"");
        assert_eq!(r.prompt.as_deref(), Some("Fix the tests"));
        assert_eq!(r.max_iterations.as_deref(), Some("5"));
        assert_eq!(r.completion_promise.as_deref(), Some("ALL TESTS PASS"));
    }

    #[test]
    fn a_single_quoted_prompt_loses_its_quotes() {
        assert_eq!(
            raw("--max-iterations 2 \"Fix it\"").prompt.as_deref(),
            Some("Fix it")
        );
    }

    #[test]
    fn multi_line_prompt_with_dashes_is_kept() {
        let text =
            "--max-iterations 3 --completion-promise DONE ---\ntitle: x\n---\nBody  with  spaces\n";
        assert_eq!(
            raw(text).prompt.as_deref(),
            Some("---\ntitle: x\n---\nBody  with  spaces")
        );
    }

    #[test]
    fn unknown_flags_and_our_flags_inside_the_prompt_are_refused() {
        let words = split_words("--max-iterations 3 --verbose Fix");
        assert!(
            parse_start(&words, None)
                .unwrap_err()
                .to_string()
                .contains("--verbose")
        );
        let text = "--max-iterations 3 Fix --completion-promise DONE it";
        assert!(
            parse_start(&split_words(text), Some(text))
                .unwrap_err()
                .to_string()
                .contains("inside the prompt")
        );
    }

    #[test]
    fn a_prompt_ending_in_dash_h_keeps_it() {
        assert_eq!(
            raw("--max-iterations 2 list files with ls -h")
                .prompt
                .as_deref(),
            Some("list files with ls -h")
        );
        assert!(raw("-h").help);
    }

    #[test]
    fn double_dash_ends_the_flags() {
        let text = "--max-iterations 3 -- --max-iterations is a flag";
        assert_eq!(
            raw(text).prompt.as_deref(),
            Some("--max-iterations is a flag")
        );
    }
}
