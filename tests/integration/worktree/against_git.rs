//! SPEC §5, the worktree subject equals `git add -A && git write-tree` for any clean checkout:
//! on random trees (proptest), and on a large one hashed in parallel.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use proptest::prelude::*;

use super::{gits_tree, repo, subject};
use crate::support::*;

/// One thing in a random tree.
#[derive(Clone, Debug)]
enum Item {
    File {
        path: String,
        body: u8,
        exec: bool,
    },
    Link {
        path: String,
        target: String,
    },
    Dir {
        path: String,
    },
    Fifo {
        path: String,
    },
    Ignore {
        dir: String,
        pattern: String,
    },
    /// Tracked with `git add -f`, before the ignore rules are written.
    Forced {
        path: String,
    },
}

fn items() -> impl Strategy<Value = Vec<Item>> {
    let name = prop::sample::select(vec![
        "a", "b", "a.b", "a-", "a.txt", "x.log", "build", "keep.log", "Z", ".hidden", "sp ace",
        "é", "a0",
    ]);
    let path = prop::collection::vec(name, 1..4).prop_map(|parts| parts.join("/"));
    let pattern = prop::sample::select(vec![
        "*.log",
        "build/",
        "!keep.log",
        "/a",
        "a*",
        "*.b",
        "b/",
        "**/x.log",
        ".hidden",
        "Z",
    ]);
    let dir = prop::sample::select(vec!["", "a", "build", "b/a"]);
    let item = prop_oneof![
        6 => (path.clone(), any::<u8>(), any::<bool>())
            .prop_map(|(path, body, exec)| Item::File { path, body, exec }),
        1 => (path.clone(), prop::sample::select(vec!["a", "a.b/x", "nowhere", "/nonexistent"]))
            .prop_map(|(path, target)| Item::Link { path, target: target.into() }),
        1 => path.clone().prop_map(|path| Item::Dir { path }),
        1 => path.clone().prop_map(|path| Item::Fifo { path }),
        2 => (dir, pattern).prop_map(|(dir, pattern)| Item::Ignore {
            dir: dir.into(),
            pattern: pattern.into(),
        }),
        2 => path.prop_map(|path| Item::Forced { path }),
    ];
    prop::collection::vec(item, 0..24)
}

/// Makes the directories above `path` inside `top`, never through a symlink (a link may
/// point outside the test's directory); false when something else stands in the way or
/// `path` exists already.
fn make_parents(top: &Path, path: &Path) -> bool {
    let relative = path.strip_prefix(top).unwrap();
    let mut at = top.to_path_buf();
    let parts: Vec<_> = relative.components().collect();
    for part in &parts[..parts.len() - 1] {
        at.push(part);
        match at.symlink_metadata() {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => return false,
            Err(_) => std::fs::create_dir(&at).unwrap(),
        }
    }
    path.symlink_metadata().is_err()
}

/// Makes the tree; a path that collides with what is there already is skipped.
fn build(dir: &Path, items: &[Item]) {
    let parent_ok = |path: &Path| make_parents(dir, path);
    for item in items {
        match item {
            Item::File { path, body, exec } => {
                let path = dir.join(path);
                if parent_ok(&path) {
                    std::fs::write(&path, format!("body {body}\n")).unwrap();
                    if *exec {
                        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
                            .unwrap();
                    }
                }
            }
            Item::Link { path, target } => {
                let path = dir.join(path);
                if parent_ok(&path) {
                    std::os::unix::fs::symlink(target, &path).unwrap();
                }
            }
            Item::Dir { path } => {
                let path = dir.join(path);
                if parent_ok(&path) {
                    std::fs::create_dir(&path).unwrap();
                }
            }
            Item::Fifo { path } => {
                let path = dir.join(path);
                if parent_ok(&path) {
                    std::process::Command::new("mkfifo")
                        .arg(&path)
                        .status()
                        .unwrap();
                }
            }
            Item::Forced { path } => {
                let full = dir.join(path);
                if parent_ok(&full) {
                    std::fs::write(&full, "forced\n").unwrap();
                    git(dir, &["add", "-f", "--", path]);
                }
            }
            Item::Ignore { .. } => {}
        }
    }
    for item in items {
        if let Item::Ignore { dir: sub, pattern } = item {
            let at = dir.join(sub);
            if at.is_dir() && at.symlink_metadata().is_ok_and(|m| m.is_dir()) {
                let file = at.join(".gitignore");
                if file.symlink_metadata().map_or(true, |m| m.is_file()) {
                    let mut text = std::fs::read_to_string(&file).unwrap_or_default();
                    text.push_str(pattern);
                    text.push('\n');
                    std::fs::write(&file, text).unwrap();
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// vigil's subject equals `git add -A && git write-tree`, for any tree of files, modes,
    /// links, nested ignore files, ignored and untracked files, tracked files in ignored
    /// directories, empty directories and FIFOs.
    #[test]
    fn the_worktree_subject_is_what_git_add_all_and_write_tree_make(items in items()) {
        let dir = repo();
        build(dir.path(), &items);
        let ours = subject(dir.path());
        let theirs = gits_tree(dir.path());
        prop_assert_eq!(ours, Ok(theirs), "{:?}", items);
    }
}

/// A large tree is walked by several threads (from 2,000 tracked files, or 32 MiB of them), its
/// big files hashed as jobs of their own: the id is git's all the same.
#[test]
fn a_large_tree_is_hashed_in_parallel_as_git_hashes_it() {
    let many = repo();
    for d in 0..50 {
        let dir = many.path().join(format!("d{d}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..50 {
            std::fs::write(dir.join(format!("f{f}.txt")), format!("{d} {f}\n")).unwrap();
        }
    }
    git(many.path(), &["add", "-A"]);
    std::fs::write(many.path().join("d7/untracked.txt"), "new\n").unwrap();
    assert_eq!(subject(many.path()).unwrap(), gits_tree(many.path()));
    let big = repo();
    for (i, byte) in [1u8, 2, 3].into_iter().enumerate() {
        std::fs::write(big.path().join(format!("big{i}.bin")), vec![byte; 12 << 20]).unwrap();
    }
    std::fs::write(big.path().join("small.txt"), "small\n").unwrap();
    git(big.path(), &["add", "-A"]);
    let id = subject(big.path()).unwrap();
    assert_eq!(id, gits_tree(big.path()));
    std::fs::write(big.path().join("big1.bin"), vec![9u8; 12 << 20]).unwrap();
    assert_ne!(subject(big.path()).unwrap(), id);
}
