//! A process's last word: an answer written to stdout and the process ended, at a deadline or
//! on a panic, unless the process answered first. Exactly one answer is ever written.
//!
//! The platform's alarm ends the process: on Unix `SIGALRM`, whose handler writes the answer,
//! prepared before the alarm is set, and `_exit`s (both async-signal-safe), not inherited by a
//! child; on Windows a timer thread that does the same. The process sets no other alarm.

use std::panic::PanicHookInfo;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::sys::platform::alarm;

/// The answer the alarm writes: set once, before the alarm, and never freed.
static ALARM_ANSWER: OnceLock<Vec<u8>> = OnceLock::new();

/// Set by whichever answers first, the process or the alarm; the other then writes nothing.
/// The alarm may arrive on any thread (a child's reader threads do not block it), so blocking
/// it on the main thread alone could not keep two answers from being written.
static ANSWERED: AtomicBool = AtomicBool::new(false);

/// The armed alarm; one per process.
pub(crate) struct Alarm {
    _private: (),
}

/// The alarm went off (on Unix, in the signal handler: only atomics, `write` and `_exit`,
/// which are async-signal-safe): the answer is written and the process ends, unless the
/// process answered first.
pub(super) fn fire() {
    if ANSWERED.swap(true, Ordering::SeqCst) {
        // The process is writing its own answer, and exits when it has.
        return;
    }
    if let Some(bytes) = ALARM_ANSWER.get() {
        alarm::write_stdout(bytes);
    }
    alarm::exit_now(0)
}

impl Alarm {
    /// Arms the alarm: after `after`, `answer` is written and the process exits 0. A panic
    /// writes what `on_panic` returns (the answer on stdout, then a line on stderr) and exits
    /// 0, unless the process is already answering. The answer goes first: a stderr nobody
    /// drains must not keep it from being written.
    pub(crate) fn start(
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
            alarm::exit_now(0)
        }));
        alarm::arm(after);
        Alarm { _private: () }
    }

    /// Writes the process's own answer, unless the alarm has answered already (then the
    /// process is gone): the alarm is blocked and cancelled first.
    /// Whether the answer was written out (nothing to write counts as written).
    pub(crate) fn answer(&self, bytes: Option<&[u8]>) -> bool {
        alarm::disarm();
        if ANSWERED.swap(true, Ordering::SeqCst) {
            // The alarm went off on another thread and is writing its answer; it ends the
            // process when done, and this thread must not end it first.
            alarm::wait_for_the_end()
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
