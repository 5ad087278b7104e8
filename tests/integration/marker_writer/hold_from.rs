//! SPEC §11, CI holds too: `marker-writer run --hold-from REF` restores the held paths from the
//! base branch in the run's copy, so a branch whose tests were weakened is judged by the base
//! branch's tests, and the payload records the hold it ran under.

use super::only_payload;
use crate::support::*;

const TEST: &str = "grep -q 'a + b' calc.txt\n";

/// A repository whose base branch `main` holds `tests/` (its `.vigil-hold`) with a test the
/// code fails, and a branch `work` checked out, where the agent weakened the test.
fn weakened_branch() -> Project {
    let p = Project::builder()
        .git()
        .file("calc.txt", "a - b\n")
        .file("tests/check.sh", TEST)
        .file(".vigil-hold", "tests\n")
        .build();
    git(p.path(), &["checkout", "-q", "-b", "work"]);
    p.write("tests/check.sh", "true\n");
    git(p.path(), &["commit", "-qam", "weaken"]);
    p
}

fn run_held(p: &Project, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["run", "--check", "tests"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", "sh", "tests/check.sh"]);
    marker_writer_in(p.path(), &args)
}

#[test]
fn a_branch_that_weakened_the_held_tests_is_judged_by_the_base_branchs_tests() {
    let p = weakened_branch();
    // Without the hold the weakened test passes.
    ok(run_held(&p, &["--snapshot"]));
    assert_eq!(only_payload(p.path(), "tests")["status"], "passed");
    let out = run_held(&p, &["--hold-from", "main"]);
    assert_exit(&out, 1);
    let payload = only_payload(p.path(), "tests");
    assert_eq!(payload["status"], "failed");
    let hold = &payload["run"]["hold"];
    assert_eq!(hold["from"], git(p.path(), &["rev-parse", "main"]).trim());
    assert_eq!(hold["patterns"], serde_json::json!(["tests"]));
    assert_eq!(hold["files"], 1);
    assert!(hold["digest"].as_str().unwrap().starts_with("sha256:"));
    assert_eq!(payload["run"]["isolation"], "snapshot");
    // The real fix passes under the base branch's tests; the worktree was never changed.
    p.write("calc.txt", "a + b\n");
    ok(run_held(&p, &["--hold-from", "main"]));
    assert_eq!(p.read("tests/check.sh"), "true\n");
}

#[test]
fn new_tests_under_a_held_path_are_left_out_and_recorded() {
    let p = weakened_branch();
    p.write("calc.txt", "a + b\n");
    p.write("tests/extra.sh", "exit 1\n");
    ok(marker_writer_in(
        p.path(),
        &[
            "run",
            "--check",
            "tests",
            "--hold-from",
            "main",
            "--",
            "sh",
            "-c",
            "test ! -e tests/extra.sh && sh tests/check.sh",
        ],
    ));
    let payload = only_payload(p.path(), "tests");
    assert_eq!(
        payload["run"]["hold"]["left_out"],
        serde_json::json!(["tests/extra.sh"])
    );
}

#[test]
fn hold_from_refuses_what_it_cannot_hold_and_writes_no_marker() {
    let p = Project::builder()
        .git()
        .file("tests/t.sh", "true\n")
        .build();
    for (args, says) in [
        (
            vec!["--hold-from", "main"],
            "there is no .vigil-hold at main",
        ),
        (
            vec!["--hold-from", "nope", "--hold", "tests"],
            "names no commit",
        ),
        (vec!["--hold", "tests"], "give --hold-from too"),
        (
            vec!["--hold-from", "main", "--hold", "missing"],
            "holds no file at main",
        ),
    ] {
        let mut all = vec!["run", "--check", "tests"];
        all.extend_from_slice(&args);
        all.extend_from_slice(&["--", "true"]);
        let out = marker_writer_in(p.path(), &all);
        let line = usage_error(&out, "marker-writer");
        assert!(line.contains(says), "{args:?}: {line}");
    }
    // --hold names the paths instead of .vigil-hold.
    ok(marker_writer_in(
        p.path(),
        &words("run --check tests --hold-from main --hold tests -- true"),
    ));
}
