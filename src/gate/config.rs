//! `stop-gate`'s command line (SPEC §4, §9): every flag, parsed and checked here, so that the
//! doctor (`settings-merge check`) reads a handler's flags exactly as the hook will.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use crate::cli::defs;
use crate::cli::defs::Scope;
use crate::error::{Error, Result};
use crate::evidence::payload;
use crate::evidence::payload::CheckName;
use crate::evidence::subject;
use crate::evidence::subject::worktree::DEFAULT_MAX_FILE_SIZE;
use crate::gate::budget;
use crate::gate::contract::DEFAULT_MAX_TOKENS;
use crate::gate::contract::Source;
use crate::state::loop_state::Limits;
use crate::sys::time::Deadline;
use crate::verdict::defang;

/// `--deadline` by default: under both engines' default hook timeout of 600 s, with room.
pub(crate) const DEFAULT_DEADLINE: Duration = Duration::from_secs(570);
/// What the gate keeps of its deadline after the check command, for the markers and its state.
pub(crate) const RESERVE: Duration = Duration::from_secs(15);

/// How stop-gate was configured on its command line.
#[derive(Clone, Debug)]
pub(crate) struct GateConfig {
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
pub(crate) struct RequiredMarker {
    pub check: CheckName,
    pub command: Option<String>,
}

impl GateConfig {
    /// The checks a declaration must pass, as a person names them: `` `make test` ``,
    /// `marker tests`.
    pub(crate) fn check_names(&self) -> Vec<String> {
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
    pub(crate) fn parse(text: &str) -> Result<RequiredMarker> {
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
pub(crate) enum Feedback {
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
    pub(crate) fn parse(args: Vec<OsString>) -> Result<Option<GateConfig>> {
        let mut config = GateConfig::default();
        let mut timeout = None;
        // Only what the table defines for the hook is a flag of the hook, and its value is
        // checked by the rule the table gives it.
        let mut args = defs::Args::new(args, Scope::Hook);
        while let Some(given) = args.next()? {
            let Some((flag, value)) = given.flag_only()? else {
                return Ok(None);
            };
            let text = || flag.text(value.clone());
            match flag.name {
                "--run" => config.run = Some(flag.command(&text()?)?),
                "--timeout" => timeout = Some(Duration::from_secs(flag.number(&text()?)?)),
                "--deadline" => config.deadline = Duration::from_secs(flag.number(&text()?)?),
                "--require-marker" => config.markers.push(RequiredMarker::parse(&text()?)?),
                "--marker-max-age" => config.marker_max_age = flag.duration(&text()?)?,
                "--max-file-size" => config.max_file_size = flag.size(&text()?)?,
                "--max-blocks" => config.max_blocks = flag.number(&text()?)? as u32,
                "--subagents" => config.subagents = true,
                "--check-network" => config.check_network = true,
                "--check-write" => config.check_write.push(flag.absolute(value)?),
                "--stall-after" => {
                    config.loop_limits.stall_after = Some(flag.number(&text()?)? as u32)
                }
                "--max-duration" => {
                    config.loop_limits.max_duration_secs = Some(flag.duration(&text()?)?.as_secs())
                }
                "--max-tokens" => config.loop_limits.max_tokens = Some(flag.tokens(&text()?)?),
                "--contract" => config.contract = Some(Source::parse(&text()?)?),
                "--contract-max-tokens" => {
                    config.contract_max_tokens = flag.number(&text()?)? as u32
                }
                "--feedback" => {
                    config.feedback = match flag.choice(&text()?)? {
                        "context" => Feedback::Context,
                        _ => Feedback::Block,
                    }
                }
                "--desktop-notification" => {
                    config.desktop_notification = flag.choice(&text()?)? == "on"
                }
                "--state-dir" => config.state_dir = Some(PathBuf::from(value)),
                "--project-config" => config.project_config = true,
                "--verify-key" => config.verify_key = Some(PathBuf::from(value)),
                // Handled (and taken out) before the flags are parsed: a handler that carries
                // it is refused, since it makes the gate exit 0 on every stop.
                "--check-config" => {
                    return Err(lexopt::Error::UnexpectedOption(flag.name.into()).into());
                }
                _ => return Err(flag.unread()),
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
    pub(crate) fn limits(&self, deadline: Deadline) -> subject::Limits {
        subject::Limits {
            max_file_size: self.max_file_size,
            deadline,
        }
    }
}
