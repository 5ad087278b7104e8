//! The deny rules `--protect` lists one path at a time (issue 43, SPEC §11): the files the
//! human holds, and what the engine or git runs below the top, each a literal path Claude
//! Code's sandbox makes read-only to the Bash tool (it skips glob rules on Linux); kept in step
//! with the hold and the project by every install.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use crate::reach::Entry;
use crate::sys::paths;

/// The most held files `--protect` lists one by one in the sandbox's rules; past it none is
/// listed (the file tools' guard and the Stop still hold them all), and the doctor says so.
pub(crate) const MAX_LISTED: usize = 500;

/// The deny rules for the files the human holds in the project at `project` (paths from the
/// repository's `top`): `Edit(/path)` from the project's root, which Claude Code's sandbox also
/// applies to the Bash tool's writes. Empty past [`MAX_LISTED`].
pub(crate) fn held_rules(top: &Path, project: &Path, held: &[String]) -> Vec<String> {
    if held.len() > MAX_LISTED {
        return Vec::new();
    }
    let below = paths::canonical(project)
        .strip_prefix(paths::canonical(top))
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let below = below.to_string_lossy().replace('\\', "/");
    held.iter()
        .filter_map(|path| match below.as_str() {
            "" => Some(path.as_str()),
            dir => path.strip_prefix(dir)?.strip_prefix('/'),
        })
        // A rule is a glob to Claude Code: a name with glob characters (or a backslash, its
        // escape) is left to the guard.
        .filter(|path| !path.contains(['*', '?', '[', ']', '{', '}', '(', ')', '\\']))
        .map(|path| format!("Edit(/{path})"))
        .collect()
}

/// The deny rules that keep the Bash tool off what the engine or git runs in the project at
/// `project`, where it exists (issue 43): `Edit(/path)`, a literal path, which Claude Code's
/// sandbox makes read-only to its commands, where it skips every glob rule on Linux (seen with
/// 2.1.332), so the `**/` rules hold its file tools only. Each read-only name at any depth and
/// each place git runs from; a git directory as its `config` and `hooks` (as Claude Code keeps
/// the top's), so the agent still commits in it. Only what exists: a literal path that does not
/// makes its first missing ancestor read-only (seen), and no rule forbids a name before it
/// exists (what appears later is named at session start, by the Stop and by the doctor).
/// At most [`MAX_LISTED`].
pub(crate) fn below_rules(project: &Path) -> Listed {
    let top = paths::canonical(project);
    let mut found: Vec<(PathBuf, Entry)> = crate::reach::read_only_in(&top)
        .into_iter()
        .filter(|(path, _)| std::fs::symlink_metadata(path).is_ok())
        .collect();
    found.extend(crate::reach::nested::what_runs(&top));
    // A git directory by its shape: what git would take for one.
    let git_shaped = |dir: &Path| dir.join("HEAD").is_file() && dir.join("objects").is_dir();
    let mut places: Vec<PathBuf> = Vec::new();
    for (path, _) in found {
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let git_dir = match path.file_name() {
            Some(name) if name == ".git" && meta.is_file() => {
                // A worktree's or a submodule's `.git` names its git directory.
                let named = crate::sys::git::gitdir_of(&path)
                    .map(|dir| paths::canonical(&path.parent().unwrap_or(&top).join(dir)))
                    .filter(|dir| git_shaped(dir));
                places.push(path);
                named
            }
            // A `.git` directory, or a git directory by its shape whatever its name.
            Some(name) if meta.is_dir() && (name == ".git" || git_shaped(&path)) => Some(path),
            _ => {
                places.push(path);
                None
            }
        };
        if let Some(dir) = git_dir {
            places.extend(
                ["config", "hooks", "commondir"]
                    .iter()
                    .map(|part| dir.join(part))
                    .filter(|part| std::fs::symlink_metadata(part).is_ok()),
            );
        }
    }
    let mut rules: Vec<(u8, String)> = places
        .into_iter()
        .filter_map(|path| {
            let relative = path.strip_prefix(&top).ok()?.to_str()?.to_string();
            // A rule is a glob to Claude Code: a name with glob characters (or a backslash,
            // its escape) is left to the guard.
            let glob = ['*', '?', '[', ']', '{', '}', '(', ')', '\\'];
            if relative.is_empty() || relative.contains(glob) {
                return None;
            }
            // What git runs first, then the engines' folders, then the editors'.
            let rank = match path.file_name().and_then(|n| n.to_str()) {
                Some(".vscode" | ".idea") => 2,
                Some(".claude" | ".codex" | ".mcp.json") => 1,
                _ => 0,
            };
            Some((rank, format!("Edit(/{relative})")))
        })
        .collect();
    rules.sort();
    rules.dedup_by(|a, b| a.1 == b.1);
    let left_out = rules.len().saturating_sub(MAX_LISTED);
    rules.truncate(MAX_LISTED);
    let mut rules: Vec<String> = rules.into_iter().map(|(_, rule)| rule).collect();
    rules.sort();
    Listed { rules, left_out }
}

/// The literal rules for what runs below the top, and how many places were past
/// [`MAX_LISTED`] (the editors' folders go first, what git runs last).
pub(crate) struct Listed {
    pub(crate) rules: Vec<String>,
    pub(crate) left_out: usize,
}

/// Keeps a list of vigil's deny rules in `root` as `wanted` (the held files', or those of what
/// runs below the top): the rules vigil added (`added`) that are no longer wanted are taken
/// out, those now wanted added (a rule the user had already is theirs, and is not recorded).
/// Whether `root` changed.
pub(crate) fn sync_rules(
    root: &mut Map<String, Value>,
    added: &mut Vec<String>,
    wanted: &[String],
) -> bool {
    let Some(deny) = root
        .get_mut("permissions")
        .and_then(|p| p.get_mut("deny"))
        .and_then(Value::as_array_mut)
    else {
        return false;
    };
    let before = deny.len();
    let stale: Vec<String> = added
        .iter()
        .filter(|rule| !wanted.contains(rule))
        .cloned()
        .collect();
    deny.retain(|rule| !rule.as_str().is_some_and(|r| stale.iter().any(|s| s == r)));
    added.retain(|rule| !stale.contains(rule));
    let mut changed = deny.len() != before;
    for rule in wanted {
        if !deny.iter().any(|r| r.as_str() == Some(rule.as_str())) {
            deny.push(json!(rule));
            added.push(rule.clone());
            changed = true;
        }
    }
    changed
}
