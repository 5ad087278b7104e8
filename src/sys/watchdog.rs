//! A process's last word: an answer written to stdout and the process ended, at a deadline or
//! on a panic, unless the process answered first. Exactly one answer is ever written.
//!
//! An alarm, not a thread: `SIGALRM` runs a handler that writes the answer, prepared before the
//! alarm is set, and `_exit`s (both async-signal-safe). A child process does not inherit the
//! alarm. The process sets no other alarm.

use std::panic::PanicHookInfo;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The answer the alarm writes: set once, before the alarm, and never freed.
static ALARM_ANSWER: OnceLock<Vec<u8>> = OnceLock::new();

/// Set by whichever answers first, the process or the alarm; the other then writes nothing.
/// The alarm may arrive on any thread (a child's reader threads do not block it), so blocking
/// it on the main thread alone could not keep two answers from being written.
static ANSWERED: AtomicBool = AtomicBool::new(false);

/// The armed alarm; one per process.
pub struct Alarm {
    _private: (),
}

extern "C" fn on_alarm(_: libc::c_int) {
    if ANSWERED.swap(true, Ordering::SeqCst) {
        // The process is writing its own answer, and exits when it has.
        return;
    }
    if let Some(bytes) = ALARM_ANSWER.get() {
        let mut written = 0;
        while written < bytes.len() {
            // SAFETY: the bytes live for the whole process; write and _exit are
            // async-signal-safe.
            let n = unsafe {
                libc::write(
                    libc::STDOUT_FILENO,
                    bytes[written..].as_ptr().cast(),
                    bytes.len() - written,
                )
            };
            if n <= 0 {
                break;
            }
            written += n as usize;
        }
    }
    // SAFETY: ends the process at once, as the handler must.
    unsafe { libc::_exit(0) }
}

impl Alarm {
    /// Arms the alarm: after `after`, `answer` is written and the process exits 0. A panic
    /// writes what `on_panic` returns (the answer on stdout, then a line on stderr) and exits
    /// 0, unless the process is already answering. The answer goes first: a stderr nobody
    /// drains must not keep it from being written.
    pub fn start(
        after: Duration,
        answer: Vec<u8>,
        on_panic: impl Fn(&PanicHookInfo) -> (Vec<u8>, String) + Send + Sync + 'static,
    ) -> Alarm {
        let _ = ALARM_ANSWER.set(answer);
        std::panic::set_hook(Box::new(move |info| {
            if ANSWERED.swap(true, Ordering::SeqCst) {
                return;
            }
            let (bytes, line) = on_panic(info);
            write_out(&bytes);
            let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
            // SAFETY: ends the process at once, with the answer written.
            unsafe { libc::_exit(0) }
        }));
        let secs = after.as_secs().clamp(1, libc::c_uint::MAX as u64);
        // SAFETY: installs a handler that only calls async-signal-safe functions, then arms
        // the process's one alarm.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_alarm as *const () as libc::sighandler_t;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(libc::SIGALRM, &action, std::ptr::null_mut());
            libc::alarm(secs as libc::c_uint);
        }
        Alarm { _private: () }
    }

    /// Writes the process's own answer, unless the alarm has answered already (then the
    /// process is gone): the alarm is blocked and cancelled first.
    /// Whether the answer was written out (nothing to write counts as written).
    pub fn answer(&self, bytes: Option<&[u8]>) -> bool {
        // SAFETY: blocks SIGALRM for this thread and cancels the alarm; plain syscalls.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGALRM);
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            libc::alarm(0);
        }
        if ANSWERED.swap(true, Ordering::SeqCst) {
            // The alarm went off on another thread and is writing its answer; it ends the
            // process when done, and this thread must not end it first.
            loop {
                // SAFETY: waits for a signal; the handler exits the process.
                unsafe { libc::pause() };
            }
        }
        bytes.is_none_or(write_out)
    }
}

/// Writes and flushes to stdout; a closed pipe is no one's to hear.
fn write_out(bytes: &[u8]) -> bool {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(bytes).and_then(|()| out.flush()).is_ok()
}
