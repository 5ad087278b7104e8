//! Git sealed off from its caller, for a repository vigil owns (the notes' bare repository):
//! the system's git on the system's PATH, only those of the caller's variables that can run or
//! trust nothing, HOME from the password database, hooks off, no prompts, only the transports
//! vigil needs, every file git writes capped, all within a deadline. Git's messages are said
//! with the password of any URL in them hidden.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Error, Result};
use crate::sys::process;
use crate::sys::process::Outcome;
use crate::sys::programs;
use crate::sys::time::Deadline;
use crate::sys::user;

/// The caller's variables git is given; every other one is dropped. A project's
/// `.claude/settings.json` sets the environment of the hook that starts a background sync, and
/// a git hook runs marker-writer with `GIT_DIR` set: `GIT_SSH_COMMAND`, `GIT_CONFIG_GLOBAL`,
/// `SSH_ASKPASS`, `SSL_CERT_FILE` or `LD_PRELOAD` would each run or trust what the agent chose.
/// What is kept: the locale, who the user is, the ssh agent's socket (the user's own keys),
/// the temporary directory, and proxies (which see only TLS they cannot read).
const KEPT_ENV: &[&str] = &[
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "TZ",
    "USER",
    "LOGNAME",
    "SSH_AUTH_SOCK",
    "TMPDIR",
    "http_proxy",
    "https_proxy",
    "HTTPS_PROXY",
    "all_proxy",
    "ALL_PROXY",
    "no_proxy",
    "NO_PROXY",
];

/// `git`, from the system's places, with an environment the caller cannot steer: only the
/// variables of [`KEPT_ENV`], the system's PATH, and HOME the user's own from the password
/// database (the user's ~/.gitconfig, with its credential helpers, not one a settings file
/// points at).
fn git_command() -> Command {
    // The system's PATH, never the caller's, which a project's `.claude/settings.json` can set
    // for the hook that starts a background sync: where git is looked for, and what it gets.
    let git = programs::SYSTEM_DIRS
        .iter()
        .map(|dir| Path::new(dir).join("git"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("/usr/bin/git"));
    let mut cmd = Command::new(git);
    // Never in the project: git looks for a repository where it runs, and reads its config.
    cmd.current_dir("/");
    cmd.env_clear();
    for name in KEPT_ENV {
        if let Some(value) = std::env::var_os(name) {
            cmd.env(name, value);
        }
    }
    cmd.env("PATH", programs::system_path());
    if let Some(home) = user::passwd_home() {
        cmd.env("HOME", home);
    }
    cmd
}

/// Who the commits git makes are by: the author and committer both.
pub(crate) struct Ident {
    pub name: String,
    pub email: String,
}

/// A git command that ran to its end, whatever its status.
pub(crate) struct Ran {
    pub status: Outcome,
    pub stdout: Vec<u8>,
    /// Standard error's first line that says something (with any password hidden).
    pub first: String,
}

/// Runs git (in the repository `repo`, if one) within `deadline`: hooks off, no prompts, only
/// the transports vigil needs (no `ext::`, whose URL is a command). `ident` is asked for once
/// the command is built. At most `output` bytes of standard output are kept. `file_limit` caps
/// every file git writes (RLIMIT_FSIZE): a fetch cannot fill the disk. An error only when git
/// could not run or was cut off; its status is the caller's to judge.
pub(crate) fn run(
    repo: Option<&Path>,
    args: &[&str],
    input: Option<Vec<u8>>,
    deadline: Deadline,
    output: usize,
    file_limit: Option<u64>,
    ident: impl FnOnce() -> Ident,
) -> Result<Ran> {
    let mut cmd = git_command();
    if let Some(repo) = repo {
        cmd.arg("--git-dir").arg(repo);
    }
    for setting in [
        "core.hooksPath=/dev/null",
        "gc.auto=0",
        "maintenance.auto=false",
        "fetch.unpackLimit=1",
        "protocol.allow=never",
        "protocol.https.allow=always",
        "protocol.http.allow=always",
        "protocol.ssh.allow=always",
        "protocol.git.allow=always",
        "protocol.file.allow=always",
        "core.askPass=",
        "credential.interactive=false",
    ] {
        cmd.arg("-c").arg(setting);
    }
    cmd.args(args);
    let ident = ident();
    cmd.env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_NO_LAZY_FETCH", "1")
        .env("GIT_AUTHOR_NAME", &ident.name)
        .env("GIT_AUTHOR_EMAIL", &ident.email)
        .env("GIT_COMMITTER_NAME", &ident.name)
        .env("GIT_COMMITTER_EMAIL", &ident.email);
    if let Some(limit) = file_limit {
        process::limit_file_size(&mut cmd, limit);
    }
    // The subcommand is what a line needs; the rest (URLs, refspecs) is said around it.
    let shown = format!("git {}", args.first().unwrap_or(&""));
    if deadline.passed() {
        return Err(Error::Io(format!(
            "`{shown}` was not started: the deadline has passed"
        )));
    }
    let left = deadline.remaining();
    let done = process::run_with_input(cmd, input, left, false, output)
        .map_err(|e| Error::Io(format!("cannot run `{shown}`: {e}")))?;
    if done.outcome == Outcome::TimedOut {
        return Err(Error::Io(format!(
            "`{shown}` was cut off at the deadline ({}s)",
            left.as_secs_f64().ceil()
        )));
    }
    let stderr = String::from_utf8_lossy(&done.errors);
    let first = stderr
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("no message");
    Ok(Ran {
        status: done.outcome,
        stdout: done.output,
        first: redact(first),
    })
}

/// `text` with the password of every URL in it hidden (`https://user:secret@host` becomes
/// `https://user:***@host`): a remote given with its token is said, and git's messages quote it.
pub(crate) fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (before, after) = rest.split_at(at + 3);
        out.push_str(before);
        let authority_end = after
            .find(|c: char| c == '/' || c.is_whitespace())
            .unwrap_or(after.len());
        let authority = &after[..authority_end];
        match authority.rfind('@') {
            Some(userinfo_end) => {
                let userinfo = &authority[..userinfo_end];
                match userinfo.split_once(':') {
                    Some((user, _)) => out.push_str(&format!("{user}:***")),
                    None => out.push_str("***"),
                }
                out.push_str(&authority[userinfo_end..]);
            }
            None => out.push_str(authority),
        }
        rest = &after[authority_end..];
    }
    out.push_str(rest);
    out
}
