//! The worktree subject against an agent that can write anything in the project, `.git/`
//! included (SPEC §5, §9). Each attack starts from a passed marker for good content, breaks the
//! code, hides the change from git, and asks the gate to stop: what is hashed is the bytes on
//! disk, so every one of them is a `subject mismatch`.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use serde_json::{Value, json};

use crate::support::*;

const GOOD: &str = "fn add(a: i32, b: i32) -> i32 { a + b }\n";
/// The same size as `GOOD`, so nothing in the stat data but the times can tell them apart.
const BROKEN: &str = "fn add(a: i32, b: i32) -> i32 { a - b }\n";

fn write_executable(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A repository whose `lib.rs` is good, committed, with a passed `tests` marker for it.
fn marked() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q", "-b", "main"]);
    std::fs::write(dir.path().join("lib.rs"), GOOD).unwrap();
    std::fs::write(dir.path().join(".gitignore"), ".vigil/\n.cache/\n").unwrap();
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["commit", "-qm", "good"]);
    let out = marker_writer_in(dir.path(), &["run", "--check", "tests", "--", "true"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(verify(dir.path()).status.success());
    dir
}

fn verify(dir: &Path) -> Output {
    marker_writer_in(dir, &["verify", "--check", "tests"])
}

/// What `stop-gate --require-marker tests` answers for a Stop in `dir`.
fn gate(dir: &Path, path: Option<&std::ffi::OsStr>) -> Option<Value> {
    let mut cmd = stop_gate();
    cmd.args(["--require-marker", "tests"])
        .current_dir(dir)
        .write_stdin(
            json!({"session_id": "s1", "hook_event_name": "Stop", "cwd": dir, "last_assistant_message": "Done."})
                .to_string(),
        );
    if let Some(path) = path {
        cmd.env("PATH", path);
    }
    let out = cmd.output().unwrap();
    (!out.stdout.is_empty()).then(|| serde_json::from_slice(&out.stdout).unwrap())
}

/// The attack worked on git (it sees no change) and not on vigil (the marker is for other
/// content, and the gate blocks).
fn assert_hidden_from_git_but_not_from_vigil(dir: &Path) {
    assert_eq!(std::fs::read_to_string(dir.join("lib.rs")).unwrap(), BROKEN);
    let out = verify(dir);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
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

#[test]
fn an_index_entry_rewritten_to_the_old_blob_and_the_new_stat_data_hides_nothing() {
    let dir = marked();
    break_in_the_past(dir.path());
    // The agent rewrites the index: the entry keeps the good blob's id, with the stat data
    // of the broken file, so git takes the file for unchanged without reading it.
    let index_path = dir.path().join(".git/index");
    let mut index = gix_index::File::at(
        &index_path,
        gix_index::hash::Kind::Sha1,
        false,
        Default::default(),
    )
    .unwrap();
    let meta = gix_index::fs::Metadata::from_path_no_follow(&dir.path().join("lib.rs")).unwrap();
    let stat = gix_index::entry::Stat::from_fs(&meta).unwrap();
    let entries = index.entries_mut();
    let entry = entries
        .iter_mut()
        .find(|e| e.stat.size == GOOD.len() as u32)
        .unwrap();
    entry.stat = stat;
    index.write(Default::default(), Default::default()).unwrap();
    git_sees_nothing(dir.path());
    assert_hidden_from_git_but_not_from_vigil(dir.path());
}

#[test]
fn a_cached_tree_set_back_to_the_old_tree_hides_nothing() {
    let dir = marked();
    let good_tree = git(dir.path(), &["write-tree"]);
    break_in_the_past(dir.path());
    // Every file older than the index, so git trusts the stat data of each (none is "racy").
    let aged = std::process::Command::new("touch")
        .args(["-d", "1 hour ago", ".gitignore"])
        .current_dir(dir.path())
        .status()
        .unwrap();
    assert!(aged.success());
    git(dir.path(), &["commit", "-qam", "broken"]);
    let broken_tree = git(dir.path(), &["write-tree"]);
    // The index's cached tree (its TREE extension) now names the broken tree: set it back to
    // the good one, and the index checksum with it.
    let index_path = dir.path().join(".git/index");
    let mut bytes = std::fs::read(&index_path).unwrap();
    let unhex = |hex: &str| -> Vec<u8> {
        (0..20)
            .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
            .collect()
    };
    let (from, to) = (unhex(&broken_tree), unhex(&good_tree));
    let at = bytes
        .windows(20)
        .position(|w| w == from.as_slice())
        .expect("the index caches the tree");
    bytes[at..at + 20].copy_from_slice(&to);
    let body = bytes.len() - 20;
    let mut hasher = sha1dc::Hasher::new();
    hasher.update(&bytes[..body]);
    let sum: [u8; 20] = hasher.finalize().unwrap().into();
    bytes[body..].copy_from_slice(&sum);
    std::fs::write(&index_path, &bytes).unwrap();
    // Refreshed, the index is clean in every stat field and still names the good tree.
    git(dir.path(), &["update-index", "--refresh"]);
    assert_eq!(
        git(dir.path(), &["write-tree"]),
        good_tree,
        "git believes it"
    );
    git_sees_nothing(dir.path());
    assert_hidden_from_git_but_not_from_vigil(dir.path());
}

#[test]
fn core_worktree_pointed_at_a_pristine_copy_moves_nothing() {
    let dir = marked();
    let pristine = dir.path().join(".cache/pristine");
    std::fs::create_dir_all(&pristine).unwrap();
    for name in ["lib.rs", ".gitignore"] {
        std::fs::copy(dir.path().join(name), pristine.join(name)).unwrap();
    }
    git(
        dir.path(),
        &["config", "core.worktree", pristine.to_str().unwrap()],
    );
    std::fs::write(dir.path().join("lib.rs"), BROKEN).unwrap();
    git_sees_nothing(dir.path());
    assert_hidden_from_git_but_not_from_vigil(dir.path());
}

#[test]
fn a_clean_filter_bound_in_info_attributes_changes_nothing_hashed() {
    let dir = marked();
    let pristine = dir.path().join(".cache/lib.rs");
    std::fs::create_dir_all(pristine.parent().unwrap()).unwrap();
    std::fs::write(&pristine, GOOD).unwrap();
    let clean = format!("cat {}", pristine.display());
    git(dir.path(), &["config", "filter.hide.clean", &clean]);
    std::fs::write(
        dir.path().join(".git/info/attributes"),
        "lib.rs filter=hide\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("lib.rs"), BROKEN).unwrap();
    git_sees_nothing(dir.path());
    assert_hidden_from_git_but_not_from_vigil(dir.path());
}

/// A script broken by CRLF line endings (`/bin/sh\r` is no interpreter) that `core.autocrlf`
/// makes git read as the LF original.
#[test]
fn autocrlf_changes_nothing_hashed() {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q", "-b", "main"]);
    write_executable(&dir.path().join("run.sh"), "#!/bin/sh\necho ok\n");
    std::fs::write(dir.path().join(".gitignore"), ".vigil/\n").unwrap();
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["commit", "-qm", "script"]);
    assert!(
        marker_writer_in(dir.path(), &["run", "--check", "tests", "--", "./run.sh"])
            .status
            .success()
    );
    git(dir.path(), &["config", "core.autocrlf", "true"]);
    std::fs::write(dir.path().join("run.sh"), "#!/bin/sh\r\necho ok\r\n").unwrap();
    // Staged, it is the same blob to git as the LF original.
    git(dir.path(), &["add", "run.sh"]);
    git_sees_nothing(dir.path());
    let out = verify(dir.path());
    let line = assert_one_line_error(&out, "marker-writer");
    assert!(line.contains("subject mismatch"), "{line}");
}

/// A filter that never returns would hold a git-based gate past the engine's hook timeout,
/// and the engine then lets the stop through unchecked. No git runs on the gate's path: a
/// `git` that hangs, or none at all, changes nothing.
#[test]
fn a_hanging_filter_or_git_cannot_hold_the_gate() {
    let dir = marked();
    git(dir.path(), &["config", "filter.hang.clean", "sleep 600"]);
    std::fs::write(
        dir.path().join(".git/info/attributes"),
        "lib.rs filter=hang\n",
    )
    .unwrap();
    let bin = tempfile::tempdir().unwrap();
    let fake = bin.path().join("git");
    write_executable(&fake, "#!/bin/sh\nsleep 600\n");
    let path = std::ffi::OsString::from(bin.path());
    let started = Instant::now();
    assert_eq!(
        gate(dir.path(), Some(&path)),
        None,
        "the good content passes"
    );
    std::fs::write(dir.path().join("lib.rs"), BROKEN).unwrap();
    let decision = gate(dir.path(), Some(&path)).expect("the broken content blocks");
    assert_eq!(decision["decision"], "block");
    assert!(started.elapsed() < Duration::from_secs(5));
}

/// `marker-writer run` in place hashes before and after: content swapped in while the tests
/// run and swapped back before the end passes them unseen, and the marker says `passed` for
/// the broken tree. That is why an in-place run is for writers the agent cannot reach (CI).
/// With `--snapshot` the tests run on a private copy of exactly what was hashed.
#[test]
fn a_swap_during_the_run_fools_an_in_place_run_and_never_a_snapshot() {
    for snapshot in [false, true] {
        let dir = marked();
        std::fs::write(dir.path().join("lib.rs"), BROKEN).unwrap();
        let sync = tempfile::tempdir().unwrap();
        let s = sync.path().display().to_string();
        // The tests: started, wait for the good content, test, wait for the swap back.
        let command = format!(
            "touch {s}/started; until [ -f {s}/good ]; do sleep 0.02; done; \
             grep -q 'a + b' lib.rs; r=$?; touch {s}/tested; \
             until [ -f {s}/back ]; do sleep 0.02; done; exit $r"
        );
        let mut args = vec!["run", "--check", "tests"];
        if snapshot {
            // Confined, the command sees only what it may write: the test's rendezvous too.
            args.extend(["--snapshot", "--check-write", &s]);
        }
        args.extend(["--", "sh", "-c", &command]);
        let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin!("marker-writer"))
            .args(&args)
            .current_dir(dir.path())
            .env("VIGIL_STATE_HOME", state_home())
            .env_remove("VIGIL_STATE_DIR")
            .spawn()
            .unwrap();
        let wait = |name: &str| {
            let deadline = Instant::now() + Duration::from_secs(20);
            while !sync.path().join(name).exists() {
                assert!(Instant::now() < deadline, "no {name}");
                std::thread::sleep(Duration::from_millis(10));
            }
        };
        wait("started");
        std::fs::write(dir.path().join("lib.rs"), GOOD).unwrap();
        std::fs::write(sync.path().join("good"), "").unwrap();
        wait("tested");
        std::fs::write(dir.path().join("lib.rs"), BROKEN).unwrap();
        std::fs::write(sync.path().join("back"), "").unwrap();
        let status = child.wait().unwrap();
        let passed_for_broken = verify(dir.path()).status.success();
        if snapshot {
            assert_eq!(status.code(), Some(1), "the tests ran on the broken copy");
            assert!(!passed_for_broken);
            let payload: Value = serde_json::from_slice(
                &marker_writer_in(dir.path(), &["show", "--check", "tests"]).stdout,
            )
            .unwrap();
            assert_eq!(payload["status"], "failed");
            assert_eq!(payload["run"]["isolation"], "snapshot");
            assert_eq!(payload["run"]["confinement"], "bubblewrap");
            assert_valid("marker.schema.json", &payload);
        } else {
            assert!(status.success());
            assert!(passed_for_broken, "the documented limit of an in-place run");
        }
    }
}

// --- What the snapshot holds ------------------------------------------------------------------

#[test]
fn a_snapshot_run_sees_exactly_the_hashed_content_in_a_clean_environment() {
    let dir = marked();
    std::fs::create_dir_all(dir.path().join("src/deep")).unwrap();
    std::fs::write(dir.path().join("src/deep/a.txt"), "a\n").unwrap();
    std::fs::write(dir.path().join("ignored.log"), "noise\n").unwrap();
    std::fs::write(dir.path().join(".gitignore"), ".vigil/\n.cache/\n*.log\n").unwrap();
    std::os::unix::fs::symlink("lib.rs", dir.path().join("link")).unwrap();
    let out = marker_writer()
        .args([
            "run",
            "--check",
            "tests",
            "--snapshot",
            "--keep-env",
            "KEPT",
            "--",
            "sh",
            "-c",
            "find . -print | sort; echo \"secret=${SECRET-unset} kept=${KEPT-unset}\"; pwd",
        ])
        .current_dir(dir.path().join("src"))
        .env("SECRET", "s3")
        .env("KEPT", "k")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Started in src/, it runs at the copy's top level, as the gate runs its check (SPEC §2):
    // the hashed files, and the confinement's read-only stand-ins (.claude, .git, …) only.
    let listing: Vec<&str> = said.lines().take_while(|l| l.starts_with('.')).collect();
    let files: Vec<&str> = listing
        .iter()
        .copied()
        .filter(|l| {
            ![
                "./.claude",
                "./.codex",
                "./.git",
                "./.idea",
                "./.mcp.json",
                "./.vscode",
            ]
            .contains(l)
        })
        .collect();
    assert_eq!(
        files,
        [
            ".",
            "./.gitignore",
            "./lib.rs",
            "./link",
            "./src",
            "./src/deep",
            "./src/deep/a.txt"
        ],
        "started at the copy's top level: {said}"
    );
    assert!(said.contains("secret=unset kept=k"), "{said}");
    let pwd = said.lines().last().unwrap();
    assert!(!pwd.starts_with(dir.path().to_str().unwrap()), "{pwd}");
    assert!(!pwd.ends_with("/src"), "{pwd}");
}

#[test]
fn a_snapshot_copy_keeps_modes_and_links_and_leaves_nothing_behind() {
    let dir = marked();
    write_executable(&dir.path().join("tool.sh"), "#!/bin/sh\necho tool\n");
    std::os::unix::fs::symlink("tool.sh", dir.path().join("tool")).unwrap();
    let out = marker_writer_in(
        dir.path(),
        &["run", "--check", "tests", "--snapshot", "--", "./tool"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "tool\n");
    // The marker is for the worktree as it is, and the copy is gone.
    assert!(verify(dir.path()).status.success());
    let snapshots: Vec<PathBuf> = walk_files(state_home())
        .into_iter()
        .filter(|p| p.to_string_lossy().contains("/snapshots/run-"))
        .collect();
    assert!(snapshots.is_empty(), "{snapshots:?}");
}

fn walk_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if entry.file_type().unwrap().is_dir() {
            out.extend(walk_files(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[test]
fn snapshot_needs_the_worktree_subject_and_keep_env_needs_snapshot() {
    let dir = marked();
    for args in [
        &[
            "run",
            "--check",
            "t",
            "--snapshot",
            "--subject",
            "file:lib.rs",
            "--",
            "true",
        ][..],
        &["run", "--check", "t", "--keep-env", "X", "--", "true"][..],
    ] {
        let out = marker_writer_in(dir.path(), args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_one_line_error(&out, "marker-writer");
    }
}

// --- Every case of §5 -------------------------------------------------------------------------

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
    let run = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .env("GIT_INDEX_FILE", &index)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    run(&["add", "-A"]);
    run(&["write-tree"])
}

fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q", "-b", "main"]);
    dir
}

#[test]
fn tracked_files_inside_ignored_directories_count_and_untracked_ignored_ones_do_not() {
    let dir = repo();
    std::fs::create_dir_all(dir.path().join("build")).unwrap();
    std::fs::write(dir.path().join("build/kept.txt"), "tracked\n").unwrap();
    git(dir.path(), &["add", "-A"]);
    std::fs::write(dir.path().join(".gitignore"), "build/\n*.tmp\n").unwrap();
    std::fs::write(dir.path().join("build/noise.txt"), "untracked\n").unwrap();
    std::fs::write(dir.path().join("scratch.tmp"), "untracked\n").unwrap();
    let before = subject(dir.path()).unwrap();
    assert_eq!(before, gits_tree(dir.path()));
    std::fs::write(dir.path().join("build/kept.txt"), "changed\n").unwrap();
    assert_ne!(
        subject(dir.path()).unwrap(),
        before,
        "a tracked file counts"
    );
    std::fs::write(dir.path().join("build/kept.txt"), "tracked\n").unwrap();
    std::fs::write(dir.path().join("build/noise.txt"), "changed\n").unwrap();
    assert_eq!(
        subject(dir.path()).unwrap(),
        before,
        "an ignored one does not"
    );
}

#[test]
fn symlinks_are_hashed_as_links_and_never_followed() {
    let dir = repo();
    std::fs::write(dir.path().join("target.txt"), "a\n").unwrap();
    std::os::unix::fs::symlink("target.txt", dir.path().join("link")).unwrap();
    std::os::unix::fs::symlink("loop", dir.path().join("loop")).unwrap();
    std::os::unix::fs::symlink("/etc", dir.path().join("outside")).unwrap();
    let id = subject(dir.path()).unwrap();
    assert_eq!(id, gits_tree(dir.path()));
    std::fs::write(dir.path().join("target.txt"), "b\n").unwrap();
    assert_ne!(subject(dir.path()).unwrap(), id);
}

#[test]
fn untracked_fifos_and_sockets_are_skipped_and_a_tracked_one_denies() {
    let dir = repo();
    std::fs::write(dir.path().join("a.txt"), "a\n").unwrap();
    let fifo = dir.path().join("pipe");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let _socket = std::os::unix::net::UnixListener::bind(dir.path().join("sock")).unwrap();
    let started = Instant::now();
    assert_eq!(subject(dir.path()).unwrap(), gits_tree(dir.path()));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "waited on the FIFO"
    );
    // A tracked file that is now a FIFO: git cannot add it, and vigil denies.
    std::fs::remove_file(&fifo).unwrap();
    std::fs::write(&fifo, "was a file\n").unwrap();
    git(dir.path(), &["add", "pipe"]);
    std::fs::remove_file(&fifo).unwrap();
    std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    let line = subject(dir.path()).unwrap_err();
    assert!(line.contains("pipe is tracked but is now a FIFO"), "{line}");
}

#[test]
fn a_file_over_the_size_limit_denies_at_once() {
    let dir = repo();
    let big = std::fs::File::create(dir.path().join("huge.bin")).unwrap();
    big.set_len(1 << 40).unwrap();
    let started = Instant::now();
    let line = subject(dir.path()).unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(
        line.contains("huge.bin is 1099511627776 bytes, over the 1073741824 of --max-file-size"),
        "{line}"
    );
    drop(big);
    std::fs::remove_file(dir.path().join("huge.bin")).unwrap();
    std::fs::write(dir.path().join("small.bin"), vec![7u8; 2048]).unwrap();
    let write = |size: &str| {
        let args = ["write", "--check", "t", "--status", "passed"];
        marker_writer_in(
            dir.path(),
            &[&args[..], &["--max-file-size", size]].concat(),
        )
    };
    let out = write("1K");
    assert_eq!(out.status.code(), Some(2));
    assert!(assert_one_line_error(&out, "marker-writer").contains("small.bin is 2048 bytes"));
    assert!(write("2K").status.success());
    for bad in ["", "K", "1.5G", "-1", "1P", "99999999999T"] {
        assert_eq!(write(bad).status.code(), Some(2), "{bad:?}");
    }
}

#[test]
fn an_unreadable_file_denies() {
    let dir = repo();
    std::fs::write(dir.path().join("secret.txt"), "s\n").unwrap();
    std::fs::set_permissions(
        dir.path().join("secret.txt"),
        std::fs::Permissions::from_mode(0o000),
    )
    .unwrap();
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin!("marker-writer"));
    // As root every file is readable: the check runs as nobody, who can read the rest.
    // SAFETY: geteuid cannot fail and touches no memory.
    if unsafe { libc::geteuid() } == 0 {
        for path in [dir.path(), dir.path().parent().unwrap()] {
            let mode = std::fs::metadata(path).unwrap().permissions().mode();
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode | 0o755)).unwrap();
        }
        std::process::Command::new("chmod")
            .args(["-R", "a+rX", ".git"])
            .current_dir(dir.path())
            .status()
            .unwrap();
        let switch = std::process::Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "true"])
            .status()
            .unwrap();
        assert!(
            switch.success(),
            "as root, this test reads the file as uid 65534, and setpriv cannot switch here (a user namespace that maps root alone?)"
        );
        cmd = std::process::Command::new("setpriv");
        cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(assert_cmd::cargo::cargo_bin!("marker-writer"));
    }
    let out = cmd
        .args(["verify", "--check", "t"])
        .current_dir(dir.path())
        .env("VIGIL_STATE_HOME", "/nonexistent-vigil-state")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let line = assert_one_line_error(&out, "marker-writer");
    assert!(
        line.to_lowercase()
            .contains("cannot read secret.txt: permission denied"),
        "{line}"
    );
}

#[test]
fn a_path_with_a_newline_is_hashed_as_git_hashes_it() {
    let dir = repo();
    std::fs::write(dir.path().join("two\nlines"), "x\n").unwrap();
    std::fs::write(dir.path().join("tab\tand space"), "y\n").unwrap();
    std::fs::write(dir.path().join("é"), "z\n").unwrap();
    assert_eq!(subject(dir.path()).unwrap(), gits_tree(dir.path()));
}

#[test]
fn a_submodule_a_nested_repository_and_a_sparse_checkout_deny_with_one_line() {
    let dir = repo();
    std::fs::write(dir.path().join("a.txt"), "a\n").unwrap();
    // A nested repository that is not ignored.
    let nested = dir.path().join("vendor/lib");
    std::fs::create_dir_all(&nested).unwrap();
    git(&nested, &["init", "-q"]);
    let line = subject(dir.path()).unwrap_err();
    assert!(
        line.contains("vendor/lib is a nested git repository"),
        "{line}"
    );
    // Ignored, it is nothing the subject names.
    std::fs::write(dir.path().join(".gitignore"), "vendor/\n").unwrap();
    assert_eq!(subject(dir.path()).unwrap(), gits_tree(dir.path()));
    // A submodule: a gitlink in the index.
    let head = "0123456789012345678901234567890123456789";
    git(
        dir.path(),
        &[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("160000,{head},sub"),
        ],
    );
    let line = subject(dir.path()).unwrap_err();
    assert!(line.contains("sub is a submodule"), "{line}");
    git(dir.path(), &["update-index", "--force-remove", "sub"]);
    // A sparse checkout.
    std::fs::create_dir_all(dir.path().join("docs")).unwrap();
    std::fs::write(dir.path().join("docs/d.txt"), "d\n").unwrap();
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["commit", "-qm", "files"]);
    git(
        dir.path(),
        &["sparse-checkout", "set", "--no-cone", "/a.txt"],
    );
    let line = subject(dir.path()).unwrap_err();
    assert!(line.contains("sparse checkout"), "{line}");
}

#[test]
fn a_linked_worktree_is_hashed_from_its_own_files() {
    let dir = marked();
    let linked = tempfile::tempdir().unwrap();
    let path = linked.path().join("wt");
    git(
        dir.path(),
        &["worktree", "add", "-q", path.to_str().unwrap()],
    );
    assert_eq!(subject(&path).unwrap(), gits_tree(&path));
    std::fs::write(path.join("lib.rs"), BROKEN).unwrap();
    assert_eq!(subject(&path).unwrap(), gits_tree(&path));
    assert_ne!(subject(&path).unwrap(), subject(dir.path()).unwrap());
}

// --- Against git, on random trees ---------------------------------------------------------------

/// One thing in a random tree.
#[derive(Clone, Debug)]
enum Item {
    File {
        path: String,
        body: u8,
        exec: bool,
    },
    Link {
        path: String,
        target: String,
    },
    Dir {
        path: String,
    },
    Fifo {
        path: String,
    },
    Ignore {
        dir: String,
        pattern: String,
    },
    /// Tracked with `git add -f`, before the ignore rules are written.
    Forced {
        path: String,
    },
}

fn items() -> impl Strategy<Value = Vec<Item>> {
    let name = prop::sample::select(vec![
        "a", "b", "a.b", "a-", "a.txt", "x.log", "build", "keep.log", "Z", ".hidden", "sp ace",
        "é", "a0",
    ]);
    let path = prop::collection::vec(name, 1..4).prop_map(|parts| parts.join("/"));
    let pattern = prop::sample::select(vec![
        "*.log",
        "build/",
        "!keep.log",
        "/a",
        "a*",
        "*.b",
        "b/",
        "**/x.log",
        ".hidden",
        "Z",
    ]);
    let dir = prop::sample::select(vec!["", "a", "build", "b/a"]);
    let item = prop_oneof![
        6 => (path.clone(), any::<u8>(), any::<bool>())
            .prop_map(|(path, body, exec)| Item::File { path, body, exec }),
        1 => (path.clone(), prop::sample::select(vec!["a", "a.b/x", "nowhere", "/nonexistent"]))
            .prop_map(|(path, target)| Item::Link { path, target: target.into() }),
        1 => path.clone().prop_map(|path| Item::Dir { path }),
        1 => path.clone().prop_map(|path| Item::Fifo { path }),
        2 => (dir, pattern).prop_map(|(dir, pattern)| Item::Ignore {
            dir: dir.into(),
            pattern: pattern.into(),
        }),
        2 => path.prop_map(|path| Item::Forced { path }),
    ];
    prop::collection::vec(item, 0..24)
}

/// Makes the directories above `path` inside `top`, never through a symlink (a link may
/// point outside the test's directory); false when something else stands in the way or
/// `path` exists already.
fn make_parents(top: &Path, path: &Path) -> bool {
    let relative = path.strip_prefix(top).unwrap();
    let mut at = top.to_path_buf();
    let parts: Vec<_> = relative.components().collect();
    for part in &parts[..parts.len() - 1] {
        at.push(part);
        match at.symlink_metadata() {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => return false,
            Err(_) => std::fs::create_dir(&at).unwrap(),
        }
    }
    path.symlink_metadata().is_err()
}

/// Makes the tree; a path that collides with what is there already is skipped.
fn build(dir: &Path, items: &[Item]) {
    let parent_ok = |path: &Path| make_parents(dir, path);
    for item in items {
        match item {
            Item::File { path, body, exec } => {
                let path = dir.join(path);
                if parent_ok(&path) {
                    std::fs::write(&path, format!("body {body}\n")).unwrap();
                    if *exec {
                        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
                            .unwrap();
                    }
                }
            }
            Item::Link { path, target } => {
                let path = dir.join(path);
                if parent_ok(&path) {
                    std::os::unix::fs::symlink(target, &path).unwrap();
                }
            }
            Item::Dir { path } => {
                let path = dir.join(path);
                if parent_ok(&path) {
                    std::fs::create_dir(&path).unwrap();
                }
            }
            Item::Fifo { path } => {
                let path = dir.join(path);
                if parent_ok(&path) {
                    std::process::Command::new("mkfifo")
                        .arg(&path)
                        .status()
                        .unwrap();
                }
            }
            Item::Forced { path } => {
                let full = dir.join(path);
                if parent_ok(&full) {
                    std::fs::write(&full, "forced\n").unwrap();
                    git(dir, &["add", "-f", "--", path]);
                }
            }
            Item::Ignore { .. } => {}
        }
    }
    for item in items {
        if let Item::Ignore { dir: sub, pattern } = item {
            let at = dir.join(sub);
            if at.is_dir() && at.symlink_metadata().is_ok_and(|m| m.is_dir()) {
                let file = at.join(".gitignore");
                if file.symlink_metadata().map_or(true, |m| m.is_file()) {
                    let mut text = std::fs::read_to_string(&file).unwrap_or_default();
                    text.push_str(pattern);
                    text.push('\n');
                    std::fs::write(&file, text).unwrap();
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// vigil's subject equals `git add -A && git write-tree`, for any tree of files, modes,
    /// links, nested ignore files, ignored and untracked files, tracked files in ignored
    /// directories, empty directories and FIFOs.
    #[test]
    fn the_worktree_subject_is_what_git_add_all_and_write_tree_make(items in items()) {
        let dir = repo();
        build(dir.path(), &items);
        let ours = subject(dir.path());
        let theirs = gits_tree(dir.path());
        prop_assert_eq!(ours, Ok(theirs), "{:?}", items);
    }
}

// --- What the agent can write into .git/ and the ignore files ----------------------------------

/// An index of version 2 naming `paths` (each a blob of `lib.rs`'s id), written by hand: git
/// itself refuses to write most of what these tests need.
fn write_index(dir: &Path, paths: &[&[u8]]) {
    let mut paths = paths.to_vec();
    paths.sort();
    let mut bytes = b"DIRC".to_vec();
    bytes.extend_from_slice(&2u32.to_be_bytes());
    bytes.extend_from_slice(&(paths.len() as u32).to_be_bytes());
    let blob = git(dir, &["hash-object", "lib.rs"]);
    let id: Vec<u8> = (0..20)
        .map(|i| u8::from_str_radix(&blob[2 * i..2 * i + 2], 16).unwrap())
        .collect();
    for path in paths {
        let start = bytes.len();
        bytes.extend_from_slice(&[0u8; 24]); // ctime, mtime, dev, ino
        bytes.extend_from_slice(&0o100644u32.to_be_bytes());
        bytes.extend_from_slice(&[0u8; 12]); // uid, gid, size
        bytes.extend_from_slice(&id);
        bytes.extend_from_slice(&(path.len().min(0xfff) as u16).to_be_bytes());
        bytes.extend_from_slice(path);
        // NUL-padded to a multiple of 8, with at least one NUL.
        let len = bytes.len() - start;
        bytes.extend(std::iter::repeat_n(0u8, 8 - len % 8));
    }
    let mut hasher = sha1dc::Hasher::new();
    hasher.update(&bytes);
    let sum: [u8; 20] = hasher.finalize().unwrap().into();
    bytes.extend_from_slice(&sum);
    std::fs::write(dir.join(".git/index"), bytes).unwrap();
}

/// Paths git never tracks, planted in the index: each denies with one line, writes nothing
/// outside the snapshot, and never hangs or eats memory (a leading `/` once sent the tree
/// builder round forever; `..` let a snapshot run copy files out of its directory, a trusted
/// key into the state home among them).
#[test]
fn an_index_path_git_would_never_track_denies() {
    let outside = tempfile::tempdir().unwrap();
    let planted = outside.path().join("planted");
    for bad in [
        format!("{}", planted.display()),
        "../planted".to_string(),
        "src//lib.rs".to_string(),
        "./lib.rs".to_string(),
        "src/../lib.rs".to_string(),
        ".GIT/config".to_string(),
        "src/.git/x".to_string(),
    ] {
        let dir = marked();
        write_index(dir.path(), &[b".gitignore", b"lib.rs", bad.as_bytes()]);
        for args in [
            &["verify", "--check", "tests"][..],
            &["run", "--check", "x", "--snapshot", "--", "true"][..],
        ] {
            let out = marker_writer_in(dir.path(), args);
            assert_eq!(out.status.code(), Some(2), "{bad:?} {args:?}");
            let line = assert_one_line_error(&out, "marker-writer");
            assert!(line.contains("which git never tracks"), "{line}");
        }
        assert!(!planted.exists(), "{bad:?} wrote outside the snapshot");
        assert!(!dir.path().parent().unwrap().join("planted").exists());
    }
}

#[test]
fn an_unmerged_path_is_one_entry_of_the_tree() {
    let dir = repo();
    std::fs::write(dir.path().join("a.txt"), "base\n").unwrap();
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["commit", "-qm", "base"]);
    git(dir.path(), &["checkout", "-qb", "other"]);
    std::fs::write(dir.path().join("a.txt"), "other\n").unwrap();
    git(dir.path(), &["commit", "-qam", "other"]);
    git(dir.path(), &["checkout", "-q", "main"]);
    std::fs::write(dir.path().join("a.txt"), "main\n").unwrap();
    git(dir.path(), &["commit", "-qam", "main"]);
    let merge = git_output(dir.path(), &["merge", "-q", "other"]);
    assert!(!merge.status.success(), "the merge conflicts");
    assert_eq!(subject(dir.path()).unwrap(), gits_tree(dir.path()));
}

/// A FIFO for the index, or a huge ignore file, once made the gate hang or run out of memory,
/// and an engine that kills a hung hook lets the stop through. Each denies at once.
#[test]
fn a_fifo_index_or_a_huge_ignore_file_denies_at_once() {
    let fifo = |path: &Path| {
        assert!(
            std::process::Command::new("mkfifo")
                .arg(path)
                .status()
                .unwrap()
                .success()
        );
    };
    type Plant<'a> = Box<dyn Fn(&Path) + 'a>;
    let cases: [(&str, Plant); 4] = [
        (
            "cannot read the index",
            Box::new(|dir| {
                std::fs::remove_file(dir.join(".git/index")).unwrap();
                fifo(&dir.join(".git/index"));
            }),
        ),
        (
            "bytes, over the 1048576 read",
            Box::new(|dir| {
                let file = std::fs::File::create(dir.join(".git/info/exclude")).unwrap();
                file.set_len(8 << 30).unwrap();
            }),
        ),
        (
            "is not UTF-8",
            Box::new(|dir| {
                std::fs::write(dir.join(".gitignore"), b"*.rs\n!\xffevil.rs\n").unwrap()
            }),
        ),
        (
            "uses a bracket form",
            Box::new(|dir| std::fs::write(dir.join(".gitignore"), "[a\\]]\n").unwrap()),
        ),
    ];
    for (said, plant) in cases {
        let dir = marked();
        plant(dir.path());
        let started = Instant::now();
        let out = verify(dir.path());
        assert_eq!(out.status.code(), Some(2), "{said}");
        let line = assert_one_line_error(&out, "marker-writer");
        assert!(line.contains(said), "{line}");
        let decision = gate(dir.path(), None).expect("the gate blocks");
        assert_eq!(decision["decision"], "block");
        assert!(started.elapsed() < Duration::from_secs(10), "{said}");
    }
}

/// In a snapshot a link out of the tree would read the live file, which no marker vouches for.
#[test]
fn a_snapshot_refuses_a_link_out_of_the_tree() {
    let dir = marked();
    let live = dir.path().join(".cache/lib.rs");
    std::fs::create_dir_all(live.parent().unwrap()).unwrap();
    std::fs::write(&live, GOOD).unwrap();
    for target in [live.to_str().unwrap(), "../outside"] {
        let link = dir.path().join("linked.rs");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(target, &link).unwrap();
        let out = marker_writer_in(
            dir.path(),
            &["run", "--check", "x", "--snapshot", "--", "true"],
        );
        assert_eq!(out.status.code(), Some(2), "{target}");
        let line = assert_one_line_error(&out, "marker-writer");
        assert!(line.contains("linked.rs is a symlink to"), "{line}");
        // In place, a link is hashed as a link, as git hashes it.
        assert!(subject(dir.path()).is_ok());
    }
}

/// A link whose target reads as inside the tree can leave it through another link: `z ->
/// a/top/..` reads as `a`, but `a/top -> ..` makes it the parent of the copy. Judged by where
/// it resolves, it is refused, and a loop of links too; a link that really stays inside runs.
#[test]
fn a_snapshot_refuses_a_link_that_leaves_through_another_link() {
    let dir = marked();
    std::fs::create_dir_all(dir.path().join("a")).unwrap();
    std::os::unix::fs::symlink("..", dir.path().join("a/top")).unwrap();
    std::os::unix::fs::symlink("a/top/..", dir.path().join("z")).unwrap();
    let out = marker_writer_in(
        dir.path(),
        &["run", "--check", "x", "--snapshot", "--", "true"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    let line = assert_one_line_error(&out, "marker-writer");
    assert!(
        line.contains("z is a symlink that leads out of the tree through another link"),
        "{line}"
    );
    std::fs::remove_file(dir.path().join("z")).unwrap();
    std::os::unix::fs::symlink("a/top/lib.rs", dir.path().join("z")).unwrap();
    let out = marker_writer_in(
        dir.path(),
        &["run", "--check", "x", "--snapshot", "--", "true"],
    );
    assert!(out.status.success(), "{}", said(&out));
    std::os::unix::fs::symlink("loop", dir.path().join("loop")).unwrap();
    let out = marker_writer_in(
        dir.path(),
        &["run", "--check", "x", "--snapshot", "--", "true"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(said(&out).contains("loop of links"), "{}", said(&out));
}

/// A key trusted for the project's top is found however the agent moves the top: a `.git`
/// planted in the session's subdirectory, or the project's `.git` made a symlink so the search
/// ends in a parent repository.
#[test]
fn a_trusted_key_holds_wherever_the_agent_moves_the_top() {
    let keys = tempfile::tempdir().unwrap();
    let out = marker_writer_in(
        keys.path(),
        &["keygen", "--out", keys.path().join("ci").to_str().unwrap()],
    );
    assert!(out.status.success());
    let (secret, public) = (
        keys.path().join("ci/vigil-marker.key"),
        keys.path().join("ci/vigil-marker.pub"),
    );
    let parent = repo();
    std::fs::write(parent.path().join(".gitignore"), "*\n").unwrap();
    let dir = parent.path().join("project");
    std::fs::create_dir_all(dir.join("app")).unwrap();
    git(&dir, &["init", "-q", "-b", "main"]);
    std::fs::write(dir.join("app/main.py"), "print(1)\n").unwrap();
    std::fs::write(dir.join(".gitignore"), ".vigil/\n").unwrap();
    git(&dir, &["add", "-A"]);
    git(&dir, &["commit", "-qm", "app"]);
    assert!(
        marker_writer_in(&dir, &["trust", public.to_str().unwrap()])
            .status
            .success()
    );
    let sign = secret.to_str().unwrap();
    let out = marker_writer_in(
        &dir,
        &["run", "--check", "tests", "--sign-key", sign, "--", "true"],
    );
    assert!(out.status.success());
    let unsigned_passes = |at: &Path, project: &Path| {
        let written = marker_writer()
            .args(["write", "--check", "tests", "--status", "passed"])
            .current_dir(at)
            .env("CLAUDE_PROJECT_DIR", project)
            .output()
            .unwrap();
        assert!(written.status.success());
        marker_writer()
            .args(["verify", "--check", "tests"])
            .current_dir(at)
            .env("CLAUDE_PROJECT_DIR", project)
            .output()
            .unwrap()
            .status
            .success()
    };
    // Down: a repository planted in app/.
    std::fs::create_dir_all(dir.join("app/.git")).unwrap();
    std::fs::write(dir.join("app/.git/HEAD"), "ref: refs/heads/main\n").unwrap();
    assert!(!unsigned_passes(&dir.join("app"), &dir.join("app")));
    std::fs::remove_dir_all(dir.join("app/.git")).unwrap();
    // Up: .git made a symlink, which the search does not take for a repository.
    std::fs::rename(dir.join(".git"), dir.join(".git-real")).unwrap();
    std::os::unix::fs::symlink(".git-real", dir.join(".git")).unwrap();
    assert!(!unsigned_passes(&dir, &dir));
}

#[test]
fn a_relative_state_home_is_ignored_never_put_inside_the_project() {
    let dir = marked();
    let keys = tempfile::tempdir().unwrap();
    let out = marker_writer_in(
        keys.path(),
        &["keygen", "--out", keys.path().to_str().unwrap()],
    );
    assert!(out.status.success());
    let public = keys.path().join("vigil-marker.pub");
    let out = marker_writer()
        .args(["trust", public.to_str().unwrap()])
        .current_dir(dir.path())
        .env("VIGIL_STATE_HOME", "state")
        .env("XDG_STATE_HOME", "also-relative")
        .env("HOME", keys.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(!dir.path().join("state").exists());
    assert!(!dir.path().join("also-relative").exists());
    assert!(
        stdout_of(&out).contains(&keys.path().join(".local/state/vigil").display().to_string())
    );
}

/// A large tree is walked by several threads (from 2,000 tracked files, or 32 MiB of them), its
/// big files hashed as jobs of their own: the id is git's all the same.
#[test]
fn a_large_tree_is_hashed_in_parallel_as_git_hashes_it() {
    let many = repo();
    for d in 0..50 {
        let dir = many.path().join(format!("d{d}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..50 {
            std::fs::write(dir.join(format!("f{f}.txt")), format!("{d} {f}\n")).unwrap();
        }
    }
    git(many.path(), &["add", "-A"]);
    std::fs::write(many.path().join("d7/untracked.txt"), "new\n").unwrap();
    assert_eq!(subject(many.path()).unwrap(), gits_tree(many.path()));
    let big = repo();
    for (i, byte) in [1u8, 2, 3].into_iter().enumerate() {
        std::fs::write(big.path().join(format!("big{i}.bin")), vec![byte; 12 << 20]).unwrap();
    }
    std::fs::write(big.path().join("small.txt"), "small\n").unwrap();
    git(big.path(), &["add", "-A"]);
    let id = subject(big.path()).unwrap();
    assert_eq!(id, gits_tree(big.path()));
    std::fs::write(big.path().join("big1.bin"), vec![9u8; 12 << 20]).unwrap();
    assert_ne!(subject(big.path()).unwrap(), id);
}
