//! The platform layer's contracts (src/sys/unix, src/sys/windows), the same test code on both.
//! A lock held twice, and a transient lock's waiter, are `sys::lock`'s own unit tests, which
//! run under wine too.

use std::time::{Duration, Instant};

use vigil::sys::process::{self, Outcome};

#[test]
fn a_replace_interrupted_leaves_the_old_file_or_the_new_never_a_mix() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.json");
    std::fs::write(&path, vec![b'a'; 1 << 20]).unwrap();
    let started = dir.path().join("started");
    for wait in [0, 30, 80, 150] {
        let _ = std::fs::remove_file(&started);
        let mut writer = super::helper(
            "replace",
            &[path.to_str().unwrap(), started.to_str().unwrap()],
        )
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
        assert!(
            super::until(20, || started.exists()),
            "the writer never replaced the file"
        );
        std::thread::sleep(Duration::from_millis(wait));
        // Killed where it stands: SIGKILL, or TerminateProcess.
        writer.kill().unwrap();
        writer.wait().unwrap();
        let now = super::read(&path);
        assert_eq!(now.len(), 1 << 20, "a torn file after {wait} ms");
        assert!(
            now.iter().all(|b| *b == now[0]),
            "a mix of two writes after {wait} ms"
        );
    }
    // What a killed writer left is dot-named, never the file itself.
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        assert!(
            name == "state.json" || name == "started" || name.starts_with(".state.json."),
            "{name}"
        );
    }
}

#[test]
fn a_path_put_into_a_check_is_one_word_for_the_shell_that_runs_it() {
    // `sh` here; on Windows without Git's `sh` (as under wine), `cmd.exe`, which takes no `'`.
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("a b").join("junit it's.xml");
    std::fs::create_dir(report.parent().unwrap()).unwrap();
    let word = process::shell_word(report.to_str().unwrap());
    let done = process::run(
        process::shell(&format!("echo ok> {word}")),
        Duration::from_secs(30),
        true,
        4096,
    )
    .unwrap();
    assert_eq!(
        done.outcome,
        Outcome::Exited(0),
        "{word}: {:?}",
        done.output
    );
    assert!(report.is_file(), "{word}");
}

#[test]
fn a_process_tree_is_killed_whole_at_its_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("leaf.pid");
    let started = Instant::now();
    let done = process::run(
        super::helper("tree", &[pid_file.to_str().unwrap()]),
        Duration::from_secs(3),
        true,
        4096,
    )
    .unwrap();
    assert_eq!(done.outcome, Outcome::TimedOut);
    assert_eq!(
        done.outcome.code(),
        137,
        "reported as a shell reports SIGKILL"
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    let leaf: u32 = std::fs::read_to_string(&pid_file)
        .expect("the tree started its leaf before the deadline")
        .trim()
        .parse()
        .unwrap();
    assert!(
        super::until(5, || !process::is_alive(leaf)),
        "the grandchild {leaf} outlived the deadline"
    );
}

#[test]
fn a_running_process_is_known_by_its_image_command_line_and_start() {
    let mut child = super::helper("leaf", &[]).spawn().unwrap();
    let pid = child.id();
    // A process still inside its exec shows no command line yet (Linux sets the arguments up
    // after the parent's spawn returns): asked again until it does.
    let until = Instant::now() + Duration::from_secs(5);
    let words = loop {
        match process::command_line(pid) {
            Some(words) => break words,
            None if Instant::now() < until => std::thread::sleep(Duration::from_millis(10)),
            None => panic!("no command line for {pid}"),
        }
    };
    let exe = std::env::current_exe().unwrap();
    let stem = exe.file_stem().unwrap().to_string_lossy().into_owned();
    assert!(words[0].contains(&stem), "{words:?}");
    assert!(words.iter().any(|w| w == "helper::run"), "{words:?}");
    let start = process::start_time(pid).expect("its start");
    assert_eq!(
        process::start_time(pid),
        Some(start),
        "the same process, the same start"
    );
    assert!(process::is_alive(pid));
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!process::is_alive(pid));
    assert_eq!(process::command_line(pid), None);
}

#[test]
fn a_state_file_is_never_read_through_a_link() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("elsewhere.json");
    std::fs::write(&target, b"{}").unwrap();
    let link = dir.path().join("state.json");
    // Windows needs a privilege (or Developer Mode) to make a symbolic link; where it is
    // refused, no agent can plant one that way either.
    // Wine makes a link it cannot then see as itself: nothing to test there either.
    let made = vigil::sys::files::symlink(target.as_os_str(), &link).is_ok();
    if !made || std::fs::symlink_metadata(&link).is_err() {
        if !cfg!(windows) {
            panic!("a symlink could not be made on Unix");
        }
        eprintln!(
            "vigil-test: SKIPPED a_state_file_is_never_read_through_a_link (no symlinks here)"
        );
        return;
    }
    assert!(vigil::sys::files::open_state(&link).is_err());
    assert!(
        vigil::sys::files::open_regular(&link).is_ok(),
        "followed where asked"
    );
}

#[test]
fn a_waiter_knows_when_the_process_that_started_it_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("watcher");
    let mut parent = super::helper("parent", &[state.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    assert!(
        super::until(20, || super::read(&state) == b"watching"),
        "the watcher never started"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        super::read(&state),
        b"watching",
        "gone while its parent lives"
    );
    // Unix hands the orphan to init; Windows keeps the dead parent's id.
    parent.kill().unwrap();
    parent.wait().unwrap();
    assert!(
        super::until(10, || super::read(&state) == b"gone"),
        "the watcher did not see its parent go"
    );
}
