//! SPEC §11, per-test results: under a hold with a baseline, every test that passed when the
//! tests were held must pass, by name; a held test that is gone or turns skipped fails the Stop
//! by name; a run of zero tests is no pass; a JUnit report is read from a fresh path outside
//! the project. Each attack goes through what the hold does not hold (configuration, the code
//! under test, the runner's script) and first shows that the check alone would pass it.

use serde_json::json;

use crate::support::*;

const CALC: &str = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n";
const FIXED: &str = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n";
const TESTS: &str = "from calc import add, mul\n\n\ndef test_add():\n    assert add(2, 2) == 4\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n";
const PYTEST: &str = "python3 -m pytest -q -p no:cacheprovider --junitxml={junit} tests";

/// A pytest project with `test_add` failing and `test_mul` passing, its tests held with the
/// baseline of `check`.
fn pytest_project(check: &str) -> Project {
    let p = Project::builder()
        .git()
        .file("calc.py", CALC)
        .file("tests/test_calc.py", TESTS)
        .build();
    let said = p.held(&["add", "tests", "--baseline", check]);
    assert_contains!(said, "1 passed (each must still pass, by name), 1 failed");
    p
}

/// Where pytest runs: [`pytest_project`] with the baseline of [`PYTEST`].
fn baselined() -> Option<Project> {
    pytest().then(|| pytest_project(PYTEST))
}

/// A Stop under `check` is refused saying `said`; once the real fix is made, it passes.
fn refused_until_the_real_fix(p: &Project, check: &str, said: &str) {
    let stop = p.stop_s1(&["--run", check]);
    stop.assert_blocked_saying(said);
    the_real_fix_passes(p, check);
}

/// The real fix made, a Stop under `check` passes.
fn the_real_fix_passes(p: &Project, check: &str) {
    p.write("calc.py", FIXED);
    let stop = p.stop_s1(&["--run", check]);
    stop.assert_allowed();
}

/// `check` run in place, as a check without a hold runs it: whether it exits 0.
fn passes_in_place(p: &Project, check: &str) -> bool {
    let check = check.replace("{junit}", "/dev/null");
    std::process::Command::new("sh")
        .args(["-c", &check])
        .current_dir(p.path())
        .output()
        .unwrap()
        .status
        .success()
}

#[test]
fn a_baseline_records_each_test_by_name() {
    let Some(p) = baselined() else { return };
    let record = json_of(&p.protected().join("hold/hold.json"));
    assert_valid("hold.schema.json", &record);
    let tests = &record["tests"];
    assert_eq!(tests["passed"], json!(["tests.test_calc::test_mul"]));
    assert_eq!(tests["failed"], json!(["tests.test_calc::test_add"]));
    assert_eq!(tests["command"], PYTEST);
    let shown = p.held(&["show"]);
    assert!(shown.contains("1 passed, 1 failed, 0 skipped"), "{shown}");
}

#[test]
fn a_baseline_of_a_check_that_names_no_test_is_refused_naming_the_flag() {
    let p = Project::builder().git().file("tests/t.sh", "true").build();
    p.held(&["add", "tests"]);
    let out = p.hold(&["baseline", "true"]);
    let line = usage_error(&out, "stop-gate");
    assert!(line.contains("reported no test by name"), "{line}");
    assert!(line.contains("--junitxml={junit}"), "{line}");
    let out = p.hold(&["baseline", "echo {junit}"]);
    let line = assert_one_line_error(&out, "stop-gate");
    assert!(line.contains("wrote no JUnit report"), "{line}");
}

#[test]
fn a_test_deselected_through_unheld_configuration_fails_the_stop_by_name() {
    let Some(p) = baselined() else { return };
    // The agent fixes add, breaks mul, and deselects mul's test in configuration it may edit.
    p.write("calc.py", FIXED.replace("return a * b", "return 0"));
    p.write(
        "pyproject.toml",
        "[tool.pytest.ini_options]\naddopts = \"--deselect tests/test_calc.py::test_mul\"\n",
    );
    assert!(
        passes_in_place(&p, PYTEST),
        "the attack works without the hold"
    );
    let stop = p.stop_s1(&["--run", PYTEST]);
    stop.assert_blocked_starting(
        "stop-gate: held tests do not pass: tests.test_calc::test_mul (gone: deleted, renamed or not run)",
    );
}

#[test]
fn a_test_the_code_under_test_skips_fails_the_stop_by_name() {
    let Some(p) = baselined() else { return };
    p.write("calc.py", "import pytest\n\n\ndef add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    pytest.skip('later')\n");
    assert!(passes_in_place(&p, PYTEST));
    refused_until_the_real_fix(&p, PYTEST, "tests.test_calc::test_mul (turned skipped)");
}

#[test]
fn a_junit_report_the_code_under_test_rewrites_is_no_pass() {
    let Some(p) = baselined() else { return };
    // The code under test finds the report on the command line and, as the process exits
    // after pytest wrote it, replaces it with one where everything passed.
    p.write("calc.py", format!(
            "{CALC}\nimport atexit, sys\n\ndef _forge():\n    for arg in sys.argv:\n        if arg.startswith('--junitxml='):\n            open(arg.split('=', 1)[1], 'w').write('<testsuites><testsuite name=\"pytest\"><testcase classname=\"tests.test_calc\" name=\"test_add\"/><testcase classname=\"tests.test_calc\" name=\"test_mul\"/></testsuite></testsuites>')\n    import os\n    os._exit(0)\n\natexit.register(_forge)\n"
        ));
    let stop = p.stop_s1(&["--run", PYTEST]);
    assert!(stop.blocked(), "the forged report was believed");
    assert_contains!(
        stop.reason(),
        "the JUnit report says 0 failed where the runner printed 1"
    );
}

#[test]
fn a_suite_that_collects_nothing_is_no_pass() {
    let p = Project::builder()
        .git()
        .file("calc.py", CALC)
        .file("tests/__init__.py", "")
        .file(
            "tests/test_calc.py",
            "import unittest\nfrom calc import mul\n\n\nclass T(unittest.TestCase):\n    def test_mul(self):\n        self.assertEqual(mul(2, 3), 6)\n",
        )
        .build();
    p.held(&["add", "tests"]);
    // `-k` narrowed to nothing: unittest 3.11 says "Ran 0 tests" and exits 0.
    let check = "python3 -m unittest -k nothing_matches; exit 0";
    assert!(passes_in_place(&p, check));
    let stop = p.stop_s1(&["--run", check]);
    assert!(stop.blocked());
    assert!(stop.reason().contains("ran no test"), "{}", stop.reason());
    // Output with no runner's summary is judged by its exit code: a lint check still passes.
    let stop = p.stop_s1(&["--run", "echo all clean"]);
    stop.assert_allowed();
}

#[test]
fn a_make_target_that_ignores_errors_fails_by_the_tests_names() {
    let p = Project::builder()
        .git()
        .file("calc.py", CALC)
        .file("tests/__init__.py", "")
        .file(
            "tests/test_calc.py",
            "import unittest\nfrom calc import add, mul\n\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 2), 4)\n\n    def test_mul(self):\n        self.assertEqual(mul(2, 3), 6)\n",
        )
        .file("Makefile", "test:\n\tpython3 -m unittest -v\n")
        .build();
    if !tool_runs("make", &["--version"], "make") {
        return;
    }
    p.held(&["add", "tests", "--baseline", "make test"]);
    // The agent breaks mul and has make ignore the failure.
    p.write("calc.py", FIXED.replace("a * b", "0"));
    p.write("Makefile", "test:\n\t-python3 -m unittest -v\n");
    assert!(passes_in_place(&p, "make test"));
    let stop = p.stop_s1(&["--run", "make test"]);
    stop.assert_blocked_saying("tests.test_calc.T.test_mul (failed)");
}

#[test]
fn a_narrowed_npm_test_script_fails_by_the_tests_names() {
    if !tool_runs("node", &["--version"], "node") || !tool_runs("npm", &["--version"], "npm") {
        return;
    }
    let test = |name: &str, body: &str| {
        format!(
            "const test = require('node:test');\nconst assert = require('node:assert');\nconst calc = require('../calc.js');\ntest('{name}', () => {body});\n"
        )
    };
    let p = Project::builder()
        .git()
        .file(
            "calc.js",
            "exports.add = (a, b) => a - b;\nexports.mul = (a, b) => a * b;\n",
        )
        .file(
            "tests/add.test.js",
            &test("adds", "assert.equal(calc.add(2, 2), 4)"),
        )
        .file(
            "tests/mul.test.js",
            &test("multiplies", "assert.equal(calc.mul(2, 3), 6)"),
        )
        .file(
            "package.json",
            "{\"name\": \"calc\", \"scripts\": {\"test\": \"node --test tests/\"}}\n",
        )
        .build();
    // Through npm, as the project runs it: node's runner prints TAP where its output is no
    // terminal, which names each test.
    let check = "npm test --silent";
    let said = p.held(&["add", "tests", "--baseline", check]);
    assert!(said.contains("1 passed"), "{said}");
    // The agent breaks mul and narrows the script to the test it fixed.
    write_file(
        &p.path().join("calc.js"),
        "exports.add = (a, b) => a + b;\nexports.mul = (a, b) => 0;\n",
    );
    p.write(
        "package.json",
        "{\"name\": \"calc\", \"scripts\": {\"test\": \"node --test tests/add.test.js\"}}\n",
    );
    assert!(passes_in_place(&p, check));
    let stop = p.stop_s1(&["--run", check]);
    stop.assert_blocked_saying("multiplies (gone");
}

/// A crate with an inline test module (its tests live beside the code, unheld) and a held
/// integration test.
fn crate_project() -> Project {
    Project::builder()
        .git()
        .file(
            "Cargo.toml",
            "[package]\nname = \"calc\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n",
        )
        .file(
            "src/lib.rs",
            "pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n\npub fn mul(a: i32, b: i32) -> i32 {\n    a * b\n}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn multiplies() {\n        assert_eq!(super::mul(2, 3), 6);\n    }\n}\n",
        )
        .file(
            "tests/adds.rs",
            "#[test]\nfn adds() {\n    assert_eq!(calc::add(2, 2), 4);\n}\n",
        )
        .build()
}

#[test]
fn an_ignored_cargo_test_fails_the_stop_by_name() {
    let p = crate_project();
    let said = p.held(&["add", "tests", "--baseline", "cargo test --offline"]);
    assert!(said.contains("1 passed"), "{said}");
    // The build went to the check cache, not the project.
    assert!(!p.path().join("target").exists());
    assert!(p.protected().join("check-cache/cargo-target").is_dir());
    // The agent fixes add, breaks mul, and ignores the inline test that would say so.
    write_file(
        &p.path().join("src/lib.rs"),
        "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n\npub fn mul(_: i32, _: i32) -> i32 {\n    0\n}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    #[ignore]\n    fn multiplies() {\n        assert_eq!(super::mul(2, 3), 6);\n    }\n}\n",
    );
    let stop = p.stop_s1(&["--run", "cargo test --offline"]);
    stop.assert_blocked_saying("calc::tests::multiplies (turned skipped)");
}

#[test]
fn a_baseline_test_that_fails_once_is_run_again_before_it_blocks() {
    let Some(p) = baselined() else { return };
    // mul fails on its first run only: the check cache outlives the copy.
    p.write("calc.py", "import os\n\n\ndef add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    mark = os.path.join(os.environ['XDG_CACHE_HOME'], 'ran-once')\n    if not os.path.exists(mark):\n        os.makedirs(os.path.dirname(mark), exist_ok=True)\n        open(mark, 'w').close()\n        return 0\n    return a * b\n");
    let stop = p.stop_s1(&["--run", PYTEST]);
    stop.assert_allowed();
    assert_contains!(
        stop.system_message(),
        "failed once and passed when run again"
    );
}

#[test]
fn a_test_the_human_names_must_pass_whatever_the_exit() {
    if !pytest() {
        return;
    }
    let check = "python3 -m pytest -q -p no:cacheprovider --junitxml={junit} tests; exit 0";
    let p = pytest_project(check);
    p.held(&["must-pass", "tests.test_calc::test_add"]);
    refused_until_the_real_fix(
        &p,
        check,
        "its runner reports 1 failed: tests.test_calc::test_add",
    );
}

#[test]
fn a_check_with_per_test_rules_that_names_no_test_is_refused_naming_the_flag() {
    let Some(p) = baselined() else { return };
    p.write("calc.py", FIXED);
    let stop = p.stop_s1(&["--run", "python3 -m pytest -q -p no:cacheprovider tests"]);
    stop.assert_blocked_saying("reported no test by name");
}

#[test]
fn the_junit_report_is_written_outside_the_project_and_never_left_behind() {
    let p = Project::builder().git().file("tests/t", "").build();
    p.held(&["add", "tests"]);
    let check = "case {junit} in \"$PWD\"*) exit 3;; esac; printf '<testsuites><testsuite><testcase name=\"t\"/></testsuite></testsuites>' > {junit}";
    let stop = p.stop_s1(&["--run", check]);
    stop.assert_allowed();
    let reports = p.protected().join("reports");
    assert_eq!(std::fs::read_dir(reports).unwrap().count(), 0);
    // A link in the report's place is not followed.
    let stop = p.stop_s1(&["--run", "ln -s /etc/hostname {junit}"]);
    stop.assert_blocked_saying("JUnit report cannot be read");
}

#[test]
fn a_passed_loop_names_the_tests_that_moved_and_the_new_test_files() {
    let Some(p) = baselined() else { return };
    p.start_ok("s1", 5, "Make the tests pass.");
    p.write("calc.py", FIXED);
    p.write("tests/test_more.py", "def test_more():\n    assert True\n");
    let stop = p.stop(&["--run", PYTEST], "s1", Some(super::DECLARED));
    stop.assert_allowed();
    let state = p.loop_state("s1");
    assert_eq!(state["status"], "passed");
    assert_eq!(
        state["held"]["moved"],
        json!(["tests.test_calc::test_add (failed -> passed)"])
    );
    assert_eq!(state["held"]["new_tests"], json!(["tests/test_more.py"]));
    let wake = p.wakes().pop().unwrap();
    let line = wake["line"].as_str().unwrap();
    assert_contains!(line, "checks green");
    assert_contains!(
        line,
        "tests moved: tests.test_calc::test_add (failed -> passed)"
    );
    assert_contains!(line, "not judged by the hold: tests/test_more.py");
}

/// SECURITY.md, what a hold cannot prevent: the code under test runs in the runner's own
/// process, so a package whose `__init__.py` patches pytest's reports turns its failure into a
/// pass that the report, the runner's summary and the per-test rules all agree on. This test
/// pins that limit as SECURITY.md states it: if vigil ever catches it, the document changes.
#[test]
fn the_conftest_attack_from_the_packages_own_init_is_not_caught_as_security_md_says() {
    if !pytest() {
        return;
    }
    let p = Project::builder()
        .git()
        .file("calc/__init__.py", "def add(a, b):\n    return a - b\n")
        .file(
            "tests/test_calc.py",
            "from calc import add\n\n\ndef test_add():\n    assert add(2, 2) == 4\n\n\ndef test_one():\n    assert add(1, 0) == 1\n",
        )
        .build();
    p.held(&["add", "tests", "--baseline", PYTEST]);
    p.write("calc/__init__.py", "import _pytest.reports as _r\n\n_orig = _r.TestReport.from_item_and_call\n\n\ndef _pass(item, call):\n    report = _orig(item, call)\n    report.outcome = 'passed'\n    report.longrepr = None\n    return report\n\n\n_r.TestReport.from_item_and_call = staticmethod(_pass)\n\n\ndef add(a, b):\n    return a - b\n");
    let stop = p.stop_s1(&["--run", PYTEST]);
    assert!(
        !stop.blocked(),
        "caught after all: update SECURITY.md ({})",
        stop.reason()
    );
}
