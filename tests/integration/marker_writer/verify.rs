//! SPEC §5, `marker-writer verify`: exit 0 only for a whole, well-formed, passed, fresh marker
//! of this check and subject; otherwise 1 with one line naming the first reason (`missing`,
//! `subject mismatch`, `malformed`, `status <s>`, `stale`).

use serde_json::json;

use super::{file_subject, hand_written, verify_file};
use crate::support::*;

#[test]
fn verify_denies_missing() {
    let dir = tempfile::tempdir().unwrap();
    file_subject(dir.path());
    assert!(negative_verdict(&verify_file(dir.path()), "marker-writer").contains("tests: missing"));
}

#[test]
fn verify_denies_a_gate_file_without_payload() {
    let dir = tempfile::tempdir().unwrap();
    let (payload, _) = hand_written(dir.path(), "tests", &file_subject(dir.path()), |_| {});
    std::fs::remove_file(payload).unwrap();
    assert_contains!(
        negative_verdict(&verify_file(dir.path()), "marker-writer"),
        "tests: malformed: the gate file has no payload"
    );
}

#[test]
fn verify_denies_a_payload_without_gate_file() {
    let dir = tempfile::tempdir().unwrap();
    let (_, gate) = hand_written(dir.path(), "tests", &file_subject(dir.path()), |_| {});
    std::fs::remove_file(gate).unwrap();
    assert!(negative_verdict(&verify_file(dir.path()), "marker-writer").contains("tests: missing"));
}

#[test]
fn verify_denies_a_payload_that_is_not_json() {
    let dir = tempfile::tempdir().unwrap();
    let (payload, _) = hand_written(dir.path(), "tests", &file_subject(dir.path()), |_| {});
    std::fs::write(payload, "passed").unwrap();
    assert!(negative_verdict(&verify_file(dir.path()), "marker-writer").contains("malformed"));
}

#[test]
fn verify_denies_a_payload_missing_a_field() {
    for field in [
        "schema",
        "check",
        "status",
        "subject",
        "created_at",
        "writer",
    ] {
        let dir = tempfile::tempdir().unwrap();
        hand_written(dir.path(), "tests", &file_subject(dir.path()), |p| {
            p.as_object_mut().unwrap().remove(field);
        });
        assert_contains!(
            negative_verdict(&verify_file(dir.path()), "marker-writer"),
            "malformed",
            "{field}"
        );
    }
}

#[test]
fn verify_denies_a_payload_for_another_check() {
    let dir = tempfile::tempdir().unwrap();
    hand_written(dir.path(), "tests", &file_subject(dir.path()), |p| {
        p["check"] = json!("lint")
    });
    assert_contains!(
        negative_verdict(&verify_file(dir.path()), "marker-writer"),
        "malformed: the payload is for check \"lint\""
    );
}

#[test]
fn verify_denies_a_payload_for_another_subject() {
    let dir = tempfile::tempdir().unwrap();
    hand_written(dir.path(), "tests", &file_subject(dir.path()), |p| {
        p["subject"] = json!(format!("sha256:{}", "a".repeat(64)))
    });
    assert_contains!(
        negative_verdict(&verify_file(dir.path()), "marker-writer"),
        "subject mismatch"
    );
}

#[test]
fn verify_denies_failed_blocked_and_aborted() {
    for status in ["failed", "blocked", "aborted"] {
        let dir = tempfile::tempdir().unwrap();
        hand_written(dir.path(), "tests", &file_subject(dir.path()), |p| {
            p["status"] = json!(status)
        });
        assert_contains!(
            negative_verdict(&verify_file(dir.path()), "marker-writer"),
            &format!("status {status}"),
            "{status}"
        );
    }
}

#[test]
fn verify_denies_a_marker_older_than_max_age() {
    let dir = tempfile::tempdir().unwrap();
    let hour_ago = vigil::sys::time::format_rfc3339(
        std::time::SystemTime::now() - std::time::Duration::from_secs(3600),
    );
    hand_written(dir.path(), "tests", &file_subject(dir.path()), |p| {
        p["created_at"] = json!(hour_ago)
    });
    assert_eq!(
        verify_file(dir.path()).status.code(),
        Some(0),
        "within the default 24h"
    );
    assert_contains!(
        marker_writer_denies(
            dir.path(),
            "verify --check tests --subject file:artifact --max-age 30m"
        ),
        "stale"
    );
}

#[test]
fn verify_denies_a_marker_from_the_future() {
    let dir = tempfile::tempdir().unwrap();
    let later = vigil::sys::time::format_rfc3339(
        std::time::SystemTime::now() + std::time::Duration::from_secs(3600),
    );
    hand_written(dir.path(), "tests", &file_subject(dir.path()), |p| {
        p["created_at"] = json!(later)
    });
    assert!(negative_verdict(&verify_file(dir.path()), "marker-writer").contains("in the future"));
    let soon = vigil::sys::time::format_rfc3339(
        std::time::SystemTime::now() + std::time::Duration::from_secs(30),
    );
    hand_written(dir.path(), "tests", &file_subject(dir.path()), |p| {
        p["created_at"] = json!(soon)
    });
    assert_eq!(
        verify_file(dir.path()).status.code(),
        Some(0),
        "a small clock skew is tolerated"
    );
}

#[test]
fn a_touched_gate_file_never_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let key = file_subject(dir.path()).replace(':', "-");
    std::fs::create_dir_all(markers_of(dir.path(), "tests")).unwrap();
    std::fs::write(
        markers_of(dir.path(), "tests").join(format!("{key}.ok")),
        "",
    )
    .unwrap();
    assert_eq!(verify_file(dir.path()).status.code(), Some(1));
}

#[test]
fn a_gate_that_is_a_symlink_fifo_or_not_empty_is_malformed() {
    for kind in ["symlink", "fifo", "not empty"] {
        let dir = tempfile::tempdir().unwrap();
        let (_, gate) = hand_written(dir.path(), "tests", &file_subject(dir.path()), |_| {});
        std::fs::remove_file(&gate).unwrap();
        match kind {
            "symlink" => std::os::unix::fs::symlink("/etc/hostname", &gate).unwrap(),
            "fifo" => mkfifo(&gate),
            _ => std::fs::write(&gate, "ok").unwrap(),
        }
        assert_contains!(
            negative_verdict(&verify_file(dir.path()), "marker-writer"),
            "malformed: the gate file is not an empty regular file",
            "{kind}"
        );
    }
}

#[test]
fn a_payload_that_is_a_symlink_is_malformed() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let (payload, _) = hand_written(dir.path(), "tests", &file_subject(dir.path()), |_| {});
    let real = outside.path().join("payload.json");
    std::fs::rename(&payload, &real).unwrap();
    std::os::unix::fs::symlink(&real, &payload).unwrap();
    assert!(negative_verdict(&verify_file(dir.path()), "marker-writer").contains("malformed"));
}
