//! `stop-gate loop run`: a loop for the session a command starts (`claude -p`, `codex exec`),
//! optionally in a linked worktree, run in the foreground; how the loop ended is its exit code
//! and one line on stderr (SPEC §4).

use super::loop_cmd::refuse_unwired_worktree;
use super::*;

/// What `loop run`'s loop feeds back when it was given no prompt: the session already holds
/// the task COMMAND gave it.
pub(super) const RUN_PROMPT: &str = "Go on with the task you were given: it is not finished yet.";

/// `loop run [loop flags] -- COMMAND…`: a loop for the session COMMAND starts, its verdict as
/// the exit code (SPEC §4).
pub(super) fn loop_run(args: Vec<OsString>) -> Result<Exit> {
    let (mut flags, command) = split_command(args)?;
    let worktree = take_worktree(&mut flags)?;
    let words: Vec<Word> = flags.iter().map(|a| Word::plain(a)).collect();
    let mut request = loop_args::parse_start(&words, None)?;
    if let Some(name) = &worktree {
        request.name.get_or_insert_with(|| name.clone());
    }
    if request.help {
        return help(&loop_help());
    }
    if request.session.is_some() || request.next_session {
        return Err(Error::usage(
            "`loop run` starts the loop for the session its command starts; --session and --next-session go with `loop start`",
        ));
    }
    let Some(program) = command.first() else {
        return Err(Error::usage(
            "`loop run` needs the command after --, e.g. `stop-gate loop run --max-iterations 20 --completion-promise DONE -- claude -p 'Make every test pass'`",
        ));
    };
    if request.prompt.is_none() && request.prompt_file.is_none() {
        request.prompt = Some(RUN_PROMPT.to_string());
    }
    let shown = program.to_string_lossy().into_owned();
    if flags::disabled() {
        diagnostic(
            NAME,
            &format!(
                "vigil is disabled by VIGIL_DISABLE: `{shown}` was not run, since no loop would gate it; unset VIGIL_DISABLE"
            ),
        );
        return Ok(Exit::NotRun);
    }
    if let Some(name) = &worktree {
        enter_worktree(name)?;
    }
    let project = Project::resolve(request.state_dir.as_deref(), None);
    // The verdict is read from the protected state: where the agent can write it, it would
    // be the agent's to give.
    let place = project.protected();
    if place.agent_writable() {
        diagnostic(
            NAME,
            &format!(
                "the loop was not run: its state would be in {}, where the agent can write, so its verdict would be the agent's; set VIGIL_STATE_HOME to a directory outside the project and the agent's sandbox",
                place.dir.display()
            ),
        );
        return Ok(Exit::NotRun);
    }
    refuse_unwired_worktree(&project)?;
    let pending = loops::Pending::new_run()?;
    let id = pending.run_id().unwrap_or_default().to_string();
    match loops::begin(
        &project,
        request,
        loops::For::Pending(pending.clone()),
        StartedBy::Terminal,
    ) {
        Ok(_) => {}
        Err(e @ Error::Usage(_)) => return Err(e),
        Err(e) => {
            diagnostic(NAME, &format!("the loop never ran: {e}"));
            return Ok(Exit::NotRun);
        }
    }
    let mut child = std::process::Command::new(program);
    child.args(&command[1..]).env(loops::RUN_ENV, id);
    // vigil bounds this loop, so Claude Code's own cap may go, unless you set it, or another
    // Stop hook could then block forever.
    let cap = "CLAUDE_CODE_STOP_HOOK_BLOCK_CAP";
    let others = other_hooks(&project, &command);
    let lifted = std::env::var_os(cap).is_none() && others.is_empty();
    if lifted {
        child.env(cap, "0");
    }
    let status = match process::run_foreground(child) {
        Ok(status) => status,
        Err(e) => {
            loops::forget_run(&project, &pending);
            diagnostic(
                NAME,
                &format!("the loop never ran: cannot start `{shown}`: {e}"),
            );
            return Ok(Exit::NotRun);
        }
    };
    let failed = (!status.success()).then(|| match status.code() {
        Some(code) => format!("`{shown}` exited {code}"),
        None => format!(
            "`{shown}` was killed by signal {}",
            process::signal_of(&status).unwrap_or(0)
        ),
    });
    let ended = run_verdict(&project, &pending, failed.as_deref(), lifted, &others);
    loops::forget_run(&project, &pending);
    let (exit, mut line) = ended;
    // A pass is only as strong as the sandbox that kept the agent off the state home.
    let claude = std::path::Path::new(program)
        .file_name()
        .is_some_and(|name| name == "claude");
    if exit == Exit::Success && claude && !sandbox::sandbox_on(&project.dir) {
        line.push_str(
            "; Claude Code's sandbox is off in this project (no install --protect), so the agent could have written this verdict itself",
        );
    }
    diagnostic(NAME, &line);
    Ok(exit)
}

/// `loop run`'s arguments split at the first `--`: the loop's flags, each UTF-8, and the
/// command (none without a `--`).
fn split_command(mut args: Vec<OsString>) -> Result<(Vec<String>, Vec<OsString>)> {
    let command = match args.iter().position(|a| a == "--") {
        Some(at) => {
            let command = args.split_off(at + 1);
            args.pop();
            command
        }
        None => Vec::new(),
    };
    let flags: Vec<String> = args
        .into_iter()
        .map(|a| {
            a.into_string()
                .map_err(|_| Error::usage("an argument is not valid UTF-8"))
        })
        .collect::<Result<_>>()?;
    Ok((flags, command))
}

/// `--worktree NAME` (or `--worktree=NAME`) among `loop run`'s flags, taken out of them.
fn take_worktree(flags: &mut Vec<String>) -> Result<Option<String>> {
    let Some(at) = flags
        .iter()
        .position(|f| f == "--worktree" || f.starts_with("--worktree="))
    else {
        return Ok(None);
    };
    let flag = flags.remove(at);
    let value = match flag.strip_prefix("--worktree=") {
        Some(value) => value.to_string(),
        None if at < flags.len() => flags.remove(at),
        None => {
            return Err(Error::usage(
                "--worktree needs a value: a name, e.g. --worktree parser",
            ));
        }
    };
    if flags
        .iter()
        .any(|f| f == "--worktree" || f.starts_with("--worktree="))
    {
        return Err(Error::usage(
            "--worktree is given twice; give each flag once",
        ));
    }
    if value.starts_with('-') {
        return Err(Error::usage(format!(
            "--worktree {value:?} begins with `-`; give a plain name, e.g. --worktree parser"
        )));
    }
    wakes::parse_name(&value).map(Some).map_err(|_| {
        Error::usage(format!(
            "--worktree {value:?} is not 1 to 64 letters, digits, `.`, `_` or `-`"
        ))
    })
}

/// `loop run --worktree NAME`: moves into the linked worktree `../<main checkout>-NAME` of this
/// repository. It adds nothing: `git worktree add` would run the repository's hooks and
/// filters, and check out a branch, which are the agent's to write; a missing worktree is
/// refused with the line that adds it, for you to run. The main checkout's local settings wire
/// it (Claude Code reads them in every worktree).
fn enter_worktree(name: &str) -> Result<()> {
    let here = std::env::current_dir().map_err(|e| Error::io("read", Path::new("."), &e))?;
    let main = crate::sys::git::main_checkout(&protected::project_top(&here));
    let Some(parent) = main.parent() else {
        return Err(Error::usage(
            "--worktree needs a checkout with a parent directory",
        ));
    };
    let base = main
        .file_name()
        .map_or_else(|| "checkout".into(), |n| n.to_string_lossy().into_owned());
    let path = parent.join(format!("{base}-{name}"));
    if !path.exists() {
        return Err(Error::usage(format!(
            "--worktree {name}: there is no worktree {}; add it first (from the commit you choose): `git -C {} worktree add -b {name} {}`",
            path.display(),
            flags::shell_quote(&main.to_string_lossy()),
            flags::shell_quote(&path.to_string_lossy())
        )));
    }
    if crate::sys::git::main_checkout(&path) != main {
        return Err(Error::usage(format!(
            "--worktree {name}: {} is there and is not a worktree of {}; remove it or pick another name",
            path.display(),
            main.display()
        )));
    }
    std::env::set_current_dir(&path).map_err(|e| Error::io("enter", &path, &e))
}

/// Hooks besides vigil's that may block a Stop of the session COMMAND starts, each with where
/// it is: Stop hooks in the settings Claude Code merges for the project, hooks in agents',
/// commands' and skills' frontmatter and in plugins (what the doctor finds), and settings or
/// plugins the command line adds. With the block cap lifted, nothing would end a turn one of
/// them keeps blocking.
pub(super) fn other_hooks(project: &Project, command: &[OsString]) -> Vec<(PathBuf, String)> {
    let mut others = settings::other_stop_hooks_of(&project.dir);
    for planted in planted::scan_here(&project.dir).found {
        if !matches!(planted.what, What::Mcp { .. }) {
            others.push((planted.path.clone(), planted.what()));
        }
    }
    let adds = |arg: &OsString| {
        let arg = arg.to_string_lossy();
        ["--settings", "--plugin-dir"]
            .iter()
            .any(|flag| arg == *flag || arg.starts_with(&format!("{flag}=")))
    };
    if let Some(flag) = command.iter().find(|arg| adds(arg)) {
        others.push((
            PathBuf::from("the command line"),
            format!("what `{}` adds", flag.to_string_lossy()),
        ));
    }
    others
}

/// Whether the session's loop is the one this `loop run` started.
pub(super) fn is_own(state: &loop_state::LoopState, pending: &loops::Pending) -> bool {
    pending.run_id().is_some() && state.run_id.as_deref() == pending.run_id()
}

/// How `loop run`'s loop ended, as its exit code and the one line on stderr.
pub(super) fn run_verdict(
    project: &Project,
    pending: &loops::Pending,
    failed: Option<&str>,
    lifted: bool,
    others: &[(PathBuf, String)],
) -> (Exit, String) {
    let command = failed.map_or(String::new(), |f| format!("{f}; "));
    let claim = match loops::run_claim(project, pending) {
        Ok(Some(claim)) => claim,
        // Neither the pending loop nor its claim: the state home lost both while it ran.
        Ok(None) if !pending.path(project).exists() => {
            return (
                Exit::Negative,
                format!(
                    "{command}the loop's state is gone from the state home (removed while it ran); the work is NOT verified"
                ),
            );
        }
        Ok(None) => {
            let lapsed = matches!(loops::waiting(project, pending), Ok(Some((_, true))));
            let why = if lapsed {
                "no session claimed it before it lapsed (--claim-within)".to_string()
            } else {
                "no session claimed it; SessionStart must run session-start-loader (./install.sh wires it; `settings-merge check` says whether it is), and the command must start a Claude Code or Codex session in this project".to_string()
            };
            return (Exit::NotRun, format!("{command}the loop never ran: {why}"));
        }
        Err(e) => {
            return (
                Exit::Negative,
                format!(
                    "{command}{e}; the loop's end cannot be told, and the work is NOT verified"
                ),
            );
        }
    };
    let Ok(session) = SessionId::parse(&claim.session_id) else {
        return (
            Exit::Negative,
            format!("{command}the loop's claim names no valid session; the work is NOT verified"),
        );
    };
    // What the session's hooks did not record: the engine's cut (without a SessionEnd hook),
    // and the end of the session itself.
    if let Some(transcript) = &claim.transcript_path {
        let _ = loops::note_engine_cut(project, &session, transcript);
    }
    if let Err(e) = loops::end_session(project, &session) {
        return (
            Exit::Negative,
            format!("{command}{e}; the work is NOT verified"),
        );
    }
    // The loop, and the settings changes vigil blocked during the session (said with the
    // verdict, whatever it is), from one read of the session's record.
    let gone = || {
        (
            Exit::Negative,
            format!("{command}the loop of session {session} is gone; the work is NOT verified"),
        )
    };
    let (state, changes) = match session::peek(project, &session) {
        Ok(Some(record)) => match record.ralph {
            Some(state) => (state, record.blocked_changes),
            None => return gone(),
        },
        Ok(None) => return gone(),
        Err(lost) => {
            return (
                Exit::Negative,
                format!("{command}{lost}; the loop is NOT verified"),
            );
        }
    };
    let status = format!("`stop-gate loop status --session {session}`");
    // A pass stands for the tree its checks ran on: one that changed since (something the
    // agent left running) is not what was verified.
    let state = if changed_since_pass(project, &state) {
        match loops::changed_after(project, &session) {
            Ok(Some(marked)) => marked,
            _ => loop_state::LoopState {
                changed_after: true,
                ..state
            },
        }
    } else {
        state
    };
    let (exit, mut line) = verdict_of(&state, pending, &session, failed, lifted, others, &status);
    if let Some(held) = state.held.as_ref().and_then(loop_state::HeldTold::phrase) {
        line.push_str(&format!("; {held}"));
    }
    match changes.last() {
        Some(last) => (
            exit,
            format!(
                "{line}; vigil blocked {} settings change(s) during the session, the last: {}",
                changes.len(),
                last.reason
            ),
        ),
        None => (exit, line),
    }
}

/// Whether a passed loop's tree is no longer the one its passing Stop vouched for.
fn changed_since_pass(project: &Project, state: &loop_state::LoopState) -> bool {
    if state.status != loop_state::LoopStatus::Passed || state.changed_after {
        return false;
    }
    let Some(vouched) = state.vouched.as_deref() else {
        return false;
    };
    crate::evidence::subject::worktree_tree(project, Default::default())
        .is_ok_and(|now| now != vouched)
}

/// The exit code and line for the loop `loop run` found at its end.
pub(super) fn verdict_of(
    state: &loop_state::LoopState,
    pending: &loops::Pending,
    session: &SessionId,
    failed: Option<&str>,
    lifted: bool,
    others: &[(PathBuf, String)],
    status: &str,
) -> (Exit, String) {
    let command = failed.map_or(String::new(), |f| format!("{f}; "));
    let (k, max) = (state.iteration, state.max_iterations);
    if !is_own(state, pending) {
        return (
            Exit::Negative,
            format!(
                "{command}the loop of session {session} is not the one this run started (it was cancelled and another started?); the work is NOT verified: see {status}"
            ),
        );
    }
    match state.status {
        loop_state::LoopStatus::Passed if state.changed_after => (
            Exit::Negative,
            format!(
                "{command}loop passed on pass {k}/{max} in session {session}, but the tree changed after its checks passed (something kept running and changed it): what is there now is NOT verified; look at `git status`, then run the loop again"
            ),
        ),
        loop_state::LoopStatus::Passed => match state.checks.as_deref() {
            Some(checks) if !checks.is_empty() => (
                Exit::Success,
                format!(
                    "loop passed on pass {k}/{max} in session {session}: completion declared and its checks passed ({}){}",
                    checks.join(", "),
                    failed.map_or(String::new(), |f| format!("; {f} afterwards"))
                ),
            ),
            _ => (
                Exit::Negative,
                format!(
                    "{command}loop passed on pass {k}/{max} in session {session} on the declaration alone: no check is configured on the Stop hook (--run, --require-marker), so the work is NOT verified"
                ),
            ),
        },
        loop_state::LoopStatus::Blocked => (
            Exit::Decide,
            format!(
                "{command}loop blocked at pass {k}/{max} in session {session}: the agent asks a human to decide; read its question (`claude --resume {session}`), then answer it and run the loop again"
            ),
        ),
        _ => {
            let why = state.end_reason.map_or(String::new(), |r| {
                format!(" ({}: {})", r.as_str(), r.told())
            });
            let hint = match state.end_reason {
                Some(loop_state::EndReason::BlockCap) if !lifted => match others.first() {
                    Some((file, hook)) => format!(
                        "; the cap stayed because of {hook} in {}, which could block a stop forever without it",
                        file.display()
                    ),
                    None => "; the cap stayed because CLAUDE_CODE_STOP_HOOK_BLOCK_CAP is set"
                        .to_string(),
                },
                _ => String::new(),
            };
            (
                Exit::Negative,
                format!(
                    "{command}loop {} at pass {k}/{max} in session {session}{why}{hint}; the work is NOT verified: see {status}",
                    state.status.as_str()
                ),
            )
        }
    }
}
