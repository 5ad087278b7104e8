//! The assertions the tests make again and again, each in one line: that a text says (or does
//! not say) something, that a command succeeded, or failed in the way SPEC §2 gives a CLI.
//!
//! Each is `#[track_caller]`, so a failure points at the test's own line, and shows the whole
//! text it looked in.

use super::said;

/// What a text must do to pass [`assert_text`].
pub enum Holds {
    Contains,
    Lacks,
    StartsWith,
}

/// `text` contains `part`, lacks it or begins with it, as `holds` says, else the test fails
/// showing all of `text`, after `why` when there is one. The macros below call it.
#[track_caller]
pub fn assert_text(holds: Holds, text: &str, part: &str, why: Option<std::fmt::Arguments>) {
    let (ok, fails) = match holds {
        Holds::Contains => (text.contains(part), "is not in"),
        Holds::Lacks => (!text.contains(part), "is in"),
        Holds::StartsWith => (text.starts_with(part), "does not begin"),
    };
    match why {
        Some(why) => assert!(ok, "{why}: {part:?} {fails}: {text}"),
        None => assert!(ok, "{part:?} {fails}: {text}"),
    }
}

/// [`assert_text`] as the macros below call it: `text` is anything that is `AsRef<str>`, and a
/// message may follow `part`, as `assert!` takes one, to say what the text is.
#[allow(unused_macros)]
macro_rules! text_assertion {
    ($holds:ident, $text:expr, $part:expr $(,)?) => {
        $crate::support::assert_text(
            $crate::support::Holds::$holds,
            ::std::convert::AsRef::<str>::as_ref(&$text),
            &$part,
            None,
        )
    };
    ($holds:ident, $text:expr, $part:expr, $($why:tt)+) => {
        $crate::support::assert_text(
            $crate::support::Holds::$holds,
            ::std::convert::AsRef::<str>::as_ref(&$text),
            &$part,
            Some(format_args!($($why)+)),
        )
    };
}

/// `assert_contains!(text, part)`: `text` contains `part`.
#[allow(unused_macros)]
macro_rules! assert_contains {
    ($($args:tt)+) => { $crate::support::text_assertion!(Contains, $($args)+) };
}

/// `assert_lacks!(text, part)`: `text` does not contain `part`.
#[allow(unused_macros)]
macro_rules! assert_lacks {
    ($($args:tt)+) => { $crate::support::text_assertion!(Lacks, $($args)+) };
}

/// `assert_starts_with!(text, prefix)`: `text` begins with `prefix`.
#[allow(unused_macros)]
macro_rules! assert_starts_with {
    ($($args:tt)+) => { $crate::support::text_assertion!(StartsWith, $($args)+) };
}

pub(crate) use {assert_contains, assert_lacks, assert_starts_with, text_assertion};

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
    stream_contains(out, "stdout", &out.stdout, part);
}

/// A finished command's stderr contains `part`.
#[track_caller]
pub fn assert_stderr_contains(out: &std::process::Output, part: &str) {
    stream_contains(out, "stderr", &out.stderr, part);
}

#[track_caller]
fn stream_contains(out: &std::process::Output, name: &str, bytes: &[u8], part: &str) {
    let text = String::from_utf8_lossy(bytes);
    let why = format_args!("on {name} ({})", said(out));
    assert_text(Holds::Contains, &text, part, Some(why));
}

/// A fault test killed its writer at least `at_least` times (`killed`, `what` saying how):
/// fewer prove little.
#[track_caller]
pub fn assert_killed_enough(killed: usize, at_least: usize, what: &str) {
    assert!(
        killed >= at_least,
        "only {killed} {what}: the test proves little"
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
