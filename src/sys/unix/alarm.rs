//! The watchdog's alarm, the Unix side: `SIGALRM` and a handler that only calls
//! async-signal-safe functions.

use std::time::Duration;

extern "C" fn on_alarm(_: libc::c_int) {
    super::super::watchdog::fire();
}

/// Arms the process's one alarm: after `after` (at least a second), the watchdog fires.
pub(crate) fn arm(after: Duration) {
    let secs = after.as_secs().clamp(1, libc::c_uint::MAX as u64);
    // SAFETY: installs a handler that only calls async-signal-safe functions, then arms the
    // process's one alarm.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_alarm as *const () as libc::sighandler_t;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGALRM, &action, std::ptr::null_mut());
        libc::alarm(secs as libc::c_uint);
    }
}

/// Blocks the alarm for this thread and cancels it.
pub(crate) fn disarm() {
    // SAFETY: blocks SIGALRM for this thread and cancels the alarm; plain syscalls.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGALRM);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        libc::alarm(0);
    }
}

/// Waits while the alarm, gone off on another thread, writes its answer and ends the process.
pub(crate) fn wait_for_the_end() -> ! {
    loop {
        // SAFETY: waits for a signal; the handler exits the process.
        unsafe { libc::pause() };
    }
}

/// Writes all of `bytes` to stdout with `write(2)` (async-signal-safe), giving up on an error.
pub(crate) fn write_stdout(bytes: &[u8]) {
    let mut written = 0;
    while written < bytes.len() {
        // SAFETY: the bytes outlive the call; write is async-signal-safe.
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

/// Ends the process at once, running nothing more (`_exit`).
pub(crate) fn exit_now(code: i32) -> ! {
    // SAFETY: ends the process at once.
    unsafe { libc::_exit(code) }
}
