//! The assertions the tests make again and again, each in one line: that a text says (or does
//! not say) something, that a command succeeded, or failed in the way SPEC §2 gives a CLI.
//!
//! Each is `#[track_caller]`, so a failure points at the test's own line, and shows the whole
//! text it looked in.

use super::said;

/// `assert_contains!(text, part)`: `text` (anything that is `AsRef<str>`) contains `part`, else
/// the test fails showing all of `text`; after `part`, a message as `assert!` takes one says
/// what the text is.
#[allow(unused_macros)]
macro_rules! assert_contains {
    ($text:expr, $part:expr $(,)?) => {
        match (&$text, &$part) {
            (text, part) => {
                let (text, part): (&str, &str) = (::std::convert::AsRef::<str>::as_ref(text), part);
                assert!(text.contains(part), "{part:?} is not in: {text}");
            }
        }
    };
    ($text:expr, $part:expr, $($why:tt)+) => {
        match (&$text, &$part) {
            (text, part) => {
                let (text, part): (&str, &str) = (::std::convert::AsRef::<str>::as_ref(text), part);
                assert!(
                    text.contains(part),
                    "{}: {part:?} is not in: {text}",
                    format_args!($($why)+)
                );
            }
        }
    };
}

/// `assert_lacks!(text, part)`: `text` does not contain `part`; a message may follow, as with
/// [`assert_contains!`].
#[allow(unused_macros)]
macro_rules! assert_lacks {
    ($text:expr, $part:expr $(,)?) => {
        match (&$text, &$part) {
            (text, part) => {
                let (text, part): (&str, &str) = (::std::convert::AsRef::<str>::as_ref(text), part);
                assert!(!text.contains(part), "{part:?} is in: {text}");
            }
        }
    };
    ($text:expr, $part:expr, $($why:tt)+) => {
        match (&$text, &$part) {
            (text, part) => {
                let (text, part): (&str, &str) = (::std::convert::AsRef::<str>::as_ref(text), part);
                assert!(
                    !text.contains(part),
                    "{}: {part:?} is in: {text}",
                    format_args!($($why)+)
                );
            }
        }
    };
}

pub(crate) use {assert_contains, assert_lacks};

/// A finished command succeeded (else the test fails with what it said).
#[track_caller]
pub fn assert_success(out: &std::process::Output) {
    assert!(out.status.success(), "{}", said(out));
}

/// A finished command exited with `code` (else the test fails with what it said).
#[track_caller]
pub fn assert_exit(out: &std::process::Output, code: i32) {
    assert_eq!(out.status.code(), Some(code), "{}", said(out));
}

/// A finished command printed nothing on stdout (a hook that lets be, silently).
#[track_caller]
pub fn assert_silent(out: &std::process::Output) {
    assert!(out.stdout.is_empty(), "{}", said(out));
}

/// A finished command's stdout contains `part`.
#[track_caller]
pub fn assert_stdout_contains(out: &std::process::Output, part: &str) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(part),
        "{part:?} is not on stdout: {}",
        said(out)
    );
}

/// A finished command's stderr contains `part`.
#[track_caller]
pub fn assert_stderr_contains(out: &std::process::Output, part: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(part),
        "{part:?} is not on stderr: {}",
        said(out)
    );
}

/// A finished command that must have succeeded, given back.
#[track_caller]
pub fn ok(out: std::process::Output) -> std::process::Output {
    assert_success(&out);
    out
}

/// stderr must be exactly one line starting with the binary's name.
#[track_caller]
pub fn assert_one_line_error(output: &std::process::Output, binary: &str) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(
        stderr.lines().count(),
        1,
        "stderr is not one line: {stderr:?}"
    );
    assert!(stderr.starts_with(&format!("{binary}: ")), "{stderr:?}");
    stderr
}

/// The one line of a CLI command's negative verdict (SPEC §2: exit 1, one line on stderr
/// starting with the binary's name).
#[track_caller]
pub fn negative_verdict(output: &std::process::Output, binary: &str) -> String {
    assert_eq!(
        output.status.code(),
        Some(1),
        "stdout {:?}",
        String::from_utf8_lossy(&output.stdout)
    );
    assert_one_line_error(output, binary)
}

/// The one line of a CLI command's usage or input error (SPEC §2: exit 2, one line on stderr
/// starting with the binary's name).
#[track_caller]
pub fn usage_error(output: &std::process::Output, binary: &str) -> String {
    assert_eq!(output.status.code(), Some(2), "{}", said(output));
    assert_one_line_error(output, binary)
}
