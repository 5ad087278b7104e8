//! `settings-merge install --protect` (SPEC §9): Claude Code settings that keep the agent off
//! vigil's protected state and off the machinery that decides whether the gate runs.
//!
//! - The Bash tool and slash-command `!` blocks run in the sandbox (bubblewrap on Linux), which
//!   writes only the project and `$TMPDIR` and keeps `$HOME` and `.claude/settings*.json`
//!   read-only; unsandboxed retries are off, and a sandbox that cannot start stops Claude Code
//!   rather than letting commands run bare (`failIfUnavailable`).
//! - The Edit and Write tools are not covered by the sandbox: `Edit(...)` deny rules (which
//!   Claude Code applies to every built-in tool that writes files; it warns about `Write(path)`
//!   rules) keep them off the state home, the binaries the hooks run, and the settings files.
//!
//! What is changed is recorded so that uninstall takes back exactly that, and `check` says
//! whether the state is out of the agent's reach, and why not.

mod doctor;
mod listed;

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

pub(crate) use doctor::check;
pub(crate) use listed::{MAX_LISTED, below_rules, held_rules, sync_rules};

use crate::reach::Entry;
use crate::reach::READ_ONLY;
use crate::reach::START_UP_FILES;
use crate::state::protected;
use crate::sys::paths;

/// The sandbox settings `--protect` wants, in the order it writes them.
pub(crate) const SANDBOX: [(&str, bool); 3] = [
    ("enabled", true),
    ("allowUnsandboxedCommands", false),
    ("failIfUnavailable", true),
];

/// What `--protect` changed in one settings file, to be taken back by uninstall.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Protection {
    /// `sandbox` did not exist, and was made.
    pub created_sandbox: bool,
    /// Each sandbox key set, with its value before (`Null`: it was absent).
    pub sandbox_before: Vec<(String, Value)>,
    /// `permissions` and `permissions.deny` did not exist, and were made.
    pub created_permissions: bool,
    pub created_deny: bool,
    /// The deny rules added (those already there were the user's).
    pub deny_added: Vec<String>,
    /// The deny rules added for the files the human holds (SPEC §11), kept in step with the
    /// hold by every install (`sync_held`).
    pub held_added: Vec<String>,
    /// The literal rules added for what the engine or git runs that existed below the top and
    /// at it when the install ran (`below_rules`), kept in step by every install.
    pub below_added: Vec<String>,
}

impl Protection {
    pub(crate) fn is_empty(&self) -> bool {
        *self == Protection::default()
    }

    /// One record of two applies, `self` the earlier: what was there before the first stays
    /// what uninstall puts back.
    pub(crate) fn merge(&mut self, later: Protection) {
        self.created_sandbox |= later.created_sandbox;
        self.created_permissions |= later.created_permissions;
        self.created_deny |= later.created_deny;
        for (key, before) in later.sandbox_before {
            if !self.sandbox_before.iter().any(|(k, _)| *k == key) {
                self.sandbox_before.push((key, before));
            }
        }
        for rule in later.deny_added {
            if !self.deny_added.contains(&rule) {
                self.deny_added.push(rule);
            }
        }
    }
}

/// What the deny rules keep the Edit and Write tools off.
#[derive(Clone, Debug)]
pub(crate) struct Guarded {
    /// The state home (loops, session records, trusted keys).
    pub state_home: PathBuf,
    /// The directory of the binaries the hooks run, when they are named by path.
    pub bin_dir: Option<PathBuf>,
    /// The user's home, for `~/` rules and `~/.claude/settings.json`.
    pub home: Option<PathBuf>,
    /// vigil's hooks are installed and name their binaries without a path (found on PATH).
    pub on_path: bool,
}

impl Guarded {
    /// The rules of this machine: `$HOME` and the state home as vigil finds them.
    pub(crate) fn here(bin_dir: Option<PathBuf>) -> Option<Guarded> {
        Some(Guarded {
            state_home: protected::home()?,
            bin_dir,
            home: crate::sys::user::home(),
            on_path: false,
        })
    }

    /// The deny rules, each in the form Claude Code reads: `~/…` under the home (so a
    /// committed file works on every machine), `//…` for another absolute path, `/…` for a
    /// path from the project root.
    pub(crate) fn rules(&self) -> Vec<String> {
        let mut rules = vec![self.rule(&self.state_home, true)];
        if let Some(bin) = &self.bin_dir {
            rules.push(self.rule(bin, true));
        }
        rules.push("Edit(/.claude/settings.json)".to_string());
        rules.push("Edit(/.claude/settings.local.json)".to_string());
        if self.home.is_some() {
            rules.push("Edit(~/.claude/settings.json)".to_string());
        }
        // The second layer under the file tools' guard: the same read-only set (SPEC §9), at
        // the top (which Claude Code's sandbox also keeps from the shell) and at any depth
        // (which Claude Code 2.1.332 holds for its file tools only: its sandbox skips a glob
        // on Linux, seen with the real client; issue 43).
        for (entry, kind) in READ_ONLY {
            rules.push(match kind {
                Entry::Dir => format!("Edit(/{entry}/**)"),
                Entry::File => format!("Edit(/{entry})"),
            });
            rules.push(match kind {
                Entry::Dir => format!("Edit(**/{entry}/**)"),
                Entry::File => format!("Edit(**/{entry})"),
            });
        }
        if self.home.is_some() {
            // Where the engines find code they run (Claude Code's own plans and memory, also
            // under ~/.claude, stay writable), and the shell's start-up files.
            for dir in [
                ".claude/agents",
                ".claude/commands",
                ".claude/skills",
                ".claude/hooks",
                ".claude/plugins",
                ".codex",
            ] {
                rules.push(format!("Edit(~/{dir}/**)"));
            }
            rules.push("Edit(~/.claude.json)".to_string());
            for file in START_UP_FILES {
                rules.push(format!("Edit(~/{file})"));
            }
        }
        rules.dedup();
        rules
    }

    /// The rule for `path` (all below it for a directory).
    fn rule(&self, path: &Path, dir: bool) -> String {
        let tail = if dir { "/**" } else { "" };
        let path = path.to_string_lossy();
        let path = path.trim_end_matches('/');
        if let Some(home) = &self.home {
            let home = home.to_string_lossy();
            let home = home.trim_end_matches('/');
            if let Some(rest) = path.strip_prefix(home).and_then(|r| r.strip_prefix('/')) {
                return format!("Edit(~/{rest}{tail})");
            }
        }
        format!("Edit(//{}{tail})", path.trim_start_matches('/'))
    }

    /// Every spelling of the state home's rule that keeps the tools off it.
    fn state_rules(&self) -> Vec<String> {
        let mut rules = vec![self.rule(&self.state_home, true)];
        let absolute = Guarded {
            home: None,
            ..self.clone()
        };
        rules.push(absolute.rule(&self.state_home, true));
        let canonical = paths::canonical(&self.state_home);
        rules.push(absolute.rule(&canonical, true));
        rules.push(self.rule(&canonical, true));
        rules.sort();
        rules.dedup();
        rules
    }
}

/// Turns the protection on in `root`; what was changed, to record. A file already protected
/// changes nothing (and yields an empty record).
pub(crate) fn apply(root: &mut Map<String, Value>, guarded: &Guarded) -> Protection {
    let mut done = Protection::default();
    if !matches!(root.get("sandbox"), Some(Value::Object(_))) {
        // A sandbox that is not an object is not one Claude Code reads: vigil's takes its
        // place, and uninstall puts the old value back.
        if let Some(old) = root.get("sandbox") {
            done.sandbox_before.push((String::new(), old.clone()));
        }
        done.created_sandbox = true;
        root.insert("sandbox".into(), json!({}));
    }
    let sandbox = root
        .get_mut("sandbox")
        .and_then(Value::as_object_mut)
        .expect("an object now");
    for (key, wanted) in SANDBOX {
        if sandbox.get(key) != Some(&json!(wanted)) {
            let before = sandbox.insert(key.into(), json!(wanted));
            done.sandbox_before
                .push((key.to_string(), before.unwrap_or(Value::Null)));
        }
    }
    if !matches!(root.get("permissions"), Some(Value::Object(_))) {
        done.created_permissions = true;
        root.insert("permissions".into(), json!({}));
    }
    let permissions = root
        .get_mut("permissions")
        .and_then(Value::as_object_mut)
        .expect("an object now");
    if !matches!(permissions.get("deny"), Some(Value::Array(_))) {
        done.created_deny = true;
        permissions.insert("deny".into(), json!([]));
    }
    let deny = permissions
        .get_mut("deny")
        .and_then(Value::as_array_mut)
        .expect("a list now");
    for rule in guarded.rules() {
        if !deny.iter().any(|r| r.as_str() == Some(rule.as_str())) {
            deny.push(json!(rule));
            done.deny_added.push(rule);
        }
    }
    done
}

/// Takes back what `apply` did, where it still stands as `apply` left it: a value the user has
/// changed since is theirs, and stays.
pub(crate) fn revert(root: &mut Map<String, Value>, done: &Protection) {
    if let Some(Value::Object(sandbox)) = root.get_mut("sandbox") {
        for (key, wanted) in SANDBOX {
            let Some((_, before)) = done.sandbox_before.iter().find(|(k, _)| k == key) else {
                continue;
            };
            if sandbox.get(key) == Some(&json!(wanted)) {
                match before {
                    Value::Null => {
                        sandbox.remove(key);
                    }
                    value => {
                        sandbox.insert(key.into(), value.clone());
                    }
                }
            }
        }
        if done.created_sandbox && sandbox.is_empty() {
            match done.sandbox_before.iter().find(|(k, _)| k.is_empty()) {
                Some((_, old)) => root.insert("sandbox".into(), old.clone()),
                None => root.remove("sandbox"),
            };
        }
    }
    if let Some(Value::Object(permissions)) = root.get_mut("permissions") {
        if let Some(Value::Array(deny)) = permissions.get_mut("deny") {
            deny.retain(|rule| {
                !rule.as_str().is_some_and(|r| {
                    [&done.deny_added, &done.held_added, &done.below_added]
                        .iter()
                        .any(|list| list.iter().any(|a| a == r))
                })
            });
            if done.created_deny && deny.is_empty() {
                permissions.remove("deny");
            }
        }
        if done.created_permissions && permissions.is_empty() {
            root.remove("permissions");
        }
    }
}

pub(crate) fn to_value(done: &Protection) -> Value {
    json!({
        "created_sandbox": done.created_sandbox,
        "sandbox_before": done.sandbox_before.iter().map(|(key, before)| json!({"key": key, "before": before})).collect::<Vec<_>>(),
        "created_permissions": done.created_permissions,
        "created_deny": done.created_deny,
        "deny_added": done.deny_added,
        "held_added": done.held_added,
        "below_added": done.below_added,
    })
}

pub(crate) fn from_value(value: &Value) -> Option<Protection> {
    Some(Protection {
        created_sandbox: value.get("created_sandbox")?.as_bool()?,
        sandbox_before: value
            .get("sandbox_before")?
            .as_array()?
            .iter()
            .filter_map(|entry| {
                Some((
                    entry.get("key")?.as_str()?.to_string(),
                    entry.get("before")?.clone(),
                ))
            })
            .collect(),
        created_permissions: value.get("created_permissions")?.as_bool()?,
        created_deny: value.get("created_deny")?.as_bool()?,
        deny_added: value
            .get("deny_added")?
            .as_array()?
            .iter()
            .filter_map(|r| r.as_str().map(str::to_string))
            .collect(),
        // Absent in records from before holds.
        held_added: value
            .get("held_added")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|r| r.as_str().map(str::to_string))
            .collect(),
        // Absent in records from before issue 43.
        below_added: value
            .get("below_added")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|r| r.as_str().map(str::to_string))
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reach::sandbox::Effective;

    fn guarded() -> Guarded {
        Guarded {
            state_home: PathBuf::from("/home/u/.local/state/vigil"),
            bin_dir: Some(PathBuf::from("/opt/vigil/bin")),
            home: Some(PathBuf::from("/home/u")),
            on_path: false,
        }
    }

    #[test]
    fn rules_use_home_relative_and_absolute_forms() {
        assert_eq!(
            guarded().rules(),
            [
                "Edit(~/.local/state/vigil/**)",
                "Edit(//opt/vigil/bin/**)",
                "Edit(/.claude/settings.json)",
                "Edit(/.claude/settings.local.json)",
                "Edit(~/.claude/settings.json)",
                "Edit(/.claude/**)",
                "Edit(**/.claude/**)",
                "Edit(/.codex/**)",
                "Edit(**/.codex/**)",
                "Edit(/.mcp.json)",
                "Edit(**/.mcp.json)",
                "Edit(/.vscode/**)",
                "Edit(**/.vscode/**)",
                "Edit(/.idea/**)",
                "Edit(**/.idea/**)",
                "Edit(/.git/**)",
                "Edit(**/.git/**)",
                "Edit(~/.claude/agents/**)",
                "Edit(~/.claude/commands/**)",
                "Edit(~/.claude/skills/**)",
                "Edit(~/.claude/hooks/**)",
                "Edit(~/.claude/plugins/**)",
                "Edit(~/.codex/**)",
                "Edit(~/.claude.json)",
                "Edit(~/.bashrc)",
                "Edit(~/.bash_profile)",
                "Edit(~/.bash_login)",
                "Edit(~/.profile)",
                "Edit(~/.zshrc)",
                "Edit(~/.zprofile)",
                "Edit(~/.zshenv)",
                "Edit(~/.config/fish/config.fish)",
            ]
        );
    }

    #[test]
    fn apply_then_revert_gives_the_settings_back() {
        for original in [
            json!({}),
            json!({"sandbox": {"enabled": false, "network": {"allowLocalBinding": true}}}),
            json!({"sandbox": true}),
            json!({"permissions": {"allow": ["Bash(ls)"], "deny": ["Read(./.env)"]}, "model": "x"}),
            json!({"sandbox": {"enabled": true, "allowUnsandboxedCommands": false}}),
            json!({"permissions": {"deny": ["Edit(~/.local/state/vigil/**)"]}}),
        ] {
            let mut root = original.as_object().unwrap().clone();
            let done = apply(&mut root, &guarded());
            assert_eq!(root["sandbox"]["enabled"], json!(true));
            assert_eq!(root["sandbox"]["allowUnsandboxedCommands"], json!(false));
            assert_eq!(root["sandbox"]["failIfUnavailable"], json!(true));
            let deny = root["permissions"]["deny"].as_array().unwrap();
            assert!(deny.contains(&json!("Edit(~/.local/state/vigil/**)")));
            let again = apply(&mut root, &guarded());
            assert!(again.is_empty(), "a second apply changes nothing");
            let mut record = from_value(&to_value(&done)).unwrap();
            record.merge(again);
            assert_eq!(record, done);
            revert(&mut root, &record);
            assert_eq!(Value::Object(root), original);
        }
    }

    #[test]
    fn the_strongest_layer_decides_the_sandbox_and_every_layer_adds_deny_rules() {
        let user = json!({"sandbox": {"enabled": true}, "permissions": {"deny": ["Edit(~/a/**)"]}});
        let local =
            json!({"sandbox": {"enabled": false}, "permissions": {"deny": ["Edit(//b/**)"]}});
        let effective = Effective::of(&[
            user.as_object().unwrap().clone(),
            local.as_object().unwrap().clone(),
        ]);
        assert_eq!(effective.sandbox["enabled"], json!(false));
        assert_eq!(effective.deny, ["Edit(~/a/**)", "Edit(//b/**)"]);
    }
}
