//! The binaries under test, each a command with the same clean environment: the tests' own
//! state home, and nothing from the shell that runs the tests that would change what it does.

use std::path::{Path, PathBuf};

use assert_cmd::Command;

/// The binaries (SPEC §1).
pub const BINARIES: [&str; 6] = [
    "promise-matcher",
    "stop-gate",
    "marker-writer",
    "session-end-handoff",
    "session-start-loader",
    "settings-merge",
];

/// The state home every binary run by the tests uses (`VIGIL_STATE_HOME`): one for the test
/// binary, never the user's. Each project has its own directory in it; a test that trusts a
/// key for every project (`--global`) sets its own.
pub fn state_home() -> &'static Path {
    static HOME: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    HOME.get_or_init(|| tempfile::tempdir().unwrap()).path()
}

/// `cmd` (a vigil binary) with the tests' state home, and none of the variables that would
/// switch vigil off, move its state, name a key, a session or a project for it.
pub fn isolated(cmd: &mut std::process::Command) -> &mut std::process::Command {
    cmd.env("VIGIL_STATE_HOME", state_home())
        .env_remove("VIGIL_DISABLE")
        .env_remove("VIGIL_SIGN_KEY")
        .env_remove("VIGIL_VERIFY_KEY")
        .env_remove("VIGIL_STATE_DIR")
        .env_remove("VIGIL_SESSION_ID")
        .env_remove("CLAUDE_CODE_SESSION_ID")
        .env_remove("CLAUDE_PROJECT_DIR")
        .env_remove("CLAUDE_ENV_FILE")
        .env_remove("CLAUDE_CONFIG_DIR")
        .env_remove("CLAUDE_CODE_ENTRYPOINT")
        .env_remove("VIGIL_LOOP_RUN")
        // Where these tests were built (CI keeps it in a cache outside the clone): a check's
        // own cargo builds in its project, as a user's does, not in a directory its
        // confinement keeps read-only.
        .env_remove("CARGO_TARGET_DIR")
}

/// The binary `name` of this build, as a command with the clean environment.
pub fn vigil_command(name: &str) -> Command {
    Command::from_std(vigil_process(name))
}

/// `vigil_command(name)` as a plain process, for a test that spawns it, signals it or kills it.
pub fn vigil_process(name: &str) -> std::process::Command {
    let mut cmd = std::process::Command::new(bin_dir().join(name));
    isolated(&mut cmd);
    cmd
}

/// The words of `line` split at its spaces: arguments written as the command line a person
/// types (none of them holding a space).
pub fn words(line: &str) -> Vec<&str> {
    line.split(' ').collect()
}

/// The arguments of `marker-writer write` for a marker of the check `tests` on the file
/// `artifact` with `status`, then `more`.
pub fn artifact_marker<'a>(status: &'a str, more: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "write",
        "--check",
        "tests",
        "--subject",
        "file:artifact",
        "--status",
        status,
    ];
    args.extend(more);
    args
}

/// The arguments of `marker-writer write` for a `passed` marker of the check `tests`, as run
/// by `command`.
pub fn tests_passed_by(command: &str) -> Vec<&str> {
    vec![
        "write",
        "--check",
        "tests",
        "--status",
        "passed",
        "--command",
        command,
    ]
}

/// The arguments of `marker-writer run` for the check `tests` running `sh -c SCRIPT`.
pub fn tests_run_by_sh(script: &str) -> Vec<&str> {
    vec!["run", "--check", "tests", "--", "sh", "-c", script]
}

/// The directory the test binaries were built into.
pub fn bin_dir() -> PathBuf {
    assert_cmd::cargo::cargo_bin!("stop-gate")
        .parent()
        .unwrap()
        .to_path_buf()
}

pub fn promise_matcher() -> Command {
    vigil_command("promise-matcher")
}

/// `promise-matcher ARGS` on `stdin`, whatever it answers.
pub fn promise_matcher_on(args: &[&str], stdin: impl Into<Vec<u8>>) -> std::process::Output {
    promise_matcher()
        .args(args)
        .write_stdin(stdin)
        .output()
        .unwrap()
}

pub fn stop_gate() -> Command {
    vigil_command("stop-gate")
}

pub fn marker_writer() -> Command {
    vigil_command("marker-writer")
}

/// `marker-writer ARGS` in `dir`, whatever it answers.
pub fn marker_writer_in(dir: &Path, args: &[&str]) -> std::process::Output {
    marker_writer()
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

/// `marker-writer keygen --out OUT` run in `dir`, which must succeed: the key pair it made,
/// (secret, public).
pub fn keygen_into(dir: &Path, out: &Path) -> (PathBuf, PathBuf) {
    super::ok(marker_writer_in(
        dir,
        &["keygen", "--out", out.to_str().unwrap()],
    ));
    (out.join("vigil-marker.key"), out.join("vigil-marker.pub"))
}

/// `marker-writer` with the words of `args` in `dir`, answering with a negative verdict (exit 1,
/// one line): that line.
pub fn marker_writer_denies(dir: &Path, args: &str) -> String {
    super::negative_verdict(&marker_writer_in(dir, &words(args)), "marker-writer")
}

pub fn session_end_handoff() -> Command {
    vigil_command("session-end-handoff")
}

pub fn session_start_loader() -> Command {
    vigil_command("session-start-loader")
}

pub fn settings_merge() -> Command {
    vigil_command("settings-merge")
}
