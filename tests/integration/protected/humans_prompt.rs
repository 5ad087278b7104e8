//! SPEC §4 and §9, loops start and stop from the human's prompt: the UserPromptSubmit hook
//! reads `/vigil-loop` and `/vigil-cancel` from the prompt as typed, refuses a malformed one
//! with the reason, and reads a `--prompt-file` only as a plain file in the project.

use serde_json::{Value, json};

use crate::support::*;

use super::{project, prompt, prompt_raw, still_looping, stop};

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
    let context = additional_context(&said);
    assert_contains!(context, task);
    assert_contains!(context, "<promise>ALL GREEN</promise>");
    assert_contains!(said["systemMessage"].as_str().unwrap(), "up to 3 passes");
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
    assert_contains!(refused["reason"].as_str().unwrap(), "already running");
    // The plugin's namespaced form cancels it.
    let (_, cancelled) = prompt(dir.path(), "s1", json!("/vigil:vigil-cancel"));
    assert_contains!(
        cancelled["systemMessage"].as_str().unwrap(),
        "cancelled at pass 1/3"
    );
    assert_eq!(loop_of(dir.path(), "s1")["status"], "cancelled");
    let (_, nothing) = prompt(dir.path(), "s1", json!("/vigil-cancel"));
    assert_contains!(
        nothing["systemMessage"].as_str().unwrap(),
        "no running loop"
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
        assert_contains!(out["reason"].as_str().unwrap(), said, "{text}: {out}");
    }
    let huge = format!(
        "/vigil-loop {} --max-iterations 3 --completion-promise DONE",
        "x".repeat(1 << 20)
    );
    let (_, out) = prompt(dir.path(), "s1", json!(huge));
    assert_contains!(
        out["reason"].as_str().unwrap(),
        "more than 16000 characters",
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
        assert_within(began, std::time::Duration::from_secs(5), file);
        assert_eq!(code, Some(0), "{file}");
        assert_eq!(out["decision"], "block", "{file}: {out}");
        let reason = out["reason"].as_str().unwrap();
        assert!(reason.contains(said), "{file}: {reason}");
        assert!(!reason.contains("SECRET-TEXT"), "{file}: {reason}");
    }
    assert_eq!(stop(dir.path(), "pf-s1", "x"), Value::Null, "no loop began");
    dir.write("PROMPT.md", "The real task.");
    let (_, out) = prompt(
        dir.path(),
        "pf-s1",
        json!("/vigil-loop --prompt-file PROMPT.md --max-iterations 3 --completion-promise DONE"),
    );
    assert_ne!(out["decision"], "block", "{out}");
    still_looping(dir.path(), "pf-s1");
}
