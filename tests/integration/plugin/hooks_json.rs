//! The plugin's manifest and hooks/hooks.json: well formed, and only SessionStart goes through
//! the launcher; every other hook execs its binary.

use super::VERSION;
use crate::support::*;

#[test]
fn plugin_manifest_and_hooks_are_well_formed() {
    let manifest = json_of(&repo_path(".claude-plugin/plugin.json"));
    assert_eq!(manifest["name"], "vigil");
    for command in manifest["commands"].as_array().unwrap() {
        assert!(repo_path(command.as_str().unwrap()).is_file(), "{command}");
    }
    assert!(
        manifest.get("hooks").is_none(),
        "hooks/hooks.json is loaded by convention; naming it again makes Claude Code load it twice"
    );
    let marketplace = json_of(&repo_path(".claude-plugin/marketplace.json"));
    assert_eq!(marketplace["plugins"][0]["name"], "vigil");
    assert_eq!(marketplace["plugins"][0]["source"], "./");
}

#[test]
fn only_session_start_goes_through_the_launcher_and_every_other_hook_execs_its_binary() {
    let hooks = json_of(&repo_path("hooks/hooks.json"));
    let events = hooks["hooks"].as_object().unwrap();
    for (event, groups) in events {
        for hook in groups
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|g| g["hooks"].as_array().unwrap())
        {
            let command = hook["command"].as_str().unwrap();
            assert!(
                hook["args"].is_array(),
                "{event}: the exec form (args), so no shell runs: {hook}"
            );
            if event == "SessionStart" {
                assert_eq!(command, "${CLAUDE_PLUGIN_ROOT}/hooks/vigil-run");
                assert_eq!(hook["args"][0], "--install");
                assert!(
                    hook["timeout"].as_u64().is_some_and(|t| t >= 150),
                    "the fetch's own deadlines fit: {hook}"
                );
            } else {
                let binary = command
                    .strip_prefix(&format!("${{CLAUDE_PLUGIN_DATA}}/{VERSION}/bin/"))
                    .unwrap_or_else(|| panic!("{event} execs a binary of {VERSION}: {command}"));
                assert!(BINARIES.contains(&binary), "{event}: {binary}");
            }
        }
    }
}

/// The plugin's hooks are the event table's: every handler an install writes for Claude Code
/// whatever its flags (not the guard's or the settings hook of --protect, not SubagentStop),
/// each running its binary, with the waiter in the background; nothing else.
#[test]
fn the_plugin_runs_the_handlers_of_the_event_table() {
    use vigil::install::settings::Engine;
    use vigil::install::settings::wiring::{self, Args, When};
    let hooks = json_of(&repo_path("hooks/hooks.json"));
    let events = hooks["hooks"].as_object().unwrap();
    let mut wired: Vec<String> = Vec::new();
    for wiring in wiring::of(Engine::Claude) {
        if !matches!(wiring.when, When::Always | When::Recommended(_)) {
            continue;
        }
        let event = wiring.event.name();
        wired.push(event.to_string());
        let handlers: Vec<&serde_json::Value> = events
            .get(event)
            .unwrap_or_else(|| panic!("hooks.json has no {event}"))
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|g| g["hooks"].as_array().unwrap())
            .collect();
        let runs = |hook: &&serde_json::Value| {
            let command = hook["command"].as_str().unwrap();
            let words: Vec<&str> = hook["args"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap())
                .collect();
            // SessionStart goes through the launcher, which installs the binaries first.
            let (binary, args) = match words.split_first() {
                Some((&"--install", rest)) => (rest[0], &rest[1..]),
                _ => (command.rsplit('/').next().unwrap(), &words[..]),
            };
            let args_fit = match wiring.args {
                Args::None | Args::SyncNotes => args.is_empty(),
                Args::Checkpoint => args == ["--checkpoint"],
                // The plugin's gate takes the project's own flags.
                Args::Gate => args == ["--project-config"],
                Args::Wait => args == ["wait"] && hook["asyncRewake"] == true,
            };
            binary == wiring.binary && args_fit
        };
        assert!(
            handlers.iter().any(runs),
            "{event} does not run {} as the table says: {handlers:?}",
            wiring.binary
        );
    }
    let mut names: Vec<&String> = events.keys().collect();
    names.sort();
    wired.sort();
    wired.dedup();
    assert_eq!(names, wired.iter().collect::<Vec<_>>());
}
