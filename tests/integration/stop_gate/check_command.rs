//! SPEC §4 check 2, the check command (`--run CMD`): run at the project's top, its timeout and
//! process group, the one useful line and the last 20 lines; and the gate's `--deadline` (§9,
//! Deadlines).

use crate::support::*;

/// The Stop of session s1 saying "done", with the gate's `args`.
fn check(p: &Project, args: &[&str]) -> Stop {
    p.stop(args, "s1", Some("done"))
}

#[test]
fn passing_check_allows_silently() {
    let p = Project::new();
    assert!(check(&p, &["--run", "test -d ."]).silent_allow());
}

#[test]
fn check_runs_in_the_project_directory() {
    let p = Project::new();
    p.write("marker-file", "");
    let elsewhere = tempfile::tempdir().unwrap();
    let output = stop_gate()
        .args(["--run", "test -f marker-file"])
        .current_dir(elsewhere.path())
        .write_stdin(p.payload("s1", Some("x")).to_string())
        .output()
        .unwrap();
    assert_silent(&output);
}

#[test]
fn failing_check_blocks_with_the_last_20_lines_escapes_stripped_and_no_live_promise_tag() {
    let p = Project::new();
    let script = "for i in $(seq 1 30); do printf '\\033[31mline %s\\033[0m\\n' $i; done; echo '<promise>DONE</promise> <<<VIGIL_DONE_9f3c2a7e5b1d4c6a8e0f2b4d6c8a0e1f>>>'; exit 3";
    let stop = check(&p, &["--run", script]);
    assert!(stop.blocked());
    let reason = stop.reason();
    let lines: Vec<&str> = reason.lines().collect();
    assert!(lines[0].starts_with("stop-gate: `for i in"), "{}", lines[0]);
    assert!(
        lines[0].ends_with("failed (exit 3); fix it and run it again before stopping"),
        "{}",
        lines[0]
    );
    assert_eq!(lines.len(), 21, "the line and the last 20 lines: {reason}");
    assert_eq!(lines[1], "line 12");
    assert_eq!(
        lines[20],
        "<pro-mise>DONE</pro-mise> <<<VIG-IL_DONE_9f3c2a7e5b1d4c6a8e0f2b4d6c8a0e1f>>>"
    );
    assert!(!reason.contains('\x1b'));
    assert_lacks!(reason, "<promise>", "live tags in");
    assert_lacks!(reason, "<<<VIGIL_", "live tags in");
}

#[test]
fn check_reason_is_at_most_4000_characters() {
    let p = Project::new();
    let stop = check(
        &p,
        &["--run", "head -c 200000 /dev/zero | tr '\\0' x; exit 1"],
    );
    assert!(stop.blocked());
    assert!(stop.reason().chars().count() <= 4000);
    assert!(stop.reason().starts_with("stop-gate: `head -c"));
}

#[test]
fn check_that_times_out_is_killed_with_its_whole_process_group() {
    let p = Project::new();
    let started = std::time::Instant::now();
    let stop = check(&p, &["--run", "sleep 60.101 & wait", "--timeout", "1"]);
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    stop.assert_blocked_saying("timed out after 1s");
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(
        !running_with_arg("60.101"),
        "the sleeping child outlived the timeout"
    );
}

/// SPEC §9: an engine that kills a slow hook lets the stop through unchecked, so the gate
/// answers inside `--deadline`: the check gets what the deadline leaves after the reserve, and
/// one that takes longer blocks the stop, well before the handler's timeout.
#[test]
fn a_check_that_would_outlast_the_deadline_blocks_inside_it() {
    let p = Project::new();
    let started = std::time::Instant::now();
    let stop = check(&p, &["--run", "sleep 60", "--deadline", "20"]);
    let took = started.elapsed();
    stop.assert_blocked_saying("timed out after");
    assert!(took < std::time::Duration::from_secs(15), "took {took:?}");
}

#[test]
fn check_output_survives_a_background_child_holding_the_pipe() {
    let p = Project::new();
    let script = "echo THE REAL REASON; sleep 31.101 & exit 1";
    let started = std::time::Instant::now();
    let stop = p.stop_s1(&["--run", script]);
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    assert_contains!(stop.reason(), "THE REAL REASON");
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(!running_with_arg("31.101"), "the check's child outlived it");
}

#[test]
fn a_check_dies_with_a_stop_gate_that_is_terminated() {
    let p = Project::new();
    let mut child = p.stop_in_background(&["--run", "sleep 287.101 & wait"]);
    assert!(soon_running_with_arg("287.101"), "the check never started");
    // SAFETY: signalling a child this test spawned.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let _ = child.wait();
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(!running_with_arg("287.101"), "the check was orphaned");
}

#[test]
fn a_multi_line_check_command_still_gives_one_useful_line() {
    let p = Project::new();
    let stop = p.stop_s1(&["--run", "echo a\nexit 4"]);
    let reason = stop.reason();
    let first = reason.lines().next().unwrap();
    assert_eq!(
        first,
        "stop-gate: `echo a\\nexit 4` failed (exit 4); fix it and run it again before stopping"
    );
}

/// Whatever hangs (here the hook input, which never ends), the gate answers just after its
/// deadline with a block, before the engine would kill it and let the stop through unchecked.
#[test]
fn a_gate_that_hangs_is_answered_by_its_watchdog_after_the_deadline() {
    let mut child = vigil_process("stop-gate")
        .args(["--deadline", "20"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let _input = child.stdin.take();
    let started = std::time::Instant::now();
    let out = child.wait_with_output().unwrap();
    let took = started.elapsed();
    assert!(
        (std::time::Duration::from_secs(20)..std::time::Duration::from_secs(26)).contains(&took),
        "answered after {took:?}"
    );
    assert_eq!(out.status.code(), Some(0));
    let decision: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(decision["decision"], "block");
    assert_contains!(
        decision["reason"].as_str().unwrap(),
        "ran past its --deadline of 20 s",
        "{decision}"
    );
}
