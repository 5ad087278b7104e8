//! SPEC §10 with the real Claude Code: a commander session is woken exactly once for each loop
//! the human started in two worktrees (run by `claude -p` through `loop run`, each against its
//! own scripted model), with the right outcomes, a stalled loop saying so; a `claude -p` that
//! names no commander never waits for the project's loops; a loop run takes no longer with the
//! waiter installed; and Codex, which has no async hook, hears of a settled loop and of CI's
//! signed verdict at its next session, once.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::server::{Server, Turn};
use crate::sessions::point_codex_at;
use crate::*;

const COMMANDER: &str = "0c0ffee0-1111-4222-8333-444455556666";

/// A linked worktree of `project` beside it (`../<name>`): the main checkout's local settings
/// wire it (Claude Code reads them in every worktree of the repository).
fn worktree(project: &Path, name: &str) -> PathBuf {
    let path = project.parent().unwrap().join(name);
    add_worktree(project, name, &path);
    path
}

/// A model that writes `fixed.txt` in `dir`, then declares.
fn fixing(dir: &Path) -> Server {
    Server::start(
        vec![Turn::Tool(
            "Write",
            json!({"file_path": dir.join("fixed.txt"), "content": "fixed\n"}),
        )],
        Some(Turn::Text(DECLARATION.into())),
    )
}

/// `loop run FLAGS -- claude -p PROMPT --permission-mode acceptEdits` in `dir`, started.
fn worker(clients: &Clients, dir: &Path, server: &Server, flags: &[&str]) -> std::process::Child {
    let home = home();
    let client = claude(
        clients,
        home.path(),
        dir,
        &server.url,
        &["-p", "Fix it", "--permission-mode", "acceptEdits"],
    );
    let mut run = loop_run(&client, flags);
    run.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = run.spawn().unwrap();
    // The home lives as long as the test: the client reads it while it runs.
    std::mem::forget(home);
    child
}

fn wait_for(child: std::process::Child) -> std::process::Output {
    child.wait_with_output().unwrap()
}

/// The loops `loop list --json` shows from `project`.
fn listed(project: &Path) -> Vec<Value> {
    let out = vigil("stop-gate", project, &["loop", "list", "--json"]);
    serde_json::from_slice(&out.stdout).unwrap_or_default()
}

#[test]
fn claude_commander_hears_once_from_each_loop_its_worktrees_settle() {
    let Some(clients) = clients() else { return };
    let project = project();
    // One install, in the main checkout, gates its worktrees too; its own check passes there
    // (the commander's stops go through), and in a worktree once the model writes the fix.
    install_claude(project.path(), Some("test -f fixed.txt"), "");
    project.write("fixed.txt", "main\n");
    let wt_a = worktree(project.path(), "wt-a");
    let wt_b = worktree(project.path(), "wt-b");
    let model_a = fixing(&wt_a);
    let model_b = Server::always("Still working on it.");
    let common = [
        "--notify",
        COMMANDER,
        "--completion-promise",
        "DONE",
        "--max-iterations",
        "5",
    ];
    let a = worker(
        &clients,
        &wt_a,
        &model_a,
        &[&["--name", "a"], &common[..]].concat(),
    );
    let b = worker(
        &clients,
        &wt_b,
        &model_b,
        &[&["--name", "b", "--stall-after", "2"], &common[..]].concat(),
    );
    assert!(
        wait_until(Duration::from_secs(30), || listed(project.path()).len()
            == 2),
        "the loops never reported: {:?}",
        listed(project.path())
    );
    // The commander: a session of the human's, in the main checkout, named by --notify.
    let commander = Server::texts_then(
        &["Waiting for the loops.", "Heard.", "Heard."],
        "Nothing more.",
    );
    let home = home();
    ok(run(
        claude(
            &clients,
            home.path(),
            project.path(),
            &commander.url,
            &["-p", "Wait for my loops", "--session-id", COMMANDER],
        ),
        Duration::from_secs(240),
    ));
    let a = wait_for(a);
    let b = wait_for(b);
    assert_exit(&a, 0);
    assert_exit(&b, 1);
    assert!(run_line(&b).contains("stalled"), "{}", said(&b));
    // Woken once per loop: the commander's model heard each line once, in the hook's feedback.
    let requests = commander.main_requests();
    let last = requests.last().unwrap().text();
    assert_eq!(
        last.matches("loop a in ../wt-a: running -> passed after")
            .count(),
        1,
        "{last}"
    );
    assert_eq!(
        last.matches("loop b in ../wt-b: running -> aborted after 2 passes (it stalled")
            .count(),
        1,
        "{last}"
    );
    // Each wake ended one wait (one wait may bring both, when they settle together).
    assert!(
        (2..=3).contains(&requests.len()),
        "{} requests",
        requests.len()
    );
    // Nothing left to deliver, and both ends shown after a long absence.
    let list = listed(project.path());
    let mut ends: Vec<(&str, &str)> = list
        .iter()
        .filter_map(|e| Some((e["report"]["name"].as_str()?, e["status"].as_str()?)))
        .collect();
    ends.sort();
    assert_eq!(ends, [("a", "passed"), ("b", "aborted")], "{list:?}");
    let text =
        String::from_utf8_lossy(&vigil("stop-gate", project.path(), &["loop", "list"]).stdout)
            .into_owned();
    assert!(text.contains("0 wakes waiting"), "{text}");
}

/// Under `claude -p` (CLAUDE_CODE_ENTRYPOINT=sdk-cli in the hook's environment) the waiter does
/// not wait for the project's loops, which would hold the session open until one ends: a
/// `claude -p` that names no commander ends at once, and the wake waits for a prompt.
#[test]
fn claude_p_is_not_held_open_by_the_projects_live_loops() {
    let Some(clients) = clients() else { return };
    let project = claude_project();
    // A live loop that reports to this project, in a session that is not this one.
    start_loop(project.path(), Some(SECOND), "5", "Elsewhere");
    let server = Server::texts(&["Hello."]);
    let started = Instant::now();
    claude_p(&clients, project.path(), &server, "Hi");
    assert_within(
        started,
        Duration::from_secs(60),
        "claude -p waited for a loop it does not command",
    );
    assert_eq!(listed(project.path())[0]["status"], "running");
}

/// `loop run -- claude -p` in a project whose other loop is live takes no longer with the
/// waiter installed than without it: the worker's waiter exits at once.
#[test]
fn a_loop_run_takes_no_longer_with_the_waiter_installed() {
    let Some(clients) = clients() else { return };
    let mut took = Vec::new();
    for waiter in [true, false] {
        let project = project();
        install_claude(project.path(), Some("test -f fixed.txt"), "");
        if !waiter {
            let settings = project.path().join(".claude/settings.local.json");
            let mut value: Value =
                serde_json::from_slice(&std::fs::read(&settings).unwrap()).unwrap();
            value["hooks"]["Stop"]
                .as_array_mut()
                .unwrap()
                .retain(|g| !is_waiter(&g.to_string()));
            std::fs::write(&settings, serde_json::to_vec_pretty(&value).unwrap()).unwrap();
        }
        start_loop(project.path(), Some(SECOND), "5", "Elsewhere");
        let model = fixing(project.path());
        let started = Instant::now();
        let out = wait_for(worker(
            &clients,
            project.path(),
            &model,
            &["--max-iterations", "3", "--completion-promise", "DONE"],
        ));
        took.push(started.elapsed());
        assert_exit(&out, 0);
    }
    assert!(
        took[0] < took[1] + Duration::from_secs(3),
        "with the waiter {:?}, without {:?}",
        took[0],
        took[1]
    );
}

/// A sync that brings CI's signed verdict for the content checked out is told to the project's
/// next session once, as context at its start (Codex here: a `claude -p` one-shot reads only
/// its own session's queue, and an interactive Claude Code session hears it from its waiter).
#[test]
fn codex_hears_of_cis_verdict_once_at_the_next_session() {
    let Some(clients) = clients() else { return };
    let project = project();
    let first = Server::texts(&["Noted."]);
    let home = codex_home(&first, project.path(), true);
    install_codex(project.path(), home.path(), true);
    // CI: a remote the project pushes to, and a job that publishes a signed marker.
    let remote = project.path().parent().unwrap().join("remote.git");
    git(
        project.path(),
        &["init", "-q", "--bare", remote.to_str().unwrap()],
    );
    git(
        project.path(),
        &["remote", "add", "origin", remote.to_str().unwrap()],
    );
    git(
        project.path(),
        &["push", "-q", "origin", "HEAD:refs/heads/main"],
    );
    let keys = project.path().parent().unwrap().join("keys");
    ok(vigil(
        "marker-writer",
        project.path(),
        &["keygen", "--out", keys.to_str().unwrap()],
    ));
    let ci = project.path().parent().unwrap().join("ci");
    git(
        project.path(),
        &[
            "clone",
            "-q",
            "-b",
            "main",
            remote.to_str().unwrap(),
            ci.to_str().unwrap(),
        ],
    );
    let secret = keys.join("vigil-marker.key");
    ok(vigil(
        "marker-writer",
        &ci,
        &[
            "run",
            "--publish",
            "--check",
            "tests",
            "--sign-key",
            secret.to_str().unwrap(),
            "--",
            "true",
        ],
    ));
    ok(vigil(
        "marker-writer",
        &ci,
        &["sync", "--push", "--remote", remote.to_str().unwrap()],
    ));
    // The human trusts CI's key, and syncs.
    let public = keys.join("vigil-marker.pub");
    ok(vigil(
        "marker-writer",
        project.path(),
        &["trust", public.to_str().unwrap()],
    ));
    ok(vigil(
        "marker-writer",
        project.path(),
        &["sync", "--remote", remote.to_str().unwrap()],
    ));
    let told = ["CI vouched: tests passed for git-tree:", "CI vouched"];
    codex_hears_once(&clients, &home, &project, &first, told);
}

/// `codex exec "Anything new?"` (answered by `server`) hears `told[0]` once in its opening
/// request, and the next session's opening has nothing of `told[1]`: told once, not twice.
fn codex_hears_once(
    clients: &Clients,
    home: &tempfile::TempDir,
    project: &Project,
    server: &Server,
    told: [&str; 2],
) {
    codex_ok(clients, home, project, "Anything new?");
    let opening = server.main_requests()[0].text();
    assert_eq!(
        opening.matches(told[0]).count(),
        1,
        "{}",
        &opening[opening.len().saturating_sub(3000)..]
    );
    let next = Server::texts(&["Noted."]);
    point_codex_at(home.path(), &next);
    codex_ok(clients, home, project, "Anything new?");
    assert_lacks!(next.main_requests()[0].text(), told[1], "told twice");
}

/// Codex 0.171.0 has no async hook: the waiter is not installed for it, and a loop that settled
/// is told as context when the project's next `codex exec` starts, once.
#[test]
fn codex_hears_of_a_settled_loop_at_its_next_session_once() {
    let Some(clients) = clients() else { return };
    let project = project();
    let server = Server::texts(&["Noted."]);
    let home = codex_home(&server, project.path(), true);
    install_codex(project.path(), home.path(), true);
    let hooks = project.read(".codex/hooks.json");
    assert!(!hooks.contains("stop-gate wait"), "{hooks}");
    // A loop a human started and cancelled in another session.
    let flags = "--name parser --max-iterations 5 --completion-promise DONE";
    start_loop_for(project.path(), "elsewhere", flags, "Fix the parser");
    ok(vigil(
        "stop-gate",
        project.path(),
        &["loop", "cancel", "--session", "elsewhere"],
    ));
    let told = [
        "loop parser in .: running -> cancelled by a human at pass 1",
        "loop parser",
    ];
    codex_hears_once(&clients, &home, &project, &server, told);
}
