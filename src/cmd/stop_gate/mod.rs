//! stop-gate: the Stop hook (SPEC §4), and `stop-gate loop` to start, inspect and cancel a
//! Ralph loop.

mod config_cmd;
mod confine_cmd;
mod hold_cmd;
mod loop_cmd;
mod loop_run;
mod wait_cmd;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::cli::defs;
use crate::cli::defs::{Given, Scope};
use crate::cli::flags;
use crate::cli::flags::{help, print};
use crate::cli::hook::{Hook, HookEvent, HookInput, Specific, Wire};
use crate::cli::loop_args::{self, StartRequest, Word};
use crate::cli::output::{diagnostic, stdout};
use crate::exit::Code as ExitCode;
use crate::gate::project_config;
use crate::gate::slash;
use crate::gate::slash::Command;
use crate::gate::{self, GateConfig};
use crate::install::planted;
use crate::install::planted::What;
use crate::install::settings;
use crate::install::settings::live;
use crate::reach::guard;
use crate::reach::sandbox;
use crate::state::loop_state;
use crate::state::loop_state::StartedBy;
use crate::state::loops;
use crate::state::project::{Project, SessionId};
use crate::state::protected;
use crate::state::session;
use crate::state::wakes;
use crate::sys::files;
use crate::sys::files::read_capped;
use crate::sys::process;
use crate::{Error, Exit, Result};

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
            [--contract FILE|default] [--contract-max-tokens N]
            [--desktop-notification on|off]                                   < hook JSON
  stop-gate --project-config [--state-dir DIR]                          < hook JSON
  stop-gate config set FLAG... | show | unset    the project's flags for --project-config
  stop-gate loop start --max-iterations N --completion-promise P [--session ID | --next-session]
                       [--name NAME] [--notify SESSION]
                       [--stall-after K] [--max-duration D] [--max-tokens N]
                       [--claim-within DURATION] [--prompt-file F | PROMPT...]
  stop-gate loop run --max-iterations N --completion-promise P [loop start's limits]
                     [--prompt-file F | PROMPT...] -- COMMAND [ARG...]
  stop-gate loop status [--session ID] [--json | --prompt]
  stop-gate loop cancel [--session ID]
  stop-gate loop list [--json]
  stop-gate hold add [--at REV] PATH|GLOB... | show | diff | refresh | release | cat
                                                  hold the tests that judge the work
  stop-gate wait {wait}  < Stop hook JSON (asyncRewake: the waiter)
  stop-gate confine [--network] [--write DIR]... -- COMMAND [ARG...]
                                                  one of your own hooks, run confined as a check is

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
                       [--name NAME] [--notify SESSION]
                       [--claim-within DURATION] [--state-dir DIR] [--prompt-file F | PROMPT...]
  stop-gate loop start --args-stdin          < the same arguments as raw text
  stop-gate loop run --max-iterations N --completion-promise P [--stall-after K]
                     [--max-duration D] [--max-tokens N] [--claim-within DURATION]
                     [--name NAME] [--notify SESSION] [--worktree NAME]
                     [--state-dir DIR] [--prompt-file F | PROMPT...] -- COMMAND [ARG...]
  stop-gate loop status [--session ID] [--json | --prompt] [--state-dir DIR]
  stop-gate loop list [--json]
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
then `--` and the command. --worktree NAME runs it in the linked worktree
../<checkout>-NAME of this repository, which you added (`git worktree add`: vigil runs no
git hook of the agent's); the loop's name defaults to NAME. Run several at once, one per
worktree. It starts a loop for the session COMMAND starts (claimed by session-start-loader
through $VIGIL_LOOP_RUN, which only COMMAND's environment holds), runs COMMAND with its own
terminal, and prints one line on stderr: how the loop ended, its passes, and what to do.
Without a prompt, the loop feeds back \"Go on with the task you were given\".
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
list: every loop that reports to this project's main checkout, across its worktrees (name,
  worktree, status, pass, age, end), then the wakes waiting and which session waits for them.
  --json                   the same as a JSON array
When a loop settles (every end), its wake goes to the queue of the project's main checkout (or
of the session --notify names), and a session waiting there hears one line: `stop-gate wait`,
Claude Code's Stop hook with asyncRewake; else the next session start or prompt is told.
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
        "{}{}{}{HELP_TAIL}",
        HELP_HEAD.replace("{wait}", &defs::synopsis(Scope::Wait)),
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

/// The binary's work, from its command line to its exit code.
pub fn main() -> ExitCode {
    if flags::start(NAME) {
        return ExitCode::SUCCESS;
    }
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    if let Some(code) = subcommand(&args) {
        return code;
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
    // Read once; stdin is known not to be a terminal (checked above).
    let Hook { event, input } = Hook::read_stdin();
    // Each event to the layer that owns its decision; every other (Stop, SubagentStop, or an
    // event this hook was not wired for) is decided as a Stop, which input it cannot read
    // denies.
    match event {
        // Under --protect: the file tools write only within the agent's reach.
        Some(HookEvent::PreToolUse) => {
            let reason = guard::hook(config.as_ref().map(drop), &input);
            let specific = reason.as_deref().map(|reason| Specific {
                hook_event_name: "PreToolUse",
                permission_decision: Some("deny"),
                permission_decision_reason: Some(reason),
                ..Specific::default()
            });
            watchdog.answer(
                Wire {
                    hook_specific_output: specific,
                    ..Wire::default()
                }
                .line(),
            );
        }
        // Under --protect: a write that left the reach after the guard let it through is told,
        // to the model (the block's reason, after the fact) and to the person.
        Some(HookEvent::PostToolUse) => {
            watchdog.answer(blocked_and_told(guard::landed(&input).as_deref()));
        }
        // Under --protect: a settings change that takes the protection away does not reach
        // the running session. The person sees it too: a change made on disk does not reach
        // this session.
        Some(HookEvent::ConfigChange) => {
            watchdog.answer(blocked_and_told(live::hook(&input).as_deref()));
        }
        Some(HookEvent::UserPromptSubmit) => {
            let state_dir = config.as_ref().map(|c| c.state_dir.as_deref());
            let prompted = slash::hook(state_dir, &input);
            if watchdog.answer(prompted.output.to_json()) {
                prompted.woken.into_iter().for_each(wakes::Claimed::done);
            } else {
                prompted
                    .woken
                    .into_iter()
                    .for_each(wakes::Claimed::put_back);
            }
            if let Some(line) = prompted.said {
                diagnostic(NAME, &line);
            }
        }
        event => {
            let subagent = event == Some(HookEvent::SubagentStop) && input.is_ok();
            let answer = stop(config, input, feedback, subagent);
            // An answer that cannot be written (a full disk behind stdout) is no answer: the
            // engine would read an empty output as "let it through". Exit 2 blocks, with the
            // reason on stderr, where the engine reads it (issue 44).
            if !watchdog.answer(answer.clone()) {
                let reason = answer
                    .as_deref()
                    .and_then(|json| serde_json::from_str::<serde_json::Value>(json).ok())
                    .and_then(|json| json.get("reason")?.as_str().map(str::to_string));
                diagnostic(
                    NAME,
                    &format!(
                        "cannot write the Stop's answer to standard output, so the stop is blocked{}",
                        reason.map_or_else(String::new, |r| format!(": {r}"))
                    ),
                );
                return ExitCode::from(2);
            }
        }
    }
    // A hook exits 0 whatever it decided: the decision is in the JSON.
    ExitCode::SUCCESS
}

/// A block whose reason the person is shown too (`systemMessage`); nothing when there is
/// nothing to tell.
fn blocked_and_told(reason: Option<&str>) -> Option<String> {
    Wire {
        decision: reason.map(|_| "block"),
        reason,
        system_message: reason,
        ..Wire::default()
    }
    .line()
}

/// `config`, `hold`, `wait`, `confine` and `loop`, each to its module, with its exit code; `None` when
/// the arguments name none of them (the hook).
fn subcommand(args: &[OsString]) -> Option<ExitCode> {
    let first = args.first()?;
    let rest = || args[1..].to_vec();
    Some(if first == "config" {
        told(config_cmd::config_command(rest()))
    } else if first == "hold" {
        told(hold_cmd::hold_command(rest()))
    } else if first == "wait" {
        wait_cmd::main(rest())
    } else if first == "confine" {
        confine_cmd::main(rest())
    } else if first == "loop" {
        told(loop_cmd::loop_command(rest()))
    } else {
        return None;
    })
}

/// A command's exit code; an error is said on stderr, in one line.
fn told(done: Result<Exit>) -> ExitCode {
    match done {
        Ok(exit) => exit.into(),
        Err(err) => {
            diagnostic(NAME, &err.to_string());
            err.exit().into()
        }
    }
}

/// The Stop (or SubagentStop) hook's answer: the gate's decision as the engine reads it.
fn stop(
    config: Result<GateConfig>,
    input: Result<HookInput>,
    feedback: gate::Feedback,
    subagent: bool,
) -> Option<String> {
    // The plugin's Stop hook: the project's own flags, now that the input names the project.
    let config = match (config, &input) {
        (Ok(hook), Ok(input)) if hook.project_config => {
            let project = Project::resolve(hook.state_dir.as_deref(), input.cwd.as_deref());
            let start = Project::start_dir(input.cwd.as_deref());
            project_flags(&project, &start, hook)
        }
        (config, _) => config,
    };
    let feedback = config.as_ref().map_or(feedback, |c| c.feedback);
    // Claude Code's (Codex's input has a turn_id, and its Stop output no such field).
    let notify = config.as_ref().is_ok_and(|c| c.desktop_notification)
        && input.as_ref().is_ok_and(|i| i.turn_id.is_none());
    // A file one of the user's own hooks runs that changed since `install --protect`, and a
    // `.claude/` or repository below the top that appeared or changed: the person hears it at
    // every Stop until they look (issue 43 items 1 and 2).
    // Looked for beside the decision, on a thread of its own, and waited for at most
    // `PLANTED_LOOK`: the agent's shell can make a tree that takes long to walk, and a Stop
    // that said nothing of it is still named at the next start and by the doctor.
    let looking = match (&config, &input) {
        (Ok(config), Ok(input)) if !subagent => {
            let dir = Project::resolve(config.state_dir.as_deref(), input.cwd.as_deref()).dir;
            let (sender, looked) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let _ = sender.send(planted::at_stop(&dir));
            });
            Some(looked)
        }
        _ => None,
    };
    let look_by = crate::sys::time::Deadline::after(PLANTED_LOOK);
    let decision = gate::decide(config, input);
    let changed = looking
        .and_then(|looked| looked.recv_timeout(look_by.remaining()).ok())
        .unwrap_or_default();
    let sequence = match decision.settled {
        Some(line) if notify => Some(gate::desktop_notification(&line)),
        _ => None,
    };
    let wire = decision.output.wire(feedback, subagent);
    let message = (!changed.is_empty()).then(|| {
        wire.system_message
            .into_iter()
            .map(str::to_string)
            .chain(changed)
            .collect::<Vec<_>>()
            .join("\n")
    });
    Wire {
        terminal_sequence: sequence.as_deref(),
        system_message: message.as_deref().or(wire.system_message),
        ..wire
    }
    .line()
}

/// The longest a Stop waits for its look at what was planted below the top (issue 43).
const PLANTED_LOOK: std::time::Duration = std::time::Duration::from_millis(500);

/// `VIGIL_DISABLE=1` (SPEC §2): the hook allows at once, writes nothing, and says so in one
/// `systemMessage`; a Stop whose session has a loop running says that loop is NOT verified. A
/// prompt that is not a vigil command passes silently, as always. Run by hand, nothing.
fn disabled(config: Result<Option<GateConfig>>) -> ExitCode {
    if files::stdin_is_terminal() {
        return ExitCode::SUCCESS;
    }
    let Hook { event, input } = Hook::read_stdin();
    let input = input.ok();
    let mut message = "vigil is disabled by VIGIL_DISABLE".to_string();
    match input.as_ref().and(event) {
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
    let answer = Wire {
        system_message: Some(&message),
        ..Wire::default()
    };
    let _ = stdout(format!("{}\n", answer.line().unwrap_or_default()).as_bytes());
    ExitCode::SUCCESS
}

/// The gate's flags for the plugin's Stop hook (`--project-config`): the project's own, as
/// `stop-gate config set` wrote them, with the hook's deadline and state directory; the hook's
/// (none: a loop's declaration alone) when none are set. A configuration that cannot be read
/// is a config error, and the gate denies.
fn project_flags(project: &Project, start: &Path, hook: GateConfig) -> Result<GateConfig> {
    let Some(args) = project_config::load(project, start)? else {
        return Ok(hook);
    };
    let mut config = project_config::check(&args)?;
    config.state_dir = hook.state_dir;
    // The handler's deadline is the hook's (under its timeout): the check gets what it leaves.
    config.deadline = hook.deadline;
    config.timeout = config
        .timeout
        .min(hook.deadline.saturating_sub(gate::RESERVE));
    config.project_config = true;
    Ok(config)
}

/// The hook's flags; `Ok(None)` for --help.
fn parse_gate(args: Vec<OsString>) -> Result<Option<GateConfig>> {
    GateConfig::parse(args)
}
