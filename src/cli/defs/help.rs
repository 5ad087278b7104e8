//! What the flag tables print: each `--help`'s options and a usage line's synopsis, from a
//! command's rows, and the flag reference (docs/flags.md), from a binary's whole table, with
//! what each rule asks of a value said in words.

use crate::cli::defs::{Rule, Scope, Table, of};

impl Rule {
    /// What a value must be, as the flag reference (docs/flags.md) says it.
    pub(crate) fn describe(&self) -> String {
        match self {
            Rule::None => "no value".into(),
            Rule::Int(min, max) => format!("a whole number, {min} to {max}"),
            Rule::Stall(min, max) => format!("0 (never), or {min} to {max}"),
            Rule::Duration {
                at_least_a_second: false,
            } => "a duration: 45s, 30m, 24h, 7d".into(),
            Rule::Duration {
                at_least_a_second: true,
            } => "a duration of 1s or more: 45s, 30m, 24h, 7d".into(),
            Rule::Tokens => "tokens, 1 or more: 500000, 500k, 2m".into(),
            Rule::Size => "bytes, or with K, M, G, T: 512M".into(),
            Rule::Command => "a shell command".into(),
            Rule::Marker => "a check name, then `=CMD` if you like".into(),
            Rule::Contract => "a JSON Schema file, or `default`".into(),
            Rule::Remote => "a git remote: a name or a URL".into(),
            Rule::Text => "text".into(),
            Rule::Path => "a path".into(),
            Rule::Absolute => "an absolute directory".into(),
            Rule::Choice(choices) => choices
                .iter()
                .map(|c| format!("`{c}`"))
                .collect::<Vec<_>>()
                .join(" or "),
        }
    }
}

/// The flag reference (docs/flags.md) for one binary: every flag of its table, where it is taken, what
/// it takes and what it does, as a Markdown table (a test keeps docs/flags.md's copy the same).
pub fn reference(table: &Table) -> String {
    let cell = |text: &str| {
        text.replace('|', "\\|")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    let shown = |word: &str| match (table.binary, word) {
        ("stop-gate", "hook") => "the hook".to_string(),
        ("stop-gate", "start") => "`loop start`".to_string(),
        ("stop-gate", "run") => "`loop run`".to_string(),
        ("stop-gate", "install") => "install".to_string(),
        (_, word) => format!("`{word}`"),
    };
    let mut text = String::from("| flag | taken by | value | what it does |\n|---|---|---|---|\n");
    for flag in table.all() {
        let help = flag.help.or(flag.loop_help).unwrap_or("");
        let scopes: Vec<String> = flag.scope_words().map(shown).collect();
        text.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            cell(&flag.usage()),
            scopes.join(", "),
            cell(&flag.rule.describe()),
            cell(help)
        ));
    }
    text
}

/// A command's `--help`: its head, its options from the table, `-h, --help`, then its tail.
pub(crate) fn help_with_options(head: &str, scope: Scope, tail: &str) -> String {
    format!(
        "{head}{}{}{tail}",
        options(scope, false),
        entry("-h, --help", "this text")
    )
}

/// Help lines for the flags of `scope` (`loop --help`'s text with `loop_help`), each flag at
/// two spaces, its text from column 28, wrapped before column 97.
pub(crate) fn options(scope: Scope, loop_help: bool) -> String {
    let mut text = String::new();
    for flag in of(scope) {
        let help = if loop_help { flag.loop_help } else { flag.help };
        if let Some(help) = help {
            text.push_str(&entry(&flag.usage(), help));
        }
    }
    text
}

/// The flags of `scope` as a usage line shows them, each in brackets: `[--give-up SECS]
/// [--poll-ms MS]`.
pub(crate) fn synopsis(scope: Scope) -> String {
    of(scope)
        .map(|flag| format!("[{}]", flag.usage()))
        .collect::<Vec<_>>()
        .join(" ")
}

const HELP_COLUMN: usize = 28;
const HELP_WIDTH: usize = 96;

/// One flag's help: `  --flag VALUE` then its text, wrapped at word breaks.
pub(crate) fn entry(usage: &str, help: &str) -> String {
    let mut text = format!("  {usage}");
    if text.len() + 1 > HELP_COLUMN {
        text.push('\n');
        text.push_str(&" ".repeat(HELP_COLUMN));
    } else {
        text.push_str(&" ".repeat(HELP_COLUMN - text.len()));
    }
    let mut width = HELP_COLUMN;
    for (i, word) in help.split(' ').enumerate() {
        if i > 0 && width + 1 + word.len() > HELP_WIDTH {
            text.push('\n');
            text.push_str(&" ".repeat(HELP_COLUMN));
            width = HELP_COLUMN;
        } else if i > 0 {
            text.push(' ');
            width += 1;
        }
        text.push_str(word);
        width += word.chars().count();
    }
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_help_wraps_under_its_column() {
        let text = entry("--require-marker CHECK[=CMD]", &"word ".repeat(40));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "  --require-marker CHECK[=CMD]");
        assert!(lines[1..].iter().all(|l| l.starts_with(&" ".repeat(28))));
        assert!(lines.iter().all(|l| l.len() <= HELP_WIDTH), "{text}");
    }
}
