//! The release, end to end on loopback (issue 18): cargo-dist builds the archives and the
//! shell installer for the host target, a server on 127.0.0.1 serves them, and
//! - the installer runs in a throwaway HOME whose PATH has no cargo; a tampered, truncated or
//!   unreachable download installs nothing;
//! - the real Claude Code installs the plugin from a local marketplace in a HOME with no vigil
//!   binaries and no cargo: its first session fetches and verifies the release, and the loop
//!   it starts ends only on a declaration; offline, the session goes on with one line;
//! - `cargo install --locked` builds the binaries from the repository.
//!
//! Needs `dist` (cargo-dist, pinned in dist-workspace.toml) on PATH or in
//! `~/.cache/vigil-tools/bin` (`.ci/run` installs it there once); without it the suite is
//! skipped with one line, unless `VIGIL_RELEASE_REQUIRED=1` (CI) makes that a failure.

// Shared with the e2e suite, which uses all of it.
#[allow(dead_code)]
#[path = "../e2e/clients.rs"]
mod clients;
#[path = "../e2e/server.rs"]
mod server;
#[path = "../support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use support::release::{self, host, tracked_copy};
use support::serve::{Reply, as_is, serve, unreachable};
use support::{BINARIES, git, said, skip};

const REPO: &str = env!("CARGO_MANIFEST_DIR");

fn dist() -> Option<PathBuf> {
    let cached = PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
        .join(".cache/vigil-tools/bin/dist");
    let found = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|dir| dir.join("dist"))
        .chain([cached])
        .find(|p| p.is_file());
    if found.is_none() {
        assert!(
            std::env::var_os("VIGIL_RELEASE_REQUIRED").is_none(),
            "the release suite is required here, but dist (cargo-dist) is not installed"
        );
        skip("the release suite: dist (cargo-dist) is not installed");
    }
    found
}

fn run(cmd: &mut Command) -> Output {
    cmd.output().unwrap()
}

/// The release artifacts for the host target, built once by dist in the release tree the load
/// suite shares (`support::release`: the tracked files, the host's target added to the config).
fn artifacts(dist: &Path) -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let tree = release::tree();
            let out = run(release::building(Command::new(dist))
                .args(["build", "--artifacts=all", "--target", &host()])
                .current_dir(tree));
            assert!(out.status.success(), "dist build: {}", said(&out));
            // dist puts the artifacts beside the tree's own sources, whatever the target dir.
            tree.join("target/distrib")
        })
        .clone()
}

/// Runs the installer in a fresh HOME whose PATH has no cargo, downloading from `url`.
fn install(distrib: &Path, url: &str) -> (tempfile::TempDir, Output) {
    let home = tempfile::tempdir().unwrap();
    let out = run(Command::new("sh")
        .arg(distrib.join("vigil-installer.sh"))
        .env_clear()
        .env("HOME", home.path())
        .env("PATH", "/usr/bin:/bin")
        .env("VIGIL_DOWNLOAD_URL", url)
        .env("VIGIL_NO_MODIFY_PATH", "1"));
    (home, out)
}

/// The binaries in `bin` are this version's, and wire a project the doctor finds clean.
fn installed_and_wiring(bin: &Path, home: &Path) {
    for binary in BINARIES {
        let version = run(Command::new(bin.join(binary)).arg("--version"));
        assert_eq!(
            String::from_utf8_lossy(&version.stdout).trim(),
            format!("{binary} {}", env!("CARGO_PKG_VERSION"))
        );
    }
    let project = tempfile::tempdir().unwrap();
    let settings = project.path().join(".claude/settings.local.json");
    let wired = run(Command::new(bin.join("settings-merge"))
        .args(["install", "--settings"])
        .arg(&settings)
        .arg("--bin-dir")
        .arg(bin)
        .current_dir(project.path())
        .env("HOME", home));
    assert!(wired.status.success(), "{}", said(&wired));
    let check = run(Command::new(bin.join("settings-merge"))
        .args(["check", "--settings"])
        .arg(&settings)
        .current_dir(project.path())
        .env("HOME", home));
    let report = String::from_utf8_lossy(&check.stdout);
    assert!(
        check.status.success() && !report.contains("[fail]"),
        "{report}"
    );
}

/// dist's own shell installer (`vigil-installer.sh`, also published): it verifies the sha256
/// it was built with, where `sha256sum` exists (it skips the check without it; vigil's own
/// installer below does not).
#[test]
fn dists_installer_fetches_verifies_and_installs_the_release_and_refuses_a_bad_download() {
    let Some(dist) = dist() else { return };
    let distrib = artifacts(&dist);
    assert!(
        !Path::new("/usr/bin/cargo").exists(),
        "the installer's PATH must hold no cargo"
    );

    // A good release: the binaries land in ~/.local/bin, of this version, and wire a project.
    let url = serve(distrib.clone(), as_is).url;
    let (home, out) = install(&distrib, &url);
    assert!(out.status.success(), "{}", said(&out));
    let bin = home.path().join(".local/bin");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&format!(
            "Next, in your project: {}/settings-merge install",
            bin.display()
        )),
        "it tells the next step: {}",
        said(&out)
    );
    installed_and_wiring(&bin, home.path());

    // A tampered archive, a truncated one, a server that is not there: nothing installed.
    let archive = format!("vigil-{}.tar.xz", host());
    let tampered = {
        let archive = archive.clone();
        serve(distrib.clone(), move |name, mut bytes| -> Reply {
            if name == archive {
                let at = bytes.len() / 2;
                bytes[at] ^= 0xff;
            }
            as_is(name, bytes)
        })
        .url
    };
    let truncated = {
        let archive = archive.clone();
        serve(distrib.clone(), move |name, mut bytes| -> Reply {
            let length = bytes.len();
            if name == archive {
                bytes.truncate(length / 2);
            }
            (bytes, length)
        })
        .url
    };
    let gone = unreachable();
    for (what, url) in [
        ("tampered", tampered),
        ("truncated", truncated),
        ("unreachable", gone),
    ] {
        let (home, out) = install(&distrib, &url);
        assert!(!out.status.success(), "{what}: {}", said(&out));
        let bin = home.path().join(".local/bin");
        let landed: Vec<_> = std::fs::read_dir(&bin)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert!(
            landed.is_empty(),
            "{what}: nothing installed, found {landed:?}"
        );
    }
}

// --- The plugin, with the real Claude Code ----------------------------------------------------

const SESSION: &str = "6f1c2d3e-4a5b-4c6d-8e7f-0123456789ab";
const MENTION: &str = "When it is done I will write <promise>DONE</promise> on its own line.";
const DECLARATION: &str = "The build is green.\n<promise>DONE</promise>";
const LOOP: &str =
    "/vigil:vigil-loop Make the build green. --max-iterations 4 --completion-promise DONE";

/// The release as the launcher on this machine asks for it: the launcher of an x86_64 Linux
/// fetches the musl archive, and this machine builds only its own (glibc) target, whose
/// binaries run here as well; so the host's archive is served, and pinned, under that name.
fn plugin_release(distrib: &Path) -> (PathBuf, String) {
    let served = Path::new(REPO).join("target/release-suite/plugin-release");
    let _ = std::fs::remove_dir_all(&served);
    std::fs::create_dir_all(&served).unwrap();
    let archive = distrib.join(format!("vigil-{}.tar.xz", host()));
    let name = "vigil-x86_64-unknown-linux-musl.tar.xz";
    std::fs::copy(&archive, served.join(name)).unwrap();
    let out = run(Command::new("sha256sum").arg(&archive));
    let sum = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    // dist's sha256.sum names every target; the others are never asked for here.
    let sums = [
        "x86_64-unknown-linux-musl",
        "aarch64-unknown-linux-musl",
        "x86_64-apple-darwin",
        "aarch64-apple-darwin",
    ]
    .map(|t| format!("{sum} *vigil-{t}.tar.xz\n"))
    .concat();
    (served, sums)
}

/// A marketplace directory holding the plugin of this checkout, its release pinned by
/// scripts/pin-release.sh as the release workflow does.
fn marketplace(sums: &str) -> PathBuf {
    let copy = tracked_copy("marketplace");
    std::fs::write(copy.join("sha256.sum"), sums).unwrap();
    let out = run(Command::new(copy.join("scripts/pin-release.sh")).arg(copy.join("sha256.sum")));
    assert!(out.status.success(), "{}", said(&out));
    std::fs::remove_file(copy.join("sha256.sum")).unwrap();
    copy
}

struct Session {
    _root: tempfile::TempDir,
    home: PathBuf,
    project: PathBuf,
}

/// A HOME with the plugin installed from `marketplace` by Claude Code's own commands, and a
/// git project beside it. The PATH the client runs with has no vigil binaries and no cargo.
fn session_with_plugin(clients: &clients::Clients, marketplace: &Path) -> Session {
    let root = tempfile::tempdir().unwrap();
    let home = root.path().join("home");
    let project = root.path().join("project");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&project).unwrap();
    git(&project, &["init", "-q"]);
    git(&project, &["commit", "-qm", "start", "--allow-empty"]);
    for dir in ["/usr/local/bin", "/usr/bin", "/bin"] {
        for name in ["cargo", "stop-gate", "session-start-loader"] {
            assert!(
                !Path::new(dir).join(name).exists(),
                "{dir}/{name}: the client's PATH must hold no cargo and no vigil"
            );
        }
    }
    for args in [
        &[
            "plugin",
            "marketplace",
            "add",
            marketplace.to_str().unwrap(),
        ][..],
        &["plugin", "install", "vigil@vigil"][..],
    ] {
        let out = clients::run(
            clients::claude(clients, &home, &project, "http://127.0.0.1:9", args),
            std::time::Duration::from_secs(120),
        );
        assert!(out.status.success(), "claude {args:?}: {}", said(&out));
    }
    Session {
        _root: root,
        home,
        project,
    }
}

/// What a plugin scenario starts from: the clients, the release built by dist, the plugin's
/// release files to serve, and a session whose marketplace pins them.
struct Plugged {
    clients: clients::Clients,
    distrib: PathBuf,
    served_dir: PathBuf,
    session: Session,
}

/// [`Plugged`], where dist and the clients are here (else the test is skipped).
fn plugged() -> Option<Plugged> {
    let dist = dist()?;
    let clients = clients::clients()?;
    let distrib = artifacts(&dist);
    let (served_dir, sums) = plugin_release(&distrib);
    let marketplace = marketplace(&sums);
    let session = session_with_plugin(&clients, &marketplace);
    Some(Plugged {
        clients,
        distrib,
        served_dir,
        session,
    })
}

/// Where Claude Code keeps the plugin's data, and so its binaries.
fn plugin_bin(home: &Path) -> PathBuf {
    home.join(".claude/plugins/data/vigil-vigil")
        .join(env!("CARGO_PKG_VERSION"))
        .join("bin")
}

#[test]
fn claude_code_fetches_the_plugins_verified_release_at_its_first_session_and_the_loop_ends_only_on_a_declaration()
 {
    let Some(Plugged {
        clients,
        distrib,
        served_dir,
        session: s,
    }) = plugged()
    else {
        return;
    };
    assert!(!plugin_bin(&s.home).exists(), "nothing installed yet");

    let files = serve(served_dir, as_is);
    let model = server::Server::start(
        vec![
            server::Turn::Text(MENTION.into()),
            server::Turn::Text(DECLARATION.into()),
        ],
        None,
    );
    let mut cmd = clients::claude(
        &clients,
        &s.home,
        &s.project,
        &model.url,
        &[
            "-p",
            LOOP,
            "--session-id",
            SESSION,
            "--dangerously-skip-permissions",
        ],
    );
    cmd.env("VIGIL_DOWNLOAD_URL", &files.url);
    let out = clients::run(cmd, std::time::Duration::from_secs(180));
    assert!(out.status.success(), "{}", said(&out));

    // The first session fetched the archive once, and what it installed is the release's.
    assert_eq!(
        files.requests(),
        vec!["/vigil-x86_64-unknown-linux-musl.tar.xz".to_string()]
    );
    let unpacked = distrib.join(format!("vigil-{}", host()));
    for binary in BINARIES {
        assert_eq!(
            std::fs::read(plugin_bin(&s.home).join(binary)).unwrap(),
            std::fs::read(unpacked.join(binary)).unwrap(),
            "{binary} is the release's"
        );
    }
    // The loop ran: the mention did not end it, the declaration did.
    let requests = model.main_requests();
    assert_eq!(requests.len(), 2, "{}", said(&out));
    assert!(
        requests[0].text().contains("pass 1/4"),
        "the loop command's status line came from the installed binary: {}",
        requests[0].text()
    );
    let status = run(Command::new(plugin_bin(&s.home).join("stop-gate"))
        .args(["loop", "status", "--session", SESSION, "--json"])
        .current_dir(&s.project)
        .env("VIGIL_STATE_HOME", clients::state_home_of(&s.project)));
    let status: Value = serde_json::from_slice(&status.stdout).unwrap_or(Value::Null);
    assert_eq!(status["status"], "passed", "{status}");
    assert_eq!(status["iteration"], 2, "{status}");
}

#[test]
fn claude_code_offline_goes_on_with_one_line_and_installs_at_the_next_start() {
    let Some(Plugged {
        clients,
        served_dir,
        session: s,
        ..
    }) = plugged()
    else {
        return;
    };
    let model = server::Server::start(vec![server::Turn::Text("Hello.".into())], None);
    let session = |download: &str| {
        let mut cmd = clients::claude(
            &clients,
            &s.home,
            &s.project,
            &model.url,
            &["-p", "hi", "--output-format", "stream-json", "--verbose"],
        );
        cmd.env("VIGIL_DOWNLOAD_URL", download);
        clients::run(cmd, std::time::Duration::from_secs(180))
    };
    let out = session(&unreachable());
    assert!(out.status.success(), "the session goes on: {}", said(&out));
    let notices: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["subtype"] == "hook_response" && v["hook_event"] == "SessionStart")
        .map(|v| v["stdout"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(notices.len(), 1, "{}", said(&out));
    assert_eq!(notices[0].lines().count(), 1, "{notices:?}");
    let notice: Value = serde_json::from_str(&notices[0]).unwrap();
    assert!(
        notice["systemMessage"]
            .as_str()
            .unwrap()
            .starts_with("vigil: could not download"),
        "{notice}"
    );
    assert!(!plugin_bin(&s.home).join("stop-gate").exists());

    // Online again: the next session installs the release.
    let files = serve(served_dir, as_is);
    let out = session(&files.url);
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(files.requests().len(), 1);
    assert!(plugin_bin(&s.home).join("stop-gate").is_file());
}

// --- vigil's one-line installer ---------------------------------------------------------------

#[test]
fn the_one_line_installer_installs_the_pinned_release_in_a_home_with_no_cargo() {
    let Some(dist) = dist() else { return };
    let distrib = artifacts(&dist);
    let (served_dir, sums) = plugin_release(&distrib);
    let pinned = marketplace(&sums).join("hooks/release.sha256");
    std::fs::copy(&pinned, served_dir.join("release.sha256")).unwrap();
    let files = serve(served_dir, as_is);
    let home = tempfile::tempdir().unwrap();
    let bin = home.path().join(".local/bin");
    // `curl -fsSL …/hooks/vigil-run | sh -s -- --to ~/.local/bin`, with PATH holding no cargo.
    let script = std::fs::read(Path::new(REPO).join("hooks/vigil-run")).unwrap();
    let mut child = Command::new("sh")
        .args(["-s", "--", "--to"])
        .arg(&bin)
        .env_clear()
        .env("HOME", home.path())
        .env("PATH", "/usr/bin:/bin")
        .env("VIGIL_PINS_URL", format!("{}/release.sha256", files.url))
        .env("VIGIL_DOWNLOAD_URL", &files.url)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(&script).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", said(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with(&format!(
            "vigil {} is installed in {}. Next,",
            env!("CARGO_PKG_VERSION"),
            bin.display()
        )),
        "{}",
        said(&out)
    );
    installed_and_wiring(&bin, home.path());
}

// --- cargo install ------------------------------------------------------------------------------

#[test]
fn cargo_install_locked_from_the_repository_builds_every_binary() {
    let Some(dist) = dist() else { return };
    // The copy dist built from holds the tracked files, as a clone does (`cargo install --git`
    // would clone the same files, but needs the network). Offline, from the registry cache the
    // suite already has, into dist's target dir, whose build it reuses.
    let _ = artifacts(&dist);
    let root = tempfile::tempdir().unwrap();
    let out = run(release::building(Command::new(env!("CARGO")))
        .args([
            "install",
            "--locked",
            "--offline",
            "--profile",
            "dist",
            "--target",
        ])
        .arg(host())
        .arg("--path")
        .arg(release::tree())
        .arg("--root")
        .arg(root.path()));
    assert!(out.status.success(), "cargo install: {}", said(&out));
    for binary in BINARIES {
        let version = run(Command::new(root.path().join("bin").join(binary)).arg("--version"));
        assert_eq!(
            String::from_utf8_lossy(&version.stdout).trim(),
            format!("{binary} {}", env!("CARGO_PKG_VERSION"))
        );
    }
}
