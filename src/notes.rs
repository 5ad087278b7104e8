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
use crate::marker::{CheckName, Denial, Payload};
use crate::state::Project;
use crate::time::Deadline;

/// Where vigil's notes refs live, locally and on a remote.
pub const REF_PREFIX: &str = "refs/notes/vigil/";
/// Where a sync fetches a remote's notes refs to, before merging them into the local ones.
const FETCHED_PREFIX: &str = "refs/vigil-fetched/";
/// The largest note read: the payloads published for one content.
pub const MAX_NOTE: u64 = 1 << 20;
/// The most notes of one check written out; beyond, the oldest-keyed are left out (and said).
const MAX_NOTES: usize = 4096;
/// How often a push that lost a race is merged and tried again.
const PUSH_ATTEMPTS: usize = 5;
/// A cache line vigil wrote itself, for a note it could not take (too large, unreadable).
const ERROR_LINE: &str = "!";
/// The file that says a check's notes could not be read at all, and why.
const BROKEN: &str = "broken";

/// The bare repository the notes are kept in.
pub fn repository(project: &Project) -> PathBuf {
    project.protected().dir.join("notes.git")
}

/// The directory the notes of a check are written out to, for the gates.
pub fn cache_dir(project: &Project, check: &CheckName) -> PathBuf {
    project.protected().dir.join("notes").join(check.as_str())
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

/// `git`, from the system's places, with an environment the caller cannot steer: no `GIT_*`
/// variable (a git hook runs marker-writer with `GIT_DIR` set; a project's settings could set
/// `GIT_SSH_COMMAND` or `GIT_CONFIG_GLOBAL`), the system PATH, and HOME the user's own from the
/// password database (the user's ~/.gitconfig, with its credential helpers, not one a
/// settings file points at).
fn git_command() -> Command {
    let git = SYSTEM_PATH
        .split(':')
        .map(|dir| Path::new(dir).join("git"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("/usr/bin/git"));
    let mut cmd = Command::new(git);
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if name.starts_with("GIT_") || name == "XDG_CONFIG_HOME" {
            cmd.env_remove(name.as_ref());
        }
    }
    cmd.env("PATH", SYSTEM_PATH);
    if let Some(home) = passwd_home() {
        cmd.env("HOME", home);
    }
    cmd
}

/// The user's home directory as the password database has it.
fn passwd_home() -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let mut buffer = vec![0 as libc::c_char; 16 * 1024];
    let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: getpwuid_r writes only into `entry` and `buffer`, whose sizes it is given, and
    // sets `found` to `&entry` or null.
    let status = unsafe {
        libc::getpwuid_r(
            libc::getuid(),
            &mut entry,
            buffer.as_mut_ptr(),
            buffer.len(),
            &mut found,
        )
    };
    if status != 0 || found.is_null() || entry.pw_dir.is_null() {
        return None;
    }
    // SAFETY: pw_dir points into `buffer`, NUL-terminated by getpwuid_r.
    let dir = unsafe { std::ffi::CStr::from_ptr(entry.pw_dir) };
    Some(PathBuf::from(std::ffi::OsStr::from_bytes(dir.to_bytes())))
}

/// Runs git in the notes repository within `deadline`: hooks off, no prompts, only the
/// transports vigil needs (no `ext::`, whose URL is a command).
fn git(repo: &Path, args: &[&str], input: Option<Vec<u8>>, deadline: Deadline) -> Result<String> {
    let mut cmd = git_command();
    cmd.arg("--git-dir").arg(repo);
    for setting in [
        "core.hooksPath=/dev/null",
        "gc.auto=0",
        "maintenance.auto=false",
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
    let host = crate::marker::writer().host;
    cmd.env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_AUTHOR_NAME", "marker-writer")
        .env("GIT_AUTHOR_EMAIL", format!("marker-writer@{host}"))
        .env("GIT_COMMITTER_NAME", "marker-writer")
        .env("GIT_COMMITTER_EMAIL", format!("marker-writer@{host}"));
    // The subcommand is what a line needs; the rest (URLs, refspecs) is said around it.
    let shown = format!("git {}", args.first().unwrap_or(&""));
    if deadline.passed() {
        return Err(Error::Io(format!(
            "`{shown}` was not started: the deadline has passed"
        )));
    }
    let left = deadline.remaining();
    let done = crate::process::run_with_input(cmd, input, left, false, 64 << 20)
        .map_err(|e| Error::Io(format!("cannot run `{shown}`: {e}")))?;
    match done.outcome {
        crate::process::Outcome::Exited(0) => {
            Ok(String::from_utf8_lossy(&done.output).into_owned())
        }
        crate::process::Outcome::TimedOut => Err(Error::Io(format!(
            "`{shown}` was cut off at the deadline ({}s)",
            left.as_secs_f64().ceil()
        ))),
        other => {
            let stderr = String::from_utf8_lossy(&done.errors);
            let first = stderr
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .unwrap_or("no message");
            Err(Error::Io(format!(
                "`{shown}` failed (exit {}): {first}",
                other.code()
            )))
        }
    }
}

/// The notes repository, made when missing.
fn ensure(project: &Project, deadline: Deadline) -> Result<PathBuf> {
    let repo = repository(project);
    if !repo.join("HEAD").is_file() {
        std::fs::create_dir_all(&repo).map_err(|e| Error::io("create", &repo, &e))?;
        git(&repo, &["init", "--bare", "-q"], None, deadline)?;
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
    let mut last = None;
    // Two writers at once: the second finds the ref locked, and tries again.
    for attempt in 0..5 {
        match git(
            &repo,
            &["notes", "--ref", &reference, "append", "-m", &line, object],
            None,
            deadline,
        ) {
            Ok(_) => {
                last = None;
                break;
            }
            Err(e) => {
                last = Some(e);
                std::thread::sleep(Duration::from_millis(50 << attempt));
            }
        }
    }
    if let Some(e) = last {
        return Err(e);
    }
    materialize(project, &repo, &check, deadline)?;
    Ok(())
}

/// Writes the notes of `check` out as `<key>.jsonl` files (replacing what was there), or,
/// when they cannot be read, the reason in `broken`. Returns how many were written.
fn materialize(
    project: &Project,
    repo: &Path,
    check: &CheckName,
    deadline: Deadline,
) -> Result<usize> {
    let dir = cache_dir(project, check);
    std::fs::create_dir_all(&dir).map_err(|e| Error::io("create", &dir, &e))?;
    let broken = dir.join(BROKEN);
    let written = notes_of(repo, check, deadline).and_then(|notes| {
        let mut keep = std::collections::HashSet::new();
        for (object, text) in &notes {
            let key = crate::subject::key(&format!("git-tree:{object}"));
            let path = dir.join(format!("{key}.jsonl"));
            crate::atomic::write_atomic(&path, text.as_bytes(), 0o600)
                .map_err(|e| Error::io("write", &path, &e))?;
            keep.insert(format!("{key}.jsonl"));
        }
        for entry in std::fs::read_dir(&dir).map_err(|e| Error::io("read", &dir, &e))? {
            let entry = entry.map_err(|e| Error::io("read", &dir, &e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(".jsonl") && !keep.contains(&name) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
        Ok(notes.len())
    });
    match written {
        Ok(count) => {
            let _ = std::fs::remove_file(&broken);
            Ok(count)
        }
        Err(e) => {
            let _ = crate::atomic::write_atomic(&broken, e.to_string().as_bytes(), 0o600);
            Err(e)
        }
    }
}

/// The notes of a check: (annotated object id, note text), the text of a note git could not
/// give (too large) replaced by a line saying so.
fn notes_of(repo: &Path, check: &CheckName, deadline: Deadline) -> Result<Vec<(String, String)>> {
    let reference = notes_ref(check);
    let kind = git(repo, &["cat-file", "-t", &reference], None, deadline)?;
    if kind.trim() != "commit" {
        return Err(Error::input(format!(
            "{reference} names a {}, not a history of notes",
            kind.trim()
        )));
    }
    let listed = git(
        repo,
        &["notes", "--ref", &reference, "list"],
        None,
        deadline,
    )?;
    let mut pairs: Vec<(String, String)> = listed
        .lines()
        .filter_map(|l| {
            let (blob, object) = l.split_once(' ')?;
            Some((blob.to_string(), object.trim().to_string()))
        })
        .collect();
    if pairs.len() > MAX_NOTES {
        pairs.truncate(MAX_NOTES);
    }
    if pairs.is_empty() {
        return Ok(Vec::new());
    }
    let request: String = pairs.iter().map(|(blob, _)| format!("{blob}\n")).collect();
    let sizes = git(
        repo,
        &["cat-file", "--batch-check"],
        Some(request.into_bytes()),
        deadline,
    )?;
    let mut small = String::new();
    let mut texts: BTreeMap<String, String> = BTreeMap::new();
    for (line, (blob, _)) in sizes.lines().zip(&pairs) {
        let mut fields = line.split(' ');
        let (_, kind, size) = (fields.next(), fields.next(), fields.next());
        let size: u64 = size.and_then(|s| s.parse().ok()).unwrap_or(u64::MAX);
        if kind != Some("blob") {
            texts.insert(
                blob.clone(),
                format!("{ERROR_LINE}the note is not a blob\n"),
            );
        } else if size > MAX_NOTE {
            texts.insert(
                blob.clone(),
                format!("{ERROR_LINE}the note is {size} bytes, over the {MAX_NOTE} limit\n"),
            );
        } else {
            small.push_str(blob);
            small.push('\n');
        }
    }
    if !small.is_empty() {
        let contents = git(
            repo,
            &["cat-file", "--batch"],
            Some(small.into_bytes()),
            deadline,
        )?;
        let mut rest = contents.as_str();
        while let Some((header, after)) = rest.split_once('\n') {
            let mut fields = header.split(' ');
            let blob = fields.next().unwrap_or("").to_string();
            let size: usize = fields.nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
            let body = after.get(..size).unwrap_or("");
            texts.insert(blob, body.to_string());
            rest = after.get(size + 1..).unwrap_or("");
        }
    }
    Ok(pairs
        .into_iter()
        .map(|(blob, object)| {
            let text = texts
                .remove(&blob)
                .unwrap_or_else(|| format!("{ERROR_LINE}the note could not be read\n"));
            (object, text)
        })
        .collect())
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
    let path = dir.join(format!("{}.jsonl", crate::subject::key(subject_id)));
    let bytes = match crate::input::open_state(&path) {
        Ok(file) => match crate::input::read_capped(file, MAX_NOTE + 4096, "the note", &path) {
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

/// Where a sync goes: a remote of the project's repository by name, or a URL.
pub fn remote_url(project: &Project, remote: &str) -> Result<String> {
    let url = remote_url_unchecked(project, remote)?;
    // git reads a URL that starts with `-` as an option (`--upload-pack=CMD` runs CMD).
    if url.starts_with('-') || url.chars().any(char::is_control) {
        return Err(Error::input(format!(
            "the remote {remote:?} names {url:?}, which is not a URL; refused"
        )));
    }
    Ok(url)
}

fn remote_url_unchecked(project: &Project, remote: &str) -> Result<String> {
    let is_name = !remote.is_empty()
        && remote
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if !is_name {
        return Ok(remote.to_string());
    }
    let repository = crate::subject::worktree::Repository::locate(&project.dir)?;
    // A linked worktree keeps its config in the common directory.
    let common = std::fs::read_to_string(repository.git_dir.join("commondir"))
        .map(|c| repository.git_dir.join(c.trim()))
        .unwrap_or_else(|_| repository.git_dir.clone());
    let config = common.join("config");
    // Read as a plain file of settings: nothing in it is run or included.
    let mut cmd = git_command();
    cmd.arg("config")
        .arg("--file")
        .arg(&config)
        .arg("--no-includes")
        .arg("--get")
        .arg(format!("remote.{remote}.url"));
    cmd.env_remove("GIT_DIR")
        .env_remove("GIT_CONFIG_PARAMETERS");
    let out = cmd
        .output()
        .map_err(|e| Error::Io(format!("cannot run git config: {e}")))?;
    let url = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if url.is_empty() {
        return Err(Error::input(format!(
            "the repository has no remote {remote:?} ({}); name another with --remote NAME or URL",
            config.display()
        )));
    }
    Ok(url)
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

/// `marker-writer sync`: fetches the remote's `refs/notes/vigil/*`, merges each into the local
/// notes (keeping every payload of both), writes them out for the gates, and with `push` pushes
/// the local notes back, merging and trying again when another writer pushed first. Every git
/// call shares `deadline`.
pub fn sync(project: &Project, url: &str, push: bool, deadline: Deadline) -> Result<Synced> {
    let repo = ensure(project, deadline)?;
    let mut synced = Synced::default();
    fetch_and_merge(&repo, url, deadline, &mut synced.skipped)?;
    if push {
        for attempt in 0..PUSH_ATTEMPTS {
            let spec = format!("{REF_PREFIX}*:{REF_PREFIX}*");
            match git(
                &repo,
                &["push", "--porcelain", "--end-of-options", url, &spec],
                None,
                deadline,
            ) {
                Ok(_) => {
                    synced.pushed = true;
                    break;
                }
                Err(e) if attempt + 1 < PUSH_ATTEMPTS && lost_a_race(&e) => {
                    fetch_and_merge(&repo, url, deadline, &mut synced.skipped)?;
                }
                Err(e) => return Err(e),
            }
        }
    }
    for reference in local_refs(&repo, deadline)? {
        let Some(name) = reference.strip_prefix(REF_PREFIX) else {
            continue;
        };
        let Ok(check) = CheckName::parse(name) else {
            continue;
        };
        match materialize(project, &repo, &check, deadline) {
            Ok(count) => synced.checks.push((check.to_string(), count)),
            Err(e) => synced.skipped.push(format!("{check}: {e}")),
        }
    }
    Ok(synced)
}

fn lost_a_race(e: &Error) -> bool {
    let text = e.to_string();
    text.contains("rejected") || text.contains("fetch first") || text.contains("non-fast-forward")
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
/// a history of notes is skipped (the local notes stay as they were) and said.
fn fetch_and_merge(
    repo: &Path,
    url: &str,
    deadline: Deadline,
    skipped: &mut Vec<String>,
) -> Result<()> {
    let spec = format!("+{REF_PREFIX}*:{FETCHED_PREFIX}*");
    git(
        repo,
        &[
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            "--no-recurse-submodules",
            "--end-of-options",
            url,
            &spec,
        ],
        None,
        deadline,
    )?;
    let fetched = git(
        repo,
        &[
            "for-each-ref",
            "--format=%(refname) %(objecttype)",
            FETCHED_PREFIX,
        ],
        None,
        deadline,
    )?;
    for line in fetched.lines() {
        let Some((reference, kind)) = line.split_once(' ') else {
            continue;
        };
        let name = reference.strip_prefix(FETCHED_PREFIX).unwrap_or(reference);
        let Ok(check) = CheckName::parse(name) else {
            skipped.push(format!("{reference}: not a check name"));
            continue;
        };
        if kind != "commit" {
            skipped.push(format!(
                "{REF_PREFIX}{check} on the remote names a {kind}, not a history of notes; the local notes stay as they were"
            ));
            continue;
        }
        let local = notes_ref(&check);
        let has_local = git(
            repo,
            &["rev-parse", "--verify", "-q", &local],
            None,
            deadline,
        )
        .is_ok();
        let merged = if has_local {
            git(
                repo,
                &[
                    "notes",
                    "--ref",
                    &local,
                    "merge",
                    "-q",
                    "-s",
                    "cat_sort_uniq",
                    reference,
                ],
                None,
                deadline,
            )
        } else {
            git(repo, &["update-ref", &local, reference], None, deadline)
        };
        if let Err(e) = merged {
            skipped.push(format!("{check}: {e}"));
        }
    }
    Ok(())
}
