//! SPEC §2, project and state: the project is the git top level, everywhere (issue 29 item 4),
//! and `--state-dir` moves only what may be seen and shared. Claude Code started in a
//! subdirectory loads the project's settings but sets `CLAUDE_PROJECT_DIR` to the subdirectory;
//! the check, the handoffs and the markers still work on the top level. What a human's install
//! or vigil's protected state knows anchors it, so a `.git` the agent plants or deletes does
//! not move it.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::support::*;

/// A repository whose top level holds a failing test, and a subdirectory the engine starts in.
fn repo_with_a_failing_test_at_the_top() -> (Project, std::path::PathBuf) {
    let dir = Project::git();
    dir.write("FAILING", "a test that fails\n");
    let sub = dir.path().join("app");
    std::fs::create_dir_all(&sub).unwrap();
    (dir, sub)
}

/// The Stop hook as Claude Code runs it when started in `start`: `$CLAUDE_PROJECT_DIR` and
/// the input's `cwd` are the subdirectory.
fn stop_from(start: &Path, args: &[&str], session: &str) -> Value {
    let payload = json!({"session_id": session, "hook_event_name": "Stop", "cwd": start,
        "stop_hook_active": false, "last_assistant_message": "Done."});
    let out = ok(stop_gate()
        .args(args)
        .current_dir(start)
        .env("CLAUDE_PROJECT_DIR", start)
        .write_stdin(payload.to_string())
        .output()
        .unwrap());
    let stdout = stdout_of(&out);
    if stdout.trim().is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&stdout).unwrap()
    }
}

const CHECK: [&str; 2] = ["--run", "test ! -e FAILING"];

/// The Stop of `session` started in `start`, under [`CHECK`], blocks: the check ran where the
/// failing test is.
#[track_caller]
fn blocks_from(start: &Path, session: &str) {
    let decision = stop_from(start, &CHECK, session);
    assert_eq!(decision["decision"], "block", "{decision}");
}

#[test]
fn the_check_runs_at_the_git_top_level_when_the_engine_starts_in_a_subdirectory() {
    let (dir, sub) = repo_with_a_failing_test_at_the_top();
    let decision = stop_from(&sub, &CHECK, "s1");
    assert_eq!(
        decision["decision"], "block",
        "the test at the top level fails: {decision}"
    );
    std::fs::remove_file(dir.path().join("FAILING")).unwrap();
    assert_ne!(stop_from(&sub, &CHECK, "s1")["decision"], "block");
}

/// The agent runs `git init` in the subdirectory the engine started in, so the nearest `.git`
/// is there: an installed project stays where the human installed vigil.
#[test]
fn a_git_planted_in_the_subdirectory_does_not_move_an_installed_project() {
    let (dir, sub) = repo_with_a_failing_test_at_the_top();
    install_at(dir.path(), None, &[]);
    git(&sub, &["init", "-q"]);
    blocks_from(&sub, "s1");
}

/// A nested repository that is a project of its own (a submodule, a checkout inside another)
/// is its own project: the state home knowing the outer one does not pull it up.
#[test]
fn a_nested_repository_of_its_own_stays_its_own_project() {
    let (dir, _sub) = repo_with_a_failing_test_at_the_top();
    blocks_from(dir.path(), "s1");
    let inner = dir.path().join("vendor/lib");
    std::fs::create_dir_all(&inner).unwrap();
    git(&inner, &["init", "-q"]);
    assert_ne!(
        stop_from(&inner, &CHECK, "s2")["decision"],
        "block",
        "the check runs in the nested repository, which has no failing test"
    );
}

#[test]
fn the_handoff_is_written_at_the_git_top_level_when_the_engine_starts_in_a_subdirectory() {
    let (dir, sub) = repo_with_a_failing_test_at_the_top();
    let payload = json!({"session_id": "s1", "hook_event_name": "SessionEnd", "cwd": &sub,
        "reason": "other"});
    ok(session_end_handoff()
        .current_dir(&sub)
        .env("CLAUDE_PROJECT_DIR", &sub)
        .write_stdin(payload.to_string())
        .output()
        .unwrap());
    assert!(dir.path().join(".vigil/handoff/final.json").is_file());
    assert!(!sub.join(".vigil").exists());
    // And the next session started in the subdirectory reads it.
    let payload = json!({"session_id": "s2", "hook_event_name": "SessionStart", "cwd": &sub,
        "source": "startup"});
    let out = session_start_loader()
        .current_dir(&sub)
        .env("CLAUDE_PROJECT_DIR", &sub)
        .write_stdin(payload.to_string())
        .output()
        .unwrap();
    assert_stdout_contains(&out, "[final] session s1");
}

#[test]
fn a_marker_written_in_a_subdirectory_runs_its_command_at_the_git_top_level() {
    let (dir, sub) = repo_with_a_failing_test_at_the_top();
    dir.write("check.sh", "test ! -e FAILING\n");
    let required = ["--require-marker", "tests=sh check.sh"];
    let write = || {
        marker_writer()
            .args([
                "run",
                "--check",
                "tests",
                "--snapshot",
                "--",
                "sh",
                "check.sh",
            ])
            .current_dir(&sub)
            .output()
            .unwrap()
    };
    // check.sh is at the top level only: run in the subdirectory, it could not even be found.
    let out = write();
    assert_eq!(out.status.code(), Some(1), "the test fails: {}", said(&out));
    assert_eq!(stop_from(&sub, &required, "s1")["decision"], "block");
    std::fs::remove_file(dir.path().join("FAILING")).unwrap();
    ok(write());
    let decision = stop_from(&sub, &required, "s1");
    assert_ne!(decision["decision"], "block", "{decision}");
    assert_ne!(stop_from(dir.path(), &required, "s2")["decision"], "block");
}

/// A `--user` install keeps its record under your home directory's name: it names no project,
/// so a directory below your home is not pulled up to it.
#[test]
fn a_user_install_does_not_make_your_home_the_project() {
    let home = tempfile::tempdir().unwrap();
    let settings = home.path().join(".claude/settings.json");
    ok(settings_merge()
        .args(["install", "--settings", settings.to_str().unwrap()])
        .args(["--bin-dir", bin_dir().to_str().unwrap()])
        .env("HOME", home.path())
        .current_dir(home.path())
        .output()
        .unwrap());
    assert!(
        install_record_of(home.path()).is_file(),
        "the user install's record"
    );
    let notes = home.path().join("notes");
    std::fs::create_dir_all(&notes).unwrap();
    std::fs::write(notes.join("HERE"), "").unwrap();
    let payload = json!({"session_id": "s1", "hook_event_name": "Stop", "cwd": &notes,
        "stop_hook_active": false, "last_assistant_message": "Done."});
    let out = stop_gate()
        .args(["--run", "test -e HERE"])
        .current_dir(&notes)
        .env("HOME", home.path())
        .env("CLAUDE_PROJECT_DIR", &notes)
        .write_stdin(payload.to_string())
        .output()
        .unwrap();
    assert_lacks!(
        stdout_of(&out),
        "\"decision\":\"block\"",
        "the check ran in the home directory: {}",
        said(&out)
    );
}

/// Review of issue 29: a `.git` planted once, while a hook made protected state for the
/// subdirectory, then removed, must not leave the subdirectory anchored as the project; and a
/// human's install at the top wins over state a planted `.git` left.
#[test]
fn state_left_by_a_planted_git_does_not_anchor_the_subdirectory() {
    let (dir, sub) = repo_with_a_failing_test_at_the_top();
    blocks_from(&sub, "s1");
    std::fs::write(sub.join(".git"), "gitdir: /nowhere\n").unwrap();
    // The planted top is the project while it stands (nothing installed: not covered).
    stop_from(&sub, &CHECK, "s1");
    std::fs::remove_file(sub.join(".git")).unwrap();
    blocks_from(&sub, "s1");
    // Planted again, with the human's install at the top: the install decides.
    std::fs::write(sub.join(".git"), "gitdir: /nowhere\n").unwrap();
    install_at(dir.path(), None, &[]);
    blocks_from(&sub, "s1");
}

/// Second review of issue 29: a repository the agent makes below an install (`git init` in
/// the directory Claude Code started in: nothing registers it) does not move the check off
/// the installed project, whether that was installed outside git, or as a part of a monorepo
/// (`install.sh --project sub`).
#[test]
fn a_git_init_below_an_install_does_not_move_the_project() {
    let outer = tempfile::tempdir().unwrap();
    std::fs::write(outer.path().join("FAILING"), "").unwrap();
    install_at(outer.path(), None, &[]);
    let notes = outer.path().join("notes");
    std::fs::create_dir_all(&notes).unwrap();
    blocks_from(&notes, "s1");
    git(&notes, &["init", "-q"]);
    blocks_from(&notes, "s1");

    let mono = Project::git();
    let sub = mono.path().join("sub");
    let pkg = sub.join("pkg");
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::write(sub.join("FAILING"), "").unwrap();
    install_at(&sub, None, &[]);
    git(&pkg, &["init", "-q"]);
    blocks_from(&pkg, "s2");
}

/// vigil installed in the repository at `dir`, and a worktree of it registered where
/// `claude --worktree` makes one: its path.
fn installed_with_a_worktree(dir: &Path) -> PathBuf {
    install_at(dir, None, &[]);
    let worktree = dir.join(".claude/worktrees/feature");
    git(dir, &["worktree", "add", "-q", worktree.to_str().unwrap()]);
    worktree
}

/// Second review of issue 29: a git worktree (as `claude --worktree` makes one, in
/// `.claude/worktrees/NAME`) is registered in the installed repository's git directory, so
/// it is a project of its own: its check runs there, not in the main checkout.
#[test]
fn a_registered_worktree_below_an_install_is_its_own_project() {
    let (dir, _sub) = repo_with_a_failing_test_at_the_top();
    let worktree = installed_with_a_worktree(dir.path());
    // FAILING is not committed: the worktree has none.
    let decision = stop_from(&worktree, &CHECK, "s1");
    assert_ne!(
        decision["decision"], "block",
        "the check ran in the main checkout: {decision}"
    );
    blocks_from(dir.path(), "s2");
}

/// The agent points a `.git` file of its own in the start directory at a worktree the
/// repository did register (for another directory): the registration names that directory
/// back, not this one, so the check stays on the installed project.
#[test]
fn a_git_file_naming_another_worktrees_registration_does_not_move_the_project() {
    let (dir, sub) = repo_with_a_failing_test_at_the_top();
    installed_with_a_worktree(dir.path());
    let registration = std::fs::canonicalize(dir.path().join(".git/worktrees/feature")).unwrap();
    std::fs::write(
        sub.join(".git"),
        format!("gitdir: {}\n", registration.display()),
    )
    .unwrap();
    blocks_from(&sub, "s1");
}

#[test]
fn state_dir_flag_and_env_override_the_project() {
    let p = Project::new();
    let elsewhere = tempfile::tempdir().unwrap();
    let output = stop_gate()
        .args(["--run", "exit 1"])
        .env("VIGIL_STATE_DIR", elsewhere.path())
        .current_dir(p.path())
        .write_stdin(p.payload("s1", Some("x")).to_string())
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&output.stdout).contains("block"));
    // The shared state moves; the protected state stays in the state home.
    assert!(p.protected().join("sessions/s1.rec").exists());
    assert!(!p.vigil().exists());
}
