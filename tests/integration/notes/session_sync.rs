//! SPEC §5, gates read what a sync wrote out and never run git: no gate touches the network, a
//! remote that hangs is cut off at the deadline, and the loader syncs in the background
//! (`--sync-notes`, which the installer wires and takes out).

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::json;

use super::{World, laptop_stop, sync};
use crate::support::*;

#[test]
fn a_remote_that_hangs_is_cut_off_at_the_deadline_with_one_line() {
    let project = Project::git();
    // Accepts connections and never answers.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/repo.git", listener.local_addr().unwrap());
    let held = std::thread::spawn(move || {
        let mut kept = Vec::new();
        for stream in listener.incoming().take(4).flatten() {
            kept.push(stream);
        }
        std::thread::sleep(Duration::from_secs(30));
    });
    let start = Instant::now();
    let out = marker_writer_in(
        project.path(),
        &["sync", "--remote", &url, "--timeout", "2"],
    );
    let took = start.elapsed();
    // A command that cannot do its job exits 2 (SPEC §2).
    assert_exit(&out, 2);
    assert!(
        took < Duration::from_secs(6),
        "cut off at the deadline, took {took:?}"
    );
    assert_one_line_error(&out, "marker-writer");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("deadline"), "{stderr}");
    drop(held);
}

#[test]
fn no_gate_touches_the_network_or_runs_git_even_with_notes_to_read() {
    let world = World::new();
    let (_, laptop) = world.ci_vouched(true);
    sync(&laptop);
    let payload = json!({"session_id": "s1", "hook_event_name": "Stop", "cwd": laptop, "last_assistant_message": "Done."});
    let key = world.public();
    let Some((out, calls)) = traced_with(
        "stop-gate",
        &[
            "--require-marker".as_ref(),
            "tests".as_ref(),
            "--verify-key".as_ref(),
            key.as_os_str(),
        ],
        &[],
        &laptop,
        payload.to_string().as_bytes(),
        "execve,connect",
    ) else {
        return;
    };
    assert_success(&out);
    assert_silent(&out);
    assert_eq!(
        calls.count("execve"),
        1,
        "only stop-gate itself is executed: {}",
        calls.text
    );
    assert_eq!(calls.count("connect"), 0, "no connection: {}", calls.text);
}

/// The laptop's session start with `--sync-notes REMOTE`: how long it took.
fn laptop_session_start(laptop: &Path, remote: &str) -> (Output, Duration) {
    let start = Instant::now();
    let out = session_start_command(laptop, "s1", "startup")
        .args(["--sync-notes", remote])
        .output()
        .unwrap();
    (out, start.elapsed())
}

#[test]
fn the_loader_syncs_notes_in_the_background_and_never_waits_for_the_remote() {
    let world = World::new();
    let (_, laptop) = world.ci_vouched(true);
    let (out, took) = laptop_session_start(&laptop, "origin");
    assert_success(&out);
    assert!(
        took < Duration::from_secs(2),
        "the session start waited: {took:?}"
    );
    // The sync goes on after the hook: the marker arrives for the next stop.
    let deadline = Instant::now() + Duration::from_secs(20);
    while laptop_stop(&laptop, "tests", Some(&world.public())).is_some() {
        assert!(
            Instant::now() < deadline,
            "the background sync never arrived"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // A remote that hangs: the session start does not wait for it either.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/repo.git", listener.local_addr().unwrap());
    let (out, took) = laptop_session_start(&laptop, &url);
    assert_success(&out);
    assert!(
        took < Duration::from_secs(2),
        "the session start waited: {took:?}"
    );
    drop(listener);
}

#[test]
fn install_sync_notes_wires_the_loader_keeps_it_on_reinstall_and_takes_it_out() {
    let project = Project::git();
    let settings = project.path().join(".claude/settings.local.json");
    let install = |extra: &[&str]| {
        ok(settings_merge()
            .args(["install", "--settings"])
            .arg(&settings)
            .arg("--bin-dir")
            .arg(bin_dir())
            .args(extra)
            .current_dir(project.path())
            .output()
            .unwrap());
        json_of(&settings)["hooks"]["SessionStart"][0]["hooks"][0]["command"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let loader = install(&["--sync-notes", "origin"]);
    assert!(
        loader.ends_with("session-start-loader --sync-notes origin"),
        "{loader}"
    );
    assert!(
        install(&[]).ends_with("--sync-notes origin"),
        "kept by a re-install"
    );
    let check = settings_merge()
        .args(["check", "--settings"])
        .arg(&settings)
        .current_dir(project.path())
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&check.stdout);
    assert!(!report.contains("[fail]"), "{report}");
    let off = install(&["--no-sync-notes"]);
    assert!(off.ends_with("session-start-loader"), "{off}");
    for bad in ["", "--push"] {
        let out = settings_merge()
            .args(["install", "--settings"])
            .arg(&settings)
            .args(["--sync-notes", bad])
            .current_dir(project.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {}", said(&out));
    }
}
