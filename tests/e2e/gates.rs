//! SPEC §4 checks 2 and 3 with the real Claude Code: the check gate keeps the session going
//! until the model's fix passes it, at the git top level whatever directory Claude Code started
//! in; a required marker blocks until the protected writer vouches for this worktree.

use super::{DEADLINE, SESSION, claude_p, install_claude, project, vigil};
use crate::clients::*;
use crate::server::{Server, Turn};
use crate::support::*;

/// CI's run of the check `tests` (`true`) through marker-writer, in the project at `dir`.
fn ci_vouches(dir: &std::path::Path) {
    ok(vigil(
        "marker-writer",
        dir,
        &["run", "--check", "tests", "--", "true"],
    ));
}

/// Issue 29, item 4: Claude Code started in a subdirectory loads the project's settings but
/// sets CLAUDE_PROJECT_DIR to the subdirectory; the check still runs at the git top level,
/// where the failing test is, and blocks.
#[test]
fn claude_started_in_a_subdirectory_runs_the_check_at_the_git_top_level() {
    let Some(clients) = clients() else { return };
    let project = project();
    project.write("FAILING", "a failing test\n");
    let sub = project.path().join("app");
    std::fs::create_dir_all(&sub).unwrap();
    install_claude(project.path(), Some("test ! -e FAILING"), "");
    let server = Server::always("All done.");
    let home = home();
    let args = [
        "-p",
        "Make every test pass.",
        "--session-id",
        SESSION,
        "--dangerously-skip-permissions",
    ];
    let mut client = claude(&clients, home.path(), project.path(), &server.url, &args);
    client.current_dir(&sub);
    let out = ok(run(client, DEADLINE));
    let requests = server.main_requests();
    assert!(requests.len() > 1, "the stop was blocked: {}", said(&out));
    assert_contains!(
        requests[1].text(),
        "stop-gate: `test ! -e FAILING` failed (exit 1)"
    );
}

#[test]
fn claude_check_gate_keeps_the_session_going_until_the_models_fix_makes_it_pass() {
    let Some(clients) = clients() else { return };
    let project = project();
    // The check's useful line is in its output only, never in its command.
    project.write(
        "check.sh",
        "test -f fixed && exit 0\necho 'FAIL: parser case 3 of 7'\nexit 1\n",
    );
    install_claude(project.path(), Some("sh check.sh"), "");
    let server = Server::start(
        vec![
            Turn::Text("Done, I think.".into()),
            Turn::Text("Really done now.".into()),
            Turn::Bash("echo ok > fixed".into()),
            Turn::Text("Fixed it.".into()),
        ],
        None,
    );
    claude_p(&clients, project.path(), &server, "Fix the parser.");
    let main = server.main_requests();
    assert_eq!(
        main.len(),
        4,
        "blocked at each stop while the check fails, then the fix, then a pass"
    );
    for request in &main[1..3] {
        // The check's output reached the model.
        assert_contains!(request.text(), "FAIL: parser case 3 of 7");
    }
    assert!(project.path().join("fixed").is_file());
}

#[test]
fn claude_required_marker_blocks_until_the_protected_writer_vouches_for_this_worktree() {
    let Some(clients) = clients() else { return };
    let project = project();
    install_claude(project.path(), None, "--require-marker tests");
    let server = Server::texts(&[
        "Tests pass.",
        "Tests pass, I said.",
        "Tests pass, and now it is vouched for.",
    ]);
    let dir = project.path().to_path_buf();
    // Before turn 1, CI vouches for content that then changes: a marker for other content.
    server.before_turn(1, move || {
        ci_vouches(&dir);
        std::fs::write(dir.join("README.md"), "changed after the run\n").unwrap();
    });
    let dir = project.path().to_path_buf();
    // Before turn 2, CI vouches for the worktree as it is.
    server.before_turn(2, move || ci_vouches(&dir));
    claude_p(&clients, project.path(), &server, "Make it work.");
    let main = server.main_requests();
    assert_eq!(
        main.len(),
        3,
        "missing, then for other content, then allowed"
    );
    assert_contains!(main[1].text(), "marker `tests` missing");
    assert_contains!(main[2].text(), "marker `tests` subject mismatch");
}
