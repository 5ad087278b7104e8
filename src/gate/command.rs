//! The check command of `stop-gate --run` (SPEC §4, check 2): `sh -c CMD` at the project's top
//! (on Windows Git's `sh`, else `cmd.exe`),
//! confined (SPEC §9), with a timeout that kills its whole process group, reported as one
//! useful line and the last 20 lines of its output.

use std::time::Duration;

use crate::error;
use crate::evidence::signing;
use crate::reach::confine::{self, Plan, Unavailable};
use crate::state::project::Project;
use crate::sys::process::{self, Outcome};
use crate::sys::programs;
use crate::verdict::terminal;

/// Output kept from a check: enough for its last 20 lines.
pub(crate) const OUTPUT_TAIL: usize = 64 * 1024;
/// Output kept from a check whose tests are read one by one (SPEC §11): a large suite's.
pub(crate) const OUTPUT_WHOLE: usize = 16 << 20;
pub(crate) const TAIL_LINES: usize = 20;

/// A failed check: the one useful line, then the tail of its output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CheckFailure {
    pub line: String,
    pub tail: String,
}

/// A check's result, and the note for the human when it ran unconfined.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Checked {
    pub result: Result<(), CheckFailure>,
    /// Said to the human (`systemMessage`) every time the check ran with the user's rights.
    pub unconfined: Option<String>,
    /// What it printed (stdout and stderr, its last `capture` bytes), escapes stripped.
    pub output: String,
}

/// How the project's check is confined (SPEC §9): it writes the project, the directories the
/// user names (`--check-write`), never sees the signing key the gate's environment names, and
/// uses the network only where `network` says.
pub(crate) fn plan(project: &Project, writable: Vec<std::path::PathBuf>, network: bool) -> Plan {
    Plan {
        work: project.dir.clone(),
        cwd: project.dir.clone(),
        writable,
        network,
        hide: signing::sign_key_path(None).into_iter().collect(),
        project_state: project.state.clone(),
        clean_env: None,
        read_only: Vec::new(),
        bound: Vec::new(),
        env: Vec::new(),
        ledger: Some(project.protected().dir.join("stand-ins")),
        in_place: true,
    }
}

/// Runs the check confined as `plan` says (SPEC §9); `Ok(())` when it exits 0 within the
/// timeout. Where this machine has no confinement the check runs unconfined and says so, unless
/// `required` says it must be (the engine's sandbox is on: `--protect`; asked only then), where
/// it blocks instead.
pub(crate) fn run_check(
    command: &str,
    plan: &Plan,
    required: impl FnOnce() -> bool,
    timeout: Duration,
    capture: usize,
) -> Checked {
    let shown = shown(command);
    let args = ["-c".into(), command.into()];
    let unavailable = match confine::sandbox() {
        Ok(bwrap) => match confine::command(&bwrap, plan, programs::SH.as_ref(), &args) {
            Ok((cmd, mut confined)) => {
                let done = process::run(cmd, timeout, true, capture);
                if confined.started() {
                    let (mut result, output) = judge(&shown, done, timeout);
                    let appeared = confined.appeared();
                    if !appeared.made.is_empty() {
                        result = Err(made_what_runs(&shown, &plan.work, &appeared));
                    }
                    return Checked {
                        result,
                        unconfined: None,
                        output,
                    };
                }
                // The agent's code never ran: the sandbox could not be made. Whether that is
                // this machine's doing or the project's decides what happens next.
                if confine::works(&bwrap) {
                    let why = done
                        .map(|d| first_line(&terminal::plain_text(&d.output)))
                        .unwrap_or_default();
                    Unavailable::Project(format!("bubblewrap refused this project ({why})"))
                } else {
                    confine::not_here()
                }
            }
            Err(unavailable) => unavailable,
        },
        Err(unavailable) => unavailable,
    };
    let why = unavailable.message();
    let refused = match unavailable {
        // The project's doing, whatever the machine: the fix is in the project.
        Unavailable::Project(_) => {
            Some("fix that in the project: a check that cannot be confined is never run")
        }
        Unavailable::Machine(_) if required() => {
            Some("a check never runs with your rights under --protect")
        }
        Unavailable::Machine(_) => None,
    };
    if let Some(then) = refused {
        return Checked {
            result: Err(CheckFailure {
                line: format!(
                    "stop-gate: `{shown}` was not run: it cannot be confined ({why}); {then}"
                ),
                tail: String::new(),
            }),
            unconfined: None,
            output: String::new(),
        };
    }
    let mut cmd = process::shell(command);
    cmd.current_dir(&plan.cwd);
    // A hold's copy: its environment linked in, its caches named (read-only cannot be had).
    confine::link_bound(plan);
    for (name, value) in &plan.env {
        cmd.env(name, value);
    }
    let (result, output) = judge(&shown, process::run(cmd, timeout, true, capture), timeout);
    Checked {
        result,
        unconfined: Some(format!(
            "stop-gate: the check `{shown}` ran unconfined, with your rights: {why}"
        )),
        output,
    }
}

/// A check that left behind what the engine or git would run with the user's rights: never a
/// pass, whatever it exited with, and each place named. Nothing is removed: it may be the
/// user's own doing in a check that sets a project up.
fn made_what_runs(
    shown: &str,
    work: &std::path::Path,
    appeared: &confine::Appeared,
) -> CheckFailure {
    CheckFailure {
        line: format!(
            "stop-gate: `{shown}` {}",
            appeared.told(
                work,
                " outside any sandbox; a check never counts when it leaves one behind:"
            )
        ),
        tail: String::new(),
    }
}

fn first_line(text: &str) -> String {
    text.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .to_string()
}

/// What a run's end means for the check, and what it printed.
fn judge(
    shown: &str,
    done: std::io::Result<process::Finished>,
    timeout: Duration,
) -> (Result<(), CheckFailure>, String) {
    let done = match done {
        Ok(done) => done,
        Err(e) => {
            let failure = CheckFailure {
                line: format!(
                    "stop-gate: `{shown}` could not start ({}); fix the --run command in the Stop hook",
                    error::plain_io(&e)
                ),
                tail: String::new(),
            };
            return (Err(failure), String::new());
        }
    };
    let output = terminal::plain_text(&done.output);
    let line = match done.outcome {
        Outcome::Exited(0) => return (Ok(()), output),
        Outcome::TimedOut => format!(
            "stop-gate: `{shown}` timed out after {}s and was killed; make it faster or raise --timeout, then run it again before stopping",
            timeout.as_secs()
        ),
        other => format!(
            "stop-gate: `{shown}` failed (exit {}); fix it and run it again before stopping",
            other.code()
        ),
    };
    let tail = last_lines(&output, TAIL_LINES);
    (Err(CheckFailure { line, tail }), output)
}

/// The command as one line: line breaks written as `\n`, so the useful line stays one line.
fn shown(command: &str) -> String {
    command.trim().replace('\r', "").replace('\n', "\\n")
}

/// The last `n` non-empty-at-the-end lines of text.
pub(crate) fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.trim_end().lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
