//! settings-merge: wire vigil's hooks into Claude Code settings or Codex hooks.json without
//! losing anything of the user's (SPEC §8).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::cli::defs;
use crate::cli::defs::Scope;
use crate::cli::flags;
use crate::cli::flags::{help, print};
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
        return help(&help_text());
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
        return help(&help_text());
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
        "install" => install(&target, options, engine, trust.as_deref()),
        "uninstall" => uninstall(&target, &options, engine),
        _ => check(&target, &options, engine, config.as_deref()),
    }
}

/// `install`: the plan from the options, the settings merged, git's exclude lines, and for
/// Codex its sandbox and trust told.
fn install(
    target: &Target,
    options: Options,
    engine: Engine,
    trust: Option<&Path>,
) -> Result<Exit> {
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
        Binaries::Dir(std::path::absolute(&dir).map_err(|e| Error::io("resolve", &dir, &e))?)
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
    let change = settings::install(target, &plan, options.dry_run, trust)?;
    if !options.dry_run {
        keep_out_of_git(target, personal, true);
    }
    let exit = report(target, change, options.dry_run)?;
    // Codex's own sandbox for the project, where it keeps the agent's commands.
    if engine == Engine::Codex && options.protect && !options.dry_run {
        let config = target.project().join(".codex/config.toml");
        let read_only = codex::read_only_paths(&target.project());
        let line = if codex::protect(&config, &read_only)? {
            format!(
                "{}: sandbox_mode = \"workspace-write\" and the permission profile \"vigil\" (--protect): Codex runs the agent's commands where they write only the project and /tmp, never vigil's state home, and never {} (read-only); Codex reads it once the project is trusted",
                config.display(),
                read_only
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
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
        let line = match trust {
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

/// `uninstall`: what install added taken out, and the settings files vigil stays in told.
fn uninstall(target: &Target, options: &Options, engine: Engine) -> Result<Exit> {
    let change = settings::uninstall(target, options.dry_run)?;
    if engine == Engine::Codex && !options.dry_run {
        codex::unprotect(&target.project().join(".codex/config.toml"))?;
    }
    if !options.dry_run {
        keep_out_of_git(target, true, false);
    }
    let exit = report(target, change, options.dry_run)?;
    let others = target.installed_files();
    if !options.dry_run && !others.is_empty() {
        print(format!("vigil stays installed in {}\n", others.join(", ")).as_bytes())?;
    }
    Ok(exit)
}

/// `check`: the doctor's lines; exit 1 on any failure.
fn check(
    target: &Target,
    options: &Options,
    engine: Engine,
    config: Option<&Path>,
) -> Result<Exit> {
    let findings = settings::check(target, engine, config);
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

/// `--help`: its own options and the gate's an install takes, from the tables.
fn help_text() -> String {
    let mut text = format!("{HELP}{}", defs::options(SCOPE, false));
    let gate = |flag: &&defs::Flag| flag.in_scope(Scope::Hook);
    for flag in defs::of(Scope::Install).filter(|f| !gate(f)) {
        text.push_str(&defs::entry(&flag.usage(), flag.help.unwrap_or("")));
    }
    let shared: Vec<String> = defs::of(Scope::Install)
        .filter(gate)
        .map(|flag| flag.usage())
        .collect();
    // The gate's flags, as many to a line as fit, then what they are.
    let mut line = String::from(" ");
    for (i, usage) in shared.iter().enumerate() {
        let item = match i + 1 == shared.len() {
            true => usage.clone(),
            false => format!("{usage},"),
        };
        if line.len() + 1 + item.len() > 96 {
            text.push_str(&format!("{line}\n"));
            line = String::from(" ");
        }
        line.push(' ');
        line.push_str(&item);
    }
    text.push_str(&format!("{line}\n"));
    text.push_str(&defs::entry(
        "",
        "the same flags of stop-gate, written into the Stop handler (see stop-gate --help; those an install is not given stay as the file has them); with --contract, SubagentStop runs stop-gate too (it checks each subagent's report)",
    ));
    text.push_str(&defs::entry("-h, --help", "this text"));
    text
}

/// settings-merge's own flags (`settings-merge.flags`), taken by every command.
const SCOPE: Scope = Scope::of(NAME, "any");

/// Its own flags, then the gate's flags an install writes into the Stop handler
/// (`stop-gate.flags`' install rows).
fn parse(args: Vec<OsString>) -> Result<Option<Options>> {
    let mut options = Options::default();
    let mut args = defs::Args::in_scopes(args, &[SCOPE, Scope::Install]);
    while let Some(given) = args.next()? {
        let Some((flag, value)) = given.flag_only()? else {
            return Ok(None);
        };
        match flag.name {
            "--settings" => options.settings = Some(PathBuf::from(value)),
            "--bin-dir" => options.bin_dir = Some(PathBuf::from(value)),
            "--shared" => options.shared = true,
            "--codex" => options.codex = true,
            "--codex-config" => options.codex_config = Some(PathBuf::from(value)),
            "--trust" => options.trust = true,
            "--protect" => options.protect = true,
            "--dry-run" => options.dry_run = true,
            "--verbose" => options.verbose = true,
            "--run" => {
                let run = flag.command(&flag.text(value)?)?;
                options.gate.set.push(("--run".into(), run));
            }
            "--require-marker" => {
                let value = flag.text(value)?;
                RequiredMarker::parse(&value)?;
                options.gate.markers.push(value);
            }
            "--no-require-marker" => options.gate.unmark.push(flag.text(value)?),
            "--no-run" => options.gate.no_run = true,
            "--sync-notes" => options.sync_notes = Some(Some(flag.remote(&flag.text(value)?)?)),
            "--no-sync-notes" => options.sync_notes = Some(None),
            // The rest of stop-gate's flags an install writes into the Stop handler, checked
            // there by stop-gate's own parser.
            name if flag.in_scope(Scope::Hook) && flag.takes_value() => {
                options.gate.set.push((name.to_string(), flag.text(value)?));
            }
            _ => return Err(flag.unread()),
        }
    }
    Ok(Some(options))
}
