//! The reach of the agent's code (SPEC §9), written down once: what code the agent wrote (a
//! check's test suite, a Write tool's file) may write, what it may only read, and what it must
//! never see. The confinement of a check (`confine`) and the file tools' guard both read it.
//!
//! - **Writable**: the project (or the snapshot copy a check runs in), a private temporary
//!   directory, and directories the user names (`--check-write`).
//! - **Read-only inside the project**: what the engine or git later runs with the user's rights
//!   (`READ_ONLY`), as Claude Code's sandbox keeps them (seen with 2.1.332: `.claude/`,
//!   `.git/hooks`, `.git/config`; its Write tool's dangerous list adds `.mcp.json`, `.vscode`,
//!   `.idea`), and the whole `.git` (its `commondir`, a worktree's `.git` file and submodules'
//!   directories lead git to other configs and hooks). At any depth (`nested`): a
//!   subdirectory's `.claude/` and a nested repository are read-only too, and so is what git
//!   runs from the project (`core.hooksPath`, included files, filter programs).
//! - **Never seen**: the state home (loops, records, trusted keys, local markers), the signing
//!   key, the engines' own homes (`~/.claude`, `~/.claude.json`, `~/.codex`) and the user's
//!   credentials (`HIDDEN_IN_HOME`), the user's session services (`$XDG_RUNTIME_DIR`, `/run`).
//! - Everything else of the machine is read-only.

pub(crate) mod confine;
pub(crate) mod guard;
pub(crate) mod nested;
pub(crate) mod sandbox;

use std::path::{Path, PathBuf};

use crate::state::protected;

/// What kind of entry a read-only or hidden path is when it exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Entry {
    Dir,
    File,
}

/// Paths inside the project that the agent's code may read but never write: each is code or
/// configuration that the engine, git or an editor runs later with the user's rights.
pub(crate) const READ_ONLY: &[(&str, Entry)] = &[
    // Settings (hooks, env, permissions), agents, commands and skills whose frontmatter
    // `hooks:` run unsandboxed.
    (".claude", Entry::Dir),
    // Codex reads a trusted project's hooks.json and config.toml.
    (".codex", Entry::Dir),
    // MCP servers the engine starts.
    (".mcp.json", Entry::File),
    // Editor tasks that run on opening the folder.
    (".vscode", Entry::Dir),
    (".idea", Entry::Dir),
    // Git: its hooks run, and its config names programs (core.fsmonitor, core.sshCommand…),
    // which it also reads from wherever `commondir`, a `.git` file or a submodule's directory
    // leads. So the whole git directory, as Claude Code's sandbox keeps its hooks and config.
    (".git", Entry::Dir),
];

/// Paths under the user's home that the agent's code never sees: the engines' homes (their
/// settings, hooks, plugins, MCP servers and credentials) and the user's keys and tokens.
pub(crate) const HIDDEN_IN_HOME: &[(&str, Entry)] = &[
    (".claude", Entry::Dir),
    (".claude.json", Entry::File),
    (".codex", Entry::Dir),
    (".ssh", Entry::Dir),
    (".gnupg", Entry::Dir),
    (".aws", Entry::Dir),
    (".docker", Entry::Dir),
    (".config/gh", Entry::Dir),
    // Where vigil's GUIDE.md keeps a signing key.
    (".config/vigil", Entry::Dir),
    (".netrc", Entry::File),
    (".git-credentials", Entry::File),
];

/// Shell start-up files under the home: code every later shell of the user runs.
pub(crate) const START_UP_FILES: &[&str] = &[
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".profile",
    ".zshrc",
    ".zprofile",
    ".zshenv",
    ".config/fish/config.fish",
];

/// The read-only entries of a project at `top`, as absolute paths.
pub(crate) fn read_only_in(top: &Path) -> Vec<(PathBuf, Entry)> {
    READ_ONLY
        .iter()
        .map(|(relative, entry)| (top.join(relative), *entry))
        .collect()
}

/// Everything the agent's code must never see on this machine, that exists, with its kind:
/// the state home (and the in-project fallback), the hidden entries of the home, the user's
/// runtime directory, and `extra` (a signing key file).
pub(crate) fn hidden(project_state: &Path, extra: &[PathBuf]) -> Vec<(PathBuf, Entry)> {
    let mut paths: Vec<PathBuf> = Vec::new();
    if let Some(home) = protected::home() {
        paths.push(home);
    }
    // The fallback state, when the state home could not be written.
    paths.push(project_state.join("state"));
    if let Some(home) = crate::sys::user::home() {
        paths.extend(
            HIDDEN_IN_HOME
                .iter()
                .map(|(relative, _)| home.join(relative)),
        );
    }
    // The session bus (`systemd-run --user`), the user's other sockets.
    if let Some(runtime) = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from)
        && runtime.is_absolute()
    {
        paths.push(runtime);
    }
    paths.extend(extra.iter().cloned());
    let mut found: Vec<(PathBuf, Entry)> = Vec::new();
    for path in paths {
        // Where it really is: a link to it would otherwise be hidden and its target not.
        let Ok(real) = std::fs::canonicalize(&path) else {
            continue;
        };
        let Ok(meta) = std::fs::metadata(&real) else {
            continue;
        };
        let entry = if meta.is_dir() {
            Entry::Dir
        } else {
            Entry::File
        };
        if !found.iter().any(|(p, _)| *p == real) {
            found.push((real, entry));
        }
    }
    found
}

/// The variables the agent's code never gets: vigil's own (keys, state homes, off switches)
/// and the handles of the user's session services.
pub(crate) fn is_withheld_variable(name: &str) -> bool {
    name.starts_with("VIGIL_")
        || matches!(
            name,
            "SSH_AUTH_SOCK"
                | "SSH_AGENT_PID"
                | "GPG_AGENT_INFO"
                | "DBUS_SESSION_BUS_ADDRESS"
                | "XDG_RUNTIME_DIR"
                | "DOCKER_HOST"
                | "CLAUDE_ENV_FILE"
                | "CLAUDE_CODE_MESSAGING_SOCKET"
        )
}

/// Claude Code's own directory: `$CLAUDE_CONFIG_DIR` where the client was given one (an
/// absolute path), else `~/.claude`.
pub(crate) fn claude_home() -> Option<PathBuf> {
    std::env::var_os("CLAUDE_CONFIG_DIR")
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute())
        .or_else(|| crate::sys::user::home().map(|home| home.join(".claude")))
}

/// The most links followed in one path (as the kernel's 40).
pub(crate) use crate::sys::paths::MAX_LINKS;
/// A path with `..` taken by spelling, and where a write to it lands.
pub(crate) use crate::sys::paths::{lexical, resolve};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_engines_homes_and_git_hooks_are_in_the_one_definition() {
        let top = Path::new("/p");
        let read_only: Vec<PathBuf> = read_only_in(top).into_iter().map(|(p, _)| p).collect();
        for path in ["/p/.claude", "/p/.git", "/p/.mcp.json"] {
            assert!(read_only.contains(&PathBuf::from(path)), "{path}");
        }
        for name in [".claude", ".claude.json", ".codex"] {
            assert!(HIDDEN_IN_HOME.iter().any(|(n, _)| *n == name), "{name}");
        }
    }

    #[test]
    fn keys_and_session_sockets_are_withheld_from_the_environment() {
        for name in [
            "VIGIL_SIGN_KEY",
            "VIGIL_STATE_HOME",
            "SSH_AUTH_SOCK",
            "DBUS_SESSION_BUS_ADDRESS",
        ] {
            assert!(is_withheld_variable(name), "{name}");
        }
        assert!(!is_withheld_variable("PATH"));
    }
}
