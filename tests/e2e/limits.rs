//! How a loop stops by itself (issue 17) with the real clients: an API error cuts the loop
//! without spending a pass and the next session is told, background Bash holds the loop until
//! it finishes, the subagent contract sends a report back once (compaction is no report), and
//! stalls and token budgets end the loop counting what the transcript records.

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use serde_json::{Value, json};

use super::{
    DEADLINE, DECLARATION, GREEN, SECOND, SESSION, add_hook_group, claude_p, claude_project,
    claude_session, claude_streamed, claude_transcript, codex_check, codex_home, codex_ok,
    install_claude_with, install_codex, install_codex_with, loop_status, looping_project,
    only_loop, project, start_loop, start_loop_for, vigil, wait_until,
};
use crate::clients::*;
use crate::server::{Server, Turn};
use crate::support::*;

/// The session record of `session`, when there is one (any project directory of the state home).
fn session_record(project: &Path, session: &str) -> Option<Value> {
    let projects = state_home_of(project).join("projects");
    for dir in std::fs::read_dir(&projects).ok()?.flatten() {
        let path = dir.path().join(format!("sessions/{session}.rec"));
        if let vigil::sys::record::Read::Found { payload, .. } = vigil::sys::record::read(&path) {
            return serde_json::from_slice(&payload).ok();
        }
    }
    None
}

/// The tokens a transcript records, as a budget would count them: each assistant reply once
/// (Claude Code writes a line per content block, each with the reply's `message.id` and the
/// same `message.usage`), Claude Code's own `<synthetic>` lines (an API error) skipped.
#[allow(dead_code)]
fn transcript_usage(transcript: &Path) -> crate::server::Usage {
    let mut seen = std::collections::HashSet::new();
    let mut sum = crate::server::Usage {
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

// Helpers for StopFailure, background work, subagents and budgets (issue 17).
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
//
/// Claude Code's switch that turns its API retries off: the error is final at once.
#[allow(dead_code)]
const NO_RETRIES: (&str, &str) = ("CLAUDE_CODE_MAX_RETRIES", "0");

/// One `claude -p` session in a HOME the caller keeps (so its transcript outlives the run),
/// permissions skipped and API retries off ([`NO_RETRIES`]); its status is not checked (an API
/// error ends `-p` with exit 1).
#[allow(dead_code)]
fn claude_run(
    clients: &Clients,
    home: &Path,
    project: &Path,
    server: &Server,
    prompt: &str,
) -> Output {
    let args = [
        "-p",
        prompt,
        "--session-id",
        SESSION,
        "--dangerously-skip-permissions",
    ];
    let mut cmd = claude(clients, home, project, &server.url, &args);
    cmd.env(NO_RETRIES.0, NO_RETRIES.1);
    run(cmd, DEADLINE)
}

/// A [`project`] installed for Claude Code with the default subagent contract.
fn contract_project() -> Project {
    let project = project();
    install_claude_with(project.path(), &["--contract", "default"]);
    project
}

/// The payloads the recording hooks kept in `dir`, in the order they came.
#[allow(dead_code)]
fn recorded_payloads(dir: &Path) -> Vec<Value> {
    files_ending(dir, "json")
        .iter()
        .map(|p| serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap())
        .collect()
}

/// Adds a handler running `command` on `event` (`StopFailure`, `SubagentStop`, …) to the
/// project's `.claude/settings.local.json`, made if missing, after the handlers already there.
#[allow(dead_code)]
fn add_claude_hook(project: &Path, event: &str, command: &str, timeout: u64) {
    let settings = project.join(".claude/settings.local.json");
    let handler = json!({"type": "command", "command": command, "timeout": timeout});
    add_hook_group(&settings, event, &handler);
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

#[test]
fn claude_api_error_ends_a_p_session_whose_loop_is_cut_without_a_pass_and_the_next_session_is_told()
{
    let Some(clients) = clients() else { return };
    let project = looping_project("5");
    // Pass 1 ends without a declaration; the next request is answered with a 529.
    let server = Server::start(
        vec![
            Turn::Text("Working on the build.".into()),
            Turn::overloaded(),
        ],
        Some(Turn::overloaded()),
    );
    let home = home();
    let out = claude_run(&clients, home.path(), project.path(), &server, GREEN);
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
    assert_contains!(
        state["failures"][0]["message"].as_str().unwrap_or(""),
        "529",
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
    let next = Server::texts(&["Carrying on."]);
    claude_session(&clients, project.path(), &next, SECOND, "Carry on.", &[]);
    let opening = next.main_requests()[0].text();
    assert_contains!(opening, "ended on an API error: server_error at");
    assert_contains!(
        opening,
        "loop: cut (turn-failed: the session ended after a turn failed on an API error)"
    );
    assert_contains!(opening, SESSION);
}

/// What session-end-handoff outlasts (`sys::process::outlast_termination`): when an API error
/// ends `claude -p`, the client sends SIGTERM to a StopFailure hook still running, exits
/// without waiting for it, and runs SessionEnd's hooks meanwhile.
#[test]
fn claude_terminates_a_stop_failure_hook_still_running_when_p_exits() {
    let Some(clients) = clients() else { return };
    let project = project();
    let marks = project.path().join("marks");
    std::fs::create_dir_all(&marks).unwrap();
    let m = marks.display();
    add_claude_hook(
        project.path(),
        "StopFailure",
        &format!("trap 'echo TERM > \"{m}/term\"' TERM; sleep 5 & wait"),
        30,
    );
    add_claude_hook(
        project.path(),
        "SessionEnd",
        &format!("touch '{m}/session-end'"),
        30,
    );
    let server = Server::start(vec![Turn::overloaded()], Some(Turn::overloaded()));
    let home = home();
    let start = std::time::Instant::now();
    let out = claude_run(&clients, home.path(), project.path(), &server, "Go.");
    assert_exit(&out, 1);
    assert_within(
        start,
        Duration::from_secs(5),
        "claude -p waited for the hook",
    );
    assert!(
        wait_until(Duration::from_secs(5), || marks.join("term").exists()),
        "the StopFailure hook was not sent SIGTERM"
    );
    assert!(marks.join("session-end").exists(), "SessionEnd's hook ran");
}

#[test]
fn claude_background_bash_keeps_the_loop_going_until_it_finishes() {
    let Some(clients) = clients() else { return };
    let project = claude_project();
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
    claude_p(&clients, project.path(), &server, "Run the slow suite.");
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
    // The block names the task.
    assert_contains!(main[held].text(), "sleep 3; echo suite-done");
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
    let project = contract_project();
    let settings: Value = serde_json::from_slice(
        &std::fs::read(project.path().join(".claude/settings.local.json")).unwrap(),
    )
    .unwrap();
    assert_contains!(
        settings["hooks"]["SubagentStop"][0]["hooks"][0]["command"]
            .as_str()
            .unwrap_or(""),
        "--contract default",
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
    claude_p(
        &clients,
        project.path(),
        &server,
        "Count the files with a subagent.",
    );
    let sub = server.subagent_requests();
    assert_eq!(sub.len(), 2, "sent back once, then passed");
    let second = sub[1].text();
    // The subagent is told the first violation.
    assert_contains!(
        second,
        "breaks the default contract: the report is not a JSON object"
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
    let project = looping_project("20");
    let server = Server::always("Still looking at the build.");
    let out = claude_streamed(&clients, project.path(), &server);
    assert_eq!(server.main_requests().len(), 3, "three passes, not twenty");
    let state = loop_status(project.path(), SESSION);
    assert_eq!(state["status"], "aborted", "{state}");
    assert_eq!(state["end_reason"], "stalled", "{state}");
    // The human is told.
    assert_contains!(String::from_utf8_lossy(&out.stdout), "stalled");
}

#[test]
fn claude_loop_ends_when_its_token_budget_is_spent_counting_what_the_transcript_records() {
    let Some(clients) = clients() else { return };
    let project = claude_project();
    // Each reply: input 111, cache creation 333, output 22 count (466); cache reads 4444 not.
    let flags = "--max-iterations 10 --completion-promise DONE --max-tokens 1000";
    start_loop_for(project.path(), SESSION, flags, GREEN);
    let server = Server::texts_then(
        &["First look.", "Second look.", "Third look."],
        "Another look.",
    );
    let home = home();
    ok(claude_run(
        &clients,
        home.path(),
        project.path(),
        &server,
        GREEN,
    ));
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
    let server = Server::always("Still looking.");
    let home = codex_home(&server, project.path(), true);
    install_codex(project.path(), home.path(), true);
    ok(vigil(
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
            GREEN,
        ],
    ));
    codex_ok(&clients, &home, &project, GREEN);
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
    // SubagentStop is trusted too.
    assert_lacks!(
        codex_check(project.path(), home.path()),
        "[warn] Codex will skip"
    );
    let out = codex_ok(&clients, &home, &project, "Count the files.");
    let sub = server.subagent_requests();
    assert_eq!(sub.len(), 2, "sent back once, then passed: {}", said(&out));
    assert_contains!(
        sub[1].text(),
        "breaks the default contract: the report is not a JSON object"
    );
}

#[test]
fn claude_compaction_is_not_held_to_the_subagent_contract() {
    let Some(clients) = clients() else { return };
    let project = contract_project();
    let hooks = tempfile::tempdir().unwrap();
    record_claude_hook(project.path(), "SubagentStop", hooks.path());
    let server = Server::texts_then(&["Hello."], "Summary: the user asked for a greeting.");
    let home = home();
    ok(claude_run(
        &clients,
        home.path(),
        project.path(),
        &server,
        "Say hello.",
    ));
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
    let compact = ok(run(cmd, DEADLINE));
    let stops = recorded_payloads(hooks.path());
    assert!(
        stops.iter().any(|p| p["agent_type"] == ""),
        "compaction fired a SubagentStop of no type: {stops:?}"
    );
    let blocked = session_record(project.path(), SESSION)
        .map(|r| r["agent_budgets"].clone())
        .unwrap_or(Value::Null);
    assert!(blocked.is_null(), "no block was counted for it: {blocked}");
    assert_lacks!(
        String::from_utf8_lossy(&compact.stdout),
        "breaks the default contract",
        "{}",
        said(&compact)
    );
}

#[test]
fn claude_an_agent_call_cannot_pass_itself_off_as_compaction() {
    let Some(clients) = clients() else { return };
    let project = contract_project();
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
    claude_p(&clients, project.path(), &server, "Count the files.");
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
