//! The tests that run on every target with the same code: on Linux with the rest of the suite,
//! and on Windows under wine (`scripts/test-windows.sh`, issue 33). They need no git, no
//! bubblewrap and no real client.
//!
//! - `platform.rs`: the platform layer's contracts (a replace interrupted, a process tree
//!   killed at its deadline, a waiter's parent gone, a link never followed; a lock held twice
//!   is `sys::lock`'s unit test, which runs on both targets too).
//! - `smoke.rs`: the binaries as an engine and a person drive them: a Stop with the system's
//!   own `cwd`, a loop started and ended, a marker written and verified, `settings-merge
//!   install` and `uninstall` byte for byte on a settings file with Windows paths.

mod platform;
mod smoke;

use std::path::Path;
use std::process::Command;

/// What a helper run of this test binary is asked to be (`helper::run`), by environment.
const HELPER: &str = "VIGIL_PORTABLE_HELPER";

/// This test binary, run again as the helper `role` with `args`: a child process that is the
/// same program on every target (no `sh`, no `cmd.exe`).
fn helper(role: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(std::env::current_exe().expect("the test binary"));
    cmd.args([
        "--ignored",
        "--exact",
        "helper::run",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(HELPER, role)
    .env("VIGIL_PORTABLE_ARGS", args.join("\u{1f}"));
    cmd
}

mod helper {
    use std::time::Duration;

    /// Not a test: the body of a helper process (`super::helper`).
    #[test]
    #[ignore]
    fn run() {
        let Ok(role) = std::env::var(super::HELPER) else {
            return;
        };
        let args = std::env::var("VIGIL_PORTABLE_ARGS").unwrap_or_default();
        let args: Vec<&str> = args.split('\u{1f}').collect();
        match role.as_str() {
            // Starts a grandchild that sleeps, says its id in a file, and sleeps too.
            "tree" => {
                let mut leaf = super::helper("leaf", &[]).spawn().expect("the leaf");
                std::fs::write(args[0], leaf.id().to_string()).expect("the pid file");
                std::thread::sleep(Duration::from_secs(60));
                let _ = leaf.wait();
            }
            "leaf" => std::thread::sleep(Duration::from_secs(60)),
            // Starts a watcher of itself, says the watcher's id, and sleeps until killed.
            "parent" => {
                let mut watcher = super::helper("watcher", &[args[0]])
                    .spawn()
                    .expect("the watcher");
                std::thread::sleep(Duration::from_secs(60));
                let _ = watcher.wait();
            }
            // Writes "watching" once it knows its parent, then "gone" once the parent is.
            "watcher" => {
                let parent = vigil::sys::process::Parent::now();
                std::fs::write(args[0], "watching").expect("the state file");
                for _ in 0..600 {
                    if !parent.is_there() {
                        std::fs::write(args[0], "gone").expect("the state file");
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
            // Replaces a file with one of two contents, over and over, until killed.
            "replace" => {
                let path = std::path::Path::new(args[0]);
                let contents = [vec![b'b'; 1 << 20], vec![b'a'; 1 << 20]];
                for turn in 0usize.. {
                    vigil::sys::atomic::write_atomic(path, &contents[turn % 2], 0o644)
                        .expect("a write");
                    if turn == 0 {
                        // One replacement done: the test kills it from now on.
                        std::fs::write(args[1], "replaced").expect("the started file");
                    }
                }
            }
            other => panic!("no helper {other}"),
        }
    }
}

/// Asks `ready` every 10 ms for at most `secs` seconds; its last answer.
fn until(secs: u64, mut ready: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while !ready() {
        if std::time::Instant::now() >= deadline {
            return ready();
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    true
}

/// A file's bytes, or nothing.
fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_default()
}
