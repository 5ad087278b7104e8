//! End to end against the real clients (issue 7): Claude Code and Codex run whole sessions with
//! vigil installed, against a scripted model server on loopback (`server.rs`), the clients
//! pinned and cached (`clients.rs`). One file per part of SPEC.md a scenario proves, each
//! naming it; here what they share: the project (from `tests/support/`), installs, loops and
//! sessions.

mod clients;
mod gates;
mod held;
mod limits;
mod nested;
mod plugin;
mod protect;
mod quick_start;
mod ralph_loop;
mod server;
mod sessions;
#[path = "../support/mod.rs"]
mod support;
mod wakes;

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::{Value, json};

use clients::*;
use server::Server;
use support::*;

const SESSION: &str = "6f1c2d3e-4a5b-4c6d-8e7f-0123456789ab";
const SECOND: &str = "7a2b3c4d-5e6f-4a1b-9c2d-abcdef012345";
const DEADLINE: Duration = Duration::from_secs(120);

/// A fresh git project with one commit (its `README.md`), in a directory of its own so that the
/// state home its binaries keep protected state in (`$VIGIL_STATE_HOME`, set for the CLI and the
/// clients alike) is beside it.
fn project() -> Project {
    Project::builder()
        .named("project")
        .file("README.md", "a project\n")
        .git()
        .build()
}

/// A [`project`] with vigil installed for Claude Code (no check) and a loop of `max` passes for
/// `SESSION` to make the build green: where most Claude Code scenarios start.
fn looping_project(max: &str) -> Project {
    let project = claude_project();
    start_loop(project.path(), Some(SESSION), max, GREEN);
    project
}

/// A vigil binary run in `project` as a person (or CI) would.
fn vigil(binary: &str, project: &Path, args: &[&str]) -> Output {
    isolated(&mut Command::new(bin_dir().join(binary)))
        .args(args)
        .current_dir(project)
        .env("VIGIL_STATE_HOME", state_home_of(project))
        .output()
        .unwrap()
}

/// settings-merge install into the project's `.claude/settings.local.json`, then `extra`
/// appended to the Stop command (flags settings-merge does not write).
fn install_claude(project: &Path, run: Option<&str>, stop_extra: &str) {
    match run {
        Some(run) => install_claude_with(project, &["--run", run]),
        None => install_claude_with(project, &[]),
    }
    if !stop_extra.is_empty() {
        append_to_stop_command(&project.join(".claude/settings.local.json"), stop_extra);
    }
}

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

/// A [`project`] with vigil installed for Claude Code, no check: where most Claude Code
/// scenarios start.
fn claude_project() -> Project {
    let project = project();
    install_claude(project.path(), None, "");
    project
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

/// `stop-gate loop start --session SESSION FLAGS PROMPT`, the flags as a person types them.
fn start_loop_for(project: &Path, session: &str, flags: &str, prompt: &str) {
    let args = [
        &["loop", "start", "--session", session][..],
        &words(flags),
        &[prompt],
    ]
    .concat();
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

    ok(run(
        claude(clients, home.path(), project, &server.url, &args),
        DEADLINE,
    ))
}

/// The usual session of a scenario: [`claude_session`] as `SESSION`, with no more flags.
fn claude_p(clients: &Clients, project: &Path, server: &Server, prompt: &str) -> Output {
    claude_session(clients, project, server, SESSION, prompt, &[])
}

/// The task most scenarios give the client, and the loops they start.
const GREEN: &str = "Make the build green.";

/// [`claude_p`] of `GREEN` that streams its output as JSON, verbose (which shows what the human
/// is told).
fn claude_streamed(clients: &Clients, project: &Path, server: &Server) -> Output {
    let streamed = ["--output-format", "stream-json", "--verbose"];
    claude_session(clients, project, server, SESSION, GREEN, &streamed)
}

const MENTION: &str = "When it is done I will write <promise>DONE</promise> on its own line.";
const DECLARATION: &str = "The build is green.\n<promise>DONE</promise>";

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
    files_ending(&transcript.with_extension("").join("subagents"), "jsonl")
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

/// [`codex_exec`] of `project` under the CODEX_HOME in `home`, which must succeed.
fn codex_ok(
    clients: &Clients,
    home: &tempfile::TempDir,
    project: &Project,
    prompt: &str,
) -> Output {
    ok(codex_exec(clients, home.path(), project.path(), prompt))
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
            "--verbose",
            "--codex",
            "--settings",
            settings.to_str().unwrap(),
            "--codex-config",
            config.to_str().unwrap(),
        ],
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// Adds a group of the one `handler` on `event` to the hooks file `settings`, made if missing,
/// after the groups already there: the group's index.
fn add_hook_group(settings: &Path, event: &str, handler: &Value) -> usize {
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    let mut value: Value = std::fs::read(settings)
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
        .or_insert_with(|| json!([]))
        .as_array_mut()
        .unwrap();
    groups.push(json!({"hooks": [handler]}));
    let group = groups.len() - 1;
    std::fs::write(settings, serde_json::to_vec_pretty(&value).unwrap()).unwrap();
    group
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
    let handler = json!({"type": "command", "command": command, "timeout": 30});
    let group = add_hook_group(&settings, event, &handler);
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
    let projects = state_home_of(project).join("projects");
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
