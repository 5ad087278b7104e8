//! Markers that travel (issue 19): CI publishes its signed verdict as a git note keyed by the
//! tree it tested, `marker-writer sync` brings it to a laptop, and the laptop's Stop accepts it
//! for exactly that content. A bare remote, a "CI" clone and a "laptop" clone, real git.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::*;

/// A bare remote and clones of it, each a project of its own (its own protected state).
struct World {
    dir: tempfile::TempDir,
    remote: PathBuf,
}

impl World {
    /// A remote whose `main` holds `lib.rs`, and a key pair beside it.
    fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        let remote = dir.path().join("remote.git");
        git(
            dir.path(),
            &[
                "init",
                "-q",
                "--bare",
                "-b",
                "main",
                remote.to_str().unwrap(),
            ],
        );
        let seed = dir.path().join("seed");
        git(
            dir.path(),
            &["init", "-q", "-b", "main", seed.to_str().unwrap()],
        );
        std::fs::write(seed.join("lib.rs"), "pub fn answer() -> u32 { 42 }\n").unwrap();
        git(&seed, &["add", "-A"]);
        git(&seed, &["commit", "-qm", "start"]);
        git(&seed, &["push", "-q", remote.to_str().unwrap(), "main"]);
        let out = marker_writer_in(
            dir.path(),
            &["keygen", "--out", dir.path().join("keys").to_str().unwrap()],
        );
        assert!(out.status.success(), "{}", said(&out));
        let world = World { dir, remote };
        assert!(world_has_main(&world), "clones check out main");
        world
    }

    fn secret(&self) -> PathBuf {
        self.dir.path().join("keys/vigil-marker.key")
    }

    fn public(&self) -> PathBuf {
        self.dir.path().join("keys/vigil-marker.pub")
    }

    /// A fresh clone of `main` named `name`.
    fn clone(&self, name: &str) -> PathBuf {
        let to = self.dir.path().join(name);
        assert!(!to.exists(), "{name} is cloned once");
        git(
            self.dir.path(),
            &[
                "clone",
                "-q",
                self.remote.to_str().unwrap(),
                to.to_str().unwrap(),
            ],
        );
        to
    }

    /// The notes refs the remote holds.
    fn remote_refs(&self) -> Vec<String> {
        let listed = git(
            &self.remote,
            &["for-each-ref", "--format=%(refname)", "refs/notes/"],
        );
        listed.lines().map(str::to_string).collect()
    }
}

fn world_has_main(world: &World) -> bool {
    let probe = world.clone("probe");
    let has = probe.join("lib.rs").is_file();
    std::fs::remove_dir_all(probe).unwrap();
    has
}

/// CI's job: the check run through marker-writer, signed with `key`, published and pushed.
fn ci_publishes(clone: &Path, check: &str, key: Option<&Path>) {
    let mut args = vec!["run", "--publish", "--check", check];
    if let Some(key) = key {
        args.extend(["--sign-key", key.to_str().unwrap()]);
    }
    args.extend(["--", "true"]);
    ok(marker_writer_in(clone, &args));
    ok(push(clone));
}

/// `sync --push` to the clone's origin, named by its path (a push to a path read from the
/// project's config is refused: the agent could name a repository whose hooks run).
fn push(clone: &Path) -> Output {
    let url = git(clone, &["config", "remote.origin.url"]);
    marker_writer_in(clone, &["sync", "--push", "--remote", &url])
}

/// The laptop's Stop with `--require-marker CHECK --verify-key KEY`: `None` when it allows, the
/// block's reason when it blocks.
fn laptop_stop(laptop: &Path, check: &str, key: Option<&Path>) -> Option<String> {
    let mut cmd = stop_gate();
    cmd.args(["--require-marker", check]);
    if let Some(key) = key {
        cmd.arg("--verify-key").arg(key);
    }
    let payload = json!({"session_id": "s1", "hook_event_name": "Stop", "cwd": laptop, "last_assistant_message": "Done."});
    let out = cmd
        .current_dir(laptop)
        .env_remove("VIGIL_VERIFY_KEY")
        .write_stdin(payload.to_string())
        .output()
        .unwrap();
    if out.stdout.is_empty() {
        assert!(out.status.success(), "{}", said(&out));
        return None;
    }
    let decision: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(decision["decision"], "block", "{decision}");
    Some(decision["reason"].as_str().unwrap().to_string())
}

#[test]
fn cis_signed_marker_lets_the_laptops_stop_through_after_sync_and_not_after_a_change() {
    let world = World::new();
    let ci = world.clone("ci");
    let laptop = world.clone("laptop");
    ci_publishes(&ci, "tests", Some(&world.secret()));
    assert_eq!(world.remote_refs(), vec!["refs/notes/vigil/tests"]);

    // Not synced yet: nothing on the laptop vouches.
    let before = laptop_stop(&laptop, "tests", Some(&world.public())).unwrap();
    assert!(before.contains("marker `tests` missing"), "{before}");
    let synced = ok(marker_writer_in(&laptop, &["sync"]));
    assert!(
        String::from_utf8_lossy(&synced.stdout).contains("synced with origin: tests (1 content)"),
        "{}",
        said(&synced)
    );
    assert_eq!(laptop_stop(&laptop, "tests", Some(&world.public())), None);
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
    assert!(
        String::from_utf8_lossy(&verified.stdout).contains("(published as a note)"),
        "{}",
        said(&verified)
    );

    // Any change to the content, an untracked file included: subject mismatch.
    std::fs::write(laptop.join("notes.txt"), "a scratch file\n").unwrap();
    let after = laptop_stop(&laptop, "tests", Some(&world.public())).unwrap();
    assert!(after.contains("subject mismatch"), "{after}");
    std::fs::remove_file(laptop.join("notes.txt")).unwrap();
    std::fs::write(laptop.join("lib.rs"), "pub fn answer() -> u32 { 41 }\n").unwrap();
    let edited = laptop_stop(&laptop, "tests", Some(&world.public())).unwrap();
    assert!(edited.contains("subject mismatch"), "{edited}");
}

/// The agent on the laptop, with the user's push rights, writes its own note for the content
/// and pushes it, then lets the user's sync bring it in.
fn agent_pushes_a_note(laptop: &Path, check: &str, line: &str) {
    let tree = subject_of(laptop);
    let object = tree.strip_prefix("git-tree:").unwrap();
    agent_adds_note_bytes(laptop, check, object, line.as_bytes());
    agent_pushes_notes(laptop, check);
}

fn subject_of(dir: &Path) -> String {
    let out = ok(marker_writer_in(dir, &["show", "--all", "--check", "any"]));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines()
        .next()
        .and_then(|l| l.strip_prefix("any for "))
        .and_then(|l| l.strip_suffix(':'))
        .unwrap()
        .to_string()
}

fn unsigned_payload(check: &str, subject: &str) -> String {
    json!({"schema": "vigil.marker/v2", "check": check, "status": "passed", "subject": subject,
        "created_at": vigil::time::now_rfc3339(),
        "writer": {"name": "marker-writer", "version": "0.1.0", "host": "laptop", "user": "agent"}})
    .to_string()
}

#[test]
fn a_note_the_laptop_writes_without_the_key_is_a_bad_signature() {
    let world = World::new();
    let laptop = world.clone("laptop");
    let subject = subject_of(&laptop);
    agent_pushes_a_note(&laptop, "tests", &unsigned_payload("tests", &subject));
    ok(marker_writer_in(&laptop, &["sync"]));
    let reason = laptop_stop(&laptop, "tests", Some(&world.public())).unwrap();
    assert!(reason.contains("bad signature"), "{reason}");
    // A key pair the agent made itself signs nothing the pinned key accepts.
    let own = marker_writer_in(
        &laptop,
        &[
            "keygen",
            "--out",
            laptop.join("agent-keys").to_str().unwrap(),
        ],
    );
    assert!(own.status.success());
    let signed = ok(marker_writer_in(
        &laptop,
        &[
            "write",
            "--check",
            "tests",
            "--status",
            "passed",
            "--sign-key",
            laptop.join("agent-keys/vigil-marker.key").to_str().unwrap(),
        ],
    ));
    drop(signed);
    let reason = laptop_stop(&laptop, "tests", Some(&world.public())).unwrap();
    assert!(reason.contains("bad signature"), "{reason}");
}

#[test]
fn notes_in_the_projects_own_git_are_never_read_only_what_a_sync_fetched() {
    // No key anywhere, where an unsigned marker counts: a note the agent writes into the
    // project's own .git still does not, since vigil reads notes only through its own
    // repository, filled by `sync` from a remote.
    let world = World::new();
    let laptop = world.clone("laptop");
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
    ok(marker_writer_in(&laptop, &["sync"]));
    let reason = laptop_stop(&laptop, "tests", None).unwrap();
    assert!(
        reason.contains("bad signature") && reason.contains("none is trusted"),
        "{reason}"
    );
}

#[test]
fn two_checks_published_at_once_by_two_clones_both_arrive() {
    let world = World::new();
    let first = world.clone("ci-tests");
    let second = world.clone("ci-lint");
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
    ok(marker_writer_in(&laptop, &["sync"]));
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
    let first = world.clone("ci-1");
    let second = world.clone("ci-2");
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
fn a_remote_that_hangs_is_cut_off_at_the_deadline_with_one_line() {
    let project = Project::git();
    // Accepts connections and never answers.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/repo.git", listener.local_addr().unwrap());
    let held = std::thread::spawn(move || {
        let mut kept = Vec::new();
        for stream in listener.incoming().take(4).flatten() {
            kept.push(stream);
        }
        std::thread::sleep(Duration::from_secs(30));
    });
    let start = Instant::now();
    let out = marker_writer_in(
        project.path(),
        &["sync", "--remote", &url, "--timeout", "2"],
    );
    let took = start.elapsed();
    // A command that cannot do its job exits 2 (SPEC §2).
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(
        took < Duration::from_secs(6),
        "cut off at the deadline, took {took:?}"
    );
    assert_one_line_error(&out, "marker-writer");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("deadline"), "{stderr}");
    drop(held);
}

/// A note's text, made for the content it is attached to.
type NoteFor<'a> = dyn Fn(&str) -> String + 'a;

#[test]
fn hostile_notes_each_deny_with_their_reason_and_nothing_panics() {
    let huge = format!("{{\"pad\":\"{}\"}}", "x".repeat(2 << 20));
    let cases: [(&str, &NoteFor, &str); 4] = [
        ("malformed JSON", &|_| "{not json".to_string(), "malformed"),
        (
            "a payload for another check",
            &|subject| {
                let mut payload: Value =
                    serde_json::from_str(&unsigned_payload("tests", subject)).unwrap();
                payload["check"] = json!("lint");
                payload.to_string()
            },
            "malformed",
        ),
        (
            "a payload for another subject",
            &|_| unsigned_payload("tests", &format!("git-tree:{}", "ab".repeat(20))),
            "subject mismatch",
        ),
        ("a huge note", &|_| huge.clone(), "malformed"),
    ];
    for (what, line, expected) in cases {
        let world = World::new();
        let laptop = world.clone("laptop");
        let subject = subject_of(&laptop);
        agent_pushes_a_note(&laptop, "tests", &line(&subject));
        let out = marker_writer_in(&laptop, &["sync"]);
        assert!(out.status.success(), "{what}: {}", said(&out));
        let reason = laptop_stop(&laptop, "tests", None).unwrap();
        assert!(reason.contains(expected), "{what}: {reason}");
        let verify = marker_writer_in(&laptop, &["verify", "--check", "tests"]);
        assert_eq!(verify.status.code(), Some(1), "{what}: {}", said(&verify));
        assert_one_line_error(&verify, "marker-writer");
    }

    // A good note first; then the remote's ref is made to name a blob: the sync says so in a
    // line, and the local notes stay as they were.
    let world = World::new();
    let laptop = world.clone("laptop");
    let good = world.clone("ci");
    ci_publishes(&good, "tests", Some(&world.secret()));
    ok(marker_writer_in(&laptop, &["sync"]));
    assert_eq!(laptop_stop(&laptop, "tests", Some(&world.public())), None);
    let blob = git(&world.remote, &["hash-object", "-w", "--stdin"]);
    git(
        &world.remote,
        &["update-ref", "refs/notes/vigil/tests", &blob],
    );
    let out = ok(marker_writer_in(&laptop, &["sync"]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("names a blob, not a history of notes"),
        "{}",
        said(&out)
    );
    assert_eq!(
        laptop_stop(&laptop, "tests", Some(&world.public())),
        None,
        "the local notes stayed"
    );
    // A laptop that never had notes: the same ref denies as missing, and says nothing else.
    let fresh = world.clone("fresh");
    let out = ok(marker_writer_in(&fresh, &["sync"]));
    assert!(String::from_utf8_lossy(&out.stderr).contains("names a blob"));
    let reason = laptop_stop(&fresh, "tests", None).unwrap();
    assert!(reason.contains("missing"), "{reason}");
}

#[test]
fn publish_needs_a_worktree_subject() {
    let project = Project::git();
    std::fs::write(project.path().join("artifact"), "x").unwrap();
    let out = marker_writer_in(
        project.path(),
        &[
            "write",
            "--check",
            "tests",
            "--status",
            "passed",
            "--subject",
            "file:artifact",
            "--publish",
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert_one_line_error(&out, "marker-writer");
    let markers = markers_of(project.path(), "tests");
    assert!(
        !markers.exists() || std::fs::read_dir(&markers).unwrap().next().is_none(),
        "nothing written"
    );
}

#[test]
fn a_payload_records_where_ci_ran_it_as_schema_v2_and_v1_stays_readable() {
    let project = Project::git();
    let out = marker_writer()
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
        .unwrap();
    assert!(out.status.success(), "{}", said(&out));
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
    let ci = world.clone("ci");
    let laptop = world.clone("laptop");
    ci_publishes(&ci, "tests", Some(&world.secret()));
    ok(marker_writer_in(&laptop, &["sync"]));
    // A local unsigned marker for the same content, written later.
    std::thread::sleep(Duration::from_millis(20));
    ok(marker_writer_in(
        &laptop,
        &["write", "--check", "tests", "--status", "failed"],
    ));
    let out = ok(marker_writer_in(
        &laptop,
        &[
            "show",
            "--all",
            "--check",
            "tests",
            "--verify-key",
            world.public().to_str().unwrap(),
        ],
    ));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(
        lines[1].contains("local")
            && lines[1].contains("unsigned")
            && lines[1].contains("denied: bad signature"),
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
    let out = ok(marker_writer_in(
        &laptop,
        &["show", "--all", "--check", "tests"],
    ));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.contains("where 1 path differs: scratch.txt (only here)"),
        "{text}"
    );
}

#[test]
fn no_gate_touches_the_network_or_runs_git_even_with_notes_to_read() {
    let world = World::new();
    let ci = world.clone("ci");
    let laptop = world.clone("laptop");
    ci_publishes(&ci, "tests", Some(&world.secret()));
    ok(marker_writer_in(&laptop, &["sync"]));
    let payload = json!({"session_id": "s1", "hook_event_name": "Stop", "cwd": laptop, "last_assistant_message": "Done."});
    let key = world.public();
    let Some((out, calls)) = traced_with(
        "stop-gate",
        &[
            "--require-marker".as_ref(),
            "tests".as_ref(),
            "--verify-key".as_ref(),
            key.as_os_str(),
        ],
        &[],
        &laptop,
        payload.to_string().as_bytes(),
        "execve,connect",
    ) else {
        return;
    };
    assert!(
        out.status.success() && out.stdout.is_empty(),
        "{}",
        said(&out)
    );
    assert_eq!(
        calls.count("execve"),
        1,
        "only stop-gate itself is executed: {}",
        calls.text
    );
    assert_eq!(calls.count("connect"), 0, "no connection: {}", calls.text);
}

/// The laptop's session start with `--sync-notes REMOTE`: how long it took.
fn session_start(laptop: &Path, remote: &str) -> (Output, Duration) {
    let payload = json!({"session_id": "s1", "hook_event_name": "SessionStart", "source": "startup", "cwd": laptop});
    let start = Instant::now();
    let out = session_start_loader()
        .args(["--sync-notes", remote])
        .current_dir(laptop)
        .write_stdin(payload.to_string())
        .output()
        .unwrap();
    (out, start.elapsed())
}

#[test]
fn the_loader_syncs_notes_in_the_background_and_never_waits_for_the_remote() {
    let world = World::new();
    let ci = world.clone("ci");
    let laptop = world.clone("laptop");
    ci_publishes(&ci, "tests", Some(&world.secret()));
    let (out, took) = session_start(&laptop, "origin");
    assert!(out.status.success(), "{}", said(&out));
    assert!(
        took < Duration::from_secs(2),
        "the session start waited: {took:?}"
    );
    // The sync goes on after the hook: the marker arrives for the next stop.
    let deadline = Instant::now() + Duration::from_secs(20);
    while laptop_stop(&laptop, "tests", Some(&world.public())).is_some() {
        assert!(
            Instant::now() < deadline,
            "the background sync never arrived"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // A remote that hangs: the session start does not wait for it either.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/repo.git", listener.local_addr().unwrap());
    let (out, took) = session_start(&laptop, &url);
    assert!(out.status.success(), "{}", said(&out));
    assert!(
        took < Duration::from_secs(2),
        "the session start waited: {took:?}"
    );
    drop(listener);
}

#[test]
fn install_sync_notes_wires_the_loader_keeps_it_on_reinstall_and_takes_it_out() {
    let project = Project::git();
    let settings = project.path().join(".claude/settings.local.json");
    let install = |extra: &[&str]| {
        let out = settings_merge()
            .args(["install", "--settings"])
            .arg(&settings)
            .arg("--bin-dir")
            .arg(bin_dir())
            .args(extra)
            .current_dir(project.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", said(&out));
        json_of(&settings)["hooks"]["SessionStart"][0]["hooks"][0]["command"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let loader = install(&["--sync-notes", "origin"]);
    assert!(
        loader.ends_with("session-start-loader --sync-notes origin"),
        "{loader}"
    );
    assert!(
        install(&[]).ends_with("--sync-notes origin"),
        "kept by a re-install"
    );
    let check = settings_merge()
        .args(["check", "--settings"])
        .arg(&settings)
        .current_dir(project.path())
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&check.stdout);
    assert!(!report.contains("[fail]"), "{report}");
    let off = install(&["--no-sync-notes"]);
    assert!(off.ends_with("session-start-loader"), "{off}");
    for bad in ["", "--push"] {
        let out = settings_merge()
            .args(["install", "--settings"])
            .arg(&settings)
            .args(["--sync-notes", bad])
            .current_dir(project.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {}", said(&out));
    }
}

// --- The GitHub Actions template, run end to end against the bare remote ---------------------

/// Runs `templates/ci/github-actions.yml` as GitHub would for one event, on this machine: each
/// job on a machine of its own (its own HOME, runner temp and state home), `actions/checkout`
/// as a clone of the bare remote at the ref the template names, the step that installs vigil
/// as the binaries under test, every `run:` step as bash -e with the env GitHub gives it.
/// Secrets reach only a job that names the environment that holds them.
struct Actions<'a> {
    world: &'a World,
    workflow: yaml_rust2::Yaml,
    /// What `${{ … }}` expressions evaluate to.
    context: std::collections::HashMap<&'static str, String>,
    /// Variables set over the workflow's `env:` (the check command, for a project that is not
    /// a cargo project).
    overrides: Vec<(&'static str, String)>,
    /// Where GitHub is: `None` for a `VIGIL_REMOTE` of this machine's remote, or a server URL
    /// for the template's own push URL, with the run's token in it.
    server: Option<String>,
    /// What every step printed, in order.
    log: std::cell::RefCell<String>,
}

impl<'a> Actions<'a> {
    fn new(world: &'a World, head: &str, base: &str) -> Actions<'a> {
        let text = std::fs::read_to_string(repo_path("templates/ci/github-actions.yml")).unwrap();
        let workflow = yaml_rust2::YamlLoader::load_from_str(&text)
            .unwrap()
            .remove(0);
        let mut context = std::collections::HashMap::new();
        context.insert(
            "github.event.pull_request.head.sha || github.sha",
            head.to_string(),
        );
        context.insert("github.token", "token-of-the-run".to_string());
        context.insert(
            "secrets.VIGIL_SIGN_KEY",
            std::fs::read_to_string(world.secret())
                .unwrap()
                .trim()
                .to_string(),
        );
        let _ = base;
        Actions {
            world,
            workflow,
            context,
            overrides: Vec::new(),
            server: None,
            log: Default::default(),
        }
    }

    fn expand(&self, text: &str, secrets: bool) -> String {
        let mut out = String::new();
        let mut rest = text;
        while let Some(at) = rest.find("${{") {
            out.push_str(&rest[..at]);
            let end = rest[at..].find("}}").expect("an expression ends") + at;
            let expression = rest[at + 3..end].trim();
            let value = if expression.starts_with("secrets.") && !secrets {
                String::new()
            } else {
                self.context
                    .get(expression)
                    .unwrap_or_else(|| panic!("the emulator knows no `{expression}`"))
                    .clone()
            };
            out.push_str(&value);
            rest = &rest[end + 2..];
        }
        out.push_str(rest);
        out
    }

    fn env_of(&self, yaml: &yaml_rust2::Yaml, secrets: bool) -> Vec<(String, String)> {
        yaml["env"]
            .as_hash()
            .map(|hash| {
                hash.iter()
                    .map(|(k, v)| {
                        (
                            k.as_str().unwrap().to_string(),
                            self.expand(v.as_str().unwrap(), secrets),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Runs a job; whether every step passed.
    fn job(&self, name: &str, base: &str) -> bool {
        let job = &self.workflow["jobs"][name];
        let secrets = job["environment"].as_str() == Some("vigil-signing");
        let machine = tempfile::tempdir().unwrap();
        let home = machine.path().join("home");
        let temp = machine.path().join("runner-temp");
        let workspace = machine.path().join("work/app");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&temp).unwrap();
        let mut env: Vec<(String, String)> = vec![
            ("HOME".into(), home.display().to_string()),
            ("PATH".into(), "/usr/bin:/bin".into()),
            ("RUNNER_TEMP".into(), temp.display().to_string()),
            ("RUNNER_NAME".into(), format!("emulated-{name}")),
            ("GITHUB_ACTIONS".into(), "true".into()),
            (
                "GITHUB_SERVER_URL".into(),
                self.server
                    .clone()
                    .unwrap_or_else(|| "https://github.com".into()),
            ),
            ("GITHUB_REPOSITORY".into(), "acme/app".into()),
            ("GITHUB_RUN_ID".into(), "4242".into()),
            (
                "GITHUB_WORKFLOW_REF".into(),
                "acme/app/.github/workflows/vigil.yml@refs/heads/main".into(),
            ),
            ("GITHUB_WORKFLOW_SHA".into(), base.to_string()),
            (
                "VIGIL_STATE_HOME".into(),
                machine.path().join("state").display().to_string(),
            ),
        ];
        if self.server.is_none() {
            // GitHub's push URL is not this machine's: the template's knob for another one.
            env.push((
                "VIGIL_REMOTE".into(),
                self.world.remote.display().to_string(),
            ));
        }
        env.extend(self.env_of(&self.workflow, secrets));
        env.extend(self.env_of(job, secrets));
        for (key, value) in &self.overrides {
            env.push((key.to_string(), value.clone()));
        }
        for step in job["steps"].as_vec().unwrap() {
            if let Some(action) = step["uses"].as_str() {
                assert!(action.starts_with("actions/checkout@"), "{action}");
                let reference = self.expand(step["with"]["ref"].as_str().unwrap(), secrets);
                git(
                    machine.path(),
                    &[
                        "clone",
                        "-q",
                        self.world.remote.to_str().unwrap(),
                        workspace.to_str().unwrap(),
                    ],
                );
                git(&workspace, &["checkout", "-q", "--detach", &reference]);
                continue;
            }
            if step["id"].as_str() == Some("install-vigil") {
                let to = temp.join("vigil");
                std::fs::create_dir_all(&to).unwrap();
                for binary in ["marker-writer", "stop-gate"] {
                    std::os::unix::fs::symlink(bin_dir().join(binary), to.join(binary)).unwrap();
                }
                continue;
            }
            let script = step["run"].as_str().expect("a step runs a script");
            let script = self.expand(script, secrets);
            let mut cmd = std::process::Command::new("bash");
            cmd.arg("-e")
                .arg("-c")
                .arg(&script)
                .env_clear()
                .current_dir(&workspace);
            for (key, value) in env.iter().chain(&self.env_of(step, secrets)) {
                cmd.env(key, value);
            }
            let out = cmd.output().unwrap();
            let mut log = self.log.borrow_mut();
            log.push_str(&String::from_utf8_lossy(&out.stdout));
            log.push_str(&String::from_utf8_lossy(&out.stderr));
            if !out.status.success() {
                return false;
            }
        }
        true
    }

    /// Runs the workflow: each job in order, one that `needs` a failed job skipped.
    fn run(&self, base: &str) -> Vec<(String, bool)> {
        let mut results: Vec<(String, bool)> = Vec::new();
        for (name, job) in self.workflow["jobs"].as_hash().unwrap() {
            let name = name.as_str().unwrap().to_string();
            let needs_ok = job["needs"]
                .as_str()
                .is_none_or(|need| results.iter().any(|(n, ok)| n == need && *ok));
            let passed = needs_ok && self.job(&name, base);
            results.push((name, passed));
        }
        results
    }
}

#[test]
fn the_ci_template_vouches_signed_for_a_pull_requests_head_and_a_laptop_with_it_stops() {
    let world = World::new();
    let base = git(&world.remote, &["rev-parse", "main"]);
    // The agent's pull request: a branch with a change.
    let work = world.clone("agent");
    git(&work, &["checkout", "-q", "-b", "feature"]);
    std::fs::write(work.join("lib.rs"), "pub fn answer() -> u32 { 6 * 7 }\n").unwrap();
    git(&work, &["commit", "-qam", "compute it"]);
    git(&work, &["push", "-q", "origin", "feature"]);
    let head = git(&work, &["rev-parse", "HEAD"]);

    let mut actions = Actions::new(&world, &head, &base);
    actions
        .overrides
        .push(("VIGIL_CHECK_COMMAND", "grep -q answer lib.rs".into()));
    assert_eq!(
        actions.run(&base),
        vec![("test".to_string(), true), ("vouch".to_string(), true)]
    );
    assert_eq!(world.remote_refs(), vec!["refs/notes/vigil/tests"]);

    // The laptop, on the pull request's head: after a sync its Stop accepts CI's signature.
    let laptop = world.clone("laptop");
    git(&laptop, &["checkout", "-q", "feature"]);
    ok(marker_writer_in(&laptop, &["sync"]));
    assert_eq!(laptop_stop(&laptop, "tests", Some(&world.public())), None);
    let shown = ok(marker_writer_in(
        &laptop,
        &["show", "--all", "--check", "tests"],
    ));
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(
        text.contains("https://github.com/acme/app/actions/runs/4242")
            && text.contains("signed by"),
        "{text}"
    );
    let subject = subject_of(&laptop);
    let object = subject.strip_prefix("git-tree:").unwrap();
    let note = git(
        &world.remote,
        &["notes", "--ref", "vigil/tests", "show", object],
    );
    let payload: Value =
        serde_json::from_str(note.lines().find(|l| !l.is_empty()).unwrap()).unwrap();
    assert_eq!(
        payload["origin"]["workflow_sha"],
        base.as_str(),
        "the workflow file's commit"
    );
    assert_eq!(payload["origin"]["runner"], "emulated-vouch");

    // A check that fails: `vouch` never runs, nothing is published for that content, and the
    // laptop on it is denied.
    std::fs::write(work.join("lib.rs"), "pub fn broken() {}\n").unwrap();
    git(&work, &["commit", "-qam", "break it"]);
    git(&work, &["push", "-q", "origin", "feature"]);
    let broken = git(&work, &["rev-parse", "HEAD"]);
    let mut actions = Actions::new(&world, &broken, &base);
    actions
        .overrides
        .push(("VIGIL_CHECK_COMMAND", "grep -q answer lib.rs".into()));
    assert_eq!(
        actions.run(&base),
        vec![("test".to_string(), false), ("vouch".to_string(), false)]
    );
    git(&laptop, &["pull", "-q", "--ff-only", "origin", "feature"]);
    ok(marker_writer_in(&laptop, &["sync"]));
    let reason = laptop_stop(&laptop, "tests", Some(&world.public())).unwrap();
    assert!(reason.contains("subject mismatch"), "{reason}");
}

/// The template's own push URL carries the run's token: when the push fails, what the job
/// prints names the remote without it (GitHub masks its own token, not one in `VIGIL_REMOTE`).
#[test]
fn the_ci_templates_push_url_never_prints_its_token() {
    let world = World::new();
    let head = git(&world.remote, &["rev-parse", "main"]);
    let mut actions = Actions::new(&world, &head, &head);
    actions
        .overrides
        .push(("VIGIL_CHECK_COMMAND", "grep -q answer lib.rs".into()));
    // A server nothing listens on: the push fails at once.
    actions.server = Some("https://127.0.0.1:1".into());
    assert_eq!(
        actions.run(&head),
        vec![("test".to_string(), true), ("vouch".to_string(), false)]
    );
    let log = actions.log.borrow();
    assert!(
        log.contains("sync with https://x-access-token:***@127.0.0.1:1/acme/app.git"),
        "{log}"
    );
    assert!(!log.contains("token-of-the-run"), "{log}");
}

#[test]
fn the_ci_template_runs_the_base_branchs_check_where_no_key_is_and_signs_where_nothing_runs() {
    let text = std::fs::read_to_string(repo_path("templates/ci/github-actions.yml")).unwrap();
    let workflow = yaml_rust2::YamlLoader::load_from_str(&text)
        .unwrap()
        .remove(0);
    // Yaml reads `on` as the key "on".
    let on = &workflow["on"];
    assert!(
        !on["pull_request_target"].is_badvalue(),
        "the base branch's workflow runs for a pull request"
    );
    assert!(
        on["pull_request"].is_badvalue(),
        "never the pull request's own workflow"
    );
    assert_eq!(workflow["permissions"].as_hash().map(|h| h.len()), Some(0));
    for (name, job) in workflow["jobs"].as_hash().unwrap() {
        let name = name.as_str().unwrap();
        let steps = job["steps"].as_vec().unwrap();
        let runs: Vec<&str> = steps.iter().filter_map(|s| s["run"].as_str()).collect();
        let uses_secret = steps.iter().any(|s| format!("{s:?}").contains("secrets."));
        let runs_the_check = runs.iter().any(|r| {
            r.contains("sh -c \"$VIGIL_CHECK_COMMAND\"") || r.contains("marker-writer\" run")
        });
        for step in steps.iter().filter(|s| s["uses"].as_str().is_some()) {
            assert_eq!(
                step["with"]["persist-credentials"].as_bool(),
                Some(false),
                "{name}: no credentials left in a checkout"
            );
        }
        if uses_secret {
            assert_eq!(job["environment"].as_str(), Some("vigil-signing"), "{name}");
            assert!(
                !runs_the_check,
                "{name}: where the key is, nothing of the content runs"
            );
        } else {
            assert!(job["environment"].is_badvalue(), "{name}");
            assert_eq!(
                job["permissions"]["contents"].as_str(),
                Some("read"),
                "{name}"
            );
        }
        if runs_the_check {
            assert!(!uses_secret, "{name}");
        }
    }
}

/// What a project's `.claude/settings.json` can put in the environment of the hook that starts
/// a background sync: a PATH with its own `git` first, `GIT_SSH_COMMAND`, a HOME whose
/// .gitconfig names a `core.sshCommand`, `GIT_CONFIG_GLOBAL`. None of them runs.
#[test]
fn a_sync_takes_nothing_from_the_callers_environment_that_would_run_a_command() {
    let world = World::new();
    let laptop = world.clone("laptop");
    let canary = world.dir.path().join("ran");
    let planted = world.dir.path().join("planted");
    std::fs::create_dir_all(planted.join("bin")).unwrap();
    let fake_git = planted.join("bin/git");
    std::fs::write(
        &fake_git,
        format!("#!/bin/sh\necho git >>'{}'\n", canary.display()),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake_git, std::fs::Permissions::from_mode(0o755)).unwrap();
    let touch = format!("sh -c 'echo ssh >>{}'", canary.display());
    std::fs::write(
        planted.join(".gitconfig"),
        format!("[core]\n\tsshCommand = {touch}\n"),
    )
    .unwrap();
    for remote in ["origin", "ssh://127.0.0.1:1/repo.git"] {
        let out = marker_writer()
            .args(["sync", "--remote", remote, "--timeout", "10"])
            .current_dir(&laptop)
            .env(
                "PATH",
                format!("{}:/usr/bin:/bin", planted.join("bin").display()),
            )
            .env("HOME", &planted)
            .env("XDG_CONFIG_HOME", &planted)
            .env("GIT_SSH_COMMAND", &touch)
            .env("GIT_CONFIG_GLOBAL", planted.join(".gitconfig"))
            .output()
            .unwrap();
        if remote == "origin" {
            assert!(out.status.success(), "{}", said(&out));
        }
        assert!(
            !canary.exists(),
            "{remote}: {}",
            std::fs::read_to_string(&canary).unwrap_or_default()
        );
    }
}

/// A remote URL in the project's config that git would read as an option (`--upload-pack=CMD`
/// runs CMD): refused, and nothing runs.
#[test]
fn a_remote_url_that_is_an_option_is_refused_and_runs_nothing() {
    let world = World::new();
    let laptop = world.clone("laptop");
    let canary = world.dir.path().join("pwned");
    git(
        &laptop,
        &[
            "config",
            "remote.origin.url",
            &format!("--upload-pack=touch {};false", canary.display()),
        ],
    );
    let out = marker_writer_in(&laptop, &["sync"]);
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(!canary.exists(), "the agent's command ran");
}

/// The payloads the remote's note for `subject` holds, parsed.
fn remote_payloads(world: &World, check: &str, subject: &str) -> Vec<Value> {
    let object = subject.strip_prefix("git-tree:").unwrap();
    let note = git(
        &world.remote,
        &["notes", "--ref", &format!("vigil/{check}"), "show", object],
    );
    note.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Two pushes interleaved for real: while the remote is receiving the first clone's push (in
/// its pre-receive hook), the second clone's sync pushes the same check. The first push then
/// finds the ref moved (`[remote rejected] … failed to update ref`), and must fetch, merge and
/// push again rather than fail or drop the other's payload.
#[test]
fn a_push_that_loses_a_race_while_the_remote_takes_another_merges_and_pushes_again() {
    let world = World::new();
    let first = world.clone("ci-1");
    let second = world.clone("ci-2");
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
    assert!(out.status.success(), "{}", said(&out));
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

/// The protected state inside the project (a state home set there, or the fallback when the
/// state home cannot be written): the agent can write the notes repository's config, and git
/// obeys it (`protocol.ext.allow` and a `url.*.insteadOf` turn the fetch into its command). A
/// sync there is refused, and runs nothing.
#[test]
fn a_notes_repository_the_agent_can_write_is_refused_and_its_config_runs_nothing() {
    for (what, home) in [
        ("a state home in the project", Some(".cache/vigil")),
        ("the fallback", None),
    ] {
        let world = World::new();
        let laptop = world.clone("laptop");
        let home = match home {
            Some(inside) => laptop.join(inside),
            // Cannot be made: the state falls back into the project.
            None => PathBuf::from("/proc/vigil-cannot-be-made"),
        };
        let canary = world.dir.path().join("pwned");
        let run = |args: &[&str]| {
            marker_writer()
                .args(args)
                .current_dir(&laptop)
                .env("VIGIL_STATE_HOME", &home)
                .output()
                .unwrap()
        };
        // Any command makes the protected place; the agent finds it and plants a notes
        // repository whose config makes the fetch run its command.
        let _ = run(&["verify", "--check", "tests"]);
        let place = find_dir_named(&laptop, "projects")
            .and_then(|projects| std::fs::read_dir(projects).ok()?.flatten().next())
            .map(|entry| entry.path())
            .unwrap_or_else(|| laptop.join(".vigil/state"));
        let notes = place.join("notes.git");
        git(&laptop, &["init", "-q", "--bare", notes.to_str().unwrap()]);
        let remote = world.remote.to_str().unwrap();
        let config = format!(
            "[protocol \"ext\"]\n\tallow = always\n[url \"ext::sh -c touch% {}\"]\n\tinsteadOf = {remote}\n",
            canary.display()
        );
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(notes.join("config"))
            .unwrap();
        std::io::Write::write_all(&mut file, config.as_bytes()).unwrap();
        for args in [
            &["sync"][..],
            &[
                "write",
                "--check",
                "tests",
                "--status",
                "passed",
                "--publish",
            ][..],
        ] {
            let out = run(args);
            assert_eq!(
                out.status.code(),
                Some(2),
                "{what}: {args:?}: {}",
                said(&out)
            );
            assert_one_line_error(&out, "marker-writer");
            assert!(
                String::from_utf8_lossy(&out.stderr).contains("inside the project"),
                "{what}: {}",
                said(&out)
            );
            assert!(!canary.exists(), "{what}: the agent's command ran");
        }
    }
}

/// The first directory named `name` under `dir`.
fn find_dir_named(dir: &Path, name: &str) -> Option<PathBuf> {
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        if !entry.file_type().ok()?.is_dir() {
            continue;
        }
        if entry.file_name() == name {
            return Some(path);
        }
        if let Some(found) = find_dir_named(&path, name) {
            return Some(found);
        }
    }
    None
}

/// A note the agent adds for `object` in its clone, from raw bytes (from a file: a huge note
/// does not fit on a command line).
fn agent_adds_note_bytes(laptop: &Path, check: &str, object: &str, bytes: &[u8]) {
    let file = laptop.join(".git/agent-note");
    std::fs::write(&file, bytes).unwrap();
    git(
        laptop,
        &[
            "notes",
            "--ref",
            &format!("vigil/{check}"),
            "add",
            "-f",
            "-F",
            file.to_str().unwrap(),
            object,
        ],
    );
}

/// The agent pushes its clone's notes of `check` over the remote's, with the user's rights.
fn agent_pushes_notes(laptop: &Path, check: &str) {
    git(
        laptop,
        &[
            "push",
            "-q",
            "-f",
            "origin",
            &format!("refs/notes/vigil/{check}"),
        ],
    );
}

/// The laptop's clone takes the remote's notes ref as its own, to build on it as the agent.
fn agent_takes_remote_notes(laptop: &Path, check: &str) {
    git(
        laptop,
        &[
            "fetch",
            "-q",
            "origin",
            &format!("+refs/notes/vigil/{check}:refs/notes/vigil/{check}"),
        ],
    );
}

/// A blob in `dir`'s repository whose id sorts before `than` (so its note is read first).
fn blob_sorting_before(dir: &Path, than: &str) -> String {
    for i in 0.. {
        let file = dir.join(".git/probe");
        std::fs::write(&file, format!("probe {i}\n")).unwrap();
        let id = git(dir, &["hash-object", "-w", file.to_str().unwrap()]);
        if id.as_str() < than {
            return id;
        }
    }
    unreachable!()
}

/// A note of bytes that are not UTF-8, read before CI's (its object sorts first), must not
/// shift where git's answer is cut and hide or replace CI's note.
#[test]
fn a_note_of_bytes_that_are_not_utf8_hides_no_other_note() {
    let world = World::new();
    let ci = world.clone("ci");
    let laptop = world.clone("laptop");
    ci_publishes(&ci, "tests", Some(&world.secret()));
    let subject = subject_of(&laptop);
    let tree = subject.strip_prefix("git-tree:").unwrap();
    agent_takes_remote_notes(&laptop, "tests");
    let before = blob_sorting_before(&laptop, tree);
    let mut bytes = vec![0xff; 300];
    bytes.extend_from_slice(b"\n");
    agent_adds_note_bytes(&laptop, "tests", &before, &bytes);
    agent_pushes_notes(&laptop, "tests");
    ok(marker_writer_in(&laptop, &["sync"]));
    assert_eq!(laptop_stop(&laptop, "tests", Some(&world.public())), None);
}

/// Notes that add up to more than one read of git's takes (here 12 of nearly 1 MiB, after
/// CI's, in four reads of 4 MiB): every one is read, CI's included, or none is.
#[test]
fn notes_past_what_one_answer_of_git_holds_are_all_read() {
    let world = World::new();
    let ci = world.clone("ci");
    let laptop = world.clone("laptop");
    ci_publishes(&ci, "tests", Some(&world.secret()));
    let subject = subject_of(&laptop);
    let tree = subject.strip_prefix("git-tree:").unwrap();
    agent_takes_remote_notes(&laptop, "tests");
    let padding = format!("{{\"pad\":\"{}\"}}\n", "x".repeat(1_000_000));
    let mut added = 0;
    for i in 0.. {
        let file = laptop.join(".git/probe");
        std::fs::write(&file, format!("filler {i}\n")).unwrap();
        let id = git(&laptop, &["hash-object", "-w", file.to_str().unwrap()]);
        if id.as_str() > tree {
            agent_adds_note_bytes(&laptop, "tests", &id, padding.as_bytes());
            added += 1;
            if added == 12 {
                break;
            }
        }
    }
    agent_pushes_notes(&laptop, "tests");
    let out = ok(marker_writer_in(&laptop, &["sync"]));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("tests (13 contents)"),
        "{}",
        said(&out)
    );
    assert_eq!(laptop_stop(&laptop, "tests", Some(&world.public())), None);
}

/// The agent, with push rights, removes CI's note from the remote (or rewrites it without CI's
/// line): the laptop that had it keeps it. A sync only ever adds.
#[test]
fn a_note_deleted_or_cut_on_the_remote_stays_on_the_laptop() {
    for how in ["removed", "rewritten"] {
        let world = World::new();
        let ci = world.clone("ci");
        let laptop = world.clone("laptop");
        ci_publishes(&ci, "tests", Some(&world.secret()));
        ok(marker_writer_in(&laptop, &["sync"]));
        assert_eq!(laptop_stop(&laptop, "tests", Some(&world.public())), None);
        let agent = world.clone("agent");
        agent_takes_remote_notes(&agent, "tests");
        let subject = subject_of(&agent);
        let tree = subject.strip_prefix("git-tree:").unwrap();
        if how == "removed" {
            git(&agent, &["notes", "--ref", "vigil/tests", "remove", tree]);
        } else {
            agent_adds_note_bytes(
                &agent,
                "tests",
                tree,
                unsigned_payload("tests", &subject).as_bytes(),
            );
        }
        agent_pushes_notes(&agent, "tests");
        ok(marker_writer_in(&laptop, &["sync"]));
        assert_eq!(
            laptop_stop(&laptop, "tests", Some(&world.public())),
            None,
            "{how}: CI's note was dropped"
        );
        // And pushed back: the remote has it again.
        ok(push(&laptop));
        let payloads = remote_payloads(&world, "tests", &subject);
        assert!(
            payloads.iter().any(|p| p.get("signature").is_some()),
            "{how}: {payloads:?}"
        );
    }
}

/// More contents with notes than are kept: the newest are kept (CI's, published last, whose
/// tree id sorts after every older one here), and the sync says how many were left out.
#[test]
fn past_the_most_notes_kept_the_newest_are_kept_and_the_sync_says_so() {
    let world = World::new();
    // 5,000 old notes, for ids that sort before any real one, in one commit on the remote.
    let blob = git(&world.remote, &["hash-object", "-w", "--stdin"]);
    let listing: String = (1..=5000)
        .map(|i| format!("100644 blob {blob}\t{i:040x}\n"))
        .collect();
    let tree = git_with_stdin(&world.remote, &["mktree"], listing.as_bytes());
    let commit = git(&world.remote, &["commit-tree", &tree, "-m", "old notes"]);
    git(
        &world.remote,
        &["update-ref", "refs/notes/vigil/tests", &commit],
    );
    let ci = world.clone("ci");
    let laptop = world.clone("laptop");
    ci_publishes(&ci, "tests", Some(&world.secret()));
    let out = ok(marker_writer_in(&laptop, &["sync"]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("905 older contents") && stderr.contains("newest 4096"),
        "{}",
        said(&out)
    );
    assert_eq!(laptop_stop(&laptop, "tests", Some(&world.public())), None);
}

/// A remote whose notes are more than `--max-fetch`: refused in one line, and nothing of them
/// is left in vigil's repository.
#[test]
fn a_remote_that_sends_more_than_max_fetch_is_refused_and_leaves_nothing() {
    let world = World::new();
    let ci = world.clone("ci");
    let laptop = world.clone("laptop");
    ci_publishes(&ci, "tests", None);
    // 3 MiB that do not compress, in a note on the remote.
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let noise: Vec<u8> = (0..3 << 20)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect();
    agent_takes_remote_notes(&laptop, "tests");
    let object = git(&laptop, &["rev-parse", "HEAD"]);
    agent_adds_note_bytes(&laptop, "tests", &object, &noise);
    agent_pushes_notes(&laptop, "tests");
    // The laptop's own state home, so that only its object store is looked at.
    let own = tempfile::tempdir().unwrap();
    let laptop_mw = |args: &[&str]| {
        marker_writer()
            .args(args)
            .current_dir(&laptop)
            .env("VIGIL_STATE_HOME", own.path())
            .output()
            .unwrap()
    };
    let out = laptop_mw(&["sync", "--max-fetch", "1M"]);
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert_one_line_error(&out, "marker-writer");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("over 1 MiB (--max-fetch)"),
        "{}",
        said(&out)
    );
    assert!(
        find_dir_named(own.path(), "notes.git").is_some(),
        "the fetch was made"
    );
    let leftovers = tmp_files_under(own.path());
    assert!(leftovers.is_empty(), "{leftovers:?}");
    // With room enough, the same remote syncs.
    let out = ok(laptop_mw(&["sync"]));
    assert!(String::from_utf8_lossy(&out.stdout).contains("tests"));
}

/// Files named `tmp_*` under `dir` (what a cut-off fetch leaves in an object store).
fn tmp_files_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(tmp_files_under(&path));
        } else if entry.file_name().to_string_lossy().starts_with("tmp_") {
            found.push(path);
        }
    }
    found
}

/// The variables a project's settings can give the hook that starts a sync, and that git or
/// what it runs would obey without a `GIT_` in their name: none reaches git.
#[test]
fn a_sync_hands_git_only_the_variables_it_needs() {
    let world = World::new();
    let laptop = world.clone("laptop");
    let planted = [
        ("LD_PRELOAD", "/nonexistent/libvigil-planted.so"),
        ("SSH_ASKPASS", "/nonexistent/vigil-planted-askpass"),
        ("SSH_ASKPASS_REQUIRE", "force"),
        ("SSL_CERT_FILE", "/nonexistent/vigil-planted.pem"),
        ("CURL_CA_BUNDLE", "/nonexistent/vigil-planted.pem"),
        ("BASH_ENV", "/nonexistent/vigil-planted.sh"),
    ];
    let env: Vec<(&str, &std::ffi::OsStr)> =
        planted.iter().map(|(n, v)| (*n, v.as_ref())).collect();
    let Some((out, calls)) = traced_with(
        "marker-writer",
        &["sync".as_ref()],
        &env,
        &laptop,
        b"",
        "execve",
    ) else {
        return;
    };
    assert!(out.status.success(), "{}", said(&out));
    let gits: Vec<&str> = calls
        .text
        .lines()
        .filter(|l| l.contains("execve(") && l.contains("/git\""))
        .collect();
    assert!(!gits.is_empty(), "git ran: {}", calls.text);
    for line in gits {
        for (name, _) in planted {
            assert!(
                !line.contains(&format!("\"{name}=")),
                "{name} reached git: {line}"
            );
        }
    }
}

/// `git` in `dir` with `input` on its standard input: its trimmed output.
fn git_with_stdin(dir: &Path, args: &[&str], input: &[u8]) -> String {
    use std::io::Write;
    let mut child = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "git {args:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// `show --all` compares with the nearest published content by listing its tree in the
/// project's repository. The agent made that repository a partial clone whose promisor
/// remote's upload-pack is its own command: listing a tree that is not there must not fetch it
/// (which would run that command as the user who asked).
#[test]
fn show_all_never_fetches_a_missing_tree_through_the_projects_promisor_remote() {
    let world = World::new();
    let ci = world.clone("ci");
    let laptop = world.clone("laptop");
    // CI tested content the laptop has never seen: its tree is in no object of the laptop's.
    std::fs::write(ci.join("lib.rs"), "pub fn answer() -> u32 { 41 + 1 }\n").unwrap();
    git(&ci, &["commit", "-qam", "ci only"]);
    ci_publishes(&ci, "tests", None);
    ok(marker_writer_in(&laptop, &["sync"]));
    let canary = world.dir.path().join("fetched");
    let upload = world.dir.path().join("upload-pack");
    std::fs::write(
        &upload,
        format!(
            "#!/bin/sh\n: >'{}'\nexec git-upload-pack \"$@\"\n",
            canary.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&upload, std::fs::Permissions::from_mode(0o755)).unwrap();
    let ci_path = ci.to_str().unwrap().to_string();
    let upload_path = upload.to_str().unwrap().to_string();
    for (key, value) in [
        ("core.repositoryformatversion", "1"),
        ("extensions.partialClone", "agent"),
        ("remote.agent.url", ci_path.as_str()),
        ("remote.agent.promisor", "true"),
        ("remote.agent.uploadpack", upload_path.as_str()),
    ] {
        git(&laptop, &["config", key, value]);
    }
    let out = ok(marker_writer_in(
        &laptop,
        &["show", "--all", "--check", "tests"],
    ));
    assert!(!canary.exists(), "the agent's upload-pack ran");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("none of the 1 published contents"),
        "{}",
        said(&out)
    );
}

/// The agent empties the remote's notes of a check that has thousands (CI's among them): the
/// laptop keeps every one, put back in one go, fanned-out tree and all.
#[test]
fn a_remote_that_drops_thousands_of_notes_takes_none_from_the_laptop() {
    let world = World::new();
    let blob = git_with_stdin(
        &world.remote,
        &["hash-object", "-w", "--stdin"],
        b"an old payload\n",
    );
    let listing: String = (1..=3000)
        .map(|i| format!("100644 blob {blob}\t{i:040x}\n"))
        .collect();
    let tree = git_with_stdin(&world.remote, &["mktree"], listing.as_bytes());
    let commit = git(&world.remote, &["commit-tree", &tree, "-m", "old notes"]);
    git(
        &world.remote,
        &["update-ref", "refs/notes/vigil/tests", &commit],
    );
    let ci = world.clone("ci");
    let laptop = world.clone("laptop");
    ci_publishes(&ci, "tests", Some(&world.secret()));
    let out = ok(marker_writer_in(&laptop, &["sync"]));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("tests (3001 contents)"),
        "{}",
        said(&out)
    );
    // The agent's commit on top of the remote's notes: an empty tree.
    let notes = git(&world.remote, &["rev-parse", "refs/notes/vigil/tests"]);
    let empty = git_with_stdin(&world.remote, &["mktree"], b"");
    let dropped = git(
        &world.remote,
        &["commit-tree", &empty, "-p", &notes, "-m", "drop them all"],
    );
    git(
        &world.remote,
        &["update-ref", "refs/notes/vigil/tests", &dropped],
    );
    let out = ok(push(&laptop));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("tests (3001 contents)"),
        "{}",
        said(&out)
    );
    assert_eq!(laptop_stop(&laptop, "tests", Some(&world.public())), None);
    let listed = git(&world.remote, &["notes", "--ref", "vigil/tests", "list"]);
    assert_eq!(listed.lines().count(), 3001, "pushed back whole");
}

/// `sync --push` to a remote URL the agent put in `.git/config` (a local path) would run that
/// repository's receive-side hooks (receive-pack does not take vigil's `core.hooksPath`): a
/// push to a path read from the project's config is refused, and nothing runs.
#[test]
fn a_push_to_a_path_the_projects_config_names_is_refused_and_runs_no_hook() {
    let world = World::new();
    let laptop = world.clone("laptop");
    let evil = world.dir.path().join("evil.git");
    git(
        world.dir.path(),
        &["init", "-q", "--bare", evil.to_str().unwrap()],
    );
    let witness = world.dir.path().join("PWNED");
    let hook = evil.join("hooks/pre-receive");
    std::fs::write(&hook, format!("#!/bin/sh\ntouch '{}'\n", witness.display())).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    for url in [
        evil.to_str().unwrap().to_string(),
        format!("file://{}", evil.display()),
    ] {
        git(&laptop, &["remote", "set-url", "origin", &url]);
        ok(marker_writer_in(
            &laptop,
            &[
                "write",
                "--check",
                "tests",
                "--status",
                "passed",
                "--publish",
            ],
        ));
        let out = marker_writer_in(&laptop, &["sync", "--push"]);
        assert_eq!(out.status.code(), Some(2), "{url}: {}", said(&out));
        assert_one_line_error(&out, "marker-writer");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("--remote PATH"),
            "{}",
            said(&out)
        );
        assert!(!witness.exists(), "{url}: the agent's pre-receive hook ran");
    }
}

/// A FIFO in place of `.git/config`: the remote's URL is read from it without waiting (and
/// git never reads the project's repository on its own), so a sync says so at once.
#[test]
fn a_fifo_in_place_of_the_projects_config_is_refused_at_once() {
    let world = World::new();
    let laptop = world.clone("laptop");
    std::fs::remove_file(laptop.join(".git/config")).unwrap();
    let status = std::process::Command::new("mkfifo")
        .arg(laptop.join(".git/config"))
        .status()
        .unwrap();
    assert!(status.success());
    let start = Instant::now();
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin!("marker-writer"))
        .env("VIGIL_STATE_HOME", state_home())
        .env_remove("VIGIL_STATE_DIR")
        .env_remove("CLAUDE_PROJECT_DIR")
        .args(["sync", "--timeout", "2"])
        .current_dir(&laptop)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    while child.try_wait().unwrap().is_none() && start.elapsed() < Duration::from_secs(8) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let finished = child.try_wait().unwrap();
    if finished.is_none() {
        let _ = child.kill();
        let _ = child.wait();
        // Unblock whatever waits on the FIFO.
        use std::os::unix::fs::OpenOptionsExt;
        for _ in 0..20 {
            let _ = std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(laptop.join(".git/config"));
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let status = finished.expect("a 2 s sync still ran after 8 s");
    assert_eq!(status.code(), Some(2));
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(
        stderr.contains("not a regular file") || stderr.contains("config"),
        "{stderr}"
    );
}

/// The agent pushes CI's note with more than 1 MiB of junk after it, as a fast-forward. The
/// laptop that had CI's payload keeps it, the note is rebuilt from what could be read and
/// pushed back, and a laptop that never had it then gets it; CI's next publish for that
/// content replaces an unreadable note rather than append to it.
#[test]
fn junk_pushed_over_cis_note_is_dropped_and_cis_payload_kept_everywhere() {
    let world = World::new();
    let ci = world.clone("ci");
    let laptop = world.clone("laptop");
    ci_publishes(&ci, "tests", Some(&world.secret()));
    ok(marker_writer_in(&laptop, &["sync"]));
    assert_eq!(laptop_stop(&laptop, "tests", Some(&world.public())), None);
    let agent = world.clone("agent");
    agent_takes_remote_notes(&agent, "tests");
    let object = subject_of(&agent)
        .strip_prefix("git-tree:")
        .unwrap()
        .to_string();
    let mut bytes = git(&agent, &["notes", "--ref", "vigil/tests", "show", &object]).into_bytes();
    bytes.push(b'\n');
    bytes.extend(std::iter::repeat_n(b'j', 1_100_000));
    bytes.push(b'\n');
    agent_adds_note_bytes(&agent, "tests", &object, &bytes);
    agent_pushes_notes(&agent, "tests");

    ok(marker_writer_in(&laptop, &["sync"]));
    assert_eq!(
        laptop_stop(&laptop, "tests", Some(&world.public())),
        None,
        "the laptop lost CI's payload to the junk"
    );
    ok(push(&laptop));
    let fresh = world.clone("fresh");
    ok(marker_writer_in(&fresh, &["sync"]));
    assert_eq!(laptop_stop(&fresh, "tests", Some(&world.public())), None);

    // The junk again; this time CI publishes over it before any laptop mends it.
    agent_takes_remote_notes(&agent, "tests");
    agent_adds_note_bytes(&agent, "tests", &object, &bytes);
    agent_pushes_notes(&agent, "tests");
    let ci2 = world.clone("ci2");
    agent_takes_remote_notes(&ci2, "tests");
    ci_publishes(&ci2, "tests", Some(&world.secret()));
    let again = world.clone("again");
    ok(marker_writer_in(&again, &["sync"]));
    assert_eq!(laptop_stop(&again, "tests", Some(&world.public())), None);
}

/// A pack of a few KiB can name one 1 MiB blob from a hundred notes: written out, 100 MiB. A
/// check's notes over 16 MiB in all are not read: the sync says so, writes nothing of them,
/// and the notes synced before stay.
#[test]
fn notes_that_name_one_blob_a_hundred_times_are_not_written_out_a_hundred_times() {
    let world = World::new();
    let ci = world.clone("ci");
    let laptop = world.clone("laptop");
    ci_publishes(&ci, "tests", Some(&world.secret()));
    ok(marker_writer_in(&laptop, &["sync"]));
    let blob = git_with_stdin(
        &world.remote,
        &["hash-object", "-w", "--stdin"],
        &vec![b'A'; 1 << 20],
    );
    let notes = git(&world.remote, &["rev-parse", "refs/notes/vigil/tests"]);
    let mut listing = git(&world.remote, &["ls-tree", &notes]);
    listing.push('\n');
    for i in 1..=100u32 {
        listing.push_str(&format!("100644 blob {blob}\t{i:040x}\n"));
    }
    let tree = git_with_stdin(&world.remote, &["mktree"], listing.as_bytes());
    let commit = git(
        &world.remote,
        &["commit-tree", &tree, "-p", &notes, "-m", "a hundred times"],
    );
    git(
        &world.remote,
        &["update-ref", "refs/notes/vigil/tests", &commit],
    );
    let out = ok(marker_writer_in(&laptop, &["sync"]));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("over 16 MiB in all"),
        "{}",
        said(&out)
    );
    let written = sizes_under(&protected_dir(&laptop).join("notes"));
    assert!(written < 1 << 20, "{written} bytes written out");
    assert_eq!(laptop_stop(&laptop, "tests", Some(&world.public())), None);
}

fn sizes_under(dir: &Path) -> u64 {
    let mut total = 0;
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let meta = entry.metadata().unwrap();
            total += if meta.is_dir() {
                sizes_under(&entry.path())
            } else {
                meta.len()
            };
        }
    }
    total
}

/// Whoever can write the protected state (an agent without the sandbox, another program)
/// adds to `notes.git/config` what makes a fetch its command, or points the objects elsewhere:
/// the repository is refused until it is removed, and nothing runs.
#[test]
fn a_notes_repository_not_as_vigil_made_it_is_refused_and_runs_nothing() {
    let world = World::new();
    let laptop = world.clone("laptop");
    ok(marker_writer_in(&laptop, &["sync"]));
    let notes = protected_dir(&laptop).join("notes.git");
    let canary = world.dir.path().join("pwned");
    let remote = world.remote.to_str().unwrap();
    let planted = format!(
        "[protocol \"ext\"]\n\tallow = always\n[url \"ext::sh -c touch% {}\"]\n\tinsteadOf = {remote}\n",
        canary.display()
    );
    let original = std::fs::read(notes.join("config")).unwrap();
    for (file, text) in [
        ("config", planted.as_str()),
        ("objects/info/alternates", "/tmp\n"),
    ] {
        let path = notes.join(file);
        let mut bytes = std::fs::read(&path).unwrap_or_default();
        bytes.extend_from_slice(text.as_bytes());
        std::fs::write(&path, bytes).unwrap();
        let out = marker_writer_in(&laptop, &["sync"]);
        assert_eq!(out.status.code(), Some(2), "{file}: {}", said(&out));
        assert_one_line_error(&out, "marker-writer");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("is not as vigil made it"),
            "{}",
            said(&out)
        );
        assert!(!canary.exists(), "{file}: the planted command ran");
        std::fs::write(notes.join("config"), &original).unwrap();
        let _ = std::fs::remove_file(notes.join("objects/info/alternates"));
    }
    // Removed, it is made again.
    std::fs::remove_dir_all(&notes).unwrap();
    ok(marker_writer_in(&laptop, &["sync"]));
}

/// The agent makes the remote's notes ref of a check name a blob: every push of CI's would be
/// refused for good (`needs force`). The push replaces that ref, only while it still names
/// the blob that was fetched, and CI's verdict arrives.
#[test]
fn a_remote_notes_ref_made_a_blob_does_not_stop_ci_publishing() {
    let world = World::new();
    let blob = git(&world.remote, &["hash-object", "-w", "--stdin"]);
    git(
        &world.remote,
        &["update-ref", "refs/notes/vigil/tests", &blob],
    );
    let ci = world.clone("ci");
    ci_publishes(&ci, "tests", Some(&world.secret()));
    let kind = git(&world.remote, &["cat-file", "-t", "refs/notes/vigil/tests"]);
    assert_eq!(kind, "commit");
    let laptop = world.clone("laptop");
    ok(marker_writer_in(&laptop, &["sync"]));
    assert_eq!(laptop_stop(&laptop, "tests", Some(&world.public())), None);
}

/// A tree made with `git mktree` from `lines` (`mode type id\tname`).
fn mktree(dir: &Path, lines: &[String]) -> String {
    let mut text = lines.join("\n");
    text.push('\n');
    git_with_stdin(dir, &["mktree"], text.as_bytes())
}

/// What an attack on CI's note of `tests` starts from: the laptop that synced it, the agent's
/// clone holding the remote's notes, their commit, and the object the note is for.
struct Attack {
    laptop: PathBuf,
    agent: PathBuf,
    base: String,
    object: String,
}

/// CI publishes its signed verdict, a laptop syncs it and its Stop passes, and the agent takes
/// the remote's notes into a clone of its own, to build on them.
fn ci_vouched_and_the_agent_holds_the_notes(world: &World) -> Attack {
    let ci = world.clone("ci");
    ci_publishes(&ci, "tests", Some(&world.secret()));
    let laptop = world.clone("laptop");
    ok(marker_writer_in(&laptop, &["sync"]));
    assert_eq!(laptop_stop(&laptop, "tests", Some(&world.public())), None);
    let agent = world.clone("agent");
    agent_takes_remote_notes(&agent, "tests");
    let base = git(&agent, &["rev-parse", "refs/notes/vigil/tests"]);
    let object = git(
        &agent,
        &["ls-tree", "--name-only", "refs/notes/vigil/tests"],
    );
    assert_eq!(object.len(), 40, "{object}");
    Attack {
        laptop,
        agent,
        base,
        object,
    }
}

/// The agent pushes `root` as the next notes of `tests`, as a fast-forward of `base`. The
/// laptop's Stop still passes after two syncs, and after its push a fresh clone's does too.
fn the_agent_pushes_and_cis_payload_stays(
    world: &World,
    laptop: &Path,
    agent: &Path,
    base: &str,
    root: &str,
    message: &str,
) {
    let commit = git(agent, &["commit-tree", root, "-p", base, "-m", message]);
    git(agent, &["update-ref", "refs/notes/vigil/tests", &commit]);
    git(agent, &["push", "-q", "origin", "refs/notes/vigil/tests"]);
    for _ in 0..2 {
        ok(marker_writer_in(laptop, &["sync"]));
        assert_eq!(laptop_stop(laptop, "tests", Some(&world.public())), None);
    }
    ok(push(laptop));
    let fresh = world.clone("fresh");
    ok(marker_writer_in(&fresh, &["sync"]));
    assert_eq!(laptop_stop(&fresh, "tests", Some(&world.public())), None);
}

/// The agent puts junk at the fanout path of CI's note (`8e/4d…`, which git notes reads) and
/// a decoy blob at `8e4/d…` (no note path), as a fast-forward. The laptop puts CI's line back
/// where git notes reads it, not at the decoy, and keeps it.
#[test]
fn a_decoy_path_beside_cis_note_does_not_take_the_put_back() {
    let world = World::new();
    let Attack {
        laptop,
        agent,
        base,
        object,
    } = ci_vouched_and_the_agent_holds_the_notes(&world);
    let junk = git_with_stdin(&agent, &["hash-object", "-w", "--stdin"], b"{\"junk\":1}\n");
    let decoy = git_with_stdin(&agent, &["hash-object", "-w", "--stdin"], b"decoy\n");
    let real = mktree(&agent, &[format!("100644 blob {junk}\t{}", &object[2..])]);
    let other = mktree(&agent, &[format!("100644 blob {decoy}\t{}", &object[3..])]);
    let root = mktree(
        &agent,
        &[
            format!("040000 tree {real}\t{}", &object[..2]),
            format!("040000 tree {other}\t{}", &object[..3]),
        ],
    );
    the_agent_pushes_and_cis_payload_stays(&world, &laptop, &agent, &base, &root, "cut");
}

/// A FIFO or /dev/zero at `.git/commondir`: refused at once, never waited on or read on.
#[test]
fn a_fifo_or_dev_zero_at_commondir_is_refused_at_once() {
    for how in ["fifo", "zero"] {
        let world = World::new();
        let laptop = world.clone("laptop");
        let commondir = laptop.join(".git/commondir");
        if how == "fifo" {
            let status = std::process::Command::new("mkfifo")
                .arg(&commondir)
                .status()
                .unwrap();
            assert!(status.success());
        } else {
            std::os::unix::fs::symlink("/dev/zero", &commondir).unwrap();
        }
        let start = Instant::now();
        let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin!("marker-writer"))
            .env("VIGIL_STATE_HOME", state_home())
            .env_remove("VIGIL_STATE_DIR")
            .env_remove("CLAUDE_PROJECT_DIR")
            .args(["sync", "--timeout", "2"])
            .current_dir(&laptop)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        while child.try_wait().unwrap().is_none() && start.elapsed() < Duration::from_secs(8) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let finished = child.try_wait().unwrap();
        let _ = child.kill();
        let _ = child.wait();
        if how == "fifo" {
            use std::os::unix::fs::OpenOptionsExt;
            let _ = std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&commondir);
        }
        let status = finished.unwrap_or_else(|| panic!("{how}: a 2 s sync ran past 8 s"));
        assert_eq!(status.code(), Some(2), "{how}");
    }
}

/// One commit whose tree names one 1 MiB blob 64 times, under 40 check names: a push of well
/// under 1 MiB. The laptop writes no check's notes over 16 MiB in all, takes at most 32
/// checks, and says what it left out.
#[test]
fn one_small_push_under_many_check_names_does_not_fill_the_disk() {
    let world = World::new();
    let agent = world.clone("agent");
    let mut big = vec![b'a'; (1 << 20) - 1];
    big.push(b'\n');
    let blob = git_with_stdin(&agent, &["hash-object", "-w", "--stdin"], &big);
    let entries: Vec<String> = (1..=64)
        .map(|i| format!("100644 blob {blob}\t{i:040x}"))
        .collect();
    let tree = mktree(&agent, &entries);
    let commit = git(&agent, &["commit-tree", &tree, "-m", "flood"]);
    let small = mktree(&agent, &[format!("100644 blob {blob}\t{:040x}", 1)]);
    let one = git(&agent, &["commit-tree", &small, "-m", "one"]);
    for i in 0..40 {
        let named = if i < 8 { &commit } else { &one };
        git(
            &agent,
            &["update-ref", &format!("refs/notes/vigil/c{i:02}"), named],
        );
    }
    git(
        &agent,
        &[
            "push",
            "-q",
            "origin",
            "refs/notes/vigil/*:refs/notes/vigil/*",
        ],
    );
    let laptop = world.clone("laptop");
    let out = ok(marker_writer_in(&laptop, &["sync", "--timeout", "120"]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("over 16 MiB in all"), "{}", said(&out));
    assert!(
        stderr.contains("8 more checks on the remote"),
        "{}",
        said(&out)
    );
    let written = sizes_under(&protected_dir(&laptop).join("notes"));
    assert!(written <= 24 << 20, "{written} bytes written out");
}

/// The agent deletes the remote's `refs/notes/vigil/tests` and makes `refs/notes/vigil/tests/x`:
/// every push of `tests` would be refused (a ref cannot be a file and a directory). The push
/// deletes what is below the check's name (only while it names what was fetched), and CI's
/// verdict arrives.
#[test]
fn a_remote_ref_below_a_checks_name_does_not_stop_ci_publishing() {
    let world = World::new();
    let head = git(&world.remote, &["rev-parse", "main"]);
    git(
        &world.remote,
        &["update-ref", "refs/notes/vigil/tests/x", &head],
    );
    let ci = world.clone("ci");
    ci_publishes(&ci, "tests", Some(&world.secret()));
    assert_eq!(world.remote_refs(), vec!["refs/notes/vigil/tests"]);
    let laptop = world.clone("laptop");
    ok(marker_writer_in(&laptop, &["sync"]));
    assert_eq!(laptop_stop(&laptop, "tests", Some(&world.public())), None);
}

/// The agent makes a ref `refs/notes/vigil` itself on the remote. No fetch of
/// `refs/notes/vigil/*` sees it, and every push of a check would be refused (a ref cannot be
/// a file and a directory): the push finds it and deletes it (only while it names what it
/// saw), and CI's verdict arrives.
#[test]
fn a_ref_where_the_checks_directory_is_does_not_stop_ci_publishing() {
    let world = World::new();
    let head = git(&world.remote, &["rev-parse", "main"]);
    git(&world.remote, &["update-ref", "refs/notes/vigil", &head]);
    let ci = world.clone("ci");
    ok(marker_writer_in(
        &ci,
        &[
            "run",
            "--publish",
            "--check",
            "tests",
            "--sign-key",
            world.secret().to_str().unwrap(),
            "--",
            "true",
        ],
    ));
    ok(push(&ci));
    assert_eq!(world.remote_refs(), vec!["refs/notes/vigil/tests"]);
    let laptop = world.clone("laptop");
    ok(marker_writer_in(&laptop, &["sync"]));
    assert_eq!(laptop_stop(&laptop, "tests", Some(&world.public())), None);
}

/// The agent pushes onto the remote's notes of `tests` a commit whose tree names one 1 MiB blob
/// 17 times. No sync can merge it (`over 16 MiB in all`), so CI's push would never
/// fast-forward: it replaces the remote's notes (only while they are what it fetched).
#[test]
fn notes_on_the_remote_over_the_total_do_not_stop_ci_publishing() {
    let world = World::new();
    let ci = world.clone("ci");
    ci_publishes(&ci, "tests", Some(&world.secret()));
    let agent = world.clone("agent");
    agent_takes_remote_notes(&agent, "tests");
    let base = git(&agent, &["rev-parse", "refs/notes/vigil/tests"]);
    let mut big = vec![b'a'; (1 << 20) - 1];
    big.push(b'\n');
    let blob = git_with_stdin(&agent, &["hash-object", "-w", "--stdin"], &big);
    let entries: Vec<String> = (1..=17)
        .map(|i| format!("100644 blob {blob}\t{i:040x}"))
        .collect();
    let tree = mktree(&agent, &entries);
    let commit = git(&agent, &["commit-tree", &tree, "-p", &base, "-m", "over"]);
    git(&agent, &["update-ref", "refs/notes/vigil/tests", &commit]);
    git(&agent, &["push", "-q", "origin", "refs/notes/vigil/tests"]);
    // CI tests new content and cannot publish it.
    std::fs::write(ci.join("lib.rs"), "pub fn answer() -> u32 { 43 }\n").unwrap();
    git(&ci, &["commit", "-qam", "next"]);
    ok(marker_writer_in(
        &ci,
        &[
            "run",
            "--publish",
            "--check",
            "tests",
            "--sign-key",
            world.secret().to_str().unwrap(),
            "--",
            "true",
        ],
    ));
    let out = ok(push(&ci));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("a push replaces the remote's"),
        "{}",
        said(&out)
    );
    assert_ne!(
        git(&world.remote, &["rev-parse", "refs/notes/vigil/tests"]),
        commit
    );
    let laptop = world.clone("laptop");
    ok(marker_writer_in(&laptop, &["sync"]));
    assert_eq!(laptop_stop(&laptop, "tests", Some(&world.public())), None);
}

/// The agent deletes CI's note on the remote and puts junk over 1 MiB at the same object's id
/// in capitals (`8E4D…`), which git notes reads as the note of that object. The laptop's
/// put-back takes the capitals away too: it keeps CI's payload, and after its push a fresh
/// clone gets it.
#[test]
fn a_decoy_in_capitals_does_not_take_cis_payload() {
    let world = World::new();
    let Attack {
        laptop,
        agent,
        base,
        object,
    } = ci_vouched_and_the_agent_holds_the_notes(&world);
    let mut big = vec![b'a'; 2 << 20];
    big.push(b'\n');
    let junk = git_with_stdin(&agent, &["hash-object", "-w", "--stdin"], &big);
    let root = mktree(
        &agent,
        &[format!("100644 blob {junk}\t{}", object.to_uppercase())],
    );
    the_agent_pushes_and_cis_payload_stays(&world, &laptop, &agent, &base, &root, "caps");
}

/// The agent pushes 32 tiny notes refs whose names sort before `tests`. A new laptop takes
/// those and says it left `tests` out (which only denies); `sync --check tests` takes it, and
/// later syncs keep it.
#[test]
fn checks_sorting_first_leave_yours_out_only_until_sync_check_names_it() {
    let world = World::new();
    let ci = world.clone("ci");
    ci_publishes(&ci, "tests", Some(&world.secret()));
    let agent = world.clone("agent");
    let tree = git_with_stdin(&agent, &["hash-object", "-w", "-t", "tree", "--stdin"], b"");
    let commit = git(&agent, &["commit-tree", &tree, "-m", "empty"]);
    for i in 0..32 {
        git(
            &agent,
            &["update-ref", &format!("refs/notes/vigil/a{i:02}"), &commit],
        );
    }
    git(
        &agent,
        &[
            "push",
            "-q",
            "origin",
            "refs/notes/vigil/a*:refs/notes/vigil/a*",
        ],
    );
    let laptop = world.clone("laptop");
    let out = ok(marker_writer_in(&laptop, &["sync"]));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("1 more checks on the remote (tests)")
            && String::from_utf8_lossy(&out.stderr).contains("sync --check NAME"),
        "{}",
        said(&out)
    );
    assert!(laptop_stop(&laptop, "tests", Some(&world.public())).is_some());
    ok(marker_writer_in(&laptop, &["sync", "--check", "tests"]));
    assert_eq!(laptop_stop(&laptop, "tests", Some(&world.public())), None);
    ok(marker_writer_in(&laptop, &["sync"]));
    assert_eq!(laptop_stop(&laptop, "tests", Some(&world.public())), None);
}
