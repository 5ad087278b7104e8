//! SPEC §5, `run|write --publish` and `sync`: a signed note published by CI lets the laptop's
//! Stop through for exactly that content; notes of several checks and jobs all arrive; `show
//! --all` lists both places; the payload records where CI ran it.

use std::time::Duration;

use serde_json::{Value, json};

use super::{
    World, ci_publishes, laptop_stop, push, remote_payloads, shown_of_tests, subject_of, sync,
    unsigned_payload,
};
use crate::support::*;

#[test]
fn cis_signed_marker_lets_the_laptops_stop_through_after_sync_and_not_after_a_change() {
    let world = World::new();
    let (_, laptop) = world.ci_vouched(true);
    assert_eq!(world.remote_refs(), vec!["refs/notes/vigil/tests"]);

    // Not synced yet: nothing on the laptop vouches.
    let before = laptop_stop(&laptop, "tests", Some(&world.public())).unwrap();
    assert!(before.contains("marker `tests` missing"), "{before}");
    let synced = sync(&laptop);
    assert_stdout_contains(&synced, "synced with origin: tests (1 content)");
    world.stop_passes(&laptop);
    let verified = ok(marker_writer_in(
        &laptop,
        &[
            "verify",
            "--check",
            "tests",
            "--verify-key",
            world.public().to_str().unwrap(),
        ],
    ));
    assert_stdout_contains(&verified, "(published as a note)");

    // Any change to the content, an untracked file included: subject mismatch.
    std::fs::write(laptop.join("notes.txt"), "a scratch file\n").unwrap();
    let after = laptop_stop(&laptop, "tests", Some(&world.public())).unwrap();
    assert!(after.contains("subject mismatch"), "{after}");
    std::fs::remove_file(laptop.join("notes.txt")).unwrap();
    std::fs::write(laptop.join("lib.rs"), "pub fn answer() -> u32 { 41 }\n").unwrap();
    let edited = laptop_stop(&laptop, "tests", Some(&world.public())).unwrap();
    assert!(edited.contains("subject mismatch"), "{edited}");
}

#[test]
fn notes_in_the_projects_own_git_are_never_read_only_what_a_sync_fetched() {
    // No key anywhere, where an unsigned marker counts: a note the agent writes into the
    // project's own .git still does not, since vigil reads notes only through its own
    // repository, filled by `sync` from a remote.
    let (_world, laptop) = World::with_laptop();
    let subject = subject_of(&laptop);
    let object = subject.strip_prefix("git-tree:").unwrap().to_string();
    git(
        &laptop,
        &[
            "notes",
            "--ref",
            "vigil/tests",
            "add",
            "-m",
            &unsigned_payload("tests", &subject),
            &object,
        ],
    );
    let reason = laptop_stop(&laptop, "tests", None).unwrap();
    assert!(reason.contains("marker `tests` missing"), "{reason}");
    // Pushed and synced, it still does not count: anyone with push access wrote it, so a note
    // needs a trusted key's signature even where an unsigned local marker would do.
    git(&laptop, &["push", "-q", "origin", "refs/notes/vigil/tests"]);
    sync(&laptop);
    let reason = laptop_stop(&laptop, "tests", None).unwrap();
    assert_contains!(reason, "bad signature");
    assert_contains!(reason, "none is trusted");
}

#[test]
fn two_checks_published_at_once_by_two_clones_both_arrive() {
    let world = World::new();
    let [first, second] = ["ci-tests", "ci-lint"].map(|name| world.clone(name));
    let laptop = world.clone("laptop");
    let secret = world.secret();
    let jobs: Vec<_> = [(first, "tests"), (second, "lint")]
        .into_iter()
        .map(|(clone, check)| {
            let secret = secret.clone();
            std::thread::spawn(move || ci_publishes(&clone, check, Some(&secret)))
        })
        .collect();
    for job in jobs {
        job.join().unwrap();
    }
    let mut refs = world.remote_refs();
    refs.sort();
    assert_eq!(
        refs,
        vec!["refs/notes/vigil/lint", "refs/notes/vigil/tests"]
    );
    sync(&laptop);
    for check in ["tests", "lint"] {
        assert_eq!(
            laptop_stop(&laptop, check, Some(&world.public())),
            None,
            "{check}"
        );
    }
}

#[test]
fn two_jobs_publishing_the_same_check_merge_and_neither_payload_is_lost() {
    let world = World::new();
    let [first, second] = ["ci-1", "ci-2"].map(|name| world.clone(name));
    // Both publish for the same content before either pushes: the second push loses the race,
    // merges the first's note into its own, and pushes again.
    ok(marker_writer_in(
        &first,
        &["run", "--publish", "--check", "tests", "--", "true"],
    ));
    ok(marker_writer_in(
        &second,
        &["run", "--publish", "--check", "tests", "--", "true"],
    ));
    ok(push(&first));
    ok(push(&second));
    let subject = subject_of(&first);
    let object = subject.strip_prefix("git-tree:").unwrap();
    let note = git(
        &world.remote,
        &["notes", "--ref", "vigil/tests", "show", object],
    );
    let payloads: Vec<Value> = note
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(payloads.len(), 2, "{note}");
    assert_ne!(
        payloads[0]["created_at"], payloads[1]["created_at"],
        "{note}"
    );
}

#[test]
fn publish_needs_a_worktree_subject() {
    let project = Project::git();
    project.write("artifact", "x");
    let out = marker_writer_in(
        project.path(),
        &words("write --check tests --status passed --subject file:artifact --publish"),
    );
    usage_error(&out, "marker-writer");
    let markers = markers_of(project.path(), "tests");
    assert!(
        !markers.exists() || std::fs::read_dir(&markers).unwrap().next().is_none(),
        "nothing written"
    );
}

#[test]
fn a_payload_records_where_ci_ran_it_as_schema_v2_and_v1_stays_readable() {
    let project = Project::git();
    ok(marker_writer()
        .args(["write", "--check", "tests", "--status", "passed"])
        .current_dir(project.path())
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_SERVER_URL", "https://github.com")
        .env("GITHUB_REPOSITORY", "acme/app")
        .env("GITHUB_RUN_ID", "42")
        .env("GITHUB_RUN_ATTEMPT", "1")
        .env("RUNNER_NAME", "runner-7")
        .env(
            "GITHUB_WORKFLOW_REF",
            "acme/app/.github/workflows/vigil.yml@refs/heads/main",
        )
        .env(
            "GITHUB_WORKFLOW_SHA",
            "0123456789abcdef0123456789abcdef01234567",
        )
        .env_remove("VIGIL_SIGN_KEY")
        .output()
        .unwrap());
    let shown = ok(marker_writer_in(
        project.path(),
        &["show", "--check", "tests"],
    ));
    let payload: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(payload["schema"], "vigil.marker/v2");
    assert_eq!(
        payload["origin"],
        json!({"run_url": "https://github.com/acme/app/actions/runs/42/attempts/1",
            "runner": "runner-7",
            "workflow": "acme/app/.github/workflows/vigil.yml@refs/heads/main",
            "workflow_sha": "0123456789abcdef0123456789abcdef01234567"})
    );
    assert_valid("marker.schema.json", &payload);

    // The same payload as v1 with no origin still verifies; v1 with an origin is malformed.
    let key = format!(
        "{}.json",
        payload["subject"].as_str().unwrap().replace(':', "-")
    );
    let path = markers_of(project.path(), "tests").join(key);
    let mut v1 = payload.clone();
    v1["schema"] = json!("vigil.marker/v1");
    v1.as_object_mut().unwrap().remove("origin");
    assert_valid("marker.schema.json", &v1);
    std::fs::write(&path, v1.to_string()).unwrap();
    ok(marker_writer_in(
        project.path(),
        &["verify", "--check", "tests"],
    ));
    let mut bad = v1.clone();
    bad["origin"] = json!({"runner": "x"});
    std::fs::write(&path, bad.to_string()).unwrap();
    let denied = marker_writer_in(project.path(), &["verify", "--check", "tests"]);
    assert_eq!(denied.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&denied.stderr).contains("malformed"));
}

#[test]
fn show_all_lists_both_places_newest_first_and_names_the_paths_that_differ() {
    let world = World::new();
    let (_, laptop) = world.ci_vouched(true);
    sync(&laptop);
    // A local unsigned marker for the same content, written later.
    std::thread::sleep(Duration::from_millis(20));
    ok(marker_writer_in(
        &laptop,
        &["write", "--check", "tests", "--status", "failed"],
    ));
    let public = world.public();
    let text = shown_of_tests(&laptop, &["--verify-key", public.to_str().unwrap()]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert_contains!(lines[1], "local", "newest first, with its reason: {text}");
    assert_contains!(
        lines[1],
        "unsigned",
        "newest first, with its reason: {text}"
    );
    assert_contains!(
        lines[1],
        "denied: bad signature",
        "newest first, with its reason: {text}"
    );
    assert!(
        lines[2].contains("notes")
            && lines[2].contains("signed by")
            && lines[2].ends_with("passes"),
        "{text}"
    );

    // An untracked file on the laptop: no marker is for this content, and show says why.
    std::fs::write(laptop.join("scratch.txt"), "notes to self\n").unwrap();
    let text = shown_of_tests(&laptop, &[]);
    assert_contains!(text, "where 1 path differs: scratch.txt (only here)");
}

/// Two pushes interleaved for real: while the remote is receiving the first clone's push (in
/// its pre-receive hook), the second clone's sync pushes the same check. The first push then
/// finds the ref moved (`[remote rejected] … failed to update ref`), and must fetch, merge and
/// push again rather than fail or drop the other's payload.
#[test]
fn a_push_that_loses_a_race_while_the_remote_takes_another_merges_and_pushes_again() {
    let world = World::new();
    let [first, second] = ["ci-1", "ci-2"].map(|name| world.clone(name));
    for clone in [&first, &second] {
        ok(marker_writer_in(
            clone,
            &["run", "--publish", "--check", "tests", "--", "true"],
        ));
    }
    let once = world.dir.path().join("raced");
    let hook = world.remote.join("hooks/pre-receive");
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh\ncat >/dev/null\n[ -e '{once}' ] && exit 0\n: >'{once}'\ncd '{second}' && env -i PATH=/usr/bin:/bin HOME=\"$HOME\" VIGIL_STATE_HOME='{state}' '{bin}' sync --push --remote '{remote}' >&2\n",
            once = once.display(),
            second = second.display(),
            state = state_home().display(),
            bin = bin_dir().join("marker-writer").display(),
            remote = world.remote.display(),
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = push(&first);
    assert!(once.exists(), "the race was run");
    assert_success(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains("pushed"));
    let payloads = remote_payloads(&world, "tests", &subject_of(&first));
    assert_eq!(payloads.len(), 2, "{payloads:?}");
}

/// Publishes at once in one clone (two checks' jobs on one runner, or a job and a hook): each
/// appends to the same note, and none may overwrite another's line.
#[test]
fn publishes_at_once_in_one_clone_keep_every_payload() {
    let world = World::new();
    let ci = world.clone("ci");
    let jobs: Vec<_> = (0..6)
        .map(|i| {
            let ci = ci.clone();
            std::thread::spawn(move || {
                let note = format!("job {i}");
                ok(marker_writer_in(
                    &ci,
                    &[
                        "write",
                        "--check",
                        "tests",
                        "--status",
                        "passed",
                        "--publish",
                        "--note",
                        &note,
                    ],
                ));
            })
        })
        .collect();
    for job in jobs {
        job.join().unwrap();
    }
    ok(push(&ci));
    let payloads = remote_payloads(&world, "tests", &subject_of(&ci));
    let mut notes: Vec<&str> = payloads
        .iter()
        .map(|p| p["note"].as_str().unwrap())
        .collect();
    notes.sort();
    assert_eq!(
        notes,
        ["job 0", "job 1", "job 2", "job 3", "job 4", "job 5"]
    );
}

/// SPEC §10: a sync that brings CI's verdict for the content checked out wakes the project's
/// commander once ("CI vouched: tests passed for git-tree:…"); only a note signed by a key
/// trusted here counts, and the same verdict synced again is no news.
#[test]
fn a_sync_that_brings_cis_signed_verdict_wakes_the_commander_once() {
    let world = World::new();
    let (_, laptop) = world.ci_vouched(true);
    let queue =
        vigil::state::protected::dir_in(state_home(), &std::fs::canonicalize(&laptop).unwrap())
            .join("wakes");
    let wakes = || -> Vec<Value> {
        let mut files: Vec<_> = std::fs::read_dir(&queue)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        files.retain(|p: &std::path::PathBuf| p.extension().is_some_and(|x| x == "json"));
        files.iter().map(|p| json_of(p)).collect()
    };
    // No key trusted here: the note vouches for nothing, and wakes nobody.
    sync(&laptop);
    assert!(wakes().is_empty(), "{:?}", wakes());
    ok(marker_writer_in(
        &laptop,
        &["trust", world.public().to_str().unwrap()],
    ));
    std::fs::remove_dir_all(
        vigil::state::protected::dir_in(state_home(), &std::fs::canonicalize(&laptop).unwrap())
            .join("notes"),
    )
    .unwrap();
    sync(&laptop);
    let found = wakes();
    assert_eq!(found.len(), 1, "{found:?}");
    assert_valid("wake.schema.json", &found[0]);
    let subject = subject_of(&laptop);
    assert_eq!(
        found[0]["line"],
        format!("CI vouched: tests passed for {subject}")
    );
    sync(&laptop);
    assert_eq!(
        wakes().len(),
        1,
        "the same verdict woke the commander twice"
    );
}

/// SPEC §10: what belongs to the repository is shared by its worktrees: the notes a sync
/// brought into the main checkout, and the keys trusted there, let a linked worktree's Stop
/// through for the same content, with no sync or trust of its own.
#[test]
fn a_linked_worktree_shares_the_main_checkouts_synced_notes_and_trusted_keys() {
    let world = World::new();
    let (_, laptop) = world.ci_vouched(true);
    ok(marker_writer_in(
        &laptop,
        &["trust", world.public().to_str().unwrap()],
    ));
    sync(&laptop);
    assert_eq!(laptop_stop(&laptop, "tests", None), None);
    let worktree = laptop.with_file_name("laptop-wt");
    add_worktree(&laptop, "wt", &worktree);
    assert_eq!(subject_of(&worktree), subject_of(&laptop));
    assert_eq!(laptop_stop(&worktree, "tests", None), None);
}
