//! SPEC §5, every case of the worktree subject: tracked and untracked files, ignore rules,
//! links, FIFOs, sizes, unreadable files, submodules and nested repositories, linked worktrees;
//! the subject changes with every edit and leaves the user's index, HEAD and files alone.

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use super::{BROKEN, gits_tree, marked, repo, subject, subject_of, verify};
use crate::support::*;

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
    mkfifo(&fifo);
    let _socket = std::os::unix::net::UnixListener::bind(dir.path().join("sock")).unwrap();
    let started = Instant::now();
    assert_eq!(subject(dir.path()).unwrap(), gits_tree(dir.path()));
    assert_within(started, Duration::from_secs(5), "waited on the FIFO");
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
    assert_contains!(
        line,
        "huge.bin is 1099511627776 bytes, over the 1073741824 of --max-file-size"
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
    assert_contains!(
        usage_error(&out, "marker-writer"),
        "small.bin is 2048 bytes"
    );
    ok(write("2K"));
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
    let line = usage_error(&out, "marker-writer");
    assert_contains!(
        line.to_lowercase(),
        "cannot read secret.txt: permission denied",
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
    assert_contains!(line, "vendor/lib is a nested git repository");
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

/// A fresh repository's subject, then `change` made to it, which must change the subject: the
/// repository and the subject before.
#[track_caller]
fn subject_changes_with(change: impl FnOnce(&Project)) -> (Project, String) {
    let repo = Project::git();
    let before = subject_of(repo.path());
    change(&repo);
    assert_ne!(subject_of(repo.path()), before);
    (repo, before)
}

#[test]
fn worktree_subject_changes_with_an_edit() {
    let (repo, before) =
        subject_changes_with(|repo| repo.write("lib.rs", "fn main() { edited() }\n"));
    repo.write("lib.rs", "fn main() {}\n");
    assert_eq!(
        subject_of(repo.path()),
        before,
        "the same content is the same subject"
    );
}

#[test]
fn worktree_subject_changes_with_a_new_untracked_file() {
    subject_changes_with(|repo| repo.write("new.rs", "x"));
}

#[test]
fn worktree_subject_changes_with_a_deletion() {
    subject_changes_with(|repo| std::fs::remove_file(repo.path().join("lib.rs")).unwrap());
}

#[test]
fn worktree_subject_changes_with_a_mode_change() {
    use std::os::unix::fs::PermissionsExt;
    subject_changes_with(|repo| {
        std::fs::set_permissions(
            repo.path().join("lib.rs"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap()
    });
}

#[test]
fn worktree_subject_ignores_ignored_files_and_vigils_own_state() {
    let repo = Project::git();
    repo.write(".gitignore", "*.log\n");
    git(repo.path(), &["add", ".gitignore"]);
    git(repo.path(), &["commit", "-qm", "ignore logs"]);
    let before = subject_of(repo.path());
    repo.write("build.log", "noise");
    assert_eq!(subject_of(repo.path()), before);
    // Markers live in the protected state, so writing one does not change the subject.
    assert!(markers_of(repo.path(), "probe").is_dir());
    assert_eq!(subject_of(repo.path()), before);
}

#[test]
fn worktree_subject_works_when_vigil_is_gitignored() {
    // The guide tells users to ignore .vigil/; git refuses a pathspec naming ignored files.
    let repo = Project::git();
    repo.write(".gitignore", ".vigil/\n");
    let before = subject_of(repo.path());
    assert_eq!(
        subject_of(repo.path()),
        before,
        "stable while markers are written"
    );
    ok(marker_writer_in(
        repo.path(),
        &["run", "--check", "tests", "--", "true"],
    ));
    assert_eq!(verify(repo.path()).status.code(), Some(0));
}

#[test]
fn worktree_subject_leaves_the_users_index_head_and_files_alone() {
    let repo = Project::git();
    repo.write("lib.rs", "fn main() { staged() }\n");
    git(repo.path(), &["add", "lib.rs"]);
    repo.write("lib.rs", "fn main() { unstaged() }\n");
    repo.write("untracked.rs", "u");
    let index = std::fs::read(repo.path().join(".git/index")).unwrap();
    let head = git(repo.path(), &["rev-parse", "HEAD"]);
    let status = git(
        repo.path(),
        &["status", "--porcelain", "--", ".", ":(exclude).vigil"],
    );
    marker_writer_in(repo.path(), &["run", "--check", "tests", "--", "true"]);
    verify(repo.path());
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
    assert_eq!(repo.read("lib.rs"), "fn main() { unstaged() }\n");
}

#[test]
fn worktree_subject_outside_a_repository_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let output = marker_writer_in(dir.path(), &["verify", "--check", "tests"]);
    assert_contains!(usage_error(&output, "marker-writer"), "git repository");
}
