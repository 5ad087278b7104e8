//! SPEC §5, markers that travel (issue 19): CI publishes its signed verdict as a git note keyed
//! by the tree it tested, `marker-writer sync` brings it to a laptop, and the laptop's Stop
//! accepts it for exactly that content. A bare remote, a "CI" clone and a "laptop" clone, real
//! git. Here the world the files beside it share, and the agent's moves on it.

mod agents_pushes;
mod ci_template;
mod limits;
mod session_sync;
mod signatures;
mod travel;
mod what_a_sync_runs;

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{Value, json};

use crate::support::*;

/// A tree made with `git mktree` from `lines` (`mode type id\tname`).
fn mktree(dir: &Path, lines: &[String]) -> String {
    let mut text = lines.join("\n");
    text.push('\n');
    git_with_stdin(dir, &["mktree"], text.as_bytes())
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

fn unsigned_payload(check: &str, subject: &str) -> String {
    json!({"schema": "vigil.marker/v2", "check": check, "status": "passed", "subject": subject,
        "created_at": vigil::sys::time::now_rfc3339(),
        "writer": {"name": "marker-writer", "version": "0.1.0", "host": "laptop", "user": "agent"}})
    .to_string()
}

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
        keygen_into(dir.path(), &dir.path().join("keys"));
        let world = World { dir, remote };
        assert!(world_has_main(&world), "clones check out main");
        world
    }

    /// A new world and its clone `laptop`.
    fn with_laptop() -> (World, PathBuf) {
        let world = World::new();
        let laptop = world.clone("laptop");
        (world, laptop)
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

    /// The clones `ci` and `laptop`, and CI's verdict of `tests` published from the first
    /// (signed with the world's key when `signed`): (ci, laptop).
    fn ci_vouched(&self, signed: bool) -> (PathBuf, PathBuf) {
        let ci = self.clone("ci");
        let laptop = self.clone("laptop");
        ci_publishes(&ci, "tests", signed.then(|| self.secret()).as_deref());
        (ci, laptop)
    }

    /// The clone `ci`, CI's verdict of `tests` published from it, signed.
    fn ci_published(&self) -> PathBuf {
        let ci = self.clone("ci");
        ci_publishes(&ci, "tests", Some(&self.secret()));
        ci
    }

    /// The Stop of `clone` requiring `tests`, verified with the world's key, lets it stop.
    #[track_caller]
    fn stop_passes(&self, clone: &Path) {
        assert_eq!(laptop_stop(clone, "tests", Some(&self.public())), None);
    }

    /// `clone` syncs, and its Stop then passes ([`World::stop_passes`]).
    #[track_caller]
    fn syncs_and_passes(&self, clone: &Path) {
        sync(clone);
        self.stop_passes(clone);
    }

    /// A fresh clone `name` that syncs, and whose Stop then passes.
    #[track_caller]
    fn clone_that_passes(&self, name: &str) -> PathBuf {
        let clone = self.clone(name);
        self.syncs_and_passes(&clone);
        clone
    }

    /// A fresh clone `name` that takes the remote's notes of `tests` as its own
    /// ([`agent_takes_remote_notes`]).
    fn clone_with_notes(&self, name: &str) -> PathBuf {
        let clone = self.clone(name);
        agent_takes_remote_notes(&clone, "tests");
        clone
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

/// A world where CI vouched for `tests`, signed, and a laptop that took the remote's notes as
/// its own (as the agent would, to build on them): the world, the laptop, and the tree CI's
/// note is for.
fn laptop_holding_cis_note() -> (World, PathBuf, String) {
    let world = World::new();
    let (_, laptop) = world.ci_vouched(true);
    let tree = tree_of(&laptop);
    agent_takes_remote_notes(&laptop, "tests");
    (world, laptop, tree)
}

/// CI's job: the check run through marker-writer, signed with `key`, published and pushed:
/// what the push said.
fn ci_publishes(clone: &Path, check: &str, key: Option<&Path>) -> Output {
    let mut args = vec!["run", "--publish", "--check", check];
    if let Some(key) = key {
        args.extend(["--sign-key", key.to_str().unwrap()]);
    }
    args.extend(["--", "true"]);
    ok(marker_writer_in(clone, &args));
    ok(push(clone))
}

/// `marker-writer sync` in the clone, which must succeed.
fn sync(clone: &Path) -> Output {
    ok(marker_writer_in(clone, &["sync"]))
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
    let mut args = vec!["--require-marker", check];
    if let Some(key) = key {
        args.extend(["--verify-key", key.to_str().unwrap()]);
    }
    let payload = stop_payload(laptop, "s1", Some("Done."));
    let stop = run_stop(laptop, &args, &[], payload.to_string());
    stop.json.as_ref()?;
    assert!(stop.blocked(), "{:?}", stop.json);
    Some(stop.reason())
}

/// The tree of the clone's content, as the markers name it (`git-tree:` taken off).
fn tree_of(dir: &Path) -> String {
    subject_of(dir)
        .strip_prefix("git-tree:")
        .unwrap()
        .to_string()
}

/// What `marker-writer show --all --check tests ARGS` says in the clone, which must succeed.
fn shown_of_tests(clone: &Path, args: &[&str]) -> String {
    let all = [&["show", "--all", "--check", "tests"][..], args].concat();
    stdout_of(&ok(marker_writer_in(clone, &all)))
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

/// The agent's clone makes a commit of `tree` on `base` its notes of `tests`, and pushes them
/// as a fast-forward: the commit.
fn agent_pushes_tree(agent: &Path, tree: &str, base: &str, message: &str) -> String {
    let commit = git(agent, &["commit-tree", tree, "-p", base, "-m", message]);
    git(agent, &["update-ref", "refs/notes/vigil/tests", &commit]);
    git(agent, &["push", "-q", "origin", "refs/notes/vigil/tests"]);
    commit
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
