//! SPEC §4, `stop-gate loop start`, `status` and `cancel` from a terminal: the flags and their
//! errors, the session a loop belongs to, `--next-session`, and the help.

use serde_json::Value;

use super::DECLARED;
use crate::support::*;

/// A loop of session s1, 3 passes, the promise `DONE`: the flags before the prompt.
const S1: &str = "--session s1 --max-iterations 3 --completion-promise DONE";

/// `loop start` with the words of `args`, refused as a usage error: its one line.
fn refused(p: &Project, args: &str) -> String {
    usage_error(&p.start(&words(args)), "stop-gate")
}

#[test]
fn loop_start_accepts_both_flag_forms() {
    let p = Project::new();
    ok(p.start(&[
        "--max-iterations=4",
        "--completion-promise=ALL TESTS PASS",
        "--session=s1",
        "Fix",
        "it",
    ]));
    let state = p.loop_state("s1");
    assert_eq!(state["max_iterations"], 4);
    assert_eq!(state["completion_promise"], "ALL TESTS PASS");
    assert_eq!(state["prompt"], "Fix it");
    assert_eq!(state["iteration"], 1);
}

#[test]
fn loop_start_refuses_an_unknown_flag_never_taking_it_into_the_prompt() {
    let p = Project::new();
    for args in [
        format!("{S1} --max-iteration=5 Fix"),
        format!("{S1} Fix --verbos"),
    ] {
        refused(&p, &args);
        assert!(!p.vigil().join("loops/s1.json").exists());
    }
}

#[test]
fn loop_start_refuses_without_max_iterations() {
    let p = Project::new();
    let output = p.start(&["--session", "s1", "--completion-promise", "DONE", "Fix"]);
    assert_contains!(usage_error(&output, "stop-gate"), "--max-iterations");
    for bad in ["0", "10001", "-1", "x"] {
        let args = format!("--session s1 --completion-promise DONE --max-iterations {bad} Fix");
        let output = p.start(&words(&args));
        assert_eq!(output.status.code(), Some(2), "{bad}");
    }
}

#[test]
fn loop_start_refuses_without_a_session_id() {
    let p = Project::new();
    let output = p.start(&words("--max-iterations 3 --completion-promise DONE Fix"));
    assert_contains!(usage_error(&output, "stop-gate"), "session");
    assert!(
        !p.vigil().join("loops").exists()
            || tree(&p.vigil().join("loops"))
                .iter()
                .all(|f| f.ends_with(".lock"))
    );
}

#[test]
fn loop_start_takes_the_session_from_the_environment() {
    let p = Project::new();
    let args = words("--max-iterations 2 --completion-promise DONE Fix");
    let output = p.start_with_env(&args, &[("CLAUDE_CODE_SESSION_ID", "from-claude")]);
    assert!(output.status.success());
    assert_eq!(p.loop_state("from-claude")["session_id"], "from-claude");
    let output = p.start_with_env(
        &args,
        &[
            ("CLAUDE_CODE_SESSION_ID", "from-claude"),
            ("VIGIL_SESSION_ID", "from-vigil"),
        ],
    );
    assert!(output.status.success());
    assert_eq!(p.loop_state("from-vigil")["session_id"], "from-vigil");
}

#[test]
fn loop_start_refuses_a_hostile_session_id() {
    let p = Project::new();
    let output = p.loop_for("../../x").prompt("Fix").output();
    usage_error(&output, "stop-gate");
    assert!(
        !p.path().join("x.json").exists() && !p.path().parent().unwrap().join("x.json").exists()
    );
}

const TRICKY_PROMPT: &str = "---\ntitle: \"Fix\" it\n---\nDon't stop: run `cargo test` and $(rm -rf /) won't run; 'quotes' \"too\" \\n $HOME ${X} ; | & > <\nÜnïcödé ✓ 日本\n---\n";

#[test]
fn loop_prompt_with_shell_metacharacters_and_dash_lines_round_trips_exactly() {
    // As one argument.
    let p = Project::new();
    p.start_ok("argv", 3, TRICKY_PROMPT);
    assert_eq!(p.loop_state("argv")["prompt"], TRICKY_PROMPT);
    assert_eq!(p.stop(&[], "argv", Some("x")).task(), TRICKY_PROMPT);
    // From --prompt-file.
    let file = p.path().join("PROMPT.md");
    std::fs::write(&file, TRICKY_PROMPT).unwrap();
    p.loop_for("file").prompt_file(&file).start();
    assert_eq!(p.loop_state("file")["prompt"], TRICKY_PROMPT);
    // As raw text on stdin, the way the slash command passes $ARGUMENTS.
    let raw = format!(
        "--max-iterations 3 --completion-promise DONE --session=raw {}",
        TRICKY_PROMPT.trim_end()
    );
    ok(p.start_from_stdin(&format!("{raw}\n")));
    assert_eq!(p.loop_state("raw")["prompt"], TRICKY_PROMPT.trim_end());
}

#[test]
fn one_loop_per_session() {
    let p = Project::new();
    p.start_ok("s1", 3, "first");
    let output = p.loop_for("s1").prompt("second").output();
    assert_contains!(usage_error(&output, "stop-gate"), "already running");
    assert_eq!(p.loop_state("s1")["prompt"], "first");
}

#[test]
fn loop_status_and_cancel() {
    let p = Project::new();
    let status = |args: &[&str]| p.loop_command(&[&["status"], args].concat());
    assert_eq!(status(&["--session", "s1"]).status.code(), Some(1));
    p.start_ok("s1", 3, "work");
    let out = status(&["--session", "s1"]);
    // Its name, the checkout's directory name when none was given (SPEC §10).
    let name = std::fs::canonicalize(p.path()).unwrap();
    let name = name.file_name().unwrap().to_string_lossy();
    assert_eq!(
        stdout_of(&out),
        format!("session s1: running, pass 1/3, promise DONE, name {name}\n")
    );
    let out = status(&["--session", "s1", "--json"]);
    let state: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_valid("loop.schema.json", &state);
    let cancel = p.loop_command(&["cancel", "--session", "s1"]);
    assert!(cancel.status.success());
    assert_eq!(p.loop_state("s1")["status"], "cancelled");
    let reported = p.stop_s1(&[]);
    assert!(!reported.blocked(), "a cancelled loop no longer blocks");
    let message = reported.system_message();
    assert_contains!(message, "cancelled at pass 1/3");
    assert_contains!(message, "NOT verified");
    assert!(p.stop_s1(&[]).silent_allow(), "reported once");
    let again = p.loop_command(&["cancel", "--session", "s1"]);
    assert_eq!(again.status.code(), Some(1));
}

#[test]
fn next_session_writes_a_pending_loop_that_lapses() {
    let p = Project::new();
    p.loop_for_next_session()
        .flags(&["--claim-within", "5m"])
        .prompt("Fix")
        .start();
    let pending: Value = serde_json::from_str(
        &std::fs::read_to_string(p.protected().join("loops/pending.json")).unwrap(),
    )
    .unwrap();
    assert_valid("loop.schema.json", &pending);
    assert!(pending["claim_before"].is_string());
    let both = p.start(&words(
        "--next-session --session s --max-iterations 3 --completion-promise DONE Fix",
    ));
    assert_eq!(both.status.code(), Some(2));
}

#[test]
fn help_is_printed_for_every_command() {
    for args in [
        vec!["--help"],
        vec!["loop", "--help"],
        vec!["loop", "start", "--help"],
        vec!["loop", "status", "--help"],
    ] {
        let output = stop_gate().args(&args).output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{args:?}");
        assert!(stdout_of(&output).contains("Usage"), "{args:?}");
    }
}

#[test]
fn loop_cancel_succeeds_while_a_long_check_runs_and_the_stop_reports_it() {
    let p = Project::new();
    p.start_ok("s1", 5, "Fix.");
    let dir = p.path().to_path_buf();
    let payload = p.payload("s1", Some(DECLARED)).to_string();
    let stop = std::thread::spawn(move || {
        stop_gate()
            .args(["--run", "sleep 3; exit 1"])
            .current_dir(&dir)
            .write_stdin(payload)
            .output()
            .unwrap()
    });
    std::thread::sleep(std::time::Duration::from_millis(500));
    let started = std::time::Instant::now();
    ok(p.loop_command(&["cancel", "--session", "s1"]));
    assert_within(
        started,
        std::time::Duration::from_secs(2),
        "cancel waited for the check",
    );
    let output = stop.join().unwrap();
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_valid("stop-output.schema.json", &json);
    assert!(json.get("decision").is_none(), "{json}");
    assert_contains!(
        json["systemMessage"].as_str().unwrap(),
        "cancelled",
        "{json}"
    );
}

#[test]
fn loop_cancel_on_a_damaged_record_says_the_loop_is_over() {
    let p = Project::new();
    p.start_ok("s1", 3, "Fix.");
    std::fs::write(p.protected().join("sessions/s1.rec"), "{bad").unwrap();
    let cancel = ok(p.loop_command(&["cancel", "--session", "s1"]));
    assert_contains!(stdout_of(&cancel), "damaged");
    assert!(p.stop(&[], "s1", Some(DECLARED)).silent_allow());
}

#[test]
fn loop_start_refuses_any_unknown_flag_inside_the_prompt() {
    let p = Project::new();
    for args in [
        format!("{S1} Fix it --verbose now"),
        format!("{S1} Fix --sesion abc"),
    ] {
        assert_contains!(refused(&p, &args), "inside the prompt");
    }
    let raw = "--max-iterations 3 --completion-promise DONE --session s1 Fix --release builds\n";
    let output = p.start_from_stdin(raw);
    assert_eq!(output.status.code(), Some(2));
    // Kept as text when quoted, or after --.
    let raw = "--max-iterations 3 --completion-promise DONE --session s1 -- Fix --release builds\n";
    ok(p.start_from_stdin(raw));
    assert_eq!(p.loop_state("s1")["prompt"], "Fix --release builds");
}

#[test]
fn loop_start_refuses_a_flag_given_twice() {
    let p = Project::new();
    let output = p.start(&words(&format!("{S1} Fix it --max-iterations 9999")));
    assert_contains!(usage_error(&output, "stop-gate"), "twice");
}

#[test]
fn args_stdin_inside_the_prompt_is_text() {
    let p = Project::new();
    p.start_ok("s1", 3, "explain the --args-stdin flag");
    ok(p.start(&words(
        "--session s2 --max-iterations 3 --completion-promise DONE -- use the --args-stdin flag",
    )));
    assert_eq!(p.loop_state("s2")["prompt"], "use the --args-stdin flag");
}

#[test]
fn the_pending_session_id_is_reserved() {
    let p = Project::new();
    let output = p.loop_for("pending").prompt("Fix").output();
    assert_contains!(usage_error(&output, "stop-gate"), "reserved");
    // A Stop whose session is called `pending` never drives the pending loop.
    p.loop_for_next_session().prompt("Fix").start();
    assert!(p.stop(&[], "pending", Some("x")).silent_allow());
}

#[test]
fn loop_prompt_over_16000_characters_is_refused() {
    let p = Project::new();
    let long = "x".repeat(16_001);
    let output = p.loop_for("s1").prompt(&long).output();
    usage_error(&output, "stop-gate");
}

/// `loop start` errors blame the flag that is wrong (issue 15, item 9): a short flag is
/// named as one, a near miss gets the flag meant, and no session id points at --next-session.
#[test]
fn loop_start_errors_name_the_flag_that_is_wrong() {
    let p = Project::new();
    for (args, said) in [
        (
            "--session s -n 3 --completion-promise DONE fix",
            "unknown flag -n",
        ),
        (
            "--session s --max-iterations 3 --promise DONE fix",
            "did you mean --completion-promise?",
        ),
    ] {
        let out = p.start(&words(args));
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(said), "{args:?}: {stderr}");
        assert!(!stderr.contains("stands inside the prompt"), "{stderr}");
    }
    // Words of a prompt that merely begin with a dash are the prompt's, as they always were.
    for (session, prompt) in [("d1", "-fix the parser"), ("d2", "-v output is wrong")] {
        let args = format!("--session {session} --max-iterations 3 --completion-promise DONE");
        let out = p.start(&words(&format!("{args} {prompt}")));
        assert!(out.status.success(), "{prompt}: {}", said(&out));
        assert_eq!(p.loop_state(session)["prompt"], prompt);
    }
    // No session named, nor any in the environment (the binaries run without one).
    let out = p.start(&words("--max-iterations 3 --completion-promise DONE fix"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--next-session"));
}

#[test]
fn a_completion_promise_longer_than_200_characters_is_refused() {
    let p = Project::new();
    let long = "A".repeat(201);
    let out = p.loop_for("s1").promise(&long).prompt("Task.").output();
    assert_contains!(usage_error(&out, "stop-gate"), "more than 200 characters");
    let ok = "A".repeat(200);
    p.loop_for("s1").promise(&ok).prompt("Task.").start();
}

#[test]
fn a_second_next_session_loop_is_refused_while_one_waits() {
    let dir = Project::git();
    let start = |promise: &str| {
        dir.loop_for_next_session()
            .max_iterations(4)
            .promise(promise)
            .output()
    };
    ok(start("FIRST"));
    let second = start("SECOND");
    let line = assert_one_line_error(&second, "stop-gate");
    assert_eq!(second.status.code(), Some(2), "{line}");
    assert_contains!(line, "a loop is already pending");
    assert_contains!(line, "stop-gate loop cancel");
    let pending = json_of(&protected_dir(dir.path()).join("loops/pending.json"));
    assert_eq!(pending["completion_promise"], "FIRST");
    // Cancelled with no session named, the next one may wait.
    let cancel = dir.loop_command(&["cancel"]);
    assert!(cancel.status.success());
    assert_contains!(stdout_of(&cancel), "pending loop");
    ok(start("SECOND"));
}

#[test]
fn loop_status_and_cancel_with_no_session_show_the_latest_loop_and_the_pending_one() {
    let dir = Project::git();
    let status = || dir.loop_command(&["status"]);
    let none = status();
    assert_eq!(none.status.code(), Some(1));
    assert_one_line_error(&none, "stop-gate");
    for (session, promise) in [("s-old", "OLD"), ("s-new", "NEW")] {
        dir.loop_for(session)
            .max_iterations(4)
            .promise(promise)
            .start();
        std::thread::sleep(std::time::Duration::from_millis(1100));
    }
    let shown = stdout_of(&status());
    assert_contains!(
        shown,
        "latest loop: session s-new: running, pass 1/4, promise NEW"
    );
    let json: Value =
        serde_json::from_str(&stdout_of(&dir.loop_command(&["status", "--json"]))).unwrap();
    assert_eq!(json["session_id"], "s-new");
    assert_valid("loop.schema.json", &json);
    let cancel = dir.loop_command(&["cancel"]);
    assert!(stdout_of(&cancel).contains("cancelled in session s-new"));
    assert_eq!(loop_of(dir.path(), "s-new")["status"], "cancelled");
    assert_eq!(loop_of(dir.path(), "s-old")["status"], "running");
}

/// Review of issue 29: `--next-session` started eight times at once leaves exactly one loop
/// waiting, and the other seven are refused, none lost without a word.
#[test]
fn next_session_loops_started_at_once_wait_one_at_a_time() {
    let dir = Project::git();
    let starts: Vec<_> = (0..8)
        .map(|n| {
            let promise = format!("P{n}");
            vigil_process("stop-gate")
                .args(["loop", "start", "--next-session", "--max-iterations", "3"])
                .args(["--completion-promise", &promise, "Task"])
                .current_dir(dir.path())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let ok: Vec<String> = starts
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .filter(|o| o.status.success())
        .map(|o| stdout_of(&o))
        .collect();
    assert_eq!(ok.len(), 1, "{ok:?}");
    let pending = json_of(&protected_dir(dir.path()).join("loops/pending.json"));
    assert_contains!(
        ok[0],
        pending["completion_promise"].as_str().unwrap(),
        "{ok:?} {pending}"
    );
}
