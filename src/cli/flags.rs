//! What every binary's door shares: sizes, `--check-config`, `--version`, help, the entry
//! point, the off switch, shell quoting. Flags and their values are `defs`'.

use crate::cli::output;
use crate::cli::output::stdout;
use crate::error::{Error, Result};
use crate::exit::Code;
use crate::exit::Exit;
use crate::sys::atomic;
use crate::sys::process;

/// A size: a whole number of bytes, or one followed by K, M, G or T (powers of 1024).
pub(crate) fn size(text: &str) -> Result<u64> {
    let bad = || {
        Error::usage(format!(
            "{text:?} is not a size; write bytes, or a whole number and K, M, G or T (e.g. 512M)"
        ))
    };
    let (digits, shift) = match text.as_bytes().last() {
        Some(b'K' | b'k') => (&text[..text.len() - 1], 10),
        Some(b'M' | b'm') => (&text[..text.len() - 1], 20),
        Some(b'G' | b'g') => (&text[..text.len() - 1], 30),
        Some(b'T' | b't') => (&text[..text.len() - 1], 40),
        _ => (text, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let n: u64 = digits.parse().map_err(|_| bad())?;
    n.checked_mul(1 << shift).ok_or_else(bad)
}

/// `BINARY FLAGS... --check-config`: parses the flags with the binary's own parser and exits,
/// reading no input and touching nothing, before the off switch is looked at (the doctor
/// runs it with `VIGIL_DISABLE=1`). `None` when the flag is not given. Exit 0, or `refused`
/// with the error on one line (2 for a gate; 1 for a fail-open hook, which never exits 2).
pub(crate) fn check_config(
    binary: &str,
    refused: u8,
    parse: impl FnOnce() -> Result<()>,
) -> Option<Code> {
    if !std::env::args_os().skip(1).any(|a| a == "--check-config") {
        return None;
    }
    Some(match parse() {
        Ok(()) => Code::SUCCESS,
        Err(e) => {
            output::diagnostic(binary, &e.to_string());
            Code::from(refused)
        }
    })
}

/// Prints a help text.
pub(crate) fn help(text: &str) -> Result<Exit> {
    stdout(text.as_bytes())?;
    Ok(Exit::Success)
}

/// Prints bytes and answers `Success`.
pub(crate) fn print(bytes: &[u8]) -> Result<Exit> {
    stdout(bytes)?;
    Ok(Exit::Success)
}

/// Every binary's first step: file size signals ignored (`atomic::ignore_file_size_signal`),
/// and `BINARY --version` answered. True when that was all there was to do.
pub(crate) fn start(binary: &str) -> bool {
    atomic::ignore_file_size_signal();
    version_requested(binary)
}

/// Every binary's entry, in place of std's runtime start (`vigil::entry!(real_main)` with
/// `#![no_main]`): std's start reads `/proc/self/maps` to guard the main thread's stack and
/// sets up an alternate signal stack, which together cost a hook more than a Stop's own work
/// (a third of a millisecond on a process that lives one). What of it a hook needs is done
/// here: a closed pipe is an error to handle rather than a signal that kills, and a panic
/// exits 101 as under std's start.
pub fn enter(main: fn() -> Code) -> std::ffi::c_int {
    process::ignore_pipe_signal();
    let code = match std::panic::catch_unwind(main) {
        Ok(code) => std::ffi::c_int::from(code.0),
        Err(_) => 101,
    };
    // What the process's writes replaced is freed by a child nothing waits for.
    atomic::release_replaced();
    code
}

/// Defines the C `main` of a binary that runs `$main` through [`enter`].
#[macro_export]
macro_rules! entry {
    ($main:ident) => {
        #[unsafe(no_mangle)]
        pub extern "C" fn main(
            _argc: std::ffi::c_int,
            _argv: *const *const std::ffi::c_char,
        ) -> std::ffi::c_int {
            $crate::cli::flags::enter($main)
        }
    };
}

/// `VIGIL_DISABLE=1`: the hook binaries do nothing and exit 0.
pub(crate) fn disabled() -> bool {
    std::env::var_os("VIGIL_DISABLE").is_some_and(|v| v == "1")
}

/// `BINARY --version` as the only argument: prints `BINARY VERSION` and answers true.
fn version_requested(binary: &str) -> bool {
    let mut args = std::env::args_os().skip(1);
    let asked =
        matches!(args.next(), Some(a) if a == "--version" || a == "-V") && args.next().is_none();
    if asked {
        let _ = stdout(format!("{binary} {}\n", env!("CARGO_PKG_VERSION")).as_bytes());
    }
    asked
}

/// The one quoting function (SPEC §2's words for a shell): see [`crate::sys::process::shell_quote`].
pub(crate) use crate::sys::process::shell_quote;

/// The binaries a vigil entry runs; a handler naming one of them is vigil's.
pub const BINARIES: [&str; 3] = ["stop-gate", "session-start-loader", "session-end-handoff"];
