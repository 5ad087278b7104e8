//! Claude Code's sandbox as its settings layers set it for one project (SPEC §9): read by the
//! gate (whether a check that cannot be confined may run) and by `--protect`'s doctor.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::state::protected;
use crate::sys::atomic;
use crate::sys::files;
use crate::sys::git;
use crate::sys::paths;

/// Claude Code's settings as it merges them for one project: each layer's `sandbox` key set
/// by the strongest layer that sets it, deny rules from every layer.
#[derive(Debug, Default)]
pub(crate) struct Effective {
    pub sandbox: Map<String, Value>,
    pub deny: Vec<String>,
}

impl Effective {
    /// `layers` from the weakest (user) to the strongest (managed).
    pub(crate) fn of(layers: &[Map<String, Value>]) -> Effective {
        let mut effective = Effective::default();
        for layer in layers {
            if let Some(Value::Object(sandbox)) = layer.get("sandbox") {
                for (key, value) in sandbox {
                    effective.sandbox.insert(key.clone(), value.clone());
                }
            }
            if let Some(Value::Array(rules)) = layer.get("permissions").and_then(|p| p.get("deny"))
            {
                effective
                    .deny
                    .extend(rules.iter().filter_map(Value::as_str).map(str::to_string));
            }
        }
        effective
    }
}

/// Whether a check that cannot be confined must not run in `project`: Claude Code's sandbox is
/// on there, or Codex's (what `--codex --protect` sets), or a human installed vigil with
/// `--protect` (the install record in the protected state says it).
pub(crate) fn confinement_required(project: &Path) -> bool {
    sandbox_on(project) || codex_sandbox_on(project) || protected::installed_protected(project)
}

/// Whether the project asks Codex to run the agent's commands in its sandbox: a `sandbox_mode`
/// of `workspace-write` or `read-only` in the project's `.codex/config.toml`, which `--codex
/// --protect` writes and Codex keeps read-only to the agent's commands. (Codex's own config in
/// `~/.codex` is not read: it says nothing of a project a Claude Code session works in, where a
/// machine without bubblewrap runs the check unconfined and says so.) A file that exists but
/// cannot be read counts as one that asks.
pub(crate) fn codex_sandbox_on(project: &Path) -> bool {
    let path = project.join(".codex/config.toml");
    let file = match files::open_regular(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return false,
        Err(_) => return true,
    };
    let Ok(bytes) = files::read_capped(file, 1 << 20, "Codex's config", &path) else {
        return true;
    };
    let Ok(document) = String::from_utf8_lossy(&bytes).parse::<toml_edit::DocumentMut>() else {
        return true;
    };
    matches!(
        document.get("sandbox_mode").and_then(|mode| mode.as_str()),
        Some("workspace-write" | "read-only")
    )
}

/// Whether Claude Code's sandbox is on for the project at `project` (what `--protect` sets):
/// then a check that cannot be confined is never run with the user's rights. Read only when
/// confinement cannot be had, so a Stop with a check pays nothing for it.
pub(crate) fn sandbox_on(project: &Path) -> bool {
    // A `.git` file that claims a worktree no main checkout anchors: its settings cannot be
    // known, so the sandbox is taken to be on (a check that cannot be confined is not run).
    if git::claims_worktree(project) && main_of(project) == paths::canonical(project) {
        return true;
    }
    let home = crate::sys::user::home();
    let layers: Vec<Map<String, Value>> = layer_files(project, home.as_deref())
        .iter()
        .filter_map(|path| read_layer(path))
        .collect();
    Effective::of(&layers).sandbox.get("enabled") == Some(&Value::Bool(true))
}

/// The settings files Claude Code reads for the project at `project`, weakest first, each
/// once (whatever its spelling): `~/.claude/settings.json`, the project's
/// `.claude/settings.json` and `.claude/settings.local.json`, then the managed settings.
pub(crate) fn layer_files(project: &Path, home: Option<&Path>) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = Vec::new();
    if let Some(home) = home {
        paths.push(home.join(".claude/settings.json"));
    }
    paths.push(project.join(".claude/settings.json"));
    // In a linked worktree, Claude Code reads the main checkout's local settings too (2.1.332:
    // it resolves them to the repository's canonical root), then the worktree's own.
    let main = main_of(project);
    if main != paths::canonical(project) {
        paths.push(main.join(".claude/settings.local.json"));
    }
    paths.push(project.join(".claude/settings.local.json"));
    paths.push(PathBuf::from("/etc/claude-code/managed-settings.json"));
    paths::dedup_canonical(&mut paths);
    paths
}

/// The main checkout of the linked worktree `project`, pinned in the worktree's protected
/// state the first time it is found anchored (`git::main_checkout`): the agent can rewrite or
/// delete the worktree's `.git` file later, and a main pinned then still counts (its settings,
/// its sandbox). The project itself when it is no worktree and none was pinned.
pub(crate) fn main_of(project: &Path) -> PathBuf {
    let canonical = paths::canonical(project);
    let found = git::main_checkout(project);
    let pin = protected::home().map(|home| protected::dir_in(&home, &canonical).join(MAIN_PIN));
    if found != canonical {
        if let Some(pin) = pin.filter(|pin| std::fs::symlink_metadata(pin).is_err())
            && let Some(dir) = pin.parent()
            && files::make_private_dir(dir).is_ok()
        {
            let _ = atomic::write_atomic(&pin, found.as_os_str().as_encoded_bytes(), 0o600);
        }
        return found;
    }
    pin.and_then(|pin| files::read_regular(&pin, 4096, false).ok().flatten())
        .map(|bytes| paths::from_bytes(&bytes))
        .filter(|main| main.is_absolute() && *main != canonical)
        .unwrap_or(found)
}

/// The file in a worktree's protected state that names its main checkout.
const MAIN_PIN: &str = "main-checkout";

/// One settings layer, when it is a regular file of at most 8 MiB holding a JSON object.
pub(crate) fn read_layer(path: &Path) -> Option<Map<String, Value>> {
    let file = files::open_regular(path).ok()?;
    let bytes = files::read_capped(file, 8 << 20, "settings", path).ok()?;
    match serde_json::from_slice(&bytes) {
        Ok(Value::Object(map)) => Some(map),
        _ => None,
    }
}
