//! session-end-handoff: what one session leaves for the next (SPEC §6). Fails open: any
//! problem is one line on stderr and exit 1, never a block.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use crate::cli::defs::{self, Scope};
use crate::cli::flags;
use crate::cli::flags::help;
use crate::cli::hook::HookEvent;
use crate::cli::hook::HookInput;
use crate::cli::input::Source;
use crate::cli::output::diagnostic;
use crate::exit::Code as ExitCode;
use crate::handoff::{self, HandoffKind};
use crate::state::loops;
use crate::state::project::{Project, SessionId};
use crate::sys::process;
use crate::sys::time::Deadline;
use crate::{Error, Result};

const NAME: &str = "session-end-handoff";
/// The whole run stays inside this, well within SessionEnd's default 1.5 s shared budget.
const BUDGET: Duration = Duration::from_millis(300);
/// What is kept for the second write and its read back: neither waits for the disk, so both
/// take well under a millisecond (10 ms leaves room for a busy machine).
const WRITE_RESERVE: Duration = Duration::from_millis(10);

const HELP: &str = "\
session-end-handoff: leave the next session a record of this one.

Usage:
  session-end-handoff [--checkpoint] [--progress-file PATH] [--state-dir DIR]   < hook JSON

As a SessionEnd hook it writes .vigil/handoff/final.json: the session, how it ended, the
branch and HEAD, whether the tree is dirty and what changed, the end of the last assistant
message, the loop's state, the markers, and the progress file. With --checkpoint (for Stop,
PreCompact, and Codex's Stop, since Codex has no SessionEnd) it writes checkpoint.json, an
intermediate record that never replaces final.json. Text copied from the session is defanged.

The record is at most 16 KiB, written atomically (without waiting for the disk), then read
back and checked. It takes at most 300 ms: what is quick to know is written first, then the
repository's state is added. The tree's changes and the markers' match are found by the
index's stat data, as git status finds them (by stat, not verified: this only informs; no git
command that reads working files runs, so no filter the repository names runs), and
what cannot be told in time is left out. The first SIGTERM does not end it at once (Claude
Code sends one to a hook still running when `claude -p` exits): it finishes, and is gone 10 s
later at most; a second SIGTERM ends it. It fails open: any problem is one line on stderr and
exit 1 (a non-blocking error); it never exits 2.

Options:
";

const HELP_TAIL: &str = "VIGIL_DISABLE=1 makes it do nothing.\n";

struct Options {
    checkpoint: bool,
    progress_file: Option<PathBuf>,
    state_dir: Option<PathBuf>,
}

/// The binary's work, from its command line to its exit code.
pub fn main() -> ExitCode {
    if flags::start(NAME) {
        return ExitCode::SUCCESS;
    }
    if let Some(code) = flags::check_config(NAME, 1, || {
        parse(std::env::args_os().skip(1).collect()).map(drop)
    }) {
        return code;
    }
    if flags::disabled() {
        return ExitCode::SUCCESS;
    }
    // The engine's SIGTERM (at `claude -p`'s exit, or past SessionEnd's budget) would lose
    // the record of how the session ended; BUDGET, the locks' waits and the outlast's alarm
    // bound the work instead. (One that comes before this line still ends it.)
    process::outlast_termination();
    let deadline = Deadline::after(BUDGET);
    match run(deadline) {
        Ok(code) => code,
        Err(err) => {
            diagnostic(NAME, &format!("{err}; no handoff was written"));
            // Exit 1: a non-blocking error in both engines. Never 2, which would block.
            ExitCode::from(1)
        }
    }
}

fn run(deadline: Deadline) -> Result<ExitCode> {
    let Some(options) = parse(std::env::args_os().skip(1).collect())? else {
        help(&defs::help_with_options(HELP, SCOPE, HELP_TAIL))?;
        return Ok(ExitCode::SUCCESS);
    };
    let input = HookInput::read(&Source::Stdin)?;
    let session = SessionId::parse(
        input
            .session_id
            .as_deref()
            .ok_or_else(|| Error::input("the hook input has no session_id"))?,
    )?;
    // A `cwd` that is no directory names no project: nothing is made there (issue 44).
    if let Some(cwd) = input.cwd.as_deref()
        && !cwd.is_dir()
    {
        return Err(Error::input(format!(
            "the hook input's cwd {} is not a directory",
            cwd.display()
        )));
    }
    let project = Project::resolve(options.state_dir.as_deref(), input.cwd.as_deref());
    // A failed turn (StopFailure) is recorded in the session and its loop.
    if input.event() == Some(HookEvent::StopFailure)
        && let Err(e) = handoff::record_failure(&project, &session, &input)
    {
        diagnostic(
            NAME,
            &format!("{e}; the failed turn was not recorded in the session"),
        );
    }
    // A turn of the session's loop that Claude Code ended over the gate's block (its own cap
    // on consecutive blocks) is recorded: the loop is interrupted, and the handoff says so.
    // Looked up as a reader: a running loop's place is there already, and none is made.
    if let Some(transcript) = input.transcript_path.as_deref()
        && let Err(e) = loops::note_engine_cut(&project.clone().for_reading(), &session, transcript)
    {
        diagnostic(
            NAME,
            &format!("{e}; a cut of the session's loop by the engine was not recorded"),
        );
    }
    // The session is over: a loop still live there is cut, since nothing will judge it again.
    if !options.checkpoint
        && input.event() == Some(HookEvent::SessionEnd)
        && let Err(e) = loops::end_session(&project.clone().for_reading(), &session)
    {
        diagnostic(
            NAME,
            &format!("{e}; the session's loop was not recorded as cut"),
        );
    }
    // Otherwise it only reads the protected state (the session's loop), so it makes none of
    // it, and writes nothing there that would wait for the disk.
    let project = project.for_reading();
    let kind = if options.checkpoint {
        HandoffKind::Intermediate
    } else {
        HandoffKind::Final
    };
    let refine_by = Deadline::after(deadline.remaining().saturating_sub(WRITE_RESERVE));
    // The planted code the engine or git would run, as the session ends (issue 43), looked for
    // while the record is written and kept beside the baseline, out of the agent's reach; never
    // waited for past the deadline.
    let planted = (!options.checkpoint).then(|| {
        let (sender, planted) = std::sync::mpsc::channel();
        let looking = project.clone();
        std::thread::spawn(move || {
            let _ = sender.send(crate::install::planted::told(&looking));
        });
        planted
    });
    let unrefined = handoff::leave(
        &project,
        &session,
        &input,
        kind,
        options.progress_file.as_deref(),
        refine_by,
    )?;
    if let Some(lines) = planted.and_then(|p| p.recv_timeout(refine_by.remaining()).ok())
        && let Err(e) = crate::install::planted::keep_at_end(&project.dir, session.as_str(), &lines)
    {
        diagnostic(
            NAME,
            &format!("{e}; the next session start will not tell what of it is gone by then"),
        );
    }
    if let Some(err) = unrefined {
        diagnostic(
            NAME,
            &format!("{err}; the record was left without the repository's state"),
        );
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// The hook's flags, as its table (`session-end-handoff.flags`) defines them.
const SCOPE: Scope = Scope::of(NAME, "hook");

fn parse(args: Vec<OsString>) -> Result<Option<Options>> {
    let mut options = Options {
        checkpoint: false,
        progress_file: None,
        state_dir: None,
    };
    let mut args = defs::Args::new(args, SCOPE);
    while let Some(given) = args.next()? {
        let Some((flag, value)) = given.flag_only()? else {
            return Ok(None);
        };
        match flag.name {
            "--checkpoint" => options.checkpoint = true,
            "--progress-file" => options.progress_file = Some(PathBuf::from(flag.text(value)?)),
            "--state-dir" => options.state_dir = Some(PathBuf::from(value)),
            // Handled before anything else (see `crate::cli::flags::check_config`).
            "--check-config" => {}
            _ => return Err(flag.unread()),
        }
    }
    Ok(Some(options))
}
