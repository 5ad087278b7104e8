//! SPEC §8, `settings-merge install|uninstall`: idempotent, byte for byte, keeping every entry
//! of the user's in order; refusing a malformed file unchanged; a backup, a lock, atomic
//! writes, the file's permissions and links kept; uninstall taking back exactly what install
//! added.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::Path;

use serde_json::{Value, json};

use super::{backup_of, install_with_bin_dir, merge, project_with, set_stop_timeout};
use crate::support::*;

fn vigil_commands(value: &Value) -> Vec<String> {
    let mut found = Vec::new();
    for (_, list) in value["hooks"].as_object().into_iter().flatten() {
        for group in list.as_array().unwrap() {
            for handler in group["hooks"].as_array().into_iter().flatten() {
                // Independent of vigil's own recognition: any handler naming a vigil binary.
                let command = handler["command"].as_str().unwrap_or_default();
                if vigil::cli::flags::BINARIES
                    .iter()
                    .any(|b| command.contains(b))
                {
                    found.push(command.to_string());
                }
            }
        }
    }
    found
}

fn user_groups(value: &Value) -> Vec<Value> {
    let mut groups = Vec::new();
    for (_, list) in value["hooks"].as_object().unwrap() {
        for group in list.as_array().unwrap() {
            if !vigil::cli::flags::BINARIES
                .iter()
                .any(|b| group.to_string().contains(b))
            {
                groups.push(group.clone());
            }
        }
    }
    groups
}

const GOOD: [&str; 3] = [
    "claude-user-hooks.json",
    "claude-four-spaces.json",
    "codex-hooks.json",
];

#[test]
fn install_twice_is_byte_identical_and_keeps_the_users_hooks() {
    for name in GOOD {
        let (_dir, path, codex) = project_with(name);
        let original = json_of(&path);
        assert!(
            merge("install", &path, codex, &["--run", "cargo test"])
                .status
                .success(),
            "{name}"
        );
        let once = std::fs::read(&path).unwrap();
        let installed = json_of(&path);
        assert_eq!(
            user_groups(&installed),
            user_groups(&original),
            "{name}: the user's hooks"
        );
        for (key, value) in original.as_object().unwrap() {
            if key != "hooks" {
                assert_eq!(&installed[key], value, "{name}: {key}");
            }
        }
        let keys: Vec<&String> = installed.as_object().unwrap().keys().collect();
        let original_keys: Vec<&String> = original.as_object().unwrap().keys().collect();
        assert_eq!(keys, original_keys, "{name}: key order");
        assert!(
            once.ends_with(b"}\n") && String::from_utf8_lossy(&once).contains("\n  \""),
            "{name}: 2-space indentation, final newline"
        );
        ok(merge("install", &path, codex, &["--run", "cargo test"]));
        assert_eq!(
            std::fs::read(&path).unwrap(),
            once,
            "{name}: a second install changes nothing"
        );
    }
}

#[test]
fn large_integers_and_non_ascii_survive_byte_for_byte() {
    let (_dir, path, _) = project_with("claude-user-hooks.json");
    ok(merge("install", &path, false, &[]));
    let text = std::fs::read_to_string(&path).unwrap();
    // A large integer was rounded.
    assert_contains!(text, "12345678901234567890123");
    assert!(text.contains("2.50"), "a number was rewritten");
    assert!(text.contains("Grüße, 世界 ✓"));
}

#[test]
fn install_then_uninstall_restores_the_original_byte_for_byte() {
    for name in GOOD {
        let (dir, path, codex) = project_with(name);
        let original = std::fs::read(&path).unwrap();
        ok(merge("install", &path, codex, &[]));
        assert!(
            path.with_file_name(format!(
                "{}.vigil-backup",
                path.file_name().unwrap().to_string_lossy()
            ))
            .exists()
        );
        let record: Value =
            serde_json::from_slice(&std::fs::read(install_record_of(dir.path())).unwrap()).unwrap();
        assert_eq!(record["schema"], "vigil.installed/v1");
        assert!(
            !dir.path().join(".vigil").exists(),
            "the record is in the protected state, not the project"
        );
        ok(merge("uninstall", &path, codex, &[]));
        assert_eq!(std::fs::read(&path).unwrap(), original, "{name}");
    }
}

#[test]
fn install_into_a_missing_file_then_uninstall_removes_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".claude/settings.local.json");
    ok(merge("install", &path, false, &[]));
    assert!(json_of(&path)["hooks"]["Stop"].is_array());
    ok(merge("uninstall", &path, false, &[]));
    assert!(!path.exists());
}

#[test]
fn uninstall_after_the_user_changed_the_file_removes_only_vigils_entries() {
    let (_dir, path, _) = project_with("claude-user-hooks.json");
    let original = json_of(&path);
    ok(merge("install", &path, false, &[]));
    let mut edited = json_of(&path);
    edited["model"] = json!("opus");
    std::fs::write(&path, serde_json::to_vec_pretty(&edited).unwrap()).unwrap();
    ok(merge("uninstall", &path, false, &[]));
    let after = json_of(&path);
    assert_eq!(after["model"], "opus", "the user's later change is kept");
    assert_eq!(
        after["hooks"], original["hooks"],
        "vigil's entries, and only they, are gone"
    );
}

#[test]
fn a_different_run_command_replaces_vigils_stop_entry() {
    let (_dir, path, _) = project_with("claude-user-hooks.json");
    ok(merge("install", &path, false, &["--run", "cargo test"]));
    ok(merge("install", &path, false, &["--run", "make check"]));
    let stops = json_of(&path)["hooks"]["Stop"].to_string();
    // The gate once, and the waiter beside it (SPEC §10).
    assert_eq!(stops.matches("stop-gate").count(), 2, "{stops}");
    assert_eq!(stops.matches("stop-gate wait").count(), 1, "{stops}");
    assert!(stops.contains("make check"));
}

#[test]
fn malformed_files_are_refused_and_left_unchanged() {
    let cases = [
        ("bad-comment.json", Some("2:")),
        ("bad-trailing-comma.json", Some("3:")),
        ("bad-truncated.json", Some("1:")),
        ("bad-bom.json", None),
        ("bad-root-array.json", None),
        ("bad-root-null.json", None),
        ("bad-root-number.json", None),
        ("bad-hooks-string.json", Some("1:")),
        ("bad-event-object.json", Some("1:")),
    ];
    for (name, position) in cases {
        let (dir, path, _) = project_with(name);
        let before = std::fs::read(&path).unwrap();
        let out = merge("install", &path, false, &[]);
        let stderr = usage_error(&out, "settings-merge");
        assert!(stderr.contains("nothing was changed"), "{name}: {stderr}");
        if let Some(position) = position {
            assert_contains!(
                stderr,
                &format!("settings.local.json:{position}"),
                "{name}: line and column"
            );
        }
        assert_eq!(std::fs::read(&path).unwrap(), before, "{name}");
        assert!(
            !dir.path().join(".vigil").exists(),
            "{name}: nothing recorded"
        );
        assert_eq!(
            tree(&dir.path().join(".claude")).len(),
            1 + usize::from(
                tree(&dir.path().join(".claude"))
                    .iter()
                    .any(|f| f.ends_with(".vigil-lock"))
            ),
            "{name}: no backup"
        );
    }
}

#[test]
fn eight_installers_at_once_leave_each_entry_once() {
    let (dir, path, _) = project_with("claude-user-hooks.json");
    let original = std::fs::read(&path).unwrap();
    // Installs, reinstalls with another check and uninstalls, all at once, on this file and
    // on a second settings file of the same project (which shares the install record).
    let local = dir.path().join(".claude/settings.json");
    std::fs::copy(&path, &local).unwrap();
    let children: Vec<_> = (0..8)
        .map(|i| {
            let mut cmd = vigil_process("settings-merge");
            match i % 4 {
                0 | 1 => cmd.arg("install"),
                2 => cmd.arg("install").args(["--run", "make test"]),
                _ => cmd.arg("uninstall"),
            };
            cmd.arg("--settings")
                .arg(if i % 2 == 0 { &path } else { &local });
            if i % 4 != 3 {
                cmd.arg("--bin-dir").arg(bin_dir());
            }
            cmd.stdout(std::process::Stdio::null()).spawn().unwrap()
        })
        .collect();
    // One of the two files wires vigil at a time (issue 31): an install into the other is
    // refused while it does, never let through by the race.
    for mut child in children {
        let code = child.wait().unwrap().code();
        assert!(matches!(code, Some(0 | 2)), "{code:?}");
    }
    let wired: Vec<_> = [&path, &local]
        .into_iter()
        .filter(|file| std::fs::read_to_string(file).unwrap().contains("stop-gate"))
        .collect();
    assert!(wired.len() <= 1, "vigil wired twice: {wired:?}");
    if wired.is_empty() {
        ok(merge("install", &path, false, &[]));
    }
    for file in [&path, &local] {
        if !std::fs::read_to_string(file).unwrap().contains("stop-gate") {
            continue;
        }
        ok(merge("install", file, false, &[]));
        let text = std::fs::read_to_string(file).unwrap();
        // A re-install keeps the check an earlier one added, so the Stop's stop-gate may
        // carry `--run`: count the binary, not the end of its command.
        // Stop's gate, Stop's waiter and UserPromptSubmit run stop-gate.
        for (binary, times) in [("/stop-gate", 3), ("session-start-loader", 1)] {
            assert_eq!(
                text.matches(binary).count(),
                times,
                "{binary} (Stop and UserPromptSubmit run stop-gate): {text}"
            );
        }
        assert_eq!(
            text.matches("session-end-handoff").count(),
            3,
            "SessionEnd, PreCompact and StopFailure"
        );
        assert_eq!(
            std::fs::read(backup_of(file)).unwrap(),
            original,
            "the backup is the user's file, never one with vigil in it"
        );
    }
    // Both files' records survived the interleaving: each uninstall restores its original.
    for file in [&path, &local] {
        ok(merge("uninstall", file, false, &[]));
        assert_eq!(std::fs::read(file).unwrap(), original);
    }
}

#[test]
fn permissions_are_kept() {
    for mode in [0o600, 0o644] {
        let (_dir, path, _) = project_with("claude-user-hooks.json");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        ok(merge("install", &path, false, &[]));
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            mode
        );
    }
}

#[test]
fn a_symlinked_settings_file_stays_a_symlink() {
    let (dir, path, _) = project_with("claude-user-hooks.json");
    let real = dir.path().join("dotfiles-settings.json");
    std::fs::rename(&path, &real).unwrap();
    std::os::unix::fs::symlink(&real, &path).unwrap();
    let original = std::fs::read(&real).unwrap();
    ok(merge("install", &path, false, &[]));
    assert!(is_symlink(&path));
    assert_contains!(std::fs::read_to_string(&real).unwrap(), "stop-gate");
    ok(merge("uninstall", &path, false, &[]));
    assert!(is_symlink(&path));
    assert_eq!(std::fs::read(&real).unwrap(), original);
}

#[test]
fn dry_run_prints_the_diff_and_changes_nothing() {
    let (dir, path, _) = project_with("claude-user-hooks.json");
    let before = std::fs::read(&path).unwrap();
    let out = merge("install", &path, false, &["--dry-run"]);
    assert!(out.status.success());
    let diff = stdout_of(&out);
    assert_starts_with!(diff, "--- ");
    assert_contains!(diff, "+            \"command\": ");
    assert_contains!(diff, "stop-gate");
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert!(!dir.path().join(".vigil").exists());
}

/// vigil installed into `path`, the user's edit of the model, a reinstall with another check,
/// then the uninstall: the file left.
fn edited_between_installs_then_uninstalled(path: &Path) -> Value {
    ok(merge("install", path, false, &[]));
    let mut edited = json_of(path);
    edited["model"] = json!("opus");
    std::fs::write(path, serde_json::to_vec_pretty(&edited).unwrap()).unwrap();
    ok(merge("install", path, false, &["--run", "make test"]));
    ok(merge("uninstall", path, false, &[]));
    json_of(path)
}

#[test]
fn a_reinstall_after_an_edit_never_restores_the_stale_backup() {
    let (_dir, path, _) = project_with("claude-user-hooks.json");
    // Reinstalling with another check rewrites the file; the edit made in between must
    // survive the uninstall that follows.
    let after = edited_between_installs_then_uninstalled(&path);
    assert_eq!(after["model"], "opus", "the edit between installs is kept");
    assert!(vigil_commands(&after).is_empty(), "{after}");
}

#[test]
fn a_settings_file_deleted_after_install_is_recreated_then_removed_on_uninstall() {
    let (_dir, path, _) = project_with("claude-user-hooks.json");
    ok(merge("install", &path, false, &[]));
    std::fs::remove_file(&path).unwrap();
    ok(merge("install", &path, false, &[]));
    ok(merge("uninstall", &path, false, &[]));
    assert!(
        !path.exists(),
        "the file vigil created is removed, not replaced by the old backup"
    );
}

#[test]
fn a_vigil_group_in_a_file_with_no_record_is_adopted_and_goes_with_uninstall() {
    // The user copied vigil's Stop group by hand (say, from a teammate's settings), or lost
    // the install record with the state home: the two look the same. Install must not back up
    // a file that already runs vigil as if it were the original, and (issue 31) the groups it
    // finds are vigil's from then on: an uninstall that left them would leave vigil running.
    let (dir, path, _) = project_with("claude-user-hooks.json");
    ok(merge("install", &path, false, &[]));
    let stop_group = json_of(&path)["hooks"]["Stop"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g.to_string().contains("stop-gate"))
        .cloned()
        .unwrap();
    ok(merge("uninstall", &path, false, &[]));
    let mut own = json_of(&path);
    own["hooks"]["Stop"]
        .as_array_mut()
        .unwrap()
        .push(stop_group.clone());
    let own_bytes = serde_json::to_vec_pretty(&own).unwrap();
    std::fs::write(&path, &own_bytes).unwrap();
    let _ = std::fs::remove_dir_all(dir.path().join(".vigil"));

    let out = merge("install", &path, false, &[]);
    assert!(out.status.success());
    assert_stdout_contains(&out, "adopted 1 vigil hook group");
    assert!(
        !backup_of(&path).exists(),
        "a file that already runs vigil is not backed up as the original"
    );
    let installed = json_of(&path);
    assert_eq!(
        installed["hooks"]["Stop"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|g| **g == stop_group)
            .count(),
        1,
        "nothing added twice"
    );
    ok(merge("uninstall", &path, false, &[]));
    let after = json_of(&path);
    assert_lacks!(
        after.to_string(),
        "stop-gate",
        "vigil runs no more: {after}"
    );
    assert!(
        !after["hooks"]
            .as_object()
            .unwrap()
            .contains_key("SessionEnd"),
        "what vigil added is gone"
    );
}

#[test]
fn uninstall_finds_vigils_group_after_the_user_reformatted_it() {
    let (_dir, path, _) = project_with("claude-user-hooks.json");
    let original = json_of(&path);
    ok(merge("install", &path, false, &[]));
    set_stop_timeout(&path, |group| group.to_string().contains("stop-gate"), 120);
    let out = merge("uninstall", &path, false, &[]);
    assert!(out.status.success());
    let after = json_of(&path);
    assert!(vigil_commands(&after).is_empty(), "{after}");
    assert_eq!(after["hooks"], original["hooks"]);
}

#[test]
fn uninstall_names_what_it_could_not_find() {
    let (_dir, path, _) = project_with("claude-user-hooks.json");
    ok(merge("install", &path, false, &[]));
    let mut edited = json_of(&path);
    edited["hooks"]["Stop"]
        .as_array_mut()
        .unwrap()
        .retain(|g| !g.to_string().contains("stop-gate"));
    std::fs::write(&path, serde_json::to_vec(&edited).unwrap()).unwrap();
    let out = merge("uninstall", &path, false, &[]);
    assert!(out.status.success());
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("Stop stop-gate"), "{said}");
    assert!(vigil_commands(&json_of(&path)).is_empty());
}

#[test]
fn a_fifo_in_place_of_the_settings_file_is_refused_not_waited_on() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".claude/settings.local.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    mkfifo(&path);
    let started = std::time::Instant::now();
    let out = merge("install", &path, false, &[]);
    usage_error(&out, "settings-merge");
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    assert!(
        std::fs::symlink_metadata(&path)
            .unwrap()
            .file_type()
            .is_fifo()
    );
}

#[test]
fn a_read_only_settings_file_is_refused_and_left_as_it_is() {
    let (dir, path, _) = project_with("claude-user-hooks.json");
    let before = std::fs::read(&path).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
    let out = merge("install", &path, false, &[]);
    let stderr = usage_error(&out, "settings-merge");
    assert!(stderr.contains("read-only"), "{stderr}");
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert!(!dir.path().join(".vigil").exists());
    assert!(!backup_of(&path).exists());
}

#[test]
fn a_settings_folder_that_cannot_be_made_is_named_in_the_one_line() {
    // A file where `.claude/` goes: no one, root included, can make the folder.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(".claude"), "a file").unwrap();
    let path = dir.path().join(".claude/settings.json");
    let out = merge("install", &path, false, &[]);
    let stderr = usage_error(&out, "settings-merge");
    let folder = dir.path().join(".claude");
    assert!(
        stderr.contains(&format!("`{}`", folder.display())) && !stderr.contains("os error"),
        "{stderr}"
    );
    assert_eq!(std::fs::read(&folder).unwrap(), b"a file");
}

#[test]
fn a_command_that_only_mentions_a_binary_is_not_taken_for_vigils() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".claude/settings.local.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let user = json!({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "echo stop-gate is not installed here"}]}]}});
    std::fs::write(&path, serde_json::to_vec_pretty(&user).unwrap()).unwrap();
    let out = settings_merge()
        .arg("check")
        .arg("--settings")
        .arg(&path)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    // An echo is not vigil's handler.
    assert_contains!(said, "Stop does not run stop-gate");
    assert_lacks!(said, "echo stop-gate is not installed here` runs");
    // Uninstall with a lost record never removes it either.
    ok(merge("install", &path, false, &[]));
    ok(merge("uninstall", &path, false, &[]));
    assert_eq!(json_of(&path), user);
}

#[test]
fn a_file_vigil_created_and_the_user_then_edited_survives_a_reinstall_and_uninstall() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".claude/settings.local.json");
    let after = edited_between_installs_then_uninstalled(&path);
    assert_eq!(
        after["model"], "opus",
        "the file is the user's now: {after}"
    );
    assert!(vigil_commands(&after).is_empty(), "{after}");
}

#[test]
fn uninstall_never_takes_the_users_own_gate_for_vigils_edited_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".claude/settings.local.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let own = json!({"type": "command", "command": "/home/me/mygate/stop-gate --run 'make lint'"});
    let user = json!({"hooks": {"Stop": [{"hooks": [own.clone()]}]}});
    std::fs::write(&path, serde_json::to_vec_pretty(&user).unwrap()).unwrap();
    ok(merge("install", &path, false, &[]));
    set_stop_timeout(&path, |group| group["hooks"][0] != own, 900);
    ok(merge("uninstall", &path, false, &[]));
    assert_eq!(
        json_of(&path)["hooks"]["Stop"],
        json!([{"hooks": [own]}]),
        "the user's gate stays and vigil's edited one goes"
    );
}

#[test]
fn a_bin_dir_that_needs_quoting_is_still_recognized_as_vigils() {
    let (dir, path, _) = project_with("claude-user-hooks.json");
    let original = json_of(&path);
    let odd = dir.path().join("o'neil & co/bin");
    install_with_bin_dir(&path, &odd);
    let said = stdout_of(&merge("check", &path, false, &[]));
    for line in [
        "[ok] Stop runs stop-gate",
        "[ok] SessionStart runs session-start-loader",
    ] {
        assert!(said.contains(line), "{said}");
    }
    set_stop_timeout(&path, |group| group.to_string().contains("o'neil"), 900);
    ok(merge("uninstall", &path, false, &[]));
    assert_eq!(json_of(&path)["hooks"], original["hooks"]);
}

#[test]
fn an_install_whose_write_never_happened_keeps_the_backup_of_the_original() {
    let (_dir, path, _) = project_with("claude-four-spaces.json");
    let original = std::fs::read(&path).unwrap();
    ok(merge("install", &path, false, &[]));
    // As if the process died after recording, before the file was written.
    std::fs::write(&path, &original).unwrap();
    ok(merge("install", &path, false, &[]));
    ok(merge("uninstall", &path, false, &[]));
    assert_eq!(std::fs::read(&path).unwrap(), original, "byte for byte");
}

#[test]
fn a_reinstall_replaces_vigils_edited_stop_entry_rather_than_adding_a_second() {
    let (_dir, path, _) = project_with("claude-user-hooks.json");
    ok(merge("install", &path, false, &[]));
    set_stop_timeout(
        &path,
        |group| group.to_string().contains("stop-gate") && !is_waiter(&group.to_string()),
        900,
    );
    ok(merge("install", &path, false, &["--run", "make test"]));
    let settings = json_of(&path);
    let stop_gates: Vec<String> =
        vigil_commands(&json!({"hooks": {"Stop": settings["hooks"]["Stop"]}}))
            .into_iter()
            .filter(|c| c.contains("stop-gate") && !is_waiter(c))
            .collect();
    assert_eq!(stop_gates.len(), 1, "{stop_gates:?}");
    assert!(stop_gates[0].contains("make test"));
}

/// The smaller traps of the first hour (issue 15, item 9), each as the newcomer met it.
#[test]
fn first_hour_messages_name_the_real_problem_and_nothing_is_left_behind() {
    // Uninstall where vigil never was makes nothing.
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join(".claude/settings.local.json");
    let out = merge("uninstall", &local, false, &[]);
    assert!(out.status.success());
    assert!(stdout_of(&out).contains("not installed"));
    assert!(!dir.path().join(".claude").exists(), "no .claude/ made");
    // Codex: install says whether Codex will run the hooks; uninstall leaves no empty .codex/.
    let hooks = dir.path().join(".codex/hooks.json");
    let out = merge("install", &hooks, true, &[]);
    assert_contains!(stdout_of(&out), "Codex skips these hooks");
    let config = dir.path().join("config.toml");
    let out = ok(merge(
        "install",
        &hooks,
        true,
        &["--trust", "--codex-config", config.to_str().unwrap()],
    ));
    assert_contains!(stdout_of(&out), "trust for vigil's hooks is recorded in");
    ok(merge("uninstall", &hooks, false, &[]));
    assert!(!dir.path().join(".codex").exists(), "no empty .codex/ left");
    assert!(
        !dir.path().join(".vigil").exists(),
        "no .vigil/ or lock left"
    );
    // The whole .codex/ deleted by hand: uninstall still takes back the trust and the record.
    let out = merge(
        "install",
        &hooks,
        true,
        &["--trust", "--codex-config", config.to_str().unwrap()],
    );
    assert!(out.status.success());
    assert_contains!(std::fs::read_to_string(&config).unwrap(), "trusted_hash");
    std::fs::remove_dir_all(dir.path().join(".codex")).unwrap();
    let out = ok(merge("uninstall", &hooks, false, &[]));
    assert_contains!(stdout_of(&out), "taken back");
    assert_lacks!(std::fs::read_to_string(&config).unwrap(), "trusted_hash");
    assert!(!dir.path().join(".vigil").exists());
    assert!(!dir.path().join(".codex").exists(), "not made again");
    // A comment in a settings file is named as one.
    std::fs::create_dir_all(local.parent().unwrap()).unwrap();
    std::fs::write(&local, "{\n  // mine\n  \"model\": \"x\"\n}\n").unwrap();
    let out = merge("install", &local, false, &[]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(":2:3: not valid JSON (a comment"),
        "{stderr}"
    );
    // One name at the start of a line, never two.
    for binary in ["settings-merge", "marker-writer"] {
        let out = vigil_process(binary).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2));
        assert_eq!(stderr.matches(binary).count(), 1, "{stderr}");
    }
}

/// Issue 31: vigil wired in two settings files Claude Code merges for one project (the
/// project's two, or yours), or beside the vigil plugin, would run every hook twice and
/// advance a loop twice per stop: the install is refused, in one line naming the other place,
/// and changes nothing.
#[test]
fn a_second_wiring_is_refused_at_install_and_nothing_changes() {
    let home = tempfile::tempdir().unwrap();
    let project = Project::git();
    let local = project.path().join(".claude/settings.local.json");
    let shared = project.path().join(".claude/settings.json");
    let run = |args: &[&str]| {
        settings_merge()
            .env("HOME", home.path())
            .current_dir(project.path())
            .args(args)
            .arg("--bin-dir")
            .arg(bin_dir())
            .output()
            .unwrap()
    };
    ok(run(&["install", "--settings", local.to_str().unwrap()]));
    let out = run(&["install", "--settings", shared.to_str().unwrap()]);
    let stderr = usage_error(&out, "settings-merge");
    assert_contains!(
        stderr,
        "vigil is wired in ./.claude/settings.local.json already"
    );
    assert!(!shared.exists(), "nothing written");
    // Yours wires it for every project: the project's own install is refused too.
    let user = home.path().join(".claude/settings.json");
    ok(run(&["uninstall", "--settings", local.to_str().unwrap()]));
    ok(run(&["install", "--settings", user.to_str().unwrap()]));
    let before = std::fs::read(&local).ok();
    let out = run(&["install", "--settings", local.to_str().unwrap()]);
    assert_exit(&out, 2);
    assert!(said(&out).contains("vigil is wired in ~/.claude/settings.json already"));
    assert_eq!(std::fs::read(&local).ok(), before);
    // The plugin enabled is a wiring too.
    ok(run(&["uninstall", "--settings", user.to_str().unwrap()]));
    std::fs::write(&shared, "{\"enabledPlugins\": {\"vigil@vigil\": true}}\n").unwrap();
    let out = run(&["install", "--settings", local.to_str().unwrap()]);
    assert_exit(&out, 2);
    assert!(
        said(&out).contains("the vigil plugin (enabled in ./.claude/settings.json;"),
        "{}",
        said(&out)
    );
    // Disabled by a file Claude Code reads after it (the local file over the project's), the
    // plugin runs nothing: no second wiring.
    std::fs::write(&local, "{\"enabledPlugins\": {\"vigil@vigil\": false}}\n").unwrap();
    ok(run(&["install", "--settings", local.to_str().unwrap()]));
    // A re-install where vigil is already wired is no second wiring.
    std::fs::remove_file(&shared).unwrap();
    for _ in 0..2 {
        ok(run(&["install", "--settings", local.to_str().unwrap()]));
    }
}
