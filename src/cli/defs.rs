//! stop-gate's flags, each defined once, in `stop-gate.flags` (tab-separated): its name, what it
//! takes, the rule a value must meet, where it is taken (the Stop hook, `loop start`, `loop run`,
//! the installer), an example, and its help. The hook's parser, `loop start`'s and `loop run`'s,
//! both `--help` texts, the installer's handler rewriting and `install.sh` (which checks a value
//! before it builds anything) all read it, so none of them can know a flag the others do not.

use std::sync::OnceLock;

/// The table, as the binaries carry it.
pub const TABLE: &str = include_str!("stop-gate.flags");

/// Where a flag is taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The Stop hook: `stop-gate [FLAGS] < hook JSON`.
    Hook,
    /// `stop-gate loop start`, and `/vigil-loop`.
    Start,
    /// `stop-gate loop run`.
    Run,
    /// `install.sh` and `settings-merge install`, which write it into the Stop handler.
    Install,
}

impl Scope {
    fn word(self) -> &'static str {
        match self {
            Scope::Hook => "hook",
            Scope::Start => "start",
            Scope::Run => "run",
            Scope::Install => "install",
        }
    }
}

/// One row of the table.
#[derive(Debug)]
pub struct Flag {
    /// `--run`.
    pub name: &'static str,
    /// What it takes (`CMD`); `None` for a flag that stands alone.
    pub value: Option<&'static str>,
    /// What a value must be: `int:MIN:MAX`, `duration`, `enum:A:B`, … (`install.sh` checks it).
    pub rule: &'static str,
    scopes: &'static str,
    /// A value it takes.
    pub example: Option<&'static str>,
    /// The hook's `--help` line (the installer's, for a flag only it takes).
    pub help: Option<&'static str>,
    /// `loop --help`'s line.
    pub loop_help: Option<&'static str>,
}

impl Flag {
    pub fn in_scope(&self, scope: Scope) -> bool {
        self.scopes.split(',').any(|word| word == scope.word())
    }

    pub fn takes_value(&self) -> bool {
        self.value.is_some()
    }

    /// `--run CMD`, or `--subagents`.
    pub fn usage(&self) -> String {
        match self.value {
            Some(value) => format!("{} {value}", self.name),
            None => self.name.to_string(),
        }
    }
}

/// Every flag, in the table's order.
pub fn all() -> &'static [Flag] {
    static FLAGS: OnceLock<Vec<Flag>> = OnceLock::new();
    FLAGS.get_or_init(|| {
        TABLE
            .lines()
            .filter(|line| !line.is_empty() && !line.starts_with('#'))
            .filter_map(|line| {
                // A row without its 7 fields is no flag (a test keeps there being none): a
                // panic here would come before the gate's watchdog, and let a stop through.
                let fields: Vec<&'static str> = line.split('\t').collect();
                let [name, value, rule, scopes, example, help, loop_help] = fields[..] else {
                    return None;
                };
                let given = |field: &'static str| (field != "-").then_some(field);
                Some(Flag {
                    name,
                    value: given(value),
                    rule,
                    scopes,
                    example: given(example),
                    help: given(help),
                    loop_help: given(loop_help),
                })
            })
            .collect()
    })
}

/// The flags taken in `scope`.
pub fn of(scope: Scope) -> impl Iterator<Item = &'static Flag> {
    all().iter().filter(move |flag| flag.in_scope(scope))
}

/// The flag `name` (`--run`) if `scope` takes it.
pub fn find(scope: Scope, name: &str) -> Option<&'static Flag> {
    of(scope).find(|flag| flag.name == name)
}

/// The flag `--long` if `scope` takes it, as lexopt names it (`long` without its dashes).
pub fn find_long(scope: Scope, long: &str) -> Option<&'static Flag> {
    of(scope).find(|flag| flag.name.strip_prefix("--") == Some(long))
}

/// The names of the flags `scope` takes with a value, in the table's order.
pub fn valued(scope: Scope) -> Vec<&'static str> {
    of(scope)
        .filter(|flag| flag.takes_value())
        .map(|flag| flag.name)
        .collect()
}

/// Help lines for the flags of `scope` (`loop --help`'s text with `loop_help`), each flag at
/// two spaces, its text from column 28, wrapped before column 97.
pub fn options(scope: Scope, loop_help: bool) -> String {
    let mut text = String::new();
    for flag in of(scope) {
        let help = if loop_help { flag.loop_help } else { flag.help };
        if let Some(help) = help {
            text.push_str(&entry(&flag.usage(), help));
        }
    }
    text
}

const HELP_COLUMN: usize = 28;
const HELP_WIDTH: usize = 96;

/// One flag's help: `  --flag VALUE` then its text, wrapped at word breaks.
pub fn entry(usage: &str, help: &str) -> String {
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
    fn every_row_has_its_fields_a_known_scope_and_a_rule() {
        let rows = TABLE
            .lines()
            .filter(|line| !line.is_empty() && !line.starts_with('#'))
            .count();
        assert_eq!(
            all().len(),
            rows,
            "a row of stop-gate.flags without its 7 fields"
        );
        let scopes = ["hook", "start", "run", "install"];
        for flag in all() {
            assert!(flag.name.starts_with("--"), "{flag:?}");
            assert!(
                flag.scopes.split(',').all(|s| scopes.contains(&s)),
                "{flag:?}"
            );
            assert_eq!(flag.takes_value(), flag.rule != "-", "{flag:?}");
            // The rules install.sh knows, numbers where it reads numbers.
            let parts: Vec<&str> = flag.rule.split(':').collect();
            let known = match parts[..] {
                ["int" | "stall", min, max] => {
                    min.parse::<u64>().is_ok() && max.parse::<u64>().is_ok()
                }
                ["enum", ..] => parts.len() > 2 && parts[1..].iter().all(|c| !c.is_empty()),
                ["duration", "1"] => true,
                [kind] => matches!(
                    kind,
                    "-" | "command"
                        | "duration"
                        | "tokens"
                        | "marker"
                        | "check"
                        | "contract"
                        | "remote"
                        | "text"
                        | "path"
                        | "absolute"
                        | "size"
                ),
                _ => false,
            };
            assert!(known, "a rule install.sh does not know: {flag:?}");
            assert_eq!(flag.takes_value(), flag.example.is_some(), "{flag:?}");
        }
        let mut names: Vec<&str> = all().iter().map(|f| f.name).collect();
        names.sort();
        let count = names.len();
        names.dedup();
        assert_eq!(names.len(), count, "a flag defined twice");
    }

    #[test]
    fn a_long_help_wraps_under_its_column() {
        let text = entry("--require-marker CHECK[=CMD]", &"word ".repeat(40));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "  --require-marker CHECK[=CMD]");
        assert!(lines[1..].iter().all(|l| l.starts_with(&" ".repeat(28))));
        assert!(lines.iter().all(|l| l.len() <= HELP_WIDTH), "{text}");
    }
}
