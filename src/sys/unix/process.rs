//! Process trees and what reaches them, the Unix side: a process group per child (killed whole
//! at a deadline), its death with ours on Linux, Ctrl-C, SIGTERM and SIGHUP passed on, the
//! terminal's foreground, a file size limit, what a child inherits, and what `/proc` tells of
//! another process.

use std::os::fd::AsRawFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command};
use std::sync::Once;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

/// The process groups signals are forwarded to; 0 marks a free slot.
static GROUPS: [AtomicI32; 8] = [const { AtomicI32::new(0) }; 8];
static HANDLERS: Once = Once::new();
/// Set by [`outlast_termination`]: the next SIGTERM neither ends us nor goes on to the trees we
/// run.
static OUTLAST: AtomicBool = AtomicBool::new(false);

/// How long a process goes on after the SIGTERM it outlasts, at most.
pub(crate) const OUTLAST_SECS: u32 = 10;

extern "C" fn forward(signal: libc::c_int) {
    if signal == libc::SIGTERM && OUTLAST.swap(false, Ordering::SeqCst) {
        // Whatever it is stuck on (an input never closed), SIGALRM's default ends it then.
        // SAFETY: alarm(2) is async-signal-safe.
        unsafe {
            libc::alarm(OUTLAST_SECS);
        }
        return;
    }
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

/// Ctrl-C, SIGTERM and SIGHUP go to [`forward`] from now on. A handler, unlike an ignored
/// signal, is the default again in a program we start.
fn take_signals() {
    HANDLERS.call_once(|| {
        for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            // SAFETY: the handler only reads atomics and calls kill(2), signal(2), raise(3).
            unsafe {
                libc::signal(signal, forward as *const () as libc::sighandler_t);
            }
        }
    });
}

/// The next SIGTERM does not end this process at once, for work that must not stop halfway:
/// Claude Code terminates a StopFailure hook still running when `claude -p` exits, and a
/// SessionEnd hook past its budget, and a handoff cut there would lose the record of the
/// session's end. It goes on [`OUTLAST_SECS`] at most (SIGALRM, for a process that arms no
/// alarm of its own, as the watchdog does); a second SIGTERM, SIGKILL and Ctrl-C end it
/// sooner. A SIGTERM before this is called still ends it.
pub(crate) fn outlast_termination() {
    OUTLAST.store(true, Ordering::SeqCst);
    take_signals();
}

/// A child and everything it starts: its process group. While the tree is alive, Ctrl-C,
/// SIGTERM and SIGHUP that reach vigil are passed on to it; on Linux it dies with vigil.
pub(crate) struct Tree {
    group: libc::pid_t,
    slot: Option<&'static AtomicI32>,
}

impl Tree {
    /// Starts `cmd` as the leader of a new process group.
    pub(crate) fn spawn(cmd: &mut Command) -> std::io::Result<(Child, Tree)> {
        cmd.process_group(0);
        #[cfg(target_os = "linux")]
        // SAFETY: prctl(2) and signal(2) are async-signal-safe and touch no memory of the
        // parent.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                // An ignored signal stays ignored across exec: the command gets the default.
                libc::signal(libc::SIGXFSZ, libc::SIG_DFL);
                Ok(())
            });
        }
        let child = cmd.spawn()?;
        let group = child.id() as libc::pid_t;
        take_signals();
        let slot = GROUPS.iter().find(|slot| {
            slot.compare_exchange(0, group, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        });
        Ok((child, Tree { group, slot }))
    }

    /// SIGKILL to every process of the group.
    pub(crate) fn kill(&self) {
        // SAFETY: kill(2) with a negative pid signals that process group; no memory is touched.
        unsafe {
            libc::kill(-self.group, libc::SIGKILL);
        }
    }

    /// While the returned guard lives, the terminal on our stdin (if it is one) gives its
    /// foreground to the tree, so a command run in its own group can still read from it.
    pub(crate) fn foreground(&self) -> Foreground {
        // SAFETY: isatty, signal, tcsetpgrp and kill take plain values and touch no memory.
        unsafe {
            if libc::isatty(0) != 1 {
                return Foreground(false);
            }
            let previous = libc::signal(libc::SIGTTOU, libc::SIG_IGN);
            let given = libc::tcsetpgrp(0, self.group) == 0;
            libc::signal(libc::SIGTTOU, previous);
            // It may have tried to read before it had the terminal, and stopped.
            libc::kill(-self.group, libc::SIGCONT);
            Foreground(given)
        }
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        if let Some(slot) = self.slot {
            slot.store(0, Ordering::SeqCst);
        }
    }
}

/// The terminal's foreground, given to a tree until dropped.
pub(crate) struct Foreground(bool);

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

/// Runs `cmd` with our stdin, stdout and stderr, in our own process group, so the shell's job
/// control (^Z, `fg`, `bg`) and the terminal's ^C reach it as they reach us: while it runs we
/// ignore SIGINT and SIGQUIT (the command gets them from the terminal and decides), and pass
/// SIGTERM and SIGHUP sent to us alone on to it. Waits for it, with no deadline.
pub(crate) fn run_foreground(mut cmd: Command) -> std::io::Result<std::process::ExitStatus> {
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

/// The signal a child gets when it writes past its file size limit.
pub(crate) const FILE_SIZE_SIGNAL: i32 = libc::SIGXFSZ;

/// The signal the deadline kills a tree with: a timed-out command reports 128 + this.
pub(crate) const KILL_SIGNAL: i32 = libc::SIGKILL;

/// Caps the size of every file the child writes at `limit` bytes (a larger write gets
/// [`FILE_SIZE_SIGNAL`]).
pub(crate) fn limit_file_size(cmd: &mut Command, limit: u64) {
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
pub(crate) fn set_nonblocking(pipe: &std::io::PipeReader) {
    let fd = pipe.as_raw_fd();
    // SAFETY: fcntl on a descriptor we own, with plain integer arguments.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
    }
}

/// The number a child knows a pipe's writing end by, once [`pass_only`] gave it.
pub(crate) fn descriptor_number(pipe: &std::io::PipeWriter) -> i64 {
    pipe.as_raw_fd().into()
}

/// The child inherits its standard streams and `pipe`, and nothing else its parent had open
/// (a pipe of the engine's). The writing end lives in the closure: the child gets it, its
/// close-on-exec flag cleared between fork and exec.
pub(crate) fn pass_only(cmd: &mut Command, pipe: std::io::PipeWriter) {
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
pub(crate) fn detach(cmd: &mut Command) -> &mut Command {
    cmd.process_group(0)
}

/// The signal that ended a process, when one did.
pub(crate) fn signal_of(status: &std::process::ExitStatus) -> Option<i32> {
    status.signal()
}

/// This process's parent: when it changes, the process that started this one is gone (an
/// orphan is handed to init or a subreaper).
pub(crate) fn parent_id() -> u32 {
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
/// it cannot be read, so that a caller that must verify a process before trusting it does not.
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
pub(crate) fn ignore_pipe_signal() {
    // SAFETY: sets one signal's disposition; called before any thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
}

/// Whether [`shell`] runs `cmd.exe`: never here.
pub(crate) fn shell_is_cmd() -> bool {
    false
}

/// `sh -c COMMAND`, the system's `sh` by absolute path: never one a PATH entry inside the
/// project holds.
pub(crate) fn shell(command: &str) -> Command {
    let mut cmd = Command::new(crate::sys::programs::SH);
    cmd.arg("-c").arg(command);
    cmd
}
