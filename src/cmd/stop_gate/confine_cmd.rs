//! `stop-gate confine -- COMMAND…`: one of your own hooks, run confined as a check is (issue 43
//! item 2). A hook of yours that runs a file in the project (`scripts/format.sh`) or a program
//! found there (`npx prettier`, `uv run ruff`, `.venv/bin/black`) runs what the agent can
//! rewrite, with your rights, at every event. Wrapped in `stop-gate confine --`, it runs in the
//! check's reach: it writes the project (a formatter must) but not what the engine or git runs,
//! never sees the state home, your keys or the engines' homes, and has no network unless
//! `--network`. Its standard streams are the hook's own (the hook input on stdin, its answer on
//! stdout), and its exit code is the hook's. Where no confinement can be made, it does not run.

use std::ffi::OsString;
use std::path::PathBuf;

use crate::cli::output::diagnostic;
use crate::exit::Code as ExitCode;
use crate::gate::command;
use crate::reach::confine;
use crate::state::project::Project;

const NAME: &str = "stop-gate confine";

const HELP: &str = "\
Usage: stop-gate confine [--network] [--write DIR]... -- COMMAND [ARG]...

Runs COMMAND, one of your own hooks, confined as stop-gate's check is: it writes the project
(less .claude, .codex, .git, .mcp.json, .vscode, .idea at any depth, and what git runs from
the project), a private /tmp and each --write DIR; it never sees vigil's state home, the
signing key, your keys, ~/.claude or ~/.codex; no network unless --network. A hook of yours
that runs a file the agent can rewrite (scripts/format.sh, npx prettier, uv run ruff) then runs
it without your rights. `settings-merge check` names each such hook and proposes this form:

  \"command\": \"stop-gate confine -- npx prettier --write \\\"$CLAUDE_PROJECT_DIR\\\"/src\"

COMMAND gets the hook's stdin, stdout and stderr, and its exit code is the hook's (so exit 2
still blocks). The project is $CLAUDE_PROJECT_DIR, else the directory it runs in.

Options:
      --network      let COMMAND use the network (npx fetching a package)
      --write DIR    let COMMAND write DIR too (a cache); repeatable
  -h, --help         this text

Exit: COMMAND's own code. 1 (one line on stderr): COMMAND did not run, since no confinement
can be made here (bubblewrap missing, Windows), or it left behind a .claude, .codex, .mcp.json
or .git below the project's top, or the hooks directory git names, which the line names.
";

/// `stop-gate confine [flags] -- COMMAND…`, its exit code.
pub(super) fn main(args: Vec<OsString>) -> ExitCode {
    match run(args) {
        Ok(code) => code,
        Err(line) => {
            diagnostic(NAME, &line);
            ExitCode(1)
        }
    }
}

fn run(args: Vec<OsString>) -> Result<ExitCode, String> {
    let split = args.iter().position(|a| a == "--");
    let (flags, command) = match split {
        Some(at) => (&args[..at], &args[at + 1..]),
        None => (&args[..], &[][..]),
    };
    let mut network = false;
    let mut writable: Vec<PathBuf> = Vec::new();
    let mut flags = flags.iter();
    while let Some(flag) = flags.next() {
        match flag.to_str() {
            Some("-h" | "--help") => {
                let _ = crate::cli::output::stdout(HELP.as_bytes());
                return Ok(ExitCode(0));
            }
            Some("--network") => network = true,
            Some("--write") => {
                let dir = flags
                    .next()
                    .ok_or("--write needs a directory: `--write ~/.cache/prettier`")?;
                let dir = PathBuf::from(dir);
                if !dir.is_absolute() {
                    return Err(format!(
                        "--write {} is relative; give the directory's absolute path",
                        dir.display()
                    ));
                }
                writable.push(dir);
            }
            _ => {
                return Err(format!(
                    "unknown flag {}; the command goes after `--`: `stop-gate confine -- scripts/format.sh`",
                    flag.to_string_lossy()
                ));
            }
        }
    }
    let Some((program, rest)) = command.split_first() else {
        return Err(
            "no command: give it after `--`, e.g. `stop-gate confine -- scripts/format.sh`"
                .to_string(),
        );
    };
    let shown = program.to_string_lossy().into_owned();
    let here = std::env::current_dir().map_err(|e| format!("no current directory: {e}"))?;
    let top = std::env::var_os("CLAUDE_PROJECT_DIR")
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute() && dir.is_dir());
    let project = Project::resolve(None, Some(top.as_deref().unwrap_or(&here)));
    let mut plan = command::plan(&project, writable, network);
    if crate::sys::paths::within(
        &crate::sys::paths::canonical(&here),
        &crate::sys::paths::canonical(&project.dir),
    ) {
        plan.cwd = here;
    }
    let not_run = |why: &str| format!("`{shown}` was not run: it cannot be confined ({why})");
    let sandbox = confine::sandbox().map_err(|u| not_run(u.message()))?;
    let (mut cmd, mut confined) =
        confine::command(&sandbox, &plan, program, rest).map_err(|u| not_run(u.message()))?;
    let status = cmd
        .status()
        .map_err(|e| format!("`{shown}` could not start: {e}"))?;
    if !confined.started() {
        return Err(not_run(if confine::works(&sandbox) {
            "bubblewrap refused this project"
        } else {
            "bubblewrap cannot make a sandbox on this machine"
        }));
    }
    let appeared = confined.appeared();
    if !appeared.made.is_empty() {
        return Err(format!(
            "`{shown}` {}",
            appeared.told(std::path::Path::new(""), ";")
        ));
    }
    Ok(ExitCode(
        status
            .code()
            .map_or(1, |code| u8::try_from(code).unwrap_or(1)),
    ))
}
