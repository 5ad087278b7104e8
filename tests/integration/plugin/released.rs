//! A released plugin at session start: it fetches, verifies and installs its own version, for
//! the machine it runs on; each bad download is refused in one line and the next start retries.

use std::process::Stdio;

use serde_json::Value;

use super::{
    Machine, Plugin, VERSION, cut_short, host_target, one_line_notice, pinned_and_served, pins_of,
    release,
};
use crate::support::serve::{Reply, as_is, serve, unreachable};
use crate::support::*;

/// `sums` with `target`'s archive given `checksum`.
fn with_checksum(sums: &str, target: &str, checksum: &str) -> String {
    let name = format!("*vigil-{target}.tar.xz");
    sums.lines()
        .map(|l| {
            if l.ends_with(&name) {
                format!("{checksum} {name}\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect()
}

#[test]
fn a_released_plugin_fetches_verifies_and_installs_its_version_at_session_start_then_runs_the_loader()
 {
    let (plugin, _dir, server) = pinned_and_served();
    let out = ok(plugin.start(&server.url));
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        answer["hookSpecificOutput"]["additionalContext"],
        "good",
        "{}",
        said(&out)
    );
    let mut expected: Vec<String> = BINARIES.iter().map(|b| b.to_string()).collect();
    expected.sort();
    assert_eq!(plugin.installed(), expected);
    for binary in BINARIES {
        let path = plugin.bin().join(binary);
        let meta = std::fs::symlink_metadata(&path).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert!(
            meta.is_file() && meta.permissions().mode() & 0o111 != 0,
            "{binary}"
        );
    }
    assert_eq!(
        plugin.leftovers(),
        Vec::<String>::new(),
        "no download is left"
    );
    assert_eq!(
        server.requests(),
        vec![format!("/vigil-{}.tar.xz", host_target())]
    );
    // The loader got the hook's payload on stdin, untouched by the fetch.
    let stdin = std::fs::read_to_string(plugin.canary.with_extension("stdin")).unwrap();
    assert_eq!(stdin, read_fixture("samples/claude-session-start.json"));

    // Installed: the next start runs the loader and asks the network for nothing.
    ok(plugin.start(&unreachable()));
    assert_eq!(server.requests().len(), 1);
    assert_eq!(plugin.ran().matches("session-start-loader good").count(), 2);
}

#[test]
fn each_bad_download_is_refused_in_one_line_nothing_of_it_runs_or_lands_and_the_next_start_retries()
{
    let dir = tempfile::tempdir().unwrap();
    let (good_dir, sums) = release(dir.path(), "good");
    // Another archive of the same name: what an agent that points VIGIL_DOWNLOAD_URL at its
    // own server (through a project's settings, say) would serve.
    let (evil_dir, _) = release(dir.path(), "evil");
    let host = format!("vigil-{}.tar.xz", host_target());
    let flipped = {
        let host = host.clone();
        move |name: &str, mut bytes: Vec<u8>| -> Reply {
            if name == host {
                let at = bytes.len() / 2;
                bytes[at] ^= 0x01;
            }
            as_is(name, bytes)
        }
    };
    let cut = cut_short(&host);
    let shortened = move |name: &str, mut bytes: Vec<u8>| -> Reply {
        if name == host {
            bytes.truncate(bytes.len() / 2);
        }
        as_is(name, bytes)
    };
    let cases: Vec<(&str, String, Option<String>)> = vec![
        ("another archive", serve(evil_dir, as_is).url, None),
        ("a flipped byte", serve(good_dir.clone(), flipped).url, None),
        (
            "a download cut short",
            serve(good_dir.clone(), cut).url,
            None,
        ),
        (
            "a shortened file",
            serve(good_dir.clone(), shortened).url,
            None,
        ),
        ("a server that is not there", unreachable(), None),
        (
            "no such file (404)",
            serve(dir.path().join("nothing"), as_is).url,
            None,
        ),
        (
            "a wrong pinned checksum",
            serve(good_dir.clone(), as_is).url,
            Some(with_checksum(&sums, &host_target(), &"0".repeat(64))),
        ),
    ];
    for (what, url, pins) in cases {
        let plugin = Plugin::new();
        plugin.pin(&pins.unwrap_or_else(|| sums.clone()));
        let out = plugin.start(&url);
        let message = one_line_notice(&out);
        assert_contains!(message, "next session tries again", "{what}");
        assert_eq!(plugin.ran(), "", "{what}: nothing ran");
        assert_eq!(
            plugin.installed(),
            Vec::<String>::new(),
            "{what}: nothing landed"
        );
        assert_eq!(plugin.leftovers(), Vec::<String>::new(), "{what}");

        // The next start, with the release as it should be, installs it and runs the loader.
        if what != "a wrong pinned checksum" {
            let good = serve(good_dir.clone(), as_is);
            let retried = plugin.start(&good.url);
            assert!(
                retried.status.success() && plugin.ran().contains("session-start-loader good"),
                "{what}: retried {}",
                said(&retried)
            );
            assert_eq!(plugin.installed().len(), BINARIES.len(), "{what}");
        }
    }
}

#[test]
fn with_no_sha256_tool_nothing_is_fetched_because_nothing_could_be_verified() {
    let (plugin, _dir, server) = pinned_and_served();
    if !Machine::available() {
        return;
    }
    let machine = Machine::default().without("sha256sum").without("shasum");
    let out = plugin.start_in(&server.url, &machine);
    let message = one_line_notice(&out);
    assert_contains!(message, "neither sha256sum nor shasum");
    assert_eq!(server.requests(), Vec::<String>::new(), "nothing fetched");
    assert_eq!(plugin.ran(), "");
    assert_eq!(plugin.installed(), Vec::<String>::new());
}

#[test]
fn pins_for_another_version_or_none_for_this_machine_fetch_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (served_dir, sums) = release(dir.path(), "good");
    let server = serve(served_dir, as_is);

    // Pins a release of another version: the plugin's own version is never fetched from it.
    let plugin = Plugin::new();
    plugin.pin(&sums);
    let pins = plugin.root.join("hooks/release.sha256");
    let text = std::fs::read_to_string(&pins).unwrap();
    std::fs::write(
        &pins,
        text.replace(&format!("version {VERSION}"), "version 0.0.9"),
    )
    .unwrap();
    let message = one_line_notice(&plugin.start(&server.url));
    assert_contains!(message, "for vigil 0.0.9, not its own");

    // A machine vigil has no release for: told to build from source.
    let plugin = Plugin::new();
    plugin.pin(&sums);
    if Machine::available() {
        let uname = "#!/bin/sh\ncase $1 in -s) echo FreeBSD ;; -m) echo amd64 ;; esac\n";
        let machine = Machine::default().with("uname", uname);
        let message = one_line_notice(&plugin.start_in(&server.url, &machine));
        assert_contains!(message, "no release for FreeBSD amd64");
        assert_contains!(message, "./install.sh");
    }

    // Pins with no line for this machine's target.
    let plugin = Plugin::new();
    plugin.pin(&sums);
    let text = std::fs::read_to_string(pins_of(&plugin)).unwrap();
    let without: String = text
        .lines()
        .filter(|l| !l.starts_with(&host_target()))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(pins_of(&plugin), without).unwrap();
    let message = one_line_notice(&plugin.start(&server.url));
    assert_contains!(message, &format!("no checksum for {}", host_target()));
    assert_eq!(server.requests(), Vec::<String>::new(), "nothing fetched");
}

#[test]
fn the_archive_fetched_is_the_one_for_the_machine_the_launcher_runs_on() {
    let dir = tempfile::tempdir().unwrap();
    let (served_dir, sums) = release(dir.path(), "good");
    let server = serve(served_dir, as_is);
    if !Machine::available() {
        return;
    }
    for (os, cpu, target) in [
        ("Darwin", "arm64", "aarch64-apple-darwin"),
        ("Darwin", "x86_64", "x86_64-apple-darwin"),
        ("Linux", "aarch64", "aarch64-unknown-linux-musl"),
        ("Linux", "x86_64", "x86_64-unknown-linux-musl"),
    ] {
        let plugin = Plugin::new();
        plugin.pin(&sums);
        let uname = format!("#!/bin/sh\ncase $1 in -s) echo {os} ;; -m) echo {cpu} ;; esac\n");
        let out = plugin.start_in(&server.url, &Machine::default().with("uname", &uname));
        assert!(out.status.success(), "{target}: {}", said(&out));
        assert_eq!(
            server.requests().last().unwrap(),
            &format!("/vigil-{target}.tar.xz")
        );
        assert_eq!(plugin.installed().len(), BINARIES.len(), "{target}");
    }
}

#[test]
fn two_sessions_starting_at_once_both_run_and_leave_one_whole_install() {
    let (plugin, _dir, server) = pinned_and_served();
    let starts: Vec<_> = (0..4)
        .map(|_| {
            let mut cmd = plugin.launcher(&server.url);
            cmd.stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for start in starts {
        let out = start.wait_with_output().unwrap();
        let answer: Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", said(&out)));
        assert_eq!(answer["hookSpecificOutput"]["additionalContext"], "good");
    }
    assert_eq!(plugin.installed().len(), BINARIES.len());
    assert_eq!(plugin.leftovers(), Vec::<String>::new());
}

#[test]
fn a_data_directory_that_cannot_be_made_is_said_in_one_line_and_the_session_goes_on() {
    let (plugin, _dir, server) = pinned_and_served();
    // A file where the version's directory goes: no one, root included, can make it.
    std::fs::write(plugin.data.join(VERSION), "not a directory").unwrap();
    let message = one_line_notice(&plugin.start(&server.url));
    assert!(message.contains("cannot create"), "{message}");
    assert_eq!(server.requests(), Vec::<String>::new());
    assert_eq!(plugin.ran(), "");
    assert_eq!(
        std::fs::read_to_string(plugin.data.join(VERSION)).unwrap(),
        "not a directory",
        "left as it was"
    );
}
