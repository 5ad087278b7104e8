//! SPEC §9, trusted keys: signed markers (issue 9): an Ed25519 key the agent never sees signs,
//! a public key that is safe to commit verifies; with a key configured, anything unsigned or
//! altered is `bad signature`.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{Value, json};

use crate::support::*;

/// A key pair in `keys/NAME/` beside the project: (secret, public).
fn keygen(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    keygen_into(dir, &dir.join("keys").join(name))
}

/// A project (a file subject, so editing the worktree cannot interfere) whose `command` ran
/// through `marker-writer run`, signed: the project and what marker-writer said.
fn run_signed(secret: &Path, command: &str) -> (Project, Output) {
    let dir = Project::git();
    dir.write("artifact", "build output\n");
    let out = marker_writer_in(
        dir.path(),
        &[
            "run",
            "--check",
            "tests",
            "--subject",
            "file:artifact",
            "--sign-key",
            secret.to_str().unwrap(),
            "--",
            command,
        ],
    );
    (dir, out)
}

/// A project with a signed `passed` marker.
fn signed(secret: &Path) -> Project {
    let (dir, out) = run_signed(secret, "true");
    assert_success(&out);
    dir
}

/// A project with an unsigned `passed` marker for `file:artifact`, as anyone who can write
/// `.vigil/` can make.
fn unsigned() -> Project {
    let dir = Project::git();
    dir.write("artifact", "x\n");
    ok(marker_writer_in(
        dir.path(),
        &artifact_marker("passed", &[]),
    ));
    dir
}

fn verify_with(dir: &Path, public: &Path) -> Output {
    marker_writer_in(
        dir,
        &[
            "verify",
            "--check",
            "tests",
            "--subject",
            "file:artifact",
            "--verify-key",
            public.to_str().unwrap(),
        ],
    )
}

fn payload_path(dir: &Path) -> PathBuf {
    let markers = markers_of(dir, "tests");
    std::fs::read_dir(&markers)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "json"))
        .unwrap()
}

/// One change an agent could make to a payload.
type Tamper = Box<dyn Fn(&mut Value)>;

fn bad_signature(out: &Output) -> String {
    assert_exit(out, 1);
    let said = assert_one_line_error(out, "marker-writer");
    assert!(said.contains("bad signature"), "{said}");
    said
}

#[test]
fn a_signed_marker_round_trips_and_validates() {
    let keys = tempfile::tempdir().unwrap();
    let (secret, public) = keygen(keys.path(), "ci");
    let dir = signed(&secret);
    let payload: Value =
        serde_json::from_slice(&std::fs::read(payload_path(dir.path())).unwrap()).unwrap();
    assert_valid("marker.schema.json", &payload);
    assert_eq!(payload["signature"]["alg"], "ed25519");
    ok(verify_with(dir.path(), &public));
    // Without a key configured, behaviour is as before: the signed marker verifies too.
    ok(marker_writer_in(
        dir.path(),
        &["verify", "--check", "tests", "--subject", "file:artifact"],
    ));
}

#[test]
fn every_tampering_with_a_signed_field_is_a_bad_signature() {
    let keys = tempfile::tempdir().unwrap();
    let (secret, public) = keygen(keys.path(), "ci");
    let changes: Vec<(&str, Tamper)> = vec![
        ("status", Box::new(|p| p["status"] = json!("failed"))),
        (
            "subject",
            Box::new(|p| p["subject"] = json!(format!("sha256:{}", "0".repeat(64)))),
        ),
        ("check", Box::new(|p| p["check"] = json!("lint"))),
        (
            "created_at",
            Box::new(|p| p["created_at"] = json!("2026-11-30T00:00:00Z")),
        ),
        ("note", Box::new(|p| p["note"] = json!("looks fine"))),
        (
            "run.exit_code",
            Box::new(|p| p["run"]["exit_code"] = json!(1)),
        ),
        (
            "run.command",
            Box::new(|p| p["run"]["command"] = json!("cargo test")),
        ),
        (
            "run.output_sha256",
            Box::new(|p| p["run"]["output_sha256"] = json!("0".repeat(64))),
        ),
        ("writer", Box::new(|p| p["writer"]["user"] = json!("ci"))),
        (
            "unsigned",
            Box::new(|p| {
                p.as_object_mut().unwrap().remove("signature");
            }),
        ),
    ];
    for (name, change) in changes {
        let dir = signed(&secret);
        let path = payload_path(dir.path());
        let mut payload: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        change(&mut payload);
        std::fs::write(&path, serde_json::to_vec(&payload).unwrap()).unwrap();
        let said = bad_signature(&verify_with(dir.path(), &public));
        assert!(!said.is_empty(), "{name}");
    }
}

#[test]
fn a_marker_signed_by_another_key_or_not_at_all_is_a_bad_signature() {
    let keys = tempfile::tempdir().unwrap();
    let (secret, _) = keygen(keys.path(), "agent");
    let (_, trusted) = keygen(keys.path(), "ci");
    let dir = signed(&secret);
    bad_signature(&verify_with(dir.path(), &trusted));
    // An unsigned marker, as anyone who can write .vigil/ can make.
    let plain = unsigned();
    bad_signature(&verify_with(plain.path(), &trusted));
}

#[test]
fn the_secret_key_is_0600_and_keygen_never_overwrites_it() {
    let keys = tempfile::tempdir().unwrap();
    let (secret, public) = keygen(keys.path(), "ci");
    assert_eq!(
        std::fs::metadata(&secret).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let before = std::fs::read(&secret).unwrap();
    let again = marker_writer_in(
        keys.path(),
        &[
            "keygen",
            "--out",
            secret.parent().unwrap().to_str().unwrap(),
        ],
    );
    assert_exit(&again, 2);
    let said = assert_one_line_error(&again, "marker-writer");
    assert!(said.contains("never overwrites"), "{said}");
    assert_eq!(std::fs::read(&secret).unwrap(), before);
    assert!(public.is_file());
}

#[test]
fn several_trusted_keys_one_matching_passes_and_stop_gate_honours_them() {
    let keys = tempfile::tempdir().unwrap();
    let (old_secret, old_public) = keygen(keys.path(), "old");
    let (_, new_public) = keygen(keys.path(), "new");
    let dir = Project::git();
    trust(dir.path(), &new_public, &[]);
    trust(dir.path(), &old_public, &[]);
    // The worktree subject, as the gate requires: CI signs for this tree with the old key.
    ok(marker_writer_in(
        dir.path(),
        &[
            "run",
            "--check",
            "tests",
            "--sign-key",
            old_secret.to_str().unwrap(),
            "--",
            "true",
        ],
    ));
    ok(marker_writer_in(
        dir.path(),
        &["verify", "--check", "tests"],
    ));
    let payload = json!({"session_id": "s1", "hook_event_name": "Stop", "cwd": dir.path(), "last_assistant_message": "Done."});
    let allowed = stop_gate()
        .args(["--require-marker", "tests"])
        .current_dir(dir.path())
        .write_stdin(payload.to_string())
        .output()
        .unwrap();
    assert_silent(&allowed);
    // An unsigned marker for the same tree, written over it: the gate now denies.
    ok(marker_writer_in(
        dir.path(),
        &["write", "--check", "tests", "--status", "passed"],
    ));
    let denied = stop_gate()
        .args(["--require-marker", "tests"])
        .current_dir(dir.path())
        .write_stdin(payload.to_string())
        .output()
        .unwrap();
    stop_of(&denied).assert_blocked_saying("bad signature");
}

#[test]
fn a_failed_run_edited_to_passed_is_a_bad_signature() {
    let keys = tempfile::tempdir().unwrap();
    let (secret, public) = keygen(keys.path(), "ci");
    let (dir, out) = run_signed(&secret, "false");
    assert_eq!(out.status.code(), Some(1));
    let path = payload_path(dir.path());
    let mut payload: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(payload["status"], "failed");
    payload["status"] = json!("passed");
    payload["run"]["exit_code"] = json!(0);
    std::fs::write(&path, serde_json::to_vec(&payload).unwrap()).unwrap();
    bad_signature(&verify_with(dir.path(), &public));
}

/// `marker-writer trust KEY [flags]` for the project in `dir`: where the key went.
fn trust(dir: &Path, public: &Path, flags: &[&str]) -> PathBuf {
    let mut args = vec!["trust", public.to_str().unwrap()];
    args.extend(flags);
    let out = ok(marker_writer_in(dir, &args));
    let said = stdout_of(&out);
    let path = said
        .rsplit_once('(')
        .and_then(|(_, rest)| rest.trim().strip_suffix(')'))
        .unwrap_or_else(|| panic!("no path in {said:?}"));
    PathBuf::from(path)
}

#[test]
fn a_pinned_verify_key_ignores_a_key_the_agent_planted_in_trusted_keys() {
    let keys = tempfile::tempdir().unwrap();
    let (agent_secret, agent_public) = keygen(keys.path(), "agent");
    let (_, ci_public) = keygen(keys.path(), "ci");
    let dir = signed(&agent_secret);
    let trusted = dir.path().join(".vigil/trusted-keys");
    std::fs::create_dir_all(&trusted).unwrap();
    std::fs::copy(&agent_public, trusted.join("mine.pub")).unwrap();
    bad_signature(&verify_with(dir.path(), &ci_public));
}

/// The attack: the agent makes a key pair, signs a `passed` marker of its own, and puts its
/// public key where keys used to be trusted. Keys inside the project vouch for nothing: with a
/// key trusted in the protected state the marker is a bad signature, without one every marker
/// is, and both name `marker-writer trust` for the human who did put a key there.
#[test]
fn a_key_planted_in_the_project_vouches_for_nothing() {
    let keys = tempfile::tempdir().unwrap();
    let (agent_secret, agent_public) = keygen(keys.path(), "agent");
    let dir = Project::git();
    let planted = dir.path().join(".vigil/trusted-keys");
    std::fs::create_dir_all(&planted).unwrap();
    std::fs::copy(&agent_public, planted.join("ci.pub")).unwrap();
    let sign = agent_secret.to_str().unwrap();
    ok(marker_writer_in(
        dir.path(),
        &["run", "--check", "tests", "--sign-key", sign, "--", "true"],
    ));
    let verify = || marker_writer_in(dir.path(), &["verify", "--check", "tests"]);
    let line = bad_signature(&verify());
    assert_contains!(line, "marker-writer trust");
    assert_contains!(line, "ci.pub");
    let payload = json!({"session_id": "s1", "hook_event_name": "Stop", "cwd": dir.path(), "last_assistant_message": "Done."});
    let gate = || {
        stop_gate()
            .args(["--require-marker", "tests"])
            .current_dir(dir.path())
            .write_stdin(payload.to_string())
            .output()
            .unwrap()
    };
    let decision: Value = serde_json::from_slice(&gate().stdout).unwrap();
    assert_eq!(decision["decision"], "block", "{decision}");
    // With CI's key trusted where the agent cannot write, the agent's signature still fails.
    let (_, ci_public) = keygen(keys.path(), "ci");
    trust(dir.path(), &ci_public, &[]);
    let line = bad_signature(&verify());
    assert_contains!(line, "not a trusted key");
    assert_contains!(line, "marker-writer trust");
    let decision: Value = serde_json::from_slice(&gate().stdout).unwrap();
    assert_eq!(decision["decision"], "block", "{decision}");
    // A human trusting the planted key on purpose makes it count.
    trust(dir.path(), &planted.join("ci.pub"), &[]);
    ok(verify());
}

/// `--global` trusts a key for every project; without it, a key counts for one project only.
#[test]
fn a_key_trusted_globally_counts_in_every_project_and_otherwise_in_one() {
    let keys = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let (secret, public) = keygen(keys.path(), "ci");
    let (_, other) = keygen(keys.path(), "other");
    // A state home of its own: a key trusted --global there must not reach other tests.
    let in_home = |dir: &Path, args: &[&str]| {
        marker_writer()
            .args(args)
            .current_dir(dir)
            .env("VIGIL_STATE_HOME", home.path())
            .env_remove("VIGIL_VERIFY_KEY")
            .env_remove("VIGIL_SIGN_KEY")
            .output()
            .unwrap()
    };
    let signed_in_home = || {
        let dir = Project::git();
        dir.write("artifact", "build output\n");
        ok(in_home(
            dir.path(),
            &artifact_marker("passed", &["--sign-key", secret.to_str().unwrap()]),
        ));
        dir
    };
    let first = signed_in_home();
    let second = signed_in_home();
    let verify = |dir: &Path| {
        in_home(
            dir,
            &["verify", "--check", "tests", "--subject", "file:artifact"],
        )
    };
    // Another key trusted for the first project only: signatures are now required there.
    let trusted = in_home(first.path(), &["trust", other.to_str().unwrap()]);
    assert!(trusted.status.success());
    bad_signature(&verify(first.path()));
    assert!(
        verify(second.path()).status.success(),
        "nothing is trusted for the second"
    );
    let global = in_home(
        first.path(),
        &["trust", "--global", public.to_str().unwrap()],
    );
    assert!(global.status.success());
    ok(verify(first.path()));
    ok(verify(second.path()));
    assert_eq!(
        home.path().join("trusted-keys").read_dir().unwrap().count(),
        1
    );
}

#[test]
fn trusted_keys_that_cannot_be_read_deny_instead_of_turning_signing_off() {
    let keys = tempfile::tempdir().unwrap();
    let (_, ci_public) = keygen(keys.path(), "ci");
    let dir = unsigned();
    let verify = || {
        marker_writer_in(
            dir.path(),
            &["verify", "--check", "tests", "--subject", "file:artifact"],
        )
    };
    assert!(verify().status.success(), "no key is trusted yet");
    let trusted = trust(dir.path(), &ci_public, &[]);
    bad_signature(&verify());
    // A damaged key, and a file where the directory should be: errors, never "no keys".
    std::fs::write(&trusted, "vigil-ed25519-public nothex\n").unwrap();
    assert_eq!(verify().status.code(), Some(2));
    let store = trusted.parent().unwrap();
    std::fs::remove_dir_all(store).unwrap();
    std::fs::write(store, "not a directory").unwrap();
    assert_eq!(verify().status.code(), Some(2));
    std::fs::remove_file(store).unwrap();
    ok(verify());
}

#[test]
fn a_respelled_signature_is_a_bad_signature() {
    let keys = tempfile::tempdir().unwrap();
    let (secret, public) = keygen(keys.path(), "ci");
    let dir = signed(&secret);
    let path = payload_path(dir.path());
    let mut payload: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let sig = payload["signature"]["sig"].as_str().unwrap().to_uppercase();
    payload["signature"]["sig"] = json!(format!(" {sig}\n"));
    std::fs::write(&path, serde_json::to_vec(&payload).unwrap()).unwrap();
    bad_signature(&verify_with(dir.path(), &public));
}

#[test]
fn a_sign_key_that_cannot_be_read_stops_the_writer_before_it_runs_anything() {
    let dir = Project::git();
    let out = marker_writer_in(
        dir.path(),
        &words("run --check tests --sign-key /nonexistent/key -- touch ran"),
    );
    assert_ne!(out.status.code(), Some(0));
    assert_one_line_error(&out, "marker-writer");
    assert!(!dir.path().join("ran").exists(), "the command never ran");
    assert!(!dir.path().join(".vigil/markers").exists());
    let markers = markers_of(dir.path(), "tests");
    assert!(!markers.exists() || std::fs::read_dir(&markers).unwrap().next().is_none());
}

/// The command under test is the project's code, which the agent wrote: it never finds where
/// the key is in its environment.
#[test]
fn the_command_under_test_is_not_told_where_the_sign_key_is() {
    let keys = tempfile::tempdir().unwrap();
    let (secret, public) = keygen(keys.path(), "ci");
    let dir = Project::git();
    dir.write("artifact", "build output\n");
    let out = marker_writer()
        .args([
            "run",
            "--check",
            "tests",
            "--subject",
            "file:artifact",
            "--",
            "sh",
            "-c",
            "echo key=${VIGIL_SIGN_KEY-unset}",
        ])
        .current_dir(dir.path())
        .env("VIGIL_SIGN_KEY", &secret)
        .env_remove("VIGIL_VERIFY_KEY")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(stdout_of(&out), "key=unset\n");
    assert!(
        verify_with(dir.path(), &public).status.success(),
        "and it signed"
    );
}

/// Canonical JSON is what a signature and Codex's trust hash are taken over: signed markers
/// already published, and trust entries already in users' Codex config, verify only while the
/// same value gives the same bytes. Pinned here (issue 42) before any change to how the bytes
/// are made: sorted keys at every level (by code point, so U+FFFF before an emoji), no
/// whitespace, numbers as written, strings escaped as serde_json escapes them.
#[test]
fn canonical_json_bytes_are_pinned_for_signatures_and_trust_hashes() {
    let dir = repo_path("tests/fixtures/canonical");
    let value: Value =
        serde_json::from_slice(&std::fs::read(dir.join("value.json")).unwrap()).unwrap();
    let made = vigil::sys::digest::canonical_json(&value);
    let pinned = dir.join("canonical.json");
    if std::env::var_os("VIGIL_BLESS").is_some() {
        std::fs::write(&pinned, &made).unwrap();
    }
    assert_eq!(
        made,
        std::fs::read_to_string(&pinned).unwrap(),
        "canonical JSON's bytes changed: every published signature and trust hash breaks"
    );
    assert_eq!(
        vigil::sys::digest::sha256_hex(made.as_bytes()),
        "e9e6a8ff665bd1cef4f4ed9e93ed6b54bd0579c23533b793a5f664a62255b62d"
    );
}
