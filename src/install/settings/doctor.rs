//! `settings-merge check`, the doctor: a line per finding, `[ok]`, `[warn]` or `[fail]`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::wiring::{self, Args, When};
use super::*;
use crate::gate::GateConfig;
use crate::gate::contract::Contract;
use crate::gate::contract::Source;
use crate::gate::project_config;
use crate::install::codex;
use crate::install::finding::typed;
use crate::install::planted;
use crate::install::protect;
use crate::install::protect::Guarded;
use crate::reach::confine;
use crate::reach::sandbox;
use crate::reach::sandbox::Effective;
use crate::state::project::Project;
use crate::state::wakes;
use crate::sys::files;
use crate::sys::git;
use crate::sys::paths;
use crate::sys::process;
use crate::verdict::defang;

/// The doctor: does the file parse, is each vigil entry there, does each command run from a
/// bare environment, are there duplicates or stale binaries, will Codex run the hooks.
pub fn check(target: &Target, engine: Engine, codex_config: Option<&Path>) -> Vec<Finding> {
    let mut findings = Vec::new();
    let shown = target.given.display();
    let root = match target.read() {
        Ok(Some(bytes)) => match parse(&bytes, &target.given) {
            Ok(root) => {
                findings.push(Finding::Ok(format!("{shown} parses")));
                root
            }
            Err(e) => return vec![Finding::Fail(e.to_string())],
        },
        Ok(None) => {
            return vec![Finding::Fail(format!(
                "{shown} does not exist; run ./install.sh"
            ))];
        }
        Err(e) => return vec![Finding::Fail(e.to_string())],
    };
    let handlers = vigil_handlers(&root);
    // What every install wires (the waiter aside, checked on its own below).
    let expected: Vec<(&str, &str)> = wiring::of(engine)
        .filter(|w| w.when == When::Always && w.args != Args::Wait)
        .map(|w| (w.event.name(), w.binary))
        .collect();
    // The plugin runs vigil's hooks itself: a file without them is as it should be.
    let plugin = engine == Engine::Claude
        && handlers.is_empty()
        && plugin_enabled_in(target, &root).is_some();
    for (event, binary) in &expected {
        let count = handlers
            .iter()
            .filter(|(e, _, _, c)| e == event && vigil_binary(c) == Some(binary) && !is_waiter(c))
            .count();
        match count {
            0 if plugin => findings.push(Finding::Ok(format!(
                "{event} runs {binary} through the vigil plugin"
            ))),
            0 => findings.push(Finding::Fail(format!(
                "{event} does not run {binary}; run ./install.sh"
            ))),
            1 => findings.push(Finding::Ok(format!("{event} runs {binary}"))),
            n => findings.push(Finding::Warn(format!(
                "{event} runs {binary} {n} times; remove the extra entries"
            ))),
        }
    }
    if root.get("disableAllHooks") == Some(&Value::Bool(true)) {
        findings.push(Finding::Fail(format!(
            "{shown} sets disableAllHooks: no hook runs, vigil's included; remove it to use vigil"
        )));
    }
    if engine == Engine::Claude && !plugin {
        findings.extend(waiter(&root, &handlers, &target.project()));
    }
    if engine == Engine::Claude {
        findings.extend(plugin_gate(target, &root));
        findings.extend(twice_across_files(target, &root, &handlers));
        findings.extend(block_cap(target, &root, &handlers));
        findings.extend(protection(target, &root, &handlers));
        findings.extend(planted(target));
    }
    // Wired when it applies (SubagentStop when the gate checks subagents' reports, the guard
    // and the settings hook under --protect), or always but missed only with a warning
    // (StopFailure, which records a turn that ended on an API error).
    let optional: Vec<&str> = wiring::of(engine)
        .filter(|w| w.when != When::Always)
        .map(|w| w.event.name())
        .collect();
    for wiring in wiring::of(engine) {
        if let When::Recommended(why) = wiring.when
            && !plugin
            && !handlers.iter().any(|(e, _, _, c)| {
                e == wiring.event.name() && vigil_binary(c) == Some(wiring.binary)
            })
        {
            findings.push(Finding::Warn(format!(
                "{} does not run {}; run ./install.sh again\n{why}",
                wiring.event.name(),
                wiring.binary
            )));
        }
    }
    findings.extend(contracts(target, &handlers));
    let mut events: std::collections::BTreeSet<&str> = expected.iter().map(|(e, _)| *e).collect();
    events.extend(optional.iter().copied());
    for (event, g, h, command) in &handlers {
        if !events.contains(event.as_str()) {
            findings.push(Finding::Warn(format!(
                "{event} runs vigil's {}, which does not belong there\n`{command}`: vigil's hooks belong to {}",
                vigil_binary(command).unwrap_or("hook"),
                events.iter().copied().collect::<Vec<_>>().join(", ")
            )));
        }
        let kind = root["hooks"][event][g]["hooks"][h].get("type");
        if kind != Some(&json!("command")) {
            findings.push(Finding::Fail(format!(
                "{event}: `{command}` has type {}, not \"command\", so it never runs",
                kind.map(Value::to_string)
                    .unwrap_or_else(|| "missing".into())
            )));
        }
    }
    for (event, g, h, command) in &handlers {
        if vigil_binary(command) == Some("stop-gate") && !is_waiter(command) {
            let timeout = root["hooks"][event][g]["hooks"][h].get("timeout");
            findings.push(gate_deadline(event, command, timeout));
            if let Some(config) = gate_config(command) {
                if let Some(run) = config.run.as_deref()
                    && matches!(event.as_str(), "Stop" | "SubagentStop")
                {
                    findings.push(check_program(event, run, &target.project()));
                    findings.extend(check_held(event, run, &target.project()));
                }
                findings.extend(check_confinement(event, &config, &target.project()));
                findings.extend(unbound_markers(event, &config));
            }
        }
    }
    let home = crate::sys::user::home()
        .map(PathBuf::into_os_string)
        .unwrap_or_default();
    for (event, _, _, command) in &handlers {
        // The gate's own command was read for these above, with its deadline.
        if vigil_binary(command) != Some("stop-gate") {
            if let Some(c) = handler_args_text(command).and_then(active_shell_syntax) {
                findings.push(Finding::Fail(format!(
                    "{event}: `{command}` has `{c}` outside single quotes, so the shell runs or expands something around vigil's command that the doctor cannot check; write it as plain or single-quoted words (settings-merge install does)"
                )));
                continue;
            }
            if handler_args(command).is_some_and(|args| args.iter().any(|a| a == "--check-config"))
            {
                findings.push(Finding::Fail(format!(
                    "{event}: `{command}` has --check-config, which makes it check its flags and exit without doing its work; remove it"
                )));
                continue;
            }
        }
        findings.push(run_bare(event, command, &home));
        if let Some(stale) = stale_binary(command) {
            findings.push(stale);
        }
    }
    if engine == Engine::Codex {
        findings.extend(codex_trust(target, &root, codex_config));
    }
    findings
}

/// The waiter (SPEC §10): `stop-gate wait` on Stop, in the background (`asyncRewake`), with a
/// timeout above the 55 minutes it waits; and the wakes of this project no live waiter reads.
fn waiter(
    root: &Map<String, Value>,
    handlers: &[(String, usize, usize, String)],
    project: &Path,
) -> Vec<Finding> {
    let waiters: Vec<_> = handlers
        .iter()
        .filter(|(_, _, _, c)| is_waiter(c))
        .collect();
    let mut findings = Vec::new();
    if waiters.is_empty() {
        findings.push(Finding::Warn(
            "Stop has no waiter: a settled loop is told only at the next prompt\nWithout `stop-gate wait` on Stop (asyncRewake), a loop that reports to this project is told only at the next session start or prompt; run ./install.sh to add it".into(),
        ));
    }
    findings.extend(waiting_here(project));
    for (event, g, h, command) in waiters {
        let handler = &root["hooks"][event][g]["hooks"][h];
        let timeout = handler.get("timeout").and_then(Value::as_u64);
        if event != "Stop" {
            findings.push(Finding::Fail(format!(
                "{event} runs the waiter, which belongs to Stop\n`{command}`"
            )));
        } else if handler.get("asyncRewake") != Some(&json!(true)) {
            findings.push(Finding::Fail(format!(
                "Stop: the waiter has no \"asyncRewake\": true, so every stop waits for it\n`{command}`: without asyncRewake Claude Code waits for the handler before the session goes on; run ./install.sh to write it again"
            )));
        } else if timeout.is_none_or(|t| t < crate::state::wakes::GIVE_UP_SECS + 5) {
            findings.push(Finding::Warn(format!(
                "Stop: the waiter's timeout is under its 55 minutes of waiting\n`{command}`: its timeout ({}) must be at least {} s, or Claude Code kills it before it gives up; run ./install.sh",
                timeout.map_or("none".to_string(), |t| format!("{t} s")),
                crate::state::wakes::GIVE_UP_SECS + 5
            )));
        } else {
            findings.push(Finding::Ok(
                "Stop: the waiter wakes this session when a loop reporting here settles".into(),
            ));
        }
    }
    findings
}

/// Who waits for the project's wakes (its main checkout's queue): two sessions share one queue,
/// each wake reaching only the first to ask; and wakes no live waiter will read.
fn waiting_here(project: &Path) -> Vec<Finding> {
    let Some(queue) = wakes::project_queue(&git::main_checkout(project)) else {
        return Vec::new();
    };
    let waiting = wakes::live_waiters(&queue);
    let queued = wakes::queued(&queue).len();
    let mut findings = Vec::new();
    if waiting.len() > 1 {
        findings.push(Finding::Warn(format!(
            "{} sessions wait for this project's wakes, and each wake reaches only one\nTwo commanders in one project share one queue: a settled loop is told to whichever waits first ({}); keep one, or name yours with `loop start --notify SESSION`",
            waiting.len(),
            waiting.iter().map(|w| w.session_id.as_str()).collect::<Vec<_>>().join(", ")
        )));
    }
    if queued > 0 && waiting.is_empty() {
        findings.push(Finding::Warn(format!(
            "{queued} wake{} of this project wait, and no session waits for them\nThey come as context at the next session start or prompt here; `stop-gate loop list` shows every loop's end",
            if queued == 1 { "" } else { "s" }
        )));
    }
    findings
}

/// vigil wired in two places Claude Code merges (this file and another settings file of the
/// project or the user, or the vigil plugin enabled): both run, so a loop would advance twice
/// per Stop and a check would run twice.
/// The settings Claude Code merges for the target's project, each file once: the target
/// first (as read already), then the others that read as settings; `true` marks the target.
fn layers(target: &Target, own: &Map<String, Value>) -> Vec<(PathBuf, Map<String, Value>, bool)> {
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
fn block_cap(
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
pub fn other_stop_hooks(root: &Map<String, Value>) -> Vec<String> {
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
pub fn other_stop_hooks_of(project: &Path) -> Vec<(PathBuf, String)> {
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
pub fn gate_wired(project: &Path) -> bool {
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
pub fn wired_elsewhere(target: &Target, own: &Map<String, Value>) -> Option<String> {
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
fn plugin_enabled_in(target: &Target, own: &Map<String, Value>) -> Option<PathBuf> {
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
fn plugin_gate(target: &Target, own: &Map<String, Value>) -> Option<Finding> {
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

fn twice_across_files(
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
fn protection(
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
fn planted(target: &Target) -> Vec<Finding> {
    let protected = target
        .record()
        .load()
        .is_ok_and(|record| any_protected(&record));
    planted::findings(&target.project(), protected)
}

/// What a handler's timeout is when it names none: both engines give a hook 600 s.
const ENGINE_HOOK_TIMEOUT_SECS: u64 = 600;

/// How far under the handler's timeout the gate's deadline must be (SPEC §9).
const HANDLER_MARGIN_SECS: u64 = 5;

/// Each `--contract FILE` of a stop-gate handler: read and compiled as the gate would, and
/// named when it is inside the project, where the agent can rewrite it. A gate that checks
/// subagents' reports on Stop alone never sees one: SubagentStop must run it.
fn contracts(target: &Target, handlers: &[(String, usize, usize, String)]) -> Vec<Finding> {
    let project = target.project();
    let mut findings = Vec::new();
    let mut subagent_gate = false;
    let mut wanted = false;
    for (event, _, _, command) in handlers {
        if vigil_binary(command) != Some("stop-gate") {
            continue;
        }
        let Some(Ok(Some(config))) = handler_args(command)
            .map(|args| GateConfig::parse(args.into_iter().map(Into::into).collect()))
        else {
            continue;
        };
        if event == "SubagentStop" {
            subagent_gate = true;
        }
        let Some(source) = &config.contract else {
            continue;
        };
        wanted = true;
        if let Source::File(path) = source
            && path.is_relative()
            && crate::sys::user::home().is_some_and(|home| project == home)
        {
            findings.push(Finding::Fail(format!(
                "{event}: --contract {} is relative in your user settings, so each project's own file of that name is read (one the agent can write); give an absolute path",
                path.display()
            )));
            continue;
        }
        match Contract::load(source, &project) {
            Ok(_) => findings.push(Finding::Ok(format!(
                "{event}: {} is a valid JSON Schema (self-contained, nothing fetched)",
                source.describe()
            ))),
            Err(e) => findings.push(Finding::Fail(format!(
                "{event}: {e}; every subagent's stop would be blocked"
            ))),
        }
        if let Source::File(path) = source {
            let full = if path.is_absolute() {
                path.clone()
            } else {
                project.join(path)
            };
            if paths::canonical(&full).starts_with(paths::canonical(&project)) {
                findings.push(Finding::Warn(format!(
                    "{event}: the contract is inside the project, where the agent can rewrite it\n{}: it shapes subagents' reports; it approves nothing",
                    typed(path, &target.project())
                )));
            }
        }
    }
    if wanted && !subagent_gate {
        findings.push(Finding::Warn(
            "stop-gate has --contract, but SubagentStop does not run it; run ./install.sh with --contract\nso no subagent's report is checked".into(),
        ));
    }
    findings
}

/// The deadline rule of SPEC §9 for one stop-gate handler, its flags read by stop-gate's own
/// parser: check timeout + reserve <= deadline <= the handler's timeout - 5 s. A flag the gate
/// would refuse (a typo blocks every stop with a config error) fails here first.
fn gate_deadline(event: &str, command: &str, timeout: Option<&Value>) -> Finding {
    if let Some(c) = handler_args_text(command).and_then(active_shell_syntax) {
        return Finding::Fail(format!(
            "{event}: the stop-gate command has `{c}` outside single quotes, so the shell runs or expands something before or around the gate that the doctor cannot check; write its arguments as plain or single-quoted words (settings-merge install does)"
        ));
    }
    let Some(args) = handler_args(command) else {
        return Finding::Warn(format!(
            "{event}: cannot read stop-gate's flags, so its deadline is not checked\n`{command}`"
        ));
    };
    if args.iter().any(|a| a == "--check-config") {
        return Finding::Fail(format!(
            "{event}: `{command}` has --check-config, which makes stop-gate check its flags and exit 0: it allows every stop without checking; remove it"
        ));
    }
    let config = match GateConfig::parse(args.into_iter().map(Into::into).collect()) {
        Ok(Some(config)) => config,
        Ok(None) => {
            return Finding::Fail(format!(
                "{event}: `{command}` asks stop-gate for its help text, so it never gates"
            ));
        }
        Err(e) => {
            return Finding::Fail(format!(
                "{event}: stop-gate would refuse its flags and block every stop: {e}"
            ));
        }
    };
    let handler = match timeout {
        None => ENGINE_HOOK_TIMEOUT_SECS,
        Some(value) => match value.as_u64() {
            Some(secs) => secs,
            None => {
                return Finding::Fail(format!(
                    "{event}: the handler's timeout {value} is not a whole number of seconds"
                ));
            }
        },
    };
    let deadline = config.deadline.as_secs();
    if deadline + HANDLER_MARGIN_SECS > handler {
        return Finding::Fail(format!(
            "{event}: stop-gate's --deadline {deadline} s is not {HANDLER_MARGIN_SECS} s under the handler's timeout of {handler} s, so the engine can kill it first and let the stop through unchecked; set \"timeout\": {} or lower --deadline to {}",
            deadline + HANDLER_MARGIN_SECS,
            handler.saturating_sub(HANDLER_MARGIN_SECS)
        ));
    }
    // Only a Stop or SubagentStop handler with --run has a check to speak of.
    let checks = config.run.is_some() && matches!(event, "Stop" | "SubagentStop");
    if !checks {
        return Finding::Ok(format!(
            "{event}: stop-gate answers within {deadline} s, under the handler's timeout of {handler} s"
        ));
    }
    Finding::Ok(format!(
        "{event}: stop-gate's check gets {} s and the gate answers within {deadline} s, under the handler's timeout of {handler} s",
        config.timeout.as_secs()
    ))
}

/// A `--require-marker CHECK` with no `=CMD` binds no command (SPEC §5): any passed marker of
/// CHECK for this content counts, whatever wrote it.
fn unbound_markers(event: &str, config: &GateConfig) -> Vec<Finding> {
    config
        .markers
        .iter()
        .filter(|required| required.command.is_none())
        .map(|required| {
            let check = &required.check;
            Finding::Warn(format!(
                "{event}: --require-marker {check} names no command; give it as {check}=CMD\na passed marker of `{check}` for this content counts whatever command wrote it (`true` included); CMD is the command your protected writer runs"
            ))
        })
        .collect()
}

/// The gate's flags in a stop-gate handler's command, when they are words the gate takes.
fn gate_config(command: &str) -> Option<GateConfig> {
    let args = handler_args(command)?;
    GateConfig::parse(args.into_iter().map(Into::into).collect()).ok()?
}

/// What `sh` starts its command with without looking anything up: its own words.
const SHELL_WORDS: &[&str] = &[
    "!", ".", ":", "[", "[[", "{", "alias", "break", "builtin", "case", "cd", "command",
    "continue", "declare", "echo", "eval", "exec", "exit", "export", "false", "for", "function",
    "getopts", "hash", "if", "let", "local", "printf", "pwd", "read", "readonly", "return", "set",
    "shift", "source", "test", "times", "trap", "true", "type", "typeset", "ulimit", "umask",
    "unset", "until", "wait", "while",
];

/// The program the check starts with, looked up as `sh -c` at the project's top will look it
/// up when the hook runs: a path from the project's top, a name on PATH (the hook has the
/// environment of the shell that starts the engine, as this one does). A check whose program
/// is not there fails with 127 at every stop.
fn check_program(event: &str, run: &str, project: &Path) -> Finding {
    let short = defang::field_max(run, 24);
    let Some(words) = shlex::split(run) else {
        return Finding::Fail(format!(
            "{event}: stop-gate's check `{short}` has an unclosed quote: sh refuses it at every stop"
        ));
    };
    // `NAME=value` words before the program set its environment.
    let is_assignment = |word: &&String| {
        word.split_once('=').is_some_and(|(name, _)| {
            !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c == '_' || c.is_ascii_alphanumeric())
        })
    };
    let Some(program) = words.iter().find(|w| !is_assignment(w)) else {
        return Finding::Ok(format!(
            "{event}: stop-gate's check `{short}` only sets variables; it runs nothing"
        ));
    };
    let shown = defang::field_max(program, 40);
    if SHELL_WORDS.contains(&program.as_str()) {
        return Finding::Ok(format!(
            "{event}: stop-gate's check starts with the shell's own `{shown}`\nwhat runs after it is looked up when the check runs; the doctor looks no further"
        ));
    }
    if program.contains(['$', '`', '(', ')', '*', '?', '<', '>', '|', '&', ';']) {
        return Finding::Ok(format!(
            "{event}: stop-gate's check starts with `{shown}`, which the shell expands\nso what it runs is known only when the check runs; the doctor looks no further"
        ));
    }
    if program.contains('/') {
        // sh expands a leading `~/` to $HOME; any other path is from the project's top.
        let path = match (program.strip_prefix("~/"), std::env::var_os("HOME")) {
            (Some(rest), Some(home)) => Path::new(&home).join(rest),
            _ => project.join(program),
        };
        return if files::is_executable(&path) {
            Finding::Ok(format!(
                "{event}: stop-gate's check runs {shown}, which is there and executable"
            ))
        } else if path.exists() {
            Finding::Fail(format!(
                "{event}: stop-gate's check runs {shown}, which is not executable: every stop is blocked (exit 126)\nrun chmod +x on it, or give --run the interpreter (`sh {shown}`)"
            ))
        } else {
            Finding::Fail(format!(
                "{event}: stop-gate's check runs {shown}, which is not there: every stop is blocked (exit 127)\n{} does not exist (a relative path is from the project's top, where the check runs)",
                path.display()
            ))
        };
    }
    match files::find_on_path(program) {
        Some(found) => Finding::Ok(format!(
            "{event}: stop-gate's check runs {shown}, found on PATH: {}",
            found.display()
        )),
        None => Finding::Fail(format!(
            "{event}: stop-gate's check runs `{shown}`, which is not on PATH: every stop is blocked (exit 127)\nthe hook has the PATH of the shell that starts claude or codex; this one is {}\ninstall {shown}, or give --run its absolute path",
            std::env::var("PATH").unwrap_or_default()
        )),
    }
}

/// Whether the tests the check runs are held (SPEC §11), and how the check could read its
/// runner's configuration from its own command line rather than from files the agent edits:
/// the doctor proposes pinning it, never holding a whole manifest.
fn check_held(event: &str, run: &str, project: &Path) -> Vec<Finding> {
    let short = defang::field_max(run, 24);
    let mut findings = Vec::new();
    let project = crate::state::project::Project::at(project).for_reading();
    match crate::state::hold::load(&project) {
        Ok(Some(hold)) => {
            let patterns: Vec<&str> = hold.patterns.iter().map(|p| p.pattern.as_str()).collect();
            let by_name = hold.tests.as_ref().is_some_and(|t| t.any());
            findings.push(Finding::Ok(format!(
                "{event}: the human holds {} files under {} for `{short}`{}",
                hold.files.len(),
                defang::field_max(&patterns.join(", "), 40),
                if by_name { ", its tests judged by name" } else { "" }
            )));
        }
        Ok(None) => findings.push(Finding::Warn(format!(
            "{event}: stop-gate's check `{short}` runs the tests as the agent leaves them
nothing is held: an agent that deletes, skips or edits a failing test passes this check; hold the tests with `stop-gate hold add tests/ --baseline '{run}'` (or /vigil-hold)"
        ))),
        Err(e) => findings.push(Finding::Fail(format!(
            "{event}: the human's hold cannot be read: every stop is blocked
{e}"
        ))),
    }
    let Some(words) = shlex::split(run) else {
        return findings;
    };
    let has = |word: &str| words.iter().any(|w| w == word);
    let starts = |prefix: &str| words.iter().any(|w| w.starts_with(prefix));
    let mut pin = Vec::new();
    if (has("npm") || has("yarn") || has("pnpm")) && has("test") {
        pin.push("`npm test` runs package.json's script, which the agent edits: call the runner itself (node --test tests/, npx jest -c jest.config.held.js)");
    }
    if has("make") {
        pin.push("`make` runs the Makefile, which the agent edits (a `-` before a command ignores its failure): call the runner itself");
    }
    let pytest = words
        .iter()
        .any(|w| w == "pytest" || w.ends_with("/pytest"));
    if pytest {
        if !(has("-c") || starts("--config-file") || starts("-c")) {
            pin.push("pytest reads pytest.ini, pyproject.toml, tox.ini and setup.cfg, which the agent edits: name a held one (-c tests/pytest.ini)");
        }
        if !starts("addopts=")
            && !words
                .windows(2)
                .any(|w| w[0] == "-o" && w[1].starts_with("addopts"))
        {
            pin.push("pytest takes more options from addopts (a deselect): give -o addopts= on the check's line");
        }
    }
    let python = words.iter().any(|w| w.starts_with("python"));
    if python && (pytest || has("unittest")) && !has("-P") && !has("-I") {
        pin.push("python puts the project first on sys.path, so a pytest.py, unittest.py or sitecustomize.py there runs instead: give python3 -P");
    }
    if !pin.is_empty() {
        findings.push(Finding::Warn(format!(
            "{event}: stop-gate's check `{short}` takes its runner's configuration from files the agent can edit
{}
pin it on the check's own command line; holding a whole manifest (pyproject.toml, package.json, Cargo.toml, a Makefile) would hold the project's code too",
            pin.join("\n")
        )));
    }
    findings
}

/// Whether the check of a stop-gate handler that has one runs confined (SPEC §9), and if not,
/// what that means: said every stop, or (with Claude Code's sandbox on) every stop blocked.
fn check_confinement(event: &str, config: &GateConfig, project: &Path) -> Option<Finding> {
    let run = config.run.as_deref()?;
    let reach = match (config.check_network, config.check_write.is_empty()) {
        (false, true) => String::new(),
        (network, _) => {
            let mut more: Vec<String> = config
                .check_write
                .iter()
                .map(|d| d.display().to_string())
                .collect();
            if network {
                more.push("the network".to_string());
            }
            format!(", and {}", more.join(", "))
        }
    };
    // The command as the headline names it: short, the whole of it in the detail.
    let short = defang::field_max(run, 24);
    let why = match confine::working_sandbox() {
        Ok(bwrap) => {
            return Some(Finding::Ok(format!(
                "{event}: stop-gate's check `{short}` runs confined ({})\nit writes only the project (not .claude, .git, .mcp.json…) and a private /tmp{reach}, and sees no state home, key or ~/.claude",
                bwrap.display()
            )));
        }
        Err(unavailable) => unavailable.message().to_string(),
    };
    Some(if sandbox::sandbox_on(project) {
        Finding::Fail(format!(
            "{event}: stop-gate's check `{short}` cannot be confined: every stop is blocked\n{why}; with Claude Code's sandbox on it is never run unconfined, so every stop is blocked until it can be"
        ))
    } else {
        Finding::Warn(format!(
            "{event}: stop-gate's check `{short}` runs unconfined, with your rights\n{why}: the agent's code in it can write anything you can; every stop says so"
        ))
    })
}

/// The first character a POSIX shell would act on rather than pass on as part of a word:
/// expansions (`$`, a backtick, also inside double quotes), operators and globs outside
/// quotes. `None` for text that is plain and quoted words only, as `shell_quote` writes them.
fn active_shell_syntax(text: &str) -> Option<char> {
    let mut chars = text.chars();
    let mut quote = None;
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some('\''), '\'') | (Some('"'), '"') => quote = None,
            (Some('\''), _) => {}
            (Some('"'), '\\') | (None, '\\') => {
                chars.next();
            }
            (Some('"'), '$' | '`') => return Some(c),
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (
                None,
                '$' | '`' | ';' | '|' | '&' | '<' | '>' | '(' | ')' | '\n' | '*' | '?' | '[' | '~'
                | '#',
            ) => return Some(c),
            (None, _) => {}
        }
    }
    None
}

/// Finds and starts a hook's binary the way the hook would, but from a bare environment: a
/// command that works only with the user's shell PATH is reported.
fn run_bare(event: &str, command: &str, home: &std::ffi::OsStr) -> Finding {
    // Never the handler's own text (a committed file could append anything to it): the binary
    // it names, found the way the handler finds it, asked for its version.
    let Some(binary) = vigil_binary(command) else {
        return Finding::Fail(format!("{event}: `{command}` is not a vigil command"));
    };
    // Its flags, each quoted as a word of its own, go to the binary's own parser
    // (`--check-config` parses and exits, reading nothing): what would refuse them at every
    // event fails here first.
    let flags: String = handler_args(command)
        .unwrap_or_default()
        .iter()
        .map(|word| format!(" {}", shell_quote(word)))
        .collect();
    let asked = format!("{flags} --check-config");
    let script = if command.trim_start().starts_with("for b in") {
        self::command(&Binaries::Search, binary, &asked)
    } else {
        match first_word(command.trim_start()) {
            Some(path) => format!("{}{asked}", shell_quote(&path)),
            None => return Finding::Fail(format!("{event}: `{command}` cannot be read")),
        }
    };
    let mut cmd = if cfg!(windows) {
        // Exec form, as Claude Code runs it there: the program the handler names, with no
        // shell, and only the variables Windows itself needs.
        let Some(program) = first_word(command.trim_start()) else {
            return Finding::Fail(format!("{event}: `{command}` cannot be read"));
        };
        let mut cmd = std::process::Command::new(program);
        cmd.args(handler_args(command).unwrap_or_default())
            .arg("--check-config")
            .env_clear();
        for name in ["SystemRoot", "USERPROFILE", "LOCALAPPDATA", "TEMP", "TMP"] {
            if let Some(value) = std::env::var_os(name) {
                cmd.env(name, value);
            }
        }
        cmd
    } else {
        let mut cmd = std::process::Command::new("sh");
        cmd.arg("-c")
            .arg(script)
            .env_clear()
            .env("HOME", home)
            .env("PATH", "/usr/bin:/bin");
        cmd
    };
    cmd.env("VIGIL_DISABLE", "1");
    match process::run(cmd, Duration::from_secs(10), true, 4096) {
        Ok(done)
            if done.outcome.success()
                && !String::from_utf8_lossy(&done.output).contains("not installed") =>
        {
            Finding::Ok(format!(
                "{event}: {binary} runs from a bare environment\n`{command}`"
            ))
        }
        Ok(done) => {
            let said = String::from_utf8_lossy(&done.output);
            let first = said
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("no output");
            if let Some(why) = first.strip_prefix(&format!("{binary}: ")) {
                // The gate's flags were read with its parser already (`gate_deadline`), and
                // one line is enough for one typo.
                let told = binary == "stop-gate"
                    && handler_args(command).is_some_and(|args| {
                        GateConfig::parse(args.into_iter().map(Into::into).collect()).is_err()
                    });
                if told {
                    return Finding::Ok(format!(
                        "{event}: {binary} runs from a bare environment\n`{command}`"
                    ));
                }
                return Finding::Fail(format!(
                    "{event}: {binary} refuses the flags of `{command}`, so it fails at every event: {why}"
                ));
            }
            Finding::Fail(format!(
                "{event}: `{command}` does not run from a bare environment (PATH=/usr/bin:/bin): {first}; run ./install.sh, which writes absolute paths"
            ))
        }
        Err(e) => Finding::Fail(format!("{event}: cannot run sh: {e}")),
    }
}

/// A binary named by absolute path that reports another version than this settings-merge:
/// installed from an older (or newer) build.
fn stale_binary(command: &str) -> Option<Finding> {
    let path = if let Some(rest) = command.strip_prefix('\'') {
        rest.split('\'').next()?.to_string()
    } else {
        command.split_whitespace().next()?.to_string()
    };
    if !path.starts_with('/') {
        return None;
    }
    let mut cmd = std::process::Command::new(&path);
    cmd.arg("--version");
    let done = process::run(cmd, Duration::from_secs(5), true, 1024).ok()?;
    let said = String::from_utf8_lossy(&done.output);
    let version = said.split_whitespace().nth(1)?;
    (version != env!("CARGO_PKG_VERSION")).then(|| {
        Finding::Warn(format!(
            "a stale binary: {} is version {version}; run ./install.sh again\n{path} is version {version}, this settings-merge is {}",
            Path::new(&path).file_name().unwrap_or_default().to_string_lossy(),
            env!("CARGO_PKG_VERSION")
        ))
    })
}

/// What the agent's commands can reach under Codex (SPEC §9): its `sandbox_mode` (the trusted
/// project's `.codex/config.toml` over the user's config) and approval policy.
fn codex_sandbox(config: &Path, project: &Path) -> Finding {
    let approval = codex::approval_policy(config)
        .map(|policy| format!(", approval_policy = \"{policy}\""))
        .unwrap_or_default();
    match codex::sandbox_mode(config, project) {
        Some((mode, file)) if mode == "workspace-write" || mode == "read-only" => {
            Finding::Ok(format!(
                "Codex runs the agent's commands in its {mode} sandbox ({}{approval}): they write only the project (not .git or .codex) and /tmp, so vigil's state home is out of their reach (a `codex` started with --dangerously-bypass-approvals-and-sandbox or -s danger-full-access overrides it)",
                file.display()
            ))
        }
        Some((mode, file)) => Finding::Warn(format!(
            "Codex runs the agent's commands with your rights; ./install.sh --codex --protect\nsandbox_mode = \"{mode}\" in {}{approval}: they can write vigil's state home, its loops, markers and trusted keys; --protect sets workspace-write for this project",
            file.display()
        )),
        None => Finding::Warn(format!(
            "no config sets Codex's sandbox_mode; ./install.sh --codex --protect sets one\nwhat the agent's commands can reach depends on how codex is started{approval}; --protect sets workspace-write for this project"
        )),
    }
}

/// Codex runs a hook from hooks.json only once the user trusts it: a `[hooks.state."<key>"]`
/// entry in its config.toml whose `trusted_hash` is the hash of the hook as it is now.
fn codex_trust(target: &Target, root: &Map<String, Value>, config: Option<&Path>) -> Vec<Finding> {
    let trusted = config.map(codex::trusted_hashes).unwrap_or_default();
    let mut findings = Vec::new();
    // A project's .codex/ (not ~/.codex/) is read only for a project the user trusts.
    let project = target.project();
    let home = crate::sys::user::home();
    if target.given_dir().file_name().and_then(|n| n.to_str()) == Some(".codex")
        && home.as_deref() != Some(project.as_path())
    {
        let canonical = std::fs::canonicalize(&project).unwrap_or(project);
        if config.is_some_and(|c| codex::project_trusted(c, &canonical)) {
            findings.push(Finding::Ok(format!(
                "Codex trusts the project {}",
                canonical.display()
            )));
        } else {
            findings.push(Finding::Warn(format!(
                "Codex reads .codex/ only for a trusted project: trust it when codex asks\nor set [projects.\"{}\"] trust_level = \"trusted\" in config.toml",
                canonical.display()
            )));
        }
    }
    if let Some(config) = config {
        findings.push(codex_sandbox(config, &target.project()));
    }
    let (mut good, mut changed, mut untrusted) = (Vec::new(), Vec::new(), Vec::new());
    for (key, hash) in codex_trust_entries(target, root) {
        match trusted.get(&key) {
            Some(stored) if *stored == hash => good.push(key),
            Some(_) => changed.push(key),
            None => untrusted.push(key),
        }
    }
    if !good.is_empty() {
        findings.push(Finding::Ok(format!(
            "Codex trusts vigil's {} hooks\n{}",
            good.len(),
            good.join("\n")
        )));
    }
    for (keys, why) in [
        (changed, "that changed since they were trusted"),
        (untrusted, "until you trust them"),
    ] {
        if !keys.is_empty() {
            findings.push(Finding::Warn(format!(
                "Codex will skip {} of vigil's hooks {why}; ./install.sh --codex --trust\n{}\n(or approve them in codex's /hooks)",
                keys.len(),
                keys.join("\n")
            )));
        }
    }
    findings
}
