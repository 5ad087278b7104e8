//! SPEC §5, each subject (`worktree`, `file:PATH`, `stdin`) written by `run`, verified by
//! `verify` and shown by `show`, the payload valid against its schema.

use serde_json::Value;

use super::{only_payload, verify};
use crate::support::*;

#[test]
fn worktree_marker_round_trip() {
    let repo = Project::git();
    let output = marker_writer_in(repo.path(), &["run", "--check", "tests", "--", "true"]);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(verify(repo.path(), "tests").status.code(), Some(0));
    let payload = only_payload(repo.path(), "tests");
    assert_eq!(payload["status"], "passed");
    assert_starts_with!(payload["subject"].as_str().unwrap(), "git-tree:");
    let key = payload["subject"].as_str().unwrap().replace(':', "-");
    assert!(
        markers_of(repo.path(), "tests")
            .join(format!("{key}.ok"))
            .is_file()
    );
    assert_eq!(
        std::fs::read(markers_of(repo.path(), "tests").join(format!("{key}.ok")))
            .unwrap()
            .len(),
        0,
        "the gate is empty"
    );
}

#[test]
fn file_marker_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("report.pdf"), b"%PDF bytes").unwrap();
    ok(marker_writer_in(
        dir.path(),
        &[
            "write",
            "--check",
            "review",
            "--subject",
            "file:report.pdf",
            "--status",
            "passed",
            "--note",
            "read by Ana",
        ],
    ));
    let payload = only_payload(dir.path(), "review");
    assert_eq!(
        payload["subject"],
        format!("sha256:{}", vigil::sys::digest::sha256_hex(b"%PDF bytes"))
    );
    assert_eq!(payload["note"], "read by Ana");
    assert!(payload.get("run").is_none());
    assert_eq!(
        marker_writer_in(
            dir.path(),
            &words("verify --check review --subject file:report.pdf")
        )
        .status
        .code(),
        Some(0)
    );
    std::fs::write(dir.path().join("report.pdf"), b"%PDF other bytes").unwrap();
    assert_contains!(
        marker_writer_denies(
            dir.path(),
            "verify --check review --subject file:report.pdf"
        ),
        "subject mismatch"
    );
}

#[test]
fn stdin_marker_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let fed = |line: &str, stdin: &str| {
        marker_writer()
            .args(words(line))
            .current_dir(dir.path())
            .write_stdin(stdin)
            .output()
            .unwrap()
    };
    let write = fed(
        "write --check diff-review --subject stdin --status passed",
        "diff --git a/x b/x\n",
    );
    assert!(write.status.success());
    let verify = "verify --check diff-review --subject stdin";
    let same = fed(verify, "diff --git a/x b/x\n");
    assert_eq!(same.status.code(), Some(0));
    let other = fed(verify, "another diff\n");
    assert_contains!(
        negative_verdict(&other, "marker-writer"),
        "subject mismatch"
    );
}

#[test]
fn show_prints_the_payload() {
    let repo = Project::git();
    marker_writer_in(repo.path(), &["run", "--check", "tests", "--", "true"]);
    let output = marker_writer_in(repo.path(), &["show", "--check", "tests"]);
    assert!(output.status.success());
    let shown: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(shown, only_payload(repo.path(), "tests"));
    let none = marker_writer_in(repo.path(), &["show", "--check", "lint"]);
    usage_error(&none, "marker-writer");
}
