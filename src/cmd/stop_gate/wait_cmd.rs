//! `stop-gate wait`: the waiter (SPEC §10). Claude Code runs it on Stop as an `asyncRewake`
//! handler: it waits, in the background, until a wake for its session arrives, and exits 2 with
//! one line per change on stderr, which wakes the model. It exits at once (0) when its session
//! runs a loop of its own, or has nothing to wait for; it never outlives the hook that started
//! it, gives up inside its handler's timeout, and a newer waiter of the same session replaces
//! it.

use std::ffi::OsString;
use std::io::Write;
use std::time::{Duration, Instant};

use crate::cli::defs::{self, Scope};
use crate::cli::hook::{HookInput, MAX_HOOK_INPUT};
use crate::cli::output::diagnostic;
use crate::exit::Code as ExitCode;
use crate::state::project::{Project, SessionId};
use crate::state::wakes;
use crate::sys::files;
use crate::sys::process;
use crate::{Error, Result};

const NAME: &str = "stop-gate wait";
const DEFAULT_POLL_MS: u64 = 2000;

/// `stop-gate wait --help`, its flags from the table.
pub(super) fn help() -> String {
    format!(
        "Usage: stop-gate wait {}          < Stop hook JSON\n{HELP_BODY}{}{}{}{HELP_TAIL}",
        defs::synopsis(Scope::Wait),
        defs::options(Scope::Wait, false),
        defs::entry(
            "--check-config",
            "check these flags and exit (the doctor runs the handler so)"
        ),
        defs::entry("-h, --help", "this text"),
    )
}

const HELP_BODY: &str = "
The waiter (Claude Code's Stop hook with \"asyncRewake\": true): in the background, it waits
until a loop that reports to this session or to this project's main checkout settles (or a
sync brings CI's verdict), then exits 2 with one line per change on stderr, which wakes the
model: `loop parser-fix in ../wt-parser: running -> passed after 7 passes, checks green`.
It exits 0 at once when its session runs a loop of its own (a worker), when nothing reports
here and no wake waits, and under VIGIL_DISABLE. It waits on the project's queue only in an
interactive session (CLAUDE_CODE_ENTRYPOINT cli; under `claude -p` it would hold the session
open): a `claude -p` commander is woken only through `--notify SESSION`. A newer waiter of
the same session replaces the last; a waiter exits when the process that started it is gone.
Each wake is delivered once, only while it is news, and removed only once written out.

Options:
";

const HELP_TAIL: &str = "\
Exit 0: nothing to tell (or gave up). 2: wakes were written on stderr. 1: the hook's input
could not be read, or the state home written (one line on stderr).
";

struct Options {
    give_up: Duration,
    poll: Duration,
    /// `--check-config`: the flags are checked, and nothing else is done.
    check_only: bool,
}

fn parse(args: Vec<OsString>) -> Result<Option<Options>> {
    let mut options = Options {
        give_up: Duration::from_secs(wakes::GIVE_UP_SECS),
        poll: Duration::from_millis(DEFAULT_POLL_MS),
        check_only: args.iter().any(|a| a == "--check-config"),
    };
    let args = args.into_iter().filter(|a| a != "--check-config").collect();
    let mut args = defs::Args::new(args, Scope::Wait);
    while let Some(given) = args.next()? {
        let Some((flag, value)) = given.flag_only()? else {
            return Ok(None);
        };
        let number = flag.number(&flag.text(value)?)?;
        match flag.name {
            "--give-up" => options.give_up = Duration::from_secs(number),
            "--poll-ms" => options.poll = Duration::from_millis(number),
            _ => return Err(flag.unread()),
        }
    }
    Ok(Some(options))
}

/// The waiter, from its arguments to its exit code.
pub(super) fn main(args: Vec<OsString>) -> ExitCode {
    let by_hand = files::stdin_is_terminal();
    let options = match parse(args) {
        Ok(Some(options)) => options,
        Ok(None) => {
            let _ = crate::cli::output::stdout(help().as_bytes());
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            diagnostic(NAME, &e.to_string());
            // From a hook, 2 would wake the model with this line: 1 is a hook's plain error.
            return ExitCode::from(if by_hand { 2 } else { 1 });
        }
    };
    if options.check_only || crate::cli::flags::disabled() {
        return ExitCode::SUCCESS;
    }
    if by_hand {
        diagnostic(
            NAME,
            "reads a Stop hook's JSON on standard input, which is a terminal; it runs from Claude Code's Stop hook with \"asyncRewake\": true; see --help",
        );
        return ExitCode::from(2);
    }
    match wait(&options) {
        Ok(code) => code,
        Err(e) => {
            diagnostic(NAME, &format!("{e}; this session is not woken by wakes"));
            ExitCode::from(1)
        }
    }
}

fn wait(options: &Options) -> Result<ExitCode> {
    let parent = process::Parent::now();
    let started = Instant::now();
    let bytes = files::read_capped(
        std::io::stdin().lock(),
        MAX_HOOK_INPUT,
        "hook input",
        "-".as_ref(),
    )?;
    let input = HookInput::parse(&bytes)?;
    let session = SessionId::parse(
        input
            .session_id
            .as_deref()
            .ok_or_else(|| Error::input("the hook input has no session_id"))?,
    )?;
    // A worker (`loop run`'s command, a session whose loop is live) reports; it is not told.
    let project = Project::resolve(None, input.cwd.as_deref()).for_reading();
    if wakes::is_worker(&project, &session) {
        return Ok(ExitCode::SUCCESS);
    }
    let commander = (!wakes::headless()).then(|| wakes::main_checkout(&project.dir));
    let queues = wakes::queues_of(&session, commander.as_deref());
    if !wakes::anything_to_wait_for(&queues) {
        return Ok(ExitCode::SUCCESS);
    }
    let registration = wakes::become_waiter(&session, &queues)?;
    let mut checked = Instant::now();
    loop {
        if !parent.is_there() || !wakes::still_waiter(&registration) {
            // The hook that started it is gone, or a newer waiter took over.
            wakes::stop_waiting(&registration);
            return Ok(ExitCode::SUCCESS);
        }
        if started.elapsed() >= options.give_up {
            wakes::stop_waiting(&registration);
            return Ok(ExitCode::SUCCESS);
        }
        let taken = wakes::take(&queues);
        if !taken.is_empty() {
            return Ok(deliver(taken, parent, &registration));
        }
        // Every loop may have ended without a wake for it (one started before wakes).
        if checked.elapsed() >= Duration::from_secs(30) {
            checked = Instant::now();
            if !wakes::anything_to_wait_for(&queues) {
                wakes::stop_waiting(&registration);
                return Ok(ExitCode::SUCCESS);
            }
        }
        std::thread::sleep(options.poll);
    }
}

/// Writes the wakes on stderr and exits 2 (the engine wakes the model with it); each is removed
/// only once the line is written, and put back when it cannot be, or when the engine is gone.
fn deliver(
    taken: Vec<wakes::Claimed>,
    parent: process::Parent,
    registration: &std::path::Path,
) -> ExitCode {
    wakes::stop_waiting(registration);
    let text = format!("{}\n", wakes::told(&taken));
    let written = parent.is_there() && {
        let mut err = std::io::stderr().lock();
        err.write_all(text.as_bytes())
            .and_then(|()| err.flush())
            .is_ok()
    };
    if written {
        taken.into_iter().for_each(wakes::Claimed::done);
        ExitCode::from(2)
    } else {
        taken.into_iter().for_each(wakes::Claimed::put_back);
        ExitCode::SUCCESS
    }
}
