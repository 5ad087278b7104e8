//! The check command of `stop-gate --run` (SPEC §4, check 2): `sh -c CMD` in the project, with
//! a timeout that kills its whole process group, reported as one useful line and the last 20
//! lines of its output.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::process::{self, Outcome};
use crate::terminal;

/// Output kept from a check: enough for its last 20 lines.
const OUTPUT_TAIL: usize = 64 * 1024;
pub const TAIL_LINES: usize = 20;

/// A failed check: the one useful line, then the tail of its output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckFailure {
    pub line: String,
    pub tail: String,
}

/// Runs the check; `Ok(())` when it exits 0 within the timeout.
pub fn run_check(command: &str, dir: &Path, timeout: Duration) -> Result<(), CheckFailure> {
    let shown = shown(command);
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(command).current_dir(dir);
    let done = match process::run(cmd, timeout, true, OUTPUT_TAIL) {
        Ok(done) => done,
        Err(e) => {
            return Err(CheckFailure {
                line: format!(
                    "stop-gate: `{shown}` could not start ({}); fix the --run command in the Stop hook",
                    crate::error::plain_io(&e)
                ),
                tail: String::new(),
            });
        }
    };
    let line = match done.outcome {
        Outcome::Exited(0) => return Ok(()),
        Outcome::TimedOut => format!(
            "stop-gate: `{shown}` timed out after {}s and was killed; make it faster or raise --timeout, then run it again before stopping",
            timeout.as_secs()
        ),
        other => format!(
            "stop-gate: `{shown}` failed (exit {}); fix it and run it again before stopping",
            other.code()
        ),
    };
    Err(CheckFailure {
        line,
        tail: last_lines(&terminal::plain_text(&done.output), TAIL_LINES),
    })
}

/// The command as one line: line breaks written as `\n`, so the useful line stays one line.
fn shown(command: &str) -> String {
    command.trim().replace('\r', "").replace('\n', "\\n")
}

/// The last `n` non-empty-at-the-end lines of text.
pub fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.trim_end().lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
