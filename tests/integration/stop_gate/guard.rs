//! SPEC §9, file tools held to the sandbox's reach: under `--protect`, stop-gate's PreToolUse
//! hook lets Edit, Write, MultiEdit and NotebookEdit write only inside the project (not what
//! the engine or git runs later) and the temporary directory, judged by where a path resolves.
//! Each test plays the agent's Write tool.

use std::path::Path;

use serde_json::json;

use crate::support::*;

fn write_as(p: &Project, home: &Path, tool: &str, field: &str, path: &str) -> Option<String> {
    p.file_tool(home, tool, field, path)
}

fn hook(home: &Path, cwd: &Path, stdin: Vec<u8>) -> Option<String> {
    pre_tool_use(home, cwd, stdin)
}

/// A home outside /tmp, which the file tools may write.
fn away_from_tmp() -> tempfile::TempDir {
    tempfile::tempdir_in("/var/tmp").unwrap()
}

fn write(p: &Project, home: &Path, path: &str) -> Option<String> {
    write_as(p, home, "Write", "file_path", path)
}

#[test]
fn the_file_tools_write_the_project_and_the_temporary_directory() {
    let p = Project::git();
    let home = tempfile::tempdir().unwrap();
    let root = p.path().display().to_string();
    for path in [
        format!("{root}/src/new.rs"),
        "lib.rs".to_string(),
        "deep/new/dir/file.txt".to_string(),
        "/tmp/scratch.txt".to_string(),
        format!("{root}/.vigil/notes.md"),
    ] {
        assert_eq!(write(&p, home.path(), &path), None, "{path}");
    }
    for tool in ["Edit", "MultiEdit"] {
        assert_eq!(write_as(&p, home.path(), tool, "file_path", "lib.rs"), None);
    }
    assert_eq!(
        write_as(&p, home.path(), "NotebookEdit", "notebook_path", "a.ipynb"),
        None
    );
    // Claude Code's own notes: plans and a project's memory.
    let home_text = home.path().display().to_string();
    for path in [
        format!("{home_text}/.claude/plans/plan.md"),
        format!("{home_text}/.claude/projects/-p/memory/MEMORY.md"),
    ] {
        assert_eq!(write(&p, home.path(), &path), None, "{path}");
    }
}

/// Where the client was given `$CLAUDE_CONFIG_DIR`, its plans and memory are there, and only
/// there: the same notes under `~/.claude` are then a file outside the project.
#[test]
fn the_clients_own_notes_follow_claude_config_dir() {
    let p = Project::git();
    let home = away_from_tmp();
    let config = away_from_tmp();
    let write_with_config = |path: &str| {
        let payload = json!({
            "session_id": "s1", "hook_event_name": "PreToolUse", "cwd": p.path(),
            "tool_name": "Write", "tool_input": {"file_path": path, "content": "x"},
        });
        let output = ok(stop_gate()
            .env("HOME", home.path())
            .env("CLAUDE_CONFIG_DIR", config.path())
            .current_dir(p.path())
            .write_stdin(payload.to_string())
            .output()
            .unwrap());
        String::from_utf8(output.stdout).unwrap()
    };
    let c = config.path().display().to_string();
    for path in [
        format!("{c}/plans/plan.md"),
        format!("{c}/projects/-p/memory/MEMORY.md"),
    ] {
        assert_eq!(write_with_config(&path), "", "{path}");
    }
    let h = home.path().display().to_string();
    for path in [
        format!("{h}/.claude/plans/plan.md"),
        format!("{c}/agents/x.md"),
        format!("{c}/plans/run.sh"),
    ] {
        assert!(write_with_config(&path).contains("denied"), "{path}");
    }
}

#[test]
fn files_the_engine_or_git_runs_later_are_denied_with_their_reason() {
    let p = Project::git();
    let home = away_from_tmp();
    let h = home.path().display().to_string();
    for (path, names) in [
        (".claude/agents/helper.md".to_string(), ".claude"),
        (".claude/commands/x.md".to_string(), ".claude"),
        (".claude/settings.json".to_string(), ".claude"),
        (".mcp.json".to_string(), ".mcp.json"),
        (".git/hooks/pre-commit".to_string(), ".git"),
        (".git/config".to_string(), ".git"),
        // Where git also reads config and hooks from.
        (".git/commondir".to_string(), ".git"),
        (".git/modules/sub/hooks/post-checkout".to_string(), ".git"),
        (".git/info/attributes".to_string(), ".git"),
        // At any depth, in any case.
        ("sub/.git/config".to_string(), "sub/.git"),
        ("sub/.claude/agents/x.md".to_string(), "sub/.claude"),
        (".CLAUDE/agents/x.md".to_string(), ".CLAUDE"),
        (".codex/hooks.json".to_string(), ".codex"),
        (".vscode/tasks.json".to_string(), ".vscode"),
        (format!("{h}/.bashrc"), "start-up file"),
        (format!("{h}/.zshrc"), "start-up file"),
        (format!("{h}/.claude.json"), ".claude.json"),
        (format!("{h}/.claude/agents/x.md"), ".claude"),
        (format!("{h}/.claude/settings.json"), ".claude"),
        (format!("{h}/.claude/plans/run.sh"), ".claude"),
        (format!("{h}/.codex/config.toml"), ".codex"),
        ("/etc/cron.d/x".to_string(), "outside the project"),
    ] {
        let reason = write(&p, home.path(), &path).unwrap_or_else(|| panic!("{path} was allowed"));
        assert!(reason.contains(names), "{path}: {reason}");
        assert!(reason.contains("denied"), "{reason}");
    }
    for tool in ["Edit", "MultiEdit"] {
        assert!(write_as(&p, home.path(), tool, "file_path", ".mcp.json").is_some());
    }
    assert!(
        write_as(
            &p,
            home.path(),
            "NotebookEdit",
            "notebook_path",
            ".claude/x.ipynb"
        )
        .is_some()
    );
}

/// The reach is the directory Claude Code runs in (`$CLAUDE_PROJECT_DIR`), as its sandbox
/// has it, not the git top level above it: in a repository `mono` started at `mono/app`, a
/// sibling, the top's files and the project's own read-only entries are all out of reach, and
/// a `.git` file (a worktree's pointer) is read-only too.
#[test]
fn the_reach_is_the_directory_claude_code_runs_in_not_the_git_top() {
    let mono = tempfile::tempdir_in("/var/tmp").unwrap();
    git(mono.path(), &["init", "-q"]);
    let app = mono.path().join("app");
    std::fs::create_dir_all(mono.path().join("other")).unwrap();
    std::fs::create_dir_all(&app).unwrap();
    let home = away_from_tmp();
    let write_in = |path: &str| {
        let payload = json!({"hook_event_name": "PreToolUse", "cwd": app, "tool_name": "Write",
            "tool_input": {"file_path": path}});
        let output = stop_gate()
            .env("HOME", home.path())
            .env("TMPDIR", "/tmp")
            .env("CLAUDE_PROJECT_DIR", &app)
            .current_dir(&app)
            .write_stdin(payload.to_string())
            .output()
            .unwrap();
        !output.stdout.is_empty()
    };
    assert!(!write_in("src/main.rs"), "the project itself is writable");
    for path in [
        "../other/x",
        "../.gitignore",
        ".claude/settings.json",
        ".mcp.json",
        "../.git/config",
    ] {
        assert!(write_in(path), "{path} was allowed");
    }
    std::fs::write(app.join(".git"), "gitdir: ../.git/worktrees/app\n").unwrap();
    assert!(write_in(".git"), "a worktree's .git file was allowed");
}

#[test]
fn the_state_home_is_denied_under_the_temporary_directory_and_inside_the_project() {
    let p = Project::git();
    let home = tempfile::tempdir().unwrap();
    // The tests' state home is under /tmp, which the tools may otherwise write.
    std::fs::create_dir_all(state_home().join("projects")).unwrap();
    let target = state_home().join("projects/x/sessions/s1.rec");
    let reason = write(&p, home.path(), target.to_str().unwrap()).expect("denied");
    assert!(reason.contains("never writes"), "{reason}");
    // A state home the user put inside the project.
    let inside = p.path().join("state");
    std::fs::create_dir(&inside).unwrap();
    let payload = json!({"hook_event_name": "PreToolUse", "cwd": p.path(), "tool_name": "Write",
        "tool_input": {"file_path": "state/trusted-keys/agent.pub"}});
    let output = stop_gate()
        .env("HOME", home.path())
        .env("VIGIL_STATE_HOME", &inside)
        .current_dir(p.path())
        .write_stdin(payload.to_string())
        .output()
        .unwrap();
    assert_stdout_contains(&output, "\"deny\"");
}

#[test]
fn a_path_is_judged_where_it_resolves_never_by_its_spelling() {
    let p = Project::git();
    let home = away_from_tmp();
    let root = p.path();
    let outside = tempfile::tempdir_in(home.path()).unwrap();
    // A link out of the project, a link through a link, and a link into .claude.
    std::os::unix::fs::symlink(outside.path(), root.join("out")).unwrap();
    std::os::unix::fs::symlink("out", root.join("via")).unwrap();
    std::fs::create_dir(root.join(".claude")).unwrap();
    std::os::unix::fs::symlink(".claude", root.join("config")).unwrap();
    std::os::unix::fs::symlink(".git/hooks/pre-push", root.join("hook.sh")).unwrap();
    std::fs::create_dir(root.join("sub")).unwrap();
    std::os::unix::fs::symlink(home.path(), root.join("sub/h")).unwrap();
    for path in [
        "out/x.sh",
        "via/x.sh",
        "config/agents/a.md",
        "hook.sh",
        "sub/h/.bashrc",
        // `..` after a link: the kernel goes up from where the link leads.
        "sub/h/../../etc/x",
        "./sub/../.claude/commands/x.md",
    ] {
        assert!(write(&p, home.path(), path).is_some(), "{path} was allowed");
    }
    // A link to nowhere inside .git/hooks: the write would create it there.
    std::os::unix::fs::symlink(".git/hooks/post-checkout", root.join("later")).unwrap();
    assert!(write(&p, home.path(), "later").is_some());
    // A loop of links is denied, not followed for ever.
    std::os::unix::fs::symlink("loop", root.join("loop")).unwrap();
    let reason = write(&p, home.path(), "loop/x").expect("denied");
    assert!(reason.contains("loop of links"), "{reason}");
}

#[test]
fn input_the_guard_cannot_read_denies_the_write() {
    let p = Project::git();
    let home = tempfile::tempdir().unwrap();
    for stdin in [
        br#"{"hook_event_name":"PreToolUse","tool_name":"Write","tool_input":"x"}"#.to_vec(),
        br#"{"hook_event_name":"PreToolUse","tool_name":"Write","tool_input":{}}"#.to_vec(),
        br#"{"hook_event_name":"PreToolUse","tool_name":"Write","tool_input":{"file_path":7}}"#
            .to_vec(),
        br#"{"hook_event_name":"PreToolUse","tool_name":"Write","tool_input":{"file_path":""}}"#
            .to_vec(),
        br#"{"hook_event_name":"PreToolUse","tool_name":7}"#.to_vec(),
        br#"{"hook_event_name":"PreToolUse","cwd":["x"]}"#.to_vec(),
    ] {
        assert!(
            hook(home.path(), p.path(), stdin.clone()).is_some(),
            "{}",
            String::from_utf8_lossy(&stdin)
        );
    }
    // Tools that write no file pass untouched.
    let read = json!({"hook_event_name": "PreToolUse", "cwd": p.path(), "tool_name": "Read",
        "tool_input": {"file_path": "/etc/passwd"}});
    assert_eq!(
        hook(home.path(), p.path(), read.to_string().into_bytes()),
        None
    );
}

/// What git runs from the project (issue 43 item 1): husky's hooks directory, a config file
/// `include.path` brings in, a filter's program, in the top repository and in a nested one.
#[test]
fn the_file_tools_never_write_what_git_runs_from_the_project() {
    let p = Project::git();
    let home = tempfile::tempdir().unwrap();
    let root = p.path();
    p.write(".husky/pre-commit", "npm test\n");
    p.write(
        "tools/git.cfg",
        "[filter \"fmt\"]\n\tclean = ./scripts/clean.sh %f\n",
    );
    p.write("scripts/clean.sh", "cat\n");
    git(root, &["config", "core.hooksPath", ".husky"]);
    git(root, &["config", "include.path", "../tools/git.cfg"]);
    git(root, &["init", "-q", "vendor/lib"]);
    git(
        &root.join("vendor/lib"),
        &["config", "core.fsmonitor", "sh ./watch.sh"],
    );
    for (path, why) in [
        (".husky/pre-commit", "core.hooksPath"),
        (".husky/post-merge", "core.hooksPath"),
        ("tools/git.cfg", "include.path"),
        ("scripts/clean.sh", "filter.fmt.clean"),
        ("vendor/lib/watch.sh", "core.fsmonitor"),
    ] {
        let said = write(&p, home.path(), path).unwrap_or_else(|| panic!("{path} was let through"));
        assert_contains!(said, why);
        assert_contains!(said, "never write what git runs");
    }
    for path in ["scripts/build.sh", "tools/other.cfg", "vendor/lib/src.rs"] {
        assert_eq!(write(&p, home.path(), path), None, "{path}");
    }
}

/// Issue 43 item 6: a hard link the agent's sandboxed shell made to a file of yours outside the
/// project (its sandbox lets it link what it can read) would carry the Write tool's write out of
/// the reach, whatever the path says.
#[test]
fn a_file_with_other_names_is_never_written() {
    let p = Project::git();
    let home = away_from_tmp();
    let outside = home.path().join("dotfile");
    std::fs::write(&outside, "mine\n").unwrap();
    std::fs::create_dir_all(p.path().join("src")).unwrap();
    std::fs::hard_link(&outside, p.path().join("src/notes.txt")).unwrap();
    let said = write(&p, home.path(), "src/notes.txt").expect("a hard link is let through");
    assert_contains!(said, "other names");
    assert_eq!(write(&p, home.path(), "src/other.txt"), None);
}

/// The PostToolUse hook's answer for a file tool's write of `path` in `p`: `None` silent.
fn after_write(p: &Project, home: &Path, path: &str) -> Option<serde_json::Value> {
    let payload = json!({
        "session_id": "s1", "hook_event_name": "PostToolUse", "cwd": p.path(),
        "tool_name": "Write", "tool_use_id": "toolu_1",
        "tool_input": {"file_path": path, "content": "x"},
        "tool_response": {"filePath": path, "success": true},
    });
    let out = stop_gate()
        .env("HOME", home)
        .env("TMPDIR", "/tmp")
        .current_dir(p.path())
        .write_stdin(payload.to_string())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    (!out.stdout.is_empty()).then(|| serde_json::from_slice(&out.stdout).unwrap())
}

/// Issue 43 item 6, the guard's window: the agent's background command swaps a directory for
/// a link out of the project between the guard's judgment and the Write tool's write. The
/// PostToolUse hook sees where the path leads now and tells the person and the model; it
/// deletes nothing.
#[test]
fn a_write_that_left_the_reach_after_the_guard_is_told_to_the_person_and_the_model() {
    let p = Project::git();
    let home = away_from_tmp();
    std::fs::create_dir_all(p.path().join("build")).unwrap();
    assert_eq!(
        write(&p, home.path(), "build/out.txt"),
        None,
        "the guard lets it through"
    );
    assert_eq!(
        after_write(&p, home.path(), "build/out.txt"),
        None,
        "it landed in reach"
    );
    // The swap, between the two hooks, and the write through it.
    let config = home.path().join(".config");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::remove_dir(p.path().join("build")).unwrap();
    std::os::unix::fs::symlink(&config, p.path().join("build")).unwrap();
    std::fs::write(config.join("out.txt"), "x").unwrap();
    let told = after_write(&p, home.path(), "build/out.txt").expect("told");
    assert_eq!(told["decision"], "block", "{told}");
    let reason = told["reason"].as_str().unwrap();
    assert_eq!(told["systemMessage"].as_str(), Some(reason));
    assert_contains!(
        reason,
        "was allowed, but its path now leads out of the agent's reach"
    );
    assert_contains!(reason, "vigil undoes nothing");
    assert!(config.join("out.txt").exists(), "nothing deleted");
}
