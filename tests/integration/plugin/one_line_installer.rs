//! The one-line installer (hooks/install-release.sh): it installs the pinned release and says
//! the next step in one line, and refuses each bad download, installing nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::{Machine, Plugin, cut_short, feed, host_target, pins_of, release};
use crate::support::serve::{Reply, as_is, serve, unreachable};
use crate::support::*;

/// `curl …/hooks/vigil-run | sh -s -- --to DIR`: the script on a pipe, its pins and the archive
/// from `url`, in a HOME with nothing installed, on `machine`.
fn install_release(url: &str, machine: &Machine, dir: &Path) -> Output {
    install_release_to(url, machine, dir, &dir.join("home/.local/bin"))
}

fn install_release_to(url: &str, machine: &Machine, dir: &Path, to: &Path) -> Output {
    let script = std::fs::read_to_string(repo_path("hooks/vigil-run")).unwrap();
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let mut cmd = Command::new("sh");
    cmd.args(["-s", "--", "--to"])
        .arg(to)
        .env_clear()
        .env("HOME", &home)
        .env("PATH", "/usr/bin:/bin")
        .env("VIGIL_PINS_URL", format!("{url}/release.sha256"))
        .env("VIGIL_DOWNLOAD_URL", url)
        .env("VIGIL_TEST_CANARY", dir.join("ran"))
        .current_dir(&home);
    feed(machine.wrap(cmd), &script)
}

/// The stub release of `kind`, served with its pins beside it (as the default branch serves
/// hooks/release.sha256), pinned by scripts/pin-release.sh.
fn served_release(dir: &Path, kind: &str) -> PathBuf {
    let plugin = Plugin::new();
    let (served, sums) = release(dir, kind);
    plugin.pin(&sums);
    std::fs::copy(pins_of(&plugin), served.join("release.sha256")).unwrap();
    served
}

fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn the_installer_installs_the_pinned_release_and_says_the_next_step_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let served = served_release(dir.path(), "good");
    let server = serve(served, as_is);
    let out = ok(install_release(
        &server.url,
        &Machine::default(),
        dir.path(),
    ));
    let bin = dir.path().join("home/.local/bin");
    let mut expected: Vec<String> = BINARIES.iter().map(|b| b.to_string()).collect();
    expected.sort();
    assert_eq!(listing(&bin), expected, "the six binaries and nothing else");
    let said_out = stdout_of(&out);
    assert_eq!(said_out.lines().count(), 1, "{said_out}");
    assert_contains!(
        said_out,
        &format!(
            "Next, in your project: {}/settings-merge install --settings .claude/settings.local.json --bin-dir {} --run 'YOUR TEST COMMAND'",
            bin.display(),
            bin.display()
        )
    );
    assert_eq!(
        server.requests(),
        vec![
            "/release.sha256".to_string(),
            format!("/vigil-{}.tar.xz", host_target())
        ]
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("ran")).ok(),
        None,
        "nothing ran"
    );
}

#[test]
fn the_installer_refuses_each_bad_download_in_one_line_and_installs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let good = served_release(dir.path(), "good");
    let evil_dir = dir.path().join("evil-release");
    std::fs::create_dir_all(&evil_dir).unwrap();
    let (evil, _) = release(&evil_dir, "evil");
    // The good release's pins beside the other archive.
    std::fs::copy(good.join("release.sha256"), evil.join("release.sha256")).unwrap();
    let host = format!("vigil-{}.tar.xz", host_target());
    let cut = cut_short(&host);
    let no_pins = move |name: &str, bytes: Vec<u8>| -> Reply {
        if name == "release.sha256" {
            return (Vec::new(), 10);
        }
        as_is(name, bytes)
    };
    let plain = Machine::default();
    let no_sha = if Machine::available() {
        Machine::default().without("sha256sum").without("shasum")
    } else {
        Machine::default()
    };
    for (what, url, machine) in [
        ("another archive", serve(evil, as_is).url, &plain),
        ("a download cut short", serve(good.clone(), cut).url, &plain),
        ("pins cut short", serve(good.clone(), no_pins).url, &plain),
        ("a server that is not there", unreachable(), &plain),
        ("no sha256 tool", serve(good.clone(), as_is).url, &no_sha),
    ] {
        if what == "no sha256 tool" && no_sha.binds.is_empty() {
            continue;
        }
        let case = tempfile::tempdir().unwrap();
        let out = install_release(&url, machine, case.path());
        assert_eq!(out.status.code(), Some(1), "{what}: {}", said(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.lines().count(), 1, "{what}: {stderr}");
        assert!(
            stderr.starts_with("vigil: ")
                && (stderr.contains("nothing was") || stderr.contains("was not downloaded")),
            "{what}: {stderr}"
        );
        assert_eq!(
            listing(&case.path().join("home/.local/bin")),
            Vec::<String>::new(),
            "{what}: nothing installed, nothing left behind"
        );
        // Not even the directories it made for --to (issue 31); HOME was there before.
        assert!(
            !case.path().join("home/.local").exists(),
            "{what}: an empty --to directory left behind"
        );
        assert_eq!(
            std::fs::read_to_string(case.path().join("ran")).ok(),
            None,
            "{what}: nothing ran"
        );
    }
}

#[test]
fn the_installers_next_step_quotes_a_directory_with_spaces_and_a_flag_without_its_value_is_refused()
{
    let dir = tempfile::tempdir().unwrap();
    let served = served_release(dir.path(), "good");
    let server = serve(served, as_is);
    let to = dir.path().join("my bin");
    let out = ok(install_release_to(
        &server.url,
        &Machine::default(),
        dir.path(),
        &to,
    ));
    let said_out = stdout_of(&out);
    assert_contains!(
        said_out,
        &format!("'{}'/settings-merge install", to.display())
    );
    assert_contains!(said_out, &format!("--bin-dir '{}'", to.display()));
    assert_eq!(listing(&to).len(), BINARIES.len());

    for args in [
        &["--to"][..],
        &["--to", ""][..],
        &["--data"][..],
        &["--pins"][..],
    ] {
        let out = Command::new("sh")
            .arg(repo_path("hooks/vigil-run"))
            .args(args)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", said(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.lines().count() == 1 && stderr.contains("needs a value"),
            "{args:?}: {stderr}"
        );
    }
}
