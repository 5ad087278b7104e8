//! SPEC §9, confined checks for a local writer: `run --snapshot` runs the tests confined (no
//! key, no state home, no network unless asked); an in-place or unconfined run says so and
//! records it.

use std::path::Path;

use super::only_payload;
use crate::support::*;

/// The agent wrote the tests a protected writer runs with `--snapshot`: they try to read the
/// signing key, trust their own key, and write the state home. None of it works, and the
/// payload says the command was confined.
#[test]
fn a_snapshot_runs_tests_that_cannot_read_the_key_or_write_the_state_home() {
    let dir = Project::git();
    let keys = tempfile::tempdir().unwrap();
    let (key, _) = keygen_into(dir.path(), keys.path());
    let home = state_home().display().to_string();
    let attack = format!(
        "cat '{k}' && echo READ-THE-KEY; mkdir -p '{home}/planted' && echo PLANTED; \
         kill -KILL $PPID; true",
        k = key.display()
    );
    let output = marker_writer_in(
        dir.path(),
        &[
            "run",
            "--check",
            "tests",
            "--snapshot",
            "--sign-key",
            key.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            &attack,
        ],
    );
    let printed = String::from_utf8_lossy(&output.stdout);
    assert_success(&output);
    assert!(!printed.contains("READ-THE-KEY"), "{printed}");
    assert!(!printed.contains("PLANTED"), "{printed}");
    assert!(!state_home().join("planted").exists());
    let payload = only_payload(dir.path(), "tests");
    assert_eq!(payload["run"]["confinement"], "bubblewrap");
    assert_valid("marker.schema.json", &payload);
}

/// The one `tests` payload in `dir` records a run without confinement, isolated as `isolation`
/// says.
#[track_caller]
fn assert_ran_unconfined(dir: &Path, isolation: &str) {
    let payload = only_payload(dir, "tests");
    assert_eq!(payload["run"]["confinement"], "none");
    assert_eq!(payload["run"]["isolation"], isolation);
}

#[test]
fn an_in_place_run_says_it_ran_with_your_rights_and_records_it() {
    let dir = Project::git();
    let output = marker_writer_in(dir.path(), &["run", "--check", "tests", "--", "true"]);
    assert!(output.status.success());
    let line = assert_one_line_error(&output, "marker-writer");
    assert_contains!(line, "tests passed for git-tree:");
    assert_contains!(line, "ran in place, unconfined, with your rights");
    assert_ran_unconfined(dir.path(), "in-place");
}

#[test]
fn a_snapshot_without_bubblewrap_runs_unconfined_and_records_it() {
    let dir = Project::git();
    let output = marker_writer()
        .args(["run", "--check", "tests", "--snapshot", "--", "true"])
        .current_dir(dir.path())
        .env("VIGIL_TEST_BWRAP", "/nonexistent/bwrap")
        .env_remove("VIGIL_SIGN_KEY")
        .output()
        .unwrap();
    assert!(output.status.success());
    let line = assert_one_line_error(&output, "marker-writer");
    assert_contains!(
        line,
        "ran unconfined, with your rights: bubblewrap is not installed"
    );
    assert_ran_unconfined(dir.path(), "snapshot");
}

#[test]
fn check_network_and_check_write_are_for_a_confined_snapshot_only() {
    let dir = Project::git();
    for flags in [&["--check-network"][..], &["--check-write", "/tmp"][..]] {
        let mut args = vec!["run", "--check", "tests"];
        args.extend(flags);
        args.extend(["--", "true"]);
        let output = marker_writer_in(dir.path(), &args);
        usage_error(&output, "marker-writer");
    }
    let output = marker_writer_in(
        dir.path(),
        &words("run --check t --snapshot --check-write rel -- true"),
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(said(&output).contains("absolute"), "{}", said(&output));
}
