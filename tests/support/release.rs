//! The one release build the load suite and the release suite share (issue 42): the tracked
//! files in `target/release-suite/repo`, built with cargo-dist's own command (profile `dist`,
//! which is `release`'s code generation; the host target; dist's empty RUSTFLAGS) into one
//! target dir. Whichever suite comes first compiles; the other finds every unit fresh, dist's
//! build included, because the copy is synced rather than made again: a file whose bytes did
//! not change keeps its time.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use super::{git, said};

const REPO: &str = env!("CARGO_MANIFEST_DIR");

/// The host's target triple, as rustc names it.
pub fn host() -> String {
    let out = Command::new("rustc").arg("-vV").output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_string))
        .unwrap()
}

/// Where the release is built: `target/release-suite/target`, or CI's release cache
/// (`VIGIL_RELEASE_TARGET_DIR`, which outlives the clone; `.ci/run`).
pub fn target_dir() -> PathBuf {
    std::env::var_os("VIGIL_RELEASE_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(REPO).join("target/release-suite/target"))
}

/// `cargo` (or `dist`, which runs cargo) building the release: into [`target_dir`], with the
/// RUSTFLAGS dist gives every build, so that its units and the load suite's are the same.
pub fn building(mut cmd: Command) -> Command {
    cmd.env("CARGO_TARGET_DIR", target_dir())
        .env("RUSTFLAGS", "");
    cmd
}

/// The repository's tracked files in `target/release-suite/<name>`, modes kept, as a clone (or
/// Claude Code's copy of the plugin) has them, made afresh.
pub fn tracked_copy(name: &str) -> PathBuf {
    let copy = Path::new(REPO).join("target/release-suite").join(name);
    let _ = std::fs::remove_dir_all(&copy);
    sync_tracked(&copy);
    copy
}

/// Makes `copy` hold exactly the tracked files: a file is written only where its bytes or mode
/// differ, and one no longer tracked is removed (`.git` and `target` are the copy's own).
fn sync_tracked(copy: &Path) {
    std::fs::create_dir_all(copy).unwrap();
    let files = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(REPO)
        .output()
        .unwrap();
    let mut tracked = std::collections::BTreeSet::new();
    for name in files.stdout.split(|&b| b == 0).filter(|n| !n.is_empty()) {
        let name = std::str::from_utf8(name).unwrap();
        let from = Path::new(REPO).join(name);
        if !from.is_file() {
            continue;
        }
        let to = copy.join(name);
        tracked.insert(to.clone());
        let same = |a: &Path, b: &Path| {
            let (Ok(ma), Ok(mb)) = (std::fs::metadata(a), std::fs::metadata(b)) else {
                return false;
            };
            ma.permissions() == mb.permissions() && std::fs::read(a).ok() == std::fs::read(b).ok()
        };
        if !same(&from, &to) {
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            let _ = std::fs::remove_file(&to);
            std::fs::copy(&from, &to).unwrap();
        }
    }
    let mut dirs = vec![copy.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for path in std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()) {
            if dir == copy && (path.ends_with(".git") || path.ends_with("target")) {
                continue;
            }
            if path.is_dir() {
                dirs.push(path);
            } else if !tracked.contains(&path) {
                std::fs::remove_file(&path).unwrap();
            }
        }
    }
}

/// The tracked files, synced into `target/release-suite/repo`, with the host's target added to
/// dist's config (the release config names the musl targets; this machine builds its own) and
/// committed, as dist wants a repository.
pub fn tree() -> &'static Path {
    static TREE: OnceLock<PathBuf> = OnceLock::new();
    TREE.get_or_init(|| {
        let copy = Path::new(REPO).join("target/release-suite/repo");
        sync_tracked(&copy);
        let config = copy.join("dist-workspace.toml");
        let text = std::fs::read_to_string(&config).unwrap();
        let added = text.replacen("targets = [", &format!("targets = [\"{}\", ", host()), 1);
        std::fs::write(&config, added).unwrap();
        if !copy.join(".git").exists() {
            git(&copy, &["init", "-q"]);
        }
        git(&copy, &["add", "-A"]);
        if !git(&copy, &["status", "--porcelain"]).is_empty() {
            git(&copy, &["commit", "-qm", "release"]);
        }
        copy
    })
}

/// The release binaries, built as dist builds them (`cargo build --profile dist --target
/// <host> --workspace`, in [`tree`]): the directory that holds them.
pub fn built() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let host = host();
        let mut cargo = building(Command::new(env!("CARGO")));
        let out = cargo
            .args(["build", "--locked", "--profile", "dist", "--target", &host])
            .arg("--workspace")
            .current_dir(tree())
            .output()
            .unwrap();
        assert!(out.status.success(), "the release build: {}", said(&out));
        target_dir().join(host).join("dist")
    })
}
