//! settings-merge: wire vigil's hooks into Claude Code settings or Codex hooks.json without
//! losing anything of the user's (SPEC §8).

use std::ffi::OsString;
use std::path::PathBuf;

use lexopt::prelude::*;

use crate::cli::defs;
use crate::cli::defs::Scope;
use crate::cli::flags;
use crate::cli::flags::{help, print, string_value};
use crate::cli::output::diagnostic;
use crate::exit::Code as ExitCode;
use crate::gate::RequiredMarker;
use crate::install::codex;
use crate::install::exclude;
use crate::install::finding::Finding;
use crate::install::gateflags::Changes;
use crate::install::protect::Guarded;
use crate::install::settings::{self, Binaries, Engine, Plan, Target};
use crate::{Error, Exit, Result};

const NAME: &str = "settings-merge";

const HELP: &str = "\
settings-merge: wire vigil's hooks into Claude Code or Codex settings, losing nothing.

Usage:
  settings-merge install   --settings FILE [--bin-dir DIR | --shared] [--protect]
                           [--codex [--trust]] [--run CMD | --no-run]
                           [--require-marker CHECK[=CMD]]... [--no-require-marker CHECK]...
                           [--timeout SECS] [--deadline SECS] [--max-blocks N]
                           [--feedback block|context] [--verify-key FILE]
                           [--stall-after K] [--max-duration D] [--max-tokens N]
                           [--contract FILE|default] [--contract-max-tokens N]
                           [--desktop-notification on|off]
                           [--sync-notes REMOTE | --no-sync-notes] [--dry-run]
  settings-merge uninstall --settings FILE [--dry-run]
  settings-merge check     --settings FILE [--codex] [--codex-config FILE] [--verbose]

install adds vigil's hook groups (Claude Code: Stop and UserPromptSubmit -> stop-gate,
SessionStart -> session-start-loader, SessionEnd -> session-end-handoff, PreCompact ->
session-end-handoff --checkpoint; Codex: the same, and session-end-handoff --checkpoint on Stop
too). Every other key, hook and entry is kept, in order, written with 2-space
indentation and a final newline; a second install changes nothing. A file that is not valid
JSON, whose root is not an object, or whose `hooks` or an event has the wrong type, is refused,
unchanged, with its line and column. The original is kept as FILE.vigil-backup before the first
change; a lock on FILE.vigil-lock keeps two installers apart; the write is atomic, keeps the
file's permissions, and follows a symlinked FILE to its target. What was added is recorded in
the install record of the project that holds the file (~ for ~/.claude/), in its protected
state (installed.json in vigil's state home, out of the agent's reach).

uninstall removes exactly that: the original comes back byte for byte when nothing else changed.
It ends with a line naming the settings files of the project vigil stays installed in, if any.

check reports, a line each, [ok], [warn] or [fail]: the file parses, each vigil entry is there
once, each command runs from a bare environment (PATH=/usr/bin:/bin), for Claude Code whether
vigil's protected state is out of the agent's reach (read from every settings file Claude Code
merges for the project) and why not, and for Codex whether each hook has a trust entry. Exit 1
on any [fail]. Each line is short; --verbose adds the detail under the lines that have one.

Options:
  --settings FILE      the settings file (.claude/settings.local.json, .claude/settings.json,
                       ~/.claude/settings.json, or .codex/hooks.json)
  --bin-dir DIR        where the binaries are (default: beside settings-merge); written as
                       absolute paths
  --shared             for a committed file: find the binaries through PATH and the usual
                       install places when the hook runs, and say ./install.sh is needed
                       when none is found
  --run CMD            stop-gate's check command (the Stop handler's stop-gate flags that an
                       install is not given stay as the file has them)
  --no-run             remove the check command (and its --timeout)
  --require-marker CHECK[=CMD]
                       repeatable: require a passed marker for CHECK (CMD: what the protected
                       writer runs to make it, named when a stop is blocked)
  --no-require-marker CHECK
                       stop requiring the marker for CHECK
  --timeout SECS, --deadline SECS, --max-blocks N, --feedback block|context, --verify-key FILE,
  --stall-after K, --max-duration D, --max-tokens N, --contract FILE|default,
  --contract-max-tokens N, --desktop-notification on|off
                       the same flags of stop-gate (see stop-gate --help); with --contract,
                       SubagentStop runs stop-gate too (it checks each subagent's report)
  --sync-notes REMOTE  the loader starts `marker-writer sync --remote REMOTE` in the background
                       at each session start, so markers CI published as git notes are here
                       for the gates (kept by later installs; --no-sync-notes takes it out)
  --protect            Claude Code: turn the sandbox on (sandbox.enabled, allowUnsandboxedCommands
                       false, failIfUnavailable) and deny the Edit and Write tools vigil's state
                       home, the binaries' directory and the settings files (Edit(...) rules),
                       and add stop-gate as a PreToolUse guard on Edit|Write|MultiEdit|
                       NotebookEdit and as a ConfigChange hook that keeps that protection in
                       the running session; kept by later installs, taken back by uninstall. With
                       --codex: sandbox_mode = \"workspace-write\" in the project's
                       .codex/config.toml (a mode you set there is kept, or refused if wider)
  --codex              the file is Codex's hooks.json
  --trust              with --codex: record Codex's trust for vigil's hooks in its config.toml
                       (a [hooks.state.\"<key>\"] trusted_hash each; the rest of the file is kept)
  --codex-config FILE  Codex's config.toml (default $CODEX_HOME/config.toml, else
                       ~/.codex/config.toml)
  --dry-run            print the diff the change would make, and change nothing
  --verbose            check: the detail behind each finding (the paths, rules and reasons)
  -h, --help           this text
";

#[derive(Default)]
struct Options {
    settings: Option<PathBuf>,
    bin_dir: Option<PathBuf>,
    shared: bool,
    /// The gate flags this install is told to change.
    gate: Changes,
    codex: bool,
    codex_config: Option<PathBuf>,
    trust: bool,
    protect: bool,
    dry_run: bool,
    verbose: bool,
    /// `--sync-notes REMOTE` (`Some(Some)`), `--no-sync-notes` (`Some(None)`), or neither.
    sync_notes: Option<Option<String>>,
}

/// The binary's work, from its command line to its exit code.
pub fn main() -> ExitCode {
    if flags::start(NAME) {
        return ExitCode::SUCCESS;
    }
    match run() {
        Ok(exit) => exit.into(),
        Err(err) => {
            diagnostic(NAME, &err.to_string());
            err.exit().into()
        }
    }
}

fn run() -> Result<Exit> {
    let mut args: Vec<OsString> = std::env::args_os().skip(1).collect();
    if args.is_empty() {
        return Err(Error::usage(
            "a command is needed: install, uninstall or check; see --help",
        ));
    }
    let action = args.remove(0).to_string_lossy().into_owned();
    if matches!(action.as_str(), "-h" | "--help") {
        return help(HELP);
    }
    if matches!(action.as_str(), "-V" | "--version") {
        return print(format!("{NAME} {}\n", env!("CARGO_PKG_VERSION")).as_bytes());
    }
    if !matches!(action.as_str(), "install" | "uninstall" | "check") {
        return Err(Error::usage(format!(
            "unknown command {action:?}; use install, uninstall or check"
        )));
    }
    let Some(options) = parse(args)? else {
        return help(HELP);
    };
    let settings = options
        .settings
        .clone()
        .ok_or_else(|| Error::usage(format!("`{action}` needs --settings FILE")))?;
    let target = Target::resolve(&settings)?;
    if options.trust && !options.codex {
        return Err(Error::usage("--trust is for Codex: give it with --codex"));
    }
    if !options.gate.is_empty() && action != "install" {
        return Err(Error::usage(
            "the gate's flags (--run, --require-marker, --timeout…) are install options",
        ));
    }
    if options.protect && action != "install" {
        return Err(Error::usage(
            "--protect is an install option (uninstall takes back what it added)",
        ));
    }
    if options.codex && cfg!(windows) {
        return Err(Error::usage(
            "Codex on Windows is not supported yet: its hooks run through a shell vigil has not been tested with there; wire Claude Code, or Codex in WSL",
        ));
    }

    // Where Codex itself reads it: $CODEX_HOME, else ~/.codex.
    let config = options.codex_config.clone().or_else(|| {
        std::env::var_os("CODEX_HOME")
            .filter(|home| !home.is_empty())
            .map(|home| PathBuf::from(home).join("config.toml"))
            .or_else(|| crate::sys::user::home().map(|home| home.join(".codex/config.toml")))
    });
    let trust = if options.trust { config.clone() } else { None };
    let engine = if options.codex {
        Engine::Codex
    } else {
        Engine::Claude
    };
    match action.as_str() {
        "install" => {
            let binaries = if options.shared {
                Binaries::Search
            } else {
                let dir = match options.bin_dir {
                    Some(dir) => dir,
                    None => std::env::current_exe()
                        .ok()
                        .and_then(|exe| exe.parent().map(PathBuf::from))
                        .ok_or_else(|| {
                            Error::usage("cannot tell where the binaries are; give --bin-dir DIR")
                        })?,
                };
                Binaries::Dir(
                    std::path::absolute(&dir).map_err(|e| Error::io("resolve", &dir, &e))?,
                )
            };
            let protect = if options.protect && !options.codex {
                let bin_dir = match &binaries {
                    Binaries::Dir(dir) => Some(dir.clone()),
                    Binaries::Search => None,
                };
                Some(Guarded::here(bin_dir).ok_or_else(|| {
                    Error::usage(
                        "--protect cannot tell where the state home is: set $VIGIL_STATE_HOME or $HOME to an absolute path",
                    )
                })?)
            } else {
                None
            };
            let personal = matches!(binaries, Binaries::Dir(_));
            let plan = Plan {
                engine,
                binaries,
                gate: options.gate,
                protect,
                sync_notes: options.sync_notes,
            };
            let change = settings::install(&target, &plan, options.dry_run, trust.as_deref())?;
            if !options.dry_run {
                keep_out_of_git(&target, personal, true);
            }
            let exit = report(&target, change, options.dry_run)?;
            // Codex's own sandbox for the project, where it keeps the agent's commands.
            if engine == Engine::Codex && options.protect && !options.dry_run {
                let config = target.project().join(".codex/config.toml");
                let line = if codex::protect(&config)? {
                    format!(
                        "{}: sandbox_mode = \"workspace-write\" (--protect): Codex runs the agent's commands where they write only the project (not .git or .codex) and /tmp, never vigil's state home; Codex reads it once the project is trusted",
                        config.display()
                    )
                } else {
                    format!(
                        "{}: already sets a sandbox that keeps the agent's commands out of vigil's state home",
                        config.display()
                    )
                };
                print(format!("{line}\n").as_bytes())?;
            }
            if engine == Engine::Codex && !options.dry_run {
                let shown = target.given.display();
                let line = match &trust {
                    Some(config) => format!(
                        "{shown}: Codex's trust for vigil's hooks is recorded in {}",
                        config.display()
                    ),
                    None => format!(
                        "{shown}: Codex skips these hooks, without a word, until you trust them: run again with --trust, or approve them in codex's /hooks"
                    ),
                };
                print(format!("{line}\n").as_bytes())?;
            }
            Ok(exit)
        }
        "uninstall" => {
            let change = settings::uninstall(&target, options.dry_run)?;
            if engine == Engine::Codex && !options.dry_run {
                codex::unprotect(&target.project().join(".codex/config.toml"))?;
            }
            if !options.dry_run {
                keep_out_of_git(&target, true, false);
            }
            let exit = report(&target, change, options.dry_run)?;
            let others = target.installed_files();
            if !options.dry_run && !others.is_empty() {
                print(format!("vigil stays installed in {}\n", others.join(", ")).as_bytes())?;
            }
            Ok(exit)
        }
        _ => {
            let findings = settings::check(&target, engine, config.as_deref());
            let text: String = findings
                .iter()
                .map(|f| f.line(options.verbose) + "\n")
                .collect();
            print(text.as_bytes())?;
            if !options.verbose && findings.iter().any(Finding::has_detail) {
                print(b"(add --verbose for the detail behind these lines)\n")?;
            }
            Ok(if findings.iter().any(|f| matches!(f, Finding::Fail(_))) {
                Exit::Negative
            } else {
                Exit::Success
            })
        }
    }
}

/// Adds (or, after uninstall, takes back) the lines of `.git/info/exclude` that keep the
/// files this install wrote for this machine out of git and out of every marker's subject
/// (`crate::install::exclude`). A failure is told, and the install stands.
fn keep_out_of_git(target: &Target, personal: bool, installing: bool) {
    let Some((file, mut lines)) = exclude::for_install(&target.file, &target.project(), personal)
    else {
        return;
    };
    let legacy: Vec<String> = exclude::legacy_record_line(&target.project())
        .into_iter()
        .collect();
    let result = if installing {
        exclude::update(&file, &lines, &legacy)
    } else {
        // The fallback state's line goes with the last install the record holds.
        if target.has_record() {
            lines.retain(|line| !line.ends_with("/.vigil/state/"));
        }
        lines.extend(legacy);
        exclude::update(&file, &[], &lines)
    };
    if let Err(e) = result {
        diagnostic(
            NAME,
            &format!("note: {e}; git may show the files vigil wrote for this machine"),
        );
    }
}

fn report(target: &Target, change: settings::Change, dry_run: bool) -> Result<Exit> {
    let shown = target.given.display().to_string();
    if dry_run {
        let before =
            String::from_utf8_lossy(change.before.as_deref().unwrap_or_default()).into_owned();
        let after =
            String::from_utf8_lossy(change.after.as_deref().unwrap_or_default()).into_owned();
        let text = if change.changed() {
            settings::diff(&shown, &before, &after)
        } else {
            format!("{shown}: no change ({})\n", change.summary)
        };
        return print(text.as_bytes());
    }
    print(format!("{shown}: {}\n", change.summary).as_bytes())
}

fn parse(args: Vec<OsString>) -> Result<Option<Options>> {
    let mut options = Options::default();
    let mut parser = lexopt::Parser::from_args(args);
    while let Some(arg) = parser.next()? {
        match arg {
            Long("settings") => options.settings = Some(PathBuf::from(parser.value()?)),
            Long("bin-dir") => options.bin_dir = Some(PathBuf::from(parser.value()?)),
            Long("shared") => options.shared = true,
            Long("run") => {
                let run = string_value(&mut parser, "--run")?;
                if run.trim().is_empty() {
                    return Err(Error::usage("--run needs a command"));
                }
                options.gate.set.push(("--run".into(), run));
            }
            Long("require-marker") => {
                let value = string_value(&mut parser, "--require-marker")?;
                RequiredMarker::parse(&value)?;
                options.gate.markers.push(value);
            }
            Long("no-require-marker") => {
                let value = string_value(&mut parser, "--no-require-marker")?;
                options.gate.unmark.push(value);
            }
            Long("no-run") => options.gate.no_run = true,
            Long("codex") => options.codex = true,
            Long("codex-config") => options.codex_config = Some(PathBuf::from(parser.value()?)),
            Long("trust") => options.trust = true,
            Long("protect") => options.protect = true,
            Long("sync-notes") => {
                let remote = string_value(&mut parser, "--sync-notes")?;
                if remote.is_empty() || remote.starts_with('-') {
                    return Err(Error::usage(
                        "--sync-notes needs a remote: a name (origin) or a URL",
                    ));
                }
                options.sync_notes = Some(Some(remote));
            }
            Long("no-sync-notes") => options.sync_notes = Some(None),
            Long("dry-run") => options.dry_run = true,
            Long("verbose") => options.verbose = true,
            // The rest of stop-gate's flags an install writes into the Stop handler, as the
            // table defines them.
            Long(flag)
                if defs::find_long(Scope::Install, flag).is_some_and(|f| {
                    f.in_scope(Scope::Hook)
                        && f.takes_value()
                        && !matches!(f.name, "--run" | "--require-marker")
                }) =>
            {
                let name = format!("--{flag}");
                let value = string_value(&mut parser, &name)?;
                options.gate.set.push((name, value));
            }
            Short('h') | Long("help") => return Ok(None),
            _ => return Err(arg.unexpected().into()),
        }
    }
    Ok(Some(options))
}
