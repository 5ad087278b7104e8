//! SPEC §9, the programs vigil starts of its own accord (issue 43 item 3): git and the shell a
//! check runs in are the system's, found in its own places or by absolute path, never through a
//! PATH entry inside the project, which the agent's sandboxed shell writes. The user started
//! the client with the project's `.venv/bin` on PATH; the agent planted a program there.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde_json::json;

use crate::support::*;

/// `.venv/bin/NAME` in `project`, planted by the agent: when it runs it leaves a line in
/// `trace` (outside the project) and exits 0. PATH with `.venv/bin` first, as the user's.
fn planted_on_path(project: &Path, name: &str, trace: &Path) -> OsString {
    let bin = project.join(".venv/bin");
    std::fs::create_dir_all(&bin).unwrap();
    write_file(
        &bin.join(name),
        format!(
            "#!/bin/sh\necho \"$0 $*\" >> '{}'\nexit 0\n",
            trace.display()
        ),
    );
    make_executable(&bin.join(name));
    let mut path = OsString::from(&bin);
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap());
    path
}

/// What the planted program left, if it ran.
fn ran(trace: &Path) -> Option<String> {
    std::fs::read_to_string(trace).ok()
}

fn trace_file() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("ran");
    (dir, trace)
}

#[test]
fn the_handoff_never_runs_a_git_planted_in_a_path_entry_inside_the_project() {
    let p = Project::git();
    let (_keep, trace) = trace_file();
    let path = planted_on_path(p.path(), "git", &trace);
    let out = session_end_handoff()
        .env("PATH", &path)
        .current_dir(p.path())
        .write_stdin(
            json!({"session_id": "s-1", "cwd": p.path(), "hook_event_name": "SessionEnd", "reason": "other"})
                .to_string(),
        )
        .output()
        .unwrap();
    assert_exit(&out, 0);
    assert_eq!(ran(&trace), None, "the planted git ran at the handoff");
    // The system's git ran instead: the record has the repository's facts.
    let record = handoff_record(p.path(), "final.json");
    assert!(record["git"]["head"].is_string(), "{record}");
}

#[test]
fn a_check_runs_in_the_systems_shell_never_an_sh_planted_on_path() {
    let p = Project::new();
    let (_keep, trace) = trace_file();
    let path = planted_on_path(p.path(), "sh", &trace);
    // The planted `sh` exits 0 whatever it is given: had it run the check, the stop would pass.
    for bwrap in [None, Some(OsString::from("/nonexistent/bwrap"))] {
        let mut env: Vec<(&str, &std::ffi::OsStr)> = vec![("PATH", &path)];
        if let Some(bwrap) = &bwrap {
            env.push(("VIGIL_TEST_BWRAP", bwrap));
        }
        let stop = p.stop_with_env(
            &["--run", "exit 3"],
            &env,
            p.payload("s1", Some("done")).to_string(),
        );
        assert!(stop.blocked(), "confined: {}", bwrap.is_none());
        assert_contains!(stop.reason(), "failed (exit 3)");
        assert_eq!(ran(&trace), None, "the planted sh ran the check");
    }
}

#[test]
fn the_doctor_warns_of_a_path_entry_inside_the_project() {
    let p = Project::builder().git().home().installed(&[]).build();
    let (_keep, trace) = trace_file();
    let path = planted_on_path(p.path(), "git", &trace);
    let out = settings_merge()
        .env("HOME", p.home())
        .env("PATH", &path)
        .args(["check", "--settings"])
        .arg(p.settings())
        .current_dir(p.path())
        .output()
        .unwrap();
    let said = stdout_of(&out);
    let line = said
        .lines()
        .find(|l| l.contains("PATH holds"))
        .unwrap_or_else(|| panic!("no PATH warning:\n{said}"));
    assert!(line.starts_with("[warn]"), "{line}");
    assert_contains!(line, ".venv/bin");
    assert_contains!(line, "inside the project");
    assert_eq!(ran(&trace), None, "the doctor ran the planted git");
    // Without the entry, no such line.
    let out = settings_merge()
        .env("HOME", p.home())
        .args(["check", "--settings"])
        .arg(p.settings())
        .current_dir(p.path())
        .output()
        .unwrap();
    assert_lacks!(stdout_of(&out), "PATH holds");
}
