//! Faults injected with strace (`--inject`): a binary under test run with an error or a signal
//! at the system calls that touch one path, or at all of them (issue 44).

use std::path::Path;
use std::process::Command;

use super::{bin_dir, isolated, skip};

/// Whether strace runs here; where the suite is required (CI installs strace), it must.
pub fn strace_runs() -> bool {
    let there = Command::new("strace")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if !there {
        assert!(
            std::env::var_os("VIGIL_E2E_REQUIRED").is_none(),
            "strace is needed here (CI installs it)"
        );
        skip("strace is not installed");
    }
    there
}

/// `binary` (a vigil binary) under strace, with the tests' environment, following its threads
/// and children: `inject` (`error=EIO`, `signal=KILL:when=1`, …) at each of `syscalls`
/// (`read`, `rename,renameat,renameat2`, …) that touches `at`, or every one when `at` is
/// `None`. Its arguments are the caller's to add.
pub fn faulted(binary: &str, at: Option<&Path>, syscalls: &str, inject: &str) -> Command {
    let mut cmd = Command::new("strace");
    isolated(&mut cmd).args(["-f", "-qq", "-o", "/dev/null"]);
    if let Some(at) = at {
        cmd.arg("-P").arg(at);
    }
    cmd.args(["-e", &format!("trace={syscalls}")])
        .args(["-e", &format!("inject={syscalls}:{inject}")])
        .arg(bin_dir().join(binary));
    cmd
}
