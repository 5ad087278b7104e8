//! SPEC §9, gates compute from content, not from caches: the index's stat data and cached
//! trees, `core.worktree`, filters, attributes and `autocrlf` change nothing that is hashed,
//! and a hanging git or filter cannot hold the gate.

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use super::{
    BROKEN, GOOD, assert_hidden_from_git_but_not_from_vigil, break_in_the_past, gate,
    git_sees_nothing, marked, subject_of, verify, write_executable,
};
use crate::support::*;

/// git sees no change in `dir`, and vigil does: the agent's trick hides it from git alone.
fn hidden_from_git_only(dir: &std::path::Path) {
    git_sees_nothing(dir);
    assert_hidden_from_git_but_not_from_vigil(dir);
}

#[test]
fn an_index_entry_rewritten_to_the_old_blob_and_the_new_stat_data_hides_nothing() {
    let dir = marked();
    break_in_the_past(dir.path());
    // The agent rewrites the index: the entry keeps the good blob's id, with the stat data
    // of the broken file, so git takes the file for unchanged without reading it.
    forge_index_stat(dir.path(), "lib.rs", GOOD.len());
    hidden_from_git_only(dir.path());
}

#[test]
fn a_cached_tree_set_back_to_the_old_tree_hides_nothing() {
    let dir = marked();
    let good_tree = git(dir.path(), &["write-tree"]);
    break_in_the_past(dir.path());
    // Every file older than the index, so git trusts the stat data of each (none is "racy").
    let aged = std::process::Command::new("touch")
        .args(["-d", "1 hour ago", ".gitignore"])
        .current_dir(dir.path())
        .status()
        .unwrap();
    assert!(aged.success());
    git(dir.path(), &["commit", "-qam", "broken"]);
    let broken_tree = git(dir.path(), &["write-tree"]);
    // The index's cached tree (its TREE extension) now names the broken tree: set it back to
    // the good one, and the index checksum with it.
    let index_path = dir.path().join(".git/index");
    let mut bytes = std::fs::read(&index_path).unwrap();
    let unhex = |hex: &str| -> Vec<u8> {
        (0..20)
            .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
            .collect()
    };
    let (from, to) = (unhex(&broken_tree), unhex(&good_tree));
    let at = bytes
        .windows(20)
        .position(|w| w == from.as_slice())
        .expect("the index caches the tree");
    bytes[at..at + 20].copy_from_slice(&to);
    let body = bytes.len() - 20;
    let mut hasher = sha1dc::Hasher::new();
    hasher.update(&bytes[..body]);
    let sum: [u8; 20] = hasher.finalize().unwrap().into();
    bytes[body..].copy_from_slice(&sum);
    std::fs::write(&index_path, &bytes).unwrap();
    // Refreshed, the index is clean in every stat field and still names the good tree.
    git(dir.path(), &["update-index", "--refresh"]);
    assert_eq!(
        git(dir.path(), &["write-tree"]),
        good_tree,
        "git believes it"
    );
    hidden_from_git_only(dir.path());
}

#[test]
fn core_worktree_pointed_at_a_pristine_copy_moves_nothing() {
    let dir = marked();
    let pristine = dir.path().join(".cache/pristine");
    std::fs::create_dir_all(&pristine).unwrap();
    for name in ["lib.rs", ".gitignore"] {
        std::fs::copy(dir.path().join(name), pristine.join(name)).unwrap();
    }
    git(
        dir.path(),
        &["config", "core.worktree", pristine.to_str().unwrap()],
    );
    dir.write("lib.rs", BROKEN);
    hidden_from_git_only(dir.path());
}

#[test]
fn a_clean_filter_bound_in_info_attributes_changes_nothing_hashed() {
    let dir = marked();
    let pristine = dir.path().join(".cache/lib.rs");
    write_file(&pristine, GOOD);
    let clean = format!("cat {}", pristine.display());
    git(dir.path(), &["config", "filter.hide.clean", &clean]);
    dir.write(".git/info/attributes", "lib.rs filter=hide\n");
    dir.write("lib.rs", BROKEN);
    hidden_from_git_only(dir.path());
}

/// A script broken by CRLF line endings (`/bin/sh\r` is no interpreter) that `core.autocrlf`
/// makes git read as the LF original.
#[test]
fn autocrlf_changes_nothing_hashed() {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q", "-b", "main"]);
    write_executable(&dir.path().join("run.sh"), "#!/bin/sh\necho ok\n");
    std::fs::write(dir.path().join(".gitignore"), ".vigil/\n").unwrap();
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["commit", "-qm", "script"]);
    ok(marker_writer_in(
        dir.path(),
        &["run", "--check", "tests", "--", "./run.sh"],
    ));
    git(dir.path(), &["config", "core.autocrlf", "true"]);
    std::fs::write(dir.path().join("run.sh"), "#!/bin/sh\r\necho ok\r\n").unwrap();
    // Staged, it is the same blob to git as the LF original.
    git(dir.path(), &["add", "run.sh"]);
    git_sees_nothing(dir.path());
    let out = verify(dir.path());
    let line = assert_one_line_error(&out, "marker-writer");
    assert!(line.contains("subject mismatch"), "{line}");
}

/// A filter that never returns would hold a git-based gate past the engine's hook timeout,
/// and the engine then lets the stop through unchecked. No git runs on the gate's path: a
/// `git` that hangs, or none at all, changes nothing.
#[test]
fn a_hanging_filter_or_git_cannot_hold_the_gate() {
    let dir = marked();
    git(dir.path(), &["config", "filter.hang.clean", "sleep 600"]);
    dir.write(".git/info/attributes", "lib.rs filter=hang\n");
    let bin = tempfile::tempdir().unwrap();
    let fake = bin.path().join("git");
    write_executable(&fake, "#!/bin/sh\nsleep 600\n");
    let path = std::ffi::OsString::from(bin.path());
    let started = Instant::now();
    assert_eq!(
        gate(dir.path(), Some(&path)),
        None,
        "the good content passes"
    );
    dir.write("lib.rs", BROKEN);
    let decision = gate(dir.path(), Some(&path)).expect("the broken content blocks");
    assert_eq!(decision["decision"], "block");
    assert!(started.elapsed() < Duration::from_secs(5));
}

fn marked_then_edited(setup: impl FnOnce(&Path)) -> Output {
    let repo = Project::git();
    ok(marker_writer_in(
        repo.path(),
        &["run", "--check", "tests", "--", "true"],
    ));
    setup(repo.path());
    verify(repo.path())
}

#[test]
fn assume_unchanged_does_not_hide_an_edit_from_the_subject() {
    let out = marked_then_edited(|dir| {
        git(dir, &["update-index", "--assume-unchanged", "lib.rs"]);
        std::fs::write(dir.join("lib.rs"), "fn main() { panic!() }\n").unwrap();
    });
    assert_contains!(negative_verdict(&out, "marker-writer"), "subject mismatch");
}

/// Skip-worktree is how a sparse checkout leaves files off the disk: the tree the marker names
/// cannot be read whole, so verify denies, naming it, and never hides the edit.
#[test]
fn skip_worktree_denies_as_a_sparse_checkout_and_never_hides_an_edit() {
    let out = marked_then_edited(|dir| {
        git(dir, &["update-index", "--skip-worktree", "lib.rs"]);
        std::fs::write(dir.join("lib.rs"), "fn main() { panic!() }\n").unwrap();
    });
    let line = usage_error(&out, "marker-writer");
    assert!(line.contains("sparse checkout (skip-worktree)"), "{line}");
}

#[test]
fn a_same_size_edit_with_its_old_mtime_is_still_seen() {
    let out = marked_then_edited(|dir| {
        git(dir, &["config", "core.trustctime", "false"]);
        git(dir, &["config", "core.checkStat", "minimal"]);
        let path = dir.join("lib.rs");
        let before = std::fs::metadata(&path).unwrap().modified().unwrap();
        std::fs::write(&path, "fn maim() {}\n").unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            "fn main() {}\n".len() as u64,
            "same size"
        );
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(before)
            .unwrap();
    });
    assert_contains!(negative_verdict(&out, "marker-writer"), "subject mismatch");
}

#[test]
fn an_edit_in_the_same_second_as_git_add_is_seen() {
    // "Racy git": an index copy stamped now would make git trust stat data from the same
    // second as the edit, and vouch for the staged content instead of what is on disk.
    let repo = Project::git();
    repo.write(".gitignore", ".vigil/\n");
    repo.write("f", "x111\n");
    git(repo.path(), &["add", "-A"]);
    repo.write("f", "y111\n");
    std::thread::sleep(std::time::Duration::from_millis(1200));
    let subject = subject_of(repo.path());
    git(repo.path(), &["add", "-A"]);
    let on_disk = git(repo.path(), &["write-tree"]);
    assert_eq!(
        subject,
        format!("git-tree:{on_disk}"),
        "the subject is the content on disk"
    );
}

#[test]
fn computing_the_subject_writes_nothing_into_the_repository() {
    let repo = Project::git();
    std::fs::write(repo.path().join("big-untracked.bin"), vec![7u8; 4 << 20]).unwrap();
    let objects = || tree(&repo.path().join(".git/objects"));
    let before = objects();
    marker_writer_in(repo.path(), &["run", "--check", "tests", "--", "true"]);
    verify(repo.path());
    assert_eq!(objects(), before, ".git/objects changed");
}
