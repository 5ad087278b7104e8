//! SPEC §5 and P6: a writer killed at any instant leaves the previous or the new marker valid,
//! never a gate file whose payload is unreadable; writers at once leave one valid marker.

use std::path::Path;

use serde_json::Value;

use super::{file_subject, only_payload, verify_file};
use crate::support::*;

/// Every gate file has a complete, valid payload beside it.
fn assert_no_gate_without_a_complete_payload(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(markers_of(dir, "tests")) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if let Some(key) = name.strip_suffix(".ok") {
            let payload = entry.path().with_file_name(format!("{key}.json"));
            let json: Value = serde_json::from_slice(
                &std::fs::read(&payload).expect("a gate implies its payload"),
            )
            .expect("the payload of a gate is complete JSON");
            assert_valid("marker.schema.json", &json);
        }
    }
}

#[test]
fn a_writer_killed_at_random_points_never_leaves_a_half_marker() {
    let dir = tempfile::tempdir().unwrap();
    let subject = file_subject(dir.path());
    let mut seed: u64 = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    let mut random = move |below: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % below
    };
    let (mut accepted, mut killed) = (0, 0);
    for i in 0..200 {
        let status = ["passed", "failed", "aborted"][i % 3];
        let mut child = vigil_process("marker-writer")
            .args(artifact_marker(status, &[]))
            .current_dir(dir.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_micros(random(3000)));
        let _ = child.kill();
        if child.wait().unwrap().code().is_none() {
            killed += 1;
        }
        assert_no_gate_without_a_complete_payload(dir.path());
        let out = verify_file(dir.path());
        if out.status.success() {
            accepted += 1;
            let key = subject.replace(':', "-");
            let payload: Value = serde_json::from_slice(
                &std::fs::read(markers_of(dir.path(), "tests").join(format!("{key}.json")))
                    .unwrap(),
            )
            .unwrap();
            assert_eq!(
                payload["status"], "passed",
                "verify accepted a payload that is not passed"
            );
        }
    }
    eprintln!("{killed} of 200 writers killed, {accepted} states verified");
    assert_killed_enough(killed, 20, "writers were killed before finishing");
}

#[test]
fn sixteen_writers_at_once_leave_one_valid_marker() {
    let dir = tempfile::tempdir().unwrap();
    file_subject(dir.path());
    let children: Vec<_> = (0..16)
        .map(|i| {
            vigil_process("marker-writer")
                .args(artifact_marker(
                    "passed",
                    &["--note", &format!("writer {i}")],
                ))
                .current_dir(dir.path())
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    let files = tree(&markers_of(dir.path(), "tests"));
    assert_eq!(
        files.len(),
        2,
        "one payload and one gate, no temp files: {files:?}"
    );
    only_payload(dir.path(), "tests");
    assert_eq!(verify_file(dir.path()).status.code(), Some(0));
}
