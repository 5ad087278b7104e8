//! `stop-gate`'s command line (SPEC §4, §9): every flag, parsed and checked here, so that the
//! doctor (`settings-merge check`) reads a handler's flags exactly as the hook will.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use lexopt::prelude::*;

use crate::cli::defs;
use crate::cli::defs::Scope;
use crate::cli::flags;
use crate::cli::flags::{number, string_value};
use crate::error::{Error, Result};
use crate::evidence::payload;
use crate::evidence::payload::CheckName;
use crate::evidence::subject;
use crate::evidence::subject::worktree::DEFAULT_MAX_FILE_SIZE;
use crate::gate::budget;
use crate::gate::contract::DEFAULT_MAX_TOKENS;
use crate::gate::contract::Source;
use crate::state::loop_state::Limits;
use crate::state::loops;
use crate::sys::time;
use crate::sys::time::Deadline;
use crate::verdict::defang;

/// `--deadline` by default: under both engines' default hook timeout of 600 s, with room.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(570);
/// What the gate keeps of its deadline after the check command, for the markers and its state.
pub const RESERVE: Duration = Duration::from_secs(15);

/// How stop-gate was configured on its command line.
#[derive(Clone, Debug)]
pub struct GateConfig {
    pub run: Option<String>,
    pub timeout: Duration,
    pub markers: Vec<RequiredMarker>,
    pub marker_max_age: Duration,
    pub max_blocks: u32,
    pub subagents: bool,
    pub state_dir: Option<PathBuf>,
    pub feedback: Feedback,
    /// `--verify-key`: the public key markers must be signed with.
    pub verify_key: Option<PathBuf>,
    /// `--deadline`: all of the gate's work is done by then, or it denies.
    pub deadline: Duration,
    /// `--max-file-size`: a larger file in the worktree denies at once.
    pub max_file_size: u64,
    /// `--stall-after`, `--max-duration`, `--max-tokens`: a loop's limits where `loop start`
    /// left them out.
    pub loop_limits: Limits,
    /// `--contract`: the shape a subagent's report must have (it gates SubagentStop).
    pub contract: Option<Source>,
    /// `--contract-max-tokens`.
    pub contract_max_tokens: u32,
    /// `--check-network`: the confined check may use the network.
    pub check_network: bool,
    /// `--check-write DIR`: more directories the confined check may write (caches).
    pub check_write: Vec<PathBuf>,
    /// `--project-config`: the flags are the project's own (`stop-gate config set`), read once
    /// the hook's input names the project.
    pub project_config: bool,
    /// `--desktop-notification on|off`: a loop that ends at a Stop notifies the person through
    /// Claude Code's `terminalSequence` (default on).
    pub desktop_notification: bool,
}

impl Default for GateConfig {
    fn default() -> GateConfig {
        GateConfig {
            run: None,
            timeout: DEFAULT_DEADLINE - RESERVE,
            markers: Vec::new(),
            marker_max_age: payload::DEFAULT_MAX_AGE,
            max_blocks: budget::DEFAULT_MAX_BLOCKS,
            subagents: false,
            state_dir: None,
            feedback: Feedback::Block,
            verify_key: None,
            deadline: DEFAULT_DEADLINE,
            max_file_size: DEFAULT_MAX_FILE_SIZE,
            loop_limits: Limits::default(),
            desktop_notification: true,
            contract: None,
            contract_max_tokens: DEFAULT_MAX_TOKENS,
            check_network: false,
            check_write: Vec::new(),
            project_config: false,
        }
    }
}

/// `--require-marker CHECK[=COMMAND]`: the marker a stop needs, and the command the protected
/// writer runs to produce it (named in the block, so the human knows what to run). The command
/// comes from the configuration, never from a payload: those the agent can write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequiredMarker {
    pub check: CheckName,
    pub command: Option<String>,
}

impl GateConfig {
    /// The checks a declaration must pass, as a person names them: `` `make test` ``,
    /// `marker tests`.
    pub fn check_names(&self) -> Vec<String> {
        let run = self
            .run
            .iter()
            .map(|command| format!("`{}`", defang::field_max(command, 200)));
        let markers = self
            .markers
            .iter()
            .map(|marker| format!("marker {}", marker.check.as_str()));
        run.chain(markers).collect()
    }
}

impl RequiredMarker {
    pub fn parse(text: &str) -> Result<RequiredMarker> {
        let (check, command) = match text.split_once('=') {
            Some((check, command)) if !command.trim().is_empty() => {
                (check, Some(command.trim().to_string()))
            }
            Some((check, _)) => (check, None),
            None => (text, None),
        };
        Ok(RequiredMarker {
            check: CheckName::parse(check)?,
            command,
        })
    }
}

/// How a block reaches the model (`--feedback`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Feedback {
    /// `decision: block` with the reason: both engines take it (Claude Code shows it to the
    /// model as "Stop hook blocking error").
    #[default]
    Block,
    /// `hookSpecificOutput.additionalContext` on Stop: Claude Code goes on with the reason as
    /// "Stop hook additional context", feedback rather than an error. SubagentStop, and any
    /// engine that does not take it, still get a block.
    Context,
}

impl GateConfig {
    /// The hook's flags; `Ok(None)` for --help. The check's timeout defaults to what the
    /// deadline leaves after the reserve, and one that leaves less is a config error.
    pub fn parse(args: Vec<OsString>) -> Result<Option<GateConfig>> {
        let mut config = GateConfig::default();
        let mut timeout = None;
        let mut parser = lexopt::Parser::from_args(args);
        while let Some(arg) = parser.next()? {
            // Only what the table defines for the hook is a flag of the hook.
            if let Long(name) = arg
                && name != "help"
                && defs::find_long(Scope::Hook, name).is_none()
            {
                return Err(arg.unexpected().into());
            }
            match arg {
                Long("run") => {
                    let command = string_value(&mut parser, "--run")?;
                    if command.trim().is_empty() {
                        return Err(Error::usage("--run needs a command"));
                    }
                    config.run = Some(command);
                }
                Long("timeout") => {
                    timeout = Some(Duration::from_secs(number(
                        &mut parser,
                        "--timeout",
                        1,
                        86_400,
                    )?))
                }
                Long("deadline") => {
                    config.deadline =
                        Duration::from_secs(number(&mut parser, "--deadline", 20, 86_400)?)
                }
                Long("require-marker") => config.markers.push(RequiredMarker::parse(
                    &string_value(&mut parser, "--require-marker")?,
                )?),
                Long("marker-max-age") => {
                    config.marker_max_age =
                        time::parse_duration(&string_value(&mut parser, "--marker-max-age")?)?
                }
                Long("max-file-size") => {
                    config.max_file_size =
                        flags::size(&string_value(&mut parser, "--max-file-size")?)?
                }
                Long("max-blocks") => {
                    config.max_blocks = number(&mut parser, "--max-blocks", 0, 1000)? as u32
                }
                Long("subagents") => config.subagents = true,
                Long("check-network") => config.check_network = true,
                Long("check-write") => config
                    .check_write
                    .push(flags::absolute_dir(&mut parser, "--check-write")?),
                Long("stall-after") => {
                    config.loop_limits.stall_after = Some(loops::parse_stall_after(&string_value(
                        &mut parser,
                        "--stall-after",
                    )?)?)
                }
                Long("max-duration") => {
                    config.loop_limits.max_duration_secs = Some(
                        loops::parse_max_duration(&string_value(&mut parser, "--max-duration")?)?
                            .as_secs(),
                    )
                }
                Long("max-tokens") => {
                    config.loop_limits.max_tokens = Some(loops::parse_max_tokens(&string_value(
                        &mut parser,
                        "--max-tokens",
                    )?)?)
                }
                Long("contract") => {
                    config.contract =
                        Some(Source::parse(&string_value(&mut parser, "--contract")?)?)
                }
                Long("contract-max-tokens") => {
                    config.contract_max_tokens =
                        number(&mut parser, "--contract-max-tokens", 1, 1_000_000)? as u32
                }
                Long("feedback") => {
                    config.feedback = match string_value(&mut parser, "--feedback")?.as_str() {
                        "block" => Feedback::Block,
                        "context" => Feedback::Context,
                        other => {
                            return Err(Error::usage(format!(
                                "--feedback is block or context, not {other:?}"
                            )));
                        }
                    }
                }
                Long("desktop-notification") => {
                    config.desktop_notification =
                        match string_value(&mut parser, "--desktop-notification")?.as_str() {
                            "on" => true,
                            "off" => false,
                            other => {
                                return Err(Error::usage(format!(
                                    "--desktop-notification is on or off, not {other:?}"
                                )));
                            }
                        }
                }
                Long("state-dir") => config.state_dir = Some(PathBuf::from(parser.value()?)),
                Long("project-config") => config.project_config = true,
                Long("verify-key") => config.verify_key = Some(PathBuf::from(parser.value()?)),
                Short('h') | Long("help") => return Ok(None),
                _ => return Err(arg.unexpected().into()),
            }
        }
        let room = config.deadline - RESERVE;
        config.timeout = match timeout {
            None => room,
            Some(timeout) if timeout <= room => timeout,
            Some(timeout) => {
                return Err(Error::usage(format!(
                    "--timeout {} leaves less than the {} s reserve under --deadline {}; use --timeout {} or less, or a later --deadline",
                    timeout.as_secs(),
                    RESERVE.as_secs(),
                    config.deadline.as_secs(),
                    room.as_secs()
                )));
            }
        };
        Ok(Some(config))
    }

    /// What bounds hashing the worktree for the markers: the gate's deadline.
    pub fn limits(&self, deadline: Deadline) -> subject::Limits {
        subject::Limits {
            max_file_size: self.max_file_size,
            deadline,
        }
    }
}
