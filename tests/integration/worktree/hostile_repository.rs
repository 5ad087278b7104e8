//! SPEC §9, what the agent can write into `.git/` and the ignore files: index paths git would
//! never track, unmerged paths, a FIFO index, a huge ignore file; and moving the top or the
//! state home, which never moves the key a project trusts.

use std::path::Path;
use std::time::{Duration, Instant};

use super::{gate, gits_tree, marked, repo, subject, verify};
use crate::support::*;

/// An index of version 2 naming `paths` (each a blob of `lib.rs`'s id), written by hand: git
/// itself refuses to write most of what these tests need.
fn write_index(dir: &Path, paths: &[&[u8]]) {
    let mut paths = paths.to_vec();
    paths.sort();
    let mut bytes = b"DIRC".to_vec();
    bytes.extend_from_slice(&2u32.to_be_bytes());
    bytes.extend_from_slice(&(paths.len() as u32).to_be_bytes());
    let blob = git(dir, &["hash-object", "lib.rs"]);
    let id: Vec<u8> = (0..20)
        .map(|i| u8::from_str_radix(&blob[2 * i..2 * i + 2], 16).unwrap())
        .collect();
    for path in paths {
        let start = bytes.len();
        bytes.extend_from_slice(&[0u8; 24]); // ctime, mtime, dev, ino
        bytes.extend_from_slice(&0o100644u32.to_be_bytes());
        bytes.extend_from_slice(&[0u8; 12]); // uid, gid, size
        bytes.extend_from_slice(&id);
        bytes.extend_from_slice(&(path.len().min(0xfff) as u16).to_be_bytes());
        bytes.extend_from_slice(path);
        // NUL-padded to a multiple of 8, with at least one NUL.
        let len = bytes.len() - start;
        bytes.extend(std::iter::repeat_n(0u8, 8 - len % 8));
    }
    let mut hasher = sha1dc::Hasher::new();
    hasher.update(&bytes);
    let sum: [u8; 20] = hasher.finalize().unwrap().into();
    bytes.extend_from_slice(&sum);
    std::fs::write(dir.join(".git/index"), bytes).unwrap();
}

/// Paths git never tracks, planted in the index: each denies with one line, writes nothing
/// outside the snapshot, and never hangs or eats memory (a leading `/` once sent the tree
/// builder round forever; `..` let a snapshot run copy files out of its directory, a trusted
/// key into the state home among them).
#[test]
fn an_index_path_git_would_never_track_denies() {
    let outside = tempfile::tempdir().unwrap();
    let planted = outside.path().join("planted");
    for bad in [
        format!("{}", planted.display()),
        "../planted".to_string(),
        "src//lib.rs".to_string(),
        "./lib.rs".to_string(),
        "src/../lib.rs".to_string(),
        ".GIT/config".to_string(),
        "src/.git/x".to_string(),
    ] {
        let dir = marked();
        write_index(dir.path(), &[b".gitignore", b"lib.rs", bad.as_bytes()]);
        for args in [
            &["verify", "--check", "tests"][..],
            &["run", "--check", "x", "--snapshot", "--", "true"][..],
        ] {
            let out = marker_writer_in(dir.path(), args);
            let line = usage_error(&out, "marker-writer");
            assert!(line.contains("which git never tracks"), "{line}");
        }
        assert!(!planted.exists(), "{bad:?} wrote outside the snapshot");
        assert!(!dir.path().parent().unwrap().join("planted").exists());
    }
}

#[test]
fn an_unmerged_path_is_one_entry_of_the_tree() {
    let dir = repo();
    std::fs::write(dir.path().join("a.txt"), "base\n").unwrap();
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["commit", "-qm", "base"]);
    git(dir.path(), &["checkout", "-qb", "other"]);
    std::fs::write(dir.path().join("a.txt"), "other\n").unwrap();
    git(dir.path(), &["commit", "-qam", "other"]);
    git(dir.path(), &["checkout", "-q", "main"]);
    std::fs::write(dir.path().join("a.txt"), "main\n").unwrap();
    git(dir.path(), &["commit", "-qam", "main"]);
    let merge = git_output(dir.path(), &["merge", "-q", "other"]);
    assert!(!merge.status.success(), "the merge conflicts");
    assert_eq!(subject(dir.path()).unwrap(), gits_tree(dir.path()));
}

/// A FIFO for the index, or a huge ignore file, once made the gate hang or run out of memory,
/// and an engine that kills a hung hook lets the stop through. Each denies at once.
#[test]
fn a_fifo_index_or_a_huge_ignore_file_denies_at_once() {
    let fifo = |path: &Path| {
        mkfifo(path);
    };
    type Plant<'a> = Box<dyn Fn(&Path) + 'a>;
    let cases: [(&str, Plant); 4] = [
        (
            "cannot read the index",
            Box::new(|dir| {
                std::fs::remove_file(dir.join(".git/index")).unwrap();
                fifo(&dir.join(".git/index"));
            }),
        ),
        (
            "bytes, over the 1048576 read",
            Box::new(|dir| {
                let file = std::fs::File::create(dir.join(".git/info/exclude")).unwrap();
                file.set_len(8 << 30).unwrap();
            }),
        ),
        (
            "is not UTF-8",
            Box::new(|dir| {
                std::fs::write(dir.join(".gitignore"), b"*.rs\n!\xffevil.rs\n").unwrap()
            }),
        ),
        (
            "uses a bracket form",
            Box::new(|dir| std::fs::write(dir.join(".gitignore"), "[a\\]]\n").unwrap()),
        ),
    ];
    for (said, plant) in cases {
        let dir = marked();
        plant(dir.path());
        let started = Instant::now();
        let out = verify(dir.path());
        let line = usage_error(&out, "marker-writer");
        assert!(line.contains(said), "{line}");
        let decision = gate(dir.path(), None).expect("the gate blocks");
        assert_eq!(decision["decision"], "block");
        assert!(started.elapsed() < Duration::from_secs(10), "{said}");
    }
}

/// A key trusted for the project's top is found however the agent moves the top: a `.git`
/// planted in the session's subdirectory, or the project's `.git` made a symlink so the search
/// ends in a parent repository.
#[test]
fn a_trusted_key_holds_wherever_the_agent_moves_the_top() {
    let keys = tempfile::tempdir().unwrap();
    let (secret, public) = keygen_into(keys.path(), &keys.path().join("ci"));
    let parent = repo();
    std::fs::write(parent.path().join(".gitignore"), "*\n").unwrap();
    let dir = parent.path().join("project");
    std::fs::create_dir_all(dir.join("app")).unwrap();
    git(&dir, &["init", "-q", "-b", "main"]);
    std::fs::write(dir.join("app/main.py"), "print(1)\n").unwrap();
    std::fs::write(dir.join(".gitignore"), ".vigil/\n").unwrap();
    git(&dir, &["add", "-A"]);
    git(&dir, &["commit", "-qm", "app"]);
    ok(marker_writer_in(&dir, &["trust", public.to_str().unwrap()]));
    let sign = secret.to_str().unwrap();
    let out = marker_writer_in(
        &dir,
        &["run", "--check", "tests", "--sign-key", sign, "--", "true"],
    );
    assert!(out.status.success());
    let unsigned_passes = |at: &Path, project: &Path| {
        let written = marker_writer()
            .args(["write", "--check", "tests", "--status", "passed"])
            .current_dir(at)
            .env("CLAUDE_PROJECT_DIR", project)
            .output()
            .unwrap();
        assert!(written.status.success());
        marker_writer()
            .args(["verify", "--check", "tests"])
            .current_dir(at)
            .env("CLAUDE_PROJECT_DIR", project)
            .output()
            .unwrap()
            .status
            .success()
    };
    // Down: a repository planted in app/.
    std::fs::create_dir_all(dir.join("app/.git")).unwrap();
    std::fs::write(dir.join("app/.git/HEAD"), "ref: refs/heads/main\n").unwrap();
    assert!(!unsigned_passes(&dir.join("app"), &dir.join("app")));
    std::fs::remove_dir_all(dir.join("app/.git")).unwrap();
    // Up: .git made a symlink, which the search does not take for a repository.
    std::fs::rename(dir.join(".git"), dir.join(".git-real")).unwrap();
    std::os::unix::fs::symlink(".git-real", dir.join(".git")).unwrap();
    assert!(!unsigned_passes(&dir, &dir));
}

#[test]
fn a_relative_state_home_is_ignored_never_put_inside_the_project() {
    let dir = marked();
    let keys = tempfile::tempdir().unwrap();
    let (_, public) = keygen_into(keys.path(), keys.path());
    let out = marker_writer()
        .args(["trust", public.to_str().unwrap()])
        .current_dir(dir.path())
        .env("VIGIL_STATE_HOME", "state")
        .env("XDG_STATE_HOME", "also-relative")
        .env("HOME", keys.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(!dir.path().join("state").exists());
    assert!(!dir.path().join("also-relative").exists());
    assert_contains!(
        stdout_of(&out),
        &keys.path().join(".local/state/vigil").display().to_string()
    );
}
