//! Codex's hook trust (SPEC §8): Codex runs a hook from `hooks.json` only when its
//! `config.toml` holds `[hooks.state."<key>"] trusted_hash = "sha256:…"` for it, keyed
//! `<hooks.json path>:<event label>:<group>:<handler>`, the hash taken over the canonical JSON of
//! the hook's normalized identity. A wrong or missing hash makes Codex skip the hook silently,
//! so vigil computes it exactly and edits `config.toml` without disturbing anything else in it.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::sys::atomic::write_atomic;
use crate::sys::digest;
use crate::sys::lock::FileLock;

/// Codex's label of an event in trust keys: `SessionStart` → `session_start`.
pub(crate) fn event_label(event: &str) -> String {
    let mut out = String::new();
    for (i, c) in event.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// The trust key of one handler of a `hooks.json`.
pub fn trust_key(hooks_json: &Path, event: &str, group: usize, handler: usize) -> String {
    format!(
        "{}:{}:{group}:{handler}",
        hooks_json.display(),
        event_label(event)
    )
}

/// The canonical identity Codex hashes: the event's label, the group's matcher (never for Stop
/// and UserPromptSubmit), and the one handler normalized: its type and command, the timeout
/// made explicit (600 s, or 1 to 3 s for SessionEnd), `async` always present, a status message
/// only when set. Keys sorted at every level, no whitespace.
pub fn canonical_identity(event: &str, matcher: Option<&str>, handler: &Value) -> String {
    let timeout = handler.get("timeout").and_then(Value::as_u64);
    let timeout = if event == "SessionEnd" {
        timeout.unwrap_or(1).clamp(1, 3)
    } else {
        timeout.unwrap_or(600).max(1)
    };
    let mut normalized = Map::new();
    normalized.insert(
        "async".into(),
        json!(
            handler
                .get("async")
                .and_then(Value::as_bool)
                .unwrap_or(false)
        ),
    );
    normalized.insert(
        "command".into(),
        handler.get("command").cloned().unwrap_or(Value::Null),
    );
    if let Some(message) = handler.get("statusMessage").and_then(Value::as_str) {
        normalized.insert("statusMessage".into(), json!(message));
    }
    normalized.insert("timeout".into(), json!(timeout));
    normalized.insert("type".into(), json!("command"));
    let mut identity = Map::new();
    identity.insert("event_name".into(), json!(event_label(event)));
    identity.insert("hooks".into(), json!([Value::Object(normalized)]));
    if let Some(matcher) = matcher.filter(|_| !matches!(event, "Stop" | "UserPromptSubmit")) {
        identity.insert("matcher".into(), json!(matcher));
    }
    digest::canonical_json(&Value::Object(identity))
}

/// `sha256:<hex>` of the canonical identity.
pub fn trust_hash(event: &str, matcher: Option<&str>, handler: &Value) -> String {
    let digest = Sha256::digest(canonical_identity(event, matcher, handler).as_bytes());
    format!("sha256:{}", digest::hex(&digest))
}

fn read_config(path: &Path) -> Result<(Option<Vec<u8>>, toml_edit::DocumentMut)> {
    let bytes = match fs_err::read(path) {
        Ok(bytes) => Some(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(Error::fs(e)),
    };
    let text = match &bytes {
        Some(bytes) => std::str::from_utf8(bytes).map_err(|_| {
            Error::input(format!(
                "{}: not UTF-8; nothing was changed",
                path.display()
            ))
        })?,
        None => "",
    };
    let document = text.parse::<toml_edit::DocumentMut>().map_err(|e| {
        Error::input(format!(
            "{}: not valid TOML ({}); nothing was changed",
            path.display(),
            e.message()
        ))
    })?;
    Ok((bytes, document))
}

/// The `trusted_hash` of each key present in a Codex config.
pub(crate) fn trusted_hashes(config: &Path) -> std::collections::BTreeMap<String, String> {
    let Ok((_, document)) = read_config(config) else {
        return Default::default();
    };
    let Some(state) = document
        .get("hooks")
        .and_then(|h| h.get("state"))
        .and_then(|s| s.as_table_like())
    else {
        return Default::default();
    };
    state
        .iter()
        .filter_map(|(key, item)| {
            let hash = item.as_table_like()?.get("trusted_hash")?.as_str()?;
            Some((key.to_string(), hash.to_string()))
        })
        .collect()
}

/// Sets `trusted_hash` for each (key, hash), keeping everything else in the file as it was.
/// Whether config.toml marks `project` trusted (`[projects."<path>"] trust_level = "trusted"`):
/// Codex reads a project's `.codex/` only then.
pub(crate) fn project_trusted(config: &Path, project: &Path) -> bool {
    let Ok((_, document)) = read_config(config) else {
        return false;
    };
    document
        .get("projects")
        .and_then(|p| p.get(project.display().to_string()))
        .and_then(|p| p.get("trust_level"))
        .and_then(|t| t.as_str())
        == Some("trusted")
}

pub fn trust(config: &Path, entries: &[(String, String)]) -> Result<()> {
    let _lock = lock(config)?;
    let (before, mut document) = read_config(config)?;
    let root = document.as_table_mut();
    let hooks = root.entry("hooks").or_insert_with(|| {
        let mut table = toml_edit::Table::new();
        table.set_implicit(true);
        toml_edit::Item::Table(table)
    });
    let hooks = hooks.as_table_mut().ok_or_else(|| {
        Error::input(format!(
            "{}: `hooks` is not a table; nothing was changed",
            config.display()
        ))
    })?;
    let state = hooks.entry("state").or_insert_with(|| {
        let mut table = toml_edit::Table::new();
        table.set_implicit(true);
        toml_edit::Item::Table(table)
    });
    let state = state.as_table_mut().ok_or_else(|| {
        Error::input(format!(
            "{}: `hooks.state` is not a table; nothing was changed",
            config.display()
        ))
    })?;
    for (key, hash) in entries {
        let entry = state
            .entry(key)
            .or_insert_with(|| toml_edit::Item::Table(toml_edit::Table::new()));
        let entry = entry.as_table_like_mut().ok_or_else(|| {
            Error::input(format!(
                "{}: the entry for {key} is not a table",
                config.display()
            ))
        })?;
        entry.insert("trusted_hash", toml_edit::value(hash.as_str()));
    }
    write(config, before.as_deref(), document.to_string().as_bytes())
}

/// Removes the trust entries of these keys (and the tables vigil's entries left empty).
pub(crate) fn untrust(config: &Path, keys: &[String]) -> Result<()> {
    let _lock = lock(config)?;
    let (before, mut document) = read_config(config)?;
    let Some(hooks) = document.get_mut("hooks").and_then(|h| h.as_table_mut()) else {
        return Ok(());
    };
    if let Some(state) = hooks.get_mut("state").and_then(|s| s.as_table_mut()) {
        for key in keys {
            state.remove(key);
        }
        if state.is_empty() && state.is_implicit() {
            hooks.remove("state");
        }
    }
    if hooks.is_empty() && hooks.is_implicit() {
        document.as_table_mut().remove("hooks");
    }
    write(config, before.as_deref(), document.to_string().as_bytes())
}

/// The decor vigil leaves on the `sandbox_mode` it writes, so uninstall takes back only its own.
const PROTECT_MARK: &str =
    " # vigil --protect: the agent's commands write only the project and /tmp";

/// The decor on the `default_permissions` vigil writes, and the name of its profile.
const PROFILE_MARK: &str =
    " # vigil --protect: what the engines and git run stays read-only to the agent's commands";
const PROFILE: &str = "vigil";

/// `install --codex --protect` (SPEC §9): the project's `.codex/config.toml` gets `sandbox_mode =
/// "workspace-write"`. Codex 0.171.0 reads it for a trusted project over the user's own setting
/// (seen with the real client: a trusted project's `workspace-write` confined `codex exec` whose
/// user config said `danger-full-access`), and its sandbox keeps `.codex/` and `.git/` read-only,
/// so the agent's commands can change neither it nor the state home. A mode the user set there is
/// theirs: `workspace-write` or `read-only` is kept as it is, anything else is refused. `Ok(true)`
/// when it was written.
///
/// Beside it, a permission profile (`default_permissions = "vigil"`, extending `:workspace`)
/// keeps `read_only` (paths from the project's top: the other engine's `.claude/` and
/// `.mcp.json`, what `reach::nested` finds below the top, what git runs from the project)
/// readable but not writable to the agent's commands, whether each exists or not (issue 43:
/// seen with the real Codex 0.171.0, which mounts an empty placeholder where one is missing).
/// The paths are relative to where Codex starts (`:workspace_roots`): started in a
/// subdirectory, everything above it is read-only anyway. A `default_permissions` of the
/// user's is kept, and the profile is not written.
pub(crate) fn protect(project_config: &Path, read_only: &[PathBuf]) -> Result<bool> {
    let _lock = lock(project_config)?;
    let (before, mut document) = read_config(project_config)?;
    let mode_written = match document.get("sandbox_mode") {
        None => {
            // A key of the root table, which toml_edit writes before any table header (after
            // one it would belong to that table).
            let mut value = toml_edit::value("workspace-write");
            if let Some(value) = value.as_value_mut() {
                value.decor_mut().set_suffix(PROTECT_MARK);
            }
            document.as_table_mut().insert("sandbox_mode", value);
            true
        }
        Some(item) => match item.as_str() {
            Some("workspace-write" | "read-only") => false,
            other => {
                return Err(Error::usage(format!(
                    "{}: sandbox_mode is {}, which lets the agent's commands write anywhere you can; set it to \"workspace-write\" yourself (vigil does not override a mode you chose); nothing was changed",
                    project_config.display(),
                    other.map_or_else(|| item.to_string(), |mode| format!("\"{mode}\""))
                )));
            }
        },
    };
    if document.get("default_permissions").is_none() || profile_is_ours(&document) {
        let mut value = toml_edit::value(PROFILE);
        if let Some(value) = value.as_value_mut() {
            value.decor_mut().set_suffix(PROFILE_MARK);
        }
        document.as_table_mut().insert("default_permissions", value);
        let mut roots = toml_edit::InlineTable::new();
        roots.insert(".", "write".into());
        for path in read_only {
            let key = path.to_string_lossy().replace('\\', "/");
            roots.insert(&key, "read".into());
        }
        let mut filesystem = toml_edit::Table::new();
        filesystem.insert(":workspace_roots", toml_edit::value(roots));
        let mut profile = toml_edit::Table::new();
        profile.insert("extends", toml_edit::value(":workspace"));
        profile.insert("filesystem", toml_edit::Item::Table(filesystem));
        let permissions = document
            .as_table_mut()
            .entry("permissions")
            .or_insert_with(|| {
                let mut table = toml_edit::Table::new();
                table.set_implicit(true);
                toml_edit::Item::Table(table)
            });
        if let Some(permissions) = permissions.as_table_mut() {
            permissions.insert(PROFILE, toml_edit::Item::Table(profile));
        }
    }
    write(
        project_config,
        before.as_deref(),
        document.to_string().as_bytes(),
    )?;
    Ok(mode_written)
}

/// Whether the `default_permissions` of `document` is the one `protect` wrote.
fn profile_is_ours(document: &toml_edit::DocumentMut) -> bool {
    document
        .get("default_permissions")
        .and_then(|item| item.as_value())
        .is_some_and(|value| {
            value.as_str() == Some(PROFILE)
                && value.decor().suffix().and_then(|s| s.as_str()) == Some(PROFILE_MARK)
        })
}

/// The paths, from the project's top, that `install --codex --protect` keeps read-only to
/// Codex's commands: the other engines' and the editors' names at the top (Codex keeps its own
/// `.codex/` and `.git/` so already), each read-only name below the top, and what git runs from
/// the project; found when the install runs (a folder made later is named at session start and
/// by the doctor).
pub(crate) fn read_only_paths(project: &Path) -> Vec<PathBuf> {
    let top = crate::sys::paths::canonical(project);
    let mut paths: Vec<PathBuf> = crate::reach::READ_ONLY
        .iter()
        .map(|(name, _)| PathBuf::from(name))
        .collect();
    for (path, _) in crate::reach::nested::what_runs(&top) {
        if let Ok(relative) = path.strip_prefix(&top)
            && !paths.iter().any(|p| relative.starts_with(p))
        {
            paths.push(relative.to_path_buf());
        }
    }
    paths
}

/// Uninstall: the `sandbox_mode` line and the permission profile `protect` wrote go, each if it
/// still stands as written; a file left empty goes too.
pub(crate) fn unprotect(project_config: &Path) -> Result<()> {
    if !project_config.exists() {
        return Ok(());
    }
    let _lock = lock(project_config)?;
    let (before, mut document) = read_config(project_config)?;
    let profile = profile_is_ours(&document);
    if profile {
        document.as_table_mut().remove("default_permissions");
        if let Some(permissions) = document
            .get_mut("permissions")
            .and_then(toml_edit::Item::as_table_mut)
        {
            permissions.remove(PROFILE);
            if permissions.is_empty() {
                document.as_table_mut().remove("permissions");
            }
        }
    }
    let ours = document
        .get("sandbox_mode")
        .and_then(|item| item.as_value())
        .is_some_and(|value| {
            value.as_str() == Some("workspace-write")
                && value.decor().suffix().and_then(|s| s.as_str()) == Some(PROTECT_MARK)
        });
    if !ours && !profile {
        return Ok(());
    }
    if ours {
        document.as_table_mut().remove("sandbox_mode");
    }
    let after = document.to_string();
    if after.trim().is_empty() {
        return fs_err::remove_file(project_config).map_err(Error::fs);
    }
    write(project_config, before.as_deref(), after.as_bytes())
}

/// The sandbox Codex runs the agent's commands in for `project`, and the file that says so:
/// the project's `.codex/config.toml` when the project is trusted and it sets one, else the
/// user's config. `None`: no file sets it (Codex then picks by how it is started).
pub(crate) fn sandbox_mode(user_config: &Path, project: &Path) -> Option<(String, PathBuf)> {
    let mode_in = |path: &Path| {
        let (_, document) = read_config(path).ok()?;
        Some(document.get("sandbox_mode")?.as_str()?.to_string())
    };
    let canonical = std::fs::canonicalize(project).unwrap_or_else(|_| project.to_path_buf());
    let project_config = project.join(".codex/config.toml");
    if project_trusted(user_config, &canonical)
        && let Some(mode) = mode_in(&project_config)
    {
        return Some((mode, project_config));
    }
    mode_in(user_config).map(|mode| (mode, user_config.to_path_buf()))
}

/// `approval_policy` of the user's config, when set.
pub(crate) fn approval_policy(user_config: &Path) -> Option<String> {
    let (_, document) = read_config(user_config).ok()?;
    Some(document.get("approval_policy")?.as_str()?.to_string())
}

/// Two installs trusting hooks of two projects at once edit one config.toml: each read, change
/// and write happens under a lock beside it (gone once released).
fn lock(config: &Path) -> Result<FileLock> {
    let mut name = config.file_name().unwrap_or_default().to_os_string();
    name.push(".vigil-lock");
    FileLock::transient_at(
        &config.with_file_name(name),
        std::time::Duration::from_secs(30),
    )
}

fn write(config: &Path, before: Option<&[u8]>, after: &[u8]) -> Result<()> {
    if before == Some(after) {
        return Ok(());
    }
    if let Some(dir) = config.parent() {
        fs_err::create_dir_all(dir).map_err(Error::fs)?;
    }
    write_atomic(config, after, 0o600).map_err(|e| Error::io("write", config, &e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_identity_is_codexs_normalized_canonical_json() {
        let handler = json!({"type": "command", "command": "/home/u/.local/bin/stop-gate"});
        assert_eq!(
            canonical_identity("Stop", Some("ignored for Stop"), &handler),
            r#"{"event_name":"stop","hooks":[{"async":false,"command":"/home/u/.local/bin/stop-gate","timeout":600,"type":"command"}]}"#
        );
        let handler =
            json!({"command": "x", "timeout": 10, "statusMessage": "checking", "type": "command"});
        assert_eq!(
            canonical_identity("SessionStart", Some("startup"), &handler),
            r#"{"event_name":"session_start","hooks":[{"async":false,"command":"x","statusMessage":"checking","timeout":10,"type":"command"}],"matcher":"startup"}"#
        );
        assert!(
            canonical_identity("SessionEnd", None, &json!({"command": "x", "timeout": 30}))
                .contains(r#""timeout":3"#)
        );
        assert!(trust_hash("Stop", None, &json!({"command": "x"})).starts_with("sha256:"));
    }

    #[test]
    fn keys_name_the_file_event_group_and_handler() {
        assert_eq!(
            trust_key(Path::new("/p/.codex/hooks.json"), "SessionStart", 1, 0),
            "/p/.codex/hooks.json:session_start:1:0"
        );
        assert_eq!(event_label("UserPromptSubmit"), "user_prompt_submit");
    }

    #[test]
    fn trust_and_untrust_keep_the_rest_of_the_config() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("config.toml");
        let original = "# my settings\nmodel = \"gpt-5\"  # keep this comment\n\n[projects.\"/p\"]\ntrust_level = \"trusted\"\n";
        std::fs::write(&config, original).unwrap();
        let entries = vec![(
            "/p/.codex/hooks.json:stop:1:0".to_string(),
            "sha256:ab".to_string(),
        )];
        trust(&config, &entries).unwrap();
        let text = std::fs::read_to_string(&config).unwrap();
        assert!(text.starts_with(original), "{text}");
        assert_eq!(
            trusted_hashes(&config)
                .get("/p/.codex/hooks.json:stop:1:0")
                .map(String::as_str),
            Some("sha256:ab")
        );
        untrust(&config, &[entries[0].0.clone()]).unwrap();
        assert_eq!(std::fs::read_to_string(&config).unwrap(), original);
    }

    #[test]
    fn an_invalid_config_is_refused_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("config.toml");
        std::fs::write(&config, "model = [unclosed\n").unwrap();
        assert!(trust(&config, &[("k".into(), "h".into())]).is_err());
        assert_eq!(
            std::fs::read_to_string(&config).unwrap(),
            "model = [unclosed\n"
        );
    }
}
