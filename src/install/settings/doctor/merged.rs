//! What the settings Claude Code merges for the project say (yours, the project's, the local
//! and the managed file, and the vigil plugin): vigil wired twice, other Stop hooks beside
//! vigil's gate, the protection of vigil's state, and planted code.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::gate::project_config;
use crate::install::finding::{Finding, typed};
use crate::install::planted;
use crate::install::protect;
use crate::install::protect::Guarded;
use crate::install::settings::{
    Target, any_protected, first_word, handler_line, is_waiter, vigil_binary, vigil_handlers,
};
use crate::reach::sandbox;
use crate::reach::sandbox::Effective;
use crate::state::project::Project;
use crate::sys::paths;
use crate::verdict::defang;

/// The settings Claude Code merges for the target's project, each file once: the target
/// first (as read already), then the others that read as settings; `true` marks the target.
pub(super) fn layers(
    target: &Target,
    own: &Map<String, Value>,
) -> Vec<(PathBuf, Map<String, Value>, bool)> {
    let home = crate::sys::user::home();
    let mut paths = vec![target.file.clone()];
    paths.extend(sandbox::layer_files(&target.project(), home.as_deref()));
    paths::dedup_canonical(&mut paths);
    let here = paths::canonical(&target.file);
    paths
        .into_iter()
        .filter_map(|path| {
            if paths::canonical(&path) == here {
                return Some((path, own.clone(), true));
            }
            let root = sandbox::read_layer(&path)?;
            Some((path, root, false))
        })
        .collect()
}

/// Claude Code's own cap on Stop blocks (issue 29): it ends a turn over a Stop hook that
/// blocked 8 times in a row while the model answered with text alone. Said once where vigil's
/// gate is on Stop, with every other Stop hook in the merged settings, whose blocks count
/// together with vigil's, and which the cap lifted would let block forever.
pub(super) fn block_cap(
    target: &Target,
    own: &Map<String, Value>,
    handlers: &[(String, usize, usize, String)],
) -> Vec<Finding> {
    if !handlers
        .iter()
        .any(|(e, _, _, c)| e == "Stop" && vigil_binary(c) == Some("stop-gate"))
    {
        return Vec::new();
    }
    let mut findings = vec![Finding::Ok(
        "Stop: Claude Code ends a turn after 8 blocks in a row; vigil records and tells it\nClaude Code ends a turn after 8 Stop blocks in a row while the model answers with text alone; a loop turn it ends is recorded interrupted (block_cap) and told, and the loop is cut if the session ends there (claude -p); `stop-gate loop run … -- claude …` lifts the cap for the client it starts (CLAUDE_CODE_STOP_HOOK_BLOCK_CAP=0), so vigil alone bounds the loop".into(),
    )];
    for (path, root, _) in layers(target, own) {
        for shown in other_stop_hooks(&root) {
            let named = if shown.chars().count() <= 32 {
                shown.as_str()
            } else {
                "another hook"
            };
            findings.push(Finding::Warn(format!(
                "Stop also runs {named}, whose blocks count towards the cap of 8 in a row\n{shown} ({}): its blocks count with vigil's towards Claude Code's cap of 8 in a row, and with the cap lifted (CLAUDE_CODE_STOP_HOOK_BLOCK_CAP=0) nothing would end a turn it keeps blocking",
                typed(&path, &target.project())
            )));
        }
    }
    findings
}

/// The Stop hooks of one settings layer that are not vigil's, as a person reads them: the
/// command (`` `./lint.sh` ``), or the handler's type (`a "prompt" hook`).
pub(super) fn other_stop_hooks(root: &Map<String, Value>) -> Vec<String> {
    root.get("hooks")
        .and_then(|hooks| hooks.get("Stop"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|group| group.get("hooks")?.as_array())
        .flatten()
        .filter_map(|handler| {
            let command = handler_line(handler);
            let command = command.as_deref();
            if command.is_some_and(|c| vigil_binary(c).is_some()) {
                return None;
            }
            Some(command.map_or_else(
                || format!("a {} hook", handler.get("type").unwrap_or(&Value::Null)),
                |c| format!("`{}`", defang::field_max(c, 80)),
            ))
        })
        .collect()
}

/// The Stop hooks that are not vigil's in the settings Claude Code merges for the project at
/// `project` (yours, the project's, the local and the managed file), each with its file.
pub(crate) fn other_stop_hooks_of(project: &Path) -> Vec<(PathBuf, String)> {
    let home = crate::sys::user::home();
    sandbox::layer_files(project, home.as_deref())
        .into_iter()
        .filter_map(|path| Some((sandbox::read_layer(&path)?, path)))
        .flat_map(|(root, path)| {
            other_stop_hooks(&root)
                .into_iter()
                .map(move |shown| (path.clone(), shown))
        })
        .collect()
}

/// Whether a session started in `project` would run vigil's gate on Stop: a stop-gate Stop
/// handler (not the waiter) in a settings file Claude Code merges for it, the vigil plugin
/// enabled there, or a stop-gate in Codex's hooks file of the project or the user. `loop start`
/// and `loop run` ask it in a linked worktree: the default settings file is untracked, so a
/// new worktree has none, and a loop there would never be judged.
pub(crate) fn gate_wired(project: &Path) -> bool {
    let home = crate::sys::user::home();
    let gate = |root: &Map<String, Value>| {
        vigil_handlers(root).iter().any(|(event, _, _, command)| {
            event == "Stop" && vigil_binary(command) == Some("stop-gate") && !is_waiter(command)
        })
    };
    let mut plugin = false;
    for path in sandbox::layer_files(project, home.as_deref()) {
        let Some(root) = sandbox::read_layer(&path) else {
            continue;
        };
        if gate(&root) {
            return true;
        }
        let entry = root
            .get("enabledPlugins")
            .and_then(Value::as_object)
            .and_then(|plugins| plugins.iter().find(|(name, _)| name.starts_with("vigil@")))
            .map(|(_, on)| on == &Value::Bool(true));
        if let Some(on) = entry {
            plugin = on;
        }
    }
    let codex = [
        Some(project.join(".codex/hooks.json")),
        home.map(|h| h.join(".codex/hooks.json")),
    ];
    plugin
        || codex
            .into_iter()
            .flatten()
            .filter_map(|path| sandbox::read_layer(&path))
            .any(|root| gate(&root))
}

/// Where else Claude Code would find vigil wired for the target's project (another settings
/// file it merges, or the vigil plugin enabled), as the user would type it: an install there
/// would run every hook twice.
pub(crate) fn wired_elsewhere(target: &Target, own: &Map<String, Value>) -> Option<String> {
    let project = target.project();
    let file = layers(target, own)
        .into_iter()
        .find(|(_, root, this)| !this && !vigil_handlers(root).is_empty());
    if let Some((path, _, _)) = file {
        return Some(typed(&path, &project));
    }
    plugin_enabled_in(target, own).map(|path| {
        format!(
            "the vigil plugin (enabled in {}; disable it there, or keep it)",
            typed(&path, &project)
        )
    })
}

/// The settings file that leaves the vigil plugin enabled for the project, when the merged
/// settings do: `enabledPlugins` read weakest first (yours, the project's, the local file,
/// the managed file), a later file's `vigil@…` entry overriding an earlier one's.
pub(super) fn plugin_enabled_in(target: &Target, own: &Map<String, Value>) -> Option<PathBuf> {
    let home = crate::sys::user::home();
    let here = paths::canonical(&target.file);
    let mut enabled = None;
    for path in sandbox::layer_files(&target.project(), home.as_deref()) {
        let root = if paths::canonical(&path) == here {
            Some(own.clone())
        } else {
            sandbox::read_layer(&path)
        };
        let entry = root.as_ref().and_then(|root| {
            root.get("enabledPlugins")?
                .as_object()?
                .iter()
                .find(|(name, _)| name.starts_with("vigil@"))
                .map(|(_, on)| on == &Value::Bool(true))
        });
        match entry {
            Some(true) => enabled = Some(path),
            Some(false) => enabled = None,
            None => {}
        }
    }
    enabled
}

/// With the vigil plugin enabled for the project: what its Stop hook checks here, the
/// project's own flags (`stop-gate config`), or nothing but a loop's declaration.
pub(super) fn plugin_gate(target: &Target, own: &Map<String, Value>) -> Option<Finding> {
    let path = plugin_enabled_in(target, own)?;
    let project = Project::resolve(None, Some(&target.project())).for_reading();
    let shown = typed(&path, &target.project());
    Some(match project_config::load(&project, &target.project()) {
        Ok(Some(flags)) => Finding::Ok(format!(
            "the vigil plugin (enabled in {shown}) gates with this project's flags\n{} (stop-gate config show)",
            flags.join(" ")
        )),
        Ok(None) => Finding::Warn(format!(
            "the vigil plugin checks nothing here; stop-gate config set --run CMD sets a check\nenabled in {shown}, it lets a stop through on a loop's declaration alone: no check command, no marker"
        )),
        Err(e) => Finding::Fail(format!(
            "the vigil plugin's flags for this project cannot be read: every stop is blocked\n{e}"
        )),
    })
}

/// vigil wired in two places Claude Code merges (this file and another settings file of the
/// project or the user, or the vigil plugin enabled): both run, so a loop would advance twice
/// per Stop and a check would run twice.
pub(super) fn twice_across_files(
    target: &Target,
    own: &Map<String, Value>,
    handlers: &[(String, usize, usize, String)],
) -> Vec<Finding> {
    let mut findings = Vec::new();
    let ours: std::collections::BTreeSet<(String, &str)> = handlers
        .iter()
        .filter_map(|(e, _, _, c)| Some((e.clone(), vigil_binary(c)?)))
        .collect();
    for (path, root, this) in layers(target, own) {
        let mut both: Vec<String> = if this {
            Vec::new()
        } else {
            vigil_handlers(&root)
                .iter()
                .filter_map(|(e, _, _, c)| {
                    let binary = vigil_binary(c)?;
                    ours.contains(&(e.clone(), binary))
                        .then(|| format!("{e} ({binary})"))
                })
                .collect()
        };
        both.dedup();
        if !both.is_empty() {
            findings.push(Finding::Warn(format!(
                "{} wires vigil too: a loop would advance twice per stop; keep one\nClaude Code runs both: {} run twice; keep vigil in one file (./install.sh --uninstall for the other)",
                typed(&path, &target.project()),
                both.join(", ")
            )));
        }
    }
    if let Some(path) = plugin_enabled_in(target, own)
        && !ours.is_empty()
    {
        findings.push(Finding::Warn(format!(
            "the vigil plugin is enabled too: a loop would advance twice per stop; keep one\nthe plugin is enabled in {} and this file wires vigil's hooks as well: both run; use the plugin or the install, not both",
            typed(&path, &target.project())
        )));
    }
    findings
}

/// Whether Claude Code, with every settings file it reads for this project, keeps the agent off
/// vigil's protected state (SPEC §9).
pub(super) fn protection(
    target: &Target,
    root: &Map<String, Value>,
    handlers: &[(String, usize, usize, String)],
) -> Vec<Finding> {
    let bin_dir = handlers
        .iter()
        .filter_map(|(_, _, _, command)| first_word(command))
        .map(PathBuf::from)
        .find(|path| path.is_absolute())
        .and_then(|path| path.parent().map(Path::to_path_buf));
    let on_path = handlers.iter().any(|(_, _, _, command)| {
        first_word(command).is_none_or(|word| !Path::new(&word).is_absolute())
    });
    let Some(mut guarded) = Guarded::here(bin_dir) else {
        return vec![Finding::Fail(
            "no state home: set $VIGIL_STATE_HOME (or $HOME) to an absolute path".into(),
        )];
    };
    guarded.on_path = on_path;
    let project = target.project();
    let files = sandbox::layer_files(&project, guarded.home.as_deref());
    let mut layers: Vec<_> = files
        .iter()
        .filter_map(|path| sandbox::read_layer(path))
        .collect();
    // A settings file of another name (given with --settings, as `claude --settings` reads
    // it) is the strongest layer short of the managed one.
    let here = paths::canonical(&target.file);
    let standard = files.iter().any(|path| paths::canonical(path) == here);
    if !standard {
        layers.push(root.clone());
    }
    let effective = Effective::of(&layers);
    protect::check(&effective, &project, &guarded)
}

/// Files the agent can plant that Claude Code runs with the user's rights (SPEC §9), each named;
/// under `--protect`, one that was not there at install fails.
pub(super) fn planted(target: &Target) -> Vec<Finding> {
    let protected = target
        .record()
        .load()
        .is_ok_and(|record| any_protected(&record));
    planted::findings(&target.project(), protected)
}
