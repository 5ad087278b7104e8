//! `stop-gate config`: the project's own gate flags, for the plugin's Stop hook
//! (`--project-config`), kept in the project's protected state (`gate::project_config`).

use std::ffi::OsString;

use crate::cli::flags::{self, print};
use crate::gate::project_config;
use crate::state::project::Project;
use crate::verdict::defang;
use crate::{Error, Exit, Result};

pub(super) const HELP: &str = "\
stop-gate config: the gate's flags for this project, for the vigil plugin's Stop hook.

Usage:
  stop-gate config set FLAG...   e.g. stop-gate config set --run 'cargo test' --max-blocks 20
  stop-gate config show
  stop-gate config unset

The plugin's Stop hook (stop-gate --project-config) reads them: the check command (--run),
the markers a stop needs (--require-marker), the budget (--max-blocks, --stall-after,
--max-duration, --max-tokens) and the other flags of stop-gate's hook, except --deadline and
--state-dir. They are this project's (the git top level of the working directory), kept in
vigil's protected state, out of the agent's reach once Claude Code's sandbox is on. Without
them the plugin lets a stop through on a loop's declaration alone: nothing is checked.
set replaces what was set, checked as the gate will read it; unset takes it away.
";

pub(super) fn config_command(args: Vec<OsString>) -> Result<Exit> {
    let mut args: Vec<String> = args
        .into_iter()
        .map(|a| {
            a.into_string()
                .map_err(|_| Error::usage("a flag is not valid UTF-8"))
        })
        .collect::<Result<_>>()?;
    if args.is_empty() || matches!(args[0].as_str(), "-h" | "--help") {
        print(HELP.as_bytes())?;
        return Ok(Exit::Success);
    }
    let action = args.remove(0);
    let project = Project::resolve(None, None);
    let shown = project.dir.display().to_string();
    match action.as_str() {
        "set" => {
            if args.is_empty() {
                return Err(Error::usage(
                    "config set needs the gate's flags, e.g. --run 'cargo test'",
                ));
            }
            project_config::save(&project, &args)?;
            print(
                format!(
                    "stop-gate: the plugin's Stop hook in {shown} runs with {}\n",
                    words(&args)
                )
                .as_bytes(),
            )?;
        }
        "show" if args.is_empty() => {
            let start = Project::start_dir(None);
            let said = match project_config::load(&project, &start)? {
                Some(flags) => words(&flags),
                None => unset_line(&shown),
            };
            print(format!("{said}\n").as_bytes())?;
        }
        "unset" if args.is_empty() => {
            let said = if project_config::remove(&project)? {
                format!("stop-gate: {}", unset_line(&shown))
            } else {
                format!("stop-gate: nothing was set for {shown}")
            };
            print(format!("{said}\n").as_bytes())?;
        }
        "show" | "unset" => {
            return Err(Error::usage(format!("config {action} takes no arguments")));
        }
        other => {
            return Err(Error::usage(format!(
                "config {} is not set, show or unset; see stop-gate config --help",
                defang::field_max(other, 40)
            )));
        }
    }
    Ok(Exit::Success)
}

/// What the plugin gates on where nothing is set.
pub(super) fn unset_line(project: &str) -> String {
    format!(
        "no gate flags are set for {project}: the vigil plugin lets a stop through on a loop's declaration alone, nothing checked; set a check with stop-gate config set --run CMD"
    )
}

/// The flags as a shell would take them back.
fn words(args: &[String]) -> String {
    args.iter()
        .map(|a| flags::shell_quote(a))
        .collect::<Vec<_>>()
        .join(" ")
}
