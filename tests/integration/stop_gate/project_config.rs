//! The plugin's Stop hook (`stop-gate --project-config`) and `stop-gate config` (issue 31): a
//! check set per project, kept in the project's protected state (Claude Code reads a plugin's
//! userConfig only from user, --settings and managed settings, so one there would run in
//! every project); none set, a stop passes on the declaration alone and the doctor says so.

use crate::support::*;

const HOOK: &[&str] = &["--project-config"];

/// `stop-gate config ARGS` in `project`, as the human runs it there.
fn config(project: &Project, args: &[&str]) -> std::process::Output {
    stop_gate()
        .arg("config")
        .args(args)
        .current_dir(project.path())
        .output()
        .unwrap()
}

#[test]
fn the_plugins_stop_hook_runs_the_check_set_for_its_project_and_no_other() {
    let p = Project::git();
    let other = Project::git();
    // Nothing set: the declaration alone, as the README says.
    assert!(p.stop(HOOK, "s1", Some("done")).silent_allow());
    ok(config(
        &p,
        &["set", "--run", "test -f fixed.txt", "--max-blocks", "5"],
    ));
    let stop = p.stop(HOOK, "s1", Some("done"));
    stop.assert_blocked_saying("`test -f fixed.txt` failed");
    p.write("fixed.txt", "");
    assert!(p.stop(HOOK, "s1", Some("done")).silent_allow());
    // Another project's stop does not run this one's check.
    assert!(other.stop(HOOK, "s2", Some("done")).silent_allow());
    assert_eq!(
        stdout_of(&config(&p, &["show"])),
        "--run 'test -f fixed.txt' --max-blocks 5\n"
    );
    let shown = stdout_of(&config(&other, &["show"]));
    assert!(shown.starts_with("no gate flags are set for "), "{shown}");
    assert!(shown.contains("declaration alone"), "{shown}");
    // Unset: back to the declaration alone.
    ok(config(&p, &["unset"]));
    std::fs::remove_file(p.path().join("fixed.txt")).unwrap();
    assert!(p.stop(HOOK, "s1", Some("done")).silent_allow());
}

#[test]
fn config_set_refuses_what_the_gate_would_refuse_and_the_hooks_own_flags() {
    let p = Project::git();
    for bad in [
        &["set", "--deadline", "60"][..],
        &["set", "--state-dir", "x"],
        &["set", "--project-config"],
        &["set", "--run"],
        &["set", "--feedback", "bloc"],
        &["set"],
        &["show", "extra"],
        &["frobnicate"],
    ] {
        let out = config(&p, bad);
        usage_error(&out, "stop-gate");
    }
    // Nothing was written.
    assert_starts_with!(stdout_of(&config(&p, &["show"])), "no gate flags are set");
}

/// A configuration the gate cannot read (damaged, or not what `config set` writes) never
/// lets a stop through unchecked: the gate denies, naming the file.
#[test]
fn a_damaged_project_configuration_denies() {
    let p = Project::git();
    ok(config(&p, &["set", "--run", "true"]));
    let file = protected_dir(p.top()).join("gate-flags.json");
    for (n, damaged) in [
        &b""[..],
        b"not json",
        b"{\"schema\": 1, \"args\": [\"--deadline\", \"9\"]}",
        b"{\"schema\": 2, \"args\": []}",
        b"{\"schema\": 1, \"args\": [1]}",
        b"\xff\xfe",
    ]
    .into_iter()
    .enumerate()
    {
        std::fs::write(&file, damaged).unwrap();
        // A session each: the budget lets a stop through after blocks in a row.
        let stop = p.stop(HOOK, &format!("s{n}"), Some("done"));
        stop.assert_blocked_saying("gate-flags.json");
    }
}

/// The attack of the review (issue 31): the agent moves the git top, with a `.git` it plants
/// below it or moves away, so that the project is another directory, whose state holds no
/// flags. The flags a human set for the top are still found: the gate looks in the state of
/// the session's directory and of every directory above it, not of the top alone.
#[test]
fn moving_the_git_top_does_not_lose_the_projects_check() {
    // A monorepo: Claude Code started in its subdirectory p; the human set the check there.
    let repo = Project::git();
    let sub = repo.path().join("p");
    std::fs::create_dir_all(&sub).unwrap();
    let set = |dir: &std::path::Path| {
        ok(stop_gate()
            .args(["config", "set", "--run", "test -f fixed.txt"])
            .current_dir(dir)
            .output()
            .unwrap());
    };
    let stop = |dir: &std::path::Path, session: &str| {
        run_stop(
            dir,
            HOOK,
            &[],
            stop_payload(dir, session, Some("done")).to_string(),
        )
    };
    set(&sub);
    assert!(stop(&sub, "a1").blocked());
    // The agent plants a .git in p: p is its own top now.
    std::fs::write(sub.join(".git"), "").unwrap();
    assert!(
        stop(&sub, "a2").blocked(),
        "a planted .git turned the check off"
    );
    // A project inside another repository: the agent moves its .git away.
    let outer = Project::git();
    let inner = outer.path().join("inner");
    std::fs::create_dir_all(&inner).unwrap();
    git(&inner, &["init", "-q"]);
    set(&inner);
    assert!(stop(&inner, "b1").blocked());
    std::fs::rename(inner.join(".git"), inner.join(".git-aside")).unwrap();
    assert!(
        stop(&inner, "b2").blocked(),
        "a moved .git turned the check off"
    );
}

/// The hook's --deadline is kept: the project's check gets what it leaves, and times out as
/// a check does, not as a gate that hangs.
#[test]
fn the_project_check_runs_under_the_hooks_deadline() {
    let p = Project::git();
    ok(config(&p, &["set", "--run", "sleep 30"]));
    let started = std::time::Instant::now();
    let stop = p.stop(
        &["--project-config", "--deadline", "20"],
        "s1",
        Some("done"),
    );
    assert!(stop.blocked());
    assert!(stop.reason().contains("timed out"), "{}", stop.reason());
    assert!(started.elapsed() < std::time::Duration::from_secs(15));
}

/// Where the state home cannot be written, the flags are not put in the project (where the
/// agent could rewrite them): `config set` refuses in one line, and nothing is written.
#[test]
fn config_set_refuses_a_project_without_a_writable_state_home() {
    let p = Project::git();
    let out = stop_gate()
        .args(["config", "set", "--run", "true"])
        .env("VIGIL_STATE_HOME", "/dev/null/state")
        .current_dir(p.path())
        .output()
        .unwrap();
    let line = usage_error(&out, "stop-gate");
    assert!(line.contains("state home cannot be written"), "{line}");
    assert!(!p.path().join(".vigil/state/gate-flags.json").exists());
}
