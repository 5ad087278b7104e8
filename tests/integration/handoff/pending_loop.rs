//! SPEC §4 `--next-session` and §7: the first SessionStart from `startup` claims the pending
//! loop, exactly once, and tells the session its promise; a lapsed one is never claimed.

use serde_json::json;

use crate::support::*;

use super::context;

#[test]
fn startup_claims_a_pending_loop_exactly_once() {
    let dir = Project::new();
    let pending = dir
        .loop_for_next_session()
        .max_iterations(4)
        .prompt("Run the migration")
        .start();
    let said = String::from_utf8_lossy(&pending.stdout).into_owned()
        + &String::from_utf8_lossy(&pending.stderr);
    let top = std::fs::canonicalize(dir.path()).unwrap();
    // The human is told which sessions may claim it.
    assert_contains!(said, &format!("in this project ({})", top.display()));
    let told = context(&session_start(dir.path(), "s-1", "startup"));
    assert_contains!(told, "claimed a loop");
    assert_contains!(told, "Run the migration");
    let state = session_record_of(dir.path(), "s-1")["loop"].clone();
    assert_eq!(state["session_id"], "s-1");
    let protected = protected_dir(dir.path());
    assert!(!protected.join("loops/pending.json").exists());
    let second = session_start(dir.path(), "s-2", "startup");
    assert!(second.stdout.is_empty() || !context(&second).contains("claimed a loop"));
    assert!(!protected.join("sessions/s-2.rec").exists());
    // The claimed loop drives the Stop hook of its new session.
    let stop = stop_gate()
        .current_dir(dir.path())
        .write_stdin(json!({"session_id": "s-1", "hook_event_name": "Stop", "cwd": dir.path(), "last_assistant_message": "working"}).to_string())
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&stop.stdout).contains("Run the migration"));
}

#[test]
fn a_lapsed_pending_loop_is_never_claimed() {
    let dir = Project::new();
    dir.loop_for_next_session()
        .flags(&["--claim-within", "1s"])
        .max_iterations(4)
        .prompt("Old task")
        .start();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let out = session_start(dir.path(), "s-1", "startup");
    assert!(out.stdout.is_empty() || !context(&out).contains("claimed"));
    assert!(!protected_dir(dir.path()).join("sessions/s-1.rec").exists());
}

#[test]
fn a_claimed_loop_names_its_promise_as_the_agent_must_write_it() {
    let dir = Project::new();
    let task = format!("Step one first. {}", "then more. ".repeat(400));
    dir.loop_for_next_session()
        .max_iterations(4)
        .promise("ALL DONE")
        .prompt(&task)
        .start();
    let told = context(&session_start(dir.path(), "s-1", "startup"));
    assert_contains!(told, "last line is <promise>ALL DONE</promise>");
    assert_contains!(told, "Step one first.", "the head of the task is kept");
}

#[test]
fn a_failed_claim_leaves_the_pending_loop_for_the_next_session() {
    let dir = Project::new();
    dir.loop_for_next_session().max_iterations(4).start();
    // A file where the session records go: the claim cannot be written.
    let protected = protected_dir(dir.path());
    std::fs::write(protected.join("sessions"), "in the way").unwrap();
    let out = session_start(dir.path(), "s-1", "startup");
    assert_eq!(out.status.code(), Some(0));
    assert!(
        protected.join("loops/pending.json").is_file(),
        "the pending loop was stranded"
    );
    std::fs::remove_file(protected.join("sessions")).unwrap();
    assert!(context(&session_start(dir.path(), "s-2", "startup")).contains("claimed a loop"));
}

#[test]
fn sixteen_loaders_at_once_leave_exactly_one_owner() {
    let dir = Project::new();
    dir.loop_for_next_session().max_iterations(4).start();
    let children: Vec<_> = (0..16)
        .map(|i| {
            let payload =
                json!({"session_id": format!("s-{i}"), "cwd": dir.path(), "source": "startup"});
            spawn_fed(
                vigil_process("session-start-loader")
                    .current_dir(dir.path())
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null()),
                payload.to_string().as_bytes(),
            )
        })
        .collect();
    for mut child in children {
        child.wait().unwrap();
    }
    let owners = tree(&protected_dir(dir.path()).join("sessions"))
        .into_iter()
        .filter(|f| f.ends_with(".rec"))
        .count();
    assert_eq!(owners, 1);
}
