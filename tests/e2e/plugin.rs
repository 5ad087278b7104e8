//! SPEC §8, the plugin in the real Claude Code: `claude --plugin-dir` loads vigil's hooks and
//! its loop command, and the plugin's hooks end the loop on the declaration.

use std::path::Path;

use super::{DEADLINE, DECLARATION, MENTION, SESSION, loop_status, project};
use crate::clients::*;
use crate::server::{Server, Turn};
use crate::support::*;

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
    for binary in BINARIES {
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
    // The human's command ran, and the model was never offered it (disable-model-invocation:
    // a model that "ran" it would claim a loop that no one started).
    assert_model_is_not_offered_vigils_commands(&server);
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
            assert!(
                !text.contains(description),
                "the model was offered vigil's command ({description}): {}",
                &text[..text.len().min(2000)]
            );
        }
    }
}
