//! End to end against the real clients (issue 7): Claude Code and Codex run whole sessions with
//! vigil installed, against a scripted model server on loopback.

mod clients;
mod server;

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;

use clients::*;
use server::{Server, Turn};

const SESSION: &str = "6f1c2d3e-4a5b-4c6d-8e7f-0123456789ab";
const DEADLINE: Duration = Duration::from_secs(90);

/// A fresh git project with one commit.
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| {
        assert!(
            Command::new("git")
                .args(args)
                .current_dir(dir.path())
                .env("GIT_AUTHOR_NAME", "t")
                .env("GIT_AUTHOR_EMAIL", "t@example.com")
                .env("GIT_COMMITTER_NAME", "t")
                .env("GIT_COMMITTER_EMAIL", "t@example.com")
                .output()
                .unwrap()
                .status
                .success()
        )
    };
    git(&["init", "-q"]);
    std::fs::write(dir.path().join("README.md"), "a project\n").unwrap();
    git(&["add", "-A"]);
    git(&["commit", "-qm", "start"]);
    dir
}

fn vigil(binary: &str, project: &Path, args: &[&str]) -> Output {
    Command::new(bin_dir().join(binary))
        .args(args)
        .current_dir(project)
        .env_remove("CLAUDE_PROJECT_DIR")
        .env_remove("VIGIL_DISABLE")
        .output()
        .unwrap()
}

fn install_claude(project: &Path, extra: &[&str]) {
    let settings = project.join(".claude/settings.local.json");
    let mut args = vec!["install", "--settings", settings.to_str().unwrap()];
    let bin = bin_dir();
    args.extend(["--bin-dir", bin.to_str().unwrap()]);
    args.extend(extra);
    let out = vigil("settings-merge", project, &args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
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

#[test]
fn claude_ralph_loop_ends_on_the_declaration_not_the_mention() {
    let Some(clients) = clients() else { return };
    let project = project();
    let home = home();
    install_claude(project.path(), &[]);
    let out = vigil(
        "stop-gate",
        project.path(),
        &[
            "loop",
            "start",
            "--session",
            SESSION,
            "--max-iterations",
            "5",
            "--completion-promise",
            "DONE",
            "Make the build green.",
        ],
    );
    assert!(out.status.success(), "{}", said(&out));
    let server = Server::start(
        vec![
            Turn::Text(
                "When it is done I will write <promise>DONE</promise> on its own line.".into(),
            ),
            Turn::Text("Still working on the build.".into()),
            Turn::Text("The build is green.\n<promise>DONE</promise>".into()),
        ],
        None,
    );
    let out = run(
        claude(
            &clients,
            home.path(),
            project.path(),
            &server.url,
            &["-p", "Make the build green.", "--session-id", SESSION],
        ),
        DEADLINE,
    );
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(server.main_requests().len(), 3, "{}", said(&out));
    let status = loop_status(project.path(), SESSION);
    assert_eq!(status["status"], "passed", "{status}");
    for r in server.main_requests() {
        eprintln!(
            "REQ {}",
            r.body["messages"].as_array().unwrap().last().unwrap()
        );
    }
}
