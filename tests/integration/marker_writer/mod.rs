//! SPEC §5, marker-writer, driven as a CI job or a git hook drives it: one file per command or
//! rule (the worktree subject's own cases are in `worktree/`, markers that travel in `notes/`,
//! signatures in `signing.rs`). Here what the files beside it share.

mod confinement;
mod crash_safety;
mod hold_from;
mod hostile_input;
mod round_trips;
mod run;
mod verify;
mod writers;

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{Value, json};

use crate::support::*;

fn hand_written(
    dir: &Path,
    check: &str,
    subject: &str,
    edit: impl FnOnce(&mut Value),
) -> (PathBuf, PathBuf) {
    let mut payload = json!({
        "schema": "vigil.marker/v1", "check": check, "status": "passed", "subject": subject,
        "created_at": vigil::sys::time::now_rfc3339(),
        "writer": {"name": "ci", "version": "1", "host": "runner", "user": "ci"},
    });
    edit(&mut payload);
    let dir = markers_of(dir, check);
    std::fs::create_dir_all(&dir).unwrap();
    let key = subject.replace(':', "-");
    let (p, g) = (
        dir.join(format!("{key}.json")),
        dir.join(format!("{key}.ok")),
    );
    std::fs::write(&p, payload.to_string()).unwrap();
    std::fs::write(&g, "").unwrap();
    (p, g)
}

fn file_subject(dir: &Path) -> String {
    std::fs::write(dir.join("artifact"), "content").unwrap();
    format!("sha256:{}", vigil::sys::digest::sha256_hex(b"content"))
}

fn verify_file(dir: &Path) -> Output {
    marker_writer_in(
        dir,
        &["verify", "--check", "tests", "--subject", "file:artifact"],
    )
}

fn verify(dir: &Path, check: &str) -> Output {
    marker_writer_in(dir, &["verify", "--check", check])
}

/// Every payload under a check's directory, each validated against the schema.
fn payloads(dir: &Path, check: &str) -> Vec<Value> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(markers_of(dir, check)).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if name.ends_with(".json") && !name.starts_with('.') {
            let payload: Value =
                serde_json::from_slice(&std::fs::read(entry.path()).unwrap()).unwrap();
            assert_valid("marker.schema.json", &payload);
            found.push(payload);
        }
    }
    found
}

fn only_payload(dir: &Path, check: &str) -> Value {
    let mut all = payloads(dir, check);
    assert_eq!(all.len(), 1, "{all:?}");
    all.remove(0)
}
