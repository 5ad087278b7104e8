//! SPEC §5, hostile input and usage: check names, where markers live (the protected state,
//! never `.vigil/markers/`), symlinked or unwritable state, notes too long, FIFOs; usage errors
//! are one line and exit 2.

use std::path::Path;

use serde_json::json;

use super::{file_subject, verify_file};
use crate::support::*;

#[test]
fn hostile_check_names_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    file_subject(dir.path());
    let long = "x".repeat(129);
    for check in [
        "a/b",
        "..",
        ".",
        "../../etc",
        "",
        long.as_str(),
        "with space",
    ] {
        let out = marker_writer_in(
            dir.path(),
            &[
                "write",
                "--check",
                check,
                "--subject",
                "file:artifact",
                "--status",
                "passed",
            ],
        );
        assert_eq!(out.status.code(), Some(2), "{check:?}");
        assert_contains!(
            assert_one_line_error(&out, "marker-writer"),
            "check name",
            "{check:?}"
        );
    }
    assert!(!dir.path().join(".vigil").exists());
    assert!(vigil::evidence::payload::CheckName::parse("a\0b").is_err());
}

#[test]
fn a_symlinked_markers_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    file_subject(dir.path());
    let markers = markers_of(dir.path(), "tests");
    let markers = markers.parent().unwrap();
    let _ = std::fs::remove_dir_all(markers);
    std::os::unix::fs::symlink(outside.path(), markers).unwrap();
    let out = marker_writer_in(dir.path(), &artifact_marker("passed", &[]));
    assert_contains!(usage_error(&out, "marker-writer"), "symlink");
    assert!(
        tree(outside.path()).is_empty(),
        "nothing written through the link"
    );
    // A marker placed behind the link by other means is not trusted either.
    forge_passed_marker(&outside.path().join("tests"));
    assert!(negative_verdict(&verify_file(dir.path()), "marker-writer").contains("symlink"));
}

/// A `tests` marker that says the file subject of "content" passed, with its `.ok`, written
/// into `markers` by hand, not by the writer: its key.
fn forge_passed_marker(markers: &Path) -> String {
    let subject = format!("sha256:{}", vigil::sys::digest::sha256_hex(b"content"));
    std::fs::create_dir_all(markers).unwrap();
    let key = subject.replace(':', "-");
    std::fs::write(markers.join(format!("{key}.json")), json!({"schema":"vigil.marker/v1","check":"tests","status":"passed","subject":subject,"created_at":vigil::sys::time::now_rfc3339(),"writer":{"name":"x","version":"1","host":"h","user":"u"}}).to_string()).unwrap();
    std::fs::write(markers.join(format!("{key}.ok")), "").unwrap();
    key
}

/// SPEC §5: local markers live in the protected state; `.vigil/markers/`, which the agent can
/// write, is no longer read. A marker an older vigil (or the agent) left there passes nothing,
/// and the denial names it.
#[test]
fn a_marker_in_the_projects_vigil_directory_is_not_read_and_is_named() {
    let dir = tempfile::tempdir().unwrap();
    file_subject(dir.path());
    let key = forge_passed_marker(&dir.path().join(".vigil/markers/tests"));
    let line = negative_verdict(&verify_file(dir.path()), "marker-writer");
    assert_contains!(line, "missing");
    assert_contains!(line, ".vigil/markers/tests");
    assert_contains!(line, "no longer read");
    // The writer writes into the protected state, and that one counts.
    ok(marker_writer_in(
        dir.path(),
        &artifact_marker("passed", &[]),
    ));
    ok(verify_file(dir.path()));
    assert!(
        markers_of(dir.path(), "tests")
            .join(format!("{key}.ok"))
            .is_file()
    );
}

/// Inside the agent's sandbox the state home is read-only: a protected writer refuses at once,
/// with one line, and runs nothing.
#[test]
fn a_writer_that_cannot_write_the_protected_state_refuses_before_running() {
    let dir = Project::git();
    let markers = markers_of(dir.path(), "tests");
    let project_state = markers.parent().unwrap().parent().unwrap().to_path_buf();
    // The sandbox's view: the state home mounted read-only (bubblewrap, as Claude Code does).
    let out = std::process::Command::new("bwrap")
        .args(["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"])
        .arg("--bind")
        .arg(dir.path())
        .arg(dir.path())
        .arg("--ro-bind")
        .arg(&project_state)
        .arg(&project_state)
        .arg("--chdir")
        .arg(dir.path())
        .arg("--setenv")
        .arg("VIGIL_STATE_HOME")
        .arg(state_home())
        .arg(bin_dir().join("marker-writer"))
        .args(words("run --check tests --snapshot -- touch ran"))
        .output()
        .unwrap();
    let line = usage_error(&out, "marker-writer");
    assert_contains!(line, "a protected writer runs outside the agent's sandbox");
    assert_contains!(line, "nothing was run");
    assert!(!dir.path().join("ran").exists());
}

#[test]
fn usage_errors_are_one_line_and_exit_2() {
    let repo = Project::git();
    for args in [
        vec![],
        vec!["frobnicate"],
        vec!["verify"],
        vec!["run", "--check", "tests"],
        vec!["write", "--check", "tests"],
        vec!["write", "--check", "tests", "--status", "great"],
        vec!["verify", "--check", "tests", "--subject", "tree"],
        vec!["verify", "--check", "tests", "--max-age", "1y"],
        vec!["verify", "--check", "tests", "--status", "passed"],
        vec!["run", "--check", "tests", "--timeout", "0", "--", "true"],
    ] {
        let out = marker_writer_in(repo.path(), &args);
        usage_error(&out, "marker-writer");
    }
    let out = marker_writer_in(repo.path(), &["--help"]);
    assert!(out.status.success() && stdout_of(&out).contains("Usage"));
}

#[test]
fn a_symlinked_state_directory_is_refused_for_writing_and_verifying() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    file_subject(dir.path());
    std::os::unix::fs::symlink(outside.path(), dir.path().join(".vigil")).unwrap();
    let out = marker_writer_in(dir.path(), &artifact_marker("passed", &[]));
    assert_eq!(out.status.code(), Some(2));
    assert!(tree(outside.path()).is_empty());
    assert!(negative_verdict(&verify_file(dir.path()), "marker-writer").contains("symlink"));
}

#[test]
fn a_note_too_long_for_a_valid_payload_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    file_subject(dir.path());
    let note = "n".repeat(5000);
    let out = marker_writer_in(dir.path(), &artifact_marker("passed", &["--note", &note]));
    usage_error(&out, "marker-writer");
}

#[test]
fn a_file_subject_that_is_a_fifo_is_refused_not_waited_on() {
    let dir = tempfile::tempdir().unwrap();
    mkfifo(&dir.path().join("pipe"));
    let started = std::time::Instant::now();
    let out = marker_writer_in(
        dir.path(),
        &["verify", "--check", "tests", "--subject", "file:pipe"],
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    assert_contains!(usage_error(&out, "marker-writer"), "not a regular file");
}
