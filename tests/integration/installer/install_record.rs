//! SPEC §8, the install record: protected state (§9), so neither a record forged in the project
//! nor the loss of the project's `.vigil/` steers uninstall; an older vigil's record is read
//! and moved; an uninstall cut short still gives the original back.

use serde_json::{Value, json};

use super::{backup_of, merge, project_with};
use crate::support::*;

#[test]
fn install_then_uninstall_leaves_no_lock_record_or_state_dir_behind() {
    let (dir, path, _) = project_with("claude-user-hooks.json");
    let before = tree(dir.path());
    ok(merge("install", &path, false, &[]));
    assert!(
        !tree(dir.path())
            .iter()
            .any(|f| f.ends_with("vigil-lock") || f.ends_with(".lock")),
        "locks go once released"
    );
    ok(merge("uninstall", &path, false, &[]));
    assert_eq!(tree(dir.path()), before);
}

#[test]
fn an_uninstall_killed_before_its_record_is_saved_still_gives_the_original_back_later() {
    let (dir, path, _) = project_with("claude-four-spaces.json");
    let original = std::fs::read(&path).unwrap();
    ok(merge("install", &path, false, &[]));
    let record = install_record_of(dir.path());
    let kept = std::fs::read(&record).unwrap();
    ok(merge("uninstall", &path, false, &[]));
    // As if it died after restoring the file and dropping the backup, before the record.
    std::fs::create_dir_all(record.parent().unwrap()).unwrap();
    std::fs::write(&record, kept).unwrap();
    ok(merge("install", &path, false, &[]));
    assert_eq!(
        std::fs::read(backup_of(&path)).unwrap(),
        original,
        "the backup is taken again"
    );
    ok(merge("uninstall", &path, false, &[]));
    assert_eq!(std::fs::read(&path).unwrap(), original, "byte for byte");
}

/// SPEC §2, the install record is protected state: removing the project's `.vigil/` (as a new
/// user tidying up, or an agent, would) loses nothing; uninstall still takes back exactly what
/// install added.
#[test]
fn the_install_record_is_protected_state_and_survives_the_projects_vigil_folder() {
    let (dir, path, _) = project_with("claude-four-spaces.json");
    let original = std::fs::read(&path).unwrap();
    ok(merge("install", &path, false, &[]));
    let record = install_record_of(dir.path());
    assert!(record.is_file(), "the record is in the protected state");
    let _ = std::fs::remove_dir_all(dir.path().join(".vigil"));
    let again = merge("install", &path, false, &[]);
    assert_stdout_contains(&again, "already installed");
    ok(merge("uninstall", &path, false, &[]));
    assert_eq!(std::fs::read(&path).unwrap(), original);
    assert!(!record.exists(), "the last uninstall takes the record away");
    assert!(!dir.path().join(".vigil").exists(), "and leaves no .vigil/");
}

/// The agent can write the project: a record it forges there (`.vigil/installed.json`, where
/// earlier builds of vigil kept it) is not read while the protected one is there, so it cannot choose
/// what uninstall takes out or puts back.
#[test]
fn a_record_forged_in_the_project_does_not_steer_uninstall() {
    let (dir, path, _) = project_with("claude-user-hooks.json");
    let original = std::fs::read(&path).unwrap();
    ok(merge("install", &path, false, &[]));
    let key = std::fs::canonicalize(&path).unwrap().display().to_string();
    let forged = json!({"schema": "vigil.installed/v1", "files": {key: {
        "entries": [], "created_file": true, "created_hooks": false, "created_events": [],
        "written_sha256": "0".repeat(64)}}});
    std::fs::create_dir_all(dir.path().join(".vigil")).unwrap();
    std::fs::write(dir.path().join(".vigil/installed.json"), forged.to_string()).unwrap();
    ok(merge("uninstall", &path, false, &[]));
    assert_eq!(
        std::fs::read(&path).unwrap(),
        original,
        "the user's file is back, not deleted as the forged record said it was made"
    );
}

/// An install made by an earlier build of vigil has its record in the project: it is still
/// read, so that install's entries are taken out, and the next write moves it into the
/// protected state. Read from where the agent can write, it is trusted with nothing more: no
/// file is deleted or put back on its word.
#[test]
fn a_record_an_older_vigil_left_in_the_project_is_read_and_moved() {
    let (dir, path, _) = project_with("claude-four-spaces.json");
    let original = std::fs::read(&path).unwrap();
    ok(merge("install", &path, false, &[]));
    let record = install_record_of(dir.path());
    let legacy = dir.path().join(".vigil/installed.json");
    std::fs::create_dir_all(legacy.parent().unwrap()).unwrap();
    std::fs::rename(&record, &legacy).unwrap();
    ok(merge("install", &path, false, &["--run", "make test"]));
    assert!(record.is_file(), "moved into the protected state");
    assert!(!legacy.exists(), "and gone from the project");
    std::fs::create_dir_all(legacy.parent().unwrap()).unwrap();
    std::fs::rename(&record, &legacy).unwrap();
    ok(merge("uninstall", &path, false, &[]));
    let original: Value = serde_json::from_slice(&original).unwrap();
    assert_eq!(
        json_of(&path),
        original,
        "vigil's entries are out, the rest is as it was"
    );
    assert!(!legacy.exists() && !dir.path().join(".vigil").exists());
}

/// Uninstall says where vigil stays installed in the project, if anywhere (install.sh keeps
/// the slash commands for those).
#[test]
fn uninstall_names_the_files_vigil_stays_installed_in() {
    let (dir, path, _) = project_with("claude-four-spaces.json");
    // The other engine's file of the same project (one Claude Code file at a time: a second
    // one is refused).
    let shared = dir.path().join(".codex/hooks.json");
    ok(merge("install", &path, false, &[]));
    ok(merge("install", &shared, true, &[]));
    let out = merge("uninstall", &path, false, &[]);
    let said_now = stdout_of(&out);
    assert_contains!(said_now, "vigil stays installed in ");
    assert_contains!(said_now, "hooks.json");
    assert_lacks!(said_now, "settings.local.json\n");
    let out = merge("uninstall", &shared, true, &[]);
    assert_lacks!(stdout_of(&out), "stays installed", "{}", said(&out));
}

/// Issue 31: with every vigil file gone (the install record in the state home, the project's
/// `.vigil/`), uninstall still takes vigil out: the settings file decides, the user's original
/// comes back byte for byte from its backup, and a file with more of the user's in it keeps
/// all of that.
#[test]
fn uninstall_works_from_the_settings_file_when_every_vigil_file_is_gone() {
    let (dir, path, _) = project_with("claude-four-spaces.json");
    let original = std::fs::read(&path).unwrap();
    ok(merge("install", &path, false, &["--run", "true"]));
    let forget = || {
        let record = install_record_of(dir.path());
        let _ = std::fs::remove_file(&record);
        let _ = std::fs::remove_dir_all(dir.path().join(".vigil"));
        assert!(!record.exists());
    };
    forget();
    let out = ok(merge("uninstall", &path, false, &[]));
    assert!(
        stdout_of(&out).contains("removed 7 vigil hook handlers")
            && stdout_of(&out).contains("your original again")
            // Each is named: a handler taken for vigil's by its binary's name is seen.
            && stdout_of(&out).contains("/stop-gate --run true"),
        "{}",
        said(&out)
    );
    assert_eq!(std::fs::read(&path).unwrap(), original);
    // The user edited the file since: their edit stays, vigil's handlers go.
    ok(merge("install", &path, false, &[]));
    let mut value = json_of(&path);
    value["model"] = json!("opus");
    std::fs::write(&path, serde_json::to_vec_pretty(&value).unwrap()).unwrap();
    forget();
    ok(merge("uninstall", &path, false, &[]));
    let text = std::fs::read_to_string(&path).unwrap();
    assert_lacks!(text, "stop-gate");
    assert_lacks!(text, "session-");
    assert_eq!(json_of(&path)["model"], "opus");
    let mut expected: Value = serde_json::from_slice(&original).unwrap();
    expected["model"] = json!("opus");
    assert_eq!(json_of(&path), expected);
    // A re-install that changes a flag after the record was lost adopts the groups it finds,
    // so the uninstall after it takes them all.
    ok(merge("install", &path, false, &["--run", "true"]));
    forget();
    ok(merge("install", &path, false, &["--run", "false"]));
    ok(merge("uninstall", &path, false, &[]));
    let text = std::fs::read_to_string(&path).unwrap();
    assert_lacks!(text, "stop-gate");
    assert_lacks!(text, "session-");
    // And then there is nothing of vigil's: said so, the file as it is.
    let before = std::fs::read(&path).unwrap();
    let out = merge("uninstall", &path, false, &[]);
    assert!(stdout_of(&out).contains("vigil is not installed in this file"));
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

/// settings-merge ACTION on `path` under strace, injecting `errno` at every one of `syscalls`
/// that names `at`.
fn merge_faulted(
    action: &str,
    path: &std::path::Path,
    at: &std::path::Path,
    syscalls: &str,
    errno: &str,
) -> std::process::Output {
    let mut cmd = faulted(
        "settings-merge",
        Some(at),
        syscalls,
        &format!("error={errno}"),
    );
    cmd.arg(action).arg("--settings").arg(path);
    if action == "install" {
        cmd.arg("--bin-dir").arg(bin_dir());
    }
    output_with_stdin(cmd, b"")
}

/// Issue 44 item 3, the installer never loses the user's bytes: a `.vigil-backup` that cannot
/// be read (EIO) makes uninstall refuse, with one line, changing nothing: the settings file and
/// the backup stay. Unfaulted, the next uninstall gives the original back byte for byte.
/// Before, uninstall said "removed vigil's hooks", wrote the file normalized and deleted the
/// backup: the original bytes were gone.
#[test]
fn an_unreadable_backup_makes_uninstall_refuse_and_keep_it() {
    if !strace_runs() {
        return;
    }
    let (_dir, path, _) = project_with("claude-four-spaces.json");
    let original = std::fs::read(&path).unwrap();
    ok(merge("install", &path, false, &[]));
    let installed = std::fs::read(&path).unwrap();
    let backup = backup_of(&path);
    assert_eq!(std::fs::read(&backup).unwrap(), original);
    let out = merge_faulted("uninstall", &path, &backup, "read", "EIO");
    assert_ne!(out.status.code(), Some(0), "{}", said(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_contains!(stderr, "Input/output error");
    assert_contains!(
        stderr,
        "it may hold your original settings, so nothing was changed"
    );
    assert!(
        std::fs::read(&path).unwrap() == installed,
        "the file changed"
    );
    assert!(
        std::fs::read(&backup).unwrap() == original,
        "the backup changed"
    );
    ok(merge("uninstall", &path, false, &[]));
    assert!(
        std::fs::read(&path).unwrap() == original,
        "not the original"
    );
}

/// Issue 44 item 3: a full disk (ENOSPC) or an I/O error making the project's directory in the
/// state home refuses the install with one line, and nothing is changed: the record never moves
/// into the project's `.vigil/state/`, where the agent writes. Before, it did, with exit 0.
#[test]
fn an_install_whose_record_cannot_go_to_the_state_home_is_refused() {
    if !strace_runs() {
        return;
    }
    for errno in ["ENOSPC", "EIO"] {
        let (dir, path, _) = project_with("claude-four-spaces.json");
        let original = std::fs::read(&path).unwrap();
        let place = install_record_of(dir.path())
            .parent()
            .unwrap()
            .to_path_buf();
        let out = merge_faulted("install", &path, &place, "mkdir,mkdirat", errno);
        assert_ne!(out.status.code(), Some(0), "{errno}: {}", said(&out));
        assert_contains!(
            String::from_utf8_lossy(&out.stderr),
            "cannot make the install record's place"
        );
        assert!(
            std::fs::read(&path).unwrap() == original,
            "{errno}: the file changed"
        );
        assert!(
            !dir.path().join(".vigil/state").exists(),
            "{errno}: the record moved into the project"
        );
    }
}

/// Issue 44 item 3: a settings file larger than the 8 MiB vigil reads is refused with one line
/// before it is read whole, and stays as it was.
#[test]
fn a_settings_file_past_8_mib_is_refused_before_it_is_read() {
    let (_dir, path, _) = project_with("claude-four-spaces.json");
    let mut big = b"{\"model\": \"".to_vec();
    big.extend(std::iter::repeat_n(b'x', 9 << 20));
    big.extend(b"\"}\n");
    std::fs::write(&path, &big).unwrap();
    for action in ["install", "uninstall", "check"] {
        let out = merge(action, &path, false, &[]);
        assert_ne!(out.status.code(), Some(0), "{action}: {}", said(&out));
        // The doctor's `[fail]` line is on stdout; the others' error on stderr.
        assert_contains!(said(&out), "larger than the 8 MiB vigil reads");
        assert!(
            std::fs::read(&path).unwrap() == big,
            "{action}: the file changed"
        );
    }
}
