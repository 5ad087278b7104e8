//! The running session's settings (SPEC §9, "File tools held to the sandbox's reach"): under
//! `--protect`, stop-gate is Claude Code's ConfigChange hook, and a change to a settings file
//! that would take vigil's protection away from the session running now is blocked. Claude Code
//! then keeps the settings it loaded; a change made on disk stays in the file, and the next
//! session reads it (so a human's uninstall still takes effect, at the next session).
//!
//! Taking protection away is, in the new content: one of the hook groups the install record
//! holds for that file missing or changed (the Stop gate, the file tools' guard, this hook
//! itself…), one of the deny rules `--protect` added missing, a sandbox key `--protect` sets
//! missing; in any settings file (a stronger one overrides), a sandbox key set the other way,
//! `disableAllHooks`, an `env` variable vigil reads (`VIGIL_*`, `HOME`, `TMPDIR`,
//! `XDG_STATE_HOME`, `CLAUDE_CONFIG_DIR`, `CLAUDE_PROJECT_DIR`), or content Claude Code cannot
//! read as settings. Other changes load as usual: vigil judges what it installed, not the rest
//! of your settings.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::target::MAX_SETTINGS;
use super::{Installed, Target, installed_of, parse};
use crate::cli::hook::HookInput;
use crate::error;
use crate::install::protect::SANDBOX;
use crate::reach;
use crate::state::project::{Project, SessionId};
use crate::state::session;
use crate::sys::files;
use crate::sys::paths;

/// The user's settings file: in `$CLAUDE_CONFIG_DIR` where that is set, else `~/.claude`.
fn user_settings() -> Option<PathBuf> {
    Some(reach::claude_home()?.join("settings.json"))
}

/// The settings file a ConfigChange of `source` is about: beside the file Claude Code shows
/// (the settings file itself, or the proposal it stages in `.cc-writes/` beside it), else
/// where the source says, for the project at `project`. `None` for a source that is not a
/// settings file.
fn settings_file(source: &str, shown: Option<&Path>, project: &Path) -> Option<PathBuf> {
    let name = match source {
        "local_settings" => "settings.local.json",
        "project_settings" | "user_settings" => "settings.json",
        _ => return None,
    };
    if let Some(dir) = shown.and_then(Path::parent) {
        let dir = match dir.file_name() {
            Some(staged) if staged == ".cc-writes" => dir.parent().unwrap_or(dir),
            _ => dir,
        };
        return Some(dir.join(name));
    }
    match source {
        "user_settings" => user_settings(),
        _ => Some(project.join(".claude").join(name)),
    }
}

/// The ConfigChange hook (under `--protect`): a change that keeps vigil's protection loads
/// (`None`); one that takes it away is blocked with its one useful line, kept in the session's
/// record for the next Stop and for `loop run` (under `claude -p` the hook's own message is
/// shown nowhere). Input it cannot read blocks the change.
pub(crate) fn hook(input: &error::Result<HookInput>) -> Option<String> {
    let input = match input {
        Ok(input) => input,
        Err(e) => return Some(format!("vigil: {e}; the change is blocked")),
    };
    let project = Project::resolve(None, input.cwd.as_deref());
    let verdict = match input.source.as_deref() {
        Some(source) => judge(source, input.file_path.as_deref(), &project.dir),
        None => Err("vigil: the ConfigChange input names no source; the change is blocked".into()),
    };
    let reason = verdict.err()?;
    if let Some(session) = input
        .session_id
        .as_deref()
        .and_then(|id| SessionId::parse(id).ok())
    {
        let _ = session::note_blocked_change(&project, &session, &reason);
    }
    Some(reason)
}

/// Judges one ConfigChange: `source` as Claude Code names it, `shown` the file it shows its
/// hooks (the settings file as changed on disk, or the proposal it stages beside it), for the
/// project at `project`. `Err` holds the one line that blocks it.
pub(crate) fn judge(source: &str, shown: Option<&Path>, project: &Path) -> Result<(), String> {
    let Some(file) = settings_file(source, shown, project) else {
        return Ok(());
    };
    // vigil's own protected file, when this is it: found by the install records in the state
    // home (the changed file's project's, the session's project's, the user's), never by one
    // the agent could have written.
    let here = paths::canonical(&file);
    let ours = [
        Some(file.clone()),
        Some(project.join(".claude/settings.local.json")),
        user_settings(),
    ]
    .into_iter()
    .flatten()
    .filter_map(
        |file| match Target::resolve(&file).ok()?.record().load_where() {
            Ok((record, true)) => Some(record),
            _ => None,
        },
    )
    .find_map(|record| {
        let files = record.get("files")?.as_object()?;
        let key = files
            .keys()
            .find(|key| paths::canonical(Path::new(key)) == here)?;
        installed_of(&record, key).filter(|installed| installed.protect.is_some())
    });
    let named = file.display();
    let keeps = "the session keeps the settings it loaded";
    // This hook is there only under --protect: content it cannot read is blocked, but for
    // another settings file that is gone (taking it away takes nothing of vigil's).
    let bytes = match read(shown.unwrap_or(&file)) {
        Ok(bytes) => bytes,
        Err((true, _)) if ours.is_none() => return Ok(()),
        Err((_, why)) => {
            return Err(format!(
                "vigil: the new {named} cannot be read ({why}); {keeps}"
            ));
        }
    };
    let root = parse(&bytes, &file).map_err(|e| format!("vigil: {e}; {keeps}"))?;
    if let Some(why) = weakens(&root, ours.as_ref()) {
        return Err(format!(
            "vigil: the change to {named} {why}, which --protect keeps; {keeps} (the next session reads the file as it is; uninstall vigil to take the protection away)"
        ));
    }
    Ok(())
}

/// The file's bytes; else whether it is missing, and why not.
fn read(path: &Path) -> Result<Vec<u8>, (bool, String)> {
    let file = files::open_regular(path).map_err(|e| {
        (
            e.kind() == std::io::ErrorKind::NotFound,
            error::plain_io(&e),
        )
    })?;
    files::read_capped(file, MAX_SETTINGS, "settings", path).map_err(|e| (false, e.to_string()))
}

/// Why `root`, the new content of a settings file, takes protection away, if it does; `ours`
/// what the install record holds for it, when it is the file vigil protected.
fn weakens(root: &Map<String, Value>, ours: Option<&Installed>) -> Option<String> {
    if root.get("disableAllHooks") == Some(&Value::Bool(true)) {
        return Some("turns every hook off (disableAllHooks)".into());
    }
    // The environment Claude Code gives its hooks and the agent's commands: these move where
    // vigil keeps its state, what it takes for the temporary directory and home, or turn it off.
    if let Some(Value::Object(env)) = root.get("env")
        && let Some(name) = env.keys().find(|name| watched_variable(name))
    {
        return Some(format!("sets env.{name}, which vigil reads"));
    }
    let sandbox = root.get("sandbox").and_then(Value::as_object);
    for (key, wanted) in SANDBOX {
        if let Some(value) = sandbox.and_then(|s| s.get(key))
            && value != &Value::Bool(wanted)
        {
            return Some(format!("sets sandbox.{key} to {value}"));
        }
    }
    let installed = ours?;
    let protection = installed.protect.as_ref()?;
    for (key, _) in SANDBOX {
        if sandbox.and_then(|s| s.get(key)).is_none() {
            return Some(format!("takes sandbox.{key} out"));
        }
    }
    let deny: Vec<&str> = root
        .get("permissions")
        .and_then(|p| p.get("deny"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if let Some(rule) = protection
        .deny_added
        .iter()
        .find(|rule| !deny.contains(&rule.as_str()))
    {
        return Some(format!("takes out the deny rule {rule}"));
    }
    // Each group exactly as installed: a matcher, timeout, `async` or handler type changed
    // makes the hook miss, time out or stop blocking as surely as taking it out.
    for (event, group) in &installed.entries {
        let kept = root
            .get("hooks")
            .and_then(|hooks| hooks.get(event))
            .and_then(Value::as_array)
            .is_some_and(|list| list.contains(group));
        if !kept {
            return Some(format!("takes out or changes vigil's {event} hook"));
        }
    }
    None
}

/// The variables of a settings file's `env` that vigil reads.
fn watched_variable(name: &str) -> bool {
    name.starts_with("VIGIL_")
        || matches!(
            name,
            "HOME" | "TMPDIR" | "XDG_STATE_HOME" | "CLAUDE_CONFIG_DIR" | "CLAUDE_PROJECT_DIR"
        )
}
