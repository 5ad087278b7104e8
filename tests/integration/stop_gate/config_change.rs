//! SPEC §9, the running session keeps vigil's protection: under `--protect`, stop-gate is
//! Claude Code's ConfigChange hook, and blocks a settings change that takes vigil's hooks, deny
//! rules or sandbox away from the session running now. Each test plays what got past the
//! sandbox (or a human mid-session) changing a settings file, and the client asking the hook.

use std::path::Path;

use serde_json::{Value, json};

use crate::support::*;

/// A project with vigil installed in `.claude/settings.local.json` (over the user's own
/// `{"model": "opus"}`), with `--protect` or not, and a HOME of its own; the project is the
/// repository's top, or its `sub` directory ([`Installed::in_sub`]).
struct Installed(Project);

impl std::ops::Deref for Installed {
    type Target = Project;

    fn deref(&self) -> &Project {
        &self.0
    }
}

impl Installed {
    fn new(protect: bool) -> Installed {
        Installed::at(protect, Project::builder().git().home())
    }

    /// A project in a subdirectory of its repository, as in a monorepo.
    fn in_sub() -> Installed {
        Installed::at(true, Project::builder().git().home().subdirectory("sub"))
    }

    fn at(protect: bool, project: ProjectBuilder) -> Installed {
        let p = project.build();
        std::fs::create_dir_all(p.settings().parent().unwrap()).unwrap();
        std::fs::write(p.settings(), "{\"model\": \"opus\"}\n").unwrap();
        p.install(if protect { &["--protect"] } else { &[] });
        Installed(p)
    }

    /// The local settings, as they are now.
    fn local_settings(&self) -> Value {
        json_of(&self.settings())
    }

    /// What the ConfigChange hook said of a change from `source` showing `file`: `None` let
    /// through (silent), `Some(reason)` blocked.
    fn change(&self, source: &str, file: Option<&Path>) -> Option<String> {
        let mut payload = json!({
            "session_id": "s1", "hook_event_name": "ConfigChange", "cwd": self.path(),
            "source": source,
        });
        if let Some(file) = file {
            payload["file_path"] = json!(file);
        }
        self.raw(payload.to_string().into_bytes())
    }

    /// stop-gate on `stdin` in the project, as the engine runs it there: whatever it answers.
    fn hook(&self, stdin: impl Into<Vec<u8>>) -> std::process::Output {
        stop_gate()
            .env("HOME", self.home())
            .env("CLAUDE_PROJECT_DIR", self.path())
            .current_dir(self.path())
            .write_stdin(stdin)
            .output()
            .unwrap()
    }

    fn raw(&self, stdin: Vec<u8>) -> Option<String> {
        let out = ok(self.hook(stdin));
        if out.stdout.is_empty() {
            return None;
        }
        let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(answer["decision"], "block", "{answer}");
        let reason = answer["reason"].as_str().unwrap().to_string();
        assert_eq!(
            answer["systemMessage"], reason,
            "the person is told: {answer}"
        );
        assert_starts_with!(reason, "vigil: ");
        assert_lacks!(reason, "\n");
        Some(reason)
    }

    /// Writes `value` as the local settings file (on disk, as an edit would) and asks the hook.
    fn edit_local(&self, value: &Value) -> Option<String> {
        std::fs::write(self.settings(), serde_json::to_vec_pretty(value).unwrap()).unwrap();
        self.change("local_settings", Some(&self.settings()))
    }
}

#[test]
fn install_protect_adds_the_config_change_hook_and_only_then() {
    let protected = Installed::new(true).local_settings();
    let group = &protected["hooks"]["ConfigChange"][0];
    assert_eq!(
        group["matcher"],
        "local_settings|project_settings|user_settings"
    );
    assert!(runs_stop_gate(&group["hooks"][0]), "{group}");
    assert!(Installed::new(false).local_settings()["hooks"]["ConfigChange"].is_null());
}

#[test]
fn a_change_that_takes_vigils_protection_away_is_blocked_with_its_reason() {
    let p = Installed::new(true);
    let installed = p.local_settings();
    let mut cases: Vec<(Value, &str)> = Vec::new();
    for event in ["Stop", "PreToolUse", "ConfigChange", "SessionStart"] {
        let mut value = installed.clone();
        value["hooks"].as_object_mut().unwrap().remove(event);
        cases.push((value, event));
    }
    let mut value = installed.clone();
    value["permissions"]["deny"] = json!([]);
    cases.push((value, "deny rule"));
    for key in ["enabled", "allowUnsandboxedCommands", "failIfUnavailable"] {
        let mut value = installed.clone();
        value["sandbox"].as_object_mut().unwrap().remove(key);
        cases.push((value, key));
    }
    let mut value = installed.clone();
    value["sandbox"]["enabled"] = json!(false);
    cases.push((value, "sandbox.enabled to false"));
    let mut value = installed.clone();
    value.as_object_mut().unwrap().remove("sandbox");
    cases.push((value, "sandbox.enabled"));
    let mut value = installed.clone();
    value["disableAllHooks"] = json!(true);
    cases.push((value, "disableAllHooks"));
    for (value, named) in cases {
        let reason = p
            .edit_local(&value)
            .unwrap_or_else(|| panic!("{named}: the change was let through"));
        assert!(reason.contains(named), "{named}: {reason}");
        assert_contains!(reason, "the session keeps the settings it loaded");
    }
}

#[test]
fn a_change_that_keeps_the_protection_loads_as_usual() {
    let p = Installed::new(true);
    let mut value = p.local_settings();
    value["model"] = json!("sonnet");
    value["permissions"]["allow"] = json!(["Bash(cargo test:*)"]);
    value["hooks"]["Notification"] = json!([{"hooks": [{"type": "command", "command": "true"}]}]);
    assert_eq!(p.edit_local(&value), None);
    // A re-install mid-session with another check: the record is written first, so the new
    // Stop group is vigil's by the time the client asks.
    ok(settings_merge()
        .env("HOME", p.home())
        .args(["install", "--run", "make test", "--settings"])
        .arg(p.settings())
        .arg("--bin-dir")
        .arg(bin_dir())
        .output()
        .unwrap());
    assert_eq!(p.change("local_settings", Some(&p.settings())), None);
    // Other sources, and sources Claude Code may add, are not vigil's to judge.
    assert_eq!(p.change("skills", None), None);
    assert_eq!(p.change("policy_settings", None), None);
}

/// A group changed rather than taken out misses, times out or stops blocking just as surely.
#[test]
fn a_change_to_one_of_vigils_groups_is_blocked_too() {
    let p = Installed::new(true);
    let installed = p.local_settings();
    let changes: [(&str, &str, Value); 4] = [
        ("PreToolUse", "matcher", json!("NoSuchTool")),
        ("ConfigChange", "matcher", json!("skills")),
        ("Stop", "async", json!(true)),
        ("Stop", "timeout", json!(1)),
    ];
    for (event, field, changed) in changes {
        let mut value = installed.clone();
        let group = &mut value["hooks"][event][0];
        if field == "matcher" {
            group[field] = changed;
        } else {
            group["hooks"][0][field] = changed;
        }
        let reason = p
            .edit_local(&value)
            .unwrap_or_else(|| panic!("{event} {field}: let through"));
        assert!(reason.contains(event), "{reason}");
    }
}

/// The variables vigil reads, set in any settings file's `env`, would turn it off or move its
/// state, temporary directory or home.
#[test]
fn an_env_variable_vigil_reads_is_blocked() {
    let p = Installed::new(true);
    let shared = p.path().join(".claude/settings.json");
    for name in [
        "VIGIL_DISABLE",
        "VIGIL_STATE_HOME",
        "TMPDIR",
        "HOME",
        "XDG_STATE_HOME",
    ] {
        std::fs::write(&shared, json!({"env": {name: "/tmp"}}).to_string()).unwrap();
        let reason = p
            .change("project_settings", Some(&shared))
            .unwrap_or_else(|| panic!("{name}: let through"));
        assert!(reason.contains(name), "{reason}");
    }
    std::fs::write(&shared, json!({"env": {"RUST_LOG": "debug"}}).to_string()).unwrap();
    assert_eq!(p.change("project_settings", Some(&shared)), None);
}

/// The agent cannot move where the install record is: in a monorepo, a `.git` it plants in the
/// project (which moves the git top) or a record it forges in `.vigil/` changes nothing of what
/// the hook judges or of what uninstall takes back.
#[test]
fn a_record_the_agent_can_write_decides_nothing() {
    let p = Installed::in_sub();
    let installed = p.local_settings();
    p.write(".git", "");
    let key = std::fs::canonicalize(p.settings())
        .unwrap()
        .display()
        .to_string();
    let sha = vigil::sys::digest::sha256_hex(&std::fs::read(p.settings()).unwrap());
    let forged = json!({"schema": "vigil.installed/v1", "files": {key: {
        "entries": [], "created_file": true, "created_hooks": false, "created_events": [],
        "written_sha256": sha}}});
    for place in [".vigil/installed.json", ".vigil/state/installed.json"] {
        let path = p.path().join(place);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, forged.to_string()).unwrap();
    }
    let mut value = installed.clone();
    value["hooks"].as_object_mut().unwrap().remove("Stop");
    let reason = p.edit_local(&value).expect("still blocked");
    assert!(reason.contains("Stop"), "{reason}");
    std::fs::write(p.settings(), serde_json::to_vec_pretty(&installed).unwrap()).unwrap();
    ok(settings_merge()
        .env("HOME", p.home())
        .args(["uninstall", "--settings"])
        .arg(p.settings())
        .output()
        .unwrap());
    let left = json_of(&p.settings());
    assert_eq!(
        left["model"], "opus",
        "the user's file is still there: {left}"
    );
    assert!(left["hooks"].is_null(), "and vigil's hooks are out: {left}");
    drop(p);
}

/// Another settings file it cannot read is blocked too (only one that is gone passes).
#[test]
fn another_settings_file_it_cannot_read_is_blocked() {
    let p = Installed::new(true);
    let shared = p.path().join(".claude/settings.json");
    let mut padded = br#"{"disableAllHooks": true}"#.to_vec();
    padded.extend(vec![b' '; 9 << 20]);
    std::fs::write(&shared, padded).unwrap();
    assert!(p.change("project_settings", Some(&shared)).is_some());
}

/// A stronger layer overrides the sandbox vigil set: in any settings file of a protected
/// project, a sandbox key `--protect` sets may not be turned the other way, nor every hook
/// off; the rest of another file is not vigil's.
#[test]
fn another_settings_file_may_not_turn_the_sandbox_or_the_hooks_off() {
    let p = Installed::new(true);
    let shared = p.path().join(".claude/settings.json");
    let user = p.home().join(".claude/settings.json");
    std::fs::create_dir_all(user.parent().unwrap()).unwrap();
    for (file, source) in [(&shared, "project_settings"), (&user, "user_settings")] {
        std::fs::write(file, r#"{"sandbox": {"allowUnsandboxedCommands": true}}"#).unwrap();
        let reason = p.change(source, Some(file)).expect("blocked");
        assert!(reason.contains("allowUnsandboxedCommands"), "{reason}");
        std::fs::write(file, r#"{"disableAllHooks": true}"#).unwrap();
        assert!(p.change(source, Some(file)).is_some());
        std::fs::write(file, r#"{"model": "opus", "hooks": {}}"#).unwrap();
        assert_eq!(p.change(source, Some(file)), None, "{source}");
        // Deleting another file takes nothing of vigil's away.
        std::fs::remove_file(file).unwrap();
        assert_eq!(p.change(source, Some(file)), None, "{source}");
    }
}

/// Changes Claude Code makes itself are staged in `.claude/.cc-writes/` and shown to the hook
/// there: judged as the settings file they are for.
#[test]
fn a_proposal_staged_beside_the_file_is_judged_as_that_file() {
    let p = Installed::new(true);
    let staged_dir = p.path().join(".claude/.cc-writes");
    std::fs::create_dir_all(&staged_dir).unwrap();
    let staged = staged_dir.join("proposal-1.json");
    let mut value = p.local_settings();
    value["hooks"].as_object_mut().unwrap().remove("Stop");
    std::fs::write(&staged, serde_json::to_vec(&value).unwrap()).unwrap();
    let reason = p.change("local_settings", Some(&staged)).expect("blocked");
    assert_contains!(reason, "settings.local.json");
    assert_contains!(reason, "Stop");
    value = p.local_settings();
    value["model"] = json!("haiku");
    std::fs::write(&staged, serde_json::to_vec(&value).unwrap()).unwrap();
    assert_eq!(p.change("local_settings", Some(&staged)), None);
}

/// Bad input blocks, and nothing is changed: vigil's file as something Claude Code cannot read,
/// deleted, a FIFO, huge; input with no source; hostile bytes.
#[test]
fn content_or_input_it_cannot_read_blocks_the_change() {
    let p = Installed::new(true);
    let before = std::fs::read(p.settings()).unwrap();
    for (bytes, named) in [
        (&b"not json"[..], "not valid JSON"),
        (&b"[1, 2]"[..], "not an object"),
        (&b"{\"hooks\": 3}"[..], "`hooks`"),
        (&b"\xff\xfe{}"[..], "not UTF-8"),
    ] {
        let shown = p.path().join(".claude/.cc-writes/p.json");
        std::fs::create_dir_all(shown.parent().unwrap()).unwrap();
        std::fs::write(&shown, bytes).unwrap();
        let reason = p.change("local_settings", Some(&shown)).expect(named);
        assert!(reason.contains(named), "{named}: {reason}");
    }
    let huge = p.path().join(".claude/.cc-writes/huge.json");
    std::fs::write(&huge, vec![b' '; 9 << 20]).unwrap();
    assert!(p.change("local_settings", Some(&huge)).is_some());
    let fifo = p.path().join(".claude/.cc-writes/fifo.json");
    mkfifo(&fifo);
    assert!(
        p.change("local_settings", Some(&fifo)).is_some(),
        "a FIFO is not waited on"
    );
    assert_eq!(
        std::fs::read(p.settings()).unwrap(),
        before,
        "nothing was changed"
    );
    let missing = p.path().join(".claude/.cc-writes/gone.json");
    assert!(p.change("local_settings", Some(&missing)).is_some());
    let reason = p
        .raw(br#"{"hook_event_name": "ConfigChange", "file_path": "/x"}"#.to_vec())
        .expect("no source blocks");
    assert!(reason.contains("source"), "{reason}");
    // Input read once, as every hook's: a field of the wrong type blocks the change.
    let reason = p
        .raw(
            br#"{"hook_event_name": "ConfigChange", "source": "local_settings", "session_id": 7}"#
                .to_vec(),
        )
        .expect("input it cannot read blocks");
    assert!(reason.contains("`session_id` must be a string"), "{reason}");
    std::fs::remove_file(p.settings()).unwrap();
    let reason = p
        .change("local_settings", Some(&p.settings()))
        .expect("deleting it");
    assert!(reason.contains("cannot be read"), "{reason}");
}

/// Issue 29: a blocked change is told where the person sees it. Under `claude -p` the hook's
/// own systemMessage is shown nowhere, so the session's record keeps it: the next Stop tells it
/// once, and `loop run` says it with its verdict.
#[test]
fn a_blocked_change_is_told_at_the_next_stop_once() {
    let p = Installed::new(true);
    let mut value = p.local_settings();
    value["disableAllHooks"] = json!(true);
    let reason = p.edit_local(&value).expect("blocked");
    let record = session_record_of(p.path(), "s1");
    assert_eq!(record["blocked_changes"][0]["reason"], reason.as_str());
    let stop = || {
        let payload = json!({"session_id": "s1", "hook_event_name": "Stop",
            "cwd": p.path(), "last_assistant_message": "Done."});
        stdout_of(&p.hook(payload.to_string()))
    };
    let first = stop();
    assert_contains!(first, "vigil blocked a settings change during this session");
    assert_contains!(first, "disableAllHooks");
    assert!(!stop().contains("blocked a settings change"), "told once");
}
