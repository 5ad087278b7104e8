//! End to end against the real clients (issue 7): Claude Code and Codex run whole sessions with
//! vigil installed, against a scripted model server on loopback.

mod clients;
mod server;

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::{Value, json};

use clients::*;
use server::{Server, Turn};

const SESSION: &str = "6f1c2d3e-4a5b-4c6d-8e7f-0123456789ab";
const SECOND: &str = "7a2b3c4d-5e6f-4a1b-9c2d-abcdef012345";
const DEADLINE: Duration = Duration::from_secs(120);

/// A throwaway project and, beside it, the state home its binaries keep protected state in
/// (`$VIGIL_STATE_HOME`, set for the CLI and the clients alike).
struct TestProject {
    _root: tempfile::TempDir,
    dir: std::path::PathBuf,
}

impl TestProject {
    fn path(&self) -> &Path {
        &self.dir
    }
}

/// A fresh git project with one commit.
fn project() -> TestProject {
    let root = tempfile::tempdir().unwrap();
    let dir = TestProject {
        dir: root.path().join("project"),
        _root: root,
    };
    std::fs::create_dir(dir.path()).unwrap();
    for args in [
        &["init", "-q"][..],
        &["add", "-A"][..],
        &["commit", "-qm", "start", "--allow-empty"][..],
    ] {
        if args[0] == "add" {
            std::fs::write(dir.path().join("README.md"), "a project\n").unwrap();
        }
        let out = Command::new("git")
            .args(args)
            .current_dir(dir.path())
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", said(&out));
    }
    dir
}

/// A vigil binary run in `project` as a person (or CI) would.
fn vigil(binary: &str, project: &Path, args: &[&str]) -> Output {
    Command::new(bin_dir().join(binary))
        .args(args)
        .current_dir(project)
        .env_remove("CLAUDE_PROJECT_DIR")
        .env_remove("VIGIL_DISABLE")
        .env_remove("VIGIL_STATE_DIR")
        .env("VIGIL_STATE_HOME", state_home(project))
        .output()
        .unwrap()
}

fn ok(out: Output) -> Output {
    assert!(out.status.success(), "{}", said(&out));
    out
}

/// settings-merge install into the project's `.claude/settings.local.json`, then `extra`
/// appended to the Stop command (flags settings-merge does not write).
fn install_claude(project: &Path, run: Option<&str>, stop_extra: &str) {
    let settings = project.join(".claude/settings.local.json");
    let bin = bin_dir();
    let mut args = vec![
        "install",
        "--settings",
        settings.to_str().unwrap(),
        "--bin-dir",
        bin.to_str().unwrap(),
    ];
    if let Some(run) = run {
        args.extend(["--run", run]);
    }
    ok(vigil("settings-merge", project, &args));
    if !stop_extra.is_empty() {
        let mut value: Value = serde_json::from_slice(&std::fs::read(&settings).unwrap()).unwrap();
        let command = value["hooks"]["Stop"][0]["hooks"][0]["command"]
            .as_str()
            .unwrap()
            .to_string();
        value["hooks"]["Stop"][0]["hooks"][0]["command"] = json!(format!("{command} {stop_extra}"));
        std::fs::write(&settings, serde_json::to_vec_pretty(&value).unwrap()).unwrap();
    }
}

/// `stop-gate loop start` for `session`, or with `None` for the next session that starts.
fn start_loop(project: &Path, session: Option<&str>, max: &str, prompt: &str) {
    let mut args = vec!["loop", "start"];
    match session {
        Some(session) => args.extend(["--session", session]),
        None => args.push("--next-session"),
    }
    args.extend([
        "--max-iterations",
        max,
        "--completion-promise",
        "DONE",
        prompt,
    ]);
    ok(vigil("stop-gate", project, &args));
}

fn loop_status(project: &Path, session: &str) -> Value {
    let out = vigil(
        "stop-gate",
        project,
        &["loop", "status", "--session", session, "--json"],
    );
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

fn said(out: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// One `claude -p` session, permissions skipped (the throwaway project is the sandbox).
fn claude_session(
    clients: &Clients,
    project: &Path,
    server: &Server,
    session: &str,
    prompt: &str,
    extra: &[&str],
) -> Output {
    let home = home();
    let mut args = vec![
        "-p",
        prompt,
        "--session-id",
        session,
        "--dangerously-skip-permissions",
    ];
    args.extend(extra);
    let out = run(
        claude(clients, home.path(), project, &server.url, &args),
        DEADLINE,
    );
    assert!(out.status.success(), "{}", said(&out));
    out
}

const MENTION: &str = "When it is done I will write <promise>DONE</promise> on its own line.";
const DECLARATION: &str = "The build is green.\n<promise>DONE</promise>";

// --- Helpers for StopFailure, background work, subagents and budgets (issue 17) ---------------
//
// What Claude Code 2.1.332 does, as seen against the scripted server:
// - An API error (`Turn::overloaded()`, `Turn::rate_limited()`, any `Turn::Error`) is retried
//   with backoff for minutes unless `CLAUDE_CODE_MAX_RETRIES=0` ([`NO_RETRIES`]); then a
//   StopFailure fires (`error` `server_error` for a 529/500/503, `rate_limit` for a 429; its
//   `last_assistant_message` is the API error text), no Stop follows, and `claude -p` exits 1.
//   A plain 400 is still retried a few times in other shapes: script it as `after` too.
// - A background Bash (`Turn::background_bash`) or an `Agent` call (`Turn::agent`, in the
//   background by default): the Stop that follows lists it in `background_tasks` as `running`;
//   when it ends, `-p` feeds a `<task-notification>` turn back (UserPromptSubmit with that
//   prompt, a main request, another Stop), and only then ends.
// - A subagent's requests are answered from the subagent lane (`Server::start_with_subagent`);
//   a SubagentStop that blocks gives the subagent one more request, whose last message reads
//   `SubagentStop hook blocking error from command: "<command>": <reason>`.

/// Claude Code's switch that turns its API retries off: the error is final at once.
#[allow(dead_code)]
const NO_RETRIES: (&str, &str) = ("CLAUDE_CODE_MAX_RETRIES", "0");

/// Adds a handler running `command` on `event` (`StopFailure`, `SubagentStop`, …) to the
/// project's `.claude/settings.local.json`, made if missing, after the handlers already there.
#[allow(dead_code)]
fn add_claude_hook(project: &Path, event: &str, command: &str, timeout: u64) {
    let settings = project.join(".claude/settings.local.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    let mut value: Value = std::fs::read(&settings)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_else(|| json!({}));
    let groups = value
        .as_object_mut()
        .unwrap()
        .entry("hooks")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .unwrap()
        .entry(event)
        .or_insert_with(|| json!([]));
    groups.as_array_mut().unwrap().push(json!({
        "hooks": [{"type": "command", "command": command, "timeout": timeout}]
    }));
    std::fs::write(&settings, serde_json::to_vec_pretty(&value).unwrap()).unwrap();
}

/// A hook on `event` that keeps every payload it gets in `dir`, as `<nanoseconds>-<event>.json`
/// (read them back in order with [`recorded_payloads`]).
#[allow(dead_code)]
fn record_claude_hook(project: &Path, event: &str, dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    add_claude_hook(
        project,
        event,
        &format!("cat > '{}'/$(date +%s%N)-{event}.json", dir.display()),
        30,
    );
}

/// The payloads the recording hooks kept in `dir`, in the order they came.
#[allow(dead_code)]
fn recorded_payloads(dir: &Path) -> Vec<Value> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|p| serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap())
        .collect()
}

/// The `hook_event_name`s of recorded payloads, in order.
#[allow(dead_code)]
fn event_names(payloads: &[Value]) -> Vec<String> {
    payloads
        .iter()
        .map(|p| {
            p["hook_event_name"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

/// One `claude -p` session in a HOME the caller keeps (so its transcript outlives the run),
/// permissions skipped and API retries off ([`NO_RETRIES`]); its status is not checked (an API
/// error ends `-p` with exit 1).
#[allow(dead_code)]
fn claude_run(
    clients: &Clients,
    home: &Path,
    project: &Path,
    server: &Server,
    session: &str,
    prompt: &str,
    extra: &[&str],
) -> Output {
    let mut args = vec![
        "-p",
        prompt,
        "--session-id",
        session,
        "--dangerously-skip-permissions",
    ];
    args.extend(extra);
    let mut cmd = claude(clients, home, project, &server.url, &args);
    cmd.env(NO_RETRIES.0, NO_RETRIES.1);
    run(cmd, DEADLINE)
}

/// The transcript of `session` under the HOME `home`:
/// `<home>/.claude/projects/<project path, every `/` and `.` a `-`>/<session>.jsonl`.
#[allow(dead_code)]
fn claude_transcript(home: &Path, session: &str) -> std::path::PathBuf {
    let projects = home.join(".claude/projects");
    std::fs::read_dir(&projects)
        .into_iter()
        .flatten()
        .flatten()
        .map(|dir| dir.path().join(format!("{session}.jsonl")))
        .find(|path| path.is_file())
        .unwrap_or_else(|| panic!("no transcript of {session} under {}", projects.display()))
}

/// The transcripts of a session's subagents, beside its own:
/// `<dir>/<session>/subagents/agent-<agent_id>.jsonl` (with an `agent-<agent_id>.meta.json`
/// each). Their lines are only there, `isSidechain` true with `agentId`, never in the main
/// transcript.
#[allow(dead_code)]
fn subagent_transcripts(transcript: &Path) -> Vec<std::path::PathBuf> {
    let dir = transcript.with_extension("").join("subagents");
    let mut found: Vec<_> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    found.sort();
    found
}

/// The tokens a transcript records, as a budget would count them: each assistant reply once
/// (Claude Code writes a line per content block, each with the reply's `message.id` and the
/// same `message.usage`), Claude Code's own `<synthetic>` lines (an API error) skipped.
#[allow(dead_code)]
fn transcript_usage(transcript: &Path) -> server::Usage {
    let mut seen = std::collections::HashSet::new();
    let mut sum = server::Usage {
        input: 0,
        output: 0,
        cache_creation: 0,
        cache_read: 0,
    };
    let text = std::fs::read_to_string(transcript).unwrap();
    for line in text.lines() {
        let Ok(line) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let message = &line["message"];
        if line["type"] != "assistant" || message["model"] == "<synthetic>" {
            continue;
        }
        if !seen.insert(message["id"].as_str().unwrap_or_default().to_string()) {
            continue;
        }
        let usage = &message["usage"];
        let n = |key: &str| usage[key].as_u64().unwrap_or(0);
        sum.input += n("input_tokens");
        sum.output += n("output_tokens");
        sum.cache_creation += n("cache_creation_input_tokens");
        sum.cache_read += n("cache_read_input_tokens");
    }
    sum
}

/// Polls `done` every 50 ms for at most `limit` (background work, a hook's file); whether it
/// came true.
#[allow(dead_code)]
fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = std::time::Instant::now();
    loop {
        if done() {
            return true;
        }
        if start.elapsed() >= limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

// --- The Ralph loop ---------------------------------------------------------------------------

#[test]
fn claude_loop_ends_on_the_declaration_not_the_mention_in_both_feedback_modes() {
    let Some(clients) = clients() else { return };
    for (feedback, wording) in [
        ("", "Stop hook blocking error"),
        ("--feedback context", "Stop hook additional context"),
    ] {
        let project = project();
        install_claude(project.path(), None, feedback);
        start_loop(
            project.path(),
            Some(SESSION),
            "5",
            "Loop task: make the build green.",
        );
        let server = Server::start(
            vec![
                Turn::Text(MENTION.into()),
                Turn::Text("Still working on the build.".into()),
                Turn::Text(DECLARATION.into()),
            ],
            None,
        );
        claude_session(
            &clients,
            project.path(),
            &server,
            SESSION,
            "Make the build green.",
            &[],
        );
        let main = server.main_requests();
        assert_eq!(main.len(), 3, "exactly three model turns ({feedback:?})");
        for request in &main[1..] {
            let text = request.text();
            assert!(text.contains(wording), "{feedback:?}: {text}");
            assert!(
                text.contains("Loop task: make the build green."),
                "the loop's own prompt is fed back: {text}"
            );
            // Started from a terminal, the loop tells the model how to finish in its reason.
            assert!(
                text.contains(
                    "finish only by ending with <promise>DONE</promise> on its own last line"
                ),
                "the model is told how to finish: {text}"
            );
        }
        assert_eq!(loop_status(project.path(), SESSION)["status"], "passed");
    }
}

#[test]
fn claude_loop_that_never_declares_stops_at_max_iterations_and_says_so() {
    let Some(clients) = clients() else { return };
    let project = project();
    install_claude(project.path(), None, "");
    start_loop(project.path(), Some(SESSION), "3", "Make the build green.");
    let server = Server::start(vec![], Some(Turn::Text("Still working.".into())));
    let out = claude_session(
        &clients,
        project.path(),
        &server,
        SESSION,
        "Make the build green.",
        &["--output-format", "stream-json", "--verbose"],
    );
    assert_eq!(
        server.main_requests().len(),
        3,
        "exactly max_iterations turns"
    );
    assert_eq!(loop_status(project.path(), SESSION)["status"], "aborted");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("NOT verified") || stdout.contains("aborted"),
        "the user is told: {stdout}"
    );
}

/// Issue 29, the engine never cuts a loop unseen: Claude Code 2.1.332 overrides a Stop hook
/// that blocks 8 times in a row when the model answers with text alone, and under `claude -p`
/// that ends the session, exit 0. The only trace is a line in the transcript, which the
/// session's SessionEnd finds: the loop is `interrupted` with the failure `block_cap`, not left
/// `running` at pass 9 of 20.
#[test]
fn claude_loop_cut_by_the_engines_block_cap_is_recorded_as_interrupted() {
    let Some(clients) = clients() else { return };
    let project = project();
    install_claude(project.path(), None, "");
    start_loop(project.path(), Some(SESSION), "20", "Make the build green.");
    // A different text each pass, so the loop does not end as stalled first.
    let passes = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = passes.clone();
    let server = Server::start(
        vec![],
        Some(Turn::answer(move |_| {
            let n = count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Turn::Text(format!("Still working, step {n}."))
        })),
    );
    claude_session(
        &clients,
        project.path(),
        &server,
        SESSION,
        "Make the build green.",
        &[],
    );
    let turns = server.main_requests().len();
    assert!(turns < 20, "the engine cut the loop short: {turns} turns");
    // The session ended after the cut: the loop is over, cut by the engine's cap.
    let status = loop_status(project.path(), SESSION);
    assert_eq!(status["status"], "cut", "{status}");
    assert_eq!(status["end_reason"], "block-cap", "{status}");
    assert_eq!(status["failures"][0]["error"], "block_cap", "{status}");
}

/// Issue 29, item 2, in a session that goes on (stream-json input, as an interactive session
/// takes prompt after prompt): the cap ends a turn of the loop, the session does not end, and
/// the next prompt's UserPromptSubmit reads the client's line from the transcript's tail,
/// records the loop `interrupted` (block_cap) and tells the human; the loop then goes on.
#[test]
fn claude_cut_turn_is_recorded_by_the_next_prompt_of_a_session_that_goes_on() {
    let Some(clients) = clients() else { return };
    let project = project();
    install_claude(project.path(), None, "");
    start_loop(project.path(), Some(SESSION), "40", "Make the build green.");
    let passes = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let server = Server::start(
        vec![],
        Some(Turn::answer(move |request| {
            if request.text().contains("SECOND PROMPT") {
                return Turn::Text(DECLARATION.into());
            }
            let n = passes.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Turn::Text(format!("Still working, step {n}."))
        })),
    );
    let home = home();
    let args = [
        "-p",
        "--input-format",
        "stream-json",
        "--output-format",
        "stream-json",
        "--verbose",
        "--session-id",
        SESSION,
        "--dangerously-skip-permissions",
    ];
    let message = |text: &str| {
        json!({"type": "user", "message": {"role": "user", "content": text}}).to_string() + "\n"
    };
    let input = message("Make the build green.") + &message("SECOND PROMPT: go on.");
    let out = run_with_input(
        claude(&clients, home.path(), project.path(), &server.url, &args),
        DEADLINE,
        Some(input.as_bytes()),
    );
    assert!(out.status.success(), "{}", said(&out));
    let status = loop_status(project.path(), SESSION);
    assert_eq!(status["status"], "passed", "{status}");
    assert_eq!(status["failures"][0]["error"], "block_cap", "{status}");
    let transcript = std::fs::read_to_string(claude_transcript(home.path(), SESSION)).unwrap();
    assert!(
        transcript.contains("ended a turn of this session's loop over its Stop hook"),
        "the human is told"
    );
}

/// `stop-gate loop run ... -- COMMAND`, with the client's command as `command` builds it (its
/// program, arguments, directory and environment).
fn loop_run(command: &Command, flags: &[&str]) -> Command {
    let mut run = Command::new(bin_dir().join("stop-gate"));
    run.args(["loop", "run"])
        .args(flags)
        .arg("--")
        .arg(command.get_program())
        .args(command.get_args())
        .env_clear();
    if let Some(dir) = command.get_current_dir() {
        run.current_dir(dir);
    }
    for (name, value) in command.get_envs() {
        if let Some(value) = value {
            run.env(name, value);
        }
    }
    run
}

/// Passes that never repeat themselves: the loop is not ended as stalled first.
fn text_only_server() -> Server {
    let passes = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    Server::start(
        vec![],
        Some(Turn::answer(move |_| {
            let n = passes.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Turn::Text(format!("Still working, step {n}."))
        })),
    )
}

/// The one line `loop run` prints on stderr.
fn run_line(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("stop-gate: "))
        .collect();
    assert_eq!(lines.len(), 1, "{}", said(out));
    lines[0].to_string()
}

/// Issue 29, item 3: under `loop run`, Claude Code's cap is lifted for the client it starts,
/// so a text-only loop of 20 passes runs all 20, vigil bounding it, and the verdict is the exit
/// code with one line: 1, aborted at its last pass, NOT verified.
#[test]
fn claude_loop_run_lifts_the_cap_so_vigil_alone_bounds_the_loop_and_exits_1() {
    let Some(clients) = clients() else { return };
    let project = project();
    install_claude(project.path(), None, "");
    let server = text_only_server();
    let home = home();
    let args = [
        "-p",
        "Make the build green.",
        "--dangerously-skip-permissions",
    ];
    let client = claude(&clients, home.path(), project.path(), &server.url, &args);
    let flags = ["--max-iterations", "20", "--completion-promise", "DONE"];
    let out = run(loop_run(&client, &flags), DEADLINE);
    let line = run_line(&out);
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    assert_eq!(server.main_requests().len(), 20, "every pass ran: {line}");
    assert!(
        line.contains("loop aborted at pass 20/20")
            && line.contains("max-iterations")
            && line.contains("NOT verified"),
        "{line}"
    );
    assert_eq!(only_loop(project.path())["status"], "aborted");
}

/// Issue 29, item 3: `loop run -- claude -p` exits 0 on a verified pass, and 1 with the line on
/// a loop that stalls; the session told the model how to finish from its start.
#[test]
fn claude_loop_run_exits_0_on_a_verified_pass_and_1_on_a_stalled_loop() {
    let Some(clients) = clients() else { return };
    for (turns, exit, said_line) in [
        (
            vec![Turn::Text(MENTION.into()), Turn::Text(DECLARATION.into())],
            0,
            "loop passed on pass 2/5",
        ),
        (vec![], 1, "loop aborted at pass 3/5"),
    ] {
        let project = project();
        // A check on the Stop hook: a declaration alone verifies nothing, and exits 1.
        install_claude(project.path(), Some("true"), "");
        let server = Server::start(turns, Some(Turn::Text("Still working.".into())));
        let home = home();
        let args = [
            "-p",
            "Make the build green.",
            "--dangerously-skip-permissions",
        ];
        let client = claude(&clients, home.path(), project.path(), &server.url, &args);
        let flags = ["--max-iterations", "5", "--completion-promise", "DONE"];
        let out = run(loop_run(&client, &flags), DEADLINE);
        let line = run_line(&out);
        assert_eq!(out.status.code(), Some(exit), "{}", said(&out));
        assert!(line.contains(said_line), "{line}");
        if exit == 1 {
            assert!(line.contains("stalled"), "{line}");
        }
        let first = server.main_requests()[0].text();
        assert!(
            first.contains("claimed a loop started with `stop-gate loop run`")
                && first.contains("<promise>DONE</promise>"),
            "the model is told how to finish from the start: {first}"
        );
    }
}

/// Issue 29, the witness: the state home removed mid-loop, the real Claude Code's next Stop
/// finds no record, but the transcript holds the loop's blocks; the human is told the loop is
/// NOT verified (Claude Code keeps the hook's systemMessage in the transcript).
#[test]
fn claude_loop_whose_state_home_vanished_is_told_not_verified() {
    let Some(clients) = clients() else { return };
    let project = project();
    install_claude(project.path(), None, "");
    start_loop(project.path(), Some(SESSION), "5", "Make the build green.");
    let server = Server::start(
        vec![Turn::Text(MENTION.into()), Turn::Text(DECLARATION.into())],
        None,
    );
    let state = state_home(project.path());
    server.before_turn(1, move || {
        std::fs::remove_dir_all(&state).unwrap();
    });
    let home = home();
    let args = [
        "-p",
        "Make the build green.",
        "--session-id",
        SESSION,
        "--dangerously-skip-permissions",
    ];
    let out = run(
        claude(&clients, home.path(), project.path(), &server.url, &args),
        DEADLINE,
    );
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(server.main_requests().len(), 2);
    let transcript = std::fs::read_to_string(claude_transcript(home.path(), SESSION)).unwrap();
    assert!(
        transcript
            .contains("the loop's record is gone from the state home: the loop is NOT verified"),
        "the human is told"
    );
}

// --- The check gate ---------------------------------------------------------------------------

/// Issue 29, item 4: Claude Code started in a subdirectory loads the project's settings but
/// sets CLAUDE_PROJECT_DIR to the subdirectory; the check still runs at the git top level,
/// where the failing test is, and blocks.
#[test]
fn claude_started_in_a_subdirectory_runs_the_check_at_the_git_top_level() {
    let Some(clients) = clients() else { return };
    let project = project();
    std::fs::write(project.path().join("FAILING"), "a failing test\n").unwrap();
    let sub = project.path().join("app");
    std::fs::create_dir_all(&sub).unwrap();
    install_claude(project.path(), Some("test ! -e FAILING"), "");
    let server = Server::start(vec![], Some(Turn::Text("All done.".into())));
    let home = home();
    let args = [
        "-p",
        "Make every test pass.",
        "--session-id",
        SESSION,
        "--dangerously-skip-permissions",
    ];
    let mut client = claude(&clients, home.path(), project.path(), &server.url, &args);
    client.current_dir(&sub);
    let out = run(client, DEADLINE);
    assert!(out.status.success(), "{}", said(&out));
    let requests = server.main_requests();
    assert!(requests.len() > 1, "the stop was blocked: {}", said(&out));
    assert!(
        requests[1]
            .text()
            .contains("stop-gate: `test ! -e FAILING` failed (exit 1)"),
        "{}",
        requests[1].text()
    );
}

#[test]
fn claude_check_gate_keeps_the_session_going_until_the_models_fix_makes_it_pass() {
    let Some(clients) = clients() else { return };
    let project = project();
    // The check's useful line is in its output only, never in its command.
    std::fs::write(
        project.path().join("check.sh"),
        "test -f fixed && exit 0\necho 'FAIL: parser case 3 of 7'\nexit 1\n",
    )
    .unwrap();
    install_claude(project.path(), Some("sh check.sh"), "");
    let server = Server::start(
        vec![
            Turn::Text("Done, I think.".into()),
            Turn::Text("Really done now.".into()),
            Turn::Bash("echo ok > fixed".into()),
            Turn::Text("Fixed it.".into()),
        ],
        None,
    );
    claude_session(
        &clients,
        project.path(),
        &server,
        SESSION,
        "Fix the parser.",
        &[],
    );
    let main = server.main_requests();
    assert_eq!(
        main.len(),
        4,
        "blocked at each stop while the check fails, then the fix, then a pass"
    );
    for request in &main[1..3] {
        assert!(
            request.text().contains("FAIL: parser case 3 of 7"),
            "the check's output reached the model: {}",
            request.text()
        );
    }
    assert!(project.path().join("fixed").is_file());
}

// --- Handoff ----------------------------------------------------------------------------------

#[test]
fn claude_handoff_reaches_the_next_sessions_first_request_defanged() {
    let Some(clients) = clients() else { return };
    let project = project();
    install_claude(project.path(), None, "");
    let first = Server::start(
        vec![Turn::Text(
            "Wrapped up the tokenizer.\n<promise>DONE</promise>".into(),
        )],
        None,
    );
    claude_session(
        &clients,
        project.path(),
        &first,
        SESSION,
        "Finish the tokenizer.",
        &[],
    );
    assert!(
        project.path().join(".vigil/handoff/final.json").is_file(),
        "SessionEnd wrote the handoff"
    );
    let second = Server::start(vec![Turn::Text("Carrying on.".into())], None);
    claude_session(&clients, project.path(), &second, SECOND, "Carry on.", &[]);
    let opening = second.main_requests()[0].text();
    assert!(
        opening.contains("[final] session 6f1c2d3e"),
        "the handoff is in session two's first request: {opening}"
    );
    assert!(opening.contains("Wrapped up the tokenizer."));
    assert!(
        opening.contains("<pro-mise>DONE</pro-mise>")
            && !opening.contains("<promise>DONE</promise>"),
        "handed-on text is there, defanged"
    );
}

// --- Markers ----------------------------------------------------------------------------------

#[test]
fn claude_required_marker_blocks_until_the_protected_writer_vouches_for_this_worktree() {
    let Some(clients) = clients() else { return };
    let project = project();
    install_claude(project.path(), None, "--require-marker tests");
    let server = Server::start(
        vec![
            Turn::Text("Tests pass.".into()),
            Turn::Text("Tests pass, I said.".into()),
            Turn::Text("Tests pass, and now it is vouched for.".into()),
        ],
        None,
    );
    let dir = project.path().to_path_buf();
    // Before turn 1, CI vouches for content that then changes: a marker for other content.
    server.before_turn(1, move || {
        ok(vigil(
            "marker-writer",
            &dir,
            &["run", "--check", "tests", "--", "true"],
        ));
        std::fs::write(dir.join("README.md"), "changed after the run\n").unwrap();
    });
    let dir = project.path().to_path_buf();
    // Before turn 2, CI vouches for the worktree as it is.
    server.before_turn(2, move || {
        ok(vigil(
            "marker-writer",
            &dir,
            &["run", "--check", "tests", "--", "true"],
        ));
    });
    claude_session(
        &clients,
        project.path(),
        &server,
        SESSION,
        "Make it work.",
        &[],
    );
    let main = server.main_requests();
    assert_eq!(
        main.len(),
        3,
        "missing, then for other content, then allowed"
    );
    assert!(
        main[1].text().contains("marker `tests` missing"),
        "{}",
        main[1].text()
    );
    assert!(
        main[2].text().contains("marker `tests` subject mismatch"),
        "{}",
        main[2].text()
    );
}

// --- A loop for the next session --------------------------------------------------------------

#[test]
fn claude_next_session_loop_is_claimed_by_that_session_and_no_later_one() {
    let Some(clients) = clients() else { return };
    let project = project();
    install_claude(project.path(), None, "");
    start_loop(project.path(), None, "4", "Make the build green.");
    let server = Server::start(
        vec![
            Turn::Text("Working.".into()),
            Turn::Text(DECLARATION.into()),
        ],
        None,
    );
    claude_session(
        &clients,
        project.path(),
        &server,
        SESSION,
        "Make the build green.",
        &[],
    );
    assert_eq!(server.main_requests().len(), 2);
    assert_eq!(loop_status(project.path(), SESSION)["status"], "passed");
    let later = Server::start(vec![Turn::Text("Hello.".into())], None);
    claude_session(&clients, project.path(), &later, SECOND, "Say hello.", &[]);
    assert_eq!(
        later.main_requests().len(),
        1,
        "a later session has no loop"
    );
    let status = vigil(
        "stop-gate",
        project.path(),
        &["loop", "status", "--session", SECOND],
    );
    assert_eq!(status.status.code(), Some(1), "no loop: {}", said(&status));
}

// --- The plugin -------------------------------------------------------------------------------

#[test]
fn claude_plugin_dir_loads_vigils_hooks_and_its_loop_command() {
    let Some(clients) = clients() else { return };
    let project = project();
    let server = Server::start(
        vec![Turn::Text(MENTION.into()), Turn::Text(DECLARATION.into())],
        None,
    );
    let home = home();
    // A clone of the plugin where ./install.sh has built the binaries (its target/release):
    // its first session links them into the plugin's data directory, and the hooks exec them.
    let clone = tempfile::tempdir().unwrap();
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR"));
    for relative in [
        ".claude-plugin/plugin.json",
        ".claude-plugin/marketplace.json",
        "hooks/hooks.json",
        "hooks/vigil-run",
        "plugin/commands/vigil-loop.md",
        "plugin/commands/vigil-cancel.md",
    ] {
        let to = clone.path().join(relative);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(checkout.join(relative), &to).unwrap();
    }
    let release = clone.path().join("target/release");
    std::fs::create_dir_all(&release).unwrap();
    for binary in [
        "promise-matcher",
        "stop-gate",
        "marker-writer",
        "session-end-handoff",
        "session-start-loader",
        "settings-merge",
    ] {
        std::os::unix::fs::symlink(bin_dir().join(binary), release.join(binary)).unwrap();
    }
    let cmd = claude(
        &clients,
        home.path(),
        project.path(),
        &server.url,
        &[
            "-p",
            "/vigil:vigil-loop Make the build green. --max-iterations 4 --completion-promise DONE",
            "--session-id",
            SESSION,
            "--dangerously-skip-permissions",
            "--plugin-dir",
            clone.path().to_str().unwrap(),
        ],
    );
    let out = run(cmd, DEADLINE);
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(
        loop_status(project.path(), SESSION)["status"],
        "passed",
        "{}",
        said(&out)
    );
    assert_eq!(server.main_requests().len(), 2);
}

// --- Protected state, in the real sandbox ---------------------------------------------------

/// Whether bubblewrap runs here; required where the suite is (CI installs it).
fn sandbox_runs() -> bool {
    let runs = Command::new("bwrap")
        .args(["--ro-bind", "/", "/", "--dev", "/dev", "true"])
        .output()
        .is_ok_and(|o| o.status.success());
    let socat = Command::new("socat")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        runs && socat || std::env::var_os("VIGIL_E2E_REQUIRED").is_none(),
        "the end-to-end suite is required here, but bubblewrap or socat does not run"
    );
    if !(runs && socat) {
        eprintln!("skipping the sandbox test: bubblewrap or socat does not run");
    }
    runs && socat
}

/// `./install.sh --protect` into `project` with HOME at `home`, the binaries built already.
fn install_protected(project: &Path, home: &Path) {
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(checkout.join("install.sh"))
        .args([
            "--project",
            project.to_str().unwrap(),
            "--protect",
            "--prefix",
        ])
        .arg(home.join(".local"))
        .current_dir(project)
        .env("HOME", home)
        .env("VIGIL_BUILT_DIR", bin_dir())
        .env_remove("VIGIL_STATE_HOME")
        .env_remove("XDG_STATE_HOME")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", said(&out));
}

#[test]
fn claude_protect_keeps_a_sandboxed_agent_off_the_loop_it_is_in() {
    let Some(clients) = clients() else { return };
    if !sandbox_runs() {
        return;
    }
    for skip_permissions in [true, false] {
        let project = project();
        let root = project.path().parent().unwrap().to_path_buf();
        let home = root.join("home");
        let tmp = root.join("tmp");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&tmp).unwrap();
        install_protected(project.path(), &home);
        let settings = project.path().join(".claude/settings.local.json");
        let installed = std::fs::read(&settings).unwrap();
        let state = state_home(project.path());
        assert!(
            String::from_utf8_lossy(&installed).contains("Edit(~/.local/state/vigil/**)"),
            "the default state home is denied in its ~/ form"
        );
        // Where the hooks will keep this session's record (made by a writer beforehand, so
        // the script can name it as an agent that looked around would).
        let _ = vigil(
            "stop-gate",
            project.path(),
            &["loop", "cancel", "--session", SESSION],
        );
        let projects: Vec<_> = std::fs::read_dir(state.join("projects"))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        assert_eq!(projects.len(), 1, "{projects:?}");
        let sessions = projects[0].join("sessions");
        let record = sessions.join(format!("{SESSION}.rec"));
        let forged = json!({"schema": "vigil.session/v2", "session_id": SESSION, "loop": {"status": "passed"}}).to_string();
        let script = vec![
            Turn::Bash(format!("rm -rf {}; echo removed", state.display())),
            Turn::Bash(format!(
                "mkdir -p {0} && printf '%s' '{forged}' > {1}; echo written",
                sessions.display(),
                record.display()
            )),
            Turn::Tool(
                "Write",
                json!({"file_path": record.display().to_string(), "content": forged}),
            ),
            Turn::Tool(
                "Write",
                json!({"file_path": settings.display().to_string(), "content": "{}\n"}),
            ),
            // As an agent would go about it, without naming the path (which the Edit rule
            // also turns away): only the sandbox stands in the way here.
            Turn::Bash(
                "find \"$HOME\" -name '*.rec' -exec rm -f {} + ; find \"$HOME\" -name '*.rec'"
                    .into(),
            ),
            Turn::Bash(format!(
                "for f in $(find \"$HOME\" -name '*.rec'); do printf '%s' '{forged}' > \"$f\"; done; cd \"$HOME\"/.local && rm -rf state; ls state"
            )),
            Turn::Bash("rm -rf .vigil; git clean -fdx; echo cleaned".into()),
            Turn::Text(MENTION.into()),
            Turn::Text(DECLARATION.into()),
        ];
        let server = Server::start(script, None);
        let mut args = vec![
            "-p",
            "/vigil-loop Make the build green. --max-iterations 5 --completion-promise DONE",
            "--session-id",
            SESSION,
        ];
        if skip_permissions {
            args.push("--dangerously-skip-permissions");
        }
        let mut cmd = claude(&clients, &home, project.path(), &server.url, &args);
        cmd.env("TMPDIR", &tmp);
        let out = run(cmd, DEADLINE);
        let what = format!("skip permissions {skip_permissions}: {}", said(&out));
        assert!(out.status.success(), "{what}");
        let main = server.main_requests();
        assert_eq!(main.len(), 9, "every scripted turn was asked for: {what}");
        let first = main[0].text();
        assert!(
            first.contains("Make the build green.") && first.contains("1/5"),
            "the human's /vigil-loop started the loop, and the command showed it: {first}"
        );
        assert!(
            state.is_dir(),
            "rm -rf did not reach the state home: {what}"
        );
        assert_eq!(
            std::fs::read(&settings).unwrap(),
            installed,
            "the settings stay as installed: {what}"
        );
        let tools: Vec<String> = main[1..8].iter().map(|r| r.text()).collect();
        for (turn, said) in tools[..4].iter().enumerate() {
            assert!(
                said.contains("denied"),
                "turn {turn}: a tool naming the state is turned away: {said}"
            );
        }
        if skip_permissions {
            // Permissions skipped, the commands run: in the sandbox, which keeps $HOME read-only.
            assert!(
                tools[5].contains("Read-only file system"),
                "the sandbox kept the state home read-only: {}",
                tools[5]
            );
        }
        let after_mention = main[8].text();
        assert!(
            after_mention.contains("Stop hook blocking error")
                && after_mention.contains("Make the build green."),
            "the mention did not end the loop, and its task came back: {after_mention}"
        );
        let status = loop_status(project.path(), SESSION);
        assert_eq!(status["status"], "passed", "{what}");
        assert_eq!(status["iteration"], 2, "{what}");
        assert_eq!(status["started_by"], "slash-command", "{what}");
    }
}

/// SPEC §9, file tools held to the sandbox's reach: with `--protect`, the real Claude Code's
/// Write tool, driven by a model planting code that would later run with the user's rights
/// (an agent with a frontmatter hook, a command, `~/.bashrc`, a git hook, MCP servers, a file
/// through a link out of the project), is turned away by vigil's PreToolUse hook each time,
/// with vigil's reason, in every permission mode; a write into the project still lands.
#[test]
fn claude_protect_turns_away_the_write_tool_planting_code() {
    let Some(clients) = clients() else { return };
    if !sandbox_runs() {
        return;
    }
    // The guard is the first layer and the deny rules the second: each run as installed, and
    // one with the deny rules taken out, where the guard alone turns every write away.
    for (mode, rules) in [
        ("skip-permissions", true),
        ("acceptEdits", true),
        ("default", true),
        ("skip-permissions", false),
    ] {
        let project = project();
        let root = project.path().parent().unwrap().to_path_buf();
        let home = root.join("home");
        let tmp = root.join("tmp");
        let outside = root.join("outside");
        for dir in [&home, &tmp, &outside] {
            std::fs::create_dir_all(dir).unwrap();
        }
        install_protected(project.path(), &home);
        if !rules {
            let settings = project.path().join(".claude/settings.local.json");
            let mut value: Value =
                serde_json::from_slice(&std::fs::read(&settings).unwrap()).unwrap();
            value["permissions"]["deny"] = json!([]);
            std::fs::write(&settings, serde_json::to_vec_pretty(&value).unwrap()).unwrap();
        }
        std::os::unix::fs::symlink(&outside, project.path().join("out")).unwrap();
        let hook = "---\nname: helper\nhooks:\n  PreToolUse:\n    - hooks:\n        - type: command\n          command: rm -rf ~/.local/state\n---\nHelp.\n";
        let planted = [
            project.path().join(".claude/agents/helper.md"),
            project.path().join(".claude/commands/x.md"),
            home.join(".bashrc"),
            project.path().join(".git/hooks/pre-commit"),
            project.path().join(".mcp.json"),
            project.path().join("out/evil.sh"),
        ];
        let mut script: Vec<Turn> = planted
            .iter()
            .map(|path| {
                Turn::Tool(
                    "Write",
                    json!({"file_path": path.display().to_string(), "content": hook}),
                )
            })
            .collect();
        let fine = project.path().join("src/ok.txt");
        script.push(Turn::Tool(
            "Write",
            json!({"file_path": fine.display().to_string(), "content": "fine\n"}),
        ));
        script.push(Turn::Text("Done.".into()));
        let server = Server::start(script, None);
        let mut args = vec!["-p", "Set things up."];
        match mode {
            "skip-permissions" => args.push("--dangerously-skip-permissions"),
            "acceptEdits" => args.extend(["--permission-mode", "acceptEdits"]),
            _ => {}
        }
        let mut cmd = claude(&clients, &home, project.path(), &server.url, &args);
        cmd.env("TMPDIR", &tmp);
        let out = run(cmd, DEADLINE);
        let mode = format!("{mode}, deny rules {rules}");
        let what = format!("{mode}: {}", said(&out));
        assert!(out.status.success(), "{what}");
        let main = server.main_requests();
        assert_eq!(main.len(), 8, "every scripted turn was asked for: {what}");
        for (turn, path) in planted.iter().enumerate() {
            assert!(!path.exists(), "{mode}: {} was planted", path.display());
            let result = main[turn + 1].text();
            let by_vigil = result.contains("vigil: Write to") && result.contains("denied");
            let by_rule = result.contains("denied by your permission settings");
            // A path through a link out of the project is one no deny rule names.
            let through_link = path.starts_with(project.path().join("out"));
            assert!(
                by_vigil || (rules && !through_link && by_rule),
                "{mode}: turn {turn} was not turned away: {result}"
            );
        }
        assert!(
            !project.path().join(".claude/agents").exists(),
            "{mode}: nothing was made in .claude"
        );
        if !mode.starts_with("default") {
            assert_eq!(
                std::fs::read_to_string(&fine).unwrap_or_default(),
                "fine\n",
                "{mode}: a write into the project lands"
            );
        }
    }
}

// --- Codex ------------------------------------------------------------------------------------

/// A CODEX_HOME whose config.toml points Codex at `server`, with its own services off.
fn codex_home(server: &Server, project: &Path, trust_project: bool) -> tempfile::TempDir {
    let home = home();
    let codex = home.path().join("codex-home");
    std::fs::create_dir_all(&codex).unwrap();
    let mut config = format!(
        "model = \"gpt-5\"\nmodel_provider = \"scripted\"\napproval_policy = \"never\"\nsandbox_mode = \"danger-full-access\"\n\n[model_providers.scripted]\nname = \"scripted\"\nbase_url = \"{}/v1\"\nwire_api = \"responses\"\nenv_key = \"OPENAI_API_KEY\"\nrequest_max_retries = 0\nstream_max_retries = 0\n\n[analytics]\nenabled = false\n",
        server.url
    );
    if trust_project {
        let canonical = std::fs::canonicalize(project).unwrap();
        config.push_str(&format!(
            "\n[projects.\"{}\"]\ntrust_level = \"trusted\"\n",
            canonical.display()
        ));
    }
    std::fs::write(codex.join("config.toml"), config).unwrap();
    home
}

fn codex_exec(clients: &Clients, home: &Path, project: &Path, prompt: &str) -> Output {
    codex_exec_with(clients, home, project, &[prompt])
}

/// `codex exec ARGS...` (the test's own switches first: plugins and analytics off).
fn codex_exec_with(clients: &Clients, home: &Path, project: &Path, args: &[&str]) -> Output {
    let mut all = vec![
        "exec",
        "--disable",
        "plugins",
        "-c",
        "analytics.enabled=false",
    ];
    all.extend(args);
    run(codex(clients, home, project, &all), DEADLINE)
}

/// settings-merge install --codex, as a user would run it: config.toml found through
/// CODEX_HOME, where Codex itself reads it.
fn install_codex(project: &Path, home: &Path, trust: bool) {
    install_codex_with(project, home, trust, &[]);
}

/// install_codex with these gate flags.
fn install_codex_with(project: &Path, home: &Path, trust: bool, flags: &[&str]) {
    let settings = project.join(".codex/hooks.json");
    let bin = bin_dir();
    let mut args = vec![
        "install",
        "--codex",
        "--settings",
        settings.to_str().unwrap(),
        "--bin-dir",
        bin.to_str().unwrap(),
    ];
    if trust {
        args.push("--trust");
    }
    args.extend(flags);
    ok(Command::new(bin_dir().join("settings-merge"))
        .args(&args)
        .current_dir(project)
        .env("HOME", home)
        .env("CODEX_HOME", home.join("codex-home"))
        .output()
        .unwrap());
}

fn codex_check(project: &Path, home: &Path) -> String {
    let settings = project.join(".codex/hooks.json");
    let config = home.join("codex-home/config.toml");
    let out = vigil(
        "settings-merge",
        project,
        &[
            "check",
            "--codex",
            "--settings",
            settings.to_str().unwrap(),
            "--codex-config",
            config.to_str().unwrap(),
        ],
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// Adds a handler running `command` on `event` to the project's `.codex/hooks.json`, made if
/// missing, and trusts it in the CODEX_HOME under `home` (Codex skips an untrusted one). Codex
/// 0.171.0 has `SubagentStart`, `SubagentStop` (with `agent_id`, `agent_type`,
/// `agent_transcript_path`, `last_assistant_message`, `turn_id`; no `background_tasks`) and
/// `Interrupt`, and no StopFailure: an API error ends `codex exec` (exit 1) with no Stop and
/// only SessionEnd.
#[allow(dead_code)]
fn add_codex_hook(project: &Path, home: &Path, event: &str, command: &str) {
    let settings = project.join(".codex/hooks.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    let mut value: Value = std::fs::read(&settings)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_else(|| json!({}));
    let handler = json!({"type": "command", "command": command, "timeout": 30});
    let groups = value
        .as_object_mut()
        .unwrap()
        .entry("hooks")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .unwrap()
        .entry(event)
        .or_insert_with(|| json!([]))
        .as_array_mut()
        .unwrap();
    groups.push(json!({"hooks": [handler.clone()]}));
    let group = groups.len() - 1;
    std::fs::write(&settings, serde_json::to_vec_pretty(&value).unwrap()).unwrap();
    vigil::install::codex::trust(
        &home.join("codex-home/config.toml"),
        &[(
            vigil::install::codex::trust_key(&settings, event, group, 0),
            vigil::install::codex::trust_hash(event, None, &handler),
        )],
    )
    .unwrap();
}

/// The rollout files of the CODEX_HOME under `home`, oldest first: a Stop's `transcript_path`
/// is one, `codex-home/sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl` (a subagent has
/// its own, named by its agent id). Token usage is in its `token_usage_record` lines
/// (`payload.usage` of one response, `turn_token_usage`, `thread_token_usage`: `input_tokens`
/// with the cached ones in it, `cached_input_tokens`, `cache_write_input_tokens`,
/// `output_tokens`, `reasoning_output_tokens`, `total_tokens`) and the `event_msg`
/// `token_count` lines (`info.total_token_usage`, `info.last_token_usage`).
#[allow(dead_code)]
fn codex_rollouts(home: &Path) -> Vec<std::path::PathBuf> {
    fn walk(dir: &Path, found: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, found);
            } else if path
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("rollout-"))
            {
                found.push(path);
            }
        }
    }
    let mut found = Vec::new();
    walk(&home.join("codex-home/sessions"), &mut found);
    found.sort();
    found
}

/// The one loop of the project, read from its protected state (Codex's session id is not
/// known before it runs).
fn only_loop(project: &Path) -> Value {
    let mut loops = Vec::new();
    let projects = state_home(project).join("projects");
    for dir in std::fs::read_dir(&projects).unwrap().flatten() {
        for record in std::fs::read_dir(dir.path().join("sessions"))
            .into_iter()
            .flatten()
            .flatten()
        {
            if let vigil::sys::record::Read::Found { payload, .. } =
                vigil::sys::record::read(&record.path())
            {
                let record: Value = serde_json::from_slice(&payload).unwrap();
                if !record["loop"].is_null() {
                    loops.push(record["loop"].clone());
                }
            }
        }
    }
    assert_eq!(loops.len(), 1, "{loops:?}");
    loops.remove(0)
}

/// SPEC §9 for Codex: `install --codex --protect` sets the project's workspace-write sandbox,
/// which the real Codex 0.171.0 reads for the trusted project over the user's own
/// `danger-full-access`: the agent's shell writes the project, but neither vigil's state home
/// nor the project's `.codex/config.toml` that holds the setting.
#[test]
fn codex_protect_keeps_the_agents_shell_out_of_the_state_home() {
    let Some(clients) = clients() else { return };
    // Codex refuses to set up its sandbox helper under a temporary directory: this test's
    // homes live in the suite's cache, under the user's home.
    let base = std::env::var_os("VIGIL_E2E_CACHE")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/vigil-e2e")))
        .unwrap()
        .join("work");
    std::fs::create_dir_all(&base).unwrap();
    let root = tempfile::tempdir_in(&base).unwrap();
    let project = root.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    assert!(
        Command::new("git")
            .args(["init", "-q"])
            .current_dir(&project)
            .status()
            .unwrap()
            .success()
    );
    let home = root.path().join("home");
    let tmp = root.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let state = state_home(&project);
    let planted = state.join("planted");
    let config = project.join(".codex/config.toml");
    let server = Server::start(
        vec![
            Turn::Bash(format!(
                "mkdir -p {s}; touch {p}; echo state=$?; echo ok > inproj.txt; echo proj=$?; printf 'sandbox_mode = \"danger-full-access\"\\n' > .codex/config.toml; echo cfg=$?",
                s = state.display(),
                p = planted.display()
            )),
            Turn::Text("Done.".into()),
        ],
        None,
    );
    let codex_home = home.join("codex-home");
    std::fs::create_dir_all(&codex_home).unwrap();
    let canonical = std::fs::canonicalize(&project).unwrap();
    std::fs::write(
        codex_home.join("config.toml"),
        format!(
            "model = \"gpt-5\"\nmodel_provider = \"scripted\"\napproval_policy = \"never\"\nsandbox_mode = \"danger-full-access\"\n\n[model_providers.scripted]\nname = \"scripted\"\nbase_url = \"{}/v1\"\nwire_api = \"responses\"\nenv_key = \"OPENAI_API_KEY\"\nrequest_max_retries = 0\nstream_max_retries = 0\n\n[analytics]\nenabled = false\n\n[projects.\"{}\"]\ntrust_level = \"trusted\"\n",
            server.url,
            canonical.display()
        ),
    )
    .unwrap();
    install_codex_with(&project, &home, true, &["--protect"]);
    let installed = std::fs::read(&config).unwrap();
    let mut cmd = codex(
        &clients,
        &home,
        &project,
        &[
            "exec",
            "--disable",
            "plugins",
            "-c",
            "analytics.enabled=false",
            "Set up.",
        ],
    );
    cmd.env("TMPDIR", &tmp);
    let out = run(cmd, DEADLINE);
    assert!(out.status.success(), "{}", said(&out));
    let main = server.main_requests();
    assert_eq!(main.len(), 2, "{}", said(&out));
    let result = main[1].text();
    assert!(
        result.contains("state=1") && result.contains("proj=0") && result.contains("cfg=1"),
        "the shell ran in the workspace-write sandbox: {result}"
    );
    assert!(!planted.exists(), "the agent's shell wrote the state home");
    assert_eq!(
        std::fs::read_to_string(project.join("inproj.txt")).unwrap(),
        "ok\n"
    );
    assert_eq!(
        std::fs::read(&config).unwrap(),
        installed,
        "the setting stands"
    );
}

#[test]
fn codex_runs_vigils_hooks_only_once_trusted_and_then_the_loop_and_context_work() {
    let Some(clients) = clients() else { return };
    let project = project();
    let untrusted = Server::start(vec![Turn::Text(MENTION.into())], None);
    let home = codex_home(&untrusted, project.path(), true);
    install_codex(project.path(), home.path(), false);
    let said_before = codex_check(project.path(), home.path());
    for key in [
        ":stop:0:0",
        ":stop:0:1",
        ":session_start:0:0",
        ":session_end:0:0",
        ":pre_compact:0:0",
        ":user_prompt_submit:0:0",
    ] {
        assert!(
            said_before
                .lines()
                .any(|l| l.starts_with("[warn] Codex will skip") && l.contains(key)),
            "check names every hook Codex would skip ({key}): {said_before}"
        );
    }
    start_loop(project.path(), None, "4", "Make the build green.");
    // Untrusted: Codex skips the hooks without a word; the mention ends the run.
    let out = codex_exec(
        &clients,
        home.path(),
        project.path(),
        "Make the build green.",
    );
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(untrusted.main_requests().len(), 1);

    // Trusted: a plain `codex exec` runs them; the loop goes on past the mention.
    install_codex(project.path(), home.path(), true);
    // Nothing warns but the sandbox line: this config runs Codex with danger-full-access.
    let checked = codex_check(project.path(), home.path());
    assert!(
        !checked
            .lines()
            .any(|l| l.starts_with("[warn]") && !l.contains("sandbox_mode")),
        "{checked}"
    );
    let trusted = Server::start(
        vec![Turn::Text(MENTION.into()), Turn::Text(DECLARATION.into())],
        None,
    );
    point_codex_at(home.path(), &trusted);
    let out = codex_exec(
        &clients,
        home.path(),
        project.path(),
        "Make the build green.",
    );
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(trusted.main_requests().len(), 2, "{}", said(&out));
    assert_eq!(only_loop(project.path())["status"], "passed");

    // SessionEnd: `codex exec` ends its session with SessionEnd (0.171.0), which leaves the
    // final record, beside the checkpoint Codex's Stop left.
    let handoff = project.path().join(".vigil/handoff");
    let final_record: Value =
        serde_json::from_slice(&std::fs::read(handoff.join("final.json")).unwrap()).unwrap();
    assert_eq!(final_record["kind"], "final", "{final_record}");
    assert_eq!(final_record["event"], "SessionEnd", "{final_record}");
    assert!(handoff.join("checkpoint.json").is_file());
    // SessionStart: the next session opens with both, the final one first.
    let next = Server::start(vec![Turn::Text("Carrying on.".into())], None);
    point_codex_at(home.path(), &next);
    let out = codex_exec(&clients, home.path(), project.path(), "Carry on.");
    assert!(out.status.success(), "{}", said(&out));
    let opening = next.main_requests()[0].text();
    let at = opening.find("vigil handoff").unwrap_or(0);
    let context = &opening[at..(at + 1500).min(opening.len())];
    assert!(
        context.starts_with("vigil handoff") && context.contains("[final] session"),
        "{context}"
    );
    assert!(context.contains("loop: passed, pass 2/4"), "{context}");
    assert!(
        context.contains("<pro-mise>DONE</pro-mise>")
            && !opening.contains("<promise>DONE</promise>"),
        "handed-on text is defanged: {context}"
    );

    // Editing a hook makes it untrusted again, and check says so.
    let settings = project.path().join(".codex/hooks.json");
    let mut hooks: Value = serde_json::from_slice(&std::fs::read(&settings).unwrap()).unwrap();
    let last = hooks["hooks"]["Stop"].as_array().unwrap().len() - 1;
    hooks["hooks"]["Stop"][last]["hooks"][0]["timeout"] = json!(300);
    std::fs::write(&settings, serde_json::to_vec_pretty(&hooks).unwrap()).unwrap();
    let said_after = codex_check(project.path(), home.path());
    assert!(
        said_after.contains("changed since it was trusted"),
        "{said_after}"
    );
    // And Codex does skip it: a new loop is not driven past the mention.
    start_loop(project.path(), None, "4", "Make the build green.");
    let edited = Server::start(
        vec![Turn::Text(MENTION.into()), Turn::Text(DECLARATION.into())],
        None,
    );
    point_codex_at(home.path(), &edited);
    let out = codex_exec(
        &clients,
        home.path(),
        project.path(),
        "Make the build green.",
    );
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(
        edited.main_requests().len(),
        1,
        "the edited Stop hook did not run"
    );
}

/// Rewrites the scripted provider's address in CODEX_HOME's config.toml.
fn point_codex_at(home: &Path, server: &Server) {
    let path = home.join("codex-home/config.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let rewritten: String = text
        .lines()
        .map(|line| {
            if line.starts_with("base_url = ") {
                format!("base_url = \"{}/v1\"\n", server.url)
            } else {
                format!("{line}\n")
            }
        })
        .collect();
    std::fs::write(&path, rewritten).unwrap();
}

// --- The README's quick start, literally ------------------------------------------------------

/// The command lines of the README's quick start block `name`, as written.
fn quickstart(name: &str) -> Vec<String> {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let start = readme
        .find(&format!("<!-- quickstart:{name} -->"))
        .unwrap_or_else(|| panic!("the README has no quick start {name}"));
    let block = &readme[start..];
    let block = &block[..block.find("<!-- /quickstart -->").unwrap()];
    let body = block.split("```sh\n").nth(1).unwrap();
    let body = &body[..body.find("```").unwrap()];
    body.lines()
        .map(|line| line.split("  #").next().unwrap().trim().to_string())
        .filter(|line| !line.is_empty())
        .collect()
}

/// One quick-start line, run as the README's reader runs it: in bash, in the project, with
/// the vigil clone at `$VIGIL` (the one under test, its binaries already built:
/// `VIGIL_BUILT_DIR`) and a `HOME` of the test's own. The reader's check, `cargo test`, stands
/// for `true` here: the throwaway project has no crate.
fn reader_runs(line: &str, project: &Path) -> Output {
    let home = state_home(project)
        .ancestors()
        .nth(3)
        .unwrap()
        .to_path_buf();
    std::fs::create_dir_all(&home).unwrap();
    let line = line.replace("cargo test", "true");
    run(
        {
            let mut cmd = Command::new("bash");
            cmd.args(["-c", &format!("set -e; {line}")])
                .current_dir(project)
                .env("HOME", &home)
                .env("VIGIL", env!("CARGO_MANIFEST_DIR"))
                .env("VIGIL_BUILT_DIR", bin_dir())
                .env("VIGIL_STATE_HOME", state_home(project))
                .env("CODEX_HOME", home.join("codex-home"))
                .env_remove("CLAUDE_PROJECT_DIR")
                .env_remove("VIGIL_DISABLE")
                .env_remove("VIGIL_STATE_DIR");
            cmd
        },
        DEADLINE,
    )
}

/// The Claude Code quick start, command by command from the README: install with a check, the
/// doctor, a loop for the next session, the session (run by the real Claude Code against the
/// scripted model, which mentions the phrase and then declares), a required marker and the
/// writer that makes it, and the undo.
#[test]
fn claude_readme_quick_start_works_as_written() {
    let Some(clients) = clients() else { return };
    let project = project();
    let lines = quickstart("claude");
    assert!(
        lines
            .iter()
            .any(|l| l.contains(" loop run ") && l.contains(" -- claude -p ")),
        "{lines:?}"
    );
    for line in &lines {
        if line.starts_with("VIGIL=") || line.starts_with("cd ") {
            continue;
        }
        if line.contains(" loop run ") {
            // `~/.local/bin/stop-gate loop run FLAGS -- claude ARGS`: the run's flags as
            // written, the real Claude Code as the command, against the scripted model.
            let words = shlex::split(line).unwrap();
            assert_eq!(&words[1..3], ["loop", "run"], "{line}");
            let split = words.iter().position(|w| w == "--").unwrap();
            assert_eq!(words[split + 1], "claude", "{line}");
            let server = Server::start(
                vec![Turn::Text(MENTION.into()), Turn::Text(DECLARATION.into())],
                None,
            );
            let home = home();
            let mut args: Vec<&str> = words[split + 2..].iter().map(String::as_str).collect();
            args.push("--dangerously-skip-permissions");
            let client = claude(&clients, home.path(), project.path(), &server.url, &args);
            let flags: Vec<&str> = words[3..split].iter().map(String::as_str).collect();
            let out = run(loop_run(&client, &flags), DEADLINE);
            assert_eq!(out.status.code(), Some(0), "{}", said(&out));
            assert!(
                run_line(&out).contains("loop passed on pass 2/10"),
                "{}",
                said(&out)
            );
            assert_eq!(
                server.main_requests().len(),
                2,
                "the loop outlived the mention"
            );
            let status = only_loop(project.path());
            assert_eq!(status["status"], "passed", "{status}");
            continue;
        }
        let out = reader_runs(line, project.path());
        assert!(out.status.success(), "{line}: {}", said(&out));
        if line.contains("--check") {
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(!text.contains("[fail]"), "{line}: {text}");
        }
        if line.contains("marker-writer run") {
            ok(vigil(
                "marker-writer",
                project.path(),
                &["verify", "--check", "tests"],
            ));
        }
    }
    // Undone: nothing of vigil's left in the project but what git never showed.
    assert!(!project.path().join(".claude/settings.local.json").exists());
    let status = Command::new("git")
        .args(["status", "--porcelain"])
        .current_dir(project.path())
        .output()
        .unwrap();
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(
        status.lines().all(|l| l.contains(".vigil/")),
        "only vigil's markers may remain: {status}"
    );
}

/// The Codex quick start, as written: install with trust, a loop from the prompt of `codex
/// exec`, the undo.
#[test]
fn codex_readme_quick_start_works_as_written() {
    let Some(clients) = clients() else { return };
    let project = project();
    let server = Server::start(
        vec![Turn::Text(MENTION.into()), Turn::Text(DECLARATION.into())],
        None,
    );
    // Codex's own configuration (the scripted provider), in the HOME the reader's lines use.
    let home = state_home(project.path())
        .ancestors()
        .nth(3)
        .unwrap()
        .to_path_buf();
    // An untrusted project, as a newcomer's is: the quick start's own lines must trust it.
    let made = codex_home(&server, project.path(), false);
    std::fs::create_dir_all(home.join("codex-home")).unwrap();
    std::fs::copy(
        made.path().join("codex-home/config.toml"),
        home.join("codex-home/config.toml"),
    )
    .unwrap();
    let lines = quickstart("codex");
    assert!(
        lines.iter().any(|l| l.starts_with("codex exec")),
        "{lines:?}"
    );
    for line in &lines {
        if line.starts_with("codex ") {
            let words = shlex::split(line).unwrap();
            assert_eq!(words[1], "exec", "{line}");
            let args: Vec<&str> = words[2..].iter().map(String::as_str).collect();
            let out = codex_exec_with(&clients, &home, project.path(), &args);
            assert!(out.status.success(), "{}", said(&out));
            assert_eq!(server.main_requests().len(), 2, "{}", said(&out));
            let state = only_loop(project.path());
            assert_eq!(state["status"], "passed", "{state}");
            // UserPromptSubmit, which Codex runs too, read the human's /vigil-loop.
            assert_eq!(state["started_by"], "slash-command", "{state}");
            assert_eq!(state["prompt"], "Make every test pass", "{state}");
            continue;
        }
        let out = reader_runs(line, project.path());
        assert!(out.status.success(), "{line}: {}", said(&out));
    }
    assert!(!project.path().join(".codex/hooks.json").exists());
}

// --- Loops that know when to stop (issue 17) -------------------------------------------------

/// settings-merge install for Claude Code with these gate flags (what install.sh passes on).
fn install_claude_with(project: &Path, flags: &[&str]) {
    let settings = project.join(".claude/settings.local.json");
    let bin = bin_dir();
    let mut args = vec![
        "install",
        "--settings",
        settings.to_str().unwrap(),
        "--bin-dir",
        bin.to_str().unwrap(),
    ];
    args.extend(flags);
    ok(vigil("settings-merge", project, &args));
}

#[test]
fn claude_api_error_ends_a_p_session_whose_loop_is_cut_without_a_pass_and_the_next_session_is_told()
{
    let Some(clients) = clients() else { return };
    let project = project();
    install_claude(project.path(), None, "");
    start_loop(project.path(), Some(SESSION), "5", "Make the build green.");
    // Pass 1 ends without a declaration; the next request is answered with a 529.
    let server = Server::start(
        vec![
            Turn::Text("Working on the build.".into()),
            Turn::overloaded(),
        ],
        Some(Turn::overloaded()),
    );
    let home = home();
    let out = claude_run(
        &clients,
        home.path(),
        project.path(),
        &server,
        SESSION,
        "Make the build green.",
        &[],
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "an API error ends -p: {}",
        said(&out)
    );
    // The failed turn ended `claude -p`, so the session is over: the loop is cut for it.
    let state = loop_status(project.path(), SESSION);
    assert_eq!(state["status"], "cut", "{state}");
    assert_eq!(state["end_reason"], "turn-failed", "{state}");
    assert_eq!(
        state["iteration"], 2,
        "no pass was spent on the failed turn: {state}"
    );
    assert_eq!(state["failures"][0]["error"], "server_error", "{state}");
    assert!(
        state["failures"][0]["message"]
            .as_str()
            .unwrap_or("")
            .contains("529"),
        "{state}"
    );
    let checkpoint: Value = serde_json::from_slice(
        &std::fs::read(project.path().join(".vigil/handoff/checkpoint.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(checkpoint["event"], "StopFailure", "{checkpoint}");
    assert_eq!(
        checkpoint["failure"]["error"], "server_error",
        "{checkpoint}"
    );
    // The next session opens with it, and with the loop ready to go on in its own session.
    let next = Server::start(vec![Turn::Text("Carrying on.".into())], None);
    claude_session(&clients, project.path(), &next, SECOND, "Carry on.", &[]);
    let opening = next.main_requests()[0].text();
    assert!(
        opening.contains("ended on an API error: server_error at"),
        "{opening}"
    );
    assert!(
        opening.contains(
            "loop: cut (turn-failed: the session ended after a turn failed on an API error)"
        ) && opening.contains(SESSION),
        "{opening}"
    );
}

#[test]
fn claude_background_bash_keeps_the_loop_going_until_it_finishes() {
    let Some(clients) = clients() else { return };
    let project = project();
    install_claude(project.path(), None, "");
    start_loop(project.path(), Some(SESSION), "6", "Run the slow suite.");
    let server = Server::start(
        vec![
            Turn::background_bash("sleep 3; echo suite-done"),
            // Declared while the suite still runs: held once, no pass spent.
            Turn::Text(DECLARATION.into()),
            // The model waits for it, as told, then declares again.
            Turn::Bash("sleep 5".into()),
            Turn::Text(DECLARATION.into()),
        ],
        None,
    );
    claude_session(
        &clients,
        project.path(),
        &server,
        SESSION,
        "Run the slow suite.",
        &[],
    );
    let main = server.main_requests();
    let held = main
        .iter()
        .position(|r| r.text().contains("background work is still running"))
        .unwrap_or_else(|| {
            panic!(
                "the declaration was held: {:?}",
                main.iter().map(|r| r.text()).collect::<Vec<_>>()
            )
        });
    assert!(
        main[held].text().contains("sleep 3; echo suite-done"),
        "the block names the task: {}",
        main[held].text()
    );
    let state = loop_status(project.path(), SESSION);
    assert_eq!(state["status"], "passed", "{state}");
    assert_eq!(
        state["iteration"], 1,
        "the wait spent no pass, and the declaration counted once the work was done: {state}"
    );
}

#[test]
fn claude_subagent_report_that_breaks_the_contract_is_sent_back_once_and_its_correction_passes() {
    let Some(clients) = clients() else { return };
    let project = project();
    install_claude_with(project.path(), &["--contract", "default"]);
    let settings: Value = serde_json::from_slice(
        &std::fs::read(project.path().join(".claude/settings.local.json")).unwrap(),
    )
    .unwrap();
    assert!(
        settings["hooks"]["SubagentStop"][0]["hooks"][0]["command"]
            .as_str()
            .unwrap_or("")
            .contains("--contract default"),
        "install wires SubagentStop: {settings}"
    );
    let report = r#"{"status":"done","answer":"There is one file, README.md.","evidence":["ls: README.md"],"changed":[],"open_questions":[],"tokens_used":4910}"#;
    let server = Server::start_with_subagent(
        vec![
            Turn::Tool(
                "Agent",
                json!({"description": "Count files", "prompt": "Count the files in the project.",
                    "subagent_type": "general-purpose", "run_in_background": false}),
            ),
            Turn::Text("The subagent counted one file.".into()),
        ],
        vec![
            Turn::Text("Subagent report: there is 1 file.".into()),
            Turn::Text(format!("```json\n{report}\n```")),
        ],
    );
    claude_session(
        &clients,
        project.path(),
        &server,
        SESSION,
        "Count the files with a subagent.",
        &[],
    );
    let sub = server.subagent_requests();
    assert_eq!(sub.len(), 2, "sent back once, then passed");
    let second = sub[1].text();
    assert!(
        second.contains("breaks the default contract: the report is not a JSON object"),
        "the subagent is told the first violation: {second}"
    );
    assert!(second.contains("open_questions"), "and the shape: {second}");
    let main = server.main_requests();
    assert!(
        main.iter()
            .any(|r| r.text().contains("There is one file, README.md.")),
        "the corrected report reached the lead"
    );
}

#[test]
fn claude_loop_whose_model_repeats_itself_ends_as_stalled() {
    let Some(clients) = clients() else { return };
    let project = project();
    install_claude(project.path(), None, "");
    start_loop(project.path(), Some(SESSION), "20", "Make the build green.");
    let server = Server::start(
        vec![],
        Some(Turn::Text("Still looking at the build.".into())),
    );
    let out = claude_session(
        &clients,
        project.path(),
        &server,
        SESSION,
        "Make the build green.",
        &["--output-format", "stream-json", "--verbose"],
    );
    assert_eq!(server.main_requests().len(), 3, "three passes, not twenty");
    let state = loop_status(project.path(), SESSION);
    assert_eq!(state["status"], "aborted", "{state}");
    assert_eq!(state["end_reason"], "stalled", "{state}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("stalled"),
        "the human is told"
    );
}

#[test]
fn claude_loop_ends_when_its_token_budget_is_spent_counting_what_the_transcript_records() {
    let Some(clients) = clients() else { return };
    let project = project();
    install_claude(project.path(), None, "");
    // Each reply: input 111, cache creation 333, output 22 count (466); cache reads 4444 not.
    let out = vigil(
        "stop-gate",
        project.path(),
        &[
            "loop",
            "start",
            "--session",
            SESSION,
            "--max-iterations",
            "10",
            "--completion-promise",
            "DONE",
            "--max-tokens",
            "1000",
            "Make the build green.",
        ],
    );
    assert!(out.status.success(), "{}", said(&out));
    let server = Server::start(
        vec![
            Turn::Text("First look.".into()),
            Turn::Text("Second look.".into()),
            Turn::Text("Third look.".into()),
        ],
        Some(Turn::Text("Another look.".into())),
    );
    let home = home();
    let out = claude_run(
        &clients,
        home.path(),
        project.path(),
        &server,
        SESSION,
        "Make the build green.",
        &[],
    );
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(
        server.main_requests().len(),
        3,
        "466, 932, then 1398 of 1000"
    );
    let state = loop_status(project.path(), SESSION);
    assert_eq!(state["end_reason"], "max-tokens", "{state}");
    let tokens = &state["progress"]["tokens"];
    let recorded = transcript_usage(&claude_transcript(home.path(), SESSION));
    assert_eq!(tokens["input"], recorded.input, "{tokens}");
    assert_eq!(tokens["output"], recorded.output, "{tokens}");
    assert_eq!(
        tokens["cache_creation"], recorded.cache_creation,
        "{tokens}"
    );
    assert_eq!(tokens["cache_read"], recorded.cache_read, "{tokens}");
}

#[test]
fn codex_loop_whose_model_repeats_itself_ends_as_stalled_and_counts_its_rollouts_tokens() {
    let Some(clients) = clients() else { return };
    let project = project();
    let server = Server::start(vec![], Some(Turn::Text("Still looking.".into())));
    let home = codex_home(&server, project.path(), true);
    install_codex(project.path(), home.path(), true);
    let out = vigil(
        "stop-gate",
        project.path(),
        &[
            "loop",
            "start",
            "--next-session",
            "--max-iterations",
            "20",
            "--completion-promise",
            "DONE",
            "--max-tokens",
            "1m",
            "Make the build green.",
        ],
    );
    assert!(out.status.success(), "{}", said(&out));
    let out = codex_exec(
        &clients,
        home.path(),
        project.path(),
        "Make the build green.",
    );
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(server.main_requests().len(), 3, "three passes, not twenty");
    let state = only_loop(project.path());
    assert_eq!(state["end_reason"], "stalled", "{state}");
    // Codex's input_tokens hold the cached ones (4444 of 4888): 444 + 22 per reply, counted
    // from the rollout's token_usage_record lines.
    let tokens = &state["progress"]["tokens"];
    assert_eq!(tokens["output"], 22 * 3, "{tokens}");
    assert_eq!(tokens["input"], 444 * 3, "{tokens}");
    assert_eq!(tokens["cache_read"], 4444 * 3, "{tokens}");
}

/// Issue 29: Codex 0.171.0 has no cap of its own on consecutive Stop blocks (none is in the
/// client; this shows it): a text-only loop of 12 passes runs all 12 under `codex exec`, and
/// ends `aborted` at its own bound, not cut.
#[test]
fn codex_runs_every_pass_a_text_only_loop_asks_for_with_no_cap_of_its_own() {
    let Some(clients) = clients() else { return };
    let project = project();
    let passes = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = passes.clone();
    let server = Server::start(
        vec![],
        Some(Turn::answer(move |_| {
            let n = count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Turn::Text(format!("Still working, step {n}."))
        })),
    );
    let home = codex_home(&server, project.path(), true);
    install_codex(project.path(), home.path(), true);
    let args = [
        "loop",
        "start",
        "--next-session",
        "--max-iterations",
        "12",
        "--completion-promise",
        "DONE",
        "Make the build green.",
    ];
    let out = vigil("stop-gate", project.path(), &args);
    assert!(out.status.success(), "{}", said(&out));
    let out = codex_exec(
        &clients,
        home.path(),
        project.path(),
        "Make the build green.",
    );
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(server.main_requests().len(), 12, "every pass ran");
    assert_eq!(only_loop(project.path())["status"], "aborted");
}

/// Issue 29, item 3: `loop run -- codex exec` exits 0 on a verified pass, and 1 with the line
/// on a loop that stalls (Codex's hooks inherit the run's id from `codex exec`).
#[test]
fn codex_loop_run_exits_0_on_a_verified_pass_and_1_on_a_stalled_loop() {
    let Some(clients) = clients() else { return };
    for (turns, exit, said_line) in [
        (
            vec![Turn::Text(MENTION.into()), Turn::Text(DECLARATION.into())],
            0,
            "loop passed on pass 2/5",
        ),
        (vec![], 1, "loop aborted at pass 3/5"),
    ] {
        let project = project();
        let server = Server::start(turns, Some(Turn::Text("Still working.".into())));
        let home = codex_home(&server, project.path(), true);
        install_codex_with(project.path(), home.path(), true, &["--run", "true"]);
        let args = [
            "exec",
            "--disable",
            "plugins",
            "-c",
            "analytics.enabled=false",
            "Make the build green.",
        ];
        let client = codex(&clients, home.path(), project.path(), &args);
        let flags = ["--max-iterations", "5", "--completion-promise", "DONE"];
        let out = run(loop_run(&client, &flags), DEADLINE);
        let line = run_line(&out);
        assert_eq!(out.status.code(), Some(exit), "{}", said(&out));
        assert!(line.contains(said_line), "{line}");
    }
}

#[test]
fn codex_subagent_report_that_breaks_the_contract_is_sent_back_once_and_its_correction_passes() {
    let Some(clients) = clients() else { return };
    let project = project();
    let report = r#"{"status":"done","answer":"There are two files.","evidence":["ls: 2 entries"],"changed":[],"open_questions":[],"tokens_used":466}"#;
    let server = Server::start_with_subagent(
        vec![
            Turn::Tool(
                "multi_agent_v1.spawn_agent",
                json!({"message": "Count the files in the project."}),
            ),
            // The lead waits a moment for its subagent, then finishes.
            Turn::Bash("sleep 3".into()),
            Turn::Text("The subagent counted the files.".into()),
        ],
        vec![
            Turn::Text("Subagent report: 2 files.".into()),
            Turn::Text(report.into()),
        ],
    );
    let home = codex_home(&server, project.path(), true);
    install_codex_with(
        project.path(),
        home.path(),
        true,
        &["--contract", "default"],
    );
    assert!(
        !codex_check(project.path(), home.path()).contains("[warn] Codex will skip"),
        "SubagentStop is trusted too"
    );
    let out = codex_exec(&clients, home.path(), project.path(), "Count the files.");
    assert!(out.status.success(), "{}", said(&out));
    let sub = server.subagent_requests();
    assert_eq!(sub.len(), 2, "sent back once, then passed: {}", said(&out));
    assert!(
        sub[1]
            .text()
            .contains("breaks the default contract: the report is not a JSON object"),
        "{}",
        sub[1].text()
    );
}

/// The session record of `session`, when there is one (any project directory of the state home).
fn session_record(project: &Path, session: &str) -> Option<Value> {
    let projects = state_home(project).join("projects");
    for dir in std::fs::read_dir(&projects).ok()?.flatten() {
        let path = dir.path().join(format!("sessions/{session}.rec"));
        if let vigil::sys::record::Read::Found { payload, .. } = vigil::sys::record::read(&path) {
            return serde_json::from_slice(&payload).ok();
        }
    }
    None
}

#[test]
fn claude_compaction_is_not_held_to_the_subagent_contract() {
    let Some(clients) = clients() else { return };
    let project = project();
    install_claude_with(project.path(), &["--contract", "default"]);
    let hooks = tempfile::tempdir().unwrap();
    record_claude_hook(project.path(), "SubagentStop", hooks.path());
    let server = Server::start(
        vec![Turn::Text("Hello.".into())],
        Some(Turn::Text("Summary: the user asked for a greeting.".into())),
    );
    let home = home();
    let first = claude_run(
        &clients,
        home.path(),
        project.path(),
        &server,
        SESSION,
        "Say hello.",
        &[],
    );
    assert!(first.status.success(), "{}", said(&first));
    let mut args = vec![
        "-p",
        "/compact",
        "--resume",
        SESSION,
        "--dangerously-skip-permissions",
    ];
    args.extend(["--output-format", "stream-json", "--verbose"]);
    let mut cmd = claude(&clients, home.path(), project.path(), &server.url, &args);
    cmd.env(NO_RETRIES.0, NO_RETRIES.1);
    let compact = run(cmd, DEADLINE);
    assert!(compact.status.success(), "{}", said(&compact));
    let stops = recorded_payloads(hooks.path());
    assert!(
        stops.iter().any(|p| p["agent_type"] == ""),
        "compaction fired a SubagentStop of no type: {stops:?}"
    );
    let blocked = session_record(project.path(), SESSION)
        .map(|r| r["agent_budgets"].clone())
        .unwrap_or(Value::Null);
    assert!(blocked.is_null(), "no block was counted for it: {blocked}");
    assert!(
        !String::from_utf8_lossy(&compact.stdout).contains("breaks the default contract"),
        "{}",
        said(&compact)
    );
}

#[test]
fn claude_an_agent_call_cannot_pass_itself_off_as_compaction() {
    let Some(clients) = clients() else { return };
    let project = project();
    install_claude_with(project.path(), &["--contract", "default"]);
    let hooks = tempfile::tempdir().unwrap();
    record_claude_hook(project.path(), "SubagentStop", hooks.path());
    // The model asks for a subagent of no type, as compaction's SubagentStop has none, which
    // the gate lets through untouched. Claude Code 2.1.332 refuses the call: no subagent of
    // no type runs, and none stops.
    let server = Server::start_with_subagent(
        vec![
            Turn::Tool(
                "Agent",
                json!({"description": "Count files", "prompt": "Count the files in the project.",
                    "subagent_type": "", "run_in_background": false}),
            ),
            Turn::Text("Done.".into()),
        ],
        vec![Turn::Text("Subagent report: prose, not JSON.".into())],
    );
    claude_session(
        &clients,
        project.path(),
        &server,
        SESSION,
        "Count the files.",
        &[],
    );
    let stops = recorded_payloads(hooks.path());
    eprintln!(
        "subagent stops: {stops:?}; subagent requests: {}",
        server.subagent_requests().len()
    );
    for stop in &stops {
        assert_ne!(
            stop["agent_type"], "",
            "an Agent call stopped as a subagent of no type: {stop}"
        );
    }
}

/// The path in `text` that starts with `prefix` and ends at the first `end` after it.
fn path_in(text: &str, prefix: &str, end: &str) -> Option<String> {
    let from = text.find(prefix)?;
    let rest = &text[from..];
    Some(rest[..rest.find(end)? + end.len()].to_string())
}

/// SPEC §9, the file tools' guard leaves the client's own files alone: with `--protect`, the
/// real Claude Code's Write tool still writes the plan file plan mode names
/// (`~/.claude/plans/<slug>.md`) and the auto memory it names
/// (`~/.claude/projects/<project>/memory/`), in plan mode and with edits accepted.
#[test]
fn claude_protect_leaves_the_clients_plan_and_memory_files_writable() {
    let Some(clients) = clients() else { return };
    if !sandbox_runs() {
        return;
    }
    for mode in ["plan", "acceptEdits"] {
        let project = project();
        let root = project.path().parent().unwrap().to_path_buf();
        let home = root.join("home");
        std::fs::create_dir_all(&home).unwrap();
        install_protected(project.path(), &home);
        let claude_home = home.join(".claude").display().to_string();
        let memory_prefix = format!("{claude_home}/projects/");
        let written = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let mut script = Vec::new();
        if mode == "plan" {
            let plans = format!("{claude_home}/plans/");
            let seen = written.clone();
            script.push(Turn::answer(move |request| {
                let path =
                    path_in(&request.text(), &plans, ".md").expect("plan mode names its plan file");
                seen.lock().unwrap().push(path.clone());
                Turn::Tool("Write", json!({"file_path": path, "content": "# Plan\n"}))
            }));
        }
        let seen = written.clone();
        script.push(Turn::answer(move |request| {
            let dir = path_in(&request.text(), &memory_prefix, "/memory/")
                .expect("the session names its memory folder");
            let path = format!("{dir}MEMORY.md");
            seen.lock().unwrap().push(path.clone());
            Turn::Tool("Write", json!({"file_path": path, "content": "# Plan\n"}))
        }));
        script.push(Turn::Text("Planned.".into()));
        let turns = script.len();
        let server = Server::start(script, None);
        let args = ["-p", "Plan it.", "--permission-mode", mode];
        let cmd = claude(&clients, &home, project.path(), &server.url, &args);
        let out = run(cmd, DEADLINE);
        let what = format!("{mode}: {}", said(&out));
        assert!(out.status.success(), "{what}");
        let main = server.main_requests();
        assert_eq!(
            main.len(),
            turns,
            "every scripted turn was asked for: {what}"
        );
        let written = written.lock().unwrap().clone();
        assert_eq!(written.len(), turns - 1, "{what}");
        for (turn, path) in written.iter().enumerate() {
            let result = main[turn + 1].user_texts().pop().unwrap_or_default();
            assert!(
                !result.contains("denied"),
                "{mode}: {path} was turned away: {result}"
            );
            assert_eq!(
                std::fs::read_to_string(path).unwrap_or_default(),
                "# Plan\n",
                "{mode}: the client's own file {path} was written: {result}"
            );
        }
    }
}

/// SPEC §9, the running session keeps vigil's protection: with `--protect`, a change to the
/// settings file that takes vigil's hooks, deny rules and sandbox out, made on disk mid-session (by
/// anything that got past the sandbox), is blocked by vigil's ConfigChange hook in the real
/// Claude Code, so the session goes on with the guard, the deny rules and the gate it started
/// with: a Write planting an agent is still turned away and a mention still does not end the
/// loop. Without
/// that hook (the control run) the same change reaches the session, and the mention ends it.
#[test]
fn claude_protect_keeps_a_settings_change_that_drops_vigil_out_of_the_running_session() {
    let Some(clients) = clients() else { return };
    if !sandbox_runs() {
        return;
    }
    for kept in [true, false] {
        let project = project();
        let root = project.path().parent().unwrap().to_path_buf();
        let home = root.join("home");
        let tmp = root.join("tmp");
        for dir in [&home, &tmp] {
            std::fs::create_dir_all(dir).unwrap();
        }
        install_protected(project.path(), &home);
        let settings = project.path().join(".claude/settings.local.json");
        let mut value: Value = serde_json::from_slice(&std::fs::read(&settings).unwrap()).unwrap();
        assert!(value["hooks"]["ConfigChange"].is_array(), "{value}");
        if !kept {
            value["hooks"]
                .as_object_mut()
                .unwrap()
                .remove("ConfigChange");
            std::fs::write(&settings, serde_json::to_vec_pretty(&value).unwrap()).unwrap();
        }
        let agent = project.path().join(".claude/agents/helper.md");
        let script = vec![
            Turn::Bash("echo started".into()),
            Turn::Bash("sleep 4; echo waited".into()),
            Turn::Tool(
                "Write",
                json!({"file_path": agent.display().to_string(), "content": "---\nname: helper\n---\n"}),
            ),
            Turn::Text(MENTION.into()),
            Turn::Text(DECLARATION.into()),
        ];
        let server = Server::start(script, None);
        let edited = settings.clone();
        server.before_turn(1, move || {
            let mut value: Value =
                serde_json::from_slice(&std::fs::read(&edited).unwrap()).unwrap();
            let hooks = value["hooks"].as_object_mut().unwrap();
            hooks.remove("Stop");
            hooks.remove("PreToolUse");
            value["sandbox"]["enabled"] = json!(false);
            value["permissions"]["deny"] = json!([]);
            std::fs::write(&edited, serde_json::to_vec_pretty(&value).unwrap()).unwrap();
        });
        let args = [
            "-p",
            "/vigil-loop Make the build green. --max-iterations 5 --completion-promise DONE",
            "--session-id",
            SESSION,
            "--dangerously-skip-permissions",
        ];
        let mut cmd = claude(&clients, &home, project.path(), &server.url, &args);
        cmd.env("TMPDIR", &tmp);
        let out = run(cmd, DEADLINE);
        let what = format!("kept {kept}: {}", said(&out));
        assert!(out.status.success(), "{what}");
        let main = server.main_requests();
        let result_of = |turn: usize| main[turn].user_texts().pop().unwrap_or_default();
        if kept {
            assert_eq!(main.len(), 5, "every scripted turn was asked for: {what}");
            let write = result_of(3);
            assert!(
                write.contains("denied"),
                "the guard and the deny rules still turn the write away: {write}"
            );
            assert!(!agent.exists());
            let after_mention = result_of(4);
            assert!(
                after_mention.contains("Stop hook") && after_mention.contains("vigil loop 2/5"),
                "the gate still holds the loop: {after_mention}"
            );
            assert_eq!(loop_status(project.path(), SESSION)["status"], "passed");
            // Issue 29: the block is kept in the session's record and told at the next Stop,
            // which Claude Code keeps in the transcript (`-p` shows neither hook's message).
            let transcript = std::fs::read_to_string(claude_transcript(&home, SESSION)).unwrap();
            assert!(
                transcript.contains("vigil blocked a settings change during this session"),
                "the block is told at the next Stop: {what}"
            );
        } else {
            assert_eq!(
                main.len(),
                4,
                "without the hook the change reaches the session, and the mention ends it: {what}"
            );
            assert!(agent.exists(), "and the Write lands: {what}");
        }
    }
}
