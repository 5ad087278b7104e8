//! SPEC P1, P6, P8 for the hold (SPEC §11): an I/O error on the hold or on a held copy blocks
//! the Stop (it is never taken for "no hold"), and a hold writer killed at any system call
//! leaves the old hold or the new one, each whole. Faults are injected with strace, on the
//! hold's own files only (`-P`).

use std::path::{Path, PathBuf};

use crate::support::*;

/// Where strace runs: [`held_project`].
fn held_traced() -> Option<Project> {
    strace_runs().then(held_project)
}

/// A project whose `tests/` the human holds.
fn held_project() -> Project {
    let p = Project::builder()
        .git()
        .file("tests/a.sh", "true\n")
        .file("tests/b.sh", "true\n")
        .build();
    ok(stop_gate()
        .args(["hold", "add", "tests"])
        .current_dir(p.path())
        .output()
        .unwrap());
    p
}

/// stop-gate (a Stop with `--run true` of a session of its own) under strace, with `inject`
/// on the system calls that touch `path`.
fn stop_faulted(p: &Project, path: &Path, syscall: &str, session: &str) -> Stop {
    stop_faulted_with(p, path, syscall, "EIO", session)
}

/// `stop_faulted`, the fault `errno`.
fn stop_faulted_with(p: &Project, path: &Path, syscall: &str, errno: &str, session: &str) -> Stop {
    stop_faulted_at(p, &[path], syscall, errno, session, &[])
}

/// `stop_faulted_with` on the system calls that touch any of `paths`, with `env` set.
fn stop_faulted_at(
    p: &Project,
    paths: &[&Path],
    syscall: &str,
    errno: &str,
    session: &str,
    env: &[(&str, &str)],
) -> Stop {
    let mut cmd = std::process::Command::new("strace");
    isolated(&mut cmd).args(["-f", "-qq", "-o", "/dev/null"]);
    for path in paths {
        cmd.arg("-P").arg(path);
    }
    cmd.envs(env.iter().copied())
        .args(["-e", &format!("trace={syscall}")])
        .args(["-e", &format!("inject={syscall}:error={errno}")])
        .arg(bin_dir().join("stop-gate"))
        .args(["--run", "true"])
        .current_dir(p.path());
    let out = ok(output_with_stdin(
        cmd,
        p.payload(session, Some("x")).to_string().as_bytes(),
    ));
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
    let Some(p) = held_traced() else { return };
    // Unfaulted, the stop passes: what blocks below is the fault.
    assert!(!p.stop(&["--run", "true"], "s0", Some("x")).blocked());
    let record = p.protected().join("hold/hold.json");
    for syscall in ["openat", "read", "statx"] {
        let stop = stop_faulted(&p, &record, syscall, &format!("r-{syscall}"));
        stop.assert_blocked_saying("Input/output error");
        assert!(stop.reason().contains("hold"), "{}", stop.reason());
    }
    // A held copy is read where the check's copy needs it: always in a fresh copy (a warm
    // copy holds the held bytes already, from the tree that was just compared with them).
    let blob = blob_of(&p);
    for syscall in ["openat", "read"] {
        let stop = stop_faulted_at(
            &p,
            &[&blob],
            syscall,
            "EIO",
            &format!("b-{syscall}"),
            &[("VIGIL_CHECK_COPY", "fresh")],
        );
        stop.assert_blocked_saying("Input/output error");
    }
}

#[test]
fn a_full_disk_where_the_checks_copy_goes_blocks_rather_than_copy_within_the_agents_reach() {
    let Some(p) = held_traced() else { return };
    // The copy's directory in the protected state cannot be made; the temporary directory,
    // which the sandboxed agent can write, is no place for it.
    let snapshots = p.protected().join("snapshots");
    let warm = p.protected().join("check-copy");
    let _ = std::fs::remove_dir_all(&snapshots);
    let _ = std::fs::remove_dir_all(&warm);
    let stop = stop_faulted_at(&p, &[&snapshots, &warm], "mkdir", "ENOSPC", "full", &[]);
    stop.assert_blocked_saying("could not be made in the protected state");
}

#[test]
fn a_hold_writer_killed_at_any_system_call_leaves_the_old_hold_or_the_new() {
    let Some(p) = held_traced() else { return };
    let record = p.protected().join("hold/hold.json");
    let old = json_of(&record);
    p.write("tests/a.sh", "false\n");
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
    // How far into a whole refresh a kill can come.
    let total = busiest_system_call(p.path(), &["hold", "refresh"], b"");
    // Back to the old hold and the new tree, then killed at every few calls.
    std::fs::write(&record, serde_json::to_vec(&old).unwrap()).unwrap();
    let mut new = None;
    let step = (total / 60).max(1);
    for n in (1..=total + 1).step_by(step).chain([total + 1]) {
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

/// How many calls `stop-gate ARGS` (in `dir`, reading `stdin`, its children included) makes
/// of the system call it makes most: strace's `inject=all:…:when=N` counts each system call
/// on its own, so N past this number kills nothing, and N up to it kills somewhere.
fn busiest_system_call(dir: &Path, args: &[&str], stdin: &[u8]) -> usize {
    let mut calls = std::process::Command::new("strace");
    isolated(&mut calls)
        .args(["-f", "-qq", "-c", "-o", "/dev/stdout"])
        .arg(bin_dir().join("stop-gate"))
        .args(args)
        .current_dir(dir);
    let summary = stdout_of(&output_with_stdin(calls, stdin));
    summary
        .lines()
        .filter(|l| !l.trim_end().ends_with("total"))
        .filter_map(|l| l.split_whitespace().nth(3)?.parse().ok())
        .max()
        .unwrap_or_else(|| panic!("{summary}"))
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

/// A Stop of `p` with `--run CHECK` under strace (`strace_args` before the program): blocked
/// or not, and what strace wrote (where it says `INJECTED`).
fn stop_traced(p: &Project, strace_args: &[&str], check: &str, session: &str) -> (bool, String) {
    let log = p.root().join(format!("strace-{session}.log"));
    let mut cmd = std::process::Command::new("strace");
    isolated(&mut cmd)
        .args(["-f", "-qq", "-o"])
        .arg(&log)
        .args(strace_args)
        .arg(bin_dir().join("stop-gate"))
        .args(["--run", check])
        .current_dir(p.path());
    let out = output_with_stdin(cmd, p.payload(session, Some("x")).to_string().as_bytes());
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_exit(&out, 0);
    let traced = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    (text.contains("\"block\""), traced)
}

#[test]
fn a_fault_in_the_warm_copy_or_its_cache_never_checks_old_bytes() {
    let Some(p) = held_traced() else { return };
    p.write("src/a.txt", "a\n");
    assert!(
        !p.stop(&["--run", "grep -q a src/a.txt"], "s0", Some("x"))
            .blocked()
    );
    let dir = p.protected().join("check-copy");
    let copy = dir.join("copy/src/a.txt");
    let index = dir.join("index");
    assert!(copy.is_file() && index.is_file(), "no warm copy was made");
    // Each fault on the copy's file or the cache, on a Stop after an edit: the check sees
    // the edit (it blocks), and the next Stop, unfaulted, sees the edit undone (it passes).
    // The cache is written into its directory and renamed there (the seal).
    let faults: [(&std::path::Path, &str, &str); 6] = [
        (&copy, "unlink", "EIO"),
        (&copy, "openat", "EIO"),
        (&copy, "write", "ENOSPC"),
        (&index, "openat", "EIO"),
        (&dir, "openat", "ENOSPC"),
        (&dir, "renameat2", "EIO"),
    ];
    for (at, (path, syscall, errno)) in faults.into_iter().enumerate() {
        p.write("src/a.txt", "z\n");
        let path = path.to_str().unwrap();
        let (blocked, traced) = stop_traced(
            &p,
            &[
                "-P",
                path,
                "-e",
                &format!("trace={syscall}"),
                "-e",
                &format!("inject={syscall}:error={errno}"),
            ],
            "grep -q a src/a.txt",
            &format!("f{at}"),
        );
        assert_contains!(
            traced,
            "INJECTED",
            "{syscall} on {path} was never made:\n{traced}"
        );
        assert!(
            blocked,
            "{syscall} {errno} on {path}: the copy's old bytes were checked"
        );
        p.write("src/a.txt", "a\n");
        let stop = p.stop(
            &["--run", "grep -q a src/a.txt"],
            &format!("g{at}"),
            Some("x"),
        );
        assert!(
            !stop.blocked(),
            "{syscall} {errno} on {path}: {}",
            stop.reason()
        );
    }
}

#[test]
fn a_warm_stop_killed_at_any_system_call_leaves_the_next_one_judging_the_tree() {
    let Some(p) = held_traced() else { return };
    p.write("src/a.txt", "a\n");
    p.write("src/b.txt", "b\n");
    let check = "grep -q a src/a.txt && test ! -e src/c.txt";
    assert!(!p.stop(&["--run", check], "s0", Some("x")).blocked());
    // How far into a warm Stop after an edit a kill can come.
    let payload = p.payload("count", Some("x")).to_string();
    let total = busiest_system_call(p.path(), &["--run", check], payload.as_bytes());
    let step = (total / 40).max(1);
    let mut killed = 0;
    for n in (1..=total).step_by(step) {
        // The agent's edit: the check must fail on it, whatever a killed Stop left.
        p.write("src/a.txt", "z\n");
        p.write("src/c.txt", "c\n");
        // Killed at call n (the Stop says nothing, or blocks if it got that far).
        let mut cmd = std::process::Command::new("strace");
        isolated(&mut cmd)
            .args(["-f", "-qq", "-o", "/dev/null"])
            .args(["-e", &format!("inject=all:signal=KILL:when={n}")])
            .arg(bin_dir().join("stop-gate"))
            .args(["--run", check])
            .current_dir(p.path());
        let out = output_with_stdin(
            cmd,
            p.payload(&format!("k{n}"), Some("x"))
                .to_string()
                .as_bytes(),
        );
        if !out.status.success() {
            killed += 1;
        }
        let stop = p.stop(&["--run", check], &format!("a{n}"), Some("x"));
        assert!(
            stop.blocked(),
            "killed at {n}: the next Stop checked old bytes"
        );
        p.write("src/a.txt", "a\n");
        std::fs::remove_file(p.path().join("src/c.txt")).unwrap();
        let stop = p.stop(&["--run", check], &format!("b{n}"), Some("x"));
        assert!(!stop.blocked(), "killed at {n}: {}", stop.reason());
    }
    assert!(killed > 0, "no Stop was killed: the sweep tested nothing");
}
