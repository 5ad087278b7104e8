//! SPEC §8, Codex trust: `install --codex --trust` writes `hooks.state.<key>.trusted_hash` in
//! Codex's config.toml (the hash over Codex's normalized identity) without disturbing the rest,
//! `check` reports each hook Codex will skip, uninstall removes them; never for Claude
//! settings.

use serde_json::json;

use super::{merge, project_with};
use crate::support::*;

#[test]
fn check_says_codex_will_skip_hooks_it_has_not_trusted() {
    let (dir, path, _) = project_with("codex-hooks.json");
    ok(merge("install", &path, true, &[]));
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "model = \"gpt-5\"\n").unwrap();
    let out = merge(
        "check",
        &path,
        true,
        &["--codex-config", config.to_str().unwrap(), "--verbose"],
    );
    assert_contains!(stdout_of(&out), "[warn] Codex will skip ");
    assert_contains!(stdout_of(&out), "hooks until you trust them");
    assert_contains!(stdout_of(&out), ":stop:1:0\n");
    // The project itself must be trusted too, or Codex never reads its .codex/.
    assert_contains!(stdout_of(&out), "only for a trusted project");
    write_codex_config_trusting(&config, "model = \"gpt-5\"\n", dir.path());
    let out = merge(
        "check",
        &path,
        true,
        &["--codex-config", config.to_str().unwrap()],
    );
    assert_contains!(stdout_of(&out), "[ok] Codex trusts the project");
}

#[test]
fn codex_trust_is_written_checked_and_removed_without_touching_the_rest_of_config_toml() {
    let (dir, path, _) = project_with("codex-hooks.json");
    let config = dir.path().join("config.toml");
    let original =
        "# mine\nmodel = \"gpt-5\"\n\n[projects.\"/somewhere\"]\ntrust_level = \"trusted\"\n";
    std::fs::write(&config, original).unwrap();
    let config_flag = ["--codex-config", config.to_str().unwrap()];
    ok(merge(
        "install",
        &path,
        true,
        &[&config_flag[..], &["--trust"]].concat(),
    ));
    let text = std::fs::read_to_string(&config).unwrap();
    assert_starts_with!(text, original, "the user's config is kept");
    assert_contains!(text, "[hooks.state.\"");
    assert_contains!(text, "trusted_hash = \"sha256:");
    let report = stdout_of(&merge("check", &path, true, &config_flag));
    assert_contains!(report, "[ok] Codex trusts");
    assert_lacks!(report, "Codex will skip");
    // A hook changed since it was trusted is named.
    let mut hooks = json_of(&path);
    let stop = hooks["hooks"]["Stop"]
        .as_array_mut()
        .unwrap()
        .last_mut()
        .unwrap();
    stop["hooks"][0]["timeout"] = json!(5);
    std::fs::write(&path, serde_json::to_vec_pretty(&hooks).unwrap()).unwrap();
    assert_contains!(
        stdout_of(&merge("check", &path, true, &config_flag)),
        "hooks that changed since they were trusted"
    );
    // Uninstall takes vigil's trust entries out again, and only those.
    ok(merge("uninstall", &path, true, &[]));
    assert_eq!(std::fs::read_to_string(&config).unwrap(), original);
}

#[test]
fn the_trust_hash_is_taken_over_codexs_normalized_identity() {
    // The handler as settings-merge writes it for Codex's Stop, hashed the way Codex does:
    // sorted keys, no whitespace, the timeout explicit, async present.
    let handler = json!({"type": "command", "command": "/opt/vigil/bin/stop-gate"});
    let canonical = vigil::install::codex::canonical_identity("Stop", None, &handler);
    assert_eq!(
        canonical,
        r#"{"event_name":"stop","hooks":[{"async":false,"command":"/opt/vigil/bin/stop-gate","timeout":600,"type":"command"}]}"#
    );
    assert_eq!(
        vigil::install::codex::trust_hash("Stop", None, &handler),
        format!(
            "sha256:{}",
            vigil::sys::digest::sha256_hex(canonical.as_bytes())
        )
    );
}

#[test]
fn trust_is_refused_for_claude_settings() {
    let (_dir, path, _) = project_with("claude-user-hooks.json");
    let out = merge("install", &path, false, &["--trust"]);
    usage_error(&out, "settings-merge");
}
