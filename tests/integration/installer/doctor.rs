//! SPEC §8, `settings-merge check` (the doctor): a line each, `[ok]`, `[warn]` or `[fail]`, for
//! the file, each entry, each command from a bare environment, the deadline rule (§9), each
//! handler's flags read as plain words by its own binary, and what else runs at the same event.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::{install_with_bin_dir, merge, project_with};
use crate::support::*;

/// The doctor's report on the settings at `path`, which must fail (exit 1).
#[track_caller]
fn failing_report(path: &Path) -> String {
    let out = merge("check", path, false, &[]);
    assert_exit(&out, 1);
    stdout_of(&out)
}

/// A line of `report` begins with `prefix` and says `part`.
fn has_line(report: &str, prefix: &str, part: &str) -> bool {
    report
        .lines()
        .any(|l| l.starts_with(prefix) && l.contains(part))
}

#[test]
fn check_finds_installed_binaries_from_a_bare_environment_and_fails_for_a_missing_one() {
    let (_dir, path, _) = project_with("claude-user-hooks.json");
    ok(merge("install", &path, false, &[]));
    let out = ok(merge("check", &path, false, &[]));
    assert!(stdout_of(&out).contains("[ok] Stop: stop-gate runs from a bare environment"));
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
    assert_contains!(stdout_of(&out), "[fail] Stop: `/nonexistent/bin/stop-gate");
}

#[test]
fn check_reports_a_missing_entry_and_a_duplicate() {
    let (_dir, path, _) = project_with("claude-user-hooks.json");
    assert!(failing_report(&path).contains("[fail] Stop does not run stop-gate"));
    ok(merge("install", &path, false, &[]));
    let mut value = json_of(&path);
    let stop = value["hooks"]["Stop"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g.to_string().contains("stop-gate") && !is_waiter(&g.to_string()))
        .unwrap()
        .clone();
    value["hooks"]["Stop"].as_array_mut().unwrap().push(stop);
    std::fs::write(&path, serde_json::to_vec_pretty(&value).unwrap()).unwrap();
    assert_contains!(
        stdout_of(&merge("check", &path, false, &[])),
        "[warn] Stop runs stop-gate 2 times"
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
    // No machine's own path in a shared file.
    assert_lacks!(stop, &bin_dir().display().to_string());
    let sample = std::fs::read(fixture("samples/claude-stop.json")).unwrap();
    // No vigil anywhere: one line, and the stop goes on.
    let home = tempfile::tempdir().unwrap();
    // The handler as the engine runs it: `sh -c`, with a plain PATH.
    let handler = || {
        let mut sh = std::process::Command::new("sh");
        sh.arg("-c")
            .arg(&stop)
            .env_clear()
            .env("HOME", home.path())
            .env("PATH", "/usr/bin:/bin")
            .current_dir(dir.path());
        sh
    };
    let none = handler().output().unwrap();
    let said: Value = serde_json::from_slice(&none.stdout).unwrap();
    assert_contains!(said["systemMessage"].as_str().unwrap(), "./install.sh");
    // Installed in ~/.local/bin: found there.
    let local = home.path().join(".local/bin");
    std::fs::create_dir_all(&local).unwrap();
    std::fs::copy(bin_dir().join("stop-gate"), local.join("stop-gate")).unwrap();
    let child = spawn_fed(handler().stdout(std::process::Stdio::piped()), &sample);
    let out = child.wait_with_output().unwrap();
    // Allowed.
    assert_success(&out);
    assert_silent(&out);
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
    install_with_bin_dir(&path, &bin);
    let report = stdout_of(&merge("check", &path, false, &[]));
    assert_contains!(report, "[warn]");
    assert_contains!(report, "stop-gate is version 0.0.1");
}

#[test]
fn check_fails_when_hooks_are_disabled_or_a_handler_is_not_a_command() {
    let (_dir, path, _) = project_with("claude-user-hooks.json");
    ok(merge("install", &path, false, &[]));
    assert_eq!(merge("check", &path, false, &[]).status.code(), Some(0));
    let installed = json_of(&path);

    let mut disabled = installed.clone();
    disabled["disableAllHooks"] = json!(true);
    std::fs::write(&path, serde_json::to_vec_pretty(&disabled).unwrap()).unwrap();
    let said = failing_report(&path);
    assert!(said.contains("[fail]") && said.contains("disableAllHooks"));

    let mut wrong = installed.clone();
    for group in wrong["hooks"]["Stop"].as_array_mut().unwrap() {
        if group.to_string().contains("stop-gate") {
            group["hooks"][0]["type"] = json!("prompt");
        }
    }
    let moved = wrong["hooks"]["SessionEnd"].clone();
    wrong["hooks"]["SessionEnds"] = moved;
    std::fs::write(&path, serde_json::to_vec_pretty(&wrong).unwrap()).unwrap();
    let said = failing_report(&path);
    assert!(said.contains("has type \"prompt\""), "{said}");
    assert!(said.contains("[warn] SessionEnds runs"), "{said}");
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

/// The Stop handler vigil installed, edited by `edit` as a user might.
fn with_stop_handler(edit: impl FnOnce(&mut Value)) -> (tempfile::TempDir, PathBuf) {
    let (dir, path, _) = project_with("claude-user-hooks.json");
    ok(merge("install", &path, false, &["--run", "cargo test"]));
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
    let out = ok(merge("check", &path, false, &[]));
    assert_contains!(
        stdout_of(&out),
        "[ok] Stop: stop-gate's check gets 540 s and the gate answers within 570 s, under the handler's timeout of 600 s"
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
        let report = failing_report(&path);
        assert!(
            has_line(&report, "[fail] Stop: ", said),
            "{said:?} not in {report}"
        );
    }
}

/// The PATH search that `install --shared` writes has `$`s of its own: only the gate's
/// arguments are read for shell syntax, and they pass.
#[test]
fn the_doctor_reads_the_arguments_of_a_shared_install_as_plain_words() {
    let (_dir, path, _) = project_with("claude-user-hooks.json");
    ok(merge(
        "install",
        &path,
        false,
        &["--shared", "--run", "cargo test --locked"],
    ));
    let report = stdout_of(&merge("check", &path, false, &[]));
    assert_contains!(
        report,
        "[ok] Stop: stop-gate's check gets 540 s and the gate answers within 570 s"
    );
}

/// A doctor line about a handler names only what that handler has (issue 31): the
/// UserPromptSubmit handler runs no check, and a Stop handler without --run has none either.
#[test]
fn the_doctor_speaks_of_a_check_only_for_a_handler_that_runs_one() {
    let (_dir, path) = with_stop_handler(|_| {});
    let report = stdout_of(&merge("check", &path, false, &[]));
    assert_contains!(report, "[ok] Stop: stop-gate's check gets 540 s");
    let prompt: Vec<&str> = report
        .lines()
        .filter(|l| l.contains("UserPromptSubmit: stop-gate"))
        .collect();
    assert!(!prompt.is_empty(), "{report}");
    for line in &prompt {
        assert!(!line.contains("check"), "{line}");
    }
    assert!(
        prompt.iter().any(|l| l.contains("answers within 570 s")),
        "{report}"
    );
    let (_dir, path, _) = project_with("claude-user-hooks.json");
    ok(merge("install", &path, false, &[]));
    let report = stdout_of(&merge("check", &path, false, &[]));
    let stop: Vec<&str> = report
        .lines()
        .filter(|l| l.contains("Stop: stop-gate") && l.contains("answers within"))
        .collect();
    assert!(!stop.is_empty(), "{report}");
    assert!(stop.iter().all(|l| !l.contains("check gets")), "{report}");
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
    ok(merge("install", &path, false, &[]));
    for (event, binary, typo) in [
        ("PreCompact", "session-end-handoff", "--chekpoint"),
        ("SessionEnd", "session-end-handoff", "--progres-file x"),
        ("SessionStart", "session-start-loader", "--max-age soon"),
    ] {
        let before = edit_command(&path, event, binary, |c| format!("{c} {typo}"));
        let report = failing_report(&path);
        assert!(
            has_line(
                &report,
                &format!("[fail] {event}: {binary} refuses the flags"),
                ""
            ),
            "{typo}: {report}"
        );
        edit_command(&path, event, binary, |_| before.clone());
    }
    let out = merge("check", &path, false, &[]);
    assert_lacks!(stdout_of(&out), "refuses the flags");
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

/// vigil wired twice where Claude Code merges settings (the project's two files, or the
/// plugin beside an install) runs twice per event, and advances a loop twice per stop: the
/// doctor warns, naming the other place.
#[test]
fn the_doctor_warns_when_vigil_runs_twice_for_one_event_across_files_or_with_the_plugin() {
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join(".claude/settings.local.json");
    let shared = dir.path().join(".claude/settings.json");
    ok(merge("install", &local, false, &[]));
    let report = stdout_of(&merge("check", &local, false, &[]));
    assert!(!report.contains("runs both"), "{report}");
    // An install refuses to wire vigil twice (issue 31): the second wiring is made by hand.
    std::fs::copy(&local, &shared).unwrap();
    let report = stdout_of(&merge("check", &local, false, &["--verbose"]));
    assert_contains!(report, "[warn] ./.claude/settings.json wires vigil too");
    assert_contains!(report, "Stop (stop-gate)");
    std::fs::remove_file(&shared).unwrap();
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
        ok(merge("install", &path, false, &[]));
        edit_command(&path, event, binary, |c| format!("{c}{tail}"));
        let report = failing_report(&path);
        assert!(
            has_line(&report, &format!("[fail] {event}: "), &said),
            "{said}: {report}"
        );
        assert!(!marker.exists(), "the doctor ran the handler's text");
    }
}

/// Issue 29: the doctor says when a required marker binds no command.
#[test]
fn the_doctor_names_a_required_marker_that_binds_no_command() {
    let (_dir, path, _) = project_with("claude-four-spaces.json");
    let doctor = |flag: &str| {
        ok(merge("install", &path, false, &["--require-marker", flag]));
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
    ok(merge("install", &path, false, &[]));
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
            .any(|l| l.starts_with("[ok] Stop: Claude Code ends a turn after 8 blocks in a row")),
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
    // Vigil's own gate is not named.
    assert_lacks!(said_now, "Stop also runs `/");
}

/// `settings-merge check` with `PATH` as given, in the project of `path`.
fn check_with_path(path: &Path, search: &str, extra: &[&str]) -> std::process::Output {
    settings_merge()
        .env("PATH", search)
        .args(["check", "--settings"])
        .arg(path)
        .args(extra)
        .current_dir(path.parent().unwrap().parent().unwrap())
        .output()
        .unwrap()
}

/// Issue 31: the doctor looks up the check's program as `sh -c` will when the hook runs (a
/// name on PATH, a path from the project's top) and fails the one that is not there, which
/// would block every stop with 127; it says what it found when it is there.
#[test]
fn the_doctor_looks_up_the_checks_program_as_the_hook_will() {
    let (dir, path, _) = project_with("claude-user-hooks.json");
    let project = dir.path();
    let install = |run: &str| {
        ok(merge("install", &path, false, &["--run", run]));
    };
    let stop_line = |out: &std::process::Output| -> String {
        stdout_of(out)
            .lines()
            .find(|l| l.contains("Stop: stop-gate's check runs") || l.contains("shell's own"))
            .unwrap_or_else(|| panic!("no program line: {}", stdout_of(out)))
            .to_string()
    };
    install("vigil-no-such-tool --all");
    let out = check_with_path(&path, "/usr/bin:/bin", &[]);
    assert_exit(&out, 1);
    assert_starts_with!(
        stop_line(&out),
        "[fail] Stop: stop-gate's check runs `vigil-no-such-tool`, which is not on PATH: every stop is blocked (exit 127)",
        "{}",
        stdout_of(&out)
    );
    // Installed where PATH finds it: found, and named.
    let tools = tempfile::tempdir().unwrap();
    let tool = tools.path().join("vigil-no-such-tool");
    std::fs::write(&tool, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    let search = format!("{}:/usr/bin:/bin", tools.path().display());
    let out = check_with_path(&path, &search, &[]);
    assert_eq!(
        stop_line(&out),
        format!(
            "[ok] Stop: stop-gate's check runs vigil-no-such-tool, found on PATH: {}",
            tool.display()
        )
    );
    // A path is from the project's top, after the variables the command sets.
    install("CI=1 ./scripts/test.sh --quick");
    let out = check_with_path(&path, "/usr/bin:/bin", &[]);
    assert_eq!(out.status.code(), Some(1));
    assert_contains!(
        stop_line(&out),
        "./scripts/test.sh, which is not there: every stop is blocked (exit 127)",
        "{}",
        stdout_of(&out)
    );
    std::fs::create_dir_all(project.join("scripts")).unwrap();
    std::fs::write(project.join("scripts/test.sh"), "#!/bin/sh\nexit 0\n").unwrap();
    let out = check_with_path(&path, "/usr/bin:/bin", &[]);
    assert_contains!(
        stop_line(&out),
        "which is not executable: every stop is blocked (exit 126)",
        "{}",
        stdout_of(&out)
    );
    std::fs::set_permissions(
        project.join("scripts/test.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let out = check_with_path(&path, "/usr/bin:/bin", &[]);
    assert_starts_with!(
        stop_line(&out),
        "[ok] Stop: stop-gate's check runs ./scripts/test.sh",
        "{}",
        stdout_of(&out)
    );
    // `~/` is the home directory, as sh expands it.
    install("~/bin/vigil-tool --all");
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("bin")).unwrap();
    std::fs::copy(&tool, home.path().join("bin/vigil-tool")).unwrap();
    let out = settings_merge()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", home.path())
        .args(["check", "--settings"])
        .arg(&path)
        .current_dir(project)
        .output()
        .unwrap();
    assert_starts_with!(
        stop_line(&out),
        "[ok] Stop: stop-gate's check runs ~/bin/vigil-tool",
        "{}",
        stdout_of(&out)
    );
    // The shell's own words are not looked up.
    install("cd sub && vigil-no-such-tool");
    let out = check_with_path(&path, "/usr/bin:/bin", &[]);
    assert_starts_with!(
        stop_line(&out),
        "[ok] Stop: stop-gate's check starts with the shell's own `cd`",
        "{}",
        stdout_of(&out)
    );
}

/// Issue 31: every `[warn]` line of a default install is under 100 columns and names paths as
/// the user types them; the rules and the whole paths are behind `--verbose`.
#[test]
fn the_doctors_warnings_are_short_and_verbose_has_their_detail() {
    let (_dir, path, _) = project_with("claude-user-hooks.json");
    ok(merge("install", &path, false, &[]));
    let report = stdout_of(&merge("check", &path, false, &[]));
    let warnings: Vec<&str> = report.lines().filter(|l| l.starts_with("[warn]")).collect();
    assert!(warnings.len() >= 3, "{report}");
    for line in &warnings {
        assert!(
            line.chars().count() < 100,
            "{} columns: {line}",
            line.chars().count()
        );
    }
    assert!(!report.contains("Edit("), "a rule read as a path: {report}");
    assert!(report.contains("add --verbose for the detail"), "{report}");
    let verbose = stdout_of(&merge("check", &path, false, &["--verbose"]));
    assert_contains!(verbose, "not denied: ");
    assert_contains!(
        verbose,
        "./.claude/settings.json, ./.claude/settings.local.json"
    );
    assert_contains!(verbose, "Edit(/.claude/settings.json)");
    assert_contains!(verbose, "in a rule, /x is the project's x");
    assert!(!verbose.contains("add --verbose"), "{verbose}");
    // The headlines are the same lines, in the same order.
    let headlines: Vec<&str> = verbose.lines().filter(|l| l.starts_with('[')).collect();
    let plain: Vec<&str> = report.lines().filter(|l| l.starts_with('[')).collect();
    assert_eq!(headlines, plain);
}
