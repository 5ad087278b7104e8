//! Every binary's flags, each defined once, in a table per binary (`<binary>.flags`,
//! tab-separated): the flag, what it takes, the rule a value must meet, where it is taken (the
//! binary's commands: stop-gate's hook, `loop start`, `loop run`, `wait`, the installer;
//! marker-writer's `run`, `verify`, …), an example, and its help. The parsers read a command
//! line against it (`Args`) and check each value by its rule, each `--help` prints its options
//! from it, the flag reference (docs/flags.md) is made from it, and `install.sh` reads
//! stop-gate's to check a value before it builds anything, so none of them can know a flag the
//! others do not.
//! A flag may have a row per command where its meaning differs (marker-writer's `--timeout`).
//! What the tables print (help, synopses, the flag reference) is `help`.

mod help;

pub use help::reference;
pub(crate) use help::{entry, help_with_options, options, synopsis};

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use crate::cli::flags;
use crate::error::{Error, Result};
use crate::sys::time;

/// One binary's table, as the binaries carry it.
pub struct Table {
    /// The binary.
    pub binary: &'static str,
    text: &'static str,
    rows: OnceLock<Vec<Flag>>,
}

impl Table {
    const fn new(binary: &'static str, text: &'static str) -> Table {
        Table {
            binary,
            text,
            rows: OnceLock::new(),
        }
    }

    /// Every row, in the table's order.
    pub fn all(&self) -> &[Flag] {
        self.rows.get_or_init(|| rows(self.text))
    }

    /// The table's text, as its file has it.
    #[cfg(test)]
    fn text(&self) -> &'static str {
        self.text
    }

    /// The commands its rows name, in the order they first appear.
    pub fn scopes(&self) -> Vec<&'static str> {
        let mut words: Vec<&'static str> = Vec::new();
        for flag in self.all() {
            for word in flag.scopes.split(',') {
                if !words.contains(&word) {
                    words.push(word);
                }
            }
        }
        words
    }
}

/// Every binary's table.
pub static TABLES: [Table; 6] = [
    Table::new("stop-gate", include_str!("stop-gate.flags")),
    Table::new("marker-writer", include_str!("marker-writer.flags")),
    Table::new("settings-merge", include_str!("settings-merge.flags")),
    Table::new("promise-matcher", include_str!("promise-matcher.flags")),
    Table::new(
        "session-start-loader",
        include_str!("session-start-loader.flags"),
    ),
    Table::new(
        "session-end-handoff",
        include_str!("session-end-handoff.flags"),
    ),
];

/// Where a flag is taken: a command of one binary (`stop-gate`'s `hook`, `marker-writer`'s
/// `run`), as its table's `scopes` column names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scope {
    pub binary: &'static str,
    pub word: &'static str,
}

#[allow(non_upper_case_globals)]
impl Scope {
    /// The Stop hook: `stop-gate [FLAGS] < hook JSON`.
    pub const Hook: Scope = Scope::of("stop-gate", "hook");
    /// `stop-gate loop start`, and `/vigil-loop`.
    pub const Start: Scope = Scope::of("stop-gate", "start");
    /// `stop-gate loop run`.
    pub const Run: Scope = Scope::of("stop-gate", "run");
    /// `install.sh` and `settings-merge install`, which write it into the Stop handler.
    pub const Install: Scope = Scope::of("stop-gate", "install");
    /// `stop-gate wait`, the waiter.
    pub const Wait: Scope = Scope::of("stop-gate", "wait");

    /// The command `word` of `binary`.
    pub const fn of(binary: &'static str, word: &'static str) -> Scope {
        Scope { binary, word }
    }

    /// The binary's table.
    pub(crate) fn table(self) -> &'static Table {
        TABLES
            .iter()
            .find(|table| table.binary == self.binary)
            .unwrap_or(&TABLES[0])
    }
}

/// What a flag's value must be: the table's `rule` column, read. `install.sh`'s `check_value`
/// implements the same rules for the flags it takes, with the same messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Rule {
    /// `-`: the flag takes no value.
    None,
    /// `int:MIN:MAX`: a whole number from MIN to MAX.
    Int(u64, u64),
    /// `stall:MIN:MAX`: 0 (never), or a whole number of passes from MIN to MAX.
    Stall(u64, u64),
    /// `duration` (`45s`, `30m`, `24h`, `7d`); `duration:1`, of a second or more.
    Duration { at_least_a_second: bool },
    /// `tokens`: a whole number of tokens, 1 or more (`500000`, `500k`, `2m`).
    Tokens,
    /// `size`: bytes, or a whole number and K, M, G or T.
    Size,
    /// `command`: a shell command, not blank.
    Command,
    /// `marker`: `CHECK[=CMD]` (the gate reads the check's name).
    Marker,
    /// `contract`: a JSON Schema file, or `default`.
    Contract,
    /// `remote`: a git remote's name or URL.
    Remote,
    /// `text`: any UTF-8 text.
    Text,
    /// `path`: a path, as the system spells it (not necessarily UTF-8).
    Path,
    /// `absolute`: an absolute directory.
    Absolute,
    /// `enum:A:B…`: one of these words.
    Choice(Vec<&'static str>),
}

impl Rule {
    /// The rule a `rule` cell spells; `None` for one no parser knows.
    pub(crate) fn parse(cell: &'static str) -> Option<Rule> {
        let parts: Vec<&'static str> = cell.split(':').collect();
        let number = |text: &str| text.parse::<u64>().ok();
        Some(match parts[..] {
            ["-"] => Rule::None,
            ["int", min, max] => Rule::Int(number(min)?, number(max)?),
            ["stall", min, max] => Rule::Stall(number(min)?, number(max)?),
            ["duration"] => Rule::Duration {
                at_least_a_second: false,
            },
            ["duration", "1"] => Rule::Duration {
                at_least_a_second: true,
            },
            ["tokens"] => Rule::Tokens,
            ["size"] => Rule::Size,
            ["command"] => Rule::Command,
            ["marker"] => Rule::Marker,
            ["contract"] => Rule::Contract,
            ["remote"] => Rule::Remote,
            ["text"] => Rule::Text,
            ["path"] => Rule::Path,
            ["absolute"] => Rule::Absolute,
            ["enum", ..] if parts.len() > 2 && parts[1..].iter().all(|c| !c.is_empty()) => {
                Rule::Choice(parts[1..].to_vec())
            }
            _ => return None,
        })
    }
}

/// One row of the table.
#[derive(Debug)]
pub struct Flag {
    /// `--run`.
    pub name: &'static str,
    /// What it takes (`CMD`); `None` for a flag that stands alone.
    pub value: Option<&'static str>,
    /// What a value must be.
    pub(crate) rule: Rule,
    scopes: &'static str,
    /// A value it takes.
    pub example: Option<&'static str>,
    /// The hook's `--help` line (the installer's, for a flag only it takes).
    pub help: Option<&'static str>,
    /// `loop --help`'s line.
    pub loop_help: Option<&'static str>,
}

impl Flag {
    /// Whether `scope` takes it (of the flags of `scope`'s binary).
    pub fn in_scope(&self, scope: Scope) -> bool {
        self.scopes.split(',').any(|word| word == scope.word)
    }

    /// The commands that take it, as its row names them.
    pub(crate) fn scope_words(&self) -> impl Iterator<Item = &'static str> {
        self.scopes.split(',')
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

    /// An error naming this flag.
    fn refused(&self, why: String) -> Error {
        Error::usage(format!("{} {why}", self.name))
    }

    /// A rule this flag does not have, asked of it: the parser and the table disagree.
    fn not_its_rule(&self, asked: &str) -> Error {
        Error::usage(format!(
            "{} is read as {asked}, but the flag table gives it {:?} (a bug: please report it)",
            self.name, self.rule
        ))
    }

    /// A flag of the table that a parser of its scope does not read: a bug, said as an error.
    pub(crate) fn unread(&self) -> Error {
        Error::usage(format!(
            "{} is in the flag table, but this command does not read it (a bug: please report it)",
            self.name
        ))
    }

    /// The value as a whole number its rule allows (`int`, `stall`).
    pub(crate) fn number(&self, text: &str) -> Result<u64> {
        let n = text.parse::<u64>().ok();
        match self.rule {
            Rule::Int(min, max) => match n {
                Some(n) if (min..=max).contains(&n) => Ok(n),
                _ => Err(self.refused(format!(
                    "takes a whole number from {min} to {max}, not {text:?}"
                ))),
            },
            Rule::Stall(min, max) => match n {
                Some(n) if n == 0 || (min..=max).contains(&n) => Ok(n),
                _ => Err(self.refused(format!(
                    "takes 0 (never) or a whole number of passes from {min} to {max}, not {text:?}: it counts the same message on that many passes in a row"
                ))),
            },
            _ => Err(self.not_its_rule("a number")),
        }
    }

    /// The value as a duration (`duration`, `duration:1`).
    pub(crate) fn duration(&self, text: &str) -> Result<Duration> {
        let Rule::Duration { at_least_a_second } = self.rule else {
            return Err(self.not_its_rule("a duration"));
        };
        let duration =
            time::parse_duration(text).map_err(|e| Error::usage(format!("{}: {e}", self.name)))?;
        if at_least_a_second && duration < Duration::from_secs(1) {
            return Err(self.refused(format!(
                "takes a duration of a second or more (45s, 30m, 2h, 7d), not {text:?}"
            )));
        }
        Ok(duration)
    }

    /// The value as a number of tokens, 1 or more (`500000`, `500k`, `2m`).
    pub(crate) fn tokens(&self, text: &str) -> Result<u64> {
        if self.rule != Rule::Tokens {
            return Err(self.not_its_rule("tokens"));
        }
        let (digits, scale) = match text.as_bytes().last() {
            Some(b'k' | b'K') => (&text[..text.len() - 1], 1_000),
            Some(b'm' | b'M') => (&text[..text.len() - 1], 1_000_000),
            _ => (text, 1),
        };
        match digits
            .parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(scale))
        {
            Some(n) if n > 0 => Ok(n),
            _ => Err(self.refused(format!(
                "takes a whole number of tokens (500000, 500k, 2m), not {text:?}"
            ))),
        }
    }

    /// The value as a size in bytes.
    pub(crate) fn size(&self, text: &str) -> Result<u64> {
        if self.rule != Rule::Size {
            return Err(self.not_its_rule("a size"));
        }
        flags::size(text).map_err(|e| Error::usage(format!("{}: {e}", self.name)))
    }

    /// The value as one of its rule's words.
    pub(crate) fn choice(&self, text: &str) -> Result<&'static str> {
        let Rule::Choice(choices) = &self.rule else {
            return Err(self.not_its_rule("a choice"));
        };
        choices
            .iter()
            .find(|choice| **choice == text)
            .copied()
            .ok_or_else(|| {
                let (last, rest) = choices.split_last().unwrap_or((&"", &[]));
                let listed = match rest {
                    [] => last.to_string(),
                    [one] => format!("{one} or {last}"),
                    _ => format!("one of {}, or {last}", rest.join(", ")),
                };
                self.refused(format!("is {listed}, not {text:?}"))
            })
    }

    /// The value as a command that is not blank.
    pub(crate) fn command(&self, text: &str) -> Result<String> {
        if self.rule != Rule::Command {
            return Err(self.not_its_rule("a command"));
        }
        if text.trim().is_empty() {
            return Err(self.refused("needs a command".into()));
        }
        Ok(text.to_string())
    }

    /// The value as an absolute directory.
    pub(crate) fn absolute(&self, value: OsString) -> Result<PathBuf> {
        if self.rule != Rule::Absolute {
            return Err(self.not_its_rule("an absolute directory"));
        }
        let dir = PathBuf::from(value);
        if !dir.is_absolute() {
            return Err(self.refused(format!(
                "needs an absolute directory, not {}",
                dir.display()
            )));
        }
        Ok(dir)
    }

    /// The value as a git remote: a name or a URL, never something read as a flag.
    pub(crate) fn remote(&self, text: &str) -> Result<String> {
        if self.rule != Rule::Remote {
            return Err(self.not_its_rule("a remote"));
        }
        if text.is_empty() || text.starts_with('-') {
            return Err(self.refused("needs a remote: a name (origin) or a URL".into()));
        }
        Ok(text.to_string())
    }

    /// The value as text: UTF-8, which a path need not be.
    pub(crate) fn text(&self, value: OsString) -> Result<String> {
        value
            .into_string()
            .map_err(|_| Error::usage(format!("the value of {} is not valid UTF-8", self.name)))
    }
}

/// The flag `name` of `scope`, which a parser names: one the table does not give the scope is
/// a bug, said as an error rather than a panic (a gate that panics lets the stop through).
pub(crate) fn flag(scope: Scope, name: &str) -> Result<&'static Flag> {
    find(scope, name).ok_or_else(|| {
        Error::usage(format!(
            "{name} is not in {}'s flag table for {} (a bug: please report it)",
            scope.binary, scope.word
        ))
    })
}

/// A command line read against a table: each flag `scope` takes, with its value when it takes
/// one, and the other arguments as they come. Anything else is an error naming it.
pub(crate) struct Args {
    parser: lexopt::Parser,
    scopes: Vec<Scope>,
}

impl Args {
    pub(crate) fn new(args: Vec<OsString>, scope: Scope) -> Args {
        Args::in_scopes(args, &[scope])
    }

    /// A command line whose flags are those of any of `scopes`, the first that has it.
    pub(crate) fn in_scopes(args: Vec<OsString>, scopes: &[Scope]) -> Args {
        Args {
            parser: lexopt::Parser::from_args(args),
            scopes: scopes.to_vec(),
        }
    }

    /// The next flag and its value; `Ok(None)` at the end. Its errors are lexopt's (an
    /// unknown flag, a missing value), for a parser that says them its own way.
    #[allow(clippy::should_implement_trait)]
    pub(crate) fn next(&mut self) -> std::result::Result<Option<Given>, lexopt::Error> {
        use lexopt::prelude::*;
        let Some(arg) = self.parser.next()? else {
            return Ok(None);
        };
        let flag = match arg {
            Short('h') | Long("help") => return Ok(Some(Given::Help)),
            Long(name) => match self.scopes.iter().find_map(|s| find_long(*s, name)) {
                Some(flag) => flag,
                None => return Err(arg.unexpected()),
            },
            Value(value) => return Ok(Some(Given::Value(value))),
            _ => return Err(arg.unexpected()),
        };
        let value = match flag.takes_value() {
            true => Some(self.parser.value()?),
            false => None,
        };
        Ok(Some(Given::Flag(flag, value)))
    }

    /// The arguments after `--`, or after the first that is not a flag: all that is left.
    pub(crate) fn rest(&mut self) -> Result<Vec<OsString>> {
        Ok(self.parser.raw_args()?.collect())
    }
}

/// One argument of a command line, as [`Args`] reads it.
pub(crate) enum Given {
    /// `-h` or `--help`.
    Help,
    /// A flag of the table, with its value when it takes one.
    Flag(&'static Flag, Option<OsString>),
    /// An argument that is no flag (a file, a subcommand's operand).
    Value(OsString),
}

impl Given {
    /// For a command that takes flags alone: the flag and its value (empty for one that takes
    /// none); `None` for `--help`; an error for any other argument.
    pub(crate) fn flag_only(self) -> Result<Option<(&'static Flag, OsString)>> {
        match self {
            Given::Help => Ok(None),
            Given::Flag(flag, value) => Ok(Some((flag, value.unwrap_or_default()))),
            Given::Value(value) => Err(unexpected(value)),
        }
    }
}

/// An argument no command of this kind takes, as lexopt says it.
pub(crate) fn unexpected(value: OsString) -> Error {
    lexopt::Error::UnexpectedArgument(value).into()
}

/// Every flag of stop-gate, in its table's order.
pub fn all() -> &'static [Flag] {
    TABLES[0].all()
}

/// The rows of a table's text.
fn rows(text: &'static str) -> Vec<Flag> {
    text.lines()
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .filter_map(|line| {
            // A row without its 7 fields is no flag (a test keeps there being none): a panic
            // here would come before the gate's watchdog, and let a stop through.
            let fields: Vec<&'static str> = line.split('\t').collect();
            let [name, value, rule, scopes, example, help, loop_help] = fields[..] else {
                return None;
            };
            let given = |field: &'static str| (field != "-").then_some(field);
            Some(Flag {
                name,
                value: given(value),
                rule: Rule::parse(rule)?,
                scopes,
                example: given(example),
                help: given(help),
                loop_help: given(loop_help),
            })
        })
        .collect()
}

/// The flags taken in `scope`.
pub fn of(scope: Scope) -> impl Iterator<Item = &'static Flag> {
    scope
        .table()
        .all()
        .iter()
        .filter(move |flag| flag.in_scope(scope))
}

/// Every row of `binary`'s table.
pub(crate) fn of_binary(binary: &'static str) -> impl Iterator<Item = &'static Flag> {
    Scope::of(binary, "").table().all().iter()
}

/// The flag `name` (`--run`) if `scope` takes it.
pub fn find(scope: Scope, name: &str) -> Option<&'static Flag> {
    of(scope).find(|flag| flag.name == name)
}

/// The flag `--long` if `scope` takes it, as lexopt names it (`long` without its dashes).
pub(crate) fn find_long(scope: Scope, long: &str) -> Option<&'static Flag> {
    of(scope).find(|flag| flag.name.strip_prefix("--") == Some(long))
}

/// The names of the flags `scope` takes with a value, in the table's order.
pub(crate) fn valued(scope: Scope) -> Vec<&'static str> {
    of(scope)
        .filter(|flag| flag.takes_value())
        .map(|flag| flag.name)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_has_its_fields_a_known_scope_and_a_rule() {
        for table in &TABLES {
            let rows = table
                .text()
                .lines()
                .filter(|line| !line.is_empty() && !line.starts_with('#'))
                .count();
            assert_eq!(
                table.all().len(),
                rows,
                "a row of {}.flags without its 7 fields, or with a rule no parser knows",
                table.binary
            );
            for flag in table.all() {
                assert!(flag.name.starts_with("--"), "{flag:?}");
                assert_eq!(flag.takes_value(), flag.rule != Rule::None, "{flag:?}");
                assert_eq!(flag.takes_value(), flag.example.is_some(), "{flag:?}");
                assert!(
                    flag.help.or(flag.loop_help).is_some(),
                    "{flag:?} has no help"
                );
            }
        }
        let scopes = [
            "hook",
            "start",
            "run",
            "install",
            "wait",
            "status",
            "list",
            "cancel",
            "hold-add",
            "hold-refresh",
            "hold-show",
            "hold-diff",
            "hold-release",
            "hold-baseline",
        ];
        for flag in all() {
            assert!(flag.name.starts_with("--"), "{flag:?}");
            assert!(
                flag.scopes.split(',').all(|s| scopes.contains(&s)),
                "{flag:?}"
            );
            assert_eq!(flag.takes_value(), flag.rule != Rule::None, "{flag:?}");
            assert_eq!(flag.takes_value(), flag.example.is_some(), "{flag:?}");
        }
        for table in &TABLES {
            let mut taken: Vec<(&str, &str)> = table
                .all()
                .iter()
                .flat_map(|f| f.scope_words().map(move |w| (f.name, w)))
                .collect();
            taken.sort();
            let count = taken.len();
            taken.dedup();
            assert_eq!(
                taken.len(),
                count,
                "a flag defined twice for one command of {}",
                table.binary
            );
        }
    }
}
