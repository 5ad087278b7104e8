//! Markers that travel (issue 19): a payload published as a git note, keyed by the git tree id
//! of the content it vouches for, so the same content on another machine finds it.
//!
//! Every git command here runs in a bare repository vigil owns, in the protected state
//! (`<protected>/notes.git`), never in the project's: the project's `.git` (its config, hooks,
//! alternates) is the agent's to write, and `git fetch` or `git push` there would run what it
//! names. Notes live under `refs/notes/vigil/<check>`, one compact JSON payload per line, so
//! git's `cat_sort_uniq` merge keeps every payload two writers published.
//!
//! No gate runs git (SPEC §9): after each publish and sync, the notes of a check are written
//! out as plain files, `<protected>/notes/<check>/<key>.jsonl`, and `marker::verify` reads
//! those. What they hold came from a remote anyone with push access could write, so a payload
//! from notes is judged exactly as a local marker is (`marker::judge`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::evidence::payload;
use crate::evidence::payload::{CheckName, Denial, Payload};
use crate::evidence::subject;
use crate::state::project::Project;
use crate::sys::atomic;
use crate::sys::atomic::Durability;
use crate::sys::files;
use crate::sys::git::Repository;
use crate::sys::lock::FileLock;
use crate::sys::process;
use crate::sys::process::Outcome;
use crate::sys::time::Deadline;
use crate::sys::user;

/// Where vigil's notes refs live, locally and on a remote.
pub const REF_PREFIX: &str = "refs/notes/vigil/";
/// Where a sync fetches a remote's notes refs to, before merging them into the local ones.
/// Under `refs/notes/`, as `git notes --ref` wants a ref it reads (it puts `refs/notes/` before
/// any other name), and outside `refs/notes/vigil/`, which is pushed.
const FETCHED_PREFIX: &str = "refs/notes/vigil-fetched/";
/// The largest note read: the payloads published for one content.
pub const MAX_NOTE: u64 = 1 << 20;
/// The most bytes of notes one check may hold in all (a small pack can name one large blob
/// from thousands of notes; each would be written out).
pub const MAX_TOTAL: u64 = 16 << 20;
/// The most checks a sync merges and writes out (those it had first, then by name): with the
/// total per check, what a remote can make a sync write is bounded (32 × 16 MiB).
const MAX_CHECKS: usize = 32;
/// The most notes of one check written out; beyond, the oldest are left out (and said).
const MAX_NOTES: usize = 4096;
/// How often a push that lost a race is merged and tried again.
const PUSH_ATTEMPTS: usize = 5;
/// A cache line vigil wrote itself, for a note it could not take (too large, unreadable).
const ERROR_LINE: &str = "!";
/// The file that says a check's notes could not be read at all, and why.
const BROKEN: &str = "broken";

/// The bare repository the notes are kept in.
pub fn repository(project: &Project) -> PathBuf {
    project.repository_state().join("notes.git")
}

/// The directory the notes of a check are written out to, for the gates.
pub fn cache_dir(project: &Project, check: &CheckName) -> PathBuf {
    project
        .repository_state()
        .join("notes")
        .join(check.as_str())
}

/// The checks whose notes are written out for the gates.
pub fn written_checks(project: &Project) -> Vec<CheckName> {
    std::fs::read_dir(project.repository_state().join("notes"))
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| CheckName::parse(e.file_name().to_str()?).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The git object id a subject is published under: the tree id of `git-tree:<id>`. Other
/// subjects (sha256 of a file or of stdin) name no git object and do not travel.
pub fn object_id(subject_id: &str) -> Option<&str> {
    let id = subject_id.strip_prefix("git-tree:")?;
    (matches!(id.len(), 40 | 64) && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
        .then_some(id)
}

/// Where git is looked for, and the PATH it runs with: the system's, never the caller's, which
/// a project's `.claude/settings.json` can set for the hook that starts a background sync.
const SYSTEM_PATH: &str = "/usr/bin:/usr/local/bin:/opt/homebrew/bin:/bin:/usr/sbin:/sbin";

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
/// variables of [`KEPT_ENV`], the system PATH, and HOME the user's own from the password
/// database (the user's ~/.gitconfig, with its credential helpers, not one a settings file
/// points at).
fn git_command() -> Command {
    let git = SYSTEM_PATH
        .split(':')
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
    cmd.env("PATH", SYSTEM_PATH);
    if let Some(home) = user::passwd_home() {
        cmd.env("HOME", home);
    }
    cmd
}

/// How much of a git command's standard output is kept, unless a call says otherwise.
const OUTPUT: usize = 64 << 20;

/// A git command that ran to its end, whatever its status.
struct Ran {
    status: Outcome,
    stdout: Vec<u8>,
    /// Standard error's first line that says something.
    first: String,
}

/// Runs git in the notes repository within `deadline`: hooks off, no prompts, only the
/// transports vigil needs (no `ext::`, whose URL is a command). `file_limit` caps every file
/// git writes (RLIMIT_FSIZE): a fetch cannot fill the disk. An error only when git could not
/// run or was cut off; its status is the caller's to judge.
fn run_git(
    repo: Option<&Path>,
    args: &[&str],
    input: Option<Vec<u8>>,
    deadline: Deadline,
    output: usize,
    file_limit: Option<u64>,
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
    let host = ident_host();
    cmd.env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_NO_LAZY_FETCH", "1")
        .env("GIT_AUTHOR_NAME", "marker-writer")
        .env("GIT_AUTHOR_EMAIL", format!("marker-writer@{host}"))
        .env("GIT_COMMITTER_NAME", "marker-writer")
        .env("GIT_COMMITTER_EMAIL", format!("marker-writer@{host}"));
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

/// The host name for the identity of the notes commits, as git takes it in an email (no `<`,
/// `>` or line break, whatever the host name or `$HOSTNAME` says).
fn ident_host() -> String {
    let host: String = payload::writer()
        .host
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
        .take(64)
        .collect();
    if host.is_empty() {
        "localhost".to_string()
    } else {
        host
    }
}

/// `run_git` that must succeed: its standard output, else one line of why.
fn git_bytes(
    repo: &Path,
    args: &[&str],
    input: Option<Vec<u8>>,
    deadline: Deadline,
    output: usize,
) -> Result<Vec<u8>> {
    let ran = run_git(Some(repo), args, input, deadline, output, None)?;
    if ran.status.success() {
        return Ok(ran.stdout);
    }
    Err(failed(args, &ran))
}

fn failed(args: &[&str], ran: &Ran) -> Error {
    Error::Io(format!(
        "`git {}` failed (exit {}): {}",
        args.first().unwrap_or(&""),
        ran.status.code(),
        ran.first
    ))
}

/// `git_bytes` as text.
fn git(repo: &Path, args: &[&str], input: Option<Vec<u8>>, deadline: Deadline) -> Result<String> {
    git_bytes(repo, args, input, deadline, OUTPUT)
        .map(|out| String::from_utf8_lossy(&out).into_owned())
}

/// `text` with the password of every URL in it hidden (`https://user:secret@host` becomes
/// `https://user:***@host`): a remote given with its token is said, and git's messages quote it.
pub fn redact(text: &str) -> String {
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

/// Refuses a notes repository the agent could write into. Its config is git's to obey:
/// `protocol.ext.allow` with a `url.*.insteadOf` there turns the next fetch into a command of
/// the agent's, run wherever the sync runs (CI's signing job included). That is so when the
/// protected state fell back into the project, or the state home is inside it.
fn refuse_agent_writable(project: &Project) -> Result<()> {
    let place = project.protected();
    if place.agent_writable() {
        return Err(Error::input(format!(
            "the protected state ({}) is inside the project, where the agent can write the notes repository's config; set VIGIL_STATE_HOME to a directory outside it",
            place.dir.display()
        )));
    }
    Ok(())
}

/// The lock every change of the notes repository and of what is written out from it is made
/// under: two publishes at once would each append to the same note and one line would be lost.
fn lock(project: &Project, deadline: Deadline) -> Result<FileLock> {
    let dir = project.repository_state();
    // A worktree's main checkout may have no protected state yet.
    files::make_private_dir(&dir).map_err(|e| Error::io("create", &dir, &e))?;
    let path = dir.join("notes.lock");
    FileLock::acquire(&path, deadline.remaining()).map_err(|e| Error::io("lock", &path, &e))
}

/// The config of the notes repository, as vigil writes it. git obeys whatever is there
/// (`protocol.ext.allow` with a `url.*.insteadOf` makes a fetch a command), so any other
/// content is refused.
const CONFIG: &str = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = true\n";

/// The notes repository, made when missing, and refused where the agent could write it or
/// where it is not as vigil made it (its config, or a file that sends git to another
/// repository's objects or config).
fn ensure(project: &Project, deadline: Deadline) -> Result<PathBuf> {
    refuse_agent_writable(project)?;
    let repo = repository(project);
    if !repo.join("HEAD").is_file() {
        let _held = lock(project, deadline)?;
        if !repo.join("HEAD").is_file() {
            // Made beside it and renamed into place whole: no one sees git's own config.
            let staging = repo.with_file_name(format!(".notes.git.{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&staging);
            std::fs::create_dir_all(&staging).map_err(|e| Error::io("create", &staging, &e))?;
            // No template: no sample hooks, nothing but what git needs.
            git(
                &staging,
                &["init", "--bare", "-q", "--template="],
                None,
                deadline,
            )?;
            let config = staging.join("config");
            atomic::write_atomic(&config, CONFIG.as_bytes(), 0o600)
                .map_err(|e| Error::io("write", &config, &e))?;
            // What is there has no HEAD: the rest of an init that was cut off.
            let _ = std::fs::remove_dir_all(&repo);
            std::fs::rename(&staging, &repo).map_err(|e| Error::io("rename", &staging, &e))?;
        }
    }
    let config = repo.join("config");
    let as_written = files::open_state(&config)
        .ok()
        .and_then(|file| files::read_capped(file, 4096, "the config", &config).ok())
        .is_some_and(|bytes| bytes == CONFIG.as_bytes());
    let redirected = ["commondir", "objects/info/alternates"]
        .iter()
        .find(|name| std::fs::symlink_metadata(repo.join(name)).is_ok());
    if !as_written || redirected.is_some() {
        let what = redirected.map_or_else(|| "config".to_string(), |name| name.to_string());
        return Err(Error::input(format!(
            "{} is not as vigil made it (its {what} was changed); nothing is run in it: remove it, and the next sync makes it again",
            repo.display()
        )));
    }
    Ok(repo)
}

fn notes_ref(check: &CheckName) -> String {
    format!("{REF_PREFIX}{check}")
}

/// Publishes a payload: appends it, one line of JSON, to the note of its content under
/// `refs/notes/vigil/<check>`, then writes the check's notes out for the gates. A worktree
/// subject only: it is the one whose id is a git object id.
pub fn publish(project: &Project, payload: &Payload, deadline: Deadline) -> Result<()> {
    let check = CheckName::parse(&payload.check)?;
    let Some(object) = object_id(&payload.subject) else {
        return Err(Error::usage(format!(
            "--publish needs a worktree subject (a git tree id, the same on every machine); {} is not one",
            payload.subject
        )));
    };
    let repo = ensure(project, deadline)?;
    let line = serde_json::to_string(payload).expect("a payload serializes");
    let reference = notes_ref(&check);
    let _held = lock(project, deadline)?;
    // A note too large to be read (junk pushed over it) is replaced, not appended to: the
    // payload would be as lost in it as the others.
    let existing = git(
        &repo,
        &["notes", "--ref", &reference, "list", object],
        None,
        deadline,
    )
    .ok();
    let unreadable = existing.is_some_and(|blob| {
        git(&repo, &["cat-file", "-s", blob.trim()], None, deadline)
            .ok()
            .and_then(|size| size.trim().parse::<u64>().ok())
            .is_none_or(|size| size > MAX_NOTE)
    });
    let mut args = vec!["notes", "--ref", &reference];
    args.extend(if unreadable {
        &["add", "-f"][..]
    } else {
        &["append"][..]
    });
    args.extend(["-m", &line, object]);
    git(&repo, &args, None, deadline)?;
    materialize(project, &repo, &check, deadline)?;
    Ok(())
}

/// What `materialize` wrote out.
struct Written {
    contents: usize,
    /// Contents whose notes were left out, the oldest beyond [`MAX_NOTES`].
    left_out: usize,
}

/// Writes the notes of `check` out as `<key>.jsonl` files (replacing what was there), or,
/// when they cannot be read, the reason in `broken`. Called under the lock.
fn materialize(
    project: &Project,
    repo: &Path,
    check: &CheckName,
    deadline: Deadline,
) -> Result<Written> {
    let dir = cache_dir(project, check);
    std::fs::create_dir_all(&dir).map_err(|e| Error::io("create", &dir, &e))?;
    let broken = dir.join(BROKEN);
    let written = read_notes(repo, &notes_ref(check), deadline).and_then(|(notes, left_out)| {
        let mut keep = std::collections::HashSet::new();
        for (object, note) in &notes {
            deadline.check("writing the notes out")?;
            let key = subject::key(&format!("git-tree:{object}"));
            let name = format!("{key}.jsonl");
            let path = dir.join(&name);
            let text = match note {
                Note::Text(bytes) => bytes.clone(),
                Note::Unreadable(why) => format!("{ERROR_LINE}{why}\n").into_bytes(),
            };
            // A note that did not change is not written again: a sync rewrites nothing.
            if std::fs::read(&path).ok().as_deref() != Some(text.as_slice()) {
                // What is written here can be made again from the notes repository by the
                // next sync: no wait for the disk.
                atomic::write_atomic_as(&path, &text, 0o600, Durability::Skip)
                    .map_err(|e| Error::io("write", &path, &e))?;
            }
            keep.insert(name);
        }
        for entry in std::fs::read_dir(&dir).map_err(|e| Error::io("read", &dir, &e))? {
            let entry = entry.map_err(|e| Error::io("read", &dir, &e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(".jsonl") && !keep.contains(&name) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
        Ok(Written {
            contents: notes.len(),
            left_out,
        })
    });
    match written {
        Ok(written) => {
            let _ = std::fs::remove_file(&broken);
            Ok(written)
        }
        Err(e) => {
            let _ = atomic::write_atomic(&broken, e.to_string().as_bytes(), 0o600);
            Err(e)
        }
    }
}

/// A note as git holds it: its bytes, or why they are not taken.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Note {
    Text(Vec<u8>),
    Unreadable(String),
}

/// Whether `id` is a git object id as git prints it.
/// The object a path in a notes tree annotates, as git reads it: the path without its `/`s
/// (any fanout), in any case (`4E85…` is the note of `4e85…`, so a decoy in capitals names it
/// too). `None` when that is no object id.
fn object_of_note_path(path: &str) -> Option<String> {
    let object = path
        .chars()
        .filter(|c| *c != '/')
        .collect::<String>()
        .to_ascii_lowercase();
    is_object_id(&object).then_some(object)
}

fn is_object_id(id: &str) -> bool {
    matches!(id.len(), 40 | 64) && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// How many bytes of notes one `cat-file --batch` is asked for: git's answer is checked whole
/// against what was asked, so it must fit in what is kept of its output.
const BATCH: u64 = 4 << 20;

/// The notes under `reference`: (annotated object id, note), and how many contents were left
/// out (beyond [`MAX_NOTES`], the ones whose notes were last changed longest ago). A ref that
/// is not a history of notes, or an answer of git's that is not what was asked, is an error:
/// nothing is read from it rather than part of it.
fn read_notes(
    repo: &Path,
    reference: &str,
    deadline: Deadline,
) -> Result<(Vec<(String, Note)>, usize)> {
    // `git notes --ref` reads any other name as one under refs/notes/.
    debug_assert!(reference.starts_with("refs/notes/"), "{reference}");
    let kind = git(repo, &["cat-file", "-t", reference], None, deadline)?;
    if kind.trim() != "commit" {
        return Err(Error::input(format!(
            "{reference} names a {}, not a history of notes",
            kind.trim()
        )));
    }
    let listed = git(repo, &["notes", "--ref", reference, "list"], None, deadline)?;
    let mut pairs: Vec<(String, String)> = listed
        .lines()
        .filter_map(|l| {
            let (blob, object) = l.split_once(' ')?;
            let object = object.trim();
            (is_object_id(blob) && is_object_id(object))
                .then(|| (blob.to_string(), object.to_string()))
        })
        .collect();
    let mut left_out = 0;
    if pairs.len() > MAX_NOTES {
        let newest = newest_annotated(repo, reference, deadline)?;
        left_out = pairs.len() - MAX_NOTES;
        pairs.retain(|(_, object)| newest.contains(object));
        pairs.truncate(MAX_NOTES);
    }
    if pairs.is_empty() {
        return Ok((Vec::new(), left_out));
    }
    let request: String = pairs.iter().map(|(blob, _)| format!("{blob}\n")).collect();
    let sizes = git(
        repo,
        &["cat-file", "--batch-check"],
        Some(request.into_bytes()),
        deadline,
    )?;
    let mut notes: BTreeMap<String, Note> = BTreeMap::new();
    let mut batch: Vec<(String, u64)> = Vec::new();
    let mut batched = 0;
    let mut total: u64 = 0;
    let mut answers = sizes.lines();
    for (blob, _) in &pairs {
        let line = answers.next().unwrap_or("");
        let mut fields = line.split(' ');
        if fields.next() != Some(blob.as_str()) {
            return Err(Error::input(format!(
                "git answered {line:?} for the note {blob}; the notes are not read"
            )));
        }
        let kind = fields.next();
        let size: Option<u64> = fields.next().and_then(|s| s.parse().ok());
        match (kind, size) {
            (Some("blob"), Some(size)) if size <= MAX_NOTE => {
                total += size;
                if total > MAX_TOTAL {
                    return Err(Error::input(format!(
                        "the notes of {reference} are over {} MiB in all; not read",
                        MAX_TOTAL >> 20
                    )));
                }
                if batched + size > BATCH {
                    read_batch(repo, &std::mem::take(&mut batch), &mut notes, deadline)?;
                    batched = 0;
                }
                batched += size;
                batch.push((blob.clone(), size));
            }
            (Some("blob"), Some(size)) => {
                notes.insert(
                    blob.clone(),
                    Note::Unreadable(format!(
                        "the note is {size} bytes, over the {MAX_NOTE} limit"
                    )),
                );
            }
            _ => {
                notes.insert(
                    blob.clone(),
                    Note::Unreadable("the note is not a blob".to_string()),
                );
            }
        }
    }
    read_batch(repo, &batch, &mut notes, deadline)?;
    let notes = pairs
        .into_iter()
        .map(|(blob, object)| {
            let note = notes
                .get(&blob)
                .cloned()
                .unwrap_or_else(|| Note::Unreadable("the note could not be read".to_string()));
            (object, note)
        })
        .collect();
    Ok((notes, left_out))
}

/// Reads the blobs of `batch` (id, size as git said) with one `cat-file --batch`, each answer
/// checked to be the one asked for, of the size said, in full.
fn read_batch(
    repo: &Path,
    batch: &[(String, u64)],
    notes: &mut BTreeMap<String, Note>,
    deadline: Deadline,
) -> Result<()> {
    if batch.is_empty() {
        return Ok(());
    }
    let request: String = batch.iter().map(|(blob, _)| format!("{blob}\n")).collect();
    let expected: u64 = batch.iter().map(|(_, size)| size + 100).sum();
    let out = git_bytes(
        repo,
        &["cat-file", "--batch"],
        Some(request.into_bytes()),
        deadline,
        usize::try_from(expected + 4096).unwrap_or(usize::MAX),
    )?;
    let mut rest = out.as_slice();
    for (blob, size) in batch {
        let header = format!("{blob} blob {size}\n");
        let size = usize::try_from(*size).unwrap_or(usize::MAX);
        let whole = rest.strip_prefix(header.as_bytes()).and_then(|after| {
            let body = after.get(..size)?;
            let next = after.get(size..)?.strip_prefix(b"\n")?;
            Some((body, next))
        });
        let Some((body, next)) = whole else {
            return Err(Error::input(format!(
                "git's answer for the note {blob} is not the note asked for; the notes are not read"
            )));
        };
        notes.insert(blob.clone(), Note::Text(body.to_vec()));
        rest = next;
    }
    Ok(())
}

/// The objects whose notes were changed most recently, at most [`MAX_NOTES`], newest first:
/// the paths each commit of the notes history changed, in git's order (newest commit first;
/// a merge's own changes are those of the commits it merges).
fn newest_annotated(
    repo: &Path,
    reference: &str,
    deadline: Deadline,
) -> Result<std::collections::HashSet<String>> {
    let changed = git(
        repo,
        &[
            "log",
            "--format=",
            "--name-only",
            "--no-renames",
            reference,
            "--",
        ],
        None,
        deadline,
    )?;
    if changed.len() >= OUTPUT {
        return Err(Error::input(format!(
            "the history of {reference} is too long to tell which notes are newest"
        )));
    }
    let mut newest = std::collections::HashSet::new();
    for path in changed.lines() {
        if let Some(object) = object_of_note_path(path) {
            newest.insert(object);
            if newest.len() == MAX_NOTES {
                break;
            }
        }
    }
    Ok(newest)
}

/// What a check's written-out notes say about one subject: each payload line, parsed, or why
/// it cannot be (`malformed`). Nothing published for it: empty.
pub fn read(
    project: &Project,
    check: &CheckName,
    subject_id: &str,
) -> Vec<std::result::Result<Payload, Denial>> {
    let dir = cache_dir(project, check);
    if let Ok(why) = std::fs::read_to_string(dir.join(BROKEN)) {
        return vec![Err(Denial::Malformed(format!(
            "the notes of `{check}` cannot be read: {}",
            why.trim()
        )))];
    }
    let path = dir.join(format!("{}.jsonl", subject::key(subject_id)));
    let bytes = match files::open_state(&path) {
        Ok(file) => match files::read_capped(file, MAX_NOTE + 4096, "the note", &path) {
            Ok(bytes) => bytes,
            Err(e) => return vec![Err(Denial::Malformed(e.to_string()))],
        },
        Err(_) => return Vec::new(),
    };
    parse_lines(&String::from_utf8_lossy(&bytes))
}

fn parse_lines(text: &str) -> Vec<std::result::Result<Payload, Denial>> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|line| {
            if let Some(why) = line.strip_prefix(ERROR_LINE) {
                return Err(Denial::Malformed(why.to_string()));
            }
            serde_json::from_str::<Payload>(line)
                .map_err(|e| Denial::Malformed(format!("a note is not a valid marker: {e}")))
        })
        .collect()
}

/// Whether any content has notes for this check (so a denial for this content is `subject
/// mismatch`, not `missing`).
pub fn has_any(project: &Project, check: &CheckName) -> bool {
    std::fs::read_dir(cache_dir(project, check)).is_ok_and(|entries| {
        entries
            .flatten()
            .any(|e| e.file_name().to_string_lossy().ends_with(".jsonl"))
    })
}

/// Every published subject of a check and its payloads (those that parse), for `show --all`.
pub fn published(project: &Project, check: &CheckName) -> Vec<(String, Vec<Payload>)> {
    let Ok(entries) = std::fs::read_dir(cache_dir(project, check)) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in entries.flatten().take(MAX_NOTES) {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(key) = name.strip_suffix(".jsonl") else {
            continue;
        };
        let Some(id) = key.strip_prefix("git-tree-") else {
            continue;
        };
        let subject = format!("git-tree:{id}");
        let payloads: Vec<Payload> = read(project, check, &subject)
            .into_iter()
            .flatten()
            .collect();
        found.push((subject, payloads));
    }
    found
}

/// Where a sync goes: a URL, and whether it was read from the project's config (a remote's
/// name), which the agent writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Remote {
    pub url: String,
    pub from_config: bool,
}

/// Where a sync goes: a remote of the project's repository by name, or a URL. Read within
/// `deadline`.
pub fn remote_url(project: &Project, remote: &str, deadline: Deadline) -> Result<Remote> {
    let (url, from_config) = remote_url_unchecked(project, remote, deadline)?;
    // git reads a URL that starts with `-` as an option (`--upload-pack=CMD` runs CMD).
    if url.starts_with('-') || url.chars().any(char::is_control) {
        return Err(Error::input(format!(
            "the remote {:?} names {:?}, which is not a URL; refused",
            redact(remote),
            redact(&url)
        )));
    }
    Ok(Remote { url, from_config })
}

/// The most of the project's git config read for a remote's URL.
const MAX_CONFIG: u64 = 1 << 20;

fn remote_url_unchecked(
    project: &Project,
    remote: &str,
    deadline: Deadline,
) -> Result<(String, bool)> {
    let is_name = !remote.is_empty()
        && remote
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if !is_name {
        return Ok((remote.to_string(), false));
    }
    let repository = Repository::locate(&project.dir)?;
    // A linked worktree keeps its config in the common directory.
    // Read as the config is: a FIFO or /dev/zero there is refused, not waited on or read on.
    let commondir = repository.git_dir.join("commondir");
    let common = match files::open_regular(&commondir) {
        Ok(file) => {
            let bytes = files::read_capped(file, 4096, "the commondir file", &commondir)?;
            repository
                .git_dir
                .join(String::from_utf8_lossy(&bytes).trim())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => repository.git_dir.clone(),
        Err(e) => return Err(Error::io("read", &commondir, &e)),
    };
    let config = common.join("config");
    // Opened here (a FIFO or a device in its place is refused, not waited on), handed to git
    // on stdin, and read as a plain file of settings: nothing in it is run or included.
    let file = files::open_regular(&config).map_err(|e| Error::io("read", &config, &e))?;
    let bytes = files::read_capped(file, MAX_CONFIG, "the repository's config", &config)?;
    let ran = run_git(
        None,
        &[
            "config",
            "--file",
            "-",
            "--no-includes",
            "--get",
            &format!("remote.{remote}.url"),
        ],
        Some(bytes),
        deadline,
        MAX_CONFIG as usize,
        None,
    );
    let url = match ran {
        Ok(ran) if ran.status.success() => String::from_utf8_lossy(&ran.stdout).trim().to_string(),
        Ok(_) => String::new(),
        Err(e) => return Err(e),
    };
    if url.is_empty() {
        return Err(Error::input(format!(
            "the repository has no remote {remote:?} ({}); name another with --remote NAME or URL",
            config.display()
        )));
    }
    Ok((url, true))
}

/// Whether git reaches `url` by running its other end on this machine (a path, or `file://`):
/// then that repository's hooks run as you when it is pushed to.
pub fn is_local(url: &str) -> bool {
    if url.starts_with("file:") {
        return true;
    }
    if url.contains("://") {
        return false;
    }
    // `host:path` is ssh; a `/` before the first `:` makes it a path.
    url.find(':').is_none_or(|colon| url[..colon].contains('/'))
}

/// What a sync did.
#[derive(Debug, Default)]
pub struct Synced {
    /// Each check that has notes now, with how many contents they are for.
    pub checks: Vec<(String, usize)>,
    /// What could not be taken, one line each (a remote ref that is no history of notes).
    pub skipped: Vec<String>,
    /// Whether the local notes were pushed.
    pub pushed: bool,
}

/// The most a sync fetches unless told otherwise: every file git writes for it (the pack) is
/// capped at this, so a remote cannot fill the disk.
pub const MAX_FETCH: u64 = 256 << 20;

/// `marker-writer sync`: fetches the remote's `refs/notes/vigil/*`, merges each into the local
/// notes (keeping every payload of both), writes them out for the gates, and with `push` pushes
/// the local notes back, merging and trying again when another writer pushed first. Every git
/// call shares `deadline`; a fetch writes no file over `max_fetch` bytes.
/// How a sync goes.
#[derive(Clone, Debug)]
pub struct SyncOptions {
    /// Push the local notes too.
    pub push: bool,
    /// The most a fetch may write (`--max-fetch`).
    pub max_fetch: u64,
    /// The checks taken first, whatever the cap (`--check`).
    pub checks: Vec<CheckName>,
}

pub fn sync(
    project: &Project,
    remote: &Remote,
    options: &SyncOptions,
    deadline: Deadline,
) -> Result<Synced> {
    let push = options.push;
    let url = remote.url.as_str();
    if push && remote.from_config && is_local(url) {
        // The agent writes `.git/config`: a path there to a repository of its own makes the
        // push run that repository's hooks (receive-pack does not take vigil's settings).
        return Err(Error::input(format!(
            "the remote's URL {:?} is a path on this machine, read from the project's config, which the agent can write; a push there would run that repository's hooks: give it with --remote PATH",
            redact(url)
        )));
    }
    let repo = ensure(project, deadline)?;
    let mut synced = Synced::default();
    let mut broken = fetch_and_merge(project, &repo, url, options, deadline, &mut synced.skipped)?;
    if push {
        for attempt in 0..PUSH_ATTEMPTS {
            delete_below_checks(&repo, url, &broken, deadline, &mut synced.skipped)?;
            // A remote ref that names no history of notes (a blob put there) would refuse
            // every push for good: it is replaced, only if it still names what was fetched.
            let replace: BTreeMap<&String, &str> = leased(&broken, false).into_iter().collect();
            let mut args = push_args(replace.iter().map(|(r, id)| (*r, *id)), url);
            if replace.is_empty() {
                args.push(format!("{REF_PREFIX}*:{REF_PREFIX}*"));
            } else {
                for reference in local_refs(&repo, deadline)? {
                    let force = if replace.contains_key(&reference) {
                        "+"
                    } else {
                        ""
                    };
                    args.push(format!("{force}{reference}:{reference}"));
                }
            }
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let ran = run_git(Some(&repo), &args, None, deadline, OUTPUT, None)?;
            if ran.status.success() {
                synced.pushed = true;
                break;
            }
            match rejection(&ran.stdout) {
                Some((reason, true)) if attempt + 1 < PUSH_ATTEMPTS => {
                    // A ref where the checks' directory is (`refs/notes/vigil` itself) also
                    // refuses the update, and no fetch of `refs/notes/vigil/*` sees it.
                    let parents = if reason.starts_with("[remote rejected]") {
                        refs_above_checks(&repo, url, deadline)?
                    } else {
                        BTreeMap::new()
                    };
                    // Another writer pushed first: take its notes in, and push the union.
                    std::thread::sleep(Duration::from_millis(20 << attempt));
                    broken = fetch_and_merge(
                        project,
                        &repo,
                        url,
                        options,
                        deadline,
                        &mut synced.skipped,
                    )?;
                    broken.extend(parents);
                }
                Some((reason, _)) => {
                    return Err(Error::Io(format!(
                        "`git push` was refused: {}",
                        redact(&reason)
                    )));
                }
                None => return Err(failed(&args, &ran)),
            }
        }
    }
    let _held = lock(project, deadline)?;
    for reference in local_refs(&repo, deadline)? {
        let Some(name) = reference.strip_prefix(REF_PREFIX) else {
            continue;
        };
        let Ok(check) = CheckName::parse(name) else {
            continue;
        };
        match materialize(project, &repo, &check, deadline) {
            Ok(written) => {
                if written.left_out > 0 {
                    synced.skipped.push(format!(
                        "the notes of {} older contents of `{check}` (only the newest {MAX_NOTES} are kept)",
                        written.left_out
                    ));
                }
                synced.checks.push((check.to_string(), written.contents))
            }
            Err(e) => synced.skipped.push(format!("{check}: {e}")),
        }
    }
    Ok(synced)
}

/// What `git push --porcelain` said of the first ref it did not push: git's reason, and
/// whether it is one a merge and another push mend (the remote moved on since the fetch:
/// `[rejected] (fetch first)` or `(non-fast-forward)`; or it moved while the push was being
/// received: `[remote rejected] (cannot lock ref …)`, `(failed to update ref)`).
fn rejection(porcelain: &[u8]) -> Option<(String, bool)> {
    let text = String::from_utf8_lossy(porcelain);
    let line = text.lines().find(|l| l.starts_with('!'))?;
    let reason = line.split('\t').nth(2).unwrap_or(line).trim().to_string();
    let race = reason.starts_with("[rejected]")
        || (reason.starts_with("[remote rejected]")
            && [
                "cannot lock ref",
                "failed to update ref",
                "incorrect old value",
            ]
            .iter()
            .any(|said| reason.contains(said)));
    Some((reason, race))
}

/// Deletes, on the remote, the refs below a check's name that `broken` holds (each only while
/// it names what was fetched), in a push of its own before the check's: git cannot make a
/// ref where a directory of refs still is. What it could not do is said.
fn delete_below_checks(
    repo: &Path,
    url: &str,
    broken: &BTreeMap<String, Repair>,
    deadline: Deadline,
    skipped: &mut Vec<String>,
) -> Result<()> {
    let delete = leased(broken, true);
    if delete.is_empty() {
        return Ok(());
    }
    let mut args = push_args(delete.iter().copied(), url);
    args.extend(delete.iter().map(|(reference, _)| format!(":{reference}")));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let ran = run_git(Some(repo), &args, None, deadline, OUTPUT, None)?;
    if !ran.status.success() {
        let why = rejection(&ran.stdout).map_or_else(|| ran.first.clone(), |(reason, _)| reason);
        skipped.push(format!(
            "deleting what is below a check's name: {}",
            redact(&why)
        ));
    }
    Ok(())
}

/// The refs of `broken` to delete (`delete`) or to push over, each with the id it must still
/// name on the remote.
fn leased(broken: &BTreeMap<String, Repair>, delete: bool) -> Vec<(&String, &str)> {
    broken
        .iter()
        .filter(|(_, repair)| matches!(repair, Repair::Delete(_)) == delete)
        .map(|(reference, repair)| (reference, repair.id()))
        .collect()
}

/// `git push --porcelain` to `url`, with a `--force-with-lease` for each (ref, id): the
/// refspecs are the caller's to add.
fn push_args<'a>(leases: impl Iterator<Item = (&'a String, &'a str)>, url: &str) -> Vec<String> {
    let mut args: Vec<String> = vec!["push".into(), "--porcelain".into()];
    args.extend(leases.map(|(reference, id)| format!("--force-with-lease={reference}:{id}")));
    args.extend(["--end-of-options".into(), url.to_string()]);
    args
}

/// The remote's refs named exactly `refs/notes` or `refs/notes/vigil`, where the checks' refs
/// would go: each to be deleted (only while it names what was seen here).
fn refs_above_checks(
    repo: &Path,
    url: &str,
    deadline: Deadline,
) -> Result<BTreeMap<String, Repair>> {
    let listed = git(
        repo,
        &[
            "ls-remote",
            "--refs",
            "--end-of-options",
            url,
            "refs/notes",
            "refs/notes/vigil",
        ],
        None,
        deadline,
    )?;
    let above = ["refs/notes", REF_PREFIX.trim_end_matches('/')];
    Ok(listed
        .lines()
        .filter_map(|line| line.split_once('\t'))
        .filter(|(_, reference)| above.contains(reference))
        .map(|(id, reference)| (reference.to_string(), Repair::Delete(id.to_string())))
        .collect())
}

fn local_refs(repo: &Path, deadline: Deadline) -> Result<Vec<String>> {
    let listed = git(
        repo,
        &["for-each-ref", "--format=%(refname)", REF_PREFIX],
        None,
        deadline,
    )?;
    Ok(listed.lines().map(str::to_string).collect())
}

/// Fetches the remote's notes refs and merges each into the local one; a remote ref that is not
/// a history of notes is skipped (the local notes stay as they were) and said. The fetch may
/// write no file over `max_fetch`; the merge is made under the lock. Returns those remote refs
/// that are no history of notes, with the object each names.
fn fetch_and_merge(
    project: &Project,
    repo: &Path,
    url: &str,
    options: &SyncOptions,
    deadline: Deadline,
    skipped: &mut Vec<String>,
) -> Result<BTreeMap<String, Repair>> {
    let (max_fetch, prefer) = (options.max_fetch, &options.checks);
    let _held = lock(project, deadline)?;
    let spec = format!("+{REF_PREFIX}*:{FETCHED_PREFIX}*");
    let args = [
        "fetch",
        "--quiet",
        "--prune",
        "--no-tags",
        "--no-write-fetch-head",
        "--no-recurse-submodules",
        "--end-of-options",
        url,
        &spec,
    ];
    let ran = run_git(Some(repo), &args, None, deadline, OUTPUT, Some(max_fetch))?;
    if !ran.status.success() {
        // A pack cut at the limit (index-pack got SIGXFSZ, fetch says its output was invalid).
        let cut = remove_partial_packs(repo, max_fetch);
        if cut || ran.status == Outcome::Signaled(process::FILE_SIZE_SIGNAL) {
            return Err(Error::Io(format!(
                "the remote's notes are over {} MiB (--max-fetch); nothing of them was kept",
                max_fetch >> 20
            )));
        }
        return Err(failed(&args, &ran));
    }
    let fetched = git(
        repo,
        &[
            "for-each-ref",
            "--format=%(refname) %(objecttype) %(objectname)",
            FETCHED_PREFIX,
        ],
        None,
        deadline,
    )?;
    let mut broken = BTreeMap::new();
    let had: std::collections::BTreeSet<String> = local_refs(repo, deadline)?.into_iter().collect();
    let mut checks: Vec<(CheckName, String, String)> = Vec::new();
    for line in fetched.lines() {
        let mut fields = line.split(' ');
        let (Some(reference), Some(kind), Some(id)) = (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let name = reference.strip_prefix(FETCHED_PREFIX).unwrap_or(reference);
        let Ok(check) = CheckName::parse(name) else {
            // A ref below a check's name (`tests/x`) would refuse every push of that check
            // (a ref cannot be both a file and a directory): it goes, as a blob there does.
            if let Some((head, _)) = name.split_once('/')
                && CheckName::parse(head).is_ok()
            {
                skipped.push(format!(
                    "{REF_PREFIX}{name} on the remote is below the check `{head}`; a push takes it away"
                ));
                broken.insert(
                    format!("{REF_PREFIX}{name}"),
                    Repair::Delete(id.to_string()),
                );
            } else {
                skipped.push(format!("{reference}: not a check name"));
            }
            continue;
        };
        if kind != "commit" {
            skipped.push(format!(
                "{REF_PREFIX}{check} on the remote names a {kind}, not a history of notes; the local notes stay as they were"
            ));
            broken.insert(notes_ref(&check), Repair::Replace(id.to_string()));
            continue;
        }
        checks.push((check, reference.to_string(), id.to_string()));
    }
    // The checks named (`sync --check`), then those this machine had, then the others by
    // name, up to MAX_CHECKS in all: which checks a sync takes is not the remote's choice.
    let rank = |check: &CheckName| {
        if prefer.contains(check) {
            0
        } else if had.contains(&notes_ref(check)) {
            1
        } else {
            2
        }
    };
    checks.sort_by_key(|(check, _, _)| rank(check));
    let must = checks
        .iter()
        .filter(|(check, _, _)| rank(check) < 2)
        .count();
    let named_new = checks
        .iter()
        .filter(|(check, _, _)| rank(check) == 0 && !had.contains(&notes_ref(check)))
        .count();
    let room = must + MAX_CHECKS.saturating_sub(had.len() + named_new);
    if checks.len() > room {
        let left: Vec<String> = checks[room..]
            .iter()
            .map(|(c, _, _)| c.to_string())
            .collect();
        skipped.push(format!(
            "the notes of {} more checks on the remote ({}), over the {MAX_CHECKS} a sync takes; `sync --check NAME` takes one",
            left.len(),
            left.join(", ")
        ));
        checks.truncate(room);
    }
    for (check, reference, id) in checks {
        if let Err(e) = merge(repo, &check, &reference, deadline) {
            // Notes on the remote that cannot be read (over the limits) would refuse every
            // push of this check for good (it would not fast-forward): a push replaces them.
            if matches!(read_notes(repo, &reference, deadline), Err(Error::Input(_))) {
                broken.insert(notes_ref(&check), Repair::Replace(id));
                skipped.push(format!("{check}: {e}; a push replaces the remote's"));
            } else {
                skipped.push(format!("{check}: {e}"));
            }
        }
    }
    Ok(broken)
}

/// What a push does to a remote ref that would refuse it for good, only while the ref still
/// names the object fetched (`--force-with-lease`).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Repair {
    /// A check's ref naming no history of notes: pushed over.
    Replace(String),
    /// A ref below a check's name: deleted.
    Delete(String),
}

impl Repair {
    fn id(&self) -> &str {
        match self {
            Repair::Replace(id) | Repair::Delete(id) => id,
        }
    }
}

/// Where a merge is made before it becomes the local notes: under `refs/notes/` (as `git
/// notes --ref` wants) but outside what is pushed and written out.
const MERGING_PREFIX: &str = "refs/notes/vigil-merging/";

/// Merges the fetched notes `theirs` into the local notes of `check`, as a union: every line of
/// every note either side holds is kept. git's merge (cat_sort_uniq) joins notes both sides
/// changed, but takes a note one side deleted or cut, or a fast-forward to a history that
/// dropped lines, as it comes; whatever line it dropped is put back. The merge is made on a
/// ref of its own and becomes the local notes only whole (and only if they did not move
/// meanwhile): a merge cut off at the deadline leaves them as they were.
fn merge(repo: &Path, check: &CheckName, theirs: &str, deadline: Deadline) -> Result<()> {
    let local = notes_ref(check);
    let before = git(
        repo,
        &[
            "rev-parse",
            "--verify",
            "-q",
            &format!("{local}^{{commit}}"),
        ],
        None,
        deadline,
    )
    .ok()
    .map(|id| id.trim().to_string());
    if let Some(before) = &before
        && git(
            repo,
            &["merge-base", "--is-ancestor", theirs, before],
            None,
            deadline,
        )
        .is_ok()
    {
        return Ok(());
    }
    let work = format!("{MERGING_PREFIX}{check}");
    let merged =
        merge_into(repo, &work, &local, before.as_deref(), theirs, deadline).and_then(|()| {
            let old = before.as_deref().unwrap_or("");
            git(repo, &["update-ref", &local, &work, old], None, deadline).map(drop)
        });
    let _ = git(repo, &["update-ref", "-d", &work], None, deadline);
    merged
}

/// `merge`'s work on the ref `work`: starts from the local notes `local` (at `before`, if
/// there are any), merges `theirs`, and puts back what the merge dropped. Under the lock, so
/// `local` stays at `before`.
fn merge_into(
    repo: &Path,
    work: &str,
    local: &str,
    before: Option<&str>,
    theirs: &str,
    deadline: Deadline,
) -> Result<()> {
    let ours = match before {
        Some(_) => read_notes(repo, local, deadline)?.0,
        None => Vec::new(),
    };
    let fetched = read_notes(repo, theirs, deadline)?.0;
    match before {
        Some(before) => {
            git(repo, &["update-ref", work, before], None, deadline)?;
            git(
                repo,
                &[
                    "notes",
                    "--ref",
                    work,
                    "merge",
                    "-q",
                    "-s",
                    "cat_sort_uniq",
                    theirs,
                ],
                None,
                deadline,
            )?;
        }
        None => {
            git(repo, &["update-ref", work, theirs], None, deadline)?;
        }
    }
    let merged: BTreeMap<String, Note> = read_notes(repo, work, deadline)?.0.into_iter().collect();
    let mut wanted: BTreeMap<&str, std::collections::BTreeSet<&[u8]>> = BTreeMap::new();
    for (object, note) in ours.iter().chain(&fetched) {
        if let Note::Text(bytes) = note {
            wanted.entry(object).or_default().extend(lines(bytes));
        }
    }
    let mut put_back: Vec<(&str, Vec<u8>)> = Vec::new();
    let ours_lines: BTreeMap<&str, &[u8]> = ours
        .iter()
        .filter_map(|(object, note)| match note {
            Note::Text(bytes) => Some((object.as_str(), bytes.as_slice())),
            Note::Unreadable(_) => None,
        })
        .collect();
    for (object, mut want) in wanted {
        let has: std::collections::BTreeSet<&[u8]> = match merged.get(object) {
            Some(Note::Text(bytes)) => lines(bytes).collect(),
            // Too large (a push of junk over CI's note) or no blob: what either side could
            // read takes its place, else CI's payload would be lost with the junk, for good.
            Some(Note::Unreadable(_)) => {
                let joined: u64 = want.iter().map(|l| l.len() as u64 + 1).sum();
                if joined > MAX_NOTE {
                    want = ours_lines
                        .get(object)
                        .map(|bytes| lines(bytes).collect())
                        .unwrap_or_default();
                }
                Default::default()
            }
            None => Default::default(),
        };
        if want.is_empty() || want.is_subset(&has) {
            continue;
        }
        want.extend(has);
        let mut text = Vec::new();
        for line in want {
            text.extend_from_slice(line);
            text.push(b'\n');
        }
        put_back.push((object, text));
    }
    restore(repo, work, &put_back, deadline)
}

/// Writes each (object, note) of `notes` into the notes at `work`, as one commit on top of it,
/// with one `git fast-import` however many there are (a remote that dropped 4096 notes costs
/// one process, not 4096). A note replaces the one at the path it is at, else goes at the top.
fn restore(repo: &Path, work: &str, notes: &[(&str, Vec<u8>)], deadline: Deadline) -> Result<()> {
    if notes.is_empty() {
        return Ok(());
    }
    let listed = git_bytes(
        repo,
        &["ls-tree", "-r", "-z", "--name-only", work],
        None,
        deadline,
        OUTPUT,
    )?;
    // Every path that names the object once its `/`s are taken out: git's own fanout, and any
    // decoy beside it (`8e4/d2…` reads as no note, and a note written there would be lost).
    let mut paths: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for path in listed.split(|b| *b == 0).filter(|p| !p.is_empty()) {
        let path = String::from_utf8_lossy(path);
        if let Some(object) = object_of_note_path(&path) {
            paths.entry(object).or_default().push(path.into_owned());
        }
    }
    let base = git(repo, &["rev-parse", "--verify", work], None, deadline)?;
    let host = ident_host();
    let message = "vigil: put back the notes a merge dropped\n";
    let mut stream = format!(
        "commit {work}\ncommitter marker-writer <marker-writer@{host}> now\ndata {}\n{message}from {}\n",
        message.len(),
        base.trim()
    )
    .into_bytes();
    for (object, text) in notes {
        for path in paths.get(*object).into_iter().flatten() {
            stream.extend_from_slice(format!("D {path}\n").as_bytes());
        }
        // At the top, where git notes reads a note whatever the fanout of the others.
        stream.extend_from_slice(
            format!("M 100644 inline {object}\ndata {}\n", text.len()).as_bytes(),
        );
        stream.extend_from_slice(text);
        stream.push(b'\n');
    }
    stream.extend_from_slice(b"done\n");
    git(
        repo,
        &["fast-import", "--quiet", "--done", "--date-format=now"],
        Some(stream),
        deadline,
    )
    .map(drop)
}

/// The lines of a note that say something.
fn lines(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    bytes
        .split(|b| *b == b'\n')
        .map(|l| l.trim_ascii())
        .filter(|l| !l.is_empty())
}

/// Removes what a fetch cut off left in the object store (`tmp_pack_*`, `tmp_idx_*`,
/// `tmp_obj_*`): nothing of a refused fetch stays on the disk. Whether one of them had reached
/// `limit` (the fetch was cut there).
fn remove_partial_packs(repo: &Path, limit: u64) -> bool {
    let mut cut = false;
    let objects = repo.join("objects");
    let mut dirs = vec![objects.join("pack"), objects.clone()];
    if let Ok(entries) = std::fs::read_dir(&objects) {
        dirs.extend(entries.flatten().map(|e| e.path()).filter(|p| p.is_dir()));
    }
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().starts_with("tmp_") {
                cut |= entry.metadata().is_ok_and(|m| m.len() >= limit);
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
    cut
}
