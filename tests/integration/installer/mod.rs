//! SPEC §8, the installer: settings-merge and install.sh, against real-world-shaped settings;
//! one file per part of §8 (the plugin is in `plugin/`). Here what the files beside it share.

mod codex_trust;
mod doctor;
mod gate_configuration;
mod install_record;
mod install_sh;
mod settings_merge;

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{Value, json};

use crate::support::*;

/// The user edits the file: a timeout on the first handler of each Stop group `pick` takes,
/// written back compact (so the file is reformatted too).
fn set_stop_timeout(path: &Path, pick: impl Fn(&Value) -> bool, seconds: u64) {
    let mut edited = json_of(path);
    for group in edited["hooks"]["Stop"].as_array_mut().unwrap() {
        if pick(group) {
            group["hooks"][0]["timeout"] = json!(seconds);
        }
    }
    std::fs::write(path, serde_json::to_vec(&edited).unwrap()).unwrap();
}

/// A project with one fixture as its settings file; returns (dir, settings path, codex?).
fn project_with(fixture_name: &str) -> (tempfile::TempDir, PathBuf, bool) {
    let dir = tempfile::tempdir().unwrap();
    let codex = fixture_name.starts_with("codex");
    let path = if codex {
        dir.path().join(".codex/hooks.json")
    } else {
        dir.path().join(".claude/settings.local.json")
    };
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::copy(fixture(&format!("settings/{fixture_name}")), &path).unwrap();
    (dir, path, codex)
}

fn merge(action: &str, path: &Path, codex: bool, extra: &[&str]) -> Output {
    let mut cmd = settings_merge();
    cmd.arg(action).arg("--settings").arg(path).args(extra);
    if codex {
        cmd.arg("--codex");
    }
    if action == "install" && !extra.contains(&"--shared") {
        cmd.arg("--bin-dir").arg(bin_dir());
    }
    cmd.output().unwrap()
}

/// `settings-merge install --settings PATH --bin-dir BIN`, which must succeed.
fn install_with_bin_dir(path: &Path, bin: &Path) {
    ok(settings_merge()
        .arg("install")
        .arg("--settings")
        .arg(path)
        .arg("--bin-dir")
        .arg(bin)
        .output()
        .unwrap());
}

fn install_sh(home: &Path, args: &[&str], path_env: &str) -> Output {
    std::process::Command::new("bash")
        .arg(repo_path("install.sh"))
        .args(args)
        .env("HOME", home)
        .env("PATH", path_env)
        .env("VIGIL_BUILT_DIR", bin_dir())
        .output()
        .unwrap()
}

fn backup_of(path: &Path) -> PathBuf {
    path.with_file_name(format!(
        "{}.vigil-backup",
        path.file_name().unwrap().to_string_lossy()
    ))
}

fn stop_command(path: &Path) -> String {
    let value = json_of(path);
    value["hooks"]["Stop"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["hooks"].as_array().unwrap().iter())
        .map(|h| h["command"].as_str().unwrap().to_string())
        .find(|c| c.contains("stop-gate") && !is_waiter(c))
        .unwrap()
}
