//! SPEC §11, tests the agent cannot weaken: a human holds the tests (`stop-gate hold`), the
//! check runs on them as held, a declaration while one differs is refused, and the file-tool
//! guard keeps the agent's writes off them. Each attack is played as the agent would play it
//! (its edits in the tree, its code run by the check) in a real repository with a genuinely
//! failing test, and must be refused.

use super::DECLARED;
use crate::support::*;

/// A project whose one test fails: `calc.add` subtracts.
const CALC: &str = "def add(a, b):\n    return a - b\n";
const FIXED: &str = "def add(a, b):\n    return a + b\n";
const TEST: &str = "import unittest\nfrom calc import add\n\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 2), 4)\n";
const UNITTEST: &str = "python3 -m unittest";

fn python_project() -> Project {
    Project::builder()
        .git()
        .file("calc.py", CALC)
        .file("tests/__init__.py", "")
        .file("tests/test_calc.py", TEST)
        .build()
}

/// `python_project` whose `.venv/` git ignores (a committed `.gitignore`).
fn python_project_ignoring_its_venv() -> Project {
    let p = python_project();
    p.write(".gitignore", ".venv/\n");
    git(p.path(), &["add", ".gitignore"]);
    git(p.path(), &["commit", "-qm", "ignore"]);
    p
}

/// `python_project` with its tests held.
fn held_python() -> Project {
    let p = python_project();
    p.held(&["add", "tests"]);
    p
}

/// `held_python`, and a loop of session s1 to make the tests pass.
fn held_python_loop() -> Project {
    let p = held_python();
    p.start_ok("s1", 5, "Make the tests pass.");
    p
}

/// Where python3 runs: `held_python_loop`.
fn python_loop() -> Option<Project> {
    python().then(held_python_loop)
}

/// The agent's edit of the held test: its assertion now agrees with the bug.
fn weaken_the_test(p: &Project) {
    p.write("tests/test_calc.py", TEST.replace("4)", "0)"));
}

/// The project's loop s1, started, then a declaration under `--run check`.
fn declare(p: &Project, check: &str) -> Stop {
    p.stop(&["--run", check], "s1", Some(DECLARED))
}

#[test]
fn hold_add_keeps_the_tests_in_the_protected_state_and_never_changes_the_tree() {
    let p = python_project();
    let said = p.held(&["add", "tests/"]);
    assert!(said.contains("held 2 files under tests"), "{said}");
    let record = json_of(&p.protected().join("hold/hold.json"));
    assert_valid("hold.schema.json", &record);
    assert_eq!(record["patterns"][0]["pattern"], "tests");
    assert_eq!(record["patterns"][0]["at"], "working-tree");
    let paths = fields_of(&record["files"], "path");
    assert_eq!(paths, ["tests/__init__.py", "tests/test_calc.py"]);
    // The held bytes are kept beside it, under their blob id.
    let blob = record["files"][1]["blob"].as_str().unwrap();
    assert_eq!(
        std::fs::read_to_string(p.protected().join("hold/blobs").join(blob)).unwrap(),
        TEST
    );
    assert_eq!(git(p.path(), &["status", "--porcelain"]), "");
    assert!(!p.path().join(".vigil/hold").exists());
}

#[test]
fn a_declaration_while_a_held_test_is_edited_is_refused_naming_it() {
    let Some(p) = python_loop() else { return };
    weaken_the_test(&p);
    let stop = declare(&p, UNITTEST);
    let reason = stop.assert_task_starting(
        "stop-gate: held files differ from the human's hold: tests/test_calc.py (modified)",
    );
    assert_contains!(reason, "stop-gate hold refresh tests/test_calc.py");
    assert_eq!(p.loop_state("s1")["status"], "running");
}

#[test]
fn a_declaration_while_a_held_test_is_deleted_or_skipped_is_refused() {
    let Some(p) = python_loop() else { return };
    std::fs::remove_file(p.path().join("tests/test_calc.py")).unwrap();
    let stop = declare(&p, UNITTEST);
    stop.assert_task_saying("tests/test_calc.py (deleted)");
    // Marked skipped: a change like any other.
    p.write(
        "tests/test_calc.py",
        TEST.replace(
            "    def test_add",
            "    @unittest.skip('flaky')\n    def test_add",
        ),
    );
    let stop = declare(&p, UNITTEST);
    stop.assert_task_saying("tests/test_calc.py (modified)");
    // The real fix, with the test as held, passes.
    p.write("tests/test_calc.py", TEST);
    p.write("calc.py", FIXED);
    let stop = declare(&p, UNITTEST);
    stop.assert_allowed();
    assert_eq!(p.loop_state("s1")["status"], "passed");
}

#[test]
fn without_a_hold_the_weakened_test_passes_the_check_as_before() {
    if !python() {
        return;
    }
    // What the hold is for: the same attack, no hold, and the gate has nothing to say.
    let p = python_project();
    p.start_ok("s1", 5, "Make the tests pass.");
    weaken_the_test(&p);
    let stop = declare(&p, UNITTEST);
    stop.assert_allowed();
}

#[test]
fn a_new_conftest_under_a_held_path_is_left_out_of_the_checks_copy() {
    if !python() || !pytest() {
        return;
    }
    let p = held_python_loop();
    // The agent's conftest turns every failure into a pass, then erases itself after the run.
    p.write("tests/conftest.py", "import os, pytest\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n    out = yield\n    r = out.get_result()\n    if r.failed:\n        r.outcome = 'passed'\n\ndef pytest_unconfigure(config):\n    pass\n");
    let check = "python3 -m pytest -q -p no:cacheprovider tests";
    // Without the hold the attack works: the check passes in place.
    ok(std::process::Command::new("sh")
        .args(["-c", check])
        .current_dir(p.path())
        .output()
        .unwrap());
    let stop = declare(&p, check);
    assert!(stop.blocked(), "the conftest was run");
    let reason = stop.task();
    assert!(reason.contains("failed"), "{reason}");
    assert_contains!(reason, "not in the check's copy: tests/conftest.py");
    assert_contains!(stop.system_message(), "tests/conftest.py");
}

#[test]
fn a_check_cannot_rewrite_a_held_test_while_it_runs() {
    if !python() {
        return;
    }
    let p = held_python();
    // The check's own code edits the held test before the runner reads it.
    let attack = format!("sed -i 's/4)/0)/' tests/test_calc.py; {UNITTEST}");
    let stop = p.stop_s1(&["--run", &attack]);
    assert!(stop.blocked(), "the held test was rewritten");
    let reason = stop.reason();
    assert!(
        reason.contains("Read-only file system") || reason.contains("Permission denied"),
        "{reason}"
    );
    assert!(reason.contains("AssertionError: 0 != 4"), "{reason}");
    // Nothing the check wrote reaches the tree.
    assert_eq!(p.read("tests/test_calc.py"), TEST);
}

#[test]
fn what_a_check_writes_under_a_hold_is_discarded_with_its_copy() {
    let p = held_python();
    let stop = p.stop_s1(&["--run", "echo made > made.txt && test -f made.txt"]);
    stop.assert_allowed();
    assert!(!p.path().join("made.txt").exists());
    assert_eq!(git(p.path(), &["status", "--porcelain"]), "");
}

#[test]
fn the_check_under_a_hold_runs_on_the_content_the_verdict_names() {
    let p = held_python();
    // An untracked file that git does not ignore is in the copy; an ignored one is not.
    p.write(".gitignore", "ignored.txt\n");
    p.write("new.txt", "n");
    p.write("ignored.txt", "i");
    let stop = p.stop_s1(&[
        "--run",
        "test -f new.txt && test ! -e ignored.txt && test -f tests/test_calc.py",
    ]);
    stop.assert_allowed();
}

#[test]
fn a_legitimate_test_change_passes_once_the_human_refreshes_it() {
    let p = held_python_loop();
    let changed = TEST.replace("(2, 2), 4", "(2, 3), 5");
    p.write("tests/test_calc.py", &changed);
    assert!(declare(&p, "true").blocked());
    let said = p.held(&["refresh", "tests/test_calc.py"]);
    assert!(said.contains("renewed tests/test_calc.py"), "{said}");
    let stop = declare(&p, "true");
    stop.assert_allowed();
    assert_eq!(stdout_of(&p.hold(&["cat", "tests/test_calc.py"])), changed);
}

#[test]
fn a_hold_at_a_commit_is_what_the_commit_has() {
    let p = python_project();
    // The tree was already weakened when the human held the tests at HEAD.
    weaken_the_test(&p);
    let head = git(p.path(), &["rev-parse", "HEAD"]);
    p.held(&["add", "--at", "HEAD", "tests"]);
    let record = json_of(&p.protected().join("hold/hold.json"));
    assert_eq!(record["patterns"][0]["at"], head.trim());
    let stop = p.stop_s1(&["--run", "true"]);
    assert!(stop.blocked());
    assert!(stop.reason().contains("tests/test_calc.py (modified)"));
    let out = p.hold(&["diff", "--patch"]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout_of(&out);
    assert!(text.contains("modified tests/test_calc.py"), "{text}");
    assert_contains!(text, "-        self.assertEqual(add(2, 2), 4)");
    assert_contains!(text, "+        self.assertEqual(add(2, 2), 0)");
}

#[test]
fn hold_diff_names_modified_deleted_and_new_files() {
    let p = Project::builder()
        .git()
        .file("tests/a.py", "a")
        .file("tests/b.py", "b")
        .build();
    p.held(&["add", "tests"]);
    let out = ok(p.hold(&["diff"]));
    assert_eq!(stdout_of(&out), "the 2 held files are as held\n");
    p.write("tests/a.py", "A");
    std::fs::remove_file(p.path().join("tests/b.py")).unwrap();
    p.write("tests/c.py", "c");
    let out = p.hold(&["diff"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stdout_of(&out),
        "modified tests/a.py\ndeleted tests/b.py\nnew tests/c.py (not held: the check's copy leaves it out)\n"
    );
}

#[test]
fn a_glob_holds_what_it_matches_and_the_copy_leaves_out_unheld_matches() {
    let p = Project::builder()
        .git()
        .file("pkg/a_test.go", "a")
        .file("pkg/a.go", "code")
        .build();
    p.held(&["add", "**/*_test.go"]);
    p.write("pkg/b_test.go", "b");
    p.write("pkg/b.go", "more code");
    let stop = p.stop_s1(&[
        "--run",
        "test -f pkg/a_test.go && test ! -e pkg/b_test.go && test -f pkg/b.go",
    ]);
    stop.assert_allowed();
}

#[test]
fn every_worktree_of_the_repository_uses_the_hold() {
    let p = held_python();
    let other = p.root().join("other");
    add_worktree(p.path(), "other", &other);
    write_file(&other.join("tests/test_calc.py"), TEST.replace("4)", "0)"));
    let stop = run_stop(
        &other,
        &["--run", "true"],
        &[],
        stop_payload(&other, "w1", Some("x")).to_string(),
    );
    stop.assert_blocked_saying("tests/test_calc.py (modified)");
}

#[test]
fn what_git_ignores_reaches_the_check_only_when_the_human_declares_it() {
    let p = python_project_ignoring_its_venv();
    p.write(".venv/lib/dep.py", "VALUE = 1\n");
    p.held(&["add", "tests"]);
    let check = "test -f .venv/lib/dep.py";
    assert!(p.stop_s1(&["--run", check]).blocked());
    let said = p.held(&["add", "--env", ".venv"]);
    assert!(said.contains(".venv read-only"), "{said}");
    let stop = p.stop_s1(&["--run", check]);
    stop.assert_allowed();
    // Read-only: the check cannot change the environment it was given.
    let stop = p.stop_s1(&["--run", "echo x >> .venv/lib/dep.py"]);
    assert!(stop.blocked(), "the environment was written");
    assert_eq!(p.read(".venv/lib/dep.py"), "VALUE = 1\n");
}

#[test]
fn build_directories_under_a_hold_go_to_the_check_cache() {
    let p = held_python();
    let stop = p.stop_s1(&[
            "--run",
            "mkdir -p \"$CARGO_TARGET_DIR\" && echo warm > \"$CARGO_TARGET_DIR/built\" && test -n \"$PYTHONPYCACHEPREFIX\"",
        ]);
    stop.assert_allowed();
    let cache = p.protected().join("check-cache/cargo-target/built");
    assert_eq!(std::fs::read_to_string(cache).unwrap(), "warm\n");
    // The next check finds what the last one built.
    let stop = p.stop_s1(&["--run", "grep -q warm \"$CARGO_TARGET_DIR/built\""]);
    stop.assert_allowed();
}

#[test]
fn a_damaged_hold_blocks_the_stop_and_the_guard() {
    let p = held_python();
    write_file(&p.protected().join("hold/hold.json"), "{not json");
    let stop = p.stop_s1(&["--run", "true"]);
    stop.assert_blocked_saying("the hold");
    assert_contains!(stop.reason(), "is damaged");
    let denied = write_tool(&p, "src/new.py").expect("denied");
    assert!(denied.contains("cannot be read"), "{denied}");
}

/// What the PreToolUse hook said of the Write tool writing `path` in `p`.
fn write_tool(p: &Project, path: &str) -> Option<String> {
    let home = tempfile::tempdir().unwrap();
    p.file_tool(home.path(), "Write", "file_path", path)
}

#[test]
fn the_guard_refuses_held_files_and_new_runner_configuration_but_not_new_tests() {
    let p = held_python();
    let denied = write_tool(&p, "tests/test_calc.py").expect("a held file is denied");
    assert_eq!(
        denied,
        "vigil: tests/test_calc.py is held by the human; if the test is wrong, end with `needs-decision:` and say why"
    );
    // By any spelling that lands there.
    let spelled = format!("{}/tests/../tests/./test_calc.py", p.path().display());
    assert!(write_tool(&p, &spelled).is_some());
    let denied = write_tool(&p, "tests/conftest.py").expect("runner config is denied");
    assert_contains!(denied, "would configure the test runner");
    assert_eq!(write_tool(&p, "tests/test_more.py"), None);
    assert_eq!(write_tool(&p, "calc.py"), None);
    // Outside a held path, configuration is the agent's project to shape.
    assert_eq!(write_tool(&p, "conftest2.py"), None);
}

#[test]
fn hold_refuses_paths_it_cannot_hold_in_one_line() {
    let p = python_project();
    for (args, says) in [
        (vec!["add"], "name the tests to hold"),
        (
            vec!["add", "--at", "HEAD"],
            "there is no .vigil-hold at HEAD",
        ),
        (vec!["add", "/etc/passwd"], "outside the repository"),
        (vec!["add", "../elsewhere"], "outside the repository"),
        (vec!["add", "."], "not the whole repository"),
        (
            vec!["add", ".git/config"],
            "not a path inside the repository",
        ),
        (vec!["add", "tests/[oops"], "not a glob vigil can read"),
        (vec!["add", "missing/"], "holds no file"),
        (
            vec!["add", "--at", "no-such-rev", "tests"],
            "names no commit",
        ),
        (vec!["add", "--at", "--help", "tests"], "is not a commit"),
        (vec!["frob"], "is not add, show, diff"),
        (vec!["show", "tests"], "takes no paths"),
        (vec!["diff"], "nothing is held"),
        (vec!["release"], "or --all"),
        (vec!["add", "--env", ".venv"], "there is no hold yet"),
    ] {
        let out = p.hold(&args);
        let line = usage_error(&out, "stop-gate");
        assert!(line.contains(says), "{args:?}: {line}");
    }
    assert!(!p.protected().join("hold/hold.json").exists());
}

#[test]
fn hold_release_takes_the_hold_away() {
    let p = python_project();
    p.held(&["add", "tests/test_calc.py", "tests/__init__.py"]);
    let said = p.held(&["release", "tests/__init__.py"]);
    assert!(said.contains("1 files stay held"), "{said}");
    let said = p.held(&["release", "--all"]);
    assert!(said.contains("the hold is released"), "{said}");
    assert_eq!(p.hold(&["show"]).status.code(), Some(1));
    // Weakened, and no hold: the check runs in place as before.
    p.write("tests/test_calc.py", "x");
    assert!(!p.stop_s1(&["--run", "true"]).blocked());
}

#[test]
fn a_loop_that_ends_while_held_files_differ_names_them_in_status_list_and_wake() {
    let p = held_python();
    p.start_ok("s1", 1, "Make the tests pass.");
    weaken_the_test(&p);
    p.write("tests/test_new.py", "x = 1\n");
    let stop = declare(&p, "true");
    assert!(!stop.blocked(), "the last pass ends the loop");
    let state = p.loop_state("s1");
    assert_eq!(state["status"], "aborted");
    assert_eq!(
        state["held"]["differ"],
        serde_json::json!(["tests/test_calc.py (modified)"])
    );
    let status = stdout_of(&p.loop_command(&["status", "--session", "s1"]));
    assert_contains!(status, "held files differ: tests/test_calc.py (modified)");
    assert_contains!(
        status,
        "new test files, not judged by the hold: tests/test_new.py"
    );
    let list = stdout_of(&p.loop_command(&["list"]));
    assert_contains!(list, "  held files differ: tests/test_calc.py (modified)");
    let wake = p.wakes().pop().unwrap();
    assert_contains!(
        wake["line"].as_str().unwrap(),
        "held files differ: tests/test_calc.py (modified)",
        "{wake}"
    );
}

#[test]
fn the_humans_vigil_hold_prompt_holds_the_tests_and_a_mention_holds_nothing() {
    let p = python_project();
    for mention in [
        "please /vigil-hold tests",
        "`/vigil-hold tests`",
        " /vigil-hold tests",
    ] {
        assert_eq!(
            p.prompt("s1", mention),
            serde_json::Value::Null,
            "{mention}"
        );
    }
    assert_eq!(p.hold(&["show"]).status.code(), Some(1));
    let said = p.prompt("s1", "/vigil-hold tests/test_calc.py");
    let context = additional_context(&said);
    assert_starts_with!(
        context,
        "The human holds the tests that judge this work: held 1 files under tests/test_calc.py"
    );
    assert!(context.contains("needs-decision:"), "{context}");
    assert_starts_with!(
        said["systemMessage"].as_str().unwrap(),
        "vigil: held 1 files",
        "{said}"
    );
    // A path that holds nothing is refused in one line, and nothing is held.
    let said = p.prompt("s1", "/vigil:vigil-hold nothing-here/");
    assert_eq!(said["decision"], "block", "{said}");
    assert!(said["reason"].as_str().unwrap().contains("holds no file"));
    let record = json_of(&p.protected().join("hold/hold.json"));
    assert_eq!(record["files"].as_array().unwrap().len(), 1);
}

#[test]
fn a_hold_made_without_paths_holds_what_the_repositorys_vigil_hold_names() {
    let p = python_project();
    p.write(".vigil-hold", "# the tests\ntests\n");
    // The setting alone holds nothing: a human makes the hold.
    assert!(!p.stop_s1(&["--run", "true"]).blocked());
    let said = p.held(&["add"]);
    assert!(said.contains("held 2 files under tests"), "{said}");
    git(p.path(), &["add", ".vigil-hold"]);
    git(p.path(), &["commit", "-qm", "what to hold"]);
    p.held(&["release", "--all"]);
    let said = p.prompt("s2", "/vigil-hold --at HEAD");
    assert_contains!(
        said["systemMessage"].as_str().unwrap(),
        "held 2 files under tests",
        "{said}"
    );
}

#[test]
fn the_next_session_is_told_what_is_held_and_what_differs() {
    let p = held_python();
    p.write("tests/test_calc.py", "weakened\n");
    let out = ok(session_start(p.path(), "s9", "startup"));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let context = additional_context(&json);
    assert_contains!(
        context,
        "the human holds the tests that judge this work: tests (2 files)"
    );
    assert_contains!(
        context,
        "must be put back as held before a stop: tests/test_calc.py (modified)"
    );
}

/// `settings-merge check --verbose` of `p`'s local settings: each finding on one line.
fn doctor(p: &Project) -> Vec<String> {
    findings_of(&stdout_of(&p.merge("check", &["--verbose"])))
}

#[test]
fn the_doctor_proposes_a_hold_and_a_runner_pinned_on_the_checks_line() {
    let p = python_project();
    p.install(&["--run", "make test"]);
    let said = doctor(&p);
    let unheld = finding(&said, "runs the tests as the agent leaves them");
    assert_starts_with!(unheld, "[warn]");
    assert_contains!(unheld, "stop-gate hold add tests/");
    let pin = finding(
        &said,
        "takes its runner's configuration from files the agent can edit",
    );
    assert_contains!(pin, "`make` runs the Makefile");
    assert_contains!(pin, "holding a whole manifest");
    p.held(&["add", "tests"]);
    let p2 = python_project();
    p2.install(&["--run", "python3 -m pytest -q tests"]);
    let said = doctor(&p2);
    let pin = finding(&said, "takes its runner's configuration");
    assert_contains!(pin, "-c tests/pytest.ini");
    assert_contains!(pin, "-o addopts=");
    assert_contains!(pin, "python3 -P");
    // Pinned, and held: nothing to propose.
    p2.held(&["add", "tests"]);
    p2.install(&[
        "--run",
        "python3 -P -m pytest -q -c tests/pytest.ini -o addopts= tests",
    ]);
    let said = doctor(&p2);
    assert!(
        said.iter()
            .any(|f| f.starts_with("[ok]") && f.contains("the human holds 2 files under tests")),
        "{said:#?}"
    );
    assert!(
        !said
            .iter()
            .any(|f| f.contains("takes its runner's configuration")),
        "{said:#?}"
    );
}

#[test]
fn a_path_entry_inside_the_project_runs_only_from_the_declared_environment() {
    let p = python_project_ignoring_its_venv();
    let tool = p.path().join(".venv/bin/mytool");
    write_file(&tool, "#!/bin/sh\necho from-the-venv\n");
    make_executable(&tool);
    p.held(&["add", "tests"]);
    let path = format!(
        "{}:{}",
        p.path().join(".venv/bin").display(),
        std::env::var("PATH").unwrap()
    );
    let env = [("PATH", std::ffi::OsStr::new(&path))];
    let payload = p.payload("s1", Some("x")).to_string();
    let stop = p.stop_with_env(&["--run", "mytool"], &env, payload.clone());
    stop.assert_blocked_saying("the check's PATH holds");
    assert_contains!(stop.reason(), "stop-gate hold add --env .venv");
    p.held(&["add", "--env", ".venv"]);
    let stop = p.stop_with_env(&["--run", "mytool | grep -q from-the-venv"], &env, payload);
    stop.assert_allowed();
}

#[test]
fn a_check_that_lacks_a_dependency_under_a_hold_says_a_new_one_needs_the_human() {
    if !python() {
        return;
    }
    let p = held_python();
    p.write(
        "calc.py",
        format!("import requests_that_is_not_installed\n{CALC}"),
    );
    let stop = p.stop_s1(&["--run", UNITTEST]);
    stop.assert_blocked_saying("a new dependency needs the human: end with `needs-decision: `");
}

#[test]
fn an_environment_held_as_a_copy_is_what_the_check_gets_whatever_the_agent_installs_later() {
    let p = python_project_ignoring_its_venv();
    p.write(".venv/lib/dep.py", "VALUE = 1\n");
    p.held(&["add", "tests"]);
    let told = p.held(&["add", "--env", ".venv", "--copy"]);
    assert_contains!(told, ".venv as a copy of 10 bytes made now");
    // The agent's later change to the environment (a planted sitecustomize, a new package).
    p.write(".venv/lib/dep.py", "VALUE = 2\n");
    let check = "grep -q 'VALUE = 1' .venv/lib/dep.py";
    let stop = p.stop_s1(&["--run", check]);
    stop.assert_allowed();
    // The human takes the new environment.
    let told = p.held(&["refresh", "--env"]);
    assert!(told.contains("renewed the held copy of .venv"), "{told}");
    assert!(p.stop_s1(&["--run", check]).blocked());
    assert!(
        p.held(&["show"])
            .contains("env .venv  (held as a copy of 10 bytes")
    );
    // Over the limit: refused, nothing kept.
    let out = p.hold(&["add", "--env", ".venv", "--copy", "--max-size", "5"]);
    let line = usage_error(&out, "stop-gate");
    assert!(line.contains("larger than 5 bytes"), "{line}");
}

/// The deny rules of `p`'s local settings.
fn deny_rules(p: &Project) -> Vec<String> {
    let settings = json_of(&p.settings());
    settings["permissions"]["deny"]
        .as_array()
        .map(|rules| {
            rules
                .iter()
                .filter_map(|r| r.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn protect_lists_the_held_files_in_the_sandboxs_rules_and_keeps_them_in_step() {
    let p = Project::builder()
        .git()
        .home()
        .file("calc.py", CALC)
        .file("tests/__init__.py", "")
        .file("tests/test_calc.py", TEST)
        .build();
    p.held(&["add", "tests"]);
    p.install(&["--protect", "--run", "true"]);
    let rules = deny_rules(&p);
    for held in ["Edit(/tests/__init__.py)", "Edit(/tests/test_calc.py)"] {
        assert!(rules.contains(&held.to_string()), "{rules:?}");
    }
    // Released in part, then installed again: only what is held is listed.
    p.held(&["release", "--all"]);
    p.held(&["add", "tests/test_calc.py"]);
    p.install(&["--protect", "--run", "true"]);
    let rules = deny_rules(&p);
    assert!(rules.contains(&"Edit(/tests/test_calc.py)".to_string()));
    assert!(!rules.contains(&"Edit(/tests/__init__.py)".to_string()));
    // Uninstall takes them back with the rest.
    ok(p.merge("uninstall", &[]));
    assert!(!p.settings().exists() || !deny_rules(&p).iter().any(|r| r.contains("tests/")));
}
