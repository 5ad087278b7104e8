//! SPEC §4, the slash commands: `/vigil-loop` and `/vigil-cancel`, read by the UserPromptSubmit
//! hook from the human's own prompt; the templates' `!` blocks only show the state.

use crate::support::*;

#[test]
fn slash_command_arguments_with_trailing_flags_work_as_in_ralph() {
    let p = Project::new();
    let raw = "Fix the flaky test, don't skip it --max-iterations 5 --completion-promise \"ALL GREEN\" --session s1\n";
    ok(p.start_from_stdin(raw));
    let state = p.loop_state("s1");
    assert_eq!(state["prompt"], "Fix the flaky test, don't skip it");
    assert_eq!(state["completion_promise"], "ALL GREEN");
    assert_eq!(state["max_iterations"], 5);
}

/// The ```! block of a command template, with Claude Code's text substitutions applied.
fn command_block(template: &str, arguments: &str, session: Option<&str>) -> String {
    let text = std::fs::read_to_string(repo_path(template)).unwrap();
    let start = text.find("```!\n").expect("a bash block") + 5;
    let end = start + text[start..].find("\n```").unwrap();
    let mut block = text[start..end].replace("$ARGUMENTS", arguments);
    if let Some(session) = session {
        block = block.replace("${CLAUDE_SESSION_ID}", session);
    }
    block
}

fn run_block(p: &Project, block: &str, env: &[(&str, &str)]) -> std::process::Output {
    let bin = bin_dir();
    let mut cmd = std::process::Command::new("bash");
    cmd.arg("-c")
        .arg(block)
        .current_dir(p.path())
        .env("VIGIL_STATE_HOME", state_home())
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()));
    for name in [
        "CLAUDE_SESSION_ID",
        "CLAUDE_CODE_SESSION_ID",
        "VIGIL_SESSION_ID",
        "CLAUDE_PROJECT_DIR",
        "VIGIL_STATE_DIR",
    ] {
        cmd.env_remove(name);
    }
    cmd.envs(env.iter().copied());
    cmd.output().unwrap()
}

/// The slash command's loop is started by the UserPromptSubmit hook from the prompt as typed;
/// the command's own `!` block, which runs in the agent's sandbox, only shows the state, and
/// nothing in the arguments is run by a shell.
#[test]
fn loop_command_template_shows_the_loop_the_prompt_hook_started() {
    let p = Project::new();
    let arguments = "Fix it; don't $(touch pwned) `touch pwned2` \"keep\" 'these' $HOME\n---\nstep 2 --max-iterations 4 --completion-promise 'ALL DONE'";
    let said = p.prompt("sess-1", &format!("/vigil-loop {arguments}"));
    assert_contains!(additional_context(&said), "step 2");
    let output = ok(run_block(
        &p,
        &command_block(
            "templates/commands/vigil-loop.md",
            arguments,
            Some("sess-1"),
        ),
        &[],
    ));
    let state = p.loop_state("sess-1");
    assert_eq!(
        state["prompt"],
        "Fix it; don't $(touch pwned) `touch pwned2` \"keep\" 'these' $HOME\n---\nstep 2"
    );
    assert_eq!(state["max_iterations"], 4);
    assert_eq!(state["completion_promise"], "ALL DONE");
    assert_eq!(state["started_by"], "slash-command");
    assert!(!p.path().join("pwned").exists() && !p.path().join("pwned2").exists());
    let shown = stdout_of(&output);
    assert_contains!(shown, "running, pass 1/4");
    assert_contains!(shown, "step 2");
}

#[test]
fn loop_command_templates_write_nothing() {
    let p = Project::new();
    for template in [
        "templates/commands/vigil-loop.md",
        "templates/commands/vigil-cancel.md",
    ] {
        let block = command_block(
            template,
            "Fix --max-iterations 2 --completion-promise DONE",
            Some("s9"),
        );
        assert!(block.contains("stop-gate loop status"), "{block}");
        assert_lacks!(block, "loop start");
        assert_lacks!(block, "loop cancel");
        let _ = run_block(&p, &block, &[]);
    }
    assert!(tree(p.path()).is_empty());
}

#[test]
fn cancel_prompt_cancels_this_sessions_loop_only() {
    let p = Project::new();
    p.start_ok("sess-1", 3, "work");
    p.start_ok("other", 3, "work");
    let said = p.prompt("sess-1", "/vigil-cancel");
    assert_contains!(
        said["systemMessage"].as_str().unwrap(),
        "cancelled at pass 1/3",
        "{said}"
    );
    let output = run_block(
        &p,
        &command_block("templates/commands/vigil-cancel.md", "", Some("sess-1")),
        &[],
    );
    assert_contains!(stdout_of(&output), "cancelled");
    assert_eq!(p.loop_state("sess-1")["status"], "cancelled");
    assert_eq!(p.loop_state("other")["status"], "running");
}

#[test]
fn completion_prompt_template_teaches_a_declaration() {
    let text = std::fs::read_to_string(repo_path("templates/prompts/completion.md")).unwrap();
    let example = text.lines().find(|l| l.contains("<promise>")).unwrap();
    let output = promise_matcher_on(&["--json"], format!("All done.\n{example}\n"));
    assert!(
        output.status.success(),
        "the line the template teaches must be a declaration"
    );
}

#[test]
fn loop_prompt_with_the_old_template_delimiter_is_only_text() {
    let p = Project::new();
    let arguments = "Fix it.\nVIGIL_LOOP_ARGUMENTS\necho INJECTED > pwned\n--max-iterations 3 --completion-promise DONE";
    p.prompt("s1", &format!("/vigil-loop {arguments}"));
    assert_eq!(
        p.loop_state("s1")["prompt"],
        "Fix it.\nVIGIL_LOOP_ARGUMENTS\necho INJECTED > pwned"
    );
    assert!(!p.path().join("pwned").exists());
}
