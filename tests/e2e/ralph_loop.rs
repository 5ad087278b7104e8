//! SPEC §3 and §4, the loop in the real Claude Code: it ends on the declaration, never the
//! mention, in both feedback modes; at `--max-iterations`; a cut (the engine's block cap, a
//! turn cut short) is recorded and told; `loop run` bounds the loop and exits by its verdict; a
//! loop whose state home vanished is told NOT verified; the model is never offered the human's
//! slash commands.

use serde_json::json;

use super::{
    DEADLINE, DECLARATION, GREEN, MENTION, SESSION, claude_p, claude_project, claude_streamed,
    claude_transcript, codex_home, codex_ok, install_claude, install_codex, install_codex_with,
    loop_run, loop_status, looping_project, only_loop, project, run_line, start_loop, vigil,
};
use crate::clients::*;
use crate::plugin::assert_model_is_not_offered_vigils_commands;
use crate::server::{Server, Turn};
use crate::support::*;

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

/// What `loop run` of 5 passes (its check `true`) exits with and says, by the turns the model
/// takes: a mention then the declaration passes; no turn of its own stalls.
fn run_verdicts() -> [(Vec<Turn>, i32, &'static str); 2] {
    [
        (
            vec![Turn::Text(MENTION.into()), Turn::Text(DECLARATION.into())],
            0,
            "loop passed on pass 2/5",
        ),
        (vec![], 1, "loop aborted at pass 3/5"),
    ]
}

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
        let server = Server::texts(&[MENTION, "Still working on the build.", DECLARATION]);
        claude_p(&clients, project.path(), &server, GREEN);
        let main = server.main_requests();
        assert_eq!(main.len(), 3, "exactly three model turns ({feedback:?})");
        for request in &main[1..] {
            let text = request.text();
            assert!(text.contains(wording), "{feedback:?}: {text}");
            // The loop's own prompt is fed back.
            assert_contains!(text, "Loop task: make the build green.");
            // Started from a terminal, the loop tells the model how to finish in its reason.
            // The model is told how to finish.
            assert_contains!(
                text,
                "finish only by ending with <promise>DONE</promise> on its own last line"
            );
        }
        assert_eq!(loop_status(project.path(), SESSION)["status"], "passed");
    }
}

#[test]
fn claude_loop_that_never_declares_stops_at_max_iterations_and_says_so() {
    let Some(clients) = clients() else { return };
    let project = looping_project("3");
    let server = Server::always("Still working.");
    let out = claude_streamed(&clients, project.path(), &server);
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
    let project = looping_project("20");
    // A different text each pass, so the loop does not end as stalled first.
    let server = text_only_server();
    claude_p(&clients, project.path(), &server, GREEN);
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
    let project = looping_project("40");
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
    let input = message(GREEN) + &message("SECOND PROMPT: go on.");
    ok(run_with_input(
        claude(&clients, home.path(), project.path(), &server.url, &args),
        DEADLINE,
        Some(input.as_bytes()),
    ));
    let status = loop_status(project.path(), SESSION);
    assert_eq!(status["status"], "passed", "{status}");
    assert_eq!(status["failures"][0]["error"], "block_cap", "{status}");
    let transcript = std::fs::read_to_string(claude_transcript(home.path(), SESSION)).unwrap();
    // The human is told.
    assert_contains!(
        transcript,
        "ended a turn of this session's loop over its Stop hook"
    );
}

/// Issue 29, item 3: under `loop run`, Claude Code's cap is lifted for the client it starts,
/// so a text-only loop of 20 passes runs all 20, vigil bounding it, and the verdict is the exit
/// code with one line: 1, aborted at its last pass, NOT verified.
#[test]
fn claude_loop_run_lifts_the_cap_so_vigil_alone_bounds_the_loop_and_exits_1() {
    let Some(clients) = clients() else { return };
    let project = claude_project();
    let server = text_only_server();
    let home = home();
    let args = ["-p", GREEN, "--dangerously-skip-permissions"];
    let client = claude(&clients, home.path(), project.path(), &server.url, &args);
    let flags = ["--max-iterations", "20", "--completion-promise", "DONE"];
    let out = run(loop_run(&client, &flags), DEADLINE);
    let line = run_line(&out);
    assert_exit(&out, 1);
    assert_eq!(server.main_requests().len(), 20, "every pass ran: {line}");
    assert_contains!(line, "loop aborted at pass 20/20");
    assert_contains!(line, "max-iterations");
    assert_contains!(line, "NOT verified");
    assert_eq!(only_loop(project.path())["status"], "aborted");
}

/// Issue 29, item 3: `loop run -- claude -p` exits 0 on a verified pass, and 1 with the line on
/// a loop that stalls; the session told the model how to finish from its start.
#[test]
fn claude_loop_run_exits_0_on_a_verified_pass_and_1_on_a_stalled_loop() {
    let Some(clients) = clients() else { return };
    for (turns, exit, said_line) in run_verdicts() {
        let project = project();
        // A check on the Stop hook: a declaration alone verifies nothing, and exits 1.
        install_claude(project.path(), Some("true"), "");
        let server = Server::start(turns, Some(Turn::Text("Still working.".into())));
        let home = home();
        let args = ["-p", GREEN, "--dangerously-skip-permissions"];
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
        // The model is told how to finish from the start.
        assert_contains!(first, "claimed a loop started with `stop-gate loop run`");
        assert_contains!(first, "<promise>DONE</promise>");
    }
}

/// Issue 29, the witness: the state home removed mid-loop, the real Claude Code's next Stop
/// finds no record, but the transcript holds the loop's blocks; the human is told the loop is
/// NOT verified (Claude Code keeps the hook's systemMessage in the transcript).
#[test]
fn claude_loop_whose_state_home_vanished_is_told_not_verified() {
    let Some(clients) = clients() else { return };
    let project = looping_project("5");
    let server = Server::texts(&[MENTION, DECLARATION]);
    let state = state_home_of(project.path());
    server.before_turn(1, move || {
        std::fs::remove_dir_all(&state).unwrap();
    });
    let home = home();
    let args = [
        "-p",
        GREEN,
        "--session-id",
        SESSION,
        "--dangerously-skip-permissions",
    ];
    ok(run(
        claude(&clients, home.path(), project.path(), &server.url, &args),
        DEADLINE,
    ));
    assert_eq!(server.main_requests().len(), 2);
    let transcript = std::fs::read_to_string(claude_transcript(home.path(), SESSION)).unwrap();
    // The human is told.
    assert_contains!(
        transcript,
        "the loop's record is gone from the state home: the loop is NOT verified"
    );
}

/// Issue 29: Codex 0.171.0 has no cap of its own on consecutive Stop blocks (none is in the
/// client; this shows it): a text-only loop of 12 passes runs all 12 under `codex exec`, and
/// ends `aborted` at its own bound, not cut.
#[test]
fn codex_runs_every_pass_a_text_only_loop_asks_for_with_no_cap_of_its_own() {
    let Some(clients) = clients() else { return };
    let project = project();
    let server = text_only_server();
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
        GREEN,
    ];
    ok(vigil("stop-gate", project.path(), &args));
    codex_ok(&clients, &home, &project, GREEN);
    assert_eq!(server.main_requests().len(), 12, "every pass ran");
    assert_eq!(only_loop(project.path())["status"], "aborted");
}

/// Issue 29, item 3: `loop run -- codex exec` exits 0 on a verified pass, and 1 with the line
/// on a loop that stalls (Codex's hooks inherit the run's id from `codex exec`).
#[test]
fn codex_loop_run_exits_0_on_a_verified_pass_and_1_on_a_stalled_loop() {
    let Some(clients) = clients() else { return };
    for (turns, exit, said_line) in run_verdicts() {
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
            GREEN,
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
fn claude_never_offers_the_model_vigils_slash_commands_installed_in_the_project() {
    let Some(clients) = clients() else { return };
    let project = project();
    // Where install.sh puts them for Claude Code.
    let commands = project.path().join(".claude/commands");
    std::fs::create_dir_all(&commands).unwrap();
    for name in ["vigil-loop.md", "vigil-cancel.md"] {
        let template = repo_path(&format!("templates/commands/{name}"));
        std::fs::copy(template, commands.join(name)).unwrap();
    }
    let server = Server::texts(&["Hello."]);
    claude_p(&clients, project.path(), &server, "Say hello.");
    assert_model_is_not_offered_vigils_commands(&server);
}
