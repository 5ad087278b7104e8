//! The release, end to end on loopback (issue 18): cargo-dist builds the archives and the
//! shell installer for the host target, a server on 127.0.0.1 serves them, and the installer
//! runs in a throwaway HOME whose PATH has no cargo. A tampered, truncated or unreachable
//! download installs nothing.
//!
//! Needs `dist` (cargo-dist, pinned in dist-workspace.toml) on PATH or in
//! `~/.cache/vigil-tools/bin` (`.ci/run` installs it there once); without it the suite is
//! skipped with one line, unless `VIGIL_RELEASE_REQUIRED=1` (CI) makes that a failure.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

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
        eprintln!("skipping the release suite: dist (cargo-dist) is not installed");
    }
    found
}

fn host() -> String {
    let out = Command::new("rustc").arg("-vV").output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_string))
        .unwrap()
}

fn run(cmd: &mut Command) -> Output {
    cmd.output().unwrap()
}

fn said(out: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The release artifacts for the host target, built once by dist from a copy of the
/// repository's tracked files (the release config names the musl targets; the copy adds the
/// host's, which is all this machine can build).
fn artifacts(dist: &Path) -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let copy = Path::new(REPO).join("target/release-suite/repo");
            let _ = std::fs::remove_dir_all(&copy);
            std::fs::create_dir_all(&copy).unwrap();
            let files = run(Command::new("git")
                .args(["ls-files", "-z"])
                .current_dir(REPO));
            for name in files.stdout.split(|&b| b == 0).filter(|n| !n.is_empty()) {
                let name = std::str::from_utf8(name).unwrap();
                let from = Path::new(REPO).join(name);
                if !from.is_file() {
                    continue;
                }
                let to = copy.join(name);
                std::fs::create_dir_all(to.parent().unwrap()).unwrap();
                std::fs::copy(&from, &to).unwrap();
            }
            let config = copy.join("dist-workspace.toml");
            let text = std::fs::read_to_string(&config).unwrap();
            let text = text.replacen("targets = [", &format!("targets = [\"{}\", ", host()), 1);
            std::fs::write(&config, text).unwrap();
            for args in [
                &["init", "-q"][..],
                &["add", "-A"][..],
                &[
                    "-c",
                    "user.name=t",
                    "-c",
                    "user.email=t@t",
                    "commit",
                    "-qm",
                    "release",
                ][..],
            ] {
                assert!(
                    run(Command::new("git").args(args).current_dir(&copy))
                        .status
                        .success()
                );
            }
            let out = run(Command::new(dist)
                .args(["build", "--artifacts=all", "--target", &host()])
                .current_dir(&copy)
                .env(
                    "CARGO_TARGET_DIR",
                    Path::new(REPO).join("target/release-suite/target"),
                ));
            assert!(out.status.success(), "dist build: {}", said(&out));
            // dist puts the artifacts beside the copy's own sources, whatever the target dir.
            copy.join("target/distrib")
        })
        .clone()
}

/// Serves `dir` on 127.0.0.1; `mangle` may change a file's bytes before they are sent.
fn serve(
    dir: PathBuf,
    mangle: impl Fn(&str, Vec<u8>) -> Vec<u8> + Send + Sync + 'static,
) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let mangle = Arc::new(mangle);
    let served = Arc::new(Mutex::new(()));
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let dir = dir.clone();
            let mangle = mangle.clone();
            let _served = served.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                if reader.read_line(&mut line).is_err() {
                    return;
                }
                loop {
                    let mut header = String::new();
                    if reader.read_line(&mut header).is_err() || header.trim().is_empty() {
                        break;
                    }
                }
                let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
                let name = path.rsplit('/').next().unwrap_or("").to_string();
                let mut stream = stream;
                match std::fs::read(dir.join(&name)) {
                    Ok(bytes) => {
                        let bytes = mangle(&name, bytes);
                        let _ = write!(
                            stream,
                            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                            bytes.len()
                        );
                        let _ = stream.write_all(&bytes);
                    }
                    Err(_) => {
                        let _ = write!(
                            stream,
                            "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                        );
                    }
                }
            });
        }
    });
    url
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

const BINARIES: [&str; 6] = [
    "promise-matcher",
    "stop-gate",
    "marker-writer",
    "session-end-handoff",
    "session-start-loader",
    "settings-merge",
];

#[test]
fn the_installer_fetches_verifies_and_installs_the_release_and_refuses_a_bad_download() {
    let Some(dist) = dist() else { return };
    let distrib = artifacts(&dist);
    assert!(
        !Path::new("/usr/bin/cargo").exists(),
        "the installer's PATH must hold no cargo"
    );

    // A good release: the binaries land in ~/.local/bin, of this version, and wire a project.
    let url = serve(distrib.clone(), |_, bytes| bytes);
    let (home, out) = install(&distrib, &url);
    assert!(out.status.success(), "{}", said(&out));
    let bin = home.path().join(".local/bin");
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
        .arg(&bin)
        .current_dir(project.path())
        .env("HOME", home.path()));
    assert!(wired.status.success(), "{}", said(&wired));
    let check = run(Command::new(bin.join("settings-merge"))
        .args(["check", "--settings"])
        .arg(&settings)
        .current_dir(project.path())
        .env("HOME", home.path()));
    let report = String::from_utf8_lossy(&check.stdout);
    assert!(
        check.status.success() && !report.contains("[fail]"),
        "{report}"
    );

    // A tampered archive, a truncated one, a server that is not there: nothing installed.
    let archive = format!("vigil-{}.tar.xz", host());
    let tampered = {
        let archive = archive.clone();
        serve(distrib.clone(), move |name, mut bytes| {
            if name == archive {
                let at = bytes.len() / 2;
                bytes[at] ^= 0xff;
            }
            bytes
        })
    };
    let truncated = {
        let archive = archive.clone();
        serve(distrib.clone(), move |name, mut bytes| {
            if name == archive {
                bytes.truncate(bytes.len() / 2);
            }
            bytes
        })
    };
    let gone = {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        drop(listener);
        url
    };
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
