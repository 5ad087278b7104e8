//! The watchdog's alarm, the Windows side: a timer thread, since there is no `SIGALRM`. The
//! answer is written with `WriteFile` on the standard output handle (no lock another thread
//! could hold), and the process ends with `TerminateProcess`, running nothing more.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use windows_sys::Win32::Foundation::HANDLE;
use windows_sys::Win32::Storage::FileSystem::WriteFile;
use windows_sys::Win32::System::Console::{GetStdHandle, STD_OUTPUT_HANDLE};
use windows_sys::Win32::System::Threading::{GetCurrentProcess, TerminateProcess};

static DISARMED: AtomicBool = AtomicBool::new(false);

/// Arms the process's one alarm: after `after` (at least a second), the watchdog fires.
pub(crate) fn arm(after: Duration) {
    let after = after.max(Duration::from_secs(1));
    std::thread::spawn(move || {
        std::thread::sleep(after);
        if !DISARMED.load(Ordering::SeqCst) {
            super::super::watchdog::fire();
        }
    });
}

/// Cancels the alarm.
pub(crate) fn disarm() {
    DISARMED.store(true, Ordering::SeqCst);
}

/// Waits while the alarm, gone off on another thread, writes its answer and ends the process.
pub(crate) fn wait_for_the_end() -> ! {
    loop {
        std::thread::park();
    }
}

/// Writes all of `bytes` to the standard output handle, giving up on an error.
pub(crate) fn write_stdout(bytes: &[u8]) {
    // SAFETY: GetStdHandle takes a constant; WriteFile is given the buffer's own length.
    unsafe {
        let out: HANDLE = GetStdHandle(STD_OUTPUT_HANDLE);
        let mut written = 0;
        while written < bytes.len() {
            let mut n = 0u32;
            let rest = &bytes[written..];
            let len = rest.len().min(u32::MAX as usize) as u32;
            if WriteFile(out, rest.as_ptr(), len, &mut n, std::ptr::null_mut()) == 0 || n == 0 {
                break;
            }
            written += n as usize;
        }
    }
}

/// Ends the process at once.
pub(crate) fn exit_now(code: i32) -> ! {
    // SAFETY: ends this process; nothing after it runs.
    unsafe {
        TerminateProcess(GetCurrentProcess(), code as u32);
    }
    std::process::abort()
}
