//! git, run as a test's author.

use std::path::Path;

/// Runs git in `dir`, panicking with its stderr when it fails; returns trimmed stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let output = git_output(dir, args);
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

/// Runs git in `dir` as a test's author, whatever it answers.
pub fn git_output(dir: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .output()
        .unwrap()
}

/// Runs git in `dir` on the index file `index` instead of the repository's, and without the
/// user's or the system's configuration, panicking with its stderr when it fails; returns
/// trimmed stdout. How a test computes a tree the way SPEC §5 says, with git's own answer.
pub fn git_on_index(dir: &Path, index: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_INDEX_FILE", index)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", super::said(&out));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// `git worktree add -q -b BRANCH PATH` in the repository at `dir`: a linked worktree of it, on
/// a new branch.
pub fn add_worktree(dir: &Path, branch: &str, path: &Path) {
    git(
        dir,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            branch,
            path.to_str().unwrap(),
        ],
    );
}

/// The agent's edit of the index of the repository at `dir`: the entry of a file of `size`
/// bytes gets the stat data of the file at `path` (keeping its blob id), so git takes that
/// file for unchanged without reading it. The stat data written.
pub fn forge_index_stat(dir: &Path, path: &str, size: usize) -> gix_index::entry::Stat {
    let index_path = dir.join(".git/index");
    let mut index = gix_index::File::at(
        &index_path,
        gix_index::hash::Kind::Sha1,
        false,
        Default::default(),
    )
    .unwrap();
    let meta = gix_index::fs::Metadata::from_path_no_follow(&dir.join(path)).unwrap();
    let stat = gix_index::entry::Stat::from_fs(&meta).unwrap();
    let entry = index
        .entries_mut()
        .iter_mut()
        .find(|e| e.stat.size as usize == size)
        .unwrap();
    entry.stat = stat;
    index.write(Default::default(), Default::default()).unwrap();
    stat
}

/// A `git` that sleeps before doing anything, for `VIGIL_TEST_GIT` (debug builds find git only
/// in the system's places otherwise): the directory that holds it, and its path.
pub fn slow_git(seconds: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let bin = tempfile::tempdir().unwrap();
    let real = String::from_utf8(
        std::process::Command::new("sh")
            .args(["-c", "command -v git"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let script = format!("#!/bin/sh\nsleep {seconds}\nexec {} \"$@\"\n", real.trim());
    let git = bin.path().join("git");
    std::fs::write(&git, script).unwrap();
    std::fs::set_permissions(&git, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    (bin, git)
}
