//! `settings-merge check`, the doctor: a line per finding, `[ok]`, `[warn]` or `[fail]`. Here
//! the file's own lines, in order, and the waiter; beside it what the settings Claude Code
//! merges say (`merged`), each stop-gate handler's flags (`gate`), running each handler from a
//! bare environment (`run`), and Codex's trust and sandbox (`codex`).

mod codex;
mod gate;
mod merged;
mod own_hooks;
mod run;

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use crate::install::finding::Finding;
use crate::install::settings::wiring::{self, Args, When};
use crate::install::settings::{
    Engine, Target, handler_args, handler_args_text, is_waiter, parse, vigil_binary, vigil_handlers,
};
use crate::state::wakes;
use crate::sys::git;
use crate::sys::programs;
use codex::codex_trust;
use gate::{
    check_confinement, check_held, check_program, contracts, gate_config, gate_deadline,
    unbound_markers,
};
use merged::{block_cap, planted, plugin_enabled_in, plugin_gate, protection, twice_across_files};
pub(crate) use merged::{gate_wired, other_stop_hooks_of, wired_elsewhere};
use run::{active_shell_syntax, run_bare, stale_binary};

/// The doctor: does the file parse, is each vigil entry there, does each command run from a
/// bare environment, are there duplicates or stale binaries, will Codex run the hooks.
pub(crate) fn check(target: &Target, engine: Engine, codex_config: Option<&Path>) -> Vec<Finding> {
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
        findings.extend(own_hooks::findings(
            &target.project(),
            &merged::layers(target, &root),
        ));
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
    findings.extend(placed(&root, &handlers, &expected, &optional));
    findings.extend(gates(target, &root, &handlers));
    findings.extend(bare_runs(&handlers));
    findings.extend(path_inside(&target.project()));
    if engine == Engine::Codex {
        findings.extend(codex_trust(target, &root, codex_config));
    }
    findings
}

/// Each vigil handler in an event it belongs to (what an install wires, `expected`, or wires
/// when it applies, `optional`), and of the type that runs.
fn placed(
    root: &Map<String, Value>,
    handlers: &[(String, usize, usize, String)],
    expected: &[(&str, &str)],
    optional: &[&str],
) -> Vec<Finding> {
    let mut findings = Vec::new();
    let mut events: std::collections::BTreeSet<&str> = expected.iter().map(|(e, _)| *e).collect();
    events.extend(optional.iter().copied());
    for (event, g, h, command) in handlers {
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
    findings
}

/// Each stop-gate handler (not the waiter): its deadline, and what its flags say: the check's
/// program, the held tests, the confinement, the markers bound to no command.
fn gates(
    target: &Target,
    root: &Map<String, Value>,
    handlers: &[(String, usize, usize, String)],
) -> Vec<Finding> {
    let mut findings = Vec::new();
    for (event, g, h, command) in handlers {
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
    findings
}

/// Each handler's binary started from a bare environment, and any that is stale; a command
/// the doctor cannot check, or that would only check its flags, is said instead.
fn bare_runs(handlers: &[(String, usize, usize, String)]) -> Vec<Finding> {
    let mut findings = Vec::new();
    let home = crate::sys::user::home()
        .map(PathBuf::into_os_string)
        .unwrap_or_default();
    for (event, _, _, command) in handlers {
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

/// Each PATH entry inside the project (a `.venv/bin`, `node_modules/.bin`, or a relative
/// entry): a program the agent's shell puts there runs, with the user's rights, for every
/// command found through PATH. vigil's own programs are not among them (it finds git and sh in
/// the system's places); the user's hooks and an unheld check are. Not for the user's own
/// settings, whose "project" is the home directory.
fn path_inside(project: &Path) -> Vec<Finding> {
    if crate::sys::user::is_home(project) {
        return Vec::new();
    }
    programs::path_entries_inside(project)
        .into_iter()
        .map(|entry| {
            Finding::Warn(format!(
                "PATH holds {}, inside the project, where the agent's shell can put programs\nevery command found through PATH runs what is there with your rights (your hooks', an unheld check's; vigil finds its own git and sh in the system's places): start claude or codex with it off PATH and name the program by its path, or declare it for a held check (`stop-gate hold add --env DIR`)",
                if entry.as_os_str().is_empty() { "an empty entry".to_string() } else { format!("`{}`", entry.display()) }
            ))
        })
        .collect()
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
