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
    let out = config(
        &p,
        &["set", "--run", "test -f fixed.txt", "--max-blocks", "5"],
    );
    assert!(out.status.success(), "{}", said(&out));
    let stop = p.stop(HOOK, "s1", Some("done"));
    assert!(stop.blocked(), "the check is run");
    assert!(
        stop.reason().contains("`test -f fixed.txt` failed"),
        "{}",
        stop.reason()
    );
    std::fs::write(p.path().join("fixed.txt"), "").unwrap();
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
    assert!(config(&p, &["unset"]).status.success());
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
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {}", said(&out));
        assert_one_line_error(&out, "stop-gate");
    }
    assert!(
        stdout_of(&config(&p, &["show"])).starts_with("no gate flags are set"),
        "nothing was written"
    );
}

/// A configuration the gate cannot read (damaged, or not what `config set` writes) never
/// lets a stop through unchecked: the gate denies, naming the file.
#[test]
fn a_damaged_project_configuration_denies() {
    let p = Project::git();
    assert!(config(&p, &["set", "--run", "true"]).status.success());
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
        assert!(stop.blocked(), "{:?}", String::from_utf8_lossy(damaged));
        assert!(
            stop.reason().contains("gate-flags.json"),
            "{}",
            stop.reason()
        );
    }
}
