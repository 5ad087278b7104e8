//! Running a child process with a deadline: its own process group (so a timeout kills every
//! process it started), output captured to a bounded tail, and never a hang on a pipe that a
//! stray grandchild keeps open. Ctrl-C, SIGTERM and SIGHUP that reach vigil are passed on to
//! the groups it runs, so a killed hook does not leave its check running.

use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, Once, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use crate::sys::digest;

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

/// The process groups signals are forwarded to; 0 marks a free slot.
static GROUPS: [AtomicI32; 8] = [const { AtomicI32::new(0) }; 8];
static HANDLERS: Once = Once::new();

extern "C" fn forward(signal: libc::c_int) {
    let mut forwarded = false;
    for slot in &GROUPS {
        let group = slot.load(Ordering::SeqCst);
        if group > 0 {
            // SAFETY: kill(2) is async-signal-safe.
            unsafe {
                libc::kill(-group, signal);
            }
            forwarded = true;
        }
    }
    if !forwarded {
        // Nothing runs on our behalf: the signal is for us, with its usual effect.
        // SAFETY: signal(2) and raise(3) are async-signal-safe.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            libc::raise(signal);
        }
    }
}

/// A new process group for the child, and on Linux its death with ours: a hook killed by its
/// engine must not leave the command it ran behind.
fn isolate(cmd: &mut Command) {
    cmd.process_group(0);
    #[cfg(target_os = "linux")]
    // SAFETY: prctl(2) is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            // An ignored signal stays ignored across exec: the command gets the default back.
            libc::signal(libc::SIGXFSZ, libc::SIG_DFL);
            Ok(())
        });
    }
}

/// While alive, the terminal on our stdin (if it is one) gives its foreground to a child's
/// process group, so a command run in its own group can still read from the terminal.
struct Foreground(bool);

impl Foreground {
    fn give(group: libc::pid_t) -> Foreground {
        // SAFETY: isatty, signal, tcsetpgrp and kill take plain values and touch no memory.
        unsafe {
            if libc::isatty(0) != 1 {
                return Foreground(false);
            }
            let previous = libc::signal(libc::SIGTTOU, libc::SIG_IGN);
            let given = libc::tcsetpgrp(0, group) == 0;
            libc::signal(libc::SIGTTOU, previous);
            // It may have tried to read before it had the terminal, and stopped.
            libc::kill(-group, libc::SIGCONT);
            Foreground(given)
        }
    }
}

impl Drop for Foreground {
    fn drop(&mut self) {
        if self.0 {
            // SAFETY: as above; the terminal goes back to our own group.
            unsafe {
                let previous = libc::signal(libc::SIGTTOU, libc::SIG_IGN);
                libc::tcsetpgrp(0, libc::getpgrp());
                libc::signal(libc::SIGTTOU, previous);
            }
        }
    }
}

/// While alive, signals that reach vigil are passed on to one process group.
struct Forwarding(Option<&'static AtomicI32>);

impl Forwarding {
    fn to(group: i32) -> Forwarding {
        HANDLERS.call_once(|| {
            for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
                // SAFETY: the handler only reads atomics and calls kill(2).
                unsafe {
                    libc::signal(signal, forward as *const () as libc::sighandler_t);
                }
            }
        });
        let slot = GROUPS.iter().find(|slot| {
            slot.compare_exchange(0, group, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        });
        Forwarding(slot)
    }
}

impl Drop for Forwarding {
    fn drop(&mut self) {
        if let Some(slot) = self.0 {
            slot.store(0, Ordering::SeqCst);
        }
    }
}

/// Runs `cmd` with stdin closed, in a new process group. With `merge`, stderr goes into the
/// same pipe as stdout, in order. At `timeout` the whole group gets SIGKILL; when the child
/// exits on its own, whatever it left running in its group is killed too.
pub fn run(cmd: Command, timeout: Duration, merge: bool, tail: usize) -> std::io::Result<Finished> {
    run_with_input(cmd, None, timeout, merge, tail)
}

/// `run`, with `input` (if any) written to the command's stdin from a thread of its own, which
/// then closes it.
pub fn run_with_input(
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
    isolate(&mut cmd);
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
    if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
        // A child that never reads gets a broken pipe, not a hang: the thread ends with it.
        std::thread::spawn(move || {
            use std::io::Write;
            let _ = stdin.write_all(&input);
        });
    }
    let group = child.id() as libc::pid_t;
    let _forwarding = Forwarding::to(group);
    let out = collect(out_reader, tail);
    let err = err_reader.map(|r| collect(r, 4096));
    let outcome = wait(child, Some(timeout))?;
    let duration = start.elapsed();
    kill_group(group);
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

/// Waits for a child that leads its own process group; at `timeout` the whole group gets
/// SIGKILL and the outcome is `TimedOut`.
pub fn wait(mut child: std::process::Child, timeout: Option<Duration>) -> std::io::Result<Outcome> {
    let pid = child.id() as libc::pid_t;
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
            kill_group(pid);
            let _ = done_rx.recv();
            Ok(Outcome::TimedOut)
        }
    }
}

/// A command that ran with its output passed through.
#[derive(Clone, Debug)]
pub struct PassedThrough {
    pub outcome: Outcome,
    /// sha256 of stdout and stderr together, in the order the chunks arrived.
    pub output_sha256: String,
    pub duration: Duration,
}

/// Runs `cmd` with our stdin, stdout and stderr, in our own process group, so the shell's job
/// control (^Z, `fg`, `bg`) and the terminal's ^C reach it as they reach us: while it runs we
/// ignore SIGINT and SIGQUIT (the command gets them from the terminal and decides), and pass
/// SIGTERM and SIGHUP sent to us alone on to it. Waits for it, with no deadline: for
/// `stop-gate loop run`, which must outlive its command to say how the loop ended.
pub fn run_foreground(mut cmd: Command) -> std::io::Result<std::process::ExitStatus> {
    let mut child = cmd.spawn()?;
    CHILD.store(child.id() as i32, Ordering::SeqCst);
    // SAFETY: setting dispositions is sound; the handler only reads an atomic and calls kill(2).
    let previous = unsafe {
        [
            libc::signal(libc::SIGINT, libc::SIG_IGN),
            libc::signal(libc::SIGQUIT, libc::SIG_IGN),
            libc::signal(libc::SIGTERM, to_child as *const () as libc::sighandler_t),
            libc::signal(libc::SIGHUP, to_child as *const () as libc::sighandler_t),
        ]
    };
    let status = child.wait();
    CHILD.store(0, Ordering::SeqCst);
    // SAFETY: as above: the dispositions we found are put back.
    unsafe {
        for (signal, previous) in [libc::SIGINT, libc::SIGQUIT, libc::SIGTERM, libc::SIGHUP]
            .into_iter()
            .zip(previous)
        {
            libc::signal(signal, previous);
        }
    }
    status
}

/// The command `run_foreground` waits for.
static CHILD: AtomicI32 = AtomicI32::new(0);

extern "C" fn to_child(signal: libc::c_int) {
    let child = CHILD.load(Ordering::SeqCst);
    if child > 0 {
        // SAFETY: kill(2) is async-signal-safe.
        unsafe {
            libc::kill(child, signal);
        }
    }
}

/// Runs `cmd` in its own process group with its stdout and stderr copied through to ours as
/// they come, hashing them. Signals that reach vigil are passed on to the group (it has left
/// the terminal's group so that a timeout can kill it whole); at `timeout` the group gets
/// SIGKILL.
pub fn run_passthrough(
    mut cmd: Command,
    timeout: Option<Duration>,
) -> std::io::Result<PassedThrough> {
    use sha2::Digest;
    use std::sync::atomic::{AtomicBool, AtomicU64};
    let (out_reader, out_writer) = std::io::pipe()?;
    let (err_reader, err_writer) = std::io::pipe()?;
    cmd.stdout(out_writer).stderr(err_writer);
    isolate(&mut cmd);
    let start = Instant::now();
    let child = cmd.spawn()?;
    drop(cmd);
    let group = child.id() as i32;
    let _forwarding = Forwarding::to(group);
    let foreground = Foreground::give(group);
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
    let outcome = wait(child, timeout)?;
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

/// What the command keeps of the environment; everything else is cleared (`--keep-env` adds).
pub const KEPT_ENV: [&str; 9] = [
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "TZ", "TMPDIR",
];

/// Clears the command's environment but for `KEPT_ENV`, the `LC_*` locale variables and
/// `keep`.
pub fn clean_env(cmd: &mut Command, keep: &[String]) {
    cmd.env_clear();
    for (name, value) in std::env::vars_os() {
        let Some(text) = name.to_str() else { continue };
        if KEPT_ENV.contains(&text) || text.starts_with("LC_") || keep.iter().any(|k| k == text) {
            cmd.env(&name, value);
        }
    }
}

/// The signal a child gets when it writes past its file size limit.
pub const FILE_SIZE_SIGNAL: i32 = libc::SIGXFSZ;

/// Caps the size of every file the child writes at `limit` bytes (a larger write gets
/// [`FILE_SIZE_SIGNAL`]).
pub fn limit_file_size(cmd: &mut Command, limit: u64) {
    use std::os::unix::process::CommandExt;
    let limit = limit as libc::rlim_t;
    // SAFETY: setrlimit(2) is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(move || {
            let cap = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &cap) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Makes reads of a pipe return at once when it holds nothing more.
pub fn set_nonblocking(pipe: &std::io::PipeReader) {
    use std::os::fd::AsRawFd;
    let fd = pipe.as_raw_fd();
    // SAFETY: fcntl on a descriptor we own, with plain integer arguments.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
    }
}

/// The number a child knows a pipe's writing end by, once [`pass_only`] gave it.
pub fn descriptor_number(pipe: &std::io::PipeWriter) -> i32 {
    use std::os::fd::AsRawFd;
    pipe.as_raw_fd()
}

/// The child inherits its standard streams and `pipe`, and nothing else its parent had open
/// (a pipe of the engine's). The writing end lives in the closure: the child gets it, its
/// close-on-exec flag cleared between fork and exec.
pub fn pass_only(cmd: &mut Command, pipe: std::io::PipeWriter) {
    use std::os::fd::AsRawFd;
    // SAFETY: close_range(2) and fcntl(2) are async-signal-safe and touch no memory.
    unsafe {
        cmd.pre_exec(move || {
            // Every descriptor above stderr closes on exec, but the pipe.
            libc::syscall(
                libc::SYS_close_range,
                3 as libc::c_uint,
                libc::c_uint::MAX,
                libc::CLOSE_RANGE_CLOEXEC as libc::c_uint,
            );
            if libc::fcntl(pipe.as_raw_fd(), libc::F_SETFD, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Starts the child in a process group of its own, so that nothing of the parent's group
/// (a terminal's interrupt, the hook's end) reaches it.
pub fn own_group(cmd: &mut Command) -> &mut Command {
    cmd.process_group(0)
}

/// The signal that ended a process, when one did.
pub fn signal_of(status: &std::process::ExitStatus) -> Option<i32> {
    status.signal()
}

/// This process's parent: when it changes, the process that started this one is gone (an
/// orphan is handed to init or a subreaper).
pub fn parent_id() -> u32 {
    std::os::unix::process::parent_id()
}

/// Whether a process with this id exists (a zombie counts as gone).
pub fn is_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        return false;
    }
    // SAFETY: kill(2) with signal 0 only checks that the process exists; nothing is sent.
    let exists = unsafe { libc::kill(pid, 0) } == 0
        || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    exists && !is_zombie(pid)
}

fn is_zombie(pid: libc::pid_t) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

/// A process's command line, word by word, where the system shows it (`/proc`); `None` where
/// it cannot be read, so that a caller that must verify a process before signalling it does not.
pub fn command_line(pid: u32) -> Option<Vec<String>> {
    let bytes = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let words: Vec<String> = bytes
        .split(|b| *b == 0)
        .filter(|w| !w.is_empty())
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect();
    (!words.is_empty()).then_some(words)
}

/// When a process began, in clock ticks since boot (`/proc/<pid>/stat`, field 22): with its
/// pid, it names one process, whatever reuses the pid later. `None` where it cannot be read.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command's closing parenthesis: state is field 3, start time field 22.
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()
}

/// A write to a closed pipe is an error to handle, not a signal that ends the process.
pub fn ignore_pipe_signal() {
    // SAFETY: sets one signal's disposition; called before any thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
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
