//! The README's quick start, literally: its lines read from README.md and run in bash one by
//! one, for Claude Code and for Codex.

use std::path::Path;
use std::process::{Command, Output};

use super::{
    DEADLINE, DECLARATION, MENTION, codex_exec_with, codex_home, loop_run, only_loop, project,
    run_line, vigil,
};
use crate::clients::*;
use crate::server::{Server, Turn};
use crate::support::*;

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

/// What the reader's check, `cargo test`, stands for here (the throwaway project has no crate):
/// it passes once the model has written the fix, a file, and only then.
const CHECK: &str = "test -f fixed.txt";

/// One quick-start line, run as the README's reader runs it: in bash, in the project, with
/// the vigil clone at `$VIGIL` (the one under test, its binaries already built:
/// `VIGIL_BUILT_DIR`) and a `HOME` of the test's own, `cargo test` standing for [`CHECK`].
fn reader_runs(line: &str, project: &Path) -> Output {
    let home = state_home_of(project)
        .ancestors()
        .nth(3)
        .unwrap()
        .to_path_buf();
    std::fs::create_dir_all(&home).unwrap();
    let line = line.replace("cargo test", CHECK);
    run(
        {
            let mut cmd = Command::new("bash");
            isolated(&mut cmd)
                .args(["-c", &format!("set -e; {line}")])
                .current_dir(project)
                .env("HOME", &home)
                .env("VIGIL", env!("CARGO_MANIFEST_DIR"))
                .env("VIGIL_BUILT_DIR", bin_dir())
                .env("VIGIL_STATE_HOME", state_home_of(project))
                .env("CODEX_HOME", home.join("codex-home"));
            cmd
        },
        DEADLINE,
    )
}

/// The scripted model of the quick start: it writes the fix with the Write tool, mentions the
/// phrase, then declares.
fn fixing_model(project: &Path) -> Server {
    Server::start(
        vec![
            Turn::Tool(
                "Write",
                serde_json::json!({
                    "file_path": project.join("fixed.txt"),
                    "content": "fixed\n",
                }),
            ),
            Turn::Text(MENTION.into()),
            Turn::Text(DECLARATION.into()),
        ],
        None,
    )
}

/// The README's `loop run` line, split: the run's flags, and the client's arguments.
fn loop_line(line: &str) -> (Vec<String>, Vec<String>) {
    let words = shlex::split(line).unwrap();
    assert_eq!(&words[1..3], ["loop", "run"], "{line}");
    let split = words.iter().position(|w| w == "--").unwrap();
    assert_eq!(words[split + 1], "claude", "{line}");
    (words[3..split].to_vec(), words[split + 2..].to_vec())
}

/// The Claude Code quick start, command by command from the README: install with a check, the
/// doctor, a loop for the next session, the session (run by the real Claude Code, as written,
/// against a scripted model that edits a file, mentions the phrase and then declares), a
/// required marker and the writer that makes it, and the undo.
#[test]
fn claude_readme_quick_start_works_as_written() {
    let Some(clients) = clients() else { return };
    let project = project();
    // The reader's tests, which the quick start holds.
    project.write("tests/check.sh", "test -f fixed.txt\n");
    git(project.path(), &["add", "tests"]);
    git(project.path(), &["commit", "-qm", "tests"]);
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
            // `~/.local/bin/stop-gate loop run FLAGS -- claude ARGS`: the run's flags and the
            // client's arguments as written (its permission mode too), the real Claude Code
            // as the command, against the scripted model.
            let (flags, args) = loop_line(line);
            let server = fixing_model(project.path());
            let home = home();
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let client = claude(&clients, home.path(), project.path(), &server.url, &args);
            let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
            let out = ok(run(loop_run(&client, &flags), DEADLINE));
            assert_contains!(run_line(&out), "loop passed on pass 2/10", "{}", said(&out));
            assert!(
                project.path().join("fixed.txt").is_file(),
                "the model's edit was made"
            );
            assert_eq!(
                server.main_requests().len(),
                3,
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
        if line.contains("install.sh --check") {
            let text = String::from_utf8_lossy(&out.stdout);
            assert_contains!(text, "the human holds 1 files under tests", "{line}");
        }
        if line.contains(" hold add ") {
            assert_contains!(
                stdout_of(&out),
                "held 1 files under tests",
                "{line}: {}",
                said(&out)
            );
        }
        if line.contains("marker-writer run") {
            ok(vigil(
                "marker-writer",
                project.path(),
                &["verify", "--check", "tests"],
            ));
        }
    }
    // Undone: nothing of vigil's left in the project that git shows.
    assert!(!project.path().join(".claude/settings.local.json").exists());
    let status = Command::new("git")
        .args(["status", "--porcelain"])
        .current_dir(project.path())
        .output()
        .unwrap();
    let status = String::from_utf8_lossy(&status.stdout);
    assert_eq!(
        status.lines().collect::<Vec<_>>(),
        ["?? fixed.txt"],
        "git shows the model's work and nothing of vigil's (handoffs included)"
    );
}

/// The permission mode of the README's `loop run` line is what lets the model edit a file:
/// the same line without it (as the quick start was written before issue 31) never passes,
/// because `claude -p` has no one to ask and refuses the edit, so the check never passes.
#[test]
fn claude_quick_start_needs_its_permission_mode_to_edit_a_file() {
    let Some(clients) = clients() else { return };
    let project = project();
    let line = quickstart("claude")
        .into_iter()
        .find(|l| l.contains(" loop run "))
        .unwrap();
    let (flags, args) = loop_line(&line);
    assert!(
        args.windows(2)
            .any(|w| w[0] == "--permission-mode" && w[1] == "acceptEdits"),
        "the README's line gives the mode: {line}"
    );
    ok(reader_runs(
        "\"$VIGIL\"/install.sh --run 'cargo test'",
        project.path(),
    ));
    let mut bare: Vec<&str> = Vec::new();
    let mut words = args.iter().map(String::as_str);
    while let Some(word) = words.next() {
        if word == "--permission-mode" {
            words.next();
        } else {
            bare.push(word);
        }
    }
    let server = fixing_model(project.path());
    let home = home();
    let client = claude(&clients, home.path(), project.path(), &server.url, &bare);
    let mut flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let at = flags.iter().position(|f| *f == "--max-iterations").unwrap();
    flags[at + 1] = "3";
    let out = run(loop_run(&client, &flags), DEADLINE);
    assert_exit(&out, 1);
    assert!(
        !project.path().join("fixed.txt").exists(),
        "the edit was refused"
    );
    assert!(run_line(&out).contains("NOT verified"), "{}", said(&out));
}

/// The Codex quick start, as written: install with trust, a loop from the prompt of `codex
/// exec`, the undo.
#[test]
fn codex_readme_quick_start_works_as_written() {
    let Some(clients) = clients() else { return };
    let project = project();
    // The fix made with a command (Codex's exec_command), then the mention and the declaration.
    let server = Server::start(
        vec![
            Turn::Bash(format!(
                "printf 'fixed\\n' > {}",
                project.path().join("fixed.txt").display()
            )),
            Turn::Text(MENTION.into()),
            Turn::Text(DECLARATION.into()),
        ],
        None,
    );
    // Codex's own configuration (the scripted provider), in the HOME the reader's lines use.
    let home = state_home_of(project.path())
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
            let out = ok(codex_exec_with(&clients, &home, project.path(), &args));
            assert!(project.path().join("fixed.txt").is_file(), "{}", said(&out));
            assert_eq!(server.main_requests().len(), 3, "{}", said(&out));
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
