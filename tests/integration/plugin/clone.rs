//! The plugin from a clone: it links the binaries ./install.sh built for its own version and
//! the hooks exec them; nothing of its version installed is said, and an archive never gets
//! past its pin whatever the project's settings say.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use super::{
    Plugin, TARGETS, VERSION, feed, host_target, one_line_notice, pinned_and_served, release,
    sha256,
};
use crate::support::serve::{as_is, serve, unreachable};
use crate::support::*;

/// Runs a hooks.json entry as Claude Code's exec form does: the command with the plugin's
/// paths filled in, its args, no shell.
fn run_hook(plugin: &Plugin, event: &str, stdin: &str, cwd: &Path) -> Output {
    let hooks = json_of(&repo_path("hooks/hooks.json"));
    let hook = &hooks["hooks"][event][0]["hooks"][0];
    let fill = |s: &str| {
        s.replace("${CLAUDE_PLUGIN_DATA}", plugin.data.to_str().unwrap())
            .replace("${CLAUDE_PLUGIN_ROOT}", plugin.root.to_str().unwrap())
    };
    let mut cmd = Command::new(fill(hook["command"].as_str().unwrap()));
    for arg in hook["args"].as_array().unwrap() {
        cmd.arg(fill(arg.as_str().unwrap()));
    }
    cmd.env_clear()
        .env("HOME", &plugin.home)
        .env("PATH", "/usr/bin:/bin")
        .env("VIGIL_STATE_HOME", state_home())
        .current_dir(cwd);
    feed(cmd, stdin)
}

#[test]
fn a_clone_links_the_binaries_of_its_own_version_and_the_hooks_then_exec_them() {
    let plugin = Plugin::new();
    plugin.build_in_clone();
    ok(plugin.start(&unreachable()));
    for binary in BINARIES {
        assert_eq!(
            std::fs::read_link(plugin.bin().join(binary)).unwrap(),
            plugin.root.join("target/release").join(binary),
            "{binary}"
        );
    }
    assert!(plugin.bin().join(".installed").is_file());
    // The Stop hook, as Claude Code runs it: the binary itself, no launcher and no shell. With
    // no loop and no checks it allows the stop, silently.
    let project = tempfile::tempdir().unwrap();
    let payload = sample_payload(
        "claude-stop.json",
        &[("cwd", Value::String(project.path().display().to_string()))],
    );
    let stop = ok(run_hook(&plugin, "Stop", &payload, project.path()));
    assert_silent(&stop);
}

#[test]
fn a_clone_with_nothing_of_its_version_installed_says_install_sh_and_links_nothing() {
    for place in ["target/release", "home/.local/bin", "none"] {
        let plugin = Plugin::new();
        // Binaries of another version where ./install.sh puts them, as an old install leaves
        // them; or nothing anywhere.
        let dir = match place {
            "target/release" => Some(plugin.root.join(place)),
            "home/.local/bin" => Some(plugin.home.join(".local/bin")),
            _ => None,
        };
        if let Some(dir) = &dir {
            std::fs::create_dir_all(dir).unwrap();
            for binary in BINARIES {
                let path = dir.join(binary);
                std::fs::write(
                    &path,
                    format!(
                        "#!/bin/sh\necho ran >>\"$VIGIL_TEST_CANARY\"\necho '{binary} 0.0.1'\n"
                    ),
                )
                .unwrap();
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
            }
        }
        let message = one_line_notice(&plugin.start(&unreachable()));
        assert_contains!(
            message,
            &format!("{VERSION} is not installed; run ./install.sh"),
            "{place}"
        );
        assert_eq!(plugin.installed(), Vec::<String>::new(), "{place}");
        // Asked its version, never run as the hook.
        assert!(
            plugin.ran().lines().count() <= 1,
            "{place}: {}",
            plugin.ran()
        );
    }
}

/// What a project's `.claude/settings.json` can put in a hook's environment: a PATH with its
/// own `sha256sum` first (one that prints the pinned sum for anything), and TAR_OPTIONS that run
/// a command. Neither reaches the launcher, so another archive is still refused and nothing
/// runs.
#[test]
fn a_path_or_tar_options_from_the_projects_settings_never_get_an_archive_past_its_pin() {
    let dir = tempfile::tempdir().unwrap();
    let (good_dir, sums) = release(dir.path(), "good");
    let (evil_dir, _) = release(dir.path(), "evil");
    let pinned = sums
        .lines()
        .find(|l| l.ends_with(&format!("vigil-{}.tar.xz", host_target())))
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .to_string();
    let planted = dir.path().join("project/.bin");
    std::fs::create_dir_all(&planted).unwrap();
    let canary = dir.path().join("planted-ran");
    for program in ["sha256sum", "shasum", "tar", "curl", "dirname", "uname"] {
        let path = planted.join(program);
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\necho {program} >>'{}'\necho '{pinned}  '\"$1\"\n",
                canary.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let tar_ran = dir.path().join("tar-options-ran");
    let plugin = Plugin::new();
    plugin.pin(&sums);
    let evil = serve(evil_dir, as_is);
    // The launcher, with TAR_OPTIONS and XZ_OPT set to make tar and xz run a command or fail.
    let hostile = |url: &str| {
        let mut cmd = plugin.launcher(url);
        let touch = format!(
            "--checkpoint=1 --checkpoint-action=exec=touch\\ {}",
            tar_ran.display()
        );
        cmd.env("TAR_OPTIONS", touch).env("XZ_OPT", "--memlimit=1");
        cmd
    };
    let mut cmd = hostile(&evil.url);
    cmd.env("PATH", format!("{}:/usr/bin:/bin", planted.display()));
    let out = feed(cmd, "{}");
    let message = one_line_notice(&out);
    assert_contains!(message, "does not match its pinned checksum");
    assert_eq!(plugin.ran(), "", "nothing of the other archive ran");
    assert_eq!(plugin.installed(), Vec::<String>::new());
    assert!(!canary.exists(), "no planted program ran");

    // With the real release, TAR_OPTIONS and XZ_OPT still change nothing: it installs, and the
    // checkpoint command never runs.
    let good = serve(good_dir, as_is);
    let out = ok(feed(hostile(&good.url), "{}"));
    assert_eq!(plugin.installed().len(), BINARIES.len(), "{}", said(&out));
    assert!(!tar_ran.exists(), "TAR_OPTIONS ran a command");
}

/// A pinned archive that is no archive (or one a full disk cuts while it unpacks): nothing is
/// installed, nothing is stamped, and the next start fetches again.
#[test]
fn an_archive_that_does_not_unpack_installs_nothing_and_the_next_start_fetches_again() {
    let dir = tempfile::tempdir().unwrap();
    let (good_dir, _) = release(dir.path(), "good");
    let broken_dir = dir.path().join("broken");
    std::fs::create_dir_all(&broken_dir).unwrap();
    let mut sums = String::new();
    for target in TARGETS {
        let file = broken_dir.join(format!("vigil-{target}.tar.xz"));
        // xz's magic, then nothing an archive holds.
        std::fs::write(&file, b"\xfd7zXZ\x00 this is not an archive").unwrap();
        sums.push_str(&format!("{} *vigil-{target}.tar.xz\n", sha256(&file)));
    }
    let plugin = Plugin::new();
    plugin.pin(&sums);
    let broken = serve(broken_dir, as_is);
    let message = one_line_notice(&plugin.start(&broken.url));
    assert!(message.contains("could not unpack"), "{message}");
    assert_eq!(plugin.installed(), Vec::<String>::new());
    assert_eq!(plugin.leftovers(), Vec::<String>::new());
    assert_eq!(plugin.ran(), "");

    // Half an install (binaries there, no stamp, as a start killed between renames leaves it)
    // is fetched again, not taken as installed.
    let (_, good_sums) = release(&dir.path().join("again"), "good");
    let plugin = Plugin::new();
    plugin.pin(&good_sums);
    std::fs::create_dir_all(plugin.bin()).unwrap();
    std::fs::write(plugin.bin().join("stop-gate"), "#!/bin/sh\necho half\n").unwrap();
    let good = serve(dir.path().join("again/good"), as_is);
    ok(plugin.start(&good.url));
    assert_eq!(good.requests().len(), 1, "fetched again");
    assert_eq!(plugin.installed().len(), BINARIES.len());
    drop(good_dir);
}

#[test]
fn the_slash_commands_run_what_is_installed_and_never_fetch() {
    let (plugin, _dir, server) = pinned_and_served();
    // As the commands' `!` lines run it: Claude Code fills in the data directory in the
    // command's text, and the shell it runs has no CLAUDE_PLUGIN_DATA.
    let mut cmd = Command::new(plugin.root.join("hooks/vigil-run"));
    cmd.arg("--data")
        .arg(&plugin.data)
        .args(["stop-gate", "loop", "status"])
        .env_clear()
        .env("HOME", &plugin.home)
        .env("PATH", format!("{}:/usr/bin:/bin", bin_dir().display()))
        .env("VIGIL_DOWNLOAD_URL", &server.url)
        .env("VIGIL_TEST_CANARY", &plugin.canary);
    let out = cmd.output().unwrap();
    let message = one_line_notice(&out);
    assert_contains!(message, "fetched when a session starts");
    assert_eq!(server.requests(), Vec::<String>::new());
    // Once a session start has installed it, the same command runs the installed binary.
    ok(plugin.start(&server.url));
    let out = cmd.output().unwrap();
    assert_contains!(plugin.ran(), "stop-gate good loop status", "{}", said(&out));
}
