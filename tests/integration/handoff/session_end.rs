//! SPEC §6, session-end-handoff: the record it writes (`final.json`, or with `--checkpoint`
//! `checkpoint.json`, which never replaces a final one), at most 16 KiB and within its budget,
//! defanged, failing open; and the records it replaces, freed after it exits.

use std::path::Path;

use serde_json::{Value, json};

use crate::support::*;

use super::{context, crowded, end_payload, hand_off, transcript};

#[test]
fn a_checkpoint_after_a_final_record_does_not_replace_it() {
    let dir = tempfile::tempdir().unwrap();
    hand_off(dir.path(), &[], "s-1", "SessionEnd", None);
    let final_before = std::fs::read(dir.path().join(".vigil/handoff/final.json")).unwrap();
    hand_off(dir.path(), &["--checkpoint"], "s-2", "Stop", None);
    assert_eq!(
        std::fs::read(dir.path().join(".vigil/handoff/final.json")).unwrap(),
        final_before
    );
    assert_eq!(
        handoff_record(dir.path(), "checkpoint.json")["kind"],
        "intermediate"
    );
}

#[test]
fn live_tokens_and_promise_tags_come_out_defanged_in_record_and_context() {
    let dir = tempfile::tempdir().unwrap();
    hand_off(dir.path(), &["--checkpoint"], "s-1", "Stop", None);
    let raw = std::fs::read_to_string(dir.path().join(".vigil/handoff/checkpoint.json")).unwrap();
    assert_lacks!(raw, "<<<VIGIL_");
    assert_lacks!(raw, "<promise>");
    assert_contains!(raw, "<<<VIG-IL_");
    assert_contains!(raw, "<pro-mise>");
    let told = context(&session_start(dir.path(), "s-2", "startup"));
    assert_lacks!(told, "<<<VIGIL_");
    assert_lacks!(told, "<promise>");
    // A loop reading the next session's output cannot be ended by what was handed on.
    let scan = promise_matcher_on(
        &["scan", "--token", "9f3c2a7e5b1d4c6a8e0f2b4d6c8a0e1f"],
        told.clone(),
    );
    assert_eq!(scan.status.code(), Some(1));
    let judged = promise_matcher().write_stdin(told).output().unwrap();
    assert_eq!(stdout_of(&judged), "absent\n");
}

#[test]
fn an_unwritable_state_directory_fails_open_with_one_line_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("blocker"), "not a directory").unwrap();
    let out = session_end_handoff()
        .args([
            "--state-dir",
            dir.path().join("blocker/state").to_str().unwrap(),
        ])
        .write_stdin(end_payload(dir.path(), "s-1", "SessionEnd", None))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_one_line_error(&out, "session-end-handoff");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("blocker")).unwrap(),
        "not a directory"
    );
    // The next SessionStart still works.
    assert_eq!(
        session_start(dir.path(), "s-2", "startup").status.code(),
        Some(0)
    );
}

#[test]
fn a_transcript_that_does_not_exist_still_leaves_a_record() {
    let dir = tempfile::tempdir().unwrap();
    ok(session_end(
        dir.path(),
        &[],
        end_payload(
            dir.path(),
            "s-1",
            "SessionEnd",
            Some(Path::new("/nonexistent/t.jsonl")),
        ),
    ));
    assert_eq!(
        handoff_record(dir.path(), "final.json")["last_message"],
        Value::Null
    );
}

#[test]
fn vigil_disable_makes_both_do_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = session_end_handoff()
        .env("VIGIL_DISABLE", "1")
        .current_dir(dir.path())
        .write_stdin(end_payload(dir.path(), "s-1", "SessionEnd", None))
        .output()
        .unwrap();
    assert!(out.status.success() && out.stdout.is_empty() && out.stderr.is_empty());
    assert!(!dir.path().join(".vigil").exists());
}

#[test]
fn records_stay_under_16_kib_and_the_context_under_10000_characters() {
    let repo = crowded(
        300,
        |i| format!("changed-file-with-a-long-name-number-{i:04}.txt"),
        "x",
        "progress line\n".repeat(5000),
    );
    let dir = repo.path();
    let long_message = "é word ".repeat(2000);
    let t = transcript(dir, &long_message);
    let record = final_record_within_16_kib(dir, &t);
    assert!(record["last_message"].as_str().unwrap().chars().count() <= 2000);
    context(&session_start(dir, "s-2", "startup"));
}

#[test]
fn checkpoint_as_a_stop_hook_prints_nothing_on_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let out = session_end(
        dir.path(),
        &["--checkpoint"],
        end_payload(dir.path(), "s-1", "Stop", None),
    );
    assert!(
        out.status.success() && out.stdout.is_empty(),
        "Codex rejects plain text on a Stop hook's stdout"
    );
}

#[test]
fn a_slow_git_costs_the_handoff_its_detail_not_its_budget() {
    let repo = Project::git();
    ok(marker_writer_in(
        repo.path(),
        &["run", "--check", "tests", "--", "true"],
    ));
    let (_bin, slow) = slow_git("2");
    let started = std::time::Instant::now();
    let out = session_end_handoff()
        .env("VIGIL_TEST_GIT", &slow)
        .current_dir(repo.path())
        .write_stdin(end_payload(repo.path(), "s-1", "SessionEnd", None))
        .output()
        .unwrap();
    let took = started.elapsed();
    assert_exit(&out, 0);
    assert!(
        took < std::time::Duration::from_millis(1000),
        "took {took:?} with a git that sleeps 2 s"
    );
    let record = handoff_record(repo.path(), "final.json");
    assert_eq!(record["git"], Value::Null);
    let started = std::time::Instant::now();
    let out = session_start_loader()
        .env("VIGIL_TEST_GIT", &slow)
        .current_dir(repo.path())
        .write_stdin(
            json!({"session_id": "s-2", "cwd": repo.path(), "source": "startup"}).to_string(),
        )
        .output()
        .unwrap();
    assert!(started.elapsed() < std::time::Duration::from_millis(1500));
    // The worktree subject runs no git, so a slow git left the record's match known.
    assert!(context(&out).contains("matched the working tree when recorded"));
}

#[test]
fn live_tags_in_a_branch_name_or_a_path_stay_out_of_the_record() {
    let repo = Project::git();
    git(
        repo.path(),
        &["checkout", "-q", "-b", "<promise>DONE</promise>"],
    );
    std::fs::write(
        repo.path()
            .join(format!("notes-{}", "<<<VIGIL_DONE_abc>>>")),
        "",
    )
    .unwrap();
    hand_off(repo.path(), &[], "s-1", "SessionEnd", None);
    let raw = repo.read(".vigil/handoff/final.json");
    assert_lacks!(raw, "<promise>");
    assert_lacks!(raw, "<<<VIGIL_");
    handoff_record(repo.path(), "final.json");
}

#[test]
fn one_oversized_field_is_cut_not_the_whole_handoff() {
    let dir = tempfile::tempdir().unwrap();
    let payload = json!({"session_id": "s-1", "cwd": dir.path(), "hook_event_name": "SessionEnd", "reason": "r".repeat(20_000)});
    ok(session_end(dir.path(), &[], payload.to_string()));
    assert!(
        handoff_record(dir.path(), "final.json")["reason"]
            .as_str()
            .unwrap()
            .chars()
            .count()
            <= 300
    );
}

#[test]
fn a_record_stays_under_16_kib_when_every_part_is_large() {
    let repo = Project::git();
    let dir = repo.path();
    for i in 0..80 {
        write_file(&dir.join(format!("{}-{i:03}.txt", "n".repeat(180))), "x");
    }
    let t = transcript(dir, &"😀".repeat(3000));
    let record = final_record_within_16_kib(dir, &t);
    let files = record["git"]["changed_files"].as_array().unwrap().len();
    assert!(files < 50, "detail was shed to fit ({files} paths kept)");
}

#[test]
fn vigils_own_state_never_makes_a_clean_tree_dirty() {
    let repo = Project::git();
    hand_off(repo.path(), &[], "s-1", "SessionEnd", None);
    hand_off(repo.path(), &[], "s-1", "SessionEnd", None);
    assert_eq!(
        handoff_record(repo.path(), "final.json")["git"]["dirty"],
        false
    );
}

#[test]
fn the_loop_is_told_as_it_stands_now_not_as_a_racing_checkpoint_saw_it() {
    // Codex runs stop-gate and the checkpoint at once: the checkpoint can see the loop
    // before stop-gate records the pass that ended it.
    let dir = Project::git();
    dir.loop_for("s1")
        .max_iterations(4)
        .prompt("Fix it.")
        .start();
    hand_off(dir.path(), &["--checkpoint"], "s1", "Stop", None);
    assert_eq!(
        handoff_record(dir.path(), "checkpoint.json")["loop"]["status"],
        "running"
    );
    let declared = json!({
        "session_id": "s1", "cwd": dir.path(), "hook_event_name": "Stop",
        "last_assistant_message": "Done.\n<promise>DONE</promise>",
    });
    stop_gate()
        .current_dir(dir.path())
        .write_stdin(declared.to_string())
        .assert()
        .success();
    let told = context(&session_start(dir.path(), "s2", "startup"));
    assert!(told.contains("loop: passed, pass 1/4"), "{told}");
}

/// The names in `dir`.
fn names_in(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// Waits up to `within` for `dir` to hold the final record alone (the child that frees what a
/// handoff replaced may still be at work), and answers what it holds then.
fn once_only_the_record(dir: &Path, within: std::time::Duration) -> Vec<String> {
    let deadline = std::time::Instant::now() + within;
    loop {
        let left = names_in(dir);
        if left == ["final.json"] || std::time::Instant::now() >= deadline {
            return left;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// A handoff swaps its record in and frees the one it replaced only from a child after it has
/// exited (`atomic::release_replaced`), so that a disk's writeback never holds the engine. What
/// it swapped out must still go: however many handoffs run, only the records stay.
#[test]
fn the_records_a_handoff_replaces_are_removed_after_it_exits() {
    let dir = Project::git();
    for round in 0..3 {
        let out = session_end(
            dir.path(),
            &[],
            end_payload(dir.path(), "s1", "SessionEnd", None),
        );
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        let left = once_only_the_record(
            &dir.path().join(".vigil/handoff"),
            std::time::Duration::from_secs(5),
        );
        assert_eq!(left, ["final.json"], "after handoff {round}");
        handoff_record(dir.path(), "final.json");
    }
}

/// SessionEnd of s-1 with the transcript `t`: its final record, which must be at most 16 KiB.
fn final_record_within_16_kib(dir: &Path, t: &Path) -> Value {
    hand_off(dir, &[], "s-1", "SessionEnd", Some(t));
    let size = std::fs::metadata(dir.join(".vigil/handoff/final.json"))
        .unwrap()
        .len();
    assert!(size <= 16 * 1024, "{size} bytes");
    handoff_record(dir, "final.json")
}

/// A repository whose session s1 ended once, leaving a record for the next to replace: it, and
/// the SessionEnd payload.
fn ended_once() -> (Project, String) {
    let dir = Project::git();
    let payload = end_payload(dir.path(), "s1", "SessionEnd", None);
    assert_eq!(
        session_end(dir.path(), &[], payload.clone()).status.code(),
        Some(0)
    );
    (dir, payload)
}

/// Nothing waits for what frees the replaced record: not the engine reading the hook's output,
/// nor one holding another of its descriptors (here a pipe at 1500, past the first 1,024). A
/// debug build's child waits `VIGIL_TEST_RELEASE_DELAY_MS` first, standing in for a disk that
/// holds it; the hook must still be done, every pipe closed, long before the child is.
#[test]
fn the_engine_never_waits_for_the_replaced_record_to_be_freed() {
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    use std::time::{Duration, Instant};

    let (dir, payload) = ended_once();
    let mut fds = [0; 2];
    // SAFETY: a two-int array for pipe2 to fill.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    let (read_end, write_end) = (fds[0], fds[1]);
    let mut hook = vigil_process("session-end-handoff");
    hook.current_dir(dir.path())
        .env("VIGIL_TEST_RELEASE_DELAY_MS", "4000")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    // SAFETY: dup2 is async-signal-safe; the copy at 1500 is not closed on exec.
    unsafe {
        hook.pre_exec(move || {
            if libc::dup2(write_end, 1500) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let started = Instant::now();
    let mut child = hook.spawn().unwrap();
    // SAFETY: the test's own copy of the write end, closed once the hook has its own.
    unsafe { libc::close(write_end) };
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(payload.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let output_done = started.elapsed();
    // SAFETY: the read end is the test's and is owned from here on.
    let mut other = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(read_end) };
    let mut rest = Vec::new();
    other.read_to_end(&mut rest).unwrap();
    let other_done = started.elapsed();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(output_done < Duration::from_secs(3), "{output_done:?}");
    assert!(other_done < Duration::from_secs(3), "{other_done:?}");
    // The child is still at work: the record it swapped out is there until it is done.
    let handoff = dir.path().join(".vigil/handoff");
    if started.elapsed() < Duration::from_millis(3500) {
        let left = names_in(&handoff);
        assert!(left.len() > 1, "{left:?}");
    }
    assert_eq!(
        once_only_the_record(&handoff, Duration::from_secs(15)),
        ["final.json"]
    );
    handoff_record(dir.path(), "final.json");
}

/// The agent makes `.vigil/handoff` a link to another directory while the child that frees the
/// replaced record still waits: the child removes that record in the directory the write used,
/// and nothing of the same name where the link now leads.
#[test]
fn a_handoff_directory_made_a_link_after_the_write_sends_no_removal_elsewhere() {
    use std::time::Duration;

    let (dir, payload) = ended_once();
    let out = session_end_handoff()
        .current_dir(dir.path())
        .env("VIGIL_TEST_RELEASE_DELAY_MS", "1500")
        .write_stdin(payload)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let handoff = dir.path().join(".vigil/handoff");
    let swapped_out: Vec<_> = names_in(&handoff)
        .into_iter()
        .filter(|n| n != "final.json")
        .collect();
    assert!(!swapped_out.is_empty(), "the child already ran");
    let moved = dir.path().join(".vigil/handoff-moved");
    let decoy = dir.path().join("decoy");
    std::fs::create_dir(&decoy).unwrap();
    for name in &swapped_out {
        std::fs::write(decoy.join(name), "the agent's").unwrap();
    }
    std::fs::rename(&handoff, &moved).unwrap();
    std::os::unix::fs::symlink(&decoy, &handoff).unwrap();
    assert_eq!(
        once_only_the_record(&moved, Duration::from_secs(15)),
        ["final.json"]
    );
    for name in &swapped_out {
        assert_eq!(
            std::fs::read_to_string(decoy.join(name)).unwrap(),
            "the agent's"
        );
    }
}

/// Issue 31: the handoff a first session leaves is the machine's, not the project's: git
/// shows nothing new, however vigil was wired (here: not installed at all), and a
/// `.vigil/.gitignore` the user wrote is kept as it is.
#[test]
fn the_handoff_stays_out_of_git_status_from_the_first_session() {
    let project = Project::git();
    hand_off(project.path(), &[], "s-1", "SessionEnd", None);
    assert!(project.path().join(".vigil/handoff/final.json").is_file());
    let status = git(
        project.path(),
        &["status", "--porcelain", "--untracked-files=all"],
    );
    assert_eq!(status, "", "git shows what vigil wrote");
    let mine = project.path().join(".vigil/.gitignore");
    std::fs::write(&mine, "handoff/\n").unwrap();
    hand_off(project.path(), &["--checkpoint"], "s-2", "Stop", None);
    assert_eq!(std::fs::read_to_string(&mine).unwrap(), "handoff/\n");
}
