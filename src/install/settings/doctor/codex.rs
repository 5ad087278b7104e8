//! Whether Codex will run vigil's hooks (the project trusted, each hook's trust entry as the
//! hook is now), and what its sandbox lets the agent's commands reach.

use std::path::Path;

use serde_json::{Map, Value};

use crate::install::codex;
use crate::install::finding::Finding;
use crate::install::settings::{Target, codex_trust_entries};

/// What the agent's commands can reach under Codex (SPEC §9): its `sandbox_mode` (the trusted
/// project's `.codex/config.toml` over the user's config) and approval policy.
fn codex_sandbox(config: &Path, project: &Path) -> Finding {
    let approval = codex::approval_policy(config)
        .map(|policy| format!(", approval_policy = \"{policy}\""))
        .unwrap_or_default();
    match codex::sandbox_mode(config, project) {
        Some((mode, file)) if mode == "workspace-write" || mode == "read-only" => {
            Finding::Ok(format!(
                "Codex runs the agent's commands in its {mode} sandbox ({}{approval}): they write only the project (not .git or .codex) and /tmp, so vigil's state home is out of their reach (a `codex` started with --dangerously-bypass-approvals-and-sandbox or -s danger-full-access overrides it)",
                file.display()
            ))
        }
        Some((mode, file)) => Finding::Warn(format!(
            "Codex runs the agent's commands with your rights; ./install.sh --codex --protect\nsandbox_mode = \"{mode}\" in {}{approval}: they can write vigil's state home, its loops, markers and trusted keys; --protect sets workspace-write for this project",
            file.display()
        )),
        None => Finding::Warn(format!(
            "no config sets Codex's sandbox_mode; ./install.sh --codex --protect sets one\nwhat the agent's commands can reach depends on how codex is started{approval}; --protect sets workspace-write for this project"
        )),
    }
}

/// Codex runs a hook from hooks.json only once the user trusts it: a `[hooks.state."<key>"]`
/// entry in its config.toml whose `trusted_hash` is the hash of the hook as it is now.
pub(super) fn codex_trust(
    target: &Target,
    root: &Map<String, Value>,
    config: Option<&Path>,
) -> Vec<Finding> {
    let trusted = config.map(codex::trusted_hashes).unwrap_or_default();
    let mut findings = Vec::new();
    // A project's .codex/ (not ~/.codex/) is read only for a project the user trusts.
    let project = target.project();
    let home = crate::sys::user::home();
    if target.given_dir().file_name().and_then(|n| n.to_str()) == Some(".codex")
        && home.as_deref() != Some(project.as_path())
    {
        let canonical = std::fs::canonicalize(&project).unwrap_or(project);
        if config.is_some_and(|c| codex::project_trusted(c, &canonical)) {
            findings.push(Finding::Ok(format!(
                "Codex trusts the project {}",
                canonical.display()
            )));
        } else {
            findings.push(Finding::Warn(format!(
                "Codex reads .codex/ only for a trusted project: trust it when codex asks\nor set [projects.\"{}\"] trust_level = \"trusted\" in config.toml",
                canonical.display()
            )));
        }
    }
    if let Some(config) = config {
        findings.push(codex_sandbox(config, &target.project()));
    }
    let (mut good, mut changed, mut untrusted) = (Vec::new(), Vec::new(), Vec::new());
    for (key, hash) in codex_trust_entries(target, root) {
        match trusted.get(&key) {
            Some(stored) if *stored == hash => good.push(key),
            Some(_) => changed.push(key),
            None => untrusted.push(key),
        }
    }
    if !good.is_empty() {
        findings.push(Finding::Ok(format!(
            "Codex trusts vigil's {} hooks\n{}",
            good.len(),
            good.join("\n")
        )));
    }
    for (keys, why) in [
        (changed, "that changed since they were trusted"),
        (untrusted, "until you trust them"),
    ] {
        if !keys.is_empty() {
            findings.push(Finding::Warn(format!(
                "Codex will skip {} of vigil's hooks {why}; ./install.sh --codex --trust\n{}\n(or approve them in codex's /hooks)",
                keys.len(),
                keys.join("\n")
            )));
        }
    }
    findings
}
