//! SPEC §5, `marker-writer run`: the command's output passes through, its exit code is the
//! run's, and the marker records `passed`, `failed` or `aborted` (a signal, a timeout, a
//! subject that changed during the run).

use serde_json::json;

use super::{only_payload, payloads, verify};
use crate::support::*;

#[test]
fn run_passes_output_through_unchanged_and_records_it() {
    let repo = Project::git();
    let script = "printf 'out\\377\\000bytes\\n'; printf 'err line\\n' >&2; exit 0";
    let output = marker_writer_in(
        repo.path(),
        &["run", "--check", "tests", "--", "sh", "-c", script],
    );
    assert_eq!(output.stdout, b"out\xff\x00bytes\n");
    assert!(String::from_utf8_lossy(&output.stderr).starts_with("err line\n"));
    let payload = only_payload(repo.path(), "tests");
    let run = &payload["run"];
    assert_eq!(run["exit_code"], 0);
    // The recorded command is the exact one: a shell given it runs the same thing.
    let command = run["command"].as_str().unwrap();
    let again = std::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .output()
        .unwrap();
    assert_eq!(again.stdout, output.stdout, "{command}");
    assert!(run["duration_ms"].as_u64().is_some());
    let expected = vigil::sys::digest::sha256_hex(b"out\xff\x00bytes\nerr line\n");
    let stdout_first = run["output_sha256"] == expected;
    let stderr_first =
        run["output_sha256"] == vigil::sys::digest::sha256_hex(b"err line\nout\xff\x00bytes\n");
    assert!(stdout_first || stderr_first, "{run}");
}

#[test]
fn run_exits_with_the_commands_code_and_records_failed() {
    let repo = Project::git();
    let output = marker_writer_in(repo.path(), &tests_run_by_sh("exit 7"));
    assert_eq!(output.status.code(), Some(7));
    let payload = only_payload(repo.path(), "tests");
    assert_eq!(
        (
            payload["status"].clone(),
            payload["run"]["exit_code"].clone()
        ),
        (json!("failed"), json!(7))
    );
    assert_contains!(
        negative_verdict(&verify(repo.path(), "tests"), "marker-writer"),
        "status failed"
    );
}

#[test]
fn run_records_aborted_when_the_command_dies_by_a_signal() {
    let repo = Project::git();
    let output = marker_writer_in(repo.path(), &tests_run_by_sh("kill -TERM $$"));
    assert_eq!(output.status.code(), Some(128 + 15));
    assert_eq!(only_payload(repo.path(), "tests")["status"], "aborted");
}

#[test]
fn run_records_aborted_on_timeout_and_kills_the_group() {
    let repo = Project::git();
    let pidfile = repo.path().join("..").join(format!(
        "{}.pid",
        repo.path().file_name().unwrap().to_string_lossy()
    ));
    let script = format!("sleep 60 & echo $! > '{}'; wait", pidfile.display());
    let output = marker_writer_in(
        repo.path(),
        &[
            "run",
            "--check",
            "tests",
            "--timeout",
            "1",
            "--",
            "sh",
            "-c",
            &script,
        ],
    );
    assert_eq!(output.status.code(), Some(124));
    let payload = only_payload(repo.path(), "tests");
    assert_eq!(payload["status"], "aborted");
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    std::fs::remove_file(&pidfile).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(!running(pid), "{pid} outlived the timeout");
}

#[test]
fn run_forwards_sigterm_to_the_command_and_records_aborted() {
    let repo = Project::git();
    let mut child = vigil_process("marker-writer")
        .args(["run", "--check", "tests", "--", "sleep", "30"])
        .current_dir(repo.path())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    // SAFETY: signalling a child this test spawned.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(128 + 15));
    assert_eq!(only_payload(repo.path(), "tests")["status"], "aborted");
}

/// The shell command line `'<built marker-writer>' ARGS`.
fn marker_writer_line(args: &str) -> String {
    format!("'{}' {args}", bin_dir().join("marker-writer").display())
}

#[test]
fn run_passes_all_output_to_a_slow_reader_and_hashes_all_of_it() {
    let repo = Project::git();
    let script = format!(
        "{} | (sleep 2; wc -l)",
        marker_writer_line("run --check tests -- seq 1 20000")
    );
    let out = isolated(&mut std::process::Command::new("bash"))
        .arg("-c")
        .arg(&script)
        .current_dir(repo.path())
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "20000");
    let expected: String = (1..=20000).map(|i| format!("{i}\n")).collect();
    let payload = only_payload(repo.path(), "tests");
    assert_eq!(
        payload["run"]["output_sha256"],
        vigil::sys::digest::sha256_hex(expected.as_bytes())
    );
}

#[test]
fn run_lets_a_command_read_from_the_terminal() {
    // `script` gives the run a terminal; the command (in its own process group) must still
    // be able to read it, not stop on SIGTTIN.
    let repo = Project::git();
    let inner =
        marker_writer_line("run --check human -- sh -c 'read answer; test \"$answer\" = yes'");
    let mut child = isolated(&mut std::process::Command::new("script"))
        .args(["-qec", &inner, "/dev/null"])
        .current_dir(repo.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    use std::io::Write;
    std::thread::sleep(std::time::Duration::from_millis(500));
    child.stdin.as_mut().unwrap().write_all(b"yes\n").unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(status.is_some(), "the command hung reading the terminal");
    assert_eq!(only_payload(repo.path(), "human")["status"], "passed");
}

#[test]
fn a_worktree_that_changes_during_the_run_is_recorded_aborted() {
    let repo = Project::git();
    let out = marker_writer_in(
        repo.path(),
        &tests_run_by_sh("echo '// sneaked in' >> lib.rs"),
    );
    // Not the command's own 0 (issue 44 item 4): CI must not go green on it.
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    let payload = only_payload(repo.path(), "tests");
    assert_eq!(payload["status"], "aborted");
    assert_eq!(
        payload["note"],
        "the worktree changed while the command ran"
    );
    assert_eq!(verify(repo.path(), "tests").status.code(), Some(1));
}

/// Issue 44 item 4: an I/O error hashing the worktree after the command ran is said as itself,
/// never as a change, and is no success either: the marker is aborted and marker-writer exits
/// 1 where the command passed. Before, it said "the worktree changed" and exited 0.
#[test]
fn an_io_error_hashing_the_worktree_after_the_run_is_told_as_itself_and_fails() {
    if !strace_runs() {
        return;
    }
    let repo = Project::git();
    let file = repo.path().join("lib.rs");
    assert!(file.is_file());
    let mut cmd = faulted("marker-writer", Some(&file), "read", "error=EIO:when=2");
    cmd.args(["run", "--check", "tests", "--", "true"])
        .current_dir(repo.path());
    let out = output_with_stdin(cmd, b"");
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_contains!(
        stderr,
        "the worktree could not be read again after `true` ran"
    );
    assert_contains!(stderr, "Input/output error");
    assert_lacks!(stderr, "changed while");
    let payload = only_payload(repo.path(), "tests");
    assert_eq!(payload["status"], "aborted");
    assert_eq!(
        payload["note"],
        "the worktree could not be read again after the command ran"
    );
}

#[test]
fn a_command_that_cannot_start_exits_127_and_writes_no_marker() {
    let repo = Project::git();
    let out = marker_writer_in(
        repo.path(),
        &["run", "--check", "tests", "--", "/nonexistent/binary"],
    );
    assert_eq!(out.status.code(), Some(127));
    assert_one_line_error(&out, "marker-writer");
    assert!(
        !markers_of(repo.path(), "tests").exists() || payloads(repo.path(), "tests").is_empty()
    );
}
