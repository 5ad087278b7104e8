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

/// A `git` earlier on PATH that sleeps before doing anything.
pub fn slow_git(seconds: &str) -> (tempfile::TempDir, String) {
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
    std::fs::write(bin.path().join("git"), script).unwrap();
    std::fs::set_permissions(
        bin.path().join("git"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap()
    );
    (bin, path)
}
