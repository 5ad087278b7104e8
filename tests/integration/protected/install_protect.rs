//! SPEC §9, `settings-merge install --protect`: Claude Code's sandbox on, unsandboxed retries
//! off, Edit and Write denied the state home (Codex: its workspace-write sandbox), taken back
//! by uninstall; and the doctor saying whether the state is out of the agent's reach, and why
//! not.

use serde_json::{Value, json};

use crate::support::*;

use super::project_builder;

/// settings-merge ARGS in the project, with its HOME.
fn merge_in(p: &Project, args: &[&str]) -> std::process::Output {
    settings_merge()
        .env("HOME", p.home())
        .args(args)
        .current_dir(p.path())
        .output()
        .unwrap()
}

#[test]
fn install_protect_turns_the_sandbox_on_and_uninstall_takes_back_exactly_that() {
    let dir = project_builder().home().build();
    let settings = dir.path().join(".claude/settings.local.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    let original = "{\n  \"sandbox\": {\"network\": {\"allowLocalBinding\": true}},\n  \"permissions\": {\"deny\": [\"Read(./.env)\"]},\n  \"model\": \"opus\"\n}\n";
    std::fs::write(&settings, original).unwrap();
    let file = settings.to_str().unwrap();
    let bin = bin_dir();
    let bin = bin.to_str().unwrap();
    let install = ["install", "--settings", file, "--bin-dir", bin, "--protect"];
    let out = ok(merge_in(&dir, &install));
    assert!(String::from_utf8_lossy(&out.stdout).contains("--protect"));
    let value: Value = serde_json::from_slice(&std::fs::read(&settings).unwrap()).unwrap();
    assert_eq!(value["sandbox"]["enabled"], true);
    assert_eq!(value["sandbox"]["allowUnsandboxedCommands"], false);
    assert_eq!(value["sandbox"]["failIfUnavailable"], true);
    assert_eq!(
        value["sandbox"]["network"]["allowLocalBinding"], true,
        "the user's keys stay"
    );
    assert_eq!(value["model"], "opus");
    let deny: Vec<&str> = value["permissions"]["deny"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    assert_eq!(deny[0], "Read(./.env)", "the user's rule stays first");
    let state = state_home()
        .to_str()
        .unwrap()
        .trim_start_matches('/')
        .to_string();
    assert!(
        deny.contains(&format!("Edit(//{state}/**)").as_str()),
        "{deny:?}"
    );
    assert!(deny.contains(&format!("Edit(//{}/**)", bin.trim_start_matches('/')).as_str()));
    assert!(deny.contains(&"Edit(/.claude/settings.local.json)"));
    assert!(deny.contains(&"Edit(~/.claude/settings.json)"));
    // The read-only set at the top and at any depth (issue 43: Claude Code's file tools hold a
    // `**/` rule for names that do not exist yet).
    for rule in [
        "Edit(/.claude/**)",
        "Edit(**/.claude/**)",
        "Edit(**/.codex/**)",
        "Edit(**/.git/**)",
        "Edit(**/.mcp.json)",
    ] {
        assert!(deny.contains(&rule), "{rule}: {deny:?}");
    }
    assert!(
        !deny.iter().any(|r| r.starts_with("Write(")),
        "Claude Code warns about Write(path) rules; Edit rules cover Write"
    );
    // The file tools' guard (SPEC §9): stop-gate on every tool that writes files.
    let guard = &value["hooks"]["PreToolUse"][0];
    assert_eq!(
        guard["matcher"], "Edit|Write|MultiEdit|NotebookEdit",
        "{value}"
    );
    assert!(runs_stop_gate(&guard["hooks"][0]), "{guard}");
    // And where each write landed (issue 43 item 6).
    let landed = &value["hooks"]["PostToolUse"][0];
    assert_eq!(
        landed["matcher"], "Edit|Write|MultiEdit|NotebookEdit",
        "{value}"
    );
    assert!(runs_stop_gate(&landed["hooks"][0]), "{landed}");
    let record: Value =
        serde_json::from_slice(&std::fs::read(install_record_of(dir.path())).unwrap()).unwrap();
    assert_valid("installed.schema.json", &record);
    let protected = std::fs::read(&settings).unwrap();
    // Again with --protect, and again without: neither changes a byte (the protection stays).
    for args in [&install[..], &install[..5]] {
        let out = merge_in(&dir, args);
        assert!(out.status.success());
        assert_eq!(std::fs::read(&settings).unwrap(), protected);
    }
    let out = merge_in(&dir, &["uninstall", "--settings", file]);
    assert!(out.status.success());
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), original);
}

#[test]
fn uninstall_after_edits_takes_back_only_what_protect_added_and_still_stands() {
    let dir = project_builder().home().build();
    let settings = dir.path().join(".claude/settings.local.json");
    let file = settings.to_str().unwrap();
    let bin = bin_dir();
    let install = [
        "install",
        "--settings",
        file,
        "--bin-dir",
        bin.to_str().unwrap(),
        "--protect",
    ];
    ok(merge_in(&dir, &install));
    // The user turns unsandboxed retries back on and adds a rule of their own.
    let mut value: Value = serde_json::from_slice(&std::fs::read(&settings).unwrap()).unwrap();
    value["sandbox"]["allowUnsandboxedCommands"] = json!(true);
    value["permissions"]["deny"]
        .as_array_mut()
        .unwrap()
        .push(json!("Bash(curl *)"));
    std::fs::write(&settings, serde_json::to_vec_pretty(&value).unwrap()).unwrap();
    let out = merge_in(&dir, &["uninstall", "--settings", file]);
    assert!(out.status.success());
    let after: Value = serde_json::from_slice(&std::fs::read(&settings).unwrap()).unwrap();
    assert_eq!(
        after,
        json!({"sandbox": {"allowUnsandboxedCommands": true}, "permissions": {"deny": ["Bash(curl *)"]}}),
        "what the user set stays; what --protect added and still stands goes"
    );
}

#[test]
fn protect_is_an_install_option() {
    let dir = project_builder().home().build();
    let settings = dir.path().join(".codex/hooks.json");
    let file = settings.to_str().unwrap();
    let out = merge_in(&dir, &["uninstall", "--settings", file, "--protect"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--protect") && err.lines().count() == 1,
        "{err}"
    );
    assert!(!settings.exists(), "nothing written");
}

/// SPEC §9 for Codex: `install --codex --protect` sets workspace-write in the project's
/// `.codex/config.toml` (which Codex 0.171.0 reads for a trusted project over the user's own
/// mode, and keeps read-only to the agent's commands), keeping the rest of the file; a mode
/// the user chose is kept or, when wider, refused; uninstall takes back only its own line; the
/// doctor says what the agent's commands can reach.
#[test]
fn codex_protect_sets_the_workspace_write_sandbox_and_the_doctor_reads_it() {
    let dir = project_builder().home().build();
    let codex_home = dir.home().join("codex");
    std::fs::create_dir_all(&codex_home).unwrap();
    let user_config = codex_home.join("config.toml");
    write_codex_config_trusting(
        &user_config,
        "approval_policy = \"never\"\nsandbox_mode = \"danger-full-access\"\n\n",
        dir.path(),
    );
    let settings = dir.path().join(".codex/hooks.json");
    let project_config = dir.path().join(".codex/config.toml");
    std::fs::create_dir_all(project_config.parent().unwrap()).unwrap();
    std::fs::write(
        &project_config,
        "# mine\nmodel = \"gpt-5\"\n\n[tools]\nweb_search = true\n",
    )
    .unwrap();
    let file = settings.to_str().unwrap();
    let bin = bin_dir();
    let merge = |args: &[&str]| {
        settings_merge()
            .env("HOME", dir.home())
            .env("CODEX_HOME", &codex_home)
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    // The doctor's finding on the sandbox, for Codex.
    let sandbox_line = || {
        let out = merge(&["check", "--verbose", "--settings", file, "--codex"]);
        findings_of(&stdout_of(&out))
            .into_iter()
            .find(|l| l.contains("sandbox"))
            .unwrap_or_default()
            .to_string()
    };
    let unprotected = [
        "install",
        "--settings",
        file,
        "--codex",
        "--bin-dir",
        bin.to_str().unwrap(),
    ];
    ok(merge(&unprotected));
    let line = sandbox_line();
    assert_starts_with!(
        line,
        "[warn] Codex runs the agent's commands with your rights"
    );
    assert_contains!(line, "danger-full-access");
    assert_contains!(line, "approval_policy = \"never\"");
    let install = [&unprotected[..], &["--protect"]].concat();
    let out = ok(merge(&install));
    assert_contains!(stdout_of(&out), "sandbox_mode = \"workspace-write\"");
    let written = std::fs::read_to_string(&project_config).unwrap();
    // At the top, the rest kept.
    assert_starts_with!(
        written,
        "# mine\nmodel = \"gpt-5\"\nsandbox_mode = \"workspace-write\""
    );
    assert_contains!(written, "[tools]\nweb_search = true");
    let parsed: toml_edit::DocumentMut = written.parse().unwrap();
    assert_eq!(parsed["sandbox_mode"].as_str(), Some("workspace-write"));
    assert!(parsed["tools"].get("sandbox_mode").is_none());
    // Again: nothing changes.
    ok(merge(&install));
    assert_eq!(std::fs::read_to_string(&project_config).unwrap(), written);
    let line = sandbox_line();
    assert_starts_with!(
        line,
        "[ok] Codex runs the agent's commands in its workspace-write sandbox"
    );
    assert_contains!(line, ".codex/config.toml");
    // Uninstall takes back its line only.
    ok(merge(&["uninstall", "--settings", file, "--codex"]));
    assert_eq!(
        std::fs::read_to_string(&project_config).unwrap(),
        "# mine\nmodel = \"gpt-5\"\n\n[tools]\nweb_search = true\n"
    );
    // A wider mode the user set in the project is refused, the file unchanged.
    std::fs::write(&project_config, "sandbox_mode = \"danger-full-access\"\n").unwrap();
    let out = merge(&install);
    assert_exit(&out, 2);
    assert_contains!(said(&out), "vigil does not override a mode you chose");
    assert_eq!(
        std::fs::read_to_string(&project_config).unwrap(),
        "sandbox_mode = \"danger-full-access\"\n"
    );
}

/// `settings-merge check`'s lines about the protected state.
fn protection_lines(p: &Project, file: &str) -> (Option<i32>, Vec<String>) {
    let out = merge_in(p, &["check", "--verbose", "--settings", file]);
    let lines = findings_of(&String::from_utf8_lossy(&out.stdout))
        .into_iter()
        .filter(|l| {
            [
                "sandbox",
                "state home",
                "Edit and Write",
                "protected state",
                "vigil's binaries",
            ]
            .iter()
            .any(|w| l.contains(w))
        })
        .collect();
    (out.status.code(), lines)
}

#[test]
fn check_says_whether_the_state_is_out_of_the_agents_reach_and_why_not() {
    let dir = project_builder().home().installed(&[]).build();
    let settings = dir.settings();
    let file = settings.to_str().unwrap();
    let (code, lines) = protection_lines(&dir, file);
    assert_eq!(code, Some(0), "unprotected is a warning: {lines:?}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("[warn] the sandbox is off")),
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("[warn] Edit and Write are not denied vigil's state home")),
        "{lines:?}"
    );
    dir.install(&["--protect"]);
    let (_, lines) = protection_lines(&dir, file);
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("[ok] vigil's protected state")),
        "{lines:?}"
    );
    assert!(!lines.iter().any(|l| l.starts_with("[warn]")), "{lines:?}");
    // The managed, local, project and user layers merge as Claude Code merges them: the
    // user's own settings cannot turn unsandboxed retries back on past the local file, but a
    // project file can add what the local one leaves out.
    std::fs::create_dir_all(dir.home().join(".claude")).unwrap();
    std::fs::write(
        dir.home().join(".claude/settings.json"),
        r#"{"sandbox": {"allowUnsandboxedCommands": true}}"#,
    )
    .unwrap();
    let (_, lines) = protection_lines(&dir, file);
    assert!(
        !lines.iter().any(|l| l.starts_with("[warn]")),
        "weaker layer: {lines:?}"
    );
    let mut local: Value = serde_json::from_slice(&std::fs::read(&settings).unwrap()).unwrap();
    local["sandbox"]
        .as_object_mut()
        .unwrap()
        .remove("allowUnsandboxedCommands");
    std::fs::write(&settings, serde_json::to_vec_pretty(&local).unwrap()).unwrap();
    let (_, lines) = protection_lines(&dir, file);
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("[warn] the sandbox may retry a command outside it")),
        "the user's layer now decides: {lines:?}"
    );
    // A state home inside the project is within the sandbox's reach.
    let inside = dir.path().join("state");
    let out = settings_merge()
        .env("HOME", dir.home())
        .env("VIGIL_STATE_HOME", &inside)
        .args(["check", "--settings", file])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert_contains!(said, "[fail] the state home");
    assert_contains!(said, "inside the project");
}

/// What else lets a command or a tool past the protection, each told by the doctor: commands
/// the sandbox excludes, hooks that find the gate through PATH, user settings it cannot read.
#[test]
fn check_warns_of_excluded_commands_hooks_on_path_and_another_config_dir() {
    let dir = project_builder().home().installed(&["--protect"]).build();
    let settings = dir.settings();
    let file = settings.to_str().unwrap();
    let (_, lines) = protection_lines(&dir, file);
    assert!(!lines.iter().any(|l| l.starts_with("[warn]")), "{lines:?}");
    let mut local: Value = serde_json::from_slice(&std::fs::read(&settings).unwrap()).unwrap();
    local["sandbox"]["excludedCommands"] = json!(["docker *", "make"]);
    std::fs::write(&settings, serde_json::to_vec_pretty(&local).unwrap()).unwrap();
    let (_, lines) = protection_lines(&dir, file);
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("[warn] sandbox.excludedCommands")
                && l.contains("docker *, make")),
        "{lines:?}"
    );
    // Shared settings, which name the binaries without a path, are not put beside it: vigil
    // would run twice (issue 31).
    let shared = dir.path().join(".claude/settings.json");
    let shared_file = shared.to_str().unwrap();
    let out = merge_in(&dir, &["install", "--shared", "--settings", shared_file]);
    assert_exit(&out, 2);
    assert!(!shared.exists());
    // One hand-added handler without a path is enough for the agent to answer for the gate.
    let mut local: Value = serde_json::from_slice(&std::fs::read(&settings).unwrap()).unwrap();
    local["sandbox"]
        .as_object_mut()
        .unwrap()
        .remove("excludedCommands");
    local["hooks"]["Stop"]
        .as_array_mut()
        .unwrap()
        .push(json!({"hooks": [{"type": "command", "command": "stop-gate --run true"}]}));
    std::fs::write(&settings, serde_json::to_vec_pretty(&local).unwrap()).unwrap();
    let (_, lines) = protection_lines(&dir, file);
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("[warn]") && l.contains("through PATH")),
        "mixed: {lines:?}"
    );
    // Binaries inside the project are the agent's to replace.
    let inside = dir.path().join("bin");
    std::fs::create_dir_all(&inside).unwrap();
    for name in ["stop-gate", "session-start-loader", "session-end-handoff"] {
        std::fs::copy(bin_dir().join(name), inside.join(name)).unwrap();
    }
    // (One settings file of the project wires vigil at a time: this one no longer does.)
    std::fs::write(&settings, "{}\n").unwrap();
    let other = dir.path().join(".claude/other.json");
    let other_file = other.to_str().unwrap();
    let args = [
        "install",
        "--settings",
        other_file,
        "--bin-dir",
        inside.to_str().unwrap(),
    ];
    ok(merge_in(&dir, &args));
    let (code, lines) = protection_lines(&dir, other_file);
    assert_eq!(code, Some(1), "{lines:?}");
    assert!(
        lines.iter().any(
            |l| l.starts_with("[fail] the hooks run vigil's binaries from")
                && l.contains("inside the project")
        ),
        "{lines:?}"
    );
    std::fs::remove_file(&other).unwrap();
    ok(merge_in(&dir, &["install", "--settings", file]));
    let out = settings_merge()
        .env("HOME", dir.home())
        .env("CLAUDE_CONFIG_DIR", dir.home().join("other"))
        .current_dir(dir.path())
        .args(["check", "--settings", file])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.lines()
            .any(|l| l.starts_with("[warn] CLAUDE_CONFIG_DIR is set")),
        "{said}"
    );
}

/// SPEC §9: the doctor says whether stop-gate's check runs confined, and what it means when it
/// cannot be: said every stop, or, with Claude Code's sandbox on, every stop blocked.
#[test]
fn the_doctor_says_whether_the_check_is_confined() {
    let dir = project_builder()
        .home()
        .installed(&["--run", "make test"])
        .build();
    let settings = dir.settings();
    let file = settings.to_str().unwrap();
    let lines = |bwrap: Option<&str>| {
        let mut cmd = settings_merge();
        cmd.env("HOME", dir.home())
            .args(["check", "--verbose", "--settings", file])
            .current_dir(dir.path());
        if let Some(bwrap) = bwrap {
            cmd.env("VIGIL_TEST_BWRAP", bwrap);
        }
        let out = cmd.output().unwrap();
        let confinement: Vec<String> = findings_of(&stdout_of(&out))
            .into_iter()
            .filter(|l| l.contains("`make test`") && l.contains("confined"))
            .collect();
        assert_eq!(confinement.len(), 1, "{}", stdout_of(&out));
        (out.status.code(), confinement[0].clone())
    };
    let (_, line) = lines(None);
    assert_starts_with!(
        line,
        "[ok] Stop: stop-gate's check `make test` runs confined"
    );
    let (_, line) = lines(Some("/nonexistent/bwrap"));
    assert_starts_with!(
        line,
        "[warn] Stop: stop-gate's check `make test` runs unconfined, with your rights"
    );
    assert_contains!(line, "install the package bubblewrap");
    let mut value: Value = serde_json::from_slice(&std::fs::read(&settings).unwrap()).unwrap();
    value["sandbox"] = json!({"enabled": true});
    std::fs::write(&settings, serde_json::to_vec_pretty(&value).unwrap()).unwrap();
    let (code, line) = lines(Some("/nonexistent/bwrap"));
    assert_eq!(code, Some(1));
    assert_starts_with!(
        line,
        "[fail] Stop: stop-gate's check `make test` cannot be confined"
    );
    assert_contains!(line, "every stop is blocked");
}

/// Issue 43 item 5, across engines: under `--codex --protect` Codex's shell writes the project
/// but not what Claude Code runs (`.claude/`, `.mcp.json`), the editors' folders, a nested
/// engine folder, or what git runs from the project: a permission profile keeps each read-only
/// (Codex 0.171.0 holds such a literal path whether it exists or not). A profile of the user's
/// own is kept; uninstall takes vigil's back.
#[test]
fn codex_protect_keeps_the_other_engines_folders_read_only_to_codexs_shell() {
    let dir = project_builder().home().build();
    let project_config = dir.path().join(".codex/config.toml");
    dir.write("web/.claude/settings.json", "{}\n");
    dir.write(".husky/pre-commit", "npm test\n");
    let git = std::process::Command::new("git")
        .args(["config", "core.hooksPath", ".husky"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(git.status.success());
    let merge = |args: &[&str]| {
        settings_merge()
            .env("HOME", dir.home())
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    let install = [
        "install",
        "--settings",
        ".codex/hooks.json",
        "--codex",
        "--protect",
    ];
    let out = ok(merge(&install));
    assert_contains!(stdout_of(&out), "permission profile \"vigil\"");
    let parsed: toml_edit::DocumentMut = std::fs::read_to_string(&project_config)
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(parsed["default_permissions"].as_str(), Some("vigil"));
    let profile = &parsed["permissions"]["vigil"];
    assert_eq!(profile["extends"].as_str(), Some(":workspace"));
    let roots = profile["filesystem"][":workspace_roots"]
        .as_inline_table()
        .expect("an inline table of paths");
    assert_eq!(roots.get(".").and_then(|v| v.as_str()), Some("write"));
    for read_only in [
        ".claude",
        ".mcp.json",
        ".vscode",
        ".idea",
        "web/.claude",
        ".husky",
    ] {
        assert_eq!(
            roots.get(read_only).and_then(|v| v.as_str()),
            Some("read"),
            "{read_only}: {roots}"
        );
    }
    ok(merge(&[
        "uninstall",
        "--settings",
        ".codex/hooks.json",
        "--codex",
    ]));
    assert!(!project_config.exists(), "vigil's lines taken back");
    // The user's own profile stays theirs.
    let own = "default_permissions = \"mine\"\n\n[permissions.mine]\nextends = \":workspace\"\n";
    dir.write(".codex/config.toml", own);
    ok(merge(&install));
    let written = std::fs::read_to_string(&project_config).unwrap();
    assert_contains!(written, "default_permissions = \"mine\"");
    assert_lacks!(written, "[permissions.vigil]");
    ok(merge(&[
        "uninstall",
        "--settings",
        ".codex/hooks.json",
        "--codex",
    ]));
    assert_eq!(std::fs::read_to_string(&project_config).unwrap(), own);
}

/// SPEC §9 below the top, for Claude Code's sandboxed shell (issue 43 item 1): its sandbox
/// skips glob rules on Linux, so `install --protect` lists what exists of the read-only set
/// and of what git runs as literal `Edit(/path)` rules (a git directory as its config and
/// hooks, so the shell still commits there), never a path that does not exist (that would
/// make its first missing ancestor read-only) nor one with glob characters; a later install
/// brings them in step with what is there, and uninstall gives back the file byte for byte.
/// Without the listing the rules are missing; without the sync the stale rule stays.
#[test]
fn install_protect_lists_what_runs_below_the_top_as_literal_rules_kept_in_step() {
    let dir = project_builder().home().build();
    let settings = dir.path().join(".claude/settings.local.json");
    let original = "{\n  \"model\": \"opus\"\n}\n";
    dir.write(".claude/settings.local.json", original);
    dir.write("web/.claude/settings.json", "{}\n");
    dir.write("a[1]/.claude/settings.json", "{}\n");
    dir.write("a\\b/.claude/settings.json", "{}\n");
    // A `.git` file naming a folder that is no git directory: its `config/` is the user's.
    dir.write("app/config/routes.rb", "\n");
    dir.write("app/sub/.git", "gitdir: ..\n");
    dir.write(".husky/pre-commit", "npm test\n");
    dir.write("vendor/lib/a.txt", "a\n");
    git(dir.path(), &["config", "core.hooksPath", ".husky"]);
    git(
        dir.path(),
        &["config", "core.fsmonitor", "./tools/fsmonitor"],
    );
    git(&dir.path().join("vendor/lib"), &["init", "-q"]);
    // A worktree of the project inside it: its `.git` file names a git directory.
    git(dir.path(), &["worktree", "add", "-q", "wt"]);
    let file = settings.to_str().unwrap();
    let bin = bin_dir();
    let install = [
        "install",
        "--settings",
        file,
        "--bin-dir",
        bin.to_str().unwrap(),
        "--protect",
    ];
    ok(merge_in(&dir, &install));
    let deny = |_: &Project| -> Vec<String> {
        let value: Value = serde_json::from_slice(&std::fs::read(&settings).unwrap()).unwrap();
        value["permissions"]["deny"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap().to_string())
            .filter(|r| !r.contains('*') && !r.contains("//") && !r.contains('~'))
            .filter(|r| !r.starts_with("Edit(/.claude/settings"))
            .collect()
    };
    let listed = deny(&dir);
    for rule in [
        "Edit(/.claude)",
        "Edit(/.git/config)",
        "Edit(/.git/hooks)",
        "Edit(/.husky)",
        "Edit(/web/.claude)",
        "Edit(/vendor/lib/.git/config)",
        "Edit(/vendor/lib/.git/hooks)",
        "Edit(/wt/.git)",
    ] {
        assert!(listed.contains(&rule.to_string()), "{rule}: {listed:?}");
    }
    for absent in [
        "Edit(/.git)",
        "Edit(/vendor/lib/.git)",
        "Edit(/tools/fsmonitor)",
        "Edit(/tools)",
        "Edit(/.codex)",
        "Edit(/a[1]/.claude)",
        "Edit(/a/b/.claude)",
        "Edit(/a\\b/.claude)",
        "Edit(/app/config)",
    ] {
        assert!(
            !listed.contains(&absent.to_string()),
            "{absent}: {listed:?}"
        );
    }
    // In step: a folder gone since, a rule gone; the next install again changes nothing.
    std::fs::remove_dir_all(dir.path().join("web/.claude")).unwrap();
    ok(merge_in(&dir, &install));
    let listed = deny(&dir);
    assert!(
        !listed.contains(&"Edit(/web/.claude)".to_string()),
        "{listed:?}"
    );
    assert!(listed.contains(&"Edit(/.husky)".to_string()), "{listed:?}");
    let stable = std::fs::read(&settings).unwrap();
    ok(merge_in(&dir, &install));
    assert_eq!(std::fs::read(&settings).unwrap(), stable);
    ok(merge_in(&dir, &["uninstall", "--settings", file]));
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), original);
}

/// Review 43b, attack: past 500 literal rules `below_rules` lists none at all, so what the
/// agent's shell can make (501 empty `.vscode` folders, a mkdir each; or a monorepo's many
/// nested repositories) takes every literal rule away at the next install, the top's own
/// hooks directory (`core.hooksPath = .husky`) among them, and the install says nothing of
/// it. The rules that held before must hold still (or the install must refuse, or say so).
#[test]
fn many_planted_folders_never_take_the_literal_rule_of_the_hooks_directory_away() {
    let dir = project_builder().home().build();
    let settings = dir.path().join(".claude/settings.local.json");
    dir.write(".claude/settings.local.json", "{}\n");
    dir.write(".husky/pre-commit", "npm test\n");
    git(dir.path(), &["config", "core.hooksPath", ".husky"]);
    let file = settings.to_str().unwrap();
    let bin = bin_dir();
    let install = [
        "install",
        "--settings",
        file,
        "--bin-dir",
        bin.to_str().unwrap(),
        "--protect",
    ];
    let deny = || -> Vec<String> {
        let value: Value = serde_json::from_slice(&std::fs::read(&settings).unwrap()).unwrap();
        value["permissions"]["deny"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap().to_string())
            .collect()
    };
    ok(merge_in(&dir, &install));
    assert!(
        deny().contains(&"Edit(/.husky)".to_string()),
        "{:?}",
        deny()
    );
    // The agent's shell: one mkdir each, nothing in them.
    for n in 0..501 {
        std::fs::create_dir_all(dir.path().join(format!("pkg{n}/.vscode"))).unwrap();
    }
    let out = ok(merge_in(&dir, &install));
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        deny().contains(&"Edit(/.husky)".to_string()),
        "the hooks directory's rule is gone, and the install said: {said}"
    );
    assert_contains!(
        said,
        "5 places below the top that the engine or git runs are past the 500 literal rules"
    );
}

/// Review 43b, attack: a nested repository's configuration is the agent's to write (one it
/// made with `git init`, told as "appeared" and then recorded by the install the person is
/// told to run), and every word with a `/` in a setting that runs a program becomes a literal
/// rule, a folder included, which no program can be: `alias.fmt = !../../src` makes the
/// user's whole `src/` read-only to every later session's shell and file tools.
#[test]
fn a_nested_repositorys_alias_never_makes_the_users_source_folder_read_only() {
    let dir = project_builder().home().build();
    let settings = dir.path().join(".claude/settings.local.json");
    dir.write(".claude/settings.local.json", "{}\n");
    dir.write("src/main.rs", "fn main() {}\n");
    dir.write("vendor/lib/a.txt", "a\n");
    git(&dir.path().join("vendor/lib"), &["init", "-q"]);
    git(
        &dir.path().join("vendor/lib"),
        &["config", "alias.fmt", "!../../src"],
    );
    let file = settings.to_str().unwrap();
    let bin = bin_dir();
    ok(merge_in(
        &dir,
        &[
            "install",
            "--settings",
            file,
            "--bin-dir",
            bin.to_str().unwrap(),
            "--protect",
        ],
    ));
    let value: Value = serde_json::from_slice(&std::fs::read(&settings).unwrap()).unwrap();
    let deny: Vec<&str> = value["permissions"]["deny"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    assert!(deny.contains(&"Edit(/vendor/lib/.git/config)"), "{deny:?}");
    assert!(!deny.contains(&"Edit(/src)"), "{deny:?}");
}
