//! The doctor's lines on `--protect`: whether Claude Code, with the merged settings, keeps the
//! agent off vigil's protected state, and why not.

use std::path::Path;

use serde_json::{Map, Value, json};

use super::Guarded;
use crate::install::finding::{Finding, typed_path};
use crate::reach::sandbox::Effective;
use crate::state::protected;
use crate::sys::files;
use crate::sys::paths;

/// The doctor's lines: whether Claude Code, with these settings, keeps the agent off the
/// protected state of the project at `project_dir`, and why not.
pub(crate) fn check(effective: &Effective, project_dir: &Path, guarded: &Guarded) -> Vec<Finding> {
    let mut findings = Vec::new();
    if !protected::home_is_writable() {
        findings.push(Finding::Fail(format!(
            "the state home {} cannot be written, so loops and session records are in {}, inside the project, where the agent can change them; set $VIGIL_STATE_HOME to a writable directory outside the project",
            guarded.state_home.display(),
            project_dir.join(".vigil/state").display()
        )));
        return findings;
    }
    let why_not = "the agent can change vigil's loops and session records";
    if cfg!(windows) {
        // Nothing to turn on: Claude Code's sandbox is for Linux and macOS.
        findings.push(Finding::Warn(format!(
            "Windows: vigil's state home is within the agent's reach (Claude Code has no sandbox here)\nthe state home is {}: the agent's shell can change vigil's loops and session records (--protect keeps only the Edit and Write tools off it), and a check runs with your rights; markers CI signs stay unforgeable (see SECURITY.md, Windows)",
            guarded.state_home.display()
        )));
        return findings;
    }
    let home = paths::canonical(&guarded.state_home);
    let top = protected::state_top(project_dir);
    if home.starts_with(&top) {
        findings.push(Finding::Fail(format!(
            "the state home {} is inside the project, which the sandbox lets the agent write: {why_not}; set $VIGIL_STATE_HOME outside it",
            guarded.state_home.display()
        )));
        return findings;
    }
    if let Some(bin) = &guarded.bin_dir
        && paths::canonical(bin).starts_with(&top)
    {
        findings.push(Finding::Fail(format!(
            "the hooks run vigil's binaries from {}, inside the project, where the agent can replace them and answer for the gate; install them outside it (./install.sh puts them in ~/.local/bin)",
            bin.display()
        )));
        return findings;
    }
    // What the sandbox lets commands write besides the project (seen with 2.1.332).
    let writable = protected::sandbox_writable;
    if let Some(bin) = guarded.bin_dir.as_deref().filter(|bin| writable(bin)) {
        findings.push(Finding::Warn(format!(
            "the sandbox lets the agent replace vigil's binaries (under $TMPDIR); install them elsewhere\nthe hooks run them from {}, under $TMPDIR or /tmp/claude, which the sandbox lets commands write",
            bin.display()
        )));
    }
    if writable(&home) {
        findings.push(Finding::Warn(format!(
            "the sandbox lets the agent write vigil's state home (under $TMPDIR); keep it in ~/.local/state\nthe state home {} is under $TMPDIR or /tmp/claude, which the sandbox lets commands write: {why_not}",
            guarded.state_home.display()
        )));
    }
    findings.extend(sandbox_settings(&effective.sandbox, guarded, why_not));
    let deny = &effective.deny;
    if !guarded.state_rules().iter().any(|rule| deny.contains(rule)) {
        findings.push(Finding::Warn(format!(
            "Edit and Write are not denied vigil's state home; --protect adds the rule\nthe sandbox does not cover the file tools, and no {} rule denies them {}: {why_not}",
            guarded.rule(&guarded.state_home, true),
            guarded.state_home.display()
        )));
    }
    let missing: Vec<String> = guarded
        .rules()
        .into_iter()
        .skip(1)
        .filter(|rule| !deny.contains(rule))
        .collect();
    if !missing.is_empty() {
        let paths: Vec<String> = missing.iter().map(|rule| typed_path(rule)).collect();
        findings.push(Finding::Warn(format!(
            "Edit and Write may change what runs vigil's gate ({} paths); --protect denies them\nnot denied: {}\nthe rules --protect adds: {} (in a rule, /x is the project's x and //x the absolute /x)",
            missing.len(),
            paths.join(", "),
            missing.join(", ")
        )));
    }
    if guarded.on_path {
        findings.push(Finding::Warn(
            "the hooks find vigil on PATH, where the agent may put its own stop-gate first\nthe hooks find vigil's binaries through PATH (shared settings or the plugin), and no rule keeps Edit and Write off the directories on it: an agent that puts its own stop-gate earlier on PATH answers for the gate; install with --bin-dir and --protect in your own settings".into(),
        ));
    }
    if let Some(dir) = std::env::var_os("CLAUDE_CONFIG_DIR").filter(|d| !d.is_empty()) {
        findings.push(Finding::Warn(format!(
            "CLAUDE_CONFIG_DIR is set: check the sandbox and deny rules of the settings there yourself\nClaude Code reads your user settings in {}, which this check does not read and no rule keeps Edit off",
            Path::new(&dir).display()
        )));
    }
    if findings.is_empty() {
        findings.push(Finding::Ok(format!(
            "vigil's protected state ({}) is out of the agent's reach: the sandbox is on, without unsandboxed retries, and Edit and Write are denied there",
            guarded.state_home.display()
        )));
    }
    findings
}

/// The doctor's lines on Claude Code's sandbox settings (`sandbox`, merged): on, without
/// unsandboxed retries or excluded commands, failing where it cannot start, and (Linux) with
/// what it needs on PATH. `why_not` is what is at stake.
fn sandbox_settings(
    sandbox: &Map<String, Value>,
    guarded: &Guarded,
    why_not: &str,
) -> Vec<Finding> {
    let mut findings = Vec::new();
    if sandbox.get("enabled") != Some(&json!(true)) {
        findings.push(Finding::Warn(format!(
            "the sandbox is off: the Bash tool can write vigil's state home; --protect turns it on\nthe state home is {}: {why_not}; run ./install.sh --protect (or settings-merge install --protect), or set sandbox.enabled in your settings",
            guarded.state_home.display()
        )));
    } else {
        if sandbox.get("allowUnsandboxedCommands") != Some(&json!(false)) {
            findings.push(Finding::Warn(format!(
                "the sandbox may retry a command outside it; --protect sets allowUnsandboxedCommands false\nthen {why_not}; set sandbox.allowUnsandboxedCommands to false (--protect does)"
            )));
        }
        if sandbox.get("failIfUnavailable") != Some(&json!(true)) {
            findings.push(Finding::Warn(format!(
                "where the sandbox cannot start, commands run without it; --protect sets failIfUnavailable\nthen {why_not}; set sandbox.failIfUnavailable to true (--protect does)"
            )));
        }
        let excluded: Vec<&str> = sandbox
            .get("excludedCommands")
            .and_then(Value::as_array)
            .map(|list| list.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if !excluded.is_empty() {
            findings.push(Finding::Warn(format!(
                "sandbox.excludedCommands run outside the sandbox and can write vigil's state home\n{} run outside the sandbox, where they can write {}: {why_not}; keep the list empty, or to commands that run no code of the project's",
                excluded.join(", "),
                guarded.state_home.display()
            )));
        }
        if cfg!(target_os = "linux") {
            let missing: Vec<&str> = ["bwrap", "socat"]
                .into_iter()
                .filter(|tool| !on_path(tool))
                .collect();
            if !missing.is_empty() {
                findings.push(Finding::Warn(format!(
                    "the sandbox needs {} on PATH: apt-get install bubblewrap socat",
                    missing.join(" and ")
                )));
            }
        }
    }
    findings
}

/// Whether an executable named `tool` is in a directory of `$PATH`.
fn on_path(tool: &str) -> bool {
    files::find_on_path(tool).is_some()
}
