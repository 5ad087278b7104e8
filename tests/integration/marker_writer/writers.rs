//! SPEC §5, the protected writer in its places: stop-gate trusts what marker-writer writes (and
//! only for the command it records), and the pre-push template vouches only for a passing push.

use super::{only_payload, verify};
use crate::support::*;

#[test]
fn stop_gate_trusts_what_marker_writer_writes() {
    let repo = Project::git();
    // The writer runs the command the gate names, in a snapshot (a marker of another command,
    // or of one run in place, does not count:
    // stop_gate::a_required_marker_counts_only_when_written_by_its_command).
    ok(marker_writer_in(
        repo.path(),
        &["run", "--check", "tests", "--snapshot", "--", "true"],
    ));
    let required = ["--require-marker", "tests=true"];
    let gate = repo.stop(&required, "s1", Some("done"));
    assert!(gate.silent_allow(), "allowed: {:?}", gate.json);
    repo.write("lib.rs", "fn main() { after_the_run() }\n");
    let gate = repo.stop(&required, "s1", Some("done"));
    assert!(gate.blocked());
    assert_contains!(
        gate.reason(),
        "marker-writer run --check tests --snapshot -- true"
    );
}

#[test]
fn pre_push_template_blocks_a_failing_push_and_vouches_for_a_passing_one() {
    let repo = Project::git();
    let remote = tempfile::tempdir().unwrap();
    git(remote.path(), &["init", "-q", "--bare"]);
    git(
        repo.path(),
        &["remote", "add", "origin", remote.path().to_str().unwrap()],
    );
    repo.write(".gitignore", ".vigil/\n");
    git(repo.path(), &["add", ".gitignore"]);
    git(repo.path(), &["commit", "-qm", "ignore state"]);
    // The template, with its test command swapped for one this test controls.
    let hook = std::fs::read_to_string(repo_path("templates/ci/pre-push")).unwrap();
    assert!(hook.contains("-- cargo test --locked"));
    let hook = hook.replace("-- cargo test --locked", "-- test -f tests-pass");
    let path = repo.path().join(".git/hooks/pre-push");
    std::fs::write(&path, hook).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let bin = bin_dir();
    let push = || {
        isolated(&mut std::process::Command::new("git"))
            .args(["push", "-q", "origin", "main"])
            .current_dir(repo.path())
            .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
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
    repo.write("tests-pass", "");
    git(repo.path(), &["add", "tests-pass"]);
    git(repo.path(), &["commit", "-qm", "the tests pass"]);
    ok(push());
    assert_eq!(verify(repo.path(), "tests").status.code(), Some(0));
}
