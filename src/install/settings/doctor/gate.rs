//! Each stop-gate handler's flags, read by the gate's own parser: its deadline under the
//! handler's timeout, its contracts, the check's program, the held tests, the confinement, and
//! markers bound to no command.

use std::path::Path;

use serde_json::Value;

use super::run::active_shell_syntax;
use crate::gate::GateConfig;
use crate::gate::contract::Contract;
use crate::gate::contract::Source;
use crate::install::finding::{Finding, typed};
use crate::install::settings::{Target, handler_args, handler_args_text, vigil_binary};
use crate::reach::confine;
use crate::reach::sandbox;
use crate::sys::files;
use crate::sys::paths;
use crate::verdict::defang;

/// What a handler's timeout is when it names none: both engines give a hook 600 s.
const ENGINE_HOOK_TIMEOUT_SECS: u64 = 600;

/// How far under the handler's timeout the gate's deadline must be (SPEC §9).
const HANDLER_MARGIN_SECS: u64 = 5;

/// Each `--contract FILE` of a stop-gate handler: read and compiled as the gate would, and
/// named when it is inside the project, where the agent can rewrite it. A gate that checks
/// subagents' reports on Stop alone never sees one: SubagentStop must run it.
pub(super) fn contracts(
    target: &Target,
    handlers: &[(String, usize, usize, String)],
) -> Vec<Finding> {
    let project = target.project();
    let mut findings = Vec::new();
    let mut subagent_gate = false;
    let mut wanted = false;
    for (event, _, _, command) in handlers {
        if vigil_binary(command) != Some("stop-gate") {
            continue;
        }
        let Some(Ok(Some(config))) = handler_args(command)
            .map(|args| GateConfig::parse(args.into_iter().map(Into::into).collect()))
        else {
            continue;
        };
        if event == "SubagentStop" {
            subagent_gate = true;
        }
        let Some(source) = &config.contract else {
            continue;
        };
        wanted = true;
        if let Source::File(path) = source
            && path.is_relative()
            && crate::sys::user::home().is_some_and(|home| project == home)
        {
            findings.push(Finding::Fail(format!(
                "{event}: --contract {} is relative in your user settings, so each project's own file of that name is read (one the agent can write); give an absolute path",
                path.display()
            )));
            continue;
        }
        match Contract::load(source, &project) {
            Ok(_) => findings.push(Finding::Ok(format!(
                "{event}: {} is a valid JSON Schema (self-contained, nothing fetched)",
                source.describe()
            ))),
            Err(e) => findings.push(Finding::Fail(format!(
                "{event}: {e}; every subagent's stop would be blocked"
            ))),
        }
        if let Source::File(path) = source {
            let full = if path.is_absolute() {
                path.clone()
            } else {
                project.join(path)
            };
            if paths::canonical(&full).starts_with(paths::canonical(&project)) {
                findings.push(Finding::Warn(format!(
                    "{event}: the contract is inside the project, where the agent can rewrite it\n{}: it shapes subagents' reports; it approves nothing",
                    typed(path, &target.project())
                )));
            }
        }
    }
    if wanted && !subagent_gate {
        findings.push(Finding::Warn(
            "stop-gate has --contract, but SubagentStop does not run it; run ./install.sh with --contract\nso no subagent's report is checked".into(),
        ));
    }
    findings
}

/// The deadline rule of SPEC §9 for one stop-gate handler, its flags read by stop-gate's own
/// parser: check timeout + reserve <= deadline <= the handler's timeout - 5 s. A flag the gate
/// would refuse (a typo blocks every stop with a config error) fails here first.
pub(super) fn gate_deadline(event: &str, command: &str, timeout: Option<&Value>) -> Finding {
    if let Some(c) = handler_args_text(command).and_then(active_shell_syntax) {
        return Finding::Fail(format!(
            "{event}: the stop-gate command has `{c}` outside single quotes, so the shell runs or expands something before or around the gate that the doctor cannot check; write its arguments as plain or single-quoted words (settings-merge install does)"
        ));
    }
    let Some(args) = handler_args(command) else {
        return Finding::Warn(format!(
            "{event}: cannot read stop-gate's flags, so its deadline is not checked\n`{command}`"
        ));
    };
    if args.iter().any(|a| a == "--check-config") {
        return Finding::Fail(format!(
            "{event}: `{command}` has --check-config, which makes stop-gate check its flags and exit 0: it allows every stop without checking; remove it"
        ));
    }
    let config = match GateConfig::parse(args.into_iter().map(Into::into).collect()) {
        Ok(Some(config)) => config,
        Ok(None) => {
            return Finding::Fail(format!(
                "{event}: `{command}` asks stop-gate for its help text, so it never gates"
            ));
        }
        Err(e) => {
            return Finding::Fail(format!(
                "{event}: stop-gate would refuse its flags and block every stop: {e}"
            ));
        }
    };
    let handler = match timeout {
        None => ENGINE_HOOK_TIMEOUT_SECS,
        Some(value) => match value.as_u64() {
            Some(secs) => secs,
            None => {
                return Finding::Fail(format!(
                    "{event}: the handler's timeout {value} is not a whole number of seconds"
                ));
            }
        },
    };
    let deadline = config.deadline.as_secs();
    if deadline + HANDLER_MARGIN_SECS > handler {
        return Finding::Fail(format!(
            "{event}: stop-gate's --deadline {deadline} s is not {HANDLER_MARGIN_SECS} s under the handler's timeout of {handler} s, so the engine can kill it first and let the stop through unchecked; set \"timeout\": {} or lower --deadline to {}",
            deadline + HANDLER_MARGIN_SECS,
            handler.saturating_sub(HANDLER_MARGIN_SECS)
        ));
    }
    // Only a Stop or SubagentStop handler with --run has a check to speak of.
    let checks = config.run.is_some() && matches!(event, "Stop" | "SubagentStop");
    if !checks {
        return Finding::Ok(format!(
            "{event}: stop-gate answers within {deadline} s, under the handler's timeout of {handler} s"
        ));
    }
    Finding::Ok(format!(
        "{event}: stop-gate's check gets {} s and the gate answers within {deadline} s, under the handler's timeout of {handler} s",
        config.timeout.as_secs()
    ))
}

/// A `--require-marker CHECK` with no `=CMD` binds no command (SPEC §5): any passed marker of
/// CHECK for this content counts, whatever wrote it.
pub(super) fn unbound_markers(event: &str, config: &GateConfig) -> Vec<Finding> {
    config
        .markers
        .iter()
        .filter(|required| required.command.is_none())
        .map(|required| {
            let check = &required.check;
            Finding::Warn(format!(
                "{event}: --require-marker {check} names no command; give it as {check}=CMD\na passed marker of `{check}` for this content counts whatever command wrote it (`true` included); CMD is the command your protected writer runs"
            ))
        })
        .collect()
}

/// The gate's flags in a stop-gate handler's command, when they are words the gate takes.
pub(super) fn gate_config(command: &str) -> Option<GateConfig> {
    let args = handler_args(command)?;
    GateConfig::parse(args.into_iter().map(Into::into).collect()).ok()?
}

/// What `sh` starts its command with without looking anything up: its own words.
const SHELL_WORDS: &[&str] = &[
    "!", ".", ":", "[", "[[", "{", "alias", "break", "builtin", "case", "cd", "command",
    "continue", "declare", "echo", "eval", "exec", "exit", "export", "false", "for", "function",
    "getopts", "hash", "if", "let", "local", "printf", "pwd", "read", "readonly", "return", "set",
    "shift", "source", "test", "times", "trap", "true", "type", "typeset", "ulimit", "umask",
    "unset", "until", "wait", "while",
];

/// The program the check starts with, looked up as `sh -c` at the project's top will look it
/// up when the hook runs: a path from the project's top, a name on PATH (the hook has the
/// environment of the shell that starts the engine, as this one does). A check whose program
/// is not there fails with 127 at every stop.
pub(super) fn check_program(event: &str, run: &str, project: &Path) -> Finding {
    let short = defang::field_max(run, 24);
    let Some(words) = shlex::split(run) else {
        return Finding::Fail(format!(
            "{event}: stop-gate's check `{short}` has an unclosed quote: sh refuses it at every stop"
        ));
    };
    // `NAME=value` words before the program set its environment.
    let is_assignment = |word: &&String| {
        word.split_once('=').is_some_and(|(name, _)| {
            !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c == '_' || c.is_ascii_alphanumeric())
        })
    };
    let Some(program) = words.iter().find(|w| !is_assignment(w)) else {
        return Finding::Ok(format!(
            "{event}: stop-gate's check `{short}` only sets variables; it runs nothing"
        ));
    };
    let shown = defang::field_max(program, 40);
    if SHELL_WORDS.contains(&program.as_str()) {
        return Finding::Ok(format!(
            "{event}: stop-gate's check starts with the shell's own `{shown}`\nwhat runs after it is looked up when the check runs; the doctor looks no further"
        ));
    }
    if program.contains(['$', '`', '(', ')', '*', '?', '<', '>', '|', '&', ';']) {
        return Finding::Ok(format!(
            "{event}: stop-gate's check starts with `{shown}`, which the shell expands\nso what it runs is known only when the check runs; the doctor looks no further"
        ));
    }
    if program.contains('/') {
        // sh expands a leading `~/` to $HOME; any other path is from the project's top.
        let path = match (program.strip_prefix("~/"), std::env::var_os("HOME")) {
            (Some(rest), Some(home)) => Path::new(&home).join(rest),
            _ => project.join(program),
        };
        return if files::is_executable(&path) {
            Finding::Ok(format!(
                "{event}: stop-gate's check runs {shown}, which is there and executable"
            ))
        } else if path.exists() {
            Finding::Fail(format!(
                "{event}: stop-gate's check runs {shown}, which is not executable: every stop is blocked (exit 126)\nrun chmod +x on it, or give --run the interpreter (`sh {shown}`)"
            ))
        } else {
            Finding::Fail(format!(
                "{event}: stop-gate's check runs {shown}, which is not there: every stop is blocked (exit 127)\n{} does not exist (a relative path is from the project's top, where the check runs)",
                path.display()
            ))
        };
    }
    match files::find_on_path(program) {
        Some(found) => Finding::Ok(format!(
            "{event}: stop-gate's check runs {shown}, found on PATH: {}",
            found.display()
        )),
        None => Finding::Fail(format!(
            "{event}: stop-gate's check runs `{shown}`, which is not on PATH: every stop is blocked (exit 127)\nthe hook has the PATH of the shell that starts claude or codex; this one is {}\ninstall {shown}, or give --run its absolute path",
            std::env::var("PATH").unwrap_or_default()
        )),
    }
}

/// Whether the tests the check runs are held (SPEC §11), and how the check could read its
/// runner's configuration from its own command line rather than from files the agent edits:
/// the doctor proposes pinning it, never holding a whole manifest.
pub(super) fn check_held(event: &str, run: &str, project: &Path) -> Vec<Finding> {
    let short = defang::field_max(run, 24);
    let mut findings = Vec::new();
    let project = crate::state::project::Project::at(project).for_reading();
    match crate::state::hold::load(&project) {
        Ok(Some(hold)) => {
            let patterns: Vec<&str> = hold.patterns.iter().map(|p| p.pattern.as_str()).collect();
            let by_name = hold.tests.as_ref().is_some_and(|t| t.any());
            findings.push(Finding::Ok(format!(
                "{event}: the human holds {} files under {} for `{short}`{}",
                hold.files.len(),
                defang::field_max(&patterns.join(", "), 40),
                if by_name { ", its tests judged by name" } else { "" }
            )));
        }
        Ok(None) => findings.push(Finding::Warn(format!(
            "{event}: stop-gate's check `{short}` runs the tests as the agent leaves them
nothing is held: an agent that deletes, skips or edits a failing test passes this check; hold the tests with `stop-gate hold add tests/ --baseline '{run}'` (or /vigil-hold)"
        ))),
        Err(e) => findings.push(Finding::Fail(format!(
            "{event}: the human's hold cannot be read: every stop is blocked
{e}"
        ))),
    }
    let Some(words) = shlex::split(run) else {
        return findings;
    };
    let has = |word: &str| words.iter().any(|w| w == word);
    let starts = |prefix: &str| words.iter().any(|w| w.starts_with(prefix));
    let mut pin = Vec::new();
    if (has("npm") || has("yarn") || has("pnpm")) && has("test") {
        pin.push("`npm test` runs package.json's script, which the agent edits: call the runner itself (node --test tests/, npx jest -c jest.config.held.js)");
    }
    if has("make") {
        pin.push("`make` runs the Makefile, which the agent edits (a `-` before a command ignores its failure): call the runner itself");
    }
    let pytest = words
        .iter()
        .any(|w| w == "pytest" || w.ends_with("/pytest"));
    if pytest {
        if !(has("-c") || starts("--config-file") || starts("-c")) {
            pin.push("pytest reads pytest.ini, pyproject.toml, tox.ini and setup.cfg, which the agent edits: name a held one (-c tests/pytest.ini)");
        }
        if !starts("addopts=")
            && !words
                .windows(2)
                .any(|w| w[0] == "-o" && w[1].starts_with("addopts"))
        {
            pin.push("pytest takes more options from addopts (a deselect): give -o addopts= on the check's line");
        }
    }
    let python = words.iter().any(|w| w.starts_with("python"));
    if python && (pytest || has("unittest")) && !has("-P") && !has("-I") {
        pin.push("python puts the project first on sys.path, so a pytest.py, unittest.py or sitecustomize.py there runs instead: give python3 -P");
    }
    if !pin.is_empty() {
        findings.push(Finding::Warn(format!(
            "{event}: stop-gate's check `{short}` takes its runner's configuration from files the agent can edit
{}
pin it on the check's own command line; holding a whole manifest (pyproject.toml, package.json, Cargo.toml, a Makefile) would hold the project's code too",
            pin.join("\n")
        )));
    }
    findings
}

/// Whether the check of a stop-gate handler that has one runs confined (SPEC §9), and if not,
/// what that means: said every stop, or (with Claude Code's sandbox on) every stop blocked.
pub(super) fn check_confinement(
    event: &str,
    config: &GateConfig,
    project: &Path,
) -> Option<Finding> {
    let run = config.run.as_deref()?;
    let reach = match (config.check_network, config.check_write.is_empty()) {
        (false, true) => String::new(),
        (network, _) => {
            let mut more: Vec<String> = config
                .check_write
                .iter()
                .map(|d| d.display().to_string())
                .collect();
            if network {
                more.push("the network".to_string());
            }
            format!(", and {}", more.join(", "))
        }
    };
    // The command as the headline names it: short, the whole of it in the detail.
    let short = defang::field_max(run, 24);
    let why = match confine::working_sandbox() {
        Ok(bwrap) => {
            return Some(Finding::Ok(format!(
                "{event}: stop-gate's check `{short}` runs confined ({})\nit writes only the project (not .claude, .git, .mcp.json…) and a private /tmp{reach}, and sees no state home, key or ~/.claude",
                bwrap.display()
            )));
        }
        Err(unavailable) => unavailable.message().to_string(),
    };
    Some(if sandbox::confinement_required(project) {
        Finding::Fail(format!(
            "{event}: stop-gate's check `{short}` cannot be confined: every stop is blocked\n{why}; under --protect (Claude Code's sandbox on, or vigil installed with --protect for either engine) it is never run unconfined, so every stop is blocked until it can be"
        ))
    } else {
        Finding::Warn(format!(
            "{event}: stop-gate's check `{short}` runs unconfined, with your rights\n{why}: the agent's code in it can write anything you can; every stop says so"
        ))
    })
}
