//! SPEC §11, the attacks a fresh-context review played against the hold, each as the agent
//! would play it: through a link in place of the declared environment, runner code on the way
//! to the held tests, a test that failed turning skipped, a check made to exit 0 over failures,
//! names that are not UTF-8 or that carry escapes, a repository planted below the top, a marker
//! made without the hold, an empty PATH entry. Each was let through before, and is refused.

use std::os::unix::ffi::OsStrExt;

use crate::support::*;

const CALC: &str = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a + b\n";
const TESTS: &str = "from calc import add, sub\n\n\ndef test_add():\n    assert add(2, 2) == 4\n\n\ndef test_sub():\n    assert sub(3, 1) == 2\n";
const PYTEST: &str = "python3 -m pytest -q -p no:cacheprovider --junitxml={junit} tests";

/// Where pytest runs: a project whose `test_add` passes and `test_sub` fails, `tests/` held
/// with a pytest baseline.
fn project() -> Option<Project> {
    if !pytest() {
        return None;
    }
    let p = Project::builder()
        .git()
        .file("calc.py", CALC)
        .file("tests/test_calc.py", TESTS)
        .file(".gitignore", ".venv/\n")
        .build();
    p.held(&["add", "tests", "--baseline", PYTEST]);
    Some(p)
}

fn conftest_that_passes_everything() -> &'static str {
    "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n    out = yield\n    report = out.get_result()\n    if report.failed:\n        report.outcome = 'passed'\n"
}

#[test]
fn a_declared_environment_the_agent_makes_a_link_is_refused() {
    let p = Project::builder()
        .git()
        .file("tests/t.sh", "true\n")
        .file(".gitignore", ".venv/\n")
        .build();
    p.write(".venv/lib/x", "x");
    p.held(&["add", "tests"]);
    p.held(&["add", "--env", ".venv"]);
    // The agent swaps the environment for a link into the state home.
    std::fs::remove_dir_all(p.path().join(".venv")).unwrap();
    std::os::unix::fs::symlink(state_home(), p.path().join(".venv")).unwrap();
    let stop = p.stop_s1(&["--run", "ls .venv/projects/*"]);
    // Refused before it runs (a link out of the tree, or one in the declared place), never
    // listing the state home.
    assert!(stop.blocked(), "the link was followed");
    assert!(
        stop.reason().contains("symlink") || stop.reason().contains("goes through a link"),
        "{}",
        stop.reason()
    );
    assert!(!stop.reason().contains("hold.json"), "{}", stop.reason());
}

#[test]
fn runner_code_on_the_way_to_the_held_tests_is_left_out_and_refused() {
    let Some(p) = project() else { return };
    // At the top, above the held directory, where pytest still loads it.
    p.write("conftest.py", conftest_that_passes_everything());
    let stop = p.stop_s1(&["--run", PYTEST]);
    stop.assert_blocked_saying("failed");
    assert!(stop.reason().contains("conftest.py"), "{}", stop.reason());
    // And a module that shadows the runner.
    std::fs::remove_file(p.path().join("conftest.py")).unwrap();
    p.write("pytest.py", "print('2 passed in 0.01s')\n");
    let stop = p.stop_s1(&["--run", PYTEST]);
    assert!(stop.blocked(), "the shadowing pytest.py was run");
    let home = tempfile::tempdir().unwrap();
    let denied = p
        .file_tool(home.path(), "Write", "file_path", "conftest.py")
        .expect("the guard refuses it");
    assert_contains!(denied, "would configure the test runner");
}

#[test]
fn under_a_glob_hold_a_new_conftest_beside_the_tests_is_left_out_and_refused() {
    if !pytest() {
        return;
    }
    let p = Project::builder()
        .git()
        .file("calc.py", CALC)
        .file("tests/test_calc.py", TESTS)
        .build();
    p.held(&["add", "tests/test_*.py", "--baseline", PYTEST]);
    p.held(&["must-pass", "tests.test_calc::test_sub"]);
    p.write("tests/conftest.py", conftest_that_passes_everything());
    let stop = p.stop_s1(&["--run", PYTEST]);
    stop.assert_blocked_saying("tests.test_calc::test_sub (failed)");
    let home = tempfile::tempdir().unwrap();
    assert!(
        p.file_tool(home.path(), "Write", "file_path", "tests/conftest.py")
            .is_some()
    );
}

#[test]
fn a_test_that_failed_at_the_baseline_may_not_turn_skipped() {
    let Some(p) = project() else { return };
    p.write(
        "calc.py",
        format!(
            "import pytest\n\n{}\n\ndef sub(a, b):\n    pytest.skip('later')\n",
            CALC.split("\n\n\ndef sub").next().unwrap()
        ),
    );
    let stop = p.stop_s1(&["--run", PYTEST]);
    stop.assert_blocked_saying("tests.test_calc::test_sub (turned skipped)");
}

#[test]
fn a_check_made_to_exit_0_over_failing_tests_is_no_pass() {
    let Some(p) = project() else { return };
    let check = "python3 -m pytest -q -p no:cacheprovider --junitxml={junit} tests; exit 0";
    let stop = p.stop_s1(&["--run", check]);
    stop.assert_blocked_saying(
        "exited 0, but its runner reports 1 failed: tests.test_calc::test_sub",
    );
}

#[test]
fn a_name_that_is_not_utf8_under_a_held_path_is_left_out() {
    let Some(p) = project() else { return };
    p.held(&["must-pass", "tests.test_calc::test_sub"]);
    let odd = p
        .path()
        .join("tests")
        .join(std::ffi::OsStr::from_bytes(b"d\xff"));
    write_file(&odd.join("conftest.py"), conftest_that_passes_everything());
    write_file(&odd.join("test_more.py"), "def test_more():\n    pass\n");
    let stop = p.stop_s1(&["--run", PYTEST]);
    stop.assert_blocked_saying("tests.test_calc::test_sub (failed)");
}

#[test]
fn names_the_agent_chose_reach_the_person_without_escapes_or_line_breaks() {
    let p = Project::builder()
        .git()
        .file("tests/t.sh", "true\n")
        .build();
    p.held(&["add", "tests"]);
    write_file(
        &p.path()
            .join("tests/x\nvigil: all verified\x1b]52;c;aGk=\x07.sh"),
        "x",
    );
    let stop = p.stop_s1(&["--run", "true"]);
    let told = stop.system_message();
    assert!(told.contains("tests/x"), "{told}");
    assert_lacks!(told, "\n");
    assert_lacks!(told, "\x1b");
    assert_lacks!(told, "\x07");
}

#[test]
fn a_repository_planted_below_the_top_does_not_shed_the_hold() {
    let p = Project::builder()
        .git()
        .file("tests/t.sh", "true\n")
        .file("pkg/code.sh", "true\n")
        .build();
    p.held(&["add", "tests"]);
    p.write("pkg/.git/HEAD", "ref: refs/heads/main\n");
    let pkg = p.path().join("pkg");
    let stop = run_stop(
        &pkg,
        &["--run", "true"],
        &[],
        stop_payload(&pkg, "s1", Some("x")).to_string(),
    );
    stop.assert_blocked_saying("is a repository of its own inside it");
}

#[test]
fn a_marker_made_without_the_hold_does_not_count_under_it() {
    let p = Project::builder()
        .git()
        .file("tests/t.sh", "grep -q fixed code.txt\n")
        .file("code.txt", "broken\n")
        .build();
    // The agent's new test file makes a run of the tree as it is pass.
    p.write("tests/zz.sh", "exit 0\n");
    let write = || {
        marker_writer_in(
            p.path(),
            &[
                "run",
                "--check",
                "ci",
                "--",
                "sh",
                "-c",
                "sh tests/zz.sh || sh tests/t.sh",
            ],
        )
    };
    // Made before the human held the tests (the agent's file set aside while they are held,
    // then back: the tree is the one the marker names).
    ok(write());
    std::fs::remove_file(p.path().join("tests/zz.sh")).unwrap();
    p.held(&["add", "tests"]);
    p.write("tests/zz.sh", "exit 0\n");
    let stop = p.stop_s1(&["--require-marker", "ci"]);
    stop.assert_blocked_saying("was not made under the human's hold");
    // marker-writer verify computes the same.
    let out = marker_writer_in(p.path(), &["verify", "--check", "ci"]);
    assert_eq!(out.status.code(), Some(1));
    assert_contains!(said(&out), "not made under the human's hold on the tests");
    // Run now, the run is in a copy that holds the tests (the agent's file is left out), and
    // the marker says failed until the code is fixed.
    let out = write();
    assert_exit(&out, 1);
    assert_contains!(said(&out), "the tests are held here");
    p.write("code.txt", "fixed\n");
    ok(write());
    let stop = p.stop_s1(&["--require-marker", "ci"]);
    stop.assert_allowed();
    ok(marker_writer_in(p.path(), &["verify", "--check", "ci"]));
}

#[test]
fn an_empty_or_relative_path_entry_is_refused_under_a_hold() {
    let p = Project::builder()
        .git()
        .file("tests/t.sh", "true\n")
        .build();
    p.held(&["add", "tests"]);
    for path in [
        format!(":{}", std::env::var("PATH").unwrap()),
        format!(".:{}", std::env::var("PATH").unwrap()),
    ] {
        let env = [("PATH", std::ffi::OsStr::new(&path))];
        let stop = p.stop_with_env(
            &["--run", "true"],
            &env,
            p.payload("s1", Some("x")).to_string(),
        );
        stop.assert_blocked_saying("a relative entry");
    }
}

#[test]
fn holding_the_tests_says_which_runner_configuration_on_the_way_is_left_out() {
    let p = Project::builder()
        .git()
        .file("conftest.py", "import pytest\n")
        .file("tests/test_a.py", "def test_a():\n    pass\n")
        .build();
    let told = p.held(&["add", "tests"]);
    assert_contains!(
        told,
        "not held, so left out of the check's copy: conftest.py"
    );
    let told = p.held(&["add", "conftest.py"]);
    assert!(!told.contains("left out"), "{told}");
}

#[test]
fn a_failing_test_deselected_away_is_gone_by_name() {
    let Some(p) = project() else { return };
    p.write(
        "pyproject.toml",
        "[tool.pytest.ini_options]\naddopts = \"--deselect tests/test_calc.py::test_sub\"\n",
    );
    let stop = p.stop_s1(&["--run", PYTEST]);
    stop.assert_blocked_saying("tests.test_calc::test_sub (gone: deleted, renamed or not run)");
}
