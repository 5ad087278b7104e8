//! Running a child process with a deadline: the child and everything it starts are one tree
//! (a process group on Unix, a Job Object on Windows), so a timeout kills all of it; output
//! captured to a bounded tail, and never a hang on a pipe that a stray grandchild keeps open.
//! Ctrl-C, SIGTERM and SIGHUP that reach vigil are passed on to the trees it runs (Unix); on
//! Windows a tree dies when vigil does, with its job. The system's side is the platform's
//! `process` module.

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use crate::sys::digest;
use crate::sys::platform::process as os;

pub(crate) use os::{
    FILE_SIZE_SIGNAL, descriptor_number, detach as own_group, ignore_pipe_signal, limit_file_size,
    outlast_termination, parent_id, pass_only, run_foreground, set_nonblocking, signal_of,
};
pub use os::{command_line, is_alive, start_time};

/// How a child ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Exited(i32),
    Signaled(i32),
    TimedOut,
}

impl Outcome {
    pub(crate) fn success(self) -> bool {
        self == Outcome::Exited(0)
    }

    /// The exit code a shell would report: the code, or 128 + the signal.
    pub fn code(self) -> i32 {
        match self {
            Outcome::Exited(code) => code,
            Outcome::Signaled(signal) => 128 + signal,
            Outcome::TimedOut => 128 + os::KILL_SIGNAL,
        }
    }
}

#[derive(Clone, Debug)]
pub struct Finished {
    pub outcome: Outcome,
    /// The last `tail` bytes of standard output (and of standard error when merged).
    pub output: Vec<u8>,
    /// The last bytes of standard error when it was not merged.
    pub errors: Vec<u8>,
    pub duration: Duration,
}

/// How long to wait for output pipes after the child is gone.
const PIPE_GRACE: Duration = Duration::from_millis(500);

/// Runs `cmd` with stdin closed, in a new process group. With `merge`, stderr goes into the
/// same pipe as stdout, in order. At `timeout` the whole group gets SIGKILL; when the child
/// exits on its own, whatever it left running in its group is killed too.
pub fn run(cmd: Command, timeout: Duration, merge: bool, tail: usize) -> std::io::Result<Finished> {
    run_with_input(cmd, None, timeout, merge, tail)
}

/// `run`, with `input` (if any) written to the command's stdin from a thread of its own, which
/// then closes it.
pub(crate) fn run_with_input(
    mut cmd: Command,
    input: Option<Vec<u8>>,
    timeout: Duration,
    merge: bool,
    tail: usize,
) -> std::io::Result<Finished> {
    let (out_reader, out_writer) = std::io::pipe()?;
    cmd.stdin(if input.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    let err_reader = if merge {
        cmd.stdout(out_writer.try_clone()?).stderr(out_writer);
        None
    } else {
        let (err_reader, err_writer) = std::io::pipe()?;
        cmd.stdout(out_writer).stderr(err_writer);
        Some(err_reader)
    };
    let start = Instant::now();
    let (mut child, tree) = os::Tree::spawn(&mut cmd)?;
    // The writers now live only in the child: drop our copies (inside `cmd`) so EOF comes.
    drop(cmd);
    if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
        // A child that never reads gets a broken pipe, not a hang: the thread ends with it.
        std::thread::spawn(move || {
            use std::io::Write;
            let _ = stdin.write_all(&input);
        });
    }
    let out = collect(out_reader, tail);
    let err = err_reader.map(|r| collect(r, 4096));
    let outcome = wait(child, &tree, Some(timeout))?;
    let duration = start.elapsed();
    tree.kill();
    // The grace for a pipe held by an escaped process comes out of the same time budget.
    let grace = PIPE_GRACE
        .min(timeout.saturating_sub(duration))
        .max(Duration::from_millis(5));
    Ok(Finished {
        outcome,
        output: out.take(grace),
        errors: err.map(|e| e.take(grace)).unwrap_or_default(),
        duration,
    })
}

/// Waits for a child that leads its own tree; at `timeout` the whole tree is killed and the
/// outcome is `TimedOut`.
fn wait(
    mut child: std::process::Child,
    tree: &os::Tree,
    timeout: Option<Duration>,
) -> std::io::Result<Outcome> {
    let (done_tx, done_rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = done_tx.send(child.wait());
    });
    let received = match timeout {
        Some(timeout) => done_rx.recv_timeout(timeout).ok(),
        None => done_rx.recv().ok(),
    };
    match received {
        Some(status) => Ok(outcome_of(status?)),
        None => {
            tree.kill();
            let _ = done_rx.recv();
            Ok(Outcome::TimedOut)
        }
    }
}

/// A command that ran with its output passed through.
#[derive(Clone, Debug)]
pub(crate) struct PassedThrough {
    pub outcome: Outcome,
    /// sha256 of stdout and stderr together, in the order the chunks arrived.
    pub output_sha256: String,
    pub duration: Duration,
}

/// Runs `cmd` in its own process group with its stdout and stderr copied through to ours as
/// they come, hashing them. Signals that reach vigil are passed on to the group (it has left
/// the terminal's group so that a timeout can kill it whole); at `timeout` the group gets
/// SIGKILL.
pub(crate) fn run_passthrough(
    mut cmd: Command,
    timeout: Option<Duration>,
) -> std::io::Result<PassedThrough> {
    use sha2::Digest;
    use std::sync::atomic::{AtomicBool, AtomicU64};
    let (out_reader, out_writer) = std::io::pipe()?;
    let (err_reader, err_writer) = std::io::pipe()?;
    cmd.stdout(out_writer).stderr(err_writer);
    let start = Instant::now();
    let (child, tree) = os::Tree::spawn(&mut cmd)?;
    drop(cmd);
    let foreground = tree.foreground();
    let hasher = Arc::new(Mutex::new(sha2::Sha256::new()));
    // How far the copying has got, and whether a copy is blocked writing to a slow reader.
    let progress = Arc::new(AtomicU64::new(0));
    let writing = Arc::new(AtomicBool::new(false));
    let tee = |mut reader: std::io::PipeReader, to_stderr: bool| {
        let (hasher, progress, writing) = (
            Arc::clone(&hasher),
            Arc::clone(&progress),
            Arc::clone(&writing),
        );
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            use std::io::Write;
            let mut chunk = [0u8; 16 * 1024];
            loop {
                match reader.read(&mut chunk) {
                    Ok(0) => break,
                    Ok(n) => {
                        if let Ok(mut h) = hasher.lock() {
                            h.update(&chunk[..n]);
                        }
                        writing.store(true, Ordering::SeqCst);
                        // Output goes on even when ours is closed: the command must not stall.
                        let _ = if to_stderr {
                            std::io::stderr().lock().write_all(&chunk[..n])
                        } else {
                            std::io::stdout().lock().write_all(&chunk[..n])
                        };
                        writing.store(false, Ordering::SeqCst);
                        progress.fetch_add(n as u64, Ordering::SeqCst);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            let _ = tx.send(());
        });
        rx
    };
    let out_done = tee(out_reader, false);
    let err_done = tee(err_reader, true);
    let outcome = wait(child, &tree, timeout)?;
    let duration = start.elapsed();
    drop(foreground);
    // All the output is copied and hashed, however slowly it drains; only a pipe that a
    // process outside the group holds open, with nothing coming through, is given up on.
    let (mut out_open, mut err_open) = (true, true);
    let mut last = (progress.load(Ordering::SeqCst), Instant::now());
    while out_open || err_open {
        out_open = out_open && out_done.recv_timeout(Duration::from_millis(20)).is_err();
        err_open = err_open && err_done.recv_timeout(Duration::from_millis(20)).is_err();
        let now = progress.load(Ordering::SeqCst);
        if now != last.0 || writing.load(Ordering::SeqCst) {
            last = (now, Instant::now());
        } else if last.1.elapsed() > PIPE_GRACE {
            break;
        }
    }
    let digest = hasher
        .lock()
        .map(|h| h.clone().finalize())
        .unwrap_or_default();
    Ok(PassedThrough {
        outcome,
        output_sha256: digest::hex(&digest),
        duration,
    })
}

fn outcome_of(status: std::process::ExitStatus) -> Outcome {
    match (status.code(), signal_of(&status)) {
        (Some(code), _) => Outcome::Exited(code),
        (None, Some(signal)) => Outcome::Signaled(signal),
        (None, None) => Outcome::Exited(-1),
    }
}

/// Output being read on a thread into a shared tail.
struct Collected {
    kept: Arc<Mutex<Vec<u8>>>,
    done: mpsc::Receiver<()>,
    tail: usize,
}

impl Collected {
    /// What was read: everything, once the pipe closes; or, if a process that escaped the
    /// group still holds it open after a grace period, what had arrived by then.
    fn take(self, grace: Duration) -> Vec<u8> {
        let _ = self.done.recv_timeout(grace);
        let mut kept = self.kept.lock().map(|k| k.clone()).unwrap_or_default();
        if kept.len() > self.tail {
            kept.drain(..kept.len() - self.tail);
        }
        kept
    }
}

/// Reads a pipe to its end on a thread, keeping the last `tail` bytes.
fn collect(mut reader: impl Read + Send + 'static, tail: usize) -> Collected {
    let kept = Arc::new(Mutex::new(Vec::new()));
    let (tx, done) = mpsc::channel();
    let shared = Arc::clone(&kept);
    thread::spawn(move || {
        let mut chunk = [0u8; 16 * 1024];
        loop {
            match reader.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => {
                    let Ok(mut kept) = shared.lock() else { break };
                    kept.extend_from_slice(&chunk[..n]);
                    if kept.len() > tail.saturating_mul(2).max(64 * 1024) {
                        let excess = kept.len() - tail;
                        kept.drain(..excess);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        let _ = tx.send(());
    });
    Collected { kept, done, tail }
}

/// The process that started this one, as it was when asked: for a waiter that must end with
/// it. Unix hands an orphan to init (its parent id changes); Windows keeps the dead parent's id,
/// which a new process may reuse: both are told by the id, the process being alive, and its
/// start.
#[derive(Clone, Copy, Debug)]
pub struct Parent {
    id: u32,
    start: Option<u64>,
}

impl Parent {
    pub fn now() -> Parent {
        let id = parent_id();
        let start = start_time(id);
        // A parent that began after this process is another that took a dead parent's id.
        let mine = start_time(std::process::id());
        let adopted = matches!((start, mine), (Some(start), Some(mine)) if start > mine);
        Parent {
            id,
            start: if adopted { None } else { start },
        }
    }

    /// Whether the process that started this one is still there.
    pub fn is_there(&self) -> bool {
        self.start.is_some()
            && parent_id() == self.id
            && is_alive(self.id)
            && start_time(self.id) == self.start
    }
}

/// The shell that runs a check command: `sh -c COMMAND`; on Windows, Git for Windows' `sh`
/// when it is on PATH or in its usual place (as Claude Code runs shell-form hooks), else
/// `cmd.exe /d /s /c "COMMAND"`.
pub fn shell(command: &str) -> Command {
    os::shell(command)
}

/// An argument as a POSIX shell needs it written: as it is when plain, else single-quoted. The
/// one quoting function: the handlers settings-merge writes, a marker's recorded command,
/// `config show`, and (through [`shell_word`]) a path put into a check's command line.
pub(crate) fn shell_quote(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_./:=@%+,-".contains(&b));
    if plain {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

/// `word` as the shell [`shell`] runs a command with takes it: [`shell_quote`] for `sh`; on
/// Windows without Git's `sh`, in double quotes, which `cmd.exe` reads as quotes and `'` it
/// does not (a Windows path holds no `"`; a `%` in it `cmd` would expand, as in any line).
pub fn shell_word(word: &str) -> String {
    if os::shell_is_cmd() {
        format!("\"{word}\"")
    } else {
        shell_quote(word)
    }
}

/// What the command keeps of the environment; everything else is cleared (`--keep-env` adds).
pub(crate) const KEPT_ENV: [&str; 9] = [
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "TZ", "TMPDIR",
];

/// Clears the command's environment but for `KEPT_ENV`, the `LC_*` locale variables and
/// `keep`.
pub(crate) fn clean_env(cmd: &mut Command, keep: &[String]) {
    cmd.env_clear();
    for (name, value) in std::env::vars_os() {
        let Some(text) = name.to_str() else { continue };
        if KEPT_ENV.contains(&text) || text.starts_with("LC_") || keep.iter().any(|k| k == text) {
            cmd.env(&name, value);
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(script);
        cmd
    }

    /// Alive and not a zombie (an orphan may wait a while for a reaper that is not init).
    pub(super) fn running(pid: i32) -> bool {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Ok(stat) => !stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z'),
            Err(_) => false,
        }
    }

    #[test]
    fn captures_merged_output_and_the_exit_code() {
        let done = run(
            sh("echo out; echo err >&2; exit 3"),
            Duration::from_secs(5),
            true,
            1024,
        )
        .unwrap();
        assert_eq!(done.outcome, Outcome::Exited(3));
        assert_eq!(String::from_utf8_lossy(&done.output), "out\nerr\n");
    }

    #[test]
    fn keeps_only_the_tail() {
        let done = run(sh("seq 1 100000"), Duration::from_secs(10), true, 20).unwrap();
        assert!(done.outcome.success());
        assert_eq!(
            String::from_utf8_lossy(&done.output),
            "\n99998\n99999\n100000\n"
        );
    }

    #[test]
    fn a_timeout_kills_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        let script = format!("sleep 30 & echo $! > {}; wait", pidfile.display());
        let done = run(sh(&script), Duration::from_millis(300), true, 1024).unwrap();
        assert_eq!(done.outcome, Outcome::TimedOut);
        assert!(done.duration < Duration::from_secs(5));
        let pid: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        std::thread::sleep(Duration::from_millis(100));
        assert!(
            !running(pid),
            "the sleeping grandchild {pid} survived the timeout"
        );
    }

    #[test]
    fn output_survives_a_background_child_holding_the_pipe_and_the_child_is_killed() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        let script = format!(
            "echo the real reason; sleep 30 & echo $! > {}; exit 1",
            pidfile.display()
        );
        let start = Instant::now();
        let done = run(sh(&script), Duration::from_secs(20), true, 1024).unwrap();
        assert!(start.elapsed() < Duration::from_secs(5));
        assert_eq!(done.outcome, Outcome::Exited(1));
        assert_eq!(String::from_utf8_lossy(&done.output), "the real reason\n");
        let pid: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        std::thread::sleep(Duration::from_millis(100));
        assert!(
            !running(pid),
            "the background child {pid} outlived the check"
        );
    }
}
