//! The subagent contract (`--contract`): a SubagentStop whose report breaks the contract's
//! schema is sent back once, with the first violation; the main agent and compaction are not
//! held to it; a contract that cannot be read denies.

use serde_json::json;

use crate::support::*;

use super::REPORT;

fn subagent_stop(p: &Project, agent: &str, message: &str) -> String {
    sample_payload(
        "claude-subagent-stop-real.json",
        &[
            ("session_id", json!("s1")),
            ("cwd", json!(p.path())),
            ("agent_id", json!(agent)),
            ("last_assistant_message", json!(message)),
        ],
    )
}

/// Issue 29: a report that names a key twice means two things at once (the schema sees the
/// last `status`, a reader that takes the first sees another): it is sent back, at any depth,
/// naming the key.
#[test]
fn a_report_that_names_a_key_twice_is_sent_back() {
    let p = Project::new();
    let args = ["--subagents", "--contract", "default"];
    let twice = REPORT.replace(
        "{\"status\":\"done\"",
        "{\"status\":\"blocked\",\"status\":\"done\"",
    );
    let nested = REPORT.replace("\"changed\":[]", "\"changed\":[{\"a\":1,\"a\":2}]");
    for (report, key) in [(twice, "status"), (nested, "a")] {
        let out = p.stop_with(&args, subagent_stop(&p, "a1", &report));
        assert!(out.blocked(), "{report}");
        let reason = out.reason();
        assert_contains!(reason, &format!("names the key \"{key}\" twice"));
    }
    let fenced = format!(
        "```json\n{}\n```",
        REPORT.replace(
            "{\"status\":\"done\"",
            "{\"status\":\"done\",\"status\":\"done\"",
        )
    );
    assert!(
        p.stop_with(&args, subagent_stop(&p, "a1", &fenced))
            .blocked()
    );
    assert!(
        !p.stop_with(&args, subagent_stop(&p, "a1", REPORT))
            .blocked()
    );
}

#[test]
fn a_report_that_breaks_the_contract_is_sent_back_with_its_pointer_and_the_shape() {
    let p = Project::new();
    let args = ["--subagents", "--contract", "default"];
    let prose = p.stop_with(
        &args,
        subagent_stop(&p, "a1", "Subagent report: there is 1 file."),
    );
    let reason = prose.assert_blocked_starting(
        "stop-gate: the subagent's report breaks the default contract: the report is not a JSON object",
    );
    assert_contains!(reason, "\"open_questions\"", "the shape to return");
    let wrong = REPORT.replace("\"done\"", "\"finished\"");
    let wrong = p.stop_with(&args, subagent_stop(&p, "a1", &wrong));
    assert!(wrong.blocked());
    assert!(wrong.reason().contains("at /status:"), "{}", wrong.reason());
    let missing = REPORT.replace(",\"tokens_used\":1200", "");
    let missing = p.stop_with(&args, subagent_stop(&p, "a1", &missing));
    assert_contains!(
        missing.reason(),
        "at /: \"tokens_used\" is a required property"
    );
}

#[test]
fn a_report_of_the_contracts_shape_passes_bare_or_fenced_and_blocked_with_a_question() {
    let p = Project::new();
    let args = ["--contract", "default"];
    for message in [
        REPORT.to_string(),
        format!("```json\n{REPORT}\n```"),
        REPORT.replace("\"done\"", "\"blocked\"").replace(
            "\"open_questions\":[]",
            "\"open_questions\":[\"Which database?\"]",
        ),
    ] {
        let stop = p.stop_with(&args, subagent_stop(&p, "a1", &message));
        assert!(stop.silent_allow(), "{message}: {}", stop.reason());
    }
    let blocked_silently = REPORT.replace("\"done\"", "\"blocked\"");
    assert!(
        p.stop_with(&args, subagent_stop(&p, "a1", &blocked_silently))
            .blocked()
    );
}

#[test]
fn a_report_over_the_token_cap_is_sent_back_before_it_is_read() {
    let p = Project::new();
    let long = REPORT.replace("There is one file.", &"a long answer ".repeat(500));
    let stop = p.stop_with(
        &["--contract", "default", "--contract-max-tokens", "500"],
        subagent_stop(&p, "a1", &long),
    );
    stop.assert_blocked_saying("tokens, over the contract's 500");
}

#[test]
fn contract_blocks_are_counted_per_agent_id() {
    let p = Project::new();
    let args = ["--contract", "default", "--max-blocks", "1"];
    assert!(
        p.stop_with(&args, subagent_stop(&p, "a1", "prose"))
            .blocked()
    );
    let spent = p.stop_with(&args, subagent_stop(&p, "a1", "prose"));
    assert!(!spent.blocked(), "a1's budget of one block is spent");
    assert!(spent.system_message().contains("NOT verified"));
    assert!(
        p.stop_with(&args, subagent_stop(&p, "b2", "prose"))
            .blocked(),
        "b2 has a budget of its own"
    );
    let record = p.session_record("s1");
    let agents = fields_of(&record["agent_budgets"], "agent_id");
    assert!(agents.contains(&"b2"), "{record}");
    // The main agent's budget is untouched by its subagents.
    assert_eq!(record["budget"]["consecutive_blocks"], 0);
    // A hostile agent_id shares the session's subagent budget; it is never a file name.
    let hostile = p.stop_with(&args, subagent_stop(&p, "../../x", "prose"));
    assert!(hostile.blocked());
    assert_eq!(
        p.session_record("s1")["subagent_budget"]["consecutive_blocks"],
        1
    );
}

#[test]
fn a_contract_file_that_is_not_a_schema_denies_every_subagent_stop_and_the_doctor_says_so() {
    let p = Project::new();
    for (name, text, said) in [
        ("list.json", "[1, 2]", "not a JSON Schema"),
        ("notjson.json", "{\"type\":", "is not JSON"),
        ("badtype.json", "{\"type\": 7}", "not a valid JSON Schema"),
        (
            "remote.json",
            "{\"$ref\": \"https://example.invalid/x.json\"}",
            "cannot be used",
        ),
        (
            "file.json",
            "{\"$ref\": \"file:///etc/passwd\"}",
            "cannot be used",
        ),
    ] {
        let path = p.path().join(name);
        std::fs::write(&path, text).unwrap();
        let stop = p.stop_with(
            &["--contract", path.to_str().unwrap()],
            // Each subagent its own budget, so that none is spent.
            subagent_stop(&p, name, REPORT),
        );
        assert!(stop.blocked(), "{name}");
        assert!(stop.reason().contains(said), "{name}: {}", stop.reason());
        assert!(stop.reason().contains("config error"), "{}", stop.reason());
    }
    let missing = p.stop_with(
        &["--contract", "nowhere.json"],
        subagent_stop(&p, "a1", REPORT),
    );
    assert!(missing.blocked());
    // The doctor validates the file itself.
    let list = p.path().join("list.json");
    ok(p.merge("install", &["--contract", list.to_str().unwrap()]));
    let check = p.merge("check", &[]);
    let text = stdout_of(&check);
    assert_eq!(check.status.code(), Some(1), "{text}");
    assert_contains!(text, "[fail] SubagentStop:");
    assert_contains!(text, "not a JSON Schema");
    assert_contains!(text, "inside the project, where the agent can rewrite it");
}

#[test]
fn the_main_agents_stop_is_not_held_to_the_subagent_contract() {
    let p = Project::new();
    let stop = p.stop(
        &["--contract", "default"],
        "s1",
        Some("All done, no JSON here."),
    );
    assert!(stop.silent_allow());
}

#[test]
fn with_a_contract_alone_a_subagent_answers_to_its_contract_not_to_the_projects_checks() {
    let p = Project::new();
    let payload = subagent_stop(&p, "a1", REPORT);
    let alone = p.stop_with(
        &["--contract", "default", "--run", "false"],
        payload.clone(),
    );
    assert!(alone.silent_allow(), "{}", alone.reason());
    let both = p.stop_with(
        &["--contract", "default", "--run", "false", "--subagents"],
        payload,
    );
    both.assert_blocked_saying("`false` failed");
}

#[test]
fn a_fifo_or_a_link_to_one_where_the_contract_should_be_is_refused_at_once() {
    let p = Project::new();
    let fifo = p.path().join("c.json");
    mkfifo(&fifo);
    let link = p.path().join("link.json");
    std::os::unix::fs::symlink(&fifo, &link).unwrap();
    for (path, agent) in [(&fifo, "a1"), (&link, "a2")] {
        let started = std::time::Instant::now();
        let stop = p.stop_with(
            &["--contract", path.to_str().unwrap(), "--deadline", "20"],
            subagent_stop(&p, agent, REPORT),
        );
        stop.assert_blocked_saying("not a regular file");
        assert_within(
            started,
            std::time::Duration::from_secs(5),
            "never waited on",
        );
    }
}

#[test]
fn a_relative_contract_in_the_users_settings_fails_the_doctor() {
    let home = tempfile::tempdir().unwrap();
    let settings = home.path().join(".claude/settings.json");
    let run = |args: &[&str]| {
        settings_merge()
            .args(args)
            .env("HOME", home.path())
            .current_dir(home.path())
            .output()
            .unwrap()
    };
    let bin = bin_dir();
    ok(run(&[
        "install",
        "--settings",
        settings.to_str().unwrap(),
        "--bin-dir",
        bin.to_str().unwrap(),
        "--contract",
        "contract.json",
    ]));
    let check = run(&["check", "--settings", settings.to_str().unwrap()]);
    let text = stdout_of(&check);
    assert_eq!(check.status.code(), Some(1), "{text}");
    assert!(text.contains("is relative in your user settings"), "{text}");
}

/// Claude Code 2.1.332's `/compact` fires SubagentStop with `agent_type` "" and the summary as
/// its message: no subagent's report, so no contract holds it (nor a budget entry is kept).
#[test]
fn compaction_is_no_subagent_report_and_passes_untouched() {
    let p = Project::new();
    let payload = sample_payload(
        "claude-subagent-stop-real.json",
        &[
            ("session_id", json!("s1")),
            ("cwd", json!(p.path())),
            ("agent_type", json!("")),
            (
                "last_assistant_message",
                json!("Summary: the user asked for hello."),
            ),
        ],
    );
    for args in [
        &["--contract", "default"][..],
        &["--contract", "default", "--subagents", "--run", "false"][..],
    ] {
        let stop = p.stop_with(args, payload.clone());
        assert!(stop.silent_allow(), "{args:?}: {}", stop.reason());
    }
    // Nothing is counted for it: no protected state was even made.
    let made = std::panic::catch_unwind(|| p.protected().join("sessions/s1.rec").exists());
    assert!(!made.unwrap_or(false), "nothing counted for it");
}
