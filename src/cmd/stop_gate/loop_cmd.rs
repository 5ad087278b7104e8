//! `stop-gate loop`: start, status, list and cancel (SPEC §4); `loop run` is in `loop_run`.

use super::*;

pub(super) fn loop_command(mut args: Vec<OsString>) -> Result<Exit> {
    if args.is_empty() {
        return Err(Error::usage(
            "`stop-gate loop` needs start, run, status, list or cancel; see `stop-gate loop --help`",
        ));
    }
    let action = args.remove(0);
    match action.to_str() {
        Some("start") => loop_start(args),
        Some("run") => loop_run::loop_run(args),
        Some("status") => loop_status(args),
        Some("cancel") => loop_cancel(args),
        Some("list") => loop_list(args),
        Some("-h" | "--help") => help(&loop_help()),
        _ => Err(Error::usage(format!(
            "unknown loop command {:?}; use start, run, status, list or cancel",
            action.to_string_lossy()
        ))),
    }
}

pub(super) fn loop_start(args: Vec<OsString>) -> Result<Exit> {
    let mut args: Vec<String> = args
        .into_iter()
        .map(|a| {
            a.into_string()
                .map_err(|_| Error::usage("an argument is not valid UTF-8"))
        })
        .collect::<Result<_>>()?;
    // --args-stdin counts only among the leading flags: later it is text of the prompt.
    let leading = loop_args::leading_flags(&args);
    let request = if let Some(at) = args[..leading].iter().position(|a| a == "--args-stdin") {
        args.remove(at);
        // Flags on the command line (the slash command passes --session there, where the shell
        // can expand it) are defaults for what the raw text does not say.
        let words: Vec<Word> = args.iter().map(|a| Word::plain(a)).collect();
        let outer = loop_args::parse_start(&words, None)?;
        if outer.prompt.is_some() {
            return Err(Error::usage(
                "with --args-stdin the prompt comes from stdin; give only flags on the command line",
            ));
        }
        let bytes = read_capped(
            std::io::stdin().lock(),
            MAX_PROMPT,
            "the arguments",
            "-".as_ref(),
        )?;
        let raw = files::utf8(bytes, "the arguments")?;
        let raw = raw.strip_suffix('\n').unwrap_or(&raw);
        let mut request = loop_args::parse_start(&loop_args::split_words(raw), Some(raw))?;
        request.merge_defaults(outer);
        request
    } else {
        let words: Vec<Word> = args.iter().map(|a| Word::plain(a)).collect();
        loop_args::parse_start(&words, None)?
    };
    if request.help {
        return help(&loop_help());
    }
    start_from(request)
}

pub(super) fn start_from(request: StartRequest) -> Result<Exit> {
    if request.next_session && request.session.as_deref().is_some_and(|s| !s.is_empty()) {
        return Err(Error::usage(
            "--next-session and --session exclude each other",
        ));
    }
    let session = if request.next_session {
        loops::For::Pending(loops::Pending::Next)
    } else {
        loops::For::Session(session_of(request.session.clone())?)
    };
    let project = Project::resolve(request.state_dir.as_deref(), None);
    refuse_unwired_worktree(&project)?;
    let started = loops::begin(&project, request, session, StartedBy::Terminal)?;
    print(format!("{}\n", started.told).as_bytes())
}

/// `--session`, else $VIGIL_SESSION_ID, else $CLAUDE_CODE_SESSION_ID; an empty value is none.
pub(super) fn session_of(flag: Option<String>) -> Result<SessionId> {
    let session = any_session_of(flag)?;
    if session.as_str() == loops::PENDING {
        return Err(Error::usage(format!(
            "session id `{}` is reserved for --next-session",
            loops::PENDING
        )));
    }
    Ok(session)
}

/// The session named by `--session`, else $VIGIL_SESSION_ID, else $CLAUDE_CODE_SESSION_ID;
/// an empty value is none.
pub(super) fn named_session(flag: Option<String>) -> Option<String> {
    let from_env = |name| std::env::var(name).ok().filter(|v: &String| !v.is_empty());
    flag.filter(|s| !s.is_empty())
        .or_else(|| from_env("VIGIL_SESSION_ID"))
        .or_else(|| from_env("CLAUDE_CODE_SESSION_ID"))
}

pub(super) fn any_session_of(flag: Option<String>) -> Result<SessionId> {
    let raw = named_session(flag).ok_or_else(|| {
            Error::usage(
                "no session id: pass --session ID (or run inside Claude Code, which sets it), or --next-session for the next session to start here (claude -p, codex exec); a loop never starts without knowing its session, so it cannot leak into another",
            )
        })?;
    SessionId::parse(&raw).map_err(|e| Error::Usage(e.to_string()))
}

/// The flags of `loop status` and `loop cancel`.
pub(super) struct SessionFlags {
    project: Project,
    /// `None`: no session was named, and none is in the environment.
    session: Option<SessionId>,
    json: bool,
    prompt: bool,
}

pub(super) fn session_flags(args: Vec<OsString>, status: bool) -> Result<Option<SessionFlags>> {
    let mut session = None;
    let mut state_dir = None;
    let mut json = false;
    let mut prompt = false;
    let scope = Scope::of(NAME, if status { "status" } else { "cancel" });
    let mut args = defs::Args::new(args, scope);
    while let Some(given) = args.next()? {
        let Some((flag, value)) = given.flag_only()? else {
            return Ok(None);
        };
        match flag.name {
            "--session" => session = Some(flag.text(value)?),
            "--state-dir" => state_dir = Some(PathBuf::from(value)),
            "--json" => json = true,
            "--prompt" => prompt = true,
            _ => return Err(flag.unread()),
        }
    }
    let project = Project::resolve(state_dir.as_deref(), None);
    let session = named_session(session)
        .map(|raw| session_of(Some(raw)))
        .transpose()?;
    Ok(Some(SessionFlags {
        project,
        session,
        json,
        prompt,
    }))
}

pub(super) fn loop_status(args: Vec<OsString>) -> Result<Exit> {
    let Some(SessionFlags {
        project,
        session,
        json,
        prompt,
    }) = session_flags(args, true)?
    else {
        return help(&loop_help());
    };
    let project = project.for_reading();
    let Some(session) = session else {
        return project_status(&project, json);
    };
    let Some(state) = loops::load(&project, &session)? else {
        diagnostic(NAME, &format!("no loop in session {session}"));
        return Ok(Exit::Negative);
    };
    let mut text = if json {
        serde_json::to_string(&state).expect("loop state serializes")
    } else {
        format!("session {session}: {}", state.summary())
    };
    if prompt && !json && state.status.is_live() {
        text.push_str(&format!(
            "\n\nThe task:\n\n{}\n\nIt ends only when your reply's last line is <promise>{}</promise> and every check of the Stop hook passes.",
            state.prompt, state.completion_promise
        ));
    }
    print(format!("{text}\n").as_bytes())
}

/// `loop status` with no session: the project's latest loop, and the one pending for
/// `--next-session`, if any.
pub(super) fn project_status(project: &Project, json: bool) -> Result<Exit> {
    let latest = loops::latest(project);
    let pending = loops::waiting(project, &loops::Pending::Next)?;
    if latest.is_none() && pending.is_none() {
        diagnostic(
            NAME,
            "no loop in this project (name one with --session ID to look elsewhere)",
        );
        return Ok(Exit::Negative);
    }
    let mut text = String::new();
    if json {
        // One object: the latest loop, else the pending one (it has `claim_before`).
        let shown = latest
            .as_ref()
            .map(|(_, state)| state)
            .or(pending.as_ref().map(|(state, _)| state));
        text = serde_json::to_string(&shown).expect("loop state serializes");
    } else {
        if let Some((session, state)) = &latest {
            text.push_str(&format!(
                "latest loop: session {session}: {}\n",
                state.summary()
            ));
        }
        if let Some((state, lapsed)) = &pending {
            let until = state.claim_before.as_deref().unwrap_or("?");
            let when = if *lapsed {
                format!("lapsed at {until}: no session claimed it")
            } else {
                format!("claimable until {until}")
            };
            text.push_str(&format!(
                "pending loop for the next session: {}, {when}\n",
                state.summary()
            ));
        }
        text.pop();
    }
    print(format!("{text}\n").as_bytes())
}

/// `loop list`: every loop that reports to this project's commander (its main checkout),
/// across worktrees, with name, worktree, status, pass, age and end; then the wakes waiting
/// and who waits for them (SPEC §10: the status after a long absence).
pub(super) fn loop_list(args: Vec<OsString>) -> Result<Exit> {
    let mut json = false;
    let mut args = defs::Args::new(args, Scope::of(NAME, "list"));
    while let Some(given) = args.next()? {
        match given {
            Given::Help => return help(&loop_help()),
            Given::Value(value) => return Err(defs::unexpected(value)),
            Given::Flag(flag, _) if flag.name == "--json" => json = true,
            Given::Flag(flag, _) => return Err(flag.unread()),
        }
    }
    let project = Project::resolve(None, None).for_reading();
    let commander = wakes::main_checkout(&project.dir);
    let Some(queue) = wakes::project_queue(&commander) else {
        return Err(Error::input(
            "no state home ($VIGIL_STATE_HOME and $HOME are not absolute paths), so no loop can report here",
        ));
    };
    let mut entries = wakes::entries(&queue);
    for entry in &mut entries {
        current(entry);
    }
    if json {
        let text = serde_json::to_string(&entries).expect("entries serialize");
        return print(format!("{text}\n").as_bytes());
    }
    if entries.is_empty() {
        diagnostic(
            NAME,
            &format!(
                "no loop reports to this project ({}); start one with `stop-gate loop run` or /vigil-loop",
                commander.display()
            ),
        );
        return Ok(Exit::Negative);
    }
    let now = crate::sys::time::now_secs();
    let rows: Vec<[String; 6]> = entries
        .iter()
        .map(|e| {
            let age = now - crate::sys::time::parse_rfc3339(&e.started_at).unwrap_or(now);
            [
                e.report.name.clone(),
                e.report.worktree_shown(),
                e.status.as_str().to_string(),
                format!("pass {}/{}", e.iteration, e.max_iterations),
                format!("{} ago", age_told(age.max(0.0) as u64)),
                e.end_reason
                    .map_or("-".to_string(), |r| r.as_str().to_string()),
            ]
        })
        .collect();
    let header = ["NAME", "WORKTREE", "STATUS", "PASS", "STARTED", "END"].map(String::from);
    let widths: Vec<usize> = (0..6)
        .map(|i| {
            std::iter::once(&header)
                .chain(&rows)
                .map(|r| r[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut text = String::new();
    let held = std::iter::once(None).chain(entries.iter().map(|e| e.held.as_deref()));
    for (row, held) in std::iter::once(&header).chain(&rows).zip(held) {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        text.push_str(cells.join("  ").trim_end());
        text.push('\n');
        // What the human's hold saw, under the loop's row (SPEC §11).
        if let Some(held) = held {
            text.push_str(&format!(
                "  {}\n",
                crate::verdict::defang::field_max(held, 600)
            ));
        }
    }
    let waiting = wakes::queued(&queue).len();
    let waiters = wakes::live_waiters(&queue);
    text.push_str(&format!(
        "{waiting} wake{} waiting; {}\n",
        if waiting == 1 { "" } else { "s" },
        match waiters.len() {
            0 => "no session waits for them: they come as context at the next session start or prompt here".to_string(),
            1 => format!("session {} waits for them", waiters[0].session_id),
            n => format!("{n} sessions wait for them, and each wake reaches only one of them"),
        }
    ));
    print(text.as_bytes())
}

/// An age as a person reads it: `45s`, `12m`, `1h 12m`, `2d 3h`.
fn age_told(secs: u64) -> String {
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m", secs / 60),
        3600..86_400 => format!("{}h {}m", secs / 3600, secs % 3600 / 60),
        _ => format!("{}d {}h", secs / 86_400, secs % 86_400 / 3600),
    }
}

/// A live loop's entry brought up to date from its session's record (its pass, and an end not
/// written to the queue, for a loop started before it had one).
fn current(entry: &mut wakes::Entry) {
    if !entry.status.is_live() {
        return;
    }
    let Some(session) = entry
        .session_id
        .as_deref()
        .and_then(|s| SessionId::parse(s).ok())
    else {
        return;
    };
    let project = Project::at(&entry.report.worktree).for_reading();
    if let Ok(Some(state)) = loops::load(&project, &session)
        && state
            .report
            .as_ref()
            .is_some_and(|r| r.id == entry.report.id)
    {
        entry.status = state.status;
        entry.iteration = state.iteration;
        entry.end_reason = state.end_reason;
    }
}

pub(super) fn loop_cancel(args: Vec<OsString>) -> Result<Exit> {
    let Some(SessionFlags {
        project, session, ..
    }) = session_flags(args, false)?
    else {
        return help(&loop_help());
    };
    let Some(session) = session else {
        return cancel_in_project(&project);
    };
    match cancel_session(&project, &session)? {
        Some(line) => print(format!("{line}\n").as_bytes()),
        None => {
            diagnostic(NAME, &format!("no running loop in session {session}"));
            Ok(Exit::Negative)
        }
    }
}

/// Cancels the loop running in `session`: what to print, or `None` when none runs.
pub(super) fn cancel_session(project: &Project, session: &SessionId) -> Result<Option<String>> {
    Ok(match loops::cancel(project, session)? {
        Some(loops::Cancelled::Lost(lost)) => {
            Some(format!("vigil: {lost}; the loop is over, NOT verified"))
        }
        Some(loops::Cancelled::Loop(state)) => Some(format!(
            "vigil loop cancelled in session {session} at pass {}/{}",
            state.iteration, state.max_iterations
        )),
        None => None,
    })
}

/// `loop cancel` with no session: the loop pending for `--next-session`, and the project's
/// latest loop when it still runs.
pub(super) fn cancel_in_project(project: &Project) -> Result<Exit> {
    let mut lines = Vec::new();
    if let Some(state) = loops::cancel_pending(project)? {
        lines.push(format!(
            "vigil: the pending loop ({}) is cancelled; no session will claim it",
            state.summary()
        ));
    }
    if let Some((session, state)) = loops::latest(project)
        && state.status.is_live()
        && let Some(line) = cancel_session(project, &session)?
    {
        lines.push(line);
    }
    if lines.is_empty() {
        diagnostic(
            NAME,
            "no running or pending loop in this project (name one with --session ID)",
        );
        return Ok(Exit::Negative);
    }
    print(format!("{}\n", lines.join("\n")).as_bytes())
}

/// A loop in a linked worktree (`git worktree add`) that no Stop gate is wired for would never
/// be judged, and its commander never told: refused, saying how to wire it (SPEC §10). The
/// main checkout is the user's to wire, as ever.
pub(super) fn refuse_unwired_worktree(project: &Project) -> Result<()> {
    let main = wakes::main_checkout(&project.dir);
    if main == project.dir || settings::gate_wired(&project.dir) {
        return Ok(());
    }
    Err(Error::usage(format!(
        "this worktree ({}) has no vigil Stop hook (its settings file is untracked, so a new worktree has none), and a loop here would never be judged; wire it first: `settings-merge install --settings {}/.claude/settings.local.json` with the flags of the main checkout's (see `settings-merge check` there), or the vigil plugin",
        project.dir.display(),
        project.dir.display()
    )))
}
