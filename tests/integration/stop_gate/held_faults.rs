//! SPEC P1, P6, P8 for the hold (SPEC §11): an I/O error on the hold or on a held copy blocks
//! the Stop (it is never taken for "no hold"), and a hold writer killed at any system call
//! leaves the old hold or the new one, each whole. Faults are injected with strace, on the
//! hold's own files only (`-P`).

use std::path::{Path, PathBuf};

use crate::support::*;

fn strace() -> bool {
    let there = std::process::Command::new("strace")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if !there {
        assert!(
            std::env::var_os("VIGIL_E2E_REQUIRED").is_none(),
            "strace is needed here (CI installs it)"
        );
        skip("strace is not installed");
    }
    there
}

fn held_project() -> Project {
    let p = Project::builder()
        .git()
        .file("tests/a.sh", "true\n")
        .file("tests/b.sh", "true\n")
        .build();
    let out = stop_gate()
        .args(["hold", "add", "tests"])
        .current_dir(p.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", said(&out));
    p
}

/// stop-gate (a Stop with `--run true` of a session of its own) under strace, with `inject`
/// on the system calls that touch `path`.
fn stop_faulted(p: &Project, path: &Path, syscall: &str, session: &str) -> Stop {
    stop_faulted_with(p, path, syscall, "EIO", session)
}

/// `stop_faulted`, the fault `errno`.
fn stop_faulted_with(p: &Project, path: &Path, syscall: &str, errno: &str, session: &str) -> Stop {
    let mut cmd = std::process::Command::new("strace");
    isolated(&mut cmd)
        .args(["-f", "-qq", "-o", "/dev/null", "-P"])
        .arg(path)
        .args(["-e", &format!("trace={syscall}")])
        .args(["-e", &format!("inject={syscall}:error={errno}")])
        .arg(bin_dir().join("stop-gate"))
        .args(["--run", "true"])
        .current_dir(p.path());
    let out = output_with_stdin(cmd, p.payload(session, Some("x")).to_string().as_bytes());
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    Stop {
        json: (!text.is_empty()).then(|| serde_json::from_str(&text).unwrap()),
    }
}

fn blob_of(p: &Project) -> PathBuf {
    std::fs::read_dir(p.protected().join("hold/blobs"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
}

#[test]
fn an_io_error_on_the_hold_or_a_held_copy_blocks_the_stop() {
    if !strace() {
        return;
    }
    let p = held_project();
    // Unfaulted, the stop passes: what blocks below is the fault.
    assert!(!p.stop(&["--run", "true"], "s0", Some("x")).blocked());
    let record = p.protected().join("hold/hold.json");
    for syscall in ["openat", "read", "statx"] {
        let stop = stop_faulted(&p, &record, syscall, &format!("r-{syscall}"));
        stop.assert_blocked_saying("Input/output error");
        assert!(stop.reason().contains("hold"), "{}", stop.reason());
    }
    let blob = blob_of(&p);
    for syscall in ["openat", "read"] {
        let stop = stop_faulted(&p, &blob, syscall, &format!("b-{syscall}"));
        stop.assert_blocked_saying("Input/output error");
    }
}

#[test]
fn a_full_disk_where_the_checks_copy_goes_blocks_rather_than_copy_within_the_agents_reach() {
    if !strace() {
        return;
    }
    let p = held_project();
    // The copy's directory in the protected state cannot be made; the temporary directory,
    // which the sandboxed agent can write, is no place for it.
    let snapshots = p.protected().join("snapshots");
    let _ = std::fs::remove_dir_all(&snapshots);
    let stop = stop_faulted_with(&p, &snapshots, "mkdir", "ENOSPC", "full");
    stop.assert_blocked_saying("could not be made in the protected state");
}

#[test]
fn a_hold_writer_killed_at_any_system_call_leaves_the_old_hold_or_the_new() {
    if !strace() {
        return;
    }
    let p = held_project();
    let record = p.protected().join("hold/hold.json");
    let old = json_of(&record);
    write_file(&p.path().join("tests/a.sh"), "false\n");
    let refresh = |kill_at: Option<usize>| {
        let mut cmd = std::process::Command::new("strace");
        isolated(&mut cmd).args(["-f", "-qq", "-o", "/dev/null"]);
        if let Some(n) = kill_at {
            cmd.args(["-e", &format!("inject=all:signal=KILL:when={n}")]);
        }
        cmd.arg(bin_dir().join("stop-gate"))
            .args(["hold", "refresh"])
            .current_dir(p.path())
            .output()
            .unwrap()
    };
    // How many system calls a whole refresh makes.
    let mut calls = std::process::Command::new("strace");
    isolated(&mut calls)
        .args(["-f", "-qq", "-c", "-o", "/dev/stdout"])
        .arg(bin_dir().join("stop-gate"))
        .args(["hold", "refresh"])
        .current_dir(p.path());
    let summary = stdout_of(&calls.output().unwrap());
    let total: usize = summary
        .lines()
        .find(|l| l.trim_end().ends_with("total"))
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{summary}"));
    // Back to the old hold and the new tree, then killed at every few calls.
    std::fs::write(&record, serde_json::to_vec(&old).unwrap()).unwrap();
    let mut new = None;
    let step = (total / 60).max(1);
    for n in (1..=total + 5).step_by(step) {
        let out = refresh(Some(n));
        let now = json_of(&record);
        assert_valid("hold.schema.json", &now);
        if now != old {
            // The new hold, whole, with every copy it names.
            assert_eq!(now["files"][0]["path"], "tests/a.sh");
            for file in now["files"].as_array().unwrap() {
                let blob = file["blob"].as_str().unwrap();
                assert!(
                    p.protected().join("hold/blobs").join(blob).is_file(),
                    "killed at {n}: {blob} is named and not kept"
                );
            }
            new.get_or_insert(now.clone());
            std::fs::write(&record, serde_json::to_vec(&old).unwrap()).unwrap();
        } else if out.status.success() {
            panic!("killed at {n} it said it renewed, and the hold is the old one");
        }
    }
    assert!(new.is_some(), "no run got as far as the new hold");
}

/// A way to damage the hold's record.
type Damage<'a> = Box<dyn Fn() + 'a>;

#[test]
fn a_hold_record_that_is_a_link_empty_huge_or_of_wrong_types_blocks_the_stop() {
    let p = held_project();
    let record = p.protected().join("hold/hold.json");
    let good = std::fs::read(&record).unwrap();
    let elsewhere = p.root().join("elsewhere.json");
    std::fs::write(&elsewhere, &good).unwrap();
    let cases: Vec<(&str, Damage)> = vec![
        ("empty", Box::new(|| std::fs::write(&record, b"").unwrap())),
        (
            "wrong types",
            Box::new(|| {
                std::fs::write(
                    &record,
                    br#"{"schema":"vigil.hold/v1","made_at":1,"updated_at":"x","patterns":"tests","files":[]}"#,
                )
                .unwrap()
            }),
        ),
        (
            "another schema",
            Box::new(|| {
                let text = String::from_utf8(good.clone()).unwrap();
                std::fs::write(&record, text.replace("vigil.hold/v1", "vigil.hold/v9")).unwrap()
            }),
        ),
        (
            "a link",
            Box::new(|| {
                std::fs::remove_file(&record).unwrap();
                std::os::unix::fs::symlink(&elsewhere, &record).unwrap();
            }),
        ),
        (
            "huge",
            Box::new(|| {
                let file = std::fs::File::create(&record).unwrap();
                file.set_len(65 << 20).unwrap();
            }),
        ),
        (
            "a held copy named outside blobs",
            Box::new(|| {
                let text = String::from_utf8(good.clone()).unwrap();
                let blob =
                    serde_json::from_str::<serde_json::Value>(&text).unwrap()["files"][0]["blob"]
                        .as_str()
                        .unwrap()
                        .to_string();
                std::fs::write(&record, text.replace(&blob, "../../../../etc/passwd")).unwrap()
            }),
        ),
    ];
    for (what, damage) in cases {
        damage();
        let stop = p.stop(&["--run", "true"], &format!("s-{}", what.len()), Some("x"));
        assert!(stop.blocked(), "{what}: {:?}", stop.json);
        let _ = std::fs::remove_file(&record);
        std::fs::write(&record, &good).unwrap();
    }
    assert!(!p.stop(&["--run", "true"], "s-last", Some("x")).blocked());
}
