//! SPEC §6, §7 and §4 `--next-session` with the real clients: the handoff reaches the next
//! session's first request defanged, a pending loop is claimed by the next session and no later
//! one, and Codex runs vigil's hooks only once trusted (§8), then the loop and the context
//! work.

use std::path::Path;

use serde_json::{Value, json};

use super::{
    DECLARATION, GREEN, MENTION, SECOND, SESSION, claude_p, claude_project, claude_session,
    codex_check, codex_home, codex_ok, install_codex, loop_status, only_loop, project, start_loop,
    vigil,
};
use crate::clients::*;
use crate::server::{Server, Turn};
use crate::support::*;

/// Rewrites the scripted provider's address in CODEX_HOME's config.toml.
pub(crate) fn point_codex_at(home: &Path, server: &Server) {
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

#[test]
fn claude_handoff_reaches_the_next_sessions_first_request_defanged() {
    let Some(clients) = clients() else { return };
    let project = claude_project();
    let first = Server::start(
        vec![Turn::Text(
            "Wrapped up the tokenizer.\n<promise>DONE</promise>".into(),
        )],
        None,
    );
    claude_p(&clients, project.path(), &first, "Finish the tokenizer.");
    assert!(
        project.path().join(".vigil/handoff/final.json").is_file(),
        "SessionEnd wrote the handoff"
    );
    let second = Server::texts(&["Carrying on."]);
    claude_session(&clients, project.path(), &second, SECOND, "Carry on.", &[]);
    let opening = second.main_requests()[0].text();
    // The handoff is in session two's first request.
    assert_contains!(opening, "[final] session 6f1c2d3e");
    assert!(opening.contains("Wrapped up the tokenizer."));
    // Handed-on text is there, defanged.
    assert_contains!(opening, "<pro-mise>DONE</pro-mise>");
    assert_lacks!(opening, "<promise>DONE</promise>");
}

#[test]
fn claude_next_session_loop_is_claimed_by_that_session_and_no_later_one() {
    let Some(clients) = clients() else { return };
    let project = claude_project();
    start_loop(project.path(), None, "4", GREEN);
    let server = Server::texts(&["Working.", DECLARATION]);
    claude_p(&clients, project.path(), &server, GREEN);
    assert_eq!(server.main_requests().len(), 2);
    assert_eq!(loop_status(project.path(), SESSION)["status"], "passed");
    let later = Server::texts(&["Hello."]);
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

#[test]
fn codex_runs_vigils_hooks_only_once_trusted_and_then_the_loop_and_context_work() {
    let Some(clients) = clients() else { return };
    let project = project();
    let untrusted = Server::texts(&[MENTION]);
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
            said_before.contains("[warn] Codex will skip 6 of vigil's hooks until you trust them")
                && said_before
                    .lines()
                    .any(|l| l.trim_start().starts_with('/') && l.ends_with(key)),
            "check --verbose names every hook Codex would skip ({key}): {said_before}"
        );
    }
    start_loop(project.path(), None, "4", GREEN);
    // Untrusted: Codex skips the hooks without a word; the mention ends the run.
    codex_ok(&clients, &home, &project, GREEN);
    assert_eq!(untrusted.main_requests().len(), 1);

    // Trusted: a plain `codex exec` runs them; the loop goes on past the mention.
    install_codex(project.path(), home.path(), true);
    // Nothing warns but the sandbox line: this config runs Codex with danger-full-access.
    let checked = codex_check(project.path(), home.path());
    assert!(
        !findings_of(&checked)
            .iter()
            .any(|l| l.starts_with("[warn]") && !l.contains("sandbox_mode")),
        "{checked}"
    );
    let trusted = Server::texts(&[MENTION, DECLARATION]);
    point_codex_at(home.path(), &trusted);
    let out = codex_ok(&clients, &home, &project, GREEN);
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
    let next = Server::texts(&["Carrying on."]);
    point_codex_at(home.path(), &next);
    codex_ok(&clients, &home, &project, "Carry on.");
    let opening = next.main_requests()[0].text();
    let at = opening.find("vigil handoff").unwrap_or(0);
    let context = &opening[at..(at + 1500).min(opening.len())];
    assert_starts_with!(context, "vigil handoff");
    assert_contains!(context, "[final] session");
    assert!(context.contains("loop: passed, pass 2/4"), "{context}");
    // Handed-on text is defanged.
    assert_contains!(context, "<pro-mise>DONE</pro-mise>");
    assert_lacks!(opening, "<promise>DONE</promise>");

    // Editing a hook makes it untrusted again, and check says so.
    let settings = project.path().join(".codex/hooks.json");
    let mut hooks: Value = serde_json::from_slice(&std::fs::read(&settings).unwrap()).unwrap();
    let last = hooks["hooks"]["Stop"].as_array().unwrap().len() - 1;
    hooks["hooks"]["Stop"][last]["hooks"][0]["timeout"] = json!(300);
    std::fs::write(&settings, serde_json::to_vec_pretty(&hooks).unwrap()).unwrap();
    let said_after = codex_check(project.path(), home.path());
    assert_contains!(said_after, "hooks that changed since they were trusted");
    // And Codex does skip it: a new loop is not driven past the mention.
    start_loop(project.path(), None, "4", GREEN);
    let edited = Server::texts(&[MENTION, DECLARATION]);
    point_codex_at(home.path(), &edited);
    codex_ok(&clients, &home, &project, GREEN);
    assert_eq!(
        edited.main_requests().len(),
        1,
        "the edited Stop hook did not run"
    );
}
