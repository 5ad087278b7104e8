//! SPEC §11, the warm copy: under a hold the check runs in a copy kept in the protected state
//! from one Stop to the next and brought to the tree by what changed. Each test plays the agent
//! against what the copy believes: a check that leaves files, edits them within the same
//! moment, or swaps a directory for a link out; an edit whose mtime is put back; a cache that
//! is damaged or a copy another check holds. What a check writes is discarded before the next
//! check, and the check always runs on the tree as it is.

use crate::support::*;

/// A project whose `tests/` is held, with `src/` of a few files beside it.
fn project() -> Project {
    let p = Project::builder()
        .git()
        .file("tests/t.sh", "true\n")
        .file("src/a.txt", "a\n")
        .file("src/b.txt", "b\n")
        .file("flag", "no!\n")
        .build();
    p.held(&["add", "tests"]);
    p
}

fn warm_copy(p: &Project) -> std::path::PathBuf {
    p.protected().join("check-copy/copy")
}

#[test]
fn a_file_the_check_leaves_in_its_copy_is_gone_before_the_next_check() {
    let p = project();
    let check = "test -f from_check && exit 0; : > from_check; : > src/from_check; exit 1";
    for session in ["s1", "s2", "s3"] {
        let stop = p.stop(&["--run", check], session, Some("x"));
        assert!(
            stop.blocked(),
            "{session}: the check found what an earlier one left"
        );
    }
    // The last check's file is there until the next Stop: the check ran in the warm copy.
    assert!(warm_copy(&p).join("src/from_check").is_file());
    assert!(
        !p.path().join("from_check").exists(),
        "the check wrote the tree"
    );
}

#[test]
fn a_file_the_check_rewrites_at_once_with_the_same_size_is_restored() {
    let p = project();
    // At its first instruction, within the clock tick of the copy's seal: same size, new bytes.
    let check = "grep -q yes flag && exit 0; printf 'yes\\n' > flag; exit 1";
    for session in ["s1", "s2", "s3"] {
        let stop = p.stop(&["--run", check], session, Some("x"));
        assert!(
            stop.blocked(),
            "{session}: the check found the flag an earlier one set"
        );
    }
    assert_eq!(
        std::fs::read_to_string(p.path().join("flag")).unwrap(),
        "no!\n"
    );
}

#[test]
fn a_directory_the_check_swaps_for_a_link_out_is_never_written_through() {
    let p = project();
    let outside = tempfile::tempdir().unwrap();
    let check = format!(
        "if [ -L src ] || [ ! -f src/a.txt ]; then exit 0; fi; rm -rf src && ln -s {} src; exit 1",
        outside.path().display()
    );
    for session in ["s1", "s2"] {
        // The agent's edit between Stops, so the next copy writes into src/.
        write_file(&p.path().join("src/a.txt"), format!("a {session}\n"));
        let stop = p.stop(&["--run", &check], session, Some("x"));
        assert!(
            stop.blocked(),
            "{session}: the link an earlier check made was kept"
        );
    }
    let written: Vec<_> = std::fs::read_dir(outside.path()).unwrap().collect();
    assert!(
        written.is_empty(),
        "the copy was written through the link: {written:?}"
    );
}

#[test]
fn an_edit_whose_mtime_the_agent_puts_back_reaches_the_check() {
    let p = project();
    let check = "grep -q a src/a.txt";
    assert!(!p.stop(&["--run", check], "s1", Some("x")).blocked());
    // Same size, and the mtime set back to what it was: only the change time tells.
    let file = p.path().join("src/a.txt");
    let before = std::fs::metadata(&file).unwrap();
    write_file(&file, "z\n");
    filetime::set_file_mtime(
        &file,
        filetime::FileTime::from_last_modification_time(&before),
    )
    .unwrap();
    let stop = p.stop(&["--run", check], "s2", Some("x"));
    assert!(stop.blocked(), "the check ran on the copy's old bytes");
}

#[test]
fn files_the_agent_adds_removes_and_renames_are_as_the_tree_has_them() {
    let p = project();
    let check = "test -f src/a.txt && test -f src/b.txt";
    assert!(!p.stop(&["--run", check], "s1", Some("x")).blocked());
    std::fs::rename(p.path().join("src/b.txt"), p.path().join("src/c.txt")).unwrap();
    write_file(&p.path().join("lib/d/e.txt"), "e\n");
    std::fs::remove_file(p.path().join("src/a.txt")).unwrap();
    let now =
        "test ! -e src/a.txt && test ! -e src/b.txt && test -f src/c.txt && test -f lib/d/e.txt";
    let stop = p.stop(&["--run", now], "s2", Some("x"));
    assert!(!stop.blocked(), "{}", stop.reason());
    assert!(p.stop(&["--run", check], "s3", Some("x")).blocked());
}

#[test]
fn a_damaged_cache_believes_nothing() {
    let p = project();
    assert!(
        !p.stop(&["--run", "grep -q a src/a.txt"], "s1", Some("x"))
            .blocked()
    );
    let index = p.protected().join("check-copy/index");
    assert!(index.is_file(), "no cache was written");
    for damage in [&b""[..], b"not an index", &[0xff; 4096]] {
        std::fs::write(&index, damage).unwrap();
        write_file(&p.path().join("src/a.txt"), "z\n");
        let stop = p.stop(&["--run", "grep -q a src/a.txt"], "s2", Some("x"));
        assert!(stop.blocked(), "a damaged cache was believed");
        write_file(&p.path().join("src/a.txt"), "a\n");
        let stop = p.stop(&["--run", "grep -q a src/a.txt"], "s3", Some("x"));
        assert!(!stop.blocked(), "{}", stop.reason());
    }
}

#[test]
fn a_warm_copy_another_check_holds_leaves_this_one_a_fresh_copy() {
    let p = project();
    assert!(!p.stop(&["--run", "true"], "s1", Some("x")).blocked());
    let lock = std::fs::File::options()
        .write(true)
        .open(p.protected().join("check-copy/lock"))
        .unwrap();
    lock.lock().unwrap();
    write_file(&p.path().join("src/a.txt"), "z\n");
    let stop = p.stop(&["--run", "grep -q a src/a.txt"], "s2", Some("x"));
    assert!(stop.blocked(), "the busy copy's old bytes were checked");
    assert!(
        !p.stop(&["--run", "grep -q z src/a.txt"], "s3", Some("x"))
            .blocked()
    );
    drop(lock);
}
