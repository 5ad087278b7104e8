//! SPEC §8, the plugin in the real Claude Code: `claude --plugin-dir` loads vigil's hooks and
//! its loop command, and the plugin's hooks end the loop on the declaration.

use std::path::Path;
use std::process::Output;

use super::{DEADLINE, DECLARATION, MENTION, SESSION, loop_status, project, vigil};
use crate::clients::*;
use crate::server::{Server, Turn};
use crate::support::*;

/// A clone of the plugin where ./install.sh has built the binaries (its target/release): its
/// first session links them into the plugin's data directory, and the hooks exec them.
fn plugin_clone() -> tempfile::TempDir {
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
    for binary in BINARIES {
        std::os::unix::fs::symlink(bin_dir().join(binary), release.join(binary)).unwrap();
    }
    clone
}

/// `claude -p PROMPT` in `project` with the plugin loaded from `clone`, against `server`.
fn with_plugin(
    clients: &Clients,
    project: &Path,
    server: &Server,
    clone: &Path,
    prompt: &str,
) -> Output {
    let home = home();
    let cmd = claude(
        clients,
        home.path(),
        project,
        &server.url,
        &[
            "-p",
            prompt,
            "--session-id",
            SESSION,
            "--permission-mode",
            "acceptEdits",
            "--plugin-dir",
            clone.to_str().unwrap(),
        ],
    );
    run(cmd, DEADLINE)
}

/// The human's `/vigil:vigil-loop` of 4 passes to make the build green, in `claude -p` with
/// the plugin loaded from a fresh clone, which must succeed.
fn loop_with_plugin(clients: &Clients, project: &Project, server: &Server) -> Output {
    let clone = plugin_clone();
    ok(with_plugin(
        clients,
        project.path(),
        server,
        clone.path(),
        "/vigil:vigil-loop Make the build green. --max-iterations 4 --completion-promise DONE",
    ))
}

#[test]
fn claude_plugin_dir_loads_vigils_hooks_and_its_loop_command() {
    let Some(clients) = clients() else { return };
    let project = project();
    let server = Server::texts(&[MENTION, DECLARATION]);
    let out = loop_with_plugin(&clients, &project, &server);
    assert_eq!(
        loop_status(project.path(), SESSION)["status"],
        "passed",
        "{}",
        said(&out)
    );
    assert_eq!(server.main_requests().len(), 2);
    // The human's command ran, and the model was never offered it (disable-model-invocation:
    // a model that "ran" it would claim a loop that no one started).
    assert_model_is_not_offered_vigils_commands(&server);
}

/// Issue 31: the plugin with a check set for the project (`stop-gate config set`): the real
/// Claude Code's Stop is blocked while the check fails, even on a declaration, and the loop
/// passes once the model has made it pass.
#[test]
fn claude_plugin_blocks_a_declaration_while_the_projects_check_fails() {
    let Some(clients) = clients() else { return };
    let project = project();
    ok(vigil(
        "stop-gate",
        project.path(),
        &["config", "set", "--run", "test -f fixed.txt"],
    ));
    let server = Server::start(
        vec![
            Turn::Text(DECLARATION.into()),
            Turn::Tool(
                "Write",
                serde_json::json!({
                    "file_path": project.path().join("fixed.txt"),
                    "content": "fixed\n",
                }),
            ),
            Turn::Text(DECLARATION.into()),
        ],
        None,
    );
    let out = loop_with_plugin(&clients, &project, &server);
    let requests = server.main_requests();
    assert_eq!(requests.len(), 3, "{}", said(&out));
    // The first declaration was blocked by the check.
    assert_contains!(requests[1].text(), "`test -f fixed.txt` failed");
    assert_eq!(
        loop_status(project.path(), SESSION)["status"],
        "passed",
        "{}",
        said(&out)
    );
}

/// The skill list the client gives the model names none of vigil's commands: only the human
/// types them. Their descriptions appear nowhere else in a request.
pub fn assert_model_is_not_offered_vigils_commands(server: &Server) {
    for request in server.main_requests() {
        let text = request.text();
        for description in [
            "Start a vigil loop: the same task again",
            "Cancel the vigil loop of this session",
        ] {
            assert_lacks!(
                text,
                description,
                "the model was offered vigil's command ({description}): {}",
                &text[..text.len().min(2000)]
            );
        }
    }
}
