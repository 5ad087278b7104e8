//! SPEC §4 check 3, markers (`--require-marker CHECK[=CMD]`): `marker-writer verify` semantics
//! for the current worktree, each denial naming its reason and the command that writes it.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::support::*;

/// The worktree subject computed the way SPEC §5 says, independently of vigil's code.
fn worktree_subject(dir: &Path) -> String {
    let index = tempfile::tempdir().unwrap();
    let index = index.path().join("index");
    git_on_index(
        dir,
        &index,
        &["add", "--all", "--", ".", ":(exclude).vigil"],
    );
    format!("git-tree:{}", git_on_index(dir, &index, &["write-tree"]))
}

fn write_marker(
    p: &Project,
    check: &str,
    subject: &str,
    status: &str,
    created_at: &str,
    command: Option<&str>,
) -> PathBuf {
    let dir = markers_of(p.path(), check);
    std::fs::create_dir_all(&dir).unwrap();
    let key = subject.replace(':', "-");
    let mut payload = json!({
        "schema": "vigil.marker/v1", "check": check, "status": status, "subject": subject,
        "created_at": created_at,
        "writer": {"name": "test", "version": "1", "host": "ci", "user": "ci"},
    });
    if let Some(command) = command {
        payload["run"] = json!({"command": command, "exit_code": 0, "duration_ms": 5, "output_sha256": "0".repeat(64)});
    }
    assert_valid("marker.schema.json", &payload);
    std::fs::write(dir.join(format!("{key}.json")), payload.to_string()).unwrap();
    std::fs::write(dir.join(format!("{key}.ok")), "").unwrap();
    dir.join(format!("{key}.json"))
}

/// A `passed` marker of `tests` for exactly the worktree as it is, written now, as run by
/// `command` (if any).
fn passed_here(p: &Project, command: Option<&str>) -> PathBuf {
    write_marker(
        p,
        "tests",
        &worktree_subject(p.path()),
        "passed",
        &now(),
        command,
    )
}

fn now() -> String {
    vigil::sys::time::now_rfc3339()
}

#[test]
fn marker_for_exactly_this_worktree_allows() {
    let p = Project::git();
    passed_here(&p, None);
    assert!(p.stop_s1(&["--require-marker", "tests"]).silent_allow());
}

/// Issue 29, a marker is bound to its command: with `--require-marker CHECK=CMD`, a passed
/// marker for this very content counts only when the command it records is CMD (the same
/// shell words, bare or as `sh -c`). The agent's way around it, a marker from a command that
/// checks nothing, is turned away. Issue 43: the words do not say what ran where the
/// environment steers the command (`PATH=…`, a runner's option variables), so the binding
/// counts only a marker whose run was a snapshot's (a clean environment) or signed by a
/// trusted key (CI's, whose environment is its own).
#[test]
fn a_required_marker_counts_only_when_written_by_its_command() {
    let p = Project::git();
    p.write("lib.rs", "");
    let required = ["--require-marker", "tests=test -f lib.rs"];
    let writer = |args: &[&str]| {
        let out = marker_writer_in(p.path(), args);
        assert!(out.status.success(), "{args:?}: {}", said(&out));
    };
    writer(&["run", "--check", "tests", "--snapshot", "--", "true"]);
    let stop = p.stop_s1(&required);
    stop.assert_blocked_saying("command mismatch");
    assert_contains!(stop.reason(), "test -f lib.rs");
    assert!(
        p.stop_s1(&["--require-marker", "tests"]).silent_allow(),
        "a bare --require-marker binds no command"
    );
    for run in [
        &[
            "run",
            "--check",
            "tests",
            "--snapshot",
            "--",
            "test",
            "-f",
            "lib.rs",
        ][..],
        &[
            "run",
            "--check",
            "tests",
            "--snapshot",
            "--",
            "sh",
            "-c",
            "test  -f 'lib.rs'",
        ][..],
    ] {
        writer(run);
        assert!(p.stop_s1(&required).silent_allow(), "{run:?}");
    }
    writer(&["write", "--check", "tests", "--status", "passed"]);
    assert!(p.stop_s1(&required).blocked(), "write names no command");
    writer(&tests_passed_by("test -f other.rs"));
    assert!(p.stop_s1(&required).blocked());
}

/// The agent's way around the binding (issue 43): the recorded words, with its own program
/// first on PATH (or a runner's option variable) in the environment of a writer run in place.
#[test]
fn a_required_command_counts_only_in_a_snapshot_or_signed_by_a_trusted_key() {
    let p = Project::git();
    p.write("lib.rs", "");
    p.write("fake/test", "#!/bin/sh\nexit 0\n");
    make_executable(&p.path().join("fake/test"));
    let required = ["--require-marker", "tests=test -f lib.rs"];
    let path = format!(
        "{}:{}",
        p.path().join("fake").display(),
        std::env::var("PATH").unwrap()
    );
    for args in [
        &["run", "--check", "tests", "--", "test", "-f", "lib.rs"][..],
        &tests_passed_by("test -f lib.rs")[..],
    ] {
        let out = marker_writer()
            .args(args)
            .env("PATH", &path)
            .current_dir(p.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {}", said(&out));
        let stop = p.stop_s1(&required);
        stop.assert_blocked_saying("command mismatch");
        assert_contains!(stop.reason(), "--snapshot");
    }
    // Signed by a key a human trusted (CI's): its environment is the writer's own.
    let keys = tempfile::tempdir().unwrap();
    let (secret, public) = keygen_into(p.path(), keys.path());
    let mut signed = tests_passed_by("test -f lib.rs");
    signed.extend(["--sign-key", secret.to_str().unwrap()]);
    let out = marker_writer_in(p.path(), &signed);
    assert!(out.status.success(), "{}", said(&out));
    let with_key = [
        "--require-marker",
        "tests=test -f lib.rs",
        "--verify-key",
        public.to_str().unwrap(),
    ];
    assert!(p.stop_s1(&with_key).silent_allow());
}

#[test]
fn missing_marker_blocks_naming_the_check_and_the_writer_command() {
    let p = Project::git();
    let stop = p.stop_s1(&["--require-marker", "tests"]);
    let reason = stop.assert_blocked_starting("stop-gate: marker `tests` missing");
    assert_contains!(reason, "marker-writer run --check tests --");
}

#[test]
fn marker_for_other_content_is_a_subject_mismatch_naming_the_configured_command() {
    let p = Project::git();
    // The payload's own command is the agent's to write: the block must not repeat it.
    passed_here(&p, Some("true"));
    p.write("lib.rs", "fn main() { changed() }\n");
    let stop = p.stop_s1(&["--require-marker", "tests=cargo test --locked"]);
    stop.assert_blocked_saying("subject mismatch");
    assert_contains!(
        stop.reason(),
        "marker-writer run --check tests --snapshot -- cargo test --locked"
    );
    // A command from a payload was echoed.
    assert_lacks!(stop.reason(), "-- true");
}

/// Puts a project's markers into some state, given the project's worktree subject.
type Setup = Box<dyn Fn(&Project, &str)>;

#[test]
fn marker_denials_each_name_their_reason() {
    let two_days_ago = vigil::sys::time::format_rfc3339(
        std::time::SystemTime::now() - std::time::Duration::from_secs(2 * 86_400),
    );
    let tomorrow = vigil::sys::time::format_rfc3339(
        std::time::SystemTime::now() + std::time::Duration::from_secs(86_400),
    );
    let cases: Vec<(&str, Setup)> = vec![
        (
            "status failed",
            Box::new(|p: &Project, s: &str| {
                write_marker(p, "tests", s, "failed", &now(), None);
            }),
        ),
        (
            "status aborted",
            Box::new(|p: &Project, s: &str| {
                write_marker(p, "tests", s, "aborted", &now(), None);
            }),
        ),
        (
            "stale",
            Box::new(move |p: &Project, s: &str| {
                write_marker(p, "tests", s, "passed", &two_days_ago, None);
            }),
        ),
        (
            "malformed",
            Box::new(move |p: &Project, s: &str| {
                write_marker(p, "tests", s, "passed", &tomorrow, None);
            }),
        ),
        (
            "malformed",
            Box::new(|p: &Project, s: &str| {
                let payload = write_marker(p, "tests", s, "passed", &now(), None);
                std::fs::remove_file(payload).unwrap();
            }),
        ),
        (
            "malformed",
            Box::new(|p: &Project, s: &str| {
                let payload = write_marker(p, "tests", s, "passed", &now(), None);
                std::fs::write(payload, "{\"schema\":").unwrap();
            }),
        ),
        (
            "malformed",
            Box::new(|p: &Project, s: &str| {
                let payload = write_marker(p, "other", s, "passed", &now(), None);
                let dir = markers_of(p.path(), "tests");
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::copy(&payload, dir.join(payload.file_name().unwrap())).unwrap();
                std::fs::write(
                    dir.join(payload.with_extension("ok").file_name().unwrap()),
                    "",
                )
                .unwrap();
            }),
        ),
        (
            "subject mismatch",
            Box::new(|p: &Project, s: &str| {
                let payload = write_marker(p, "tests", s, "passed", &now(), None);
                let mut json: Value =
                    serde_json::from_str(&std::fs::read_to_string(&payload).unwrap()).unwrap();
                json["subject"] = json!(format!("git-tree:{}", "0".repeat(40)));
                std::fs::write(&payload, json.to_string()).unwrap();
            }),
        ),
    ];
    for (reason, setup) in cases {
        let p = Project::git();
        setup(&p, &worktree_subject(p.path()));
        let stop = p.stop_s1(&["--require-marker", "tests"]);
        assert!(stop.blocked(), "{reason}");
        assert_starts_with!(
            stop.reason(),
            &format!("stop-gate: marker `tests` {reason}"),
            "{reason}"
        );
    }
}

#[test]
fn a_touched_gate_file_alone_never_passes() {
    let p = Project::git();
    let key = worktree_subject(p.path()).replace(':', "-");
    let dir = p.vigil().join("markers/tests");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{key}.ok")), "").unwrap();
    assert!(p.stop_s1(&["--require-marker", "tests"]).blocked());
}

#[test]
fn every_required_marker_must_pass() {
    let p = Project::git();
    passed_here(&p, None);
    let stop = p.stop_s1(&["--require-marker", "tests", "--require-marker", "review"]);
    assert_starts_with!(stop.reason(), "stop-gate: marker `review` missing");
}

#[test]
fn required_marker_outside_a_git_repository_blocks() {
    let p = Project::new();
    let stop = p.stop_s1(&["--require-marker", "tests"]);
    stop.assert_blocked_saying("git repository");
}

#[test]
fn marker_check_leaves_the_users_index_and_head_alone() {
    let p = Project::git();
    p.write("new.txt", "untracked\n");
    p.write("lib.rs", "fn main() { 1 }\n");
    let index = std::fs::read(p.path().join(".git/index")).unwrap();
    let head = git(p.path(), &["rev-parse", "HEAD"]);
    p.stop_s1(&["--require-marker", "tests"]);
    assert_eq!(std::fs::read(p.path().join(".git/index")).unwrap(), index);
    assert_eq!(git(p.path(), &["rev-parse", "HEAD"]), head);
    let status = git(
        p.path(),
        &["status", "--porcelain", "--", ".", ":(exclude).vigil"],
    );
    assert_eq!(
        status, "M lib.rs\n?? new.txt",
        "the working tree is as the user left it"
    );
}
