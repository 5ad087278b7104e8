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
    let mut names: Vec<&str> = events.keys().map(String::as_str).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "PreCompact",
            "SessionEnd",
            "SessionStart",
            "Stop",
            "StopFailure",
            "UserPromptSubmit"
        ]
    );
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
