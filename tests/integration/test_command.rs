//! The test command (`scripts/test.sh`, the README's and CI's): cargo test, then one closing
//! line with the totals, where a test skipped for want of a tool is counted and named, never
//! read as passed (issue 31); it exits as cargo test did.

use std::os::unix::fs::PermissionsExt;

use crate::support::*;

/// `scripts/test.sh` with a `cargo` that prints `said` and exits with `code`.
fn test_command(said: &str, code: i32) -> std::process::Output {
    let bin = tempfile::tempdir().unwrap();
    let cargo = bin.path().join("cargo");
    let printed = bin.path().join("said.txt");
    std::fs::write(&printed, said).unwrap();
    std::fs::write(
        &cargo,
        format!("#!/bin/sh\ncat '{}'\nexit {code}\n", printed.display()),
    )
    .unwrap();
    std::fs::set_permissions(&cargo, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::process::Command::new("bash")
        .arg(repo_path("scripts/test.sh"))
        .env("PATH", format!("{}:/usr/bin:/bin", bin.path().display()))
        .output()
        .unwrap()
}

#[test]
fn the_test_command_counts_and_names_the_tests_skipped_for_want_of_a_tool() {
    let printed = "\
running 3 tests
vigil-test: SKIPPED e2e::one: the end-to-end suite: npm is not installed
vigil-test: SKIPPED e2e::two: the end-to-end suite: npm is not installed
test result: ok. 3 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.1s
test result: ok. 5 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.1s
";
    let out = ok(test_command(printed, 0));
    let text = stdout_of(&out);
    let closing: Vec<&str> = text.lines().skip(printed.lines().count()).collect();
    assert_eq!(
        closing,
        [
            "6 passed, 0 failed, 2 skipped for want of a tool (cargo test counted them as passed):",
            "  skipped e2e::one: the end-to-end suite: npm is not installed",
            "  skipped e2e::two: the end-to-end suite: npm is not installed",
        ]
    );
    // Nothing skipped: the totals alone; a failed run keeps its exit.
    let out = test_command(
        "test result: FAILED. 4 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.1s\n",
        101,
    );
    assert_eq!(out.status.code(), Some(101));
    assert_eq!(stdout_of(&out).lines().last(), Some("4 passed, 1 failed"));
}
