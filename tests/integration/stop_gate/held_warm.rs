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
    assert_eq!(p.read("flag"), "no!\n");
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
        p.write("src/a.txt", format!("a {session}\n"));
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
    assert!(!p.stop_s1(&["--run", check]).blocked());
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
    assert!(!p.stop_s1(&["--run", check]).blocked());
    std::fs::rename(p.path().join("src/b.txt"), p.path().join("src/c.txt")).unwrap();
    p.write("lib/d/e.txt", "e\n");
    std::fs::remove_file(p.path().join("src/a.txt")).unwrap();
    let now =
        "test ! -e src/a.txt && test ! -e src/b.txt && test -f src/c.txt && test -f lib/d/e.txt";
    let stop = p.stop(&["--run", now], "s2", Some("x"));
    stop.assert_allowed();
    assert!(p.stop(&["--run", check], "s3", Some("x")).blocked());
}

#[test]
fn a_damaged_cache_believes_nothing() {
    let p = project();
    assert!(!p.stop_s1(&["--run", "grep -q a src/a.txt"]).blocked());
    let index = p.protected().join("check-copy/index");
    assert!(index.is_file(), "no cache was written");
    for damage in [&b""[..], b"not an index", &[0xff; 4096]] {
        std::fs::write(&index, damage).unwrap();
        p.write("src/a.txt", "z\n");
        let stop = p.stop(&["--run", "grep -q a src/a.txt"], "s2", Some("x"));
        assert!(stop.blocked(), "a damaged cache was believed");
        p.write("src/a.txt", "a\n");
        let stop = p.stop(&["--run", "grep -q a src/a.txt"], "s3", Some("x"));
        stop.assert_allowed();
    }
}

#[test]
fn a_warm_copy_another_check_holds_leaves_this_one_a_fresh_copy() {
    let p = project();
    assert!(!p.stop_s1(&["--run", "true"]).blocked());
    let lock = std::fs::File::options()
        .write(true)
        .open(p.protected().join("check-copy/lock"))
        .unwrap();
    lock.lock().unwrap();
    p.write("src/a.txt", "z\n");
    let stop = p.stop(&["--run", "grep -q a src/a.txt"], "s2", Some("x"));
    assert!(stop.blocked(), "the busy copy's old bytes were checked");
    assert!(
        !p.stop(&["--run", "grep -q z src/a.txt"], "s3", Some("x"))
            .blocked()
    );
    drop(lock);
}

/// The agent's helper, left running in the background: once vigil's first read of PATH ends
/// (the comparison with the hold), it rewrites the file in place with NEW, the same size.
const FLIP: &str = r#"
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
path, new, ready = sys.argv[1], sys.argv[2].encode(), sys.argv[3]
fd = libc.inotify_init()
libc.inotify_add_watch(fd, path.encode(), 0x10)  # IN_CLOSE_NOWRITE
open(ready, "w").close()
os.read(fd, 4096)
f = os.open(path, os.O_WRONLY)
os.pwrite(f, new, 0)
os.close(f)
"#;

#[test]
fn a_held_file_swapped_between_the_comparison_and_the_copy_is_read_again_after_a_refresh() {
    if !python() {
        return;
    }
    let p = Project::builder()
        .git()
        .file("tests/t.sh", "exit 0\n")
        .build();
    p.held(&["add", "tests"]);
    // Files under the held path after it, so the copy's walk reaches the test after the helper
    // has swapped it.
    for n in 0..300 {
        write_file(&p.path().join(format!("tests/junk/{n}")), "");
    }
    assert!(
        !p.stop(&["--run", "sh tests/t.sh"], "s0", Some("x"))
            .blocked()
    );
    let ready = p.root().join("flip.ready");
    let mut flip = std::process::Command::new("python3")
        .args(["-c", FLIP])
        .arg(p.path().join("tests/t.sh"))
        .arg("exit 1\n")
        .arg(&ready)
        .spawn()
        .unwrap();
    while !ready.exists() {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // Whether the swap came before the copy or after, the check ran the held bytes.
    assert!(!p.stop_s1(&["--run", "sh tests/t.sh"]).blocked());
    flip.wait().unwrap();
    let stop = p.stop(&["--run", "sh tests/t.sh"], "s2", Some("x"));
    stop.assert_blocked_saying("differ");
    // The human takes the new test as the one that holds; the copy must run it.
    p.held(&["refresh", "tests/t.sh"]);
    for session in ["s3", "s4"] {
        let stop = p.stop(&["--run", "sh tests/t.sh"], session, Some("x"));
        assert!(
            stop.blocked(),
            "{session}: the check ran the test the hold wrote before"
        );
    }
}

/// A file that takes longer than a clock tick to copy, and is copied last (tracked, in an
/// ignored directory that sorts last: read after the walk), so what the walk wrote before it
/// is sealed well before the check.
fn slow_file(p: &Project) {
    p.write(".gitignore", "*.log\nzz/\n");
    std::fs::create_dir_all(p.path().join("zz")).unwrap();
    std::fs::write(p.path().join("zz/big"), vec![b'x'; 8 << 20]).unwrap();
    git(p.path(), &["add", "-f", "zz/big"]);
}

#[test]
fn a_link_or_an_ignored_tracked_file_the_tree_drops_is_gone_from_the_copy() {
    let p = project();
    slow_file(&p);
    p.write("src/keep.log", "kept\n");
    git(p.path(), &["add", "-f", "src/keep.log"]);
    std::os::unix::fs::symlink("a.txt", p.path().join("src/needed")).unwrap();
    let gone = "test ! -e src/needed && test ! -e src/keep.log";
    for session in ["s1", "s2"] {
        assert!(p.stop(&["--run", gone], session, Some("x")).blocked());
    }
    std::fs::remove_file(p.path().join("src/needed")).unwrap();
    git(p.path(), &["rm", "-q", "--cached", "src/keep.log"]);
    std::fs::remove_file(p.path().join("src/keep.log")).unwrap();
    for session in ["s3", "s4"] {
        let stop = p.stop(&["--run", gone], session, Some("x"));
        assert!(!stop.blocked(), "{session}: {}", stop.reason());
    }
}

#[test]
fn modes_the_check_gives_directories_of_its_copy_are_undone() {
    let p = project();
    p.write("src/sub/x", "x\n");
    slow_file(&p);
    let check =
        "test -w src && test -r src/sub/x || exit 0; chmod 000 src/sub; chmod 0555 src; exit 1";
    for session in ["s1", "s2", "s3"] {
        let stop = p.stop(&["--run", check], session, Some("x"));
        assert!(
            stop.blocked(),
            "{session}: the modes an earlier check set were kept"
        );
    }
    let left: Vec<_> = std::fs::read_dir(p.protected().join("check-copy"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|name| name.to_string_lossy().starts_with("discarded"))
        .collect();
    assert!(left.is_empty(), "copies left behind: {left:?}");
}

#[test]
fn releasing_the_hold_removes_the_warm_copy() {
    let p = project();
    assert!(!p.stop_s1(&["--run", "true"]).blocked());
    let dir = p.protected().join("check-copy");
    assert!(dir.join("copy/src/a.txt").is_file());
    p.held(&["release", "--all"]);
    assert!(!dir.join("copy").exists(), "the copy outlived the hold");
    assert!(!dir.join("index").exists());
}

/// The agent's background process: listens on SOCKET, takes a directory handle a check sends
/// it, then keeps `src/a.txt` under that directory saying `ok` for a few seconds.
const LISTENER: &str = r#"
import os, socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1]); s.listen(1); s.settimeout(8)
open(sys.argv[2], "w").close()
try:
    c, _ = s.accept()
except socket.timeout:
    sys.exit(0)
_, fds, _, _ = socket.recv_fds(c, 10, 1)
end = time.time() + 6
while time.time() < end:
    try:
        f = os.open("src/a.txt", os.O_WRONLY | os.O_TRUNC, dir_fd=fds[0])
        os.write(f, b"ok\n"); os.close(f)
    except OSError:
        pass
    time.sleep(0.001)
"#;

/// The check's side: sends its working directory to the socket, if it can reach it.
const SENDER: &str = r#"
import os, socket, sys
try:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sys.argv[1])
    socket.send_fds(s, [b"x"], [os.open(".", os.O_RDONLY | os.O_DIRECTORY)])
    s.close()
except OSError:
    pass
"#;

#[test]
fn a_check_cannot_hand_its_copy_to_a_process_the_agent_left_running() {
    if !python() {
        return;
    }
    // Where a check sees it (a check hides /tmp, and its own /tmp is private).
    let p = Project::builder()
        .git()
        .outside_tmp()
        .file("tests/t.sh", "true\n")
        .file("src/a.txt", "no\n")
        .build();
    p.held(&["add", "tests"]);
    let socket = p.path().join(".agent.sock");
    let ready = p.root().join("listening");
    let mut listener = std::process::Command::new("python3")
        .args(["-c", LISTENER])
        .arg(&socket)
        .arg(&ready)
        .spawn()
        .unwrap();
    while !ready.exists() {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // Once, with the code that hands the copy over; then the agent takes that code away.
    let send = format!(
        "python3 -c '{}' {}; grep -q ok src/a.txt",
        SENDER.replace('\'', "\"").trim(),
        socket.display()
    );
    // What it does in this run is the agent's code at work, as in a fresh copy; what counts
    // is the runs after it.
    p.stop_s1(&["--run", &send]);
    std::thread::sleep(std::time::Duration::from_millis(200));
    for session in ["s2", "s3"] {
        let stop = p.stop(&["--run", "grep -q ok src/a.txt"], session, Some("x"));
        assert!(
            stop.blocked(),
            "{session}: the process the agent left rewrote the copy"
        );
    }
    let _ = listener.kill();
    let _ = listener.wait();
}

#[test]
fn a_directory_the_check_moves_in_place_of_another_is_not_taken_for_it() {
    let p = Project::builder()
        .git()
        .file(
            "tests/t.sh",
            ". src/lib.sh\n[ \"$(cat src/a.txt)\" = ok ]\n",
        )
        .file("src/lib.sh", ": lib\n")
        .file("src/a.txt", "no\n")
        .build();
    p.held(&["add", "tests"]);
    slow_file(&p);
    // The agent's code, once: the check swaps src/ for a directory of its choosing (whose
    // files keep the times they had), and a directory below it comes along.
    p.write("decoy/a.txt", "ok\n");
    p.write("decoy/sub/deep/extra.sh", "exit 0\n");
    write_file(
        &p.path().join("src/lib.sh"),
        "if [ -d decoy ]; then mv src src.old; mv decoy src; cp src.old/lib.sh src/; fi\n",
    );
    p.stop_s1(&["--run", "sh tests/t.sh"]);
    // Then the agent takes its code away; src/a.txt still says no.
    std::fs::remove_dir_all(p.path().join("decoy")).unwrap();
    p.write("src/lib.sh", ": lib\n");
    for session in ["s2", "s3"] {
        let stop = p.stop(
            &["--run", "sh tests/t.sh && test ! -e src/sub"],
            session,
            Some("x"),
        );
        assert!(
            stop.blocked(),
            "{session}: the directory the check moved in was kept"
        );
    }
}

/// The agent's background process: maps `src/a.txt` shared, writes `good` through the mapping
/// (its page dirty and writable then), waits for GO, writes `bad!` through the same mapping
/// (no fault, so, where its page was left dirty, no new change time), and says DONE.
const MAPPER: &str = r#"
import mmap, os, sys, time
f = open("src/a.txt", "r+b")
m = mmap.mmap(f.fileno(), 0)
m[0:5] = b"good\n"
open(sys.argv[1], "w").close()
while not os.path.exists(sys.argv[2]):
    time.sleep(0.01)
m[0:5] = b"bad!\n"
open(sys.argv[3], "w").close()
time.sleep(30)
"#;

#[test]
fn a_write_through_a_memory_mapping_reaches_the_next_check() {
    if !python() {
        return;
    }
    let p = project();
    slow_file(&p);
    p.write("src/a.txt", "xxxx\n");
    let (ready, go, done) = (
        p.root().join("ready"),
        p.root().join("go"),
        p.root().join("done"),
    );
    let mut mapper = std::process::Command::new("python3")
        .args(["-c", MAPPER])
        .args([&ready, &go, &done])
        .current_dir(p.path())
        .spawn()
        .unwrap();
    while !ready.exists() {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // Settled (a tick old) before the Stop reads it, so its stat data may be kept.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let check = "grep -q good src/a.txt";
    assert!(!p.stop_s1(&["--run", check]).blocked());
    write_file(&go, "");
    while !done.exists() {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    for session in ["s2", "s3"] {
        let stop = p.stop(&["--run", check], session, Some("x"));
        assert!(
            stop.blocked(),
            "{session}: the copy kept what the mapping overwrote"
        );
    }
    let _ = mapper.kill();
    let _ = mapper.wait();
}
