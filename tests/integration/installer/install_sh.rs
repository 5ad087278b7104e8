//! SPEC §8, `./install.sh` end to end: it installs the binaries and wires the project (the git
//! top level), the user or Codex, with the gate's configuration and `--protect`, keeps the
//! slash commands, refuses vigil's own clone, and its hooks fire for real.

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};

use super::{install_sh, stop_command};
use crate::support::*;

/// Runs a hook command exactly as written in a settings file, with a sample payload.
fn fire(command: &str, project: &Path, payload: &Value) -> Output {
    let mut cmd = std::process::Command::new("sh");
    isolated(&mut cmd)
        .arg("-c")
        .arg(command)
        .current_dir(project);
    output_with_stdin(cmd, payload.to_string().as_bytes())
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

#[test]
fn install_sh_leaves_a_working_setup_whose_hooks_fire_for_real() {
    let home = tempfile::tempdir().unwrap();
    let project = Project::git();
    let path_env = "/usr/bin:/bin";
    let prefix = home.path().join(".local");
    ok(install_sh(
        home.path(),
        &[
            "--project",
            project.path().to_str().unwrap(),
            "--run",
            "test -f tests-pass",
        ],
        path_env,
    ));
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
    assert_contains!(String::from_utf8_lossy(&said.stdout), "vigil loop started");
    let loop_md = project.read(".claude/commands/vigil-loop.md");
    let stop_gate = prefix.join("bin/stop-gate").display().to_string();
    assert_contains!(loop_md, &format!("{stop_gate} loop status"));
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
    let shown = isolated(&mut std::process::Command::new("bash"))
        .arg("-c")
        .arg(&block)
        .current_dir(project.path())
        .env("PATH", path_env)
        .env("CLAUDE_SESSION_ID", "5e55a0e1-0000-4000-8000-00000000c0de")
        .output()
        .unwrap();
    assert_contains!(
        String::from_utf8_lossy(&shown.stdout),
        "running, pass 1/3",
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
    stop_of(&blocked).assert_blocked_saying("test -f tests-pass");
    // The check passes: it allows.
    project.write("tests-pass", "");
    let allowed = ok(fire(&stop, project.path(), &payload));
    assert_silent(&allowed);
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
    ok(fire(&end, project.path(), &end_payload));
    let mut start_payload: Value = serde_json::from_slice(
        &std::fs::read(fixture("samples/claude-session-start.json")).unwrap(),
    )
    .unwrap();
    start_payload["cwd"] = json!(project.path());
    let context: Value =
        serde_json::from_slice(&fire(&start, project.path(), &start_payload).stdout).unwrap();
    assert_contains!(additional_context(&context), "[final] session 00893aaf");
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
    ok(install_sh(
        home.path(),
        &["--project", project.path().to_str().unwrap(), "--uninstall"],
        path_env,
    ));
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
    let out = isolated(&mut std::process::Command::new(
        prefix.join("bin/stop-gate"),
    ))
    .args(words(
        "loop cancel --session 5e55a0e1-0000-4000-8000-00000000c0de",
    ))
    .current_dir(project)
    .env("PATH", path_env)
    .output()
    .unwrap();
    String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr)
}

#[test]
fn install_sh_user_and_codex_targets() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    ok(install_sh(home.path(), &["--user"], "/usr/bin:/bin"));
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
    ok(install_sh(
        home.path(),
        &["--codex", "--project", project.path().to_str().unwrap()],
        "/usr/bin:/bin",
    ));
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
    ok(run(&["--project", dir, "--protect"]));
    let settings = json_of(&project.path().join(".claude/settings.local.json"));
    assert_eq!(settings["sandbox"]["enabled"], true);
    let deny = settings["permissions"]["deny"].to_string();
    assert!(deny.contains("Edit(~/.local/state/vigil/**)"), "{deny}");
    assert_contains!(deny, "Edit(~/.local/bin/**)", "the binaries the hooks run");
    let check = run(&["--project", dir, "--check"]);
    assert_contains!(stdout_of(&check), "[ok] vigil's protected state");
    let out = run(&["--project", dir, "--protect", "--uninstall"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--protect"));
    ok(run(&["--project", dir, "--uninstall"]));
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
    let out = ok(install_sh_in(home.path(), &sub, &["--run", "true"]));
    let top = std::fs::canonicalize(project.path()).unwrap();
    assert_contains!(
        said(&out),
        &format!(
            "is inside the git repository {}; working on its top level",
            top.display()
        )
    );
    assert!(project.path().join(".claude/settings.local.json").is_file());
    assert!(!sub.join(".claude").exists());
    assert!(install_record_of(project.path()).is_file());

    let outside = tempfile::tempdir().unwrap();
    let out = install_sh_in(home.path(), outside.path(), &[]);
    assert_exit(&out, 2);
    assert_contains!(said(&out), "is not inside a git repository");
    assert_contains!(said(&out), "--project DIR");
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
    ok(install_sh_in(
        home.path(),
        &sub,
        &["--project", sub.to_str().unwrap()],
    ));
    let settings = sub.join(".claude/settings.local.json");
    assert_contains!(std::fs::read_to_string(&settings).unwrap(), "stop-gate");
    let out = ok(install_sh_in(home.path(), &sub, &["--uninstall"]));
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
    // The system's programs but cargo's: a machine may have a cargo in /usr/bin too (Debian's,
    // which CI installs to build the Windows target).
    let bin = tempfile::tempdir().unwrap();
    for dir in ["/usr/bin", "/bin"] {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let name = entry.file_name();
            let rust = ["cargo", "rustc", "rustup", "rustdoc"]
                .iter()
                .any(|tool| name.to_string_lossy().starts_with(tool));
            let link = bin.path().join(&name);
            if !rust && !link.exists() {
                let _ = std::os::unix::fs::symlink(entry.path(), link);
            }
        }
    }
    let out = std::process::Command::new("bash")
        .arg(repo_path("install.sh"))
        .current_dir(project.path())
        .env("HOME", home.path())
        .env("PATH", bin.path())
        .env_remove("VIGIL_BUILT_DIR")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cargo is not installed"), "{stderr}");
    // The routes that need no Rust are named (issue 31).
    assert_contains!(stderr, "/hooks/vigil-run --to ~/.local/bin");
    assert_contains!(stderr, "plugin");
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
    ok(install_sh(home.path(), &["--project", p], "/usr/bin:/bin"));
    let upgraded = std::fs::read_to_string(commands.join("vigil-loop.md")).unwrap();
    assert_contains!(upgraded, "/.local/bin/stop-gate loop status");
    // Shared settings on top of the personal file would wire vigil twice: refused (issue 31),
    // and nothing changes.
    let before = std::fs::read(project.path().join(".claude/settings.local.json")).unwrap();
    let out = install_sh(home.path(), &["--project", p, "--shared"], "/usr/bin:/bin");
    assert_exit(&out, 2);
    assert_stderr_contains(
        &out,
        "vigil is wired in ./.claude/settings.local.json already",
    );
    assert!(!project.path().join(".claude/settings.json").exists());
    assert_eq!(
        std::fs::read(project.path().join(".claude/settings.local.json")).unwrap(),
        before
    );
    let out = install_sh(
        home.path(),
        &["--project", p, "--uninstall"],
        "/usr/bin:/bin",
    );
    assert!(out.status.success());
    assert!(!commands.exists(), "the last uninstall takes them");
    // Shared settings alone: the commands are committed, so they name stop-gate through PATH.
    ok(install_sh(
        home.path(),
        &["--project", p, "--shared"],
        "/usr/bin:/bin",
    ));
    assert_eq!(
        std::fs::read_to_string(commands.join("vigil-loop.md")).unwrap(),
        template
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
    let out = ok(install_sh(
        home.path(),
        &["--project", p, "--prefix", odd.to_str().unwrap()],
        "/usr/bin:/bin",
    ));
    assert_eq!(
        std::fs::read_to_string(commands.join("vigil-loop.md")).unwrap(),
        template
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("finds stop-gate on PATH"));
}

/// install.sh takes the gate's configuration, and re-running it (to update the binaries)
/// keeps the check it is not told to change; the flags are install options only.
#[test]
fn install_sh_takes_the_gate_configuration_and_a_rerun_keeps_it() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let dir = project.path().to_str().unwrap();
    ok(install_sh(
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
    ));
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

/// A vigil Stop entry edited by hand is one uninstall cannot find, and leaves: the slash
/// commands that start its loops stay with it, and install.sh says why.
#[test]
fn install_sh_keeps_the_slash_commands_while_a_hand_edited_gate_remains() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let p = project.path().to_str().unwrap();
    ok(install_sh(home.path(), &["--project", p], "/usr/bin:/bin"));
    let settings = project.path().join(".claude/settings.local.json");
    append_to_stop_command(&settings, "--max-blocks 9");
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
    assert_contains!(
        std::fs::read_to_string(&settings).unwrap(),
        "--max-blocks 9"
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
    assert_contains!(stderr, "vigil's own clone");
    assert_contains!(stderr, "--project");
    assert!(
        !home.path().join(".local/bin/stop-gate").exists(),
        "nothing installed"
    );
}
