//! SPEC §5, `run --snapshot`: the command runs in a private copy of exactly the hashed content,
//! in a clean environment, so a swap during the run never reaches it; the copy keeps modes and
//! links and refuses a link out of the tree.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{BROKEN, GOOD, marked, subject, verify, write_executable};
use crate::support::*;

/// `marker-writer run` in place hashes before and after: content swapped in while the tests
/// run and swapped back before the end passes them unseen, and the marker says `passed` for
/// the broken tree. That is why an in-place run is for writers the agent cannot reach (CI).
/// With `--snapshot` the tests run on a private copy of exactly what was hashed.
#[test]
fn a_swap_during_the_run_fools_an_in_place_run_and_never_a_snapshot() {
    for snapshot in [false, true] {
        let dir = marked();
        dir.write("lib.rs", BROKEN);
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
        dir.write("lib.rs", GOOD);
        std::fs::write(sync.path().join("good"), "").unwrap();
        wait("tested");
        dir.write("lib.rs", BROKEN);
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

#[test]
fn a_snapshot_run_sees_exactly_the_hashed_content_in_a_clean_environment() {
    let dir = marked();
    std::fs::create_dir_all(dir.path().join("src/deep")).unwrap();
    dir.write("src/deep/a.txt", "a\n");
    dir.write("ignored.log", "noise\n");
    dir.write(".gitignore", ".vigil/\n.cache/\n*.log\n");
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
    assert_success(&out);
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
    let out = ok(marker_writer_in(
        dir.path(),
        &["run", "--check", "tests", "--snapshot", "--", "./tool"],
    ));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "tool\n");
    // The marker is for the worktree as it is, and the copy is gone: this project's (the
    // state home is the test process's, where other tests' snapshot runs come and go).
    ok(verify(dir.path()));
    let name = dir
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let own = format!("/projects/{name}-");
    let files = walk_files(state_home());
    assert!(
        files.iter().any(|p| p.to_string_lossy().contains(&own)),
        "this project's state (its marker) is under {own}"
    );
    let snapshots: Vec<PathBuf> = files
        .into_iter()
        .filter(|p| {
            let p = p.to_string_lossy();
            p.contains(&own) && p.contains("/snapshots/run-")
        })
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
        &words("run --check t --snapshot --subject file:lib.rs -- true")[..],
        &["run", "--check", "t", "--keep-env", "X", "--", "true"][..],
    ] {
        let out = marker_writer_in(dir.path(), args);
        usage_error(&out, "marker-writer");
    }
}

/// In a snapshot a link out of the tree would read the live file, which no marker vouches for.
#[test]
fn a_snapshot_refuses_a_link_out_of_the_tree() {
    let dir = marked();
    let live = dir.path().join(".cache/lib.rs");
    write_file(&live, GOOD);
    for target in [live.to_str().unwrap(), "../outside"] {
        let link = dir.path().join("linked.rs");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(target, &link).unwrap();
        let out = marker_writer_in(
            dir.path(),
            &["run", "--check", "x", "--snapshot", "--", "true"],
        );
        let line = usage_error(&out, "marker-writer");
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
    let line = usage_error(&out, "marker-writer");
    assert_contains!(
        line,
        "z is a symlink that leads out of the tree through another link"
    );
    std::fs::remove_file(dir.path().join("z")).unwrap();
    std::os::unix::fs::symlink("a/top/lib.rs", dir.path().join("z")).unwrap();
    ok(marker_writer_in(
        dir.path(),
        &["run", "--check", "x", "--snapshot", "--", "true"],
    ));
    std::os::unix::fs::symlink("loop", dir.path().join("loop")).unwrap();
    let out = marker_writer_in(
        dir.path(),
        &["run", "--check", "x", "--snapshot", "--", "true"],
    );
    assert_exit(&out, 2);
    assert!(said(&out).contains("loop of links"), "{}", said(&out));
}
