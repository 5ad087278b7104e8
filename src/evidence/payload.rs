//! What a marker says (SPEC §5): the payload's schema, the check it is for, who wrote it and
//! what ran, and why a gate denies one. Read and written by `marker`, signed by `signing`,
//! carried in git notes by `notes`.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::state::project;
use crate::sys::user;

/// The payload schema vigil writes: v2 adds `origin`. v1 payloads stay readable.
pub(crate) const SCHEMA: &str = "vigil.marker/v2";
/// The schemas vigil reads.
pub(crate) const SCHEMAS: [&str; 2] = ["vigil.marker/v1", "vigil.marker/v2"];
/// A payload larger than this is malformed.
pub(crate) const MAX_PAYLOAD: u64 = 64 * 1024;
/// How far in the future `created_at` may be before it counts as forged or broken.
pub(crate) const CLOCK_SKEW: Duration = Duration::from_secs(300);
pub(crate) const DEFAULT_MAX_AGE: Duration = Duration::from_secs(24 * 3600);
/// A note longer than this is refused, and a recorded command is cut to it, so that every
/// payload the writer makes stays well inside `MAX_PAYLOAD`.
pub(crate) const MAX_NOTE: usize = 4096;

/// A check name: `^[A-Za-z0-9._-]{1,64}$`, not `.` or `..`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckName(String);

impl CheckName {
    pub fn parse(raw: &str) -> Result<CheckName> {
        if !project::is_file_name(raw, 64) {
            return Err(Error::usage(format!(
                "check name {raw:?} is not 1 to 64 of A-Z a-z 0-9 . _ - (and not . or ..)"
            )));
        }
        Ok(CheckName(raw.to_string()))
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for CheckName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Status {
    Passed,
    Failed,
    Blocked,
    Aborted,
}

impl Status {
    pub(crate) fn parse(raw: &str) -> Result<Status> {
        match raw {
            "passed" => Ok(Status::Passed),
            "failed" => Ok(Status::Failed),
            "blocked" => Ok(Status::Blocked),
            "aborted" => Ok(Status::Aborted),
            _ => Err(Error::usage(format!(
                "status {raw:?} is not passed, failed, blocked or aborted"
            ))),
        }
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Status::Passed => "passed",
            Status::Failed => "failed",
            Status::Blocked => "blocked",
            Status::Aborted => "aborted",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Writer {
    pub name: String,
    pub version: String,
    pub host: String,
    pub user: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Run {
    /// The command as a shell would show it, each argument quoted when it needs to be.
    pub command: String,
    pub exit_code: i32,
    pub duration_ms: u64,
    pub output_sha256: String,
    /// Where the command ran; absent in markers written before vigil recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolation: Option<Isolation>,
    /// What kept the command from the user's rights (SPEC §9); absent in markers written
    /// before vigil confined commands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confinement: Option<Confinement>,
    /// `run --hold-from REF` (SPEC §11): the held paths were restored from REF for the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold: Option<HeldRun>,
}

/// The hold a `run --hold-from` ran under (SPEC §11).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct HeldRun {
    /// The commit the held paths were taken from, or `hold`: the human's hold on this machine.
    pub from: String,
    /// What was held: paths and globs from the repository's top.
    pub patterns: Vec<String>,
    /// How many files were held, and their digest (`held::digest`).
    pub files: u64,
    pub digest: String,
    /// Files under a held pattern that the run's copy left out (new tests), the first 20.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<String>,
}

/// What confined `run`'s command (SPEC §9).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Confinement {
    /// bubblewrap: it wrote only the snapshot and a private temporary directory, saw no key,
    /// no state home and no network unless asked.
    Bubblewrap,
    /// None: it ran with the rights of whoever ran the writer (in place, in CI; or where no
    /// confinement could be had, as the writer said on stderr).
    None,
}

/// Where `run` ran its command (SPEC §5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Isolation {
    /// In a private copy of exactly the hashed content, with a clean environment.
    Snapshot,
    /// In the worktree itself: for writers the agent cannot reach (CI).
    InPlace,
}

/// The payload, `schemas/marker.schema.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Payload {
    pub schema: String,
    pub check: String,
    pub(crate) status: Status,
    pub subject: String,
    pub created_at: String,
    pub(crate) writer: Writer,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) run: Option<Run>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Where the writer ran, when it knows (a CI run); v2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) origin: Option<Origin>,
    /// `write --command`: the command a writer that ran nothing itself vouches was run (a CI
    /// job's); `run.command` is the one a `run` ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// With `--sign-key`: over the canonical JSON of every other field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) signature: Option<Signature>,
}

impl Payload {
    /// The command the payload records: the one `run` ran, else the one `write --command`
    /// named.
    pub(crate) fn command(&self) -> Option<&str> {
        self.run
            .as_ref()
            .map(|run| run.command.as_str())
            .or(self.command.as_deref())
    }
}

/// Whether a recorded command is `wanted` (SPEC §5, `--require-marker CHECK=CMD`), either of
/// them possibly written `sh -c '…'`. Plain commands (words and quotes only) compare as the
/// shell words POSIX `sh` would split them into, quoting and spacing aside. A command with
/// any other shell syntax (a newline, `; & | < > ( ) $`, a backquote, a glob, a backslash) is
/// compared by its exact text instead: two spellings of it need not run the same thing (a
/// newline where a space was runs two commands; a quoted `&&` is an argument). Text that does
/// not split (an open quote) is no match.
pub(crate) fn same_command(recorded: &str, wanted: &str) -> bool {
    /// The command, with one `sh -c '…'` taken off.
    fn inner(text: &str) -> Option<String> {
        let words = shlex::split(text)?;
        Some(match words.as_slice() {
            [sh, c, inner] if sh == "sh" && c == "-c" => inner.clone(),
            _ => text.to_string(),
        })
    }
    let (Some(recorded), Some(wanted)) = (inner(recorded), inner(wanted)) else {
        return false;
    };
    if needs_shell(&recorded) || needs_shell(&wanted) {
        return recorded.trim() == wanted.trim() && !wanted.trim().is_empty();
    }
    match (shlex::split(&recorded), shlex::split(&wanted)) {
        (Some(recorded), Some(wanted)) => !wanted.is_empty() && recorded == wanted,
        _ => false,
    }
}

/// Whether a command uses shell syntax beyond words and quotes: a writer runs it as
/// `sh -c '…'`, and it is bound by its exact text.
pub(crate) fn needs_shell(command: &str) -> bool {
    command.contains([
        '\n', '\r', ';', '&', '|', '<', '>', '(', ')', '$', '`', '*', '?', '[', ']', '{', '}', '~',
        '#', '\\', '!',
    ])
}

/// Where a payload was written and published from (v2): a CI run, as its own environment
/// says. It informs; it is covered by the signature like every other field.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Origin {
    /// The CI run's page (GitHub Actions: the run, and its attempt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_url: Option<String>,
    /// The machine that ran it (`RUNNER_NAME`, and its environment when a job names one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner: Option<String>,
    /// The workflow file and the ref it came from (`GITHUB_WORKFLOW_REF`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
    /// The commit the workflow file was read from (`GITHUB_WORKFLOW_SHA`): what decided the
    /// command that ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_sha: Option<String>,
}

/// Where this writer runs, from a CI's own variables; `None` outside CI.
pub(crate) fn origin() -> Option<Origin> {
    let var = |name: &str| {
        std::env::var(name)
            .ok()
            .map(|v| v.trim().chars().take(300).collect::<String>())
            .filter(|v| !v.is_empty())
    };
    if var("GITHUB_ACTIONS").as_deref() != Some("true") {
        return None;
    }
    let run_url = match (
        var("GITHUB_SERVER_URL"),
        var("GITHUB_REPOSITORY"),
        var("GITHUB_RUN_ID"),
    ) {
        (Some(server), Some(repository), Some(run)) => Some(match var("GITHUB_RUN_ATTEMPT") {
            Some(attempt) => format!("{server}/{repository}/actions/runs/{run}/attempts/{attempt}"),
            None => format!("{server}/{repository}/actions/runs/{run}"),
        }),
        _ => None,
    };
    Some(Origin {
        run_url,
        runner: var("RUNNER_NAME"),
        workflow: var("GITHUB_WORKFLOW_REF"),
        workflow_sha: var("GITHUB_WORKFLOW_SHA"),
    })
}

/// Where a payload that passed was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// `.vigil/markers/<check>/`.
    Local,
    /// A git note, published and synced (`marker-writer sync`).
    Notes,
}

/// Why verification denied: the first reason found (SPEC §5).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Denial {
    /// The check has no marker at all.
    Missing,
    /// Markers exist, but for other content; or a payload names another subject than its file.
    SubjectMismatch(String),
    Malformed(String),
    Status(Status),
    Stale(String),
    /// A verify key is configured and the signature does not hold.
    BadSignature(String),
    /// No marker, but the project's `.vigil/markers/` (never read now) holds one: named, so
    /// the human knows why it stopped counting.
    Moved(String),
    /// A passed marker for this content, written by another command than the one required.
    CommandMismatch(String),
}

impl Denial {
    /// The reason word of SPEC §5: `missing`, `subject mismatch`, `malformed`, `status <s>`, `stale`.
    pub(crate) fn reason(&self) -> String {
        match self {
            Denial::Missing | Denial::Moved(_) => "missing".into(),
            Denial::SubjectMismatch(_) => "subject mismatch".into(),
            Denial::Malformed(_) => "malformed".into(),
            Denial::Status(status) => format!("status {}", status.as_str()),
            Denial::Stale(_) => "stale".into(),
            Denial::BadSignature(_) => "bad signature".into(),
            Denial::CommandMismatch(_) => "command mismatch".into(),
        }
    }

    /// The reason word and what it means, in one line.
    pub(crate) fn describe(&self) -> String {
        match self {
            Denial::Missing => "missing: there is no marker for this check".into(),
            Denial::Status(status) => {
                format!(
                    "status {}: the last run for this content did not pass",
                    status.as_str()
                )
            }
            Denial::SubjectMismatch(detail)
            | Denial::Malformed(detail)
            | Denial::Stale(detail)
            | Denial::BadSignature(detail)
            | Denial::CommandMismatch(detail)
            | Denial::Moved(detail) => {
                format!("{}: {detail}", self.reason())
            }
        }
    }
}

/// The `signature` field of a payload.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Signature {
    pub alg: String,
    /// The first 16 hex digits of the sha256 of the public key.
    pub key_id: String,
    /// The 64-byte signature, in hex.
    pub sig: String,
}

/// Who wrote a marker: this program, this host, this user.
pub(crate) fn writer() -> Writer {
    let host = user::host_name();
    let user = user::user_name();
    Writer {
        name: "marker-writer".to_string(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        host,
        user,
    }
}
