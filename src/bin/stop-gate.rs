//! stop-gate: the Stop hook (SPEC §4), and `stop-gate loop` to start, inspect and cancel a
//! Ralph loop.

#![no_main]

use std::ffi::OsString;
use std::path::PathBuf;
use vigil::exit::Code as ExitCode;
use vigil::state::loop_state;

use lexopt::prelude::*;
use vigil::cli::defs;
use vigil::cli::defs::Scope;
use vigil::cli::flags;
use vigil::cli::flags::{help, print, string_value};
use vigil::cli::hook;
use vigil::cli::hook::HookEvent;
use vigil::cli::hook::HookInput;
use vigil::cli::hook::MAX_HOOK_INPUT;
use vigil::cli::output::{diagnostic, stdout};
use vigil::gate::slash;
use vigil::gate::slash::Command;
use vigil::gate::slash::PromptOutput;
use vigil::gate::{self, GateConfig};
use vigil::install::planted;
use vigil::install::planted::What;
use vigil::install::settings;
use vigil::install::settings::live;
use vigil::reach::guard;
use vigil::reach::sandbox;
use vigil::state::loop_state::StartedBy;
use vigil::state::loops::{self, StartRequest, Word};
use vigil::state::project::{Project, SessionId};
use vigil::state::session;
use vigil::sys::files;
use vigil::sys::files::read_capped;
use vigil::sys::process;
use vigil::{Error, Exit, Result};

const NAME: &str = "stop-gate";
/// A prompt (or the raw arguments of `loop start`) larger than this is refused.
const MAX_PROMPT: u64 = 1024 * 1024;

const HELP_HEAD: &str = "\
stop-gate: the Stop hook that turns \"looks done\" into evidence.

Usage:
  stop-gate [--run CMD [--check-network] [--check-write DIR]...] [--timeout SECS]
            [--deadline SECS] [--require-marker CHECK[=CMD]]...
            [--max-blocks N] [--marker-max-age DURATION] [--max-file-size SIZE] [--subagents]
            [--feedback block|context] [--verify-key FILE] [--state-dir DIR]
            [--stall-after K] [--max-duration D] [--max-tokens N]
            [--contract FILE|default] [--contract-max-tokens N]               < hook JSON
  stop-gate loop start --max-iterations N --completion-promise P [--session ID | --next-session]
                       [--stall-after K] [--max-duration D] [--max-tokens N]
                       [--claim-within DURATION] [--prompt-file F | PROMPT...]
  stop-gate loop run --max-iterations N --completion-promise P [loop start's limits]
                     [--prompt-file F | PROMPT...] -- COMMAND [ARG...]
  stop-gate loop status [--session ID] [--json | --prompt]
  stop-gate loop cancel [--session ID]

As a hook it reads the Stop or SubagentStop JSON of Claude Code or Codex on stdin, runs its
checks in order, and blocks the stop ({\"decision\":\"block\",\"reason\":...}) at the first that
denies; otherwise it allows (no output, or {\"systemMessage\":...} when the human should know).
  1. the Ralph loop of this session, when one is running (see `stop-gate loop --help`)
  2. --run CMD: `sh -c CMD` in the project must exit 0 within --timeout, confined
  3. --require-marker CHECK: a passed marker for exactly this worktree (see marker-writer)
It always exits 0: a gate that cannot read its input or config blocks, and says why.
On UserPromptSubmit it starts or cancels this session's loop when the human's prompt begins
with /vigil-loop or /vigil-cancel (or /vigil:vigil-loop, /vigil:vigil-cancel), and prints
nothing for any other prompt. Under settings-merge install --protect it is two more hooks:
PreToolUse on the file tools, where it denies a write outside the agent's reach, and
ConfigChange, where it blocks a settings change that would take vigil's hooks, deny rules or
sandbox away from the running session.
Loops and session records live in the protected state, outside the project: $VIGIL_STATE_HOME,
else $XDG_STATE_HOME/vigil, else ~/.local/state/vigil (see settings-merge install --protect).

Options:
";

const HELP_TAIL: &str = "\
VIGIL_DISABLE=1 makes the hook allow at once, and say so (with a loop running: NOT verified).
";

const HELP_LOOP_HEAD: &str = "\
Usage:
  stop-gate loop start --max-iterations N --completion-promise P [--session ID | --next-session]
                       [--claim-within DURATION] [--state-dir DIR] [--prompt-file F | PROMPT...]
  stop-gate loop start --args-stdin          < the same arguments as raw text
  stop-gate loop run --max-iterations N --completion-promise P [--stall-after K]
                     [--max-duration D] [--max-tokens N] [--claim-within DURATION]
                     [--state-dir DIR] [--prompt-file F | PROMPT...] -- COMMAND [ARG...]
  stop-gate loop status [--session ID] [--json | --prompt] [--state-dir DIR]
  stop-gate loop cancel [--session ID] [--state-dir DIR]

A loop makes the Stop hook feed the same prompt back until the agent's last line is
<promise>P</promise> (a declaration, not a mention) and every check of the hook passes, for at
most N passes. A `needs-decision: QUESTION` line ends it for a human to answer. A declaration
while background work runs (a shell or subagent Claude Code lists as running) is held once per
pass, then does not count. A spent limit (stalled, --max-duration, --max-tokens) ends it
`aborted`, NOT verified. A turn that ends on an API error (StopFailure) or that the engine
ends over the hook (Claude Code's cap on Stop blocks) leaves it `interrupted`, no pass spent:
it goes on at the session's next stop. A session that ends while its loop is live leaves it
`cut` (block-cap, turn-failed or session-ended), NOT verified. A human starts
one here, or with /vigil-loop in Claude Code (read by the UserPromptSubmit hook); nothing the
agent writes into the project starts, changes or ends one.

start:
";

const HELP_LOOP_TAIL: &str = "\
run (for `claude -p` and `codex exec`): start's flags but --session and --next-session,
then `--` and the command. It starts a loop for the session COMMAND starts (claimed by
session-start-loader through $VIGIL_LOOP_RUN, which only COMMAND's environment holds), runs
COMMAND with its own terminal, and prints one line on stderr: how the loop ended, its passes,
and what to do. Without a prompt, the loop feeds back \"Go on with the task you were given\".
It lifts Claude Code's cap on Stop blocks for COMMAND (CLAUDE_CODE_STOP_HOOK_BLOCK_CAP=0),
since vigil bounds the loop, unless the variable is set already or another hook could block a
stop (a Stop hook in the project's settings, frontmatter or plugin hooks, --settings or
--plugin-dir on COMMAND's line): nothing would end a turn that hook keeps blocking.
  Exit 0: the loop passed and the Stop hook's checks passed. 1: any other end (aborted, cut,
  cancelled, or passed on the declaration alone with no check configured), NOT verified.
  3: the agent asks a human to decide. 4: the loop never ran (COMMAND did not start, no session
  claimed the loop, the state would be within the agent's reach, or VIGIL_DISABLE is set).
  2: a usage error.
status:
  --json                   the loop's state as JSON (schemas/loop.schema.json)
  --prompt                 with a running loop, its task too (what /vigil-loop shows the model)
status and cancel take the session from --session, $VIGIL_SESSION_ID or
$CLAUDE_CODE_SESSION_ID; with none, they show (or cancel) this project's latest loop and any
loop pending for --next-session.
Flags come before or after the prompt, as `--flag value` or `--flag=value`; `--` ends them.
An unknown flag, or one of these inside the prompt, is an error, never part of the prompt.
Exit 0 on success, 1 when status or cancel finds no loop, 2 on a usage error.
";

/// `stop-gate --help`: the hook's flags from the table.
fn hook_help() -> String {
    format!(
        "{HELP_HEAD}{}{}{HELP_TAIL}",
        defs::options(Scope::Hook, false),
        defs::entry("-h, --help", "this text")
    )
}

/// `stop-gate loop --help`: loop start's flags from the table.
fn loop_help() -> String {
    format!(
        "{HELP_LOOP_HEAD}{}{}{HELP_LOOP_TAIL}",
        defs::options(Scope::Start, true),
        defs::entry(
            "--args-stdin",
            "read all the arguments as raw text from stdin, without a shell (quotes, $() and apostrophes stay as typed)"
        )
    )
}

vigil::entry!(real_main);

fn real_main() -> ExitCode {
    if flags::start(NAME) {
        return ExitCode::SUCCESS;
    }
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    if args.first().is_some_and(|a| a == "loop") {
        return match loop_command(args[1..].to_vec()) {
            Ok(exit) => exit.into(),
            Err(err) => {
                diagnostic(NAME, &err.to_string());
                err.exit().into()
            }
        };
    }
    let check = || {
        let flags = args.iter().filter(|a| *a != "--check-config").cloned();
        parse_gate(flags.collect()).map(drop)
    };
    if let Some(code) = flags::check_config(NAME, 2, check) {
        return code;
    }
    let config = parse_gate(args);
    if flags::disabled() {
        return disabled(config);
    }
    if matches!(config, Ok(None)) {
        let _ = stdout(hook_help().as_bytes());
        return ExitCode::SUCCESS;
    }
    if files::stdin_is_terminal() {
        // Run by hand: say what it expects, and count nothing for a session `unknown`.
        diagnostic(
            NAME,
            "reads a hook's JSON (Stop, SubagentStop or UserPromptSubmit) on standard input, which is a terminal; it runs from a hook, or test it with `stop-gate < payload.json`; see --help",
        );
        return ExitCode::from(2);
    }
    let config = config.map(|c| c.unwrap_or_default());
    let feedback = config.as_ref().map(|c| c.feedback).unwrap_or_default();
    let deadline = config
        .as_ref()
        .map_or(gate::DEFAULT_DEADLINE, |c| c.deadline);
    let watchdog = gate::Watchdog::start(deadline);
    // Stdin is known not to be a terminal (checked above): read it as it is.
    let raw = read_capped(
        std::io::stdin().lock(),
        MAX_HOOK_INPUT,
        "hook input",
        "-".as_ref(),
    );
    let input = raw
        .as_ref()
        .map_err(|e| Error::Input(e.to_string()))
        .and_then(|bytes| HookInput::parse(bytes));
    // The event, read once: from the input as parsed, else from input vigil could not read
    // as its fields but that is a JSON object naming one.
    let event = match (&input, &raw) {
        (Ok(input), _) => input.hook_event_name.clone(),
        (Err(_), Ok(bytes)) => hook::event_name(bytes),
        (Err(_), Err(_)) => None,
    };
    // PreToolUse (under --protect): the file tools write only within the agent's reach. Input
    // it cannot read denies the write, as a gate does.
    if event.as_deref() == Some("PreToolUse") {
        watchdog.answer(pre_tool_use(&config, &input));
        return ExitCode::SUCCESS;
    }
    // ConfigChange (under --protect): a settings change that takes the protection away does
    // not reach the running session. Input it cannot read blocks the change.
    if let (Some("ConfigChange"), Ok(bytes)) = (event.as_deref(), &raw) {
        watchdog.answer(config_change(bytes));
        return ExitCode::SUCCESS;
    }
    // A prompt hook that cannot read its input lets the prompt through: only a prompt that is
    // plainly a vigil command is ever held up.
    if let (Err(e), Some("UserPromptSubmit")) = (&input, event.as_deref()) {
        watchdog.answer(None);
        diagnostic(
            NAME,
            &format!("{e}; the prompt goes on, and no loop was started or cancelled"),
        );
        return ExitCode::SUCCESS;
    }
    if let Ok(prompt) = &input
        && prompt.event() == Some(HookEvent::UserPromptSubmit)
    {
        watchdog.answer(prompt_hook(&config, prompt).to_json());
        return ExitCode::SUCCESS;
    }
    let subagent = input
        .as_ref()
        .is_ok_and(|i| i.event() == Some(HookEvent::SubagentStop));
    watchdog.answer(gate::decide(config, input).to_json_as(feedback, subagent));
    // A hook exits 0 whatever it decided: the decision is in the JSON.
    ExitCode::SUCCESS
}

/// `VIGIL_DISABLE=1` (SPEC §2): the hook allows at once, writes nothing, and says so in one
/// `systemMessage`; a Stop whose session has a loop running says that loop is NOT verified. A
/// prompt that is not a vigil command passes silently, as always. Run by hand, nothing.
fn disabled(config: Result<Option<GateConfig>>) -> ExitCode {
    if files::stdin_is_terminal() {
        return ExitCode::SUCCESS;
    }
    let input = read_capped(
        std::io::stdin().lock(),
        MAX_HOOK_INPUT,
        "hook input",
        "-".as_ref(),
    )
    .ok()
    .and_then(|bytes| HookInput::parse(&bytes).ok());
    let mut message = "vigil is disabled by VIGIL_DISABLE".to_string();
    match input.as_ref().and_then(HookInput::event) {
        Some(HookEvent::UserPromptSubmit) => {
            let prompt = input.as_ref().and_then(|i| i.prompt.as_deref());
            if slash::command_of(prompt.unwrap_or("")) == Command::None {
                return ExitCode::SUCCESS;
            }
            message.push_str(": no loop was started or cancelled");
        }
        Some(HookEvent::Stop) => {
            let input = input.as_ref().expect("an event was read");
            let state_dir = config.ok().flatten().and_then(|c| c.state_dir);
            let project =
                Project::resolve(state_dir.as_deref(), input.cwd.as_deref()).for_reading();
            let running = input
                .session_id
                .as_deref()
                .and_then(|id| SessionId::parse(id).ok())
                .and_then(|session| loops::load(&project, &session).ok().flatten())
                .filter(|state| state.status.is_live());
            if let Some(state) = running {
                message.push_str(&format!(
                    ": this stop was let through unchecked, and the loop of this session ({}) is NOT verified",
                    state.summary()
                ));
            }
        }
        _ => {}
    }
    let _ = stdout(format!("{}\n", serde_json::json!({ "systemMessage": message })).as_bytes());
    ExitCode::SUCCESS
}

/// PreToolUse: a file tool's write within the agent's reach passes silently; any other is
/// denied with its one useful line.
fn pre_tool_use(config: &Result<GateConfig>, input: &Result<HookInput>) -> Option<String> {
    let verdict = match (config, input) {
        (Err(e), _) => Err(format!(
            "vigil: config error: {e}; fix the stop-gate command of the PreToolUse hook"
        )),
        (_, Err(e)) => Err(format!("vigil: {e}; the write is denied")),
        (Ok(_), Ok(input)) => {
            // The project as Claude Code's sandbox has it: the directory it runs in.
            let start = Project::start_dir(input.cwd.as_deref());
            let cwd = input.cwd.clone().unwrap_or_else(|| start.clone());
            guard::judge(
                input.tool_name.as_deref().unwrap_or(""),
                input.tool_input.as_ref(),
                &cwd,
                &start,
            )
        }
    };
    let reason = verdict.err()?;
    Some(
        serde_json::json!({"hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }})
        .to_string(),
    )
}

/// ConfigChange: a change that keeps vigil's protection loads silently; one that takes it away
/// is blocked with its one useful line, shown to the person as well.
fn config_change(bytes: &[u8]) -> Option<String> {
    let payload: serde_json::Value = serde_json::from_slice(bytes).unwrap_or_default();
    let text = |name: &str| payload.get(name).and_then(serde_json::Value::as_str);
    let project = Project::resolve(None, text("cwd").map(std::path::Path::new));
    let verdict = match text("source") {
        Some(source) => {
            let shown = text("file_path").map(std::path::Path::new);
            live::judge(source, shown, &project.dir)
        }
        None => Err("vigil: the ConfigChange input names no source; the change is blocked".into()),
    };
    let reason = verdict.err()?;
    // Kept for the next Stop and for `loop run`: under `claude -p` this message is shown nowhere.
    if let Some(session) = text("session_id").and_then(|id| SessionId::parse(id).ok()) {
        let _ = session::note_blocked_change(&project, &session, &reason);
    }
    // The person sees it too: a change they made on disk does not reach this session.
    Some(
        serde_json::json!({"decision": "block", "reason": reason, "systemMessage": reason})
            .to_string(),
    )
}

/// UserPromptSubmit: the human's `/vigil-loop` or `/vigil-cancel`; and for any prompt, a turn
/// of the session's loop that the engine ended over the gate's block since the loop last moved
/// (read from the transcript's tail) is recorded and told.
fn prompt_hook(config: &Result<GateConfig>, input: &HookInput) -> PromptOutput {
    let told = engine_cut(config, input);
    let output = prompt_command(config, input);
    match (output, told) {
        (PromptOutput::Nothing, Some(told)) => PromptOutput::Told(told),
        (PromptOutput::Done { context, message }, Some(told)) => PromptOutput::Done {
            context,
            message: format!("{message}\n{told}"),
        },
        // Recorded already: said with the refusal, or it would never be said.
        (PromptOutput::Refused(reason), Some(told)) => {
            PromptOutput::Refused(format!("{reason}\n{told}"))
        }
        (output, _) => output,
    }
}

/// What the engine's cut of this session's loop, if there was a new one, has the human hear.
fn engine_cut(config: &Result<GateConfig>, input: &HookInput) -> Option<String> {
    let config = config.as_ref().ok()?;
    let transcript = input.transcript_path.as_deref()?;
    let session = SessionId::parse(input.session_id.as_deref()?).ok()?;
    // Looked up as a reader: a running loop's place is there already, and none is made.
    let project = Project::resolve(config.state_dir.as_deref(), input.cwd.as_deref()).for_reading();
    let cut = match session::peek(&project, &session) {
        Ok(Some(record)) => match &record.ralph {
            Some(state) => loops::engine_cut_of(&project, &session, state, transcript),
            None => Ok(None),
        },
        // No record at all, but the transcript holds the loop's blocks: the witness.
        Ok(None) => Ok(loops::witness_unrecorded(&project, &session, transcript)),
        Err(_) => Ok(None),
    };
    cut.unwrap_or_else(|e| {
        Some(format!(
            "vigil: {e}; a cut of this session's loop by the engine could not be recorded"
        ))
    })
}

/// The human's `/vigil-loop` or `/vigil-cancel`, nothing else.
fn prompt_command(config: &Result<GateConfig>, input: &HookInput) -> PromptOutput {
    let command = slash::command_of(input.prompt.as_deref().unwrap_or(""));
    if command == Command::None {
        return PromptOutput::Nothing;
    }
    match config {
        Ok(config) => {
            let project = Project::resolve(config.state_dir.as_deref(), input.cwd.as_deref());
            slash::handle(&project, input)
        }
        Err(e) => PromptOutput::Refused(format!(
            "vigil: config error: {e}; fix the stop-gate command of the UserPromptSubmit hook"
        )),
    }
}

/// The hook's flags; `Ok(None)` for --help.
fn parse_gate(args: Vec<OsString>) -> Result<Option<GateConfig>> {
    GateConfig::parse(args)
}

fn loop_command(mut args: Vec<OsString>) -> Result<Exit> {
    if args.is_empty() {
        return Err(Error::usage(
            "`stop-gate loop` needs start, run, status or cancel; see `stop-gate loop --help`",
        ));
    }
    let action = args.remove(0);
    match action.to_str() {
        Some("start") => loop_start(args),
        Some("run") => loop_run(args),
        Some("status") => loop_status(args),
        Some("cancel") => loop_cancel(args),
        Some("-h" | "--help") => help(&loop_help()),
        _ => Err(Error::usage(format!(
            "unknown loop command {:?}; use start, run, status or cancel",
            action.to_string_lossy()
        ))),
    }
}

fn loop_start(args: Vec<OsString>) -> Result<Exit> {
    let mut args: Vec<String> = args
        .into_iter()
        .map(|a| {
            a.into_string()
                .map_err(|_| Error::usage("an argument is not valid UTF-8"))
        })
        .collect::<Result<_>>()?;
    // --args-stdin counts only among the leading flags: later it is text of the prompt.
    let leading = loops::leading_flags(&args);
    let request = if let Some(at) = args[..leading].iter().position(|a| a == "--args-stdin") {
        args.remove(at);
        // Flags on the command line (the slash command passes --session there, where the shell
        // can expand it) are defaults for what the raw text does not say.
        let words: Vec<Word> = args.iter().map(|a| Word::plain(a)).collect();
        let outer = loops::parse_start(&words, None)?;
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
        let mut request = loops::parse_start(&loops::split_words(raw), Some(raw))?;
        request.merge_defaults(outer);
        request
    } else {
        let words: Vec<Word> = args.iter().map(|a| Word::plain(a)).collect();
        loops::parse_start(&words, None)?
    };
    if request.help {
        return help(&loop_help());
    }
    start_from(request)
}

fn start_from(request: StartRequest) -> Result<Exit> {
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
    let started = loops::begin(&project, request, session, StartedBy::Terminal)?;
    print(format!("{}\n", started.told).as_bytes())
}

/// `--session`, else $VIGIL_SESSION_ID, else $CLAUDE_CODE_SESSION_ID; an empty value is none.
fn session_of(flag: Option<String>) -> Result<SessionId> {
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
fn named_session(flag: Option<String>) -> Option<String> {
    let from_env = |name| std::env::var(name).ok().filter(|v: &String| !v.is_empty());
    flag.filter(|s| !s.is_empty())
        .or_else(|| from_env("VIGIL_SESSION_ID"))
        .or_else(|| from_env("CLAUDE_CODE_SESSION_ID"))
}

fn any_session_of(flag: Option<String>) -> Result<SessionId> {
    let raw = named_session(flag).ok_or_else(|| {
            Error::usage(
                "no session id: pass --session ID (or run inside Claude Code, which sets it), or --next-session for the next session to start here (claude -p, codex exec); a loop never starts without knowing its session, so it cannot leak into another",
            )
        })?;
    SessionId::parse(&raw).map_err(|e| Error::Usage(e.to_string()))
}

/// The flags of `loop status` and `loop cancel`.
struct SessionFlags {
    project: Project,
    /// `None`: no session was named, and none is in the environment.
    session: Option<SessionId>,
    json: bool,
    prompt: bool,
}

fn session_flags(args: Vec<OsString>, status: bool) -> Result<Option<SessionFlags>> {
    let mut session = None;
    let mut state_dir = None;
    let mut json = false;
    let mut prompt = false;
    let mut parser = lexopt::Parser::from_args(args);
    while let Some(arg) = parser.next()? {
        match arg {
            Long("session") => session = Some(string_value(&mut parser, "--session")?),
            Long("state-dir") => state_dir = Some(PathBuf::from(parser.value()?)),
            Long("json") if status => json = true,
            Long("prompt") if status => prompt = true,
            Short('h') | Long("help") => return Ok(None),
            _ => return Err(arg.unexpected().into()),
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

fn loop_status(args: Vec<OsString>) -> Result<Exit> {
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
fn project_status(project: &Project, json: bool) -> Result<Exit> {
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

fn loop_cancel(args: Vec<OsString>) -> Result<Exit> {
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
fn cancel_session(project: &Project, session: &SessionId) -> Result<Option<String>> {
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
fn cancel_in_project(project: &Project) -> Result<Exit> {
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

/// What `loop run`'s loop feeds back when it was given no prompt: the session already holds
/// the task COMMAND gave it.
const RUN_PROMPT: &str = "Go on with the task you were given: it is not finished yet.";

/// `loop run [loop flags] -- COMMAND…`: a loop for the session COMMAND starts, its verdict as
/// the exit code (SPEC §4).
fn loop_run(mut args: Vec<OsString>) -> Result<Exit> {
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
    let words: Vec<Word> = flags.iter().map(|a| Word::plain(a)).collect();
    let mut request = loops::parse_start(&words, None)?;
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

/// Hooks besides vigil's that may block a Stop of the session COMMAND starts, each with where
/// it is: Stop hooks in the settings Claude Code merges for the project, hooks in agents',
/// commands' and skills' frontmatter and in plugins (what the doctor finds), and settings or
/// plugins the command line adds. With the block cap lifted, nothing would end a turn one of
/// them keeps blocking.
fn other_hooks(project: &Project, command: &[OsString]) -> Vec<(PathBuf, String)> {
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
fn is_own(state: &loop_state::LoopState, pending: &loops::Pending) -> bool {
    pending.run_id().is_some() && state.run_id.as_deref() == pending.run_id()
}

/// How `loop run`'s loop ended, as its exit code and the one line on stderr.
fn run_verdict(
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
    let (exit, line) = verdict_of(&state, pending, &session, failed, lifted, others, &status);
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

/// The exit code and line for the loop `loop run` found at its end.
fn verdict_of(
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
