//! SPEC §5, the worktree subject (`git-tree:<id>`, the tree as it is on disk), against an agent
//! that can write anything in the project, `.git/` included (§9). Each attack starts from a
//! passed marker for good content, breaks the code, hides the change from git, and asks the
//! gate to stop: what is hashed is the bytes on disk, so every one of them is a `subject
//! mismatch`. Here what the files beside it share.

mod against_git;
mod caches;
mod every_case;
mod hostile_repository;
mod snapshot;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Output;

use serde_json::Value;

use crate::support::*;

fn subject_of(dir: &Path) -> String {
    let out = ok(marker_writer_in(
        dir,
        &["write", "--check", "probe", "--status", "passed"],
    ));
    let text = String::from_utf8(out.stdout).unwrap();
    text.split_whitespace()
        .find(|w| w.starts_with("git-tree:"))
        .unwrap()
        .to_string()
}

const GOOD: &str = "fn add(a: i32, b: i32) -> i32 { a + b }\n";
/// The same size as `GOOD`, so nothing in the stat data but the times can tell them apart.
const BROKEN: &str = "fn add(a: i32, b: i32) -> i32 { a - b }\n";

fn write_executable(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A repository whose `lib.rs` is good, committed, with a passed `tests` marker for it.
fn marked() -> Project {
    let dir = Project::builder()
        .file("lib.rs", GOOD)
        .file(".gitignore", ".vigil/\n.cache/\n")
        .git()
        .build();
    ok(marker_writer_in(
        dir.path(),
        &["run", "--check", "tests", "--", "true"],
    ));
    ok(verify(dir.path()));
    dir
}

fn verify(dir: &Path) -> Output {
    marker_writer_in(dir, &["verify", "--check", "tests"])
}

/// What `stop-gate --require-marker tests` answers for a Stop in `dir`.
fn gate(dir: &Path, path: Option<&std::ffi::OsStr>) -> Option<Value> {
    let env: Vec<(&str, &std::ffi::OsStr)> = path.map(|p| ("PATH", p)).into_iter().collect();
    let payload = stop_payload(dir, "s1", Some("Done."));
    run_stop(
        dir,
        &["--require-marker", "tests"],
        &env,
        payload.to_string(),
    )
    .json
}

/// The attack worked on git (it sees no change) and not on vigil (the marker is for other
/// content, and the gate blocks).
fn assert_hidden_from_git_but_not_from_vigil(dir: &Path) {
    assert_eq!(std::fs::read_to_string(dir.join("lib.rs")).unwrap(), BROKEN);
    let out = verify(dir);
    assert_exit(&out, 1);
    let line = assert_one_line_error(&out, "marker-writer");
    assert!(line.contains("subject mismatch"), "{line}");
    let decision = gate(dir, None).expect("the gate blocks");
    assert_eq!(decision["decision"], "block", "{decision}");
}

fn git_sees_nothing(dir: &Path) {
    assert_eq!(
        git(dir, &["status", "--porcelain"]),
        "",
        "the attack did not hide the change from git"
    );
}

/// Writes the broken content with a modification time an hour back, so that git's stat cache
/// does not re-read it as "racily clean".
fn break_in_the_past(dir: &Path) {
    let path = dir.join("lib.rs");
    std::fs::write(&path, BROKEN).unwrap();
    let out = std::process::Command::new("touch")
        .args(["-d", "1 hour ago"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success());
}

/// The subject vigil computes for `dir`, via `marker-writer write` with its state outside.
fn subject(dir: &Path) -> Result<String, String> {
    let state = tempfile::tempdir().unwrap();
    let out = marker_writer_in(
        dir,
        &[
            "write",
            "--check",
            "probe",
            "--status",
            "passed",
            "--state-dir",
            state.path().to_str().unwrap(),
        ],
    );
    let said = String::from_utf8_lossy(&out.stdout);
    match said.split_whitespace().find(|w| w.starts_with("git-tree:")) {
        Some(id) if out.status.success() => Ok(id.trim_start_matches("git-tree:").to_string()),
        _ => Err(assert_one_line_error(&out, "marker-writer")),
    }
}

/// `git add -A && git write-tree` into a copy of the index, git's own answer, with no
/// configuration of the user's.
fn gits_tree(dir: &Path) -> String {
    let scratch = tempfile::tempdir().unwrap();
    let index = scratch.path().join("index");
    if dir.join(".git/index").exists() {
        std::fs::copy(dir.join(".git/index"), &index).unwrap();
    }
    git_on_index(dir, &index, &["add", "-A"]);
    git_on_index(dir, &index, &["write-tree"])
}

fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q", "-b", "main"]);
    dir
}
