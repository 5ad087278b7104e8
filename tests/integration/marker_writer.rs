//! marker-writer, driven as a CI job or a git hook drives it (SPEC §5).

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{Value, json};

use crate::support::*;

fn verify(dir: &Path, check: &str) -> Output {
    marker_writer_in(dir, &["verify", "--check", check])
}

fn markers(dir: &Path, check: &str) -> PathBuf {
    markers_of(dir, check)
}

/// Every payload under a check's directory, each validated against the schema.
fn payloads(dir: &Path, check: &str) -> Vec<Value> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(markers(dir, check)).unwrap().flatten() {
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

fn denial(output: &Output) -> String {
    assert_eq!(
        output.status.code(),
        Some(1),
        "stdout {:?}",
        String::from_utf8_lossy(&output.stdout)
    );
    assert_one_line_error(output, "marker-writer")
}

// --- Round trips ---------------------------------------------------------------------------

#[test]
fn worktree_marker_round_trip() {
    let repo = Project::git();
    let output = marker_writer_in(repo.path(), &["run", "--check", "tests", "--", "true"]);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(verify(repo.path(), "tests").status.code(), Some(0));
    let payload = only_payload(repo.path(), "tests");
    assert_eq!(payload["status"], "passed");
    assert!(
        payload["subject"]
            .as_str()
            .unwrap()
            .starts_with("git-tree:")
    );
    let key = payload["subject"].as_str().unwrap().replace(':', "-");
    assert!(
        markers(repo.path(), "tests")
            .join(format!("{key}.ok"))
            .is_file()
    );
    assert_eq!(
        std::fs::read(markers(repo.path(), "tests").join(format!("{key}.ok")))
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
    let output = marker_writer_in(
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
    );
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let payload = only_payload(dir.path(), "review");
    assert_eq!(
        payload["subject"],
        format!("sha256:{}", vigil::subject::sha256_hex(b"%PDF bytes"))
    );
    assert_eq!(payload["note"], "read by Ana");
    assert!(payload.get("run").is_none());
    assert_eq!(
        marker_writer_in(
            dir.path(),
            &[
                "verify",
                "--check",
                "review",
                "--subject",
                "file:report.pdf"
            ]
        )
        .status
        .code(),
        Some(0)
    );
    std::fs::write(dir.path().join("report.pdf"), b"%PDF other bytes").unwrap();
    let out = marker_writer_in(
        dir.path(),
        &[
            "verify",
            "--check",
            "review",
            "--subject",
            "file:report.pdf",
        ],
    );
    assert!(denial(&out).contains("subject mismatch"));
}

#[test]
fn stdin_marker_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let write = marker_writer()
        .args([
            "write",
            "--check",
            "diff-review",
            "--subject",
            "stdin",
            "--status",
            "passed",
        ])
        .current_dir(dir.path())
        .write_stdin("diff --git a/x b/x\n")
        .output()
        .unwrap();
    assert!(write.status.success());
    let same = marker_writer()
        .args(["verify", "--check", "diff-review", "--subject", "stdin"])
        .current_dir(dir.path())
        .write_stdin("diff --git a/x b/x\n")
        .output()
        .unwrap();
    assert_eq!(same.status.code(), Some(0));
    let other = marker_writer()
        .args(["verify", "--check", "diff-review", "--subject", "stdin"])
        .current_dir(dir.path())
        .write_stdin("another diff\n")
        .output()
        .unwrap();
    assert!(denial(&other).contains("subject mismatch"));
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
    assert_eq!(none.status.code(), Some(2));
    assert_one_line_error(&none, "marker-writer");
}

// --- The worktree subject ------------------------------------------------------------------

fn subject_of(dir: &Path) -> String {
    let out = marker_writer_in(dir, &["write", "--check", "probe", "--status", "passed"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    text.split_whitespace()
        .find(|w| w.starts_with("git-tree:"))
        .unwrap()
        .to_string()
}

#[test]
fn worktree_subject_changes_with_an_edit() {
    let repo = Project::git();
    let before = subject_of(repo.path());
    std::fs::write(repo.path().join("lib.rs"), "fn main() { edited() }\n").unwrap();
    assert_ne!(subject_of(repo.path()), before);
    std::fs::write(repo.path().join("lib.rs"), "fn main() {}\n").unwrap();
    assert_eq!(
        subject_of(repo.path()),
        before,
        "the same content is the same subject"
    );
}

#[test]
fn worktree_subject_changes_with_a_new_untracked_file() {
    let repo = Project::git();
    let before = subject_of(repo.path());
    std::fs::write(repo.path().join("new.rs"), "x").unwrap();
    assert_ne!(subject_of(repo.path()), before);
}

#[test]
fn worktree_subject_changes_with_a_deletion() {
    let repo = Project::git();
    let before = subject_of(repo.path());
    std::fs::remove_file(repo.path().join("lib.rs")).unwrap();
    assert_ne!(subject_of(repo.path()), before);
}

#[test]
fn worktree_subject_changes_with_a_mode_change() {
    use std::os::unix::fs::PermissionsExt;
    let repo = Project::git();
    let before = subject_of(repo.path());
    std::fs::set_permissions(
        repo.path().join("lib.rs"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    assert_ne!(subject_of(repo.path()), before);
}

#[test]
fn worktree_subject_ignores_ignored_files_and_vigils_own_state() {
    let repo = Project::git();
    std::fs::write(repo.path().join(".gitignore"), "*.log\n").unwrap();
    git(repo.path(), &["add", ".gitignore"]);
    git(repo.path(), &["commit", "-qm", "ignore logs"]);
    let before = subject_of(repo.path());
    std::fs::write(repo.path().join("build.log"), "noise").unwrap();
    assert_eq!(subject_of(repo.path()), before);
    // Markers live in the protected state, so writing one does not change the subject.
    assert!(markers_of(repo.path(), "probe").is_dir());
    assert_eq!(subject_of(repo.path()), before);
}

#[test]
fn worktree_subject_works_when_vigil_is_gitignored() {
    // The README tells users to ignore .vigil/; git refuses a pathspec naming ignored files.
    let repo = Project::git();
    std::fs::write(repo.path().join(".gitignore"), ".vigil/\n").unwrap();
    let before = subject_of(repo.path());
    assert_eq!(
        subject_of(repo.path()),
        before,
        "stable while markers are written"
    );
    assert!(
        marker_writer_in(repo.path(), &["run", "--check", "tests", "--", "true"])
            .status
            .success()
    );
    assert_eq!(verify(repo.path(), "tests").status.code(), Some(0));
}

#[test]
fn worktree_subject_leaves_the_users_index_head_and_files_alone() {
    let repo = Project::git();
    std::fs::write(repo.path().join("lib.rs"), "fn main() { staged() }\n").unwrap();
    git(repo.path(), &["add", "lib.rs"]);
    std::fs::write(repo.path().join("lib.rs"), "fn main() { unstaged() }\n").unwrap();
    std::fs::write(repo.path().join("untracked.rs"), "u").unwrap();
    let index = std::fs::read(repo.path().join(".git/index")).unwrap();
    let head = git(repo.path(), &["rev-parse", "HEAD"]);
    let status = git(
        repo.path(),
        &["status", "--porcelain", "--", ".", ":(exclude).vigil"],
    );
    marker_writer_in(repo.path(), &["run", "--check", "tests", "--", "true"]);
    verify(repo.path(), "tests");
    assert_eq!(
        std::fs::read(repo.path().join(".git/index")).unwrap(),
        index,
        "the index is byte-identical"
    );
    assert_eq!(git(repo.path(), &["rev-parse", "HEAD"]), head);
    assert_eq!(
        git(
            repo.path(),
            &["status", "--porcelain", "--", ".", ":(exclude).vigil"]
        ),
        status
    );
    assert_eq!(
        std::fs::read_to_string(repo.path().join("lib.rs")).unwrap(),
        "fn main() { unstaged() }\n"
    );
}

#[test]
fn worktree_subject_outside_a_repository_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let output = marker_writer_in(dir.path(), &["verify", "--check", "tests"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(assert_one_line_error(&output, "marker-writer").contains("git repository"));
}

// --- run -----------------------------------------------------------------------------------

#[test]
fn run_passes_output_through_unchanged_and_records_it() {
    let repo = Project::git();
    let script = "printf 'out\\377\\000bytes\\n'; printf 'err line\\n' >&2; exit 0";
    let output = marker_writer_in(
        repo.path(),
        &["run", "--check", "tests", "--", "sh", "-c", script],
    );
    assert_eq!(output.stdout, b"out\xff\x00bytes\n");
    assert!(String::from_utf8_lossy(&output.stderr).starts_with("err line\n"));
    let payload = only_payload(repo.path(), "tests");
    let run = &payload["run"];
    assert_eq!(run["exit_code"], 0);
    // The recorded command is the exact one: a shell given it runs the same thing.
    let command = run["command"].as_str().unwrap();
    let again = std::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .output()
        .unwrap();
    assert_eq!(again.stdout, output.stdout, "{command}");
    assert!(run["duration_ms"].as_u64().is_some());
    let expected = vigil::subject::sha256_hex(b"out\xff\x00bytes\nerr line\n");
    let stdout_first = run["output_sha256"] == expected;
    let stderr_first =
        run["output_sha256"] == vigil::subject::sha256_hex(b"err line\nout\xff\x00bytes\n");
    assert!(stdout_first || stderr_first, "{run}");
}

#[test]
fn run_exits_with_the_commands_code_and_records_failed() {
    let repo = Project::git();
    let output = marker_writer_in(
        repo.path(),
        &["run", "--check", "tests", "--", "sh", "-c", "exit 7"],
    );
    assert_eq!(output.status.code(), Some(7));
    let payload = only_payload(repo.path(), "tests");
    assert_eq!(
        (
            payload["status"].clone(),
            payload["run"]["exit_code"].clone()
        ),
        (json!("failed"), json!(7))
    );
    assert!(denial(&verify(repo.path(), "tests")).contains("status failed"));
}

#[test]
fn run_records_aborted_when_the_command_dies_by_a_signal() {
    let repo = Project::git();
    let output = marker_writer_in(
        repo.path(),
        &["run", "--check", "tests", "--", "sh", "-c", "kill -TERM $$"],
    );
    assert_eq!(output.status.code(), Some(128 + 15));
    assert_eq!(only_payload(repo.path(), "tests")["status"], "aborted");
}

#[test]
fn run_records_aborted_on_timeout_and_kills_the_group() {
    let repo = Project::git();
    let pidfile = repo.path().join("..").join(format!(
        "{}.pid",
        repo.path().file_name().unwrap().to_string_lossy()
    ));
    let script = format!("sleep 60 & echo $! > '{}'; wait", pidfile.display());
    let output = marker_writer_in(
        repo.path(),
        &[
            "run",
            "--check",
            "tests",
            "--timeout",
            "1",
            "--",
            "sh",
            "-c",
            &script,
        ],
    );
    assert_eq!(output.status.code(), Some(124));
    let payload = only_payload(repo.path(), "tests");
    assert_eq!(payload["status"], "aborted");
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    std::fs::remove_file(&pidfile).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(!running(pid), "{pid} outlived the timeout");
}

#[test]
fn run_forwards_sigterm_to_the_command_and_records_aborted() {
    let repo = Project::git();
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin!("marker-writer"))
        .args(["run", "--check", "tests", "--", "sleep", "30"])
        .current_dir(repo.path())
        .env_remove("VIGIL_STATE_DIR")
        .env("VIGIL_STATE_HOME", state_home())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    // SAFETY: signalling a child this test spawned.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(128 + 15));
    assert_eq!(only_payload(repo.path(), "tests")["status"], "aborted");
}

// --- verify: every reason to deny, named --------------------------------------------------

fn hand_written(
    dir: &Path,
    check: &str,
    subject: &str,
    edit: impl FnOnce(&mut Value),
) -> (PathBuf, PathBuf) {
    let mut payload = json!({
        "schema": "vigil.marker/v1", "check": check, "status": "passed", "subject": subject,
        "created_at": vigil::time::now_rfc3339(),
        "writer": {"name": "ci", "version": "1", "host": "runner", "user": "ci"},
    });
    edit(&mut payload);
    let dir = markers(dir, check);
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
    format!("sha256:{}", vigil::subject::sha256_hex(b"content"))
}

fn verify_file(dir: &Path) -> Output {
    marker_writer_in(
        dir,
        &["verify", "--check", "tests", "--subject", "file:artifact"],
    )
}

#[test]
fn verify_denies_missing() {
    let dir = tempfile::tempdir().unwrap();
    file_subject(dir.path());
    assert!(denial(&verify_file(dir.path())).contains("tests: missing"));
}

#[test]
fn verify_denies_a_gate_file_without_payload() {
    let dir = tempfile::tempdir().unwrap();
    let (payload, _) = hand_written(dir.path(), "tests", &file_subject(dir.path()), |_| {});
    std::fs::remove_file(payload).unwrap();
    assert!(
        denial(&verify_file(dir.path())).contains("tests: malformed: the gate file has no payload")
    );
}

#[test]
fn verify_denies_a_payload_without_gate_file() {
    let dir = tempfile::tempdir().unwrap();
    let (_, gate) = hand_written(dir.path(), "tests", &file_subject(dir.path()), |_| {});
    std::fs::remove_file(gate).unwrap();
    assert!(denial(&verify_file(dir.path())).contains("tests: missing"));
}

#[test]
fn verify_denies_a_payload_that_is_not_json() {
    let dir = tempfile::tempdir().unwrap();
    let (payload, _) = hand_written(dir.path(), "tests", &file_subject(dir.path()), |_| {});
    std::fs::write(payload, "passed").unwrap();
    assert!(denial(&verify_file(dir.path())).contains("malformed"));
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
        assert!(
            denial(&verify_file(dir.path())).contains("malformed"),
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
    assert!(
        denial(&verify_file(dir.path())).contains("malformed: the payload is for check \"lint\"")
    );
}

#[test]
fn verify_denies_a_payload_for_another_subject() {
    let dir = tempfile::tempdir().unwrap();
    hand_written(dir.path(), "tests", &file_subject(dir.path()), |p| {
        p["subject"] = json!(format!("sha256:{}", "a".repeat(64)))
    });
    assert!(denial(&verify_file(dir.path())).contains("subject mismatch"));
}

#[test]
fn verify_denies_failed_blocked_and_aborted() {
    for status in ["failed", "blocked", "aborted"] {
        let dir = tempfile::tempdir().unwrap();
        hand_written(dir.path(), "tests", &file_subject(dir.path()), |p| {
            p["status"] = json!(status)
        });
        assert!(
            denial(&verify_file(dir.path())).contains(&format!("status {status}")),
            "{status}"
        );
    }
}

#[test]
fn verify_denies_a_marker_older_than_max_age() {
    let dir = tempfile::tempdir().unwrap();
    let hour_ago = vigil::time::format_rfc3339(
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
    let out = marker_writer_in(
        dir.path(),
        &[
            "verify",
            "--check",
            "tests",
            "--subject",
            "file:artifact",
            "--max-age",
            "30m",
        ],
    );
    assert!(denial(&out).contains("stale"));
}

#[test]
fn verify_denies_a_marker_from_the_future() {
    let dir = tempfile::tempdir().unwrap();
    let later = vigil::time::format_rfc3339(
        std::time::SystemTime::now() + std::time::Duration::from_secs(3600),
    );
    hand_written(dir.path(), "tests", &file_subject(dir.path()), |p| {
        p["created_at"] = json!(later)
    });
    assert!(denial(&verify_file(dir.path())).contains("in the future"));
    let soon = vigil::time::format_rfc3339(
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
    std::fs::create_dir_all(markers(dir.path(), "tests")).unwrap();
    std::fs::write(markers(dir.path(), "tests").join(format!("{key}.ok")), "").unwrap();
    assert_eq!(verify_file(dir.path()).status.code(), Some(1));
}

// --- Crash safety and concurrency ---------------------------------------------------------

/// Every gate file has a complete, valid payload beside it.
fn assert_no_gate_without_a_complete_payload(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(markers(dir, "tests")) else {
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
        let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin!("marker-writer"))
            .args([
                "write",
                "--check",
                "tests",
                "--subject",
                "file:artifact",
                "--status",
                status,
            ])
            .current_dir(dir.path())
            .env_remove("VIGIL_STATE_DIR")
            .env("VIGIL_STATE_HOME", state_home())
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
                &std::fs::read(markers(dir.path(), "tests").join(format!("{key}.json"))).unwrap(),
            )
            .unwrap();
            assert_eq!(
                payload["status"], "passed",
                "verify accepted a payload that is not passed"
            );
        }
    }
    eprintln!("{killed} of 200 writers killed, {accepted} states verified");
    assert!(
        killed >= 20,
        "only {killed} writers were killed before finishing: the test proves little"
    );
}

#[test]
fn sixteen_writers_at_once_leave_one_valid_marker() {
    let dir = tempfile::tempdir().unwrap();
    file_subject(dir.path());
    let children: Vec<_> = (0..16)
        .map(|i| {
            std::process::Command::new(assert_cmd::cargo::cargo_bin!("marker-writer"))
                .args([
                    "write",
                    "--check",
                    "tests",
                    "--subject",
                    "file:artifact",
                    "--status",
                    "passed",
                    "--note",
                    &format!("writer {i}"),
                ])
                .current_dir(dir.path())
                .env_remove("VIGIL_STATE_DIR")
                .env("VIGIL_STATE_HOME", state_home())
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    let files = tree(&markers(dir.path(), "tests"));
    assert_eq!(
        files.len(),
        2,
        "one payload and one gate, no temp files: {files:?}"
    );
    only_payload(dir.path(), "tests");
    assert_eq!(verify_file(dir.path()).status.code(), Some(0));
}

// --- Hostile input and usage -------------------------------------------------------------

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
        assert!(
            assert_one_line_error(&out, "marker-writer").contains("check name"),
            "{check:?}"
        );
    }
    assert!(!dir.path().join(".vigil").exists());
    assert!(vigil::marker::CheckName::parse("a\0b").is_err());
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
    let out = marker_writer_in(
        dir.path(),
        &[
            "write",
            "--check",
            "tests",
            "--subject",
            "file:artifact",
            "--status",
            "passed",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(assert_one_line_error(&out, "marker-writer").contains("symlink"));
    assert!(
        tree(outside.path()).is_empty(),
        "nothing written through the link"
    );
    // A marker placed behind the link by other means is not trusted either.
    let subject = format!("sha256:{}", vigil::subject::sha256_hex(b"content"));
    let real = outside.path().join("tests");
    std::fs::create_dir_all(&real).unwrap();
    let key = subject.replace(':', "-");
    std::fs::write(real.join(format!("{key}.json")), json!({"schema":"vigil.marker/v1","check":"tests","status":"passed","subject":subject,"created_at":vigil::time::now_rfc3339(),"writer":{"name":"x","version":"1","host":"h","user":"u"}}).to_string()).unwrap();
    std::fs::write(real.join(format!("{key}.ok")), "").unwrap();
    assert!(denial(&verify_file(dir.path())).contains("symlink"));
}

/// SPEC §5: local markers live in the protected state; `.vigil/markers/`, which the agent can
/// write, is no longer read. A marker an older vigil (or the agent) left there passes nothing,
/// and the denial names it.
#[test]
fn a_marker_in_the_projects_vigil_directory_is_not_read_and_is_named() {
    let dir = tempfile::tempdir().unwrap();
    file_subject(dir.path());
    let subject = format!("sha256:{}", vigil::subject::sha256_hex(b"content"));
    let old = dir.path().join(".vigil/markers/tests");
    std::fs::create_dir_all(&old).unwrap();
    let key = subject.replace(':', "-");
    std::fs::write(old.join(format!("{key}.json")), json!({"schema":"vigil.marker/v1","check":"tests","status":"passed","subject":subject,"created_at":vigil::time::now_rfc3339(),"writer":{"name":"x","version":"1","host":"h","user":"u"}}).to_string()).unwrap();
    std::fs::write(old.join(format!("{key}.ok")), "").unwrap();
    let line = denial(&verify_file(dir.path()));
    assert!(
        line.contains("missing")
            && line.contains(".vigil/markers/tests")
            && line.contains("no longer read"),
        "{line}"
    );
    // The writer writes into the protected state, and that one counts.
    let out = marker_writer_in(
        dir.path(),
        &[
            "write",
            "--check",
            "tests",
            "--subject",
            "file:artifact",
            "--status",
            "passed",
        ],
    );
    assert!(out.status.success(), "{}", said(&out));
    assert!(verify_file(dir.path()).status.success());
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
        .args([
            "run",
            "--check",
            "tests",
            "--snapshot",
            "--",
            "touch",
            "ran",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    let line = assert_one_line_error(&out, "marker-writer");
    assert!(
        line.contains("a protected writer runs outside the agent's sandbox")
            && line.contains("nothing was run"),
        "{line}"
    );
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
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_one_line_error(&out, "marker-writer");
    }
    let out = marker_writer_in(repo.path(), &["--help"]);
    assert!(out.status.success() && stdout_of(&out).contains("Usage"));
}

#[test]
fn stop_gate_trusts_what_marker_writer_writes() {
    let repo = Project::git();
    // The writer vouches for the command the gate names (a marker of another command does
    // not count: stop_gate::a_required_marker_counts_only_when_written_by_its_command).
    assert!(
        marker_writer_in(
            repo.path(),
            &[
                "write",
                "--check",
                "tests",
                "--status",
                "passed",
                "--command",
                "cargo test --locked"
            ]
        )
        .status
        .success()
    );
    let payload = json!({"session_id": "s1", "hook_event_name": "Stop", "cwd": repo.path(), "last_assistant_message": "done"});
    let gate = stop_gate()
        .args(["--require-marker", "tests=cargo test --locked"])
        .current_dir(repo.path())
        .write_stdin(payload.to_string())
        .output()
        .unwrap();
    assert!(
        gate.stdout.is_empty(),
        "allowed: {}",
        String::from_utf8_lossy(&gate.stdout)
    );
    std::fs::write(
        repo.path().join("lib.rs"),
        "fn main() { after_the_run() }\n",
    )
    .unwrap();
    let gate = stop_gate()
        .args(["--require-marker", "tests=cargo test --locked"])
        .current_dir(repo.path())
        .write_stdin(payload.to_string())
        .output()
        .unwrap();
    let out: Value = serde_json::from_slice(&gate.stdout).unwrap();
    assert_eq!(out["decision"], "block");
    assert!(
        out["reason"]
            .as_str()
            .unwrap()
            .contains("marker-writer run --check tests -- cargo test --locked"),
        "{out}"
    );
}

// --- The pre-push hook template -------------------------------------------------------------

#[test]
fn pre_push_template_blocks_a_failing_push_and_vouches_for_a_passing_one() {
    let repo = Project::git();
    let remote = tempfile::tempdir().unwrap();
    git(remote.path(), &["init", "-q", "--bare"]);
    git(
        repo.path(),
        &["remote", "add", "origin", remote.path().to_str().unwrap()],
    );
    std::fs::write(repo.path().join(".gitignore"), ".vigil/\n").unwrap();
    git(repo.path(), &["add", ".gitignore"]);
    git(repo.path(), &["commit", "-qm", "ignore state"]);
    // The template, with its test command swapped for one this test controls.
    let hook = std::fs::read_to_string(repo_path("templates/ci/pre-push")).unwrap();
    assert!(hook.contains("-- cargo test --locked"));
    let hook = hook.replace("-- cargo test --locked", "-- test -f tests-pass");
    let path = repo.path().join(".git/hooks/pre-push");
    std::fs::write(&path, hook).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let bin = assert_cmd::cargo::cargo_bin!("marker-writer")
        .parent()
        .unwrap()
        .to_path_buf();
    let push = || {
        std::process::Command::new("git")
            .args(["push", "-q", "origin", "main"])
            .current_dir(repo.path())
            .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
            .env("VIGIL_STATE_HOME", state_home())
            .output()
            .unwrap()
    };
    assert!(
        !push().status.success(),
        "a failing test command must stop the push"
    );
    assert_eq!(only_payload(repo.path(), "tests")["status"], "failed");
    // The tests run in a snapshot of the tree (the template's --snapshot): what makes them
    // pass must be in it.
    let payload = only_payload(repo.path(), "tests");
    assert_eq!(payload["run"]["isolation"], "snapshot");
    std::fs::write(repo.path().join("tests-pass"), "").unwrap();
    git(repo.path(), &["add", "tests-pass"]);
    git(repo.path(), &["commit", "-qm", "the tests pass"]);
    let pushed = push();
    assert!(
        pushed.status.success(),
        "{}",
        String::from_utf8_lossy(&pushed.stderr)
    );
    assert_eq!(verify(repo.path(), "tests").status.code(), Some(0));
}

// --- The subject cannot be fooled through the index or the repository's config ------------

fn marked_then_edited(setup: impl FnOnce(&Path)) -> Output {
    let repo = Project::git();
    assert!(
        marker_writer_in(repo.path(), &["run", "--check", "tests", "--", "true"])
            .status
            .success()
    );
    setup(repo.path());
    verify(repo.path(), "tests")
}

#[test]
fn assume_unchanged_does_not_hide_an_edit_from_the_subject() {
    let out = marked_then_edited(|dir| {
        git(dir, &["update-index", "--assume-unchanged", "lib.rs"]);
        std::fs::write(dir.join("lib.rs"), "fn main() { panic!() }\n").unwrap();
    });
    assert!(denial(&out).contains("subject mismatch"));
}

/// Skip-worktree is how a sparse checkout leaves files off the disk: the tree the marker names
/// cannot be read whole, so verify denies, naming it, and never hides the edit.
#[test]
fn skip_worktree_denies_as_a_sparse_checkout_and_never_hides_an_edit() {
    let out = marked_then_edited(|dir| {
        git(dir, &["update-index", "--skip-worktree", "lib.rs"]);
        std::fs::write(dir.join("lib.rs"), "fn main() { panic!() }\n").unwrap();
    });
    assert_eq!(out.status.code(), Some(2));
    let line = assert_one_line_error(&out, "marker-writer");
    assert!(line.contains("sparse checkout (skip-worktree)"), "{line}");
}

#[test]
fn a_same_size_edit_with_its_old_mtime_is_still_seen() {
    let out = marked_then_edited(|dir| {
        git(dir, &["config", "core.trustctime", "false"]);
        git(dir, &["config", "core.checkStat", "minimal"]);
        let path = dir.join("lib.rs");
        let before = std::fs::metadata(&path).unwrap().modified().unwrap();
        std::fs::write(&path, "fn maim() {}\n").unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            "fn main() {}\n".len() as u64,
            "same size"
        );
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(before)
            .unwrap();
    });
    assert!(denial(&out).contains("subject mismatch"));
}

#[test]
fn an_edit_in_the_same_second_as_git_add_is_seen() {
    // "Racy git": an index copy stamped now would make git trust stat data from the same
    // second as the edit, and vouch for the staged content instead of what is on disk.
    let repo = Project::git();
    std::fs::write(repo.path().join(".gitignore"), ".vigil/\n").unwrap();
    std::fs::write(repo.path().join("f"), "x111\n").unwrap();
    git(repo.path(), &["add", "-A"]);
    std::fs::write(repo.path().join("f"), "y111\n").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1200));
    let subject = subject_of(repo.path());
    git(repo.path(), &["add", "-A"]);
    let on_disk = git(repo.path(), &["write-tree"]);
    assert_eq!(
        subject,
        format!("git-tree:{on_disk}"),
        "the subject is the content on disk"
    );
}

#[test]
fn computing_the_subject_writes_nothing_into_the_repository() {
    let repo = Project::git();
    std::fs::write(repo.path().join("big-untracked.bin"), vec![7u8; 4 << 20]).unwrap();
    let objects = || tree(&repo.path().join(".git/objects"));
    let before = objects();
    marker_writer_in(repo.path(), &["run", "--check", "tests", "--", "true"]);
    verify(repo.path(), "tests");
    assert_eq!(objects(), before, ".git/objects changed");
}

#[test]
fn a_gate_that_is_a_symlink_fifo_or_not_empty_is_malformed() {
    for kind in ["symlink", "fifo", "not empty"] {
        let dir = tempfile::tempdir().unwrap();
        let (_, gate) = hand_written(dir.path(), "tests", &file_subject(dir.path()), |_| {});
        std::fs::remove_file(&gate).unwrap();
        match kind {
            "symlink" => std::os::unix::fs::symlink("/etc/hostname", &gate).unwrap(),
            "fifo" => assert!(
                std::process::Command::new("mkfifo")
                    .arg(&gate)
                    .status()
                    .unwrap()
                    .success()
            ),
            _ => std::fs::write(&gate, "ok").unwrap(),
        }
        assert!(
            denial(&verify_file(dir.path()))
                .contains("malformed: the gate file is not an empty regular file"),
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
    assert!(denial(&verify_file(dir.path())).contains("malformed"));
}

#[test]
fn a_symlinked_state_directory_is_refused_for_writing_and_verifying() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    file_subject(dir.path());
    std::os::unix::fs::symlink(outside.path(), dir.path().join(".vigil")).unwrap();
    let out = marker_writer_in(
        dir.path(),
        &[
            "write",
            "--check",
            "tests",
            "--subject",
            "file:artifact",
            "--status",
            "passed",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(tree(outside.path()).is_empty());
    assert!(denial(&verify_file(dir.path())).contains("symlink"));
}

#[test]
fn a_note_too_long_for_a_valid_payload_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    file_subject(dir.path());
    let note = "n".repeat(5000);
    let out = marker_writer_in(
        dir.path(),
        &[
            "write",
            "--check",
            "tests",
            "--subject",
            "file:artifact",
            "--status",
            "passed",
            "--note",
            &note,
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert_one_line_error(&out, "marker-writer");
}

#[test]
fn a_file_subject_that_is_a_fifo_is_refused_not_waited_on() {
    let dir = tempfile::tempdir().unwrap();
    assert!(
        std::process::Command::new("mkfifo")
            .arg(dir.path().join("pipe"))
            .status()
            .unwrap()
            .success()
    );
    let started = std::time::Instant::now();
    let out = marker_writer_in(
        dir.path(),
        &["verify", "--check", "tests", "--subject", "file:pipe"],
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    assert_eq!(out.status.code(), Some(2));
    assert!(assert_one_line_error(&out, "marker-writer").contains("not a regular file"));
}

#[test]
fn run_passes_all_output_to_a_slow_reader_and_hashes_all_of_it() {
    let repo = Project::git();
    let mw_bin = assert_cmd::cargo::cargo_bin!("marker-writer");
    let script = format!(
        "'{}' run --check tests -- seq 1 20000 | (sleep 2; wc -l)",
        mw_bin.display()
    );
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(&script)
        .env("VIGIL_STATE_HOME", state_home())
        .current_dir(repo.path())
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "20000");
    let expected: String = (1..=20000).map(|i| format!("{i}\n")).collect();
    let payload = only_payload(repo.path(), "tests");
    assert_eq!(
        payload["run"]["output_sha256"],
        vigil::subject::sha256_hex(expected.as_bytes())
    );
}

#[test]
fn run_lets_a_command_read_from_the_terminal() {
    // `script` gives the run a terminal; the command (in its own process group) must still
    // be able to read it, not stop on SIGTTIN.
    let repo = Project::git();
    let mw_bin = assert_cmd::cargo::cargo_bin!("marker-writer");
    let inner = format!(
        "'{}' run --check human -- sh -c 'read answer; test \"$answer\" = yes'",
        mw_bin.display()
    );
    let mut child = std::process::Command::new("script")
        .args(["-qec", &inner, "/dev/null"])
        .env("VIGIL_STATE_HOME", state_home())
        .current_dir(repo.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    use std::io::Write;
    std::thread::sleep(std::time::Duration::from_millis(500));
    child.stdin.as_mut().unwrap().write_all(b"yes\n").unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(status.is_some(), "the command hung reading the terminal");
    assert_eq!(only_payload(repo.path(), "human")["status"], "passed");
}

#[test]
fn a_worktree_that_changes_during_the_run_is_recorded_aborted() {
    let repo = Project::git();
    let out = marker_writer_in(
        repo.path(),
        &[
            "run",
            "--check",
            "tests",
            "--",
            "sh",
            "-c",
            "echo '// sneaked in' >> lib.rs",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "the command's own code");
    let payload = only_payload(repo.path(), "tests");
    assert_eq!(payload["status"], "aborted");
    assert_eq!(
        payload["note"],
        "the worktree changed while the command ran"
    );
    assert_eq!(verify(repo.path(), "tests").status.code(), Some(1));
}

#[test]
fn a_command_that_cannot_start_exits_127_and_writes_no_marker() {
    let repo = Project::git();
    let out = marker_writer_in(
        repo.path(),
        &["run", "--check", "tests", "--", "/nonexistent/binary"],
    );
    assert_eq!(out.status.code(), Some(127));
    assert_one_line_error(&out, "marker-writer");
    assert!(!markers(repo.path(), "tests").exists() || payloads(repo.path(), "tests").is_empty());
}

// --- SPEC §9: a local writer's command is confined ------------------------------------------

/// The agent wrote the tests a protected writer runs with `--snapshot`: they try to read the
/// signing key, trust their own key, and write the state home. None of it works, and the
/// payload says the command was confined.
#[test]
fn a_snapshot_runs_tests_that_cannot_read_the_key_or_write_the_state_home() {
    let dir = Project::git();
    let keys = tempfile::tempdir().unwrap();
    let made = marker_writer_in(
        dir.path(),
        &["keygen", "--out", keys.path().to_str().unwrap()],
    );
    assert!(made.status.success());
    let key = keys.path().join("vigil-marker.key");
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
    assert!(output.status.success(), "{}", said(&output));
    assert!(!printed.contains("READ-THE-KEY"), "{printed}");
    assert!(!printed.contains("PLANTED"), "{printed}");
    assert!(!state_home().join("planted").exists());
    let payload = only_payload(dir.path(), "tests");
    assert_eq!(payload["run"]["confinement"], "bubblewrap");
    assert_valid("marker.schema.json", &payload);
}

#[test]
fn an_in_place_run_says_it_ran_with_your_rights_and_records_it() {
    let dir = Project::git();
    let output = marker_writer_in(dir.path(), &["run", "--check", "tests", "--", "true"]);
    assert!(output.status.success());
    let line = assert_one_line_error(&output, "marker-writer");
    assert!(
        line.contains("tests passed for git-tree:")
            && line.contains("ran in place, unconfined, with your rights"),
        "{line}"
    );
    let payload = only_payload(dir.path(), "tests");
    assert_eq!(payload["run"]["confinement"], "none");
    assert_eq!(payload["run"]["isolation"], "in-place");
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
    assert!(
        line.contains("ran unconfined, with your rights: bubblewrap is not installed"),
        "{line}"
    );
    let payload = only_payload(dir.path(), "tests");
    assert_eq!(payload["run"]["confinement"], "none");
    assert_eq!(payload["run"]["isolation"], "snapshot");
}

#[test]
fn check_network_and_check_write_are_for_a_confined_snapshot_only() {
    let dir = Project::git();
    for flags in [&["--check-network"][..], &["--check-write", "/tmp"][..]] {
        let mut args = vec!["run", "--check", "tests"];
        args.extend(flags);
        args.extend(["--", "true"]);
        let output = marker_writer_in(dir.path(), &args);
        assert_eq!(output.status.code(), Some(2));
        assert_one_line_error(&output, "marker-writer");
    }
    let output = marker_writer_in(
        dir.path(),
        &[
            "run",
            "--check",
            "t",
            "--snapshot",
            "--check-write",
            "rel",
            "--",
            "true",
        ],
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(said(&output).contains("absolute"), "{}", said(&output));
}
