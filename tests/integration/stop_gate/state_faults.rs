//! Issue 44 item 1, one error taxonomy for the gate's own state: a copy of the session record
//! that fails its checksum is torn, and the other copy stands; a read that fails is an I/O
//! error, which blocks the Stop with its line and writes nothing. It never makes the older copy
//! look like the newest (a passed loop, or one running before a cancel), and never moves an
//! intact record aside. Faults are injected with strace on the record alone (`-P`).

use std::path::Path;

use crate::support::*;

/// stop-gate on a Stop of session s1, under strace injecting `errno` at the `when`-th
/// `syscall` that touches the session record `record` (`when` empty: at every one). A Stop
/// that prints nothing lets the stop through, and fails here.
fn stop_faulted(p: &Project, record: &Path, syscall: &str, errno: &str, when: &str) -> Stop {
    let mut cmd = faulted(
        "stop-gate",
        Some(record),
        syscall,
        &format!("error={errno}{when}"),
    );
    cmd.current_dir(p.path());
    // A message of its own each time: the same one three times over is a stalled loop.
    let message = format!("working ({syscall} {errno}{when})");
    let out = output_with_stdin(cmd, p.payload("s1", Some(&message)).to_string().as_bytes());
    assert!(
        out.status.code() == Some(0) && !out.stdout.is_empty(),
        "{syscall} {errno}{when}: a Stop that says nothing lets the stop through: {}",
        said(&out)
    );
    stop_of(&out)
}

/// The sha256 of the file at `path`, to compare without printing it.
fn digest(path: &Path) -> Vec<u8> {
    use sha2::Digest as _;
    sha2::Sha256::digest(std::fs::read(path).unwrap()).to_vec()
}

/// What is left beside the record: no `.damaged-…` copy.
fn set_aside(record: &Path) -> Vec<String> {
    std::fs::read_dir(record.parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains("damaged"))
        .collect()
}

/// The record's path for session s1.
fn record_of(p: &Project) -> std::path::PathBuf {
    p.protected().join("sessions/s1.rec")
}

/// A loop passed, and a second started in the same session: the record's two copies are the
/// passed loop and the running one. An I/O error on any one read of the record, or on opening
/// it or on its stat (EIO, EACCES), blocks the Stop with the error's line, leaves the record
/// byte for byte and where it was; the next Stop, unfaulted, finds the second loop running.
/// Before, an EIO on the newest copy let the stop through silently (the passed loop), and an
/// EACCES on opening moved the intact record aside and ended the loop.
#[test]
fn an_io_error_on_the_session_record_blocks_and_never_takes_the_older_copy() {
    if !strace_runs() {
        return;
    }
    // A Stop reads the record three times (two looks, then under the lock), four reads each:
    // an error at each one of them, and at all.
    let whens: Vec<String> = (1..=12).map(|n| format!(":when={n}")).collect();
    let mut faults: Vec<(&str, &str, &str)> =
        whens.iter().map(|w| ("read", "EIO", w.as_str())).collect();
    faults.extend([
        ("read", "EIO", ""),
        ("openat", "EACCES", ""),
        ("openat", "EIO", ":when=1"),
        ("openat", "EIO", ":when=3"),
        ("statx", "EIO", ""),
    ]);
    for (syscall, errno, when) in faults {
        let what = format!("{syscall} {errno}{when}");
        let p = two_loops();
        let record = record_of(&p);
        let before = digest(&record);
        let stop = stop_faulted(&p, &record, syscall, errno, when);
        assert!(
            stop.blocked(),
            "{what}: the stop went through: {:?}",
            stop.json
        );
        assert!(
            set_aside(&record).is_empty(),
            "{what}: {:?}",
            set_aside(&record)
        );
        // A fault at every read or open: nothing known, nothing written. A fault at one read
        // only: a read after it may find the record whole and go on (a pass of the loop).
        if when.is_empty() {
            assert!(digest(&record) == before, "{what}: the record changed");
        }
        let state = p.loop_state("s1");
        assert_eq!(state["status"], "running", "{what}: {state}");
        assert_eq!(state["prompt"], "the second task", "{what}: {state}");
        p.stop_s1(&[]).assert_task_saying("the second task");
    }
}

/// A project whose session s1 ran a loop that passed, then started a second: the record's two
/// copies are the passed loop and the running one.
fn two_loops() -> Project {
    let p = Project::git();
    start(&p, "s1", "the first task");
    let passed = p.stop(&[], "s1", Some("<promise>DONE</promise>"));
    assert!(!passed.blocked(), "{:?}", passed.json);
    start(&p, "s1", "the second task");
    p
}

/// A cancel, once acknowledged, is the person's word: an I/O error on a read of the record at
/// the next Stop blocks that Stop or tells the cancel (the gate cannot know more), and never
/// brings the loop back to running.
#[test]
fn an_io_error_after_a_cancel_never_brings_the_loop_back() {
    if !strace_runs() {
        return;
    }
    for when in [":when=1", ":when=2", ":when=3", ":when=4", ""] {
        let p = Project::git();
        start(&p, "s1", "the task");
        assert!(p.stop_s1(&[]).blocked());
        ok(p.loop_command(&["cancel", "--session", "s1"]));
        let stop = stop_faulted(&p, &record_of(&p), "read", "EIO", when);
        if !stop.blocked() {
            assert_contains!(stop.system_message(), "cancelled");
        }
        assert_eq!(p.loop_state("s1")["status"], "cancelled", "read EIO{when}");
        assert!(!p.stop_s1(&[]).blocked(), "read EIO{when}");
    }
}

/// `stop-gate loop start` under strace, injecting `errno` at every rename that names `path`.
fn start_faulted(p: &Project, path: &Path, errno: &str) -> std::process::Output {
    let mut cmd = faulted(
        "stop-gate",
        Some(path),
        "rename,renameat,renameat2",
        &format!("error={errno}"),
    );
    cmd.args(["loop", "start", "--session", "s1", "--max-iterations", "5"])
        .args(["--completion-promise", "DONE", "--", "the task"])
        .current_dir(p.path());
    output_with_stdin(cmd, b"")
}

/// Issue 44 item 1, one commit point: `loop start` that cannot make the running marker, or
/// cannot write the record, says it failed and took no effect: no loop runs, no marker is left
/// to call a later record gone, and starting again works. Before, an EACCES on the marker
/// left the loop running after exit 2, and the retry was refused as "already running".
#[test]
fn a_loop_start_that_says_it_failed_took_no_effect() {
    if !strace_runs() {
        return;
    }
    let p = Project::git();
    // Another session's loop makes the project's protected state, so its paths are known.
    start(&p, "s0", "another task");
    let marker = p.protected().join("running/s1");
    for (path, errno) in [(&marker, "EACCES"), (&record_of(&p), "EIO")] {
        let out = start_faulted(&p, path, errno);
        assert_ne!(out.status.code(), Some(0), "{}", said(&out));
        assert!(
            std::fs::symlink_metadata(&marker).is_err(),
            "{errno}: the marker stayed"
        );
        let status = p.loop_command(&["status", "--session", "s1"]);
        assert_lacks!(stdout_of(&status), "running");
        assert!(!p.stop_s1(&[]).blocked(), "{errno}: a loop is running");
    }
    start(&p, "s1", "the task");
    p.stop_s1(&[]).assert_task_saying("the task");
}

/// Issue 44 item 5: a Stop that cannot write its answer (ENOSPC behind stdout) never exits 0
/// with nothing said, which the engine takes for "let it through": it exits 2, which blocks,
/// with the block's reason on stderr. Before, it exited 0 with no output.
#[test]
fn a_stop_that_cannot_write_its_answer_exits_2_with_the_reason() {
    if !strace_runs() {
        return;
    }
    let p = Project::git();
    let answer = p.path().join("answer.out");
    let mut cmd = faulted("stop-gate", Some(&answer), "write", "error=ENOSPC");
    cmd.args(["--run", "false"]).current_dir(p.path());
    let payload = p.payload("s1", Some("x")).to_string();
    let payload_file = p.path().join("payload.json");
    std::fs::write(&payload_file, payload).unwrap();
    cmd.stdin(std::fs::File::open(&payload_file).unwrap())
        .stdout(std::fs::File::create(&answer).unwrap())
        .stderr(std::process::Stdio::piped());
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert_eq!(std::fs::read(&answer).unwrap(), b"", "nothing was written");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_contains!(
        stderr,
        "cannot write the Stop's answer to standard output, so the stop is blocked: stop-gate: `false` failed (exit 1)"
    );
}

/// `loop start` of `session` in `p`, up to 5 passes, ending on DONE, for `task`; it must work.
fn start(p: &Project, session: &str, task: &str) -> std::process::Output {
    ok(p.start(&[
        "--session",
        session,
        "--max-iterations",
        "5",
        "--completion-promise",
        "DONE",
        "--",
        task,
    ]))
}
