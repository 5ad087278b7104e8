//! Running a child process with a deadline: its own process group (so a timeout kills every
//! process it started), output captured to a bounded tail, and never a hang on a pipe that a
//! stray grandchild keeps open.

use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// How a child ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Exited(i32),
    Signaled(i32),
    TimedOut,
}

impl Outcome {
    pub fn success(self) -> bool {
        self == Outcome::Exited(0)
    }

    /// The exit code a shell would report: the code, or 128 + the signal.
    pub fn code(self) -> i32 {
        match self {
            Outcome::Exited(code) => code,
            Outcome::Signaled(signal) => 128 + signal,
            Outcome::TimedOut => 128 + libc::SIGKILL,
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
/// same pipe as stdout, in order. At `timeout` the whole group gets SIGKILL.
pub fn run(
    mut cmd: Command,
    timeout: Duration,
    merge: bool,
    tail: usize,
) -> std::io::Result<Finished> {
    let (out_reader, out_writer) = std::io::pipe()?;
    cmd.stdin(Stdio::null()).process_group(0);
    let err_reader = if merge {
        cmd.stdout(out_writer.try_clone()?).stderr(out_writer);
        None
    } else {
        let (err_reader, err_writer) = std::io::pipe()?;
        cmd.stdout(out_writer).stderr(err_writer);
        Some(err_reader)
    };
    let start = Instant::now();
    let mut child = cmd.spawn()?;
    // The writers now live only in the child: drop our copies (inside `cmd`) so EOF comes.
    drop(cmd);
    let out = collect(out_reader, tail);
    let err = err_reader.map(|r| collect(r, 4096));

    let pid = child.id() as libc::pid_t;
    let (done_tx, done_rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = done_tx.send(child.wait());
    });
    let outcome = match done_rx.recv_timeout(timeout) {
        Ok(status) => outcome_of(status?),
        Err(_) => {
            kill_group(pid);
            let _ = done_rx.recv();
            Outcome::TimedOut
        }
    };
    let duration = start.elapsed();
    Ok(Finished {
        outcome,
        output: out.recv_timeout(PIPE_GRACE).unwrap_or_default(),
        errors: err
            .and_then(|e| e.recv_timeout(PIPE_GRACE).ok())
            .unwrap_or_default(),
        duration,
    })
}

fn outcome_of(status: std::process::ExitStatus) -> Outcome {
    match (status.code(), status.signal()) {
        (Some(code), _) => Outcome::Exited(code),
        (None, Some(signal)) => Outcome::Signaled(signal),
        (None, None) => Outcome::Exited(-1),
    }
}

/// SIGKILL to every process of the group led by `pid`.
pub fn kill_group(pid: libc::pid_t) {
    // SAFETY: kill(2) with a negative pid signals that process group; no memory is touched.
    unsafe {
        libc::kill(-pid, libc::SIGKILL);
    }
}

/// Reads a pipe to its end on a thread, keeping the last `tail` bytes.
fn collect(mut reader: impl Read + Send + 'static, tail: usize) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut kept = Vec::new();
        let mut chunk = [0u8; 16 * 1024];
        loop {
            match reader.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => {
                    kept.extend_from_slice(&chunk[..n]);
                    if kept.len() > tail.saturating_mul(2).max(64 * 1024) {
                        kept.drain(..kept.len() - tail);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        if kept.len() > tail {
            kept.drain(..kept.len() - tail);
        }
        let _ = tx.send(kept);
    });
    rx
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(script);
        cmd
    }

    /// Alive and not a zombie (an orphan may wait a while for a reaper that is not init).
    pub fn running(pid: i32) -> bool {
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
}
