//! SPEC §10, wakes: a loop that settles leaves one durable wake in its commander's queue (the
//! project's main checkout, or the session named with `--notify`); the waiter (`stop-gate
//! wait`) or, with no waiter live, the next SessionStart or UserPromptSubmit delivers it: at
//! most once, only while it is news, removed only once written out. Each delivery rule is played
//! as its failure: a waiter killed after claiming, a stderr that cannot be written, a wake made
//! stale, two waiters for one session, a waiter whose engine died.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::*;

/// A session id no other test uses (session queues and waiters live in the shared state home).
fn fresh(prefix: &str) -> String {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    )
}

/// `stop-gate wait` for `session` in `dir`, started in the background as Claude Code starts an
/// asyncRewake handler (interactive unless `entrypoint` says otherwise), polling fast.
fn waiter(dir: &Path, session: &str, entrypoint: &str) -> Child {
    let payload = json!({"session_id": session, "hook_event_name": "Stop", "cwd": dir,
        "stop_hook_active": false});
    spawn_fed(
        vigil_process("stop-gate")
            .args(["wait", "--poll-ms", "50"])
            .current_dir(dir)
            .env("CLAUDE_CODE_ENTRYPOINT", entrypoint)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
        payload.to_string().as_bytes(),
    )
}

/// Waits for `child` to exit (at most `secs`): its exit code and stderr.
fn finish(mut child: Child, secs: u64) -> (Option<i32>, String) {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            return (status.code(), err);
        }
        if start.elapsed() > Duration::from_secs(secs) {
            let _ = child.kill();
            panic!("the waiter still ran after {secs} s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until `what` holds (at most 10 s).
fn until(what: impl Fn() -> bool) {
    let start = Instant::now();
    while !what() {
        assert!(start.elapsed() < Duration::from_secs(10), "waited 10 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A loop named `name` in `session` of `dir`, ended by a declaration at its first Stop.
/// A repository whose session w1 runs the loop named `a`.
fn repo_looping_a() -> Project {
    let dir = Project::git();
    dir.loop_for("w1").flags(&["--name", "a"]).start();
    dir
}

fn passed_loop(dir: &Project, session: &str, name: &str) {
    dir.loop_for(session).flags(&["--name", name]).start();
    let stop = dir.stop(&[], session, Some("<promise>DONE</promise>"));
    assert!(!stop.blocked(), "{:?}", stop.json);
}

#[test]
fn a_loop_that_settles_leaves_one_wake_in_its_commanders_queue() {
    let dir = Project::git();
    passed_loop(&dir, "w1", "parser-fix");
    let wakes = dir.wakes();
    assert_eq!(wakes.len(), 1, "{wakes:?}");
    assert_eq!(wakes[0]["kind"], "loop");
    assert_eq!(wakes[0]["status"], "passed");
    assert_eq!(wakes[0]["end_reason"], "declared");
    let line = wakes[0]["line"].as_str().unwrap();
    assert_starts_with!(
        line,
        "loop parser-fix in .: running -> passed after 1 pass on the declaration alone"
    );
    // The loop's name is shown by the loop commands too.
    let status = dir.loop_command(&["status", "--session", "w1"]);
    assert_stdout_contains(&status, "name parser-fix");
}

#[test]
fn every_end_leaves_a_wake_a_cancel_and_a_session_that_ends_too() {
    let dir = Project::git();
    dir.loop_for("w1").flags(&["--name", "one"]).start();
    ok(dir.loop_command(&["cancel", "--session", "w1"]));
    dir.loop_for("w2").flags(&["--name", "two"]).start();
    ok(session_end(
        dir.path(),
        &[],
        json!({"session_id": "w2", "hook_event_name": "SessionEnd", "cwd": dir.path(),
            "reason": "other"})
        .to_string(),
    ));
    let lines: Vec<String> = dir
        .wakes()
        .iter()
        .map(|w| w["line"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_contains!(
        lines[0],
        "loop one in .: running -> cancelled by a human at pass 1",
        "{lines:?}"
    );
    assert_contains!(
        lines[1],
        "loop two in .: running -> cut after 1 pass (the session ended while it ran), NOT verified",
        "{lines:?}"
    );
}

#[test]
fn a_loop_name_or_commander_that_is_not_a_plain_word_is_refused() {
    let dir = Project::git();
    for flags in [["--name", "../x"], ["--notify", "../x"], ["--name", ""]] {
        let out = dir.loop_for("w1").flags(&flags).output();
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {}", said(&out));
        assert!(said(&out).contains(flags[0]), "{}", said(&out));
    }
    let status = dir.loop_command(&["status", "--session", "w1"]);
    assert_eq!(
        status.status.code(),
        Some(1),
        "a loop started: {}",
        said(&status)
    );
}

#[test]
fn the_waiter_exits_at_once_when_nothing_reports_here() {
    let dir = Project::git();
    let start = Instant::now();
    let (code, err) = finish(waiter(dir.path(), &fresh("c"), "cli"), 10);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.is_empty(), "{err}");
    assert_within(start, Duration::from_secs(2), "");
}

#[test]
fn the_waiter_exits_at_once_in_a_worker_session_and_under_claude_p() {
    let dir = Project::git();
    // A live loop reports to this project: a session could wait for it.
    dir.loop_for("worker").start();
    // The worker itself does not.
    let (code, _) = finish(waiter(dir.path(), "worker", "cli"), 5);
    assert_eq!(code, Some(0));
    // Nor does `claude -p` (it would hold the session open until the loop ends).
    let (code, _) = finish(waiter(dir.path(), &fresh("p"), "sdk-cli"), 5);
    assert_eq!(code, Some(0));
    // Nor does `loop run`'s command.
    let mut cmd = vigil_process("stop-gate");
    cmd.args(["wait"])
        .current_dir(dir.path())
        .env("VIGIL_LOOP_RUN", "0".repeat(32));
    ok(output_with_stdin(
        cmd,
        json!({"session_id": fresh("r"), "hook_event_name": "Stop", "cwd": dir.path()})
            .to_string()
            .as_bytes(),
    ));
}

#[test]
fn the_waiter_delivers_each_wake_once_with_one_line_per_change() {
    let dir = repo_looping_a();
    let commander = fresh("c");
    let child = waiter(dir.path(), &commander, "cli");
    std::thread::sleep(Duration::from_millis(300));
    let stop = dir.stop(&[], "w1", Some("<promise>DONE</promise>"));
    assert!(!stop.blocked());
    let (code, err) = finish(child, 10);
    assert_eq!(code, Some(2), "exit 2 wakes the model: {err}");
    assert_eq!(
        err.matches("loop a in .: running -> passed").count(),
        1,
        "{err}"
    );
    assert!(dir.wakes().is_empty());
    // Delivered once: the next waiter has nothing left, and no live loop, so it does not wait.
    let (code, err) = finish(waiter(dir.path(), &commander, "cli"), 5);
    assert_eq!((code, err.as_str()), (Some(0), ""));
    // Nor does the next session start repeat it.
    let start = session_start(dir.path(), &fresh("n"), "startup");
    assert_lacks!(stdout_of(&start), "running -> passed");
}

#[test]
fn a_wake_made_stale_before_delivery_is_dropped() {
    let dir = Project::git();
    passed_loop(&dir, "w1", "a");
    // Another session's loop in the same checkout changes nothing of it.
    dir.loop_for("w9").start();
    assert_eq!(dir.wakes().len(), 1);
    // The human restarts the loop in the same session: the old end is no longer news.
    dir.loop_for("w1").flags(&["--name", "a"]).start();
    let start = session_start(dir.path(), &fresh("n"), "startup");
    assert_lacks!(stdout_of(&start), "loop a");
    assert!(dir.wakes().is_empty(), "a stale wake stays");
}

#[test]
fn without_a_live_waiter_wakes_come_at_the_next_session_start_or_prompt() {
    let dir = Project::git();
    passed_loop(&dir, "w1", "first");
    let start = session_start(dir.path(), &fresh("n"), "startup");
    let context = json_of_stdout(&start);
    let told = additional_context(&context);
    assert_contains!(told, "loop first in .: running -> passed");
    passed_loop(&dir, "w2", "second");
    let said = dir.prompt(&fresh("n"), "what now?");
    let told = additional_context(&said);
    assert_contains!(told, "loop second in .: running -> passed", "{said}");
    assert!(!told.contains("loop first"), "delivered twice: {said}");
    assert!(dir.wakes().is_empty());
}

#[test]
fn a_worker_session_is_told_nothing_of_the_projects_wakes() {
    let dir = Project::git();
    passed_loop(&dir, "w1", "a");
    dir.loop_for("w2").start();
    assert_eq!(dir.prompt("w2", "go on"), Value::Null);
    assert_eq!(dir.wakes().len(), 1, "the worker took the wake");
}

/// A reader claimed a wake and was killed: two minutes on, it is told once more, as one that
/// may not have reached the commander (issue 44: never silently twice), and then no more.
#[test]
fn a_claim_whose_holder_died_is_told_after_two_minutes_as_one_that_may_not_have_reached_you() {
    let dir = Project::git();
    passed_loop(&dir, "w1", "a");
    let queue = queue_of(dir.path());
    let wake = std::fs::read_dir(&queue)
        .unwrap()
        .flatten()
        .find(|e| e.path().extension().is_some_and(|x| x == "json"))
        .unwrap();
    // A reader claimed it and was killed before it wrote it out.
    let claimed = queue.join("claimed");
    std::fs::create_dir_all(&claimed).unwrap();
    let held = claimed.join(wake.file_name());
    std::fs::rename(wake.path(), &held).unwrap();
    let fresh_claim = session_start(dir.path(), &fresh("n"), "startup");
    assert_lacks!(stdout_of(&fresh_claim), "loop a", "a live claim was taken");
    let file = std::fs::OpenOptions::new().write(true).open(&held).unwrap();
    file.set_modified(std::time::SystemTime::now() - Duration::from_secs(121))
        .unwrap();
    let start = session_start(dir.path(), &fresh("n"), "startup");
    assert_contains!(
        stdout_of(&start),
        "- (may not have reached you before) loop a in .: running -> passed"
    );
    assert!(!held.exists());
    let again = session_start(dir.path(), &fresh("n"), "startup");
    assert_lacks!(stdout_of(&again), "loop a");
}

#[test]
fn a_wake_that_cannot_be_written_out_is_put_back() {
    let dir = repo_looping_a();
    let mut child = waiter(dir.path(), &fresh("c"), "cli");
    // The engine stopped reading the hook's stderr.
    drop(child.stderr.take());
    std::thread::sleep(Duration::from_millis(300));
    dir.stop(&[], "w1", Some("<promise>DONE</promise>"));
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(start.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0), "nothing was delivered");
    assert_eq!(dir.wakes().len(), 1, "the wake was lost");
}

#[test]
fn a_newer_waiter_of_the_same_session_replaces_the_last() {
    let dir = repo_looping_a();
    let commander = fresh("c");
    let first = waiter(dir.path(), &commander, "cli");
    let registration = state_home().join(format!("wakes/waiters/{commander}.json"));
    until(|| registration.exists());
    let second = waiter(dir.path(), &commander, "cli");
    // The first is stopped (verified as a waiter by its command line), the second waits.
    let (code, err) = finish(first, 10);
    assert_ne!(code, Some(2), "{err}");
    dir.stop(&[], "w1", Some("<promise>DONE</promise>"));
    let (code, err) = finish(second, 10);
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(err.matches("loop a in").count(), 1, "{err}");
}

#[test]
fn a_waiter_whose_engine_died_exits_and_leaves_the_wake() {
    let dir = repo_looping_a();
    let commander = fresh("c");
    let payload = dir.path().join("payload.json");
    write_file(
        &payload,
        json!({"session_id": commander, "hook_event_name": "Stop", "cwd": dir.path()}).to_string(),
    );
    // The engine: a shell that starts the waiter and is gone a second later.
    let waiter_bin = bin_dir().join("stop-gate");
    let script = format!(
        "{} wait --poll-ms 50 < {} > /dev/null 2>&1 & echo $!; sleep 1",
        waiter_bin.display(),
        payload.display()
    );
    let out = std::process::Command::new("sh")
        .args(["-c", &script])
        .env("VIGIL_STATE_HOME", state_home())
        .env("CLAUDE_CODE_ENTRYPOINT", "cli")
        .current_dir(dir.path())
        .output()
        .unwrap();
    let pid: i32 = stdout_of(&out).trim().parse().unwrap();
    until(|| !running(pid));
    dir.stop(&[], "w1", Some("<promise>DONE</promise>"));
    assert_eq!(dir.wakes().len(), 1, "nobody was there to hear it");
}

#[test]
fn notify_sends_the_wake_to_that_session_which_waits_even_under_claude_p() {
    let dir = Project::git();
    let commander = fresh("c");
    dir.loop_for("w1")
        .flags(&["--name", "a", "--notify", &commander])
        .start();
    let child = waiter(dir.path(), &commander, "sdk-cli");
    std::thread::sleep(Duration::from_millis(300));
    dir.stop(&[], "w1", Some("<promise>DONE</promise>"));
    let (code, err) = finish(child, 10);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("loop a in .: running -> passed"), "{err}");
    assert!(dir.wakes().is_empty(), "it went to the project too");
}

#[test]
fn a_loop_that_ends_at_a_stop_notifies_the_person_in_claude_code_only() {
    let dir = Project::git();
    let osc = |stop: &Stop| {
        stop.json
            .as_ref()
            .and_then(|j| j["terminalSequence"].as_str().map(str::to_string))
    };
    dir.loop_for("w1").flags(&["--name", "a"]).start();
    let stop = dir.stop(&[], "w1", Some("<promise>DONE</promise>"));
    let sequence = osc(&stop).expect("a notification");
    assert_starts_with!(sequence, "\u{1b}]9;vigil: loop a in .: running -> passed");
    assert_contains!(sequence, "\u{1b}]777;notify;vigil;vigil: loop a");
    assert!(sequence.ends_with('\u{7}'));
    dir.loop_for("w2").start();
    let stop = dir.stop(
        &["--desktop-notification", "off"],
        "w2",
        Some("<promise>DONE</promise>"),
    );
    assert_eq!(osc(&stop), None);
    // Codex (its input has a turn_id) has no such field.
    dir.loop_for("w3").start();
    let mut payload = dir.payload("w3", Some("<promise>DONE</promise>"));
    payload["turn_id"] = json!("t1");
    let stop = dir.stop_with(&[], payload.to_string());
    assert!(stop.json.is_some());
    assert_eq!(osc(&stop), None);
}

#[test]
fn a_worktrees_loop_reports_to_the_main_checkout_and_loop_list_shows_it() {
    let dir = Project::git();
    git(dir.path(), &["commit", "-q", "--allow-empty", "-m", "init"]);
    let worktree = dir.beside("wt");
    add_worktree(dir.path(), "wt", &worktree);
    // Nothing wires the repository: a loop there would never be judged.
    let refused = Loop::for_session(&worktree, "w1").output();
    assert_exit(&refused, 2);
    assert_contains!(said(&refused), "has no vigil Stop hook");
    // The main checkout's local settings wire every worktree (Claude Code reads them there).
    install_at(dir.path(), None, &[]);
    // A second wiring in the worktree's own file is refused: both gates would run.
    let out = settings_merge()
        .arg("install")
        .arg("--settings")
        .arg(worktree.join(".claude/settings.local.json"))
        .arg("--bin-dir")
        .arg(bin_dir())
        .current_dir(&worktree)
        .output()
        .unwrap();
    assert_exit(&out, 2);
    let cleanup = scopeguard(worktree.clone());
    Loop::for_session(&worktree, "w1")
        .flags(&["--name", "parser"])
        .start();
    let list = dir.loop_command(&["list"]);
    let text = stdout_of(&list);
    assert!(text.contains("parser"), "{text}");
    assert!(text.contains("running"), "{text}");
    let stop = run_stop(
        &worktree,
        &[],
        &[],
        stop_payload(&worktree, "w1", Some("<promise>DONE</promise>")).to_string(),
    );
    assert!(!stop.blocked());
    let wakes = dir.wakes();
    assert_eq!(wakes.len(), 1);
    let shown = format!(
        "loop parser in ../{}: running -> passed",
        worktree.file_name().unwrap().to_string_lossy()
    );
    assert_contains!(
        wakes[0]["line"].as_str().unwrap(),
        &shown,
        "{}",
        wakes[0]["line"]
    );
    let text = stdout_of(&dir.loop_command(&["list"]));
    assert_contains!(text, "passed");
    assert_contains!(text, "declared");
    assert!(text.contains("1 wake waiting"), "{text}");
    drop(cleanup);
}

/// Removes a worktree made beside a test's project when the test ends.
struct Cleanup(PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scopeguard(path: PathBuf) -> Cleanup {
    Cleanup(path)
}

fn json_of_stdout(out: &std::process::Output) -> Value {
    serde_json::from_str(&stdout_of(out)).unwrap_or_else(|e| panic!("{e}: {}", said(out)))
}

#[test]
fn the_doctor_warns_of_wakes_nobody_reads_and_of_two_sessions_waiting() {
    let dir = Project::git();
    install_at(dir.path(), None, &[]);
    let check = || stdout_of(&dir.merge("check", &[]));
    let said = check();
    assert_contains!(said, "[ok] Stop: the waiter wakes this session");
    assert!(!said.contains("wait, and no session waits"), "{said}");
    passed_loop(&dir, "w1", "a");
    let said = check();
    assert_contains!(
        said,
        "[warn] 1 wake of this project wait, and no session waits for them"
    );
    // Two commanders: the wake read, a live loop to wait for, and two sessions waiting for it.
    session_start(dir.path(), &fresh("n"), "startup");
    dir.loop_for("w2").start();
    let (one, two) = (fresh("c"), fresh("c"));
    let mut waiting = [
        waiter(dir.path(), &one, "cli"),
        waiter(dir.path(), &two, "cli"),
    ];
    for session in [&one, &two] {
        let registration = state_home().join(format!("wakes/waiters/{session}.json"));
        until(|| registration.exists());
    }
    let said = check();
    for child in &mut waiting {
        let _ = child.kill();
        let _ = child.wait();
    }
    assert_contains!(
        said,
        "[warn] 2 sessions wait for this project's wakes, and each wake reaches only one"
    );
}

#[test]
fn loop_run_worktree_runs_the_command_in_the_worktree_you_added_and_adds_none() {
    let dir = Project::git();
    git(dir.path(), &["commit", "-q", "--allow-empty", "-m", "init"]);
    install_at(dir.path(), None, &[]);
    let main = std::fs::canonicalize(dir.path()).unwrap();
    let worktree = main.parent().unwrap().join(format!(
        "{}-parser",
        main.file_name().unwrap().to_string_lossy()
    ));
    let _cleanup = scopeguard(worktree.clone());
    // A hook the agent planted in the repository: vigil runs no git command that would run it.
    let hook = main.join(".git/hooks/post-checkout");
    let pwned = main.parent().unwrap().join(format!(
        "{}-PWNED",
        main.file_name().unwrap().to_string_lossy()
    ));
    let _pwned = scopeguard(pwned.clone());
    write_file(&hook, format!("#!/bin/sh\ntouch {}\n", pwned.display()));
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let seen = dir.path().join("seen");
    let run = |name: &str| {
        stop_gate()
            .args(["loop", "run", "--worktree", name, "--max-iterations", "2"])
            .args(["--completion-promise", "DONE", "--", "sh", "-c"])
            .arg(format!("pwd > {}", seen.display()))
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    // Missing: refused, with the line that adds it; nothing added, nothing run.
    let out = run("parser");
    assert_exit(&out, 2);
    assert_contains!(said(&out), "worktree add -b parser");
    assert!(!worktree.exists() && !seen.exists() && !pwned.exists());
    // Added by you: the command runs there (no session claims the loop: `sh` starts none).
    std::fs::remove_file(&hook).unwrap();
    add_worktree(dir.path(), "parser", &worktree);
    let out = run("parser");
    assert_exit(&out, 4);
    assert_eq!(
        std::fs::read_to_string(&seen).unwrap().trim(),
        worktree.to_str().unwrap(),
        "the command ran in the worktree"
    );
    // A name that is not a plain word, or that git would read as an option, is refused.
    for name in ["../x", "--no-checkout"] {
        let out = run(name);
        assert_eq!(out.status.code(), Some(2), "{name}: {}", said(&out));
    }
}

#[test]
fn a_session_whose_own_loop_ended_hears_the_projects_wakes_and_a_headless_one_does_not() {
    let dir = Project::git();
    // cmdr ran a loop of its own, which passed: it is not a worker any more.
    passed_loop(&dir, "cmdr", "own");
    session_start(dir.path(), &fresh("n"), "startup");
    passed_loop(&dir, "w1", "other");
    // A headless one-shot (`claude -p`) does not take the project's news.
    let headless = session_start_command(dir.path(), &fresh("p"), "startup")
        .env("CLAUDE_CODE_ENTRYPOINT", "sdk-cli")
        .output()
        .unwrap();
    assert_lacks!(stdout_of(&headless), "loop other");
    assert_eq!(dir.wakes().len(), 1);
    let said = dir.prompt("cmdr", "what now?");
    let told = said["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap_or("");
    assert_contains!(told, "loop other in .: running -> passed", "{said}");
}

#[test]
fn many_wakes_are_told_whole_within_the_cap_and_the_rest_stay_queued() {
    let dir = Project::git();
    let long = "x".repeat(60);
    for i in 0..40 {
        passed_loop(&dir, &format!("w{i}"), &format!("{long}{i}"));
    }
    let start = session_start(dir.path(), &fresh("n"), "startup");
    let told = json_of_stdout(&start)["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap()
        .to_string();
    let heard = told.matches("running -> passed").count();
    assert!(heard > 5, "{told}");
    // Each wake told whole (its line, to the end), and those not told are still queued.
    assert_eq!(
        heard,
        told.matches("no check verified the work").count(),
        "a line was cut: {told}"
    );
    assert_eq!(dir.wakes().len(), 40 - heard);
}

#[test]
fn a_worktree_whose_git_file_names_a_main_the_agent_planted_is_not_trusted() {
    let dir = Project::git();
    git(dir.path(), &["commit", "-q", "--allow-empty", "-m", "init"]);
    install_at(dir.path(), None, &[]);
    dir.write(
        ".claude/settings.local.json",
        dir.read(".claude/settings.local.json").replacen(
            '{',
            r#"{"sandbox": {"enabled": true},"#,
            1,
        ),
    );
    let worktree = dir.beside("evil");
    add_worktree(dir.path(), "evil", &worktree);
    let _cleanup = scopeguard(worktree.clone());
    let wt = std::fs::canonicalize(&worktree).unwrap();
    // Honest: the main checkout's sandbox holds in the worktree; an unconfinable check is not run.
    let attempt = || {
        run_stop(
            &wt,
            &["--run", "touch ran.txt", "--max-blocks", "100"],
            &[("VIGIL_TEST_BWRAP", "/nonexistent/bwrap".as_ref())],
            stop_payload(&wt, "s1", Some("x")).to_string(),
        )
    };
    assert!(attempt().blocked());
    assert!(!wt.join("ran.txt").exists());
    // The agent, writing only in the worktree, makes its .git name a main of its own.
    let planted = wt.join("evil/.git/worktrees/n");
    std::fs::create_dir_all(&planted).unwrap();
    std::fs::write(
        planted.join("gitdir"),
        format!("{}\n", wt.join(".git").display()),
    )
    .unwrap();
    std::fs::write(planted.join("HEAD"), "ref: refs/heads/evil\n").unwrap();
    std::fs::write(wt.join(".git"), "gitdir: evil/.git/worktrees/n\n").unwrap();
    let stop = attempt();
    assert!(stop.blocked(), "{:?}", stop.json);
    assert!(!wt.join("ran.txt").exists(), "the check ran unconfined");
    // Or names the main's own git directory, or is gone: the main pinned earlier still holds.
    let main_git = std::fs::canonicalize(dir.path()).unwrap().join(".git");
    std::fs::write(wt.join(".git"), format!("gitdir: {}\n", main_git.display())).unwrap();
    let stop = attempt();
    assert!(stop.blocked(), "{:?}", stop.json);
    std::fs::remove_file(wt.join(".git")).unwrap();
    let stop = attempt();
    assert!(stop.blocked(), "{:?}", stop.json);
    assert!(!wt.join("ran.txt").exists(), "the check ran unconfined");
}

/// The loop `name` of session `session` in `dir` cut by its SessionEnd after one blocked stop,
/// then told the turn had failed on an API error (Claude Code runs StopFailure's hook after
/// SessionEnd's when an API error ends `claude -p`).
fn cut_then_failed(dir: &Project, session: &str, name: &str, before_failure: impl FnOnce()) {
    dir.loop_for(session).flags(&["--name", name]).start();
    assert!(dir.stop(&[], session, Some("Working.")).blocked());
    ok(session_end(
        dir.path(),
        &[],
        json!({"session_id": session, "hook_event_name": "SessionEnd", "cwd": dir.path(),
            "reason": "other"})
        .to_string(),
    ));
    before_failure();
    let payload = sample_payload(
        "claude-stop-failure-overloaded.json",
        &[("session_id", json!(session)), ("cwd", json!(dir.path()))],
    );
    ok(session_end(dir.path(), &["--checkpoint"], payload));
}

#[test]
fn a_cut_whose_failed_turn_is_told_after_it_wakes_with_the_api_error_once() {
    let dir = Project::git();
    cut_then_failed(&dir, "w1", "flaky", || {});
    let wakes = dir.wakes();
    assert_eq!(wakes.len(), 1, "one wake, amended: {wakes:?}");
    assert_eq!(wakes[0]["end_reason"], "turn-failed", "{wakes:?}");
    let line = wakes[0]["line"].as_str().unwrap();
    assert!(
        line.starts_with("loop flaky in .: running -> cut after 2 passes (")
            && line.contains("API error")
            && line.ends_with("NOT verified"),
        "{line}"
    );
    // `loop list` says the same.
    let list = dir.loop_command(&["list"]);
    assert!(stdout_of(&list).contains(" turn-failed"), "{}", said(&list));
}

#[test]
fn a_cut_already_told_is_not_told_again_when_its_failed_turn_comes() {
    let dir = Project::git();
    cut_then_failed(&dir, "w1", "flaky", || {
        // The next session starts between the two hooks and hears of the cut.
        let said = session_start_loader()
            .current_dir(dir.path())
            .write_stdin(
                json!({"session_id": "next", "hook_event_name": "SessionStart",
                    "cwd": dir.path(), "source": "startup"})
                .to_string(),
            )
            .output()
            .unwrap();
        let told = json_of_stdout(&said)["hookSpecificOutput"]["additionalContext"]
            .as_str()
            .unwrap_or("")
            .to_string();
        assert!(told.contains("loop flaky in .: running -> cut"), "{told}");
    });
    assert!(dir.wakes().is_empty(), "told once already");
}

/// Issue 44 item 2: a reader that cannot read the loop's record (EIO) cannot tell whether its
/// wake is still news, so it keeps the wake queued rather than judge it stale and delete it;
/// the next start, unfaulted, tells it. Before, the wake was deleted, and the end never
/// reached the commander.
#[test]
fn a_wake_whose_loop_cannot_be_read_stays_queued() {
    if !strace_runs() {
        return;
    }
    let dir = Project::git();
    passed_loop(&dir, "w1", "kept");
    assert_eq!(dir.wakes().len(), 1);
    let record = dir.protected().join("sessions/w1.rec");
    let payload = serde_json::json!({"session_id": fresh("n"), "cwd": dir.path(),
        "hook_event_name": "SessionStart", "source": "startup"});
    let mut cmd = faulted("session-start-loader", Some(&record), "read", "error=EIO");
    cmd.current_dir(dir.path());
    let out = output_with_stdin(cmd, payload.to_string().as_bytes());
    assert_lacks!(stdout_of(&out), "loop kept");
    assert_eq!(dir.wakes().len(), 1, "the wake was dropped");
    let start = session_start(dir.path(), &fresh("n"), "startup");
    assert_contains!(stdout_of(&start), "loop kept in .: running -> passed");
    assert!(dir.wakes().is_empty());
}

/// Issue 44 item 2: a wake the ending Stop cannot make durable (EIO on each fsync) is told to
/// the person in the Stop's `systemMessage`, not only on the stderr of a hook that exits 0.
#[test]
fn a_wake_that_cannot_be_written_is_told_to_the_person_at_the_stop() {
    if !strace_runs() {
        return;
    }
    let dir = Project::git();
    dir.loop_for("w1").flags(&["--name", "a"]).start();
    let mut cmd = faulted("stop-gate", None, "fsync", "error=EIO");
    cmd.current_dir(dir.path());
    let payload = dir.payload("w1", Some("<promise>DONE</promise>"));
    let out = output_with_stdin(cmd, payload.to_string().as_bytes());
    let stop = stop_of(&out);
    assert!(!stop.blocked(), "{:?}", stop.json);
    let message = stop.system_message();
    assert_contains!(message, "cannot write the wake");
    assert_contains!(
        message,
        "Input/output error; the loop's commander may not be woken"
    );
}

/// Issue 44 item 2, every end has its wake: the Stop that ends a loop is killed (SIGKILL) at
/// the rename that would queue its wake, after the save that ended it. The end and the wake it
/// owes were one save, so the session's next hook writes the wake; it is told once, and no
/// later hook writes it again. Before, no wake was ever written: the commander never heard.
#[test]
fn a_stop_killed_between_the_end_and_its_wake_leaves_the_wake_owed_and_the_next_hook_writes_it() {
    if !strace_runs() {
        return;
    }
    let dir = Project::git();
    dir.loop_for("w1").flags(&["--name", "owed"]).start();
    let mut cmd = faulted(
        "stop-gate",
        None,
        "rename,renameat,renameat2",
        "signal=KILL:when=1",
    );
    cmd.current_dir(dir.path());
    let payload = dir.payload("w1", Some("<promise>DONE</promise>"));
    let out = output_with_stdin(cmd, payload.to_string().as_bytes());
    assert!(
        out.status.code() != Some(0) || out.stdout.is_empty(),
        "{}",
        said(&out)
    );
    let state = dir.loop_state("w1");
    assert_eq!(state["status"], "passed", "{state}");
    assert_eq!(state["wake_owed"], true, "{state}");
    assert!(dir.wakes().is_empty(), "the kill came before the wake");
    // The session's next Stop writes it, and clears the debt.
    assert!(!dir.stop(&[], "w1", Some("next")).blocked());
    assert_eq!(dir.wakes().len(), 1);
    assert!(dir.loop_state("w1").get("wake_owed").is_none());
    let start = session_start(dir.path(), &fresh("n"), "startup");
    assert_contains!(stdout_of(&start), "loop owed in .: running -> passed");
    assert!(!dir.stop(&[], "w1", Some("again")).blocked());
    assert!(dir.wakes().is_empty(), "written twice");
}

/// Issue 44 item 2, at most once: a reader told a wake and could not remove its claim (EIO on
/// unlink). Two minutes on, the claim looks like one whose holder died; it is never put back
/// and told again. Before, the same wake came twice.
#[test]
fn a_told_wake_whose_claim_cannot_be_removed_is_never_told_again() {
    if !strace_runs() {
        return;
    }
    let dir = Project::git();
    passed_loop(&dir, "w1", "once");
    let payload = serde_json::json!({"session_id": fresh("n"), "cwd": dir.path(),
        "hook_event_name": "SessionStart", "source": "startup"});
    let mut cmd = faulted("session-start-loader", None, "unlink,unlinkat", "error=EIO");
    cmd.current_dir(dir.path());
    let out = output_with_stdin(cmd, payload.to_string().as_bytes());
    assert_contains!(stdout_of(&out), "loop once in .: running -> passed");
    let claimed = queue_of(dir.path()).join("claimed");
    let held: Vec<_> = std::fs::read_dir(&claimed).unwrap().flatten().collect();
    assert_eq!(held.len(), 1, "the claim could not be removed");
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(held[0].path())
        .unwrap();
    file.set_modified(std::time::SystemTime::now() - Duration::from_secs(121))
        .unwrap();
    let again = session_start(dir.path(), &fresh("n"), "startup");
    assert_lacks!(stdout_of(&again), "loop once");
    assert!(dir.wakes().is_empty());
}
