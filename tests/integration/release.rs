//! SPEC §1 and §8, one version everywhere (issue 18): Cargo.toml and Cargo.lock, every binary's
//! `--version`, the plugin's manifest, the marketplace entry, the launcher and the hooks'
//! paths, the pinned checksums and the changelog; `scripts/set-version.sh` moves them all; and
//! a crate that ships no tests.

use std::path::Path;

use serde_json::Value;

use crate::support::*;

/// What follows `prefix` on the first line of `text` that begins with it.
fn line_after(text: &str, prefix: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .map(str::to_string)
}

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The files that name the version, as the release has them.
const VERSIONED: [&str; 9] = [
    "Cargo.toml",
    "Cargo.lock",
    "fuzz/Cargo.lock",
    ".claude-plugin/plugin.json",
    ".claude-plugin/marketplace.json",
    "hooks/vigil-run",
    "hooks/hooks.json",
    "CHANGELOG.md",
    "scripts/set-version.sh",
];

/// Every place under `root` that names a version other than Cargo.toml's, one line each.
fn disagreements(root: &Path) -> Vec<String> {
    let read = |relative: &str| std::fs::read_to_string(root.join(relative)).unwrap();
    let json = |relative: &str| -> Value { serde_json::from_str(&read(relative)).unwrap() };
    let manifest: toml_edit::DocumentMut = read("Cargo.toml").parse().unwrap();
    let version = manifest["package"]["version"].as_str().unwrap().to_string();
    let mut found = Vec::new();
    let mut check = |place: String, named: Option<String>| {
        if named.as_deref() != Some(version.as_str()) {
            found.push(format!("{place} says {named:?}, Cargo.toml {version}"));
        }
    };
    for lockfile in ["Cargo.lock", "fuzz/Cargo.lock"] {
        let lock: toml_edit::DocumentMut = read(lockfile).parse().unwrap();
        let locked = lock["package"]
            .as_array_of_tables()
            .unwrap()
            .iter()
            .find(|p| p["name"].as_str() == Some("vigil"))
            .and_then(|p| p["version"].as_str().map(str::to_string));
        check(lockfile.into(), locked);
    }
    let plugin = json(".claude-plugin/plugin.json");
    check(
        "plugin.json".into(),
        plugin["version"].as_str().map(str::to_string),
    );
    let marketplace = json(".claude-plugin/marketplace.json");
    let entry = marketplace["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "vigil")
        .map(|p| p["version"].as_str().unwrap_or("").to_string());
    check("the marketplace entry".into(), entry);
    let launcher = read("hooks/vigil-run");
    let says = line_after(&launcher, "version=");
    check("hooks/vigil-run".into(), says);
    let hooks = json("hooks/hooks.json");
    for (event, groups) in hooks["hooks"].as_object().unwrap() {
        for hook in groups[0]["hooks"].as_array().unwrap() {
            let command = hook["command"].as_str().unwrap();
            if let Some(rest) = command.strip_prefix("${CLAUDE_PLUGIN_DATA}/") {
                let named =
                    rest.strip_suffix(&format!("/bin/{}", rest.rsplit('/').next().unwrap_or("")));
                check(
                    format!("hooks.json's {event} hook"),
                    named.map(str::to_string),
                );
            }
        }
    }
    if let Ok(pins) = std::fs::read_to_string(root.join("hooks/release.sha256")) {
        let pinned = line_after(&pins, "version ");
        check("hooks/release.sha256".into(), pinned);
    }
    let changelog = read("CHANGELOG.md");
    let heading = changelog
        .lines()
        .any(|l| l == format!("## {version}") || l.starts_with(&format!("## {version} ")));
    if !heading {
        found.push(format!("CHANGELOG.md has no heading for {version}"));
    }
    found
}

/// The binaries' `--version` is held to Cargo.toml's by
/// `installer::every_binary_reports_its_version`.
#[test]
fn one_version_runs_through_the_manifests_the_launcher_the_hooks_the_pins_and_the_changelog() {
    assert_eq!(disagreements(&repo_path("")), Vec::<String>::new());
    let manifest: toml_edit::DocumentMut = std::fs::read_to_string(repo_path("Cargo.toml"))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(manifest["package"]["version"].as_str(), Some(VERSION));
}

/// A copy of the versioned files, hooks/release.sha256 pinned for the current version.
fn versioned_copy() -> tempfile::TempDir {
    let copy = tempfile::tempdir().unwrap();
    for relative in VERSIONED {
        let to = copy.path().join(relative);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(repo_path(relative), &to).unwrap();
    }
    std::fs::write(
        copy.path().join("hooks/release.sha256"),
        format!("# pinned\nversion {VERSION}\nbase https://example.invalid\n"),
    )
    .unwrap();
    copy
}

#[test]
fn each_place_that_names_another_version_is_a_disagreement() {
    let copy = versioned_copy();
    assert_eq!(disagreements(copy.path()), Vec::<String>::new());
    let other = "9.9.9";
    for (relative, from, to) in [
        (
            "Cargo.lock",
            format!("name = \"vigil\"\nversion = \"{VERSION}\""),
            format!("name = \"vigil\"\nversion = \"{other}\""),
        ),
        (
            "fuzz/Cargo.lock",
            format!("name = \"vigil\"\nversion = \"{VERSION}\""),
            format!("name = \"vigil\"\nversion = \"{other}\""),
        ),
        (
            ".claude-plugin/plugin.json",
            format!("\"version\": \"{VERSION}\""),
            format!("\"version\": \"{other}\""),
        ),
        (
            ".claude-plugin/marketplace.json",
            format!("\"version\": \"{VERSION}\""),
            format!("\"version\": \"{other}\""),
        ),
        (
            "hooks/vigil-run",
            format!("version={VERSION}\n"),
            format!("version={other}\n"),
        ),
        (
            "hooks/hooks.json",
            format!("/{VERSION}/bin/stop-gate"),
            format!("/{other}/bin/stop-gate"),
        ),
        (
            "hooks/release.sha256",
            format!("version {VERSION}"),
            format!("version {other}"),
        ),
        (
            "CHANGELOG.md",
            format!("## {VERSION}"),
            format!("## {other}"),
        ),
    ] {
        let copy = versioned_copy();
        let path = copy.path().join(relative);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(&from), "{relative} holds {from:?}");
        std::fs::write(&path, text.replacen(&from, &to, 1)).unwrap();
        let found = disagreements(copy.path());
        assert_eq!(found.len(), 1, "{relative}: {found:?}");
    }
}

#[test]
fn set_version_moves_every_place_and_drops_the_old_releases_pins() {
    let copy = versioned_copy();
    ok(
        std::process::Command::new(copy.path().join("scripts/set-version.sh"))
            .arg("0.42.0")
            .output()
            .unwrap(),
    );
    assert_eq!(disagreements(copy.path()), Vec::<String>::new());
    let manifest = std::fs::read_to_string(copy.path().join("Cargo.toml")).unwrap();
    assert!(manifest.contains("version = \"0.42.0\""), "{manifest}");
    assert!(
        !copy.path().join("hooks/release.sha256").exists(),
        "the old release's pins are gone"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(copy.path().join("hooks/vigil-run"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o111, 0o111, "the launcher stays executable");
    for bad in [
        "v1; rm -rf /",
        "0.2",
        "01.2.3",
        "1.2.3\nversion = \"9\"",
        "1.2.3 ",
        "",
    ] {
        let refused = std::process::Command::new(copy.path().join("scripts/set-version.sh"))
            .arg(bad)
            .output()
            .unwrap();
        assert_eq!(refused.status.code(), Some(2), "{bad:?}");
        assert_eq!(disagreements(copy.path()), Vec::<String>::new(), "{bad:?}");
    }
}

#[test]
fn set_version_to_the_version_there_keeps_its_pins() {
    let copy = versioned_copy();
    let out = std::process::Command::new(copy.path().join("scripts/set-version.sh"))
        .arg(VERSION)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(copy.path().join("hooks/release.sha256").is_file());
    assert_eq!(disagreements(copy.path()), Vec::<String>::new());
}

#[test]
fn the_crate_ships_the_sources_and_no_tests_fixtures_or_client_cache() {
    let out = ok(std::process::Command::new(env!("CARGO"))
        .args(words(
            "package --list --allow-dirty --offline --manifest-path",
        ))
        .arg(repo_path("Cargo.toml"))
        .output()
        .unwrap());
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
