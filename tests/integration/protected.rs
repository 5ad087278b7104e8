//! Gate state out of the agent's reach (SPEC §4, §9, issue 14). Each attack is played by an
//! agent that writes only inside the project, as Claude Code's sandbox leaves it; none may end,
//! change or start a loop, silently or at all. Loops start and stop from the human's prompt.

use std::path::Path;

use serde_json::{Value, json};

use crate::support::*;

const DECLARED: &str = "All green.\n\n<promise>DONE</promise>";

fn project() -> Project {
    let dir = Project::git();
    std::fs::write(dir.path().join(".gitignore"), ".vigil/\n").unwrap();
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["commit", "-qm", "ignore"]);
    dir
}

fn start(dir: &Path, session: &str, max: u32) {
    let out = stop_gate()
        .args(["loop", "start", "--session", session])
        .args([
            "--max-iterations",
            &max.to_string(),
            "--completion-promise",
            "DONE",
        ])
        .args(["--", "The real task."])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A Stop in `session` with `message`: what the gate printed (`Null` for a silent allow).
fn stop(dir: &Path, session: &str, message: &str) -> Value {
    let payload = json!({"session_id": session, "hook_event_name": "Stop", "cwd": dir,
        "transcript_path": null, "last_assistant_message": message});
    let out = stop_gate()
        .current_dir(dir)
        .write_stdin(payload.to_string())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    if out.stdout.is_empty() {
        return Value::Null;
    }
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The UserPromptSubmit hook on `prompt`: the exit, and what it printed.
fn prompt(dir: &Path, session: &str, prompt: Value) -> (Option<i32>, Value) {
    let payload = json!({"session_id": session, "hook_event_name": "UserPromptSubmit",
        "cwd": dir, "prompt": prompt});
    prompt_raw(dir, payload.to_string())
}

fn prompt_raw(dir: &Path, payload: String) -> (Option<i32>, Value) {
    let out = stop_gate()
        .current_dir(dir)
        .write_stdin(payload)
        .output()
        .unwrap();
    if out.stdout.is_empty() {
        return (out.status.code(), Value::Null);
    }
    let said: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_valid("prompt-output.schema.json", &said);
    (out.status.code(), said)
}

fn loop_of(dir: &Path, session: &str) -> Value {
    session_record_of(dir, session)["loop"].clone()
}

fn still_looping(dir: &Path, session: &str) {
    let decision = stop(dir, session, "Not yet.");
    assert_eq!(decision["decision"], "block", "the loop ended: {decision}");
    assert!(
        decision["reason"]
            .as_str()
            .unwrap()
            .contains("The real task.")
    );
    assert_eq!(loop_of(dir, session)["status"], "running");
}

/// The loop ends as it should, on the real declaration: the attack before it left it whole.
fn ends_on_the_declaration(dir: &Path, session: &str) {
    let decision = stop(dir, session, DECLARED);
    assert_ne!(decision["decision"], "block", "{decision}");
    assert_eq!(loop_of(dir, session)["status"], "passed");
}

// --- The attacks ------------------------------------------------------------------------------

/// A loop in vigil's own format, as the agent would write one.
fn planted_loop(session: &str, prompt: &str, max: u32, iteration: u32, status: &str) -> Value {
    json!({"schema": "vigil.loop/v2", "session_id": session, "prompt": prompt,
        "completion_promise": "DONE", "max_iterations": max, "iteration": iteration,
        "status": status, "started_at": "2026-01-01T00:00:00Z",
        "updated_at": "2026-01-01T00:00:00Z", "started_by": "terminal"})
}

/// Writes `what` at each path of the project, making the directories: the agent's writes.
fn plant(dir: &Path, relatives: &[&str], what: &Value) {
    for relative in relatives {
        let path = dir.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, what.to_string()).unwrap();
    }
}

#[test]
fn rm_rf_vigil_does_not_end_a_loop() {
    let dir = project();
    start(dir.path(), "s1", 10);
    still_looping(dir.path(), "s1");
    let _ = std::fs::remove_dir_all(dir.path().join(".vigil"));
    still_looping(dir.path(), "s1");
    ends_on_the_declaration(dir.path(), "s1");
}

#[test]
fn git_clean_fdx_does_not_end_a_loop() {
    let dir = project();
    start(dir.path(), "s1", 10);
    std::fs::create_dir_all(dir.path().join(".vigil/markers")).unwrap();
    std::fs::write(dir.path().join(".vigil/markers/x"), "").unwrap();
    git(dir.path(), &["clean", "-fdxq"]);
    assert!(!dir.path().join(".vigil").exists());
    still_looping(dir.path(), "s1");
    ends_on_the_declaration(dir.path(), "s1");
}

/// Every file within the agent's reach, overwritten with a loop that says `passed` and with
/// junk: the loop goes on, and its record is untouched.
#[test]
fn editing_or_corrupting_every_state_file_within_reach_changes_nothing() {
    let dir = project();
    start(dir.path(), "s1", 10);
    stop(dir.path(), "s1", "Working.");
    let before = session_record_of(dir.path(), "s1");
    // A loop that says it passed, and a fake cancel, wherever a loop has ever been kept.
    for status in ["passed", "cancelled"] {
        let planted = planted_loop("s1", "x", 10, 2, status);
        plant(
            dir.path(),
            &[
                ".vigil/loops/s1.json",
                ".vigil/sessions/s1.json",
                ".vigil/state/sessions/s1.rec",
                ".vigil/state/loops/pending.json",
            ],
            &planted,
        );
        assert_eq!(session_record_of(dir.path(), "s1"), before, "{status}");
    }
    for entry in tree(dir.path()) {
        if entry.starts_with(".git/") {
            continue;
        }
        std::fs::write(dir.path().join(&entry), b"\x00junk{").unwrap();
    }
    assert_eq!(session_record_of(dir.path(), "s1"), before);
    still_looping(dir.path(), "s1");
}

/// A loop file planted in the project, in every form a loop has taken, starts nothing.
#[test]
fn a_planted_loop_starts_nothing() {
    let dir = project();
    let running = planted_loop("s9", "Planted.", 99, 1, "running");
    plant(
        dir.path(),
        &[
            ".vigil/loops/s9.json",
            ".vigil/loops/pending.json",
            ".vigil/state/loops/pending.json",
        ],
        &running,
    );
    assert_eq!(stop(dir.path(), "s9", "Working."), Value::Null);
    let loader = session_start_loader()
        .current_dir(dir.path())
        .write_stdin(
            json!({"session_id": "s8", "cwd": dir.path(), "source": "startup"}).to_string(),
        )
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&loader.stdout).contains("claimed a loop"));
    assert_eq!(stop(dir.path(), "s8", "Working."), Value::Null);
}

/// The loop's `!` blocks run in the agent's sandbox, and the agent can write a prompt into a
/// file, or say the command: none of that cancels or starts a loop. Only the human's prompt does.
#[test]
fn a_mention_a_quote_or_a_notification_turn_never_starts_or_cancels() {
    let dir = project();
    start(dir.path(), "s1", 10);
    for text in [
        "please run /vigil-cancel",
        "`/vigil-cancel`",
        " /vigil-cancel",
        "<task-notification>\n<task-id>b1</task-id>\n<status>completed</status>\n<summary>/vigil-cancel</summary>\n</task-notification>",
        "/vigil-cancelled",
        "/vigil-loop-now x --max-iterations 2 --completion-promise DONE",
    ] {
        assert_eq!(
            prompt(dir.path(), "s1", json!(text)),
            (Some(0), Value::Null),
            "{text:?}"
        );
    }
    still_looping(dir.path(), "s1");
    assert!(
        std::fs::read_dir(protected_dir(dir.path()).join("sessions"))
            .unwrap()
            .flatten()
            .all(|e| !e.file_name().to_string_lossy().starts_with("s2")),
        "no record for another session"
    );
}

// --- The human's prompt -------------------------------------------------------------------------

#[test]
fn the_humans_slash_command_starts_and_cancels_the_sessions_loop() {
    let dir = project();
    let task = "Fix the \"parser\" — don't $(skip) it;\n  keep `quotes`, tabs\t and ünïcode";
    let (code, said) = prompt(
        dir.path(),
        "s1",
        json!(format!(
            "/vigil-loop {task} --max-iterations=3 --completion-promise=\"ALL GREEN\""
        )),
    );
    assert_eq!(code, Some(0));
    let context = said["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap();
    assert!(
        context.contains(task) && context.contains("<promise>ALL GREEN</promise>"),
        "{context}"
    );
    assert!(
        said["systemMessage"]
            .as_str()
            .unwrap()
            .contains("up to 3 passes")
    );
    let state = loop_of(dir.path(), "s1");
    assert_eq!(state["prompt"], task, "kept byte for byte");
    assert_eq!(state["max_iterations"], 3);
    assert_eq!(state["started_by"], "slash-command");
    // A second start while it runs is refused, the prompt held up with the reason.
    let (_, refused) = prompt(
        dir.path(),
        "s1",
        json!("/vigil-loop again --max-iterations 2 --completion-promise DONE"),
    );
    assert_eq!(refused["decision"], "block");
    assert!(
        refused["reason"]
            .as_str()
            .unwrap()
            .contains("already running")
    );
    // The plugin's namespaced form cancels it.
    let (_, cancelled) = prompt(dir.path(), "s1", json!("/vigil:vigil-cancel"));
    assert!(
        cancelled["systemMessage"]
            .as_str()
            .unwrap()
            .contains("cancelled at pass 1/3")
    );
    assert_eq!(loop_of(dir.path(), "s1")["status"], "cancelled");
    let (_, nothing) = prompt(dir.path(), "s1", json!("/vigil-cancel"));
    assert!(
        nothing["systemMessage"]
            .as_str()
            .unwrap()
            .contains("no running loop")
    );
}

#[test]
fn a_malformed_slash_command_is_refused_with_the_reason_and_starts_nothing() {
    let dir = project();
    for (text, said) in [
        ("/vigil-loop Fix it", "--max-iterations"),
        (
            "/vigil-loop --max-iterations 3 --completion-promise DONE",
            "needs the prompt",
        ),
        (
            "/vigil-loop Fix --max-iterations lots --completion-promise DONE",
            "whole number",
        ),
        (
            "/vigil-loop Fix --max-iterations 3 --completion-promise '<x>'",
            "<",
        ),
        (
            "/vigil-loop Fix --frob --max-iterations 3 --completion-promise DONE",
            "--frob",
        ),
        (
            "/vigil-loop Fix --next-session --max-iterations 3 --completion-promise DONE",
            "terminal",
        ),
        (
            "/vigil-loop Fix --session other --max-iterations 3 --completion-promise DONE",
            "not this session",
        ),
    ] {
        let (code, out) = prompt(dir.path(), "s1", json!(text));
        assert_eq!(code, Some(0), "{text}");
        assert_eq!(out["decision"], "block", "{text}: {out}");
        assert!(
            out["reason"].as_str().unwrap().contains(said),
            "{text}: {out}"
        );
    }
    let huge = format!(
        "/vigil-loop {} --max-iterations 3 --completion-promise DONE",
        "x".repeat(1 << 20)
    );
    let (_, out) = prompt(dir.path(), "s1", json!(huge));
    assert!(
        out["reason"]
            .as_str()
            .unwrap()
            .contains("more than 16000 characters"),
        "{out}"
    );
    assert_eq!(
        stop(dir.path(), "s1", "x"),
        Value::Null,
        "no loop was started"
    );
}

/// Hook input the prompt hook cannot read never holds the human's prompt up.
#[test]
fn unreadable_prompt_hook_input_lets_the_prompt_through() {
    let dir = project();
    for payload in [
        json!({"session_id": "s1", "hook_event_name": "UserPromptSubmit", "prompt": 42})
            .to_string(),
        json!({"session_id": "../x", "hook_event_name": "UserPromptSubmit", "prompt": "hello"})
            .to_string(),
        json!({"hook_event_name": "UserPromptSubmit", "prompt": "hello"}).to_string(),
    ] {
        assert_eq!(
            prompt_raw(dir.path(), payload.clone()),
            (Some(0), Value::Null),
            "{payload}"
        );
    }
    // Without a session, a slash command cannot be tied to one: refused, with the reason.
    let (_, out) = prompt_raw(
        dir.path(),
        json!({"hook_event_name": "UserPromptSubmit", "prompt": "/vigil-cancel"}).to_string(),
    );
    assert_eq!(out["decision"], "block");
}

// --- One sync per Stop --------------------------------------------------------------------------

/// A Stop with a running loop that declares nothing makes exactly one fdatasync and renames
/// nothing (counted with strace).
#[test]
fn a_stop_with_a_loop_syncs_once() {
    let dir = project();
    start(dir.path(), "s1", 100);
    still_looping(dir.path(), "s1");
    let payload = json!({"session_id": "s1", "hook_event_name": "Stop", "cwd": dir.path(),
        "transcript_path": null, "last_assistant_message": "Not yet."});
    let Some((out, calls)) = traced(
        "stop-gate",
        dir.path(),
        &payload,
        "fsync,fdatasync,sync_file_range,rename,renameat,renameat2",
    ) else {
        return;
    };
    let decision: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(decision["decision"], "block");
    assert_eq!(calls.count("fdatasync"), 1, "{}", calls.text);
    assert_eq!(calls.count("fsync"), 0, "{}", calls.text);
    assert!(!calls.text.contains("rename"), "{}", calls.text);
    assert_eq!(loop_of(dir.path(), "s1")["iteration"], 3);
}

// --- Where the state is -----------------------------------------------------------------------

/// A state home that cannot be made (a regular file is in the way, which holds for root too).
fn unwritable_state_home() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("file"), "").unwrap();
    let home = dir.path().join("file/state");
    (dir, home)
}

/// Issue 29, told, never silent: a state home set inside the project is the agent's to
/// change, as the fallback is; every session's context says so.
#[test]
fn a_state_home_inside_the_project_is_told_as_not_protected() {
    let dir = project();
    let home = dir.path().join("build/state");
    let out = stop_gate()
        .env("VIGIL_STATE_HOME", &home)
        .args(["loop", "start", "--session", "s1", "--max-iterations", "3"])
        .args(["--completion-promise", "DONE", "--", "The real task."])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", said(&out));
    let payload = json!({"session_id": "s1", "cwd": dir.path(), "hook_event_name": "SessionStart", "source": "startup"});
    let out = session_start_loader()
        .env("VIGIL_STATE_HOME", &home)
        .current_dir(dir.path())
        .write_stdin(payload.to_string())
        .output()
        .unwrap();
    let context = String::from_utf8_lossy(&out.stdout);
    assert!(
        context.contains("NOT protected") && context.contains("inside the project"),
        "the session is told: {context}"
    );
}

/// Review: where Claude Code's sandbox lets the agent's commands write besides the project
/// (`$TMPDIR`), a state home is no better than one inside the project.
#[test]
fn a_state_home_in_the_sandboxs_temporary_directory_is_told_as_not_protected() {
    let dir = project();
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("state");
    let payload = json!({"session_id": "s1", "cwd": dir.path(), "hook_event_name": "SessionStart", "source": "startup"});
    let out = session_start_loader()
        .env("VIGIL_STATE_HOME", &home)
        .env("TMPDIR", tmp.path())
        .current_dir(dir.path())
        .write_stdin(payload.to_string())
        .output()
        .unwrap();
    let context = String::from_utf8_lossy(&out.stdout);
    assert!(
        context.contains("NOT protected"),
        "the session is told: {context}"
    );
}

#[test]
fn an_unwritable_state_home_falls_back_into_the_project_and_says_so() {
    let dir = project();
    let (_keep, home) = unwritable_state_home();
    let out = stop_gate()
        .env("VIGIL_STATE_HOME", &home)
        .args(["loop", "start", "--session", "s1", "--max-iterations", "3"])
        .args(["--completion-promise", "DONE", "--", "The real task."])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let record = dir.path().join(".vigil/state/sessions/s1.rec");
    assert!(
        matches!(
            vigil::record::read(&record),
            vigil::record::Read::Found { .. }
        ),
        "the loop is kept in the fallback"
    );
    let payload = json!({"session_id": "s1", "cwd": dir.path(), "hook_event_name": "SessionStart", "source": "startup"});
    let out = session_start_loader()
        .env("VIGIL_STATE_HOME", &home)
        .current_dir(dir.path())
        .write_stdin(payload.to_string())
        .output()
        .unwrap();
    let context = String::from_utf8_lossy(&out.stdout);
    assert!(
        context.contains("NOT protected") && context.contains(".vigil/state"),
        "the session is told: {context}"
    );
    let settings = dir.path().join(".claude/settings.local.json");
    let installed = settings_merge()
        .env("VIGIL_STATE_HOME", &home)
        .args(["install", "--settings"])
        .arg(&settings)
        .arg("--bin-dir")
        .arg(bin_dir())
        .output()
        .unwrap();
    assert!(installed.status.success());
    let check = settings_merge()
        .env("VIGIL_STATE_HOME", &home)
        .args(["check", "--settings"])
        .arg(&settings)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&check.stdout);
    assert_eq!(check.status.code(), Some(1), "{said}");
    assert!(
        said.lines()
            .any(|l| l.starts_with("[fail] the state home") && l.contains("cannot be written")),
        "{said}"
    );
}

#[test]
fn old_loops_in_the_project_are_not_taken_over_and_the_human_is_told_once() {
    let dir = project();
    std::fs::create_dir_all(dir.path().join(".vigil/loops")).unwrap();
    let old = json!({"schema": "vigil.loop/v1", "session_id": "s1", "prompt": "old",
        "completion_promise": "DONE", "max_iterations": 5, "iteration": 1, "status": "running",
        "started_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z"});
    std::fs::write(dir.path().join(".vigil/loops/s1.json"), old.to_string()).unwrap();
    let start = || {
        let payload = json!({"session_id": "s1", "cwd": dir.path(), "hook_event_name": "SessionStart", "source": "startup"});
        let out = session_start_loader()
            .current_dir(dir.path())
            .write_stdin(payload.to_string())
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let first = start();
    assert!(first.contains("were not taken over"), "{first}");
    let second = start();
    assert!(!second.contains("were not taken over"), "once: {second}");
    assert_eq!(
        stop(dir.path(), "s1", "Not yet."),
        Value::Null,
        "the old loop is not run"
    );
}

// --- settings-merge install --protect -----------------------------------------------------------

fn merge_in(dir: &Path, home: &Path, args: &[&str]) -> std::process::Output {
    settings_merge()
        .env("HOME", home)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

#[test]
fn install_protect_turns_the_sandbox_on_and_uninstall_takes_back_exactly_that() {
    let dir = project();
    let home = tempfile::tempdir().unwrap();
    let settings = dir.path().join(".claude/settings.local.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    let original = "{\n  \"sandbox\": {\"network\": {\"allowLocalBinding\": true}},\n  \"permissions\": {\"deny\": [\"Read(./.env)\"]},\n  \"model\": \"opus\"\n}\n";
    std::fs::write(&settings, original).unwrap();
    let file = settings.to_str().unwrap();
    let bin = bin_dir();
    let bin = bin.to_str().unwrap();
    let install = ["install", "--settings", file, "--bin-dir", bin, "--protect"];
    let out = merge_in(dir.path(), home.path(), &install);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
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
    assert!(
        guard["hooks"][0]["command"]
            .as_str()
            .unwrap()
            .trim_end_matches('\'')
            .ends_with("/stop-gate"),
        "{guard}"
    );
    let record: Value =
        serde_json::from_slice(&std::fs::read(install_record_of(dir.path())).unwrap()).unwrap();
    assert_valid("installed.schema.json", &record);
    let protected = std::fs::read(&settings).unwrap();
    // Again with --protect, and again without: neither changes a byte (the protection stays).
    for args in [&install[..], &install[..5]] {
        let out = merge_in(dir.path(), home.path(), args);
        assert!(out.status.success());
        assert_eq!(std::fs::read(&settings).unwrap(), protected);
    }
    let out = merge_in(dir.path(), home.path(), &["uninstall", "--settings", file]);
    assert!(out.status.success());
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), original);
}

#[test]
fn uninstall_after_edits_takes_back_only_what_protect_added_and_still_stands() {
    let dir = project();
    let home = tempfile::tempdir().unwrap();
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
    assert!(merge_in(dir.path(), home.path(), &install).status.success());
    // The user turns unsandboxed retries back on and adds a rule of their own.
    let mut value: Value = serde_json::from_slice(&std::fs::read(&settings).unwrap()).unwrap();
    value["sandbox"]["allowUnsandboxedCommands"] = json!(true);
    value["permissions"]["deny"]
        .as_array_mut()
        .unwrap()
        .push(json!("Bash(curl *)"));
    std::fs::write(&settings, serde_json::to_vec_pretty(&value).unwrap()).unwrap();
    let out = merge_in(dir.path(), home.path(), &["uninstall", "--settings", file]);
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
    let dir = project();
    let home = tempfile::tempdir().unwrap();
    let settings = dir.path().join(".codex/hooks.json");
    let file = settings.to_str().unwrap();
    let out = merge_in(
        dir.path(),
        home.path(),
        &["uninstall", "--settings", file, "--protect"],
    );
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
    let dir = project();
    let home = tempfile::tempdir().unwrap();
    let codex_home = home.path().join("codex");
    std::fs::create_dir_all(&codex_home).unwrap();
    let user_config = codex_home.join("config.toml");
    let canonical = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::write(
        &user_config,
        format!(
            "approval_policy = \"never\"\nsandbox_mode = \"danger-full-access\"\n\n[projects.\"{}\"]\ntrust_level = \"trusted\"\n",
            canonical.display()
        ),
    )
    .unwrap();
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
            .env("HOME", home.path())
            .env("CODEX_HOME", &codex_home)
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    let sandbox_line = |out: &std::process::Output| {
        stdout_of(out)
            .lines()
            .find(|l| l.contains("sandbox"))
            .unwrap_or_default()
            .to_string()
    };
    assert!(
        merge(&[
            "install",
            "--settings",
            file,
            "--codex",
            "--bin-dir",
            bin.to_str().unwrap()
        ])
        .status
        .success()
    );
    let line = sandbox_line(&merge(&["check", "--settings", file, "--codex"]));
    assert!(
        line.starts_with("[warn] Codex runs the agent's commands with your rights")
            && line.contains("danger-full-access")
            && line.contains("approval_policy = \"never\""),
        "{line}"
    );
    let install = [
        "install",
        "--settings",
        file,
        "--codex",
        "--bin-dir",
        bin.to_str().unwrap(),
        "--protect",
    ];
    let out = merge(&install);
    assert!(out.status.success(), "{}", said(&out));
    assert!(
        stdout_of(&out).contains("sandbox_mode = \"workspace-write\""),
        "{}",
        stdout_of(&out)
    );
    let written = std::fs::read_to_string(&project_config).unwrap();
    assert!(
        written.starts_with("# mine\nmodel = \"gpt-5\"\nsandbox_mode = \"workspace-write\"")
            && written.contains("[tools]\nweb_search = true"),
        "at the top, the rest kept: {written}"
    );
    let parsed: toml_edit::DocumentMut = written.parse().unwrap();
    assert_eq!(parsed["sandbox_mode"].as_str(), Some("workspace-write"));
    assert!(parsed["tools"].get("sandbox_mode").is_none());
    // Again: nothing changes.
    assert!(merge(&install).status.success());
    assert_eq!(std::fs::read_to_string(&project_config).unwrap(), written);
    let line = sandbox_line(&merge(&["check", "--settings", file, "--codex"]));
    assert!(
        line.starts_with("[ok] Codex runs the agent's commands in its workspace-write sandbox")
            && line.contains(".codex/config.toml"),
        "{line}"
    );
    // Uninstall takes back its line only.
    assert!(
        merge(&["uninstall", "--settings", file, "--codex"])
            .status
            .success()
    );
    assert_eq!(
        std::fs::read_to_string(&project_config).unwrap(),
        "# mine\nmodel = \"gpt-5\"\n\n[tools]\nweb_search = true\n"
    );
    // A wider mode the user set in the project is refused, the file unchanged.
    std::fs::write(&project_config, "sandbox_mode = \"danger-full-access\"\n").unwrap();
    let out = merge(&install);
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(
        said(&out).contains("vigil does not override a mode you chose"),
        "{}",
        said(&out)
    );
    assert_eq!(
        std::fs::read_to_string(&project_config).unwrap(),
        "sandbox_mode = \"danger-full-access\"\n"
    );
}

/// `settings-merge check`'s lines about the protected state.
fn protection_lines(dir: &Path, home: &Path, file: &str) -> (Option<i32>, Vec<String>) {
    let out = merge_in(dir, home, &["check", "--settings", file]);
    let lines = String::from_utf8_lossy(&out.stdout)
        .lines()
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
        .map(str::to_string)
        .collect();
    (out.status.code(), lines)
}

#[test]
fn check_says_whether_the_state_is_out_of_the_agents_reach_and_why_not() {
    let dir = project();
    let home = tempfile::tempdir().unwrap();
    let settings = dir.path().join(".claude/settings.local.json");
    let file = settings.to_str().unwrap();
    let bin = bin_dir();
    let bin = bin.to_str().unwrap();
    assert!(
        merge_in(
            dir.path(),
            home.path(),
            &["install", "--settings", file, "--bin-dir", bin]
        )
        .status
        .success()
    );
    let (code, lines) = protection_lines(dir.path(), home.path(), file);
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
            .any(|l| l.starts_with("[warn] the Edit and Write tools")
                && l.contains("not denied the state home")),
        "{lines:?}"
    );
    assert!(
        merge_in(
            dir.path(),
            home.path(),
            &["install", "--settings", file, "--bin-dir", bin, "--protect"]
        )
        .status
        .success()
    );
    let (_, lines) = protection_lines(dir.path(), home.path(), file);
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
    std::fs::create_dir_all(home.path().join(".claude")).unwrap();
    std::fs::write(
        home.path().join(".claude/settings.json"),
        r#"{"sandbox": {"allowUnsandboxedCommands": true}}"#,
    )
    .unwrap();
    let (_, lines) = protection_lines(dir.path(), home.path(), file);
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
    let (_, lines) = protection_lines(dir.path(), home.path(), file);
    assert!(
        lines
            .iter()
            .any(|l| l
                .starts_with("[warn] the sandbox is on, but a command may be retried outside it")),
        "the user's layer now decides: {lines:?}"
    );
    // A state home inside the project is within the sandbox's reach.
    let inside = dir.path().join("state");
    let out = settings_merge()
        .env("HOME", home.path())
        .env("VIGIL_STATE_HOME", &inside)
        .args(["check", "--settings", file])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("[fail] the state home") && said.contains("inside the project"),
        "{said}"
    );
}

// --- Where a Stop looks for the session's record ------------------------------------------------

/// The session's loop, wherever in the state home it is kept.
fn loop_anywhere(session: &str) -> Value {
    let projects = state_home().join("projects");
    for entry in std::fs::read_dir(projects).unwrap().flatten() {
        let path = entry.path().join(format!("sessions/{session}.rec"));
        if let vigil::record::Read::Found { payload, .. } = vigil::record::read(&path) {
            let record: Value = serde_json::from_slice(&payload).unwrap();
            return record["loop"].clone();
        }
    }
    Value::Null
}

/// A loop begun below a `.git` planted in a subdirectory (or in a nested repository) is kept
/// under that directory's name; a Stop whose project is the top must still find it.
#[test]
fn a_loop_kept_under_a_nested_git_is_found_by_a_stop_at_the_top() {
    let dir = project();
    let sub = dir.path().join("app");
    std::fs::create_dir_all(sub.join(".git")).unwrap();
    std::fs::write(sub.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    let session = "nested-s1";
    // The directory is there already, without a top file (an older `marker-writer trust`).
    let sub_dir = vigil::protected::dir_in(state_home(), &std::fs::canonicalize(&sub).unwrap());
    std::fs::create_dir_all(sub_dir.join("trusted-keys")).unwrap();
    start(&sub, session, 10);
    let decision = stop(dir.path(), session, "Not yet.");
    assert_eq!(decision["decision"], "block", "the loop ended: {decision}");
    assert_eq!(loop_anywhere(session)["iteration"], 2);
    let decision = stop(dir.path(), session, DECLARED);
    assert_ne!(decision["decision"], "block", "{decision}");
    assert_eq!(loop_anywhere(session)["status"], "passed");
}

/// A repository `proj` inside another repository, with a loop running in `session`; the
/// state home then refuses a directory for the outer top (a full disk; here a file in the way).
fn nested_project_with_a_full_state_home(session: &str) -> (Project, std::path::PathBuf) {
    let outer = Project::git();
    let proj = outer.path().join("proj");
    std::fs::create_dir_all(&proj).unwrap();
    git(&proj, &["init", "-q", "-b", "main"]);
    start(&proj, session, 10);
    let decision = stop(&proj, session, "Not yet.");
    assert_eq!(decision["decision"], "block");
    let outer_top = std::fs::canonicalize(outer.path()).unwrap();
    let blocked = vigil::protected::dir_in(state_home(), &outer_top);
    std::fs::create_dir_all(blocked.parent().unwrap()).unwrap();
    std::fs::write(&blocked, "").unwrap();
    (outer, proj)
}

/// The agent moves where the search for `.git` ends (it deletes the project's own `.git`, so
/// the parent repository is the top) while the state home cannot take a new directory (a full
/// disk; here a file in the way). The Stop must neither fall back into the project and miss the
/// loop, nor end it.
#[test]
fn a_moved_git_top_with_a_state_home_that_takes_nothing_new_does_not_lose_the_loop() {
    let session = "moved-s1";
    let (_outer, proj) = nested_project_with_a_full_state_home(session);
    // Without its top file too (as directories an older `marker-writer trust` made are): the
    // fallback still looks under the project's own name and each one above it.
    let own = vigil::protected::dir_in(state_home(), &std::fs::canonicalize(&proj).unwrap());
    std::fs::remove_file(own.join("top")).unwrap();
    std::fs::remove_dir_all(proj.join(".git")).unwrap();
    let decision = stop(&proj, session, "Not yet.");
    assert_eq!(decision["decision"], "block", "the loop ended: {decision}");
    assert_eq!(loop_anywhere(session)["iteration"], 3);
    assert!(!proj.join(".vigil/state").exists(), "nothing fell back");
    let decision = stop(&proj, session, DECLARED);
    assert_ne!(decision["decision"], "block", "{decision}");
    assert_eq!(loop_anywhere(session)["status"], "passed");
}

/// A record the agent plants in the in-project fallback never hides the one in the state home.
#[test]
fn a_record_planted_in_the_fallback_does_not_hide_the_state_homes() {
    let session = "planted-fallback-s1";
    let (_outer, proj) = nested_project_with_a_full_state_home(session);
    std::fs::remove_dir_all(proj.join(".git")).unwrap();
    // The agent writes a record that says nothing runs where the fallback would be.
    let fake = json!({"schema": "vigil.session/v2", "session_id": session,
        "budget": {"consecutive_blocks": 0, "budget_spent": 0},
        "subagent_budget": {"consecutive_blocks": 0, "budget_spent": 0},
        "updated_at": "2026-01-01T00:00:00Z"});
    let path = proj.join(format!(".vigil/state/sessions/{session}.rec"));
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    vigil::record::write(&path, 1, fake.to_string().as_bytes()).unwrap();
    let decision = stop(&proj, session, "Not yet.");
    assert_eq!(decision["decision"], "block", "the loop ended: {decision}");
}

/// `--prompt-file` in the human's slash command is read by the hook, outside the sandbox, from
/// a path the agent can replace: a FIFO must not hang it, and a symlink or a path outside the
/// project must not carry another file's text into the loop.
#[test]
fn a_slash_commands_prompt_file_is_a_plain_file_in_the_project() {
    let dir = project();
    let secret = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(secret.path(), "SECRET-TEXT").unwrap();
    std::os::unix::fs::symlink(secret.path(), dir.path().join("LINK.md")).unwrap();
    let fifo = dir.path().join("FIFO.md");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let outside = secret.path().display().to_string();
    // A directory that is a link out of the project (as a swap mid-read would make it), and a
    // hard link to a file outside.
    let outside_dir = tempfile::tempdir().unwrap();
    std::fs::write(outside_dir.path().join("task.md"), "SECRET-TEXT").unwrap();
    std::os::unix::fs::symlink(outside_dir.path(), dir.path().join("d")).unwrap();
    std::fs::hard_link(
        outside_dir.path().join("task.md"),
        dir.path().join("HARD.md"),
    )
    .unwrap();
    for (file, said) in [
        ("LINK.md", "symlink"),
        ("d/task.md", "symlink"),
        ("./d/task.md", "symlink"),
        ("HARD.md", "hard links"),
        ("FIFO.md", "regular file"),
        (outside.as_str(), "outside the project"),
        ("../../../../../../etc/hostname", "outside the project"),
    ] {
        let text = format!(
            "/vigil-loop --prompt-file {file} --max-iterations 3 --completion-promise DONE"
        );
        let began = std::time::Instant::now();
        let (code, out) = prompt(dir.path(), "pf-s1", json!(text));
        assert!(
            began.elapsed() < std::time::Duration::from_secs(5),
            "{file}"
        );
        assert_eq!(code, Some(0), "{file}");
        assert_eq!(out["decision"], "block", "{file}: {out}");
        let reason = out["reason"].as_str().unwrap();
        assert!(reason.contains(said), "{file}: {reason}");
        assert!(!reason.contains("SECRET-TEXT"), "{file}: {reason}");
    }
    assert_eq!(stop(dir.path(), "pf-s1", "x"), Value::Null, "no loop began");
    std::fs::write(dir.path().join("PROMPT.md"), "The real task.").unwrap();
    let (_, out) = prompt(
        dir.path(),
        "pf-s1",
        json!("/vigil-loop --prompt-file PROMPT.md --max-iterations 3 --completion-promise DONE"),
    );
    assert_ne!(out["decision"], "block", "{out}");
    still_looping(dir.path(), "pf-s1");
}

/// Looking for a session's record across the state home never takes another project's: the
/// same session name in an unrelated project is that project's loop, not this one's.
#[test]
fn the_same_session_name_in_an_unrelated_project_is_not_this_ones_loop() {
    let one = project();
    let other = project();
    start(one.path(), "shared-name", 10);
    assert_eq!(stop(other.path(), "shared-name", "Not yet."), Value::Null);
    still_looping(one.path(), "shared-name");
}

/// What else lets a command or a tool past the protection, each told by the doctor: commands
/// the sandbox excludes, hooks that find the gate through PATH, user settings it cannot read.
#[test]
fn check_warns_of_excluded_commands_hooks_on_path_and_another_config_dir() {
    let dir = project();
    let home = tempfile::tempdir().unwrap();
    let settings = dir.path().join(".claude/settings.local.json");
    let file = settings.to_str().unwrap();
    let bin = bin_dir();
    let bin = bin.to_str().unwrap();
    let args = ["install", "--settings", file, "--bin-dir", bin, "--protect"];
    assert!(merge_in(dir.path(), home.path(), &args).status.success());
    let (_, lines) = protection_lines(dir.path(), home.path(), file);
    assert!(!lines.iter().any(|l| l.starts_with("[warn]")), "{lines:?}");
    let mut local: Value = serde_json::from_slice(&std::fs::read(&settings).unwrap()).unwrap();
    local["sandbox"]["excludedCommands"] = json!(["docker *", "make"]);
    std::fs::write(&settings, serde_json::to_vec_pretty(&local).unwrap()).unwrap();
    let (_, lines) = protection_lines(dir.path(), home.path(), file);
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("[warn] sandbox.excludedCommands")
                && l.contains("docker *, make")),
        "{lines:?}"
    );
    // Shared settings name the binaries without a path.
    let shared = dir.path().join(".claude/settings.json");
    let shared_file = shared.to_str().unwrap();
    assert!(
        merge_in(
            dir.path(),
            home.path(),
            &["install", "--shared", "--settings", shared_file]
        )
        .status
        .success()
    );
    let (_, lines) = protection_lines(dir.path(), home.path(), shared_file);
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("[warn]") && l.contains("through PATH")),
        "{lines:?}"
    );
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
    let (_, lines) = protection_lines(dir.path(), home.path(), file);
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
    let other = dir.path().join(".claude/other.json");
    let other_file = other.to_str().unwrap();
    let args = [
        "install",
        "--settings",
        other_file,
        "--bin-dir",
        inside.to_str().unwrap(),
    ];
    assert!(merge_in(dir.path(), home.path(), &args).status.success());
    let (code, lines) = protection_lines(dir.path(), home.path(), other_file);
    assert_eq!(code, Some(1), "{lines:?}");
    assert!(
        lines.iter().any(
            |l| l.starts_with("[fail] the hooks run vigil's binaries from")
                && l.contains("inside the project")
        ),
        "{lines:?}"
    );
    let out = settings_merge()
        .env("HOME", home.path())
        .env("CLAUDE_CONFIG_DIR", home.path().join("other"))
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
    let dir = project();
    let home = tempfile::tempdir().unwrap();
    let settings = dir.path().join(".claude/settings.local.json");
    let file = settings.to_str().unwrap();
    let bin = bin_dir();
    let install = [
        "install",
        "--settings",
        file,
        "--bin-dir",
        bin.to_str().unwrap(),
        "--run",
        "make test",
    ];
    assert!(merge_in(dir.path(), home.path(), &install).status.success());
    let lines = |bwrap: Option<&str>| {
        let mut cmd = settings_merge();
        cmd.env("HOME", home.path())
            .args(["check", "--settings", file])
            .current_dir(dir.path());
        if let Some(bwrap) = bwrap {
            cmd.env("VIGIL_TEST_BWRAP", bwrap);
        }
        let out = cmd.output().unwrap();
        let confinement: Vec<String> = stdout_of(&out)
            .lines()
            .filter(|l| l.contains("`make test`"))
            .map(str::to_string)
            .collect();
        assert_eq!(confinement.len(), 1, "{}", stdout_of(&out));
        (out.status.code(), confinement[0].clone())
    };
    let (_, line) = lines(None);
    assert!(
        line.starts_with("[ok] Stop: stop-gate's check `make test` runs confined"),
        "{line}"
    );
    let (_, line) = lines(Some("/nonexistent/bwrap"));
    assert!(
        line.starts_with(
            "[warn] Stop: stop-gate's check `make test` runs unconfined, with your rights"
        ) && line.contains("install the package bubblewrap"),
        "{line}"
    );
    let mut value: Value = serde_json::from_slice(&std::fs::read(&settings).unwrap()).unwrap();
    value["sandbox"] = json!({"enabled": true});
    std::fs::write(&settings, serde_json::to_vec_pretty(&value).unwrap()).unwrap();
    let (code, line) = lines(Some("/nonexistent/bwrap"));
    assert_eq!(code, Some(1));
    assert!(
        line.starts_with("[fail] Stop: stop-gate's check `make test` cannot be confined")
            && line.contains("every stop is blocked"),
        "{line}"
    );
}
