//! SPEC §9, a sync runs nothing the agent wrote: not the caller's environment, not an option
//! posing as a URL, not the project's config, hooks or promisor remote, not a notes repository
//! the agent can write or vigil did not make; FIFOs where files should be are refused at once.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{World, ci_publishes, find_dir_named, sync};
use crate::support::*;

/// What a project's `.claude/settings.json` can put in the environment of the hook that starts
/// a background sync: a PATH with its own `git` first, `GIT_SSH_COMMAND`, a HOME whose
/// .gitconfig names a `core.sshCommand`, `GIT_CONFIG_GLOBAL`. None of them runs.
#[test]
fn a_sync_takes_nothing_from_the_callers_environment_that_would_run_a_command() {
    let (world, laptop) = World::with_laptop();
    let canary = world.dir.path().join("ran");
    let planted = world.dir.path().join("planted");
    std::fs::create_dir_all(planted.join("bin")).unwrap();
    let fake_git = planted.join("bin/git");
    std::fs::write(
        &fake_git,
        format!("#!/bin/sh\necho git >>'{}'\n", canary.display()),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake_git, std::fs::Permissions::from_mode(0o755)).unwrap();
    let touch = format!("sh -c 'echo ssh >>{}'", canary.display());
    std::fs::write(
        planted.join(".gitconfig"),
        format!("[core]\n\tsshCommand = {touch}\n"),
    )
    .unwrap();
    for remote in ["origin", "ssh://127.0.0.1:1/repo.git"] {
        let out = marker_writer()
            .args(["sync", "--remote", remote, "--timeout", "10"])
            .current_dir(&laptop)
            .env(
                "PATH",
                format!("{}:/usr/bin:/bin", planted.join("bin").display()),
            )
            .env("HOME", &planted)
            .env("XDG_CONFIG_HOME", &planted)
            .env("GIT_SSH_COMMAND", &touch)
            .env("GIT_CONFIG_GLOBAL", planted.join(".gitconfig"))
            .output()
            .unwrap();
        if remote == "origin" {
            assert_success(&out);
        }
        assert!(
            !canary.exists(),
            "{remote}: {}",
            std::fs::read_to_string(&canary).unwrap_or_default()
        );
    }
}

/// A remote URL in the project's config that git would read as an option (`--upload-pack=CMD`
/// runs CMD): refused, and nothing runs.
#[test]
fn a_remote_url_that_is_an_option_is_refused_and_runs_nothing() {
    let (world, laptop) = World::with_laptop();
    let canary = world.dir.path().join("pwned");
    git(
        &laptop,
        &[
            "config",
            "remote.origin.url",
            &format!("--upload-pack=touch {};false", canary.display()),
        ],
    );
    let out = marker_writer_in(&laptop, &["sync"]);
    assert_exit(&out, 2);
    assert!(!canary.exists(), "the agent's command ran");
}

/// The protected state inside the project (a state home set there, or the fallback when the
/// state home cannot be written): the agent can write the notes repository's config, and git
/// obeys it (`protocol.ext.allow` and a `url.*.insteadOf` turn the fetch into its command). A
/// sync there is refused, and runs nothing.
#[test]
fn a_notes_repository_the_agent_can_write_is_refused_and_its_config_runs_nothing() {
    for (what, home) in [
        ("a state home in the project", Some(".cache/vigil")),
        ("the fallback", None),
    ] {
        let (world, laptop) = World::with_laptop();
        let home = match home {
            Some(inside) => laptop.join(inside),
            // Cannot be made: the state falls back into the project.
            None => PathBuf::from("/proc/vigil-cannot-be-made"),
        };
        let canary = world.dir.path().join("pwned");
        let run = |args: &[&str]| {
            marker_writer()
                .args(args)
                .current_dir(&laptop)
                .env("VIGIL_STATE_HOME", &home)
                .output()
                .unwrap()
        };
        // Any command makes the protected place; the agent finds it and plants a notes
        // repository whose config makes the fetch run its command.
        let _ = run(&["verify", "--check", "tests"]);
        let place = find_dir_named(&laptop, "projects")
            .and_then(|projects| std::fs::read_dir(projects).ok()?.flatten().next())
            .map(|entry| entry.path())
            .unwrap_or_else(|| laptop.join(".vigil/state"));
        let notes = place.join("notes.git");
        git(&laptop, &["init", "-q", "--bare", notes.to_str().unwrap()]);
        let remote = world.remote.to_str().unwrap();
        let config = format!(
            "[protocol \"ext\"]\n\tallow = always\n[url \"ext::sh -c touch% {}\"]\n\tinsteadOf = {remote}\n",
            canary.display()
        );
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(notes.join("config"))
            .unwrap();
        std::io::Write::write_all(&mut file, config.as_bytes()).unwrap();
        for args in [
            &["sync"][..],
            &words("write --check tests --status passed --publish")[..],
        ] {
            let out = run(args);
            assert_eq!(
                out.status.code(),
                Some(2),
                "{what}: {args:?}: {}",
                said(&out)
            );
            assert_one_line_error(&out, "marker-writer");
            assert_contains!(
                String::from_utf8_lossy(&out.stderr),
                "inside the project",
                "{what}: {}",
                said(&out)
            );
            assert!(!canary.exists(), "{what}: the agent's command ran");
        }
    }
}

/// The variables a project's settings can give the hook that starts a sync, and that git or
/// what it runs would obey without a `GIT_` in their name: none reaches git.
#[test]
fn a_sync_hands_git_only_the_variables_it_needs() {
    let (_world, laptop) = World::with_laptop();
    let planted = [
        ("LD_PRELOAD", "/nonexistent/libvigil-planted.so"),
        ("SSH_ASKPASS", "/nonexistent/vigil-planted-askpass"),
        ("SSH_ASKPASS_REQUIRE", "force"),
        ("SSL_CERT_FILE", "/nonexistent/vigil-planted.pem"),
        ("CURL_CA_BUNDLE", "/nonexistent/vigil-planted.pem"),
        ("BASH_ENV", "/nonexistent/vigil-planted.sh"),
    ];
    let env: Vec<(&str, &std::ffi::OsStr)> =
        planted.iter().map(|(n, v)| (*n, v.as_ref())).collect();
    let Some((out, calls)) = traced_with(
        "marker-writer",
        &["sync".as_ref()],
        &env,
        &laptop,
        b"",
        "execve",
    ) else {
        return;
    };
    assert_success(&out);
    let gits: Vec<&str> = calls
        .text
        .lines()
        .filter(|l| l.contains("execve(") && l.contains("/git\""))
        .collect();
    assert!(!gits.is_empty(), "git ran: {}", calls.text);
    for line in gits {
        for (name, _) in planted {
            assert_lacks!(line, &format!("\"{name}="), "{name} reached git");
        }
    }
}

/// `show --all` compares with the nearest published content by listing its tree in the
/// project's repository. The agent made that repository a partial clone whose promisor
/// remote's upload-pack is its own command: listing a tree that is not there must not fetch it
/// (which would run that command as the user who asked).
#[test]
fn show_all_never_fetches_a_missing_tree_through_the_projects_promisor_remote() {
    let world = World::new();
    let ci = world.clone("ci");
    let laptop = world.clone("laptop");
    // CI tested content the laptop has never seen: its tree is in no object of the laptop's.
    std::fs::write(ci.join("lib.rs"), "pub fn answer() -> u32 { 41 + 1 }\n").unwrap();
    git(&ci, &["commit", "-qam", "ci only"]);
    ci_publishes(&ci, "tests", None);
    sync(&laptop);
    let canary = world.dir.path().join("fetched");
    let upload = world.dir.path().join("upload-pack");
    std::fs::write(
        &upload,
        format!(
            "#!/bin/sh\n: >'{}'\nexec git-upload-pack \"$@\"\n",
            canary.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&upload, std::fs::Permissions::from_mode(0o755)).unwrap();
    let ci_path = ci.to_str().unwrap().to_string();
    let upload_path = upload.to_str().unwrap().to_string();
    for (key, value) in [
        ("core.repositoryformatversion", "1"),
        ("extensions.partialClone", "agent"),
        ("remote.agent.url", ci_path.as_str()),
        ("remote.agent.promisor", "true"),
        ("remote.agent.uploadpack", upload_path.as_str()),
    ] {
        git(&laptop, &["config", key, value]);
    }
    let out = ok(marker_writer_in(
        &laptop,
        &["show", "--all", "--check", "tests"],
    ));
    assert!(!canary.exists(), "the agent's upload-pack ran");
    assert_stdout_contains(&out, "none of the 1 published contents");
}

/// `sync --push` to a remote URL the agent put in `.git/config` (a local path) would run that
/// repository's receive-side hooks (receive-pack does not take vigil's `core.hooksPath`): a
/// push to a path read from the project's config is refused, and nothing runs.
#[test]
fn a_push_to_a_path_the_projects_config_names_is_refused_and_runs_no_hook() {
    let (world, laptop) = World::with_laptop();
    let evil = world.dir.path().join("evil.git");
    git(
        world.dir.path(),
        &["init", "-q", "--bare", evil.to_str().unwrap()],
    );
    let witness = world.dir.path().join("PWNED");
    let hook = evil.join("hooks/pre-receive");
    std::fs::write(&hook, format!("#!/bin/sh\ntouch '{}'\n", witness.display())).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    for url in [
        evil.to_str().unwrap().to_string(),
        format!("file://{}", evil.display()),
    ] {
        git(&laptop, &["remote", "set-url", "origin", &url]);
        ok(marker_writer_in(
            &laptop,
            &words("write --check tests --status passed --publish"),
        ));
        let out = marker_writer_in(&laptop, &["sync", "--push"]);
        usage_error(&out, "marker-writer");
        assert_stderr_contains(&out, "--remote PATH");
        assert!(!witness.exists(), "{url}: the agent's pre-receive hook ran");
    }
}

/// `marker-writer sync --timeout 2` in `laptop`, its stderr kept: the child, and how it exited
/// within 8 s (`None` while it still runs).
fn sync_of_two_seconds(laptop: &Path) -> (std::process::Child, Option<std::process::ExitStatus>) {
    let start = Instant::now();
    let mut child = vigil_process("marker-writer")
        .args(["sync", "--timeout", "2"])
        .current_dir(laptop)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let finished = exited_within(&mut child, start, Duration::from_secs(8));
    (child, finished)
}

/// Opens the FIFO at `path` to write, without waiting: whatever waits to read it goes on.
fn open_fifo_to_write(path: &Path) {
    use std::os::unix::fs::OpenOptionsExt;
    let _ = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path);
}

/// A FIFO in place of `.git/config`: the remote's URL is read from it without waiting (and
/// git never reads the project's repository on its own), so a sync says so at once.
#[test]
fn a_fifo_in_place_of_the_projects_config_is_refused_at_once() {
    let (_world, laptop) = World::with_laptop();
    std::fs::remove_file(laptop.join(".git/config")).unwrap();
    mkfifo(&laptop.join(".git/config"));
    let (mut child, finished) = sync_of_two_seconds(&laptop);
    if finished.is_none() {
        let _ = child.kill();
        let _ = child.wait();
        // Unblock whatever waits on the FIFO.
        for _ in 0..20 {
            open_fifo_to_write(&laptop.join(".git/config"));
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let status = finished.expect("a 2 s sync still ran after 8 s");
    assert_eq!(status.code(), Some(2));
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(
        stderr.contains("not a regular file") || stderr.contains("config"),
        "{stderr}"
    );
}

/// Whoever can write the protected state (an agent without the sandbox, another program)
/// adds to `notes.git/config` what makes a fetch its command, or points the objects elsewhere:
/// the repository is refused until it is removed, and nothing runs.
#[test]
fn a_notes_repository_not_as_vigil_made_it_is_refused_and_runs_nothing() {
    let (world, laptop) = World::with_laptop();
    sync(&laptop);
    let notes = protected_dir(&laptop).join("notes.git");
    let canary = world.dir.path().join("pwned");
    let remote = world.remote.to_str().unwrap();
    let planted = format!(
        "[protocol \"ext\"]\n\tallow = always\n[url \"ext::sh -c touch% {}\"]\n\tinsteadOf = {remote}\n",
        canary.display()
    );
    let original = std::fs::read(notes.join("config")).unwrap();
    for (file, text) in [
        ("config", planted.as_str()),
        ("objects/info/alternates", "/tmp\n"),
    ] {
        let path = notes.join(file);
        let mut bytes = std::fs::read(&path).unwrap_or_default();
        bytes.extend_from_slice(text.as_bytes());
        std::fs::write(&path, bytes).unwrap();
        let out = marker_writer_in(&laptop, &["sync"]);
        usage_error(&out, "marker-writer");
        assert_stderr_contains(&out, "is not as vigil made it");
        assert!(!canary.exists(), "{file}: the planted command ran");
        std::fs::write(notes.join("config"), &original).unwrap();
        let _ = std::fs::remove_file(notes.join("objects/info/alternates"));
    }
    // Removed, it is made again.
    std::fs::remove_dir_all(&notes).unwrap();
    sync(&laptop);
}

/// A FIFO or /dev/zero at `.git/commondir`: refused at once, never waited on or read on.
#[test]
fn a_fifo_or_dev_zero_at_commondir_is_refused_at_once() {
    for how in ["fifo", "zero"] {
        let (_world, laptop) = World::with_laptop();
        let commondir = laptop.join(".git/commondir");
        if how == "fifo" {
            mkfifo(&commondir);
        } else {
            std::os::unix::fs::symlink("/dev/zero", &commondir).unwrap();
        }
        let (mut child, finished) = sync_of_two_seconds(&laptop);
        let _ = child.kill();
        let _ = child.wait();
        if how == "fifo" {
            open_fifo_to_write(&commondir);
        }
        let status = finished.unwrap_or_else(|| panic!("{how}: a 2 s sync ran past 8 s"));
        assert_eq!(status.code(), Some(2), "{how}");
    }
}
