//! stop-gate's flags as the installer writes them into a Stop handler, and how a re-install
//! changes them: what it is told replaces or adds, what it is not told stays as the settings
//! file has it (read from the file itself, never from the install record, which the agent can
//! write), and a check goes only when asked (`--no-run`, `--no-require-marker`).

use std::ffi::OsString;

use crate::cli::defs;
use crate::cli::defs::{Flag, Scope};
use crate::cli::flags;
use crate::error::{Error, Result};
use crate::gate::GateConfig;

/// The flags of one stop-gate handler, in order: `(flag, value)`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct GateFlags {
    pub flags: Vec<(String, Option<String>)>,
}

/// What an install is told to change.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Changes {
    /// Flags to set, replacing the handler's own (`--run`, `--timeout`…), in order.
    pub set: Vec<(String, String)>,
    /// `--require-marker CHECK[=CMD]` to add (replacing one for the same check).
    pub markers: Vec<String>,
    /// `--no-require-marker CHECK`.
    pub unmark: Vec<String>,
    /// `--no-run`: the check command goes (and its `--timeout` with it).
    pub no_run: bool,
}

impl Changes {
    pub(crate) fn is_empty(&self) -> bool {
        *self == Changes::default()
    }
}

impl GateFlags {
    /// Reads a handler's arguments (as a shell splits them); `--flag=value` is taken too.
    pub(crate) fn read(words: &[String]) -> Result<GateFlags> {
        let mut flags = Vec::new();
        let mut words = words.iter();
        while let Some(word) = words.next() {
            if let Some((name, value)) = word.split_once('=')
                && defs::find(Scope::Hook, name).is_some_and(Flag::takes_value)
            {
                flags.push((name.to_string(), Some(value.to_string())));
            } else if defs::find(Scope::Hook, word).is_some_and(Flag::takes_value) {
                let value = words.next().ok_or_else(|| {
                    Error::usage(format!("the Stop handler's {word} has no value"))
                })?;
                flags.push((word.clone(), Some(value.clone())));
            } else {
                flags.push((word.clone(), None));
            }
        }
        Ok(GateFlags { flags })
    }

    fn value(&self, name: &str) -> Option<&str> {
        self.flags
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, v)| v.as_deref())
    }

    fn remove(&mut self, name: &str) {
        self.flags.retain(|(n, _)| n != name);
    }

    fn set(&mut self, name: &str, value: &str) {
        match self.flags.iter_mut().find(|(n, _)| n == name) {
            Some(slot) => slot.1 = Some(value.to_string()),
            None => self.flags.push((name.to_string(), Some(value.to_string()))),
        }
        // One value per flag: a second copy of it would be the one the gate reads.
        let mut seen = false;
        self.flags.retain(|(n, _)| {
            if n != name {
                return true;
            }
            let keep = !seen;
            seen = true;
            keep
        });
    }

    fn marker_check(value: &str) -> &str {
        value.split_once('=').map_or(value, |(check, _)| check)
    }

    /// These flags with `changes` applied. The result must be flags the gate accepts (checked
    /// with its own parser), else nothing is written. A new `--run` with no timeout or deadline
    /// of its own gets `--timeout 540` (the default `install` has always written).
    pub(crate) fn apply(&self, changes: &Changes) -> Result<GateFlags> {
        let mut next = self.clone();
        if changes.no_run {
            if changes.set.iter().any(|(n, _)| n == "--run") {
                return Err(Error::usage("--run and --no-run exclude each other"));
            }
            next.remove("--run");
            next.remove("--timeout");
        }
        let had_run = self.value("--run").is_some();
        for (name, value) in &changes.set {
            next.set(name, value);
        }
        if !had_run
            && next.value("--run").is_some()
            && next.value("--timeout").is_none()
            && next.value("--deadline").is_none()
        {
            next.set("--timeout", "540");
        }
        for check in &changes.unmark {
            let before = next.flags.len();
            next.flags
                .retain(|flag| required_check(flag) != Some(check.as_str()));
            if next.flags.len() == before {
                return Err(Error::usage(format!(
                    "--no-require-marker {check}: the Stop hook requires no marker {check}"
                )));
            }
        }
        for marker in &changes.markers {
            let check = Self::marker_check(marker);
            match next
                .flags
                .iter_mut()
                .find(|flag| required_check(flag) == Some(check))
            {
                Some(slot) => slot.1 = Some(marker.clone()),
                None => next
                    .flags
                    .push(("--require-marker".into(), Some(marker.clone()))),
            }
        }
        GateConfig::parse(next.words().into_iter().map(OsString::from).collect())
            .map_err(|e| Error::usage(format!("stop-gate would refuse these flags: {e}")))?;
        Ok(next)
    }

    /// Whether the gate checks subagents' stops (`--subagents`, or a `--contract`): then
    /// SubagentStop runs it too.
    pub(crate) fn gates_subagents(&self) -> bool {
        self.flags
            .iter()
            .any(|(n, _)| n == "--subagents" || n == "--contract")
    }

    /// The words, in order.
    pub(crate) fn words(&self) -> Vec<String> {
        let mut words = Vec::new();
        for (name, value) in &self.flags {
            words.push(name.clone());
            if let Some(value) = value {
                words.push(value.clone());
            }
        }
        words
    }

    /// The deadline the gate will keep (`--deadline`, else its default), in seconds.
    pub(crate) fn deadline(&self) -> Option<u64> {
        self.value("--deadline").and_then(|v| v.parse().ok())
    }

    pub(crate) fn has_run(&self) -> bool {
        self.value("--run").is_some()
    }

    /// The flags of `self` that come unchanged from `before` and that `changes` did not name:
    /// what an install keeps on the file's word, each shown as `--flag 'value'`.
    pub(crate) fn kept_from(&self, before: &GateFlags, changes: &Changes) -> Vec<String> {
        let set = |name: &str| changes.set.iter().any(|(n, _)| n == name);
        // A check's timeout goes with it: giving --run again vouches for its --timeout.
        let named = |flag: &(String, Option<String>)| {
            set(&flag.0)
                || (flag.0 == "--timeout" && set("--run"))
                || required_check(flag).is_some_and(|check| {
                    changes
                        .markers
                        .iter()
                        .any(|m| GateFlags::marker_check(m) == check)
                })
        };
        self.flags
            .iter()
            .filter(|flag| before.flags.contains(flag) && !named(flag))
            .map(shown)
            .collect()
    }

    /// What changed from `before` to `self`, a line each: `+ --run 'cargo test'`,
    /// `- --require-marker tests`, `~ --timeout 540 -> 300`.
    pub(crate) fn changes_from(&self, before: &GateFlags) -> Vec<String> {
        let mut lines = Vec::new();
        for flag in &before.flags {
            let same_key = |f: &&(String, Option<String>)| key(f) == key(flag);
            match self.flags.iter().find(same_key) {
                None => lines.push(format!("- {}", shown(flag))),
                Some(now) if now != flag => lines.push(format!(
                    "~ {} -> {}",
                    shown(flag),
                    now.1.as_deref().map(flags::shell_quote).unwrap_or_default()
                )),
                Some(_) => {}
            }
        }
        for flag in &self.flags {
            if !before.flags.iter().any(|f| key(f) == key(flag)) {
                lines.push(format!("+ {}", shown(flag)));
            }
        }
        lines
    }
}

/// What identifies a flag across two versions: its name, and for a required marker its check.
fn key(flag: &(String, Option<String>)) -> (String, Option<String>) {
    (flag.0.clone(), required_check(flag).map(str::to_string))
}

/// The check a `--require-marker CHECK[=CMD]` flag names; `None` for any other flag.
fn required_check(flag: &(String, Option<String>)) -> Option<&str> {
    (flag.0 == "--require-marker")
        .then(|| flag.1.as_deref().map(GateFlags::marker_check))
        .flatten()
}

/// A flag as written: `--run 'cargo test'`, `--subagents`.
fn shown((name, value): &(String, Option<String>)) -> String {
    match value {
        Some(value) => format!("{name} {}", flags::shell_quote(value)),
        None => name.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(words: &[&str]) -> GateFlags {
        GateFlags::read(&words.iter().map(|w| w.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn what_an_install_is_not_told_stays() {
        let before = flags(&["--run", "cargo test", "--timeout", "540", "--subagents"]);
        let after = before
            .apply(&Changes {
                markers: vec!["tests=cargo test".into()],
                ..Changes::default()
            })
            .unwrap();
        assert_eq!(
            after.words(),
            [
                "--run",
                "cargo test",
                "--timeout",
                "540",
                "--subagents",
                "--require-marker",
                "tests=cargo test"
            ]
        );
        assert_eq!(
            after.changes_from(&before),
            ["+ --require-marker 'tests=cargo test'"]
        );
    }

    #[test]
    fn a_check_goes_only_when_asked() {
        let before = flags(&["--run=make", "--timeout", "30", "--require-marker", "ci"]);
        let after = before
            .apply(&Changes {
                no_run: true,
                unmark: vec!["ci".into()],
                ..Changes::default()
            })
            .unwrap();
        assert!(after.words().is_empty());
        assert_eq!(
            after.changes_from(&before),
            ["- --run make", "- --timeout 30", "- --require-marker ci"]
        );
        assert!(
            before
                .apply(&Changes {
                    unmark: vec!["other".into()],
                    ..Changes::default()
                })
                .is_err()
        );
    }

    #[test]
    fn the_result_must_be_flags_the_gate_takes() {
        let before = flags(&["--deadline", "100"]);
        let err = before
            .apply(&Changes {
                set: vec![("--timeout".into(), "600".into())],
                ..Changes::default()
            })
            .unwrap_err();
        assert!(err.to_string().contains("reserve"), "{err}");
    }
}
