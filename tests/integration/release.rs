//! One version everywhere (issue 18): Cargo.toml, every binary's `--version`, the plugin's
//! manifest, the marketplace entry and the changelog; and a crate that ships no tests.

use serde_json::Value;

use crate::support::*;

const VERSION: &str = env!("CARGO_PKG_VERSION");

fn json_file(relative: &str) -> Value {
    json_of(&repo_path(relative))
}

/// The binaries' `--version` is held to Cargo.toml's by
/// `installer::every_binary_reports_its_version`.
#[test]
fn one_version_runs_through_the_plugin_the_marketplace_and_the_changelog() {
    assert_eq!(json_file(".claude-plugin/plugin.json")["version"], VERSION);
    let marketplace = json_file(".claude-plugin/marketplace.json");
    let entry = marketplace["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "vigil")
        .expect("the marketplace lists vigil");
    assert_eq!(entry["version"], VERSION, "the marketplace entry");
    let changelog = std::fs::read_to_string(repo_path("CHANGELOG.md")).unwrap();
    assert!(
        changelog
            .lines()
            .any(|l| l.starts_with(&format!("## {VERSION} ")) || l == format!("## {VERSION}")),
        "CHANGELOG.md has a heading for {VERSION}"
    );
}

#[test]
fn the_crate_ships_the_sources_and_no_tests_fixtures_or_client_cache() {
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "package",
            "--list",
            "--allow-dirty",
            "--offline",
            "--manifest-path",
        ])
        .arg(repo_path("Cargo.toml"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let files: Vec<String> = stdout_of(&out).lines().map(str::to_string).collect();
    for needed in [
        "Cargo.toml",
        "Cargo.lock",
        "src/lib.rs",
        "src/bin/stop-gate.rs",
        "schemas/subagent-report.schema.json",
        "README.md",
        "CHANGELOG.md",
    ] {
        assert!(
            files.iter().any(|f| f == needed),
            "{needed} is shipped: {files:?}"
        );
    }
    for file in &files {
        assert!(
            !file.starts_with("tests/")
                && !file.starts_with("fuzz/")
                && !file.starts_with("bench/")
                && !file.contains("node_modules")
                && !file.starts_with(".vigil"),
            "{file} is not for the crate"
        );
    }
}
