//! The limits wired where a loop is started or a hook installed: the slash command takes them,
//! install and the plugin wire StopFailure and (with a contract) SubagentStop.

use serde_json::{Value, json};

use crate::support::*;

#[test]
fn install_wires_stop_failure_and_with_a_contract_subagent_stop_and_uninstall_restores() {
    let p = Project::new();
    let settings = p.path().join(".claude/settings.local.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    let original = "{\n  \"model\": \"opus\"\n}\n";
    std::fs::write(&settings, original).unwrap();
    ok(p.merge(
        "install",
        &words("--contract default --stall-after 4 --max-tokens 2m"),
    ));
    let value = json_of(&settings);
    let failure = value["hooks"]["StopFailure"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap();
    assert!(
        failure.ends_with("session-end-handoff --checkpoint"),
        "{failure}"
    );
    let subagent = value["hooks"]["SubagentStop"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap();
    assert_contains!(subagent, "--contract default");
    assert_contains!(subagent, "--stall-after 4");
    let check = p.merge("check", &[]);
    let text = stdout_of(&check);
    assert!(check.status.success(), "{text}");
    assert_contains!(
        text,
        "[ok] SubagentStop: the default contract is a valid JSON Schema"
    );
    assert!(!text.contains("StopFailure does not run"), "{text}");
    ok(p.merge("uninstall", &[]));
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), original);
}

#[test]
fn the_slash_command_takes_the_limits_too() {
    let p = Project::new();
    let said = p.prompt(
        "s1",
        "/vigil-loop Fix the parser --max-iterations 5 --completion-promise DONE --stall-after 2 --max-duration 2h --max-tokens 500k",
    );
    assert_contains!(
        said.to_string(),
        "at most 2h, at most 500000 tokens",
        "{said}"
    );
    let state = p.loop_state("s1");
    assert_eq!(
        state["limits"],
        json!({"stall_after": 2, "max_duration_secs": 7200, "max_tokens": 500000})
    );
}

#[test]
fn the_plugin_wires_the_events_install_wires_stop_failure_included() {
    let p = Project::new();
    let settings = p.path().join(".claude/settings.local.json");
    ok(p.merge("install", &[]));
    let events = |value: &Value| -> Vec<String> {
        let mut names: Vec<String> = value["hooks"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        names.sort();
        names
    };
    let installed = json_of(&settings);
    let plugin: Value =
        serde_json::from_str(&std::fs::read_to_string(repo_path("hooks/hooks.json")).unwrap())
            .unwrap();
    assert_eq!(events(&plugin), events(&installed));
    assert!(events(&plugin).contains(&"StopFailure".to_string()));
}
