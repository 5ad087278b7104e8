//! SPEC §9, where the protected state is: the state home, else the fallback in the project
//! (told as NOT protected); where a Stop looks for a session's record when the git top moves;
//! and one sync per Stop (P6).

use std::path::Path;

use serde_json::{Value, json};

use crate::support::*;

use super::{DECLARED, project, start, still_looping, stop};

/// A Stop with a running loop that declares nothing makes exactly one fdatasync and renames
/// nothing (counted with strace).
#[test]
fn a_stop_with_a_loop_syncs_once() {
    let dir = project();
    start(dir.path(), "s1", 100);
    still_looping(dir.path(), "s1");
    let payload = json!({"session_id": "s1", "hook_event_name": "Stop", "cwd": dir.path(),
        "transcript_path": null, "last_assistant_message": "Not yet."});
    let Some((out, calls)) = traced(
        "stop-gate",
        dir.path(),
        &payload,
        "fsync,fdatasync,sync_file_range,rename,renameat,renameat2",
    ) else {
        return;
    };
    let decision: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(decision["decision"], "block");
    assert_eq!(calls.count("fdatasync"), 1, "{}", calls.text);
    assert_eq!(calls.count("fsync"), 0, "{}", calls.text);
    assert!(!calls.text.contains("rename"), "{}", calls.text);
    assert_eq!(loop_of(dir.path(), "s1")["iteration"], 3);
}

/// `loop start` of a loop for s1 in `dir`, with the state home at `home`, which must succeed.
fn start_with_state_home(dir: &Path, home: &Path) {
    ok(stop_gate()
        .env("VIGIL_STATE_HOME", home)
        .args(["loop", "start", "--session", "s1", "--max-iterations", "3"])
        .args(["--completion-promise", "DONE", "--", "The real task."])
        .current_dir(dir)
        .output()
        .unwrap());
}

/// What SessionStart of s1 (`startup`) tells the session in `dir`, the state home at `home`,
/// with the variables `env` set too.
fn told_at_start(dir: &Path, home: &Path, env: &[(&str, &Path)]) -> String {
    let mut start = session_start_command(dir, "s1", "startup");
    start.env("VIGIL_STATE_HOME", home);
    for (name, value) in env {
        start.env(name, value);
    }
    stdout_of(&start.output().unwrap())
}

/// A state home that cannot be made (a regular file is in the way, which holds for root too).
fn unwritable_state_home() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("file"), "").unwrap();
    let home = dir.path().join("file/state");
    (dir, home)
}

/// Issue 29, told, never silent: a state home set inside the project is the agent's to
/// change, as the fallback is; every session's context says so.
#[test]
fn a_state_home_inside_the_project_is_told_as_not_protected() {
    let dir = project();
    let home = dir.path().join("build/state");
    start_with_state_home(dir.path(), &home);
    let context = told_at_start(dir.path(), &home, &[]);
    assert_contains!(context, "NOT protected", "the session is told");
    assert_contains!(context, "inside the project", "the session is told");
}

/// Review: where Claude Code's sandbox lets the agent's commands write besides the project
/// (`$TMPDIR`), a state home is no better than one inside the project.
#[test]
fn a_state_home_in_the_sandboxs_temporary_directory_is_told_as_not_protected() {
    let dir = project();
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("state");
    let context = told_at_start(dir.path(), &home, &[("TMPDIR", tmp.path())]);
    assert_contains!(context, "NOT protected", "the session is told");
}

#[test]
fn an_unwritable_state_home_falls_back_into_the_project_and_says_so() {
    let dir = project();
    let (_keep, home) = unwritable_state_home();
    start_with_state_home(dir.path(), &home);
    let record = dir.path().join(".vigil/state/sessions/s1.rec");
    assert!(
        matches!(
            vigil::sys::record::read(&record),
            vigil::sys::record::Read::Found { .. }
        ),
        "the loop is kept in the fallback"
    );
    let context = told_at_start(dir.path(), &home, &[]);
    assert_contains!(context, "NOT protected", "the session is told");
    assert_contains!(context, ".vigil/state", "the session is told");
    let settings = dir.path().join(".claude/settings.local.json");
    let installed = settings_merge()
        .env("VIGIL_STATE_HOME", &home)
        .args(["install", "--settings"])
        .arg(&settings)
        .arg("--bin-dir")
        .arg(bin_dir())
        .output()
        .unwrap();
    assert!(installed.status.success());
    let check = settings_merge()
        .env("VIGIL_STATE_HOME", &home)
        .args(["check", "--settings"])
        .arg(&settings)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&check.stdout);
    assert_eq!(check.status.code(), Some(1), "{said}");
    assert!(
        said.lines()
            .any(|l| l.starts_with("[fail] the state home") && l.contains("cannot be written")),
        "{said}"
    );
}

#[test]
fn old_loops_in_the_project_are_not_taken_over_and_the_human_is_told_once() {
    let dir = project();
    std::fs::create_dir_all(dir.path().join(".vigil/loops")).unwrap();
    let old = json!({"schema": "vigil.loop/v1", "session_id": "s1", "prompt": "old",
        "completion_promise": "DONE", "max_iterations": 5, "iteration": 1, "status": "running",
        "started_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z"});
    dir.write(".vigil/loops/s1.json", old.to_string());
    let start = || {
        let out = session_start(dir.path(), "s1", "startup");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let first = start();
    assert!(first.contains("were not taken over"), "{first}");
    let second = start();
    assert!(!second.contains("were not taken over"), "once: {second}");
    assert_eq!(
        stop(dir.path(), "s1", "Not yet."),
        Value::Null,
        "the old loop is not run"
    );
}

/// The session's loop, wherever in the state home it is kept.
fn loop_anywhere(session: &str) -> Value {
    let projects = state_home().join("projects");
    for entry in std::fs::read_dir(projects).unwrap().flatten() {
        let path = entry.path().join(format!("sessions/{session}.rec"));
        if let vigil::sys::record::Read::Found { payload, .. } = vigil::sys::record::read(&path) {
            let record: Value = serde_json::from_slice(&payload).unwrap();
            return record["loop"].clone();
        }
    }
    Value::Null
}

/// A loop begun below a `.git` planted in a subdirectory (or in a nested repository) is kept
/// under that directory's name; a Stop whose project is the top must still find it.
#[test]
fn a_loop_kept_under_a_nested_git_is_found_by_a_stop_at_the_top() {
    let dir = project();
    let sub = dir.path().join("app");
    std::fs::create_dir_all(sub.join(".git")).unwrap();
    std::fs::write(sub.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    let session = "nested-s1";
    // The directory is there already, without a top file (an older `marker-writer trust`).
    let sub_dir =
        vigil::state::protected::dir_in(state_home(), &std::fs::canonicalize(&sub).unwrap());
    std::fs::create_dir_all(sub_dir.join("trusted-keys")).unwrap();
    start(&sub, session, 10);
    let decision = stop(dir.path(), session, "Not yet.");
    assert_eq!(decision["decision"], "block", "the loop ended: {decision}");
    assert_eq!(loop_anywhere(session)["iteration"], 2);
    let decision = stop(dir.path(), session, DECLARED);
    assert_ne!(decision["decision"], "block", "{decision}");
    assert_eq!(loop_anywhere(session)["status"], "passed");
}

/// A repository `proj` inside another repository, with a loop running in `session`; the
/// state home then refuses a directory for the outer top (a full disk; here a file in the way).
fn nested_project_with_a_full_state_home(session: &str) -> (Project, std::path::PathBuf) {
    let outer = Project::git();
    let proj = outer.path().join("proj");
    std::fs::create_dir_all(&proj).unwrap();
    git(&proj, &["init", "-q", "-b", "main"]);
    start(&proj, session, 10);
    let decision = stop(&proj, session, "Not yet.");
    assert_eq!(decision["decision"], "block");
    let outer_top = std::fs::canonicalize(outer.path()).unwrap();
    let blocked = vigil::state::protected::dir_in(state_home(), &outer_top);
    std::fs::create_dir_all(blocked.parent().unwrap()).unwrap();
    std::fs::write(&blocked, "").unwrap();
    (outer, proj)
}

/// The agent moves where the search for `.git` ends (it deletes the project's own `.git`, so
/// the parent repository is the top) while the state home cannot take a new directory (a full
/// disk; here a file in the way). The Stop must neither fall back into the project and miss the
/// loop, nor end it.
#[test]
fn a_moved_git_top_with_a_state_home_that_takes_nothing_new_does_not_lose_the_loop() {
    let session = "moved-s1";
    let (_outer, proj) = nested_project_with_a_full_state_home(session);
    // Without its top file too (as directories an older `marker-writer trust` made are): the
    // fallback still looks under the project's own name and each one above it.
    let own = vigil::state::protected::dir_in(state_home(), &std::fs::canonicalize(&proj).unwrap());
    std::fs::remove_file(own.join("top")).unwrap();
    std::fs::remove_dir_all(proj.join(".git")).unwrap();
    let decision = stop(&proj, session, "Not yet.");
    assert_eq!(decision["decision"], "block", "the loop ended: {decision}");
    assert_eq!(loop_anywhere(session)["iteration"], 3);
    assert!(!proj.join(".vigil/state").exists(), "nothing fell back");
    let decision = stop(&proj, session, DECLARED);
    assert_ne!(decision["decision"], "block", "{decision}");
    assert_eq!(loop_anywhere(session)["status"], "passed");
}

/// A record the agent plants in the in-project fallback never hides the one in the state home.
#[test]
fn a_record_planted_in_the_fallback_does_not_hide_the_state_homes() {
    let session = "planted-fallback-s1";
    let (_outer, proj) = nested_project_with_a_full_state_home(session);
    std::fs::remove_dir_all(proj.join(".git")).unwrap();
    // The agent writes a record that says nothing runs where the fallback would be.
    let fake = json!({"schema": "vigil.session/v2", "session_id": session,
        "budget": {"consecutive_blocks": 0, "budget_spent": 0},
        "subagent_budget": {"consecutive_blocks": 0, "budget_spent": 0},
        "updated_at": "2026-01-01T00:00:00Z"});
    let path = proj.join(format!(".vigil/state/sessions/{session}.rec"));
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    vigil::sys::record::write(&path, 1, fake.to_string().as_bytes()).unwrap();
    let decision = stop(&proj, session, "Not yet.");
    assert_eq!(decision["decision"], "block", "the loop ended: {decision}");
}

/// Looking for a session's record across the state home never takes another project's: the
/// same session name in an unrelated project is that project's loop, not this one's.
#[test]
fn the_same_session_name_in_an_unrelated_project_is_not_this_ones_loop() {
    let one = project();
    let other = project();
    start(one.path(), "shared-name", 10);
    assert_eq!(stop(other.path(), "shared-name", "Not yet."), Value::Null);
    still_looping(one.path(), "shared-name");
}
