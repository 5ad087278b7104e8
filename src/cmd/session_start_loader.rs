//! session-start-loader: tell a new session what the last ones left (SPEC §7). Fails open:
//! on any problem it prints nothing, exits 0, and says why in one line on stderr.

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use crate::cli::defs::{self, Scope};
use crate::cli::flags;
use crate::cli::flags::help;
use crate::cli::hook::HookInput;
use crate::cli::input::Source;
use crate::cli::output::{diagnostic, stdout};
use crate::error;
use crate::exit::Code as ExitCode;
use crate::handoff;
use crate::handoff::briefing::{self, Request};
use crate::state::loop_state;
use crate::state::loops;
use crate::state::project::{Project, SessionId};
use crate::state::wakes;
use crate::sys::files;
use crate::sys::process;
use crate::verdict::defang;
use crate::{Error, Result};

const NAME: &str = "session-start-loader";

const HELP: &str = "\
session-start-loader: tell a new session what the last ones left.

Usage:
  session-start-loader [--max-age DURATION] [--progress-file PATH] [--sync-notes REMOTE]
                       [--state-dir DIR]  < hook JSON

As a SessionStart hook (every source: startup, resume, clear, compact, fork) it reads
.vigil/handoff/final.json and checkpoint.json, newest first, each labelled final or
intermediate (an intermediate record is never presented as a finished task), and prints them
as the session's additional context, with the end of the progress file: SessionStart JSON of
at most 10,000 characters, everything defanged. A record older than --max-age is named as
stale and not loaded; an invalid one is skipped with a one-line note. On compact it gives back
this session's own checkpoint, so the state survives compaction.

On startup it also claims a loop started with `stop-gate loop start --next-session`. When
$CLAUDE_ENV_FILE is set it appends `export VIGIL_SESSION_ID=<id>` to it, so commands the agent
runs later know their session. It fails open: on any problem, no output, exit 0, one line on
stderr.

Options:
";

const HELP_TAIL: &str = "VIGIL_DISABLE=1 makes it do nothing.\n";

struct Options {
    max_age: Duration,
    progress_file: Option<PathBuf>,
    state_dir: Option<PathBuf>,
    sync_notes: Option<String>,
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
    if let Err(err) = run() {
        diagnostic(
            NAME,
            &format!("{err}; the session starts without a handoff"),
        );
        // Run by hand on a terminal: an error the shell shows (never 2, which would block).
        if files::stdin_is_terminal() {
            return ExitCode::from(1);
        }
    }
    // Fails open: whatever happened, the session starts.
    ExitCode::SUCCESS
}

fn run() -> Result<()> {
    let Some(options) = parse(std::env::args_os().skip(1).collect())? else {
        help(&defs::help_with_options(HELP, SCOPE, HELP_TAIL))?;
        return Ok(());
    };
    let input = HookInput::read(&Source::Stdin)?;
    let session = SessionId::parse(
        input
            .session_id
            .as_deref()
            .ok_or_else(|| Error::input("the hook input has no session_id"))?,
    )?;
    let project = Project::resolve(options.state_dir.as_deref(), input.cwd.as_deref());
    let source = input
        .source
        .clone()
        .unwrap_or_else(|| "startup".to_string());
    export_session(&session);
    if let Some(remote) = &options.sync_notes
        && matches!(source.as_str(), "startup" | "resume" | "clear")
    {
        sync_in_background(&project, options.state_dir.as_deref(), remote);
    }
    // `loop run`'s loop is claimed by the session its command starts (named by the id in the
    // environment), on a resume too; `--next-session`'s by the next session that starts.
    let pending = loops::Pending::for_this_session();
    let claims = match pending {
        loops::Pending::Run(_) => matches!(source.as_str(), "startup" | "resume"),
        loops::Pending::Next => source == "startup",
    };
    let claimed = if claims && session.as_str() != loops::PENDING {
        match loops::claim_pending(
            &project,
            &session,
            &pending,
            input.transcript_path.as_deref(),
        ) {
            Ok(Some(state)) => Some(format!(
                "vigil: this session claimed a loop started with {}: up to {} passes; it ends only when your reply's last line is <promise>{}</promise> and every check passes. The task:\n{}",
                match pending {
                    loops::Pending::Run(_) => "`stop-gate loop run`",
                    loops::Pending::Next => "--next-session",
                },
                state.max_iterations,
                state.completion_promise,
                defang::keep_head(
                    &defang::clean(&state.prompt, loop_state::MAX_PROMPT_CHARS),
                    2000
                )
                .lines()
                .map(|l| format!("    {l}"))
                .collect::<Vec<_>>()
                .join("\n")
            )),
            Ok(None) => None,
            Err(e) => {
                diagnostic(NAME, &format!("cannot claim the pending loop: {e}"));
                None
            }
        }
    } else {
        None
    };
    // A session that goes on (resumed, compacted) whose loop's record is gone, while its
    // transcript holds the loop's blocks: told, NOT verified.
    let told = match (source.as_str(), input.transcript_path.as_deref()) {
        ("resume" | "compact", Some(transcript)) => loops::witness(&project, &session, transcript),
        _ => None,
    };
    // Work that settled while no waiter was live (SPEC §10): told now, removed once written.
    // Beside the claimed loop, whose text is never cut (each line is defanged already).
    let woken = wakes::for_context(&project, &session);
    let claimed = match (claimed, woken.is_empty()) {
        (claimed, true) => claimed,
        (None, false) => Some(wakes::told(&woken)),
        (Some(claimed), false) => Some(format!("{claimed}\n{}", wakes::told(&woken))),
    };
    // Planted code new since `install --protect` (what a sandboxed shell could make that no
    // rule forbids before it exists, a `.claude/` below the top among it; Codex's shell
    // writing `.claude/agents/`): told at every start, not only by a doctor run by hand; and
    // what the last session's end saw that is gone since (issue 43).
    let planted = {
        let now = crate::install::planted::told(&project);
        let gone = crate::install::planted::gone_since_end(&project.dir, &now);
        now.into_iter().chain(gone).collect()
    };
    let request = Request {
        project: &project,
        session: &session,
        source: &source,
        max_age: options.max_age,
        progress_flag: options.progress_file.as_deref(),
        claimed,
        told,
        planted,
    };
    let written = match briefing::context(&request) {
        Some(json) => stdout(format!("{json}\n").as_bytes()),
        None => Ok(()),
    };
    match written {
        Ok(()) => woken.into_iter().for_each(wakes::Claimed::done),
        Err(_) => woken.into_iter().for_each(wakes::Claimed::put_back),
    }
    written
}

/// Starts `marker-writer sync` for the project (the marker-writer beside this binary), bounded
/// by its own deadline, with nothing of the hook's stdio: the session does not wait for it.
fn sync_in_background(project: &Project, state_dir: Option<&std::path::Path>, remote: &str) {
    let Ok(me) = std::env::current_exe() else {
        return;
    };
    let mut cmd = std::process::Command::new(me.with_file_name("marker-writer"));
    cmd.args(["sync", "--remote", remote, "--timeout", "20"]);
    if let Some(dir) = state_dir {
        cmd.arg("--state-dir").arg(dir);
    }
    cmd.current_dir(&project.dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    process::own_group(&mut cmd);
    match cmd.spawn() {
        // Not waited for: once this hook exits, init reaps it.
        Ok(child) => drop(child),
        Err(e) => diagnostic(
            NAME,
            &format!("cannot start marker-writer sync: {}", error::plain_io(&e)),
        ),
    }
}

/// Appends `export VIGIL_SESSION_ID=<id>` to `$CLAUDE_ENV_FILE`, in one write.
fn export_session(session: &SessionId) {
    let Some(path) = std::env::var_os("CLAUDE_ENV_FILE").filter(|p| !p.is_empty()) else {
        return;
    };
    // A file that does not end its last line would run ours into it.
    let unterminated =
        std::fs::read(&path).is_ok_and(|bytes| bytes.last().is_some_and(|b| *b != b'\n'));
    let line = format!(
        "{}export VIGIL_SESSION_ID={session}\n",
        if unterminated { "\n" } else { "" }
    );
    let written = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(&path)
        .and_then(|mut file| file.write_all(line.as_bytes()));
    if let Err(e) = written {
        diagnostic(
            NAME,
            &format!("cannot append to $CLAUDE_ENV_FILE: {}", error::plain_io(&e)),
        );
    }
}

/// The hook's flags, as its table (`session-start-loader.flags`) defines them.
const SCOPE: Scope = Scope::of(NAME, "hook");

fn parse(args: Vec<OsString>) -> Result<Option<Options>> {
    let mut options = Options {
        max_age: handoff::DEFAULT_MAX_AGE,
        progress_file: None,
        state_dir: None,
        sync_notes: None,
    };
    let mut args = defs::Args::new(args, SCOPE);
    while let Some(given) = args.next()? {
        let Some((flag, value)) = given.flag_only()? else {
            return Ok(None);
        };
        match flag.name {
            "--max-age" => options.max_age = flag.duration(&flag.text(value)?)?,
            "--progress-file" => options.progress_file = Some(PathBuf::from(flag.text(value)?)),
            "--state-dir" => options.state_dir = Some(PathBuf::from(value)),
            "--sync-notes" => options.sync_notes = Some(flag.remote(&flag.text(value)?)?),
            // Handled before anything else (see `crate::cli::flags::check_config`).
            "--check-config" => {}
            _ => return Err(flag.unread()),
        }
    }
    Ok(Some(options))
}
