//! SPEC §4, `stop-gate loop run` (issue 29): a loop for the session its command starts, whose
//! verdict reaches the terminal as the exit code and one line. The command here is a small
//! engine in sh that does what Claude Code and Codex do with vigil's hooks (the end-to-end
//! suite runs the real ones).

use std::path::Path;

use serde_json::Value;

use crate::support::*;

/// A session as an engine runs it: SessionStart, then what the agent does (`$AGENT`, as shell
/// text), then a Stop per message until the gate lets one through (its check `$CHECK`, else
/// `true`), then what a task left running does after it (`$AFTER`), then SessionEnd (unless
/// `NO_SESSION_END` is set), exiting `$FAKE_EXIT`. The
/// environment it saw is left in `seen-env` for the test to read.
const ENGINE: &str = r#"#!/bin/sh
sid=$1; shift
env > seen-env
printf '{"session_id":"%s","hook_event_name":"SessionStart","source":"startup","cwd":"%s"}' "$sid" "$PWD" | "$LOADER" > start-out
if [ -n "$AGENT" ]; then eval "$AGENT"; fi
for msg in "$@"; do
  out=$(printf '{"session_id":"%s","hook_event_name":"Stop","cwd":"%s","stop_hook_active":false,"last_assistant_message":"%s"}' "$sid" "$PWD" "$msg" | "$GATE" --run "${CHECK:-true}")
  case "$out" in
    *'"decision":"block"'*) continue ;;
  esac
  break
done
if [ -n "$AFTER" ]; then eval "$AFTER"; fi
if [ -z "$NO_SESSION_END" ]; then
  printf '{"session_id":"%s","hook_event_name":"SessionEnd","reason":"other","cwd":"%s"}' "$sid" "$PWD" | "$HANDOFF" 2>/dev/null
fi
exit "${FAKE_EXIT:-0}"
"#;

/// The engine, written into `dir`: its path.
fn engine(dir: &Path) -> String {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("engine.sh");
    std::fs::write(&path, ENGINE).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_str().unwrap().to_string()
}

/// [`engine`], its script with the first `from` made `to`.
fn engine_with(dir: &Path, from: &str, to: &str) -> String {
    let path = engine(dir);
    let script = std::fs::read_to_string(&path)
        .unwrap()
        .replacen(from, to, 1);
    std::fs::write(&path, script).unwrap();
    path
}

/// `stop-gate loop run ARGS` in `dir`, not yet run, with the hooks' binaries named for the
/// engine.
fn loop_run_process(dir: &Path, args: &[&str]) -> std::process::Command {
    let bin = bin_dir();
    let mut cmd = vigil_process("stop-gate");
    cmd.args(["loop", "run"])
        .args(args)
        .current_dir(dir)
        .env("GATE", bin.join("stop-gate"))
        .env("LOADER", bin.join("session-start-loader"))
        .env("HANDOFF", bin.join("session-end-handoff"))
        .env_remove("CLAUDE_CODE_STOP_HOOK_BLOCK_CAP")
        .env_remove("VIGIL_LOOP_RUN")
        // A home of the test's own: what the user's ~/.claude holds decides nothing here.
        .env("HOME", dir.join(".home"));
    cmd
}

/// `stop-gate loop run ARGS` in `dir`, with `env` added, run to its end.
fn loop_run(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = loop_run_process(dir, args);
    for (name, value) in env {
        cmd.env(name, value);
    }
    cmd.output().unwrap()
}

/// `loop run --max-iterations MAX --completion-promise DONE EXTRA... -- COMMAND...`.
fn run_command(
    dir: &Path,
    max: &str,
    extra: &[&str],
    command: &[&str],
    env: &[(&str, &str)],
) -> std::process::Output {
    let mut args = vec!["--max-iterations", max, "--completion-promise", "DONE"];
    args.extend_from_slice(extra);
    args.push("--");
    args.extend_from_slice(command);
    loop_run(dir, &args, env)
}

/// A run refused before its command ran: exit 4, one line saying `why`, nothing touched.
fn assert_runs_nothing(env: &[(&str, &str)], why: &str) {
    let dir = Project::git();
    let marker = dir.path().join("ran");
    let out = run_command(
        dir.path(),
        "3",
        &[],
        &["touch", marker.to_str().unwrap()],
        env,
    );
    let line = verdict(&out, 4);
    assert!(line.contains(why), "{line}");
    assert!(!marker.exists());
}

fn run_with(
    dir: &Path,
    max: &str,
    messages: &[&str],
    env: &[(&str, &str)],
) -> std::process::Output {
    let engine = engine(dir);
    let mut args = vec![
        "--max-iterations",
        max,
        "--completion-promise",
        "DONE",
        "--",
        &engine,
        "s-run",
    ];
    args.extend_from_slice(messages);
    loop_run(dir, &args, env)
}

/// In a new repository, [`run_with`] of `max` passes saying `messages`, with `env`: the
/// repository, and the run's one line, having exited `code`.
fn verdict_of_run(
    max: &str,
    messages: &[&str],
    env: &[(&str, &str)],
    code: i32,
) -> (Project, String) {
    let dir = Project::git();
    let out = run_with(dir.path(), max, messages, env);
    let line = verdict(&out, code);
    (dir, line)
}

/// `loop run`'s verdict: its one line on stderr, having exited `code`.
fn verdict(out: &std::process::Output, code: i32) -> String {
    let line = assert_one_line_error(out, "stop-gate");
    assert_eq!(out.status.code(), Some(code), "{line}");
    line
}

/// Nothing of the run is left in the protected state: no pending loop, no claim.
fn assert_run_forgotten(dir: &Path) {
    let loops = protected_dir(dir).join("loops");
    let left: Vec<String> = std::fs::read_dir(&loops)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|name| name.starts_with("run-"))
                .collect()
        })
        .unwrap_or_default();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn loop_run_exits_0_with_one_line_when_the_loop_passes() {
    let (dir, line) = verdict_of_run("5", &["working", "<promise>DONE</promise>"], &[], 0);
    assert_contains!(line, "loop passed on pass 2/5 in session s-run");
    assert_contains!(line, "its checks passed (`true`)");
    let state = loop_of(dir.path(), "s-run");
    assert_eq!(state["status"], "passed");
    assert_eq!(state["end_reason"], "declared");
    assert_run_forgotten(dir.path());
    // The session was told how it ends, from its start.
    let start = dir.read("start-out");
    assert_contains!(start, "claimed a loop started with `stop-gate loop run`");
    assert_contains!(start, "<promise>DONE</promise>");
}

#[test]
fn a_run_whose_tree_changed_after_its_passing_stop_exits_1_and_its_wake_says_so() {
    // Something the agent left running writes after the Stop that passed.
    let (dir, line) = verdict_of_run(
        "5",
        &["<promise>DONE</promise>"],
        &[("AFTER", "echo late > late.txt")],
        1,
    );
    assert_contains!(line, "but the tree changed after its checks passed");
    assert_contains!(line, "NOT verified");
    let state = loop_of(dir.path(), "s-run");
    assert_eq!(state["status"], "passed");
    assert_eq!(state["changed_after"], true);
    assert_starts_with!(state["vouched"].as_str().unwrap(), "git-tree:", "{state}");
    let wakes = dir.wakes();
    let told = wakes.last().unwrap()["line"].as_str().unwrap().to_string();
    assert_contains!(told, "the tree changed after its checks passed");
    assert_lacks!(told, "checks green");
}

#[test]
fn loop_run_exits_1_when_the_session_ends_with_its_loop_running_and_the_loop_is_cut() {
    let (dir, line) = verdict_of_run("5", &["working"], &[], 1);
    assert!(
        line.contains("loop cut at pass 2/5 in session s-run (session-ended")
            && line.contains("NOT verified")
            && line.contains("stop-gate loop status --session s-run"),
        "{line}"
    );
    let state = loop_of(dir.path(), "s-run");
    assert_eq!(state["status"], "cut");
    assert_eq!(state["end_reason"], "session-ended");
}

#[test]
fn loop_run_cuts_the_loop_itself_when_no_session_end_hook_did() {
    let (dir, line) = verdict_of_run("5", &["working"], &[("NO_SESSION_END", "1")], 1);
    assert!(line.contains("loop cut at pass 2/5"), "{line}");
    assert_eq!(loop_of(dir.path(), "s-run")["status"], "cut");
}

#[test]
fn loop_run_tells_a_failing_command_apart() {
    let (_dir, line) = verdict_of_run("5", &["working"], &[("FAKE_EXIT", "7")], 1);
    assert_starts_with!(line, "stop-gate: `");
    assert_contains!(line, "engine.sh` exited 7; loop cut");
}

#[test]
fn loop_run_exits_1_when_the_loop_is_aborted_at_its_last_pass() {
    let (dir, line) = verdict_of_run("2", &["first try", "second try", "third"], &[], 1);
    assert_contains!(line, "loop aborted at pass 2/2");
    assert_contains!(line, "max-iterations");
    assert_eq!(loop_of(dir.path(), "s-run")["end_reason"], "max-iterations");
}

#[test]
fn loop_run_exits_3_when_the_agent_asks_a_human_to_decide() {
    let (dir, line) = verdict_of_run(
        "5",
        &["needs-decision: keep the old API or break it?"],
        &[],
        3,
    );
    assert!(line.contains("asks a human to decide"), "{line}");
    assert_eq!(loop_of(dir.path(), "s-run")["end_reason"], "needs-decision");
}

#[test]
fn loop_run_exits_4_when_no_session_claims_the_loop() {
    let dir = Project::git();
    let out = run_command(dir.path(), "3", &[], &["true"], &[]);
    let line = verdict(&out, 4);
    assert_contains!(line, "the loop never ran: no session claimed it");
    assert_contains!(line, "session-start-loader");
    assert_run_forgotten(dir.path());
}

#[test]
fn loop_run_exits_4_when_the_command_cannot_start() {
    let dir = Project::git();
    let out = run_command(
        dir.path(),
        "3",
        &[],
        &["/nonexistent/claude", "-p", "x"],
        &[],
    );
    let line = verdict(&out, 4);
    assert_contains!(
        line,
        "the loop never ran: cannot start `/nonexistent/claude`"
    );
    assert_run_forgotten(dir.path());
}

#[test]
fn loop_run_under_vigil_disable_runs_nothing() {
    assert_runs_nothing(&[("VIGIL_DISABLE", "1")], "VIGIL_DISABLE");
}

#[test]
fn loop_run_refuses_bad_usage_before_running_anything() {
    let dir = Project::git();
    let marker = dir.path().join("ran");
    let touch = ["--", "touch", marker.to_str().unwrap()];
    let run = ["--max-iterations", "3", "--completion-promise", "DONE"];
    for args in [
        run.to_vec(),
        [&["--completion-promise", "DONE"][..], &touch].concat(),
        [&run[..], &["--session", "s1"], &touch].concat(),
        [&run[..], &["--next-session"], &touch].concat(),
        [
            &words("--max-iterations 0 --completion-promise DONE")[..],
            &touch,
        ]
        .concat(),
        [&run[..], &["--bogus"], &touch].concat(),
    ] {
        let out = loop_run(dir.path(), &args, &[]);
        let line = assert_one_line_error(&out, "stop-gate");
        assert_eq!(out.status.code(), Some(2), "{args:?}: {line}");
        assert!(!marker.exists(), "{args:?} ran the command");
    }
}

#[test]
fn loop_run_lifts_the_engines_block_cap_for_its_command_only() {
    let dir = Project::git();
    let out = run_with(dir.path(), "3", &["<promise>DONE</promise>"], &[]);
    assert_eq!(out.status.code(), Some(0));
    let seen = dir.read("seen-env");
    assert!(
        seen.lines()
            .any(|l| l == "CLAUDE_CODE_STOP_HOOK_BLOCK_CAP=0"),
        "{seen}"
    );
    assert!(seen.lines().any(|l| l.starts_with("VIGIL_LOOP_RUN=")));
}

#[test]
fn loop_run_keeps_the_cap_a_user_set_or_one_another_stop_hook_needs() {
    let dir = Project::git();
    let out = run_with(
        dir.path(),
        "3",
        &["<promise>DONE</promise>"],
        &[("CLAUDE_CODE_STOP_HOOK_BLOCK_CAP", "5")],
    );
    assert_eq!(out.status.code(), Some(0));
    let seen = dir.read("seen-env");
    assert!(
        seen.lines()
            .any(|l| l == "CLAUDE_CODE_STOP_HOOK_BLOCK_CAP=5")
    );

    dir.write(
        ".claude/settings.json",
        r#"{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"./lint-on-stop.sh"}]}]}}"#,
    );
    let out = run_with(dir.path(), "3", &["<promise>DONE</promise>"], &[]);
    assert_eq!(out.status.code(), Some(0));
    let seen = dir.read("seen-env");
    // Another Stop hook could block forever.
    assert_lacks!(seen, "CLAUDE_CODE_STOP_HOOK_BLOCK_CAP");
    // Nor for hooks in an agent's frontmatter, or settings the command line adds.
    std::fs::remove_file(dir.path().join(".claude/settings.json")).unwrap();
    dir.write(".claude/agents/linter.md", "---\nname: linter\nhooks:\n  Stop:\n    - hooks:\n        - type: command\n          command: ./lint.sh\n---\nLint.\n");
    let out = run_with(dir.path(), "3", &["<promise>DONE</promise>"], &[]);
    assert_eq!(out.status.code(), Some(0));
    let seen = dir.read("seen-env");
    assert!(!seen.contains("CLAUDE_CODE_STOP_HOOK_BLOCK_CAP"), "{seen}");
    std::fs::remove_dir_all(dir.path().join(".claude/agents")).unwrap();
    let engine = engine(dir.path());
    ok(run_command(
        dir.path(),
        "3",
        &[],
        &[
            &engine,
            "s-run",
            "<promise>DONE</promise>",
            "--settings",
            "extra.json",
        ],
        &[],
    ));
    let seen = dir.read("seen-env");
    assert!(!seen.contains("CLAUDE_CODE_STOP_HOOK_BLOCK_CAP"), "{seen}");
}

#[test]
fn loop_run_says_why_the_cap_stayed_when_it_cut_the_loop() {
    let dir = Project::git();
    dir.write(
        ".claude/settings.json",
        r#"{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"./lint-on-stop.sh"}]}]}}"#,
    );
    // The engine's cut, as Claude Code writes it, in the session's transcript.
    let transcript = dir.path().join("t.jsonl");
    let cut = read_fixture("samples/claude-transcript-block-cap-line.json");
    let mut line: Value = serde_json::from_str(&cut).unwrap();
    line["timestamp"] = Value::from(vigil::sys::time::format_rfc3339(
        std::time::SystemTime::now() + std::time::Duration::from_secs(60),
    ));
    std::fs::write(&transcript, format!("{line}\n")).unwrap();
    let engine = engine_with(
        dir.path(),
        r#""source":"startup","#,
        &format!(
            r#""source":"startup","transcript_path":"{}","#,
            transcript.display()
        ),
    );
    let out = run_command(
        dir.path(),
        "5",
        &[],
        &[&engine, "s-cap", "working"],
        &[("NO_SESSION_END", "1")],
    );
    let said = assert_one_line_error(&out, "stop-gate");
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("loop cut at pass 2/5 in session s-cap (block-cap")
            && said.contains("the cap stayed because of `./lint-on-stop.sh` in "),
        "{said}"
    );
    assert_eq!(loop_of(dir.path(), "s-cap")["end_reason"], "block-cap");
}

#[test]
fn another_session_starting_meanwhile_never_claims_the_runs_loop() {
    let dir = Project::git();
    let engine = engine(dir.path());
    // Before its own session starts, another one starts in the project (no run id in its
    // environment), and a --next-session loop waits there too.
    dir.loop_for_next_session()
        .max_iterations(4)
        .promise("LATER")
        .prompt("A later task")
        .start();
    let script = std::fs::read_to_string(&engine).unwrap().replacen(
        "env > seen-env\n",
        "env > seen-env\nprintf '{\"session_id\":\"intruder\",\"hook_event_name\":\"SessionStart\",\"source\":\"startup\",\"cwd\":\"%s\"}' \"$PWD\" | env -u VIGIL_LOOP_RUN \"$LOADER\" > intruder-out\n",
        1,
    );
    std::fs::write(&engine, script).unwrap();
    let out = run_command(
        dir.path(),
        "5",
        &[],
        &[&engine, "s-run", "<promise>DONE</promise>"],
        &[],
    );
    let line = verdict(&out, 0);
    assert!(line.contains("in session s-run"), "{line}");
    // The intruder took the --next-session loop, never the run's; the run's session never
    // took the --next-session one.
    assert_eq!(
        loop_of(dir.path(), "intruder")["completion_promise"],
        "LATER"
    );
    assert_eq!(loop_of(dir.path(), "s-run")["completion_promise"], "DONE");
}

#[test]
fn a_cut_loop_is_told_once_at_the_next_stop_of_its_resumed_session() {
    let dir = Project::git();
    let out = run_with(dir.path(), "5", &["working"], &[]);
    assert_eq!(out.status.code(), Some(1));
    let stop = |message: &str| {
        let out = stop_gate()
            .current_dir(dir.path())
            .write_stdin(
                serde_json::json!({"session_id": "s-run", "hook_event_name": "Stop", "cwd": dir.path(), "last_assistant_message": message})
                    .to_string(),
            )
            .output()
            .unwrap();
        stdout_of(&out)
    };
    let first = stop("back again");
    assert_contains!(
        first,
        "vigil loop was cut at pass 2/5: the session ended while it ran; the work is NOT verified"
    );
    assert!(!first.contains("\"decision\""), "{first}");
    assert_eq!(stop("and again"), "", "told once");
}

/// Where there is no transcript to witness (Codex, or none named), `loop run` still tells a
/// loop whose record vanished mid-run (issue 29, item 6): exit 1, NOT verified.
#[test]
fn loop_run_says_not_verified_when_its_loops_record_vanished() {
    let dir = Project::git();
    let engine = engine_with(dir.path(), "for msg in", "rm -rf \"$RM_DIR\"\nfor msg in");
    // The protected directory exists once the loop is pending; the engine removes it after
    // its session claimed the loop.
    let protected =
        vigil::state::protected::dir_in(state_home(), &std::fs::canonicalize(dir.path()).unwrap());
    let out = run_command(
        dir.path(),
        "5",
        &[],
        &[&engine, "s-gone", "<promise>DONE</promise>"],
        &[("RM_DIR", protected.to_str().unwrap())],
    );
    let line = verdict(&out, 1);
    assert!(line.contains("NOT verified"), "{line}");
}

/// Review of issue 29: a loop that passed on the declaration alone (no check on the Stop
/// hook) verified nothing, so `loop run` does not exit 0.
#[test]
fn loop_run_exits_1_when_the_loop_passed_on_the_declaration_alone() {
    let dir = Project::git();
    let engine = engine_with(
        dir.path(),
        r#""$GATE" --run "${CHECK:-true}""#,
        r#""$GATE""#,
    );
    let out = run_command(
        dir.path(),
        "5",
        &[],
        &[&engine, "s-bare", "<promise>DONE</promise>"],
        &[],
    );
    let line = verdict(&out, 1);
    assert_contains!(line, "on the declaration alone");
    assert_contains!(line, "NOT verified");
    let state = loop_of(dir.path(), "s-bare");
    assert_eq!(state["status"], "passed");
    assert_eq!(state["checks"], serde_json::json!([]));
}

/// Review of issue 29: the agent cancels the run's loop and starts one of its own in the same
/// session (or forges the claim to name another session): `loop run` reads only the loop it
/// started, by its id.
#[test]
fn loop_run_reads_only_the_loop_it_started() {
    let dir = Project::git();
    let gate = bin_dir().join("stop-gate");
    let agent = format!(
        "{g} loop cancel --session $sid >/dev/null; {g} loop start --session $sid --max-iterations 1 --completion-promise DONE 'An easier task' >/dev/null",
        g = gate.display()
    );
    let out = run_with(
        dir.path(),
        "5",
        &["<promise>DONE</promise>"],
        &[("AGENT", &agent)],
    );
    let line = verdict(&out, 1);
    assert!(line.contains("is not the one this run started"), "{line}");
}

/// Review of issue 29: where the protected state falls back into the project (the state home
/// cannot be written), the agent could write the loop's verdict: `loop run` runs nothing.
#[test]
fn loop_run_refuses_when_the_state_would_be_within_the_agents_reach() {
    assert_runs_nothing(
        &[("VIGIL_STATE_HOME", "/proc/no-state-home")],
        "where the agent can write",
    );
}

/// Review of issue 29: a loop whose `--claim-within` passed before the command started its
/// session says so, not that SessionStart is unwired.
#[test]
fn loop_run_says_its_loop_lapsed_when_it_did() {
    let dir = Project::git();
    let engine = engine_with(dir.path(), "sid=$1; shift\n", "sid=$1; shift\nsleep 1.5\n");
    let out = run_command(
        dir.path(),
        "5",
        &["--claim-within", "1s"],
        &[&engine, "s-late", "<promise>DONE</promise>"],
        &[],
    );
    let line = verdict(&out, 4);
    assert!(line.contains("before it lapsed"), "{line}");
    assert_run_forgotten(dir.path());
}

/// Review of issue 29: SIGTERM to `loop run` reaches its command, and `loop run` stays to say
/// how the loop ended.
#[test]
fn loop_run_passes_sigterm_on_and_still_gives_its_verdict() {
    let dir = Project::git();
    let engine = engine(dir.path());
    let child = loop_run_process(
        dir.path(),
        &[
            "--max-iterations",
            "5",
            "--completion-promise",
            "DONE",
            "--",
            &engine,
            "s-term",
            "working",
        ],
    )
    .env(
        "AGENT",
        "touch started; sleep 30 >/dev/null 2>&1 </dev/null & wait $!",
    )
    .stdin(std::process::Stdio::null())
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    let started = dir.path().join("started");
    for _ in 0..100 {
        if started.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(started.exists(), "the session never started");
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    let line = verdict(&out, 1);
    assert_contains!(line, "was killed by signal 15");
    assert_contains!(line, "loop cut at pass 1/5");
}

/// Issue 29: a settings change vigil's ConfigChange hook blocked during the session is said
/// with `loop run`'s verdict (under `claude -p` the hook's own message is shown nowhere).
#[test]
fn loop_run_says_a_settings_change_was_blocked_during_the_session() {
    let dir = Project::git();
    let agent = r#"printf '{"session_id":"%s","hook_event_name":"ConfigChange","cwd":"%s"}' "$sid" "$PWD" | "$GATE" >/dev/null"#;
    let out = run_with(
        dir.path(),
        "5",
        &["<promise>DONE</promise>"],
        &[("AGENT", agent)],
    );
    let line = verdict(&out, 0);
    assert_contains!(
        line,
        "vigil blocked 1 settings change(s) during the session, the last: vigil: the ConfigChange input names no source"
    );
}
